//! Appends a host can retry (spec events-and-history.md §1.8): an event is known by its id, an
//! exact retry is a no-op answered with the original position, the same id with another payload is
//! a typed conflict that stores nothing of its append.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use mnemo::compaction::{ContextOptions, HistoryItem};
use mnemo::log::ExpectedRevision;
use mnemo::records::{
    AppendRefusal, Author, Content, EventId, InvocationId, Position, Record, Role, RunId, RuntimeEvent,
    SessionId, SessionOpened, StreamId, TextContent, TimestampMs, TurnId,
};
use mnemo::{Config, Error, ErrorCategory, Mnemo};

const SESSION: &str = "s1";

fn sid() -> SessionId {
    SessionId::new(SESSION).unwrap()
}

fn stream() -> StreamId {
    StreamId::session(&sid())
}

fn text_event(id: &str, turn: &str, role: Role, text: &str) -> Record {
    let author = match role {
        Role::User => Author::User,
        _ => Author::Agent,
    };
    let mut event = RuntimeEvent::new(
        EventId::new(id).unwrap(),
        InvocationId::new(turn).unwrap(),
        RunId::new(turn).unwrap(),
        sid(),
        TurnId::new(turn).unwrap(),
        TimestampMs(1_767_225_600_000),
        role,
        author,
    );
    event.content = Some(Content::Text(TextContent::new(text)));
    Record::RuntimeEvent(event)
}

fn opened() -> Record {
    Record::SessionOpened(SessionOpened {
        session: sid(),
        workspace: None,
        incognito: false,
        memory: mnemo::records::MemoryMode::Enabled,
        subagent: false,
        title: None,
        source: None,
        parent: None,
    })
}

fn open(dir: &std::path::Path) -> Mnemo {
    Mnemo::open(dir, Config::default()).unwrap()
}

/// A store with one turn: the session, a request and a reply.
fn store() -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let records = [
        opened(),
        text_event("e1", "t1", Role::User, "hello there"),
        text_event("e2", "t1", Role::Model, "hi, what can I do"),
    ];
    mnemo.append(&stream(), ExpectedRevision::NoStream, &records).unwrap();
    (dir, mnemo)
}

/// The event ids of the next request's history, in order.
fn history_ids(mnemo: &Mnemo) -> Vec<String> {
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    history
        .items
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Event { event, .. } => Some(event.id.to_string()),
            _ => None,
        })
        .collect()
}

fn stream_len(mnemo: &Mnemo) -> usize {
    mnemo.log().read_stream(&stream(), mnemo::records::StreamRevision::FIRST, 1000).unwrap().len()
}

#[test]
fn a_retried_append_is_stored_once_and_answers_the_original_position() {
    let (_dir, mnemo) = store();
    let head = mnemo.log().head();
    // The host's first attempt timed out after the store had committed it; it sends it again.
    let retry = mnemo.append(
        &stream(),
        ExpectedRevision::Any,
        &[text_event("e2", "t1", Role::Model, "hi, what can I do")],
    );
    let retry = retry.unwrap();
    assert_eq!((retry.first_position, retry.last_position), (Position(3), Position(3)));
    assert_eq!(retry.retried, 1);
    assert_eq!(mnemo.log().head(), head, "a retry appends nothing");
    assert_eq!(stream_len(&mnemo), 3);
    mnemo.catch_up().unwrap();
    assert_eq!(history_ids(&mnemo), ["e1", "e2"], "the model receives the event once");
    // A retry with the revision the host expected the first time is still answered as a retry.
    let again = mnemo.append(
        &stream(),
        ExpectedRevision::Exact(mnemo::records::StreamRevision(1)),
        &[text_event("e2", "t1", Role::Model, "hi, what can I do")],
    );
    assert_eq!(again.unwrap().first_position, Position(3));
}

#[test]
fn a_batch_that_repeats_an_event_stores_it_once() {
    let (_dir, mnemo) = store();
    let event = text_event("e3", "t2", Role::User, "next question");
    let appended = mnemo.append(&stream(), ExpectedRevision::Any, &[event.clone(), event]).unwrap();
    assert_eq!(
        (appended.first_position, appended.last_position, appended.retried),
        (Position(4), Position(4), 1)
    );
    assert_eq!(stream_len(&mnemo), 4);
}

#[test]
fn a_partial_retry_appends_only_the_new_events() {
    let (_dir, mnemo) = store();
    let batch = [
        text_event("e2", "t1", Role::Model, "hi, what can I do"),
        text_event("e3", "t2", Role::User, "next question"),
    ];
    let appended = mnemo.append(&stream(), ExpectedRevision::Any, &batch).unwrap();
    assert_eq!(
        (appended.first_position, appended.last_position, appended.retried),
        (Position(3), Position(4), 1)
    );
    assert_eq!(stream_len(&mnemo), 4);
    mnemo.catch_up().unwrap();
    assert_eq!(history_ids(&mnemo), ["e1", "e2", "e3"]);
}

#[test]
fn the_same_event_id_with_another_payload_is_refused_and_nothing_of_the_batch_is_stored() {
    let (_dir, mnemo) = store();
    let head = mnemo.log().head();
    let batch = [
        text_event("e3", "t2", Role::User, "a new event before the conflicting one"),
        text_event("e1", "t1", Role::User, "hello there, edited"),
    ];
    let error = mnemo.append(&stream(), ExpectedRevision::Any, &batch).unwrap_err();
    let Error::Refused { record, reason, held_at, .. } = &error else { panic!("{error:?}") };
    assert_eq!(*record, 1);
    assert_eq!(*reason, AppendRefusal::IdentityConflict { event: "e1".to_owned() });
    assert_eq!(*held_at, Some(Position(2)));
    assert_eq!(error.category(), ErrorCategory::Conflict);
    assert_eq!(mnemo.log().head(), head, "nothing of the batch is stored");
    // Inside one batch as well.
    let twice = [text_event("e4", "t2", Role::User, "one"), text_event("e4", "t2", Role::User, "two")];
    assert!(matches!(
        mnemo.append(&stream(), ExpectedRevision::Any, &twice),
        Err(Error::Refused { record: 1, reason: AppendRefusal::IdentityConflict { .. }, .. })
    ));
    assert_eq!(mnemo.log().head(), head);
}

/// A closed store holding the session's opening and event `e1` (positions 1 and 2).
fn closed_store_with_e1() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo
        .append(&stream(), ExpectedRevision::NoStream, &[opened(), text_event("e1", "t1", Role::User, "a")])
        .unwrap();
    mnemo.close().unwrap();
    dir
}

#[test]
fn retries_are_known_after_reopen_and_after_the_index_is_built_from_the_log() {
    let dir = closed_store_with_e1();
    let known = |mnemo: &Mnemo, store: &str| {
        let retry = mnemo
            .append(&stream(), ExpectedRevision::Any, &[text_event("e1", "t1", Role::User, "a")])
            .unwrap();
        assert_eq!((retry.first_position, retry.retried), (Position(2), 1), "a retry to the {store}");
        let other =
            mnemo.append(&stream(), ExpectedRevision::Any, &[text_event("e1", "t1", Role::User, "b")]);
        assert!(
            matches!(other, Err(Error::Refused { reason: AppendRefusal::IdentityConflict { .. }, .. })),
            "another payload to the {store}: {other:?}"
        );
    };
    let mnemo = open(dir.path());
    known(&mnemo, "reopened store");
    mnemo.close().unwrap();
    // A salvaged store's envelopes are copied verbatim and its key index is built from them.
    let salvaged = tempfile::tempdir().unwrap();
    let to = salvaged.path().join("store");
    mnemo::log::salvage(dir.path(), &to, &mut |_| {}).unwrap();
    let mnemo = open(&to);
    assert_eq!(mnemo.log().head(), Position(2));
    known(&mnemo, "salvaged store");
    assert_eq!(mnemo.log().head(), Position(2), "a retry appends nothing to the salvaged store");
}

#[test]
fn a_damaged_key_index_is_reported_and_a_salvage_builds_it_again_from_the_log() {
    let dir = closed_store_with_e1();
    // Every version file of the key index's own database gets a flipped byte.
    let keyspaces = dir.path().join(mnemo::log::KEYS_DATABASE_DIR_NAME).join("keyspaces");
    let mut flipped = 0;
    for entry in std::fs::read_dir(&keyspaces).unwrap() {
        let keyspace = entry.unwrap().path();
        let current = std::fs::read(keyspace.join("current")).unwrap();
        let version = keyspace.join(format!("v{}", u64::from_le_bytes(current[..8].try_into().unwrap())));
        let mut bytes = std::fs::read(&version).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        std::fs::write(&version, bytes).unwrap();
        flipped += 1;
    }
    assert!(flipped > 0, "the key index has a database of its own");
    let refused = Mnemo::open(dir.path(), Config::default()).map(|_| ()).unwrap_err().to_string();
    assert!(refused.contains("damaged") && refused.contains("of keys/"), "{refused}");

    let salvaged = tempfile::tempdir().unwrap();
    let to = salvaged.path().join("store");
    let report = mnemo::log::salvage(dir.path(), &to, &mut |_| {}).unwrap();
    assert_eq!(report.recovered, 2, "{report:?}");
    let mnemo = open(&to);
    let retry =
        mnemo.append(&stream(), ExpectedRevision::Any, &[text_event("e1", "t1", Role::User, "a")]).unwrap();
    assert_eq!((retry.first_position, retry.retried), (Position(2), 1), "the rebuilt index knows e1");
}

/// The reference runtime's event lines (the `maka` format), one of them logged twice.
const MAKA_RETRIED: &str = r#"{"id":"m1","invocationId":"i1","runId":"r1","sessionId":"sm","turnId":"t1","ts":1767225600000,"partial":false,"role":"user","author":"user","content":{"kind":"text","text":"hello"}}
{"id":"m2","invocationId":"i1","runId":"r1","sessionId":"sm","turnId":"t1","ts":1767225600001,"partial":false,"role":"model","author":"agent","content":{"kind":"text","text":"hi"}}
{"id":"m2","invocationId":"i1","runId":"r1","sessionId":"sm","turnId":"t1","ts":1767225600001,"partial":false,"role":"model","author":"agent","content":{"kind":"text","text":"hi"}}
"#;

#[test]
fn an_event_logged_twice_by_the_runtime_imports_once() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let report = mnemo
        .import(MAKA_RETRIED.as_bytes(), "retried.jsonl", mnemo::transcript::ImportFormat::Maka)
        .unwrap();
    assert_eq!(report.records, 2, "{report:?}");
    let mut lines: Vec<String> = MAKA_RETRIED.lines().map(str::to_owned).collect();
    lines[2] = lines[2].replace(r#""text":"hi""#, r#""text":"hello!""#);
    let changed = lines.join("\n");
    assert_ne!(changed, MAKA_RETRIED);
    let other = tempfile::tempdir().unwrap();
    let error = open(other.path())
        .import(changed.as_bytes(), "changed.jsonl", mnemo::transcript::ImportFormat::Maka)
        .unwrap_err()
        .to_string();
    assert!(error.contains("event id m2 is used by an earlier line with another payload"), "{error}");
}
