//! A process-level crash test: a child appends with `SyncData` and reports each acknowledged
//! position; the parent kills it with SIGKILL at random moments, reopens the store, and checks that
//! every acknowledged position is there, the chain verifies and `verify` passes.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::time::{Duration, Instant};

use mnemo::records::Position;
use mnemo::{Config, Mnemo};
use mnemo_acceptance::children::crash_writer_killed;
use mnemo_acceptance::sim::{Rng, seed_from_env};

const KILLS: u64 = 20;

#[test]
fn acknowledged_appends_survive_sigkill() {
    let seed = seed_from_env();
    eprintln!("crash test seed: MNEMO_SEED={seed}");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut acknowledged: Vec<u64> = Vec::new();

    for round in 0..KILLS {
        // Once the child acknowledged something, let it run a random while longer.
        let run_for = Duration::from_millis(20 + rng.below(300));
        let binary = env!("CARGO_BIN_EXE_crash-writer");
        let killed = crash_writer_killed(binary, dir.path(), seed.wrapping_add(round), run_for);
        let round_acks = killed.acknowledged.len();
        acknowledged.extend(killed.acknowledged);

        let reopened = Instant::now();
        let mnemo = Mnemo::open(dir.path(), Config::default())
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        let head = mnemo.log().head();
        for position in &acknowledged {
            assert!(
                mnemo.log().read(Position(*position)).unwrap().is_some(),
                "round {round}: acknowledged position {position} is missing (head {head}, seed {seed})"
            );
        }
        drop(mnemo);
        eprintln!(
            "round {round}: {round_acks} acknowledged (the first {:.2} s after the writer started); \
             reopened, checked and closed in {:.2} s",
            killed.first_ack.as_secs_f64(),
            reopened.elapsed().as_secs_f64()
        );
    }

    let verified = Instant::now();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    let verification = mnemo.verify(&mut |_| {}).unwrap();
    assert!(verification.envelopes >= acknowledged.len() as u64);
    assert!(verification.ok(), "verify after {KILLS} kills: {verification:?} (seed {seed})");
    eprintln!(
        "{} acknowledged appends over {KILLS} kills, {} envelopes verified (chain and every stage \
         rebuilt) in {:.2} s",
        acknowledged.len(),
        verification.envelopes,
        verified.elapsed().as_secs_f64()
    );
}
