//! Keys and values of the `streams` keyspace.
//!
//! - `r` + stream id + `0x00` + revision (u64 BE) -> position (u64 BE): one entry per envelope.
//! - `h` + stream id -> revision (u64 BE) + position (u64 BE): the stream's head.
//!
//! Stream ids never contain control characters, so the `0x00` separator keeps one stream's
//! revisions contiguous and in numeric order.

use mnemo_core::{Position, StreamId, StreamRevision};

use crate::backend::StreamHead;

const REVISION_TAG: u8 = b'r';
const HEAD_TAG: u8 = b'h';

pub(crate) fn revision_prefix(stream: &StreamId) -> Vec<u8> {
    let mut key = Vec::with_capacity(stream.as_str().len() + 2);
    key.push(REVISION_TAG);
    key.extend_from_slice(stream.as_str().as_bytes());
    key.push(0);
    key
}

pub(crate) fn revision_key(stream: &StreamId, revision: StreamRevision) -> Vec<u8> {
    let mut key = revision_prefix(stream);
    key.extend_from_slice(&revision.0.to_be_bytes());
    key
}

pub(crate) fn head_key(stream: &StreamId) -> Vec<u8> {
    let mut key = Vec::with_capacity(stream.as_str().len() + 1);
    key.push(HEAD_TAG);
    key.extend_from_slice(stream.as_str().as_bytes());
    key
}

pub(crate) fn encode_head(head: StreamHead) -> [u8; 16] {
    let mut value = [0; 16];
    value[..8].copy_from_slice(&head.revision.0.to_be_bytes());
    value[8..].copy_from_slice(&head.position.0.to_be_bytes());
    value
}

pub(crate) fn decode_head(value: &[u8]) -> Option<StreamHead> {
    let revision: [u8; 8] = value.get(..8)?.try_into().ok()?;
    let position: [u8; 8] = value.get(8..16)?.try_into().ok()?;
    (value.len() == 16).then(|| StreamHead {
        revision: StreamRevision(u64::from_be_bytes(revision)),
        position: Position(u64::from_be_bytes(position)),
    })
}
