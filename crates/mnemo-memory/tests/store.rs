//! Store operations against the real projector: idempotency, versions, lifecycle, search,
//! extraction commits, failure settlement, rebuild and workspace isolation.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use mnemo_core::{
    Digest, ExtractionFailureClass, ExtractionTrigger, ItemId, KeyOrigin, KeyType, LifecycleState,
    MemoryKind, MemoryOrigin, MemoryScope, OperationId, ReceiptStatus, SessionId, SourcePointer,
    StatementType, TemporalType, WorkspaceId,
};
use mnemo_memory::testing::VecLedger;
use mnemo_memory::{
    CommitRequest, ConflictReason, ItemInput, KeyInput, MatchMode, MemoryError, MemoryLedger, MemoryView,
    MutationInput, MutationOutcome, MutationRequest, OperationType, SearchRequest, SettleRequest,
    SettleResult, apply_mutations, commit_extraction, search, settle_failure,
};
use mnemo_pipeline::projection_digest;
use proptest::prelude::*;

fn op(id: &str) -> OperationId {
    OperationId::new(id).unwrap()
}

fn input(content: &str, keys: &[&str], scope: MemoryScope) -> ItemInput {
    ItemInput {
        content: content.to_owned(),
        kind: MemoryKind::Preference,
        statement_type: StatementType::Fact,
        temporal_type: TemporalType::Undated,
        scope,
        event_started_at: None,
        event_ended_at: None,
        observed_at: 0,
        origin: MemoryOrigin::UserRequested,
        keys: keys
            .iter()
            .map(|k| KeyInput {
                key: (*k).to_owned(),
                key_type: KeyType::Concept,
                key_origin: KeyOrigin::User,
            })
            .collect(),
        sources: vec![SourcePointer {
            session: SessionId::new("s1").unwrap(),
            run: mnemo_core::RunId::new("r1").unwrap(),
            turn: mnemo_core::TurnId::new("t1").unwrap(),
            event: mnemo_core::EventId::new("e1").unwrap(),
        }],
    }
}

fn create(ledger: &VecLedger, operation: &str, content: &str, keys: &[&str], scope: MemoryScope) -> ItemId {
    let request = MutationRequest {
        operation: op(operation),
        mutations: vec![MutationInput::Create { item: input(content, keys, scope) }],
    };
    apply_mutations(ledger, &request).unwrap().results[0].item.clone()
}

fn conflict(result: Result<impl std::fmt::Debug, MemoryError>) -> mnemo_memory::Conflict {
    match result {
        Err(MemoryError::Conflict(conflict)) => conflict,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

fn find(
    ledger: &VecLedger,
    terms: &[&str],
    mode: MatchMode,
    workspace: Option<&str>,
    archived: bool,
) -> Vec<ItemId> {
    let request = SearchRequest {
        terms: terms.iter().map(|t| (*t).to_owned()).collect(),
        match_mode: mode,
        workspace: workspace.map(|w| WorkspaceId::new(w).unwrap()),
        include_archived: archived,
        limit: None,
    };
    search(ledger.state().unwrap().as_ref(), &request).unwrap().into_iter().map(|i| i.item).collect()
}

#[test]
fn same_operation_replays_and_a_different_payload_is_operation_reused() {
    let ledger = VecLedger::new(1_000);
    let request = MutationRequest {
        operation: op("op-1"),
        mutations: vec![MutationInput::Create {
            item: input("Prefers tabs", &["tabs"], MemoryScope::Global),
        }],
    };
    let first = apply_mutations(&ledger, &request).unwrap();
    assert!(!first.replayed);
    assert_eq!(first.operation_type, OperationType::Create);
    assert_eq!(first.results[0].outcome, MutationOutcome::Created);
    let again = apply_mutations(&ledger, &request).unwrap();
    assert!(again.replayed);
    assert_eq!((again.committed_at, &again.results), (first.committed_at, &first.results));
    assert_eq!(ledger.records().len(), 1, "a replay appends nothing");
    let mut other = request.clone();
    other.mutations =
        vec![MutationInput::Create { item: input("Prefers spaces", &["spaces"], MemoryScope::Global) }];
    assert_eq!(conflict(apply_mutations(&ledger, &other)).reason, ConflictReason::OperationReused);
    assert_eq!(ledger.records().len(), 1);
}

#[test]
fn stale_expected_version_is_a_conflict_with_expected_and_actual() {
    let ledger = VecLedger::new(1_000);
    let id = create(&ledger, "op-1", "Prefers tabs", &["tabs"], MemoryScope::Global);
    let update = |operation: &str, version: u64, content: &str| MutationRequest {
        operation: op(operation),
        mutations: vec![MutationInput::Update {
            item_id: id.clone(),
            expected_version: version,
            item: input(content, &["tabs"], MemoryScope::Global),
        }],
    };
    let updated = apply_mutations(&ledger, &update("op-2", 1, "Prefers tabs strongly")).unwrap();
    assert_eq!((updated.results[0].version, updated.results[0].outcome), (2, MutationOutcome::Updated));
    let stale = conflict(apply_mutations(&ledger, &update("op-3", 1, "Prefers tabs again")));
    assert_eq!(
        (stale.reason, stale.expected.as_str(), stale.actual.as_str()),
        (ConflictReason::VersionConflict, "1", "2")
    );
    assert_eq!(stale.item, Some(id.clone()));
    let noop = apply_mutations(&ledger, &update("op-4", 2, "Prefers tabs strongly")).unwrap();
    assert_eq!((noop.results[0].version, noop.results[0].outcome), (2, MutationOutcome::Noop));
}

#[test]
fn archive_hides_from_search_until_restored() {
    let ledger = VecLedger::new(1_000);
    let id = create(&ledger, "op-1", "Prefers tabs", &["Tabs"], MemoryScope::Global);
    assert_eq!(find(&ledger, &["tabs"], MatchMode::Exact, None, false), vec![id.clone()]);
    let lifecycle = |operation: &str, version: u64, archive: bool| {
        let mutation = if archive {
            MutationInput::Archive { item_id: id.clone(), expected_version: version }
        } else {
            MutationInput::Restore { item_id: id.clone(), expected_version: version }
        };
        apply_mutations(&ledger, &MutationRequest { operation: op(operation), mutations: vec![mutation] })
    };
    let archived = lifecycle("op-2", 1, true).unwrap();
    assert_eq!(archived.results[0].lifecycle, LifecycleState::Archived);
    assert!(find(&ledger, &["tabs"], MatchMode::Exact, None, false).is_empty());
    assert_eq!(find(&ledger, &["TA"], MatchMode::Prefix, None, true), vec![id.clone()]);
    let twice = conflict(lifecycle("op-3", 2, true));
    assert_eq!(twice.reason, ConflictReason::InvalidLifecycleTransition);
    let restored = lifecycle("op-4", 2, false).unwrap();
    assert_eq!((restored.results[0].version, restored.results[0].outcome), (3, MutationOutcome::Restored));
    assert_eq!(find(&ledger, &["tabs"], MatchMode::Exact, None, false), vec![id]);
}

#[test]
fn a_batch_is_all_or_nothing() {
    let ledger = VecLedger::new(1_000);
    let missing = ItemId::new("mem_missing").unwrap();
    let request = MutationRequest {
        operation: op("op-batch"),
        mutations: vec![
            MutationInput::Create { item: input("Prefers tabs", &["tabs"], MemoryScope::Global) },
            MutationInput::Archive { item_id: missing, expected_version: 1 },
        ],
    };
    assert_eq!(conflict(apply_mutations(&ledger, &request)).reason, ConflictReason::ItemNotFound);
    assert!(ledger.records().is_empty());
    assert!(find(&ledger, &["tabs"], MatchMode::Exact, None, false).is_empty());
    // The same operation id can be used again once the failed attempt left no trace.
    let fixed = MutationRequest { operation: op("op-batch"), mutations: vec![request.mutations[0].clone()] };
    let id = apply_mutations(&ledger, &fixed).unwrap().results[0].item.clone();
    let batch = MutationRequest {
        operation: op("op-batch-2"),
        mutations: vec![
            MutationInput::Archive { item_id: id.clone(), expected_version: 1 },
            MutationInput::Restore { item_id: id.clone(), expected_version: 2 },
        ],
    };
    let done = apply_mutations(&ledger, &batch).unwrap();
    assert_eq!(done.operation_type, OperationType::Batch);
    assert_eq!(done.results[1].version, 3);
    assert!(apply_mutations(&ledger, &batch).unwrap().replayed);
}

#[test]
fn search_ranks_by_terms_then_recency_and_checks_its_limits() {
    let ledger = VecLedger::new(1_000);
    let old = create(&ledger, "op-1", "Uses rust and tokio", &["rust", "tokio"], MemoryScope::Global);
    let newer = create(&ledger, "op-2", "Uses rust", &["rust"], MemoryScope::Global);
    let newest = create(&ledger, "op-3", "Likes rust", &["rust"], MemoryScope::Global);
    assert_eq!(find(&ledger, &["rust", "tokio"], MatchMode::Exact, None, false), vec![old, newest, newer]);
    let state = ledger.state().unwrap();
    let mut request = SearchRequest {
        terms: vec!["rust".to_owned()],
        match_mode: MatchMode::Exact,
        workspace: None,
        include_archived: false,
        limit: Some(0),
    };
    assert!(matches!(search(state.as_ref(), &request), Err(MemoryError::Invalid(_))));
    request.limit = Some(101);
    assert!(matches!(search(state.as_ref(), &request), Err(MemoryError::Invalid(_))));
    request.limit = Some(1);
    assert_eq!(search(state.as_ref(), &request).unwrap().len(), 1);
    request.terms = (0..33).map(|i| format!("t{i}")).collect();
    assert!(matches!(search(state.as_ref(), &request), Err(MemoryError::Invalid(_))));
    request.terms = vec!["a\u{200B}b".to_owned()];
    assert!(matches!(search(state.as_ref(), &request), Err(MemoryError::Invalid(_))));
}

#[test]
fn invalid_requests_write_nothing() {
    let ledger = VecLedger::new(1_000);
    let mut item = input("x", &["k"], MemoryScope::Global);
    item.temporal_type = TemporalType::Interval;
    item.event_started_at = Some(10);
    item.event_ended_at = Some(10);
    let request = MutationRequest { operation: op("op"), mutations: vec![MutationInput::Create { item }] };
    assert!(matches!(apply_mutations(&ledger, &request), Err(MemoryError::Invalid(_))));
    let bad_op = MutationRequest { operation: op("e\u{301}"), mutations: request.mutations.clone() };
    assert!(matches!(apply_mutations(&ledger, &bad_op), Err(MemoryError::Invalid(_))));
    let mut late = input("x", &["k"], MemoryScope::Global);
    late.observed_at = 1_000_000;
    let late =
        MutationRequest { operation: op("op2"), mutations: vec![MutationInput::Create { item: late }] };
    assert!(matches!(apply_mutations(&ledger, &late), Err(MemoryError::Invalid(_))));
    assert!(ledger.records().is_empty());
}

#[test]
fn a_direct_write_holding_a_secret_is_refused_by_the_memory_crate() {
    let ledger = VecLedger::new(1_000);
    let cases = [
        (
            input("deploy key is sk-ant-abcdefgh12345678", &["deploy"], MemoryScope::Global),
            "mutations[0].content",
        ),
        (
            input("the deploy key", &["ghp_abcdefghijklmnopqrstuvwxyz"], MemoryScope::Global),
            "mutations[0].keys[0]",
        ),
    ];
    for (item, field) in cases {
        let request =
            MutationRequest { operation: op("op"), mutations: vec![MutationInput::Create { item }] };
        match apply_mutations(&ledger, &request) {
            Err(MemoryError::Invalid(error)) => {
                assert_eq!(error.field, field);
                assert!(error.reason.contains("credential material"), "{error}");
            }
            other => panic!("a secret was not refused: {other:?}"),
        }
    }
    assert!(ledger.records().is_empty(), "nothing is written");
}

fn commit(session: &str, operation: &str, expected: u64, next: u64) -> CommitRequest {
    CommitRequest {
        operation: op(operation),
        session: SessionId::new(session).unwrap(),
        scope: MemoryScope::Global,
        trigger: ExtractionTrigger::Extract,
        checkpoint: None,
        expected_cursor: expected,
        next_cursor: next,
        coverage_hash: Digest::sha256(format!("{expected}-{next}").as_bytes()),
        items: Vec::new(),
        requested: Vec::new(),
        links: Vec::new(),
        no_op_reason: None,
        skip_reason: None,
    }
}

#[test]
fn extraction_commits_move_the_cursor_once_and_replay() {
    let ledger = VecLedger::new(1_000);
    let first = commit_extraction(&ledger, &commit("s1", "memory_a", 0, 5)).unwrap();
    assert_eq!(
        (first.receipt.status, first.cursor.processed_ordinal, first.replayed),
        (ReceiptStatus::Extracted, 5, false)
    );
    let replay = commit_extraction(&ledger, &commit("s1", "memory_a", 0, 5)).unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.receipt, first.receipt);
    let stale = conflict(commit_extraction(&ledger, &commit("s1", "memory_b", 0, 7)));
    assert_eq!(
        (stale.reason, stale.expected.as_str(), stale.actual.as_str()),
        (ConflictReason::CursorConflict, "0", "5")
    );
    let reused = conflict(commit_extraction(&ledger, &commit("s1", "memory_a", 5, 7)));
    assert_eq!(reused.reason, ConflictReason::OperationReused);
    assert!(matches!(
        commit_extraction(&ledger, &commit("s1", "memory_c", 5, 5)),
        Err(MemoryError::Invalid(_))
    ));
    assert_eq!(ledger.records().len(), 1);
}

fn settle(operation: &str, expected: u64, through: u64, class: ExtractionFailureClass) -> SettleRequest {
    SettleRequest {
        operation: op(operation),
        session: SessionId::new("s1").unwrap(),
        scope: MemoryScope::Global,
        expected_cursor: expected,
        failed_through: through,
        coverage_hash: Digest::sha256(b"range"),
        failure_class: class,
        trigger: ExtractionTrigger::Extract,
        checkpoint: None,
    }
}

#[test]
fn a_failed_range_is_retried_once_then_discarded() {
    let ledger = VecLedger::new(1_000);
    let first =
        settle_failure(&ledger, &settle("memory_first", 0, 4, ExtractionFailureClass::Schema)).unwrap();
    let SettleResult::RetryLater { pending, replayed: false } = first else { panic!("{first:?}") };
    assert_eq!((pending.from, pending.through), (1, 4));
    let again =
        settle_failure(&ledger, &settle("memory_first", 0, 4, ExtractionFailureClass::Schema)).unwrap();
    assert!(matches!(again, SettleResult::RetryLater { replayed: true, .. }));
    let mut moved = settle("memory_retry", 0, 5, ExtractionFailureClass::Provider);
    assert_eq!(conflict(settle_failure(&ledger, &moved)).reason, ConflictReason::CursorConflict);
    moved.failed_through = 4;
    let discarded = settle_failure(&ledger, &moved).unwrap();
    let SettleResult::Discarded { receipt, cursor, replayed: false } = discarded else {
        panic!("{discarded:?}")
    };
    let range = receipt.discarded_range.unwrap();
    assert_eq!(
        (range.first_failure_class, range.final_failure_class),
        (ExtractionFailureClass::Schema, ExtractionFailureClass::Provider)
    );
    assert_eq!(cursor.unwrap().processed_ordinal, 4);
    assert!(matches!(
        settle_failure(&ledger, &moved).unwrap(),
        SettleResult::Discarded { replayed: true, .. }
    ));
    let view_state = ledger.state().unwrap();
    let view = MemoryView::new(view_state.as_ref());
    assert!(view.pending_failure(&SessionId::new("s1").unwrap()).unwrap().is_none());
    // A commit over the pending range must match it exactly.
    let ledger = VecLedger::new(1_000);
    settle_failure(&ledger, &settle("memory_first", 0, 4, ExtractionFailureClass::Schema)).unwrap();
    assert_eq!(
        conflict(commit_extraction(&ledger, &commit("s1", "memory_x", 0, 4))).reason,
        ConflictReason::CursorConflict
    );
}

#[test]
fn rebuilding_the_index_from_the_records_gives_the_same_digest() {
    let ledger = VecLedger::new(1_000);
    let id = create(&ledger, "op-1", "Prefers tabs", &["tabs"], MemoryScope::Global);
    create(
        &ledger,
        "op-2",
        "Uses fjall",
        &["fjall"],
        MemoryScope::Workspace(WorkspaceId::new("w1").unwrap()),
    );
    let archive = MutationRequest {
        operation: op("op-3"),
        mutations: vec![MutationInput::Archive { item_id: id, expected_version: 1 }],
    };
    apply_mutations(&ledger, &archive).unwrap();
    commit_extraction(&ledger, &commit("s1", "memory_a", 0, 5)).unwrap();
    settle_failure(&ledger, &settle("memory_f", 5, 9, ExtractionFailureClass::Schema)).unwrap();
    let live = projection_digest(ledger.state().unwrap().as_ref()).unwrap();
    let rebuilt = VecLedger::fold(&ledger.records()).unwrap();
    assert_eq!(projection_digest(&rebuilt).unwrap(), live);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn search_never_returns_another_workspaces_item(
        items in prop::collection::vec((0usize..4, 0usize..3), 1..24),
        asked in 0usize..4,
        prefix in any::<bool>(),
    ) {
        let ledger = VecLedger::new(1_000);
        let workspaces = ["w0", "w1", "w2"];
        for (index, (scope, key)) in items.iter().enumerate() {
            let scope = match workspaces.get(*scope) {
                Some(w) => MemoryScope::Workspace(WorkspaceId::new(*w).unwrap()),
                None => MemoryScope::Global,
            };
            create(&ledger, &format!("op-{index}"), "A fact", &[["alpha", "alps", "beta"][*key]], scope);
        }
        let asked = workspaces.get(asked).copied();
        let mode = if prefix { MatchMode::Prefix } else { MatchMode::Exact };
        let state = ledger.state().unwrap();
        for terms in [vec!["alpha"], vec!["al"], vec!["beta", "alps"]] {
            let request = SearchRequest {
                terms: terms.iter().map(|t| (*t).to_owned()).collect(),
                match_mode: mode,
                workspace: asked.map(|w| WorkspaceId::new(w).unwrap()),
                include_archived: true,
                limit: Some(100),
            };
            for item in search(state.as_ref(), &request).unwrap() {
                let allowed = match &item.fields.scope {
                    MemoryScope::Global => true,
                    MemoryScope::Workspace(w) => Some(w.as_str()) == asked,
                    _ => false,
                };
                prop_assert!(allowed, "{:?} leaked into a search of {:?}", item.fields.scope, asked);
            }
            let recalled = mnemo_memory::recall(
                state.as_ref(),
                asked.map(|w| WorkspaceId::new(w).unwrap()).as_ref(),
                &mnemo_memory::RecallMemory { query: format!("fact {}", terms.join(" ")), limit: Some(50) },
            ).unwrap();
            for item in recalled {
                let allowed = match &item.scope {
                    MemoryScope::Global => true,
                    MemoryScope::Workspace(w) => Some(w.as_str()) == asked,
                    _ => false,
                };
                prop_assert!(allowed, "recall leaked {:?} into {:?}", item.scope, asked);
            }
        }
    }
}

/// A host whose log is unavailable: every read and append fails with its own I/O error.
struct UnavailableHost;

impl MemoryLedger for UnavailableHost {
    fn state(&self) -> Result<std::sync::Arc<dyn mnemo_pipeline::StateStore>, MemoryError> {
        Err(MemoryError::host(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "log unavailable")))
    }

    fn write(&self, _: &mut mnemo_memory::Decide<'_>) -> Result<(), MemoryError> {
        Err(MemoryError::host(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "log unavailable")))
    }
}

#[test]
fn a_host_failure_keeps_the_hosts_error_type_instead_of_its_text() {
    let request = MutationRequest {
        operation: op("op-host"),
        mutations: vec![MutationInput::Create {
            item: input("Prefers tabs", &["tabs"], MemoryScope::Global),
        }],
    };
    let error = apply_mutations(&UnavailableHost, &request).unwrap_err();
    let MemoryError::Host(host) = &error else { panic!("expected a host failure, got {error:?}") };
    let io = host.downcast_ref::<std::io::Error>().expect("the host's own error type");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    let source = std::error::Error::source(&error).expect("the host's error is the source");
    assert!(source.downcast_ref::<std::io::Error>().is_some());
    assert_eq!(error.to_string(), "memory host failed: log unavailable");
}
