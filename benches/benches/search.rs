//! SearchHistory latency versus corpus size: the `mnemo bench` search corpus (sessions of 100
//! visible messages, Zipf-distributed words), searched through the facade with its fixed queries.
//!
//! Sizes, in messages: `MNEMO_BENCH_SEARCH_SIZES=10000,100000,1000000` picks them (the 1M corpus
//! takes minutes to build); without it `cargo bench` uses 10k and 100k, and `cargo test --benches`
//! one small corpus. Besides criterion's estimates, each size prints the p50 and p90 of 200 calls
//! per query to stderr.
#![allow(clippy::unwrap_used, reason = "a benchmark fails loudly on the first unexpected error")]

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::Mnemo;
use mnemo::history::{HistoryContext, HistorySearchRequest};
use mnemo::log::ExpectedRevision;
use mnemo::records::StreamId;
use mnemo_benches::search_workload::{
    MESSAGES_PER_SESSION, QUERIES, ZipfWords, open_search_store, session_records, wait_indexed,
};
use mnemo_benches::workload::Rng;

/// Calls per query for the printed percentiles.
const PERCENTILE_CALLS: usize = 200;

fn sizes() -> Vec<usize> {
    if let Ok(text) = std::env::var("MNEMO_BENCH_SEARCH_SIZES") {
        return text.split(',').map(|n| n.trim().parse().unwrap()).collect();
    }
    if std::env::args().any(|arg| arg == "--bench") { vec![10_000, 100_000] } else { vec![2_000] }
}

/// A store holding `messages` generated messages (the `mnemo bench` corpus), caught up.
fn corpus(messages: usize) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open_search_store(dir.path()).unwrap();
    let words = ZipfWords::new();
    let mut rng = Rng::new(7);
    let started = Instant::now();
    for index in 0..messages.div_ceil(MESSAGES_PER_SESSION) {
        let records = session_records(&words, &mut rng, index);
        let stream = StreamId::session(records[0].session().unwrap());
        mnemo.append(&stream, ExpectedRevision::NoStream, &records).unwrap();
    }
    wait_indexed(&mnemo).unwrap();
    eprintln!("corpus of {messages} messages built and indexed in {:.1?}", started.elapsed());
    (dir, mnemo)
}

fn search(mnemo: &Mnemo, query: &str) -> usize {
    let found =
        mnemo.history().search(&HistorySearchRequest::new(query), &HistoryContext::default(), None).unwrap();
    found.map(|f| f.rows.len()).unwrap_or(0)
}

fn percentiles(mnemo: &Mnemo, size: usize) {
    for (name, query) in QUERIES {
        let mut times: Vec<Duration> = (0..PERCENTILE_CALLS)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(search(mnemo, query));
                started.elapsed()
            })
            .collect();
        times.sort();
        eprintln!(
            "search {name:<6} {size:>8} messages: p50 {:>9.1?}  p90 {:>9.1?}  ({} rows)",
            times[times.len() / 2],
            times[times.len() * 9 / 10],
            search(mnemo, query)
        );
    }
}

fn bench_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("search");
    group.sample_size(30).measurement_time(Duration::from_secs(3));
    for size in sizes() {
        let (_dir, mnemo) = corpus(size);
        percentiles(&mnemo, size);
        for (name, query) in QUERIES {
            group.bench_with_input(BenchmarkId::new(name, size), &query, |b, query| {
                b.iter(|| search(&mnemo, query))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
