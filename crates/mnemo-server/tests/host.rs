//! The host methods over raw frames: the model seams called back over the connection (a summary
//! that lands in the checkpoint, a client that does not answer in time, a client that goes away),
//! the tail subscription, compaction, copy, memory's item operations, rebuild and export, and bad
//! input that leaves the store unchanged while other clients are served.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on the first unexpected error"
)]

mod common;
use common::{start, stop};

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use mnemo_server::client::{Client, ConnectOptions};
use mnemo_server::methods::{Empty, WireRecord};
use serde_json::{Value, json};

/// A raw, initialized connection: frames in, frames out, its own ids.
struct Raw {
    write: UnixStream,
    read: BufReader<UnixStream>,
    next: u64,
}

impl Raw {
    fn open(store: &Path) -> Raw {
        let stream = UnixStream::connect(store.join("server.sock")).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut raw = Raw { read: BufReader::new(stream.try_clone().unwrap()), write: stream, next: 1 };
        let hello = raw.call("initialize", json!({"protocol_version": 1}));
        assert!(hello.get("result").is_some(), "{hello}");
        raw
    }

    fn send_value(&mut self, frame: &Value) {
        self.write.write_all(frame.to_string().as_bytes()).unwrap();
        self.write.write_all(b"\n").unwrap();
    }

    fn frame(&mut self) -> Value {
        let mut line = String::new();
        self.read.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// Sends a request; returns its id.
    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send_value(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Calls and returns the answer, skipping notifications.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let frame = self.frame();
            if frame["id"] == json!(id) {
                return frame;
            }
            assert!(frame.get("method").is_some(), "an answer to another call: {frame}");
        }
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let answer = self.call(method, params);
        answer.get("result").cloned().unwrap_or_else(|| panic!("{method}: {answer}"))
    }
}

/// A text event of `session`'s `turn` in `append`'s wire form.
fn text(session: &str, turn: &str, id: &str, user: bool, body: &str) -> WireRecord {
    use mnemo::records::*;
    let (role, author) = if user { (Role::User, Author::User) } else { (Role::Model, Author::Agent) };
    let mut event = RuntimeEvent::new(
        EventId::new(id).unwrap(),
        InvocationId::new(format!("run-{turn}")).unwrap(),
        RunId::new(format!("run-{turn}")).unwrap(),
        SessionId::new(session).unwrap(),
        TurnId::new(turn).unwrap(),
        TimestampMs(1_767_225_600_000),
        role,
        author,
    );
    event.content = Some(Content::Text(TextContent::new(body)));
    WireRecord::from_record(&Record::RuntimeEvent(event)).unwrap()
}

fn turn_ended(session: &str, turn: &str) -> WireRecord {
    use mnemo::records::*;
    let end = TurnEnded {
        session: SessionId::new(session).unwrap(),
        turn: TurnId::new(turn).unwrap(),
        run: None,
        status: TurnStatus::Completed,
    };
    WireRecord::from_record(&Record::TurnEnded(end)).unwrap()
}

/// Appends `turns` whole turns of about 420 tokens each to `session`.
fn converse(raw: &mut Raw, session: &str, turns: usize) {
    for n in 1..=turns {
        converse_turn(raw, session, n);
    }
}

/// Appends turn `n` of `session`: a question, an answer, the turn's end.
fn converse_turn(raw: &mut Raw, session: &str, n: usize) {
    {
        let turn = format!("t{n}");
        let ask = format!(
            "Step {n}: explain the build cache of module {n}. {}",
            "The cache key covers the lockfile. ".repeat(25)
        );
        let reply = format!(
            "Module {n} caches target/ by lockfile hash. {}",
            "Restore, build, then save. ".repeat(30)
        );
        let records = [
            text(session, &turn, &format!("{session}-{turn}-u"), true, &ask),
            text(session, &turn, &format!("{session}-{turn}-a"), false, &reply),
            turn_ended(session, &turn),
        ];
        let result = raw.ok(
            "append",
            json!({"stream": format!("session/{session}"), "expected_revision": "any", "records": records}),
        );
        assert!(result["last_position"].as_u64().unwrap() >= 3, "{result}");
    }
}

/// Turns of about 420 tokens: more than an 8k window's history holds.
const TURNS: usize = 18;

const SUMMARY: &str = "## Goal\nSpeed up the CI build of every module.\n\n## Progress\n### Done\n\
    Each module caches target/ keyed by the lockfile hash.\n\n### In Progress\nNothing.\n\n\
    ## Next Steps\n1. Measure the cached build.\n\n## Critical Context\nThe cache key covers the lockfile.\n";

#[test]
fn a_registered_summarizer_is_called_back_and_its_summary_is_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    let registered = raw.ok(
        "seams/register",
        // A toy summarizer, not a model: it takes any input (`limits_input` false).
        json!({"summarizer": {"name": "host-toy", "prompt_version": "toy.v1", "limits_input": false}, "timeout_ms": 20_000}),
    );
    assert_eq!(registered["registered"], json!(["seam/summarize"]));

    // The host's loop: a turn, then the next request's history, as a runtime prepares it.
    let mut asked = Vec::new();
    let mut recorded = None;
    let mut last = Value::Null;
    for n in 1..=TURNS {
        converse_turn(&mut raw, "s1", n);
        let id = raw.send("compaction/prepare", json!({"session": "s1", "window": 8000}));
        let answer = loop {
            let frame = raw.frame();
            if frame["id"] == json!(id) {
                break frame;
            }
            // The server asks this client to summarize, with an id of its own, before it answers.
            assert_eq!(frame["method"], "seam/summarize", "{frame}");
            asked.push(frame["params"].clone());
            raw.send_value(
                &json!({"jsonrpc": "2.0", "id": frame["id"], "result": {"text": SUMMARY, "finish": "stop"}}),
            );
        };
        let result = answer["result"].clone();
        assert_eq!(result["seam_failures"], json!([]), "{}", result["history"]["diagnostics"]);
        last = result["history"]["diagnostics"].clone();
        if let Some(checkpoint) = result.get("recorded") {
            recorded = Some((checkpoint.clone(), result["history"]["diagnostics"].clone()));
            break;
        }
    }
    let (recorded, diagnostics) =
        recorded.unwrap_or_else(|| panic!("no checkpoint within the turns: {last}"));
    assert_eq!(asked.len(), 1, "one summary asked for");
    assert!(asked[0]["instructions"].as_str().unwrap().contains("## Goal"));
    assert!(!asked[0]["messages"].as_array().unwrap().is_empty());
    assert_eq!(asked[0]["input_digest"].as_str().unwrap().len(), 64);
    let checkpoint = recorded["checkpoint"].to_string();
    assert!(checkpoint.contains("host-toy"), "the manifest names the client's summarizer: {checkpoint}");
    assert!(checkpoint.contains("cached build"), "the summary is the client's: {checkpoint}");
    assert_eq!(diagnostics["decision"], "replaced", "{diagnostics}");

    // Without the seam the embedded summarizer is used and nothing is asked of the client.
    let embedded =
        raw.ok("compaction/compact", json!({"session": "s1", "window": 8000, "client_seams": false}));
    assert_eq!(embedded["seam_failures"], json!([]));
    drop(raw);
    stop(&store, server);
}

#[test]
fn a_client_that_does_not_answer_a_seam_in_time_fails_the_compaction_open_with_a_typed_failure() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    converse(&mut raw, "s1", TURNS);
    let head = raw.ok("stats", json!({}))["head"].clone();
    raw.ok("seams/register", json!({"summarizer": {"name": "slow", "prompt_version": "v1", "limits_input": false}, "timeout_ms": 300}));
    let id = raw.send("compaction/prepare", json!({"session": "s1", "window": 8000}));
    let request = raw.frame();
    assert_eq!(request["method"], "seam/summarize");
    // No answer: the server gives up after 300 ms and fails open.
    let answer = raw.frame();
    assert_eq!(answer["id"], json!(id), "{answer}");
    let failures = answer["result"]["seam_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{answer}");
    assert_eq!(failures[0]["seam"], "seam/summarize");
    assert_eq!(failures[0]["reason"], "timeout");
    assert!(answer["result"].get("recorded").is_none(), "nothing recorded: {answer}");
    assert_eq!(answer["result"]["history"]["diagnostics"]["decision"], "failed_open");
    // A late answer to the abandoned call is dropped; the connection goes on.
    raw.send_value(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"text": SUMMARY}}));
    assert_eq!(raw.ok("stats", json!({}))["head"], head, "the failed compaction appended nothing");

    // An error answer is a `client_error` failure.
    let id = raw.send("compaction/prepare", json!({"session": "s1", "window": 8000}));
    let request = raw.frame();
    raw.send_value(&json!({"jsonrpc": "2.0", "id": request["id"],
        "error": {"code": -32000, "message": "model quota exhausted", "data": {"reason": "internal"}}}));
    let answer = raw.frame();
    assert_eq!(answer["id"], json!(id));
    assert_eq!(answer["result"]["seam_failures"][0]["reason"], "client_error", "{answer}");
    assert!(answer["result"]["seam_failures"][0]["message"].as_str().unwrap().contains("quota"));

    // A client that goes away mid-call: its seam call fails at once, other clients are served.
    raw.send("compaction/prepare", json!({"session": "s1", "window": 8000}));
    assert_eq!(raw.frame()["method"], "seam/summarize");
    drop(raw);
    let mut other = Raw::open(&store);
    assert_eq!(other.ok("stats", json!({}))["head"], head, "nothing was appended by the abandoned calls");
    drop(other);
    stop(&store, server);
}

#[test]
fn a_tail_subscription_streams_every_appended_envelope_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut writer = Raw::open(&store);
    converse(&mut writer, "s1", 1);
    let mut follower = Raw::open(&store);
    // From position 1: the three envelopes already there, then what comes. The answer comes
    // before the first notification, so the client knows the subscription it belongs to.
    follower.send("log/subscribe", json!({"from": 1}));
    let subscribed = follower.frame();
    assert!(subscribed.get("method").is_none(), "a notification before the answer: {subscribed}");
    let subscribed = subscribed["result"].clone();
    assert_eq!(subscribed["from"], 1);
    let subscription = subscribed["subscription"].clone();
    converse(&mut writer, "s2", 2);
    let mut positions = Vec::new();
    let began = Instant::now();
    while positions.len() < 9 && began.elapsed() < Duration::from_secs(30) {
        let frame = follower.frame();
        assert_eq!(frame["method"], "log/appended", "{frame}");
        assert!(frame.get("id").is_none(), "a notification has no id: {frame}");
        assert_eq!(frame["params"]["subscription"], subscription);
        for entry in frame["params"]["entries"].as_array().unwrap() {
            positions.push(entry["position"].as_u64().unwrap());
        }
    }
    assert_eq!(positions, (1..=9).collect::<Vec<u64>>());
    let ended = follower.ok("log/unsubscribe", json!({"subscription": subscription}));
    assert_eq!(ended, json!({}));
    let again = follower.call("log/unsubscribe", json!({"subscription": subscription}));
    assert_eq!(again["error"]["data"]["reason"], "not_found", "{again}");
    drop((writer, follower));
    stop(&store, server);
}

#[test]
fn copy_memory_items_rebuild_and_export_answer_through_the_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    converse(&mut raw, "s1", 3);

    let copy = raw.ok(
        "compaction/copy",
        json!({"session": "s1", "up_to": {"through_turn": "t2"}, "target": "s1-branch"}),
    );
    assert_eq!(copy["session"], "s1-branch", "{copy}");
    assert!(copy["events"].as_u64().unwrap() >= 4, "{copy}");
    let policy = raw.ok("compaction/policy", json!({}));
    assert!(policy.is_object());

    let item = json!({
        "content": "Deploys go through make release.", "kind": "knowledge", "statement_type": "fact",
        "temporal_type": "undated", "scope": "global", "observed_at": 1_767_225_600_000u64,
        "origin": "user_requested", "keys": [{"key": "deploy", "key_type": "concept", "key_origin": "user"}],
        "sources": [{"session": "s1", "run": "run-t1", "turn": "t1", "event": "s1-t1-u"}]
    });
    let apply = json!({"operation": "op-1", "mutations": [{"type": "create", "item": item}]});
    let applied = raw.ok("memory/apply", apply.clone());
    // A replay of the operation returns its first result and creates nothing more.
    let replayed = raw.ok("memory/apply", apply);
    assert_eq!((&replayed["results"], &replayed["replayed"]), (&applied["results"], &json!(true)));
    let list = raw.ok("memory/list", json!({}));
    assert_eq!(list.as_array().unwrap().len(), 1, "{applied} {list}");
    let found = raw.ok("memory/search", json!({"terms": ["deploy"], "match_mode": "exact"}));
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    let item_id =
        list[0]["id"].as_str().or(list[0]["item"].as_str()).unwrap_or_else(|| panic!("{list}")).to_owned();
    let archive = json!({"operation": "op-2", "mutations": [{"type": "archive", "item_id": item_id, "expected_version": 9}]});
    let stale = raw.call("memory/apply", archive);
    assert!(stale.get("error").is_some(), "an archive at a stale version is refused: {stale}");
    assert_eq!(raw.ok("memory/list", json!({})).as_array().unwrap().len(), 1);
    let bad = raw.call("memory/search", json!({"terms": ["deploy"], "match_mode": "fuzzy"}));
    assert_eq!(bad["error"]["data"]["reason"], "invalid_params", "{bad}");
    let cursor = raw.ok("memory/cursor", json!({"session": "s1"}));
    assert!(cursor["cursor"].is_u64());
    let block = raw.ok("memory/recall_block", json!({"session": "s1", "query": "deploy"}));
    assert!(block["text"].is_string(), "{block}");
    let extracted = raw.ok("memory/extract", json!({"session": "s1"}));
    assert!(extracted.is_object());
    // Why the item exists: the text, position and hash of the event it names as its source.
    let why = raw.ok("memory/why", json!({"item": item_id}));
    let evidence = &why["evidence"][0];
    assert!(evidence["text"].as_str().unwrap().starts_with("Step 1: explain the build cache"), "{why}");
    assert_eq!(evidence["hash"].as_str().unwrap().len(), 64, "{why}");
    assert!(evidence["position"].as_u64().unwrap() >= 1, "{why}");
    assert_eq!(why["records"][0]["action"], "created", "{why}");
    let history = raw.ok("memory/history", json!({"item": item_id}));
    assert_eq!((history.as_array().unwrap().len(), &history[0]["current"]), (1, &json!(true)), "{history}");
    let nothing = raw.call("memory/unmerge", json!({"item": item_id, "operation": "u-1"}));
    assert!(nothing.get("error").is_some(), "nothing was merged into it: {nothing}");
    assert!(raw.ok("memory/why", json!({"item": "mem_missing"})).is_null());

    let rebuilt = raw.ok("rebuild", json!({}));
    assert!(!rebuilt.as_array().unwrap().is_empty());
    let exported = raw.ok("export", json!({}));
    assert_eq!(exported["report"]["sessions"], 2, "{}", exported["report"]);
    assert!(exported["text"].as_str().unwrap().contains("explain the build cache"));
    drop(raw);
    stop(&store, server);
}

#[test]
fn bad_input_is_refused_with_a_typed_reason_and_leaves_the_store_unchanged_for_every_client() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    converse(&mut raw, "s1", 2);
    let before = raw.ok("stats", json!({}));
    let mut bystander = Raw::open(&store);

    // Wrong types, one member at a time.
    for (method, params) in [
        ("history/search", json!({"query": "cache", "limit": "five"})),
        ("append", json!({"stream": "session/s1", "expected_revision": "sometime", "records": []})),
        ("append", json!({"stream": 7, "expected_revision": "any", "records": []})),
        (
            "append",
            json!({"stream": "session/s1", "expected_revision": "any", "records": [{"kind": "runtime_event", "record": {"id": 1}}]}),
        ),
        (
            "append",
            json!({"stream": "session/s1", "expected_revision": "any", "records": [{"kind": "no_such_kind", "record": {}}]}),
        ),
        ("compaction/prepare", json!({"session": ["s1"]})),
        ("compaction/copy", json!({"session": "s1", "up_to": {"sideways": "t1"}})),
        ("log/subscribe", json!({"from": -1})),
        ("seams/register", json!({"summarizer": {"name": "x"}})),
        ("seams/register", json!({"timeout_ms": 0})),
        ("memory/apply", json!({"operation": "op", "mutations": [{"type": "explode"}]})),
        ("memory/get", json!("item")),
    ] {
        let answer = raw.call(method, params.clone());
        assert_eq!(answer["error"]["data"]["reason"], "invalid_params", "{method} {params}: {answer}");
        assert_eq!(answer["error"]["code"], -32602);
    }
    // Input the store refuses, whole: nothing of it is stored.
    let elsewhere = text("s2", "t1", "s2-e1", true, "on the wrong stream");
    let refused = raw.call(
        "append",
        json!({"stream": "session/s1", "expected_revision": "any", "records": [text("s1", "t9", "s1-e9", true, "ok"), elsewhere]}),
    );
    assert_eq!(refused["error"]["data"]["reason"], "invalid_input", "{refused}");
    let transcript = "{\"kind\":\"session\",\"session\":\"s3\"}\n{\"session\":\"s3\",\"turn\":\"t1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\"}]}\n{\"session\":\"s3\",\"turn\":\"t1\",\"role\":\"wizard\"}\n";
    let refused = raw.call("import", json!({"text": transcript, "source": "bad.jsonl"}));
    assert_eq!(refused["error"]["data"]["reason"], "invalid_input", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("bad.jsonl"), "{refused}");
    // Unknown method, malformed JSON, a frame that is neither request nor answer.
    let unknown = raw.call("compaction/explode", json!({}));
    assert_eq!(unknown["error"]["data"]["reason"], "method_not_found");
    raw.write.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\n").unwrap();
    assert_eq!(raw.frame()["error"]["data"]["reason"], "parse_error");
    raw.send_value(&json!({"jsonrpc": "2.0", "result": {}}));
    assert_eq!(raw.frame()["error"]["data"]["reason"], "invalid_request");
    // An answer to a seam call nobody made is dropped without an answer of its own.
    raw.send_value(&json!({"jsonrpc": "2.0", "id": "mnemo-404", "result": {"text": "?"}}));
    assert!(raw.ok("ping", json!({})).is_object());

    // A client that disconnects mid-call (a compaction and a pipelined append in flight).
    let mut leaving = Raw::open(&store);
    leaving.send("verify", json!({}));
    leaving.send("history/search", json!({"query": "cache"}));
    drop(leaving);
    // Oversized: skipped, the connection and the store stay.
    let mut huge =
        br#"{"jsonrpc":"2.0","id":5,"method":"append","params":{"stream":"session/s1","pad":""#.to_vec();
    huge.resize(mnemo_server::limits::FRAME_BYTES_MAX + 10, b'x');
    huge.extend_from_slice(b"\"}}\n");
    bystander.write.write_all(&huge).unwrap();
    assert_eq!(bystander.frame()["error"]["data"]["reason"], "frame_too_large");
    assert!(bystander.ok("ping", json!({})).is_object(), "the bystander is still served");

    let after = raw.ok("stats", json!({}));
    assert_eq!(after["head"], before["head"], "nothing was appended");
    let verified = raw.ok("verify", json!({}));
    assert_eq!(verified["lost"], Value::Null, "{verified}");
    for stage in verified["stages"].as_array().unwrap() {
        assert_eq!(stage["live"], stage["rebuilt"], "{stage}");
    }
    drop((raw, bystander));
    stop(&store, server);
}

impl Raw {
    /// Calls `method` and answers every seam request that comes before its answer with `seam`
    /// (the request in, the answer frame's `result` or `error` member out); returns the answer and
    /// the seam requests seen.
    fn call_answering(
        &mut self,
        method: &str,
        params: Value,
        mut seam: impl FnMut(&Value) -> (&'static str, Value),
    ) -> (Value, Vec<Value>) {
        let id = self.send(method, params);
        let mut asked = Vec::new();
        loop {
            let frame = self.frame();
            if frame["id"] == json!(id) {
                return (frame, asked);
            }
            assert!(frame["method"].as_str().is_some_and(|m| m.starts_with("seam/")), "{frame}");
            let (member, value) = seam(&frame);
            let mut answer = json!({"jsonrpc": "2.0", "id": frame["id"]});
            answer[member] = value;
            self.send_value(&answer);
            asked.push(frame);
        }
    }
}

#[test]
fn a_registered_provider_compactor_is_called_back_for_its_own_connection() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    let connection = json!({"provider_type": "openai-codex", "slug": "codex", "model": "gpt-test"});
    let registered = raw.ok(
        "seams/register",
        json!({"provider_compactor": {"name": "host-codex", "prompt_version": "v1", "connection": connection}}),
    );
    assert_eq!(registered["registered"], json!(["seam/provider_compact"]));
    let output = json!({"output": [{"type": "custom", "kind": "openai.compaction",
        "providerMetadata": {"openai": {"itemId": "cmp_1", "encryptedContent": "opaque-state"}}}]});
    // Twelve turns (~5,300 tokens): compacted now, the span folded fits the compactor's input budget
    // (the window's 6,000-token history).
    converse(&mut raw, "s1", 12);
    let params = json!({"session": "s1", "window": 8000, "connection": connection});
    let (answer, asked) = raw.call_answering("compaction/compact", params, |request| {
        assert_eq!(request["method"], "seam/provider_compact", "{request}");
        assert_eq!(request["params"]["input_digest"].as_str().unwrap().len(), 64);
        ("result", output.clone())
    });
    let calls = asked.len();
    assert_eq!(answer["result"]["seam_failures"], json!([]), "{answer}");
    let recorded = answer["result"].get("recorded").map(ToString::to_string);
    let recorded = recorded.unwrap_or_else(|| {
        panic!("no provider-state checkpoint: {}", answer["result"]["history"]["diagnostics"])
    });
    assert_eq!(calls, 1);
    assert!(recorded.contains("opaque-state") && recorded.contains("host-codex"), "{recorded}");
    // Another connection's request does not use this client's compactor.
    let mut other = Raw::open(&store);
    converse_turn(&mut other, "s2", 1);
    let (answer, asked) = other.call_answering(
        "compaction/compact",
        json!({"session": "s2", "connection": connection}),
        |_| panic!("another connection was asked"),
    );
    assert!(asked.is_empty() && answer.get("result").is_some(), "{answer}");
    drop((raw, other));
    stop(&store, server);
}

#[test]
fn a_registered_memory_proposer_serves_the_store_until_its_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut host = Raw::open(&store);
    let request = |session: &str| {
        json!({"stream": format!("session/{session}"), "expected_revision": "any", "records": [
            // The session names no workspace: only what holds in every project is stored.
            text(session, "t1", &format!("{session}-u"), true, "Remember that I never use unwrap in library code, in any project."),
            turn_ended(session, "t1"),
        ]})
    };
    host.ok("append", request("s1"));
    let registered = host
        .ok("seams/register", json!({"memory_proposer": {"name": "host-proposer"}, "timeout_ms": 20_000}));
    assert_eq!(registered["registered"], json!(["seam/propose"]));
    // The host's proposer is asked with the session's evidence; it fails, and remember says so.
    let (answer, asked) = host.call_answering("memory/remember", json!({"session": "s1"}), |_| {
        ("error", json!({"code": -32000, "message": "no model configured", "data": {"reason": "internal"}}))
    });
    assert!(!asked.is_empty(), "the proposer was not called back: {answer}");
    assert!(asked[0]["params"]["prompt"].to_string().contains("never use unwrap"), "{}", asked[0]);
    assert_ne!(answer["result"]["status"], "remembered", "{answer}");
    // Its connection closes: the embedded proposer serves the store again.
    drop(host);
    let mut other = Raw::open(&store);
    other.ok("append", request("s2"));
    let began = Instant::now();
    let remembered = loop {
        let (answer, asked) = other.call_answering("memory/remember", json!({"session": "s2"}), |_| {
            panic!("a closed connection's proposer was still used")
        });
        assert!(asked.is_empty());
        // The server notices the closed connection once its reader ends.
        if answer["result"]["status"] == "remembered" || began.elapsed() > Duration::from_secs(10) {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(remembered["result"]["status"], "remembered", "{remembered}");
    drop(other);
    stop(&store, server);
}

#[test]
fn an_append_states_its_durability_and_a_wrong_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    for (n, durability) in ["buffered", "sync_data", "sync_all"].into_iter().enumerate() {
        let record = text("s1", "t1", &format!("e{n}"), true, "hello");
        let appended = raw.ok(
            "append",
            json!({"stream": "session/s1", "expected_revision": "any", "records": [record], "durability": durability}),
        );
        assert_eq!(appended["last_position"], n as u64 + 1, "{appended}");
    }
    let record = text("s1", "t1", "e9", true, "hello");
    let refused = raw.call(
        "append",
        json!({"stream": "session/s1", "expected_revision": "any", "records": [record], "durability": "eventually"}),
    );
    assert_eq!(refused["error"]["data"]["reason"], "invalid_params", "{refused}");
    assert_eq!(raw.ok("stats", json!({}))["head"], 3);
    drop(raw);
    stop(&store, server);
}

#[test]
fn the_rust_client_keeps_calling_while_notifications_of_its_subscription_arrive() {
    use mnemo_server::methods::{Append, AppendParams, ExpectedRevision, Stats, Subscribe, SubscribeParams};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut client = Client::connect(&store, &ConnectOptions::new("test")).unwrap();
    client.call::<Subscribe>(&SubscribeParams { from: Some(1) }).unwrap();
    for n in 1..=3 {
        let params = AppendParams {
            stream: "session/s1".to_owned(),
            expected_revision: ExpectedRevision::Any,
            records: vec![text("s1", "t1", &format!("e{n}"), true, "hello")],
            durability: None,
        };
        assert_eq!(client.call::<Append>(&params).unwrap().last_position, n);
        // Notifications of the appends arrive between the answers; the client skips them.
        std::thread::sleep(Duration::from_millis(60));
    }
    assert_eq!(client.call::<Stats>(&Empty {}).unwrap()["head"], 3);
    drop(client);
    stop(&store, server);
}

#[test]
fn an_overflow_is_recovered_once_per_turn_on_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    converse(&mut raw, "s1", 8);
    // A new turn whose first request the provider rejected as too long.
    raw.ok(
        "append",
        json!({"stream": "session/s1", "expected_revision": "any",
            "records": [text("s1", "t9", "s1-t9-u", true, "Now make the test step faster.")]}),
    );
    let overflow = json!({"session": "s1", "turn": "t9", "anchor": "s1-t9-u", "reference_tokens": 3000,
        "step": 0, "context_length_error": true, "produced_output": false, "steps_remaining": true,
        "client_seams": false});
    let first = raw.ok("compaction/recover_overflow", overflow.clone());
    assert_eq!(first["action"], "resend", "{first}");
    assert!(first["checkpoint"].is_object(), "{first}");
    assert!(!first["items"].as_array().unwrap().is_empty());
    assert_eq!(first["seam_failures"], json!([]));
    // The same turn again: its one retry is used.
    let second = raw.ok("compaction/recover_overflow", overflow.clone());
    assert_eq!(second["action"], "surface_provider_error", "{second}");
    // Not a context-length error: never recovered, nothing recorded.
    let head = raw.ok("stats", json!({}))["head"].clone();
    let mut other = overflow;
    other["turn"] = json!("t10");
    other["context_length_error"] = json!(false);
    assert_eq!(raw.ok("compaction/recover_overflow", other)["action"], "surface_provider_error");
    assert_eq!(raw.ok("stats", json!({}))["head"], head);
    drop(raw);
    stop(&store, server);
}

#[test]
fn a_connection_with_every_call_slot_busy_and_its_queue_full_gets_overloaded_and_keeps_its_seams() {
    use mnemo_server::limits::CONNECTION_CALLS_MAX;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = start(&store);
    let mut raw = Raw::open(&store);
    converse(&mut raw, "s1", 4);
    // Every compaction waits on a seam this client answers only after reading every answer.
    raw.ok(
        "seams/register",
        json!({"summarizer": {"name": "busy", "prompt_version": "v1", "limits_input": false}, "timeout_ms": 60_000}),
    );
    let total = 2 * CONNECTION_CALLS_MAX + 3;
    let first = raw.next;
    for _ in 0..total {
        raw.send("compaction/compact", json!({"session": "s1", "window": 8000}));
    }
    let mut overloaded = Vec::new();
    let mut answered = 0;
    let mut seams = 0;
    while answered < total {
        let frame = raw.frame();
        if frame["method"] == "seam/summarize" {
            // Answer with an error: each compaction fails open at once.
            seams += 1;
            raw.send_value(&json!({"jsonrpc": "2.0", "id": frame["id"],
                "error": {"code": -32000, "message": "busy", "data": {"reason": "internal"}}}));
            continue;
        }
        answered += 1;
        if frame["error"]["data"]["reason"] == "overloaded" {
            assert_eq!(frame["error"]["data"]["limit"], CONNECTION_CALLS_MAX as u64);
            overloaded.push(frame["id"].as_u64().unwrap());
        } else {
            assert!(frame.get("result").is_some(), "{frame}");
        }
    }
    // The requests past the running and the waiting ones, and only those, were refused.
    let beyond: Vec<u64> = (first + 2 * CONNECTION_CALLS_MAX as u64..first + total as u64).collect();
    assert_eq!(overloaded, beyond, "{seams} seam calls");
    assert!(seams >= 1);
    assert!(raw.ok("ping", json!({})).is_object());
    drop(raw);
    stop(&store, server);
}
