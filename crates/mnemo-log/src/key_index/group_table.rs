//! The table a group commit keeps of the keys it has looked up or written (`GroupKeys`, in
//! `check.rs`): per key's fingerprint, what the group knows of it.
//!
//! NOTE: a `HashMap<Fingerprint, Known>` took each key's fingerprint and value into a slot of 80
//! bytes, so a group of 1,000 events (about 1,800 keys) spread its inserts over some 320 KiB, and
//! nearly every insert missed the processor's nearer caches twice (the map's control bytes, then
//! the slot): about 0.13 s of the writer's time per 1M events, the largest single cost the key
//! check still added to it (decision 0142). Here the slots hold only a 4-byte index into the
//! entries, which are appended in the order the group meets its keys: the slots of such a group
//! take 16 KiB and the entries are written one after the other, so the table stays in the cache.

use super::layout::Fingerprint;

/// Slots of a table that has held nothing yet; the table doubles when it is half full.
const GROUP_TABLE_SLOTS_MIN: usize = 64;

/// How many times the slots the last group needed a table may keep when it is cleared.
const GROUP_TABLE_SHRINK_FACTOR: usize = 8;

/// An empty slot; any other slot holds an entry's index plus one.
const EMPTY: u32 = 0;

/// Per fingerprint, a value of type `V`, for the keys of one group commit.
#[derive(Debug)]
pub(super) struct GroupTable<V> {
    /// Open addressing with linear probing, by a fingerprint's low bits: each slot is `EMPTY` or an
    /// index into `prints` and `values`, plus one.
    slots: Vec<u32>,
    prints: Vec<Fingerprint>,
    values: Vec<V>,
}

impl<V: Copy> GroupTable<V> {
    pub(super) fn new() -> GroupTable<V> {
        GroupTable { slots: vec![EMPTY; GROUP_TABLE_SLOTS_MIN], prints: Vec::new(), values: Vec::new() }
    }

    /// Forgets every key, keeping the memory: the next group of a bulk import is as large as the
    /// last. Slots far more than the last group needed are given back, so that a host's small
    /// groups after one large one do not each clear the large one's slots.
    pub(super) fn clear(&mut self) {
        let needed = (2 * self.prints.len()).next_power_of_two().max(GROUP_TABLE_SLOTS_MIN);
        if self.slots.len() > GROUP_TABLE_SHRINK_FACTOR * needed {
            self.slots = vec![EMPTY; needed];
        } else if !self.prints.is_empty() {
            self.slots.fill(EMPTY);
        }
        self.prints.clear();
        self.values.clear();
    }

    /// The value held for `print`.
    pub(super) fn get(&self, print: Fingerprint) -> Option<V> {
        self.find(print).ok().map(|index| self.values[index])
    }

    /// Holds `value` for `print`, in place of any value held for it.
    pub(super) fn insert(&mut self, print: Fingerprint, value: V) {
        match self.find(print) {
            Ok(index) => self.values[index] = value,
            Err(slot) => {
                self.slots[slot] = slot_of_index(self.prints.len());
                self.prints.push(print);
                self.values.push(value);
                if 2 * self.prints.len() > self.slots.len() {
                    self.grow();
                }
            }
        }
    }

    /// The entry holding `print`, or the empty slot where it would go.
    fn find(&self, print: Fingerprint) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        // NOTE: a fingerprint is already a uniform hash; its low bits choose the slot.
        let mut slot = print as usize & mask;
        loop {
            match self.slots[slot] {
                EMPTY => return Err(slot),
                held => {
                    let index = (held - 1) as usize;
                    if self.prints[index] == print {
                        return Ok(index);
                    }
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Doubles the slots and places every entry again.
    fn grow(&mut self) {
        let slots = 2 * self.slots.len();
        self.slots.clear();
        self.slots.resize(slots, EMPTY);
        for index in 0..self.prints.len() {
            // NOTE: every fingerprint is held once, so `find` only ever finds its empty slot.
            if let Err(slot) = self.find(self.prints[index]) {
                self.slots[slot] = slot_of_index(index);
            }
        }
    }
}

/// What a slot holds for the entry at `index`.
fn slot_of_index(index: usize) -> u32 {
    // NOTE: a group holds a few keys per record, and at most `GROUP_BYTES_MAX` (64 MiB) of
    // records, so an index never comes near 2^32.
    debug_assert!(index < u32::MAX as usize, "a group's keys fit a 32-bit index");
    (index + 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_their_latest_value_across_growth_and_a_cleared_table_holds_nothing() {
        let mut table = GroupTable::new();
        // Fingerprints that share their low bits probe past each other.
        let prints: Vec<Fingerprint> = (0..5_000u128).map(|n| (n << 64) | (n % 7)).collect();
        for (value, &print) in prints.iter().enumerate() {
            table.insert(print, value);
        }
        assert!(table.slots.len() >= 2 * prints.len(), "the table grew: {} slots", table.slots.len());
        for (value, &print) in prints.iter().enumerate() {
            assert_eq!(table.get(print), Some(value), "{print:#x}");
        }
        table.insert(prints[3], 99);
        assert_eq!(table.get(prints[3]), Some(99), "an insert replaces the value held");
        assert_eq!(table.prints.len(), prints.len(), "a replaced value is not a new entry");
        assert_eq!(table.get(6_000 << 64), None);

        let slots = table.slots.len();
        table.clear();
        assert!(prints.iter().all(|&print| table.get(print).is_none()), "a cleared table holds nothing");
        assert_eq!(table.slots.len(), slots, "cleared after a large group, the slots are kept");
        table.insert(prints[10], 1);
        assert_eq!(table.get(prints[10]), Some(1));
        table.clear();
        assert_eq!(
            table.slots.len(),
            GROUP_TABLE_SLOTS_MIN,
            "cleared after a small group, they are given back"
        );
        assert_eq!(table.get(prints[10]), None);
    }
}
