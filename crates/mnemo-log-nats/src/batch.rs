//! The body of one JetStream message: the envelopes of one append, in order.
//!
//! Layout (little endian): `u16` batch format version, `u32` envelope count, then per envelope a
//! `u32` byte length and the envelope's bytes exactly as `mnemo-log` encodes them (the same bytes
//! fjall stores under the envelope's position). `docs/FORMAT.md` describes it.

use mnemo_core::Position;
use mnemo_log::{CorruptionKind, Envelope, LogError};

/// The version of the message body layout.
pub const BATCH_FORMAT_VERSION: u16 = 1;

const HEADER_BYTES: usize = 2 + 4;

/// Encodes sealed envelope bytes as one message body.
pub(crate) fn encode(envelopes: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = envelopes.iter().map(|e| 4 + e.len()).sum();
    let mut body = Vec::with_capacity(HEADER_BYTES + total);
    body.extend_from_slice(&BATCH_FORMAT_VERSION.to_le_bytes());
    // Counts and lengths fit: an append holds at most APPEND_RECORDS_MAX records of at most
    // RECORD_BYTES_MAX bytes, both far below u32::MAX.
    body.extend_from_slice(&u32::try_from(envelopes.len()).unwrap_or(u32::MAX).to_le_bytes());
    for envelope in envelopes {
        body.extend_from_slice(&u32::try_from(envelope.len()).unwrap_or(u32::MAX).to_le_bytes());
        body.extend_from_slice(envelope);
    }
    body
}

/// Decodes and checks a message body: every envelope decodes and verifies its own hash, and the
/// envelopes are consecutive and linked. `sequence` names the message in errors.
pub(crate) fn decode(body: &[u8], sequence: u64) -> Result<Vec<Envelope>, LogError> {
    let corrupt = |detail: String| LogError::Corrupt {
        position: Position::ZERO,
        kind: CorruptionKind::Undecodable(format!("JetStream message {sequence}: {detail}")),
    };
    let mut reader = Reader { bytes: body, at: 0 };
    let version = reader.u16().ok_or_else(|| corrupt("no batch header".to_owned()))?;
    if version != BATCH_FORMAT_VERSION {
        return Err(corrupt(format!("unknown batch format version {version}")));
    }
    let count = reader.u32().ok_or_else(|| corrupt("no envelope count".to_owned()))?;
    if count == 0 {
        return Err(corrupt("an empty batch".to_owned()));
    }
    let mut envelopes: Vec<Envelope> = Vec::new();
    for index in 0..count {
        let bytes = reader.chunk().ok_or_else(|| corrupt(format!("envelope {index} is cut short")))?;
        let envelope =
            Envelope::decode(bytes).map_err(|kind| LogError::Corrupt { position: Position::ZERO, kind })?;
        if let Some(previous) = envelopes.last() {
            let linked = envelope.position == previous.position.next()
                && envelope.previous_hash == previous.hash
                && envelope.stream == previous.stream
                && envelope.revision == previous.revision.next();
            if !linked {
                return Err(LogError::Corrupt {
                    position: envelope.position,
                    kind: CorruptionKind::BrokenLink { previous: previous.position },
                });
            }
        }
        envelopes.push(envelope);
    }
    if reader.at != body.len() {
        return Err(corrupt(format!("{} bytes follow the last envelope", body.len() - reader.at)));
    }
    Ok(envelopes)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(len)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).and_then(|b| b.try_into().ok()).map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)
    }

    fn chunk(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u32()?).ok()?;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use mnemo_core::{StreamId, StreamRevision, TimestampMs};
    use mnemo_log::{EnvelopeDraft, GENESIS_HASH};

    use super::*;

    fn sealed(count: u64) -> Vec<Vec<u8>> {
        let stream = StreamId::new("session/s1").unwrap();
        let mut previous_hash = GENESIS_HASH;
        (0..count)
            .map(|i| {
                let (envelope, bytes) = EnvelopeDraft {
                    position: Position(i + 1),
                    stream: stream.clone(),
                    revision: StreamRevision(i),
                    kind: 4,
                    kind_schema: 1,
                    timestamp: TimestampMs(5),
                    record: vec![7; 3],
                    previous_hash,
                }
                .seal()
                .unwrap();
                previous_hash = envelope.hash;
                bytes
            })
            .collect()
    }

    #[test]
    fn batches_round_trip() {
        let body = encode(&sealed(3));
        let envelopes = decode(&body, 1).unwrap();
        assert_eq!(envelopes.iter().map(|e| e.position.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(&body[..6], &[1, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn damaged_batches_are_refused() {
        let body = encode(&sealed(2));
        for cut in 0..body.len() {
            assert!(decode(&body[..cut], 1).is_err(), "a body cut at {cut} decoded");
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode(&longer, 1).is_err());
        let mut swapped = sealed(2);
        swapped.swap(0, 1);
        assert!(decode(&encode(&swapped), 1).is_err(), "out-of-order envelopes decoded");
    }
}
