//! The host's index of the shared log, folded from the JetStream stream by the follower: which
//! message holds which positions and which stream revisions, each stream's head, the newest
//! envelopes, and the message ids of recent appends.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mnemo_core::{Digest, RuleRef};
use mnemo_core::{Position, StreamId, StreamRevision, TimestampMs};
use mnemo_log::{
    ChainVerifier, CorruptionKind, Envelope, GENESIS_HASH, HASH_BYTES, KeyRulesOf, LogError, StreamHead,
};

use crate::limits::{RECENT_ENVELOPES_MAX, RECENT_MESSAGE_IDS_MAX};

/// Where one JetStream message sits in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// The message's JetStream stream sequence.
    pub sequence: u64,
    /// Its first envelope's position.
    pub first: Position,
    /// Its last envelope's position.
    pub last: Position,
    /// The stream revision of its first envelope.
    pub first_revision: StreamRevision,
    /// The stream revision of its last envelope.
    pub last_revision: StreamRevision,
}

/// A key of the key index and the record holding it (see `mnemo_core::KeyRule`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldKey {
    pub position: Position,
    /// The claimed value (empty but for a claim).
    pub value: Vec<u8>,
    /// For an identity key: the holder's fingerprint, to tell a retry from a conflict.
    pub fingerprint: Option<Digest>,
}

/// What makes two records the same record: stream, kind, schema and bytes.
pub(crate) fn fingerprint(stream: &StreamId, kind: u16, kind_schema: u16, bytes: &[u8]) -> Digest {
    let mut framed = Vec::with_capacity(stream.as_str().len() + 5 + bytes.len());
    framed.extend_from_slice(stream.as_str().as_bytes());
    framed.push(0);
    framed.extend_from_slice(&kind.to_le_bytes());
    framed.extend_from_slice(&kind_schema.to_le_bytes());
    framed.extend_from_slice(bytes);
    Digest::sha256(&framed)
}

/// One Mnemo stream's messages, in order.
#[derive(Debug, Default)]
pub(crate) struct StreamSpans {
    pub spans: Vec<Span>,
}

impl StreamSpans {
    pub(crate) fn head(&self) -> Option<(StreamHead, u64)> {
        self.spans
            .last()
            .map(|span| (StreamHead { revision: span.last_revision, position: span.last }, span.sequence))
    }
}

/// What the follower has folded.
#[derive(Debug)]
pub(crate) struct Index {
    /// The last JetStream sequence folded (0: none).
    pub sequence: u64,
    /// The last position folded.
    pub head: Position,
    pub last_hash: [u8; HASH_BYTES],
    pub last_timestamp: TimestampMs,
    /// Every message, in sequence (and so position) order.
    pub spans: Vec<Span>,
    pub streams: HashMap<StreamId, StreamSpans>,
    /// The newest envelopes, oldest first.
    pub recent: VecDeque<Arc<Envelope>>,
    /// Message ids of the newest messages, with their sequence, and the order they arrived in.
    message_ids: HashMap<String, u64>,
    message_id_order: VecDeque<String>,
    /// The key index of every folded envelope (the embedded log keeps it on disk; here every host
    /// folds it from the shared stream).
    pub keys: HashMap<Vec<u8>, HeldKey>,
    /// How an envelope's keys are learned.
    pub key_rules_of: Option<KeyRulesOf>,
    /// Set when the stream held something that is not a valid continuation of the log; the
    /// follower stops and every read reports it.
    pub failure: Option<String>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            sequence: 0,
            head: Position::ZERO,
            last_hash: GENESIS_HASH,
            last_timestamp: TimestampMs(0),
            spans: Vec::new(),
            streams: HashMap::new(),
            recent: VecDeque::new(),
            message_ids: HashMap::new(),
            message_id_order: VecDeque::new(),
            keys: HashMap::new(),
            key_rules_of: None,
            failure: None,
        }
    }
}

impl Index {
    pub(crate) fn head(&self) -> Position {
        self.head
    }

    /// Folds the message at `sequence`, checking that it continues the log: the next sequence, the
    /// next position, linked to the previous hash, the next revision of its stream. Nothing is folded
    /// from a message that fails.
    pub(crate) fn fold(
        &mut self,
        sequence: u64,
        message_id: Option<String>,
        envelopes: Vec<Envelope>,
    ) -> Result<(), LogError> {
        let (Some(first), Some(last)) = (envelopes.first(), envelopes.last()) else {
            return Err(self.misfit(sequence, "holds no envelope".to_owned()));
        };
        if sequence != self.sequence + 1 {
            return Err(LogError::Corrupt {
                position: self.head().next(),
                kind: CorruptionKind::MissingPosition { before: self.head(), after: first.position },
            });
        }
        let stream_head =
            self.streams.get(&first.stream).and_then(StreamSpans::head).map(|(h, _)| h.revision);
        let expected_revision = stream_head.map_or(StreamRevision::FIRST, StreamRevision::next);
        if first.revision != expected_revision {
            return Err(self.misfit(
                sequence,
                format!("{} revision {} does not follow {:?}", first.stream, first.revision, stream_head),
            ));
        }
        let mut chain = ChainVerifier::new(self.head(), self.last_hash);
        for envelope in &envelopes {
            chain.check(envelope)?;
        }
        let span = Span {
            sequence,
            first: first.position,
            last: last.position,
            first_revision: first.revision,
            last_revision: last.revision,
        };
        self.head = last.position;
        self.last_hash = last.hash;
        self.last_timestamp = self.last_timestamp.max(last.timestamp);
        self.sequence = sequence;
        self.spans.push(span);
        self.streams.entry(first.stream.clone()).or_default().spans.push(span);
        if let Some(id) = message_id {
            self.remember_message_id(id, sequence);
        }
        for envelope in envelopes {
            self.fold_keys(&envelope);
            if self.recent.len() == RECENT_ENVELOPES_MAX {
                self.recent.pop_front();
            }
            self.recent.push_back(Arc::new(envelope));
        }
        Ok(())
    }

    /// Indexes an envelope's keys; the first holder of a key keeps it.
    fn fold_keys(&mut self, envelope: &Envelope) {
        let Some(rules_of) = self.key_rules_of else { return };
        for rule in &rules_of(envelope.kind, envelope.kind_schema, &envelope.record) {
            let (value, fingerprint) = match rule {
                RuleRef::Identity(_) => (
                    Vec::new(),
                    Some(fingerprint(
                        &envelope.stream,
                        envelope.kind,
                        envelope.kind_schema,
                        &envelope.record,
                    )),
                ),
                RuleRef::Claim { value, .. } => (value.to_vec(), None),
                RuleRef::Unique(_) => (Vec::new(), None),
                _ => continue,
            };
            self.keys.entry(rule.key().to_vec()).or_insert(HeldKey {
                position: envelope.position,
                value,
                fingerprint,
            });
        }
    }

    fn misfit(&self, sequence: u64, detail: String) -> LogError {
        LogError::Corrupt {
            position: self.head().next(),
            kind: CorruptionKind::Undecodable(format!("JetStream message {sequence} {detail}")),
        }
    }

    fn remember_message_id(&mut self, id: String, sequence: u64) {
        if self.message_id_order.len() == RECENT_MESSAGE_IDS_MAX
            && let Some(oldest) = self.message_id_order.pop_front()
        {
            self.message_ids.remove(&oldest);
        }
        self.message_id_order.push_back(id.clone());
        self.message_ids.insert(id, sequence);
    }

    /// The span of the message whose id is `id`, if it is among the recent ones.
    pub(crate) fn span_of_message_id(&self, id: &str) -> Option<Span> {
        self.message_ids.get(id).and_then(|sequence| self.span_of_sequence(*sequence))
    }

    pub(crate) fn span_of_sequence(&self, sequence: u64) -> Option<Span> {
        let at = self.spans.partition_point(|span| span.sequence < sequence);
        self.spans.get(at).filter(|span| span.sequence == sequence).copied()
    }

    /// The span of the message holding `position`.
    pub(crate) fn span_of_position(&self, position: Position) -> Option<Span> {
        let at = self.spans.partition_point(|span| span.last < position);
        self.spans.get(at).filter(|span| span.first <= position).copied()
    }

    /// The envelopes from `from` to the head, if the recent window still holds `from`.
    pub(crate) fn recent_from(&self, from: Position) -> Option<Vec<Envelope>> {
        let oldest = self.recent.front()?.position;
        if from < oldest {
            return None;
        }
        let skip = usize::try_from(from.0 - oldest.0).ok()?;
        Some(self.recent.iter().skip(skip).map(|e| Envelope::clone(e)).collect())
    }

    pub(crate) fn recent_at(&self, position: Position) -> Option<Envelope> {
        let oldest = self.recent.front()?.position;
        let at = usize::try_from(position.0.checked_sub(oldest.0)?).ok()?;
        self.recent.get(at).map(|e| Envelope::clone(e))
    }
}

/// The index with a condition variable that followers of the head wait on.
#[derive(Debug, Default)]
pub(crate) struct SharedIndex {
    index: Mutex<Index>,
    moved: Condvar,
}

impl SharedIndex {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every waiter; call after folding or failing.
    pub(crate) fn notify(&self) {
        self.moved.notify_all();
    }

    /// Waits until `done` holds of the index or `timeout` passes (or the follower failed); returns
    /// the guard either way.
    pub(crate) fn wait_until(
        &self,
        timeout: Duration,
        done: impl Fn(&Index) -> bool,
    ) -> MutexGuard<'_, Index> {
        let deadline = Instant::now() + timeout;
        let mut index = self.lock();
        while !done(&index) && index.failure.is_none() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            index = self.moved.wait_timeout(index, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        index
    }
}
