//! SearchHistory and ReadHistory through the facade: every limit edge of spec §3, ranking, the
//! projection's hidden events, logical sessions, time travel, and rebuild digests.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::atomic::AtomicBool;

use mnemo::history::{HistoryContext, HistoryReadRequest, HistorySearchRequest};
use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::{Position, Record, SessionId, StreamId, TurnId, WorkspaceId};
use mnemo::{Config, Mnemo};
use mnemo_core::{
    Actions, Author, Content, ConversationCopied, CopyBoundary, EventId, FunctionCall, FunctionResponse,
    InvocationId, MemoryMode, ModelVisibility, Refs, Role, RunId, RuntimeEvent, SessionFlagsChanged,
    SessionOpened, TextContent, ThinkingContent, TimestampMs, ToolCallId,
};
use serde_json::{Value, json};

/// A store and a clock of event times.
struct Fixture {
    _dir: tempfile::TempDir,
    mnemo: Mnemo,
    ts: u64,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { durability: Durability::Buffered, ..Config::default() };
    let mnemo = Mnemo::open(dir.path(), config).unwrap();
    Fixture { _dir: dir, mnemo, ts: 1_767_225_600_000 }
}

fn sid(text: &str) -> SessionId {
    SessionId::new(text).unwrap()
}

impl Fixture {
    fn append(&self, session: &str, records: Vec<Record>) -> Position {
        let stream = StreamId::session(&sid(session));
        let appended = self.mnemo.append(&stream, ExpectedRevision::Any, &records).unwrap();
        appended.last_position
    }

    fn open(&self, session: &str, title: &str) -> Position {
        self.open_in(session, title, None)
    }

    fn open_in(&self, session: &str, title: &str, workspace: Option<&str>) -> Position {
        self.append(
            session,
            vec![Record::SessionOpened(SessionOpened {
                session: sid(session),
                workspace: workspace.map(|w| WorkspaceId::new(w).unwrap()),
                incognito: false,
                memory: MemoryMode::Enabled,
                subagent: false,
                title: Some(title.to_owned()),
                source: None,
                parent: None,
            })],
        )
    }

    fn event(&mut self, session: &str, turn: &str, id: &str, role: Role, content: Content) -> RuntimeEvent {
        self.ts += 1000;
        let author = match role {
            Role::User => Author::User,
            Role::Tool => Author::Tool,
            _ => Author::Agent,
        };
        let mut event = RuntimeEvent::new(
            EventId::new(id).unwrap(),
            InvocationId::new(format!("run-{turn}")).unwrap(),
            RunId::new(format!("run-{turn}")).unwrap(),
            sid(session),
            TurnId::new(turn).unwrap(),
            TimestampMs(self.ts),
            role,
            author,
        );
        event.content = Some(content);
        event
    }

    fn say(&mut self, session: &str, turn: &str, id: &str, role: Role, text: &str) -> Position {
        let event = self.event(session, turn, id, role, Content::Text(TextContent::new(text)));
        self.append(session, vec![Record::RuntimeEvent(event)])
    }

    fn user(&mut self, session: &str, turn: &str, id: &str, text: &str) -> Position {
        self.say(session, turn, id, Role::User, text)
    }

    fn reply(&mut self, session: &str, turn: &str, id: &str, text: &str) -> Position {
        self.say(session, turn, id, Role::Model, text)
    }

    fn tool_call(&mut self, session: &str, turn: &str, call: &str, intent: Option<&str>) -> Position {
        let content = Content::FunctionCall(FunctionCall::new(
            ToolCallId::new(call).unwrap(),
            "shell",
            json!({"cmd": "cat /etc/secret-plans"}),
        ));
        let mut event = self.event(session, turn, &format!("ev-{call}"), Role::Model, content);
        if let Some(intent) = intent {
            let delta = [("intent".to_owned(), json!(intent)), ("displayName".to_owned(), json!("Shell"))];
            event.actions =
                Some(Actions { state_delta: Some(delta.into_iter().collect()), ..Actions::default() });
        }
        self.append(session, vec![Record::RuntimeEvent(event)])
    }

    fn tool_result(
        &mut self,
        session: &str,
        turn: &str,
        call: &str,
        result: Value,
        is_error: bool,
    ) -> Position {
        let mut response = FunctionResponse::new(ToolCallId::new(call).unwrap(), "shell", result);
        response.is_error = is_error.then_some(true);
        let event = self.event(
            session,
            turn,
            &format!("res-{call}"),
            Role::Tool,
            Content::FunctionResponse(response),
        );
        self.append(session, vec![Record::RuntimeEvent(event)])
    }

    fn search(&self, args: Value) -> Value {
        self.search_in(args, &HistoryContext::default(), None)
    }

    fn search_in(&self, args: Value, context: &HistoryContext<'_>, as_of: Option<Position>) -> Value {
        let outcome = match HistorySearchRequest::from_tool_args(&args) {
            Ok(request) => self.mnemo.history().search(&request, context, as_of).unwrap(),
            Err(refused) => Err(refused),
        };
        match outcome {
            Ok(found) => serde_json::to_value(found).unwrap(),
            Err(refused) => serde_json::to_value(refused).unwrap(),
        }
    }

    fn read(&self, args: Value) -> Value {
        self.read_in(args, &HistoryContext::default(), None)
    }

    fn read_in(&self, args: Value, context: &HistoryContext<'_>, as_of: Option<Position>) -> Value {
        let outcome = match HistoryReadRequest::from_tool_args(&args) {
            Ok(request) => self.mnemo.history().read(&request, context, as_of).unwrap(),
            Err(refused) => Err(refused),
        };
        match outcome {
            Ok(read) => serde_json::to_value(read).unwrap(),
            Err(refused) => serde_json::to_value(refused).unwrap(),
        }
    }
}

/// The error reason of a tool's error shape (checking the shape), or "ok".
fn reason(output: &Value) -> String {
    if output["ok"] == json!(false) {
        assert!(output["kind"].as_str().unwrap().ends_with("_error"), "{output}");
        assert!(output["message"].is_string(), "{output}");
        return output["reason"].as_str().unwrap().to_owned();
    }
    "ok".to_owned()
}

fn message_ids(output: &Value) -> Vec<String> {
    output["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message_id"].as_str().unwrap_or("-").to_owned())
        .collect()
}

fn read_texts(output: &Value) -> Vec<String> {
    let turns = output["turns"].as_array().unwrap();
    turns
        .iter()
        .flat_map(|t| {
            t["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn search_argument_errors_answered_invalid_query_unlike_read() {
    // Both tools refuse a break of their argument schema with the same reason; only what the
    // schema lets through (a credential-shaped query, a cursor of another query) is the search's
    // own `invalid_query`.
    let f = fixture();
    f.open("s1", "one");
    for (search_args, read_args) in [
        (json!({"query": "x", "unknown": 1}), json!({"session_id": "s1", "unknown": 1})),
        (json!({"query": " "}), json!({"session_id": " "})),
        (json!({"query": "x", "limit": 2.5}), json!({"session_id": "s1", "before": 2.5})),
        (json!({"query": 7}), json!({"session_id": 7})),
        (json!({}), json!({})),
    ] {
        let searched = f.search(search_args.clone());
        let read = f.read(read_args.clone());
        assert_eq!(reason(&read), "invalid_arguments", "{read_args}: {read}");
        assert_eq!(reason(&searched), reason(&read), "{search_args}: {searched}");
    }
    let secret = f.search(json!({"query": "sk-ant-abcdefgh12345"}));
    assert_eq!(reason(&secret), "invalid_query", "{secret}");
}

#[test]
fn query_length_limit_and_argument_edges() {
    let f = fixture();
    f.open("s1", "one");
    let cases = [
        (json!({"query": "q".repeat(500)}), "ok"),
        (json!({"query": "q".repeat(501)}), "invalid_arguments"),
        (json!({"query": format!("  {}  ", "q".repeat(500))}), "ok"),
        (json!({"query": "🙂".repeat(250)}), "ok"),
        // 251 astral characters are 502 UTF-16 units: the schema's unit refuses them.
        (json!({"query": "🙂".repeat(251)}), "invalid_arguments"),
        (json!({"query": "   "}), "invalid_arguments"),
        (json!({"query": "x", "limit": 0}), "invalid_arguments"),
        (json!({"query": "x", "limit": 1}), "ok"),
        (json!({"query": "x", "limit": 10}), "ok"),
        (json!({"query": "x", "limit": 11}), "invalid_arguments"),
        (json!({"query": "x", "limit": 2.5}), "invalid_arguments"),
        (json!({"query": "x", "max_rows": 2}), "invalid_arguments"),
        (json!({"query": "x", "cursor": ""}), "invalid_arguments"),
        (json!({"query": "x", "cursor": "x".repeat(2049)}), "invalid_arguments"),
    ];
    for (args, expected) in cases {
        let output = f.search(args.clone());
        assert_eq!(reason(&output), expected, "{args}: {output}");
    }
}

#[test]
fn limits_cut_the_ranked_rows_and_mark_the_last() {
    let mut f = fixture();
    // The title shares no term with the query: only the messages compete.
    f.open("s1", "rollouts");
    for i in 0..12 {
        f.user("s1", &format!("t{i}"), &format!("m{i}"), &format!("deploy number {i}"));
    }
    let one = f.search(json!({"query": "deploy", "limit": 1}));
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert_eq!(one["truncated"], json!(true));
    assert_eq!(one["rows"][0]["truncated"], json!(true));
    assert!(one["next_cursor"].is_string(), "a page cut by the limit gives a cursor to the rest: {one}");

    let ten = f.search(json!({"query": "deploy", "limit": 10}));
    assert_eq!(ten["rows"].as_array().unwrap().len(), 10);
    // Equal scores: the newer message first.
    assert_eq!(message_ids(&ten)[..3], ["m11", "m10", "m9"]);
    let default = f.search(json!({"query": "deploy"}));
    assert_eq!(default["rows"].as_array().unwrap().len(), 5);

    let all = f.search(json!({"query": "number 3"}));
    assert_eq!(message_ids(&all)[0], "m3", "the message holding both terms ranks first: {all}");
}

#[test]
fn the_message_with_every_query_word_ranks_first() {
    let mut f = fixture();
    f.open("s1", "ranking");
    f.user("s1", "t1", "full", "the staging deploy timed out after the retry");
    f.user("s1", "t2", "a", "staging is down again");
    f.user("s1", "t3", "b", "please deploy the docs site");
    f.user("s1", "t4", "c", "the build timed out");
    f.user("s1", "t5", "d", "we should retry later");
    let found = f.search(json!({"query": "staging deploy timed retry", "limit": 10}));
    let ids = message_ids(&found);
    assert_eq!(ids[0], "full", "{found}");
    assert_eq!(ids.len(), 5, "every message with any query word matches: {found}");
}

#[test]
fn secret_shaped_queries_are_refused_and_secrets_never_match() {
    let mut f = fixture();
    f.open("s1", "creds");
    f.user("s1", "t1", "m1", "my password: hunter2 and key sk-ant-abcdefgh12345 please store");
    for query in [
        "sk-ant-abcdefgh12345",
        "password=hunter2",
        "Authorization: Bearer abcdef",
        "ghp_abcdefghijklmnopqrstuvwx",
    ] {
        let output = f.search(json!({ "query": query }));
        assert_eq!(reason(&output), "invalid_query", "{query}");
        assert_eq!(output["message"], json!("query contains credential material"));
    }
    assert_eq!(f.search(json!({"query": "hunter2"}))["rows"], json!([]), "a redacted secret is not indexed");
    let found = f.search(json!({"query": "store"}));
    let snippet = found["rows"][0]["snippet"].as_str().unwrap();
    assert!(
        snippet.contains("[redacted]") && !snippet.contains("hunter2") && !snippet.contains("abcdefgh"),
        "{snippet}"
    );
    let read = f.read(json!({"session_id": "s1"}));
    assert_eq!(read_texts(&read), ["my password: [redacted] and key [redacted] please store"]);
}

#[test]
fn tool_results_are_searched_only_in_their_first_10240_bytes() {
    let mut f = fixture();
    f.open("s1", "logs");
    f.tool_call("s1", "t1", "c1", None);
    let mut log = String::from("earlyzebra ");
    while log.len() < 15_000 {
        log.push_str("filler line of build output ");
    }
    log.push_str("latequokka ");
    while log.len() < 20 * 1024 {
        log.push_str("more filler ");
    }
    f.tool_result("s1", "t1", "c1", json!(log), true);
    let early = f.search(json!({"query": "earlyzebra"}));
    assert_eq!(early["rows"][0]["match_kind"], json!("tool_result"));
    assert_eq!(early["rows"][0]["summary"], json!("tool result: error"));
    assert_eq!(f.search(json!({"query": "latequokka"}))["rows"], json!([]));
    // A tool call without an intent is found by its arguments (decision 0151).
    let call = f.search(json!({"query": "secret-plans"}));
    assert_eq!(call["rows"][0]["match_kind"], json!("tool_intent"), "{call}");
    assert_eq!(call["rows"][0]["snippet"], json!("cat /etc/secret-plans"));
}

#[test]
fn tool_intents_titles_and_labels() {
    let mut f = fixture();
    f.open("s1", "Quarterly billing report");
    f.tool_call("s1", "t1", "c1", Some("list the billing exports"));
    f.user("s1", "t1", "m1", "thanks");
    let found = f.search(json!({"query": "billing", "limit": 10}));
    let rows = found["rows"].as_array().unwrap();
    let kinds: Vec<&str> = rows.iter().map(|r| r["match_kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"session_title") && kinds.contains(&"tool_intent"), "{found}");
    for row in rows {
        match row["match_kind"].as_str().unwrap() {
            "session_title" => {
                assert_eq!(row["summary"], json!("session title"));
                assert!(row.get("turn_id").is_none() && row.get("message_id").is_none());
                assert!(row.get("message_timestamp").is_none());
            }
            _ => assert_eq!(row["summary"], json!("tool call: Shell")),
        }
        assert_eq!(row["title"], json!("Quarterly billing report"));
        assert_eq!(row["is_current_session"], json!(false));
    }
}

#[test]
fn the_five_turn_rule_counts_defaults() {
    let mut f = fixture();
    f.open("s1", "turns");
    for i in 0..8 {
        f.user("s1", &format!("t{i}"), &format!("m{i}"), &format!("question {i}"));
    }
    let cases = [
        (json!({"session_id": "s1", "turn_id": "t4", "before": 4}), "invalid_arguments"),
        (json!({"session_id": "s1", "turn_id": "t4", "after": 4}), "invalid_arguments"),
        (json!({"session_id": "s1", "turn_id": "t4", "before": 3}), "ok"),
        (json!({"session_id": "s1", "turn_id": "t4", "before": 4, "after": 0}), "ok"),
        (json!({"session_id": "s1", "turn_id": "t4", "before": 5, "after": 0}), "invalid_arguments"),
        (json!({"session_id": "s1", "before": -1}), "invalid_arguments"),
        (json!({"session_id": "s1", "max_turns": 3}), "invalid_arguments"),
        (json!({"session_id": " "}), "invalid_arguments"),
        (json!({"session_id": "s".repeat(257)}), "invalid_arguments"),
    ];
    for (args, expected) in cases {
        let output = f.read(args.clone());
        assert_eq!(reason(&output), expected, "{args}: {output}");
    }
    let defaults = f.read(json!({"session_id": "s1"}));
    let turns: Vec<&str> =
        defaults["turns"].as_array().unwrap().iter().map(|t| t["turn_id"].as_str().unwrap()).collect();
    assert_eq!(turns, ["t5", "t6", "t7"]);
    assert_eq!(
        (defaults["has_more_before"].clone(), defaults["has_more_after"].clone()),
        (json!(true), json!(false))
    );
    let anchored = f.read(json!({"session_id": "s1", "turn_id": "t1", "before": 3, "after": 1}));
    let turns: Vec<&str> =
        anchored["turns"].as_array().unwrap().iter().map(|t| t["turn_id"].as_str().unwrap()).collect();
    assert_eq!(turns, ["t0", "t1", "t2"]);
    assert_eq!(anchored["has_more_before"], json!(false));
    assert_eq!(anchored["has_more_after"], json!(true));
    assert_eq!(anchored["anchor_turn_id"], json!("t1"));
}

#[test]
fn a_9_kib_message_is_cut_to_8_kib() {
    let mut f = fixture();
    f.open("s1", "long");
    f.user("s1", "t1", "m1", &"x".repeat(9 * 1024));
    let read = f.read(json!({"session_id": "s1"}));
    let text = &read_texts(&read)[0];
    assert_eq!(text.len(), 8 * 1024);
    assert!(text.ends_with('…'));
    assert_eq!(read["truncated"], json!(true));
}

#[test]
fn a_40_kib_turn_fits_32_kib_newest_first_or_anchor_first() {
    let mut f = fixture();
    f.open("s1", "big turn");
    f.user("s1", "t1", "m0", &format!("start {}", "u".repeat(8 * 1024)));
    for i in 1..5 {
        f.reply("s1", "t1", &format!("m{i}"), &format!("part{i} {}", "z".repeat(8 * 1024)));
    }
    let read = f.read(json!({"session_id": "s1"}));
    let texts = read_texts(&read);
    let total: usize = texts.iter().map(String::len).sum();
    assert!(total <= 32 * 1024, "{total}");
    assert!(serde_json::to_string(&read).unwrap().len() <= 32 * 1024 + 2000);
    assert_eq!(read["truncated"], json!(true));
    // Unanchored: newest first, so the oldest message (the user's) is the one that does not fit.
    assert!(texts.iter().all(|t| !t.starts_with("start")), "{texts:?}");
    assert!(texts.last().unwrap().starts_with("part4"));

    let anchored = f.read(json!({"session_id": "s1", "message_id": "m0"}));
    let texts = read_texts(&anchored);
    assert!(texts[0].starts_with("start"), "the anchor message goes first: {texts:?}");
    assert_eq!(anchored["anchor_message_id"], json!("m0"));
    assert!(texts.iter().all(|t| !t.starts_with("part4")), "then chronological, so the newest drops");
}

#[test]
fn read_errors_follow_the_check_order() {
    let mut f = fixture();
    f.open("s1", "errors");
    f.user("s1", "t1", "m1", "hello");
    f.tool_call("s1", "t2", "c2", None);
    f.tool_result("s1", "t2", "c2", json!("ok"), false);
    f.open("empty", "nothing yet");
    let cases = [
        (json!({"session_id": "nope"}), "session_not_found"),
        (json!({"session_id": " s1"}), "session_not_found"),
        (json!({"session_id": "empty"}), "empty_transcript"),
        (json!({"session_id": "s1", "message_id": "zzz"}), "message_not_found"),
        // A tool call without an intent is found by its arguments, so it anchors a read; its
        // turn has no visible message.
        (json!({"session_id": "s1", "message_id": "c2"}), "turn_not_found"),
        (json!({"session_id": "s1", "message_id": "m1", "turn_id": "t2"}), "anchor_mismatch"),
        // A tool result is a valid anchor, but its turn has no visible message.
        (json!({"session_id": "s1", "message_id": "res-c2"}), "turn_not_found"),
        (json!({"session_id": "s1", "turn_id": "t9"}), "turn_not_found"),
        (json!({"session_id": "s1", "message_id": "m1", "turn_id": "t1"}), "ok"),
    ];
    for (args, expected) in cases {
        let output = f.read(args.clone());
        assert_eq!(reason(&output), expected, "{args}: {output}");
    }
    let incognito = HistoryContext { incognito_active: true, ..HistoryContext::default() };
    assert_eq!(reason(&f.read_in(json!({"session_id": "nope"}), &incognito, None)), "incognito_active");
    let stop = AtomicBool::new(true);
    let aborted = HistoryContext { abort: Some(&stop), ..HistoryContext::default() };
    assert_eq!(reason(&f.read_in(json!({"session_id": "s1"}), &aborted, None)), "aborted");
    assert_eq!(reason(&f.search_in(json!({"query": "hello"}), &aborted, None)), "aborted");
}

#[test]
fn reads_never_show_thinking_tool_names_arguments_or_results() {
    let mut f = fixture();
    f.open("s1", "things kept back");
    f.user("s1", "t1", "m1", "run it");
    let thinking =
        f.event("s1", "t1", "th1", Role::Model, Content::Thinking(ThinkingContent::new("secret plan")));
    f.append("s1", vec![Record::RuntimeEvent(thinking)]);
    let mut hidden = f.event("s1", "t1", "h1", Role::Model, Content::Text(TextContent::new("hidden note")));
    hidden.model_visibility = Some(ModelVisibility::Hidden);
    f.append("s1", vec![Record::RuntimeEvent(hidden)]);
    let mut partial = f.event("s1", "t1", "p1", Role::Model, Content::Text(TextContent::new("strea")));
    partial.partial = true;
    partial.refs = Some(Refs { provider_event_id: Some("stream-1".to_owned()), ..Refs::default() });
    f.append("s1", vec![Record::RuntimeEvent(partial)]);
    let mut done = f.event("s1", "t1", "p2", Role::Model, Content::Text(TextContent::new("streamed answer")));
    done.refs = Some(Refs { provider_event_id: Some("stream-1".to_owned()), ..Refs::default() });
    f.append("s1", vec![Record::RuntimeEvent(done)]);
    f.tool_call("s1", "t1", "c1", Some("look at the plans"));
    f.tool_result("s1", "t1", "c1", json!({"out": "plans.txt"}), false);

    let read = f.read(json!({"session_id": "s1"}));
    assert_eq!(read_texts(&read), ["run it", "streamed answer", "look at the plans"]);
    let text = serde_json::to_string(&read).unwrap();
    for hidden in ["secret plan", "hidden note", "strea\"", "shell", "secret-plans", "plans.txt"] {
        assert!(!text.contains(hidden), "{hidden} leaked: {text}");
    }
    assert_eq!(read["turns"][0]["messages"][1]["message_id"], json!("stream-1"));
    assert_eq!(read["turns"][0]["messages"][2]["role"], json!("tool"));
    // Thinking and hidden text are never found; the call is, by its arguments (decision 0151).
    assert_eq!(f.search(json!({ "query": "hidden note" }))["rows"], json!([]));
    let plans = f.search(json!({ "query": "secret plan" }));
    let kinds: Vec<&Value> = plans["rows"].as_array().unwrap().iter().map(|row| &row["match_kind"]).collect();
    assert_eq!(kinds, [&json!("tool_intent")], "{plans}");
    let transcript = f.mnemo.history().transcript(&sid("s1"), None).unwrap().unwrap();
    assert_eq!(
        transcript.messages.len(),
        4,
        "user, streamed reply, call, result; no thinking, hidden or partial"
    );
}

#[test]
fn the_current_turn_is_excluded_only_in_the_current_session() {
    let mut f = fixture();
    f.open("s1", "one");
    f.open("s2", "two");
    f.user("s1", "t1", "a1", "earlier gateway question");
    f.user("s1", "t2", "a2", "current gateway question");
    f.user("s2", "t2", "b2", "copied gateway question");
    let (current, turn) = (sid("s1"), TurnId::new("t2").unwrap());
    let context = HistoryContext {
        current_session: Some(&current),
        current_turn: Some(&turn),
        ..HistoryContext::default()
    };
    let found = f.search_in(json!({"query": "gateway", "limit": 10}), &context, None);
    let mut ids = message_ids(&found);
    ids.sort();
    assert_eq!(ids, ["a1", "b2"]);
    let own = found["rows"].as_array().unwrap().iter().find(|r| r["message_id"] == json!("a1")).unwrap();
    assert_eq!(own["is_current_session"], json!(true));
    let read = f.read_in(json!({"session_id": "s1"}), &context, None);
    assert_eq!(read_texts(&read), ["earlier gateway question"]);
    assert_eq!(read["is_current_session"], json!(true));
    let other = f.read_in(json!({"session_id": "s2"}), &context, None);
    assert_eq!(read_texts(&other), ["copied gateway question"]);
}

#[test]
fn incognito_closes_the_gate_before_anything_is_read() {
    let mut f = fixture();
    f.open("s1", "open");
    f.user("s1", "t1", "m1", "visible words");
    f.append(
        "s2",
        vec![Record::SessionOpened(SessionOpened {
            session: sid("s2"),
            workspace: None,
            incognito: true,
            memory: MemoryMode::Disabled,
            subagent: false,
            title: None,
            source: None,
            parent: None,
        })],
    );
    let runtime = HistoryContext { incognito_active: true, ..HistoryContext::default() };
    assert_eq!(reason(&f.search_in(json!({"query": "visible"}), &runtime, None)), "incognito_active");
    let inside = sid("s2");
    let incognito_session = HistoryContext { current_session: Some(&inside), ..HistoryContext::default() };
    assert_eq!(
        reason(&f.search_in(json!({"query": "visible"}), &incognito_session, None)),
        "incognito_active"
    );
    // The secret guard comes before the gate.
    assert_eq!(reason(&f.search_in(json!({"query": "sk-abcdefgh123"}), &runtime, None)), "invalid_query");
}

#[test]
fn revisions_collapse_to_one_logical_session() {
    let mut f = fixture();
    f.open("root", "the root");
    f.user("root", "t1", "r1", "original wording about rockets");
    f.append(
        "rev",
        vec![Record::ConversationCopied(ConversationCopied {
            source: sid("root"),
            session: sid("rev"),
            up_to: CopyBoundary::BeforeTurn(TurnId::new("t1").unwrap()),
            events: vec![],
        })],
    );
    f.user("rev", "t1", "v1", "revised wording about rockets");
    f.append(
        "branch",
        vec![Record::ConversationCopied(ConversationCopied {
            source: sid("root"),
            session: sid("branch"),
            up_to: CopyBoundary::ThroughTurn(TurnId::new("t1").unwrap()),
            events: vec![],
        })],
    );
    f.user("branch", "t1", "b1", "branch wording about rockets");
    f.mnemo.catch_up().unwrap();

    // The revision is the family's freshest member; the branch is a session of its own.
    let found = f.search(json!({"query": "rockets", "limit": 10}));
    let mut sessions: Vec<&str> =
        found["rows"].as_array().unwrap().iter().map(|r| r["session_id"].as_str().unwrap()).collect();
    sessions.sort();
    assert_eq!(sessions, ["branch", "rev"], "{found}");
    assert_eq!(reason(&f.read(json!({"session_id": "root"}))), "session_not_found");
    // From inside the root, the root stands for its family.
    let root = sid("root");
    let context = HistoryContext { current_session: Some(&root), ..HistoryContext::default() };
    assert_eq!(reason(&f.read_in(json!({"session_id": "root"}), &context, None)), "ok");
    assert_eq!(reason(&f.read_in(json!({"session_id": "rev"}), &context, None)), "session_not_found");
}

#[test]
fn search_pages_past_ten_rows_with_next_cursor() {
    // Regression: when the limit cut the ranked rows no cursor was issued, so nothing past the
    // tenth row of a page could ever be read.
    let mut f = fixture();
    f.open("s1", "rollouts");
    for i in 0..25 {
        f.user("s1", &format!("t{i}"), &format!("m{i:02}"), &format!("deploy number {i}"));
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..3 {
        let mut args = json!({"query": "deploy", "limit": 10});
        if let Some(cursor) = &cursor {
            args["cursor"] = json!(cursor);
        }
        let found = f.search(args);
        let ids = message_ids(&found);
        assert_eq!(ids.len(), if page < 2 { 10 } else { 5 }, "page {page}: {found}");
        assert_eq!(found["truncated"], json!(page < 2), "page {page}: {found}");
        seen.extend(ids);
        cursor = found["next_cursor"].as_str().map(str::to_owned);
        assert_eq!(cursor.is_some(), page < 2, "page {page}: {found}");
    }
    let mut expected: Vec<String> = (0..25).rev().map(|i| format!("m{i:02}")).collect();
    assert_eq!(seen, expected, "every match once, best (here: newest) first");
    expected.sort();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, expected);
}

#[test]
fn cursors_page_sessions_and_belong_to_their_query() {
    let mut f = fixture();
    // 300 sessions: the second page runs past the most-recent list (256) into the recency index.
    for i in 0..300 {
        let session = format!("s{i:03}");
        f.open(&session, "page");
        f.user(&session, "t1", &format!("m{i}"), if i == 0 { "needle in the oldest" } else { "hay" });
    }
    f.user("s150", "t2", "x", "needle in the newest");
    let first = f.search(json!({"query": "needle"}));
    assert_eq!(message_ids(&first), ["x"], "the oldest sessions are past the 200-session page: {first}");
    assert_eq!(first["truncated"], json!(true), "more sessions remain");
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = f.search(json!({"query": "needle", "cursor": cursor}));
    assert_eq!(message_ids(&second), ["m0"]);
    assert!(second.get("next_cursor").is_none());
    assert_eq!(second["truncated"], json!(false));
    let other = f.search(json!({"query": "hay", "cursor": cursor}));
    assert_eq!(reason(&other), "invalid_query");
    assert_eq!(other["message"], json!("cursor is invalid or belongs to another query"));
    // The cursor binds the folded query, so case and normalization do not matter.
    assert_eq!(reason(&f.search(json!({"query": "NEEDLE", "cursor": cursor}))), "ok");
    let spaced = f.search(json!({"query": "needle", "cursor": format!("{cursor}\n")}));
    assert_eq!(reason(&spaced), "invalid_query");
}

#[test]
fn answers_as_of_an_earlier_position() {
    let mut f = fixture();
    f.open("s1", "travel");
    let before = f.user("s1", "t1", "m1", "first draft of the plan");
    f.user("s1", "t2", "m2", "final plan approved");
    f.append(
        "s1",
        vec![Record::SessionFlagsChanged(SessionFlagsChanged {
            session: sid("s1"),
            incognito: None,
            memory: None,
            title: Some("renamed".to_owned()),
        })],
    );
    let now = f.search(json!({"query": "plan", "limit": 10}));
    assert_eq!(message_ids(&now), ["m2", "m1"]);
    let then = f.search_in(json!({"query": "plan", "limit": 10}), &HistoryContext::default(), Some(before));
    assert_eq!(message_ids(&then), ["m1"]);
    assert_eq!(then["rows"][0]["title"], json!("travel"));
    let read_then = f.read_in(json!({"session_id": "s1"}), &HistoryContext::default(), Some(before));
    assert_eq!(read_texts(&read_then), ["first draft of the plan"]);
    let nothing = f.read_in(json!({"session_id": "s1"}), &HistoryContext::default(), Some(Position(0)));
    assert_eq!(reason(&nothing), "session_not_found");
    assert!(
        f.mnemo.history().transcript(&sid("s1"), Some(Position(999))).is_err(),
        "a position beyond the head is refused"
    );
}

#[test]
fn rebuilding_the_history_stages_gives_the_live_digests() {
    let mut f = fixture();
    f.open("s1", "digest");
    for i in 0..30 {
        f.user("s1", &format!("t{i}"), &format!("m{i}"), &format!("message {i} about ünïcode and 日本語"));
        f.tool_call("s1", &format!("t{i}"), &format!("c{i}"), Some("check the logs"));
        f.tool_result("s1", &format!("t{i}"), &format!("c{i}"), json!({"lines": i}), i % 3 == 0);
    }
    // A replaced message (same stored message id) and a renamed title exercise removal.
    let mut again =
        f.event("s1", "t1", "m1-final", Role::User, Content::Text(TextContent::new("replacement text")));
    again.refs = Some(Refs { stored_message_id: Some("m1".to_owned()), ..Refs::default() });
    f.append("s1", vec![Record::RuntimeEvent(again)]);
    f.mnemo.catch_up().unwrap();
    let live = f.mnemo.stats().unwrap().stages;
    for stage in ["history-messages", "history-search"] {
        let rebuilt = f.mnemo.rebuild(Some(stage)).unwrap();
        let before = live.iter().find(|s| s.name == stage).unwrap();
        assert_eq!(rebuilt[0].digest, before.digest, "{stage}");
    }
    assert!(f.mnemo.verify(&mut |_| {}).unwrap().ok());
    let replaced = f.search(json!({"query": "replacement"}));
    assert_eq!(message_ids(&replaced), ["m1"]);
}

/// The sessions of a search's rows, in order.
fn row_sessions(output: &Value) -> Vec<String> {
    output["rows"].as_array().unwrap().iter().map(|r| r["session_id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_search_limit_is_filled_from_the_callers_workspace_when_another_workspace_ranks_higher() {
    let mut f = fixture();
    f.open_in("mine", "notes", Some("acme/api"));
    for i in 0..3 {
        f.user(
            "mine",
            &format!("t{i}"),
            &format!("mine-{i}"),
            &format!("in passing, the rollout of build {i} went out with the usual checklist and a review"),
        );
    }
    // 50 shorter, denser matches in another workspace outrank every match of the caller's.
    for i in 0..50 {
        let session = format!("theirs-{i:02}");
        f.open_in(&session, "notes", Some("globex/web"));
        f.user(&session, "t1", &format!("theirs-{i}"), "rollout rollout rollout");
    }
    let anywhere = f.search(json!({"query": "rollout", "limit": 3}));
    assert!(row_sessions(&anywhere).iter().all(|s| s.starts_with("theirs-")), "{anywhere}");

    let mine = sid("mine");
    let context = HistoryContext { current_session: Some(&mine), ..HistoryContext::default() };
    let found = f.search_in(json!({"query": "rollout", "limit": 3}), &context, None);
    let mut ids = message_ids(&found);
    ids.sort();
    assert_eq!(ids, ["mine-0", "mine-1", "mine-2"], "{found}");
    assert_eq!(found["truncated"], json!(false), "nothing more matched in the caller's workspace: {found}");
}

#[test]
fn a_page_of_sessions_holds_only_the_callers_workspace() {
    let mut f = fixture();
    f.open_in("mine", "old work", Some("acme/api"));
    f.user("mine", "t1", "m-mine", "the needle we are after");
    // More sessions than a page, all newer than the caller's, all in another workspace.
    for i in 0..210 {
        let session = format!("theirs-{i:03}");
        f.open_in(&session, "busy", Some("globex/web"));
        f.user(&session, "t1", &format!("m{i}"), "needle");
    }
    let mine = sid("mine");
    let context = HistoryContext { current_session: Some(&mine), ..HistoryContext::default() };
    let found = f.search_in(json!({"query": "needle"}), &context, None);
    assert_eq!(message_ids(&found), ["m-mine"], "{found}");
    assert_eq!(found["truncated"], json!(false), "{found}");
    assert!(found.get("next_cursor").is_none(), "{found}");
}

#[test]
fn ranking_statistics_are_the_callers_workspace() {
    let mut f = fixture();
    // In the caller's workspace `alpha` is rare and `beta` common, so the `alpha` message ranks
    // first; across the whole store `alpha` is the common one.
    f.open_in("mine", "work", Some("acme/api"));
    f.user("mine", "t1", "a", "alpha");
    f.user("mine", "t2", "b", "beta");
    for i in 0..4 {
        f.user("mine", &format!("u{i}"), &format!("filler-{i}"), &format!("beta filler {i}"));
    }
    f.open_in("theirs", "work", Some("globex/web"));
    for i in 0..40 {
        f.user("theirs", &format!("t{i}"), &format!("x{i}"), &format!("alpha note {i}"));
    }
    let mine = sid("mine");
    let context = HistoryContext { current_session: Some(&mine), ..HistoryContext::default() };
    let found = f.search_in(json!({"query": "alpha beta", "limit": 10}), &context, None);
    assert_eq!(message_ids(&found)[..2], ["a", "b"], "{found}");
    // Without a current session the whole store's statistics rank: `beta` is the rarer term.
    let anywhere = f.search(json!({"query": "alpha beta", "limit": 10}));
    assert_eq!(message_ids(&anywhere)[0], "b", "{anywhere}");
}

#[test]
fn a_session_that_moves_workspace_takes_its_documents_along() {
    let mut f = fixture();
    f.open_in("s1", "first", Some("acme/api"));
    f.user("s1", "t1", "m1", "the moving needle");
    f.open_in("s2", "second", Some("globex/web"));
    f.user("s2", "t1", "m2", "a needle that stays");
    // Reopened in the other workspace: its documents count there now.
    f.open_in("s1", "first", Some("globex/web"));
    let s2 = sid("s2");
    let context = HistoryContext { current_session: Some(&s2), ..HistoryContext::default() };
    let mut ids = message_ids(&f.search_in(json!({"query": "needle"}), &context, None));
    ids.sort();
    assert_eq!(ids, ["m1", "m2"]);
    f.mnemo.catch_up().unwrap();
    let live = f.mnemo.stats().unwrap().stages;
    let rebuilt = f.mnemo.rebuild(Some("history-search")).unwrap();
    let before = live.iter().find(|s| s.name == "history-search").unwrap();
    assert_eq!(rebuilt[0].digest, before.digest);
    assert!(f.mnemo.verify(&mut |_| {}).unwrap().ok());
}
