//! Streaming chunks (events-and-history.md §1.9, decision 0145): partial events stay in the log as
//! the host sent them, but they are never history. Assembly, the compactable projection, the
//! checkpoint writer and conversation copy skip every partial, whether its final event exists yet or
//! not, so a session that ever streamed compacts and copies like any other.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use mnemo::compaction::{CompactOptions, ContextOptions, HistoryItem};
use mnemo::log::ExpectedRevision;
use mnemo::records::{Record, RuntimeEvent, SessionId, StreamId};
use mnemo::{Config, Mnemo};
use serde_json::json;

const SESSION: &str = "s-stream";

fn sid() -> SessionId {
    SessionId::new(SESSION).unwrap()
}

fn event(value: serde_json::Value) -> Record {
    Record::RuntimeEvent(serde_json::from_value::<RuntimeEvent>(value).unwrap())
}

/// One turn of the host's model loop: the user's request, the reply streamed as `chunks` (each a
/// partial text event of provider message `m{turn}`), then the final reply and the turn's end.
/// `late` chunks arrive after the final (a reconnecting stream resends them); `finished: false`
/// leaves the stream in flight (no final yet).
fn streamed_turn(turn: usize, chunks: &[&str], late: &[&str], finished: bool) -> Vec<Record> {
    let t = format!("t{turn:03}");
    let base = 1_767_225_600_000u64 + (turn as u64) * 1000;
    let common = |id: String, ts: u64| {
        json!({"id": id, "invocationId": format!("i{turn}"), "runId": format!("r{turn}"),
               "sessionId": SESSION, "turnId": t, "ts": ts})
    };
    let mut out = Vec::new();
    let mut user = common(format!("u{turn}"), base);
    let padding = "the parser keeps every line and the tests cover each branch ".repeat(6);
    user.as_object_mut().unwrap().extend(
        json!({"partial": false, "role": "user", "author": "user",
               "content": {"kind": "text", "text": format!("Turn {turn}: explain src/parser_{turn}.rs {padding}")}})
        .as_object()
        .unwrap()
        .clone(),
    );
    out.push(event(user));
    let chunk = |index: usize, text: &str, ts: u64| {
        let mut value = common(format!("p{turn}-{index}"), ts);
        value.as_object_mut().unwrap().extend(
            json!({"partial": true, "role": "model", "author": "agent",
                   "content": {"kind": "text", "text": text},
                   "refs": {"providerEventId": format!("m{turn}")}})
            .as_object()
            .unwrap()
            .clone(),
        );
        event(value)
    };
    for (index, text) in chunks.iter().enumerate() {
        out.push(chunk(index, text, base + 1 + index as u64));
    }
    if !finished {
        return out;
    }
    let whole: String = chunks.concat();
    let mut last = common(format!("f{turn}"), base + 100);
    last.as_object_mut().unwrap().extend(
        json!({"partial": false, "role": "model", "author": "agent",
               "content": {"kind": "text", "text": format!("{whole} {padding}")},
               "refs": {"providerEventId": format!("m{turn}")}})
        .as_object()
        .unwrap()
        .clone(),
    );
    out.push(event(last));
    for (index, text) in late.iter().enumerate() {
        out.push(chunk(chunks.len() + index, text, base + 200 + index as u64));
    }
    let mut end = common(format!("e{turn}"), base + 300);
    end.as_object_mut().unwrap().extend(
        json!({"partial": false, "role": "model", "author": "agent", "status": "completed",
               "actions": {"endInvocation": true}})
        .as_object()
        .unwrap()
        .clone(),
    );
    out.push(event(end));
    out
}

fn open(dir: &std::path::Path) -> Mnemo {
    Mnemo::open(&dir.join("store"), Config::default()).unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn append(mnemo: &Mnemo, records: &[Record]) {
    let appended = mnemo.append(&StreamId::session(&sid()), ExpectedRevision::Any, records).unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
}

/// A session of ten streamed turns (chunks before every final, a late chunk after some finals) and
/// an eleventh whose reply is still streaming.
fn streamed_session(mnemo: &Mnemo) {
    for turn in 0..10 {
        let late: &[&str] = if turn % 3 == 0 { &["!"] } else { &[] };
        append(mnemo, &streamed_turn(turn, &["hel", "lo", " wor", "ld"], late, true));
    }
    append(mnemo, &streamed_turn(10, &["still ", "stream"], &[], false));
}

fn texts(items: &[HistoryItem]) -> Vec<String> {
    items
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Event { event, .. } => Some(event.as_ref()),
            _ => None,
        })
        .filter_map(|event| match &event.content {
            Some(mnemo::records::Content::Text(text)) => Some(text.text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn context_never_shows_stream_chunks_beside_their_final() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    streamed_session(&mnemo);
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    assert!(history.events().all(|e| !e.partial), "a partial event reached the history");
    let texts = texts(&history.items);
    for chunk in ["hel", "lo", " wor", "ld", "!", "still ", "stream"] {
        assert!(!texts.iter().any(|t| t == chunk), "chunk {chunk:?} sent beside its final: {texts:?}");
    }
    assert_eq!(texts.iter().filter(|t| t.starts_with("hello world ")).count(), 10, "each final once");
}

#[test]
fn compaction_over_a_session_that_streamed_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    streamed_session(&mnemo);
    let outcome = block_on(mnemo.compaction().compact(&sid(), &CompactOptions::default())).unwrap();
    let why = |d: &mnemo::compaction::Diagnostics| {
        format!("reason {:?}, failed open {:?}", d.reason, d.fail_open_reason)
    };
    let recorded =
        outcome.recorded.unwrap_or_else(|| panic!("nothing recorded: {}", why(&outcome.history.diagnostics)));
    assert!(recorded.checkpoint.coverage.event_count > 0);
    // A later compaction over more streamed turns succeeds as well (it used to fail for good).
    for turn in 11..16 {
        append(&mnemo, &streamed_turn(turn, &["a", "b"], &["c"], true));
    }
    let again = block_on(mnemo.compaction().compact(&sid(), &CompactOptions::default())).unwrap();
    let second =
        again.recorded.unwrap_or_else(|| panic!("nothing recorded: {}", why(&again.history.diagnostics)));
    assert!(second.checkpoint.coverage.event_count > recorded.checkpoint.coverage.event_count);
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    assert_eq!(history.boundary.as_ref().unwrap().checkpoint, second.checkpoint.checkpoint);
    assert!(history.events().all(|e| !e.partial));
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}

#[test]
fn partial_events_are_never_copied() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    streamed_session(&mnemo);
    let report = mnemo.compaction().copy(&sid(), None, None).unwrap();
    let copied: Vec<RuntimeEvent> = mnemo
        .log_entries(report.positions.0, usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "runtime_event")
        .map(|e| serde_json::from_value(e.record).unwrap())
        .collect();
    assert!(!copied.is_empty());
    assert!(copied.iter().all(|e| !e.partial), "a partial event was copied");
    // 10 finished turns of user, final and end, and the streaming turn's user request.
    assert_eq!(report.events, 10 * 3 + 1);
}
