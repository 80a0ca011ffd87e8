//! The store server in this process, its Rust client, and raw frames on its socket: the handshake,
//! every method family on a store built from real Claude Code sessions, the typed errors, the frame
//! limit, the socket's privacy, and a shutdown that answers every admitted call.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod common;
use common::{start, stop};

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mnemo_server::client::{Client, ClientError, ConnectOptions};
use mnemo_server::methods::{
    Append, AppendParams, Empty, ExpectedRevision, Import, ImportParams, Ping, ReadHistory,
    ReadHistoryParams, SearchHistory, SearchHistoryParams, Session, SessionParams, Sessions, Shutdown, Stats,
    ToolContext, Transcript, TranscriptParams, WireRecord,
};
use mnemo_server::protocol::Reason;
use mnemo_server::server::{ServeOptions, StopCause, serve};
use serde_json::{Value, json};

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real/claude-code").join(path)
}

fn client(store: &Path) -> Client {
    Client::connect(store, &ConnectOptions::new("test")).unwrap()
}

/// A user text event of session `s1` in `append`'s wire form.
fn event(id: &str, text: &str) -> WireRecord {
    use mnemo::records::*;
    let mut event = RuntimeEvent::new(
        EventId::new(id).unwrap(),
        InvocationId::new("r").unwrap(),
        RunId::new("r").unwrap(),
        SessionId::new("s1").unwrap(),
        TurnId::new("t1").unwrap(),
        TimestampMs(1_767_225_600_000),
        Role::User,
        Author::User,
    );
    event.content = Some(Content::Text(TextContent::new(text)));
    WireRecord::from_record(&Record::RuntimeEvent(event)).unwrap()
}

/// A raw connection: frames in, frames out.
struct Raw {
    write: UnixStream,
    read: BufReader<UnixStream>,
}

impl Raw {
    fn open(store: &Path) -> Raw {
        let stream = UnixStream::connect(store.join("server.sock")).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Raw { read: BufReader::new(stream.try_clone().unwrap()), write: stream }
    }

    fn send(&mut self, frame: &[u8]) {
        self.write.write_all(frame).unwrap();
        self.write.write_all(b"\n").unwrap();
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.read.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, frame: Value) -> Value {
        self.send(frame.to_string().as_bytes());
        self.answer()
    }
}

#[test]
fn a_store_of_real_sessions_answers_every_method_family_through_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut client = client(&store);
    assert_eq!(client.server().protocol_version, 1);
    assert_eq!(client.server().store, std::path::absolute(&store).unwrap().display().to_string());

    let session_file = fixture("small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    let imported = client
        .call::<Import>(&ImportParams {
            path: Some(session_file.display().to_string()),
            text: None,
            source: None,
            format: Some("claude-code".to_owned()),
        })
        .unwrap();
    assert!(imported["records"].as_u64().unwrap() > 0, "{imported:?}");
    // The same file again appends nothing: import is repeatable.
    let again = client
        .call::<Import>(&ImportParams {
            path: Some(session_file.display().to_string()),
            text: None,
            source: None,
            format: None,
        })
        .unwrap();
    assert_eq!(again["status"], "already_complete", "{again:?}");
    // One of its sub-agents, recorded by Claude Code in a file of its own.
    let subagent_file = fixture("small-with-subagents/agent-36541525.jsonl");
    let sub = client
        .call::<Import>(&ImportParams {
            path: Some(subagent_file.display().to_string()),
            text: None,
            source: None,
            format: None,
        })
        .unwrap();
    assert!(sub["records"].as_u64().unwrap() > 0, "{sub:?}");

    let sessions = client.call::<Sessions>(&Empty {}).unwrap();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    // One session by its id, as the catalog holds it; an unknown one is null.
    let one = |session: &str| SessionParams { session: session.to_owned() };
    let summary = client.call::<Session>(&one("4c2ddfdc-b619-4525-8d03-1950fb1b0257")).unwrap().unwrap();
    let listed = sessions.iter().find(|s| s.session == "4c2ddfdc-b619-4525-8d03-1950fb1b0257").unwrap();
    assert_eq!(summary["workspace"], "/tmp/private", "{summary:?}");
    assert_eq!(summary["event_count"].as_u64(), Some(listed.event_count), "{summary:?}");
    assert_eq!(summary["turn_count"].as_u64(), Some(listed.turn_count), "{summary:?}");
    assert_eq!(client.call::<Session>(&one("nobody")).unwrap(), None);
    let main = sessions
        .iter()
        .find(|s| s.session == "4c2ddfdc-b619-4525-8d03-1950fb1b0257")
        .expect("the main session's row");
    assert_eq!(main.workspace.as_deref(), Some("/tmp/private"));
    // Each row names the format its session came from and, for a sub-agent, its parent.
    assert_eq!(main.source.as_deref(), Some("claude-code"), "{main:?}");
    assert_eq!(main.parent, None, "{main:?}");
    assert!(!main.subagent, "{main:?}");
    let subagent = sessions.iter().find(|s| s.subagent).expect("the sub-agent's row");
    assert_eq!(subagent.source.as_deref(), Some("claude-code"), "{subagent:?}");
    assert_eq!(subagent.parent.as_deref(), Some(main.session.as_str()), "{subagent:?}");
    let wire = serde_json::to_value(subagent).unwrap();
    assert_eq!(wire["source"], "claude-code", "{wire}");
    assert_eq!(wire["parent"], main.session.as_str(), "{wire}");

    let found = client
        .call::<SearchHistory>(&SearchHistoryParams {
            query: "hello.py".to_owned(),
            limit: Some(3),
            cursor: None,
            context: ToolContext::default(),
            as_of: None,
        })
        .unwrap();
    let hit = found.rows.first().expect("a match for hello.py");
    assert_eq!(hit.session_id, main.session);
    let read = client
        .call::<ReadHistory>(&ReadHistoryParams {
            session_id: hit.session_id.clone(),
            message_id: hit.message_id.clone(),
            turn_id: None,
            before: Some(1),
            after: Some(1),
            context: ToolContext::default(),
            as_of: None,
        })
        .unwrap();
    assert_eq!(read.anchor_message_id, hit.message_id);
    // The hit may be a tool call found by its arguments: its turn is shown around it.
    assert!(read.turns.iter().any(|t| Some(&t.turn_id) == hit.turn_id.as_ref()));

    // Time travel: as of position 1 the session has no messages yet.
    let early = client
        .call::<Transcript>(&TranscriptParams { session: hit.session_id.clone(), as_of: Some(1) })
        .unwrap();
    let now = client
        .call::<Transcript>(&TranscriptParams { session: hit.session_id.clone(), as_of: None })
        .unwrap();
    let count = |t: &Option<serde_json::Map<String, Value>>| {
        t.as_ref().map_or(0, |t| t["messages"].as_array().unwrap().len())
    };
    assert!(count(&early) < count(&now), "{} vs {}", count(&early), count(&now));

    let stats = client.call::<Stats>(&Empty {}).unwrap();
    assert_eq!(stats["sessions"], 2);

    let report = stop(&store, server);
    assert_eq!(report.stopped_by, StopCause::Request);
    assert!(report.calls >= 8, "{report:?}");
    assert!(!store.join("server.sock").exists(), "the socket outlived its server");
}

#[test]
fn the_socket_is_private_and_the_handshake_is_required_and_versioned() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&store.join("server.sock")), 0o600);
    assert_eq!(mode(&store), 0o700);

    let mut raw = Raw::open(&store);
    let early = raw.call(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(early["error"]["data"]["reason"], "not_initialized", "{early}");
    assert_eq!(early["error"]["code"], -32600);
    let wrong = raw
        .call(json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocol_version": 99}}));
    assert_eq!(wrong["error"]["data"]["reason"], "unsupported_protocol_version", "{wrong}");
    assert_eq!(wrong["error"]["data"]["supported"], json!([1]));
    let ok = raw.call(
        json!({"jsonrpc": "2.0", "id": "a", "method": "initialize", "params": {"protocol_version": 1}}),
    );
    assert_eq!(ok["id"], "a");
    assert_eq!(ok["result"]["protocol_version"], 1, "{ok}");
    let twice = raw
        .call(json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocol_version": 1}}));
    assert_eq!(twice["error"]["data"]["reason"], "already_initialized");
    let ping = raw.call(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    assert_eq!(ping["result"], json!({}));
    drop(raw);
    stop(&store, server);
}

#[test]
fn bad_frames_get_typed_errors_and_the_connection_survives_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    raw.call(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocol_version": 1}}));

    raw.send(b"{not json");
    assert_eq!(raw.answer()["error"]["data"]["reason"], "parse_error");
    raw.send(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
    assert_eq!(raw.answer()["error"]["data"]["reason"], "invalid_request");
    let unknown = raw.call(json!({"jsonrpc": "2.0", "id": 2, "method": "history/grep"}));
    assert_eq!(unknown["error"]["data"]["reason"], "method_not_found");
    assert_eq!(unknown["error"]["code"], -32601);
    let misspelt =
        raw.call(json!({"jsonrpc": "2.0", "id": 3, "method": "history/search", "params": {"qeury": "x"}}));
    assert_eq!(misspelt["error"]["data"]["reason"], "invalid_params", "{misspelt}");
    let refused = raw.call(json!({"jsonrpc": "2.0", "id": 4, "method": "history/search", "params": {"query": "hello", "limit": 99}}));
    assert_eq!(refused["error"]["data"]["reason"], "tool_refused", "{refused}");
    assert_eq!(refused["error"]["data"]["tool_reason"], "invalid_arguments");

    // One byte over the frame limit: skipped through its newline, answered with a null id.
    let mut huge = br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":""#.to_vec();
    huge.resize(mnemo_server::limits::FRAME_BYTES_MAX + 1 - 3, b'x');
    huge.extend_from_slice(b"\"}}");
    assert_eq!(huge.len(), mnemo_server::limits::FRAME_BYTES_MAX + 1);
    raw.send(&huge);
    let too_large = raw.answer();
    assert_eq!(too_large["error"]["data"]["reason"], "frame_too_large", "{too_large}");
    assert_eq!(too_large["id"], Value::Null);
    assert_eq!(too_large["error"]["data"]["limit"], mnemo_server::limits::FRAME_BYTES_MAX);
    let after = raw.call(json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}));
    assert_eq!(after["result"], json!({}), "the connection did not survive the large frame");
    drop(raw);
    stop(&store, server);
}

#[test]
fn an_append_at_the_wrong_revision_is_a_conflict_carrying_expected_and_actual() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut client = client(&store);
    let record = |id: &str| event(id, "hello there");
    let appended = client
        .call::<Append>(&AppendParams {
            stream: "session/s1".to_owned(),
            expected_revision: ExpectedRevision::NoStream,
            records: vec![record("e1")],
            durability: None,
        })
        .unwrap();
    assert_eq!((appended.first_position, appended.last_revision), (1, 0));
    let conflict = client
        .call::<Append>(&AppendParams {
            stream: "session/s1".to_owned(),
            expected_revision: ExpectedRevision::Exact(5),
            records: vec![record("e2")],
            durability: None,
        })
        .unwrap_err();
    let ClientError::Rpc(error) = conflict else { panic!("{conflict}") };
    assert_eq!(error.reason(), Reason::Conflict);
    assert_eq!((error.data.expected.as_deref(), error.data.actual.as_deref()), (Some("5"), Some("0")));
    let bad_kind = client
        .call::<Append>(&AppendParams {
            stream: "session/s1".to_owned(),
            expected_revision: ExpectedRevision::Any,
            records: vec![serde_json::from_value(json!({"kind": "runtime_evnt", "record": {}})).unwrap()],
            durability: None,
        })
        .unwrap_err();
    assert!(bad_kind.to_string().contains("records[0]: unknown kind \"runtime_evnt\""), "{bad_kind}");
    drop(client);
    stop(&store, server);
}

#[test]
fn a_second_server_on_a_served_store_refuses_and_leaves_the_socket_to_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut options = ServeOptions::default();
    options.idle_exit = None;
    let second = serve(&store, options).unwrap_err();
    assert!(second.to_string().contains("locked"), "{second}");
    client(&store).call::<Ping>(&Empty {}).unwrap();
    stop(&store, server);
}

#[test]
fn shutdown_answers_every_admitted_call_before_the_store_closes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    raw.call(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocol_version": 1}}));
    // Pipelined: twenty appends, then a shutdown on another connection while they run.
    for i in 1..=20 {
        let record = event(&format!("e{i}"), &format!("message {i}"));
        let frame = json!({"jsonrpc": "2.0", "id": i, "method": "append",
            "params": {"stream": "session/s1", "expected_revision": "any", "records": [record]}});
        raw.send(frame.to_string().as_bytes());
    }
    client(&store).call::<Shutdown>(&Empty {}).unwrap();
    let mut acknowledged = 0;
    let mut refused = 0;
    for _ in 1..=20 {
        let answer = raw.answer();
        if answer.get("result").is_some() {
            acknowledged += 1;
        } else {
            assert_eq!(answer["error"]["data"]["reason"], "shutting_down", "{answer}");
            refused += 1;
        }
    }
    assert_eq!(acknowledged + refused, 20);
    server.join().unwrap();
    let mnemo = mnemo::Mnemo::open(&store, mnemo::Config::default()).unwrap();
    assert_eq!(mnemo.log().head().0, acknowledged, "the log holds exactly the acknowledged appends");
    mnemo.close().unwrap();
}

#[test]
fn a_connection_over_the_limit_gets_one_overloaded_answer_and_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut held = Vec::new();
    for _ in 0..mnemo_server::limits::CONNECTIONS_MAX {
        let mut raw = Raw::open(&store);
        let ok = raw.call(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocol_version": 1}}),
        );
        assert_eq!(ok["result"]["protocol_version"], 1);
        held.push(raw);
    }
    let mut over = Raw::open(&store);
    let answer = over.answer();
    assert_eq!(answer["error"]["data"]["reason"], "overloaded", "{answer}");
    assert_eq!(answer["error"]["data"]["limit"], mnemo_server::limits::CONNECTIONS_MAX);
    let mut rest = String::new();
    assert_eq!(over.read.read_line(&mut rest).unwrap(), 0, "the connection stayed open: {rest}");
    // One closes; a new connection is served.
    drop(held.pop());
    let began = Instant::now();
    loop {
        let mut raw = Raw::open(&store);
        let answer = raw.call(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocol_version": 1}}),
        );
        if answer.get("result").is_some() {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(10), "{answer}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    stop(&store, server);
}

#[test]
fn log_reads_one_stream_from_a_revision_or_its_last_envelopes_without_the_others() {
    use mnemo_server::methods::{Log, LogParams};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut client = client(&store);
    for file in
        ["incremental-simple/turn-2.jsonl", "small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"]
    {
        let params = ImportParams {
            path: Some(fixture(file).display().to_string()),
            text: None,
            source: None,
            format: None,
        };
        client.call::<Import>(&params).unwrap();
    }
    let stream = "session/4c2ddfdc-b619-4525-8d03-1950fb1b0257".to_owned();
    let all = client.call::<Log>(&LogParams { limit: Some(1000), ..LogParams::default() }).unwrap();
    let expected: Vec<&serde_json::Map<String, Value>> =
        all.iter().filter(|e| e["stream"] == stream.as_str()).collect();
    assert!(expected.len() > 3 && expected.len() < all.len(), "two sessions in the log");
    let mut read = |params: LogParams| client.call::<Log>(&params);
    let whole =
        read(LogParams { limit: Some(1000), stream: Some(stream.clone()), ..LogParams::default() }).unwrap();
    assert_eq!(whole.iter().collect::<Vec<_>>(), expected, "exactly that stream's envelopes, in order");
    let from_two =
        read(LogParams { from: Some(2), limit: Some(2), stream: Some(stream.clone()), last: false }).unwrap();
    assert_eq!(from_two.iter().map(|e| e["revision"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 3]);
    let tail =
        read(LogParams { limit: Some(2), stream: Some(stream.clone()), last: true, ..LogParams::default() })
            .unwrap();
    assert_eq!(tail.iter().collect::<Vec<_>>(), expected[expected.len() - 2..], "the stream's last two");
    let none =
        read(LogParams { limit: Some(5), stream: Some("session/nobody".into()), last: true, from: None })
            .unwrap();
    assert!(none.is_empty());
    for refused in [
        LogParams { limit: Some(1), last: true, ..LogParams::default() },
        LogParams { from: Some(1), limit: Some(1), stream: Some(stream.clone()), last: true },
        LogParams { limit: Some(1), stream: Some("elsewhere/x".into()), ..LogParams::default() },
    ] {
        match read(refused.clone()) {
            Err(ClientError::Rpc(error)) => assert_eq!(error.reason(), Reason::InvalidParams, "{refused:?}"),
            other => panic!("{refused:?} was not refused: {other:?}"),
        }
    }
    drop(client);
    stop(&store, server);
}

#[test]
fn a_null_result_reaches_the_rust_client_as_none_not_as_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut client = client(&store);
    let unknown = TranscriptParams { session: "nobody".to_owned(), as_of: None };
    assert_eq!(client.call::<Transcript>(&unknown).unwrap(), None);
    drop(client);
    stop(&store, server);
}

#[test]
fn log_head_is_the_last_position_and_moves_with_each_append() {
    use mnemo_server::methods::{Log, LogHead, LogParams};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut client = client(&store);
    assert_eq!(client.call::<LogHead>(&Empty {}).unwrap().position, 0, "an empty log's head is 0");
    let params = ImportParams {
        path: Some(fixture("incremental-simple/turn-2.jsonl").display().to_string()),
        text: None,
        source: None,
        format: None,
    };
    client.call::<Import>(&params).unwrap();
    let head = client.call::<LogHead>(&Empty {}).unwrap().position;
    let all = client.call::<Log>(&LogParams { limit: Some(1000), ..LogParams::default() }).unwrap();
    assert_eq!(Some(head), all.last().and_then(|e| e["position"].as_u64()), "the last envelope's position");
    let appended = client
        .call::<Append>(&AppendParams {
            stream: "session/s1".to_owned(),
            expected_revision: ExpectedRevision::Any,
            records: vec![event("head-1", "one more")],
            durability: None,
        })
        .unwrap();
    assert_eq!(client.call::<LogHead>(&Empty {}).unwrap().position, appended.last_position);
    drop(client);
    stop(&store, server);
}

/// Before: a `capture` imported the transcript and nothing extracted it, so a session start in
/// the same project got no memory until someone ran `mnemo memory extract`.
#[test]
fn a_capture_alone_sets_off_extraction_and_the_next_start_block_carries_what_was_said() {
    use mnemo_server::methods::{Capture, CaptureParams, StartBlock, StartBlockParams};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let transcript = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mnemo/tests/fixtures/memory/claude-code-standing-instructions.jsonl");
    let captured = client(&store)
        .call::<Capture>(&CaptureParams { path: transcript.display().to_string(), format: None })
        .unwrap();
    assert_eq!(captured["outcome"], "imported", "{captured:?}");
    // Extraction runs behind the answer: wait for it, however long it takes.
    let params =
        StartBlockParams { workspace: Some("/home/dev/queue".to_owned()), ..StartBlockParams::default() };
    let deadline = Instant::now() + Duration::from_secs(600);
    let block = loop {
        let block = client(&store).call::<StartBlock>(&params).unwrap();
        if block.text.contains("never push to main without asking them") {
            break block;
        }
        assert!(Instant::now() < deadline, "no extraction followed the capture: {block:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(block.standing >= 1, "{block:?}");
    assert!(block.tokens <= 1_500, "{block:?}");
    stop(&store, server);
}
