//! An in-memory filter over the key index's keys, so that the writer learns a key is absent without
//! a read of the storage engine. Almost every lookup of an append's keys is of a key nobody holds
//! yet (a new event's identity, a new call's pairing, a run's seal), and each such read cost about
//! as much as the rest of the append's check together (decision 0142).
//!
//! The filter is a blocked Bloom filter: it never says a key it holds is absent, and says a key it
//! does not hold may be present about once in a hundred lookups at its capacity; a "may be present"
//! is then read from the index as before. So the filter changes how fast an answer comes, never the
//! answer.
//!
//! It is built when the log opens, by a thread that scans the `keys` keyspace while the writer
//! appends. The writer adds every key it writes to the filter, a group's keys once the group is
//! committed and before it decides the next, whether or not the scan has taken its snapshot yet,
//! so the two together cover every key; until the scan ends, every lookup reads the index. Once the filter holds more keys than it was sized for, a filter
//! `KEY_FILTER_GROWTH` times as large is built the same way, while the full one goes on answering.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use tracing::{info, warn};

use super::layout::{self, Fingerprint};
use crate::error::LogError;
use crate::limits::{
    KEY_FILTER_BITS_PER_KEY, KEY_FILTER_BYTES_MAX, KEY_FILTER_GROWTH, KEY_FILTER_KEYS_MIN,
    KEY_FILTER_NICE_INCREMENT,
};
use crate::shared::Shared;

/// Words in one block: a block is one 64-byte cache line, and a key's bits all fall in one block.
const BLOCK_WORDS: usize = 8;

/// Bits a key sets in its block (each chosen by 9 bits of the fingerprint's upper half).
const BITS_PER_KEY_SET: u32 = 7;

/// Keys the scan reads between looks at whether the store is closing.
const SCAN_STOP_CHECK_KEYS: u64 = 4096;

/// Keys the scan reads before it inserts them, their blocks fetched together.
const SCAN_INSERT_KEYS: usize = 64;

const BLOCK_BITS: u64 = BLOCK_WORDS as u64 * 64;

/// The blocks of a filter for `capacity` keys: at least one, at most `KEY_FILTER_BYTES_MAX`.
fn blocks_for(capacity: u64) -> u64 {
    let blocks_max = KEY_FILTER_BYTES_MAX / (BLOCK_BITS / 8);
    capacity.saturating_mul(KEY_FILTER_BITS_PER_KEY).div_ceil(BLOCK_BITS).clamp(1, blocks_max)
}

/// One block of the filter, on a cache line of its own, so that a lookup reads one line.
#[derive(Debug)]
#[repr(align(64))]
struct Block([AtomicU64; BLOCK_WORDS]);

/// The filter's bits. Shared with the thread that fills it by a scan while the writer adds to it.
#[derive(Debug)]
pub(super) struct FilterBits {
    blocks: Box<[Block]>,
    capacity: u64,
}

impl FilterBits {
    /// A filter for `capacity` keys at `KEY_FILTER_BITS_PER_KEY` bits each, no larger than
    /// `KEY_FILTER_BYTES_MAX`.
    pub(super) fn with_capacity(capacity: u64) -> FilterBits {
        let blocks = blocks_for(capacity);
        let capacity = blocks * BLOCK_BITS / KEY_FILTER_BITS_PER_KEY;
        let blocks = (0..blocks).map(|_| Block(std::array::from_fn(|_| AtomicU64::new(0)))).collect();
        FilterBits { blocks, capacity }
    }

    /// The keys it holds at its designed false-positive rate.
    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    fn bytes(&self) -> u64 {
        (self.blocks.len() * BLOCK_WORDS * 8) as u64
    }

    /// The block of a fingerprint and the bits the key sets in it: per bit, its word in the block
    /// and the bit's mask in that word.
    ///
    /// NOTE: bit by bit, each tested or set where it is. Gathering the bits into one mask per word
    /// first built the masks in memory a word at a time and read them back sixteen bytes at a
    /// time, which the processor cannot forward from the pending writes: 90% of the samples of
    /// that computation were at those reads, about 0.25 s of the writer's time per 1M events
    /// (`perf annotate`).
    fn locate(&self, print: Fingerprint) -> (&[AtomicU64; BLOCK_WORDS], impl Iterator<Item = (usize, u64)>) {
        let high = (print >> 64) as u64;
        let bits = (0..BITS_PER_KEY_SET).map(move |probe| {
            let chosen = high >> (9 * probe);
            ((chosen & 7) as usize, 1 << ((chosen >> 3) & 63))
        });
        (&self.block_of(print).0, bits)
    }

    fn block_of(&self, print: Fingerprint) -> &Block {
        let low = print as u64;
        // Maps the lower half onto the blocks without a division (Lemire's multiply-shift).
        &self.blocks[((u128::from(low) * self.blocks.len() as u128) >> 64) as usize]
    }

    /// Inserts a key while another thread may insert too (a filter being filled by its scan).
    pub(super) fn insert(&self, print: Fingerprint) {
        let (block, bits) = self.locate(print);
        for (word, mask) in bits {
            // NOTE: a bit set already is only read: an atomic update costs several times a read,
            // and a filter near its capacity has half its bits set.
            if block[word].load(Ordering::Relaxed) & mask == 0 {
                block[word].fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// Inserts a key into a filter no other thread inserts into (the one in use, whose scan has
    /// ended): a plain read and write per bit, where [`FilterBits::insert`]'s atomic update costs
    /// several times as much.
    fn insert_alone(&self, print: Fingerprint) {
        let (block, bits) = self.locate(print);
        for (word, mask) in bits {
            let held = block[word].load(Ordering::Relaxed);
            if held & mask == 0 {
                block[word].store(held | mask, Ordering::Relaxed);
            }
        }
    }

    /// Reads a word of each key's block, so that the blocks are in the processor's cache when the
    /// keys are looked up or inserted soon after. The words are folded together and the fold used
    /// only at the end, so that no read waits for another and many are under way at once.
    fn fetch_all(&self, prints: impl IntoIterator<Item = Fingerprint>) {
        let fetched = prints
            .into_iter()
            .fold(0, |fold, print| fold ^ self.block_of(print).0[0].load(Ordering::Relaxed));
        std::hint::black_box(fetched);
    }

    /// Whether the key may be held; `false` means it certainly is not among the keys inserted.
    pub(super) fn may_contain(&self, print: Fingerprint) -> bool {
        let (block, mut bits) = self.locate(print);
        bits.all(|(word, mask)| block[word].load(Ordering::Relaxed) & mask != 0)
    }
}

/// A filter being filled by a scan of the index.
struct Build {
    bits: Arc<FilterBits>,
    /// Keys the writer added: those staged when the build started, and those it wrote since.
    added: u64,
    stop: Arc<AtomicBool>,
    scan: JoinHandle<Result<u64, LogError>>,
}

/// The writer's filter: the one that answers, and the one being built.
pub(super) struct KeyFilter {
    shared: Arc<Shared>,
    active: Option<Arc<FilterBits>>,
    /// Keys the active filter holds (the scan's count plus the writer's additions; a key written
    /// while a scan ran may be counted twice, which only brings the next build a little earlier).
    active_keys: u64,
    /// The generation of the key index the filters are for: how many times another thread than the
    /// writer rewrote the index (a rebuild), which the filters do not know of.
    generation: u64,
    building: Option<Build>,
    /// Keys the smallest filter is sized for: `KEY_FILTER_KEYS_MIN`, smaller in tests that fill one.
    keys_min: u64,
}

impl KeyFilter {
    /// Starts building the filter for the index as it is, sized for `KEY_FILTER_GROWTH` times the
    /// keys it holds and at least `KEY_FILTER_KEYS_MIN`.
    pub(super) fn start(shared: Arc<Shared>) -> KeyFilter {
        KeyFilter::start_with_floor(shared, KEY_FILTER_KEYS_MIN)
    }

    fn start_with_floor(shared: Arc<Shared>, keys_min: u64) -> KeyFilter {
        let generation = shared.keys_rewritten.load(Ordering::Acquire);
        let mut filter =
            KeyFilter { shared, active: None, active_keys: 0, generation, building: None, keys_min };
        filter.build_for_index();
        filter
    }

    /// Builds a filter for the index as it is, sized for `KEY_FILTER_GROWTH` times the keys it
    /// holds and at least `keys_min`.
    fn build_for_index(&mut self) {
        let held = self.shared.keys.approximate_len() as u64;
        self.build((KEY_FILTER_GROWTH * held).max(self.keys_min));
    }

    /// Whether the index may hold the key; `true` whenever no filter is ready to say.
    pub(super) fn may_contain(&self, print: Fingerprint) -> bool {
        self.active.as_ref().is_none_or(|bits| bits.may_contain(print))
    }

    /// Brings the blocks the keys will be looked up in or added to (the active filter's, and the
    /// one being built's) into the processor's cache, many reads under way at once.
    pub(super) fn fetch_all(&self, prints: impl Iterator<Item = Fingerprint> + Clone) {
        if let Some(bits) = &self.active {
            bits.fetch_all(prints.clone());
        }
        if let Some(build) = &self.building {
            build.bits.fetch_all(prints);
        }
    }

    /// Records keys the writer wrote to the index (once their group is committed, before the next
    /// group is decided: see `GroupKeys::learn_written`), their blocks fetched first, together.
    pub(super) fn add_all(&mut self, prints: impl Iterator<Item = Fingerprint> + Clone) {
        self.fetch_all(prints.clone());
        for print in prints {
            self.add(print);
        }
    }

    fn add(&mut self, print: Fingerprint) {
        if let Some(bits) = &self.active {
            // Only a finished build becomes active, so its scan no longer inserts into it.
            bits.insert_alone(print);
            self.active_keys += 1;
        }
        if let Some(build) = &mut self.building {
            build.bits.insert(print);
            build.added += 1;
        }
    }

    /// Takes a finished build into use, and starts a larger one once the active filter is full.
    /// The writer calls it before each group.
    pub(super) fn poll(&mut self) {
        let generation = self.shared.keys_rewritten.load(Ordering::Acquire);
        if generation != self.generation {
            // NOTE: dropped before the next lookup: the index now holds keys no filter was told of.
            self.stop();
            self.active = None;
            self.active_keys = 0;
            self.generation = generation;
            self.build_for_index();
            return;
        }
        if self.building.as_ref().is_some_and(|build| build.scan.is_finished()) {
            self.finish_build();
        }
        let full = self
            .active
            .as_ref()
            .is_some_and(|bits| self.active_keys > bits.capacity() && bits.bytes() < KEY_FILTER_BYTES_MAX);
        if full && self.building.is_none() {
            self.build(KEY_FILTER_GROWTH * self.active_keys);
        }
    }

    /// A build of an earlier generation never gets here: `poll` stops it when the generation moves.
    fn finish_build(&mut self) {
        let Some(build) = self.building.take() else { return };
        match build.scan.join() {
            Ok(Ok(scanned)) => {
                info!(keys = scanned + build.added, bytes = build.bits.bytes(), "key filter ready");
                self.active_keys = scanned + build.added;
                self.active = Some(build.bits);
            }
            // Without a filter every lookup reads the index: slower, never wrong.
            Ok(Err(error)) => warn!(%error, "the key filter was not built; key lookups read the index"),
            Err(_) => warn!("the key filter's scan panicked; key lookups read the index"),
        }
    }

    fn build(&mut self, capacity: u64) {
        let bits = Arc::new(FilterBits::with_capacity(capacity));
        // NOTE: the keys staged but not yet in the keyspace are in no snapshot the scan can take,
        // and the writer added them before this filter existed. They count as the writer's, and
        // the scan's thread inserts them: copied in order here, where inserting each into the
        // new filter took the writer a wait for memory per key (up to 262,144 keys at a time).
        let staged: Vec<Fingerprint> = self.shared.staged_keys().fingerprints().collect();
        let added = staged.len() as u64;
        let stop = Arc::new(AtomicBool::new(false));
        // NOTE: the writer adds its keys to `bits` from here on, and the scan's snapshot is taken
        // after this point, so every key is in one or the other. The filter is used only once its
        // thread has ended, the staged keys in it.
        let (scan_bits, scan_stop, shared) = (Arc::clone(&bits), Arc::clone(&stop), Arc::clone(&self.shared));
        let generation = self.generation;
        let scan = std::thread::Builder::new().name("mnemo-key-filter".to_owned()).spawn(move || {
            // NOTE: a scan only makes later lookups cheaper, so on a busy machine it takes the
            // time appends leave.
            crate::priority::lower_this_thread(KEY_FILTER_NICE_INCREMENT, "mnemo-key-filter");
            for prints in staged.chunks(SCAN_INSERT_KEYS) {
                insert_fetched(&scan_bits, prints);
            }
            let scanned = scan_into(&shared, &scan_bits, &scan_stop)?;
            if !scan_stop.load(Ordering::Relaxed) {
                shared.key_filter_scanned.fetch_max(generation + 1, Ordering::Release);
            }
            Ok(scanned)
        });
        match scan {
            Ok(scan) => self.building = Some(Build { bits, added, stop, scan }),
            Err(error) => warn!(%error, "cannot start the key filter's scan; key lookups read the index"),
        }
    }

    /// Stops a scan still running (the store is closing) and waits for it.
    pub(super) fn stop(&mut self) {
        if let Some(build) = self.building.take() {
            build.stop.store(true, Ordering::Relaxed);
            let _ = build.scan.join();
        }
    }
}

/// Inserts every record key of the index into `bits`; returns how many. Ends early, with the
/// keys so far, when `stop` is set: the filter is then never used.
fn scan_into(shared: &Shared, bits: &FilterBits, stop: &AtomicBool) -> Result<u64, LogError> {
    let mut keys = 0u64;
    let mut prints = Vec::with_capacity(SCAN_INSERT_KEYS);
    for guard in shared.keys.iter() {
        let key = guard.key()?;
        let Some(print) = layout::framed_fingerprint(&key) else { continue };
        prints.push(print);
        if prints.len() == SCAN_INSERT_KEYS {
            insert_fetched(bits, &prints);
            prints.clear();
        }
        keys += 1;
        if keys.is_multiple_of(SCAN_STOP_CHECK_KEYS) && stop.load(Ordering::Relaxed) {
            break;
        }
    }
    insert_fetched(bits, &prints);
    Ok(keys)
}

/// Inserts `prints` into `bits`, their blocks fetched first, together: inserted one by one as the
/// scan read them, each key waited for its block, a third of the scan's time (`perf`, an import of
/// 1M events).
fn insert_fetched(bits: &FilterBits, prints: &[Fingerprint]) {
    bits.fetch_all(prints.iter().copied());
    for &print in prints {
        bits.insert(print);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(index: u64) -> Fingerprint {
        layout::fingerprint(format!("ee{index}").as_bytes())
    }

    #[test]
    fn a_key_inserted_is_never_reported_absent() {
        let bits = FilterBits::with_capacity(10_000);
        for index in 0..20_000 {
            bits.insert(print(index));
        }
        assert!((0..20_000).all(|index| bits.may_contain(print(index))));
    }

    #[test]
    fn a_key_inserted_alone_sets_the_bits_a_shared_insert_sets() {
        let (shared, alone) = (FilterBits::with_capacity(10_000), FilterBits::with_capacity(10_000));
        for index in 0..20_000 {
            shared.insert(print(index));
            alone.insert_alone(print(index));
        }
        let words = |bits: &FilterBits| -> Vec<u64> {
            bits.blocks
                .iter()
                .flat_map(|block| block.0.iter().map(|word| word.load(Ordering::Relaxed)))
                .collect()
        };
        assert_eq!(words(&shared), words(&alone));
        assert!((0..20_000).all(|index| alone.may_contain(print(index))));
    }

    #[test]
    fn at_capacity_about_one_key_in_a_hundred_not_held_may_be_present() {
        let bits = FilterBits::with_capacity(100_000);
        let capacity = bits.capacity();
        assert!(capacity >= 100_000, "{capacity}");
        for index in 0..capacity {
            bits.insert(print(index));
        }
        let probes = 100_000;
        let false_positives =
            (capacity..capacity + probes).filter(|&index| bits.may_contain(print(index))).count();
        let rate = false_positives as f64 / probes as f64;
        assert!(rate < 0.02, "false-positive rate {rate}");
        assert!(rate > 0.0, "a filter at capacity that never errs is not sized as claimed");
    }

    /// Polls until the filter being built is in use.
    fn wait_for_build(filter: &mut KeyFilter) {
        let began = std::time::Instant::now();
        while filter.building.is_some() {
            assert!(began.elapsed() < std::time::Duration::from_secs(60), "the scan did not end");
            std::thread::sleep(std::time::Duration::from_millis(5));
            filter.poll();
        }
    }

    #[test]
    fn a_full_filter_is_replaced_by_a_larger_one_that_keeps_every_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = crate::shared::shared_for_tests(dir.path()).expect("store");
        // Keys in the index before the filter exists come from the scan.
        let framed = layout::framed(b"ebefore");
        shared.keys.insert(framed, layout::encode_value(mnemo_core::Position(1), b"")).expect("insert");
        // NOTE: a small floor, so that the test fills the filter with few keys.
        let mut filter = KeyFilter::start_with_floor(Arc::clone(&shared), 65_536);
        assert!(filter.may_contain(print(0)), "without a filter every key may be held");
        wait_for_build(&mut filter);
        let capacity = filter.active.as_ref().expect("a filter").capacity();
        assert!(filter.may_contain(layout::fingerprint(b"ebefore")));
        // As the writer does: each key is committed to the index, then added.
        let added = capacity + 10;
        let mut batch = shared.keys_db.batch();
        for index in 0..added {
            let framed = layout::framed(format!("ee{index}").as_bytes());
            batch.insert(&shared.keys, framed, layout::encode_value(mnemo_core::Position(2), b""));
        }
        batch.commit().expect("commit");
        for index in 0..added {
            filter.add(print(index));
        }
        filter.poll();
        assert!(filter.building.is_some(), "a full filter starts a larger one");
        wait_for_build(&mut filter);
        let larger = filter.active.as_ref().expect("a filter").capacity();
        assert!(larger >= KEY_FILTER_GROWTH * capacity, "{larger} after {capacity}");
        assert!((0..added).all(|index| filter.may_contain(print(index))));
        assert!(filter.may_contain(layout::fingerprint(b"ebefore")));
        let absent = (added..added + 10_000).filter(|&index| !filter.may_contain(print(index))).count();
        assert!(absent > 9_500, "a filter below its capacity answers most absent keys: {absent}");
    }

    /// A new store's filter, built and in use; the store's folder and state with it.
    fn built_filter() -> (tempfile::TempDir, Arc<Shared>, KeyFilter) {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = crate::shared::shared_for_tests(dir.path()).expect("store");
        let mut filter = KeyFilter::start(Arc::clone(&shared));
        wait_for_build(&mut filter);
        (dir, shared, filter)
    }

    #[test]
    fn a_new_store_gets_a_filter_for_a_million_events_keys_before_it_needs_a_larger_one() {
        let (_dir, _shared, mut filter) = built_filter();
        let capacity = filter.active.as_ref().expect("a filter").capacity();
        assert!(capacity >= KEY_FILTER_KEYS_MIN, "{capacity} keys");
        for index in 0..1_800_000 {
            filter.add(print(index));
        }
        filter.poll();
        assert!(filter.building.is_none(), "1.8M keys, the keys of about 1M events, start no rebuild");
    }

    #[test]
    fn keys_staged_before_a_build_are_in_the_filter_it_builds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = crate::shared::shared_for_tests(dir.path()).expect("store");
        let value = layout::encode_value(mnemo_core::Position(1), b"");
        shared.staged_keys_mut().insert(print(7), &value);
        let mut filter = KeyFilter::start(Arc::clone(&shared));
        wait_for_build(&mut filter);
        assert!(filter.may_contain(print(7)));
        assert_eq!(filter.active_keys, 1);
        assert!(!filter.may_contain(print(8)));
    }

    #[test]
    fn a_rewritten_index_drops_the_filter_until_one_is_built_for_it() {
        let (_dir, shared, mut filter) = built_filter();
        assert!(!filter.may_contain(layout::fingerprint(b"erebuilt")));
        // Another thread writes the index (a rebuild) and says so.
        let framed = layout::framed(b"erebuilt");
        shared.keys.insert(framed, layout::encode_value(mnemo_core::Position(1), b"")).expect("insert");
        shared.keys_rewritten.fetch_add(1, Ordering::Release);
        filter.poll();
        assert!(filter.may_contain(layout::fingerprint(b"erebuilt")), "no stale filter answers");
        wait_for_build(&mut filter);
        assert!(filter.active.is_some());
        assert!(filter.may_contain(layout::fingerprint(b"erebuilt")));
    }

    #[test]
    fn an_empty_filter_holds_nothing_and_a_filter_is_never_larger_than_its_limit() {
        let bits = FilterBits::with_capacity(0);
        assert!(!bits.may_contain(print(1)));
        assert_eq!(blocks_for(0), 1);
        assert_eq!(blocks_for(u64::MAX) * BLOCK_BITS / 8, KEY_FILTER_BYTES_MAX);
        let blocks = blocks_for(1_000_000);
        assert!(blocks * BLOCK_BITS >= 1_000_000 * KEY_FILTER_BITS_PER_KEY);
        assert!((blocks - 1) * BLOCK_BITS < 1_000_000 * KEY_FILTER_BITS_PER_KEY);
    }
}
