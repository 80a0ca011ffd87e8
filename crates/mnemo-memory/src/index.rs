//! The `memory-index` projector, and the state transitions it shares with the writer.
//!
//! Architecture invariant: the writer decides a record with the same functions the projector
//! replays it with ([`run_batch`], [`check_commit`], [`settle_decision`]), against the same
//! state, under the single memory writer. So a record that was appended always applies, and a
//! conflict is found before anything is appended.

use std::collections::BTreeMap;

use mnemo_core::{
    Digest, ExtractionFailure, ExtractionTrigger, FailureOutcome, ItemId, LifecycleState, MemoryCommit,
    MemoryItem, MemoryMutation, Mutation, PolicyDenial, ReceiptStatus, Record, Unmerge,
};
use mnemo_pipeline::{LoggedRecord, PipelineError, Projector, StateTxn};
use serde_json::json;

use crate::consolidate::{merge_fields, signature_digest};
use crate::error::{Conflict, ConflictReason};
use crate::recall::RECALL_BUDGET_CONFIG_KEY;
use crate::recall::is_standing;
use crate::state::{
    self, CURSOR_TAG, Cursor, DENIAL_TAG, Denial, DiscardedRange, FACT_TAG, ITEM_TAG, ItemAction, ItemEvent,
    KEY_TAG, KeyEntry, Kv, MutationOutcome, MutationResult, MutationType, OPERATION_TAG, OperationEntry,
    OperationKind, OperationType, PENDING_TAG, PendingFailure, RECEIPT_TAG, REJECTED_TAG, Receipt, SCOPE_TAG,
    SIGNATURE_TAG, STAGE_NAME, STANDING_TAG, StoredItem, encode, item_event_key, key,
};

/// Bumped whenever what the stage writes changes; a new version rebuilds the stage.
/// 2: the signature index (`n`), merges and supersessions of extraction commits (decision 0155),
/// the standing-facts index (`t`, decision 0156).
/// 3: a receipt lists every item its commit created, updated or archived, with kind and scope.
/// 4: items point at the items they supersede, the fact index (`v`) and item events (`e`;
/// decision 0232).
const VERSION: u32 = 4;

/// Builds the stage.
///
/// Its one configuration key, `recall_budget_tokens` (a positive integer), is read by recall,
/// not by the projector; it lives here so that pipelines configure memory in one place.
pub fn factory(config: &toml::Table) -> Result<Box<dyn Projector>, String> {
    for (name, value) in config {
        let valid = name == RECALL_BUDGET_CONFIG_KEY && value.as_integer().is_some_and(|v| v > 0);
        if !valid {
            return Err(format!(
                "{STAGE_NAME} takes only recall_budget_tokens (a positive integer), found {name:?} = {value}"
            ));
        }
    }
    Ok(Box::new(MemoryIndex))
}

/// The projector: items, key index, scope index, operations, receipts, cursors, pending
/// failures and denials, folded from the memory records.
#[derive(Debug, Default)]
pub struct MemoryIndex;

impl Projector for MemoryIndex {
    fn name(&self) -> &str {
        STAGE_NAME
    }

    fn version(&self) -> u32 {
        VERSION
    }

    fn apply(&mut self, state: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError> {
        let outcome = match &logged.record {
            Record::MemoryMutation(record) => apply_mutation(state, record, logged.position.0)?,
            Record::MemoryCommit(record) => apply_commit(state, record, logged.position.0)?,
            Record::ExtractionFailure(record) => apply_failure(state, record)?,
            Record::PolicyDenial(record) => {
                apply_denial(state, record)?;
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(reason) = outcome {
            let position = format!("{:020}", logged.position.0);
            state.put(key(REJECTED_TAG, &[&position]), reason.into_bytes());
        }
        Ok(())
    }
}

/// The items a batch touched: each one's state before the batch (`None` for a create) and after.
#[derive(Debug, Default)]
pub(crate) struct ItemChanges {
    before: BTreeMap<ItemId, Option<MemoryItem>>,
    after: BTreeMap<ItemId, MemoryItem>,
}

impl ItemChanges {
    fn current(&mut self, kv: &(impl Kv + ?Sized), id: &ItemId) -> Result<Option<MemoryItem>, PipelineError> {
        if let Some(item) = self.after.get(id) {
            return Ok(Some(item.clone()));
        }
        let stored = state::item(kv, id)?;
        self.before.entry(id.clone()).or_insert_with(|| stored.clone());
        Ok(stored)
    }

    fn set(&mut self, item: MemoryItem) {
        self.before.entry(item.item.clone()).or_insert(None);
        self.after.insert(item.item.clone(), item);
    }

    /// Writes the touched items and replaces their key and scope index entries.
    pub(crate) fn write(&self, txn: &mut StateTxn<'_>) -> Result<(), PipelineError> {
        for (id, after) in &self.after {
            if let Some(Some(before)) = self.before.get(id) {
                for k in &before.fields.keys {
                    txn.delete(key(KEY_TAG, &[&k.normalized_key, id.as_str()]));
                }
                txn.delete(key(SCOPE_TAG, &[&before.fields.scope.as_text(), id.as_str()]));
                txn.delete(signature_key(before));
                txn.delete(key(STANDING_TAG, &[&before.fields.scope.as_text(), id.as_str()]));
                if let Some(k) = fact_key(before) {
                    txn.delete(k);
                }
            }
            let entry = KeyEntry {
                scope: after.fields.scope.as_text(),
                lifecycle: after.lifecycle,
                updated_at: after.updated_at,
            };
            let entry_bytes = encode(&entry)?;
            for k in &after.fields.keys {
                txn.put(key(KEY_TAG, &[&k.normalized_key, id.as_str()]), entry_bytes.clone());
            }
            txn.put(key(SCOPE_TAG, &[&entry.scope, id.as_str()]), lifecycle_name(after.lifecycle).into());
            if after.lifecycle == LifecycleState::Active {
                txn.put(signature_key(after), Vec::new());
                if is_standing(after.fields.kind) {
                    txn.put(key(STANDING_TAG, &[&entry.scope, id.as_str()]), Vec::new());
                }
                if let Some(k) = fact_key(after) {
                    txn.put(k, Vec::new());
                }
            }
            txn.put(key(ITEM_TAG, &[id.as_str()]), encode(after)?);
        }
        Ok(())
    }
}

/// The fact index entry of an item whose content states a fact (decision 0232).
fn fact_key(item: &MemoryItem) -> Option<Vec<u8>> {
    let fact = crate::facts::fact(&item.fields.content)?;
    let first = fact.subject.attribute.first()?;
    Some(key(FACT_TAG, &[&item.fields.scope.as_text(), fact.subject.owner, first, item.item.as_str()]))
}

/// The signature index entry of an item (decision 0155).
fn signature_key(item: &MemoryItem) -> Vec<u8> {
    let digest = signature_digest(&item.fields.content);
    key(SIGNATURE_TAG, &[&item.fields.scope.as_text(), &digest, item.item.as_str()])
}

pub(crate) fn lifecycle_name(state: LifecycleState) -> &'static str {
    match state {
        LifecycleState::Active => "active",
        _ => "archived",
    }
}

fn version_check(item: &MemoryItem, expected: u64) -> Result<(), Conflict> {
    if item.version != expected {
        return Err(Conflict::new(ConflictReason::VersionConflict, expected, item.version).on(&item.item));
    }
    Ok(())
}

fn lifecycle_change(
    item: &mut MemoryItem,
    from: LifecycleState,
    to: LifecycleState,
    committed_at: mnemo_core::TimestampMs,
) -> Result<(), Conflict> {
    if item.lifecycle != from {
        return Err(Conflict::new(
            ConflictReason::InvalidLifecycleTransition,
            lifecycle_name(from),
            lifecycle_name(item.lifecycle),
        )
        .on(&item.item));
    }
    item.lifecycle = to;
    item.version += 1;
    item.updated_at = item.updated_at.max(committed_at);
    Ok(())
}

type BatchOutcome = Result<(ItemChanges, Vec<MutationResult>), Conflict>;

/// Applies a batch in order against the state (a later mutation sees earlier ones), without
/// writing: the changes and results, or the first conflict (memory.md §2.6 step 6).
pub(crate) fn run_batch(
    kv: &(impl Kv + ?Sized),
    mutations: &[Mutation],
    committed_at: mnemo_core::TimestampMs,
) -> Result<BatchOutcome, PipelineError> {
    let mut changes = ItemChanges::default();
    let mut results = Vec::with_capacity(mutations.len());
    for (index, mutation) in mutations.iter().enumerate() {
        let (id, mutation_type) = match mutation {
            Mutation::Create { item, .. } => (item, MutationType::Create),
            Mutation::Update { item, .. } => (item, MutationType::Update),
            Mutation::Archive { item, .. } => (item, MutationType::Archive),
            Mutation::Restore { item, .. } => (item, MutationType::Restore),
            _ => return Err(state::damaged("unknown memory mutation type")),
        };
        let current = changes.current(kv, id)?;
        let step = match (mutation, current) {
            (Mutation::Create { item, fields }, None) => Ok((
                MemoryItem::created(item.clone(), fields.clone(), committed_at),
                MutationOutcome::Created,
            )),
            (Mutation::Create { item, .. }, Some(_)) => {
                Err(Conflict::new(ConflictReason::OperationReused, "a new item", "an existing item").on(item))
            }
            (_, None) => Err(Conflict::new(ConflictReason::ItemNotFound, "an item", "none").on(id)),
            (Mutation::Update { expected_version, fields, .. }, Some(mut item)) => {
                version_check(&item, *expected_version).map(|()| {
                    if &item.fields == fields {
                        (item, MutationOutcome::Noop)
                    } else {
                        item.fields = fields.clone();
                        item.content_hash = Digest::sha256(item.fields.content.as_bytes());
                        item.version += 1;
                        item.updated_at = item.updated_at.max(committed_at);
                        (item, MutationOutcome::Updated)
                    }
                })
            }
            (Mutation::Archive { expected_version, .. }, Some(mut item)) => {
                version_check(&item, *expected_version)
                    .and_then(|()| {
                        lifecycle_change(
                            &mut item,
                            LifecycleState::Active,
                            LifecycleState::Archived,
                            committed_at,
                        )
                    })
                    .map(|()| (item, MutationOutcome::Archived))
            }
            (Mutation::Restore { expected_version, .. }, Some(mut item)) => {
                version_check(&item, *expected_version)
                    .and_then(|()| {
                        lifecycle_change(
                            &mut item,
                            LifecycleState::Archived,
                            LifecycleState::Active,
                            committed_at,
                        )
                    })
                    .map(|()| {
                        item.superseded_by = None;
                        (item, MutationOutcome::Restored)
                    })
            }
            _ => return Err(state::damaged("unknown memory mutation type")),
        };
        let (item, outcome) = match step {
            Ok(step) => step,
            Err(conflict) => return Ok(Err(conflict)),
        };
        results.push(MutationResult {
            mutation_index: index as u32,
            mutation_type,
            item: item.item.clone(),
            version: item.version,
            lifecycle: item.lifecycle,
            outcome,
        });
        if outcome != MutationOutcome::Noop {
            changes.set(item);
        }
    }
    Ok(Ok((changes, results)))
}

/// Applies an extraction commit against the state without writing: its statements' creates
/// (all but the merged ones), then its merges (the statement's sources and keys into the item it
/// restates), then its supersessions (archive, pointing at the replacing item). The results list
/// the creates, then the merges, then the supersessions.
pub(crate) fn run_commit(
    kv: &(impl Kv + ?Sized),
    record: &MemoryCommit,
) -> Result<BatchOutcome, PipelineError> {
    let creates: Vec<Mutation> = record
        .items
        .iter()
        .enumerate()
        .filter(|(index, _)| !record.is_merged(*index))
        .map(|(_, new)| Mutation::Create { item: new.item.clone(), fields: new.fields.clone() })
        .collect();
    let (mut changes, mut results) = match run_batch(kv, &creates, record.committed_at)? {
        Ok(done) => done,
        Err(conflict) => return Ok(Err(conflict)),
    };
    let at = record.committed_at;
    for merge in &record.merges {
        let Some(statement) = record.items.get(merge.statement as usize) else {
            return Err(state::damaged("a merge names no statement"));
        };
        let Some(mut item) = changes.current(kv, &merge.item)? else {
            return Ok(Err(Conflict::new(ConflictReason::ItemNotFound, "an item", "none").on(&merge.item)));
        };
        if let Err(conflict) = version_check(&item, merge.expected_version) {
            return Ok(Err(conflict));
        }
        if item.lifecycle != LifecycleState::Active {
            return Ok(Err(Conflict::new(ConflictReason::InvalidLifecycleTransition, "active", "archived")
                .on(&merge.item)));
        }
        let fields = merge_fields(&item.fields, &statement.fields);
        let outcome = if fields == item.fields {
            MutationOutcome::Noop
        } else {
            item.fields = fields;
            item.version += 1;
            item.updated_at = item.updated_at.max(at);
            MutationOutcome::Updated
        };
        results.push(result(results.len(), MutationType::Update, &item, outcome));
        if outcome == MutationOutcome::Updated {
            changes.set(item);
        }
    }
    for supersession in &record.supersessions {
        let Some(by) = record.items.get(supersession.by as usize) else {
            return Err(state::damaged("a supersession names no statement"));
        };
        let Some(mut item) = changes.current(kv, &supersession.item)? else {
            return Ok(Err(
                Conflict::new(ConflictReason::ItemNotFound, "an item", "none").on(&supersession.item)
            ));
        };
        let step = version_check(&item, supersession.expected_version)
            .and_then(|()| lifecycle_change(&mut item, LifecycleState::Active, LifecycleState::Archived, at));
        if let Err(conflict) = step {
            return Ok(Err(conflict));
        }
        item.superseded_by = Some(by.item.clone());
        results.push(result(results.len(), MutationType::Archive, &item, MutationOutcome::Archived));
        let old = item.item.clone();
        changes.set(item);
        // The other side of the pointer: the replacing item, created by this commit, names the
        // items it replaced. Its version stays 1: it was created so.
        if let Some(mut newer) = changes.current(kv, &by.item)? {
            newer.supersedes.push(old);
            changes.set(newer);
        }
    }
    Ok(Ok((changes, results)))
}

fn result(
    index: usize,
    mutation_type: MutationType,
    item: &MemoryItem,
    outcome: MutationOutcome,
) -> MutationResult {
    MutationResult {
        mutation_index: index as u32,
        mutation_type,
        item: item.item.clone(),
        version: item.version,
        lifecycle: item.lifecycle,
        outcome,
    }
}

/// The operation type of a batch (memory.md §2.6 step 3).
pub(crate) fn operation_type(mutations: &[Mutation]) -> OperationType {
    match mutations {
        [Mutation::Create { .. }] => OperationType::Create,
        [Mutation::Update { .. }] => OperationType::Update,
        [Mutation::Archive { .. }] => OperationType::Archive,
        [Mutation::Restore { .. }] => OperationType::Restore,
        _ => OperationType::Batch,
    }
}

fn hash_json(value: &serde_json::Value) -> Result<Digest, PipelineError> {
    Ok(Digest::sha256(&encode(value)?))
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, PipelineError> {
    serde_json::to_value(value).map_err(|e| state::damaged(e.to_string()))
}

/// The request hash of a mutation batch: its normalized mutations, without the ids the writer
/// assigns to created items or the commit time.
pub(crate) fn mutation_request_hash(record: &MemoryMutation) -> Result<Digest, PipelineError> {
    let mut mutations = to_value(&record.mutations)?;
    if let Some(list) = mutations.as_array_mut() {
        for entry in list {
            if entry.get("type").and_then(|t| t.as_str()) == Some("create")
                && let Some(map) = entry.as_object_mut()
            {
                map.remove("item");
            }
        }
    }
    let mut request = json!({"kind": "memory_mutation", "mutations": mutations});
    if let (Some(unmerge), Some(map)) = (&record.unmerge, request.as_object_mut()) {
        map.insert("unmerge".to_owned(), to_value(unmerge)?);
    }
    hash_json(&request)
}

/// The request hash of an extraction commit (memory.md §1.8); the operation id is the key, not
/// part of the hash.
pub(crate) fn commit_request_hash(record: &MemoryCommit) -> Result<Digest, PipelineError> {
    let items: Vec<_> = record.items.iter().map(|new| &new.fields).collect();
    hash_json(&json!({
        "kind": "memory_extraction",
        "session": record.session,
        "expected_cursor_ordinal": record.cursor.expected,
        "next_cursor_ordinal": record.cursor.next,
        "coverage_hash": record.coverage_hash,
        "items": to_value(&items)?,
        "requested_item_indexes": record.receipt.requested_items,
        "no_op_reason": record.receipt.no_op_reason,
        "skip_reason": record.receipt.skip_reason,
        "trigger": record.trigger,
        "checkpoint": record.checkpoint,
    }))
}

/// The request hash of a discard (memory.md §1.8).
pub(crate) fn discard_request_hash(record: &ExtractionFailure) -> Result<Digest, PipelineError> {
    hash_json(&json!({
        "kind": "memory_extraction_discard",
        "session": record.session,
        "trigger": record.trigger,
        "checkpoint": record.checkpoint,
        "from": record.expected_cursor.saturating_add(1),
        "through": record.failed_through,
        "coverage_hash": record.coverage_hash,
        "final_failure_class": record.failure_class,
    }))
}

fn apply_mutation(
    txn: &mut StateTxn<'_>,
    record: &MemoryMutation,
    position: u64,
) -> Result<Result<(), String>, PipelineError> {
    if state::operation(&*txn, &record.operation)?.is_some() {
        return Ok(Err(format!("operation {} was already used", record.operation)));
    }
    if let Some(unmerge) = &record.unmerge
        && let Err(conflict) = check_unmerge(&*txn, unmerge)?
    {
        return Ok(Err(conflict.to_string()));
    }
    let (changes, results) = match run_batch(&*txn, &record.mutations, record.committed_at)? {
        Ok(done) => done,
        Err(conflict) => return Ok(Err(conflict.to_string())),
    };
    changes.write(txn)?;
    let events = mutation_events(record, &results, position);
    write_events(txn, position, events)?;
    if let Some(unmerge) = &record.unmerge {
        mark_undone(txn, unmerge, position)?;
    }
    let entry = OperationEntry {
        operation: record.operation.clone(),
        kind: OperationKind::Mutation,
        operation_type: operation_type(&record.mutations),
        request_hash: mutation_request_hash(record)?,
        committed_at: record.committed_at,
        results,
    };
    txn.put(key(OPERATION_TAG, &[record.operation.as_str()]), encode(&entry)?);
    Ok(Ok(()))
}

/// Checks an extraction commit against the cursor and the pending failure (memory.md §2.7
/// transaction steps 2–3). The caller has already ruled out a replay.
pub(crate) fn check_commit(
    kv: &(impl Kv + ?Sized),
    record: &MemoryCommit,
) -> Result<Result<(), Conflict>, PipelineError> {
    let current = state::cursor(kv, &record.session)?.map_or(0, |c| c.processed_ordinal);
    if current != record.cursor.expected {
        return Ok(Err(Conflict::new(ConflictReason::CursorConflict, record.cursor.expected, current)));
    }
    let Some(pending) = state::pending(kv, &record.session)? else {
        return Ok(Ok(()));
    };
    let starts = pending.from == record.cursor.expected.saturating_add(1);
    let fits = if record.receipt.skip_reason.is_some() {
        pending.first_trigger == ExtractionTrigger::Compaction
            && starts
            && pending.through <= record.cursor.next
    } else {
        pending.first_operation != record.operation
            && starts
            && pending.through == record.cursor.next
            && pending.coverage_hash == record.coverage_hash
            && pending.first_trigger == record.trigger
            && pending.checkpoint == record.checkpoint
    };
    if !fits {
        return Ok(Err(Conflict::new(
            ConflictReason::CursorConflict,
            format!("a commit matching pending range {}..={}", pending.from, pending.through),
            format!("{}..={}", record.cursor.expected.saturating_add(1), record.cursor.next),
        )));
    }
    Ok(Ok(()))
}

fn apply_commit(
    txn: &mut StateTxn<'_>,
    record: &MemoryCommit,
    position: u64,
) -> Result<Result<(), String>, PipelineError> {
    if state::operation(&*txn, &record.operation)?.is_some() {
        return Ok(Err(format!("operation {} was already used", record.operation)));
    }
    if let Err(conflict) = check_commit(&*txn, record)? {
        return Ok(Err(conflict.to_string()));
    }
    let (changes, results) = match run_commit(&*txn, record)? {
        Ok(done) => done,
        Err(conflict) => return Ok(Err(conflict.to_string())),
    };
    let events = commit_events(&*txn, record, &results, position)?;
    changes.write(txn)?;
    write_events(txn, position, events)?;
    let items = stored_items(&*txn, record, &results)?;
    let receipt = Receipt {
        operation: record.operation.clone(),
        session: record.session.clone(),
        status: record.receipt.status,
        items,
        no_op_reason: record.receipt.no_op_reason,
        skip_reason: record.receipt.skip_reason,
        discarded_range: None,
        committed_at: record.committed_at,
    };
    let entry = OperationEntry {
        operation: record.operation.clone(),
        kind: OperationKind::Extraction,
        operation_type: OperationType::Batch,
        request_hash: commit_request_hash(record)?,
        committed_at: record.committed_at,
        results,
    };
    advance_cursor(txn, &record.session, record.cursor.next, record.committed_at)?;
    txn.put(key(OPERATION_TAG, &[record.operation.as_str()]), encode(&entry)?);
    txn.put(key(RECEIPT_TAG, &[record.operation.as_str()]), encode(&receipt)?);
    Ok(Ok(()))
}

/// What a commit's receipt reports: every item its results name, once, as the state holds it
/// after the commit. A statement is requested when the receipt lists its index; an item it merged
/// into is requested when one of the statements merged into it is.
fn stored_items(
    kv: &(impl Kv + ?Sized),
    record: &MemoryCommit,
    results: &[MutationResult],
) -> Result<Vec<StoredItem>, PipelineError> {
    let requested = |index: usize| record.receipt.requested_items.contains(&(index as u32));
    let mut out: Vec<StoredItem> = Vec::new();
    for result in results {
        let Some(stored) = state::item(kv, &result.item)? else {
            return Err(state::damaged("a commit's result names an item the state does not hold"));
        };
        let by_statement = record.items.iter().position(|new| new.item == result.item).is_some_and(requested);
        let by_merge = record.merges.iter().any(|m| m.item == result.item && requested(m.statement as usize));
        let was_requested = result.outcome != MutationOutcome::Archived && (by_statement || by_merge);
        if let Some(seen) = out.iter_mut().find(|s| s.item == result.item) {
            seen.requested |= was_requested;
            continue;
        }
        out.push(StoredItem {
            item: result.item.clone(),
            content: stored.fields.content,
            kind: stored.fields.kind,
            scope: stored.fields.scope,
            requested: was_requested,
            outcome: result.outcome,
        });
    }
    Ok(out)
}

fn advance_cursor(
    txn: &mut StateTxn<'_>,
    session: &mnemo_core::SessionId,
    to: u64,
    at: mnemo_core::TimestampMs,
) -> Result<(), PipelineError> {
    let cursor = Cursor { processed_ordinal: to, updated_at: at };
    txn.put(key(CURSOR_TAG, &[session.as_str()]), encode(&cursor)?);
    txn.delete(key(PENDING_TAG, &[session.as_str()]));
    Ok(())
}

/// What settling a failure does (memory.md §2.8 transaction steps 1–6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SettleDecision {
    /// The same discard was already committed.
    ReplayDiscard(Receipt),
    /// The same first failure was already recorded.
    ReplayRetryLater(PendingFailure),
    /// First failure of the range: record it as pending.
    RecordPending(PendingFailure),
    /// The pending range's retry failed: discard it.
    Discard(Receipt),
}

fn same_range(pending: &PendingFailure, record: &ExtractionFailure) -> bool {
    pending.from == record.expected_cursor.saturating_add(1)
        && pending.through == record.failed_through
        && pending.coverage_hash == record.coverage_hash
        && pending.first_trigger == record.trigger
        && pending.checkpoint == record.checkpoint
}

/// Decides what a failure settlement does; the record's `outcome` is ignored here.
pub(crate) fn settle_decision(
    kv: &(impl Kv + ?Sized),
    record: &ExtractionFailure,
) -> Result<Result<SettleDecision, Conflict>, PipelineError> {
    let reused = |expected: &str| Conflict::new(ConflictReason::OperationReused, expected, "another request");
    if let Some(receipt) = state::receipt(kv, &record.operation)? {
        let hash = discard_request_hash(record)?;
        let same = state::operation(kv, &record.operation)?.is_some_and(|op| op.request_hash == hash);
        return Ok(match receipt.status {
            ReceiptStatus::Discarded if same => Ok(SettleDecision::ReplayDiscard(receipt)),
            ReceiptStatus::Discarded => Err(reused("the same discard")),
            _ => Err(reused("an operation that did not already complete successfully")),
        });
    }
    if state::operation(kv, &record.operation)?.is_some() {
        return Ok(Err(reused("an unused operation id")));
    }
    let current = state::cursor(kv, &record.session)?.map_or(0, |c| c.processed_ordinal);
    if current != record.expected_cursor {
        return Ok(Err(Conflict::new(ConflictReason::CursorConflict, record.expected_cursor, current)));
    }
    let Some(pending) = state::pending(kv, &record.session)? else {
        return Ok(Ok(SettleDecision::RecordPending(PendingFailure {
            session: record.session.clone(),
            from: record.expected_cursor.saturating_add(1),
            through: record.failed_through,
            coverage_hash: record.coverage_hash,
            first_operation: record.operation.clone(),
            first_trigger: record.trigger,
            checkpoint: record.checkpoint.clone(),
            first_failure_class: record.failure_class,
            failed_at: record.failed_at,
        })));
    };
    if pending.first_operation == record.operation {
        return Ok(if same_range(&pending, record) && pending.first_failure_class == record.failure_class {
            Ok(SettleDecision::ReplayRetryLater(pending))
        } else {
            Err(reused("the recorded first failure"))
        });
    }
    if !same_range(&pending, record) {
        return Ok(Err(Conflict::new(
            ConflictReason::CursorConflict,
            format!("pending range {}..={} unchanged before discard", pending.from, pending.through),
            format!("{}..={}", record.expected_cursor.saturating_add(1), record.failed_through),
        )));
    }
    Ok(Ok(SettleDecision::Discard(discard_receipt(&pending, record))))
}

fn discard_receipt(pending: &PendingFailure, record: &ExtractionFailure) -> Receipt {
    Receipt {
        operation: record.operation.clone(),
        session: record.session.clone(),
        status: ReceiptStatus::Discarded,
        items: Vec::new(),
        no_op_reason: None,
        skip_reason: None,
        discarded_range: Some(DiscardedRange {
            from: pending.from,
            through: pending.through,
            coverage_hash: pending.coverage_hash,
            first_failure_class: pending.first_failure_class,
            final_failure_class: record.failure_class,
        }),
        committed_at: record.failed_at,
    }
}

fn apply_failure(
    txn: &mut StateTxn<'_>,
    record: &ExtractionFailure,
) -> Result<Result<(), String>, PipelineError> {
    let decision = match settle_decision(&*txn, record)? {
        Ok(decision) => decision,
        Err(conflict) => return Ok(Err(conflict.to_string())),
    };
    match (decision, record.outcome) {
        (SettleDecision::RecordPending(pending), FailureOutcome::RetryLater) => {
            txn.put(key(PENDING_TAG, &[record.session.as_str()]), encode(&pending)?);
        }
        (SettleDecision::Discard(receipt), FailureOutcome::Discarded) => {
            let entry = OperationEntry {
                operation: record.operation.clone(),
                kind: OperationKind::Discard,
                operation_type: OperationType::Batch,
                request_hash: discard_request_hash(record)?,
                committed_at: record.failed_at,
                results: Vec::new(),
            };
            advance_cursor(txn, &record.session, record.failed_through, record.failed_at)?;
            txn.put(key(OPERATION_TAG, &[record.operation.as_str()]), encode(&entry)?);
            txn.put(key(RECEIPT_TAG, &[record.operation.as_str()]), encode(&receipt)?);
        }
        (decision, outcome) => {
            return Ok(Err(format!("failure outcome {outcome:?} does not match the state ({decision:?})")));
        }
    }
    Ok(Ok(()))
}

/// Inserts a denial if absent; the first denial wins (memory.md §2.9). Returns the stored one.
pub(crate) fn apply_denial(txn: &mut StateTxn<'_>, record: &PolicyDenial) -> Result<Denial, PipelineError> {
    if let Some(held) = state::denial(&*txn, &record.session, &record.checkpoint)? {
        return Ok(held);
    }
    let denial = Denial {
        session: record.session.clone(),
        checkpoint: record.checkpoint.clone(),
        reason: record.reason,
        denied_at: record.denied_at,
    };
    txn.put(key(DENIAL_TAG, &[record.session.as_str(), record.checkpoint.as_str()]), encode(&denial)?);
    Ok(denial)
}

fn event(
    record_operation: &mnemo_core::OperationId,
    position: u64,
    at: mnemo_core::TimestampMs,
    action: ItemAction,
    version: u64,
) -> ItemEvent {
    ItemEvent {
        position,
        operation: record_operation.clone(),
        action,
        version,
        at,
        statement: None,
        other: None,
        added_sources: Vec::new(),
        added_keys: Vec::new(),
        undone_at: None,
    }
}

/// What an extraction commit did to each item it touched, in the order of its results: the
/// creates, the merges (with what each added), the supersessions (both sides).
fn commit_events(
    kv: &(impl Kv + ?Sized),
    record: &MemoryCommit,
    results: &[MutationResult],
    position: u64,
) -> Result<Vec<(ItemId, ItemEvent)>, PipelineError> {
    let at = record.committed_at;
    let mut fields_now: BTreeMap<ItemId, mnemo_core::MemoryItemFields> = BTreeMap::new();
    let mut out = Vec::new();
    for (index, new) in record.items.iter().enumerate().filter(|(index, _)| !record.is_merged(*index)) {
        fields_now.insert(new.item.clone(), new.fields.clone());
        let mut created = event(&record.operation, position, at, ItemAction::Created, 1);
        created.statement = Some(index as u32);
        out.push((new.item.clone(), created));
    }
    let creates = out.len();
    for (offset, merge) in record.merges.iter().enumerate() {
        let Some(statement) = record.items.get(merge.statement as usize) else {
            return Err(state::damaged("a merge names no statement"));
        };
        let before = match fields_now.get(&merge.item) {
            Some(fields) => fields.clone(),
            None => match state::item(kv, &merge.item)? {
                Some(item) => item.fields,
                None => return Err(state::damaged("a merge names an item the state does not hold")),
            },
        };
        let after = merge_fields(&before, &statement.fields);
        let version = results.get(creates + offset).map_or(merge.expected_version, |r| r.version);
        let mut merged = event(&record.operation, position, at, ItemAction::Merged, version);
        merged.statement = Some(merge.statement);
        merged.added_sources = after
            .sources
            .iter()
            .filter(|s| !before.sources.iter().any(|b| b.event == s.event))
            .cloned()
            .collect();
        merged.added_keys = after
            .keys
            .iter()
            .filter(|k| !before.keys.iter().any(|b| b.normalized_key == k.normalized_key))
            .map(|k| k.normalized_key.clone())
            .collect();
        fields_now.insert(merge.item.clone(), after);
        out.push((merge.item.clone(), merged));
    }
    let merged_count = record.merges.len();
    for (offset, supersession) in record.supersessions.iter().enumerate() {
        let Some(by) = record.items.get(supersession.by as usize) else {
            return Err(state::damaged("a supersession names no statement"));
        };
        let version = results
            .get(creates + merged_count + offset)
            .map_or(supersession.expected_version + 1, |r| r.version);
        let mut old = event(&record.operation, position, at, ItemAction::Superseded, version);
        old.other = Some(by.item.clone());
        old.statement = Some(supersession.by);
        out.push((supersession.item.clone(), old));
        let mut newer = event(&record.operation, position, at, ItemAction::Supersedes, 1);
        newer.other = Some(supersession.item.clone());
        newer.statement = Some(supersession.by);
        out.push((by.item.clone(), newer));
    }
    Ok(out)
}

/// What a mutation batch did to each item it changed; an unmerge's update and create are the
/// unmerge's two sides.
fn mutation_events(
    record: &MemoryMutation,
    results: &[MutationResult],
    position: u64,
) -> Vec<(ItemId, ItemEvent)> {
    let mut out = Vec::new();
    for result in results {
        let action = match (result.outcome, &record.unmerge) {
            (MutationOutcome::Noop, _) => continue,
            (MutationOutcome::Created, Some(_)) => ItemAction::Split,
            (MutationOutcome::Created, None) => ItemAction::Created,
            (MutationOutcome::Updated, Some(_)) => ItemAction::Unmerged,
            (MutationOutcome::Updated, None) => ItemAction::Updated,
            (MutationOutcome::Archived, _) => ItemAction::Archived,
            (MutationOutcome::Restored, _) => ItemAction::Restored,
        };
        let mut done = event(&record.operation, position, record.committed_at, action, result.version);
        if let Some(unmerge) = &record.unmerge {
            done.position = position;
            done.other = (result.item != unmerge.item).then(|| unmerge.item.clone());
            done.statement = Some(unmerge.statement);
        }
        out.push((result.item.clone(), done));
    }
    out
}

fn write_events(
    txn: &mut StateTxn<'_>,
    position: u64,
    events: Vec<(ItemId, ItemEvent)>,
) -> Result<(), PipelineError> {
    let mut seq: BTreeMap<ItemId, usize> = BTreeMap::new();
    for (item, event) in events {
        let n = seq.entry(item.clone()).or_insert(0);
        txn.put(item_event_key(&item, position, *n), encode(&event)?);
        *n += 1;
    }
    Ok(())
}

/// The event an unmerge undoes: the merge of its statement into its item, or the supersession
/// of its item, by the commit at its position; found only while not undone yet.
fn undoable(kv: &(impl Kv + ?Sized), unmerge: &Unmerge) -> Result<Option<(usize, ItemEvent)>, PipelineError> {
    for seq in 0.. {
        let Some(found) = state::get::<ItemEvent>(kv, &item_event_key(&unmerge.item, unmerge.position, seq))?
        else {
            return Ok(None);
        };
        let kind = matches!(found.action, ItemAction::Merged | ItemAction::Superseded);
        if kind && found.statement == Some(unmerge.statement) && found.undone_at.is_none() {
            return Ok(Some((seq, found)));
        }
    }
    Ok(None)
}

/// Checks that an unmerge names a merge or supersession that happened and was not undone yet.
pub(crate) fn check_unmerge(
    kv: &(impl Kv + ?Sized),
    unmerge: &Unmerge,
) -> Result<Result<ItemEvent, Conflict>, PipelineError> {
    Ok(match undoable(kv, unmerge)? {
        Some((_, found)) => Ok(found),
        None => Err(Conflict::new(
            ConflictReason::ItemNotFound,
            format!("a merge or supersession at position {} not undone yet", unmerge.position),
            "none",
        )
        .on(&unmerge.item)),
    })
}

fn mark_undone(txn: &mut StateTxn<'_>, unmerge: &Unmerge, position: u64) -> Result<(), PipelineError> {
    if let Some((seq, mut found)) = undoable(&*txn, unmerge)? {
        found.undone_at = Some(position);
        txn.put(item_event_key(&unmerge.item, unmerge.position, seq), encode(&found)?);
    }
    Ok(())
}
