//! The store's operations (memory.md §2.4–2.9): validation before anything is written, then a
//! decision under the single memory writer against the caught-up state, then one append.

use std::collections::BTreeMap;
use std::sync::Arc;

use mnemo_core::limits::MEMORY_MUTATIONS_MAX;
use mnemo_core::{
    CheckpointId, CursorAdvance, DenialReason, Digest, ExtractionFailure, ExtractionFailureClass,
    ExtractionReceipt, ExtractionTrigger, FailureOutcome, ItemId, MemoryCommit, MemoryItem, MemoryItemFields,
    MemoryMutation, MemoryScope, Mutation, NewMemoryItem, NoOpReason, OperationId, PolicyDenial,
    ReceiptStatus, Record, SessionId, SkipReason, TimestampMs, WorkspaceId,
};
use mnemo_pipeline::StateStore;
use serde::{Deserialize, Serialize};

use crate::consolidate::{Link, plan};
use crate::error::{Conflict, ConflictReason, MemoryError, invalid};
use crate::index::{
    SettleDecision, check_commit, commit_request_hash, mutation_request_hash, run_batch, run_commit,
    settle_decision,
};
use crate::secrets::is_sensitive;
use crate::state::{
    self, Cursor, Denial, KEY_TAG, KeyEntry, MemoryView, OperationKind, OperationResult, PendingFailure,
    Receipt,
};
use crate::text::{check_identifier, visible_key};
use crate::write::ItemInput;

/// Most raw terms in one key search.
pub const SEARCH_TERMS_MAX: usize = 32;
/// Most results of one key search.
pub const SEARCH_RESULTS_MAX: u64 = 100;
/// Results of a key search when no limit is given.
pub const SEARCH_RESULTS_DEFAULT: u64 = 20;

/// The decision a [`MemoryLedger::write`] runs: given the caught-up state and the commit time,
/// the record to append, if any.
pub type Decide<'a> = dyn FnMut(&dyn StateStore, TimestampMs) -> Result<Option<Record>, MemoryError> + 'a;

/// Where memory records go and where the memory-index state comes from: the host's log and
/// pipeline behind one writer.
pub trait MemoryLedger: Send + Sync {
    /// The `memory-index` store, caught up with the log as it is now.
    fn state(&self) -> Result<Arc<dyn StateStore>, MemoryError>;

    /// Runs `decide` under the single memory writer with the caught-up state and the commit
    /// time; appends the record it returns, if any, and returns once `memory-index` has folded
    /// it. Nothing else appends memory records meanwhile, so the decision holds at append time.
    fn write(&self, decide: &mut Decide<'_>) -> Result<(), MemoryError>;
}

/// The id of the `index`-th item an operation creates: derived from the operation, so a retry
/// of the same operation names the same items.
pub fn item_id_for(operation: &OperationId, index: usize) -> ItemId {
    let digest = Digest::sha256(format!("{}\0{index}", operation.as_str()).as_bytes()).to_hex();
    // A 36-byte ASCII id without control characters is always a valid item id.
    ItemId::new(format!("mem_{}", &digest[..32])).unwrap_or_else(|_| unreachable!("a fixed-form id is valid"))
}

/// One change as a caller gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum MutationInput {
    /// A new item.
    Create {
        /// Its fields.
        item: ItemInput,
    },
    /// New fields for an item at `expected_version`.
    Update {
        /// The item.
        item_id: ItemId,
        /// Its current version.
        expected_version: u64,
        /// The new fields.
        item: ItemInput,
    },
    /// Archive an active item.
    Archive {
        /// The item.
        item_id: ItemId,
        /// Its current version.
        expected_version: u64,
    },
    /// Restore an archived item.
    Restore {
        /// The item.
        item_id: ItemId,
        /// Its current version.
        expected_version: u64,
    },
}

/// A batch of changes under one operation id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutationRequest {
    /// The idempotency key.
    pub operation: OperationId,
    /// 1 to 32 changes, applied in order, all or nothing.
    pub mutations: Vec<MutationInput>,
}

fn normalize_mutations(request: &MutationRequest) -> Result<Vec<Mutation>, MemoryError> {
    check_identifier("operation", request.operation.as_str())?;
    if request.mutations.is_empty() || request.mutations.len() > MEMORY_MUTATIONS_MAX {
        return invalid("mutations", format!("must hold 1 to {MEMORY_MUTATIONS_MAX} mutations"));
    }
    let mut out = Vec::with_capacity(request.mutations.len());
    for (index, mutation) in request.mutations.iter().enumerate() {
        let at =
            |e: mnemo_core::ValidationError| MemoryError::Invalid(e.within(&format!("mutations[{index}]")));
        let version = |v: u64| match v {
            0 => Err(at(mnemo_core::ValidationError::new("expected_version", "must be at least 1"))),
            v => Ok(v),
        };
        let id = |item: &ItemId| check_identifier("item_id", item.as_str()).map_err(at);
        out.push(match mutation {
            MutationInput::Create { item } => Mutation::Create {
                item: item_id_for(&request.operation, index),
                fields: item.normalize().map_err(at)?,
            },
            MutationInput::Update { item_id, expected_version, item } => {
                id(item_id)?;
                Mutation::Update {
                    item: item_id.clone(),
                    expected_version: version(*expected_version)?,
                    fields: item.normalize().map_err(at)?,
                }
            }
            MutationInput::Archive { item_id, expected_version } => {
                id(item_id)?;
                Mutation::Archive { item: item_id.clone(), expected_version: version(*expected_version)? }
            }
            MutationInput::Restore { item_id, expected_version } => {
                id(item_id)?;
                Mutation::Restore { item: item_id.clone(), expected_version: version(*expected_version)? }
            }
        });
    }
    Ok(out)
}

/// The stream a batch goes to: the one workspace it writes or touches, else global.
pub(crate) fn batch_scope(
    store: &dyn StateStore,
    mutations: &[Mutation],
) -> Result<MemoryScope, MemoryError> {
    let mut workspaces = BTreeMap::new();
    let mut note = |scope: &MemoryScope| {
        if let MemoryScope::Workspace(w) = scope {
            workspaces.insert(w.clone(), ());
        }
    };
    for mutation in mutations {
        match mutation {
            Mutation::Create { fields, .. } => note(&fields.scope),
            Mutation::Update { item, fields, .. } => {
                note(&fields.scope);
                if let Some(current) = state::item(store, item)? {
                    note(&current.fields.scope);
                }
            }
            Mutation::Archive { item, .. } | Mutation::Restore { item, .. } => {
                if let Some(current) = state::item(store, item)? {
                    note(&current.fields.scope);
                }
            }
            _ => {}
        }
    }
    let mut workspaces = workspaces.into_keys();
    match (workspaces.next(), workspaces.next()) {
        (None, _) => Ok(MemoryScope::Global),
        (Some(w), None) => Ok(MemoryScope::Workspace(w)),
        (Some(_), Some(_)) => invalid("mutations", "one operation may touch at most one workspace"),
    }
}

/// Applies a batch of mutations (memory.md §2.6). Same operation id and same request: the
/// stored result with `replayed: true` and nothing appended; same id, other request:
/// `operation_reused`.
pub fn apply_mutations(
    ledger: &dyn MemoryLedger,
    request: &MutationRequest,
) -> Result<OperationResult, MemoryError> {
    apply_batch(ledger, request, None)
}

/// [`apply_mutations`], with the consolidation the batch undoes when it is an unmerge.
pub(crate) fn apply_batch(
    ledger: &dyn MemoryLedger,
    request: &MutationRequest,
    unmerge: Option<mnemo_core::Unmerge>,
) -> Result<OperationResult, MemoryError> {
    refuse_secrets(request)?;
    let mutations = normalize_mutations(request)?;
    let mut replay = None;
    ledger.write(&mut |store, now| {
        let scope = batch_scope(store, &mutations)?;
        let record = MemoryMutation {
            operation: request.operation.clone(),
            scope,
            mutations: mutations.clone(),
            committed_at: now,
            unmerge: unmerge.clone(),
        };
        let hash = mutation_request_hash(&record)?;
        if let Some(entry) = state::operation(store, &request.operation)? {
            if entry.kind == OperationKind::Mutation && entry.request_hash == hash {
                replay = Some(entry.result(true));
                return Ok(None);
            }
            return Err(Conflict::new(
                ConflictReason::OperationReused,
                hash.to_hex(),
                entry.request_hash.to_hex(),
            )
            .into());
        }
        record.validate()?;
        run_batch(store, &record.mutations, now)?.map_err(MemoryError::Conflict)?;
        Ok(Some(Record::MemoryMutation(record)))
    })?;
    if let Some(result) = replay {
        return Ok(result);
    }
    let store = ledger.state()?;
    MemoryView::new(store.as_ref()).operation(&request.operation)?.ok_or_else(|| {
        MemoryError::Inconsistent(format!(
            "operation {} is not in the index after its append",
            request.operation
        ))
    })
}

/// How search terms match keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MatchMode {
    /// A key equals the term.
    Exact,
    /// A key starts with the term.
    Prefix,
}

/// A key search (memory.md §2.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRequest {
    /// 1 to 32 terms, normalized like keys.
    pub terms: Vec<String>,
    /// Exact or prefix.
    pub match_mode: MatchMode,
    /// Also return this workspace's items (global items are always candidates).
    pub workspace: Option<WorkspaceId>,
    /// Also return archived items.
    pub include_archived: bool,
    /// 1 to 100; 20 when absent.
    pub limit: Option<u64>,
}

fn search_terms(request: &SearchRequest) -> Result<Vec<String>, MemoryError> {
    if request.terms.is_empty() || request.terms.len() > SEARCH_TERMS_MAX {
        return invalid("terms", format!("must hold 1 to {SEARCH_TERMS_MAX} terms"));
    }
    let mut terms = Vec::with_capacity(request.terms.len());
    for (index, term) in request.terms.iter().enumerate() {
        let text = visible_key(&format!("terms[{index}]"), term)?;
        terms.push(mnemo_core::MemoryKey::normalize(&text));
    }
    terms.sort();
    terms.dedup();
    Ok(terms)
}

struct Hit {
    terms: usize,
    updated_at: TimestampMs,
}

/// Searches items by keys (memory.md §2.5): global items plus the named workspace's, active
/// unless archived ones are asked for; ranked by distinct terms matched, then most recently
/// updated, then item id.
pub fn search(store: &dyn StateStore, request: &SearchRequest) -> Result<Vec<MemoryItem>, MemoryError> {
    let terms = search_terms(request)?;
    if let Some(workspace) = &request.workspace {
        check_identifier("workspace", workspace.as_str())?;
    }
    let limit = request.limit.unwrap_or(SEARCH_RESULTS_DEFAULT);
    if limit == 0 || limit > SEARCH_RESULTS_MAX {
        return invalid("limit", format!("must be 1 to {SEARCH_RESULTS_MAX}"));
    }
    let workspace_scope = request.workspace.clone().map(|w| MemoryScope::Workspace(w).as_text());
    let mut hits: BTreeMap<String, (Hit, usize)> = BTreeMap::new();
    let mut failure = None;
    for (term_index, term) in terms.iter().enumerate() {
        let mut prefix = [KEY_TAG, term.as_bytes()].concat();
        if request.match_mode == MatchMode::Exact {
            prefix.push(0);
        }
        store.scan_prefix(&prefix, &mut |key, value| {
            let rest = &key[KEY_TAG.len()..];
            let Some(split) = rest.iter().position(|b| *b == 0) else {
                return true;
            };
            let Ok(item) = std::str::from_utf8(&rest[split + 1..]) else {
                return true;
            };
            let entry: KeyEntry = match state::decode(value) {
                Ok(entry) => entry,
                Err(e) => {
                    failure = Some(e);
                    return false;
                }
            };
            let visible = entry.scope == "global" || Some(&entry.scope) == workspace_scope.as_ref();
            let live = request.include_archived || entry.lifecycle == mnemo_core::LifecycleState::Active;
            if visible && live {
                let slot = hits
                    .entry(item.to_owned())
                    .or_insert((Hit { terms: 0, updated_at: entry.updated_at }, usize::MAX));
                if slot.1 != term_index {
                    slot.0.terms += 1;
                    slot.1 = term_index;
                }
            }
            true
        })?;
        if let Some(e) = failure.take() {
            return Err(e.into());
        }
    }
    let mut ranked: Vec<(String, Hit)> = hits.into_iter().map(|(id, (hit, _))| (id, hit)).collect();
    ranked.sort_by(|a, b| {
        b.1.terms.cmp(&a.1.terms).then(b.1.updated_at.cmp(&a.1.updated_at)).then(a.0.cmp(&b.0))
    });
    let mut out = Vec::new();
    for (id, _) in ranked.into_iter().take(limit as usize) {
        let id = ItemId::new(id).map_err(|e| MemoryError::State(state::damaged(e.to_string())))?;
        if let Some(item) = state::item(store, &id)? {
            out.push(item);
        }
    }
    Ok(out)
}

/// Most items one listing returns.
pub const LIST_RESULTS_MAX: u64 = 1000;
/// Items of a listing when no limit is given.
pub const LIST_RESULTS_DEFAULT: u64 = 200;

/// A listing of items (no key needed): every scope, or global items and one workspace's.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ListRequest {
    /// Global items and this workspace's; every scope when absent.
    pub workspace: Option<WorkspaceId>,
    /// Only items of this kind.
    pub kind: Option<mnemo_core::MemoryKind>,
    /// Also archived items.
    pub include_archived: bool,
    /// 1 to 1000; 200 when absent.
    pub limit: Option<u64>,
}

/// Lists items by scope (global first, then workspaces by name), then creation time, then id;
/// active only unless archived ones are asked for.
pub fn list(store: &dyn StateStore, request: &ListRequest) -> Result<Vec<MemoryItem>, MemoryError> {
    if let Some(workspace) = &request.workspace {
        check_identifier("workspace", workspace.as_str())?;
    }
    let limit = request.limit.unwrap_or(LIST_RESULTS_DEFAULT);
    if limit == 0 || limit > LIST_RESULTS_MAX {
        return invalid("limit", format!("must be 1 to {LIST_RESULTS_MAX}"));
    }
    let prefixes: Vec<Vec<u8>> = match &request.workspace {
        Some(w) => vec![
            [state::SCOPE_TAG, b"global\0"].concat(),
            [state::SCOPE_TAG, MemoryScope::Workspace(w.clone()).as_text().as_bytes(), b"\0"].concat(),
        ],
        None => vec![state::SCOPE_TAG.to_vec()],
    };
    let mut ids: Vec<ItemId> = Vec::new();
    for prefix in &prefixes {
        store.scan_prefix(prefix, &mut |key, value| {
            if request.include_archived || value == b"active" {
                let rest = &key[state::SCOPE_TAG.len()..];
                if let Some(split) = rest.iter().position(|b| *b == 0)
                    && let Some(id) =
                        std::str::from_utf8(&rest[split + 1..]).ok().and_then(|i| ItemId::new(i).ok())
                {
                    ids.push(id);
                }
            }
            true
        })?;
    }
    let mut items = Vec::new();
    for id in ids {
        let Some(item) = state::item(store, &id)? else { continue };
        if request.kind.is_none_or(|kind| item.fields.kind == kind) {
            items.push(item);
        }
    }
    items.sort_by(|a, b| {
        let scope = |i: &MemoryItem| (i.fields.scope != MemoryScope::Global, i.fields.scope.as_text());
        scope(a).cmp(&scope(b)).then(a.created_at.cmp(&b.created_at)).then(a.item.cmp(&b.item))
    });
    items.truncate(limit as usize);
    Ok(items)
}

/// An extraction commit as the engine asks for it (memory.md §2.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRequest {
    /// The idempotency key.
    pub operation: OperationId,
    /// The session.
    pub session: SessionId,
    /// The stream: the session's workspace scope, or global.
    pub scope: MemoryScope,
    /// What set it off.
    pub trigger: ExtractionTrigger,
    /// The checkpoint, for a compaction trigger.
    pub checkpoint: Option<CheckpointId>,
    /// The cursor it was computed against.
    pub expected_cursor: u64,
    /// The cursor after it.
    pub next_cursor: u64,
    /// The covered events' hash.
    pub coverage_hash: Digest,
    /// Normalized items to create.
    pub items: Vec<MemoryItemFields>,
    /// Indexes of the requested items.
    pub requested: Vec<u32>,
    /// Per item, the canonicalizer's verdict on a held item it restates or contradicts; empty
    /// when there are none (decision 0155).
    pub links: Vec<Option<Link>>,
    /// Sensitive remember no-op.
    pub no_op_reason: Option<NoOpReason>,
    /// Policy skip.
    pub skip_reason: Option<SkipReason>,
}

/// What a commit returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitResult {
    /// The receipt.
    pub receipt: Receipt,
    /// The cursor after it (synthesized on a replay).
    pub cursor: Cursor,
    /// Whether it was already committed.
    pub replayed: bool,
}

fn commit_record(request: &CommitRequest, now: TimestampMs) -> MemoryCommit {
    let mut requested = request.requested.clone();
    requested.sort_unstable();
    requested.dedup();
    let status =
        ReceiptStatus::of_commit(request.trigger, request.skip_reason.is_some(), !requested.is_empty());
    MemoryCommit {
        operation: request.operation.clone(),
        session: request.session.clone(),
        scope: request.scope.clone(),
        trigger: request.trigger,
        checkpoint: request.checkpoint.clone(),
        cursor: CursorAdvance { expected: request.expected_cursor, next: request.next_cursor },
        coverage_hash: request.coverage_hash,
        items: request
            .items
            .iter()
            .enumerate()
            .map(|(index, fields)| NewMemoryItem {
                item: item_id_for(&request.operation, index),
                fields: fields.clone(),
            })
            .collect(),
        merges: Vec::new(),
        supersessions: Vec::new(),
        receipt: ExtractionReceipt {
            status,
            requested_items: requested,
            no_op_reason: request.no_op_reason,
            skip_reason: request.skip_reason,
        },
        committed_at: now,
    }
}

/// Commits items, cursor and receipt as one record (memory.md §2.7).
pub fn commit_extraction(
    ledger: &dyn MemoryLedger,
    request: &CommitRequest,
) -> Result<CommitResult, MemoryError> {
    check_identifier("operation", request.operation.as_str())?;
    check_identifier("session", request.session.as_str())?;
    if request.next_cursor <= request.expected_cursor {
        return invalid("next_cursor", "Cursor must advance");
    }
    let mut replay = None;
    ledger.write(&mut |store, now| {
        let mut record = commit_record(request, now);
        let hash = commit_request_hash(&record)?;
        if let Some(entry) = state::operation(store, &request.operation)? {
            let receipt = state::receipt(store, &request.operation)?;
            return match receipt {
                Some(receipt) if entry.kind == OperationKind::Extraction && entry.request_hash == hash => {
                    let cursor =
                        Cursor { processed_ordinal: request.next_cursor, updated_at: receipt.committed_at };
                    replay = Some(CommitResult { receipt, cursor, replayed: true });
                    Ok(None)
                }
                _ => Err(Conflict::new(
                    ConflictReason::OperationReused,
                    hash.to_hex(),
                    entry.request_hash.to_hex(),
                )
                .into()),
            };
        }
        // Each fact once: restatements merge into the items they restate, contradicted items
        // are superseded; decided here, against the state the record will apply to.
        (record.merges, record.supersessions) = plan(store, &record.items, &request.links)?;
        record.validate()?;
        check_commit(store, &record)?.map_err(MemoryError::Conflict)?;
        run_commit(store, &record)?.map_err(MemoryError::Conflict)?;
        Ok(Some(Record::MemoryCommit(record)))
    })?;
    if let Some(result) = replay {
        return Ok(result);
    }
    let store = ledger.state()?;
    let view = MemoryView::new(store.as_ref());
    let receipt = view.receipt(&request.operation)?;
    let cursor = view.cursor(&request.session)?;
    match (receipt, cursor) {
        (Some(receipt), Some(cursor)) => Ok(CommitResult { receipt, cursor, replayed: false }),
        _ => Err(MemoryError::Inconsistent(format!(
            "commit {} is not in the index after its append",
            request.operation
        ))),
    }
}

/// A failure settlement as the engine asks for it (memory.md §2.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleRequest {
    /// The failed attempt's operation.
    pub operation: OperationId,
    /// The session.
    pub session: SessionId,
    /// The stream.
    pub scope: MemoryScope,
    /// The cursor the attempt started from.
    pub expected_cursor: u64,
    /// The last ordinal of the failed range.
    pub failed_through: u64,
    /// The covered events' hash.
    pub coverage_hash: Digest,
    /// Why it failed.
    pub failure_class: ExtractionFailureClass,
    /// The range's trigger.
    pub trigger: ExtractionTrigger,
    /// The checkpoint, for a compaction trigger.
    pub checkpoint: Option<CheckpointId>,
}

/// What settling did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SettleResult {
    /// The range is pending; one later trigger retries it.
    RetryLater {
        /// The pending range.
        pending: PendingFailure,
        /// Whether it was already recorded.
        replayed: bool,
    },
    /// The range was given up on; the cursor moved past it.
    Discarded {
        /// The discard receipt.
        receipt: Receipt,
        /// The cursor now.
        cursor: Option<Cursor>,
        /// Whether it was already discarded.
        replayed: bool,
    },
}

/// Settles a failed range: first failure → pending, retry failure → discard.
pub fn settle_failure(
    ledger: &dyn MemoryLedger,
    request: &SettleRequest,
) -> Result<SettleResult, MemoryError> {
    check_identifier("operation", request.operation.as_str())?;
    let mut outcome = None;
    ledger.write(&mut |store, now| {
        let mut record = ExtractionFailure {
            operation: request.operation.clone(),
            session: request.session.clone(),
            scope: request.scope.clone(),
            trigger: request.trigger,
            checkpoint: request.checkpoint.clone(),
            expected_cursor: request.expected_cursor,
            failed_through: request.failed_through,
            coverage_hash: request.coverage_hash,
            failure_class: request.failure_class,
            outcome: FailureOutcome::RetryLater,
            failed_at: now,
        };
        record.validate()?;
        let decision = settle_decision(store, &record)?.map_err(MemoryError::Conflict)?;
        let cursor = state::cursor(store, &request.session)?;
        match decision {
            SettleDecision::ReplayDiscard(receipt) => {
                outcome = Some(SettleResult::Discarded { receipt, cursor, replayed: true });
                Ok(None)
            }
            SettleDecision::ReplayRetryLater(pending) => {
                outcome = Some(SettleResult::RetryLater { pending, replayed: true });
                Ok(None)
            }
            SettleDecision::RecordPending(pending) => {
                outcome = Some(SettleResult::RetryLater { pending, replayed: false });
                Ok(Some(Record::ExtractionFailure(record)))
            }
            SettleDecision::Discard(receipt) => {
                record.outcome = FailureOutcome::Discarded;
                let cursor = Some(Cursor { processed_ordinal: request.failed_through, updated_at: now });
                outcome = Some(SettleResult::Discarded { receipt, cursor, replayed: false });
                Ok(Some(Record::ExtractionFailure(record)))
            }
        }
    })?;
    outcome.ok_or_else(|| MemoryError::Inconsistent("settlement decided nothing".to_owned()))
}

/// Records a compaction policy denial if absent; returns the stored one (the first wins).
pub fn record_denial(
    ledger: &dyn MemoryLedger,
    session: &SessionId,
    scope: &MemoryScope,
    checkpoint: &CheckpointId,
    reason: DenialReason,
) -> Result<Denial, MemoryError> {
    ledger.write(&mut |store, now| {
        if state::denial(store, session, checkpoint)?.is_some() {
            return Ok(None);
        }
        Ok(Some(Record::PolicyDenial(PolicyDenial {
            session: session.clone(),
            scope: scope.clone(),
            checkpoint: checkpoint.clone(),
            reason,
            denied_at: now,
        })))
    })?;
    let store = ledger.state()?;
    state::denial(store.as_ref(), session, checkpoint)?.ok_or_else(|| {
        MemoryError::Inconsistent(format!("denial of {checkpoint} is not in the index after its append"))
    })
}

/// A direct write passes the same secret check as extraction's admission: content or a key that
/// holds credential material ([`crate::is_sensitive`]) is refused before anything is decided, so a
/// secret never becomes an item or a key.
fn refuse_secrets(request: &MutationRequest) -> Result<(), MemoryError> {
    const REFUSED: &str = "holds credential material; secrets are never stored in memory";
    for (index, mutation) in request.mutations.iter().enumerate() {
        let item = match mutation {
            MutationInput::Create { item } | MutationInput::Update { item, .. } => item,
            _ => continue,
        };
        if is_sensitive(&item.content) {
            return invalid(format!("mutations[{index}].content"), REFUSED);
        }
        if let Some(key) = item.keys.iter().position(|k| is_sensitive(&k.key)) {
            return invalid(format!("mutations[{index}].keys[{key}]"), REFUSED);
        }
    }
    Ok(())
}
