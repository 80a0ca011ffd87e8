//! The history-search workload: SearchHistory latency as the corpus grows, beside the baseline's
//! substring search over the same messages.
//!
//! The corpus is sessions of [`MESSAGES_PER_SESSION`] visible messages whose words follow a Zipf
//! distribution over [`VOCABULARY_WORDS`] words, so queries mix common, middling and rare terms
//! as real transcripts do. One store grows from the smallest size to the largest and is measured
//! at each, so the largest size's indexing is the only one paid.

use std::path::Path;
use std::time::{Duration, Instant};

use mnemo::history::{HistoryContext, HistorySearchRequest};
use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::{
    Author, Content, EventId, InvocationId, MemoryMode, Role, RunId, RuntimeEvent, SessionId, SessionOpened,
    TextContent, TimestampMs, TurnId,
};
use mnemo::records::{Record, StreamId};
use mnemo::{Config, Mnemo};

use crate::baseline::Baseline;
use crate::harness::{BenchError, BenchOptions, WorkloadResult, fresh_dir, payloads, quantile_ms, ratio};
use crate::workload::Rng;

/// Visible messages per generated session.
pub const MESSAGES_PER_SESSION: usize = 100;
/// Distinct generated words.
pub const VOCABULARY_WORDS: usize = 5_000;
/// Mnemo searches timed per size (the queries in turn).
pub const SEARCH_SAMPLES: usize = 300;
/// Baseline searches timed per size: each scans every stored event, so fewer are taken.
pub const BASELINE_SEARCH_SAMPLES: usize = 15;
/// Target: p50 at the largest size, in milliseconds.
pub const SEARCH_P50_TARGET_MS: f64 = 20.0;

/// The queries: a common pair, a mixed query of common, middling and rare words, a rare word.
pub const QUERIES: [(&str, &str); 3] =
    [("common", "deploy staging"), ("mixed", "deploy w250 w3000 timeout"), ("rare", "w4321")];

/// The stages a search reads, configured as in `pipelines/default.toml`: the other stages would
/// only compete for the cores while the corpus is indexed.
pub const SEARCH_PIPELINE: &str = r#"
[[stage]]
name = "history-messages"

[[stage]]
name = "history-search"
[stage.config]
k1 = 1.2
b = 0.9
"#;

/// Word ranks drawn from a Zipf distribution (s = 1) by inverting the cumulative weights.
#[derive(Debug)]
pub struct ZipfWords {
    cumulative: Vec<f64>,
    names: Vec<String>,
}

impl Default for ZipfWords {
    fn default() -> Self {
        Self::new()
    }
}

impl ZipfWords {
    /// The vocabulary: ten common coding words, then `w<rank>`.
    pub fn new() -> Self {
        let common =
            ["the", "deploy", "staging", "test", "fails", "timeout", "retry", "parser", "config", "build"];
        let names: Vec<String> = (0..VOCABULARY_WORDS)
            .map(|rank| common.get(rank).map_or_else(|| format!("w{rank}"), |w| (*w).to_owned()))
            .collect();
        let mut total = 0.0;
        let cumulative: Vec<f64> = (0..VOCABULARY_WORDS)
            .map(|rank| {
                total += 1.0 / (rank as f64 + 1.0);
                total
            })
            .collect();
        let cumulative = cumulative.into_iter().map(|c| c / total).collect();
        ZipfWords { cumulative, names }
    }

    fn unit(rng: &mut Rng) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A sentence of 8 to 30 words.
    pub fn sentence(&self, rng: &mut Rng) -> String {
        let length = 8 + rng.below(23) as usize;
        (0..length)
            .map(|_| {
                let draw = Self::unit(rng);
                let rank = self.cumulative.partition_point(|c| *c < draw).min(VOCABULARY_WORDS - 1);
                self.names[rank].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn valid<T, E: std::fmt::Display>(value: Result<T, E>) -> T {
    // Generated ids are short ASCII and always valid; a failure here is a bug in the generator.
    value.unwrap_or_else(|e| panic!("generated value is invalid: {e}"))
}

/// The records of generated session `index`: its opening (with a title) and
/// [`MESSAGES_PER_SESSION`] alternating user and assistant messages.
pub fn session_records(words: &ZipfWords, rng: &mut Rng, index: usize) -> Vec<Record> {
    let session = valid(SessionId::new(format!("search-{index:07}")));
    let mut records = vec![Record::SessionOpened(SessionOpened {
        session: session.clone(),
        workspace: None,
        incognito: false,
        memory: MemoryMode::Enabled,
        subagent: false,
        title: Some(format!("session {index} {}", words.sentence(rng))),
        source: None,
        parent: None,
    })];
    for n in 0..MESSAGES_PER_SESSION {
        let turn = valid(TurnId::new(format!("t{}", n / 2)));
        let run = format!("run-{index}-{}", n / 2);
        let (role, author) =
            if n % 2 == 0 { (Role::User, Author::User) } else { (Role::Model, Author::Agent) };
        let mut event = RuntimeEvent::new(
            valid(EventId::new(format!("e-{index}-{n}"))),
            valid(InvocationId::new(run.clone())),
            valid(RunId::new(run)),
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

/// A fresh store running only the history stages.
pub fn open_search_store(dir: &Path) -> Result<Mnemo, BenchError> {
    let pipeline = dir.join("pipeline.toml");
    std::fs::write(&pipeline, SEARCH_PIPELINE).map_err(crate::harness::io("cannot write the pipeline"))?;
    let config = Config { durability: Durability::Buffered, pipeline: Some(pipeline), ..Config::default() };
    Ok(Mnemo::open(&dir.join("store"), config)?)
}

/// Waits until every stage has folded the log, however long a large catch-up takes.
pub fn wait_indexed(mnemo: &Mnemo) -> Result<(), BenchError> {
    loop {
        match mnemo.catch_up() {
            Err(mnemo::Error::Pipeline(mnemo::stages::PipelineError::Timeout { .. })) => {}
            other => return Ok(other?),
        }
    }
}

/// SearchHistory through the facade; the rows found.
pub fn search(mnemo: &Mnemo, query: &str) -> Result<usize, BenchError> {
    let found =
        mnemo.history().search(&HistorySearchRequest::new(query), &HistoryContext::default(), None)?;
    Ok(found.map(|f| f.rows.len()).unwrap_or(0))
}

/// Times `samples` calls of `work`, the queries in turn.
fn timed(
    samples: usize,
    mut work: impl FnMut(&str) -> Result<(), BenchError>,
) -> Result<Vec<Duration>, BenchError> {
    let mut times = Vec::with_capacity(samples);
    for n in 0..samples {
        let (_, query) = QUERIES[n % QUERIES.len()];
        let started = Instant::now();
        work(query)?;
        times.push(started.elapsed());
    }
    Ok(times)
}

/// Search p50 and p99 per size, beside the baseline's substring search.
pub fn search_latency(
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<WorkloadResult>, BenchError> {
    let dir = fresh_dir(&options.out, "search-mnemo")?;
    let mnemo = open_search_store(&dir)?;
    let mut baseline = Baseline::open(&fresh_dir(&options.out, "search-sqlite")?)?;
    let words = ZipfWords::new();
    let mut rng = Rng::new(options.seed ^ 0x005E_A2C4);
    let mut sessions = 0usize;
    let mut results = Vec::new();
    let largest = options.search_sizes.iter().copied().max().unwrap_or(0);
    for &messages in &options.search_sizes {
        progress(&format!("search: indexing {messages} messages"));
        while sessions * MESSAGES_PER_SESSION < messages as usize {
            let records = session_records(&words, &mut rng, sessions);
            let stream = StreamId::session(
                records[0]
                    .session()
                    .ok_or_else(|| BenchError::Chart("a generated session has no session id".to_owned()))?,
            );
            mnemo.append(&stream, ExpectedRevision::NoStream, &records)?;
            baseline.append_batch(&payloads(&records)?)?;
            sessions += 1;
        }
        wait_indexed(&mnemo)?;
        progress(&format!("search: querying {messages} messages"));
        let mut mnemo_times = timed(SEARCH_SAMPLES, |query| search(&mnemo, query).map(drop))?;
        let mut baseline_times = timed(BASELINE_SEARCH_SAMPLES, |query| {
            baseline.substring_search(query, crate::harness::SEARCH_ROWS as u32).map(drop).map_err(Into::into)
        })?;
        for (name, at) in [("p50", 0.5), ("p99", 0.99)] {
            let (mine, theirs) = (quantile_ms(&mut mnemo_times, at), quantile_ms(&mut baseline_times, at));
            let judged = name == "p50" && messages == largest;
            results.push(WorkloadResult {
                name: format!("search_{name}_{messages}_messages"),
                unit: "ms".to_owned(),
                higher_is_better: false,
                mnemo: mine,
                baseline_name: "sqlite substring search (instr over lower(payload)), newest first".to_owned(),
                baseline: theirs,
                ratio: ratio(mine, theirs),
                target: if judged {
                    format!("p50 <= {SEARCH_P50_TARGET_MS} ms at the largest corpus")
                } else {
                    "reported".to_owned()
                },
                met: !judged || mine <= SEARCH_P50_TARGET_MS,
            });
        }
    }
    Ok(results)
}
