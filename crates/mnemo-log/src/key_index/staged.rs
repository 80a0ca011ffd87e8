//! The key index's newest keys, held in memory until there are enough of them to hand to the
//! storage engine as one sorted table.
//!
//! Written one group at a time, the keys cost an append more than every other check together: each
//! went through the engine's journal and memtable, then its flushes and compactions, and at 1M
//! events the import with key rules ran at about two thirds of the rate without them (decision
//! 0142, last addendum). Staged here, a group's keys cost an insert into a bucket each; every
//! `KEYS_STAGED_MAX` keys (or `KEYS_MARK_LAG_MAX` envelopes) the writer hands them on, with the
//! index's mark, to a thread of their own (`ingester.rs`), which ingests them, sorted, as a
//! table of their own: that skips the journal and the memtable, and keeps the sorting and the
//! table's writing off the path every append waits for.
//!
//! Nothing is lost by a crash: the mark moves only with an ingestion, so the keys a crash drops are
//! those of envelopes past the mark, which every open brings into the index from the envelopes' own
//! rules (`catch_up`, in `maintenance.rs`). Readers of the index look here first (`read_value`, in
//! `read.rs`).

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use super::layout::Fingerprint;

/// Keys the writer has acknowledged and that are not yet in the engine: those it stages now, and
/// those it has handed to the ingestion thread (`ingester.rs`), which readers still find here
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
    pub(super) fn len(&self) -> usize {
        self.filling.len()
    }

    /// The value staged for the key of fingerprint `print`, whether still filling or handed on.
    pub(super) fn get(&self, print: Fingerprint) -> Option<&[u8]> {
        self.filling.get(print).or_else(|| self.handed.as_ref().and_then(|handed| handed.get(print)))
    }

    /// Stages a key the writer wrote. A key is only ever written where it was absent, so it is
    /// not staged already; if it were, the first value staged would stay, as the first holder of
    /// a key keeps it in the index.
    pub(super) fn insert(&mut self, print: Fingerprint, value: &[u8]) {
        self.filling.insert(print, value);
    }

    /// Every staged key's fingerprint, handed on or not.
    pub(super) fn fingerprints(&self) -> impl Iterator<Item = Fingerprint> + '_ {
        self.filling.fingerprints().chain(self.handed.iter().flat_map(|handed| handed.fingerprints()))
    }

    /// Whether `table` is the table handed on, not yet in the engine.
    pub(super) fn is_handed(&self, table: &Arc<StagedTable>) -> bool {
        self.handed.as_ref().is_some_and(|handed| Arc::ptr_eq(handed, table))
    }

    /// Hands the keys staged so far on for ingestion: they stay readable here until
    /// [`StagedKeys::ingested`]. Only one table is handed on at a time.
    pub(super) fn hand_on(&mut self) -> Arc<StagedTable> {
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
    pub(super) fn ingested(&mut self) {
        self.handed = None;
    }

    /// Keeps the memory of a table the engine holds now, for the next table.
    pub(super) fn give_back(&mut self, table: Arc<StagedTable>) {
        if let Ok(mut table) = Arc::try_unwrap(table) {
            table.clear();
            self.spare = Some(table);
        }
    }

    /// Forgets every key, handed on or not.
    pub(super) fn clear(&mut self) {
        self.filling.clear();
        self.handed = None;
    }
}

/// Buckets a staged table spreads its keys over, by a fingerprint's top bits.
///
/// NOTE: a hash map's insert of a random fingerprint missed the processor's caches twice (its
/// control bytes and its slot, in a map of about 8 MiB): about 0.3 s of the writer's time per 1M
/// events, the largest single cost the key check added to it (decision 0142). An insert here
/// writes at the end of one of 512 buckets, whose ends and handles (about 44 KiB) stay in the
/// cache between a group's inserts. With 4,096 buckets (about 350 KiB of ends and handles) they
/// did not: the writer's work between two groups pushed them out, and each insert missed the cache
/// (about 0.15 s of the writer's time per 1M events). A bucket holds about 256 keys when a table
/// is handed on, so a lookup, which only a key the filter may hold costs, scans a few KiB; and the
/// buckets in order, each sorted on its own, give the table in key order without a sort of the
/// whole table.
const STAGED_BUCKET_BITS: u32 = 9;
const STAGED_BUCKETS: usize = 1 << STAGED_BUCKET_BITS;

/// The bucket of the key of fingerprint `print`: its top bits, so that the buckets in order hold
/// the keys in order.
fn bucket_of(print: Fingerprint) -> usize {
    (print >> (Fingerprint::BITS - STAGED_BUCKET_BITS)) as usize
}

/// A staged key: its fingerprint and where its value is in the table's bytes.
#[derive(Debug, Clone)]
struct StagedEntry {
    print: Fingerprint,
    value: Range<usize>,
}

/// Staged keys: per fingerprint, the value the `keys` keyspace will hold (the holder's position,
/// then the claimed value).
#[derive(Debug, Default)]
pub(super) struct StagedTable {
    /// `STAGED_BUCKETS` buckets once a key is staged (none before, so that a store that stages
    /// nothing allocates nothing); each keeps its memory when the table is cleared.
    buckets: Vec<Vec<StagedEntry>>,
    len: usize,
    /// The values, end to end.
    bytes: Vec<u8>,
    /// One bucket's keys in fingerprint order, made when the table is ingested, kept for the next
    /// bucket and the next table.
    sorted: Mutex<Vec<StagedEntry>>,
}

impl StagedTable {
    /// A table whose buckets have room for about `keys` keys (none for fewer keys than buckets).
    fn with_capacity(keys: usize) -> StagedTable {
        if keys < STAGED_BUCKETS {
            return StagedTable::default();
        }
        // NOTE: a little room beyond the mean, so that few buckets grow while the table fills.
        let per_bucket = keys.div_ceil(STAGED_BUCKETS) * 5 / 4;
        StagedTable {
            buckets: (0..STAGED_BUCKETS).map(|_| Vec::with_capacity(per_bucket)).collect(),
            ..StagedTable::default()
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn get(&self, print: Fingerprint) -> Option<&[u8]> {
        let bucket = self.buckets.get(bucket_of(print))?;
        bucket.iter().find(|entry| entry.print == print).map(|entry| &self.bytes[entry.value.clone()])
    }

    fn insert(&mut self, print: Fingerprint, value: &[u8]) {
        if self.buckets.is_empty() {
            self.buckets.resize_with(STAGED_BUCKETS, Vec::new);
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.buckets[bucket_of(print)].push(StagedEntry { print, value: start..self.bytes.len() });
        self.len += 1;
    }

    /// Every staged key's fingerprint, in no particular order.
    fn fingerprints(&self) -> impl Iterator<Item = Fingerprint> + '_ {
        self.buckets.iter().flatten().map(|entry| entry.print)
    }

    /// Calls `each` with every key and its value, in fingerprint order (the order of the `keys`
    /// keyspace), until it fails.
    pub(super) fn for_each_in_key_order<E>(
        &self,
        mut each: impl FnMut(Fingerprint, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut sorted = self.sorted.lock().unwrap_or_else(PoisonError::into_inner);
        for bucket in &self.buckets {
            sorted.clear();
            sorted.extend_from_slice(bucket);
            // NOTE: a key staged twice (which the writer never does) is written once, with its first
            // value: the engine's ingestion refuses a key that does not sort after the last one.
            sorted.sort_unstable_by_key(|entry| (entry.print, entry.value.start));
            sorted.dedup_by_key(|entry| entry.print);
            // NOTE: values were staged in the order their keys were written, not in fingerprint
            // order, so each read below missed the cache, one after the other, inside the engine's
            // work for each key (a quarter of the ingestion's time). Read together first, in a
            // loop with nothing else in it, the misses overlap.
            let first_bytes = sorted.iter().filter_map(|entry| self.bytes.get(entry.value.start));
            std::hint::black_box(first_bytes.fold(0u8, |folded, byte| folded ^ byte));
            for entry in sorted.iter() {
                each(entry.print, &self.bytes[entry.value.clone()])?;
            }
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.buckets.iter_mut().for_each(Vec::clear);
        self.len = 0;
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

    #[test]
    fn a_key_staged_twice_keeps_its_first_value_and_is_ingested_once() {
        let mut staged = StagedKeys::default();
        staged.insert(7, b"first");
        staged.insert(3, b"three");
        staged.insert(7, b"second");
        assert_eq!(staged.get(7), Some(&b"first"[..]));
        let table = staged.hand_on();
        assert_eq!(in_key_order(&table), vec![(3, b"three".to_vec()), (7, b"first".to_vec())]);
    }

    #[test]
    fn keys_spread_over_every_bucket_are_found_and_come_out_in_fingerprint_order() {
        let prints: Vec<Fingerprint> =
            (0..20_000u64).map(|i| crate::key_index::layout::fingerprint(&i.to_be_bytes())).collect();
        let mut staged = StagedKeys::default();
        for print in &prints {
            staged.insert(*print, &print.to_le_bytes()[..(*print % 17) as usize]);
        }
        // The extremes of the fingerprint space: the first and the last bucket.
        staged.insert(0, b"lowest");
        staged.insert(Fingerprint::MAX, b"highest");
        assert_eq!(staged.len(), prints.len() + 2);
        for print in &prints {
            assert_eq!(staged.get(*print), Some(&print.to_le_bytes()[..(*print % 17) as usize]));
        }
        assert_eq!(staged.get(Fingerprint::MAX), Some(&b"highest"[..]));
        assert_eq!(staged.get(prints[0] ^ 1), None);
        let table = staged.hand_on();
        let entries = in_key_order(&table);
        let mut expected: Vec<Fingerprint> = prints.clone();
        expected.extend([0, Fingerprint::MAX]);
        expected.sort_unstable();
        assert_eq!(entries.iter().map(|(print, _)| *print).collect::<Vec<_>>(), expected);
        assert_eq!(entries.first().map(|(_, value)| value.as_slice()), Some(&b"lowest"[..]));
        staged.ingested();
        staged.give_back(table);
        staged.insert(prints[1], b"again");
        let next = staged.hand_on();
        assert_eq!(
            in_key_order(&next),
            vec![(prints[1], b"again".to_vec())],
            "nothing of the table given back is kept"
        );
    }
}
