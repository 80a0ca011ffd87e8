//! Criterion benchmarks of the log and the pipeline: durable appends from one writer and from 64
//! concurrent streams (group commit), and a full rebuild of every stage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mnemo::log::ExpectedRevision;
use mnemo::log::{AppendOutcome, AppendRequest, Durability, LogBackend, NewRecord};
use mnemo::records::StreamId;
use mnemo::records::{Record, SessionArchived, SessionId};
use mnemo::{Config, Mnemo};
use mnemo_log::{FjallLog, LogOptions};

/// A realistic small record: one RuntimeEvent-sized payload.
fn record(i: u64) -> NewRecord {
    let text = format!(
        r#"{{"author":"user","content":{{"kind":"text","text":"please run the test suite again, attempt {i}"}},"id":"e{i}","invocationId":"r1","partial":false,"role":"user","runId":"r1","sessionId":"bench","ts":1767225600000,"turnId":"t1"}}"#
    );
    NewRecord::new(4, 1, text.into_bytes())
}

fn append_one(log: &FjallLog, stream: &StreamId, i: u64) {
    let mut request = AppendRequest::new(stream.clone(), ExpectedRevision::Any, vec![record(i)]);
    request.durability = Durability::SyncData;
    let outcome = log.append(request);
    assert!(matches!(outcome, Ok(AppendOutcome::Appended(_))), "{outcome:?}");
}

fn durable_appends(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_sync_data");
    group.sample_size(10).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("streams", 1), |b| {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = FjallLog::open(dir.path(), LogOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let stream = StreamId::new("session/bench").unwrap_or_else(|e| panic!("{e}"));
        let mut i = 0;
        b.iter(|| {
            i += 1;
            append_one(&log, &stream, i);
        });
    });

    // 64 writers each append `iters / 64` events to their own stream at the same time; the writer
    // folds whatever is queued into one batch and one fdatasync.
    group.bench_function(BenchmarkId::new("streams", 64), |b| {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log =
            Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap_or_else(|e| panic!("{e}")));
        b.iter_custom(|iters| {
            let per_writer = iters.div_ceil(64);
            let started = Instant::now();
            let writers: Vec<_> = (0..64)
                .map(|w| {
                    let log = Arc::clone(&log);
                    std::thread::spawn(move || {
                        let stream =
                            StreamId::new(format!("session/bench-{w}")).unwrap_or_else(|e| panic!("{e}"));
                        for i in 0..per_writer {
                            append_one(&log, &stream, i);
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap_or_else(|_| panic!("a writer panicked"));
            }
            // Scale to the iterations asked for, so the per-element figure is per append.
            started.elapsed().mul_f64(iters as f64 / (per_writer * 64) as f64)
        });
    });
    group.finish();
}

fn rebuild(c: &mut Criterion) {
    const SESSIONS: u64 = 100;
    const EVENTS_PER_SESSION: u64 = 100;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = Config { durability: Durability::Buffered, ..Config::default() };
    let mnemo = Mnemo::open(dir.path(), config).unwrap_or_else(|e| panic!("{e}"));
    for s in 0..SESSIONS {
        let session = SessionId::new(format!("s{s}")).unwrap_or_else(|e| panic!("{e}"));
        let records: Vec<Record> = (0..EVENTS_PER_SESSION)
            .map(|_| Record::SessionArchived(SessionArchived { session: session.clone(), archived: true }))
            .collect();
        mnemo
            .append(&StreamId::session(&session), ExpectedRevision::Any, &records)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    mnemo.catch_up().unwrap_or_else(|e| panic!("{e}"));
    let events = mnemo.log().head().0;

    let mut group = c.benchmark_group("rebuild_all_stages");
    group.sample_size(10).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(events));
    group.bench_function(BenchmarkId::new("events", events), |b| {
        b.iter(|| mnemo.rebuild(None).unwrap_or_else(|e| panic!("{e}")));
    });
    group.finish();
}

criterion_group!(benches, durable_appends, rebuild);
criterion_main!(benches);
