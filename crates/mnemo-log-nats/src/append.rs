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
//!
//! **Group commit.** Concurrent appends of one host share round trips: each caller queues its
//! append, and whoever holds the host's turn takes everything queued and *pipelines* it — seals
//! each append on the head the previous one will leave, publishes them all without waiting, then
//! collects the acknowledgements in order. Message `i` of a group carries
//! `Nats-Expected-Last-Sequence` = the sequence message `i - 1` is to get, and
//! `Nats-Expected-Last-Msg-Id` = message `i - 1`'s id, so it is stored only if every message before
//! it in the group was stored, right before it: a group lands as a prefix, in order, or the rest is
//! refused. Whatever was refused (the head moved) is planned again on the server's head; whatever is
//! uncertain (a timeout) is decided alone, with its own message id, as before. An append whose
//! revision expectation does not hold on the group's running head ends the group and is decided
//! alone, on the server's head, so conflicts stay conflicts.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use mnemo_core::{Position, RuleRef, StreamId, StreamRevision, TimestampMs};
use mnemo_log::{
    AppendOutcome, AppendRequest, Appended, EnvelopeDraft, KeyRefusal, LogError, NewRecord, RevisionConflict,
    StreamHead,
};
use tracing::{debug, warn};

use crate::batch;
use crate::index::{HeldKey, Span, fingerprint};
use crate::limits::{
    APPEND_GROUP_MAX, APPEND_RETRY_BUDGET, REQUEST_TIMEOUT, RETRY_PAUSE_MAX, RETRY_PAUSE_MIN,
};
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

/// An append waiting in the host's queue for its group.
#[derive(Debug)]
pub(crate) struct Queued {
    request: AppendRequest,
    message_id: String,
    reply: tokio::sync::oneshot::Sender<Result<AppendOutcome, LogError>>,
}

/// Appends with `message_id`, which no other append may share.
pub(crate) async fn append_as(
    inner: Arc<Inner>,
    request: AppendRequest,
    message_id: String,
) -> Result<AppendOutcome, LogError> {
    request.check()?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    inner.queue.lock().unwrap_or_else(PoisonError::into_inner).push_back(Queued {
        request,
        message_id,
        reply,
    });
    {
        // One group of this host at a time: the host's own appends never race each other for the
        // head. The holder of the turn commits everything queued, this append included unless an
        // earlier holder already took it.
        let _turn = inner.append_turn.lock().await;
        let group: Vec<Queued> = {
            let mut queue = inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
            let take = queue.len().min(APPEND_GROUP_MAX);
            queue.drain(..take).collect()
        };
        if !group.is_empty() {
            // NOTE: spawned, so that a caller that stops waiting does not abandon the appends of the
            // others its group carries; the turn is held until the group is decided.
            let _ = tokio::spawn(commit_group(Arc::clone(&inner), group)).await;
        }
    }
    match answer.await {
        Ok(outcome) => outcome,
        Err(_) => {
            Err(LogError::Unavailable("the append's group stopped before the append was decided".to_owned()))
        }
    }
}

/// Decides a group of queued appends in order: pipelined while their expectations hold on the
/// running head, each alone otherwise (see the module's documentation).
async fn commit_group(inner: Arc<Inner>, group: Vec<Queued>) {
    let mut pending: VecDeque<Queued> = group.into();
    while !pending.is_empty() {
        let plan = match plan(&inner, &mut pending) {
            Ok(plan) => plan,
            Err(error) => {
                // The index cannot be read: every append still queued fails with the reason.
                fail_all(pending.drain(..), &error);
                return;
            }
        };
        if plan.is_empty() {
            if let Some(queued) = pending.pop_front() {
                let outcome = decide_alone(&inner, &queued.request, &queued.message_id, false).await;
                let _ = queued.reply.send(outcome);
            }
            continue;
        }
        debug!(appends = plan.len(), "publishing a group, pipelined");
        let failed = publish_pipelined(&inner, plan).await;
        if let Some((first_failure, rest)) = failed {
            match first_failure {
                Failure::HeadMoved => {
                    // Nothing from the first refusal on was stored: plan it again on the new head.
                    if let Err(error) = inner.catch_up_with_server().await {
                        fail_all(rest.into_iter().chain(pending.drain(..)), &error);
                        return;
                    }
                    for queued in rest.into_iter().rev() {
                        pending.push_front(queued);
                    }
                }
                Failure::Uncertain => {
                    // An unacknowledged message may have landed: decide each alone, in order,
                    // checking its message id first.
                    for queued in rest {
                        let outcome = decide_alone(&inner, &queued.request, &queued.message_id, true).await;
                        let _ = queued.reply.send(outcome);
                    }
                }
            }
        }
    }
}

/// Answers every append with `error`.
fn fail_all(appends: impl Iterator<Item = Queued>, error: &LogError) {
    for queued in appends {
        let _ = queued.reply.send(Err(LogError::Unavailable(error.to_string())));
    }
}

/// An append sealed on the group's running head, ready to publish.
struct Planned {
    queued: Queued,
    subject: String,
    message: PublishMessage,
}

/// The head a group's next append is built on: the index's, moved by the appends planned so far.
struct RunningHead {
    base: Base,
    /// Streams the group has appended to: their head and the sequence of that head's message.
    streams: HashMap<StreamId, (StreamHead, u64)>,
    /// The message id the previous planned message carries.
    previous_id: Option<String>,
}

/// Takes from the front of `pending` the appends that can be pipelined on the running head: it
/// stops at the first whose revision expectation does not hold there (decided alone, on the
/// server's head), or that repeats a record already stored or is refused by a key rule (decided
/// alone, once what is before it has landed). An append too large for the server is answered at once.
fn plan(inner: &Inner, pending: &mut VecDeque<Queued>) -> Result<Vec<Planned>, LogError> {
    let Some(first) = pending.front() else { return Ok(Vec::new()) };
    let (base, _) = base(inner, &first.request)?;
    let mut head = RunningHead { base, streams: HashMap::new(), previous_id: None };
    // Keys the group's planned appends write, over the folded index's.
    let mut group_keys: HashMap<Vec<u8>, HeldKey> = HashMap::new();
    let mut planned = Vec::new();
    while let Some(next) = pending.front() {
        let request = &next.request;
        let (stream_head, decision) = {
            let index = inner.index.lock();
            let stream_head = match head.streams.get(&request.stream) {
                Some(moved) => Some(*moved),
                None => index.streams.get(&request.stream).and_then(|spans| spans.head()),
            };
            (stream_head, decide(&index.keys, &group_keys, request, head.base.next_position))
        };
        let written = match decision {
            (Decision::Go(retried), written) if retried.iter().all(Option::is_none) => written,
            _ => break,
        };
        if !request.expected.matches(stream_head.map(|(h, _)| h.revision)) {
            break;
        }
        head.base.stream = stream_head;
        let records: Vec<&NewRecord> = request.records.iter().collect();
        let (body, last) = seal(request, &records, &head.base, inner.clock.now())?;
        let Some(queued) = pending.pop_front() else { break };
        let request = &queued.request;
        if body.len() > inner.max_payload {
            let _ = queued.reply.send(Err(too_large(body.len(), inner.max_payload)));
            continue;
        }
        let mut message = PublishMessage::build()
            .payload(body.into())
            .message_id(&queued.message_id)
            .expected_last_sequence(head.base.sequence)
            .expected_last_subject_sequence(stream_head.map_or(0, |(_, sequence)| sequence));
        if let Some(previous) = &head.previous_id {
            message = message.expected_last_message_id(previous);
        }
        // The message will be stored at the next sequence, leaving the head `seal` returned.
        head.base.sequence += 1;
        head.base.next_position = last.position.next();
        head.base.last_hash = last.hash;
        head.base.last_timestamp = last.timestamp;
        head.streams.insert(
            request.stream.clone(),
            (StreamHead { revision: last.revision, position: last.position }, head.base.sequence),
        );
        head.previous_id = Some(queued.message_id.clone());
        group_keys.extend(written);
        let subject = subject_for(&inner.name, &request.stream);
        planned.push(Planned { queued, subject, message });
    }
    Ok(planned)
}

/// Why a pipelined message was not acknowledged as stored.
enum Failure {
    /// Refused: the head was not the one it was built on. Nothing after it was stored either.
    HeadMoved,
    /// Not known to be stored or not (a timeout, a lost connection, an election).
    Uncertain,
}

/// Publishes the plan without waiting between messages, then answers each acknowledged append in
/// order. Returns the first failure's kind with the appends from it on (not answered).
async fn publish_pipelined(inner: &Inner, plan: Vec<Planned>) -> Option<(Failure, Vec<Queued>)> {
    let mut sent = Vec::with_capacity(plan.len());
    let mut unsent = Vec::new();
    for planned in plan {
        if !unsent.is_empty() {
            unsent.push(planned.queued);
            continue;
        }
        match inner.jetstream.send_publish(planned.subject, planned.message).await {
            Ok(ack) => sent.push((planned.queued, ack)),
            Err(error) => {
                debug!(%error, "publish not sent; the rest of the group is decided again");
                unsent.push(planned.queued);
            }
        }
    }
    let mut failure: Option<(Failure, Vec<Queued>)> = None;
    let mut acknowledged = Vec::with_capacity(sent.len());
    for (queued, ack) in sent {
        if let Some((_, rest)) = &mut failure {
            // A message after a failure can have been stored only if the failed one was (its
            // expected last message id): decided again with the failed one, it finds its id.
            let _ = ack.await;
            rest.push(queued);
            continue;
        }
        match ack.await {
            Ok(ack) => {
                debug!(sequence = ack.sequence, duplicate = ack.duplicate, "pipelined append acknowledged");
                acknowledged.push((queued, ack.sequence));
            }
            Err(error) => {
                failure = Some(match classify(error) {
                    Ok(Attempt::HeadMoved) => (Failure::HeadMoved, vec![queued]),
                    Ok(_) => (Failure::Uncertain, vec![queued]),
                    Err(fatal) => {
                        let _ = queued.reply.send(Err(fatal));
                        (Failure::Uncertain, Vec::new())
                    }
                });
            }
        }
    }
    // One wait for the follower to fold the group's last stored message answers them all.
    if let Some(last) = acknowledged.iter().map(|(_, sequence)| *sequence).max() {
        let folded = inner.wait_for_sequence_at_least(last).await;
        for (queued, sequence) in acknowledged {
            let outcome = match &folded {
                Ok(()) => inner.index.lock().span_of_sequence(sequence).ok_or_else(|| {
                    LogError::Unavailable(format!("JetStream message {sequence} is not in the index"))
                }),
                Err(error) => Err(LogError::Unavailable(error.to_string())),
            };
            let _ = queued.reply.send(outcome.map(|span| AppendOutcome::Appended(appended(span))));
        }
    }
    match failure {
        Some((kind, mut rest)) => {
            rest.extend(unsent);
            Some((kind, rest))
        }
        None if unsent.is_empty() => None,
        None => Some((Failure::Uncertain, unsent)),
    }
}

fn too_large(bytes: usize, max_payload: usize) -> LogError {
    LogError::InvalidAppend(format!(
        "{bytes} bytes as one message, the server's limit (max_payload) is {max_payload}"
    ))
}

/// Decides one append alone, retrying with the same message id until it is decided or the retry
/// budget runs out. `uncertain`: an earlier publish of it may have landed.
async fn decide_alone(
    inner: &Arc<Inner>,
    request: &AppendRequest,
    message_id: &str,
    mut uncertain: bool,
) -> Result<AppendOutcome, LogError> {
    let deadline = Instant::now() + APPEND_RETRY_BUDGET;
    let mut pause = RETRY_PAUSE_MIN;
    loop {
        let attempt = attempt(inner, request, message_id, uncertain).await?;
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
    let (body, _) = seal(request, &fresh, &base, inner.clock.now())?;
    if body.len() > inner.max_payload {
        return Err(too_large(body.len(), inner.max_payload));
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
    let (decision, _) = decide(&index.keys, &HashMap::new(), request, base.next_position);
    Ok((base, decision))
}

/// What the key index says of a request: per record, where it already is when it is a retry.
enum Decision {
    Go(Vec<Option<Position>>),
    Refused(KeyRefusal),
}

/// Decides a request's key rules against the folded index and the keys `earlier` appends of its
/// group will have written, as the embedded log's writer does (`mnemo_core::KeyRule` tells each
/// rule's meaning). Returns the decision with the keys the request writes.
fn decide(
    keys: &HashMap<Vec<u8>, HeldKey>,
    earlier: &HashMap<Vec<u8>, HeldKey>,
    request: &AppendRequest,
    first_position: Position,
) -> (Decision, HashMap<Vec<u8>, HeldKey>) {
    let mut written: HashMap<Vec<u8>, HeldKey> = HashMap::new();
    let mut retried = Vec::with_capacity(request.records.len());
    let mut next = first_position;
    for (index, record) in request.records.iter().enumerate() {
        let refuse = |rule: RuleRef<'_>, held: Option<&HeldKey>| {
            let refusal =
                KeyRefusal { record: index, rule: rule.to_rule(), held_at: held.map(|h| h.position) };
            (Decision::Refused(refusal), HashMap::new())
        };
        let print = fingerprint(&request.stream, record.kind, record.kind_schema, &record.bytes);
        let mut original = None;
        for rule in &record.rules {
            let RuleRef::Identity(key) = rule else { continue };
            let held = written.get(key).or_else(|| earlier.get(key));
            let Some(held) = held.or_else(|| keys.get(key)) else {
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
            let held =
                written.get(rule.key()).or_else(|| earlier.get(rule.key())).or_else(|| keys.get(rule.key()));
            let write = match (rule, held) {
                (RuleRef::Identity(_), _) => Some((Vec::new(), Some(print))),
                (RuleRef::Claim { value, .. }, None) => Some((value.to_vec(), None)),
                (RuleRef::Claim { value, .. }, Some(held)) if held.value == value => None,
                (RuleRef::Unique(_), None) => Some((Vec::new(), None)),
                (RuleRef::Requires(_), Some(_)) | (RuleRef::Forbids(_), None) => None,
                (_, held) => return refuse(rule, held),
            };
            if let Some((value, fingerprint)) = write {
                written.insert(rule.key().to_vec(), HeldKey { position: next, value, fingerprint });
            }
        }
        next = next.next();
        retried.push(None);
    }
    (Decision::Go(retried), written)
}

fn count(records: usize) -> u32 {
    // An append holds at most APPEND_RECORDS_MAX records, far below u32::MAX.
    u32::try_from(records).unwrap_or(u32::MAX)
}

/// The last envelope an append seals: the head it leaves.
struct Sealed {
    position: Position,
    revision: StreamRevision,
    hash: [u8; mnemo_log::HASH_BYTES],
    timestamp: TimestampMs,
}

/// Seals the request's new records (`fresh`) on `base` and encodes them as one message body;
/// returns it with the head the append leaves.
fn seal(
    request: &AppendRequest,
    fresh: &[&NewRecord],
    base: &Base,
    now: TimestampMs,
) -> Result<(Vec<u8>, Sealed), LogError> {
    // Timestamps never run backwards along the log, as with the embedded writer.
    let timestamp = base.last_timestamp.max(request.timestamp.unwrap_or(now));
    let mut revision = base.stream.map_or(StreamRevision::FIRST, |(head, _)| head.revision.next());
    let mut position = base.next_position;
    let mut previous_hash = base.last_hash;
    let mut sealed = Vec::with_capacity(fresh.len());
    // With no fresh record nothing is published; this stands for none sealed.
    let mut last = Sealed { position: base.next_position, revision, hash: previous_hash, timestamp };
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
        last = Sealed { position, revision, hash: envelope.hash, timestamp };
        previous_hash = envelope.hash;
        position = position.next();
        revision = revision.next();
        sealed.push(bytes);
    }
    Ok((batch::encode(&sealed), last))
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
