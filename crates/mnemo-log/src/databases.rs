//! The store's two fjall databases: the log's (`db`: the envelopes, the stream index, the format
//! version, and the projections' keyspaces) and the key index's (`keys`), their keyspaces' names
//! and options, and opening them with the store's format checked.
//!
//! It is not the store directory (`store_dir.rs`: creating a store, refusing a directory that is
//! not one) nor the log kept in them (`fjall_log.rs`).

use std::path::Path;
use std::sync::Arc;

use fjall::config::{CompressionPolicy, PinningPolicy};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions};

use crate::envelope::ENVELOPE_FORMAT_VERSION;
use crate::error::LogError;
use crate::limits::{
    BLOCK_CACHE_BYTES, JOURNAL_BYTES_MAX, KEYS_BLOCK_CACHE_BYTES, KEYS_L0_TABLES_MAX,
    KEYS_MEMTABLE_BYTES_MAX, KEYS_STORAGE_WORKER_THREADS, KEYS_TABLE_BYTES, MEMTABLE_BYTES_MAX,
    STORAGE_NICE_INCREMENT, STORAGE_WORKER_THREADS,
};

/// The folder inside the store directory that holds the fjall database.
pub const DATABASE_DIR_NAME: &str = "db";
/// The folder inside the store directory that holds the key index's own fjall database (decision
/// 0142): its tables are ingested without holding the log's journal.
pub const KEYS_DATABASE_DIR_NAME: &str = "keys";
/// Keyspace names owned by the log.
pub const LOG_KEYSPACE: &str = "log";
/// The stream index keyspace.
pub const STREAMS_KEYSPACE: &str = "streams";
/// The log's metadata keyspace (its format version).
pub const META_KEYSPACE: &str = "log_meta";
/// The keyspace of the key index, in its own database (`key_index/`).
pub const KEYS_KEYSPACE: &str = "keys";

const FORMAT_KEY: &[u8] = b"format_version";

/// Options for every keyspace of a store, the projections' included: a bounded memtable.
pub fn keyspace_options() -> KeyspaceCreateOptions {
    // Every level's data blocks are compressed (fjall's default leaves the first two levels, where
    // a store of a few million events keeps most of its data, uncompressed): event text and the
    // stages' copies of it compress well, and a block read costs a decompression of a few KiB.
    //
    // Every level's bloom filters and block indexes are pinned in memory with their table. By
    // default only the first levels' are, and a deeper table's filter is read from disk through
    // the block cache, where a filter larger than a cache shard's share is never admitted: a table
    // of a million keys then cost a read and checksum of its whole 1 MiB filter on every point
    // lookup, and the stages' lookups of keys that do not exist yet (most of an index's) slowed as
    // the store grew. Pinned, a filter costs about 10 bits per key and an index one entry per
    // data block, a few MiB for a store of millions of events.
    KeyspaceCreateOptions::default()
        .max_memtable_size(MEMTABLE_BYTES_MAX)
        .data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4))
        .filter_block_pinning_policy(PinningPolicy::all(true))
        .index_block_pinning_policy(PinningPolicy::all(true))
}

/// The options of the key index's keyspace (`keys`): the log's, with a larger memtable
/// (`KEYS_MEMTABLE_BYTES_MAX`), a leveled compaction of small tables (`KEYS_L0_TABLES_MAX`,
/// `KEYS_TABLE_BYTES`), since its keys are random, and no compression: a key is a random
/// fingerprint and its value mostly a position, which compress little, while compression is the
/// largest single cost in the engine threads' profile of a bulk import. Used only when the
/// keyspace is created; the engine keeps them.
pub fn keys_keyspace_options() -> KeyspaceCreateOptions {
    let compaction = fjall::compaction::Leveled::default()
        .with_l0_threshold(KEYS_L0_TABLES_MAX)
        .with_table_target_size(KEYS_TABLE_BYTES);
    keyspace_options()
        .max_memtable_size(KEYS_MEMTABLE_BYTES_MAX)
        .compaction_strategy(Arc::new(compaction))
        .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
}

/// The store's two databases and the log's keyspaces in them.
pub(crate) struct Databases {
    pub db: Database,
    pub log: Keyspace,
    pub streams: Keyspace,
    pub keys_db: Database,
    pub keys: Keyspace,
}

/// Opens the store's databases and the log's keyspaces, checking the store's format.
pub(crate) fn open_databases(dir: &Path) -> Result<Databases, LogError> {
    let db = open_database(dir, DATABASE_DIR_NAME, BLOCK_CACHE_BYTES, STORAGE_WORKER_THREADS)?;
    let log = db.keyspace(LOG_KEYSPACE, keyspace_options)?;
    let streams = db.keyspace(STREAMS_KEYSPACE, keyspace_options)?;
    let meta = db.keyspace(META_KEYSPACE, KeyspaceCreateOptions::default)?;
    check_format(&meta)?;
    // NOTE: the key index has a database of its own so that ingesting one of its tables, which
    // holds the database's journal while it syncs the table (about 20 ms), never holds the
    // journal the log's appends commit through (decision 0142).
    let keys_db =
        open_database(dir, KEYS_DATABASE_DIR_NAME, KEYS_BLOCK_CACHE_BYTES, KEYS_STORAGE_WORKER_THREADS)?;
    let keys = keys_db.keyspace(KEYS_KEYSPACE, keys_keyspace_options)?;
    crate::priority::lower_engine_threads(
        STORAGE_NICE_INCREMENT,
        STORAGE_WORKER_THREADS + KEYS_STORAGE_WORKER_THREADS,
    );
    Ok(Databases { db, log, streams, keys_db, keys })
}

/// Opens one of the store's databases, folder `name` of the store `dir`, once its version files
/// are checked, with a block cache of `cache_bytes` and `workers` background threads.
fn open_database(dir: &Path, name: &str, cache_bytes: u64, workers: usize) -> Result<Database, LogError> {
    let folder = dir.join(name);
    crate::version_files::check(dir, &folder)?;
    Database::builder(folder)
        .cache_size(cache_bytes)
        .max_journaling_size(JOURNAL_BYTES_MAX)
        .worker_threads(workers)
        .open()
        .map_err(|error| match error {
            fjall::Error::Locked => LogError::Locked { path: dir.to_path_buf() },
            other => LogError::Storage(other),
        })
}

/// Creates an empty store's databases in `dir` (the temporary directory a new store is built in)
/// and makes them durable, so that the store is complete when it is renamed into place. The store's
/// lock is already held there, and is handed to the open that follows the rename.
pub(crate) fn create_database(dir: &Path) -> Result<(), LogError> {
    let databases = open_databases(dir)?;
    databases.db.persist(fjall::PersistMode::SyncAll)?;
    databases.keys_db.persist(fjall::PersistMode::SyncAll)?;
    Ok(())
}

fn check_format(meta: &Keyspace) -> Result<(), LogError> {
    match meta.get(FORMAT_KEY)? {
        None => {
            meta.insert(FORMAT_KEY, ENVELOPE_FORMAT_VERSION.to_be_bytes())?;
            Ok(())
        }
        Some(value) if value.as_ref() == ENVELOPE_FORMAT_VERSION.to_be_bytes() => Ok(()),
        Some(value) => Err(LogError::UnsupportedStoreFormat {
            found: hex::encode(value.as_ref()),
            supported: ENVELOPE_FORMAT_VERSION,
        }),
    }
}
