//! A child process for the fault tests. It opens a store and appends with `SyncData` from several
//! threads, printing `ack <position>` for each acknowledged position, and then, by mode:
//!
//! - `fsize LIMIT_BYTES`: lowers its own file-size limit (`RLIMIT_FSIZE`; the parent starts it with
//!   SIGXFSZ ignored, so a write past the limit fails with `EFBIG` instead of killing it) and keeps
//!   appending until an append fails. It prints `error <message>` for the first failure and
//!   `after <message>` for one more append, which must fail fast, then exits.
//! - `torn COUNT`: after the first `COUNT` appends it prints `journal <path> <bytes>`, the newest
//!   journal and how far its written bytes reach, appends `COUNT` more and exits without closing the
//!   store, so the parent can tear the journal anywhere after the acknowledged bytes.
//! - `fill 0`: keeps appending until an append fails (a small file system fills up), prints
//!   `error <message>` for the first failure, then exits.
//! - `journal COUNT`: makes `COUNT` appends, prints `journal <path> <bytes>` for the newest journal
//!   and exits without closing the store, so the parent can damage acknowledged bytes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::StreamId;
use mnemo::{Config, Mnemo};
use mnemo_acceptance::sim::Rng;

/// Appends made before the fault, so that there is acknowledged data to lose.
const APPENDS_BEFORE_FAULT: u64 = 24;
/// An append loop that never meets the limit stops here (the parent then fails the round).
const APPENDS_MAX: u64 = 200_000;
const THREADS: u64 = 4;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, seed, mode, amount] = args.as_slice() else {
        eprintln!(
            "usage: fault-writer STORE_DIR SEED (fsize LIMIT_BYTES | torn COUNT | fill 0 | journal COUNT)"
        );
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().unwrap_or(1);
    let amount: u64 = amount.parse().unwrap_or(0);
    let config = Config { durability: Durability::SyncData, ..Config::default() };
    let mnemo = match Mnemo::open(&PathBuf::from(dir), config) {
        Ok(mnemo) => Arc::new(mnemo),
        Err(error) => {
            eprintln!("fault-writer: cannot open: {error}");
            std::process::exit(1);
        }
    };
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let counter = Arc::new(AtomicU64::new(0));
    match mode.as_str() {
        "fsize" => {
            run_appends(&mnemo, &out, &counter, seed, APPENDS_BEFORE_FAULT);
            let limit = rustix::process::Rlimit { current: Some(amount), maximum: Some(amount) };
            if let Err(error) = rustix::process::setrlimit(rustix::process::Resource::Fsize, limit) {
                eprintln!("fault-writer: cannot lower the file-size limit: {error}");
                std::process::exit(1);
            }
            let failure = run_appends(&mnemo, &out, &counter, seed ^ 0xF5, APPENDS_MAX);
            let Some(failure) = failure else {
                say(&out, "no-error".to_owned());
                std::process::exit(3);
            };
            say(&out, format!("error {failure}"));
            let after = append_one(&mnemo, seed, APPENDS_MAX + 1).err().unwrap_or_else(|| "none".to_owned());
            say(&out, format!("after {after}"));
        }
        "torn" => {
            run_appends(&mnemo, &out, &counter, seed, amount);
            let (journal, bytes) = newest_journal(Path::new(dir));
            say(&out, format!("journal {} {bytes}", journal.display()));
            run_appends(&mnemo, &out, &counter, seed ^ 0x70, amount * 2);
        }
        "fill" => match run_appends(&mnemo, &out, &counter, seed, APPENDS_MAX) {
            Some(failure) => say(&out, format!("error {failure}")),
            None => say(&out, "no-error".to_owned()),
        },
        "journal" => {
            run_appends(&mnemo, &out, &counter, seed, amount);
            let (journal, bytes) = newest_journal(Path::new(dir));
            say(&out, format!("journal {} {bytes}", journal.display()));
        }
        other => {
            eprintln!("fault-writer: unknown mode {other}");
            std::process::exit(2);
        }
    }
    // NOTE: exit without closing the store: what is on disk is what a crash would leave.
    std::process::exit(0);
}

/// Appends from several threads until `until` appends were made in all (counting earlier ones) or
/// one fails; returns the first failure.
fn run_appends(
    mnemo: &Arc<Mnemo>,
    out: &Arc<Mutex<std::io::Stdout>>,
    counter: &Arc<AtomicU64>,
    seed: u64,
    until: u64,
) -> Option<String> {
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (mnemo, out, counter, failure) =
                (Arc::clone(mnemo), Arc::clone(out), Arc::clone(counter), Arc::clone(&failure));
            std::thread::spawn(move || {
                let seed = seed ^ (thread + 1).wrapping_mul(0x9E37_79B9);
                loop {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    if n >= until || lock(&failure).is_some() {
                        break;
                    }
                    match append_one(&mnemo, seed, n) {
                        Ok((first, last)) => {
                            let mut out = lock(&out);
                            for position in first..=last {
                                let _ = writeln!(out, "ack {position}");
                            }
                            let _ = out.flush();
                        }
                        Err(error) => {
                            lock(&failure).get_or_insert(error);
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    counter.store(until.min(counter.load(Ordering::SeqCst)), Ordering::SeqCst);
    lock(&failure).take()
}

fn append_one(mnemo: &Mnemo, seed: u64, n: u64) -> Result<(u64, u64), String> {
    let mut rng = Rng::new(seed ^ n);
    let session = format!("fault-{}", rng.below(8));
    let count = 1 + rng.below(3) as usize;
    let records = mnemo_acceptance::sim::event_records(&mut rng, &session, n, count);
    let stream = StreamId::new(format!("session/{session}")).map_err(|e| e.to_string())?;
    let appended = mnemo.append(&stream, ExpectedRevision::Any, &records).map_err(|e| e.to_string())?;
    Ok((appended.first_position.0, appended.last_position.0))
}

/// The journal with the highest number and the end of its non-zero bytes (fjall preallocates a
/// journal with zeros, so its length says nothing).
fn newest_journal(store: &Path) -> (PathBuf, u64) {
    let db = store.join("db");
    let newest = std::fs::read_dir(&db)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jnl"))
        .max_by_key(|path| {
            path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
        });
    let Some(newest) = newest else {
        eprintln!("fault-writer: no journal in {}", db.display());
        std::process::exit(1);
    };
    let bytes = std::fs::read(&newest).unwrap_or_default();
    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i as u64 + 1);
    (newest, end)
}

fn say(out: &Mutex<std::io::Stdout>, line: String) {
    let mut out = lock(out);
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
