//! Why an item exists and how its value changed, and undoing a consolidation (decision 0232).
//!
//! Every record that touched an item left an [`ItemEvent`] at its log position; a fact's
//! versions are its items linked by `supersedes` and `superseded_by`. [`history`] reads both.
//! [`unmerge`] undoes the newest merge into an item (its statement becomes an item of its own
//! again, and the item gives back the sources and keys the merge added) or the newest
//! supersession of or by it (the replaced item is restored). An unmerge is a mutation record that
//! names what it undoes ([`Unmerge`]), decided by the writer against the caught-up state with the
//! check the projector applies it with, so a rebuild gives the same index.

use std::collections::BTreeSet;

use mnemo_core::{
    ItemId, LifecycleState, MemoryCommit, MemoryItem, MemoryMutation, Mutation, OperationId, Record, Unmerge,
};
use serde::Serialize;

use crate::error::{Conflict, ConflictReason, MemoryError};
use crate::index::{check_unmerge, mutation_request_hash, run_batch};
use crate::ops::{MemoryLedger, batch_scope};
use crate::state::{self, ItemAction, ItemEvent, Kv, MemoryView, OperationKind, OperationResult};

/// Most items one history walks (a fact changed this many times).
pub const HISTORY_ITEMS_MAX: usize = 256;

/// One item of a fact's history, with what each record did to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemHistory {
    /// The item as the state holds it now.
    pub item: MemoryItem,
    /// What each record did to it, in log order.
    pub events: Vec<ItemEvent>,
    /// Whether it holds the current value: active and replaced by nothing.
    pub current: bool,
}

impl ItemHistory {
    /// The log position of the record that created the item.
    pub fn said_at(&self) -> u64 {
        self.events.first().map_or(0, |e| e.position)
    }
}

/// Every item of the fact `id` belongs to (the items it replaced and that replaced it, and theirs),
/// oldest statement first by log position. Empty when the item is unknown.
pub fn history(store: &dyn mnemo_pipeline::StateStore, id: &ItemId) -> Result<Vec<ItemHistory>, MemoryError> {
    let mut seen: BTreeSet<ItemId> = BTreeSet::new();
    let mut queue = vec![id.clone()];
    let mut out = Vec::new();
    while let Some(next) = queue.pop() {
        if out.len() >= HISTORY_ITEMS_MAX || !seen.insert(next.clone()) {
            continue;
        }
        let Some(item) = state::item(store, &next)? else { continue };
        queue.extend(item.supersedes.iter().cloned());
        queue.extend(item.superseded_by.iter().cloned());
        let events = state::item_events(store, &next)?;
        // A split item came out of another: the same fact's history.
        queue.extend(events.iter().filter(|e| e.action == ItemAction::Split).filter_map(|e| e.other.clone()));
        let current = item.lifecycle == LifecycleState::Active && item.superseded_by.is_none();
        out.push(ItemHistory { item, events, current });
    }
    // One commit may state several values: its statements are in the order they were said.
    out.sort_by_key(|h| (h.said_at(), h.events.first().and_then(|e| e.statement), h.item.item.clone()));
    Ok(out)
}

/// What an unmerge of `item` would undo: its newest merge not undone yet, else the newest
/// supersession of it or by it not undone yet.
fn target(kv: &(impl Kv + ?Sized), item: &ItemId) -> Result<Option<Unmerge>, MemoryError> {
    let events = state::item_events(kv, item)?;
    let open = |action: ItemAction| {
        events.iter().rev().find(|e| e.action == action && e.undone_at.is_none() && e.statement.is_some())
    };
    if let Some(merge) = open(ItemAction::Merged) {
        return Ok(merge.statement.map(|statement| Unmerge {
            position: merge.position,
            item: item.clone(),
            statement,
        }));
    }
    if let Some(superseded) = open(ItemAction::Superseded) {
        return Ok(superseded.statement.map(|statement| Unmerge {
            position: superseded.position,
            item: item.clone(),
            statement,
        }));
    }
    if let Some(newer) = open(ItemAction::Supersedes)
        && let (Some(older), Some(statement)) = (&newer.other, newer.statement)
    {
        let undone = state::item_events(kv, older)?.iter().any(|e| {
            e.action == ItemAction::Superseded && e.position == newer.position && e.undone_at.is_some()
        });
        if !undone {
            return Ok(Some(Unmerge { position: newer.position, item: older.clone(), statement }));
        }
    }
    Ok(None)
}

/// The changes that undo `unmerge`: for a merge, the item without the sources and keys the merge
/// added, and the statement created as its own item; for a supersession, the restore.
fn undoing(
    kv: &(impl Kv + ?Sized),
    unmerge: &Unmerge,
    event: &ItemEvent,
    commit: Option<MemoryCommit>,
) -> Result<Vec<Mutation>, MemoryError> {
    let Some(item) = state::item(kv, &unmerge.item)? else {
        return Err(Conflict::new(ConflictReason::ItemNotFound, "an item", "none").on(&unmerge.item).into());
    };
    if event.action == ItemAction::Superseded {
        return Ok(vec![Mutation::Restore { item: item.item, expected_version: item.version }]);
    }
    let statement =
        commit.and_then(|c| c.items.get(unmerge.statement as usize).cloned()).ok_or_else(|| {
            MemoryError::Inconsistent(format!("no merged statement at position {}", unmerge.position))
        })?;
    let mut fields = item.fields.clone();
    fields.sources.retain(|s| !event.added_sources.iter().any(|a| a.event == s.event));
    fields.keys.retain(|k| !event.added_keys.contains(&k.normalized_key));
    if fields.sources.is_empty() || fields.keys.is_empty() {
        fields.sources = if fields.sources.is_empty() { item.fields.sources.clone() } else { fields.sources };
        fields.keys = if fields.keys.is_empty() { item.fields.keys.clone() } else { fields.keys };
    }
    Ok(vec![
        Mutation::Update { item: item.item, expected_version: item.version, fields },
        Mutation::Create { item: statement.item, fields: statement.fields },
    ])
}

/// Undoes the newest consolidation of `item` (see the module doc) under `operation`. `commit_at`
/// reads the extraction commit at a log position (the merged statement's fields are in it).
/// Returns the operation's result; `replayed` when the operation was already committed.
pub fn unmerge(
    ledger: &dyn MemoryLedger,
    item: &ItemId,
    operation: &OperationId,
    commit_at: &dyn Fn(u64) -> Result<Option<MemoryCommit>, MemoryError>,
) -> Result<OperationResult, MemoryError> {
    let mut replay = None;
    ledger.write(&mut |store, now| {
        if let Some(entry) = state::operation(store, operation)? {
            if entry.kind == OperationKind::Mutation {
                replay = Some(entry.result(true));
                return Ok(None);
            }
            return Err(
                Conflict::new(ConflictReason::OperationReused, "an unmerge", "another request").into()
            );
        }
        let Some(unmerge) = target(store, item)? else {
            return Err(Conflict::new(
                ConflictReason::ItemNotFound,
                "a merge or supersession to undo",
                "none",
            )
            .on(item)
            .into());
        };
        let event = check_unmerge(store, &unmerge)?.map_err(MemoryError::Conflict)?;
        let commit = if event.action == ItemAction::Merged { commit_at(unmerge.position)? } else { None };
        let mutations = undoing(store, &unmerge, &event, commit)?;
        let record = MemoryMutation {
            operation: operation.clone(),
            scope: batch_scope(store, &mutations)?,
            mutations,
            committed_at: now,
            unmerge: Some(unmerge),
        };
        mutation_request_hash(&record)?;
        record.validate()?;
        run_batch(store, &record.mutations, now)?.map_err(MemoryError::Conflict)?;
        Ok(Some(Record::MemoryMutation(record)))
    })?;
    if let Some(result) = replay {
        return Ok(result);
    }
    let store = ledger.state()?;
    MemoryView::new(store.as_ref()).operation(operation)?.ok_or_else(|| {
        MemoryError::Inconsistent(format!("unmerge {operation} is not in the index after its append"))
    })
}
