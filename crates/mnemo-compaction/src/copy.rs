//! Conversation copy (events-and-history.md §4): a new session holding a prefix of another's
//! conversation under new identities, with its text checkpoints rebuilt over the copied events.
//!
//! The copy is planned here in full (every record of the new stream) and appended by the caller in
//! one atomic append of a new stream, under the copy's own batch limits (decision 0147), so a copy
//! either exists whole or not at all, whatever the source's length.
//!
//! A copy through or before a turn keeps the events of the turns it keeps wherever they were logged
//! (turn membership, not log position: a turn-1 event logged after turn 2 began is kept). Streaming
//! chunks are never copied (decision 0145). A source whose revision family has an archived member,
//! and a source run that continues another run, are refused with a typed [`CopyRefusal`].
//!
//! Identities: each copied run and invocation gets a new id, each event a new id, all derived from
//! the target session and the source id (so the same copy of the same log is the same records);
//! turn ids are kept. A retried copy to the same target finds the committed copy
//! ([`committed_copy`]) instead of a conflict. V3 checkpoints are dropped (the copy can compact
//! again from its raw events). A checkpoint with an invalid shape (including a superseded source
//! policy), one whose coverage does not match the source projection, or one whose sectioned summary
//! is defective fails the whole copy with a clear reason.

use std::collections::{BTreeMap, BTreeSet};

use mnemo_core::redaction::redact_secrets;
use mnemo_core::{
    CheckpointBody, CheckpointId, ConversationCopied, CopyBoundary, EventId, InvocationId, Position, Record,
    RunId, RuntimeEvent, SessionId, SessionOpened, StorageRef, SummaryFormat, TurnEnded, TurnId,
};
use mnemo_pipeline::LoggedRecord;
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
    /// An archived member of the source's revision family (the source itself included), as the
    /// caller's session headers know it; a copy of such a family is refused.
    pub archived_member: Option<SessionId>,
}

/// Why a conversation copy was refused; nothing was appended. Each has a stable [`code`](Self::code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CopyRefusal {
    /// The target is the source. Name a new session.
    #[error("the copy must be a new session, not {0}")]
    TargetIsSource(SessionId),
    /// The boundary's turn is not in the source. Check the turn id.
    #[error("source turn {0} does not exist")]
    UnknownTurn(TurnId),
    /// The boundary's event is not in the source. Check the event id.
    #[error("source event {0} does not exist")]
    UnknownEvent(EventId),
    /// A member of the source's revision family is archived (the spec's `operation_conflict`):
    /// restore it first.
    #[error("session {member} of the source's revision family is archived")]
    ArchivedFamily {
        /// The archived member.
        member: SessionId,
    },
    /// A copied run continues another run (`continuationStart`, or continuation source refs): its
    /// runtime facts cannot be rewritten (the spec's `branch_runtime_fact_rewrite_unsupported`).
    #[error("run {run} continues another run; its runtime facts cannot be rewritten by a copy")]
    ContinuationRun {
        /// The source run.
        run: RunId,
    },
    /// The target session exists and is not this copy (another source or boundary, or records that
    /// differ from what this copy would make). Choose another target.
    #[error("session {target} already exists and is not this copy: {detail}")]
    TargetExists {
        /// The target asked for.
        target: SessionId,
        /// How it differs.
        detail: String,
    },
}

impl CopyRefusal {
    /// The refusal's stable code.
    pub fn code(&self) -> &'static str {
        match self {
            CopyRefusal::TargetIsSource(_) => "target_is_source",
            CopyRefusal::UnknownTurn(_) => "source_turn_not_found",
            CopyRefusal::UnknownEvent(_) => "source_event_not_found",
            CopyRefusal::ArchivedFamily { .. } => "archived_family",
            CopyRefusal::ContinuationRun { .. } => "branch_runtime_fact_rewrite_unsupported",
            CopyRefusal::TargetExists { .. } => "target_exists",
        }
    }
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

fn refused(refusal: CopyRefusal) -> CompactionError {
    CompactionError::CopyRefused(refusal)
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
        return Err(refused(CopyRefusal::TargetIsSource(target)));
    }
    if let Some(member) = &options.archived_member {
        return Err(refused(CopyRefusal::ArchivedFamily { member: member.clone() }));
    }
    let records = ledger.records(mnemo_core::StreamRevision(0))?;
    let slice = Slice::of(&records, options.up_to.as_ref())?;
    refuse_continuations(&records, &slice)?;
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
    for logged in &records {
        match &logged.record {
            Record::SessionOpened(open) => {
                opened = true;
                plan_records
                    .push(Record::SessionOpened(SessionOpened { session: target.clone(), ..open.clone() }));
                plan_records.push(copied_marker(&source, &target, slice.recorded.clone()));
            }
            // A streaming chunk is never history (decision 0145): its final event is copied instead.
            Record::RuntimeEvent(event) if event.partial => {}
            Record::RuntimeEvent(event) if slice.keeps_event(event, logged.position) => {
                plan_records.push(Record::RuntimeEvent(copier.clone_event(event)?))
            }
            Record::TurnEnded(end) if slice.keeps_turn(&end.turn, logged.position) => {
                plan_records.push(Record::TurnEnded(TurnEnded {
                    session: target.clone(),
                    turn: end.turn.clone(),
                    run: end.run.as_ref().map(|r| copier.run(r)).transpose()?,
                    status: end.status,
                }))
            }
            Record::CheckpointRecorded(checkpoint) if logged.position < slice.cut => {
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
        plan_records.insert(0, copied_marker(&source, &target, slice.recorded.clone()));
    }
    let events = copier.events.len() as u64;
    for record in plan_records.iter_mut() {
        if let Record::ConversationCopied(marker) = record {
            marker.events = copier.events.clone();
        }
    }
    Ok(CopyPlan { target, records: plan_records, events, checkpoints_rebuilt, checkpoints_dropped })
}

/// The copy already committed to `options.target` when it is this copy: the same source and
/// boundary, and its first records exactly those a plan at the recorded boundary makes now (so the
/// copy is also verified whole). `target_records` are the target stream's records from revision 0.
/// Returns the plan and where its records are; a target holding anything else is
/// [`CopyRefusal::TargetExists`].
pub fn committed_copy(
    ledger: &SessionLedger<'_>,
    target_records: &[LoggedRecord],
    options: &CopyOptions,
) -> Result<(CopyPlan, Position, Position), CompactionError> {
    let target = options.target.clone().ok_or_else(|| copy_error("a committed copy needs its target"))?;
    let differs = |detail: String| refused(CopyRefusal::TargetExists { target: target.clone(), detail });
    let marker = target_records
        .iter()
        .find_map(|r| match &r.record {
            Record::ConversationCopied(marker) => Some(marker),
            _ => None,
        })
        .ok_or_else(|| differs("it is not a conversation copy".to_owned()))?;
    if marker.source != *ledger.session() {
        return Err(differs(format!("it is a copy of {}", marker.source)));
    }
    if let Some(asked) = &options.up_to
        && *asked != marker.up_to
    {
        return Err(differs(format!("it was copied {}", boundary_text(&marker.up_to))));
    }
    let recorded = if marker.events.is_empty() { None } else { Some(marker.up_to.clone()) };
    // The copy exists: a family archived since does not take it back.
    let plan = plan_copy(ledger, &CopyOptions { up_to: recorded, archived_member: None, ..options.clone() })?;
    let stored = target_records.get(..plan.records.len()).unwrap_or_default();
    let same = stored.len() == plan.records.len()
        && stored.iter().zip(&plan.records).all(|(logged, planned)| logged.record == *planned);
    match (same, stored.first(), stored.last()) {
        (true, Some(first), Some(last)) => Ok((plan, first.position, last.position)),
        _ => Err(differs("its records are not the ones this copy makes from the source now".to_owned())),
    }
}

fn boundary_text(boundary: &CopyBoundary) -> String {
    match boundary {
        CopyBoundary::ThroughTurn(turn) => format!("through turn {turn}"),
        CopyBoundary::BeforeTurn(turn) => format!("before turn {turn}"),
        CopyBoundary::ThroughEvent(event) => format!("through event {event}"),
        _ => "an unknown boundary".to_owned(),
    }
}

fn copied_marker(source: &SessionId, target: &SessionId, up_to: CopyBoundary) -> Record {
    Record::ConversationCopied(ConversationCopied {
        source: source.clone(),
        session: target.clone(),
        up_to,
        events: Vec::new(),
    })
}

#[expect(clippy::expect_used, reason = "a literal id is valid")]
fn placeholder_event() -> EventId {
    EventId::new("end").expect("a literal id is valid")
}

/// What a copy keeps of its source (events-and-history.md §4.2). Turn order is first appearance.
/// A turn boundary keeps every event and turn end of the kept turns, wherever the log holds them;
/// an event boundary keeps everything up to and including that event. Checkpoints are considered
/// only before `cut` (the first event of the first turn left out), where everything logged belongs
/// to a kept turn.
struct Slice {
    /// The kept turns; every turn when absent.
    turns: Option<BTreeSet<TurnId>>,
    /// The first log position whose checkpoints (and, for an event boundary, anything) are left out.
    cut: Position,
    /// The boundary the marker records: the one asked for, or for a whole copy the last turn
    /// (a retry re-plans at it, decision 0147).
    recorded: CopyBoundary,
}

impl Slice {
    fn of(records: &[LoggedRecord], up_to: Option<&CopyBoundary>) -> Result<Slice, CompactionError> {
        let events: Vec<(Position, &RuntimeEvent)> = records
            .iter()
            .filter_map(|r| match &r.record {
                Record::RuntimeEvent(e) => Some((r.position, e)),
                _ => None,
            })
            .collect();
        let mut order: Vec<&TurnId> = Vec::new();
        let mut first_of: BTreeMap<&TurnId, Position> = BTreeMap::new();
        for (position, event) in &events {
            if !first_of.contains_key(&event.turn_id) {
                first_of.insert(&event.turn_id, *position);
                order.push(&event.turn_id);
            }
        }
        let Some(up_to) = up_to else {
            let recorded = match order.last() {
                Some(turn) => CopyBoundary::ThroughTurn((*turn).clone()),
                None => CopyBoundary::ThroughEvent(placeholder_event()),
            };
            return Ok(Slice { turns: None, cut: Position(u64::MAX), recorded });
        };
        match up_to {
            CopyBoundary::ThroughTurn(turn) | CopyBoundary::BeforeTurn(turn) => {
                let index = order
                    .iter()
                    .position(|t| *t == turn)
                    .ok_or_else(|| refused(CopyRefusal::UnknownTurn(turn.clone())))?;
                let kept = if matches!(up_to, CopyBoundary::ThroughTurn(_)) { index + 1 } else { index };
                let cut =
                    order.get(kept).and_then(|t| first_of.get(t).copied()).unwrap_or(Position(u64::MAX));
                let turns = order[..kept].iter().map(|t| (*t).clone()).collect();
                Ok(Slice { turns: Some(turns), cut, recorded: up_to.clone() })
            }
            CopyBoundary::ThroughEvent(event) => {
                let (position, _) = events
                    .iter()
                    .find(|(_, e)| &e.id == event)
                    .ok_or_else(|| refused(CopyRefusal::UnknownEvent(event.clone())))?;
                Ok(Slice { turns: None, cut: position.next(), recorded: up_to.clone() })
            }
            _ => Err(copy_error("unsupported copy boundary")),
        }
    }

    fn keeps_turn(&self, turn: &TurnId, position: Position) -> bool {
        match &self.turns {
            Some(turns) => turns.contains(turn),
            None => position < self.cut,
        }
    }

    fn keeps_event(&self, event: &RuntimeEvent, position: Position) -> bool {
        self.keeps_turn(&event.turn_id, position)
    }
}

/// Refuses a copy that would carry a run continuing another run (events-and-history.md §4.3): any
/// event of a copied run with `actions.continuationStart` or continuation source refs.
fn refuse_continuations(records: &[LoggedRecord], slice: &Slice) -> Result<(), CompactionError> {
    let events = || {
        records.iter().filter_map(|r| match &r.record {
            Record::RuntimeEvent(e) => Some((r.position, e)),
            _ => None,
        })
    };
    let copied: BTreeSet<&RunId> = events()
        .filter(|(position, e)| !e.partial && slice.keeps_event(e, *position))
        .map(|(_, e)| &e.run_id)
        .collect();
    for (_, event) in events().filter(|(_, e)| copied.contains(&e.run_id)) {
        let starts = event.actions.as_ref().is_some_and(|a| a.continuation_start.is_some());
        let continues = event
            .refs
            .as_ref()
            .is_some_and(|r| r.source_run_id.is_some() || r.source_invocation_id.is_some());
        if starts || continues {
            return Err(refused(CopyRefusal::ContinuationRun { run: event.run_id.clone() }));
        }
    }
    Ok(())
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
            // Continuation source refs never reach here: such runs are refused first.
            refs.trace_event_id = None;
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
