//! The store server's load run: many clients appending and searching at once on one server, each
//! call timed, every acknowledged append checked in the log afterwards. `mnemo bench --server` runs
//! it for 30 s and reports the latencies; the tests run it briefly.
//!
//! It uses: the Rust client ([`crate::client`]) and the methods' types, one client per thread; the
//! facade only after the run, to open the store and find every acknowledged append
//! ([`missing_acknowledged`]).
//!
//! It is not:
//! - part of the store server: it starts one as any client may, and uses nothing of the server's
//!   core (`tests/rooms.rs` checks it);
//! - a benchmark harness: it measures one thing and returns a [`LoadReport`]; `mnemo bench` writes
//!   the reports.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use mnemo::records::{
    Author, Content, EventId, InvocationId, Position, Record, RecordKind, Role, RunId, RuntimeEvent,
    SessionId, TextContent, TimestampMs, TurnId,
};
use mnemo::{Config, Mnemo};
use serde::Serialize;

use crate::client::{Client, ClientError, ConnectOptions};
use crate::methods::{
    Append, AppendParams, ExpectedRevision, SearchHistory, SearchHistoryParams, ToolContext, WireRecord,
};

/// Most clients one load run starts.
pub const LOAD_CLIENTS_MAX: usize = 1024;

/// The words appended texts are made of, so searches find them.
const WORDS: &[&str] = &["deploy", "release", "ledger", "socket", "replay", "budget", "cursor", "digest"];

/// What a load run does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadOptions {
    /// Concurrent clients, each on its own connection and thread.
    pub clients: usize,
    /// How long they keep calling.
    pub duration: Duration,
    /// How clients connect (a start command makes the first of them start the server).
    pub connect: ConnectOptions,
}

impl LoadOptions {
    /// `clients` clients for `duration`, connecting with `connect`.
    pub fn new(clients: usize, duration: Duration, connect: ConnectOptions) -> LoadOptions {
        LoadOptions { clients, duration, connect }
    }
}

/// Latencies of one kind of call, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Calls timed.
    pub calls: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Slowest.
    pub max_us: u64,
}

impl Latency {
    fn of(mut samples: Vec<Duration>) -> Latency {
        samples.sort_unstable();
        let at = |q: f64| -> u64 {
            if samples.is_empty() {
                return 0;
            }
            let index = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[index].as_micros() as u64
        };
        Latency { calls: samples.len() as u64, p50_us: at(0.50), p99_us: at(0.99), max_us: at(1.0) }
    }
}

/// What a load run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// Clients that ran.
    pub clients: usize,
    /// How long they ran, in milliseconds.
    pub elapsed_ms: u64,
    /// Acknowledged appends.
    pub appends: Latency,
    /// Answered searches.
    pub searches: Latency,
    /// Acknowledged appends per second over the run.
    pub appends_per_sec: u64,
    /// Calls the server refused as `overloaded` (each was retried).
    pub overloaded: u64,
    /// The id of every acknowledged appended event.
    #[serde(skip)]
    pub acknowledged: BTreeSet<String>,
}

/// Why a load run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A client failed (anything but `overloaded`, which is retried).
    #[error("load client {client}: {source}")]
    Client {
        client: usize,
        #[source]
        source: ClientError,
    },
    /// The options are out of range.
    #[error("{0}")]
    Options(String),
    /// A client thread could not start or panicked.
    #[error("load client thread: {0}")]
    Thread(String),
}

struct ClientRun {
    appends: Vec<Duration>,
    searches: Vec<Duration>,
    acknowledged: Vec<String>,
    overloaded: u64,
}

/// Runs the load: every client connects, then appends one event to its own session and runs one
/// search, in turn, until the duration is over.
pub fn run(store: &Path, options: &LoadOptions) -> Result<LoadReport, LoadError> {
    if !(1..=LOAD_CLIENTS_MAX).contains(&options.clients) {
        return Err(LoadError::Options(format!(
            "{} clients: a load run takes 1..={LOAD_CLIENTS_MAX}",
            options.clients
        )));
    }
    // The first client starts the server if needed, so the others do not all race to.
    let first =
        Client::connect(store, &options.connect).map_err(|source| LoadError::Client { client: 0, source })?;
    let began = Instant::now();
    let deadline = began + options.duration;
    let mut handles = Vec::new();
    let mut first = Some(first);
    for index in 0..options.clients {
        let client = first.take();
        let store = store.to_path_buf();
        let connect = options.connect.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-{index}"))
            .spawn(move || -> Result<ClientRun, LoadError> {
                let client = match client {
                    Some(client) => client,
                    None => Client::connect(&store, &connect)
                        .map_err(|source| LoadError::Client { client: index, source })?,
                };
                client_loop(index, client, deadline)
                    .map_err(|source| LoadError::Client { client: index, source })
            })
            .map_err(|e| LoadError::Thread(e.to_string()))?;
        handles.push(handle);
    }
    let mut appends = Vec::new();
    let mut searches = Vec::new();
    let mut acknowledged = BTreeSet::new();
    let mut overloaded = 0;
    let mut failure = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(run)) => {
                appends.extend(run.appends);
                searches.extend(run.searches);
                acknowledged.extend(run.acknowledged);
                overloaded += run.overloaded;
            }
            Ok(Err(error)) => failure = failure.or(Some(error)),
            Err(_) => failure = failure.or(Some(LoadError::Thread("a load client panicked".to_owned()))),
        }
    }
    if let Some(error) = failure {
        return Err(error);
    }
    let elapsed = began.elapsed();
    let appends = Latency::of(appends);
    Ok(LoadReport {
        clients: options.clients,
        elapsed_ms: elapsed.as_millis() as u64,
        appends_per_sec: (appends.calls as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)) as u64,
        appends,
        searches: Latency::of(searches),
        overloaded,
        acknowledged,
    })
}

fn client_loop(index: usize, mut client: Client, deadline: Instant) -> Result<ClientRun, ClientError> {
    let mut run =
        ClientRun { appends: Vec::new(), searches: Vec::new(), acknowledged: Vec::new(), overloaded: 0 };
    let session = format!("load-{index}");
    let mut sequence = 0_u64;
    while Instant::now() < deadline {
        let event_id = format!("load-{index}-{sequence}");
        let text = format!(
            "{} {} number {sequence} from client {index}",
            WORDS[sequence as usize % WORDS.len()],
            WORDS[(sequence as usize + index) % WORDS.len()]
        );
        let params = AppendParams {
            stream: format!("session/{session}"),
            expected_revision: ExpectedRevision::Any,
            records: vec![event_record(&session, &event_id, sequence, &text)?],
            durability: None,
        };
        let began = Instant::now();
        match client.call::<Append>(&params) {
            Ok(_) => {
                run.appends.push(began.elapsed());
                run.acknowledged.push(event_id);
                sequence += 1;
            }
            Err(ClientError::Rpc(error)) if error.reason() == crate::protocol::Reason::Overloaded => {
                run.overloaded += 1;
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(error) => return Err(error),
        }
        let search = SearchHistoryParams {
            query: WORDS[(sequence as usize * 3 + index) % WORDS.len()].to_owned(),
            limit: Some(5),
            cursor: None,
            context: ToolContext::default(),
            as_of: None,
        };
        let began = Instant::now();
        match client.call::<SearchHistory>(&search) {
            Ok(_) => run.searches.push(began.elapsed()),
            Err(ClientError::Rpc(error)) if error.reason() == crate::protocol::Reason::Overloaded => {
                run.overloaded += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => return Err(error),
        }
    }
    Ok(run)
}

/// A user text event of `session`, in `append`'s wire form.
fn event_record(session: &str, event: &str, sequence: u64, text: &str) -> Result<WireRecord, ClientError> {
    let invalid =
        |e: mnemo::records::IdError| ClientError::Protocol { method: "append", detail: e.to_string() };
    let mut record = RuntimeEvent::new(
        EventId::new(event).map_err(invalid)?,
        // Each user line starts a turn, with its own invocation and run (one invocation is one run
        // of one turn).
        InvocationId::new(format!("{session}-i{sequence}")).map_err(invalid)?,
        RunId::new(format!("{session}-r{sequence}")).map_err(invalid)?,
        SessionId::new(session).map_err(invalid)?,
        TurnId::new(format!("{session}-t{sequence}")).map_err(invalid)?,
        TimestampMs(1_767_225_600_000 + sequence),
        Role::User,
        Author::User,
    );
    record.content = Some(Content::Text(TextContent::new(text)));
    WireRecord::from_record(&Record::RuntimeEvent(record))
        .map_err(|e| ClientError::Protocol { method: "append", detail: e.to_string() })
}

/// The acknowledged events missing from the store's log: opens the store (its server must have
/// stopped) and reads every event id in it.
pub fn missing_acknowledged(store: &Path, report: &LoadReport) -> Result<Vec<String>, mnemo::Error> {
    let mnemo = Mnemo::open(store, Config::default())?;
    let mut found = BTreeSet::new();
    for envelope in mnemo.log().scan(Position::FIRST) {
        let envelope = envelope?;
        if envelope.kind != RecordKind::RuntimeEvent.code() {
            continue;
        }
        let record: serde_json::Value = serde_json::from_slice(&envelope.record)
            .map_err(|e| mnemo::Error::InvalidInput(format!("position {}: {e}", envelope.position)))?;
        if let Some(id) = record.get("id").and_then(serde_json::Value::as_str) {
            found.insert(id.to_owned());
        }
    }
    mnemo.close()?;
    Ok(report.acknowledged.difference(&found).cloned().collect())
}
