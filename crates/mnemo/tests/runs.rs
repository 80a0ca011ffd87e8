//! Run identity, sealing, tool-call pairing, reserved facts and text normalisation on every append
//! path (spec events-and-history.md §1.6–1.8): `Mnemo::append` and the `maka` / `runtime_event`
//! import lines refuse what the reference store refuses, with typed reasons, and store nothing of
//! a refused append.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use mnemo::log::ExpectedRevision;
use mnemo::records::{
    Actions, AppendRefusal, Author, Content, EventId, EventStatus, FunctionCall, FunctionResponse,
    InvocationId, Position, Record, Role, RunId, RuntimeEvent, SessionId, StreamId, TextContent, TimestampMs,
    ToolCallId, TurnId,
};
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Error, ErrorCategory, Mnemo};
use serde_json::json;

const SESSION: &str = "s1";

fn stream() -> StreamId {
    StreamId::session(&SessionId::new(SESSION).unwrap())
}

/// An event of `SESSION` in invocation `invocation`, run `run` and turn `turn`.
fn event(
    id: &str,
    (invocation, run, turn): (&str, &str, &str),
    role: Role,
    content: Option<Content>,
) -> RuntimeEvent {
    let author = match role {
        Role::User => Author::User,
        Role::Model => Author::Agent,
        Role::Tool => Author::Tool,
        _ => Author::System,
    };
    let mut event = RuntimeEvent::new(
        EventId::new(id).unwrap(),
        InvocationId::new(invocation).unwrap(),
        RunId::new(run).unwrap(),
        SessionId::new(SESSION).unwrap(),
        TurnId::new(turn).unwrap(),
        TimestampMs(1_767_225_600_000),
        role,
        author,
    );
    event.content = content;
    event
}

const RUN1: (&str, &str, &str) = ("i1", "r1", "t1");

fn text(id: &str, at: (&str, &str, &str), body: &str) -> Record {
    Record::RuntimeEvent(event(id, at, Role::User, Some(Content::Text(TextContent::new(body)))))
}

fn call(id: &str, at: (&str, &str, &str), call: &str) -> Record {
    let content = FunctionCall::new(ToolCallId::new(call).unwrap(), "shell", json!({"cmd": "ls"}));
    Record::RuntimeEvent(event(id, at, Role::Model, Some(Content::FunctionCall(content))))
}

fn result(id: &str, at: (&str, &str, &str), call: &str) -> Record {
    let content = FunctionResponse::new(ToolCallId::new(call).unwrap(), "shell", json!("ok"));
    Record::RuntimeEvent(event(id, at, Role::Tool, Some(Content::FunctionResponse(content))))
}

fn terminal(id: &str, at: (&str, &str, &str)) -> Record {
    let mut end = event(id, at, Role::System, None);
    end.status = Some(EventStatus::Aborted);
    Record::RuntimeEvent(end)
}

fn store() -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    (dir, mnemo)
}

fn append(mnemo: &Mnemo, records: &[Record]) -> Result<mnemo::log::Appended, Error> {
    mnemo.append(&stream(), ExpectedRevision::Any, records)
}

/// The reason of a refused append, checking that nothing was stored.
fn refused(mnemo: &Mnemo, records: &[Record]) -> AppendRefusal {
    let head = mnemo.log().head();
    let error = append(mnemo, records).unwrap_err();
    assert_eq!(mnemo.log().head(), head, "a refused append stores nothing");
    match error {
        Error::Refused { reason, .. } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn s(text: &str) -> String {
    text.to_owned()
}

#[test]
fn an_invocation_belongs_to_one_run_and_turn_and_a_run_to_one_invocation() {
    let (_dir, mnemo) = store();
    append(&mnemo, &[text("e1", RUN1, "hello")]).unwrap();
    assert_eq!(
        refused(&mnemo, &[text("e2", ("i1", "r1", "t2"), "same invocation, another turn")]),
        AppendRefusal::InvocationConflict { session: s(SESSION), invocation: s("i1") }
    );
    assert_eq!(
        refused(&mnemo, &[text("e2", ("i1", "r2", "t1"), "same invocation, another run")]),
        AppendRefusal::InvocationConflict { session: s(SESSION), invocation: s("i1") }
    );
    assert_eq!(
        refused(&mnemo, &[text("e2", ("i2", "r1", "t1"), "same run, another invocation")]),
        AppendRefusal::RunConflict { session: s(SESSION), run: s("r1") }
    );
    // Inside one batch as well: the first event claims what the second contradicts.
    assert_eq!(
        refused(&mnemo, &[text("e3", ("i3", "r3", "t3"), "a"), text("e4", ("i3", "r3", "t4"), "b")]),
        AppendRefusal::InvocationConflict { session: s(SESSION), invocation: s("i3") }
    );
    append(&mnemo, &[text("e2", RUN1, "more of the same run")]).unwrap();
}

#[test]
fn a_terminal_event_seals_its_run_and_later_events_are_refused() {
    let (_dir, mnemo) = store();
    append(&mnemo, &[text("e1", RUN1, "hello"), terminal("end", RUN1)]).unwrap();
    let late = refused(&mnemo, &[text("e2", RUN1, "a late event")]);
    assert_eq!(late, AppendRefusal::RunSealed { session: s(SESSION), run: s("r1") });
    let error = append(&mnemo, &[text("e2", RUN1, "a late event")]).unwrap_err();
    assert_eq!(error.category(), ErrorCategory::Conflict);
    // A second terminal event is refused the same way; exact retries are still answered.
    assert!(matches!(refused(&mnemo, &[terminal("end2", RUN1)]), AppendRefusal::RunSealed { .. }));
    let retry = append(&mnemo, &[text("e1", RUN1, "hello"), terminal("end", RUN1)]).unwrap();
    assert_eq!((retry.first_position, retry.last_position, retry.retried), (Position(1), Position(2), 2));
    // endInvocation seals as well; another run of the session goes on.
    let mut ending = event("e3", ("i2", "r2", "t2"), Role::System, None);
    ending.actions = Some(Actions { end_invocation: Some(true), ..Actions::default() });
    append(&mnemo, &[text("e4", ("i2", "r2", "t2"), "next"), Record::RuntimeEvent(ending)]).unwrap();
    assert!(matches!(
        refused(&mnemo, &[text("e5", ("i2", "r2", "t2"), "x")]),
        AppendRefusal::RunSealed { .. }
    ));
    append(&mnemo, &[text("e5", ("i3", "r3", "t3"), "a third run")]).unwrap();
}

#[test]
fn tool_calls_pair_per_invocation_on_the_generic_path() {
    let (_dir, mnemo) = store();
    assert_eq!(
        refused(&mnemo, &[result("res0", RUN1, "c0")]),
        AppendRefusal::ToolResultWithoutCall { invocation: s("i1"), call: s("c0") }
    );
    append(&mnemo, &[call("call1", RUN1, "c1"), result("res1", RUN1, "c1")]).unwrap();
    assert_eq!(
        refused(&mnemo, &[call("call1b", RUN1, "c1")]),
        AppendRefusal::DuplicateToolCall { invocation: s("i1"), call: s("c1") }
    );
    assert_eq!(
        refused(&mnemo, &[result("res1b", RUN1, "c1")]),
        AppendRefusal::DuplicateToolResult { invocation: s("i1"), call: s("c1") }
    );
    // Another invocation's call does not answer for this one.
    assert!(matches!(
        refused(&mnemo, &[result("res2", ("i2", "r2", "t2"), "c1")]),
        AppendRefusal::ToolResultWithoutCall { .. }
    ));
}

#[test]
fn reserved_facts_are_refused_on_the_generic_path() {
    let (_dir, mnemo) = store();
    let mut fact = event("f1", RUN1, Role::System, None);
    fact.actions = Some(Actions { workspace_fact: Some(json!({"kind": "x"})), ..Actions::default() });
    let error = append(&mnemo, &[text("e1", RUN1, "hello"), Record::RuntimeEvent(fact)]).unwrap_err();
    let Error::Refused { record, reason, .. } = &error else { panic!("{error:?}") };
    assert_eq!(*record, 1);
    assert_eq!(
        *reason,
        AppendRefusal::ReservedFact { event: s("f1"), reason: "workspace facts are reserved" }
    );
    assert_eq!(error.category(), ErrorCategory::Input);
    assert_eq!(mnemo.log().head(), Position::ZERO);
}

#[test]
fn text_is_normalised_before_it_is_checked_and_stored() {
    let (_dir, mnemo) = store();
    let mut content = TextContent::new("hello");
    content.display_text = Some(s("hello"));
    content.attachments = Some(Vec::new());
    let raw = Record::RuntimeEvent(event("e1", RUN1, Role::User, Some(Content::Text(content))));
    append(&mnemo, std::slice::from_ref(&raw)).unwrap();
    let stored = mnemo.log().read(Position(1)).unwrap().unwrap();
    let stored: serde_json::Value = serde_json::from_slice(&stored.record).unwrap();
    assert_eq!(stored["content"], json!({"kind": "text", "text": "hello"}));
    // The normalised and the raw form are the same event: either is a retry.
    assert_eq!(append(&mnemo, &[raw]).unwrap().retried, 1);
    assert_eq!(append(&mnemo, &[text("e1", RUN1, "hello")]).unwrap().retried, 1);
}

/// A `maka` file: the reference runtime's event lines.
fn maka_line(id: &str, extra: serde_json::Value) -> String {
    let mut line = json!({
        "id": id, "invocationId": "i1", "runId": "r1", "sessionId": "sm", "turnId": "t1",
        "ts": 1_767_225_600_000_u64, "partial": false, "role": "user", "author": "user",
    });
    for (key, value) in extra.as_object().unwrap() {
        line[key] = value.clone();
    }
    line.to_string()
}

fn import_maka(lines: &[String]) -> Result<mnemo::transcript::ImportReport, Error> {
    let (_dir, mnemo) = store();
    let report = mnemo.import(format!("{}\n", lines.join("\n")).as_bytes(), "run.jsonl", ImportFormat::Maka);
    if report.is_err() {
        assert_eq!(mnemo.log().head(), Position::ZERO, "a refused import stores nothing");
    }
    report
}

#[test]
fn the_import_paths_refuse_what_the_generic_path_refuses() {
    let hello =
        maka_line("m1", json!({"content": {"kind": "text", "text": "hello", "displayText": "hello"}}));
    let ended = maka_line("m2", json!({"role": "system", "author": "system", "status": "completed"}));
    let late = maka_line("m3", json!({"content": {"kind": "text", "text": "late"}}));
    let orphan = maka_line(
        "m4",
        json!({"role": "tool", "author": "tool", "content": {"kind": "function_response", "id": "c9", "name": "shell", "result": "ok"}}),
    );
    let reserved =
        maka_line("m5", json!({"role": "system", "author": "system", "actions": {"workspaceFact": {}}}));
    // Normalisable text imports.
    assert_eq!(import_maka(&[hello.clone(), ended.clone()]).unwrap().records, 2);
    // Each refusal names the line, and nothing of the file is stored.
    let sealed = import_maka(&[hello.clone(), ended, late]).unwrap_err().to_string();
    assert!(sealed.starts_with("run.jsonl:3:"), "{sealed}");
    assert!(sealed.contains("run r1 of session sm is sealed"), "{sealed}");
    let orphaned = import_maka(&[hello.clone(), orphan]).unwrap_err().to_string();
    assert!(orphaned.contains("tool result for c9, which invocation i1 never called"), "{orphaned}");
    let fact = import_maka(&[hello.clone(), reserved]).unwrap_err().to_string();
    assert!(fact.contains("workspace facts are reserved"), "{fact}");
    // Run identity: the invocation moves to another turn, or the run to another invocation.
    let other_turn = maka_line("m6", json!({"turnId": "t2", "content": {"kind": "text", "text": "x"}}));
    let moved = import_maka(&[hello.clone(), other_turn]).unwrap_err().to_string();
    assert!(moved.starts_with("run.jsonl:2:"), "{moved}");
    assert!(moved.contains("invocation i1 of session sm already belongs to another run or turn"), "{moved}");
    let other_invocation =
        maka_line("m7", json!({"invocationId": "i2", "content": {"kind": "text", "text": "x"}}));
    let moved = import_maka(&[hello, other_invocation]).unwrap_err().to_string();
    assert!(moved.contains("run r1 of session sm already belongs to another invocation or turn"), "{moved}");
}

#[test]
fn a_refused_line_past_the_first_append_of_an_import_stores_nothing() {
    // More events than one append holds: the refused line is in the file's second append.
    let mut lines: Vec<String> = (0..1100)
        .map(|i| {
            maka_line(&format!("m{i}"), json!({"content": {"kind": "text", "text": format!("line {i}")}}))
        })
        .collect();
    lines.push(maka_line("end", json!({"role": "system", "author": "system", "status": "completed"})));
    lines.push(maka_line("late", json!({"content": {"kind": "text", "text": "after the end"}})));
    let error = import_maka(&lines).unwrap_err().to_string();
    assert!(error.starts_with("run.jsonl:1102:"), "{error}");
    lines.pop();
    assert_eq!(import_maka(&lines).unwrap().records, 1101);
}

/// Imports `lines` as a `maka` file read from disk a line at a time (the CLI's import path).
fn import_maka_file(
    mnemo: &Mnemo,
    dir: &std::path::Path,
    name: &str,
    lines: &[String],
) -> Result<usize, Error> {
    let path = dir.join(name);
    std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
    mnemo.import_file(path.to_str().unwrap(), ImportFormat::Maka).map(|report| report.records)
}

#[test]
fn a_streamed_import_refuses_what_the_store_sealed_and_stores_nothing_of_the_file() {
    let (dir, mnemo) = store();
    let hello = maka_line("m1", json!({"content": {"kind": "text", "text": "hello"}}));
    let ended = maka_line("m2", json!({"role": "system", "author": "system", "status": "completed"}));
    let mut lines = vec![hello, ended];
    assert_eq!(import_maka_file(&mnemo, dir.path(), "session.jsonl", &lines).unwrap(), 2);
    let head = mnemo.log().head();
    // The session file grows: a new run goes on, then the sealed run gets a late event on the
    // file's last line, well past the import's first append.
    lines.extend((0..1100).map(|i| {
        let mut line: serde_json::Value = serde_json::from_str(&maka_line(
            &format!("n{i}"),
            json!({"content": {"kind": "text", "text": format!("line {i}")}}),
        ))
        .unwrap();
        line["runId"] = json!("r2");
        line["invocationId"] = json!("i2");
        line["turnId"] = json!("t2");
        line.to_string()
    }));
    lines.push(maka_line("late", json!({"content": {"kind": "text", "text": "after the end"}})));
    let error = import_maka_file(&mnemo, dir.path(), "session.jsonl", &lines).unwrap_err().to_string();
    assert!(error.contains("session.jsonl:1103:"), "{error}");
    assert!(error.contains("run r1 of session sm is sealed"), "{error}");
    assert_eq!(mnemo.log().head(), head, "a refused import stores nothing");
    // The same refusal on the host's append path.
    let late = maka_line("late", json!({"content": {"kind": "text", "text": "after the end"}}));
    let record: Record = Record::RuntimeEvent(serde_json::from_str(&late).unwrap());
    let sm = StreamId::session(&SessionId::new("sm").unwrap());
    let Error::Refused { reason, .. } = mnemo.append(&sm, ExpectedRevision::Any, &[record]).unwrap_err()
    else {
        panic!("not a refusal")
    };
    assert_eq!(reason, AppendRefusal::RunSealed { session: s("sm"), run: s("r1") });
    // Without the late line the file imports.
    lines.pop();
    assert_eq!(import_maka_file(&mnemo, dir.path(), "session.jsonl", &lines).unwrap(), 1100);
}

#[test]
fn a_streamed_import_pairs_tool_calls_across_its_appends() {
    let (dir, mnemo) = store();
    let call = |id: &str, call: &str| {
        maka_line(
            id,
            json!({"role": "model", "author": "agent", "content": {"kind": "function_call", "id": call, "name": "shell", "args": {}}}),
        )
    };
    let answer = |id: &str, call: &str| {
        maka_line(
            id,
            json!({"role": "tool", "author": "tool", "content": {"kind": "function_response", "id": call, "name": "shell", "result": "ok"}}),
        )
    };
    // A call in the file's first append, its result in a later one: paired.
    let mut lines = vec![call("c", "c1")];
    lines.extend(
        (0..1100).map(|i| maka_line(&format!("x{i}"), json!({"content": {"kind": "text", "text": "x"}}))),
    );
    lines.push(answer("r", "c1"));
    assert_eq!(import_maka_file(&mnemo, dir.path(), "paired.jsonl", &lines).unwrap(), 1102);
    // The file grows by a second result for the same call, or by a result for a call never made.
    let head = mnemo.log().head();
    let grown = |line: String| [lines.clone(), vec![line]].concat();
    let again = import_maka_file(&mnemo, dir.path(), "paired.jsonl", &grown(answer("r2", "c1"))).unwrap_err();
    assert!(again.to_string().contains("tool call c1 of invocation i1 already has its result"), "{again}");
    let orphan =
        import_maka_file(&mnemo, dir.path(), "paired.jsonl", &grown(answer("r3", "c9"))).unwrap_err();
    assert!(orphan.to_string().contains("tool result for c9, which invocation i1 never called"), "{orphan}");
    assert_eq!(mnemo.log().head(), head);
}
