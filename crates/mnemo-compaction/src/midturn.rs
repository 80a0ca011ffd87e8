//! Mid-turn capacity compaction (compaction.md §3.6) and reactive overflow recovery (§3.8): between
//! provider steps of one turn, fold a safe prefix of prior history and the turn so far, never
//! separating a tool call from its result, retreating before partial events and pinning steering
//! messages, open calls and (pre-turn) the head anchor.
//!
//! The planner never ends a turn: every failure is a fail-open outcome with a detail and a reason,
//! and the caller keeps the raw projection for that step.

use std::collections::BTreeMap;

use mnemo_core::{
    Author, BoundaryDisposition, CheckpointManifest, CheckpointPhase, Content, EventId, ExtractionBoundary,
    Role, RuntimeEvent, TimestampMs,
};

use crate::assembly::replay_fits;
use crate::checkpoint::{
    BodyInput, CheckpointInput, Connection, build_checkpoint, can_continue, match_prefix,
};
use crate::coordinator::Coordinator;
use crate::faithfulness::check_faithfulness;
use crate::history::{HistoryItem, checkpoint_items, items_tokens};
use crate::policy::CompactionPolicy;
use crate::projection::{estimate_tokens, is_compactable};
use crate::stage::LoggedCheckpoint;
use crate::summarizer::{Summarizer, summarize_text};

/// How long a mid-turn compaction waits for the turn's last step to be durable before it gives up
/// (`ledger_wait_aborted`, compaction.md §3.6).
pub const LEDGER_WAIT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(5);

/// The payload estimate (§3.6): with a usable input-token count from the last step and its payload
/// baseline, that count plus the signed change in characters; otherwise a cold estimate.
pub fn estimate_payload_tokens(
    last_input_tokens: Option<u64>,
    baseline_chars: Option<u64>,
    payload_chars: u64,
    chars_per_token: u64,
) -> u64 {
    let cpt = chars_per_token.max(1) as i128;
    match (last_input_tokens.filter(|t| *t > 0), baseline_chars) {
        (Some(tokens), Some(baseline)) => {
            let delta = payload_chars as i128 - baseline as i128;
            // A signed ceiling: growth rounds up, shrinkage is credited.
            let delta_tokens = if delta >= 0 { (delta + cpt - 1) / cpt } else { -((-delta) / cpt) };
            u64::try_from((tokens as i128 + delta_tokens).max(0)).unwrap_or(0)
        }
        _ => estimate_tokens(payload_chars, chars_per_token),
    }
}

/// Whether the estimate passes capacity: `estimate > max(1, window - reserve)`.
pub fn capacity_exceeded(estimate: u64, window: u64, reserve: u64) -> bool {
    estimate > window.saturating_sub(reserve).max(1)
}

/// The largest cut `c` (events `[0, c)` are folded) that keeps every tool call with its result
/// (§3.6): at most `len - reserve_tail`, never past the first partial or pinned event, never past an
/// open call, never between a call and its response. A response whose call lies before the pool is
/// ignored. `None` means no safe cut (`no_safe_completed_span`).
pub fn select_safe_boundary(
    events: &[RuntimeEvent],
    reserve_tail: usize,
    pinned: &[EventId],
) -> Option<usize> {
    let mut max_cut = events.len().saturating_sub(reserve_tail);
    if let Some(first_partial) = events.iter().position(|e| e.partial) {
        max_cut = max_cut.min(first_partial);
    }
    if let Some(first_pinned) = events.iter().position(|e| pinned.contains(&e.id)) {
        max_cut = max_cut.min(first_pinned);
    }
    let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
    let mut responses: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, event) in events.iter().enumerate() {
        match &event.content {
            Some(Content::FunctionCall(call)) => {
                calls.entry(call.id.as_str()).or_insert(index);
            }
            Some(Content::FunctionResponse(response)) => {
                responses.entry(response.id.as_str()).or_insert(index);
            }
            _ => {}
        }
    }
    // Cuts in (low, high] separate a pair whose ends sit at low and high; an open call at i makes
    // every cut past it unsafe.
    let mut unsafe_from = vec![0i64; events.len() + 2];
    for (id, &call) in &calls {
        match responses.get(id) {
            Some(&response) => {
                let (low, high) = (call.min(response), call.max(response));
                unsafe_from[low + 1] += 1;
                unsafe_from[high + 1] -= 1;
            }
            None => max_cut = max_cut.min(call),
        }
    }
    let mut open_pairs = 0i64;
    let mut best = None;
    for (cut, delta) in unsafe_from.iter().enumerate().take(max_cut + 1) {
        open_pairs += delta;
        if cut >= 1 && open_pairs == 0 {
            best = Some(cut);
        }
    }
    best
}

/// What a mid-turn (or step-0 overflow) compaction is given.
#[derive(Debug, Clone)]
pub struct MidTurnRequest<'a> {
    /// Compactable prior history (raw, not compacted).
    pub prior: &'a [RuntimeEvent],
    /// The current turn's events so far, read from the durable ledger.
    pub current: &'a [RuntimeEvent],
    /// The current turn's user event.
    pub anchor: &'a EventId,
    /// `mid_turn`, or `pre_turn` for an overflow at step 0 (folds prior history only).
    pub phase: CheckpointPhase,
    /// The checkpoint the turn stands on, to roll forward from.
    pub previous: Option<&'a LoggedCheckpoint>,
    /// The payload the replacement must be strictly smaller than, in tokens.
    pub reference_tokens: u64,
    /// The connection (for `can_continue`).
    pub connection: &'a Connection,
    /// The policy.
    pub policy: &'a CompactionPolicy,
    /// The clock.
    pub now: TimestampMs,
    /// The memory-extraction decision the checkpoint freezes (a boundary at its last covered
    /// event), or none.
    pub extraction: Option<BoundaryDisposition>,
}

/// The outcome of a mid-turn compaction.
#[derive(Debug, Clone, PartialEq)]
pub enum MidTurnOutcome {
    /// Recorded: later steps send these items.
    Replaced {
        /// The recorded checkpoint.
        checkpoint: Box<LoggedCheckpoint>,
        /// `[block | provider part] + anchor + preserved tail`.
        items: Vec<HistoryItem>,
    },
    /// Keep the raw projection for this step.
    FailOpen {
        /// `no_safe_completed_span`, `summarizer_failed` or `head_anchor_exceeds_capacity`.
        detail: &'static str,
        /// The typed reason.
        reason: String,
    },
}

fn fail(detail: &'static str, reason: &str) -> MidTurnOutcome {
    MidTurnOutcome::FailOpen { detail, reason: reason.to_owned() }
}

/// Plans, checks and records one mid-turn compaction (§3.6 "validate → persist → apply").
pub async fn compact_mid_turn(
    request: MidTurnRequest<'_>,
    summarizer: &dyn Summarizer,
    coordinator: &Coordinator,
) -> MidTurnOutcome {
    let policy = request.policy;
    let cpt = policy.chars_per_token;
    let ordered: Vec<RuntimeEvent> =
        request.prior.iter().chain(request.current).filter(|e| is_compactable(e)).cloned().collect();
    let Some(anchor_index) = ordered.iter().position(|e| &e.id == request.anchor) else {
        return fail("no_safe_completed_span", "head_anchor_not_durable");
    };
    let anchor = &ordered[anchor_index];
    if anchor.role != Role::User || anchor.author != Author::User {
        return fail("no_safe_completed_span", "head_anchor_not_durable");
    }
    let mut pinned: Vec<EventId> = request
        .current
        .iter()
        .filter(|e| matches!(&e.content, Some(Content::Text(t)) if t.steering == Some(true)))
        .map(|e| e.id.clone())
        .collect();
    if request.phase == CheckpointPhase::PreTurn {
        pinned.push(request.anchor.clone());
    }
    let reserve_tail = usize::try_from(policy.mid_turn_reserve_tail_events).unwrap_or(usize::MAX);
    let Some(cut) = select_safe_boundary(&ordered, reserve_tail, &pinned) else {
        return fail("no_safe_completed_span", "no_safe_completed_span");
    };
    let accepted = match request.phase {
        CheckpointPhase::MidTurn => cut > anchor_index && cut >= 2,
        _ => cut > 0 && cut <= anchor_index,
    };
    if !accepted {
        return fail("no_safe_completed_span", "no_safe_completed_span");
    }
    let covered = &ordered[..cut];
    let previous = request.previous.filter(|p| {
        can_continue(&p.checkpoint, request.connection) && match_prefix(&p.checkpoint, covered).is_ok()
    });
    let newly = &covered[previous.map_or(0, |p| p.checkpoint.coverage.event_count as usize).min(cut)..];
    let (capacity, _) = policy.capacity();
    let budget = Some(capacity.saturating_sub(policy.reserve()).max(1));
    let summary = match summarize_text(
        summarizer,
        covered,
        previous.map(|p| &p.checkpoint),
        newly,
        budget,
        cpt,
    )
    .await
    {
        Ok(Some(summary)) => summary,
        Ok(None) => return fail("summarizer_failed", "empty_summary"),
        Err(error) => return fail("summarizer_failed", error.reason()),
    };
    let identity = summarizer.identity();
    let mid = request.phase == CheckpointPhase::MidTurn;
    let checkpoint = match build_checkpoint(CheckpointInput {
        session: &anchor.session_id,
        covered,
        faithfulness: Some(check_faithfulness(&summary.text, covered)),
        body: BodyInput::Text { summary: summary.text, legacy: false },
        previous: previous.map(|p| p.checkpoint.checkpoint.clone()),
        phase: request.phase,
        head_anchor: mid.then(|| request.anchor.clone()),
        extraction_boundary: request.extraction.and_then(|disposition| {
            covered.last().map(|last| ExtractionBoundary {
                run: last.run_id.clone(),
                turn: last.turn_id.clone(),
                event: last.id.clone(),
                disposition,
            })
        }),
        now: Some(request.now),
        manifest: CheckpointManifest {
            summarizer: identity.name,
            prompt_version: identity.prompt_version,
            input_digest: summary.input_digest,
        },
        chars_per_token: cpt,
    }) {
        Ok(checkpoint) => checkpoint,
        Err(error) => return fail("summarizer_failed", error.reason()),
    };
    let mut tail: Vec<RuntimeEvent> = Vec::new();
    if mid {
        tail.push(anchor.clone());
    }
    tail.extend(ordered[cut..].iter().cloned());
    let mut items = checkpoint_items(&checkpoint);
    items.extend(
        tail.iter()
            .map(|e| HistoryItem::Event { position: mnemo_core::Position::ZERO, event: Box::new(e.clone()) }),
    );
    if items_tokens(&items, cpt) >= request.reference_tokens {
        return fail("summarizer_failed", "replacement_not_smaller");
    }
    let tail_tokens = crate::projection::estimate_events_tokens(&tail, cpt);
    if let Err(reason) = replay_fits(&checkpoint, tail_tokens, None, policy) {
        return MidTurnOutcome::FailOpen {
            detail: "head_anchor_exceeds_capacity",
            reason: format!("replay_rejected_{reason}"),
        };
    }
    match coordinator.record(&checkpoint).await {
        Ok(logged) => MidTurnOutcome::Replaced { checkpoint: Box::new(logged), items },
        Err(_) => fail("summarizer_failed", "write_failed"),
    }
}

/// The single-retry latch of reactive overflow recovery (§3.8).
#[derive(Debug, Default, Clone, Copy)]
pub struct OverflowLatch {
    used: bool,
}

impl OverflowLatch {
    /// Whether a provider error may be recovered from: a context-length error, before any output,
    /// with steps left, once per turn. Claims the latch when it says yes.
    pub fn try_claim(
        &mut self,
        context_length_error: bool,
        produced_output: bool,
        steps_remaining: bool,
    ) -> bool {
        if self.used || !context_length_error || produced_output || !steps_remaining {
            return false;
        }
        self.used = true;
        true
    }
}

/// The phase an overflow compaction runs in: step 0 folds prior history only (the anchor pinned).
pub fn overflow_phase(step: u64) -> CheckpointPhase {
    if step == 0 { CheckpointPhase::PreTurn } else { CheckpointPhase::MidTurn }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::testing::{call, result, text_event};

    #[test]
    fn estimates_and_thresholds() {
        assert_eq!(estimate_payload_tokens(None, None, 401, 4), 101);
        assert_eq!(estimate_payload_tokens(Some(1_000), Some(4_000), 4_401, 4), 1_101);
        assert_eq!(estimate_payload_tokens(Some(1_000), Some(4_000), 3_000, 4), 750);
        assert!(capacity_exceeded(120_000, 128_000, 16_384));
        assert!(!capacity_exceeded(100_000, 128_000, 16_384));
    }

    #[test]
    fn boundary_rules() {
        let events = vec![
            text_event("e1", "t1", "user", "go"),
            call("e2", "t1", "c1", "shell", json!({})),
            result("e3", "t1", "c1", "shell", json!("ok")),
            call("e4", "t1", "c2", "shell", json!({})),
            result("e5", "t1", "c2", "shell", json!("ok")),
            text_event("e6", "t1", "model", "done"),
        ];
        assert_eq!(select_safe_boundary(&events, 1, &[]), Some(5));
        assert_eq!(select_safe_boundary(&events, 2, &[]), Some(3), "a cut between e4 and e5 splits the pair");
        let mut partial = events.clone();
        partial[2].partial = true;
        assert_eq!(select_safe_boundary(&partial, 1, &[]), Some(1));
        let pinned = [events[3].id.clone()];
        assert_eq!(select_safe_boundary(&events, 1, &pinned), Some(3));
        let open = events[..4].to_vec();
        assert_eq!(select_safe_boundary(&open, 0, &[]), Some(3), "an open call is never folded");
        assert_eq!(select_safe_boundary(&events[1..2], 0, &[]), None);
    }

    #[test]
    fn the_overflow_latch_allows_one_retry() {
        let mut latch = OverflowLatch::default();
        assert!(!latch.try_claim(false, false, true));
        assert!(!latch.try_claim(true, true, true));
        assert!(latch.try_claim(true, false, true));
        assert!(!latch.try_claim(true, false, true));
        assert_eq!(overflow_phase(0), CheckpointPhase::PreTurn);
    }

    /// A random turn shape: each step is a user text, a model text, or a batch of calls whose
    /// results arrive in a shuffled order (some may still be open at the end).
    fn turn_shapes() -> impl Strategy<Value = Vec<RuntimeEvent>> {
        prop::collection::vec((0u8..3, 1usize..4, any::<u64>(), any::<bool>()), 1..12).prop_map(|steps| {
            let mut events = Vec::new();
            let mut next = 0u32;
            let mut fresh = || {
                next += 1;
                format!("e{next}")
            };
            for (step, (kind, calls, seed, leave_open)) in steps.into_iter().enumerate() {
                let turn = format!("t{}", step / 3);
                match kind {
                    0 => {
                        let e = fresh();
                        events.push(text_event(&e, &turn, "user", "ask"));
                    }
                    1 => {
                        let e = fresh();
                        events.push(text_event(&e, &turn, "model", "reply"));
                    }
                    _ => {
                        let call_ids: Vec<String> = (0..calls).map(|c| format!("c{step}x{c}")).collect();
                        for call_id in &call_ids {
                            let e = fresh();
                            events.push(call(&e, &turn, call_id, "shell", json!({})));
                        }
                        let mut order = call_ids.clone();
                        order.rotate_left((seed % calls as u64) as usize);
                        let answered = if leave_open { order.len() - 1 } else { order.len() };
                        for call_id in &order[..answered] {
                            let e = fresh();
                            events.push(result(&e, &turn, call_id, "shell", json!("ok")));
                        }
                    }
                }
            }
            events
        })
    }

    fn splits_a_pair(events: &[RuntimeEvent], cut: usize) -> bool {
        events.iter().enumerate().any(|(index, event)| match &event.content {
            Some(Content::FunctionCall(call)) => {
                let response = events.iter().position(
                    |e| matches!(&e.content, Some(Content::FunctionResponse(r)) if r.id == call.id),
                );
                match response {
                    Some(response) => (index < cut) != (response < cut),
                    None => index < cut,
                }
            }
            _ => false,
        })
    }

    proptest! {
        #[test]
        fn no_cut_ever_separates_a_call_from_its_result(events in turn_shapes(), reserve in 0usize..3) {
            if let Some(cut) = select_safe_boundary(&events, reserve, &[]) {
                prop_assert!(cut >= 1 && cut + reserve <= events.len());
                prop_assert!(!splits_a_pair(&events, cut), "cut {} splits a pair", cut);
            }
            // The pre-turn selector cuts at whole turns; with calls answered inside their turn, its
            // cut never separates a pair either.
            let groups = crate::projection::turn_groups(&events);
            if let Some(last) = groups.last() {
                let closed = events[..last.1].iter().all(|e| match &e.content {
                    Some(Content::FunctionCall(c)) => events.iter().any(|r| matches!(&r.content, Some(Content::FunctionResponse(x)) if x.id == c.id)),
                    _ => true,
                });
                if closed {
                    prop_assert!(!splits_a_pair(&events, last.1));
                }
            }
        }
    }
}
