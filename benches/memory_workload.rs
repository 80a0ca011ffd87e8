//! The memory key-search workload: exact key search as the item count grows, beside the baseline's
//! lookup of the same keys.
//!
//! Items are written as the memory writer writes them, as `MemoryMutation` records of
//! [`MEMORY_MUTATIONS_MAX`] creates, half into the global scope and half into workspace `w1`. Each
//! item has a unique key (`item-<n>`) and a key it shares with [`ITEMS_PER_TOPIC`] others
//! (`topic-<n>`). One store grows from the smallest size to the largest and is measured at each.

use std::time::{Duration, Instant};

use mnemo::Mnemo;
use mnemo::log::ExpectedRevision;
use mnemo::memory::{MatchMode, SearchRequest};
use mnemo::records::{
    EventId, KeyOrigin, KeyType, MemoryItemFields, MemoryKey, MemoryKind, MemoryMutation, MemoryOrigin,
    MemoryScope, Mutation, OperationId, Record, RunId, SessionId, SourcePointer, StatementType, TemporalType,
    TimestampMs, TurnId, WorkspaceId,
    limits::{APPEND_RECORDS_MAX, MEMORY_MUTATIONS_MAX},
};

use crate::baseline::Baseline;
use crate::harness::{BenchError, BenchOptions, WorkloadResult, fresh_dir, open_mnemo, quantile_ms, ratio};

/// Items sharing one `topic-<n>` key.
pub const ITEMS_PER_TOPIC: u64 = 1000;
/// Searches timed per size and side.
pub const KEY_SEARCH_SAMPLES: usize = 1000;
/// Target: p50 at the largest size, in milliseconds.
pub const KEY_SEARCH_P50_TARGET_MS: f64 = 1.0;
/// Mutation records per append while the store grows (about 4 MiB).
const RECORDS_PER_APPEND: usize = APPEND_RECORDS_MAX / 4;

fn valid<T, E: std::fmt::Display>(value: Result<T, E>) -> T {
    // Generated ids are short ASCII and always valid; a failure here is a bug in the generator.
    value.unwrap_or_else(|e| panic!("generated value is invalid: {e}"))
}

/// The workspace half of the items lives in.
pub fn workspace() -> WorkspaceId {
    valid(WorkspaceId::new("w1"))
}

/// The unique key of item `n`.
pub fn unique_key(n: u64) -> String {
    format!("item-{n:07}")
}

/// The shared key of item `n`.
pub fn topic_key(n: u64) -> String {
    format!("topic-{:04}", n / ITEMS_PER_TOPIC)
}

/// The fields of item `n`.
pub fn fields(n: u64, scope: &MemoryScope) -> MemoryItemFields {
    let mut keys = vec![
        MemoryKey::new(unique_key(n), KeyType::Exact, KeyOrigin::Llm),
        MemoryKey::new(topic_key(n), KeyType::Concept, KeyOrigin::Llm),
    ];
    keys.sort_by(|a, b| a.normalized_key.cmp(&b.normalized_key));
    MemoryItemFields {
        content: format!("Fact number {n} about topic {}", n / ITEMS_PER_TOPIC),
        kind: MemoryKind::Knowledge,
        statement_type: StatementType::Fact,
        temporal_type: TemporalType::Undated,
        scope: scope.clone(),
        event_started_at: None,
        event_ended_at: None,
        observed_at: TimestampMs(1_767_225_600_000),
        origin: MemoryOrigin::AgentExtracted,
        keys,
        sources: vec![SourcePointer {
            session: valid(SessionId::new("bench")),
            run: valid(RunId::new("run")),
            turn: valid(TurnId::new("turn")),
            event: valid(EventId::new(format!("e{n}"))),
        }],
    }
}

/// The scope of item `n`: even items are global, odd ones in [`workspace`].
pub fn scope_of(n: u64) -> MemoryScope {
    if n.is_multiple_of(2) { MemoryScope::Global } else { MemoryScope::Workspace(workspace()) }
}

/// The mutation record creating items `from..to` of `scope` (those whose [`scope_of`] is it).
pub fn create_record(scope: &MemoryScope, batch: u64, items: &[u64]) -> Record {
    let operation = valid(OperationId::new(format!("bench-{}-{batch}", scope.as_text())));
    let mutations = items
        .iter()
        .enumerate()
        .map(|(index, &n)| Mutation::Create {
            item: valid(mnemo::records::ItemId::new(format!("mem_{}_{index}", operation.as_str()))),
            fields: fields(n, scope),
        })
        .collect();
    Record::MemoryMutation(MemoryMutation {
        operation,
        scope: scope.clone(),
        mutations,
        committed_at: TimestampMs(1_767_225_600_000 + batch),
        unmerge: None,
    })
}

/// Grows `mnemo` and `baseline` from `from` items to `to` items.
fn grow(mnemo: &Mnemo, baseline: &mut Baseline, from: u64, to: u64) -> Result<(), BenchError> {
    for scope in [MemoryScope::Global, MemoryScope::Workspace(workspace())] {
        let mine: Vec<u64> = (from..to).filter(|n| scope_of(*n) == scope).collect();
        let records: Vec<Record> =
            mine.chunks(MEMORY_MUTATIONS_MAX).map(|chunk| create_record(&scope, chunk[0], chunk)).collect();
        for chunk in records.chunks(RECORDS_PER_APPEND) {
            mnemo.append(&scope.stream(), ExpectedRevision::Any, chunk)?;
        }
        let keys: Vec<(String, String)> = records
            .iter()
            .filter_map(|record| match record {
                Record::MemoryMutation(m) => Some(m),
                _ => None,
            })
            .flat_map(|m| {
                m.mutations.iter().filter_map(|mutation| match mutation {
                    Mutation::Create { item, fields } => Some(
                        fields
                            .keys
                            .iter()
                            .map(|k| (k.normalized_key.clone(), item.as_str().to_owned()))
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                })
            })
            .flatten()
            .collect();
        baseline.insert_memory_keys(&keys)?;
    }
    Ok(())
}

/// An exact search for one key, in `w1` (global items are always candidates).
pub fn key_request(key: String) -> SearchRequest {
    SearchRequest {
        terms: vec![key],
        match_mode: MatchMode::Exact,
        workspace: Some(workspace()),
        include_archived: false,
        limit: None,
    }
}

/// Times `samples` searches, each for a different key of `keys`.
fn timed(
    samples: usize,
    key: impl Fn(u64) -> String,
    mut search: impl FnMut(String) -> Result<usize, BenchError>,
) -> Result<Vec<Duration>, BenchError> {
    let mut times = Vec::with_capacity(samples);
    for n in 0..samples as u64 {
        let key = key(n);
        let started = Instant::now();
        let found = search(key.clone())?;
        times.push(started.elapsed());
        if found == 0 {
            return Err(BenchError::Chart(format!("key search found nothing for {key}")));
        }
    }
    Ok(times)
}

/// Key search p50 and p99 per size, beside the baseline; and, at the largest size, the p50 of a
/// key shared by many items (ranked, top 20).
pub fn key_search(
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<WorkloadResult>, BenchError> {
    let mnemo = open_mnemo(&fresh_dir(&options.out, "memory-mnemo")?, mnemo::log::Durability::Buffered)?;
    let mut baseline = Baseline::open(&fresh_dir(&options.out, "memory-sqlite")?)?;
    let largest = options.memory_sizes.iter().copied().max().unwrap_or(0);
    let mut items = 0u64;
    let mut results = Vec::new();
    for &size in &options.memory_sizes {
        progress(&format!("memory key search: writing {size} items"));
        grow(&mnemo, &mut baseline, items, size)?;
        items = items.max(size);
        crate::search_workload::wait_indexed(&mnemo)?;
        progress(&format!("memory key search: querying {size} items"));
        // Keys spread over the whole corpus, so the reads are not all in one cached block.
        let spread = move |n: u64| unique_key((n * 7919 + 13) % size.max(1));
        let mnemo_search = |key| Ok(mnemo.memory().search(&key_request(key))?.len());
        let mut mine = timed(KEY_SEARCH_SAMPLES, spread, mnemo_search)?;
        let mut theirs = timed(KEY_SEARCH_SAMPLES, spread, |key| {
            Ok(baseline.key_search(&key, crate::harness::MEMORY_SEARCH_ROWS)?.len())
        })?;
        for (name, at) in [("p50", 0.5), ("p99", 0.99)] {
            let (m, b) = (quantile_ms(&mut mine, at), quantile_ms(&mut theirs, at));
            let judged = name == "p50" && size == largest;
            results.push(WorkloadResult {
                name: format!("memory_key_search_{name}_{size}_items"),
                unit: "ms".to_owned(),
                higher_is_better: false,
                mnemo: m,
                baseline_name: "sqlite key lookup in memory_keys".to_owned(),
                baseline: b,
                ratio: ratio(m, b),
                target: if judged {
                    format!("p50 <= {KEY_SEARCH_P50_TARGET_MS} ms at the largest item count")
                } else {
                    "reported".to_owned()
                },
                met: !judged || m <= KEY_SEARCH_P50_TARGET_MS,
            });
        }
        if size == largest {
            let topics = (size / ITEMS_PER_TOPIC).max(1);
            let shared = move |n: u64| topic_key((n % topics) * ITEMS_PER_TOPIC);
            let mut mine = timed(KEY_SEARCH_SAMPLES / 4, shared, |key| {
                Ok(mnemo.memory().search(&key_request(key))?.len())
            })?;
            let mut theirs = timed(KEY_SEARCH_SAMPLES / 4, shared, |key| {
                Ok(baseline.key_search(&key, crate::harness::MEMORY_SEARCH_ROWS)?.len())
            })?;
            let (m, b) = (quantile_ms(&mut mine, 0.5), quantile_ms(&mut theirs, 0.5));
            results.push(WorkloadResult {
                name: format!("memory_shared_key_p50_{size}_items"),
                unit: "ms".to_owned(),
                higher_is_better: false,
                mnemo: m,
                baseline_name: format!("sqlite key lookup, a key of {ITEMS_PER_TOPIC} items, first 20"),
                baseline: b,
                ratio: ratio(m, b),
                target: "reported (mnemo ranks the 20 most recent of the scope)".to_owned(),
                met: true,
            });
        }
    }
    Ok(results)
}
