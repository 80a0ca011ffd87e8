//! Memory through the facade on a real store: remember, search, lifecycle, recall, rebuild and
//! verify, gates from the session catalog, and a run killed before its commit.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::log::{ExpectedRevision, ManualClock};
use mnemo::memory::{
    BoxFuture, ExtractToolResult, ExtractionOutcome, ListRequest, MatchMode, MemoryModels, MemoryProposer,
    ModelError, NotStored, ProposalPrompt, RecallMemory, RememberStatus, SearchRequest, StartBlockRequest,
};
use mnemo::records::{Record, SessionId, StreamId};
use mnemo::{Config, Mnemo};
use mnemo_core::{
    Author, Content, EventId, FunctionCall, InvocationId, MemoryMode, OperationId, Role, RunId, RuntimeEvent,
    SessionFlagsChanged, SessionOpened, TextContent, TimestampMs, ToolCallId, TurnId, WorkspaceId,
};

fn open(dir: &std::path::Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn session(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

fn event(session_id: &str, n: u64, turn: &str, role: Role, author: Author, content: Content) -> Record {
    let mut event = RuntimeEvent::new(
        EventId::new(format!("{session_id}-e{n}")).unwrap(),
        InvocationId::new(format!("inv-{turn}")).unwrap(),
        RunId::new(format!("run-{turn}")).unwrap(),
        session(session_id),
        TurnId::new(turn).unwrap(),
        TimestampMs(1_767_225_000_000 + n),
        role,
        author,
    );
    event.content = Some(content);
    Record::RuntimeEvent(event)
}

fn text(session_id: &str, n: u64, turn: &str, role: Role, author: Author, body: &str) -> Record {
    event(session_id, n, turn, role, author, Content::Text(TextContent::new(body)))
}

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
    for (index, line) in lines.iter().enumerate() {
        records.push(text(id, index as u64 + 1, &format!("t{index}"), Role::User, Author::User, line));
    }
    let call = FunctionCall::new(
        ToolCallId::new(format!("{id}-call")).unwrap(),
        "memory_remember",
        serde_json::json!({}),
    );
    let n = lines.len() as u64 + 1;
    records.push(event(
        id,
        n,
        &format!("t{}", lines.len() - 1),
        Role::Model,
        Author::Agent,
        Content::FunctionCall(call),
    ));
    mnemo.append(&StreamId::session(&session(id)), ExpectedRevision::Any, &records).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn remember_answers_exactly_the_items_the_store_holds() {
    // Before: "I like turtles" answered "nothing was stored" and stored a global preference that
    // every session start in every project received; of "never force-push to main; always open a
    // PR" the answer named the first half and stored the second unnamed.
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let rt = runtime();
    open_session(&mnemo, "s1", "w1", &["I like turtles"]);
    let remark = rt.block_on(mnemo.memory().remember(&session("s1"), None)).unwrap();
    open_session(&mnemo, "s2", "w1", &["Remember: never force-push to main; always open a PR"]);
    let rules = rt.block_on(mnemo.memory().remember(&session("s2"), None)).unwrap();

    let mut answered: Vec<_> = remark
        .items
        .iter()
        .chain(&rules.items)
        .map(|i| (i.item.clone(), i.content.clone(), i.kind, i.scope.clone()))
        .collect();
    answered.sort();
    let mut stored: Vec<_> = mnemo
        .memory()
        .list(&ListRequest::default())
        .unwrap()
        .into_iter()
        .map(|i| (i.item, i.fields.content, i.fields.kind, i.fields.scope))
        .collect();
    stored.sort();
    assert_eq!(answered, stored);
    let contents: Vec<&str> = rules.items.iter().map(|i| i.content.as_str()).collect();
    assert_eq!(contents, ["Never force-push to main.", "Always open a PR."]);
    assert!(rules.items.iter().all(|i| i.requested));
    assert_eq!((remark.status, remark.items.len()), (RememberStatus::Remembered, 1));
    let w1 = mnemo_core::MemoryScope::Workspace(WorkspaceId::new("w1").unwrap());
    assert!(stored.iter().all(|(_, _, _, scope)| *scope == w1), "{stored:?}");

    // Another project's session start is given none of it.
    let elsewhere = StartBlockRequest {
        workspace: Some(WorkspaceId::new("w2").unwrap()),
        query: Some("turtles force-push main PR".to_owned()),
        ..StartBlockRequest::default()
    };
    assert!(mnemo.memory().start_block(&elsewhere).unwrap().items.is_empty());
}

#[test]
fn remember_search_archive_recall_rebuild_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(
        &mnemo,
        "s1",
        "w1",
        &["Our project uses fjall for storage.", "Remember that I prefer tabs over spaces."],
    );
    open_session(
        &mnemo,
        "s2",
        "w2",
        &["Our project uses sqlite for storage.", "Remember that I like dark mode."],
    );
    let rt = runtime();
    let call = Some(ToolCallId::new("s1-call").unwrap());
    let result = rt.block_on(mnemo.memory().remember(&session("s1"), call.clone())).unwrap();
    assert_eq!(result.status, RememberStatus::Remembered, "{result:?}");
    let again = rt.block_on(mnemo.memory().remember(&session("s1"), call)).unwrap();
    assert_eq!(again, result);
    rt.block_on(mnemo.memory().remember(&session("s2"), Some(ToolCallId::new("s2-call").unwrap()))).unwrap();

    let search = |terms: &[&str], workspace: Option<&str>, archived: bool| {
        let request = SearchRequest {
            terms: terms.iter().map(|t| (*t).to_owned()).collect(),
            match_mode: MatchMode::Prefix,
            workspace: workspace.map(|w| WorkspaceId::new(w).unwrap()),
            include_archived: archived,
            limit: None,
        };
        mnemo.memory().search(&request).unwrap()
    };
    // "I prefer tabs over spaces" says nothing of other projects: it holds in w1 only.
    let tabs = search(&["tabs"], Some("w1"), false);
    assert_eq!(tabs.len(), 1);
    assert!(search(&["tabs"], Some("w2"), false).is_empty());
    assert_eq!(search(&["fjall"], Some("w1"), false).len(), 1);
    assert!(search(&["fjall"], Some("w2"), false).is_empty(), "another workspace's item never shows");
    assert!(search(&["fjall"], None, false).is_empty());

    let item = tabs[0].item.clone();
    let archived = mnemo.memory().archive(OperationId::new("op-archive").unwrap(), item.clone(), 1).unwrap();
    assert_eq!(archived.results[0].version, 2);
    assert!(search(&["tabs"], Some("w1"), false).is_empty());
    assert_eq!(search(&["tabs"], Some("w1"), true).len(), 1);
    let stale = mnemo.memory().restore(OperationId::new("op-restore").unwrap(), item.clone(), 1).unwrap_err();
    assert_eq!(stale.category(), mnemo::ErrorCategory::Conflict);
    mnemo.memory().restore(OperationId::new("op-restore").unwrap(), item.clone(), 2).unwrap();

    let recalled = mnemo
        .memory()
        .recall(&session("s2"), &RecallMemory { query: "storage".to_owned(), limit: None })
        .unwrap();
    assert_eq!(recalled.len(), 1);
    assert!(recalled[0].content.contains("sqlite"), "{recalled:?}");
    let block =
        mnemo.memory().recall_block(&session("s1"), Some("tabs or spaces for storage in fjall?")).unwrap();
    assert!(
        block.text.contains("tabs") && block.text.contains("fjall") && !block.text.contains("sqlite"),
        "{}",
        block.text
    );
    assert!(block.tokens <= 512);

    let live = mnemo.stats().unwrap().stages.into_iter().find(|s| s.name == "memory-index").unwrap();
    let rebuilt = mnemo.rebuild(Some("memory-index")).unwrap();
    assert_eq!(rebuilt[0].digest, live.digest);
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}

#[test]
fn an_incognito_session_remembers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(&mnemo, "s1", "w1", &["Remember that I prefer tabs over spaces."]);
    let flags =
        SessionFlagsChanged { session: session("s1"), incognito: Some(true), memory: None, title: None };
    mnemo
        .append(
            &StreamId::session(&session("s1")),
            ExpectedRevision::Any,
            &[Record::SessionFlagsChanged(flags)],
        )
        .unwrap();
    let result = runtime().block_on(mnemo.memory().remember(&session("s1"), None)).unwrap();
    assert_eq!((result.status, result.reason), (RememberStatus::Unavailable, Some(NotStored::Incognito)));
    assert_eq!(mnemo.memory().cursor(&session("s1")).unwrap(), 0);
}

#[derive(Debug)]
struct Hanging;

impl MemoryProposer for Hanging {
    fn name(&self) -> &str {
        "hanging"
    }
    fn propose<'a>(&'a self, _: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(std::future::pending())
    }
}

#[test]
fn a_run_stopped_before_its_commit_leaves_nothing_and_the_retry_after_reopen_commits_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mnemo = open(dir.path());
        open_session(&mnemo, "s1", "w1", &["Remember that I prefer tabs over spaces."]);
        mnemo.memory().set_models(MemoryModels { proposer: Arc::new(Hanging), ..MemoryModels::default() });
        let rt = runtime();
        let stopped = rt.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_millis(50),
                mnemo.memory().extract(&session("s1"), None),
            )
            .await
        });
        assert!(stopped.is_err());
        assert_eq!(mnemo.memory().cursor(&session("s1")).unwrap(), 0);
    }
    let mnemo = open(dir.path());
    let rt = runtime();
    let first = rt.block_on(mnemo.memory().remember_report(&session("s1"), None)).unwrap();
    assert!(matches!(first.outcome, ExtractionOutcome::Committed { replayed: false, .. }), "{first:?}");
    let second = rt.block_on(mnemo.memory().remember_report(&session("s1"), None)).unwrap();
    assert!(matches!(second.outcome, ExtractionOutcome::Committed { replayed: true, .. }));
    let commits = mnemo
        .log_entries(mnemo::records::Position(1), 100)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "memory_commit")
        .count();
    assert_eq!(commits, 1);
}

#[test]
fn extraction_futures_can_be_spawned_on_a_multi_threaded_runtime() {
    fn assert_send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let s1 = session("s1");
    assert_send(&mnemo.memory().remember(&s1, None));
    assert_send(&mnemo.memory().extract(&s1, None));
    assert_send(&mnemo.memory().on_checkpoint_recorded(&s1, &mnemo_core::CheckpointId::new("c1").unwrap()));
}

#[test]
fn the_extract_tool_flags_the_turn_and_extraction_runs_when_it_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(&mnemo, "s1", "w1", &["Our project uses fjall for storage.", "I prefer tabs over spaces."]);
    let rt = runtime();
    let turn = TurnId::new("t1").unwrap();
    let items = |m: &Mnemo| {
        let request = SearchRequest {
            terms: vec!["fjall".to_owned(), "tabs".to_owned()],
            match_mode: MatchMode::Prefix,
            workspace: Some(WorkspaceId::new("w1").unwrap()),
            include_archived: true,
            limit: None,
        };
        m.memory().search(&request).unwrap().len()
    };
    // A turn that never asked: completing it runs nothing.
    assert!(
        rt.block_on(mnemo.memory().complete_turn(&session("s1"), &TurnId::new("t0").unwrap()))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        mnemo.memory().request_extraction(&session("s1"), &turn).unwrap(),
        ExtractToolResult::Accepted
    );
    assert_eq!(items(&mnemo), 0, "the tool only flags the turn");
    let report = rt.block_on(mnemo.memory().complete_turn(&session("s1"), &turn)).unwrap().expect("flagged");
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { replayed: false, .. }), "{report:?}");
    assert!(items(&mnemo) > 0, "incidental facts were stored");
    assert!(
        rt.block_on(mnemo.memory().complete_turn(&session("s1"), &turn)).unwrap().is_none(),
        "once per request"
    );
    // A closed gate answers unavailable and flags nothing.
    let flags =
        SessionFlagsChanged { session: session("s1"), incognito: Some(true), memory: None, title: None };
    mnemo
        .append(
            &StreamId::session(&session("s1")),
            ExpectedRevision::Any,
            &[Record::SessionFlagsChanged(flags)],
        )
        .unwrap();
    assert_eq!(
        mnemo.memory().request_extraction(&session("s1"), &turn).unwrap(),
        ExtractToolResult::Unavailable { reason: "incognito" }
    );
    assert!(rt.block_on(mnemo.memory().complete_turn(&session("s1"), &turn)).unwrap().is_none());
}

#[test]
fn a_compaction_before_the_first_extraction_loses_no_facts() {
    // Long enough that a summary is smaller than the turns it replaces.
    let filler = " The walk through the module layout went on at length.".repeat(20);
    let lines = [
        format!("Our project uses fjall for storage.{filler}"),
        format!("I prefer tabs over spaces.{filler}"),
        format!("Our CI runs on Debian.{filler}"),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let found = |m: &Mnemo, term: &str| {
        let request = SearchRequest {
            terms: vec![term.to_owned()],
            match_mode: MatchMode::Prefix,
            workspace: Some(WorkspaceId::new("w1").unwrap()),
            include_archived: true,
            limit: None,
        };
        !m.memory().search(&request).unwrap().is_empty()
    };
    let rt = runtime();
    // Without a checkpoint, the first extraction reads the whole session.
    let control_dir = tempfile::tempdir().unwrap();
    let control = open(control_dir.path());
    open_session(&control, "s1", "w1", &lines);
    rt.block_on(control.memory().extract(&session("s1"), None)).unwrap();
    assert!(found(&control, "fjall") && found(&control, "tabs"), "the control stores the early facts");
    // A manual checkpoint over the first two turns runs extraction over them, and the next
    // extraction reads the rest: the same facts as without a checkpoint.
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(&mnemo, "s1", "w1", &lines);
    let options = mnemo::compaction::CompactOptions {
        min_recent_turns: Some(1),
        ..mnemo::compaction::CompactOptions::default()
    };
    let compacted = rt.block_on(mnemo.compaction().compact(&session("s1"), &options)).unwrap();
    let checkpoint = compacted.recorded.unwrap_or_else(|| panic!("{:?}", compacted.history.diagnostics));
    assert!(checkpoint.checkpoint.extraction_boundary.is_some());
    let report = rt.block_on(mnemo.memory().extract(&session("s1"), None)).unwrap();
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { .. }), "{report:?}");
    assert!(found(&mnemo, "fjall") && found(&mnemo, "tabs"), "compacted history is not lost");
    assert_eq!(found(&mnemo, "debian"), found(&control, "debian"), "the last turn is read as before");
}

#[test]
fn recall_finds_an_instruction_by_a_paraphrase_of_its_words() {
    // Before: recall compared whole words, so "commit tests" missed "don't commit test files"
    // (tests / test) and "staging db" missed "staging database".
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    open_session(
        &mnemo,
        "s1",
        "w1",
        &[
            "don't commit test files until the final step",
            "our staging database is stage-db-02",
            "I prefer tabs over spaces",
        ],
    );
    runtime().block_on(mnemo.memory().extract(&session("s1"), None)).unwrap();
    let recall = |query: &str| {
        let request = RecallMemory { query: query.to_owned(), limit: Some(1) };
        let found = mnemo.memory().recall(&session("s1"), &request).unwrap();
        found.first().map(|r| r.content.clone()).unwrap_or_default()
    };
    assert!(recall("commit tests").contains("commit test files"), "{}", recall("commit tests"));
    assert!(recall("committing the specs").contains("commit test files"));
    assert!(recall("which staging db?").contains("stage-db-02"));
    assert!(recall("indentation: tabs or spaces").contains("tabs"));
    assert_eq!(recall("kubernetes cluster"), "", "nothing shares a term with it");
}
