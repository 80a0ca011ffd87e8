//! The log's named limits.

use mnemo_core::limits::{RECORD_BYTES_MAX, STREAM_ID_BYTES_MAX};

/// Largest encoded envelope: a record at its limit plus the fixed fields and the stream id.
pub const ENVELOPE_BYTES_MAX: usize = RECORD_BYTES_MAX + STREAM_ID_BYTES_MAX + 256;

/// Most append requests the writer folds into one group commit.
pub const GROUP_REQUESTS_MAX: usize = 1024;

/// Most record bytes the writer folds into one group commit; a larger group is split.
pub const GROUP_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Depth of the writer's request queue; callers block (back-pressure) when it is full.
pub const WRITER_QUEUE_DEPTH_MAX: usize = 4096;

/// Envelopes whose hash chain is verified when a log is opened.
pub const RECOVERY_VERIFY_ENVELOPES_MAX: u64 = 4096;

/// Stream heads the writer keeps in memory before it forgets them and reads them back from disk.
pub const HEAD_CACHE_STREAMS_MAX: usize = 65_536;

/// Most envelopes one `read_range` or `read_stream` call returns.
pub const READ_ENVELOPES_MAX: usize = 100_000;

/// Size at which a keyspace's memtable is sealed and flushed to disk. Together with the journal
/// limit below, it bounds resident memory however long the log grows or however large a rebuild is.
pub const MEMTABLE_BYTES_MAX: u64 = 2 * 1024 * 1024;

/// The key index's memtable size (the `keys` keyspace, for stores created with it; the engine
/// keeps a keyspace's options from its creation). Its keys are random fingerprints, so every table
/// flushed from it overlaps every table below it, and each merge out of the first level rewrites
/// all it overlaps: a small memtable makes those merges many. At 256 KiB with the engine's default
/// compaction, the checked store's storage threads worked 53 s of CPU more than the unchecked
/// store's over the 1M-event key-check workload, ten times the writer's whole key work. With this
/// size and the two limits below, the workload's process took 330 s of CPU against 376 s
/// (decision 0142). Inserts into the longer skip list cost the writer about 0.4 µs more per key,
/// after its callers are answered.
pub const KEYS_MEMTABLE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// Keys the writer stages in memory before it hands them to the engine as one sorted table
/// (`key_index/staged.rs`): at about 50 bytes a key in memory, about 6.5 MiB; each table holds
/// about 4 MiB of keys. A crash loses at most these, which the next open builds again from the log.
/// Each table costs the disk several flushes (the table, its folder, the engine's version): at half
/// this size, when the index shared the log's database and its journal, a bulk import's syncs took
/// 20% longer with the key check than without (decision 0142).
pub const KEYS_STAGED_MAX: usize = 131_072;

/// Staged keys the writer holds at most: past this, while a table is still being handed to the
/// engine (`key_index/ingester.rs`), the writer waits for it rather than stage more.
pub const KEYS_STAGED_HELD_MAX: usize = 2 * KEYS_STAGED_MAX;

/// How much the thread that hands staged tables to the engine (`key_index/ingester.rs`) raises its
/// nice value over the host's, as the pipeline's stages and the key filter's scan do: a table's
/// ingestion is the index's upkeep, which the writer waits for only once it holds
/// `KEYS_STAGED_HELD_MAX` keys. At the host's priority it took the processor from the appends it
/// follows: on a 2-core machine, a bulk import of 1M events spent about 0.2 s more outside its
/// syncs (decision 0142).
pub const KEYS_INGEST_NICE_INCREMENT: i32 = 10;

/// Staged keys below which the writer hands them to the engine in one batch through the journal
/// rather than as a table of their own: a process that appends a few events and closes (a CLI
/// import, a hook run without the store server) would otherwise leave a small table each time.
pub const KEYS_INGEST_MIN: usize = 4096;

/// Envelopes the key index's mark may lag the log's head before the writer moves it (with the keys
/// staged so far): bounds what an open after a crash reads to catch the index up, also when few
/// envelopes carry keys.
pub const KEYS_MARK_LAG_MAX: u64 = 131_072;

/// Tables the key index's first level gathers before they are merged into the next (the engine's
/// default is 4): a quarter as many merges, each of four times the keys; its keys are random, so
/// each merge rewrites all of the next level. Kept below 20, where the engine starts to slow
/// writes down. A lookup that gets past the key filter checks each of these tables' own filters.
pub const KEYS_L0_TABLES_MAX: u8 = 16;

/// The size of the key index's tables (the engine's default is 64 MiB). The first level below the
/// memtables holds this times `KEYS_L0_TABLES_MAX` and each level after ten times the one before,
/// so a merge rewrites the overlapping share of one small level, not the whole index.
pub const KEYS_TABLE_BYTES: u64 = 4 * 1024 * 1024;

/// The storage engine's block cache.
pub const BLOCK_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// Journal bytes kept before the storage engine flushes memtables so it can drop old journals.
/// The journal holds what the memtables hold, so this also bounds their memory; and it counts
/// towards the store's size on disk until it is trimmed.
pub const JOURNAL_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// The storage engine's background threads (flushes, compactions and memtable rotations share
/// them). Its default, one per core, left a memtable that had reached its size waiting behind long
/// compactions, growing all the while.
pub const STORAGE_WORKER_THREADS: usize = 4;

/// How much the storage engine's pool threads (flushes, compactions) raise their nice value over
/// the host's, as the pipeline's stages and the key index's ingestion do. At the host's priority,
/// on a 2-core machine importing 1M events, they took about 9.5 s of processor time per 10 s import
/// (about 1.5 s of it one thread handing merges back to the queue while the others were busy), and
/// the writer and its caller, whose work every append waits for, ran preempted: the key check's
/// own work took 0.42 s of the writer's wall time and 0.25 s of the caller's, against 0.33 s and
/// 0.07 s with the engine's threads lowered (decision 0142).
pub const STORAGE_NICE_INCREMENT: i32 = 10;

/// The block cache of the key index's own database (`databases::KEYS_DATABASE_DIR_NAME`). Its
/// filters and block indexes are pinned with their tables, and the writer's key filter answers
/// most lookups before they reach it, so the blocks it caches are those of retries and of the
/// filter's rare wrong answers.
pub const KEYS_BLOCK_CACHE_BYTES: u64 = 4 * 1024 * 1024;

/// The background threads of the key index's database. Its memtable takes only the few keys of a
/// closing store and an index's catch-up, so no flush waits long behind a merge; and with one
/// thread the engine's pool does not hand merges back and forth between its threads.
pub const KEYS_STORAGE_WORKER_THREADS: usize = 1;

/// Envelopes a scan of the log reads through one storage iterator before it opens the next (see
/// the fjall log's scan): what a scan holds in memory at once.
pub const SCAN_CHUNK_ENVELOPES: u64 = 1024;

/// Bits the key filter spends per key it is sized for (a false "may be present" about once in a
/// hundred lookups at capacity; see `key_index/filter.rs`).
pub const KEY_FILTER_BITS_PER_KEY: u64 = 10;

/// Keys the smallest key filter is sized for: 2,097,152 keys in 2.5 MiB, the keys of about a million
/// events. A store growing from nothing rebuilds its filter, with a scan of the whole index, only
/// once it passes them; from 65,536 keys (80 KiB) an import of 1M events scanned 1.4M keys in three
/// builds, about 0.45 s of CPU on a machine the import keeps busy, and answered from an overfull
/// filter while each ran (decision 0142). 2.5 MiB is a sixth of the engine's block cache.
pub const KEY_FILTER_KEYS_MIN: u64 = 2_097_152;

/// How many times the keys it holds a new key filter is sized for, once the one in use is full.
/// Each build scans the whole index, so an index growing from nothing is scanned about 1.33 times
/// over, where doubling scanned it twice (about 0.85 s of CPU over an import of 1M events, decision
/// 0142); the filter takes at most this many times the memory its keys need (5 MiB at 1M keys).
pub const KEY_FILTER_GROWTH: u64 = 4;

/// How much the key filter's scan raises its thread's nice value over the host's (as the pipeline's
/// stages do): the writer answers lookups from the index until the scan ends, so a slow scan only
/// delays the filter's saving, while a scan at full priority took about 3% of a busy 2-core
/// machine from the appends of a bulk import (decision 0142).
pub const KEY_FILTER_NICE_INCREMENT: i32 = 10;

/// Largest key filter, about 214 million keys at capacity. An index with more keys keeps this
/// filter: it answers "may be present" more often, and those lookups read the index.
pub const KEY_FILTER_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// How long a reader of the key index waits for the writer to index the keys of envelopes it has
/// acknowledged (written just after the acknowledgement, normally within a millisecond) before it
/// answers that the index is behind.
pub const KEY_INDEX_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(30);
