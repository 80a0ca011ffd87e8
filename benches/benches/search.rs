//! SearchHistory latency versus corpus size: a generated corpus of sessions of 100 visible
//! messages (Zipf-distributed words), searched through the facade with a few fixed queries.
//!
//! Sizes, in messages: `MNEMO_BENCH_SEARCH_SIZES=10000,100000,1000000` picks them (the 1M corpus
//! takes minutes to build); without it `cargo bench` uses 10k and 100k, and `cargo test --benches`
//! one small corpus. Besides criterion's estimates, each size prints the p50 and p90 of 200 calls
//! per query to stderr.
#![allow(clippy::unwrap_used, reason = "a benchmark fails loudly on the first unexpected error")]

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mnemo::{
    Config, Durability, ExpectedRevision, HistoryContext, HistorySearchRequest, Mnemo, Record, StreamId,
};
use mnemo_core::{
    Author, Content, EventId, InvocationId, MemoryMode, Role, RunId, RuntimeEvent, SessionId, SessionOpened,
    TextContent, TimestampMs, TurnId,
};

/// Visible messages per generated session.
const MESSAGES_PER_SESSION: usize = 100;
/// Distinct generated words.
const VOCABULARY: usize = 5_000;
/// Calls per query for the printed percentiles.
const PERCENTILE_CALLS: usize = 200;

/// The queries: a common pair, a mixed query of common, middling and rare words, a rare word.
const QUERIES: [(&str, &str); 3] =
    [("common", "deploy staging"), ("mixed", "deploy w250 w3000 timeout"), ("rare", "w4321")];

fn sizes() -> Vec<usize> {
    if let Ok(text) = std::env::var("MNEMO_BENCH_SEARCH_SIZES") {
        return text.split(',').map(|n| n.trim().parse().unwrap()).collect();
    }
    if std::env::args().any(|arg| arg == "--bench") { vec![10_000, 100_000] } else { vec![2_000] }
}

/// SplitMix64, so every run searches the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Word ranks drawn from a Zipf distribution (s = 1) by inverting the cumulative weights.
struct Words {
    cumulative: Vec<f64>,
    names: Vec<String>,
}

impl Words {
    fn new() -> Self {
        let common =
            ["the", "deploy", "staging", "test", "fails", "timeout", "retry", "parser", "config", "build"];
        let names: Vec<String> = (0..VOCABULARY)
            .map(|rank| common.get(rank).map_or_else(|| format!("w{rank}"), |w| (*w).to_owned()))
            .collect();
        let mut total = 0.0;
        let cumulative = (0..VOCABULARY)
            .map(|rank| {
                total += 1.0 / (rank as f64 + 1.0);
                total
            })
            .collect::<Vec<_>>();
        let cumulative = cumulative.into_iter().map(|c| c / total).collect();
        Words { cumulative, names }
    }

    fn sentence(&self, rng: &mut Rng) -> String {
        let length = 8 + (rng.next() % 23) as usize;
        (0..length)
            .map(|_| {
                let rank = self.cumulative.partition_point(|c| *c < rng.unit()).min(VOCABULARY - 1);
                self.names[rank].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn session_records(words: &Words, rng: &mut Rng, index: usize) -> Vec<Record> {
    let session = SessionId::new(format!("bench-{index:07}")).unwrap();
    let mut records = vec![Record::SessionOpened(SessionOpened {
        session: session.clone(),
        workspace: None,
        incognito: false,
        memory: MemoryMode::Enabled,
        subagent: false,
        title: Some(format!("session {index} {}", words.sentence(rng))),
    })];
    for n in 0..MESSAGES_PER_SESSION {
        let turn = TurnId::new(format!("t{}", n / 2)).unwrap();
        let run = format!("run-{index}-{}", n / 2);
        let (role, author) =
            if n % 2 == 0 { (Role::User, Author::User) } else { (Role::Model, Author::Agent) };
        let mut event = RuntimeEvent::new(
            EventId::new(format!("e-{index}-{n}")).unwrap(),
            InvocationId::new(run.clone()).unwrap(),
            RunId::new(run).unwrap(),
            session.clone(),
            turn,
            TimestampMs(1_767_225_600_000 + (index * MESSAGES_PER_SESSION + n) as u64 * 1000),
            role,
            author,
        );
        event.content = Some(Content::Text(TextContent::new(words.sentence(rng))));
        records.push(Record::RuntimeEvent(event));
    }
    records
}

/// The stages a search reads, configured as in `pipelines/default.toml`: the other stages would
/// only compete for the cores while the corpus is indexed.
const PIPELINE: &str = r#"
[[stage]]
name = "history-messages"

[[stage]]
name = "history-search"
[stage.config]
k1 = 1.2
b = 0.75
"#;

/// A store holding `messages` generated messages, caught up.
fn corpus(messages: usize) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(&pipeline, PIPELINE).unwrap();
    let config = Config { durability: Durability::Buffered, pipeline: Some(pipeline), ..Config::default() };
    let mnemo = Mnemo::open(&dir.path().join("store"), config).unwrap();
    let words = Words::new();
    let mut rng = Rng(7);
    let started = Instant::now();
    for index in 0..messages.div_ceil(MESSAGES_PER_SESSION) {
        let records = session_records(&words, &mut rng, index);
        let stream = StreamId::session(records[0].session().unwrap());
        mnemo.append(&stream, ExpectedRevision::NoStream, &records).unwrap();
    }
    // A large corpus can take longer to index than one catch-up wait allows.
    while let Err(mnemo::Error::Pipeline(mnemo_pipeline::PipelineError::Timeout { .. })) = mnemo.catch_up() {}
    mnemo.catch_up().unwrap();
    eprintln!("corpus of {messages} messages built and indexed in {:.1?}", started.elapsed());
    (dir, mnemo)
}

fn search(mnemo: &Mnemo, query: &str) -> usize {
    let found =
        mnemo.search_history(&HistorySearchRequest::new(query), &HistoryContext::default(), None).unwrap();
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
