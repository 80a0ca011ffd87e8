//! The `memory-index` stage's state: its key layout, stored types and readers.
//!
//! Keys (each tag ends in 0x00, ids are separated by 0x00, which no id may contain):
//! - `i` item -> [`MemoryItem`]
//! - `k` normalized key, item -> [`KeyEntry`] (scope, lifecycle, `updated_at`: enough to filter
//!   and rank a search without reading the items)
//! - `s` scope, item -> lifecycle name (the items of a scope, for recall)
//! - `o` operation -> [`OperationEntry`] (idempotency: request hash and results)
//! - `r` operation -> [`Receipt`] (extraction commits and discards)
//! - `c` session -> [`Cursor`]; `p` session -> [`PendingFailure`]
//! - `d` session, checkpoint -> [`Denial`]
//! - `n` scope, signature digest, item -> empty (the active items of a scope by the comparison
//!   form of their content, so a restatement finds the item it restates; decision 0155)
//! - `t` scope, item -> empty (the active identity and preference items of a scope: the standing
//!   facts push recall brings first; decision 0156)
//! - `v` scope, owner, first attribute word, item -> empty (the active items stating a fact, by
//!   its subject, so a newer statement finds the value it replaces; decision 0232)
//! - `e` item, position -> [`ItemEvent`] (what each record did to the item: its history and
//!   provenance; decision 0232)
//! - `x` position -> why a record was not applied (it conflicted with the state when replayed;
//!   the single memory writer never appends such a record, so this stays empty in practice)

use mnemo_core::{
    CheckpointId, DenialReason, Digest, ExtractionFailureClass, ExtractionTrigger, ItemId, LifecycleState,
    MemoryItem, MemoryKind, MemoryScope, NoOpReason, OperationId, ReceiptStatus, SessionId, SkipReason,
    TimestampMs,
};
use mnemo_pipeline::{PipelineError, StateStore, StateTxn};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The stage's registered name.
pub const STAGE_NAME: &str = "memory-index";

pub(crate) const ITEM_TAG: &[u8] = b"i\0";
pub(crate) const KEY_TAG: &[u8] = b"k\0";
pub(crate) const SCOPE_TAG: &[u8] = b"s\0";
pub(crate) const OPERATION_TAG: &[u8] = b"o\0";
pub(crate) const RECEIPT_TAG: &[u8] = b"r\0";
pub(crate) const CURSOR_TAG: &[u8] = b"c\0";
pub(crate) const PENDING_TAG: &[u8] = b"p\0";
pub(crate) const DENIAL_TAG: &[u8] = b"d\0";
pub(crate) const REJECTED_TAG: &[u8] = b"x\0";
pub(crate) const SIGNATURE_TAG: &[u8] = b"n\0";
pub(crate) const STANDING_TAG: &[u8] = b"t\0";
pub(crate) const FACT_TAG: &[u8] = b"v\0";
pub(crate) const ITEM_EVENT_TAG: &[u8] = b"e\0";

pub(crate) fn key(tag: &[u8], parts: &[&str]) -> Vec<u8> {
    let mut out = tag.to_vec();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            out.push(0);
        }
        out.extend_from_slice(part.as_bytes());
    }
    out
}

/// What changed an item, per mutation (memory.md §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MutationType {
    /// A new item.
    Create,
    /// New fields.
    Update,
    /// Active to archived.
    Archive,
    /// Archived to active.
    Restore,
}

/// An operation's type: its single mutation's type, or `batch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OperationType {
    /// One create.
    Create,
    /// One update.
    Update,
    /// One archive.
    Archive,
    /// One restore.
    Restore,
    /// Several mutations, or an extraction commit or discard.
    Batch,
}

/// What a mutation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MutationOutcome {
    /// Created at version 1.
    Created,
    /// Fields changed; version + 1.
    Updated,
    /// Archived; version + 1.
    Archived,
    /// Restored; version + 1.
    Restored,
    /// The update wrote what was already there; nothing changed.
    Noop,
}

/// One mutation's result (memory.md §2.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutationResult {
    /// Its position in the batch.
    pub mutation_index: u32,
    /// Its type.
    pub mutation_type: MutationType,
    /// The item.
    pub item: ItemId,
    /// The item's version after it.
    pub version: u64,
    /// The item's lifecycle after it.
    pub lifecycle: LifecycleState,
    /// What it did.
    pub outcome: MutationOutcome,
}

/// What kind of write an operation id was used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OperationKind {
    /// A mutation batch.
    Mutation,
    /// An extraction commit.
    Extraction,
    /// The discard of a failed range.
    Discard,
}

/// The idempotency row of an operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationEntry {
    /// The operation id.
    pub operation: OperationId,
    /// What it was.
    pub kind: OperationKind,
    /// Its type.
    pub operation_type: OperationType,
    /// SHA-256 of the normalized request; a reuse with another hash is `operation_reused`.
    pub request_hash: Digest,
    /// When it committed.
    pub committed_at: TimestampMs,
    /// Per-mutation (or per created item) results.
    pub results: Vec<MutationResult>,
}

/// The result of a mutation batch (memory.md §2.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationResult {
    /// The operation id.
    pub operation: OperationId,
    /// Its type.
    pub operation_type: OperationType,
    /// True when this call found the operation already committed and appended nothing.
    pub replayed: bool,
    /// The original commit time.
    pub committed_at: TimestampMs,
    /// Per-mutation results.
    pub results: Vec<MutationResult>,
}

impl OperationEntry {
    pub(crate) fn result(&self, replayed: bool) -> OperationResult {
        OperationResult {
            operation: self.operation.clone(),
            operation_type: self.operation_type,
            replayed,
            committed_at: self.committed_at,
            results: self.results.clone(),
        }
    }
}

/// An item an extraction commit created, updated or archived, as its receipt reports it: what
/// the store holds for it once the commit applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredItem {
    /// The item.
    pub item: ItemId,
    /// Its normalized stored content.
    pub content: String,
    /// What it is about.
    pub kind: MemoryKind,
    /// Where it holds.
    pub scope: MemoryScope,
    /// Whether the user asked for it (a remember request's own statement), not found beside it.
    pub requested: bool,
    /// What the commit did to it: `created`; `updated` or `noop` when a statement restated an
    /// item memory held; `archived` when a statement of the commit contradicted it.
    pub outcome: MutationOutcome,
}

/// The range a discard gave up on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscardedRange {
    /// First ordinal.
    pub from: u64,
    /// Last ordinal.
    pub through: u64,
    /// The covered events' hash.
    pub coverage_hash: Digest,
    /// The first attempt's failure class.
    pub first_failure_class: ExtractionFailureClass,
    /// The retry's failure class.
    pub final_failure_class: ExtractionFailureClass,
}

/// An extraction receipt (memory.md §2.7 step 5, §2.8 step 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The operation.
    pub operation: OperationId,
    /// The session.
    pub session: SessionId,
    /// The settlement.
    pub status: ReceiptStatus,
    /// Every item the commit created, updated or archived, in the commit's order; empty for a
    /// discard.
    pub items: Vec<StoredItem>,
    /// Why a remember stored nothing.
    pub no_op_reason: Option<NoOpReason>,
    /// Why a compaction range was skipped.
    pub skip_reason: Option<SkipReason>,
    /// The discarded range, for a discard.
    pub discarded_range: Option<DiscardedRange>,
    /// When it committed.
    pub committed_at: TimestampMs,
}

/// A session's extraction cursor: the highest ordinal already evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The ordinal (> 0).
    pub processed_ordinal: u64,
    /// When it last moved.
    pub updated_at: TimestampMs,
}

/// A session's failed range awaiting its one retry (memory.md §2.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingFailure {
    /// The session.
    pub session: SessionId,
    /// First ordinal.
    pub from: u64,
    /// Last ordinal.
    pub through: u64,
    /// The covered events' hash.
    pub coverage_hash: Digest,
    /// The failed attempt's operation.
    pub first_operation: OperationId,
    /// The failed attempt's trigger, kept so the retry has the same semantics.
    pub first_trigger: ExtractionTrigger,
    /// The checkpoint of a compaction-triggered failure.
    pub checkpoint: Option<CheckpointId>,
    /// Why it failed.
    pub first_failure_class: ExtractionFailureClass,
    /// When.
    pub failed_at: TimestampMs,
}

/// A compaction policy denial (memory.md §2.9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The session.
    pub session: SessionId,
    /// The checkpoint.
    pub checkpoint: CheckpointId,
    /// Why.
    pub reason: DenialReason,
    /// The first denial's time.
    pub denied_at: TimestampMs,
}

/// What a record did to an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemAction {
    /// Created by an extraction commit's statement or a mutation.
    Created,
    /// A statement restating it was merged into it (its sources and keys added).
    Merged,
    /// A newer statement replaced it; `other` is the newer item.
    Superseded,
    /// It replaced an older item; `other` is the older one.
    Supersedes,
    /// Its fields were replaced by a mutation.
    Updated,
    /// Archived by a mutation.
    Archived,
    /// Restored by a mutation (an unmerge of a supersession restores too).
    Restored,
    /// Created by an unmerge, from the statement that had been merged into `other`.
    Split,
    /// An unmerge took a merged statement's sources and keys back out of it.
    Unmerged,
}

/// One record's effect on an item: its history and provenance, in log order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemEvent {
    /// The log position of the record.
    pub position: u64,
    /// The record's operation id.
    pub operation: OperationId,
    /// What it did.
    pub action: ItemAction,
    /// The item's version after it.
    pub version: u64,
    /// The record's commit time.
    pub at: TimestampMs,
    /// For an extraction commit, the index of the statement that created or merged into the item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement: Option<u32>,
    /// The other item of a supersession or a split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<ItemId>,
    /// For a merge: the sources it added (what an unmerge takes back out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_sources: Vec<mnemo_core::SourcePointer>,
    /// For a merge: the normalized keys it added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_keys: Vec<String>,
    /// For a merge or a supersession: the position of the unmerge that undid it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone_at: Option<u64>,
}

/// The key of the `seq`-th event a record at `position` wrote for `item` (a record may do two
/// things to one item: create it, and have it supersede another).
pub(crate) fn item_event_key(item: &ItemId, position: u64, seq: usize) -> Vec<u8> {
    key(ITEM_EVENT_TAG, &[item.as_str(), &format!("{position:020}"), &format!("{seq:04}")])
}

/// An item's events in log order.
pub(crate) fn item_events(kv: &(impl Kv + ?Sized), item: &ItemId) -> Result<Vec<ItemEvent>, PipelineError> {
    let prefix = [key(ITEM_EVENT_TAG, &[item.as_str()]), vec![0]].concat();
    let mut raw = Vec::new();
    kv.scan_bytes(&prefix, &mut |_, value| {
        raw.push(value.to_vec());
        true
    })?;
    raw.iter().map(|bytes| decode(bytes)).collect()
}

/// The key index's entry for one (key, item).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyEntry {
    pub scope: String,
    pub lifecycle: LifecycleState,
    pub updated_at: TimestampMs,
}

/// Reads over either a committed store or a stage transaction.
pub(crate) trait Kv {
    fn get_bytes(&self, key: &[u8]) -> Result<Option<Vec<u8>>, PipelineError>;
    /// Visits the pairs under `prefix` in key order until `visit` returns false.
    fn scan_bytes(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), PipelineError>;
}

impl Kv for dyn StateStore + '_ {
    fn get_bytes(&self, key: &[u8]) -> Result<Option<Vec<u8>>, PipelineError> {
        self.get(key)
    }

    fn scan_bytes(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), PipelineError> {
        self.scan_prefix(prefix, visit)
    }
}

impl Kv for StateTxn<'_> {
    fn get_bytes(&self, key: &[u8]) -> Result<Option<Vec<u8>>, PipelineError> {
        self.get(key)
    }

    fn scan_bytes(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), PipelineError> {
        for (key, value) in self.scan_prefix(prefix)? {
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }
}

pub(crate) fn damaged(reason: impl Into<String>) -> PipelineError {
    PipelineError::DamagedState { stage: STAGE_NAME.to_owned(), reason: reason.into() }
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, PipelineError> {
    mnemo_core::canonical_json(value).map_err(|e| damaged(e.to_string()))
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, PipelineError> {
    serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))
}

pub(crate) fn get<T: DeserializeOwned>(
    kv: &(impl Kv + ?Sized),
    key: &[u8],
) -> Result<Option<T>, PipelineError> {
    kv.get_bytes(key)?.map(|bytes| decode(&bytes)).transpose()
}

/// Reads an item and re-checks it (memory.md §2.4: the store fails closed on a damaged row).
pub(crate) fn item(kv: &(impl Kv + ?Sized), id: &ItemId) -> Result<Option<MemoryItem>, PipelineError> {
    let Some(item) = get::<MemoryItem>(kv, &key(ITEM_TAG, &[id.as_str()]))? else {
        return Ok(None);
    };
    item.validate().map_err(|e| damaged(format!("item {id}: {e}")))?;
    if &item.item != id {
        return Err(damaged(format!("item {id} is stored under another id")));
    }
    Ok(Some(item))
}

pub(crate) fn operation(
    kv: &(impl Kv + ?Sized),
    id: &OperationId,
) -> Result<Option<OperationEntry>, PipelineError> {
    get(kv, &key(OPERATION_TAG, &[id.as_str()]))
}

pub(crate) fn receipt(kv: &(impl Kv + ?Sized), id: &OperationId) -> Result<Option<Receipt>, PipelineError> {
    get(kv, &key(RECEIPT_TAG, &[id.as_str()]))
}

pub(crate) fn cursor(kv: &(impl Kv + ?Sized), session: &SessionId) -> Result<Option<Cursor>, PipelineError> {
    get(kv, &key(CURSOR_TAG, &[session.as_str()]))
}

pub(crate) fn pending(
    kv: &(impl Kv + ?Sized),
    session: &SessionId,
) -> Result<Option<PendingFailure>, PipelineError> {
    get(kv, &key(PENDING_TAG, &[session.as_str()]))
}

pub(crate) fn denial(
    kv: &(impl Kv + ?Sized),
    session: &SessionId,
    checkpoint: &CheckpointId,
) -> Result<Option<Denial>, PipelineError> {
    get(kv, &key(DENIAL_TAG, &[session.as_str(), checkpoint.as_str()]))
}

/// Read-side entry points over a caught-up `memory-index` store.
#[derive(Debug, Clone, Copy)]
pub struct MemoryView<'a> {
    store: &'a dyn StateStore,
}

impl<'a> MemoryView<'a> {
    /// A view of a `memory-index` store.
    pub fn new(store: &'a dyn StateStore) -> Self {
        MemoryView { store }
    }

    /// One item, re-validated; `None` when absent.
    pub fn item(&self, id: &ItemId) -> Result<Option<MemoryItem>, PipelineError> {
        item(self.store, id)
    }

    /// An operation's stored result, with `replayed: false`.
    pub fn operation(&self, id: &OperationId) -> Result<Option<OperationResult>, PipelineError> {
        Ok(operation(self.store, id)?.map(|entry| entry.result(false)))
    }

    /// An extraction receipt.
    pub fn receipt(&self, id: &OperationId) -> Result<Option<Receipt>, PipelineError> {
        receipt(self.store, id)
    }

    /// A session's cursor.
    pub fn cursor(&self, session: &SessionId) -> Result<Option<Cursor>, PipelineError> {
        cursor(self.store, session)
    }

    /// What each record did to an item, in log order.
    pub fn item_events(&self, id: &ItemId) -> Result<Vec<ItemEvent>, PipelineError> {
        item_events(self.store, id)
    }

    /// A session's pending failed range.
    pub fn pending_failure(&self, session: &SessionId) -> Result<Option<PendingFailure>, PipelineError> {
        pending(self.store, session)
    }

    /// A session's policy denials, by denial time then checkpoint id.
    pub fn denials(&self, session: &SessionId) -> Result<Vec<Denial>, PipelineError> {
        let mut out: Vec<Denial> = Vec::new();
        let mut failure = None;
        let prefix = [key(DENIAL_TAG, &[session.as_str()]), vec![0]].concat();
        self.store.scan_prefix(&prefix, &mut |_, value| match decode(value) {
            Ok(denial) => {
                out.push(denial);
                true
            }
            Err(e) => {
                failure = Some(e);
                false
            }
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        out.sort_by(|a, b| (a.denied_at, &a.checkpoint).cmp(&(b.denied_at, &b.checkpoint)));
        Ok(out)
    }
}
