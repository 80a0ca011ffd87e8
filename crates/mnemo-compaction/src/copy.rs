//! Conversation copy (events-and-history.md §4): a new session holding a prefix of another's
//! conversation under new identities, with its text checkpoints rebuilt over the copied events.
//!
//! The copy is planned here in full (every record of the new stream) and appended by the caller in
//! one atomic append of a new stream, so a copy either exists whole or not at all.
//!
//! Identities: each copied run and invocation gets a new id, each event a new id, all derived from
//! the target session and the source id (so the same copy of the same log is the same records);
//! turn ids are kept. V3 checkpoints are dropped (the copy can compact again from its raw events).
//! A checkpoint with an invalid shape (including a superseded source policy), one whose coverage
//! does not match the source projection, or one whose sectioned summary is defective fails the
//! whole copy with a clear reason.

use std::collections::BTreeMap;

use mnemo_core::redaction::redact_secrets;
use mnemo_core::{
    CheckpointBody, CheckpointId, ConversationCopied, CopyBoundary, EventId, InvocationId, Position, Record,
    RunId, RuntimeEvent, SessionId, SessionOpened, StorageRef, SummaryFormat, TurnEnded, TurnId,
};
use sha2::{Digest as _, Sha256};

use crate::checkpoint::{BodyInput, CheckpointInput, build_checkpoint, match_prefix, validate_shape};
use crate::error::CompactionError;
use crate::ledger::SessionLedger;
use crate::projection::{estimate_events_tokens, is_compactable};
use crate::summary::{SummaryChecks, find_summary_defect};

/// What to copy.
#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    /// Where the copy stops; the whole conversation when absent.
    pub up_to: Option<CopyBoundary>,
    /// The new session's id; derived from the source and the log position when absent.
    pub target: Option<SessionId>,
    /// Characters per token of the summary floor re-check.
    pub chars_per_token: u64,
}

/// A planned copy: the new session and every record of its stream, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyPlan {
    /// The new session.
    pub target: SessionId,
    /// Its records, to be appended at once to a new stream.
    pub records: Vec<Record>,
    /// Events copied.
    pub events: u64,
    /// Text checkpoints rebuilt.
    pub checkpoints_rebuilt: u64,
    /// Provider-state checkpoints dropped.
    pub checkpoints_dropped: u64,
}

fn derived(prefix: &str, target: &SessionId, source: &str) -> String {
    let mut hasher = Sha256::new();
    for piece in [target.as_str(), source] {
        hasher.update((piece.len() as u64).to_le_bytes());
        hasher.update(piece.as_bytes());
    }
    format!("{prefix}{}", &hex::encode(hasher.finalize())[..24])
}

fn copy_error(reason: impl Into<String>) -> CompactionError {
    CompactionError::Copy(reason.into())
}

fn new_id<T: TryFrom<String>>(text: String) -> Result<T, CompactionError> {
    T::try_from(text.clone()).map_err(|_| copy_error(format!("derived id {text:?} is not valid")))
}

/// The default target: the source id and a digest of it and the log position.
pub fn default_target(source: &SessionId, position: Position) -> Result<SessionId, CompactionError> {
    let digest = hex::encode(Sha256::digest(format!("{source}\0{}", position.0).as_bytes()));
    let stem: String = source.as_str().chars().take(200).collect();
    new_id(format!("{stem}-copy-{}", &digest[..12]))
}

/// Plans a copy of `ledger`'s session.
pub fn plan_copy(ledger: &SessionLedger<'_>, options: &CopyOptions) -> Result<CopyPlan, CompactionError> {
    let source = ledger.session().clone();
    let target = match &options.target {
        Some(target) => target.clone(),
        None => default_target(&source, ledger.position())?,
    };
    if target == source {
        return Err(copy_error("the copy must be a new session"));
    }
    let records = ledger.records(mnemo_core::StreamRevision(0))?;
    let cut = cut_position(&records, options.up_to.as_ref())?;
    let mut copier = Copier::new(&source, &target);
    let mut plan_records = Vec::new();
    let mut checkpoints_rebuilt = 0;
    let mut checkpoints_dropped = 0;
    let source_projection: Vec<RuntimeEvent> = records
        .iter()
        .filter_map(|r| match &r.record {
            Record::RuntimeEvent(e) if is_compactable(e) => Some(e.clone()),
            _ => None,
        })
        .collect();
    let mut opened = false;
    for logged in records.iter().filter(|r| r.position < cut) {
        match &logged.record {
            Record::SessionOpened(open) => {
                opened = true;
                plan_records
                    .push(Record::SessionOpened(SessionOpened { session: target.clone(), ..open.clone() }));
                plan_records.push(copied_marker(&source, &target, options));
            }
            // A streaming chunk is never history (decision 0145): its final event is copied instead.
            Record::RuntimeEvent(event) if event.partial => {}
            Record::RuntimeEvent(event) => {
                plan_records.push(Record::RuntimeEvent(copier.clone_event(event)?))
            }
            Record::TurnEnded(end) => plan_records.push(Record::TurnEnded(TurnEnded {
                session: target.clone(),
                turn: end.turn.clone(),
                run: end.run.as_ref().map(|r| copier.run(r)).transpose()?,
                status: end.status,
            })),
            Record::CheckpointRecorded(checkpoint) => {
                match copier.rebuild_checkpoint(
                    checkpoint,
                    &source_projection,
                    options.chars_per_token.max(1),
                )? {
                    Some(rebuilt) => {
                        checkpoints_rebuilt += 1;
                        plan_records.push(Record::CheckpointRecorded(rebuilt));
                    }
                    None => checkpoints_dropped += 1,
                }
            }
            _ => {}
        }
    }
    if !opened {
        plan_records.insert(0, copied_marker(&source, &target, options));
    }
    let events = copier.events.len() as u64;
    for record in plan_records.iter_mut() {
        if let Record::ConversationCopied(marker) = record {
            marker.events = copier.events.clone();
            if let (None, Some((last, _))) = (&options.up_to, copier.events.last()) {
                marker.up_to = CopyBoundary::ThroughEvent(last.clone());
            }
        }
    }
    Ok(CopyPlan { target, records: plan_records, events, checkpoints_rebuilt, checkpoints_dropped })
}

fn copied_marker(source: &SessionId, target: &SessionId, options: &CopyOptions) -> Record {
    Record::ConversationCopied(ConversationCopied {
        source: source.clone(),
        session: target.clone(),
        up_to: options.up_to.clone().unwrap_or_else(|| CopyBoundary::ThroughEvent(placeholder_event())),
        events: Vec::new(),
    })
}

#[expect(clippy::expect_used, reason = "a literal id is valid")]
fn placeholder_event() -> EventId {
    EventId::new("end").expect("a literal id is valid")
}

/// The first log position not copied: `through` a turn keeps turns up to and including it, `before`
/// a turn keeps the turns strictly before it (turn order is first appearance), an event keeps
/// everything up to and including it.
fn cut_position(
    records: &[mnemo_pipeline::LoggedRecord],
    up_to: Option<&CopyBoundary>,
) -> Result<Position, CompactionError> {
    let Some(up_to) = up_to else {
        return Ok(Position(u64::MAX));
    };
    let events: Vec<(Position, &RuntimeEvent)> = records
        .iter()
        .filter_map(|r| match &r.record {
            Record::RuntimeEvent(e) => Some((r.position, e)),
            _ => None,
        })
        .collect();
    let mut order: Vec<&TurnId> = Vec::new();
    for (_, event) in &events {
        if !order.contains(&&event.turn_id) {
            order.push(&event.turn_id);
        }
    }
    let first_of = |turn: &TurnId| events.iter().find(|(_, e)| &e.turn_id == turn).map(|(p, _)| *p);
    match up_to {
        CopyBoundary::ThroughTurn(turn) | CopyBoundary::BeforeTurn(turn) => {
            let index = order
                .iter()
                .position(|t| *t == turn)
                .ok_or_else(|| copy_error("source turn does not exist"))?;
            let first_excluded =
                if matches!(up_to, CopyBoundary::ThroughTurn(_)) { index + 1 } else { index };
            Ok(order.get(first_excluded).and_then(|t| first_of(t)).unwrap_or(Position(u64::MAX)))
        }
        CopyBoundary::ThroughEvent(event) => {
            let (position, _) = events
                .iter()
                .find(|(_, e)| &e.id == event)
                .ok_or_else(|| copy_error("source event does not exist"))?;
            Ok(Position(position.0 + 1))
        }
        _ => Err(copy_error("unsupported copy boundary")),
    }
}

struct Copier<'a> {
    source: &'a SessionId,
    target: &'a SessionId,
    events: Vec<(EventId, EventId)>,
    clones: BTreeMap<EventId, RuntimeEvent>,
    checkpoints: BTreeMap<CheckpointId, CheckpointId>,
}

impl<'a> Copier<'a> {
    fn new(source: &'a SessionId, target: &'a SessionId) -> Self {
        Copier { source, target, events: Vec::new(), clones: BTreeMap::new(), checkpoints: BTreeMap::new() }
    }

    fn run(&self, run: &RunId) -> Result<RunId, CompactionError> {
        new_id(derived("run-", self.target, run.as_str()))
    }

    fn clone_event(&mut self, event: &RuntimeEvent) -> Result<RuntimeEvent, CompactionError> {
        let mut clone = event.clone();
        clone.id = new_id(derived("evt-", self.target, event.id.as_str()))?;
        clone.session_id = self.target.clone();
        clone.run_id = self.run(&event.run_id)?;
        clone.invocation_id =
            new_id::<InvocationId>(derived("inv-", self.target, event.invocation_id.as_str()))?;
        if let Some(refs) = &mut clone.refs {
            refs.trace_event_id = None;
            if let Some(run) = &refs.source_run_id {
                refs.source_run_id = Some(derived("run-", self.target, run));
            }
            if let Some(invocation) = &refs.source_invocation_id {
                refs.source_invocation_id = Some(derived("inv-", self.target, invocation));
            }
        }
        if let Some(mnemo_core::Content::Text(text)) = &mut clone.content {
            for attachment in text.attachments.iter_mut().flatten() {
                if let StorageRef::SessionFile { session_id, .. } = &mut attachment.location
                    && session_id == self.source.as_str()
                {
                    *session_id = self.target.to_string();
                }
            }
        }
        self.events.push((event.id.clone(), clone.id.clone()));
        self.clones.insert(event.id.clone(), clone.clone());
        Ok(clone)
    }

    /// Admits one checkpoint into the copy (events-and-history.md §4.5), in this order: shape,
    /// drop V3, prefix match, summary rules, every covered event cloned, rebuild.
    fn rebuild_checkpoint(
        &mut self,
        checkpoint: &mnemo_core::CheckpointRecord,
        projection: &[RuntimeEvent],
        chars_per_token: u64,
    ) -> Result<Option<mnemo_core::CheckpointRecord>, CompactionError> {
        validate_shape(checkpoint, Some(self.source)).map_err(|reason| {
            copy_error(format!(
                "cannot copy invalid history compact checkpoint {}: {reason}",
                checkpoint.checkpoint
            ))
        })?;
        let CheckpointBody::Text { summary, summary_format } = &checkpoint.body else {
            return Ok(None);
        };
        let count = match_prefix(checkpoint, projection).map_err(|miss| {
            copy_error(format!(
                "cannot copy unmatched history compact checkpoint {}: {}",
                checkpoint.checkpoint,
                miss.code()
            ))
        })?;
        let covered = &projection[..count as usize];
        let legacy = *summary_format == SummaryFormat::LegacyFreeform;
        if !legacy {
            let span = estimate_events_tokens(covered, chars_per_token);
            if let Some(defect) = find_summary_defect(summary, SummaryChecks::full(span, chars_per_token)) {
                return Err(copy_error(format!(
                    "checkpoint {} has a defective summary: {}",
                    checkpoint.checkpoint,
                    defect.code()
                )));
            }
        }
        let clones: Vec<RuntimeEvent> =
            covered.iter().map(|e| self.clones.get(&e.id).cloned()).collect::<Option<_>>().ok_or_else(
                || {
                    copy_error(format!(
                        "checkpoint {} crosses the conversation copy boundary",
                        checkpoint.checkpoint
                    ))
                },
            )?;
        let anchor = match &checkpoint.head_anchor {
            Some(anchor) => Some(self.clones.get(&anchor.event).map(|c| c.id.clone()).ok_or_else(|| {
                copy_error(format!("checkpoint {} anchors outside the copy", checkpoint.checkpoint))
            })?),
            None => None,
        };
        let previous = checkpoint.previous.as_ref().and_then(|p| self.checkpoints.get(p).cloned());
        let rebuilt = build_checkpoint(CheckpointInput {
            session: self.target,
            covered: &clones,
            // A summary recorded before redaction covered a rule is not copied with its secret.
            body: BodyInput::Text { summary: redact_secrets(summary).into_owned(), legacy },
            previous,
            phase: checkpoint.phase,
            head_anchor: anchor,
            extraction_boundary: None,
            now: Some(checkpoint.created_at),
            manifest: checkpoint.manifest.clone(),
            faithfulness: checkpoint.faithfulness.clone(),
            chars_per_token,
        })
        .map_err(|e| copy_error(format!("checkpoint {} cannot be rebuilt: {e}", checkpoint.checkpoint)))?;
        self.checkpoints.insert(checkpoint.checkpoint.clone(), rebuilt.checkpoint.clone());
        Ok(Some(rebuilt))
    }
}
