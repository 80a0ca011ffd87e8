//! The `LogBackend` trait: what the rest of Mnemo needs of a log, shaped so that a replicated log
//! (NATS JetStream: a per-subject expected sequence, message-id dedup, replay from a sequence) can
//! implement it as well as the embedded fjall log.

use std::time::Duration;

use mnemo_core::limits::{
    APPEND_BYTES_MAX, APPEND_RECORDS_MAX, COPY_BYTES_MAX, COPY_RECORDS_MAX, RECORD_BYTES_MAX,
};
use mnemo_core::{KeyRule, KeyRules, Position, RuleRef, StreamId, StreamRevision, TimestampMs};

use crate::envelope::{Envelope, GENESIS_HASH};
use crate::error::LogError;
use crate::verify::ChainVerifier;

/// How far an append must have reached before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Written to the operating system: survives the process being killed, not a power loss.
    Buffered,
    /// `fdatasync` of the journal: survives a power loss. The default.
    #[default]
    SyncData,
    /// `fsync` of the journal, metadata included.
    SyncAll,
}

/// What the appender believes the stream's current revision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExpectedRevision {
    /// Append whatever the stream's state.
    Any,
    /// The stream must not exist yet.
    NoStream,
    /// The stream's last envelope must have exactly this revision.
    Exact(StreamRevision),
}

impl ExpectedRevision {
    /// Whether a stream whose last revision is `actual` (`None`: no stream) satisfies this expectation.
    pub fn matches(self, actual: Option<StreamRevision>) -> bool {
        match self {
            ExpectedRevision::Any => true,
            ExpectedRevision::NoStream => actual.is_none(),
            ExpectedRevision::Exact(revision) => actual == Some(revision),
        }
    }
}

/// One record to append: its kind code, the kind's schema version, its encoded bytes, and the
/// rules it puts on the log's key index (its identity, among them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    /// The record kind's code (owned by `mnemo-core`).
    pub kind: u16,
    /// The version of that kind's payload schema.
    pub kind_schema: u16,
    /// The encoded record.
    pub bytes: Vec<u8>,
    /// What the record claims in the key index and must find there (`mnemo-core` decides which
    /// keys a record has; the log only checks and writes them).
    pub rules: KeyRules,
}

impl NewRecord {
    /// A record with no key rules.
    pub fn new(kind: u16, kind_schema: u16, bytes: Vec<u8>) -> Self {
        NewRecord { kind, kind_schema, bytes, rules: KeyRules::new() }
    }

    /// The record with `rules` on the key index.
    #[must_use]
    pub fn with_rules(mut self, rules: impl Into<KeyRules>) -> Self {
        self.rules = rules.into();
        self
    }
}

/// An atomic append of one or more records to one stream.
#[derive(Debug, Clone)]
pub struct AppendRequest {
    /// The stream appended to.
    pub stream: StreamId,
    /// The concurrency check.
    pub expected: ExpectedRevision,
    /// The records, appended in order and all or none.
    pub records: Vec<NewRecord>,
    /// How durable the append must be before it is acknowledged.
    pub durability: Durability,
    /// A timestamp to record instead of the clock's, for imports that carry the source's own time
    /// (so that the same source always yields the same log). The writer never lets timestamps run
    /// backwards: it records the larger of this and the previous envelope's timestamp.
    pub timestamp: Option<TimestampMs>,
    /// The batch limits the request is checked against.
    pub limits: BatchLimits,
}

/// Which batch limits an append is checked against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchLimits {
    /// [`APPEND_RECORDS_MAX`] records and [`APPEND_BYTES_MAX`] bytes: every append but a copy's.
    #[default]
    Standard,
    /// [`COPY_RECORDS_MAX`] records and [`COPY_BYTES_MAX`] bytes: the one append of a conversation
    /// copy to its new stream, which is whole or absent whatever the source's length (decision 0147).
    ConversationCopy,
}

impl BatchLimits {
    /// Most records in one append under these limits.
    pub fn records_max(self) -> usize {
        match self {
            BatchLimits::Standard => APPEND_RECORDS_MAX,
            BatchLimits::ConversationCopy => COPY_RECORDS_MAX,
        }
    }

    /// Most bytes of records in one append under these limits.
    pub fn bytes_max(self) -> usize {
        match self {
            BatchLimits::Standard => APPEND_BYTES_MAX,
            BatchLimits::ConversationCopy => COPY_BYTES_MAX,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BatchLimits::Standard => "the limit",
            BatchLimits::ConversationCopy => "a conversation copy's limit",
        }
    }
}

impl AppendRequest {
    /// An append of `records` to `stream` with the default durability and the clock's time.
    pub fn new(stream: StreamId, expected: ExpectedRevision, records: Vec<NewRecord>) -> Self {
        AppendRequest {
            stream,
            expected,
            records,
            durability: Durability::default(),
            timestamp: None,
            limits: BatchLimits::Standard,
        }
    }

    /// Checks the request against the append limits; every backend calls it before anything is sent.
    pub fn check(&self) -> Result<(), LogError> {
        let count = self.records.len();
        if count == 0 {
            return Err(LogError::InvalidAppend("an append needs at least one record".to_owned()));
        }
        let (records_max, bytes_max, limit) =
            (self.limits.records_max(), self.limits.bytes_max(), self.limits.name());
        if count > records_max {
            return Err(LogError::InvalidAppend(format!("{count} records, {limit} is {records_max}")));
        }
        let mut total = 0;
        for (index, record) in self.records.iter().enumerate() {
            if record.bytes.len() > RECORD_BYTES_MAX {
                return Err(LogError::InvalidAppend(format!(
                    "record {index} is {} bytes, the limit is {RECORD_BYTES_MAX}",
                    record.bytes.len()
                )));
            }
            if record.kind == 0 {
                return Err(LogError::InvalidAppend(format!("record {index} has kind 0, which is reserved")));
            }
            total += record.bytes.len();
        }
        if total > bytes_max {
            return Err(LogError::InvalidAppend(format!("{total} bytes of records, {limit} is {bytes_max}")));
        }
        Ok(())
    }
}

/// Where an acknowledged append landed.
///
/// A record whose identity the log already holds with the same bytes (a retry) is not appended
/// again: it is answered with the original's position. The positions span every record of the
/// request, new or retried, so a request that was wholly a retry is answered with where it landed
/// the first time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The lowest position of the request's records.
    pub first_position: Position,
    /// The highest position of the request's records.
    pub last_position: Position,
    /// Revision of the stream's last envelope after the append.
    pub last_revision: StreamRevision,
    /// How many of the request's records were retries, already in the log (0: all are new).
    pub retried: u32,
}

/// A key of the key index as held: the holder's position and the value it claimed the key with
/// (empty but for a [`KeyRule::Claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldKey {
    /// The holder's position.
    pub position: Position,
    /// The claimed value.
    pub value: Vec<u8>,
}

/// How [`RulePrecheck`] reads the key index.
pub type HeldKeyLookup<'a> = dyn Fn(&[u8]) -> Result<Option<HeldKey>, LogError> + 'a;

/// Checks the rules of records not yet appended, a record at a time, against the key index as a
/// lookup reads it and the keys the records before them write, without writing anything: for a
/// caller that will append them in several appends (an import read a line at a time) and must
/// refuse the whole before the first. Identities are taken as new (the caller compares records
/// with the log and with each other first), so what it holds is the other keys the records write
/// (claims, seals, tool calls), not the records. The writer decides again when each append lands.
#[derive(Debug, Default)]
pub struct RulePrecheck {
    written: std::collections::HashMap<Vec<u8>, HeldKey>,
    records: u64,
}

impl RulePrecheck {
    /// Checks the next record's rules; the first refusal is returned with the record's number
    /// (counted from 0 among the records checked).
    pub fn check(
        &mut self,
        rules: &KeyRules,
        held: &HeldKeyLookup<'_>,
    ) -> Result<Option<KeyRefusal>, LogError> {
        let number = self.records;
        self.records += 1;
        let position = Position(number);
        let mut writes: Vec<(&[u8], Vec<u8>)> = Vec::new();
        for rule in rules {
            // A key an earlier record of the check writes is not in the log yet: it has no
            // position to report.
            let (current, logged) = match self.written.get(rule.key()) {
                Some(pending) => (Some(pending.clone()), false),
                None => match writes.iter().find(|(key, _)| *key == rule.key()) {
                    Some((_, value)) => (Some(HeldKey { position, value: value.clone() }), false),
                    None => (held(rule.key())?, true),
                },
            };
            let write = match (rule, &current) {
                (RuleRef::Identity(_), _) => None,
                (RuleRef::Claim { value, .. }, None) => Some(value.to_vec()),
                (RuleRef::Claim { value, .. }, Some(current)) if current.value == value => None,
                (RuleRef::Unique(_), None) => Some(Vec::new()),
                (RuleRef::Requires(_), Some(_)) | (RuleRef::Forbids(_), None) => None,
                (_, current) => {
                    return Ok(Some(KeyRefusal {
                        record: usize::try_from(number).unwrap_or(usize::MAX),
                        rule: rule.to_rule(),
                        held_at: current.as_ref().filter(|_| logged).map(|c| c.position),
                    }));
                }
            };
            if let Some(value) = write {
                writes.push((rule.key(), value));
            }
        }
        // A refused record writes nothing; the caller stops at the first refusal anyway.
        for (key, value) in writes {
            self.written.entry(key.to_vec()).or_insert(HeldKey { position, value });
        }
        Ok(None)
    }
}

/// An append refused by a rule on the log's key index (see [`KeyRule`]). Nothing was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRefusal {
    /// Which record of the request (0-based) broke the rule.
    pub record: usize,
    /// The rule it broke.
    pub rule: KeyRule,
    /// Where the key's holder is in the log, when the key is held.
    pub held_at: Option<Position>,
}

impl std::fmt::Display for KeyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = String::from_utf8_lossy(self.rule.key());
        match self.held_at {
            Some(position) => write!(f, "record {}: key {key:?} is held at position {position}", self.record),
            None => write!(f, "record {}: key {key:?} is not held", self.record),
        }
    }
}

/// An append refused because the stream was not at the expected revision. Nothing was appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevisionConflict {
    /// What the request expected.
    pub expected: ExpectedRevision,
    /// The stream's actual last revision (`None`: the stream does not exist).
    pub actual: Option<StreamRevision>,
}

impl std::fmt::Display for RevisionConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let expected = match self.expected {
            ExpectedRevision::Any => "any revision".to_owned(),
            ExpectedRevision::NoStream => "no stream".to_owned(),
            ExpectedRevision::Exact(revision) => format!("revision {revision}"),
        };
        match self.actual {
            Some(actual) => write!(f, "expected {expected}, stream is at revision {actual}"),
            None => write!(f, "expected {expected}, stream does not exist"),
        }
    }
}

/// The outcome of an append that reached the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum AppendOutcome {
    /// The records are in the log at the requested durability.
    Appended(Appended),
    /// The stream was not at the expected revision; nothing was appended.
    Conflict(RevisionConflict),
    /// A record broke a rule on the log's key index (an identity reused with other bytes, ...);
    /// nothing was appended.
    Refused(KeyRefusal),
}

/// The head of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHead {
    /// Revision of the stream's last envelope.
    pub revision: StreamRevision,
    /// Global position of the stream's last envelope.
    pub position: Position,
}

/// A stream of envelopes read in position order.
pub type EnvelopeIter = Box<dyn Iterator<Item = Result<Envelope, LogError>> + Send>;

/// A durable, ordered, hash-chained log of envelopes.
///
/// Architecture invariant: positions are dense (1, 2, 3, ...), each envelope's `previous_hash` is
/// its predecessor's `hash`, and each stream's revisions are dense from 0.
pub trait LogBackend: Send + Sync + std::fmt::Debug {
    /// Appends the request's records atomically, or reports a revision conflict.
    fn append(&self, request: AppendRequest) -> Result<AppendOutcome, LogError>;

    /// The position of the last acknowledged envelope ([`Position::ZERO`] when empty).
    fn head(&self) -> Position;

    /// The envelope at `position`, if it exists.
    fn read(&self, position: Position) -> Result<Option<Envelope>, LogError>;

    /// Every envelope from `from` (inclusive) to the head at the time of the call, in order.
    fn scan(&self, from: Position) -> EnvelopeIter;

    /// A stream's envelopes from revision `from`, at most `limit` of them.
    fn read_stream(
        &self,
        stream: &StreamId,
        from: StreamRevision,
        limit: usize,
    ) -> Result<Vec<Envelope>, LogError>;

    /// A stream's head, or `None` if it has no envelopes.
    fn stream_head(&self, stream: &StreamId) -> Result<Option<StreamHead>, LogError>;

    /// Where the record holding `key` in the key index is (see [`KeyRule`]), if any record holds it.
    fn key_holder(&self, key: &[u8]) -> Result<Option<Position>, LogError> {
        Ok(self.held_key(key)?.map(|held| held.position))
    }

    /// The key index's entry for `key`: its holder's position and the value claimed with it.
    fn held_key(&self, key: &[u8]) -> Result<Option<HeldKey>, LogError>;

    /// Blocks until the head is at least `position` or `timeout` passes; returns the head then.
    /// This is how followers (projection stages) learn of new appends.
    fn wait_for(&self, position: Position, timeout: Duration) -> Position;

    /// Whether the storage engine has background work in hand (flushes, compactions) that was
    /// left by earlier writes: a benchmark waits for none before it times an append, so that one
    /// store's trailing work is not counted against another's. A backend without such work has
    /// none.
    fn background_work(&self) -> usize {
        0
    }

    /// Checks the whole hash chain from position 1, reporting each checked position to `progress`.
    /// Returns the number of envelopes checked, or the first damage found. A backend with an index
    /// beside the log checks that too.
    fn verify_chain(&self, progress: &mut dyn FnMut(Position)) -> Result<u64, LogError> {
        let mut verifier = ChainVerifier::new(Position::ZERO, GENESIS_HASH);
        for envelope in self.scan(Position::FIRST) {
            let envelope = envelope?;
            verifier.check(&envelope)?;
            progress(envelope.position);
        }
        Ok(verifier.checked())
    }
}
