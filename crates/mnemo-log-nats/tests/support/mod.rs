//! What the cluster tests share: the cluster's address from the environment, fresh stream names,
//! records.
#![allow(dead_code, reason = "each test file uses part of the support")]

use mnemo_core::StreamId;
use mnemo_log::{AppendOutcome, AppendRequest, Appended, ExpectedRevision, LogBackend, NewRecord};
use mnemo_log_nats::{NatsLog, NatsOptions};

/// The environment variable naming the test cluster's servers (comma-separated `nats://` URLs).
pub const URLS_VAR: &str = "MNEMO_TEST_NATS_URLS";

/// The cluster's servers; `None` (with the reason printed) only when the variable is unset. A set
/// variable with an unreachable cluster makes the tests fail when they open the log.
pub fn cluster() -> Option<String> {
    match std::env::var(URLS_VAR) {
        Ok(urls) if !urls.trim().is_empty() => Some(urls),
        _ => {
            eprintln!(
                "skipped: {URLS_VAR} is unset; run `.ci/nats-cluster.sh start DIR` and export what it prints"
            );
            None
        }
    }
}

/// A stream name no other test run uses.
pub fn fresh_stream(tag: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("T_{tag}_{}_{nanos}", std::process::id())
}

pub fn open(urls: &str, stream: &str) -> NatsLog {
    NatsLog::open(NatsOptions::new(urls, stream).unwrap())
        .unwrap_or_else(|e| panic!("cannot open the log on {urls}: {e}"))
}

pub fn record(text: &str) -> NewRecord {
    NewRecord::new(4, 1, text.as_bytes().to_vec())
}

pub fn stream(name: &str) -> StreamId {
    StreamId::new(name).unwrap()
}

pub fn append(
    log: &dyn LogBackend,
    stream_name: &str,
    expected: ExpectedRevision,
    texts: &[&str],
) -> AppendOutcome {
    let records = texts.iter().map(|t| record(t)).collect();
    log.append(AppendRequest::new(stream(stream_name), expected, records)).unwrap()
}

pub fn appended(outcome: AppendOutcome) -> Appended {
    match outcome {
        AppendOutcome::Appended(appended) => appended,
        other => panic!("expected an append, got {other:?}"),
    }
}
