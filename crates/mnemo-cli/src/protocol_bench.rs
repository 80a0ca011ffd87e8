//! `mnemo bench --protocol`: what the host protocol costs. One workload — `calls` appends of one
//! event each to one session, then `calls` searches of 5 rows over them — run on a fresh store
//! through the in-process facade, through the Rust client, and through the TypeScript and Python
//! clients (their runners, `clients/typescript/bench/protocol.ts` and
//! `clients/python/protocol_bench.py`, do the same calls and print every latency). p50/p99 per
//! path, and each client's p50 over the facade's: the protocol's overhead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mnemo::history::{HistoryContext, HistorySearchRequest};
use mnemo::log::ExpectedRevision as FacadeExpected;
use mnemo::records::{
    Author, Content, EventId, InvocationId, Record, Role, RunId, RuntimeEvent, SessionId, StreamId,
    TextContent, TimestampMs, TurnId,
};
use mnemo::{Config, Mnemo};
use mnemo_server::client::{Client, ConnectOptions, StartCommand};
use mnemo_server::methods::{
    Append, AppendParams, Empty, ExpectedRevision, SearchHistory, SearchHistoryParams, Shutdown, ToolContext,
    WireRecord,
};
use serde::Serialize;

/// Most calls of each kind one run makes.
pub(crate) const PROTOCOL_CALLS_MAX: usize = 100_000;
/// The session every path appends to.
const SESSION: &str = "bench";
/// The first event's time; event `i` is `i` ms later.
const START_MS: u64 = 1_767_225_600_000;
/// The words the texts are made of and the searches look for (the runners use the same list).
const WORDS: &[&str] = &["deploy", "release", "ledger", "socket", "replay", "budget", "cursor", "digest"];
/// Rows each search asks for.
const SEARCH_LIMIT: i64 = 5;

/// Latencies of one kind of call, in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Latency {
    calls: usize,
    p50_us: u64,
    p99_us: u64,
}

impl Latency {
    fn of(mut samples: Vec<u64>) -> Latency {
        samples.sort_unstable();
        let at = |q: f64| -> u64 {
            if samples.is_empty() {
                return 0;
            }
            let index = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[index]
        };
        Latency { calls: samples.len(), p50_us: at(0.50), p99_us: at(0.99) }
    }
}

/// One path's result: its latencies, or why it did not run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    path: String,
    append: Option<Latency>,
    search: Option<Latency>,
    /// The append p50 over the in-process facade's, in microseconds.
    append_overhead_p50_us: Option<i64>,
    /// The search p50 over the in-process facade's, in microseconds.
    search_overhead_p50_us: Option<i64>,
    skipped: Option<String>,
}

impl Row {
    fn measured(path: &str, samples: Samples) -> Row {
        Row {
            path: path.to_owned(),
            append: Some(Latency::of(samples.append_us)),
            search: Some(Latency::of(samples.search_us)),
            append_overhead_p50_us: None,
            search_overhead_p50_us: None,
            skipped: None,
        }
    }

    fn skipped(path: &str, why: String) -> Row {
        Row {
            path: path.to_owned(),
            append: None,
            search: None,
            append_overhead_p50_us: None,
            search_overhead_p50_us: None,
            skipped: Some(why),
        }
    }
}

/// Every latency of one path, in microseconds, in call order.
#[derive(Debug, Default, serde::Deserialize)]
struct Samples {
    append_us: Vec<u64>,
    search_us: Vec<u64>,
}

/// The report `out/protocol-overhead.json` holds.
#[derive(Debug, Serialize)]
pub(crate) struct ProtocolReport {
    workload: String,
    calls: usize,
    rows: Vec<Row>,
}

/// Runs every path on its own fresh store under `out`; `clients` is the repository's `clients/`.
pub(crate) fn run(out: &Path, calls: usize, clients: &Path) -> anyhow::Result<ProtocolReport> {
    if !(1..=PROTOCOL_CALLS_MAX).contains(&calls) {
        anyhow::bail!("--protocol-calls {calls}: a run takes 1..={PROTOCOL_CALLS_MAX}");
    }
    std::fs::create_dir_all(out)?;
    let base = std::path::absolute(out.join(format!("protocol-{}", std::process::id())))?;
    std::fs::create_dir_all(&base)?;
    let mnemo_bin = std::env::current_exe()?;
    let mut rows = vec![Row::measured("in-process facade", facade(&base.join("facade"), calls)?)];
    rows.push(Row::measured("rust client", rust_client(&base.join("rust"), &mnemo_bin, calls)?));
    let ts_runner = clients.join("typescript/dist/bench/protocol.js");
    rows.push(other("typescript client", "node", &[ts_runner], &base.join("ts"), &mnemo_bin, calls));
    let py_runner = clients.join("python/protocol_bench.py");
    rows.push(other("python client", "python3", &[py_runner], &base.join("py"), &mnemo_bin, calls));
    std::fs::remove_dir_all(&base)?;
    let (append_base, search_base) = match (&rows[0].append, &rows[0].search) {
        (Some(a), Some(s)) => (a.p50_us as i64, s.p50_us as i64),
        _ => (0, 0),
    };
    for row in &mut rows[1..] {
        row.append_overhead_p50_us = row.append.map(|a| a.p50_us as i64 - append_base);
        row.search_overhead_p50_us = row.search.map(|s| s.p50_us as i64 - search_base);
    }
    Ok(ProtocolReport {
        workload: format!(
            "{calls} appends of one event each to one session, then {calls} searches of {SEARCH_LIMIT} rows, \
             one call at a time, on a fresh store per path"
        ),
        calls,
        rows,
    })
}

/// The report as a table.
pub(crate) fn table(report: &ProtocolReport) -> String {
    let mut text = format!("protocol overhead: {}\n", report.workload);
    text.push_str(&format!(
        "  {:<18} {:>11} {:>9} {:>11} {:>9} {:>12} {:>12}\n",
        "path", "append p50", "p99", "search p50", "p99", "append +p50", "search +p50"
    ));
    let us = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v} µs"));
    let plus = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:+} µs"));
    for row in &report.rows {
        if let Some(why) = &row.skipped {
            text.push_str(&format!("  {:<18} skipped: {why}\n", row.path));
            continue;
        }
        text.push_str(&format!(
            "  {:<18} {:>11} {:>9} {:>11} {:>9} {:>12} {:>12}\n",
            row.path,
            us(row.append.map(|l| l.p50_us)),
            us(row.append.map(|l| l.p99_us)),
            us(row.search.map(|l| l.p50_us)),
            us(row.search.map(|l| l.p99_us)),
            plus(row.append_overhead_p50_us),
            plus(row.search_overhead_p50_us),
        ));
    }
    text
}

/// Event `i` of the workload.
fn event(i: usize) -> anyhow::Result<Record> {
    let mut record = RuntimeEvent::new(
        EventId::new(format!("bench-{i}"))?,
        InvocationId::new(format!("bench-run-{i}"))?,
        RunId::new(format!("bench-run-{i}"))?,
        SessionId::new(SESSION)?,
        TurnId::new(format!("t{i}"))?,
        TimestampMs(START_MS + i as u64),
        Role::User,
        Author::User,
    );
    record.content = Some(Content::Text(TextContent::new(text(i))));
    Ok(Record::RuntimeEvent(record))
}

fn text(i: usize) -> String {
    format!("{} {} number {i}", WORDS[i % WORDS.len()], WORDS[(i * 3) % WORDS.len()])
}

fn query(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

fn micros(elapsed: Duration) -> u64 {
    elapsed.as_micros() as u64
}

fn facade(store: &Path, calls: usize) -> anyhow::Result<Samples> {
    let mnemo = Mnemo::open(store, Config::default())?;
    let stream = StreamId::new(format!("session/{SESSION}"))?;
    let mut samples = Samples::default();
    for i in 0..calls {
        let record = event(i)?;
        let began = Instant::now();
        mnemo.append(&stream, FacadeExpected::Any, &[record])?;
        samples.append_us.push(micros(began.elapsed()));
    }
    let context = HistoryContext::default();
    for i in 0..calls {
        let request =
            HistorySearchRequest { query: query(i).to_owned(), limit: Some(SEARCH_LIMIT), cursor: None };
        let began = Instant::now();
        let found = mnemo.history().search(&request, &context, None)?;
        samples.search_us.push(micros(began.elapsed()));
        if let Err(failure) = found {
            anyhow::bail!("in-process search {:?} refused: {failure}", request.query);
        }
    }
    mnemo.close()?;
    Ok(samples)
}

fn rust_client(store: &Path, mnemo_bin: &Path, calls: usize) -> anyhow::Result<Samples> {
    let start = StartCommand::mnemo(mnemo_bin, store).arg("--idle-exit").arg("60");
    let mut client =
        Client::connect(store, &ConnectOptions::new("mnemo bench --protocol").start_with(start))?;
    let mut samples = Samples::default();
    for i in 0..calls {
        let params = AppendParams {
            stream: format!("session/{SESSION}"),
            expected_revision: ExpectedRevision::Any,
            records: vec![WireRecord::from_record(&event(i)?)?],
            durability: None,
        };
        let began = Instant::now();
        client.call::<Append>(&params)?;
        samples.append_us.push(micros(began.elapsed()));
    }
    for i in 0..calls {
        let params = SearchHistoryParams {
            query: query(i).to_owned(),
            limit: Some(SEARCH_LIMIT),
            cursor: None,
            context: ToolContext::default(),
            as_of: None,
        };
        let began = Instant::now();
        client.call::<SearchHistory>(&params)?;
        samples.search_us.push(micros(began.elapsed()));
    }
    client.call::<Shutdown>(&Empty {})?;
    Ok(samples)
}

/// Another language's runner: `program args.. STORE MNEMO_BIN CALLS`, printing `Samples` as JSON.
fn other(path: &str, program: &str, args: &[PathBuf], store: &Path, mnemo_bin: &Path, calls: usize) -> Row {
    if let Some(missing) = args.iter().find(|a| !a.is_file()) {
        return Row::skipped(path, format!("no runner at {} (build the client first)", missing.display()));
    }
    let output = Command::new(program).args(args).arg(store).arg(mnemo_bin).arg(calls.to_string()).output();
    let output = match output {
        Ok(output) => output,
        Err(e) => return Row::skipped(path, format!("{program} did not start: {e}")),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Row::skipped(path, format!("the runner failed ({}): {}", output.status, stderr.trim()));
    }
    match serde_json::from_slice::<Samples>(&output.stdout) {
        Ok(samples) if samples.append_us.len() == calls && samples.search_us.len() == calls => {
            Row::measured(path, samples)
        }
        Ok(samples) => Row::skipped(
            path,
            format!(
                "the runner timed {} appends and {} searches, not {calls}",
                samples.append_us.len(),
                samples.search_us.len()
            ),
        ),
        Err(e) => Row::skipped(path, format!("the runner's output is not its latencies: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

    use super::*;

    #[test]
    fn percentiles_are_taken_from_the_sorted_samples() {
        let latency = Latency::of((1..=200).rev().collect());
        assert_eq!((latency.calls, latency.p50_us, latency.p99_us), (200, 100, 198));
        let one = Latency::of(vec![7]);
        assert_eq!((one.p50_us, one.p99_us), (7, 7));
    }

    #[test]
    fn a_missing_runner_is_a_skipped_row_that_says_where_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("typescript/dist/bench/protocol.js");
        let row =
            other("typescript client", "node", std::slice::from_ref(&runner), dir.path(), dir.path(), 3);
        assert!(row.append.is_none() && row.search.is_none());
        assert!(row.skipped.unwrap().contains(&runner.display().to_string()));
        let table =
            table(&ProtocolReport { workload: "w".to_owned(), calls: 3, rows: vec![row_for_table()] });
        assert!(table.contains("+5 µs"), "{table}");
    }

    fn row_for_table() -> Row {
        let mut row =
            Row::measured("rust client", Samples { append_us: vec![10, 12], search_us: vec![20, 22] });
        row.append_overhead_p50_us = Some(5);
        row
    }

    #[test]
    fn every_path_makes_the_same_events() {
        let Record::RuntimeEvent(first) = event(0).unwrap() else { panic!("not an event") };
        assert_eq!(first.id.as_str(), "bench-0");
        assert_eq!(text(9), "release socket number 9");
        assert_eq!(query(9), "release");
    }
}
