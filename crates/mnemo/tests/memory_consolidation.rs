//! Each fact once, through the facade on a real store: restated facts merge into one item with
//! every source, a contradiction supersedes the older item, persons are rewritten, and push
//! recall brings the standing facts to a session that never mentions them.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::BTreeSet;
use std::sync::Arc;

use mnemo::log::{ExpectedRevision, ManualClock};
use mnemo::memory::{ExtractionOutcome, ListRequest};
use mnemo::records::{LifecycleState, MemoryItem, Record, SessionId, StreamId};
use mnemo::{Config, Mnemo};
use mnemo_core::{
    Author, Content, EventId, InvocationId, MemoryMode, Role, RunId, RuntimeEvent, SessionOpened,
    TextContent, TimestampMs, TurnId, WorkspaceId,
};

fn open(dir: &std::path::Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn session(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

/// A session of user lines, each answered by the agent.
fn open_session(mnemo: &Mnemo, id: &str, workspace: &str, lines: &[&str]) {
    let mut records = vec![Record::SessionOpened(SessionOpened {
        session: session(id),
        workspace: Some(WorkspaceId::new(workspace).unwrap()),
        incognito: false,
        memory: MemoryMode::Enabled,
        subagent: false,
        title: None,
        source: None,
        parent: None,
    })];
    let mut n = 0;
    for (index, line) in lines.iter().enumerate() {
        for (role, author, body) in
            [(Role::User, Author::User, *line), (Role::Model, Author::Agent, "Noted.")]
        {
            n += 1;
            let mut event = RuntimeEvent::new(
                EventId::new(format!("{id}-e{n}")).unwrap(),
                // One run of one invocation per turn (an invocation belongs to one turn).
                InvocationId::new(format!("inv-t{index}")).unwrap(),
                RunId::new(format!("run-t{index}")).unwrap(),
                session(id),
                TurnId::new(format!("t{index}")).unwrap(),
                TimestampMs(1_767_225_000_000 + n),
                role,
                author,
            );
            event.content = Some(Content::Text(TextContent::new(body)));
            records.push(Record::RuntimeEvent(event));
        }
    }
    mnemo.append(&StreamId::session(&session(id)), ExpectedRevision::Any, &records).unwrap();
}

fn extract(mnemo: &Mnemo, id: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = rt.block_on(mnemo.memory().extract(&session(id), None)).unwrap();
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { .. }), "{report:?}");
}

fn items(mnemo: &Mnemo, include_archived: bool) -> Vec<MemoryItem> {
    mnemo.memory().list(&ListRequest { include_archived, ..ListRequest::default() }).unwrap()
}

fn sessions_of(item: &MemoryItem) -> BTreeSet<String> {
    item.fields.sources.iter().map(|s| s.session.as_str().to_owned()).collect()
}

/// Five facts about the user that hold wherever they work (crate `mnemo-memory`'s scope rule), so
/// each is one global item whichever workspace states it.
const FIVE_PREFERENCES: &[&str] = &[
    "My name is Ada and I am a storage engineer.",
    "I always want error messages in lowercase in every project. I prefer tabs over spaces in every project.",
    "I never use unwrap in library code in any project.",
];

#[test]
fn five_preferences_stated_in_four_sessions_are_five_items_with_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    for (id, workspace) in [("s1", "w1"), ("s2", "w1"), ("s3", "w2"), ("s4", "w3")] {
        open_session(&mnemo, id, workspace, FIVE_PREFERENCES);
        extract(&mnemo, id);
    }
    let active = items(&mnemo, false);
    let contents: BTreeSet<&str> = active.iter().map(|i| i.fields.content.as_str()).collect();
    let expected: BTreeSet<&str> = [
        "The user's name is Ada.",
        "The user is a storage engineer.",
        "The user always wants error messages in lowercase in every project.",
        "The user prefers tabs over spaces in every project.",
        "The user never uses unwrap in library code in any project.",
    ]
    .into();
    assert_eq!((active.len(), contents), (5, expected), "exactly five active items");
    let all_sessions: BTreeSet<String> = ["s1", "s2", "s3", "s4"].iter().map(|s| (*s).to_owned()).collect();
    for item in &active {
        assert_eq!(sessions_of(item), all_sessions, "{} keeps every source", item.fields.content);
        assert_eq!(item.fields.sources.len(), 4, "{}", item.fields.content);
        assert_eq!(item.version, 4, "created once, merged three times: {}", item.fields.content);
        assert!(!item.fields.content.contains(" I ") && !item.fields.content.starts_with("User"));
    }
    assert_eq!(items(&mnemo, true).len(), 5, "no duplicate was created and archived either");

    // Extracting again finds nothing new; the projection rebuilds to the same digest.
    let live = mnemo.stats().unwrap().stages.into_iter().find(|s| s.name == "memory-index").unwrap();
    let rebuilt = mnemo.rebuild(Some("memory-index")).unwrap();
    assert_eq!(rebuilt[0].digest, live.digest);
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}

#[test]
fn a_contradicting_statement_supersedes_the_older_item() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(&mnemo, "s1", "w1", &["My name is Ada.", "I prefer tabs over spaces."]);
    extract(&mnemo, "s1");
    open_session(&mnemo, "s2", "w1", &["My name is Grace.", "I prefer spaces over tabs."]);
    extract(&mnemo, "s2");
    let active = items(&mnemo, false);
    let contents: BTreeSet<&str> = active.iter().map(|i| i.fields.content.as_str()).collect();
    assert_eq!(contents, ["The user prefers spaces over tabs.", "The user's name is Grace."].into());
    let archived: Vec<MemoryItem> =
        items(&mnemo, true).into_iter().filter(|i| i.lifecycle == LifecycleState::Archived).collect();
    assert_eq!(archived.len(), 2);
    for old in &archived {
        let newer = old.superseded_by.as_ref().expect("a superseded item points at its replacement");
        let replacement = mnemo.memory().get(newer).unwrap().unwrap();
        assert_eq!(replacement.lifecycle, LifecycleState::Active);
        assert!(active.iter().any(|a| a.item == replacement.item));
    }
    let live = mnemo.stats().unwrap().stages.into_iter().find(|s| s.name == "memory-index").unwrap();
    assert_eq!(mnemo.rebuild(Some("memory-index")).unwrap()[0].digest, live.digest);
}

#[test]
fn push_recall_brings_standing_facts_to_a_session_that_never_mentions_them() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(&mnemo, "s1", "w1", FIVE_PREFERENCES);
    extract(&mnemo, "s1");
    open_session(&mnemo, "s2", "w1", &["Don't commit until the final step."]);
    extract(&mnemo, "s2");
    open_session(&mnemo, "s3", "w9", &["Let's fix the flaky parser test in the lexer crate."]);
    let block = mnemo.memory().recall_block(&session("s3"), None).unwrap();
    assert!(block.text.contains("The user prefers tabs over spaces in every project."), "{}", block.text);
    assert!(block.text.contains("The user's name is Ada."), "{}", block.text);
    assert!(
        !block.text.contains("commit until"),
        "another workspace's instruction stays out: {}",
        block.text
    );
    assert!(block.tokens <= 1_500);
    let same_workspace = mnemo.memory().recall_block(&session("s1"), None).unwrap();
    assert!(same_workspace.text.contains("commit until the final step"), "{}", same_workspace.text);
}
