//! One door per room: the same record stored through every way a record can enter the log — the
//! facade's append, the store server's append with and without a durability, an import of the
//! record's transcript line (through the facade and through the server) and a conversation copy —
//! has one outcome. A host that speaks the protocol cannot store what a Rust host cannot, and a
//! durability changes when an append is answered, never what it stores.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod common;
use common::{start, stop};

use std::path::Path;

use mnemo::log::ExpectedRevision as FacadeExpected;
use mnemo::records::{
    Author, Content, EventId, InvocationId, Record, Role, RunId, RuntimeEvent, SessionId, StreamId,
    TextContent, TimestampMs, TurnId,
};
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};
use mnemo_server::client::{Client, ClientError, ConnectOptions};
use mnemo_server::methods::{
    Append, AppendParams, Durability, ExpectedRevision, Import, ImportParams, WireRecord,
};
use serde_json::{Map, Value, json};

/// What became of one record offered to one path.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Stored, with this content as the log holds it.
    Stored(Value),
    /// Refused, with a message that names this reason.
    Refused(&'static str),
}

/// The ways a host's record enters the log.
#[derive(Debug, Clone, Copy)]
enum Door {
    FacadeAppend,
    ServerAppend(Option<Durability>),
    FacadeImport,
    ServerImport,
}

const EVERY_DOOR: [Door; 7] = [
    Door::FacadeAppend,
    Door::ServerAppend(None),
    Door::ServerAppend(Some(Durability::Buffered)),
    Door::ServerAppend(Some(Durability::SyncData)),
    Door::ServerAppend(Some(Durability::SyncAll)),
    Door::FacadeImport,
    Door::ServerImport,
];

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn user_event(session: &SessionId, content: Content) -> RuntimeEvent {
    let mut event = RuntimeEvent::new(
        EventId::new("e1").unwrap(),
        InvocationId::new("r1").unwrap(),
        RunId::new("r1").unwrap(),
        session.clone(),
        TurnId::new("t1").unwrap(),
        TimestampMs(1_767_225_600_000),
        Role::User,
        Author::User,
    );
    event.content = Some(content);
    event
}

/// A text whose display text repeats it: the canonical form omits the display text (spec §1.2).
fn display_pair_event() -> RuntimeEvent {
    let mut text = TextContent::new("deploy with make release");
    text.display_text = Some("deploy with make release".to_owned());
    user_event(&session(), Content::Text(text))
}

/// A fact only a dedicated writer may record (spec §1.8 item 1): an event of the workspace
/// authority's session.
fn reserved_fact_event() -> RuntimeEvent {
    let authority = SessionId::new("maka_workspace_authority").unwrap();
    user_event(&authority, Content::Text(TextContent::new("the workspace is acme/payments-api")))
}

/// The event in the log's JSON form, exactly as a host would send it (not normalised first).
fn event_json(event: &RuntimeEvent) -> Map<String, Value> {
    match serde_json::to_value(event).unwrap() {
        Value::Object(object) => object,
        other => panic!("an event serializes as an object, not {other}"),
    }
}

/// The event as one line of the mnemo transcript format.
fn import_line(event: &RuntimeEvent) -> String {
    format!("{}\n", json!({"kind": "runtime_event", "event": event_json(event)}))
}

fn client(store: &Path) -> Client {
    Client::connect(store, &ConnectOptions::new("append-paths")).unwrap()
}

/// Offers `event` to the store at `store` through `door`; `Ok` when it was accepted, else the
/// error's text.
fn offer(store: &Path, door: Door, event: &RuntimeEvent) -> Result<(), String> {
    let stream = StreamId::session(&event.session_id);
    match door {
        Door::FacadeAppend => {
            let mnemo = Mnemo::open(store, Config::default()).unwrap();
            let outcome = mnemo
                .append(&stream, FacadeExpected::Any, &[Record::RuntimeEvent(event.clone())])
                .map(drop)
                .map_err(|e| e.to_string());
            mnemo.close().unwrap();
            outcome
        }
        Door::FacadeImport => {
            let mnemo = Mnemo::open(store, Config::default()).unwrap();
            let outcome = mnemo
                .import(import_line(event).as_bytes(), "request", ImportFormat::Mnemo)
                .map(drop)
                .map_err(|e| e.to_string());
            mnemo.close().unwrap();
            outcome
        }
        Door::ServerAppend(durability) => through_server(store, |client| {
            let record = WireRecord { kind: "runtime_event".to_owned(), record: event_json(event) };
            let params = AppendParams {
                stream: stream.to_string(),
                expected_revision: ExpectedRevision::Any,
                records: vec![record],
                durability,
            };
            client.call::<Append>(&params).map(drop)
        }),
        Door::ServerImport => through_server(store, |client| {
            let params = ImportParams {
                path: None,
                text: Some(import_line(event)),
                source: None,
                format: Some("mnemo".to_owned()),
            };
            client.call::<Import>(&params).map(drop)
        }),
    }
}

fn through_server(
    store: &Path,
    call: impl FnOnce(&mut Client) -> Result<(), ClientError>,
) -> Result<(), String> {
    let server = start(store);
    let outcome = call(&mut client(store)).map_err(|e| e.to_string());
    stop(store, server);
    outcome
}

/// What the log of `store` holds for the event: the content of the runtime event on its session's
/// stream, if any.
fn stored_content(store: &Path, session: &SessionId) -> Option<Value> {
    let mnemo = Mnemo::open(store, Config::default()).unwrap();
    let entries = mnemo.stream_tail(&StreamId::session(session), 16).unwrap();
    mnemo.close().unwrap();
    entries
        .into_iter()
        .find(|entry| entry.kind == "runtime_event")
        .map(|entry| entry.record["content"].clone())
}

/// The outcome of `event` through `door` in a new store: refused (with `reason` in the message, and
/// nothing stored) or stored (with the content the log holds).
fn outcome(door: Door, event: &RuntimeEvent, reason: &'static str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    match offer(&store, door, event) {
        Ok(()) => Outcome::Stored(
            stored_content(&store, &event.session_id)
                .unwrap_or_else(|| panic!("{door:?} accepted the event but stored none")),
        ),
        Err(message) => {
            assert!(message.contains(reason), "{door:?} refused for another reason: {message}");
            assert_eq!(stored_content(&store, &event.session_id), None, "{door:?} refused but stored");
            Outcome::Refused(reason)
        }
    }
}

#[test]
fn a_reserved_fact_is_refused_on_every_path() {
    let event = reserved_fact_event();
    let reason = "the workspace authority session is reserved";
    for door in EVERY_DOOR {
        assert_eq!(outcome(door, &event, reason), Outcome::Refused(reason), "through {door:?}");
    }
}

#[test]
fn a_display_text_equal_to_the_text_is_stored_in_canonical_form_on_every_path() {
    let event = display_pair_event();
    let canonical = Outcome::Stored(json!({"kind": "text", "text": "deploy with make release"}));
    for door in EVERY_DOOR {
        assert_eq!(outcome(door, &event, "(none)"), canonical, "through {door:?}");
    }
}

#[test]
fn a_copy_carries_the_canonical_form() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    offer(&store, Door::FacadeAppend, &display_pair_event()).unwrap();
    let target = SessionId::new("s1-copy").unwrap();
    let mnemo = Mnemo::open(&store, Config::default()).unwrap();
    mnemo.compaction().copy(&session(), None, Some(target.clone())).unwrap();
    mnemo.close().unwrap();
    assert_eq!(
        stored_content(&store, &target),
        Some(json!({"kind": "text", "text": "deploy with make release"})),
    );
}
