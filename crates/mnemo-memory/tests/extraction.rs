//! The extraction engine end to end over an in-memory host: remember, extract, bad model
//! outputs, secrets, localization, faithfulness, the failure cycle, gates and crash safety.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use mnemo_core::{
    Author, BoundaryDisposition, CheckpointBody, CheckpointCoverage, CheckpointId, CheckpointManifest,
    CheckpointPhase, CheckpointRecord, Content, Digest, EventId, EventPoint, ExtractionBoundary,
    ExtractionFailureClass, FunctionCall, InvocationId, MemoryScope, ReceiptStatus, Record, Role, RunId,
    RuntimeEvent, SOURCE_POLICY_VERSION_V1, SessionId, SummaryFormat, TextContent, TimestampMs, ToolCallId,
    TurnId, WorkspaceId,
};
use mnemo_memory::testing::VecLedger;
use mnemo_memory::{
    BoxFuture, EXTRACT_USER_EVENTS_PER_RANGE_MAX, EmbeddedCanonicalizer, EmbeddedProposer, ExtractionHost,
    ExtractionOutcome, ExtractionReport, GateReason, MemoryError, MemoryLedger, MemoryProposer, MemoryView,
    ModelError, Models, NotStored, ProposalPrompt, Rejection, RememberStatus, ScanLocalization, SessionEvent,
    Trigger, execute,
};
use mnemo_pipeline::StateStore;

#[derive(Debug)]
struct Host {
    ledger: VecLedger,
    events: Mutex<Vec<SessionEvent>>,
    gate: Mutex<Option<GateReason>>,
    checkpoints: Mutex<Vec<CheckpointRecord>>,
    scope: Mutex<MemoryScope>,
}

impl Host {
    fn new() -> Self {
        Host {
            ledger: VecLedger::new(1_767_225_600_000),
            events: Mutex::new(Vec::new()),
            gate: Mutex::new(None),
            checkpoints: Mutex::new(Vec::new()),
            scope: Mutex::new(MemoryScope::Workspace(WorkspaceId::new("w1").unwrap())),
        }
    }

    fn push(&self, turn: &str, role: Role, author: Author, content: Content) -> EventId {
        let mut events = self.events.lock().unwrap();
        let ordinal = events.len() as u64 + 1;
        let id = EventId::new(format!("e{ordinal}")).unwrap();
        let mut event = RuntimeEvent::new(
            id.clone(),
            InvocationId::new("inv").unwrap(),
            RunId::new(format!("run-{turn}")).unwrap(),
            session(),
            TurnId::new(turn).unwrap(),
            TimestampMs(1_767_225_000_000 + ordinal * 1_000),
            role,
            author,
        );
        event.content = Some(content);
        events.push(SessionEvent { ordinal, event });
        id
    }

    fn user(&self, turn: &str, text: &str) -> EventId {
        self.push(turn, Role::User, Author::User, Content::Text(TextContent::new(text)))
    }

    fn agent(&self, turn: &str, text: &str) -> EventId {
        self.push(turn, Role::Model, Author::Agent, Content::Text(TextContent::new(text)))
    }

    fn remember_call(&self, turn: &str, id: &str) -> ToolCallId {
        let call = ToolCallId::new(id).unwrap();
        let content =
            Content::FunctionCall(FunctionCall::new(call.clone(), "memory_remember", serde_json::json!({})));
        self.push(turn, Role::Model, Author::Agent, content);
        call
    }

    fn records(&self) -> Vec<Record> {
        self.ledger.records()
    }

    fn view_items(&self) -> usize {
        let state = self.ledger.state().unwrap();
        let mut count = 0;
        state
            .scan_prefix(b"i\0", &mut |_, _| {
                count += 1;
                true
            })
            .unwrap();
        count
    }
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

impl MemoryLedger for Host {
    fn state(&self) -> Result<Arc<dyn StateStore>, MemoryError> {
        self.ledger.state()
    }
    fn write(&self, decide: &mut mnemo_memory::Decide<'_>) -> Result<(), MemoryError> {
        self.ledger.write(decide)
    }
}

impl ExtractionHost for Host {
    fn gate(&self, _: &SessionId) -> Result<Option<GateReason>, MemoryError> {
        Ok(*self.gate.lock().unwrap())
    }
    fn session_events(&self, _: &SessionId) -> Result<Vec<SessionEvent>, MemoryError> {
        Ok(self.events.lock().unwrap().clone())
    }
    fn checkpoints(&self, _: &SessionId) -> Result<Vec<CheckpointRecord>, MemoryError> {
        Ok(self.checkpoints.lock().unwrap().clone())
    }
    fn session_scope(&self, _: &SessionId) -> Result<MemoryScope, MemoryError> {
        Ok(self.scope.lock().unwrap().clone())
    }
}

/// Answers from a script, then like the embedded proposer.
#[derive(Debug, Default)]
struct Scripted {
    answers: Mutex<VecDeque<Result<String, ModelError>>>,
    hang: bool,
}

impl Scripted {
    fn with(answers: Vec<Result<String, ModelError>>) -> Self {
        Scripted { answers: Mutex::new(answers.into()), hang: false }
    }
}

impl MemoryProposer for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn propose<'a>(&'a self, prompt: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            if self.hang {
                std::future::pending::<()>().await;
            }
            let next = self.answers.lock().unwrap().pop_front();
            match next {
                Some(answer) => answer,
                None => EmbeddedProposer.propose(prompt).await,
            }
        })
    }
}

async fn run(host: &Host, proposer: &dyn MemoryProposer, trigger: Trigger) -> ExtractionReport {
    let models = Models { proposer, canonicalizer: &EmbeddedCanonicalizer, localization: &ScanLocalization };
    execute(host, models, &session(), &trigger).await.unwrap()
}

fn remember(call: &ToolCallId) -> Trigger {
    Trigger::Remember { tool_call: Some(call.clone()), through: None }
}

fn extract() -> Trigger {
    Trigger::Extract { terminal_event: None }
}

fn item_json(content: &str, source_ref: &str, quote: &str, key: &str) -> serde_json::Value {
    serde_json::json!({
        "content": content, "kind": "preference", "statementType": "fact", "temporalType": "undated",
        "eventStartedAt": null, "eventEndedAt": null, "scope": "global",
        "keys": [{"key": key, "type": "concept"}],
        "evidence": [{"sourceRef": source_ref, "quote": quote}],
    })
}

fn resolved(
    requested: Vec<serde_json::Value>,
    incidental: Vec<serde_json::Value>,
) -> Result<String, ModelError> {
    let status = if requested.is_empty() { "not_applicable" } else { "resolved" };
    Ok(serde_json::json!({
        "coverageStatus": "processed", "status": "complete", "requestedStatus": status,
        "requestedItems": requested, "incidentalItems": incidental,
    })
    .to_string())
}

#[tokio::test]
async fn remember_stores_the_requested_item_and_replays_without_a_model_call() {
    let host = Host::new();
    host.user("t1", "I'm a backend engineer.");
    host.user("t2", "Remember that I prefer tabs over spaces.");
    let call = host.remember_call("t2", "call-1");
    let report = run(&host, &EmbeddedProposer, remember(&call)).await;
    let result = report.remember_result();
    assert_eq!(result.status, RememberStatus::Remembered, "{report:?}");
    let contents: Vec<(&str, bool)> =
        result.items.iter().map(|i| (i.content.as_str(), i.requested)).collect();
    assert_eq!(
        contents,
        [("The user prefers tabs over spaces.", true), ("The user is a backend engineer.", false)],
        "the answer lists every item the call stored"
    );
    assert_eq!(report.model_calls, 2, "one proposal and one canonicalization call");
    let ExtractionOutcome::Committed { receipt, .. } = &report.outcome else { panic!() };
    assert_eq!(receipt.status, ReceiptStatus::Remembered);
    assert_eq!(host.view_items(), 2, "the incidental identity fact is stored too");
    let state = host.ledger.state().unwrap();
    let stored = MemoryView::new(state.as_ref()).item(&result.items[0].item).unwrap().unwrap();
    assert_eq!(stored.fields.sources[0].event.as_str(), "e2");
    // A habit stated without "everywhere" holds in its workspace; who the user is holds everywhere.
    assert_eq!(stored.fields.scope, MemoryScope::Workspace(WorkspaceId::new("w1").unwrap()));
    assert_eq!(
        (result.items[0].scope.clone(), result.items[1].scope.clone()),
        (stored.fields.scope, MemoryScope::Global)
    );
    let again = run(&host, &EmbeddedProposer, remember(&call)).await;
    assert_eq!((again.model_calls, again.remember_result()), (0, result));
    assert_eq!(host.records().len(), 1);
}

/// `(content, kind, scope)` of every item the store holds, in id order.
fn stored(host: &Host) -> Vec<(String, String, String)> {
    let state = host.ledger.state().unwrap();
    let mut ids = Vec::new();
    state
        .scan_prefix(b"i\0", &mut |key, _| {
            ids.push(String::from_utf8(key[2..].to_vec()).unwrap());
            true
        })
        .unwrap();
    let view = MemoryView::new(state.as_ref());
    ids.iter()
        .map(|id| {
            let item = view.item(&mnemo_core::ItemId::new(id.as_str()).unwrap()).unwrap().unwrap();
            let kind = serde_json::to_value(item.fields.kind).unwrap().as_str().unwrap().to_owned();
            (item.fields.content, kind, item.fields.scope.as_text())
        })
        .collect()
}

/// The same triple for what a remember result reports, sorted as [`stored`] is.
fn answered(result: &mnemo_memory::RememberResult) -> Vec<(String, String, String)> {
    let mut items = result.items.clone();
    items.sort_by(|a, b| a.item.cmp(&b.item));
    items
        .into_iter()
        .map(|i| {
            let kind = serde_json::to_value(i.kind).unwrap().as_str().unwrap().to_owned();
            (i.content, kind, i.scope.as_text())
        })
        .collect()
}

#[tokio::test]
async fn a_remark_remembered_is_answered_as_stored_and_only_in_its_workspace() {
    // Before: the answer was "not_applicable" while "The user likes turtles." was stored global.
    let host = Host::new();
    host.user("t1", "I like turtles");
    let call = host.remember_call("t1", "call-1");
    let result = run(&host, &EmbeddedProposer, remember(&call)).await.remember_result();
    let turtles = ("The user likes turtles.".to_owned(), "preference".to_owned(), "workspace:w1".to_owned());
    assert_eq!(stored(&host), [turtles]);
    assert_eq!((result.status, answered(&result)), (RememberStatus::Remembered, stored(&host)));
    assert!(!result.items[0].requested, "no request in the words: found beside it");
    assert_eq!(result.text(), "Stored 1 item:\n- The user likes turtles. (preference, workspace w1)");
}

#[tokio::test]
async fn every_instruction_of_a_request_is_stored_and_answered() {
    // Before: "always open a PR" was stored, and the answer named only the first instruction.
    let host = Host::new();
    host.user("t1", "Remember: never force-push to main; always open a PR");
    let call = host.remember_call("t1", "call-1");
    let result = run(&host, &EmbeddedProposer, remember(&call)).await.remember_result();
    assert_eq!(stored(&host).len(), 2);
    assert_eq!(answered(&result), stored(&host));
    assert!(result.items.iter().all(|i| i.requested), "{result:?}");
    assert_eq!(
        result.text(),
        "Remembered 2 items:\n- Never force-push to main. (preference, workspace w1)\n\
         - Always open a PR. (preference, workspace w1)"
    );
}

#[tokio::test]
async fn a_session_without_a_workspace_stores_nothing_that_holds_only_in_a_project() {
    let host = Host::new();
    *host.scope.lock().unwrap() = MemoryScope::Global;
    host.user("t1", "Remember that we deploy with make release");
    let call = host.remember_call("t1", "call-1");
    let result = run(&host, &EmbeddedProposer, remember(&call)).await.remember_result();
    assert_eq!((result.status, result.reason), (RememberStatus::NotApplicable, Some(NotStored::NoWorkspace)));
    assert!(stored(&host).is_empty());
    let again = run(&host, &EmbeddedProposer, remember(&call)).await;
    assert_eq!(
        (again.model_calls, again.remember_result()),
        (0, result.clone()),
        "a replay answers the same"
    );
    assert!(result.text().starts_with("Nothing was stored: what the request states holds only in a project"));

    let host = Host::new();
    *host.scope.lock().unwrap() = MemoryScope::Global;
    host.user("t1", "Remember that my name is Ada");
    let call = host.remember_call("t1", "call-1");
    let result = run(&host, &EmbeddedProposer, remember(&call)).await.remember_result();
    assert_eq!(
        answered(&result),
        [("The user's name is Ada.".to_owned(), "identity".to_owned(), "global".to_owned())]
    );
    assert_eq!(answered(&result), stored(&host));
}

#[tokio::test]
async fn extract_keeps_incidental_facts_and_moves_the_cursor() {
    let host = Host::new();
    host.user("t1", "Our project uses fjall for storage. I never use unwrap in libraries.");
    host.agent("t1", "Noted, I prefer tabs too.");
    let report = run(&host, &EmbeddedProposer, extract()).await;
    let ExtractionOutcome::Committed { receipt, .. } = &report.outcome else { panic!("{report:?}") };
    assert_eq!(receipt.status, ReceiptStatus::Extracted);
    assert_eq!(host.view_items(), 2, "assistant text is never evidence");
    let state = host.ledger.state().unwrap();
    assert_eq!(MemoryView::new(state.as_ref()).cursor(&session()).unwrap().unwrap().processed_ordinal, 2);
    let nothing = run(&host, &EmbeddedProposer, extract()).await;
    assert!(matches!(nothing.outcome, ExtractionOutcome::Committed { replayed: true, .. }));
}

async fn remember_with(answers: Vec<Result<String, ModelError>>) -> (Host, ExtractionReport) {
    let host = Host::new();
    host.agent("t1", "You said you like vim.");
    host.user("t2", "Remember that I prefer tabs over spaces.");
    let call = host.remember_call("t2", "call-1");
    let report = run(&host, &Scripted::with(answers), remember(&call)).await;
    (host, report)
}

fn failed_class(report: &ExtractionReport) -> ExtractionFailureClass {
    match &report.outcome {
        ExtractionOutcome::RetryLater { class, .. } => *class,
        other => panic!("expected a counted failure, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_model_outputs_are_counted_failures_and_commit_nothing() {
    let fenced = Ok("```json\n{}\n```".to_owned());
    let (host, report) = remember_with(vec![fenced.clone(), fenced.clone(), fenced]).await;
    assert_eq!((failed_class(&report), report.model_calls), (ExtractionFailureClass::Schema, 3));
    assert_eq!(host.view_items(), 0);

    let assistant_quote = item_json("User likes vim", "event:e1", "You said you like vim", "vim");
    let (host, report) = remember_with(vec![resolved(vec![assistant_quote], vec![]); 3]).await;
    assert_eq!(failed_class(&report), ExtractionFailureClass::Evidence);
    assert!(matches!(report.rejections[0].rejection, Rejection::Evidence(_)));
    assert_eq!(host.view_items(), 0);

    let not_in_source = item_json("User prefers emacs", "event:e2", "I prefer emacs", "emacs");
    let (_, report) = remember_with(vec![resolved(vec![not_in_source], vec![]); 3]).await;
    assert_eq!(failed_class(&report), ExtractionFailureClass::Evidence);

    let many: Vec<_> = (0..11)
        .map(|i| item_json("User prefers tabs", "event:e2", "prefer tabs", &format!("k{i}")))
        .collect();
    let (_, report) = remember_with(vec![resolved(vec![], many); 3]).await;
    assert_eq!(failed_class(&report), ExtractionFailureClass::Schema);

    let unfaithful =
        item_json("User does not prefer tabs over spaces", "event:e2", "I prefer tabs over spaces", "tabs");
    let (_, report) = remember_with(vec![resolved(vec![unfaithful], vec![]); 3]).await;
    assert_eq!(failed_class(&report), ExtractionFailureClass::Evidence);
    assert!(matches!(report.rejections[0].rejection, Rejection::Unfaithful(_)));

    let (_, report) = remember_with(vec![Err(ModelError::Provider("down".to_owned())); 3]).await;
    assert_eq!(failed_class(&report), ExtractionFailureClass::Provider);
}

#[tokio::test]
async fn secrets_make_remember_a_sensitive_no_op() {
    let secret_content = item_json("User's password: hunter2", "event:e2", "prefer tabs over spaces", "tabs");
    let (host, report) = remember_with(vec![resolved(vec![secret_content], vec![])]).await;
    let result = report.remember_result();
    assert_eq!(
        (result.status, result.reason),
        (RememberStatus::NotApplicable, Some(NotStored::SensitiveInformation))
    );
    assert_eq!(host.view_items(), 0);

    let secret_key =
        item_json("User prefers tabs over spaces", "event:e2", "prefer tabs over spaces", "api_key=abcdef");
    let (_, report) = remember_with(vec![resolved(vec![secret_key], vec![])]).await;
    assert_eq!(report.remember_result().reason, Some(NotStored::SensitiveInformation));

    let host = Host::new();
    host.user("t1", "Remember my api_key=sk-abcdefgh12345678");
    let call = host.remember_call("t1", "call-1");
    let report = run(&host, &EmbeddedProposer, remember(&call)).await;
    assert_eq!(
        (report.model_calls, report.remember_result().reason),
        (0, Some(NotStored::SensitiveInformation))
    );
    let state = host.ledger.state().unwrap();
    assert_eq!(MemoryView::new(state.as_ref()).cursor(&session()).unwrap().unwrap().processed_ordinal, 1);
}

#[tokio::test]
async fn search_required_localizes_into_earlier_turns() {
    let host = Host::new();
    host.user("t1", "For the database we use Postgres 16 with pgvector.");
    host.agent("t1", "Understood.");
    host.user("t2", "Unrelated chatter about lunch.");
    let extracted = run(&host, &EmbeddedProposer, extract()).await;
    assert!(matches!(extracted.outcome, ExtractionOutcome::Committed { .. }));
    host.user("t3", "Remember what I said about the database.");
    let call = host.remember_call("t3", "call-9");
    let report = run(&host, &EmbeddedProposer, remember(&call)).await;
    let result = report.remember_result();
    assert_eq!(result.status, RememberStatus::Remembered, "{report:?}");
    assert_eq!(
        result.items.iter().map(|i| i.content.as_str()).collect::<Vec<_>>(),
        ["For the database the team uses Postgres 16 with pgvector."]
    );
    assert_eq!(report.model_calls, 3, "proposal, localized proposal, canonicalization");
}

#[tokio::test]
async fn a_failed_range_is_retried_once_by_the_next_trigger_then_discarded() {
    let host = Host::new();
    host.user("t1", "I prefer tabs.");
    let broken = Scripted::with(vec![Ok("not json".to_owned()); 6]);
    let first = run(&host, &broken, extract()).await;
    assert_eq!(failed_class(&first), ExtractionFailureClass::Schema);
    let same = run(&host, &broken, extract()).await;
    assert!(matches!(same.outcome, ExtractionOutcome::Unavailable { .. }), "{same:?}");
    host.user("t2", "I use neovim.");
    let next = run(&host, &broken, extract()).await;
    assert!(matches!(next.retried, Some(ExtractionOutcome::Discarded { .. })), "{next:?}");
    let state = host.ledger.state().unwrap();
    let view = MemoryView::new(state.as_ref());
    // The retry used the last scripted answers; the new range then fell back to the embedded rules.
    assert!(matches!(next.outcome, ExtractionOutcome::Committed { .. }), "{next:?}");
    assert_eq!(view.cursor(&session()).unwrap().unwrap().processed_ordinal, 2);
    assert!(view.pending_failure(&session()).unwrap().is_none());
    assert_eq!(host.view_items(), 1, "only the new range's fact; the discarded range stored nothing");

    let host = Host::new();
    host.user("t1", "I prefer tabs.");
    run(&host, &Scripted::with(vec![Ok("not json".to_owned()); 3]), extract()).await;
    host.user("t2", "I use neovim.");
    let healed = run(&host, &EmbeddedProposer, extract()).await;
    assert!(matches!(healed.retried, Some(ExtractionOutcome::Committed { .. })), "{healed:?}");
    assert_eq!(host.view_items(), 2);
}

#[tokio::test]
async fn closed_gates_commit_and_settle_nothing() {
    for reason in
        [GateReason::Incognito, GateReason::Disabled, GateReason::Ineligible, GateReason::Unavailable]
    {
        let host = Host::new();
        host.user("t1", "Remember that I prefer tabs.");
        let call = host.remember_call("t1", "call-1");
        *host.gate.lock().unwrap() = Some(reason);
        let report = run(&host, &EmbeddedProposer, remember(&call)).await;
        let result = report.remember_result();
        assert_eq!(
            (result.status, result.reason),
            (RememberStatus::Unavailable, Some(NotStored::from(reason)))
        );
        assert_eq!(report.model_calls, 0);
        assert!(host.records().is_empty());
    }
}

#[tokio::test]
async fn a_run_killed_between_proposal_and_commit_leaves_nothing_and_the_retry_commits_once() {
    let host = Host::new();
    host.user("t1", "Remember that I prefer tabs over spaces.");
    let call = host.remember_call("t1", "call-1");
    let hanging = Scripted { answers: Mutex::new(VecDeque::new()), hang: true };
    let models =
        Models { proposer: &hanging, canonicalizer: &EmbeddedCanonicalizer, localization: &ScanLocalization };
    let killed = tokio::time::timeout(
        std::time::Duration::from_millis(20),
        execute(&host, models, &session(), &remember(&call)),
    )
    .await;
    assert!(killed.is_err(), "the run was stopped mid-way");
    assert!(host.records().is_empty(), "nothing partial was written");
    let first = run(&host, &EmbeddedProposer, remember(&call)).await;
    let second = run(&host, &EmbeddedProposer, remember(&call)).await;
    assert_eq!(first.remember_result().status, RememberStatus::Remembered);
    assert_eq!(first.remember_result(), second.remember_result());
    assert_eq!(host.records().len(), 1, "exactly one commit");
}

fn checkpoint(
    host: &Host,
    id: &str,
    turn: &str,
    event: &EventId,
    disposition: BoundaryDisposition,
) -> CheckpointId {
    let checkpoint = CheckpointId::new(id).unwrap();
    let point = |e: &EventId| EventPoint {
        run: RunId::new(format!("run-{turn}")).unwrap(),
        turn: TurnId::new(turn).unwrap(),
        event: e.clone(),
    };
    host.checkpoints.lock().unwrap().push(CheckpointRecord {
        checkpoint: checkpoint.clone(),
        session: session(),
        created_at: TimestampMs(1_767_225_600_000),
        phase: CheckpointPhase::PreTurn,
        coverage: CheckpointCoverage {
            event_count: 1,
            turn_count: 1,
            first_event: EventId::new("e1").unwrap(),
            through: point(event),
            source_digest: Digest::sha256(b"events"),
        },
        source_policy_version: SOURCE_POLICY_VERSION_V1.to_owned(),
        limitations: Vec::new(),
        estimated_tokens: 10,
        previous: None,
        head_anchor: None,
        extraction_boundary: Some(ExtractionBoundary {
            run: RunId::new(format!("run-{turn}")).unwrap(),
            turn: TurnId::new(turn).unwrap(),
            event: event.clone(),
            disposition,
        }),
        body: CheckpointBody::Text {
            summary: "## Goal\nx".to_owned(),
            summary_format: SummaryFormat::SectionsV1,
        },
        manifest: CheckpointManifest {
            summarizer: "test".to_owned(),
            prompt_version: "1".to_owned(),
            input_digest: Digest::sha256(b"input"),
        },
        faithfulness: None,
    });
    checkpoint
}

#[tokio::test]
async fn compaction_extracts_its_range_and_closed_gates_skip_durably() {
    let host = Host::new();
    host.user("t1", "I prefer tabs over spaces.");
    let first = host.agent("t1", "Noted.");
    let c1 = checkpoint(&host, "c1", "t1", &first, BoundaryDisposition::Eligible);
    let report = run(&host, &EmbeddedProposer, Trigger::Compaction { checkpoint: c1.clone() }).await;
    let ExtractionOutcome::Committed { receipt, .. } = &report.outcome else { panic!("{report:?}") };
    assert_eq!(receipt.status, ReceiptStatus::Extracted);
    assert_eq!(host.view_items(), 1);

    host.user("t2", "I use neovim daily.");
    let second = host.agent("t2", "Great.");
    let c2 = checkpoint(&host, "c2", "t2", &second, BoundaryDisposition::Eligible);
    *host.gate.lock().unwrap() = Some(GateReason::Incognito);
    let denied = run(&host, &EmbeddedProposer, Trigger::Compaction { checkpoint: c2.clone() }).await;
    assert!(matches!(denied.outcome, ExtractionOutcome::Unavailable { .. }));
    assert_eq!(denied.model_calls, 0);
    let state = host.ledger.state().unwrap();
    let view = MemoryView::new(state.as_ref());
    assert_eq!(view.denials(&session()).unwrap().len(), 1);
    assert_eq!(view.cursor(&session()).unwrap().unwrap().processed_ordinal, 4, "the denied range is skipped");
    assert_eq!(host.view_items(), 1, "nothing from the denied range is stored");

    *host.gate.lock().unwrap() = None;
    host.user("t3", "Remember what I said about neovim.");
    let call = host.remember_call("t3", "call-3");
    let report = run(&host, &EmbeddedProposer, remember(&call)).await;
    assert_ne!(
        report.remember_result().status,
        RememberStatus::Remembered,
        "localization never crosses a denial: {report:?}"
    );

    let host = Host::new();
    host.user("t1", "I prefer tabs over spaces.");
    let boundary = host.agent("t1", "Noted.");
    let frozen = checkpoint(&host, "c9", "t1", &boundary, BoundaryDisposition::PolicyDenied);
    run(&host, &EmbeddedProposer, Trigger::Compaction { checkpoint: frozen }).await;
    assert_eq!(host.view_items(), 0);
    let state = host.ledger.state().unwrap();
    assert_eq!(MemoryView::new(state.as_ref()).cursor(&session()).unwrap().unwrap().processed_ordinal, 2);
}

#[tokio::test]
async fn unprocessed_checkpoints_before_the_boundary_are_recovered_first() {
    let host = Host::new();
    host.user("t1", "I prefer tabs over spaces.");
    let first = host.agent("t1", "Noted.");
    checkpoint(&host, "c1", "t1", &first, BoundaryDisposition::Eligible);
    host.user("t2", "I use neovim daily.");
    let second = host.agent("t2", "Great.");
    checkpoint(&host, "c2", "t2", &second, BoundaryDisposition::PolicyDenied);
    host.user("t3", "I live in Lisbon.");
    let report = run(&host, &EmbeddedProposer, extract()).await;
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { .. }), "{report:?}");
    let kinds: Vec<_> = host
        .records()
        .iter()
        .map(|r| match r {
            Record::MemoryCommit(c) => format!("{:?}:{}", c.trigger, c.cursor.next),
            other => other.kind().name().to_owned(),
        })
        .collect();
    assert_eq!(kinds, vec!["Compaction:2", "Compaction:4", "Extract:5"]);
    assert_eq!(host.view_items(), 2, "the denied checkpoint's range stored nothing");
}

fn status_notes(host: &Host, turns: usize) {
    for turn in 0..turns {
        let text =
            format!("Status note {turn}: {}", "the build is green and the deploy went fine. ".repeat(3));
        host.user(&format!("t{turn}"), &text);
    }
}

/// `(is a window's, cursor before, cursor after)` of every memory commit, in log order.
fn commits(host: &Host) -> Vec<(bool, u64, u64)> {
    host.records()
        .iter()
        .filter_map(|r| match r {
            Record::MemoryCommit(c) => {
                Some((c.operation.as_str().starts_with("memory_segment_"), c.cursor.expected, c.cursor.next))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_range_too_large_for_the_evidence_budget_is_split_into_windows_that_fit() {
    // Before: a range was split at most once in two; one that needed three parts failed
    // (evidence) whole.
    let host = Host::new();
    status_notes(&host, 120);
    let report = run(&host, &EmbeddedProposer, extract()).await;
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { .. }), "{report:?}");
    let commits = commits(&host);
    assert!(commits.len() >= 3, "{commits:?}");
    let (last, windows) = commits.split_last().unwrap();
    assert!(windows.iter().all(|c| c.0) && !last.0, "windows first, the trigger's own range last");
    assert_eq!(windows[0].1, 0);
    for pair in commits.windows(2) {
        assert_eq!(pair[0].2, pair[1].1, "windows are consecutive: {commits:?}");
    }
    for window in windows {
        let users = window.2 - window.1;
        assert!(users <= EXTRACT_USER_EVENTS_PER_RANGE_MAX as u64, "{commits:?}");
    }
    assert_eq!(last.2, 120);
}

#[tokio::test]
async fn a_split_range_is_processed_only_when_every_window_committed() {
    let host = Host::new();
    status_notes(&host, 120);
    // The first window's proposal is answered; every call for the second fails.
    let mut answers = vec![resolved(Vec::new(), Vec::new())];
    answers.extend(vec![Err(ModelError::Provider("down".to_owned())); 3]);
    let report = run(&host, &Scripted::with(answers), extract()).await;
    assert!(matches!(report.outcome, ExtractionOutcome::RetryLater { .. }), "{report:?}");
    let commits = commits(&host);
    assert_eq!(commits.len(), 1, "only the first window committed: {commits:?}");
    let state = host.ledger.state().unwrap();
    let cursor = MemoryView::new(state.as_ref()).cursor(&session()).unwrap().map(|c| c.processed_ordinal);
    assert_eq!(cursor, Some(commits[0].2), "the cursor stops after the last window that committed");
    assert!(commits[0].2 < 120);
    // The next trigger retries the failed window and reads on to the end.
    let report = run(&host, &EmbeddedProposer, extract()).await;
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { .. }), "{report:?}");
    assert_eq!(commits_through(&host), 120);
}

fn commits_through(host: &Host) -> u64 {
    commits(host).last().map_or(0, |c| c.2)
}

#[tokio::test]
async fn every_policy_gate_denies_a_compaction_range_durably_and_unavailable_settles_nothing() {
    for (reason, denied) in [
        (GateReason::Incognito, true),
        (GateReason::Disabled, true),
        (GateReason::Ineligible, true),
        (GateReason::Unavailable, false),
    ] {
        let host = Host::new();
        host.user("t1", "I prefer tabs over spaces.");
        let boundary = host.agent("t1", "Noted.");
        let c1 = checkpoint(&host, "c1", "t1", &boundary, BoundaryDisposition::Eligible);
        *host.gate.lock().unwrap() = Some(reason);
        let report = run(&host, &EmbeddedProposer, Trigger::Compaction { checkpoint: c1 }).await;
        assert!(matches!(report.outcome, ExtractionOutcome::Unavailable { .. }), "{reason:?}");
        let state = host.ledger.state().unwrap();
        let view = MemoryView::new(state.as_ref());
        assert_eq!(view.denials(&session()).unwrap().len(), usize::from(denied), "{reason:?}");
        let cursor = view.cursor(&session()).unwrap().map(|c| c.processed_ordinal);
        assert_eq!(cursor, denied.then_some(2), "{reason:?}: the denied range is skipped, else recoverable");
        assert_eq!(host.view_items(), 0, "{reason:?}");
    }
}

/// Answers like the embedded proposer and keeps every prompt's prior summary.
#[derive(Debug, Default)]
struct Recording {
    prior: Mutex<Vec<Option<String>>>,
}

impl MemoryProposer for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn propose<'a>(&'a self, prompt: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        self.prior.lock().unwrap().push(prompt.prior_summary.clone());
        EmbeddedProposer.propose(prompt)
    }
}

fn link(host: &Host, id: &str, previous: Option<&str>, summary: &str) {
    let mut checkpoints = host.checkpoints.lock().unwrap();
    let record = checkpoints.iter_mut().find(|c| c.checkpoint.as_str() == id).unwrap();
    record.previous = previous.map(|p| CheckpointId::new(p).unwrap());
    record.body =
        CheckpointBody::Text { summary: summary.to_owned(), summary_format: SummaryFormat::SectionsV1 };
}

#[tokio::test]
async fn the_prior_checkpoint_summary_precedes_the_context_unless_its_chain_is_denied_or_broken() {
    let host = Host::new();
    host.user("t1", "I prefer tabs over spaces.");
    let first = host.agent("t1", "Noted.");
    checkpoint(&host, "c1", "t1", &first, BoundaryDisposition::Eligible);
    link(&host, "c1", None, "## Goal\nthe first summary");
    host.user("t2", "I use neovim daily.");
    let second = host.agent("t2", "Great.");
    let c2 = checkpoint(&host, "c2", "t2", &second, BoundaryDisposition::Eligible);
    link(&host, "c2", Some("c1"), "## Goal\nthe second summary");
    host.user("t3", "Our CI runs on Debian.");
    let third = host.agent("t3", "Fine.");

    // A compaction trigger reads after its checkpoint's predecessor.
    let recording = Recording::default();
    run(&host, &recording, Trigger::Compaction { checkpoint: c2.clone() }).await;
    assert_eq!(
        recording.prior.lock().unwrap().last().cloned().flatten().as_deref(),
        Some("## Goal\nthe first summary")
    );
    // Another trigger reads after the checkpoint that ends furthest before its range's end.
    let recording = Recording::default();
    run(&host, &recording, Trigger::Extract { terminal_event: Some(third) }).await;
    assert_eq!(
        recording.prior.lock().unwrap().last().cloned().flatten().as_deref(),
        Some("## Goal\nthe second summary")
    );

    // A policy-denied checkpoint anywhere in the chain removes the summary.
    let host2 = Host::new();
    host2.user("t1", "I prefer tabs over spaces.");
    let first = host2.agent("t1", "Noted.");
    checkpoint(&host2, "c1", "t1", &first, BoundaryDisposition::PolicyDenied);
    host2.user("t2", "I use neovim daily.");
    let second = host2.agent("t2", "Great.");
    checkpoint(&host2, "c2", "t2", &second, BoundaryDisposition::Eligible);
    link(&host2, "c2", Some("c1"), "## Goal\nthe second summary");
    host2.user("t3", "Our CI runs on Debian.");
    let third = host2.agent("t3", "Fine.");
    let recording = Recording::default();
    run(&host2, &recording, Trigger::Extract { terminal_event: Some(third) }).await;
    assert!(recording.prior.lock().unwrap().iter().all(Option::is_none), "denied ancestry is never reused");

    // A compaction trigger whose predecessor is missing is unavailable, with no model call.
    let host3 = Host::new();
    host3.user("t1", "I prefer tabs over spaces.");
    let first = host3.agent("t1", "Noted.");
    let c1 = checkpoint(&host3, "c1", "t1", &first, BoundaryDisposition::Eligible);
    link(&host3, "c1", Some("gone"), "## Goal\nx");
    let report = run(&host3, &EmbeddedProposer, Trigger::Compaction { checkpoint: c1 }).await;
    assert!(matches!(report.outcome, ExtractionOutcome::Unavailable { .. }), "{report:?}");
    assert_eq!(report.model_calls, 0);
}
