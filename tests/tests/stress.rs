//! Concurrency and load: 256 sessions at once, each a task on a multi-threaded runtime, appending
//! turns, compacting, searching, reading, extracting and recalling through the facade for a bounded
//! time. Afterwards every acknowledged event is in the log where its append said, the chain and every
//! stage verify against a rebuild, and the process's resident memory stayed under a bound.
//!
//! `MNEMO_STRESS_SECS` sets the run time (default 30 s; `just soak` runs 600 s),
//! `MNEMO_STRESS_SESSIONS` the session count (default 256), `MNEMO_SEED` the seed.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo::compaction::{CompactOptions, ContextOptions};
use mnemo::history::{HistoryContext, HistorySearchRequest};
use mnemo::log::{Durability, ExpectedRevision};
use mnemo::memory::RecallMemory;
use mnemo::records::{Position, Record, SessionId, StreamId};
use mnemo::{Config, ErrorCategory, Mnemo};
use mnemo_acceptance::sim::{Rng, event_records, seed_from_env};
use mnemo_core::{MemoryMode, SessionOpened, WorkspaceId};

const SECS_DEFAULT: u64 = 30;
const SESSIONS_DEFAULT: u64 = 256;
/// Resident memory the process may reach: the block cache, memtables and queues are bounded, so a
/// leak shows as growth past this.
const RESIDENT_BYTES_MAX: u64 = 1536 * 1024 * 1024;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// The process's resident set, from `/proc/self/status`.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[derive(Default)]
struct Counts {
    appends: AtomicU64,
    compactions: AtomicU64,
    searches: AtomicU64,
    extractions: AtomicU64,
    recalls: AtomicU64,
    contexts: AtomicU64,
    refusals: AtomicU64,
}

/// What one session acknowledged: (first position, last position) of each append.
type Acks = Arc<Mutex<Vec<(SessionId, u64, u64)>>>;

async fn session_task(
    mnemo: Arc<Mnemo>,
    index: u64,
    seed: u64,
    deadline: Instant,
    counts: Arc<Counts>,
    acks: Acks,
) {
    let name = format!("stress-{index}");
    let session = SessionId::new(name.as_str()).unwrap();
    let stream = StreamId::session(&session);
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let opened = Record::SessionOpened(SessionOpened {
        session: session.clone(),
        workspace: Some(WorkspaceId::new(format!("w{}", index % 4)).unwrap()),
        incognito: index % 16 == 15,
        memory: MemoryMode::Enabled,
        subagent: false,
        title: Some(format!("stress session {index}")),
        source: None,
        parent: None,
    });
    let appended = mnemo.append(&stream, ExpectedRevision::NoStream, &[opened]).unwrap();
    acks.lock().unwrap().push((session.clone(), appended.first_position.0, appended.last_position.0));
    let mut turn = 0;
    while Instant::now() < deadline {
        match rng.below(10) {
            0..=4 => {
                let count = 1 + rng.below(4) as usize;
                let records = event_records(&mut rng, &name, turn, count);
                turn += 1;
                let appended = mnemo.append(&stream, ExpectedRevision::Any, &records).unwrap();
                acks.lock().unwrap().push((
                    session.clone(),
                    appended.first_position.0,
                    appended.last_position.0,
                ));
                counts.appends.fetch_add(1, Ordering::Relaxed);
            }
            5 => {
                let outcome = mnemo.compaction().compact(&session, &CompactOptions::default()).await;
                check(outcome.map(|_| ()), &counts, "compact");
                counts.compactions.fetch_add(1, Ordering::Relaxed);
            }
            6 => {
                let context = HistoryContext { current_session: Some(&session), ..HistoryContext::default() };
                let query =
                    ["cargo test", "token expiry", "parser", "staging timeout"][rng.below(4) as usize];
                let found = mnemo.history().search(&HistorySearchRequest::new(query), &context, None);
                check(found.map(|_| ()), &counts, "search");
                counts.searches.fetch_add(1, Ordering::Relaxed);
            }
            7 => {
                let report = if rng.below(2) == 0 {
                    mnemo.memory().remember(&session, None).await.map(|_| ())
                } else {
                    mnemo.memory().extract(&session, None).await.map(|_| ())
                };
                check(report, &counts, "extract");
                counts.extractions.fetch_add(1, Ordering::Relaxed);
            }
            8 => {
                let recall = RecallMemory { query: "prefer tabs".to_owned(), limit: None };
                check(mnemo.memory().recall(&session, &recall).map(|_| ()), &counts, "recall");
                counts.recalls.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                check(
                    mnemo.compaction().context(&session, &ContextOptions::default()).map(|_| ()),
                    &counts,
                    "context",
                );
                counts.contexts.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::task::yield_now().await;
    }
}

/// Input refusals and conflicts are answers under load (a session busy compacting, nothing to
/// extract); a failure or integrity error is a bug.
fn check(result: Result<(), mnemo::Error>, counts: &Counts, what: &str) {
    if let Err(error) = result {
        match error.category() {
            ErrorCategory::Input | ErrorCategory::Conflict => {
                counts.refusals.fetch_add(1, Ordering::Relaxed);
            }
            _ => panic!("{what} failed under load: {error}"),
        }
    }
}

#[test]
fn concurrent_sessions_lose_nothing_and_stay_verifiable_and_bounded() {
    let seed = seed_from_env();
    let secs = env_u64("MNEMO_STRESS_SECS", SECS_DEFAULT);
    let sessions = env_u64("MNEMO_STRESS_SESSIONS", SESSIONS_DEFAULT);
    eprintln!("stress seed: MNEMO_SEED={seed}, {sessions} sessions for {secs} s");
    let dir = tempfile::tempdir().unwrap();
    let config = Config { durability: Durability::Buffered, ..Config::default() };
    let mnemo = Arc::new(Mnemo::open(dir.path(), config).unwrap());
    let counts = Arc::new(Counts::default());
    let acks: Acks = Arc::new(Mutex::new(Vec::new()));

    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(resident_bytes()));
    let sampler = {
        let (done, peak) = (Arc::clone(&done), Arc::clone(&peak));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(resident_bytes(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(8).enable_all().build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    runtime.block_on(async {
        let tasks: Vec<_> = (0..sessions)
            .map(|index| {
                let (mnemo, counts, acks) = (Arc::clone(&mnemo), Arc::clone(&counts), Arc::clone(&acks));
                tokio::spawn(session_task(mnemo, index, seed, deadline, counts, acks))
            })
            .collect();
        for task in tasks {
            task.await.unwrap_or_else(|e| panic!("a session task failed (seed {seed}): {e}"));
        }
    });
    drop(runtime);

    // Every acknowledged event is where its append said, on its session's stream.
    let acks = acks.lock().unwrap().clone();
    let mut events = 0;
    for (session, first, last) in &acks {
        for position in *first..=*last {
            let envelope = mnemo.log().read(Position(position)).unwrap();
            let envelope = envelope
                .unwrap_or_else(|| panic!("acknowledged position {position} is missing (seed {seed})"));
            assert_eq!(envelope.stream, StreamId::session(session), "position {position} (seed {seed})");
            events += 1;
        }
    }
    // Every stage equals a rebuild from the log.
    let verification = mnemo.verify(&mut |_| {}).unwrap();
    assert!(verification.ok(), "{verification:?} (seed {seed})");
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::Relaxed);
    let c = |n: &AtomicU64| n.load(Ordering::Relaxed);
    eprintln!(
        "{sessions} sessions, {secs} s: {} appends ({events} acknowledged events verified), {} compactions, \
         {} searches, {} extractions, {} recalls, {} contexts, {} refusals; {} envelopes and {} stages \
         verified; peak resident {} MiB",
        c(&counts.appends),
        c(&counts.compactions),
        c(&counts.searches),
        c(&counts.extractions),
        c(&counts.recalls),
        c(&counts.contexts),
        c(&counts.refusals),
        verification.envelopes,
        verification.stages.len(),
        peak / (1024 * 1024)
    );
    assert!(
        peak <= RESIDENT_BYTES_MAX,
        "peak resident {peak} bytes is over {RESIDENT_BYTES_MAX} (seed {seed})"
    );
}
