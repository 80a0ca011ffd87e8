//! The single writer: it owns appends, folds everything queued into one batch and one persist
//! (group commit), and only then acknowledges each caller. A group commit decides every request
//! (`decide`), writes and syncs the batch (`commit`), answers the callers (`answer`), and then
//! stages the group's keys for the key index (`key_index/`), while the callers prepare their next.

use std::collections::HashMap;
use std::sync::Arc;

use crossbeam_channel::Receiver;
use fjall::{OwnedWriteBatch, PersistMode};
use mnemo_core::{Position, StreamId, StreamRevision, TimestampMs};
use tracing::{debug_span, error};

use crate::backend::{
    AppendOutcome, AppendRequest, Appended, Durability, NewRecord, RevisionConflict, StreamHead,
};
use crate::clock::Clock;
use crate::envelope::{HASH_BYTES, UnsealedEnvelope};
use crate::error::LogError;
use crate::high_water::{HighWater, HighWaterFile};
use crate::key_index::{Decision, KeyIndex};
use crate::keys;
use crate::limits::{GROUP_BYTES_MAX, GROUP_REQUESTS_MAX, HEAD_CACHE_STREAMS_MAX};
use crate::reply::Reply;
use crate::shared::Shared;

/// One queued append and where to send its outcome.
pub(crate) struct Pending {
    pub request: AppendRequest,
    pub reply: Reply,
}

/// What the writer knows of the log's end; only the writer thread touches it.
pub(crate) struct WriterState {
    pub next_position: Position,
    pub last_hash: [u8; HASH_BYTES],
    pub last_timestamp: TimestampMs,
    pub heads: HashMap<StreamId, StreamHead>,
    pub clock: Arc<dyn Clock>,
    /// Where each durable group's last position is recorded (see `high_water.rs`).
    pub high_water: Option<HighWaterFile>,
    /// Every envelope up to here is on disk: the last group persisted with `SyncData` or `SyncAll`
    /// ended here (`Position::ZERO` until one is).
    pub synced_through: Position,
}

impl WriterState {
    /// The position of the last envelope appended (`Position::ZERO` for an empty log).
    pub(crate) fn head(&self) -> Position {
        Position(self.next_position.0 - 1)
    }

    /// Whether every envelope appended is on disk already (so an ingestion need not sync the log).
    fn head_is_synced(&self) -> bool {
        self.head() <= self.synced_through
    }
}

/// The writer thread's loop: runs until every sender is dropped. `keys_complete`: the key index
/// holds the keys of every envelope the log holds.
pub(crate) fn run(
    shared: Arc<Shared>,
    mut state: WriterState,
    keys_complete: bool,
    queue: Receiver<Pending>,
) {
    let mut key_index = KeyIndex::start(&shared, keys_complete, state.head());
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        let mut group_bytes = request_bytes(&group[0].request);
        while group.len() < GROUP_REQUESTS_MAX && group_bytes < GROUP_BYTES_MAX {
            match queue.try_recv() {
                Ok(next) => {
                    group_bytes += request_bytes(&next.request);
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        commit_group(&shared, &mut state, &mut key_index, group);
    }
    key_index.stop(&shared);
    // The store is closing: the staged keys go to the engine now, so the next open need not catch
    // the index up.
    if shared.poison_reason().is_none()
        && let Err(error) = key_index.ingest(&shared, state.head(), state.head_is_synced())
    {
        error!(%error, "the staged keys did not reach the key index; the next open builds them from the log");
    }
    // The store is closing: its last mark goes to the disk now rather than within the interval.
    if let Some(Err(error)) = state.high_water.as_mut().map(HighWaterFile::sync) {
        error!(%error, "the last high-water mark did not reach the disk");
    }
}

fn request_bytes(request: &AppendRequest) -> usize {
    request.records.iter().map(|r| r.bytes.len()).sum()
}

/// The envelopes one request will add, sealed but not yet written.
struct Sealed {
    entries: Vec<(Position, Vec<u8>, StreamRevision)>,
    head: StreamHead,
    last_hash: [u8; HASH_BYTES],
    timestamp: TimestampMs,
}

/// What a group's decisions add up to, before anything is written: each request's outcome in the
/// group's order, and where the log and its streams end once the batch is written.
struct Decided {
    outcomes: Vec<Result<AppendOutcome, LogError>>,
    /// The most durable level asked for by a request appended or answered as a retry (`None`: no
    /// request was either).
    durability: Option<Durability>,
    /// The head of each stream the group appends to.
    heads: HashMap<StreamId, StreamHead>,
    next_position: Position,
    last_hash: [u8; HASH_BYTES],
    last_timestamp: TimestampMs,
}

/// Commits one group in three steps: decides every request, writes and syncs the batch, then
/// answers every caller. A poisoned writer answers the group with its poison, and a write that
/// fails poisons it.
fn commit_group(shared: &Shared, state: &mut WriterState, key_index: &mut KeyIndex, group: Vec<Pending>) {
    let _span = debug_span!("append_group", requests = group.len()).entered();
    if let Some(reason) = shared.poison_reason() {
        for pending in group {
            pending.reply.send(Err(LogError::Poisoned { reason: reason.clone() }));
        }
        return;
    }
    let (batch, decided) = decide(shared, state, key_index, &group);
    if let Err(error) = commit(shared, state, batch, &decided) {
        poison_group(shared, group, &error);
        return;
    }
    answer(shared, state, decided, group);
    key_index.stage(shared, state.head(), state.head_is_synced());
}

/// Decides each request of the group in turn: appended (its envelopes go into the batch), answered
/// as a retry, refused by a key rule, in conflict with its expected revision, or failed. Later
/// requests see what earlier ones appended; nothing is written yet.
fn decide(
    shared: &Shared,
    state: &WriterState,
    key_index: &mut KeyIndex,
    group: &[Pending],
) -> (OwnedWriteBatch, Decided) {
    let mut batch = shared.db.batch();
    let mut decided = Decided {
        outcomes: Vec::with_capacity(group.len()),
        durability: None,
        heads: HashMap::new(),
        next_position: state.next_position,
        last_hash: state.last_hash,
        last_timestamp: state.last_timestamp,
    };
    key_index.start_group();
    let requests: Vec<&AppendRequest> = group.iter().map(|pending| &pending.request).collect();
    for index in 0..requests.len() {
        let outcome = decide_request(shared, state, key_index, &requests, index, &mut batch, &mut decided);
        decided.outcomes.push(outcome);
    }
    (batch, decided)
}

/// Decides `requests[index]` against the log, the key index and the requests before it in the
/// group. When it is appended, its envelopes go into `batch` and `decided` moves past them; a
/// request not appended takes its keys back from the key index.
fn decide_request(
    shared: &Shared,
    state: &WriterState,
    key_index: &mut KeyIndex,
    requests: &[&AppendRequest],
    index: usize,
    batch: &mut OwnedWriteBatch,
    decided: &mut Decided,
) -> Result<AppendOutcome, LogError> {
    let request = requests[index];
    let current = match decided.heads.get(&request.stream) {
        Some(head) => Some(*head),
        None => current_head(shared, state, &request.stream)?,
    };
    let actual = current.map(|head| head.revision);
    let (retried, writes_from) = match key_index.check(shared, requests, index, decided.next_position)? {
        Decision::Go { retried, writes_from } => (retried, writes_from),
        Decision::Refused(refusal) => return Ok(AppendOutcome::Refused(refusal)),
    };
    let originals: Vec<Position> = retried.iter().flatten().copied().collect();
    if originals.len() == request.records.len() {
        // Every record is a retry: answered with where they landed, at the durability asked.
        decided.durability = decided.durability.max(Some(request.durability));
        return Ok(AppendOutcome::Appended(Appended {
            first_position: originals.iter().copied().min().unwrap_or(Position::ZERO),
            last_position: originals.iter().copied().max().unwrap_or(Position::ZERO),
            last_revision: retried_revision(actual),
            retried: count(originals.len()),
        }));
    }
    if !request.expected.matches(actual) {
        key_index.forget(writes_from);
        return Ok(AppendOutcome::Conflict(RevisionConflict { expected: request.expected, actual }));
    }
    let timestamp = decided.last_timestamp.max(request.timestamp.unwrap_or_else(|| state.clock.now()));
    let fresh = request.records.iter().zip(&retried).filter(|(_, r)| r.is_none()).map(|(record, _)| record);
    let sealed =
        match seal(&request.stream, fresh, actual, decided.next_position, decided.last_hash, timestamp) {
            Ok(sealed) => sealed,
            Err(error) => {
                key_index.forget(writes_from);
                return Err(error);
            }
        };
    for (position, bytes, revision) in &sealed.entries {
        // NOTE: the engine copies the value into a buffer of its own, so the envelope's bytes
        // are lent: a clone of them was a second allocation and copy of every envelope.
        batch.insert(&shared.log, position.to_key(), bytes.as_slice());
        batch.insert(&shared.streams, keys::revision_key(&request.stream, *revision), position.to_key());
    }
    batch.insert(&shared.streams, keys::head_key(&request.stream), keys::encode_head(sealed.head));
    let first_position = originals.iter().copied().fold(decided.next_position, Position::min);
    let last_position = originals.iter().copied().fold(sealed.head.position, Position::max);
    decided.heads.insert(request.stream.clone(), sealed.head);
    decided.durability = decided.durability.max(Some(request.durability));
    decided.next_position = sealed.head.position.next();
    decided.last_hash = sealed.last_hash;
    decided.last_timestamp = sealed.timestamp;
    Ok(AppendOutcome::Appended(Appended {
        first_position,
        last_position,
        last_revision: sealed.head.revision,
        retried: count(originals.len()),
    }))
}

/// Writes the group's batch and syncs it as durably as its most demanding request asked, then
/// records how far the log is durable. A failed write is returned and nothing of the group is
/// acknowledged: the writer state, the tail and the mark stay where they were.
fn commit(
    shared: &Shared,
    state: &mut WriterState,
    batch: OwnedWriteBatch,
    decided: &Decided,
) -> Result<(), fjall::Error> {
    let mode = persist_mode(decided.durability);
    if !batch.is_empty() {
        let envelopes = decided.next_position.0 - state.next_position.0;
        let _persist = debug_span!("persist", envelopes).entered();
        batch.durability(mode).commit()?;
    } else if let Some(mode) = mode {
        // Only retries: what they were answered with must be as durable as they asked, and the
        // original may have been appended without waiting for the disk.
        shared.db.persist(mode)?;
    }
    // NOTE: the mark moves only after the batch is durable, so it is never ahead of an intact log,
    // and before callers hear of their append, so every acknowledged durable append is under it.
    let last = Position(decided.next_position.0 - 1);
    if mode.is_some() {
        state.synced_through = last;
    }
    if decided.durability.is_some_and(|d| d != Durability::Buffered)
        && decided.next_position > state.next_position
    {
        record_high_water(shared, state, HighWater { position: last, hash: decided.last_hash });
    }
    Ok(())
}

/// Moves the writer's state and the log's tail past the group just committed, then answers each
/// caller with its outcome, in the group's order.
fn answer(shared: &Shared, state: &mut WriterState, decided: Decided, group: Vec<Pending>) {
    // NOTE: the state and the tail move only after the batch is durable, and callers hear of their
    // append only after that, so an acknowledged append is always readable and persisted.
    state.next_position = decided.next_position;
    state.last_hash = decided.last_hash;
    state.last_timestamp = decided.last_timestamp;
    if state.heads.len() + decided.heads.len() > HEAD_CACHE_STREAMS_MAX {
        state.heads.clear();
    }
    state.heads.extend(decided.heads);
    shared.tail.advance(Position(decided.next_position.0 - 1));
    for (pending, outcome) in group.into_iter().zip(decided.outcomes) {
        pending.reply.send_returning(outcome, pending.request);
    }
}

fn persist_mode(durability: Option<Durability>) -> Option<PersistMode> {
    match durability {
        Some(Durability::SyncAll) => Some(PersistMode::SyncAll),
        Some(Durability::SyncData) => Some(PersistMode::SyncData),
        Some(Durability::Buffered) | None => None,
    }
}

/// Answers the whole group with the failed write's cause and poisons the writer.
fn poison_group(shared: &Shared, group: Vec<Pending>, error: &fjall::Error) {
    let reason = shared.failure_reason(error);
    error!(%reason, "log write failed; the writer is poisoned until the store is reopened");
    shared.poison(reason.clone());
    for pending in group {
        pending.reply.send(Err(LogError::Poisoned { reason: reason.clone() }));
    }
}

/// The revision a request's stream is at when every record of it was a retry: where the stream is.
fn retried_revision(actual: Option<StreamRevision>) -> StreamRevision {
    // A retried record is in this very stream (the holder's stream is compared), so the stream
    // exists; `FIRST` is never reached.
    actual.unwrap_or(StreamRevision::FIRST)
}

fn count(records: usize) -> u32 {
    // An append holds at most APPEND_RECORDS_MAX records, far below u32::MAX.
    u32::try_from(records).unwrap_or(u32::MAX)
}

/// Records a durable group's last position. The group itself is durable whatever happens here, so
/// its callers are answered as committed; a failure poisons the writer for the appends after it.
fn record_high_water(shared: &Shared, state: &mut WriterState, mark: HighWater) {
    let Some(file) = state.high_water.as_mut() else { return };
    if let Err(error) = file.write(mark, false) {
        let reason = format!("the batch up to position {} is durable, but {error}", mark.position);
        error!(%reason, "the high-water mark did not move; the writer is poisoned until the store is reopened");
        shared.poison(reason);
    }
}

fn current_head(
    shared: &Shared,
    state: &WriterState,
    stream: &StreamId,
) -> Result<Option<StreamHead>, LogError> {
    if let Some(head) = state.heads.get(stream) {
        return Ok(Some(*head));
    }
    shared.stream_head(stream)
}

/// Seals the envelopes of a request's new `records`, the first at `first_position`, chained on
/// from `previous_hash`.
fn seal<'a>(
    stream: &StreamId,
    records: impl Iterator<Item = &'a NewRecord>,
    actual: Option<StreamRevision>,
    first_position: Position,
    previous_hash: [u8; HASH_BYTES],
    timestamp: TimestampMs,
) -> Result<Sealed, LogError> {
    let mut entries = Vec::new();
    let mut position = first_position;
    let mut revision = actual.map_or(StreamRevision::FIRST, StreamRevision::next);
    let mut last_hash = previous_hash;
    for record in records {
        let unsealed = UnsealedEnvelope {
            position,
            stream,
            revision,
            kind: record.kind,
            kind_schema: record.kind_schema,
            timestamp,
            record: &record.bytes,
            previous_hash: last_hash,
        };
        let (bytes, hash) =
            unsealed.seal().map_err(|e| LogError::InvalidAppend(format!("record does not encode: {e}")))?;
        entries.push((position, bytes, revision));
        last_hash = hash;
        position = position.next();
        revision = revision.next();
    }
    if entries.is_empty() {
        return Err(LogError::InvalidAppend("an append needs at least one record".to_owned()));
    }
    let head = StreamHead { revision: StreamRevision(revision.0 - 1), position: Position(position.0 - 1) };
    Ok(Sealed { head, entries, last_hash, timestamp })
}
