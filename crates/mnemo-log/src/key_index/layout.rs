//! How the index lies in its `keys` keyspace, and the fingerprint that keys it.
//!
//! Keys of the `keys` keyspace, in the index's own database (the store's `keys` folder, beside
//! the log's `db`), so that ingesting a table never holds the journal the log's appends commit
//! through (decision 0142):
//! - `h` + the record key's fingerprint (its xxh3 128-bit hash, 16 bytes BE) -> position (u64 BE)
//!   of the record holding it, then the claimed value's bytes (empty but for a
//!   [`KeyRule::Claim`](mnemo_core::KeyRule::Claim));
//! - `m` -> position (u64 BE): the index holds the keys of every envelope up to here (an index
//!   behind the log's head is built from the log when the store opens).
//!
//! NOTE: the index is keyed by fingerprints rather than the record keys themselves (decision 0142):
//! record keys of one session share a long prefix, and the memtable compares every key it inserts
//! with about twenty others, so short keys that differ in their first bytes halve the cost of
//! writing a group's keys. Two record keys share a fingerprint with a chance below 10⁻³⁰ among a
//! billion keys; a retry is still told by comparing the holder's record itself.

use mnemo_core::Position;

use crate::error::{CorruptionKind, LogError};

const KEY_TAG: u8 = b'h';
pub(super) const MARK_KEY: &[u8] = b"m";
/// A `keys` keyspace key of a record key: the tag, then the fingerprint.
const FRAMED_BYTES: usize = 1 + 16;

/// Adds the `keys` keyspace's value for a key held at `position` with `claimed` to `buffer`.
pub(super) fn encode_value_into(buffer: &mut Vec<u8>, position: Position, claimed: &[u8]) {
    buffer.extend_from_slice(&position.to_key());
    buffer.extend_from_slice(claimed);
}

pub(super) fn encode_value(position: Position, claimed: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + claimed.len());
    encode_value_into(&mut value, position, claimed);
    value
}

/// The `keys` keyspace's key for a record key of fingerprint `print`.
pub(super) fn framed_print(print: Fingerprint) -> [u8; FRAMED_BYTES] {
    let mut framed = [KEY_TAG; FRAMED_BYTES];
    framed[1..].copy_from_slice(&print.to_be_bytes());
    framed
}

/// The `keys` keyspace's key for a record key.
pub(super) fn framed(key: &[u8]) -> Vec<u8> {
    framed_print(fingerprint(key)).to_vec()
}

/// The record key's fingerprint a `keys` keyspace key holds, or `None` for the mark.
pub(super) fn framed_fingerprint(framed: &[u8]) -> Option<Fingerprint> {
    let print = framed.strip_prefix(&[KEY_TAG])?;
    Some(Fingerprint::from_be_bytes(print.try_into().ok()?))
}

/// A key's fingerprint in a group's map: its xxh3 128-bit hash (two keys of a group share one
/// with a chance below 10⁻³⁰).
pub(super) type Fingerprint = u128;

pub(super) fn fingerprint(key: &[u8]) -> Fingerprint {
    xxhash_rust::xxh3::xxh3_128(key)
}

pub(super) fn decode_position(value: &[u8]) -> Result<Position, LogError> {
    value.get(..8).and_then(Position::from_key).ok_or_else(|| LogError::Corrupt {
        position: Position::ZERO,
        kind: CorruptionKind::StreamIndex(format!("a key index value of {} bytes", value.len())),
    })
}
