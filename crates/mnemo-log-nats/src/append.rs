//! Appending to the shared log.
//!
//! Two hosts agree on positions because the JetStream stream orders their messages: an append is
//! built on the head this host's index has folded (the next position, the head's hash as the
//! previous hash, the stream's next revision) and published with
//! - `Nats-Expected-Last-Sequence` = the JetStream sequence of that head, so the server refuses it
//!   if any other append landed first (the positions and the chain link would then be wrong);
//! - `Nats-Expected-Last-Subject-Sequence` = the sequence of the Mnemo stream's last message (0 for
//!   no stream), the per-stream optimistic concurrency check;
//! - `Nats-Msg-Id` = an id unique to this append, the same on every retry, so a retry after a lost
//!   acknowledgement is dropped as a duplicate instead of being stored twice.
//!
//! A refusal for a wrong last sequence means the head moved: the index catches up with the server
//! and the append is decided again, becoming a revision conflict only if its stream moved.

use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use std::collections::HashMap;

use mnemo_core::{KeyRule, Position, StreamRevision, TimestampMs};
use mnemo_log::{
    AppendOutcome, AppendRequest, Appended, EnvelopeDraft, KeyRefusal, LogError, NewRecord, RevisionConflict,
    StreamHead,
};
use tracing::{debug, warn};

use crate::batch;
use crate::index::{HeldKey, Span, fingerprint};
use crate::limits::{APPEND_RETRY_BUDGET, REQUEST_TIMEOUT, RETRY_PAUSE_MAX, RETRY_PAUSE_MIN};
use crate::nats_log::Inner;
use crate::subject::subject_for;

/// The head an append is built on, as the index holds it.
struct Base {
    sequence: u64,
    next_position: mnemo_core::Position,
    last_hash: [u8; mnemo_log::HASH_BYTES],
    last_timestamp: TimestampMs,
    stream: Option<(StreamHead, u64)>,
}

/// What one attempt came to.
enum Attempt {
    Done(AppendOutcome),
    /// Another append landed first: catch up and decide again.
    HeadMoved,
    /// The outcome is unknown (a timeout, a leader election): retry with the same message id.
    Uncertain(String),
}

pub(crate) async fn append(inner: Arc<Inner>, request: AppendRequest) -> Result<AppendOutcome, LogError> {
    let message_id = inner.next_message_id();
    append_as(inner, request, message_id).await
}

/// Appends with `message_id`, which no other append may share.
pub(crate) async fn append_as(
    inner: Arc<Inner>,
    request: AppendRequest,
    message_id: String,
) -> Result<AppendOutcome, LogError> {
    request.check()?;
    // One append of this host at a time: the host's own appends never race each other for the head.
    let _turn = inner.append_turn.lock().await;
    let deadline = Instant::now() + APPEND_RETRY_BUDGET;
    let mut pause = RETRY_PAUSE_MIN;
    let mut uncertain = false;
    loop {
        let attempt = attempt(&inner, &request, &message_id, uncertain).await?;
        let reason = match attempt {
            Attempt::Done(outcome) => return Ok(outcome),
            Attempt::HeadMoved => {
                inner.catch_up_with_server().await?;
                continue;
            }
            Attempt::Uncertain(reason) => reason,
        };
        uncertain = true;
        if Instant::now() + pause > deadline {
            return Err(LogError::Unavailable(format!(
                "append to {} not acknowledged within {APPEND_RETRY_BUDGET:?}: {reason}",
                request.stream
            )));
        }
        warn!(%reason, message_id, "append not acknowledged; retrying with the same message id");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_PAUSE_MAX);
    }
}

async fn attempt(
    inner: &Arc<Inner>,
    request: &AppendRequest,
    message_id: &str,
    uncertain: bool,
) -> Result<Attempt, LogError> {
    if uncertain && let Some(span) = inner.index.lock().span_of_message_id(message_id) {
        // An earlier attempt landed and the follower has folded it.
        return Ok(Attempt::Done(AppendOutcome::Appended(appended(span))));
    }
    let (base, decision) = base(inner, request)?;
    let retried = match decision {
        Decision::Go(retried) => retried,
        Decision::Refused(refusal) => return Ok(Attempt::Done(AppendOutcome::Refused(refusal))),
    };
    let actual = base.stream.map(|(head, _)| head.revision);
    let originals: Vec<Position> = retried.iter().flatten().copied().collect();
    if originals.len() == request.records.len() {
        return Ok(Attempt::Done(AppendOutcome::Appended(Appended {
            first_position: originals.iter().copied().min().unwrap_or(Position::ZERO),
            last_position: originals.iter().copied().max().unwrap_or(Position::ZERO),
            last_revision: actual.unwrap_or(StreamRevision::FIRST),
            retried: count(originals.len()),
        })));
    }
    if !request.expected.matches(actual) {
        // The index may lag behind other hosts: decide a conflict only on the server's head.
        let before = base.sequence;
        inner.catch_up_with_server().await?;
        if inner.index.lock().sequence != before {
            return Ok(Attempt::HeadMoved);
        }
        return Ok(Attempt::Done(AppendOutcome::Conflict(RevisionConflict {
            expected: request.expected,
            actual,
        })));
    }
    let fresh: Vec<&NewRecord> =
        request.records.iter().zip(&retried).filter(|(_, r)| r.is_none()).map(|(record, _)| record).collect();
    let body = seal(request, &fresh, &base, inner.clock.now())?;
    if body.len() > inner.max_payload {
        return Err(LogError::InvalidAppend(format!(
            "{} bytes as one message, the server's limit (max_payload) is {}",
            body.len(),
            inner.max_payload
        )));
    }
    let publish = PublishMessage::build()
        .payload(body.into())
        .message_id(message_id)
        .expected_last_sequence(base.sequence)
        .expected_last_subject_sequence(base.stream.map_or(0, |(_, sequence)| sequence));
    let subject = subject_for(&inner.name, &request.stream);
    let acknowledged = match inner.jetstream.send_publish(subject, publish).await {
        Ok(ack) => ack.await,
        Err(error) => Err(error),
    };
    match acknowledged {
        Ok(ack) => {
            debug!(sequence = ack.sequence, duplicate = ack.duplicate, "append acknowledged");
            let span = inner.wait_for_sequence(ack.sequence).await?;
            let mut appended = appended(span);
            appended.first_position = originals.iter().copied().fold(appended.first_position, Position::min);
            appended.last_position = originals.iter().copied().fold(appended.last_position, Position::max);
            appended.retried = count(originals.len());
            Ok(Attempt::Done(AppendOutcome::Appended(appended)))
        }
        Err(error) => classify(error),
    }
}

fn classify(error: PublishError) -> Result<Attempt, LogError> {
    match error.kind() {
        PublishErrorKind::WrongLastSequence => Ok(Attempt::HeadMoved),
        PublishErrorKind::MaxPayloadExceeded => {
            Err(LogError::InvalidAppend(format!("the server refused the message's size: {error}")))
        }
        // A timeout, a lost connection, no responders during an election, or an error reply from a
        // server that is stepping down: the append may or may not have landed.
        _ => Ok(Attempt::Uncertain(error.to_string())),
    }
}

/// The head an append is built on and its key rules decided on the same folded index, so that the
/// publish (expected last sequence = that head) lands only where the decision holds.
fn base(inner: &Inner, request: &AppendRequest) -> Result<(Base, Decision), LogError> {
    let index = inner.index.lock();
    if let Some(failure) = &index.failure {
        return Err(LogError::Unavailable(format!("the shared log cannot be followed: {failure}")));
    }
    let base = Base {
        sequence: index.sequence,
        next_position: index.head().next(),
        last_hash: index.last_hash,
        last_timestamp: index.last_timestamp,
        stream: index.streams.get(&request.stream).and_then(|spans| spans.head()),
    };
    let decision = decide(&index.keys, request, base.next_position);
    Ok((base, decision))
}

/// What the key index says of a request: per record, where it already is when it is a retry.
enum Decision {
    Go(Vec<Option<Position>>),
    Refused(KeyRefusal),
}

/// Decides a request's key rules against the folded index, as the embedded log's writer does
/// (`mnemo_core::KeyRule` tells each rule's meaning).
fn decide(keys: &HashMap<Vec<u8>, HeldKey>, request: &AppendRequest, first_position: Position) -> Decision {
    let mut written: HashMap<Vec<u8>, HeldKey> = HashMap::new();
    let mut retried = Vec::with_capacity(request.records.len());
    let mut next = first_position;
    for (index, record) in request.records.iter().enumerate() {
        let refuse = |rule: &KeyRule, held: Option<&HeldKey>| {
            Decision::Refused(KeyRefusal {
                record: index,
                rule: rule.clone(),
                held_at: held.map(|h| h.position),
            })
        };
        let print = fingerprint(&request.stream, record.kind, record.kind_schema, &record.bytes);
        let mut original = None;
        for rule in &record.rules {
            let KeyRule::Identity(key) = rule else { continue };
            let Some(held) = written.get(key.as_slice()).or_else(|| keys.get(key.as_slice())) else {
                continue;
            };
            if held.fingerprint != Some(print) {
                return refuse(rule, Some(held));
            }
            original = Some(held.position);
            break;
        }
        if original.is_some() {
            retried.push(original);
            continue;
        }
        for rule in &record.rules {
            let held = written.get(rule.key()).or_else(|| keys.get(rule.key()));
            let write = match (rule, held) {
                (KeyRule::Identity(_), _) => Some((Vec::new(), Some(print))),
                (KeyRule::Claim { value, .. }, None) => Some((value.clone(), None)),
                (KeyRule::Claim { value, .. }, Some(held)) if held.value == *value => None,
                (KeyRule::Unique(_), None) => Some((Vec::new(), None)),
                (KeyRule::Requires(_), Some(_)) | (KeyRule::Forbids(_), None) => None,
                (_, held) => return refuse(rule, held),
            };
            if let Some((value, fingerprint)) = write {
                written.insert(rule.key().to_vec(), HeldKey { position: next, value, fingerprint });
            }
        }
        next = next.next();
        retried.push(None);
    }
    Decision::Go(retried)
}

fn count(records: usize) -> u32 {
    // An append holds at most APPEND_RECORDS_MAX records, far below u32::MAX.
    u32::try_from(records).unwrap_or(u32::MAX)
}

/// Seals the request's new records (`fresh`) on `base` and encodes them as one message body.
fn seal(
    request: &AppendRequest,
    fresh: &[&NewRecord],
    base: &Base,
    now: TimestampMs,
) -> Result<Vec<u8>, LogError> {
    // Timestamps never run backwards along the log, as with the embedded writer.
    let timestamp = base.last_timestamp.max(request.timestamp.unwrap_or(now));
    let mut revision = base.stream.map_or(StreamRevision::FIRST, |(head, _)| head.revision.next());
    let mut position = base.next_position;
    let mut previous_hash = base.last_hash;
    let mut sealed = Vec::with_capacity(fresh.len());
    for record in fresh {
        let (envelope, bytes) = EnvelopeDraft {
            position,
            stream: request.stream.clone(),
            revision,
            kind: record.kind,
            kind_schema: record.kind_schema,
            timestamp,
            record: record.bytes.clone(),
            previous_hash,
        }
        .seal()
        .map_err(|e| LogError::InvalidAppend(format!("record does not encode: {e}")))?;
        previous_hash = envelope.hash;
        position = position.next();
        revision = revision.next();
        sealed.push(bytes);
    }
    Ok(batch::encode(&sealed))
}

fn appended(span: Span) -> Appended {
    Appended {
        first_position: span.first,
        last_position: span.last,
        last_revision: span.last_revision,
        retried: 0,
    }
}

/// How long an append waits for the follower to fold its acknowledged message.
pub(crate) const FOLD_WAIT: std::time::Duration = REQUEST_TIMEOUT.saturating_mul(15);
