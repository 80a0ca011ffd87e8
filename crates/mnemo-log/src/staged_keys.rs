//! The key index's newest keys, held in memory until there are enough of them to hand to the
//! storage engine as one sorted table.
//!
//! Written one group at a time, the keys cost an append more than every other check together: each
//! went through the engine's journal and memtable, then its flushes and compactions, and at 1M
//! events the import with key rules ran at about two thirds of the rate without them (decision
//! 0142, last addendum). Staged here, a group's keys cost a hash-map insert each; every
//! `KEYS_STAGED_MAX` keys (or `KEYS_MARK_LAG_MAX` envelopes) the writer ingests them, sorted, with
//! the index's mark, as a table of their own, which skips the journal and the memtable.
//!
//! Nothing is lost by a crash: the mark moves only with an ingestion, so the keys a crash drops are
//! those of envelopes past the mark, which every open brings into the index from the envelopes' own
//! rules (`key_index::catch_up`). Readers of the index look here first (`key_index::read_value`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::Range;

use crate::key_index::{Fingerprint, FingerprintHasher};

/// Keys the writer has acknowledged and not yet handed to the engine: per fingerprint, the value
/// the `keys` keyspace will hold (the holder's position, then the claimed value).
#[derive(Debug, Default)]
pub(crate) struct StagedKeys {
    values: HashMap<Fingerprint, Range<usize>, BuildHasherDefault<FingerprintHasher>>,
    /// The values, end to end.
    bytes: Vec<u8>,
}

impl StagedKeys {
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The value staged for the key of fingerprint `print`.
    pub(crate) fn get(&self, print: Fingerprint) -> Option<&[u8]> {
        self.values.get(&print).map(|range| &self.bytes[range.clone()])
    }

    /// Stages a key the writer wrote. A key is only ever written where it was absent, so it is
    /// not staged already.
    pub(crate) fn insert(&mut self, print: Fingerprint, value: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.values.insert(print, start..self.bytes.len());
    }

    pub(crate) fn fingerprints(&self) -> impl Iterator<Item = Fingerprint> + '_ {
        self.values.keys().copied()
    }

    /// Every staged key and its value, in fingerprint order (the order of the `keys` keyspace).
    pub(crate) fn sorted(&self) -> Vec<(Fingerprint, &[u8])> {
        let mut sorted: Vec<(Fingerprint, &[u8])> =
            self.values.iter().map(|(print, range)| (*print, &self.bytes[range.clone()])).collect();
        sorted.sort_unstable_by_key(|(print, _)| *print);
        sorted
    }

    /// Forgets every key, keeping the memory they took.
    pub(crate) fn clear(&mut self) {
        self.values.clear();
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_key_reads_back_its_value_and_keys_come_out_in_fingerprint_order() {
        let mut staged = StagedKeys::default();
        staged.insert(30, b"thirty");
        staged.insert(10, b"");
        staged.insert(20, b"twenty");
        assert_eq!(staged.get(30), Some(&b"thirty"[..]));
        assert_eq!(staged.get(10), Some(&b""[..]));
        assert_eq!(staged.get(40), None);
        let order: Vec<Fingerprint> = staged.sorted().iter().map(|(print, _)| *print).collect();
        assert_eq!(order, vec![10, 20, 30]);
        staged.clear();
        assert_eq!(staged.len(), 0);
        assert_eq!(staged.get(30), None);
    }
}
