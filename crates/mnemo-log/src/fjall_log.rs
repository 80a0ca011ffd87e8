//! The embedded log on fjall: opening and recovery, reads, and the handle that queues appends
//! for the writer thread.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use fjall::Database;
use mnemo_core::{Position, StreamId, StreamRevision, TimestampMs};
use tracing::{debug_span, info};

use crate::backend::{AppendOutcome, AppendRequest, EnvelopeIter, HeldKey, LogBackend, StreamHead};
use crate::clock::{Clock, SystemClock};
use crate::databases;
use crate::envelope::{Envelope, GENESIS_HASH, HASH_BYTES};
use crate::error::{CorruptionKind, LogError, LostRange};
use crate::high_water::{HighWater, HighWaterFile};
use crate::key_index::{self, KeyRulesOf};
use crate::keys;
use crate::limits::{
    KEY_INDEX_WAIT_MAX, READ_ENVELOPES_MAX, RECOVERY_VERIFY_ENVELOPES_MAX, SCAN_CHUNK_ENVELOPES,
    WRITER_QUEUE_DEPTH_MAX,
};
use crate::reply::PendingAppend;
use crate::shared::{Shared, decode_at};
use crate::store_dir;
use crate::store_lock::StoreLock;
use crate::verify::ChainVerifier;
use crate::writer::{self, Pending, WriterState};

/// The file that lists the losses of acknowledged envelopes the store's owner accepted.
pub const ACCEPTED_LOSS_FILE_NAME: &str = "accepted-losses";

/// How to open a log.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Where append timestamps come from.
    pub clock: Arc<dyn Clock>,
    /// Whether opening verifies the hash chain of the newest envelopes and refuses a broken log.
    /// Only `mnemo verify` turns it off, so that it can report on a damaged log. With it off, a log
    /// that lost acknowledged envelopes opens for reading only ([`FjallLog::lost`] says what is lost).
    pub verify_tail_on_open: bool,
    /// The lost range the owner accepts: when the log has lost exactly these acknowledged envelopes,
    /// the open records the acceptance, lowers the high-water mark to the log's head and proceeds.
    pub accept_loss: Option<LostRange>,
    /// The key rules of an envelope, for building the key index of envelopes appended before it
    /// existed. Without it such an index stays incomplete (appends still check what it holds).
    pub key_rules_of: Option<KeyRulesOf>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            clock: Arc::new(SystemClock),
            verify_tail_on_open: true,
            accept_loss: None,
            key_rules_of: None,
        }
    }
}

/// The embedded, durable log of one store directory.
///
/// Dropping it stops the writer after it has answered every queued append.
#[derive(Debug)]
pub struct FjallLog {
    shared: Arc<Shared>,
    dir: PathBuf,
    queue: Option<Sender<Pending>>,
    writer: Option<JoinHandle<()>>,
    lost: Option<LostRange>,
    accepted: Option<LostRange>,
    /// How the key index learns an envelope's keys, to verify it.
    key_rules_of: Option<KeyRulesOf>,
    // Held for the life of the handle, released when it is dropped.
    _lock: StoreLock,
}

impl FjallLog {
    /// Opens (or creates) the log in `dir`, recovering and checking its tail.
    pub fn open(dir: &Path, options: LogOptions) -> Result<FjallLog, LogError> {
        let _span = debug_span!("open_log", dir = %dir.display()).entered();
        FjallLog::open_inner(dir, options).map_err(|error| match error {
            LogError::Storage(error) => LogError::store_access(dir, LogError::storage(dir, error)),
            other => LogError::store_access(dir, other),
        })
    }

    /// As [`FjallLog::open`], with the storage engine's refusal as it is (salvage looks at it).
    pub(crate) fn open_inner(dir: &Path, options: LogOptions) -> Result<FjallLog, LogError> {
        // A store this open created is opened under the lock its creation took: letting it go to
        // take it again would leave a moment in which another process could hold it.
        let lock = match store_dir::ensure_store(dir, &databases::create_database)? {
            Some(lock) => lock,
            None => StoreLock::acquire(dir)?,
        };
        let shared = Arc::new(Shared::new(dir, databases::open_databases(dir)?));
        let mut state = recover(&shared, &options)?;
        let head = state.head();
        let (high_water, check) = check_high_water(dir, &shared, &state, &options)?;
        let (lost, accepted) = match check {
            HighWaterCheck::Reached => (None, None),
            HighWaterCheck::Lost(lost) => (Some(lost), None),
            HighWaterCheck::Accepted(lost) => (None, Some(lost)),
        };
        state.high_water = Some(high_water);
        // A log open only to be verified or salvaged is not written to: its index stays as it is.
        let mut keys_complete = false;
        if lost.is_none() && options.verify_tail_on_open {
            key_index::drop_from_log_database(&shared.db)?;
            keys_complete = key_index::catch_up(&shared, head, options.key_rules_of)?;
        }
        if let Some(lost) = lost {
            // Read-only until the owner decides: nothing may be appended after a hole.
            shared.poison(format!(
                "acknowledged envelopes {lost} are lost; the store is open for reading only"
            ));
        }
        shared.tail.advance(head);
        shared.keys_indexed.advance(head);
        info!(head = head.0, "log opened");

        let (queue, requests) = crossbeam_channel::bounded(WRITER_QUEUE_DEPTH_MAX);
        let writer_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("mnemo-log-writer".to_owned())
            .spawn(move || writer::run(writer_shared, state, keys_complete, requests))
            .map_err(|e| LogError::io("cannot start the log writer thread", e))?;
        Ok(FjallLog {
            shared,
            dir: dir.to_path_buf(),
            queue: Some(queue),
            writer: Some(writer),
            lost,
            accepted,
            key_rules_of: options.key_rules_of,
            _lock: lock,
        })
    }

    /// Waits until the key index holds the keys of every envelope up to `head`: the writer
    /// indexes a group's keys just after acknowledging it.
    fn wait_for_key_index(&self, head: Position) -> Result<(), LogError> {
        // A writer that fails to index a group poisons the store instead of moving on: the wait
        // looks for that between short waits.
        let deadline = std::time::Instant::now() + KEY_INDEX_WAIT_MAX;
        loop {
            if self.shared.keys_indexed.wait_for(head, Duration::from_millis(50)) >= head {
                return Ok(());
            }
            if let Some(reason) = self.shared.poison_reason() {
                return Err(LogError::Poisoned { reason });
            }
            if std::time::Instant::now() >= deadline {
                let reason =
                    format!("the key index stayed behind the log's head {head} for {KEY_INDEX_WAIT_MAX:?}");
                return Err(LogError::Poisoned { reason });
            }
        }
    }

    /// Whether the key filter built when the log opened is ready: appends from the next group on
    /// learn that a key is absent without reading the key index (see `key_index/filter.rs`). Until
    /// then they read the index, with the same answers.
    pub fn key_filter_ready(&self) -> bool {
        let generation = self.shared.keys_rewritten.load(Ordering::Acquire);
        self.shared.key_filter_scanned.load(Ordering::Acquire) == generation + 1
    }

    /// The acknowledged envelopes this log lost, when it was opened without the tail check (to be
    /// verified or salvaged) and found shorter than its high-water mark; it then refuses appends.
    pub fn lost(&self) -> Option<LostRange> {
        self.lost
    }

    /// The loss of acknowledged envelopes this open accepted ([`LogOptions::accept_loss`]), if any.
    pub fn accepted_loss(&self) -> Option<LostRange> {
        self.accepted
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The fjall database, so that projections can keep their keyspaces beside the log and write
    /// them atomically with their watermarks.
    pub fn database(&self) -> &Database {
        &self.shared.db
    }

    /// The key index's own database (its `keys` keyspace is the index; see `key_index/`).
    pub fn key_database(&self) -> &Database {
        &self.shared.keys_db
    }

    /// Drops the key index and builds it again from the log with `rules_of`: for a store filled by
    /// copying envelopes verbatim (a salvage), retries and all. Nothing may append meanwhile.
    pub fn rebuild_key_index(&self, rules_of: KeyRulesOf) -> Result<(), LogError> {
        key_index::rebuild(&self.shared, self.head(), rules_of)
    }

    /// Queues an append and returns at once; [`PendingAppend::wait`] gives its outcome.
    /// Limits are checked here, before anything is queued.
    pub fn submit(&self, request: AppendRequest) -> Result<PendingAppend, LogError> {
        request.check()?;
        if let Some(reason) = self.shared.poison_reason() {
            return Err(LogError::Poisoned { reason });
        }
        let (reply, outcome) = crate::reply::reply_pair();
        let queue = self.queue.as_ref().ok_or(LogError::Closed)?;
        queue.send(Pending { request, reply }).map_err(|_| LogError::Closed)?;
        Ok(outcome)
    }

    fn check_stream_index(&self, envelope: &Envelope) -> Result<(), LogError> {
        let indexed = self.shared.streams.get(keys::revision_key(&envelope.stream, envelope.revision))?;
        let indexed = indexed.as_deref().and_then(Position::from_key);
        if indexed != Some(envelope.position) {
            return Err(LogError::Corrupt {
                position: envelope.position,
                kind: CorruptionKind::StreamIndex(format!(
                    "{} revision {} is indexed at {:?}",
                    envelope.stream, envelope.revision, indexed
                )),
            });
        }
        Ok(())
    }
}

impl LogBackend for FjallLog {
    fn append(&self, request: AppendRequest) -> Result<AppendOutcome, LogError> {
        self.submit(request)?.wait()
    }

    fn head(&self) -> Position {
        self.shared.tail.head()
    }

    fn background_work(&self) -> usize {
        let (db, keys_db) = (&self.shared.db, &self.shared.keys_db);
        db.outstanding_flushes()
            + db.active_compactions()
            + keys_db.outstanding_flushes()
            + keys_db.active_compactions()
    }

    fn read(&self, position: Position) -> Result<Option<Envelope>, LogError> {
        if position > self.head() {
            return Ok(None);
        }
        self.shared.read(position).map_err(|error| match error {
            LogError::Storage(error) => LogError::storage(&self.dir, error),
            other => other,
        })
    }

    fn scan(&self, from: Position) -> EnvelopeIter {
        // Reading only up to the acknowledged head keeps a scan from seeing a batch that is
        // written but not yet persisted and acknowledged.
        Box::new(ChunkedScan {
            shared: Arc::clone(&self.shared),
            dir: self.dir.clone(),
            next: from.max(Position::FIRST),
            head: self.head(),
            chunk: std::collections::VecDeque::new(),
            failed: false,
        })
    }

    fn read_stream(
        &self,
        stream: &StreamId,
        from: StreamRevision,
        limit: usize,
    ) -> Result<Vec<Envelope>, LogError> {
        let limit = limit.min(READ_ENVELOPES_MAX);
        let head = self.head();
        let start = keys::revision_key(stream, from);
        let end = keys::revision_key(stream, StreamRevision(u64::MAX));
        let mut envelopes = Vec::new();
        for guard in self.shared.streams.range(start..=end) {
            if envelopes.len() >= limit {
                break;
            }
            let (_, value) = guard.into_inner()?;
            let position = Position::from_key(&value).ok_or_else(|| LogError::Corrupt {
                position: Position::ZERO,
                kind: CorruptionKind::StreamIndex(format!("{stream} index value of {} bytes", value.len())),
            })?;
            if position > head {
                break;
            }
            let envelope = self.shared.read(position)?.ok_or(LogError::Corrupt {
                position,
                kind: CorruptionKind::StreamIndex(format!("{stream} points at a missing envelope")),
            })?;
            envelopes.push(envelope);
        }
        Ok(envelopes)
    }

    fn stream_head(&self, stream: &StreamId) -> Result<Option<StreamHead>, LogError> {
        self.shared.stream_head(stream)
    }

    fn held_key(&self, key: &[u8]) -> Result<Option<HeldKey>, LogError> {
        let head = self.head();
        self.wait_for_key_index(head)?;
        Ok(key_index::held_key(&self.shared, key)?.filter(|held| held.position <= head))
    }

    fn wait_for(&self, position: Position, timeout: Duration) -> Position {
        self.shared.tail.wait_for(position, timeout)
    }

    /// Checks the whole hash chain and the stream and key indexes beside it, reporting progress as it goes.
    /// Returns the number of envelopes checked, or the first damage found.
    fn verify_chain(&self, progress: &mut dyn FnMut(Position)) -> Result<u64, LogError> {
        let mut verifier = ChainVerifier::new(Position::ZERO, GENESIS_HASH);
        for envelope in self.scan(Position::FIRST) {
            let envelope = envelope?;
            verifier.check(&envelope)?;
            self.check_stream_index(&envelope)?;
            progress(envelope.position);
        }
        // NOTE: the key index has a database of its own, so a log that lost acknowledged envelopes
        // may have an index that kept their keys: entries in the lost range are that loss, which
        // the caller reports, not damage of the index's own.
        let head = verifier.last_position();
        let reach = self.lost.map_or(head, |lost| lost.last);
        key_index::verify(&self.shared, head, reach, self.key_rules_of)?;
        Ok(verifier.checked())
    }
}

impl Drop for FjallLog {
    fn drop(&mut self) {
        // Closing the queue lets the writer drain what is queued and stop.
        self.queue = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// A scan of the log from a position to the head as it was when the scan began, read in chunks
/// of [`SCAN_CHUNK_ENVELOPES`], each through its own short-lived storage iterator.
///
/// A storage iterator pins a snapshot, and while any snapshot is open the engine keeps every
/// later version of every keyspace, with the memtables they reference: one iterator held for a
/// whole rebuild kept everything the stages wrote in memory until the rebuild ended.
struct ChunkedScan {
    shared: Arc<Shared>,
    dir: PathBuf,
    next: Position,
    head: Position,
    chunk: std::collections::VecDeque<Result<Envelope, LogError>>,
    failed: bool,
}

impl ChunkedScan {
    fn read_chunk(&mut self) {
        let last = Position(self.head.0.min(self.next.0.saturating_add(SCAN_CHUNK_ENVELOPES - 1)));
        for guard in self.shared.log.range(self.next.to_key()..=last.to_key()) {
            let entry =
                guard.into_inner().map_err(|e| LogError::storage(&self.dir, e)).and_then(|(key, value)| {
                    let position = Position::from_key(&key).ok_or_else(|| LogError::Corrupt {
                        position: Position::ZERO,
                        kind: CorruptionKind::Undecodable(format!("log key of {} bytes", key.len())),
                    })?;
                    decode_at(position, &value)
                });
            let failed = entry.is_err();
            self.chunk.push_back(entry);
            if failed {
                break;
            }
        }
        self.next = last.next();
    }
}

impl Iterator for ChunkedScan {
    type Item = Result<Envelope, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.chunk.is_empty() && !self.failed && self.next <= self.head {
            self.read_chunk();
        }
        let entry = self.chunk.pop_front()?;
        // A scan ends at the first error: what follows a damaged envelope is not read.
        if entry.is_err() {
            self.failed = true;
            self.chunk.clear();
        }
        Some(entry)
    }
}

/// Compares the recovered log with its high-water mark. A log shorter than its mark lost acknowledged
/// envelopes: refused, unless the tail check is off (the log then opens read-only and reports the
/// loss) or the owner accepts exactly that loss (the mark is lowered to the head and the acceptance
/// recorded). A log that reaches its mark must hold the acknowledged envelope there.
fn check_high_water(
    dir: &Path,
    shared: &Shared,
    state: &WriterState,
    options: &LogOptions,
) -> Result<(HighWaterFile, HighWaterCheck), LogError> {
    let head = HighWater { position: state.head(), hash: state.last_hash };
    let (mut file, mark) = HighWaterFile::open(dir, head)?;
    if mark.position <= head.position {
        if options.verify_tail_on_open && mark.position > Position::ZERO {
            let acknowledged = shared.read(mark.position)?;
            if acknowledged.is_none_or(|envelope| envelope.hash != mark.hash) {
                return Err(LogError::Corrupt {
                    position: mark.position,
                    kind: CorruptionKind::NotAcknowledgedEnvelope,
                });
            }
        }
        return Ok((file, HighWaterCheck::Reached));
    }
    let lost = LostRange { first: head.position.next(), last: mark.position };
    if options.accept_loss == Some(lost) {
        // NOTE: before the mark is lowered, so that a crash in between leaves the loss to be
        // accepted again rather than an index that answers for envelopes the log no longer holds.
        let forgotten = key_index::forget_past(shared, head.position)?;
        if forgotten > 0 {
            tracing::warn!(forgotten, %lost, "the key index forgot the keys of the lost envelopes");
        }
        record_accepted_loss(dir, lost, head.position)?;
        file.write(head, true)?;
        tracing::warn!(%lost, "acknowledged envelopes accepted as lost");
        return Ok((file, HighWaterCheck::Accepted(lost)));
    }
    if options.verify_tail_on_open {
        return Err(LogError::AcknowledgedLost { head: head.position, lost });
    }
    Ok((file, HighWaterCheck::Lost(lost)))
}

/// What the open found of the log against its high-water mark.
enum HighWaterCheck {
    /// The log reaches its mark.
    Reached,
    /// The log lost these acknowledged envelopes (opened read-only, for verify or salvage).
    Lost(LostRange),
    /// The log lost these, and the owner accepted it.
    Accepted(LostRange),
}

/// Appends a line to the store's record of accepted losses, so that the store keeps saying what it
/// once lost after its mark is lowered.
fn record_accepted_loss(dir: &Path, lost: LostRange, head: Position) -> Result<(), LogError> {
    use std::io::Write;
    let path = dir.join(ACCEPTED_LOSS_FILE_NAME);
    let io = |e| LogError::io(format!("cannot record the accepted loss in {}", path.display()), e);
    let mut file = File::options()
        .append(true)
        .create(true)
        .mode(store_dir::PRIVATE_FILE_MODE)
        .open(&path)
        .map_err(io)?;
    writeln!(file, "lost {lost} accepted with the log ending at {head}").map_err(io)?;
    file.sync_all().map_err(io)
}

/// Finds the end of the log and checks the chain of its newest envelopes.
fn recover(shared: &Shared, options: &LogOptions) -> Result<WriterState, LogError> {
    let _span = debug_span!("recover").entered();
    let state =
        |next_position: Position, last_hash: [u8; HASH_BYTES], last_timestamp: TimestampMs| WriterState {
            next_position,
            last_hash,
            last_timestamp,
            heads: Default::default(),
            clock: Arc::clone(&options.clock),
            high_water: None,
            synced_through: Position::ZERO,
        };
    let Some(last) = shared.log.last_key_value() else {
        return Ok(state(Position::FIRST, GENESIS_HASH, TimestampMs(0)));
    };
    let (key, value) = last.into_inner()?;
    let head = Position::from_key(&key).ok_or_else(|| LogError::Corrupt {
        position: Position::ZERO,
        kind: CorruptionKind::Undecodable(format!("log key of {} bytes", key.len())),
    })?;
    let last = match decode_at(head, &value) {
        Ok(envelope) => envelope,
        // Without verification the writer cannot continue the chain, but a reader may still look.
        Err(error) if options.verify_tail_on_open => return Err(error),
        Err(_) => return Ok(state(head.next(), GENESIS_HASH, TimestampMs(0))),
    };
    if options.verify_tail_on_open {
        verify_tail(shared, head)?;
    }
    Ok(state(head.next(), last.hash, last.timestamp))
}

fn verify_tail(shared: &Shared, head: Position) -> Result<(), LogError> {
    let first = Position(head.0.saturating_sub(RECOVERY_VERIFY_ENVELOPES_MAX).max(1));
    let (before, previous_hash) = if first == Position::FIRST {
        (Position::ZERO, GENESIS_HASH)
    } else {
        let before = Position(first.0 - 1);
        let envelope = shared.read(before)?.ok_or(LogError::Corrupt {
            position: before,
            kind: CorruptionKind::MissingPosition {
                before: Position(before.0.saturating_sub(1)),
                after: first,
            },
        })?;
        (before, envelope.hash)
    };
    let mut verifier = ChainVerifier::new(before, previous_hash);
    for guard in shared.log.range(first.to_key()..=head.to_key()) {
        let (key, value) = guard.into_inner()?;
        let position = Position::from_key(&key).unwrap_or(Position::ZERO);
        verifier.check(&decode_at(position, &value)?)?;
    }
    if verifier.last_position() != head {
        return Err(LogError::Corrupt {
            position: head,
            kind: CorruptionKind::MissingPosition { before: verifier.last_position(), after: head },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

    use super::*;

    /// Regression: a closed store's lock stayed held while a process started by another thread
    /// (between its fork and its exec) held a copy of the lock's descriptor, and opening the store
    /// again failed with "store is locked by another process".
    #[test]
    fn a_store_reopens_while_a_child_process_holds_a_copy_of_its_lock_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let log = FjallLog::open(dir.path(), LogOptions::default()).unwrap();
        let mut child = log._lock.child_holding_a_copy();
        drop(log);
        let reopened = FjallLog::open(dir.path(), LogOptions::default());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(reopened.unwrap().head(), Position::ZERO);
    }
}
