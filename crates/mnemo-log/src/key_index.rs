//! The key index beside the log: the keys records claim ([`KeyRule`]), each pointing at the
//! position of the record that holds it, written by the writer in the same batch as the envelopes.
//! An append's rules are decided here against the index, the keys of earlier requests of the same
//! group commit and of earlier records of the same request; a lookup is one point read, so the
//! check costs the same however long the log grows.
//!
//! Keys of the `keys` keyspace:
//! - `k` + record key -> position (u64 BE) of the record holding it, then the claimed value's
//!   bytes (empty but for a [`KeyRule::Claim`]);
//! - `m` -> position (u64 BE): the index holds the keys of every envelope up to here (an index
//!   behind the log's head is built from the log when the store opens).

use std::collections::HashMap;

use mnemo_core::{KeyRule, Position, StreamId, StreamRevision};

use crate::backend::{AppendRequest, KeyRefusal, NewRecord};
use crate::error::{CorruptionKind, LogError};
use crate::fjall_log::Shared;

/// The keyspace of the key index.
pub const KEYS_KEYSPACE: &str = "keys";

const KEY_TAG: u8 = b'k';
const MARK_KEY: &[u8] = b"m";

/// Keys the index catch-up writes per batch.
const CATCH_UP_BATCH_KEYS: usize = 4096;

/// How the log learns the rules of an envelope it did not append itself: an index built for a store
/// written before the index existed, or a salvaged store's. `mnemo-core` supplies it.
pub type KeyRulesOf = fn(kind: u16, kind_schema: u16, bytes: &[u8]) -> Vec<KeyRule>;

/// The record an identity key stands for, to tell a retry from a conflict.
#[derive(Debug, Clone)]
pub(crate) struct Holder {
    stream: StreamId,
    kind: u16,
    kind_schema: u16,
    bytes: Vec<u8>,
}

/// A key written by a request of the group not yet committed.
#[derive(Debug, Clone)]
pub(crate) struct PendingKey {
    position: Position,
    value: Vec<u8>,
    /// For an identity key, the record holding it.
    holder: Option<Holder>,
}

impl PendingKey {
    /// The key index value: the position, then the claimed value.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut value = Vec::with_capacity(8 + self.value.len());
        value.extend_from_slice(&self.position.to_key());
        value.extend_from_slice(&self.value);
        value
    }
}

/// Keys written by the group so far.
pub(crate) type GroupKeys = HashMap<Vec<u8>, PendingKey>;

/// What the index says of a request.
pub(crate) enum Decision {
    /// Per record, where it already is when it is a retry (`None`: a new record), and the keys the
    /// new records write, in order.
    Go { retried: Vec<Option<Position>>, writes: Vec<(Vec<u8>, PendingKey)> },
    /// A rule is broken; nothing of the request is appended.
    Refused(KeyRefusal),
}

/// A key as held: by a record of this group or request, or in the committed index.
enum Held {
    Pending(PendingKey),
    Logged { position: Position, value: Vec<u8> },
}

impl Held {
    fn position(&self) -> Position {
        match self {
            Held::Pending(pending) => pending.position,
            Held::Logged { position, .. } => *position,
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            Held::Pending(pending) => &pending.value,
            Held::Logged { value, .. } => value,
        }
    }

    /// Whether the holder is the same record as `record` on `stream`.
    fn is_record(&self, shared: &Shared, stream: &StreamId, record: &NewRecord) -> Result<bool, LogError> {
        let same = |s: &StreamId, kind: u16, schema: u16, bytes: &[u8]| {
            s == stream && kind == record.kind && schema == record.kind_schema && bytes == record.bytes
        };
        match self {
            Held::Pending(PendingKey { holder: Some(h), .. }) => {
                Ok(same(&h.stream, h.kind, h.kind_schema, &h.bytes))
            }
            Held::Pending(PendingKey { holder: None, .. }) => Ok(false),
            Held::Logged { position, .. } => {
                let envelope = shared.read(*position)?.ok_or_else(|| LogError::Corrupt {
                    position: *position,
                    kind: CorruptionKind::StreamIndex(
                        "the key index points at a missing envelope".to_owned(),
                    ),
                })?;
                Ok(same(&envelope.stream, envelope.kind, envelope.kind_schema, &envelope.record))
            }
        }
    }
}

pub(crate) fn framed(key: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(key.len() + 1);
    framed.push(KEY_TAG);
    framed.extend_from_slice(key);
    framed
}

pub(crate) fn mark_key() -> &'static [u8] {
    MARK_KEY
}

/// Looks keys up through the request's own writes, the group's, then the committed index.
struct Lookup<'a> {
    shared: &'a Shared,
    group: &'a GroupKeys,
    request: HashMap<Vec<u8>, PendingKey>,
    order: Vec<Vec<u8>>,
}

impl Lookup<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Held>, LogError> {
        if let Some(pending) = self.request.get(key).or_else(|| self.group.get(key)) {
            return Ok(Some(Held::Pending(pending.clone())));
        }
        logged(self.shared, key)
    }

    fn write(&mut self, key: &[u8], pending: PendingKey) {
        if self.request.insert(key.to_vec(), pending).is_none() {
            self.order.push(key.to_vec());
        }
    }
}

/// Decides a request's rules. `first_position` is where its first new record will land.
pub(crate) fn decide(
    shared: &Shared,
    group: &GroupKeys,
    request: &AppendRequest,
    first_position: Position,
) -> Result<Decision, LogError> {
    let mut lookup = Lookup { shared, group, request: HashMap::new(), order: Vec::new() };
    let mut retried = Vec::with_capacity(request.records.len());
    let mut next = first_position;
    for (index, record) in request.records.iter().enumerate() {
        let refuse = |rule: &KeyRule, held: Option<&Held>| {
            Decision::Refused(KeyRefusal {
                record: index,
                rule: rule.clone(),
                held_at: held.map(Held::position),
            })
        };
        let mut original = None;
        for rule in &record.rules {
            let KeyRule::Identity(key) = rule else { continue };
            let Some(held) = lookup.get(key)? else { continue };
            if !held.is_record(shared, &request.stream, record)? {
                return Ok(refuse(rule, Some(&held)));
            }
            original = Some(held.position());
            break;
        }
        if original.is_some() {
            retried.push(original);
            continue;
        }
        for rule in &record.rules {
            let held = lookup.get(rule.key())?;
            let write = match (rule, &held) {
                (KeyRule::Identity(_), _) => Some(Vec::new()),
                (KeyRule::Claim { value, .. }, None) => Some(value.clone()),
                (KeyRule::Claim { value, .. }, Some(held)) if held.value() == value.as_slice() => None,
                (KeyRule::Unique(_), None) => Some(Vec::new()),
                (KeyRule::Requires(_), Some(_)) | (KeyRule::Forbids(_), None) => None,
                (KeyRule::Claim { .. } | KeyRule::Unique(_) | KeyRule::Forbids(_), Some(held)) => {
                    return Ok(refuse(rule, Some(held)));
                }
                (KeyRule::Requires(_), None) => return Ok(refuse(rule, None)),
                // A rule this build does not know refuses rather than passing unchecked.
                (_, held) => return Ok(refuse(rule, held.as_ref())),
            };
            if let Some(value) = write {
                let holder = matches!(rule, KeyRule::Identity(_)).then(|| Holder {
                    stream: request.stream.clone(),
                    kind: record.kind,
                    kind_schema: record.kind_schema,
                    bytes: record.bytes.clone(),
                });
                lookup.write(rule.key(), PendingKey { position: next, value, holder });
            }
        }
        next = next.next();
        retried.push(None);
    }
    let Lookup { mut request, order, .. } = lookup;
    let writes = order.into_iter().filter_map(|key| request.remove(&key).map(|p| (key, p))).collect();
    Ok(Decision::Go { retried, writes })
}

fn logged(shared: &Shared, key: &[u8]) -> Result<Option<Held>, LogError> {
    match shared.keys.get(framed(key))? {
        None => Ok(None),
        Some(value) => {
            let position = decode_position(&value)?;
            Ok(Some(Held::Logged { position, value: value[8..].to_vec() }))
        }
    }
}

/// The position of the record holding `key` in the committed index.
pub(crate) fn holder(shared: &Shared, key: &[u8]) -> Result<Option<Position>, LogError> {
    Ok(logged(shared, key)?.map(|held| held.position()))
}

/// The committed index's entry for `key`.
pub(crate) fn held_key(shared: &Shared, key: &[u8]) -> Result<Option<crate::backend::HeldKey>, LogError> {
    Ok(logged(shared, key)?.and_then(|held| match held {
        Held::Logged { position, value } => Some(crate::backend::HeldKey { position, value }),
        Held::Pending(_) => None,
    }))
}

fn decode_position(value: &[u8]) -> Result<Position, LogError> {
    value.get(..8).and_then(Position::from_key).ok_or_else(|| LogError::Corrupt {
        position: Position::ZERO,
        kind: CorruptionKind::StreamIndex(format!("a key index value of {} bytes", value.len())),
    })
}

/// Where the index is complete to (`Position::ZERO` for an index never written).
fn mark(shared: &Shared) -> Result<Position, LogError> {
    match shared.keys.get(MARK_KEY)? {
        None => Ok(Position::ZERO),
        Some(value) => decode_position(&value),
    }
}

/// Brings the index up to the log's `head` when it is behind (a store written before the index
/// existed, or a salvaged one), from the envelopes' own rules. Returns whether the index is
/// complete, which it cannot be without `rules_of`; the writer then leaves the mark alone.
pub(crate) fn catch_up(
    shared: &Shared,
    head: Position,
    rules_of: Option<KeyRulesOf>,
) -> Result<bool, LogError> {
    let from = mark(shared)?;
    if from >= head {
        return Ok(true);
    }
    let Some(rules_of) = rules_of else { return Ok(false) };
    let _span = tracing::info_span!("key_index_catch_up", from = from.0, head = head.0).entered();
    let mut batch = shared.db.batch();
    let mut written: HashMap<Vec<u8>, Position> = HashMap::new();
    let mut position = from.next();
    while position <= head {
        let envelope = shared.read(position)?.ok_or(LogError::Corrupt {
            position,
            kind: CorruptionKind::MissingPosition { before: Position(position.0 - 1), after: head },
        })?;
        for rule in rules_of(envelope.kind, envelope.kind_schema, &envelope.record) {
            let value = match &rule {
                KeyRule::Identity(_) | KeyRule::Unique(_) => Vec::new(),
                KeyRule::Claim { value, .. } => value.clone(),
                _ => continue,
            };
            // The first holder keeps a key: a store written before the index may hold a retry
            // twice, and the original is the one every later retry is answered with.
            let key = rule.key();
            if !written.contains_key(key) && logged(shared, key)?.is_none() {
                let pending = PendingKey { position, value, holder: None };
                batch.insert(&shared.keys, framed(key), pending.encode());
                written.insert(key.to_vec(), position);
            }
        }
        if written.len() >= CATCH_UP_BATCH_KEYS || position == head {
            batch.insert(&shared.keys, MARK_KEY, position.to_key());
            batch.commit()?;
            batch = shared.db.batch();
            written.clear();
        }
        position = position.next();
    }
    Ok(true)
}

/// Checks the index beside a verified log: every entry reads (so a damaged table is found) and
/// points into the log, and every envelope up to the index's mark holds its keys at or before its
/// own position (a key's first holder keeps it). Returns the first damage found.
pub(crate) fn verify(shared: &Shared, head: Position, rules_of: Option<KeyRulesOf>) -> Result<(), LogError> {
    let damaged = |position: Position, what: String| LogError::Corrupt {
        position,
        kind: CorruptionKind::StreamIndex(format!("key index: {what}")),
    };
    for guard in shared.keys.iter() {
        let (key, value) = guard.into_inner()?;
        let position = decode_position(&value)?;
        if position > head {
            return Err(damaged(
                position,
                format!("{:?} points beyond the log's head {head}", String::from_utf8_lossy(&key)),
            ));
        }
    }
    let Some(rules_of) = rules_of else { return Ok(()) };
    let mark = mark(shared)?.min(head);
    let mut position = Position::FIRST;
    while position <= mark {
        let envelope = shared.read(position)?.ok_or(LogError::Corrupt {
            position,
            kind: CorruptionKind::MissingPosition { before: Position(position.0 - 1), after: mark },
        })?;
        for rule in rules_of(envelope.kind, envelope.kind_schema, &envelope.record) {
            if !matches!(rule, KeyRule::Identity(_) | KeyRule::Claim { .. } | KeyRule::Unique(_)) {
                continue;
            }
            let held = holder(shared, rule.key())?;
            if held.is_none_or(|held| held > position) {
                let key = String::from_utf8_lossy(rule.key()).into_owned();
                return Err(damaged(position, format!("{key:?} is held at {held:?}")));
            }
        }
        position = position.next();
    }
    Ok(())
}

/// Drops the whole index and builds it again from the log, for a store filled by copying envelopes
/// verbatim (salvage), whose retries were copied as they are. Nothing may append meanwhile.
pub(crate) fn rebuild(shared: &Shared, head: Position, rules_of: KeyRulesOf) -> Result<(), LogError> {
    let mut batch = shared.db.batch();
    for guard in shared.keys.iter() {
        let key = guard.key()?;
        batch.remove(&shared.keys, key);
    }
    batch.commit()?;
    catch_up(shared, head, Some(rules_of)).map(|_| ())
}

/// The revision a request's stream is at when every record of it was a retry: where the stream is.
pub(crate) fn retried_revision(actual: Option<StreamRevision>) -> StreamRevision {
    // A retried record is in this very stream (the holder's stream is compared), so the stream
    // exists; `FIRST` is never reached.
    actual.unwrap_or(StreamRevision::FIRST)
}
