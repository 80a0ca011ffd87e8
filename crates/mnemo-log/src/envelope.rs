//! The envelope: the unit of the log, and its one fixed binary encoding.
//!
//! An envelope is encoded with bincode 2 in a single, documented configuration (little endian,
//! fixed-width integers, lengths as `u64`); `docs/FORMAT.md` lists every byte. The envelope's own
//! hash is the last field and covers every byte before it, so checking an envelope needs no
//! re-encoding: `hash == SHA-256(encoded[..len - 32])`.

use bincode::{Decode, Encode};
use mnemo_core::{Position, StreamId, StreamRevision, TimestampMs};
use sha2::{Digest as _, Sha256};

use crate::error::CorruptionKind;
use crate::limits::ENVELOPE_BYTES_MAX;

/// The version of the envelope encoding described in `docs/FORMAT.md`.
pub const ENVELOPE_FORMAT_VERSION: u16 = 1;

/// Bytes of a SHA-256 hash.
pub const HASH_BYTES: usize = 32;

/// The hash that the first envelope names as its predecessor.
pub const GENESIS_HASH: [u8; HASH_BYTES] = [0; HASH_BYTES];

/// The one bincode configuration of the log. Changing it changes the format version.
const CONFIG: bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Fixint,
    bincode::config::Limit<ENVELOPE_BYTES_MAX>,
> = bincode::config::standard()
    .with_little_endian()
    .with_fixed_int_encoding()
    .with_limit::<ENVELOPE_BYTES_MAX>();

/// One record in the log, with its place in the log and in its stream, and its link in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Global position in the log (the first envelope is at 1).
    pub position: Position,
    /// The stream the record belongs to.
    pub stream: StreamId,
    /// The record's revision within its stream (the first is 0).
    pub revision: StreamRevision,
    /// What kind of record the payload is (a code owned by `mnemo-core`).
    pub kind: u16,
    /// The version of that kind's payload schema.
    pub kind_schema: u16,
    /// When the writer appended it, from the log's clock.
    pub timestamp: TimestampMs,
    /// The encoded record.
    pub record: Vec<u8>,
    /// The previous envelope's hash ([`GENESIS_HASH`] for position 1).
    pub previous_hash: [u8; HASH_BYTES],
    /// SHA-256 over every encoded byte of this envelope before this field.
    pub hash: [u8; HASH_BYTES],
}

/// The wire shape: field order here is the byte order on disk.
#[derive(Encode, Decode)]
struct WireEnvelope {
    format_version: u16,
    position: u64,
    stream: String,
    revision: u64,
    kind: u16,
    kind_schema: u16,
    timestamp_ms: u64,
    record: Vec<u8>,
    previous_hash: [u8; HASH_BYTES],
    hash: [u8; HASH_BYTES],
}

/// The fields of an envelope before it is sealed with its hash.
#[derive(Debug, Clone)]
pub(crate) struct UnsealedEnvelope<'a> {
    pub position: Position,
    pub stream: &'a StreamId,
    pub revision: StreamRevision,
    pub kind: u16,
    pub kind_schema: u16,
    pub timestamp: TimestampMs,
    pub record: &'a [u8],
    pub previous_hash: [u8; HASH_BYTES],
}

impl UnsealedEnvelope<'_> {
    /// Encodes the envelope and computes its hash. Returns the sealed bytes and the hash.
    pub(crate) fn seal(&self) -> Result<(Vec<u8>, [u8; HASH_BYTES]), bincode::error::EncodeError> {
        let wire = WireEnvelope {
            format_version: ENVELOPE_FORMAT_VERSION,
            position: self.position.0,
            stream: self.stream.as_str().to_owned(),
            revision: self.revision.0,
            kind: self.kind,
            kind_schema: self.kind_schema,
            timestamp_ms: self.timestamp.0,
            record: self.record.to_vec(),
            previous_hash: self.previous_hash,
            hash: [0; HASH_BYTES],
        };
        let mut bytes = bincode::encode_to_vec(&wire, CONFIG)?;
        let body_len = bytes.len() - HASH_BYTES;
        let hash: [u8; HASH_BYTES] = Sha256::digest(&bytes[..body_len]).into();
        bytes[body_len..].copy_from_slice(&hash);
        Ok((bytes, hash))
    }
}

/// The fields of a new envelope, for a log backend other than fjall to seal: the position, stream
/// revision, timestamp and previous hash are the backend's to assign, exactly as the fjall writer does.
#[derive(Debug, Clone)]
pub struct EnvelopeDraft {
    /// Global position.
    pub position: Position,
    /// The stream.
    pub stream: StreamId,
    /// Revision within the stream.
    pub revision: StreamRevision,
    /// Record kind code.
    pub kind: u16,
    /// The kind's payload schema version.
    pub kind_schema: u16,
    /// Append time.
    pub timestamp: TimestampMs,
    /// The encoded record.
    pub record: Vec<u8>,
    /// The hash of the envelope at `position - 1` ([`GENESIS_HASH`] for position 1).
    pub previous_hash: [u8; HASH_BYTES],
}

impl EnvelopeDraft {
    /// Encodes the envelope and computes its hash: the sealed envelope and its stored bytes.
    pub fn seal(self) -> Result<(Envelope, Vec<u8>), CorruptionKind> {
        let unsealed = UnsealedEnvelope {
            position: self.position,
            stream: &self.stream,
            revision: self.revision,
            kind: self.kind,
            kind_schema: self.kind_schema,
            timestamp: self.timestamp,
            record: &self.record,
            previous_hash: self.previous_hash,
        };
        let (bytes, hash) = unsealed.seal().map_err(|e| CorruptionKind::Undecodable(e.to_string()))?;
        let envelope = Envelope {
            position: self.position,
            stream: self.stream,
            revision: self.revision,
            kind: self.kind,
            kind_schema: self.kind_schema,
            timestamp: self.timestamp,
            record: self.record,
            previous_hash: self.previous_hash,
            hash,
        };
        Ok((envelope, bytes))
    }
}

impl Envelope {
    /// Decodes and checks one stored envelope: exact length, known format version, valid stream id,
    /// and a hash that matches its bytes. It does not check the link to the previous envelope.
    pub fn decode(bytes: &[u8]) -> Result<Envelope, CorruptionKind> {
        let (wire, read): (WireEnvelope, usize) = bincode::decode_from_slice(bytes, CONFIG)
            .map_err(|e| CorruptionKind::Undecodable(e.to_string()))?;
        if read != bytes.len() {
            return Err(CorruptionKind::TrailingBytes { extra: bytes.len() - read });
        }
        if wire.format_version != ENVELOPE_FORMAT_VERSION {
            return Err(CorruptionKind::UnknownFormatVersion(wire.format_version));
        }
        let body_len = bytes.len() - HASH_BYTES;
        let computed: [u8; HASH_BYTES] = Sha256::digest(&bytes[..body_len]).into();
        if computed != wire.hash {
            return Err(CorruptionKind::HashMismatch);
        }
        let stream = StreamId::new(wire.stream).map_err(|e| CorruptionKind::InvalidStream(e.to_string()))?;
        Ok(Envelope {
            position: Position(wire.position),
            stream,
            revision: StreamRevision(wire.revision),
            kind: wire.kind,
            kind_schema: wire.kind_schema,
            timestamp: TimestampMs(wire.timestamp_ms),
            record: wire.record,
            previous_hash: wire.previous_hash,
            hash: wire.hash,
        })
    }

    /// The envelope's bytes exactly as stored.
    pub fn encode(&self) -> Vec<u8> {
        let unsealed = UnsealedEnvelope {
            position: self.position,
            stream: &self.stream,
            revision: self.revision,
            kind: self.kind,
            kind_schema: self.kind_schema,
            timestamp: self.timestamp,
            record: &self.record,
            previous_hash: self.previous_hash,
        };
        // Encoding a well-formed envelope into a Vec cannot fail: every field has a fixed encoding
        // and the size was checked when it was appended.
        match unsealed.seal() {
            Ok((bytes, _)) => bytes,
            Err(_) => Vec::new(),
        }
    }

    /// The hash as lowercase hex.
    pub fn hash_hex(&self) -> String {
        hex::encode(self.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<u8>, [u8; 32]) {
        let stream = StreamId::new("session/s1").unwrap();
        UnsealedEnvelope {
            position: Position(1),
            stream: &stream,
            revision: StreamRevision(0),
            kind: 4,
            kind_schema: 1,
            timestamp: TimestampMs(1_767_225_600_000),
            record: b"{}",
            previous_hash: GENESIS_HASH,
        }
        .seal()
        .unwrap()
    }

    #[test]
    fn sealed_envelopes_decode_and_round_trip() {
        let (bytes, hash) = sample();
        let envelope = Envelope::decode(&bytes).unwrap();
        assert_eq!(envelope.hash, hash);
        assert_eq!(envelope.position, Position(1));
        assert_eq!(envelope.record, b"{}");
        assert_eq!(envelope.encode(), bytes);
    }

    #[test]
    fn layout_matches_format_doc() {
        let (bytes, _) = sample();
        // 2 format + 8 position + (8 + 10) stream + 8 revision + 2 kind + 2 schema + 8 timestamp
        // + (8 + 2) record + 32 previous hash + 32 hash
        assert_eq!(bytes.len(), 2 + 8 + 18 + 8 + 2 + 2 + 8 + 10 + 32 + 32);
        assert_eq!(&bytes[0..2], &1u16.to_le_bytes());
        assert_eq!(&bytes[2..10], &1u64.to_le_bytes());
        assert_eq!(&bytes[10..18], &10u64.to_le_bytes());
        assert_eq!(&bytes[18..28], b"session/s1");
    }

    #[test]
    fn any_flipped_byte_is_detected() {
        let (bytes, _) = sample();
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            assert!(Envelope::decode(&damaged).is_err(), "flip at byte {at} went unnoticed");
        }
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let (mut bytes, _) = sample();
        bytes.push(0);
        assert!(Envelope::decode(&bytes).is_err());
    }
}
