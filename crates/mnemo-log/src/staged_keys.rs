//! The key index's newest keys, held in memory until there are enough of them to hand to the
//! storage engine as one sorted table.
//!
//! Written one group at a time, the keys cost an append more than every other check together: each
//! went through the engine's journal and memtable, then its flushes and compactions, and at 1M
//! events the import with key rules ran at about two thirds of the rate without them (decision
//! 0142, last addendum). Staged here, a group's keys cost a hash-map insert each; every
//! `KEYS_STAGED_MAX` keys (or `KEYS_MARK_LAG_MAX` envelopes) the writer hands them on, with the
//! index's mark, to a thread of their own (`key_ingester.rs`), which ingests them, sorted, as a
//! table of their own: that skips the journal and the memtable, and keeps the sorting and the
//! table's writing off the path every append waits for.
//!
//! Nothing is lost by a crash: the mark moves only with an ingestion, so the keys a crash drops are
//! those of envelopes past the mark, which every open brings into the index from the envelopes' own
//! rules (`key_index::catch_up`). Readers of the index look here first (`key_index::read_value`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use crate::key_index::{Fingerprint, FingerprintHasher};

/// Keys the writer has acknowledged and that are not yet in the engine: those it stages now, and
/// those it has handed to the ingestion thread (`key_ingester.rs`), which readers still find here
/// until the engine holds them.
#[derive(Debug, Default)]
pub(crate) struct StagedKeys {
    filling: StagedTable,
    handed: Option<Arc<StagedTable>>,
    /// An ingested table, emptied, whose memory the next table takes over (a fresh one grew its
    /// map step by step, rehashing and touching new pages as it went).
    spare: Option<StagedTable>,
}

impl StagedKeys {
    /// Keys the writer has staged since it last handed them on.
    pub(crate) fn len(&self) -> usize {
        self.filling.len()
    }

    /// The value staged for the key of fingerprint `print`, whether still filling or handed on.
    pub(crate) fn get(&self, print: Fingerprint) -> Option<&[u8]> {
        self.filling.get(print).or_else(|| self.handed.as_ref().and_then(|handed| handed.get(print)))
    }

    /// Stages a key the writer wrote. A key is only ever written where it was absent, so it is
    /// not staged already.
    pub(crate) fn insert(&mut self, print: Fingerprint, value: &[u8]) {
        self.filling.insert(print, value);
    }

    /// Every staged key's fingerprint, handed on or not.
    pub(crate) fn fingerprints(&self) -> impl Iterator<Item = Fingerprint> + '_ {
        self.filling.values.keys().chain(self.handed.iter().flat_map(|handed| handed.values.keys())).copied()
    }

    /// Whether `table` is the table handed on, not yet in the engine.
    pub(crate) fn is_handed(&self, table: &Arc<StagedTable>) -> bool {
        self.handed.as_ref().is_some_and(|handed| Arc::ptr_eq(handed, table))
    }

    /// Hands the keys staged so far on for ingestion: they stay readable here until
    /// [`StagedKeys::ingested`]. Only one table is handed on at a time.
    pub(crate) fn hand_on(&mut self) -> Arc<StagedTable> {
        debug_assert!(self.handed.is_none(), "a table is handed on while another is");
        // NOTE: without a spare, the next table is sized like this one: grown from empty, its map
        // rehashed every key at each doubling, on the writer's thread.
        let filled = self.filling.len();
        let next = self.spare.take().unwrap_or_else(|| StagedTable::with_capacity(filled));
        let table = Arc::new(std::mem::replace(&mut self.filling, next));
        self.handed = Some(Arc::clone(&table));
        table
    }

    /// The table handed on is in the engine now: readers find its keys there.
    pub(crate) fn ingested(&mut self) {
        self.handed = None;
    }

    /// Keeps the memory of a table the engine holds now, for the next table.
    pub(crate) fn give_back(&mut self, table: Arc<StagedTable>) {
        if let Ok(mut table) = Arc::try_unwrap(table) {
            table.clear();
            self.spare = Some(table);
        }
    }

    /// Forgets every key, handed on or not.
    pub(crate) fn clear(&mut self) {
        self.filling.clear();
        self.handed = None;
    }
}

/// Staged keys: per fingerprint, the value the `keys` keyspace will hold (the holder's position,
/// then the claimed value).
#[derive(Debug, Default)]
pub(crate) struct StagedTable {
    values: HashMap<Fingerprint, Range<usize>, BuildHasherDefault<FingerprintHasher>>,
    /// The values, end to end.
    bytes: Vec<u8>,
    /// The keys in fingerprint order, made when the table is ingested, and kept with the rest of
    /// the table's memory for the next table: a fresh buffer of this size (4 MiB for
    /// `KEYS_STAGED_MAX` keys) was faulted in and zeroed page by page at every ingestion.
    order: Mutex<Vec<(Fingerprint, Range<usize>)>>,
}

impl StagedTable {
    fn with_capacity(keys: usize) -> StagedTable {
        StagedTable {
            values: HashMap::with_capacity_and_hasher(keys, BuildHasherDefault::default()),
            ..StagedTable::default()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    fn get(&self, print: Fingerprint) -> Option<&[u8]> {
        self.values.get(&print).map(|range| &self.bytes[range.clone()])
    }

    fn insert(&mut self, print: Fingerprint, value: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.values.insert(print, start..self.bytes.len());
    }

    /// Calls `each` with every key and its value, in fingerprint order (the order of the `keys`
    /// keyspace), until it fails.
    pub(crate) fn for_each_in_key_order<E>(
        &self,
        mut each: impl FnMut(Fingerprint, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        order.clear();
        order.extend(self.values.iter().map(|(print, range)| (*print, range.clone())));
        order.sort_unstable_by_key(|(print, _)| *print);
        order.iter().try_for_each(|(print, range)| each(*print, &self.bytes[range.clone()]))
    }

    fn clear(&mut self) {
        self.values.clear();
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_key_order(table: &StagedTable) -> Vec<(Fingerprint, Vec<u8>)> {
        let mut entries = Vec::new();
        table
            .for_each_in_key_order(|print, value| {
                entries.push((print, value.to_vec()));
                Ok::<(), ()>(())
            })
            .expect("collected");
        entries
    }

    #[test]
    fn a_staged_key_reads_back_its_value_until_its_table_is_ingested_and_tables_come_out_in_fingerprint_order()
     {
        let mut staged = StagedKeys::default();
        staged.insert(30, b"thirty");
        staged.insert(10, b"");
        staged.insert(20, b"twenty");
        assert_eq!(staged.get(30), Some(&b"thirty"[..]));
        assert_eq!(staged.get(10), Some(&b""[..]));
        assert_eq!(staged.get(40), None);
        let table = staged.hand_on();
        let order: Vec<Fingerprint> = in_key_order(&table).iter().map(|(print, _)| *print).collect();
        assert_eq!(order, vec![10, 20, 30]);
        assert_eq!(staged.len(), 0);
        staged.insert(40, b"forty");
        assert_eq!(staged.get(30), Some(&b"thirty"[..]), "a handed-on key is read until it is ingested");
        assert_eq!(staged.get(40), Some(&b"forty"[..]));
        let mut prints: Vec<Fingerprint> = staged.fingerprints().collect();
        prints.sort_unstable();
        assert_eq!(prints, vec![10, 20, 30, 40]);
        staged.ingested();
        assert_eq!(staged.get(30), None);
        assert_eq!(staged.get(40), Some(&b"forty"[..]));
        staged.give_back(table);
        let next = staged.hand_on();
        assert_eq!(in_key_order(&next), vec![(40, b"forty".to_vec())]);
        assert_eq!(staged.len(), 0, "the table given back fills again from empty");
        assert_eq!(staged.get(10), None, "nothing of the table given back is read");
        staged.insert(50, b"fifty");
        assert_eq!(staged.get(50), Some(&b"fifty"[..]));
        staged.ingested();
        staged.clear();
        assert_eq!(staged.len(), 0);
        assert_eq!(staged.get(40), None);
    }
}
