//! Why an item exists and undoing a consolidation, on a real store (decision 0232): every item
//! shows the text, position and hash of the events it was learned from; an unmerge after a
//! merge gives back both items with their sources, an unmerge after a supersession restores the
//! replaced value; each is a record, so the rebuilt index is the same byte for byte.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::log::{ExpectedRevision, ManualClock};
use mnemo::memory::{ItemAction, ListRequest, RememberStatus};
use mnemo::records::{LifecycleState, MemoryItem, Record, SessionId, StreamId};
use mnemo::{Config, Mnemo};
use mnemo_core::{
    Author, Content, InvocationId, MemoryMode, OperationId, Role, RunId, RuntimeEvent, SessionOpened,
    TextContent, TimestampMs, TurnId, WorkspaceId,
};

fn open(dir: &std::path::Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn id<T: TryFrom<String>>(text: &str) -> T
where
    T::Error: std::fmt::Debug,
{
    T::try_from(text.to_owned()).unwrap()
}

fn session_with(mnemo: &Mnemo, session: &str, lines: &[&str]) {
    let sid: SessionId = id(session);
    let mut records = vec![Record::SessionOpened(SessionOpened {
        session: sid.clone(),
        workspace: Some(WorkspaceId::new("w1").unwrap()),
        incognito: false,
        memory: MemoryMode::Enabled,
        subagent: false,
        title: None,
        source: None,
        parent: None,
    })];
    for (turn, line) in lines.iter().enumerate() {
        for (n, (role, author, body)) in
            [(Role::User, Author::User, *line), (Role::Model, Author::Agent, "Noted.")]
                .into_iter()
                .enumerate()
        {
            let mut event = RuntimeEvent::new(
                id(&format!("{session}-t{turn}-e{n}")),
                id::<InvocationId>(&format!("inv-{turn}")),
                id::<RunId>(&format!("run-{turn}")),
                sid.clone(),
                id::<TurnId>(&format!("t{turn}")),
                TimestampMs(1_767_225_000_000 + (turn * 2 + n) as u64),
                role,
                author,
            );
            event.content = Some(Content::Text(TextContent::new(body)));
            records.push(Record::RuntimeEvent(event));
        }
    }
    mnemo.append(&StreamId::session(&sid), ExpectedRevision::Any, &records).unwrap();
}

fn extract(mnemo: &Mnemo, session: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(mnemo.memory().extract(&id(session), None)).unwrap();
}

fn items(mnemo: &Mnemo, include_archived: bool) -> Vec<MemoryItem> {
    mnemo.memory().list(&ListRequest { include_archived, ..ListRequest::default() }).unwrap()
}

fn digest(mnemo: &Mnemo) -> (String, String) {
    let live = mnemo.stats().unwrap().stages.into_iter().find(|s| s.name == "memory-index").unwrap();
    let rebuilt = mnemo.rebuild(Some("memory-index")).unwrap();
    (format!("{:?}", live.digest), format!("{:?}", rebuilt[0].digest))
}

#[test]
fn why_shows_the_evidence_text_of_every_item() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    session_with(&mnemo, "s1", &["Our staging database is stage-db-02.", "I prefer tabs over spaces."]);
    extract(&mnemo, "s1");
    session_with(&mnemo, "s2", &["We moved the staging database, it is now stage-db-03."]);
    extract(&mnemo, "s2");
    let all = items(&mnemo, true);
    assert_eq!(all.len(), 3, "{all:#?}");
    for item in &all {
        let why = mnemo.memory().why(&item.item).unwrap().unwrap();
        assert_eq!(why.evidence.len(), item.fields.sources.len());
        for evidence in &why.evidence {
            let text = evidence.text.as_deref().unwrap();
            let position = evidence.position.unwrap();
            let entry = &mnemo.log_entries(position, 1).unwrap()[0];
            assert_eq!(evidence.hash.as_deref(), Some(entry.hash.as_str()), "the event's own envelope");
            assert_eq!(evidence.role.as_deref(), Some("user"));
            let quoted = item.fields.content.split(' ').next_back().unwrap().trim_end_matches('.');
            assert!(text.contains(quoted), "{text:?} justifies {:?}", item.fields.content);
        }
        assert_eq!(why.records[0].event.action, ItemAction::Created);
        assert!(why.records.iter().all(|r| r.hash.as_ref().is_some_and(|h| h.len() == 64)));
    }
    // The replaced value points at its successor, and the successor back at it.
    let old = all.iter().find(|i| i.fields.content.ends_with("stage-db-02.")).unwrap();
    let new = all.iter().find(|i| i.fields.content.ends_with("stage-db-03.")).unwrap();
    assert_eq!(old.superseded_by.as_ref(), Some(&new.item));
    assert_eq!(new.supersedes, vec![old.item.clone()]);
    assert_eq!(old.lifecycle, LifecycleState::Archived);
}

#[test]
fn unmerge_after_a_consolidation_gives_back_both_items_with_their_sources() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    session_with(&mnemo, "s1", &["I prefer tabs over spaces."]);
    extract(&mnemo, "s1");
    session_with(&mnemo, "s2", &["I prefer tabs over spaces!"]);
    extract(&mnemo, "s2");
    let merged = items(&mnemo, true);
    assert_eq!(merged.len(), 1, "the restatement merged: {merged:#?}");
    let item = merged[0].clone();
    assert_eq!(item.fields.sources.len(), 2);

    let result = mnemo.memory().unmerge(&item.item, OperationId::new("unmerge-1").unwrap()).unwrap();
    assert!(!result.replayed);
    let after = items(&mnemo, true);
    assert_eq!(after.len(), 2, "both items are back: {after:#?}");
    let sessions =
        |i: &MemoryItem| i.fields.sources.iter().map(|s| s.session.as_str().to_owned()).collect::<Vec<_>>();
    let kept = after.iter().find(|i| i.item == item.item).unwrap();
    let split = after.iter().find(|i| i.item != item.item).unwrap();
    assert_eq!(sessions(kept), ["s1"]);
    assert_eq!(sessions(split), ["s2"]);
    assert!(after.iter().all(|i| i.lifecycle == LifecycleState::Active));
    let why = mnemo.memory().why(&split.item).unwrap().unwrap();
    assert_eq!(why.evidence[0].text.as_deref(), Some("I prefer tabs over spaces!"));
    assert_eq!(why.records[0].event.action, ItemAction::Split);
    let events = mnemo.memory().why(&item.item).unwrap().unwrap().records;
    let merge = events.iter().find(|r| r.event.action == ItemAction::Merged).unwrap();
    assert!(merge.event.undone_at.is_some(), "the merge is marked undone: {events:#?}");

    // A retry of the same operation is answered from the index; nothing else is left to undo.
    assert!(mnemo.memory().unmerge(&item.item, OperationId::new("unmerge-1").unwrap()).unwrap().replayed);
    assert!(mnemo.memory().unmerge(&item.item, OperationId::new("unmerge-2").unwrap()).is_err());
    let (live, rebuilt) = digest(&mnemo);
    assert_eq!(live, rebuilt);
}

#[test]
fn unmerge_after_a_supersession_restores_the_replaced_value() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    session_with(&mnemo, "s1", &["Our staging database is stage-db-02."]);
    extract(&mnemo, "s1");
    session_with(&mnemo, "s2", &["We switched our staging database to stage-db-03."]);
    extract(&mnemo, "s2");
    let new = items(&mnemo, false);
    assert_eq!(new.len(), 1);
    mnemo.memory().unmerge(&new[0].item, OperationId::new("unmerge-s").unwrap()).unwrap();
    let active = items(&mnemo, false);
    assert_eq!(active.len(), 2, "{active:#?}");
    assert!(active.iter().all(|i| i.superseded_by.is_none()));
    let (live, rebuilt) = digest(&mnemo);
    assert_eq!(live, rebuilt);
}

#[test]
fn a_fact_asked_to_be_remembered_is_remembered_and_superseded_by_a_newer_value() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    session_with(&mnemo, "s1", &["Please remember that our staging database is stage-db-02."]);
    let first = rt.block_on(mnemo.memory().remember(&id("s1"), None)).unwrap();
    assert_eq!(first.status, RememberStatus::Remembered, "{first:?}");
    session_with(&mnemo, "s2", &["We moved staging, it is now stage-db-03."]);
    extract(&mnemo, "s2");
    let active = items(&mnemo, false);
    let contents: Vec<&str> = active.iter().map(|i| i.fields.content.as_str()).collect();
    assert_eq!(contents, ["The team's staging is stage-db-03."]);
    let history = mnemo.memory().history(&active[0].item).unwrap();
    let values: Vec<&str> = history.iter().map(|h| h.item.fields.content.as_str()).collect();
    assert_eq!(values, ["The team's staging database is stage-db-02.", "The team's staging is stage-db-03."]);
    assert_eq!(history.iter().map(|h| h.current).collect::<Vec<_>>(), [false, true]);
}

#[test]
fn values_changed_within_one_extraction_are_decided_by_their_order_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    session_with(
        &mnemo,
        "s1",
        &[
            "Our staging database is stage-db-02.",
            "We moved the staging database, it is now stage-db-03.",
            "The staging database is back to stage-db-02.",
        ],
    );
    extract(&mnemo, "s1");
    let active = items(&mnemo, false);
    let contents: Vec<&str> = active.iter().map(|i| i.fields.content.as_str()).collect();
    assert_eq!(contents, ["The team's staging database is stage-db-02."]);
    let history = mnemo.memory().history(&active[0].item).unwrap();
    let values: Vec<(&str, bool)> =
        history.iter().map(|h| (h.item.fields.content.as_str(), h.current)).collect();
    assert_eq!(
        values,
        [
            ("The team's staging database is stage-db-02.", false),
            ("The team's staging database is stage-db-03.", false),
            ("The team's staging database is stage-db-02.", true),
        ]
    );
    // One commit made all three: the same position, in statement order.
    let statements: Vec<Option<u32>> = history.iter().map(|h| h.events[0].statement).collect();
    assert_eq!(statements, [Some(0), Some(1), Some(2)]);
    let (live, rebuilt) = digest(&mnemo);
    assert_eq!(live, rebuilt);
}
