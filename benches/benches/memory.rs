//! Criterion benchmarks of memory key search on a real store: exact search of a unique key,
//! exact search of a key shared by many items (ranked, top 20) and prefix search, at 10k and 100k
//! items (1M with `MNEMO_BENCH_MEMORY_1M=1`). Each size also prints p50 and p99 over 1,000 fresh
//! queries, since criterion reports means.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::log::{Durability, ExpectedRevision, ManualClock};
use mnemo::memory::{MatchMode, SearchRequest};
use mnemo::records::{
    MemoryMutation, MemoryScope, Mutation, OperationId, Record, TimestampMs, WorkspaceId,
    limits::{APPEND_RECORDS_MAX, MEMORY_MUTATIONS_MAX},
};
use mnemo::{Config, Mnemo};
use mnemo_benches::memory_workload::{ITEMS_PER_TOPIC, fields};

/// A store holding `items` items, half global and half in workspace `w1`, written as
/// 32-item mutation batches appended 256 records (about 4 MiB) at a time.
fn store(items: u64) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = Config {
        durability: Durability::Buffered,
        clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)),
        ..Config::default()
    };
    let mnemo = Mnemo::open(dir.path(), config).unwrap_or_else(|e| panic!("{e}"));
    let batch = MEMORY_MUTATIONS_MAX as u64;
    for scope in [
        MemoryScope::Global,
        MemoryScope::Workspace(WorkspaceId::new("w1").unwrap_or_else(|e| panic!("{e}"))),
    ] {
        let offset = if scope == MemoryScope::Global { 0 } else { items / 2 };
        let records: Vec<Record> = (0..(items / 2).div_ceil(batch))
            .map(|b| {
                let operation = OperationId::new(format!("bench-{}-{b}", scope.as_text()))
                    .unwrap_or_else(|e| panic!("{e}"));
                let mutations = (b * batch..((b + 1) * batch).min(items / 2))
                    .map(|i| Mutation::Create {
                        item: mnemo_memory_item_id(&operation, (i - b * batch) as usize),
                        fields: fields(offset + i, &scope),
                    })
                    .collect();
                Record::MemoryMutation(MemoryMutation {
                    operation,
                    scope: scope.clone(),
                    mutations,
                    committed_at: TimestampMs(1_767_225_600_000 + b),
                    unmerge: None,
                })
            })
            .collect();
        for chunk in records.chunks(APPEND_RECORDS_MAX / 4) {
            mnemo.append(&scope.stream(), ExpectedRevision::Any, chunk).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    mnemo.catch_up().unwrap_or_else(|e| panic!("{e}"));
    (dir, mnemo)
}

fn mnemo_memory_item_id(operation: &OperationId, index: usize) -> mnemo::records::ItemId {
    mnemo::records::ItemId::new(format!("mem_{}_{index}", operation.as_str()))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn request(term: String, mode: MatchMode) -> SearchRequest {
    SearchRequest {
        terms: vec![term],
        match_mode: mode,
        workspace: Some(WorkspaceId::new("w1").unwrap_or_else(|e| panic!("{e}"))),
        include_archived: false,
        limit: None,
    }
}

type Query = fn(u64, u64) -> SearchRequest;

fn queries() -> [(&'static str, Query); 3] {
    [
        ("exact_unique", |items, n| request(format!("item-{:07}", (n * 7919) % items), MatchMode::Exact)),
        ("exact_shared_top20", |items, n| {
            request(format!("topic-{:04}", n % (items / ITEMS_PER_TOPIC).max(1)), MatchMode::Exact)
        }),
        ("prefix_top20", |items, n| {
            request(format!("item-{:05}", (n * 31) % (items / 100).max(1)), MatchMode::Prefix)
        }),
    ]
}

fn percentiles(mnemo: &Mnemo, items: u64, name: &str, query: Query) {
    let mut samples: Vec<Duration> = (0..1000)
        .map(|n| {
            let request = query(items, n);
            let start = Instant::now();
            let found = mnemo.memory().search(&request).unwrap_or_else(|e| panic!("{e}"));
            let elapsed = start.elapsed();
            assert!(!found.is_empty(), "{name} found nothing");
            elapsed
        })
        .collect();
    samples.sort();
    println!("memory_key_search/{name}/{items}: p50 {:?}  p99 {:?}", samples[500], samples[990]);
}

fn key_search(c: &mut Criterion) {
    let mut sizes = vec![10_000u64, 100_000];
    if std::env::var_os("MNEMO_BENCH_MEMORY_1M").is_some() {
        sizes.push(1_000_000);
    }
    let mut group = c.benchmark_group("memory_key_search");
    group.sample_size(20).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    for items in sizes {
        let started = Instant::now();
        let (_dir, mnemo) = store(items);
        println!("memory_key_search: built {items} items in {:?}", started.elapsed());
        for (name, query) in queries() {
            percentiles(&mnemo, items, name, query);
            let mut n = 0;
            group.bench_function(BenchmarkId::new(name, items), |b| {
                b.iter(|| {
                    n += 1;
                    mnemo.memory().search(&query(items, n)).unwrap_or_else(|e| panic!("{e}"))
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, key_search);
criterion_main!(benches);
