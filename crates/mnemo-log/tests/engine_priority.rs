//! The storage engine's pool threads run at a lowered priority, as the log's own background
//! threads do. A test binary of its own, so that no other test's store opens or closes an engine
//! while the threads are counted.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use mnemo_log::limits::{KEYS_STORAGE_WORKER_THREADS, STORAGE_NICE_INCREMENT, STORAGE_WORKER_THREADS};
use mnemo_log::{FjallLog, LogOptions};

/// The nice value of each of this process's threads named `name`.
#[cfg(target_os = "linux")]
fn nice_values_of(name: &str) -> Vec<i32> {
    let mut values = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim_end() != name {
            continue;
        }
        let tid =
            rustix::process::Pid::from_raw(task.file_name().to_str().unwrap().parse().unwrap()).unwrap();
        values.push(rustix::process::getpriority_process(Some(tid)).unwrap());
    }
    values
}

#[cfg(target_os = "linux")]
#[test]
fn the_storage_engines_threads_run_below_the_hosts_priority() {
    let host = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), LogOptions::default()).unwrap();
    let engine = nice_values_of("fjall:worker");
    // Both databases' pools: the log's and the key index's. A count of zero would mean the engine
    // renamed its threads, and they would run at the host's priority unnoticed.
    assert_eq!(engine.len(), STORAGE_WORKER_THREADS + KEYS_STORAGE_WORKER_THREADS, "{engine:?}");
    let lowered = (host + STORAGE_NICE_INCREMENT).min(19);
    assert!(engine.iter().all(|nice| *nice == lowered), "host {host}, engine threads {engine:?}");
    // A second store in the same process lowers its own threads and leaves the first's as they are.
    let other = tempfile::tempdir().unwrap();
    let second = FjallLog::open(other.path(), LogOptions::default()).unwrap();
    let engine = nice_values_of("fjall:worker");
    assert_eq!(engine.len(), 2 * (STORAGE_WORKER_THREADS + KEYS_STORAGE_WORKER_THREADS), "{engine:?}");
    assert!(engine.iter().all(|nice| *nice == lowered), "host {host}, engine threads {engine:?}");
    drop((log, second));
}
