//! The state an open log shares between its handle (`FjallLog`), the writer thread, and the key
//! index's threads: the two databases and their keyspaces, how far the log and the key index
//! reach, and whether the writer is poisoned.
//!
//! Who may touch what:
//! - the log's keyspaces (`log`, `streams`) and `tail` are written by the writer thread only, once
//!   the open has recovered the log; anyone reads them, up to the tail's head;
//! - the key index's database and keyspace (`keys_db`, `keys`), the staged keys, `key_ingestion`,
//!   `keys_indexed`, `key_filter_scanned` and `keys_rewritten` are changed by the key index
//!   (`key_index/`) only, on the writer's thread or on threads of its own, once the open has
//!   caught the index up; the handle reads them to answer a reader of the index and to say
//!   whether the key filter is ready;
//! - `poisoned` is set by the open of a log that lost acknowledged envelopes and by whatever fails
//!   to persist (the writer's batch, the high-water mark, the key index's ingestion); everyone
//!   reads it before writing: a poisoned store takes no appends until it is reopened.
//!
//! It is not the log's logic: opening and recovery are in `fjall_log.rs`, the writer in
//! `writer.rs`. Only what needs nothing but this state is here: reading an envelope or a stream's
//! head, and saying why the writer stopped.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use fjall::{Database, Keyspace};
use mnemo_core::{Position, StreamId};

use crate::backend::StreamHead;
use crate::databases::Databases;
use crate::envelope::Envelope;
use crate::error::{CorruptionKind, LogError};
use crate::key_index::staged::StagedKeys;
use crate::keys;
use crate::tail::Tail;

/// State shared by the handle and the writer thread.
pub(crate) struct Shared {
    /// The log's database: the `log` and `streams` keyspaces, and the projections' beside them.
    pub db: Database,
    /// The store directory.
    pub dir: PathBuf,
    pub log: Keyspace,
    pub streams: Keyspace,
    /// The key index's own database, beside the log's (`KEYS_DATABASE_DIR_NAME`).
    pub keys_db: Database,
    /// The key index (see `key_index/`), in `keys_db`.
    pub keys: Keyspace,
    /// The head of the log: the last envelope acknowledged.
    pub tail: Tail,
    /// How far the key index holds the keys the writer appended: the writer indexes a group's keys
    /// just after acknowledging it, so a reader of the index waits for this to reach the head.
    pub keys_indexed: Tail,
    /// The last generation of the key index (see `keys_rewritten`) whose key filter scan finished,
    /// plus one (0: none yet). When it is the current one, the writer's next group looks keys up
    /// through the filter.
    pub key_filter_scanned: AtomicU64,
    /// How many times the key index was rewritten by another thread than the writer's (a rebuild
    /// after salvage): the writer's key filter is then built anew.
    pub keys_rewritten: AtomicU64,
    /// Keys the writer acknowledged and has not yet handed to the `keys` keyspace (see
    /// `key_index/staged.rs`); readers of the index look here first.
    staged_keys: RwLock<StagedKeys>,
    /// Held while staged keys go to the `keys` keyspace, so that dropping the index waits for it.
    key_ingestion: Mutex<()>,
    /// Why the writer stopped taking appends, once a write failed.
    poisoned: Mutex<Option<String>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("head", &self.tail.head()).finish_non_exhaustive()
    }
}

impl Shared {
    /// The state of a store just opened in `dir` on `databases`: an empty log's head and index, not
    /// poisoned, nothing staged. The open moves the heads to the log's once it has recovered it.
    pub(crate) fn new(dir: &Path, databases: Databases) -> Shared {
        let Databases { db, log, streams, keys_db, keys } = databases;
        Shared {
            db,
            dir: dir.to_path_buf(),
            log,
            streams,
            keys_db,
            keys,
            tail: Tail::default(),
            keys_indexed: Tail::default(),
            key_filter_scanned: AtomicU64::new(0),
            keys_rewritten: AtomicU64::new(0),
            staged_keys: RwLock::default(),
            key_ingestion: Mutex::new(()),
            poisoned: Mutex::new(None),
        }
    }

    pub(crate) fn staged_keys(&self) -> RwLockReadGuard<'_, StagedKeys> {
        self.staged_keys.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn staged_keys_mut(&self) -> RwLockWriteGuard<'_, StagedKeys> {
        self.staged_keys.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn key_ingestion(&self) -> MutexGuard<'_, ()> {
        self.key_ingestion.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn poison_reason(&self) -> Option<String> {
        self.poisoned.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(crate) fn poison(&self, reason: String) {
        *self.poisoned.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }

    /// What a failed write tells its callers: the engine says only "poisoned" after its first
    /// failure, which may have been a background flush or a stage's commit, so the system then tells
    /// the cause (a full disk, say).
    pub(crate) fn failure_reason(&self, error: &fjall::Error) -> String {
        let diagnosed =
            crate::error::fault_cause_of(error).is_none().then(|| crate::error::diagnose(&self.dir));
        diagnosed.flatten().unwrap_or_else(|| crate::error::describe(error))
    }

    pub(crate) fn stream_head(&self, stream: &StreamId) -> Result<Option<StreamHead>, LogError> {
        let Some(value) = self.streams.get(keys::head_key(stream))? else {
            return Ok(None);
        };
        keys::decode_head(&value).map(Some).ok_or_else(|| LogError::Corrupt {
            position: Position::ZERO,
            kind: CorruptionKind::StreamIndex(format!("head of {stream} is {} bytes, not 16", value.len())),
        })
    }

    pub(crate) fn read(&self, position: Position) -> Result<Option<Envelope>, LogError> {
        match self.log.get(position.to_key())? {
            Some(bytes) => decode_at(position, &bytes).map(Some),
            None => Ok(None),
        }
    }
}

/// The envelope stored at `position`, checked to say it is there.
pub(crate) fn decode_at(position: Position, bytes: &[u8]) -> Result<Envelope, LogError> {
    let envelope = Envelope::decode(bytes).map_err(|kind| LogError::Corrupt { position, kind })?;
    if envelope.position != position {
        return Err(LogError::Corrupt {
            position,
            kind: CorruptionKind::MisplacedEnvelope { key: position, inner: envelope.position },
        });
    }
    Ok(envelope)
}

/// A store's shared state without its writer, for tests of what the writer decides.
#[cfg(test)]
pub(crate) fn shared_for_tests(dir: &Path) -> Result<std::sync::Arc<Shared>, LogError> {
    Ok(std::sync::Arc::new(Shared::new(dir, crate::databases::open_databases(dir)?)))
}
