//! The scale workload: a corpus the size of a heavy coding-agent user's (a million messages by
//! default), shaped like real transcripts — one request followed by dozens to hundreds of tool
//! calls, tool results from a few hundred bytes to tens of kilobytes (file reads with line-number
//! gutters, test logs, search output), many sessions spread over many workspaces. It is imported
//! into a store running the default pipeline and into the SQLite baseline, then it measures:
//! - SearchHistory p50 and p99 over the whole corpus (the baseline: its substring search);
//! - the process's peak resident memory while searching, the open store included;
//! - the bytes written to storage to add one more session of [`ADDED_SESSION_MESSAGES`] messages
//!   (journal, flushes and whatever compaction it set off before the store closed), per message,
//!   against the message's own encoded size;
//! - bytes on disk per message of both stores.

use std::time::{Duration, Instant};

use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::{
    Author, Content, EventId, FunctionCall, FunctionResponse, InvocationId, MemoryMode, Record, Role, RunId,
    RuntimeEvent, SessionId, SessionOpened, StreamId, TextContent, ThinkingContent, TimestampMs, ToolCallId,
    TurnId, WorkspaceId,
};

use crate::baseline::Baseline;
use crate::harness::{
    BenchError, BenchOptions, IMPORT_CHUNK_RECORDS, WorkloadResult, fresh_dir, io, open_mnemo, payloads,
    quantile_ms, ratio,
};
use crate::probe;
use crate::search_workload::{QUERIES, SEARCH_P50_TARGET_MS, ZipfWords, search, wait_indexed};
use crate::workload::Rng;

/// Workspaces the sessions are spread over.
pub const WORKSPACES: u64 = 40;
/// Fewest and most messages of one generated session (a long agentic session has hundreds).
pub const SESSION_MESSAGES_MIN: u64 = 60;
/// See [`SESSION_MESSAGES_MIN`].
pub const SESSION_MESSAGES_MAX: u64 = 900;
/// Messages of the session added to the full corpus to measure write amplification.
pub const ADDED_SESSION_MESSAGES: u64 = 500;
/// Searches timed on Mnemo (the queries in turn).
pub const SCALE_SEARCH_SAMPLES: usize = 200;
/// Searches timed on the baseline: each scans the whole corpus.
pub const SCALE_BASELINE_SEARCH_SAMPLES: usize = 6;
/// Target: the search's peak resident memory, MiB.
pub const SEARCH_PEAK_RSS_TARGET_MIB: f64 = 256.0;
/// Target: bytes written to storage per byte of an added message.
pub const WRITE_AMPLIFICATION_TARGET: f64 = 4.0;

const MODULES: [&str; 12] = [
    "auth", "parser", "exporter", "ledger", "session", "config", "retry", "router", "schema", "billing",
    "index", "cache",
];

/// Generates one session's records: its opening in a workspace, then turns of a user request
/// followed by tool calls and their results, with thinking and short replies between them.
struct SessionShape<'w> {
    words: &'w ZipfWords,
    rng: Rng,
    session: SessionId,
    records: Vec<Record>,
    turn: u64,
    emitted: u64,
}

fn valid<T, E: std::fmt::Display>(value: Result<T, E>) -> T {
    // Generated ids are short ASCII and always valid; a failure here is a bug in the generator.
    value.unwrap_or_else(|e| panic!("generated value is invalid: {e}"))
}

impl<'w> SessionShape<'w> {
    fn new(words: &'w ZipfWords, seed: u64, index: u64) -> Self {
        SessionShape {
            words,
            rng: Rng::new(seed ^ index.wrapping_mul(0x9FB2_1C65_1E98_DF25)),
            session: valid(SessionId::new(format!("scale-{index:07}"))),
            records: Vec::new(),
            turn: 0,
            emitted: 0,
        }
    }

    fn event(&mut self, role: Role, author: Author, content: Content) {
        let run = format!("run-{}", self.turn);
        let mut event = RuntimeEvent::new(
            valid(EventId::new(format!("{}:{}", self.session, self.emitted))),
            valid(InvocationId::new(run.clone())),
            valid(RunId::new(run)),
            self.session.clone(),
            valid(TurnId::new(format!("t{}", self.turn))),
            TimestampMs(1_767_225_600_000 + self.emitted * 2_000),
            role,
            author,
        );
        event.content = Some(content);
        self.records.push(Record::RuntimeEvent(event));
        self.emitted += 1;
    }

    /// A tool result's size: most are a few hundred bytes to a couple of KiB, a quarter several
    /// KiB, one in twenty a large file or log of tens of KiB.
    fn result_bytes(&mut self) -> u64 {
        match self.rng.below(100) {
            0..=69 => 150 + self.rng.below(1_400),
            70..=94 => 1_500 + self.rng.below(4_500),
            _ => 6_000 + self.rng.below(26_000),
        }
    }

    fn path(&mut self) -> String {
        let module = MODULES[self.rng.below(MODULES.len() as u64) as usize];
        format!("src/{module}/{}.rs", self.words.sentence(&mut self.rng).split(' ').next().unwrap_or("mod"))
    }

    /// A file read as the agent sees it: numbered lines of code and comments.
    fn file_read(&mut self, path: &str, bytes: u64) -> String {
        let mut out = String::with_capacity(bytes as usize + 80);
        let mut line = 1;
        while (out.len() as u64) < bytes {
            let module = MODULES[self.rng.below(MODULES.len() as u64) as usize];
            let body = match self.rng.below(6) {
                0 => format!("pub fn {module}_{line}(input: &[u8]) -> Result<usize, Error> {{"),
                1 => format!("    // {}", self.words.sentence(&mut self.rng)),
                2 => format!("    let {module} = self.{module}.get(&key).ok_or(Error::Missing)?;"),
                3 => format!("    tracing::debug!(path = \"{path}\", \"{module} ready\");"),
                4 => "    Ok(total)".to_owned(),
                _ => "}".to_owned(),
            };
            out.push_str(&format!("{line:>6}\t{body}\n"));
            line += 1;
        }
        out
    }

    /// A test or build log, failing now and then with a compiler error.
    fn test_log(&mut self, bytes: u64) -> (String, bool) {
        let mut out = String::from("   Compiling app v0.9.0 (/home/dev/src/app)\n");
        let mut n = 0;
        while (out.len() as u64) < bytes {
            let module = MODULES[self.rng.below(MODULES.len() as u64) as usize];
            out.push_str(&format!("test {module}::tests::case_{n} ... ok\n"));
            n += 1;
        }
        let failed = self.rng.chance(15);
        if failed {
            let path = self.path();
            out.push_str(&format!(
                "error[E0{}]: {}\n  --> {path}:{}:14\n",
                599 + self.rng.below(20),
                self.words.sentence(&mut self.rng),
                1 + self.rng.below(400)
            ));
        } else {
            out.push_str(&format!("test result: ok. {n} passed; 0 failed\n"));
        }
        (out, failed)
    }

    /// Search output: `path:line: text` rows.
    fn grep_output(&mut self, bytes: u64) -> String {
        let mut out = String::with_capacity(bytes as usize + 80);
        while (out.len() as u64) < bytes {
            let path = self.path();
            out.push_str(&format!(
                "{path}:{}: {}\n",
                1 + self.rng.below(900),
                self.words.sentence(&mut self.rng)
            ));
        }
        out
    }

    fn tool_step(&mut self) {
        let call = valid(ToolCallId::new(format!("toolu_{}_{}", self.turn, self.emitted)));
        let bytes = self.result_bytes();
        let (name, args, result, failed) = match self.rng.below(10) {
            0..=3 => {
                let path = self.path();
                let text = self.file_read(&path, bytes);
                ("Read", serde_json::json!({ "file_path": path }), text, false)
            }
            4..=6 => {
                let (log, failed) = self.test_log(bytes);
                ("Bash", serde_json::json!({ "command": "cargo test --workspace" }), log, failed)
            }
            7..=8 => {
                let pattern = self.words.sentence(&mut self.rng);
                let text = self.grep_output(bytes);
                ("Grep", serde_json::json!({ "pattern": pattern, "path": "src" }), text, false)
            }
            _ => {
                let path = self.path();
                let old = self.words.sentence(&mut self.rng);
                let new = self.words.sentence(&mut self.rng);
                let args = serde_json::json!({ "file_path": path, "old_string": old, "new_string": new });
                ("Edit", args, format!("The file {path} has been updated."), false)
            }
        };
        self.event(
            Role::Model,
            Author::Agent,
            Content::FunctionCall(FunctionCall::new(call.clone(), name, args)),
        );
        let mut response = FunctionResponse::new(call, name, serde_json::Value::String(result));
        response.is_error = Some(failed);
        self.event(Role::Tool, Author::Tool, Content::FunctionResponse(response));
    }

    /// The session's records, `messages` events after its opening.
    fn generate(mut self, index: u64, messages: u64) -> Vec<Record> {
        let workspace = valid(WorkspaceId::new(format!("/home/dev/src/project-{:02}", index % WORKSPACES)));
        let title = format!(
            "{} {}",
            MODULES[(index % MODULES.len() as u64) as usize],
            self.words.sentence(&mut self.rng)
        );
        self.records.push(Record::SessionOpened(SessionOpened {
            session: self.session.clone(),
            workspace: Some(workspace),
            incognito: false,
            memory: MemoryMode::Enabled,
            subagent: false,
            title: Some(title),
            source: None,
            parent: None,
        }));
        while self.emitted < messages {
            let request = if self.rng.chance(10) {
                format!("<command-name>/review</command-name> {}", self.words.sentence(&mut self.rng))
            } else {
                self.words.sentence(&mut self.rng)
            };
            self.event(Role::User, Author::User, Content::Text(TextContent::new(request)));
            let steps = 5 + self.rng.below(40);
            for step in 0..steps {
                if self.emitted + 2 > messages {
                    break;
                }
                if step % 4 == 0 {
                    let thought = self.words.sentence(&mut self.rng);
                    self.event(Role::Model, Author::Agent, Content::Thinking(ThinkingContent::new(thought)));
                }
                self.tool_step();
            }
            if self.emitted < messages {
                let reply = self.words.sentence(&mut self.rng);
                self.event(Role::Model, Author::Agent, Content::Text(TextContent::new(reply)));
            }
            self.turn += 1;
        }
        self.records.truncate(messages as usize + 1);
        self.records
    }
}

/// The records of generated session `index` with `messages` messages.
pub fn scale_session(words: &ZipfWords, seed: u64, index: u64, messages: u64) -> Vec<Record> {
    SessionShape::new(words, seed, index).generate(index, messages)
}

/// Bytes this process has caused to be written to storage so far (`/proc/self/io`), if reported.
pub fn written_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let line = io.lines().find(|l| l.starts_with("write_bytes:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn encoded_bytes(records: &[Record]) -> Result<u64, BenchError> {
    let mut total = 0;
    for record in records {
        total += record.encode().map_err(mnemo::Error::from)?.len() as u64;
    }
    Ok(total)
}

fn stream_of(records: &[Record]) -> Result<StreamId, BenchError> {
    let session = records
        .first()
        .and_then(Record::session)
        .ok_or_else(|| BenchError::Chart("a generated session has no session id".to_owned()))?;
    Ok(StreamId::session(session))
}

fn append_session(mnemo: &mnemo::Mnemo, records: &[Record]) -> Result<(), BenchError> {
    let stream = stream_of(records)?;
    for chunk in records.chunks(IMPORT_CHUNK_RECORDS) {
        mnemo.append(&stream, ExpectedRevision::Any, chunk)?;
    }
    Ok(())
}

fn row(
    name: &str,
    unit: &str,
    mnemo: f64,
    baseline_name: &str,
    baseline: f64,
    target: String,
    met: bool,
) -> WorkloadResult {
    WorkloadResult {
        name: name.to_owned(),
        unit: unit.to_owned(),
        higher_is_better: false,
        mnemo,
        baseline_name: baseline_name.to_owned(),
        baseline,
        ratio: ratio(mnemo, baseline),
        target,
        met,
    }
}

/// Imports the corpus into both stores, then measures search and the cost of one more session.
pub fn scale(
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<WorkloadResult>, BenchError> {
    let words = ZipfWords::new();
    let mnemo_dir = fresh_dir(&options.out, "scale-mnemo")?;
    let sqlite_dir = fresh_dir(&options.out, "scale-sqlite")?;
    let mnemo = open_mnemo(&mnemo_dir, Durability::SyncData)?;
    let mut baseline = Baseline::open(&sqlite_dir)?;
    let mut rng = Rng::new(options.seed ^ 0x5CA1_E000);
    let (mut imported, mut sessions, mut corpus_bytes) = (0u64, 0u64, 0u64);
    let (mut mnemo_time, mut sqlite_time) = (Duration::ZERO, Duration::ZERO);
    while imported < options.scale_messages {
        if sessions % 50 == 0 {
            progress(&format!("scale: importing {imported} of {} messages", options.scale_messages));
        }
        let wanted = SESSION_MESSAGES_MIN + rng.below(SESSION_MESSAGES_MAX - SESSION_MESSAGES_MIN + 1);
        let messages = wanted.min(options.scale_messages - imported);
        let records = scale_session(&words, options.seed, sessions, messages);
        corpus_bytes += encoded_bytes(&records)?;
        let started = Instant::now();
        append_session(&mnemo, &records)?;
        mnemo_time += started.elapsed();
        let batch = payloads(&records)?;
        let started = Instant::now();
        for chunk in batch.chunks(IMPORT_CHUNK_RECORDS) {
            baseline.append_batch(chunk)?;
        }
        sqlite_time += started.elapsed();
        imported += messages;
        sessions += 1;
    }
    progress("scale: indexing");
    let started = Instant::now();
    wait_indexed(&mnemo)?;
    let indexing = started.elapsed();
    drop(mnemo);
    let import_rate = imported as f64 / (mnemo_time + indexing).as_secs_f64();
    let sqlite_rate = imported as f64 / sqlite_time.as_secs_f64().max(1e-9);

    progress("scale: searching");
    let mnemo = open_mnemo(&mnemo_dir, Durability::SyncData)?;
    wait_indexed(&mnemo)?;
    let rss_reset = probe::reset_peak_rss();
    let mut mnemo_times = Vec::with_capacity(SCALE_SEARCH_SAMPLES);
    for n in 0..SCALE_SEARCH_SAMPLES {
        let started = Instant::now();
        search(&mnemo, QUERIES[n % QUERIES.len()].1)?;
        mnemo_times.push(started.elapsed());
    }
    let peak_mib = probe::peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let mut baseline_times = Vec::with_capacity(SCALE_BASELINE_SEARCH_SAMPLES);
    for n in 0..SCALE_BASELINE_SEARCH_SAMPLES {
        let started = Instant::now();
        baseline.substring_search(QUERIES[n % QUERIES.len()].1, crate::harness::SEARCH_ROWS as u32)?;
        baseline_times.push(started.elapsed());
    }

    progress("scale: adding one session");
    let added = scale_session(&words, options.seed, sessions, ADDED_SESSION_MESSAGES);
    let added_bytes = encoded_bytes(&added)?.max(1) as f64;
    let before = written_bytes().unwrap_or(0);
    append_session(&mnemo, &added)?;
    wait_indexed(&mnemo)?;
    drop(mnemo);
    let mnemo_added = written_bytes().unwrap_or(0).saturating_sub(before) as f64;
    let before = written_bytes().unwrap_or(0);
    baseline.append_batch(&payloads(&added)?)?;
    drop(baseline);
    let baseline_added = written_bytes().unwrap_or(0).saturating_sub(before) as f64;
    let mnemo_disk = probe::disk_bytes(&mnemo_dir).map_err(io("disk usage of the scale store"))? as f64;
    let sqlite_disk = probe::disk_bytes(&sqlite_dir).map_err(io("disk usage of the scale baseline"))? as f64;

    let sqlite_search = "sqlite substring search (instr over lower(payload)), newest first";
    let (p50, p99) = (quantile_ms(&mut mnemo_times, 0.5), quantile_ms(&mut mnemo_times, 0.99));
    let (base_p50, base_p99) =
        (quantile_ms(&mut baseline_times, 0.5), quantile_ms(&mut baseline_times, 0.99));
    let messages = imported as f64;
    let amplification = mnemo_added / added_bytes;
    Ok(vec![
        WorkloadResult {
            name: format!("scale_import_{imported}_messages"),
            unit: "messages/s".to_owned(),
            higher_is_better: true,
            mnemo: import_rate,
            baseline_name: "sqlite, one transaction per 1000-message batch".to_owned(),
            baseline: sqlite_rate,
            ratio: ratio(import_rate, sqlite_rate),
            target: format!(
                "reported: {sessions} sessions in {WORKSPACES} workspaces, {:.0} MiB encoded; Mnemo appends and indexes every stage",
                corpus_bytes as f64 / (1024.0 * 1024.0)
            ),
            met: true,
        },
        row(
            "scale_search_p50",
            "ms",
            p50,
            sqlite_search,
            base_p50,
            format!("p50 <= {SEARCH_P50_TARGET_MS} ms"),
            p50 <= SEARCH_P50_TARGET_MS,
        ),
        row("scale_search_p99", "ms", p99, sqlite_search, base_p99, "reported".to_owned(), true),
        row(
            "scale_search_peak_rss",
            "MiB",
            peak_mib,
            if rss_reset { "limit" } else { "limit (peak not reset: whole process)" },
            SEARCH_PEAK_RSS_TARGET_MIB,
            format!("<= {SEARCH_PEAK_RSS_TARGET_MIB} MiB (the process while searching, open store included)"),
            peak_mib <= SEARCH_PEAK_RSS_TARGET_MIB,
        ),
        row(
            "scale_add_session_bytes_written_per_message",
            "bytes/message",
            mnemo_added / ADDED_SESSION_MESSAGES as f64,
            "sqlite, the same session in one transaction",
            baseline_added / ADDED_SESSION_MESSAGES as f64,
            format!(
                "<= {WRITE_AMPLIFICATION_TARGET}x the message's size ({:.0} B; at {amplification:.2}x)",
                added_bytes / ADDED_SESSION_MESSAGES as f64
            ),
            amplification <= WRITE_AMPLIFICATION_TARGET,
        ),
        row(
            "scale_bytes_on_disk_per_message",
            "bytes/message",
            mnemo_disk / messages.max(1.0),
            "sqlite database + WAL",
            sqlite_disk / messages.max(1.0),
            "reported".to_owned(),
            true,
        ),
    ])
}
