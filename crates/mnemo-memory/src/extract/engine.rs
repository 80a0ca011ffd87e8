//! The extraction engine (memory.md §3.4–3.9): resolve the boundary, replay a receipt, retry a
//! pending range once, then process the trigger's range through proposal, localization,
//! admission, canonicalization and recheck, and commit items, cursor and receipt as one record.

use std::time::Duration;

use mnemo_core::{
    BoundaryDisposition, CheckpointId, Content, DenialReason, Digest, ExtractionFailureClass,
    ExtractionTrigger, ItemId, MemoryItemFields, MemoryScope, NoOpReason, OperationId, SessionId, SkipReason,
    TurnId,
};
use serde_json::json;

use crate::consolidate::{Link, Probe, held_items};
use crate::error::MemoryError;
use crate::extract::EXTRACT_USER_EVENTS_PER_RANGE_MAX;
use crate::extract::admission::{Admitted, Rejection, admit, carries_secret, to_fields};
use crate::extract::evidence::{self, Evidence, LocalizationQuery, SessionEvent};
use crate::extract::proposal::{
    CanonicalStatus, Proposal, ProposalStatus, ProposedItem, ProposedScope, RequestedStatus, SearchRole,
    parse_canonicalization, parse_proposal,
};
use crate::extract::ranges::is_user;
use crate::extract::seams::{
    CanonicalCandidate, CanonicalizePrompt, CitationView, HeldItem, ModelError, ProposalPrompt,
};
use crate::extract::{
    ExtractionHost, ExtractionOutcome, ExtractionReport, GateReason, Models, RejectedCandidate, Trigger,
};
use crate::ops::{
    CommitRequest, SettleRequest, SettleResult, commit_extraction, record_denial, settle_failure,
};
use crate::secrets::is_sensitive;
use crate::state::MemoryView;

/// Most model calls for one range, shared by proposal, localized and canonicalization calls.
pub const MODEL_CALLS_PER_RANGE_MAX: u32 = 3;
/// Longest a model call may take.
pub const MODEL_CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn hashed_id(prefix: &str, value: &serde_json::Value) -> Result<OperationId, MemoryError> {
    let bytes = mnemo_core::canonical_json(value)?;
    OperationId::new(format!("{prefix}{}", Digest::sha256(&bytes).to_hex()))
        .map_err(|e| MemoryError::Inconsistent(format!("a derived operation id is not valid: {e}")))
}

/// The trigger's range once its boundary is resolved.
#[derive(Debug, Clone)]
struct Range {
    operation: OperationId,
    trigger: ExtractionTrigger,
    checkpoint: Option<CheckpointId>,
    expected: u64,
    through: u64,
    requested_turn: Option<TurnId>,
    expected_coverage: Option<Digest>,
}

/// How one range ended, before settlement.
enum RangeEnd {
    Committed(crate::ops::CommitResult),
    Failed(ExtractionFailureClass),
    Blocked(String),
}

/// How one attempt ended.
enum Attempt {
    End(RangeEnd),
    Failed(ExtractionFailureClass),
}

struct Run<'a> {
    host: &'a dyn ExtractionHost,
    models: Models<'a>,
    session: SessionId,
    events: Vec<SessionEvent>,
    calls: u32,
    rejections: Vec<RejectedCandidate>,
    /// Items stored by the commits of windows and checkpoint ranges that precede the outcome's.
    stored: u64,
}

fn is_memory_tool(event: &mnemo_core::RuntimeEvent) -> bool {
    match &event.content {
        Some(Content::FunctionCall(call)) => call.name.starts_with("memory_"),
        Some(Content::FunctionResponse(response)) => response.name.starts_with("memory_"),
        _ => false,
    }
}

/// Resolves the trigger's boundary (memory.md §3.4 step 6): its ordinal, the requested turn,
/// the operation id and the checkpoint; `Err` carries why it is unavailable.
fn resolve(
    session: &SessionId,
    trigger: &Trigger,
    events: &[SessionEvent],
    host: &dyn ExtractionHost,
) -> Result<Result<Range, String>, MemoryError> {
    let position = |id: &mnemo_core::EventId| events.iter().position(|e| &e.event.id == id);
    let (kind, stable, at, requested, checkpoint) = match trigger {
        Trigger::Remember { tool_call: Some(call), .. } => {
            let found = events.iter().position(|e| {
                matches!(&e.event.content, Some(Content::FunctionCall(c)) if &c.id == call && c.name == "memory_remember")
            });
            let Some(index) = found else { return Ok(Err(format!("no memory_remember call {call}"))) };
            let turn = events[index].event.turn_id.clone();
            let boundary =
                events[..index].iter().rposition(|e| !e.event.partial && !is_memory_tool(&e.event));
            let Some(boundary) = boundary else {
                return Ok(Err("the remember call is the first event".to_owned()));
            };
            (ExtractionTrigger::Remember, call.as_str().to_owned(), boundary, Some(turn), None)
        }
        Trigger::Remember { through, .. } => {
            let index = match through {
                Some(id) => position(id),
                None => events.len().checked_sub(1),
            };
            let Some(index) = index else { return Ok(Err("no such event in the session".to_owned())) };
            let event = &events[index].event;
            (
                ExtractionTrigger::Remember,
                event.id.as_str().to_owned(),
                index,
                Some(event.turn_id.clone()),
                None,
            )
        }
        Trigger::Extract { terminal_event } => {
            let index = match terminal_event {
                Some(id) => position(id),
                None => events.len().checked_sub(1),
            };
            let Some(index) = index else { return Ok(Err("no such event in the session".to_owned())) };
            (ExtractionTrigger::Extract, events[index].event.id.as_str().to_owned(), index, None, None)
        }
        Trigger::Compaction { checkpoint } => {
            let record = host.checkpoints(session)?.into_iter().find(|c| &c.checkpoint == checkpoint);
            let Some(boundary) = record.and_then(|c| c.extraction_boundary) else {
                return Ok(Err(format!("checkpoint {checkpoint} has no extraction boundary")));
            };
            let index = events.iter().position(|e| {
                e.event.id == boundary.event
                    && e.event.run_id == boundary.run
                    && e.event.turn_id == boundary.turn
            });
            let Some(index) = index else {
                return Ok(Err("the checkpoint boundary event does not match".to_owned()));
            };
            (
                ExtractionTrigger::Compaction,
                checkpoint.as_str().to_owned(),
                index,
                None,
                Some(checkpoint.clone()),
            )
        }
    };
    let event = &events[at].event;
    let identity = if kind == ExtractionTrigger::Compaction {
        json!({"sessionId": session, "trigger": kind, "stableBoundary": stable})
    } else {
        json!({"sessionId": session, "trigger": kind, "stableBoundary": stable, "runId": event.run_id, "turnId": event.turn_id})
    };
    Ok(Ok(Range {
        operation: hashed_id("memory_", &identity)?,
        trigger: kind,
        checkpoint,
        expected: 0,
        through: events[at].ordinal,
        requested_turn: requested,
        expected_coverage: None,
    }))
}

/// Runs one extraction for `session` (memory.md §3.4).
pub async fn execute(
    host: &dyn ExtractionHost,
    models: Models<'_>,
    session: &SessionId,
    trigger: &Trigger,
) -> Result<ExtractionReport, MemoryError> {
    let mut run = Run {
        host,
        models,
        session: session.clone(),
        events: Vec::new(),
        calls: 0,
        rejections: Vec::new(),
        stored: 0,
    };
    let (operation, retried, outcome) = run.top(trigger).await?;
    let stored = run.stored + retried.as_ref().map_or(0, ExtractionOutcome::stored) + outcome.stored();
    Ok(ExtractionReport {
        stored,
        operation: operation.map(|o| o.as_str().to_owned()),
        retried,
        outcome,
        model_calls: run.calls,
        rejections: run.rejections,
    })
}

type TopResult = (Option<OperationId>, Option<ExtractionOutcome>, ExtractionOutcome);

fn unavailable(reason: impl Into<String>) -> ExtractionOutcome {
    ExtractionOutcome::Unavailable { reason: reason.into() }
}

impl Run<'_> {
    async fn top(&mut self, trigger: &Trigger) -> Result<TopResult, MemoryError> {
        if let Some(reason) = self.host.gate(&self.session)? {
            if let (Trigger::Compaction { checkpoint }, false) = (trigger, reason == GateReason::Unavailable)
            {
                self.events = self.host.session_events(&self.session)?;
                self.policy_skip(checkpoint, Some(reason))?;
            }
            return Ok((None, None, unavailable(reason.name())));
        }
        self.events = self.host.session_events(&self.session)?;
        let mut range = match resolve(&self.session, trigger, &self.events, self.host)? {
            Ok(range) => range,
            Err(reason) => return Ok((None, None, unavailable(reason))),
        };
        let op = Some(range.operation.clone());
        let store = self.host.state()?;
        let view = MemoryView::new(store.as_ref());
        if let Some(receipt) = view.receipt(&range.operation)? {
            return Ok((op, None, ExtractionOutcome::Committed { receipt, replayed: true }));
        }
        if let Some(checkpoint) = &range.checkpoint
            && self.predecessor_missing(checkpoint)?
        {
            return Ok((op, None, unavailable("the checkpoint's previous checkpoint is missing")));
        }
        if let Some(checkpoint) = &range.checkpoint
            && self.checkpoint_denied(checkpoint, &view)?
        {
            self.policy_skip(checkpoint, None)?;
            return Ok((op, None, unavailable("the checkpoint is policy-denied")));
        }
        let cursor = view.cursor(&self.session)?;
        range.expected = cursor.as_ref().map_or(0, |c| c.processed_ordinal);
        let pending = view.pending_failure(&self.session)?;
        drop(store);
        // A first run starts at the session's first event even when a checkpoint already folded
        // some of it: extraction reads the log, never the summary, so folded turns are not lost to
        // memory (decision 0126).
        let mut retried = None;
        if let Some(pending) = pending {
            if pending.first_operation == range.operation {
                return Ok((op, None, unavailable("the failed range waits for another trigger")));
            }
            if pending.from != range.expected + 1 || pending.through > range.through {
                return Ok((op, None, unavailable("the pending range does not start at the cursor")));
            }
            let retry = Range {
                operation: hashed_id(
                    "memory_retry_",
                    &json!({"triggerOperationId": range.operation, "firstOperationId": pending.first_operation, "coverageHash": pending.coverage_hash}),
                )?,
                trigger: pending.first_trigger,
                checkpoint: pending.checkpoint.clone(),
                expected: range.expected,
                through: pending.through,
                requested_turn: self
                    .turn_at(pending.through)
                    .filter(|_| pending.first_trigger == ExtractionTrigger::Remember),
                expected_coverage: Some(pending.coverage_hash),
            };
            let outcome = self.settled(&retry).await?;
            let blocked = matches!(outcome, ExtractionOutcome::Blocked { .. });
            retried = Some(outcome);
            if blocked {
                return Ok((op, retried, unavailable("the pending range's retry was blocked")));
            }
            range.expected = pending.through;
        }
        match self.recover_checkpoints(&range).await? {
            Ok(expected) => range.expected = expected,
            Err(outcome) => return Ok((op, retried, outcome)),
        }
        if range.expected >= range.through {
            let outcome = if range.trigger == ExtractionTrigger::Remember {
                ExtractionOutcome::NothingToProcess
            } else {
                unavailable("nothing new to process")
            };
            return Ok((op, retried, outcome));
        }
        let outcome = self.settled(&range).await?;
        Ok((op, retried, outcome))
    }

    /// Processes, earliest first, the compaction checkpoints whose boundary lies after the
    /// cursor and before the trigger's boundary (memory.md §3.4 step 12): policy-denied ones are
    /// skipped, the others extracted under their own operation ids. A failure is settled and
    /// stops the run. Returns the cursor after them.
    async fn recover_checkpoints(
        &mut self,
        range: &Range,
    ) -> Result<Result<u64, ExtractionOutcome>, MemoryError> {
        let mut expected = range.expected;
        let mut waiting: Vec<(u64, CheckpointId)> = Vec::new();
        for checkpoint in self.host.checkpoints(&self.session)? {
            let Some(boundary) = &checkpoint.extraction_boundary else { continue };
            let ordinal = self.events.iter().find(|e| e.event.id == boundary.event).map(|e| e.ordinal);
            if let Some(ordinal) = ordinal.filter(|o| *o > expected && *o < range.through)
                && range.checkpoint.as_ref() != Some(&checkpoint.checkpoint)
            {
                waiting.push((ordinal, checkpoint.checkpoint.clone()));
            }
        }
        waiting.sort();
        for (_, checkpoint) in waiting {
            let store = self.host.state()?;
            if self.checkpoint_denied(&checkpoint, &MemoryView::new(store.as_ref()))? {
                drop(store);
                self.policy_skip(&checkpoint, None)?;
            } else {
                drop(store);
                let trigger = Trigger::Compaction { checkpoint: checkpoint.clone() };
                let Ok(mut earlier) = resolve(&self.session, &trigger, &self.events, self.host)? else {
                    continue;
                };
                earlier.expected = expected;
                let outcome = self.settled(&earlier).await?;
                if !matches!(outcome, ExtractionOutcome::Committed { .. }) {
                    return Ok(Err(outcome));
                }
                self.stored += outcome.stored();
            }
            let store = self.host.state()?;
            expected =
                MemoryView::new(store.as_ref()).cursor(&self.session)?.map_or(0, |c| c.processed_ordinal);
        }
        Ok(Ok(expected))
    }

    /// The prior text checkpoint's summary for `range` (memory.md §3.6): for a compaction trigger
    /// its checkpoint's predecessor, otherwise the checkpoint whose coverage ends furthest at or
    /// before the range's end. Omitted when its chain is broken or cyclic or any checkpoint in it
    /// is policy-denied.
    fn prior_summary(&self, range: &Range) -> Result<Option<String>, MemoryError> {
        let checkpoints = self.host.checkpoints(&self.session)?;
        let by_id = |id: &CheckpointId| checkpoints.iter().find(|c| &c.checkpoint == id);
        let ordinal_of =
            |id: &mnemo_core::EventId| self.events.iter().find(|e| &e.event.id == id).map(|e| e.ordinal);
        let start = match &range.checkpoint {
            Some(id) => by_id(id).and_then(|c| c.previous.as_ref()).and_then(by_id),
            None => checkpoints
                .iter()
                .filter_map(|c| ordinal_of(&c.coverage.through.event).map(|o| (o, c)))
                .filter(|(o, _)| *o <= range.through)
                .max_by_key(|(o, _)| *o)
                .map(|(_, c)| c),
        };
        let Some(start) = start else { return Ok(None) };
        let store = self.host.state()?;
        let denials = MemoryView::new(store.as_ref()).denials(&self.session)?;
        let mut seen = std::collections::BTreeSet::new();
        let mut link = Some(start);
        while let Some(checkpoint) = link {
            let denied = checkpoint
                .extraction_boundary
                .as_ref()
                .is_some_and(|b| b.disposition == BoundaryDisposition::PolicyDenied)
                || denials.iter().any(|d| d.checkpoint == checkpoint.checkpoint);
            if denied || !seen.insert(&checkpoint.checkpoint) {
                return Ok(None);
            }
            link = match &checkpoint.previous {
                None => None,
                Some(previous) => match by_id(previous) {
                    Some(found) => Some(found),
                    None => return Ok(None),
                },
            };
        }
        Ok(match &start.body {
            mnemo_core::CheckpointBody::Text { summary, .. } => Some(summary.clone()),
            _ => None,
        })
    }

    /// Whether `checkpoint` names a previous checkpoint the session does not have (memory.md §3.6:
    /// a compaction trigger cannot be interpreted after a missing link).
    fn predecessor_missing(&self, checkpoint: &CheckpointId) -> Result<bool, MemoryError> {
        let checkpoints = self.host.checkpoints(&self.session)?;
        let previous =
            checkpoints.iter().find(|c| &c.checkpoint == checkpoint).and_then(|c| c.previous.as_ref());
        Ok(previous.is_some_and(|p| !checkpoints.iter().any(|c| &c.checkpoint == p)))
    }

    fn turn_at(&self, ordinal: u64) -> Option<TurnId> {
        self.events.iter().find(|e| e.ordinal == ordinal).map(|e| e.event.turn_id.clone())
    }

    fn checkpoint_denied(
        &self,
        checkpoint: &CheckpointId,
        view: &MemoryView<'_>,
    ) -> Result<bool, MemoryError> {
        let frozen = self.host.checkpoints(&self.session)?.into_iter().any(|c| {
            &c.checkpoint == checkpoint
                && c.extraction_boundary.is_some_and(|b| b.disposition == BoundaryDisposition::PolicyDenied)
        });
        Ok(frozen || view.denials(&self.session)?.iter().any(|d| &d.checkpoint == checkpoint))
    }

    /// The ordinal of the latest policy-denied checkpoint boundary at or before `through`:
    /// localization never searches across it.
    fn denial_barrier(&self, through: u64) -> Result<u64, MemoryError> {
        let store = self.host.state()?;
        let view = MemoryView::new(store.as_ref());
        let mut barrier = 0;
        for checkpoint in self.host.checkpoints(&self.session)? {
            let Some(boundary) = &checkpoint.extraction_boundary else { continue };
            let Some(ordinal) = self.events.iter().find(|e| e.event.id == boundary.event).map(|e| e.ordinal)
            else {
                continue;
            };
            if ordinal <= through && self.checkpoint_denied(&checkpoint.checkpoint, &view)? {
                barrier = barrier.max(ordinal);
            }
        }
        Ok(barrier)
    }

    /// Settles a compaction checkpoint as policy-denied: a denial record (incognito or
    /// disabled), then a policy-skip commit over the checkpoint's range. A pending remember or
    /// extract range cannot be absorbed: that commit conflicts and the range stays for its retry.
    fn policy_skip(
        &mut self,
        checkpoint: &CheckpointId,
        reason: Option<GateReason>,
    ) -> Result<(), MemoryError> {
        let scope = self.host.session_scope(&self.session)?;
        let denial = match reason {
            Some(GateReason::Incognito) => Some(DenialReason::Incognito),
            Some(GateReason::Disabled) => Some(DenialReason::MemoryDisabled),
            Some(GateReason::Ineligible) => Some(DenialReason::Ineligible),
            _ => None,
        };
        if let Some(denial) = denial {
            record_denial(self.host, &self.session, &scope, checkpoint, denial)?;
        }
        let Ok(mut range) = resolve(
            &self.session,
            &Trigger::Compaction { checkpoint: checkpoint.clone() },
            &self.events,
            self.host,
        )?
        else {
            return Ok(());
        };
        let store = self.host.state()?;
        range.expected =
            MemoryView::new(store.as_ref()).cursor(&self.session)?.map_or(0, |c| c.processed_ordinal);
        if range.through <= range.expected {
            return Ok(());
        }
        let entries = self.entries(range.expected, range.through);
        let request = CommitRequest {
            operation: hashed_id(
                "memory_policy_skip_",
                &json!({"sessionId": self.session, "checkpointId": checkpoint}),
            )?,
            session: self.session.clone(),
            scope,
            trigger: ExtractionTrigger::Compaction,
            checkpoint: Some(checkpoint.clone()),
            expected_cursor: range.expected,
            next_cursor: range.through,
            coverage_hash: evidence::coverage_hash(&entries)?,
            items: Vec::new(),
            requested: Vec::new(),
            links: Vec::new(),
            no_op_reason: None,
            skip_reason: Some(SkipReason::PolicyDenied),
        };
        match commit_extraction(self.host, &request) {
            Ok(_) | Err(MemoryError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn entries(&self, after: u64, through: u64) -> Vec<&SessionEvent> {
        self.events.iter().filter(|e| e.ordinal > after && e.ordinal <= through).collect()
    }

    /// Processes a range, split into windows when its evidence cannot be represented whole in one
    /// proposer call (memory.md §3.5): every window but the last as an `extract` under a segment
    /// operation id, each committing its own stretch, then, once all of them committed, the rest
    /// with the range's own trigger and operation id. The range is processed only when its last
    /// part commits; a window that does not commit ends the run with the cursor after the last one
    /// that did, so the next trigger reads on from there.
    async fn settled(&mut self, range: &Range) -> Result<ExtractionOutcome, MemoryError> {
        // NOTE: a retry is never split: the ledger accepts only a commit of the whole pending
        // range while it is pending. Windows are cut to fit, so a failed window retries whole.
        if range.expected_coverage.is_some() || self.fits(range, range.expected, range.through) {
            return self.settled_one(range).await;
        }
        let cuts = self.window_cuts(range);
        if cuts.is_empty() {
            return self.settled_one(range).await;
        }
        let prefix = if range.trigger == ExtractionTrigger::Compaction {
            "memory_compaction_segment_"
        } else {
            "memory_segment_"
        };
        let mut after = range.expected;
        for cut in cuts {
            let window = Range {
                operation: hashed_id(
                    prefix,
                    &json!({"operationId": range.operation, "afterOrdinal": after, "throughOrdinal": cut}),
                )?,
                trigger: ExtractionTrigger::Extract,
                checkpoint: None,
                expected: after,
                through: cut,
                requested_turn: None,
                expected_coverage: None,
            };
            let outcome = self.settled_one(&window).await?;
            if !matches!(outcome, ExtractionOutcome::Committed { .. }) {
                return Ok(outcome);
            }
            self.stored += outcome.stored();
            after = cut;
        }
        self.settled_one(&Range { expected: after, ..range.clone() }).await
    }

    /// Whether the evidence of `(after, through]` can be represented within the budget.
    fn fits(&self, range: &Range, after: u64, through: u64) -> bool {
        let entries = self.entries(after, through);
        let mut evidence = evidence::collect(&entries, range.requested_turn.as_ref(), None);
        evidence::fit(&mut evidence)
    }

    /// The last event of each window but the last of a range that does not fit whole: windows of
    /// at most [`EXTRACT_USER_EVENTS_PER_RANGE_MAX`] user events, as a manual extraction cuts a
    /// long stretch (so both read the same windows and find the same items), each shortened to
    /// the longest prefix that fits, ending at a turn change when one is in it. A remember range
    /// keeps its requested turn whole in the last window. Empty when no first window fits.
    fn window_cuts(&self, range: &Range) -> Vec<u64> {
        let entries = self.entries(range.expected, range.through);
        // Cuts fall before the requested turn, and before the range's last event.
        let limit = match &range.requested_turn {
            Some(turn) => entries.iter().position(|e| &e.event.turn_id == turn).unwrap_or(entries.len()),
            None => entries.len().saturating_sub(1),
        }
        .min(entries.len().saturating_sub(1));
        let mut cuts = Vec::new();
        let mut start = 0;
        while start < limit {
            let after = if start == 0 { range.expected } else { entries[start - 1].ordinal };
            if !cuts.is_empty() && self.fits(range, after, range.through) {
                break;
            }
            let mut end = start;
            let mut users = 0;
            while end < limit {
                if is_user(&entries[end].event) {
                    if users == EXTRACT_USER_EVENTS_PER_RANGE_MAX {
                        break;
                    }
                    users += 1;
                }
                end += 1;
            }
            // `end` entries from `start` hold at most the window's user events; the longest
            // prefix of them that fits, found by halving (a shorter prefix fits if a longer does).
            let fits_through = |count: usize| self.fits(range, after, entries[start + count - 1].ordinal);
            let (mut low, mut high) = (0, end - start);
            while low < high {
                let mid = (low + high).div_ceil(2);
                if fits_through(mid) { low = mid } else { high = mid - 1 }
            }
            if low == 0 {
                break;
            }
            let turn_change = (1..=low).rev().find(|count| {
                entries[start + count - 1].event.turn_id != entries[start + count].event.turn_id
            });
            let count = turn_change.unwrap_or(low);
            cuts.push(entries[start + count - 1].ordinal);
            start += count;
        }
        cuts
    }

    /// Processes one range and settles a counted failure.
    async fn settled_one(&mut self, range: &Range) -> Result<ExtractionOutcome, MemoryError> {
        match self.process(range).await? {
            RangeEnd::Committed(result) => {
                Ok(ExtractionOutcome::Committed { receipt: result.receipt, replayed: result.replayed })
            }
            RangeEnd::Blocked(reason) => Ok(ExtractionOutcome::Blocked { reason }),
            RangeEnd::Failed(class) => {
                if let Some(reason) = self.host.gate(&self.session)? {
                    return Ok(ExtractionOutcome::Blocked { reason: reason.name().to_owned() });
                }
                let entries = self.entries(range.expected, range.through);
                let request = SettleRequest {
                    operation: range.operation.clone(),
                    session: self.session.clone(),
                    scope: self.host.session_scope(&self.session)?,
                    expected_cursor: range.expected,
                    failed_through: range.through,
                    coverage_hash: evidence::coverage_hash(&entries)?,
                    failure_class: class,
                    trigger: range.trigger,
                    checkpoint: range.checkpoint.clone(),
                };
                Ok(match settle_failure(self.host, &request)? {
                    SettleResult::RetryLater { pending, .. } => {
                        ExtractionOutcome::RetryLater { class, pending }
                    }
                    SettleResult::Discarded { receipt, .. } => {
                        ExtractionOutcome::Discarded { class, receipt }
                    }
                })
            }
        }
    }

    fn commit(
        &self,
        range: &Range,
        coverage: Digest,
        items: Vec<MemoryItemFields>,
        requested: Vec<u32>,
        no_op: Option<NoOpReason>,
    ) -> Result<RangeEnd, MemoryError> {
        self.commit_request(range, coverage, items, requested, no_op, Vec::new())
    }

    fn commit_request(
        &self,
        range: &Range,
        coverage: Digest,
        items: Vec<MemoryItemFields>,
        requested: Vec<u32>,
        no_op: Option<NoOpReason>,
        links: Vec<Option<Link>>,
    ) -> Result<RangeEnd, MemoryError> {
        if let Some(reason) = self.host.gate(&self.session)? {
            return Ok(RangeEnd::Blocked(reason.name().to_owned()));
        }
        let request = CommitRequest {
            operation: range.operation.clone(),
            session: self.session.clone(),
            scope: self.host.session_scope(&self.session)?,
            trigger: range.trigger,
            checkpoint: range.checkpoint.clone(),
            expected_cursor: range.expected,
            next_cursor: range.through,
            coverage_hash: coverage,
            items,
            requested,
            links,
            no_op_reason: no_op,
            skip_reason: None,
        };
        Ok(RangeEnd::Committed(commit_extraction(self.host, &request)?))
    }

    async fn process(&mut self, range: &Range) -> Result<RangeEnd, MemoryError> {
        let entries = self.entries(range.expected, range.through);
        let coverage = evidence::coverage_hash(&entries)?;
        if range.expected_coverage.is_some_and(|h| h != coverage) {
            return Ok(RangeEnd::Blocked("the range's events changed since it failed".to_owned()));
        }
        let mut evidence = evidence::collect(&entries, range.requested_turn.as_ref(), None);
        let remember = range.trigger == ExtractionTrigger::Remember;
        if remember && evidence.iter().any(|e| e.requested_turn && is_sensitive(&e.full)) {
            return self.commit(
                range,
                coverage,
                Vec::new(),
                Vec::new(),
                Some(NoOpReason::SensitiveInformation),
            );
        }
        if evidence.is_empty() && !remember {
            return self.commit(range, coverage, Vec::new(), Vec::new(), None);
        }
        if !evidence::fit(&mut evidence) {
            return Ok(RangeEnd::Failed(ExtractionFailureClass::Evidence));
        }
        let mut budget = MODEL_CALLS_PER_RANGE_MAX;
        let mut last = ExtractionFailureClass::Provider;
        while budget > 0 {
            match self.attempt(range, coverage, &evidence, &mut budget).await? {
                Attempt::End(end) => return Ok(end),
                Attempt::Failed(class) => last = class,
            }
        }
        Ok(RangeEnd::Failed(last))
    }

    async fn call_model(
        &mut self,
        budget: &mut u32,
        prompt: Prompt<'_>,
    ) -> Result<Result<String, Attempt>, MemoryError> {
        if *budget == 0 {
            return Ok(Err(Attempt::Failed(ExtractionFailureClass::Provider)));
        }
        if let Some(reason) = self.host.gate(&self.session)? {
            return Ok(Err(Attempt::End(RangeEnd::Blocked(reason.name().to_owned()))));
        }
        *budget -= 1;
        self.calls += 1;
        let call = async {
            match prompt {
                Prompt::Proposal(p) => self.models.proposer.propose(p).await,
                Prompt::Canonical(p) => self.models.canonicalizer.canonicalize(p).await,
            }
        };
        let answer = tokio::time::timeout(MODEL_CALL_TIMEOUT, call).await.unwrap_or(Err(ModelError::Timeout));
        Ok(match answer {
            Ok(text) => Ok(text),
            Err(ModelError::Provider(_) | ModelError::Timeout) => {
                Err(Attempt::Failed(ExtractionFailureClass::Provider))
            }
            Err(other) => Err(Attempt::End(RangeEnd::Blocked(other.to_string()))),
        })
    }

    async fn attempt(
        &mut self,
        range: &Range,
        coverage: Digest,
        evidence: &[Evidence],
        budget: &mut u32,
    ) -> Result<Attempt, MemoryError> {
        let entries = self.entries(range.expected, range.through);
        let prompt = ProposalPrompt {
            trigger: range.trigger,
            requested_turn: range.requested_turn.clone(),
            evidence: evidence::views(evidence),
            prior_summary: self.prior_summary(range)?,
            context: evidence::context(&entries),
            localized_terms: None,
        };
        let text = match self.call_model(budget, Prompt::Proposal(&prompt)).await? {
            Ok(text) => text,
            Err(attempt) => return Ok(attempt),
        };
        let Ok(proposal) = parse_proposal(&text, range.trigger) else {
            return Ok(Attempt::Failed(ExtractionFailureClass::Schema));
        };
        let mut incidental = proposal.incidental_items.clone();
        let (requested, requested_evidence) = match proposal.status {
            ProposalStatus::CannotResolve => {
                return Ok(Attempt::Failed(ExtractionFailureClass::Localization));
            }
            ProposalStatus::SearchRequired => {
                match self.localize(range, coverage, &proposal, budget).await? {
                    Ok((second, localized)) => {
                        incidental.extend(second.incidental_items);
                        (second.requested_items, localized)
                    }
                    Err(attempt) => return Ok(attempt),
                }
            }
            ProposalStatus::Complete => (proposal.requested_items.clone(), evidence.to_vec()),
        };
        self.admit_all(range, coverage, evidence, &requested, &requested_evidence, &incidental, budget).await
    }

    /// The one localization pass (memory.md §3.9 stage 1b): search, localized evidence, the
    /// localized call. `Ok(Err(_))` ends the attempt.
    async fn localize(
        &mut self,
        range: &Range,
        coverage: Digest,
        first: &Proposal,
        budget: &mut u32,
    ) -> Result<Result<(Proposal, Vec<Evidence>), Attempt>, MemoryError> {
        let fail = |class| Ok(Err(Attempt::Failed(class)));
        if let Some(reason) = self.host.gate(&self.session)? {
            return Ok(Err(Attempt::End(RangeEnd::Blocked(reason.name().to_owned()))));
        }
        let Some(ask) = &first.search else { return fail(ExtractionFailureClass::Schema) };
        let roles = ask.roles.clone().unwrap_or_else(|| vec![SearchRole::User, SearchRole::Assistant]);
        let query = LocalizationQuery {
            terms: ask.terms.iter().map(|t| crate::text::normalize_evidence(t).to_lowercase()).collect(),
            user: roles.contains(&SearchRole::User),
            assistant: roles.contains(&SearchRole::Assistant),
            after_ordinal: self.denial_barrier(range.through)?,
            through_ordinal: range.through,
        };
        let ordinals = self.models.localization.localize(&self.session, &self.events, &query)?;
        let localized: Vec<&SessionEvent> =
            self.events.iter().filter(|e| ordinals.contains(&e.ordinal)).collect();
        let context = evidence::context(&localized);
        if context.is_empty() {
            return fail(ExtractionFailureClass::Localization);
        }
        let mut found = evidence::collect(&localized, range.requested_turn.as_ref(), Some(&query.terms));
        if range.trigger == ExtractionTrigger::Remember && found.iter().any(|e| is_sensitive(&e.full)) {
            let end =
                self.commit(range, coverage, Vec::new(), Vec::new(), Some(NoOpReason::SensitiveInformation))?;
            return Ok(Err(Attempt::End(end)));
        }
        if !evidence::fit(&mut found) {
            return fail(ExtractionFailureClass::Evidence);
        }
        if *budget == 0 {
            return fail(ExtractionFailureClass::Localization);
        }
        let prompt = ProposalPrompt {
            trigger: range.trigger,
            requested_turn: range.requested_turn.clone(),
            evidence: evidence::views(&found),
            prior_summary: self.prior_summary(range)?,
            context,
            localized_terms: Some(query.terms.clone()),
        };
        let text = match self.call_model(budget, Prompt::Proposal(&prompt)).await? {
            Ok(text) => text,
            Err(attempt) => return Ok(Err(attempt)),
        };
        let Ok(second) = parse_proposal(&text, range.trigger) else {
            return fail(ExtractionFailureClass::Schema);
        };
        match second.status {
            ProposalStatus::CannotResolve => fail(ExtractionFailureClass::Localization),
            ProposalStatus::SearchRequired => fail(ExtractionFailureClass::Schema),
            ProposalStatus::Complete
                if range.trigger == ExtractionTrigger::Remember
                    && second.requested_status == RequestedStatus::Unresolved =>
            {
                fail(ExtractionFailureClass::Localization)
            }
            ProposalStatus::Complete => Ok(Ok((second, found))),
        }
    }

    fn reject(&mut self, requested: bool, item: &ProposedItem, rejection: Rejection) {
        self.rejections.push(RejectedCandidate { requested, content: item.content.clone(), rejection });
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the admission stage needs both evidence sets and the range"
    )]
    async fn admit_all(
        &mut self,
        range: &Range,
        coverage: Digest,
        evidence: &[Evidence],
        requested: &[ProposedItem],
        requested_evidence: &[Evidence],
        incidental: &[ProposedItem],
        budget: &mut u32,
    ) -> Result<Attempt, MemoryError> {
        let sensitive_no_op = |this: &Self| -> Result<Attempt, MemoryError> {
            Ok(Attempt::End(this.commit(
                range,
                coverage,
                Vec::new(),
                Vec::new(),
                Some(NoOpReason::SensitiveInformation),
            )?))
        };
        let remember = range.trigger == ExtractionTrigger::Remember;
        let mut candidates: Vec<(bool, Admitted)> = Vec::new();
        for item in requested {
            match admit(item, requested_evidence, &item.evidence, None) {
                Ok(admitted) => candidates.push((true, admitted)),
                Err(Rejection::Sensitive) if remember => return sensitive_no_op(self),
                Err(rejection) => {
                    let class = match rejection {
                        Rejection::Admission(_) => ExtractionFailureClass::RequestedAdmission,
                        _ => ExtractionFailureClass::Evidence,
                    };
                    self.reject(true, item, rejection);
                    return Ok(Attempt::Failed(class));
                }
            }
        }
        let covered = Some((range.expected + 1, range.through));
        for item in incidental {
            match admit(item, evidence, &item.evidence, covered) {
                Ok(admitted) => candidates.push((false, admitted)),
                Err(rejection) => self.reject(false, item, rejection),
            }
        }
        let scope = self.host.session_scope(&self.session)?;
        let held = self.held(&candidates, &scope)?;
        let canonical = match self.canonicalize(&candidates, &held, budget).await? {
            Ok(canonical) => canonical,
            Err(attempt) => return Ok(attempt),
        };
        let (mut items, mut indexes, mut links) = (Vec::new(), Vec::new(), Vec::new());
        for ((was_requested, admitted), verdict) in candidates.iter().zip(canonical) {
            let pool = if *was_requested { requested_evidence } else { evidence };
            let (verdict, link) = match verdict {
                Some((item, link)) => (Some(item), link),
                None => (None, None),
            };
            let recheck = match verdict {
                None => Err(Rejection::CanonicalizerRejected),
                Some(item) if carries_secret(&item) && *was_requested && remember => {
                    return sensitive_no_op(self);
                }
                Some(item) => {
                    admit(&item, pool, &admitted.item.evidence, if *was_requested { None } else { covered })
                }
            };
            let fields = recheck.and_then(|a| to_fields(&a, pool, *was_requested, &scope));
            match fields {
                Ok(fields) => {
                    if *was_requested {
                        indexes.push(items.len() as u32);
                    }
                    items.push(fields);
                    links.push(link);
                }
                // Not stored, rather than stored for every project: the remember result says so.
                Err(Rejection::NoWorkspace) => {
                    self.reject(*was_requested, &admitted.item, Rejection::NoWorkspace)
                }
                Err(rejection) if *was_requested => {
                    self.reject(true, &admitted.item, rejection);
                    return Ok(Attempt::Failed(ExtractionFailureClass::RequestedAdmission));
                }
                Err(rejection) => self.reject(false, &admitted.item, rejection),
            }
        }
        items.truncate(mnemo_core::limits::MEMORY_MUTATIONS_MAX);
        links.truncate(items.len());
        indexes.retain(|i| (*i as usize) < items.len());
        // The receipt keeps why a request stored nothing, so a replay answers the same.
        let no_workspace = remember
            && items.is_empty()
            && self.rejections.iter().any(|r| r.requested && r.rejection == Rejection::NoWorkspace);
        let no_op = no_workspace.then_some(NoOpReason::NoWorkspace);
        Ok(Attempt::End(self.commit_request(range, coverage, items, indexes, no_op, links)?))
    }

    /// The held items the candidates may restate or contradict (decision 0155).
    fn held(
        &self,
        candidates: &[(bool, Admitted)],
        workspace: &MemoryScope,
    ) -> Result<Vec<HeldItem>, MemoryError> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let probes: Vec<Probe> = candidates
            .iter()
            .map(|(_, admitted)| Probe {
                scope: match admitted.item.scope {
                    ProposedScope::Workspace => workspace.clone(),
                    _ => MemoryScope::Global,
                },
                kind: admitted.item.kind,
                content: admitted.item.content.clone(),
                keys: admitted
                    .item
                    .keys
                    .iter()
                    .map(|k| mnemo_core::MemoryKey::normalize(k.key.trim()))
                    .collect(),
            })
            .collect();
        let store = self.host.state()?;
        Ok(held_items(store.as_ref(), &probes)?
            .into_iter()
            .map(|item| HeldItem {
                item_id: item.item.as_str().to_owned(),
                content: item.fields.content,
                kind: item.fields.kind,
                scope: if item.fields.scope == MemoryScope::Global { "global" } else { "workspace" },
            })
            .collect())
    }

    /// Canonicalization with retries while budget remains (memory.md §3.9 stage 3): each
    /// candidate's canonical item, or `None` when rejected.
    async fn canonicalize(
        &mut self,
        candidates: &[(bool, Admitted)],
        held: &[HeldItem],
        budget: &mut u32,
    ) -> Result<Result<Vec<Option<(ProposedItem, Option<Link>)>>, Attempt>, MemoryError> {
        if candidates.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let mut prompt = canonical_prompt(candidates);
        prompt.held = held.to_vec();
        // A link names an item of the prompt's `held` list; any other id is ignored.
        let link = |id: &Option<String>| -> Option<ItemId> {
            id.as_ref()
                .filter(|id| held.iter().any(|h| &&h.item_id == id))
                .and_then(|id| ItemId::new(id.as_str()).ok())
        };
        let ids: Vec<String> = prompt.candidates.iter().map(|c| c.candidate_id.clone()).collect();
        loop {
            let text = match self.call_model(budget, Prompt::Canonical(&prompt)).await? {
                Ok(text) => text,
                Err(attempt) => return Ok(Err(attempt)),
            };
            match parse_canonicalization(&text, &ids) {
                Ok(answer) => {
                    let verdicts = ids
                        .iter()
                        .map(|id| {
                            answer.results.iter().find(|r| &r.candidate_id == id).and_then(|r| {
                                match r.status {
                                    CanonicalStatus::Accepted => r.item.clone().map(|item| {
                                        let linked = link(&r.same_as)
                                            .map(Link::SameAs)
                                            .or_else(|| link(&r.supersedes).map(Link::Supersedes));
                                        (item, linked)
                                    }),
                                    CanonicalStatus::Rejected => None,
                                }
                            })
                        })
                        .collect();
                    return Ok(Ok(verdicts));
                }
                Err(_) if *budget > 0 => continue,
                Err(_) => return Ok(Err(Attempt::Failed(ExtractionFailureClass::Schema))),
            }
        }
    }
}

enum Prompt<'p> {
    Proposal(&'p ProposalPrompt),
    Canonical(&'p CanonicalizePrompt),
}

fn canonical_prompt(candidates: &[(bool, Admitted)]) -> CanonicalizePrompt {
    CanonicalizePrompt {
        held: Vec::new(),
        candidates: candidates
            .iter()
            .enumerate()
            .map(|(index, (requested, admitted))| {
                let mut item = admitted.item.clone();
                item.evidence.clear();
                CanonicalCandidate {
                    candidate_id: format!("candidate_{}", index + 1),
                    requested: *requested,
                    item: serde_json::to_value(&item).unwrap_or(serde_json::Value::Null),
                    evidence: admitted
                        .item
                        .evidence
                        .iter()
                        .zip(admitted.quotes.iter().zip(&admitted.observed))
                        .map(|(c, (quote, observed_at))| CitationView {
                            source_ref: c.source_ref.clone(),
                            quote: quote.clone(),
                            observed_at: *observed_at,
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}
