//! Checking the hash chain: each envelope's position follows the last, and its previous hash is
//! the last one's hash. Each envelope's own hash was already checked when it was decoded.

use mnemo_core::Position;

use crate::envelope::{Envelope, HASH_BYTES};
use crate::error::{CorruptionKind, LogError};

/// Walks envelopes in position order and checks each link.
#[derive(Debug)]
pub struct ChainVerifier {
    last_position: Position,
    last_hash: [u8; HASH_BYTES],
    checked: u64,
}

impl ChainVerifier {
    /// Starts after `position`, whose hash is `hash` (position 0 and the genesis hash for a whole log).
    pub fn new(position: Position, hash: [u8; HASH_BYTES]) -> Self {
        ChainVerifier { last_position: position, last_hash: hash, checked: 0 }
    }

    /// Checks that `envelope` comes right after the last one and links to it.
    pub fn check(&mut self, envelope: &Envelope) -> Result<(), LogError> {
        let expected = self.last_position.next();
        if envelope.position != expected {
            return Err(LogError::Corrupt {
                position: expected,
                kind: CorruptionKind::MissingPosition {
                    before: self.last_position,
                    after: envelope.position,
                },
            });
        }
        if envelope.previous_hash != self.last_hash {
            return Err(LogError::Corrupt {
                position: envelope.position,
                kind: CorruptionKind::BrokenLink { previous: self.last_position },
            });
        }
        self.last_position = envelope.position;
        self.last_hash = envelope.hash;
        self.checked += 1;
        Ok(())
    }

    /// How many envelopes passed.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The last position that passed.
    pub fn last_position(&self) -> Position {
        self.last_position
    }
}
