//! History assembly: what the next provider request receives (compaction.md §3.3, §3.7, §5).
//!
//! A loaded checkpoint is tried first: if it matches the projection's prefix and its replay fits the
//! current policy, the history is `[V2 block | V3 provider part] + [mid-turn anchor] + successors`,
//! and only the checkpoint and its successors are read. Otherwise the checkpoint is ignored with a
//! reason, and the raw compactable events are selected and trimmed by whole turns.

use mnemo_core::{CheckpointPhase, CheckpointRecord, Position, RuntimeEvent, StreamRevision, TurnId};

use crate::checkpoint::{Connection, ProjectionView, can_replay, match_prefix, replay_token_estimate};
use crate::error::CompactionError;
use crate::fit::{fit_history, fitted_chars, result_cap_chars};
use crate::history::{
    AssembledHistory, Boundary, Decision, Diagnostics, HistoryItem, Note, checkpoint_items,
    empty_diagnostics, event_items, items_tokens,
};
use crate::host_compaction::{is_host_compaction, start_at_host_compaction};
use crate::ledger::{LoggedEvent, SessionLedger};
use crate::policy::{CompactMode, CompactionPolicy};
use crate::projection::{estimate_events_tokens, estimate_tokens, estimated_chars, turn_groups};
use crate::stage::LoggedCheckpoint;

/// Characters of each folded event the deterministic draft keeps (§3.3 step 8).
pub const DRAFT_EVENT_CHARS_MAX: u64 = 220;
/// Tokens the draft summary may take at most.
pub const DRAFT_SUMMARY_TOKENS_MAX: u64 = 768;

/// What a request is assembled for.
#[derive(Debug, Clone, Default)]
pub struct AssemblyOptions {
    /// The policy.
    pub policy: CompactionPolicy,
    /// The provider connection and model the request goes to.
    pub connection: Connection,
    /// The turn being answered: never part of prior history.
    pub current_turn: Option<TurnId>,
}

/// The tail and the replay a checkpoint gives, when it matches and fits.
pub(crate) struct Replay {
    pub items: Vec<HistoryItem>,
    pub tokens: u64,
    pub source_tokens: u64,
    pub boundary: Boundary,
}

/// The replay fit gate (§3.7): the checkpoint plus its tail must fit the budget, and (when the
/// replaced source is given) be strictly smaller than it.
pub fn replay_fits(
    checkpoint: &CheckpointRecord,
    tail_tokens: u64,
    source_tokens: Option<u64>,
    policy: &CompactionPolicy,
) -> Result<u64, &'static str> {
    let replay = replay_token_estimate(checkpoint, policy.chars_per_token) + tail_tokens;
    let max = policy.max_history();
    if max > 0 && replay > max {
        return Err("prefix_over_budget");
    }
    if source_tokens.is_some_and(|source| replay >= source) {
        return Err("replacement_not_smaller");
    }
    Ok(replay)
}

pub(crate) fn boundary_of(logged: &LoggedCheckpoint) -> Boundary {
    Boundary {
        checkpoint: logged.checkpoint.checkpoint.clone(),
        version: logged.checkpoint.version(),
        phase: logged.checkpoint.phase,
        covered_events: logged.checkpoint.coverage.event_count,
        position: logged.position,
    }
}

/// Tries to replay a loaded checkpoint (§3.3 step 1): match, tail, fit. Reads only the tail.
pub(crate) fn try_replay(
    ledger: &SessionLedger<'_>,
    logged: &LoggedCheckpoint,
    options: &AssemblyOptions,
    events_read: &mut u64,
) -> Result<Result<Replay, &'static str>, CompactionError> {
    let checkpoint = &logged.checkpoint;
    let projection = ledger.projection()?;
    let count = match match_prefix(checkpoint, &projection) {
        Ok(count) => count,
        Err(miss) => return Ok(Err(miss.code())),
    };
    let Some(last) = projection.entry(count - 1) else {
        return Ok(Err("coverage_miss"));
    };
    let successors =
        ledger.compactable_from(StreamRevision(last.revision.0 + 1), options.current_turn.as_ref())?;
    *events_read += successors.len() as u64;
    let mut tail: Vec<LoggedEvent> = Vec::new();
    if let (CheckpointPhase::MidTurn, Some(anchor)) = (checkpoint.phase, &checkpoint.head_anchor) {
        let entry = projection.index_of(&anchor.event, count).and_then(|index| projection.entry(index));
        let Some(entry) = entry else {
            return Ok(Err("coverage_miss"));
        };
        let Some(event) = ledger.event_at(entry.position)? else {
            return Ok(Err("coverage_miss"));
        };
        *events_read += 1;
        tail.push(LoggedEvent { position: entry.position, revision: entry.revision, event });
    }
    tail.extend(successors.iter().cloned());
    let cpt = options.policy.chars_per_token;
    let tail_tokens = fitted_tokens(tail.iter().map(|e| &e.event), &options.policy);
    let successor_chars: u64 = successors.iter().map(|e| estimated_chars(&e.event)).sum();
    let source_tokens = (projection.chars_through(count) + successor_chars).div_ceil(cpt.max(1));
    let tokens = match replay_fits(checkpoint, tail_tokens, Some(source_tokens), &options.policy) {
        Ok(tokens) => tokens,
        Err(reason) => return Ok(Err(reason)),
    };
    let mut items = checkpoint_items(checkpoint);
    items.extend(
        tail.into_iter().map(|e| HistoryItem::Event { position: e.position, event: Box::new(e.event) }),
    );
    Ok(Ok(Replay { items, tokens, source_tokens, boundary: boundary_of(logged) }))
}

/// Which events a compaction would fold and which it keeps (§3.3 steps 2-8, decision 0125).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldPlan {
    /// Events `[0, folded)` are folded.
    pub folded: usize,
    /// When the cut falls inside the newest turn (a mid-turn fold): the index of that turn's
    /// request, which is covered and re-sent verbatim after the checkpoint's block.
    pub anchor: Option<usize>,
}

/// The share (1/N) of the history budget the raw tail may take when the newest turn must be cut;
/// the rest is left to the checkpoint's block.
pub const TAIL_BUDGET_DIVISOR: u64 = 2;

/// The tokens `events` take once their oversized tool results are elided under `policy`, counted
/// per event the way the assembled history's size is (so a tail that passes this fits there).
pub fn fitted_tokens<'a>(
    events: impl IntoIterator<Item = &'a RuntimeEvent>,
    policy: &CompactionPolicy,
) -> u64 {
    let cap = result_cap_chars(policy);
    events.into_iter().map(|e| estimate_tokens(fitted_chars(e, cap), policy.chars_per_token)).sum()
}

/// The request that opens a turn group: its first user-authored, non-steering text.
fn turn_request(events: &[RuntimeEvent], from: usize, to: usize) -> Option<usize> {
    (from..to).find(|&i| {
        let e = &events[i];
        e.role == mnemo_core::Role::User
            && e.author == mnemo_core::Author::User
            && !e.partial
            && matches!(&e.content, Some(mnemo_core::Content::Text(t)) if t.steering != Some(true))
    })
}

/// Where to cut the newest turn `[from, to)` so that its request plus the raw tail after the cut
/// fit `tail_budget` (tool results elided): the largest tail whose cut keeps every tool call with
/// its result. `None` when no cut after the request is safe.
fn mid_turn_cut(
    events: &[RuntimeEvent],
    from: usize,
    to: usize,
    anchor: usize,
    tail_budget: u64,
    policy: &CompactionPolicy,
) -> Option<usize> {
    let cap = result_cap_chars(policy);
    let cpt = policy.chars_per_token.max(1);
    let budget_chars = tail_budget.saturating_mul(cpt);
    let mut chars = fitted_chars(&events[anchor], cap);
    let mut wanted = to;
    while wanted > anchor + 1 {
        let next = chars + fitted_chars(&events[wanted - 1], cap);
        if next > budget_chars {
            break;
        }
        chars = next;
        wanted -= 1;
    }
    // The safe boundary over the turn: never between a call and its result, never past a partial.
    let turn = &events[from..to];
    let reserve = to - wanted;
    let cut = crate::midturn::select_safe_boundary(turn, reserve, &[]).map(|c| from + c)?;
    (cut > anchor).then_some(cut)
}

/// The selector: given the compactable prior events, decides whether to fold and where, or why not.
/// The tail is the newest turn, whole, when it fits half the budget (tool results elided); else the
/// cut falls inside it, after its request (a mid-turn fold, decision 0125).
pub fn select_fold(
    events: &[RuntimeEvent],
    policy: &CompactionPolicy,
    min_recent_turns: u64,
) -> Result<FoldPlan, &'static str> {
    let cpt = policy.chars_per_token;
    if policy.max_history() == 0 {
        return Err("max_history_tokens_missing");
    }
    if estimate_events_tokens(events, cpt) <= policy.high_water() {
        return Err("below_high_water");
    }
    let groups = turn_groups(events);
    let tail_budget = (policy.max_history() / TAIL_BUDGET_DIVISOR).max(1);
    let mut plan = FoldPlan { folded: events.len(), anchor: None };
    if min_recent_turns != 0 {
        let Some(&(_, from, to)) = groups.last() else {
            return Err("no_foldable_turns");
        };
        let whole_fits = fitted_tokens(&events[from..to], policy) <= tail_budget;
        // A request too large for the tail is folded with the rest (§3.5: fold everything).
        let request =
            turn_request(events, from, to).filter(|&a| fitted_tokens([&events[a]], policy) <= tail_budget);
        match request {
            None if !whole_fits => plan.folded = events.len(),
            Some(anchor) if !whole_fits => {
                match mid_turn_cut(events, from, to, anchor, tail_budget, policy) {
                    Some(cut) => plan = FoldPlan { folded: cut, anchor: Some(anchor) },
                    None if groups.len() > 1 => plan.folded = from,
                    None => return Err("no_safe_completed_span"),
                }
            }
            _ if groups.len() <= 1 => return Err("insufficient_turns"),
            _ => plan.folded = from,
        }
    }
    if plan.folded == 0 {
        return Err("no_foldable_turns");
    }
    if policy.mode == CompactMode::Lookup {
        return Err("lookup_miss");
    }
    let draft_chars: u64 =
        events[..plan.folded].iter().map(|e| estimated_chars(e).min(DRAFT_EVENT_CHARS_MAX)).sum();
    let draft_tokens = estimate_tokens(draft_chars.min((DRAFT_SUMMARY_TOKENS_MAX * cpt).max(80)), cpt);
    let anchor_tokens = plan.anchor.map_or(0, |a| fitted_tokens([&events[a]], policy));
    if draft_tokens + anchor_tokens + fitted_tokens(&events[plan.folded..], policy) > policy.max_history() {
        return Err("replay_over_budget");
    }
    Ok(plan)
}

/// Whole-turn trimming (§3.3 step 9): newest turns first, always the policy's minimum, then while
/// the next turn fits the budget and the turn limit allows.
pub fn trim_whole_turns(events: &[LoggedEvent], policy: &CompactionPolicy) -> Vec<LoggedEvent> {
    let plain: Vec<RuntimeEvent> = events.iter().map(|e| e.event.clone()).collect();
    let groups = turn_groups(&plain);
    let mut start = events.len();
    let (mut kept, mut tokens) = (0u64, 0u64);
    for (_, from, to) in groups.iter().rev() {
        let group_tokens = estimate_events_tokens(&plain[*from..*to], policy.chars_per_token);
        let limit_reached = policy.max_history_turns.is_some_and(|max| kept >= max);
        let over = kept > 0 && tokens + group_tokens > policy.max_history();
        if kept >= policy.budget_min_recent_turns && (limit_reached || over) {
            break;
        }
        start = *from;
        kept += 1;
        tokens += group_tokens;
    }
    events[start..].to_vec()
}

/// Whether any turn of `events` alone exceeds the budget (§3.5).
pub fn has_oversized_turn(events: &[LoggedEvent], policy: &CompactionPolicy) -> bool {
    let plain: Vec<RuntimeEvent> = events.iter().map(|e| e.event.clone()).collect();
    turn_groups(&plain).iter().any(|(_, from, to)| {
        estimate_events_tokens(&plain[*from..*to], policy.chars_per_token) > policy.max_history()
    })
}

/// Assembles the history the next request would receive, without writing anything. A compaction
/// the selector would make is reported as `compaction_due`. A call the log holds no result for,
/// although the conversation went on, is answered with a note (`fit::answer_unanswered_calls`).
pub fn assemble(
    ledger: &SessionLedger<'_>,
    options: &AssemblyOptions,
) -> Result<AssembledHistory, CompactionError> {
    let mut history = assemble_events(ledger, options)?;
    crate::fit::answer_unanswered_calls(&mut history, options.policy.chars_per_token);
    Ok(history)
}

/// [`assemble`] without answering unanswered calls.
fn assemble_events(
    ledger: &SessionLedger<'_>,
    options: &AssemblyOptions,
) -> Result<AssembledHistory, CompactionError> {
    let policy = &options.policy;
    let mut diagnostics = empty_diagnostics(policy);
    let mut events_read = 0u64;
    if policy.compaction_on() {
        let (latest, path) = ledger.latest()?;
        diagnostics.load_path = Some(path);
        if let Some(logged) = latest {
            if !can_replay(&logged.checkpoint, &options.connection) {
                diagnostics.skip("provider_state_unreplayable");
            } else {
                match try_replay(ledger, &logged, options, &mut events_read)? {
                    // The host compacted its conversation after the checkpoint: its model has seen
                    // neither the checkpoint nor what it covers since (decision 0215).
                    Ok(replay) if replay_has_host_compaction(&replay) => {
                        diagnostics.skip("host_compaction_later");
                    }
                    Ok(replay) => return Ok(replayed(ledger, replay, diagnostics, events_read, policy)),
                    Err(reason) => diagnostics.skip(reason),
                }
            }
        }
    }
    let prior = ledger.compactable_from(StreamRevision(0), options.current_turn.as_ref())?;
    events_read += prior.len() as u64;
    diagnostics.events_read = events_read;
    // NOTE: everything below (the selector, turn limits, fitting) works over what the host's model
    // saw: its latest compaction's summary and the events after it.
    let (prior, host_start) = start_at_host_compaction(prior, policy.chars_per_token);
    diagnostics.host_compaction = host_start;
    let plain: Vec<RuntimeEvent> = prior.iter().map(|e| e.event.clone()).collect();
    diagnostics.tokens_before = estimate_events_tokens(&plain, policy.chars_per_token);
    if policy.enabled && policy.compaction_on() {
        match select_fold(&plain, policy, policy.min_recent_turns) {
            Ok(_) => diagnostics.compaction_due = true,
            Err(reason) => diagnostics.skip(reason),
        }
    }
    let kept = if policy.enabled { limit_turns(&prior, policy) } else { prior.clone() };
    diagnostics.oversized_turn =
        policy.enabled && policy.max_history() > 0 && has_oversized_turn(&kept, policy);
    if diagnostics.oversized_turn {
        if policy.compaction_on() {
            diagnostics.compaction_due = true;
        } else {
            diagnostics.context_budget_exhausted = Some("no_safe_completed_span");
        }
    }
    let turn_limited = prior.len() - kept.len();
    let mut history = AssembledHistory {
        session: ledger.session().clone(),
        position: ledger.position(),
        items: event_items(&kept),
        boundary: None,
        diagnostics,
        notes: Vec::new(),
    };
    if policy.enabled {
        let reason = if history.diagnostics.compaction_due { "compaction_due" } else { "compaction_off" };
        fit_history(&mut history, policy, Some(reason));
        if turn_limited > 0 {
            note_turn_limit(&mut history, &prior[..turn_limited], policy);
        }
    } else {
        history.diagnostics.tokens_after = items_tokens(&history.items, policy.chars_per_token);
        history.diagnostics.fit.fits = history.diagnostics.tokens_after <= policy.max_history();
    }
    note_host_compaction(&mut history);
    Ok(history)
}

/// Whether a replay's tail holds a host compaction (one later than the checkpoint replayed).
fn replay_has_host_compaction(replay: &Replay) -> bool {
    replay
        .items
        .iter()
        .any(|item| matches!(item, HistoryItem::Event { event, .. } if is_host_compaction(event)))
}

/// Says where the request starts when the host's compaction decided it (never silent).
pub(crate) fn note_host_compaction(history: &mut AssembledHistory) {
    let Some(start) = &history.diagnostics.host_compaction else {
        return;
    };
    history.notes.push(Note {
        kind: "context_host_compacted".to_owned(),
        text: format!(
            "The host compacted this conversation: the request starts at its summary (event {}, log \
             position {}); the {} events before it (~{} tokens) are not in this request.",
            start.event, start.position, start.left_out_events, start.left_out_tokens
        ),
    });
}

/// The policy's turn limit (`max_history_turns`), if any: the newest turns it allows.
fn limit_turns(events: &[LoggedEvent], policy: &CompactionPolicy) -> Vec<LoggedEvent> {
    let Some(max_turns) = policy.max_history_turns else {
        return events.to_vec();
    };
    let plain: Vec<RuntimeEvent> = events.iter().map(|e| e.event.clone()).collect();
    let groups = turn_groups(&plain);
    let keep = usize::try_from(max_turns.max(policy.budget_min_recent_turns)).unwrap_or(usize::MAX);
    let start = groups.len().checked_sub(keep).and_then(|i| groups.get(i)).map_or(0, |g| g.1);
    events[start..].to_vec()
}

/// Records the turns the policy's turn limit left out as a drop (never silent).
fn note_turn_limit(history: &mut AssembledHistory, left_out: &[LoggedEvent], policy: &CompactionPolicy) {
    let cpt = policy.chars_per_token;
    let tokens = estimate_events_tokens(left_out.iter().map(|e| &e.event), cpt);
    let first = left_out.first().map_or(Position::ZERO, |e| e.position);
    let last = left_out.last().map_or(Position::ZERO, |e| e.position);
    let fit = &mut history.diagnostics.fit;
    let dropped = fit.dropped.get_or_insert(crate::fit::Dropped {
        events: 0,
        tokens: 0,
        positions: (first, last),
        reason: "max_history_turns".to_owned(),
    });
    dropped.events += left_out.len() as u64;
    dropped.tokens += tokens;
    dropped.positions.0 = dropped.positions.0.min(first);
    history.notes.push(Note {
        kind: "context_history_dropped".to_owned(),
        text: format!(
            "{} events of turns beyond the policy's max_history_turns (~{tokens} tokens, log positions \
             {first}..={last}) are not in this request.",
            left_out.len()
        ),
    });
}

fn replayed(
    ledger: &SessionLedger<'_>,
    replay: Replay,
    mut diagnostics: Diagnostics,
    events_read: u64,
    policy: &CompactionPolicy,
) -> AssembledHistory {
    diagnostics.decision = Decision::Replaced;
    diagnostics.phase = Some(replay.boundary.phase);
    diagnostics.boundary_kind = Some("history_compact");
    diagnostics.boundary_ids = vec![replay.boundary.checkpoint.to_string()];
    diagnostics.folded_events = replay.boundary.covered_events;
    diagnostics.tokens_before = replay.source_tokens;
    diagnostics.tokens_after = replay.tokens;
    diagnostics.events_read = events_read;
    let mut history = AssembledHistory {
        session: ledger.session().clone(),
        position: ledger.position(),
        items: replay.items,
        boundary: Some(replay.boundary),
        diagnostics,
        notes: Vec::new(),
    };
    // The replay gate counted the tail with its tool results elided; elide them to match.
    fit_history(&mut history, policy, None);
    history
}
