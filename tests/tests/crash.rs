//! A process-level crash test: a child appends with `SyncData` and reports each acknowledged
//! position; the parent kills it with SIGKILL at random moments, reopens the store, and checks that
//! every acknowledged position is there, the chain verifies and `verify` passes.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mnemo::records::Position;
use mnemo::{Config, Mnemo};
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
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-writer"))
            .arg(dir.path())
            .arg((seed.wrapping_add(round)).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines, received) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait for the child to acknowledge something, then let it run a random while longer.
        let first = received
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("round {round}: the writer acknowledged nothing"));
        let mut round_acks = vec![first];
        let deadline = Instant::now() + Duration::from_millis(20 + rng.below(300));
        while Instant::now() < deadline {
            if let Ok(line) = received.recv_timeout(Duration::from_millis(5)) {
                round_acks.push(line);
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        // Lines read after the kill were acknowledged before it, too.
        round_acks.extend(received.try_iter());
        acknowledged
            .extend(round_acks.iter().map(|l| l.parse::<u64>().unwrap_or_else(|_| panic!("bad line {l:?}"))));

        let mnemo = Mnemo::open(dir.path(), Config::default())
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        let head = mnemo.log().head();
        for position in &acknowledged {
            assert!(
                mnemo.log().read(Position(*position)).unwrap().is_some(),
                "round {round}: acknowledged position {position} is missing (head {head}, seed {seed})"
            );
        }
    }

    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    let verification = mnemo.verify(&mut |_| {}).unwrap();
    assert!(verification.envelopes >= acknowledged.len() as u64);
    assert!(verification.ok(), "verify after {KILLS} kills: {verification:?} (seed {seed})");
    eprintln!(
        "{} acknowledged appends over {KILLS} kills, {} envelopes verified",
        acknowledged.len(),
        verification.envelopes
    );
}
