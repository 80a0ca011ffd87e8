//! The key index beside the log: the keys records claim ([`KeyRule`](mnemo_core::KeyRule)), each
//! pointing at the position of the record that holds it, so that an append whose rules a record
//! already broke is refused and a retried append is answered with where it landed the first time.
//! The index has a database of its own beside the log's (`layout.rs` says how it lies there).
//!
//! It is not:
//! - the source of truth: every key is derived from an envelope's own rules, and an index behind
//!   its log, or lost, is built again from the log (`maintenance.rs`);
//! - the stream index (`keys.rs` beside this folder), which the writer keeps in the log's own
//!   batch;
//! - a decider of rules: `mnemo-core` says which keys a record claims; the index only checks them.
//!
//! The writer meets it through [`KeyIndex`] alone, in the order of a group commit:
//! - **check** a request's rules against the index, the group's earlier requests and the
//!   request's earlier records (`check.rs`, with the key filter of `filter.rs` and the group's
//!   table of `group_table.rs`);
//! - **forget** the keys of a request checked but not appended after all;
//! - **stage** a committed group's keys in memory once its callers are answered (`staged.rs`),
//!   handing them on as a sorted table to a thread of their own from time to time (`ingester.rs`);
//! - **ingest** what is staged when the store closes.
//!
//! The open, readers and salvage meet it through the functions re-exported here: building it up
//! to the log's head and forgetting the keys of lost envelopes (`maintenance.rs`), and reading a
//! held key (`read.rs`). Everything else in this folder is private to it.
//!
//! Architecture invariant: the index never holds a key of an envelope a crash could still take
//! back: the log is persisted before the keys that index it, and the mark moves only with them.

mod check;
mod filter;
mod group_table;
mod ingester;
mod layout;
mod maintenance;
mod read;
/// Visible to the crate only so that `Shared` can hold the staged keys; their methods are this
/// folder's.
pub(crate) mod staged;

use std::sync::Arc;

use mnemo_core::Position;
use tracing::{debug_span, error};

use self::check::GroupKeys;
use self::filter::KeyFilter;
use self::ingester::{IngestFailure, Ingested, KeyIngester, ingest_handed};
use crate::backend::AppendRequest;
use crate::error::LogError;
use crate::limits::{KEYS_MARK_LAG_MAX, KEYS_STAGED_HELD_MAX, KEYS_STAGED_MAX};
use crate::shared::Shared;

pub(crate) use self::check::Decision;
pub use self::maintenance::KeyRulesOf;
pub(crate) use self::maintenance::{catch_up, drop_from_log_database, forget_past, rebuild, verify};
pub(crate) use self::read::held_key;

/// The writer's handle on the key index: its check of a group's keys, and the staged keys' way
/// to the engine. The writer keeps one for its whole life.
pub(crate) struct KeyIndex {
    /// The keys of the group being checked, and the filter that answers most lookups of absent
    /// keys without a read.
    group: GroupKeys,
    ingester: KeyIngester,
    /// Whether the index holds the keys of every envelope, so that its mark moves with the tables
    /// handed on (`catch_up` said so when the log opened).
    complete: bool,
    /// Where the index's mark is: the keys of every envelope up to here are in the `keys`
    /// keyspace; those of later ones are staged (`staged.rs`).
    marked: Position,
}

impl KeyIndex {
    /// Starts the key filter's build and the ingestion thread, for a log whose head is `head`;
    /// `complete`: the index holds the keys of every envelope up to it.
    pub(crate) fn start(shared: &Arc<Shared>, complete: bool, head: Position) -> KeyIndex {
        let group = GroupKeys::new(KeyFilter::start(Arc::clone(shared)));
        let ingester = KeyIngester::start(Arc::clone(shared));
        KeyIndex { group, ingester, complete, marked: head }
    }

    /// Forgets the last group's keys, before the next group is checked.
    pub(crate) fn start_group(&mut self) {
        self.group.start_group();
    }

    /// Checks the rules of `group[index]` against the group's keys and the committed index;
    /// `first_position` is where its first new record will land.
    pub(crate) fn check(
        &mut self,
        shared: &Shared,
        group: &[&AppendRequest],
        index: usize,
        first_position: Position,
    ) -> Result<Decision, LogError> {
        self.group.decide(shared, group, index, first_position)
    }

    /// Forgets the keys of the last request checked, which is not appended after all: the group's
    /// writes from `writes_from` on ([`Decision::Go`]).
    pub(crate) fn forget(&mut self, writes_from: usize) {
        self.group.undo(writes_from);
    }

    /// Stages the keys of the group just acknowledged, whose last envelope is `head`, tells the
    /// writer's filter of them, and lets readers of the index see them (`Shared::keys_indexed`);
    /// hands the staged keys on to be ingested once there are `KEYS_STAGED_MAX` of them or the
    /// index's mark is `KEYS_MARK_LAG_MAX` envelopes behind. `log_synced`: every envelope up to
    /// `head` is on disk.
    ///
    /// NOTE: the writer calls this after the callers hear of their appends, so that the caller's
    /// next request is prepared meanwhile (decision 0142), and checks its next group only after
    /// this, so no check ever misses a key. A crash loses the staged keys, all of them past the
    /// index's mark, so the index is behind its log and the store's open brings it up from the
    /// envelopes' own rules (`catch_up`).
    pub(crate) fn stage(&mut self, shared: &Shared, head: Position, log_synced: bool) {
        let staged = {
            let mut staged = shared.staged_keys_mut();
            for (print, value) in self.group.entries() {
                staged.insert(print, value);
            }
            staged.len()
        };
        self.group.learn_written();
        shared.keys_indexed.advance(head);
        if let Some(ingested) = self.ingester.finished() {
            note_ingested(shared, ingested);
        }
        let lag = head.0.saturating_sub(self.marked.0);
        if staged < KEYS_STAGED_MAX && !(self.complete && lag >= KEYS_MARK_LAG_MAX) {
            return;
        }
        if self.ingester.is_busy() {
            // NOTE: the table under way is not done yet; the keys wait with the rest unless there are
            // too many to hold.
            if staged < KEYS_STAGED_HELD_MAX {
                return;
            }
            let _span = debug_span!("wait_for_key_ingestion", keys = staged).entered();
            if let Some(ingested) = self.ingester.wait() {
                note_ingested(shared, ingested);
            }
        }
        if shared.poison_reason().is_some() {
            return;
        }
        let mark = self.next_mark(head);
        let table = shared.staged_keys_mut().hand_on();
        self.ingester.hand_on(table, mark, head, log_synced);
        if let Some(mark) = mark {
            self.marked = mark;
        }
    }

    /// The store is closing: a filter still being built is abandoned, and the table under way is
    /// waited for and the ingestion thread stopped.
    pub(crate) fn stop(&mut self, shared: &Shared) {
        self.group.close();
        if let Some(ingested) = self.ingester.stop() {
            note_ingested(shared, ingested);
        }
    }

    /// Hands the staged keys to the engine on the writer's own thread (the store is closing), with
    /// the index's mark at `head` when the index is complete. `log_synced`: every envelope up to
    /// `head` is on disk.
    pub(crate) fn ingest(
        &mut self,
        shared: &Shared,
        head: Position,
        log_synced: bool,
    ) -> Result<(), fjall::Error> {
        let mark = self.next_mark(head);
        let table = shared.staged_keys_mut().hand_on();
        ingest_handed(shared, &table, mark, log_synced)?;
        if let Some(mark) = mark {
            self.marked = mark;
        }
        Ok(())
    }

    /// The index's mark a table handed on now carries: the log's `head`, when the index is
    /// complete and the mark is behind it.
    fn next_mark(&self, head: Position) -> Option<Position> {
        (self.complete && head > self.marked).then_some(head)
    }
}

/// Poisons the writer when a table handed on did not reach the engine: its keys are still staged,
/// and the next open builds them from the log.
fn note_ingested(shared: &Shared, ingested: Ingested) {
    if let (Ok(()), Some(table)) = (&ingested.result, ingested.table) {
        shared.staged_keys_mut().give_back(table);
    }
    let cause = match ingested.result {
        Ok(()) => return,
        Err(IngestFailure::Engine(error)) => shared.failure_reason(&error),
        Err(IngestFailure::ThreadLost) => "the key ingestion thread ended".to_owned(),
    };
    let reason =
        format!("the log is written up to position {}, but its key index is not: {cause}", ingested.head);
    error!(%reason, "the key index did not take the staged keys; the writer is poisoned until the store is reopened");
    shared.poison(reason);
}
