//! The pre-turn writer (compaction.md §3.4), the oversized-turn recovery (§3.5) and manual
//! compaction (§3.9): when the selector folds, summarize, check, build, fit, record durably, and
//! only then replace; on any failure, fall back without ever letting a checkpoint claim events it
//! does not cover.

use mnemo_core::{
    BoundaryDisposition, CheckpointManifest, CheckpointPhase, ExtractionBoundary, RuntimeEvent,
    StreamRevision, TimestampMs,
};

use crate::assembly::{
    AssemblyOptions, FoldPlan, assemble, boundary_of, fitted_tokens, note_host_compaction, replay_fits,
    select_fold,
};
use crate::checkpoint::{
    BodyInput, CODEX_PROVIDER_TYPE, CheckpointInput, build_checkpoint, can_continue, can_replay, match_prefix,
};
use crate::coordinator::Coordinator;
use crate::error::CompactionError;
use crate::faithfulness::{check_faithfulness, exceeds};
use crate::fit::{FitReport, fit_history};
use crate::history::{
    AssembledHistory, Decision, Diagnostics, Note, checkpoint_items, event_items, items_tokens,
};
use crate::host_compaction::{latest_host_compaction, start_at};
use crate::ledger::{LoggedEvent, SessionLedger};
use crate::policy::{CompactionPolicy, MANUAL_HIGH_WATER_RATIO, MAX_HISTORY_TOKENS_DEFAULT};
use crate::projection::estimate_events_tokens;
use crate::stage::LoggedCheckpoint;
use crate::summarizer::{ProviderCompactor, SummarizeError, Summarizer, compact_provider, summarize_text};
use crate::summary::shorten_summary;

/// The seams and the clock a write uses.
#[derive(Debug, Clone, Copy)]
pub struct WriterSeams<'a> {
    /// The text summarizer.
    pub summarizer: &'a dyn Summarizer,
    /// The provider compactor, used for an `openai-codex` connection that matches it.
    pub provider_compactor: Option<&'a dyn ProviderCompactor>,
    /// Serializes and records checkpoint writes.
    pub coordinator: &'a Coordinator,
    /// The wall clock, for `created_at`.
    pub now: TimestampMs,
    /// The memory-extraction decision frozen into the checkpoint (memory.md §3.1, automatic
    /// compaction): the checkpoint records a boundary at the last folded event with this
    /// disposition. `None` records no boundary (manual compaction, or no memory capability).
    pub extraction: Option<BoundaryDisposition>,
}

/// How manual compaction may be tuned (§3.9).
#[derive(Debug, Clone, Copy, Default)]
pub struct ManualOptions {
    /// Turns to keep raw (a non-negative override; else the policy's value).
    pub min_recent_turns: Option<u64>,
}

/// What a compaction write did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CompactionOutcome {
    /// The history the next request receives after it.
    pub history: AssembledHistory,
    /// The checkpoint recorded, if one was.
    pub recorded: Option<LoggedCheckpoint>,
}

/// Why a write did not replace history.
struct Failed {
    reason: String,
    fallback: Option<LoggedCheckpoint>,
}

/// Prepares the history of the next request (§3.3 + §3.4 + §3.5): replay a fitting checkpoint, or
/// compact when the selector folds, or fall back.
pub async fn prepare_history(
    ledger: &SessionLedger<'_>,
    options: &AssemblyOptions,
    seams: WriterSeams<'_>,
) -> Result<CompactionOutcome, CompactionError> {
    let assembled = assemble(ledger, options)?;
    if assembled.diagnostics.decision == Decision::Replaced || !assembled.diagnostics.compaction_due {
        return Ok(CompactionOutcome { history: assembled, recorded: None });
    }
    let oversized = assembled.diagnostics.oversized_turn;
    // An oversized newest turn is cut inside, after its request (a mid-turn fold, decision 0125),
    // rather than folded whole.
    let min_recent = options.policy.min_recent_turns;
    let mut outcome = write(ledger, options, seams, min_recent, assembled.diagnostics).await?;
    // §3.5: an oversized retained turn that could not be folded ends the turn.
    let diagnostics = &mut outcome.history.diagnostics;
    if oversized && diagnostics.decision == Decision::FailedOpen && outcome.history.boundary.is_none() {
        diagnostics.context_budget_exhausted = Some("summarizer_failed");
    } else if oversized && diagnostics.tokens_after > options.policy.max_history() {
        diagnostics.context_budget_exhausted = Some("no_safe_completed_span");
    }
    crate::fit::answer_unanswered_calls(&mut outcome.history, options.policy.chars_per_token);
    Ok(outcome)
}

/// Compacts now (§3.9): almost any history folds, the latest turn stays raw unless told otherwise,
/// and a loaded checkpoint is used only to roll forward from.
pub async fn compact_now(
    ledger: &SessionLedger<'_>,
    options: &AssemblyOptions,
    seams: WriterSeams<'_>,
    manual: ManualOptions,
) -> Result<CompactionOutcome, CompactionError> {
    if seams.coordinator.is_busy(ledger.session()) {
        return Err(CompactionError::SessionBusy(ledger.session().clone()));
    }
    let prior = ledger.compactable_from(StreamRevision(0), options.current_turn.as_ref())?;
    let estimate = estimate_events_tokens(prior.iter().map(|e| &e.event), options.policy.chars_per_token);
    let mut policy = options.policy.clone();
    policy.high_water_ratio = MANUAL_HIGH_WATER_RATIO;
    policy.mode = crate::policy::CompactMode::ReadWrite;
    if policy.max_history_tokens.is_none() && policy.context_window.is_none() {
        policy.max_history_tokens = Some(estimate.max(MAX_HISTORY_TOKENS_DEFAULT));
    }
    let min_recent = manual.min_recent_turns.unwrap_or(policy.min_recent_turns);
    let manual_options = AssemblyOptions { policy, ..options.clone() };
    let diagnostics = assemble_diagnostics(&manual_options.policy);
    let mut outcome = write(ledger, &manual_options, seams, min_recent, diagnostics).await?;
    crate::fit::answer_unanswered_calls(&mut outcome.history, options.policy.chars_per_token);
    Ok(outcome)
}

fn assemble_diagnostics(policy: &CompactionPolicy) -> Diagnostics {
    let mut diagnostics = crate::history::empty_diagnostics(policy);
    diagnostics.compaction_due = true;
    diagnostics
}

async fn write(
    ledger: &SessionLedger<'_>,
    options: &AssemblyOptions,
    seams: WriterSeams<'_>,
    min_recent_turns: u64,
    mut diagnostics: Diagnostics,
) -> Result<CompactionOutcome, CompactionError> {
    let policy = &options.policy;
    let prior = ledger.compactable_from(StreamRevision(0), options.current_turn.as_ref())?;
    diagnostics.events_read += prior.len() as u64;
    // The selector works over what the host's model saw, from its latest compaction on (decision
    // 0215); a checkpoint still covers the whole prefix before its cut, which then lies past that
    // compaction, so the checkpoint is the later of the two and assembly replays it.
    let host = latest_host_compaction(&prior).unwrap_or(0);
    let plain: Vec<RuntimeEvent> = prior[host..].iter().map(|e| e.event.clone()).collect();
    diagnostics.tokens_before = estimate_events_tokens(&plain, policy.chars_per_token);
    let plan = match select_fold(&plain, policy, min_recent_turns) {
        Ok(plan) => FoldPlan { folded: host + plan.folded, anchor: plan.anchor.map(|a| host + a) },
        Err(reason) => {
            diagnostics.skip(reason);
            diagnostics.compaction_due = false;
            return Ok(CompactionOutcome {
                history: raw(ledger, &prior, policy, diagnostics),
                recorded: None,
            });
        }
    };
    let (folded, rest) = prior.split_at(plan.folded);
    // A mid-turn fold re-sends the newest turn's request, verbatim, after the block.
    let mut retained: Vec<LoggedEvent> = plan.anchor.map(|a| prior[a].clone()).into_iter().collect();
    retained.extend(rest.iter().cloned());
    let retained = retained.as_slice();
    let loaded = seams.coordinator.load(ledger.session()).await?;
    let anchor = plan.anchor.map(|a| &prior[a].event);
    let outcome = attempt(folded, retained, anchor, loaded.as_ref(), options, seams).await;
    diagnostics.fit = FitReport::default();
    match outcome {
        Ok(Written::Recorded(logged)) => {
            diagnostics.host_compaction = None;
            let mut items = checkpoint_items(&logged.checkpoint);
            items.extend(event_items(retained));
            diagnostics.decision = Decision::Replaced;
            diagnostics.phase = Some(logged.checkpoint.phase);
            diagnostics.boundary_kind = Some("history_compact");
            diagnostics.boundary_ids = vec![logged.checkpoint.checkpoint.to_string()];
            diagnostics.folded_events = logged.checkpoint.coverage.event_count;
            diagnostics.reason = None;
            diagnostics.compaction_due = false;
            diagnostics.tokens_after = items_tokens(&items, policy.chars_per_token);
            let within = if plan.anchor.is_some() {
                " (the newest turn's earlier steps included; its request follows verbatim)"
            } else {
                ""
            };
            let note = Note {
                kind: "context_compacted".to_owned(),
                text: format!(
                    "Compacted {} earlier events into checkpoint {}{within}.",
                    logged.checkpoint.coverage.event_count, logged.checkpoint.checkpoint
                ),
            };
            let mut history = AssembledHistory {
                session: ledger.session().clone(),
                position: logged.position,
                items,
                boundary: Some(boundary_of(&logged)),
                diagnostics,
                notes: vec![note],
            };
            fit_history(&mut history, policy, None);
            Ok(CompactionOutcome { history, recorded: Some(logged) })
        }
        Ok(Written::AlreadyCompacted(logged)) => {
            diagnostics.host_compaction = None;
            diagnostics.skip("already_compacted");
            diagnostics.compaction_due = false;
            let history = replay_with_retained(ledger, &logged, retained, policy, diagnostics);
            Ok(CompactionOutcome { history, recorded: None })
        }
        Err(failed) => Ok(CompactionOutcome {
            history: fail_open(ledger, failed, &prior, retained, options, diagnostics),
            recorded: None,
        }),
    }
}

enum Written {
    Recorded(LoggedCheckpoint),
    AlreadyCompacted(LoggedCheckpoint),
}

/// One write attempt: every failure is a typed reason, and nothing is recorded on any of them.
async fn attempt(
    folded: &[LoggedEvent],
    retained: &[LoggedEvent],
    anchor: Option<&RuntimeEvent>,
    loaded: Option<&LoggedCheckpoint>,
    options: &AssemblyOptions,
    seams: WriterSeams<'_>,
) -> Result<Written, Failed> {
    let policy = &options.policy;
    let cpt = policy.chars_per_token;
    let folded_events: Vec<RuntimeEvent> = folded.iter().map(|e| e.event.clone()).collect();
    let retained_events: Vec<RuntimeEvent> = retained.iter().map(|e| e.event.clone()).collect();
    // The loaded checkpoint may be a fallback if it matches and replays; a predecessor to roll from
    // only if, in addition, this connection's compactor may continue it.
    let matching = loaded.filter(|l| {
        can_replay(&l.checkpoint, &options.connection)
            && match_prefix(&l.checkpoint, folded_events.as_slice()).is_ok()
    });
    let previous = matching.filter(|l| can_continue(&l.checkpoint, &options.connection));
    let fail = |reason: &str| Failed { reason: reason.to_owned(), fallback: matching.cloned() };
    if folded_events.is_empty() {
        return Err(fail("source_missing"));
    }
    let covered_before = previous.map_or(0, |p| p.checkpoint.coverage.event_count as usize);
    let newly = &folded_events[covered_before.min(folded_events.len())..];
    let source_tokens = estimate_events_tokens(folded_events.iter().chain(&retained_events), cpt);
    // What the tail costs once sent: its oversized tool results are elided (decision 0125).
    let tail_tokens = fitted_tokens(&retained_events, policy);
    if let Some(previous) = previous
        && newly.is_empty()
        && replay_fits(&previous.checkpoint, tail_tokens, Some(source_tokens), policy).is_ok()
    {
        return Ok(Written::AlreadyCompacted(previous.clone()));
    }
    let previous_record = previous.map(|p| &p.checkpoint);
    let budget = Some(policy.max_history());
    let use_provider = seams.provider_compactor.filter(|c| {
        options.connection.provider_type == CODEX_PROVIDER_TYPE && c.connection() == options.connection
    });
    let (body, manifest, faithfulness) = match use_provider {
        Some(compactor) => {
            let (state, digest) =
                compact_provider(compactor, &folded_events, previous_record, newly, budget, cpt)
                    .await
                    .map_err(|e| fail(e.reason()))?;
            let identity = compactor.identity();
            let manifest = CheckpointManifest {
                summarizer: identity.name,
                prompt_version: identity.prompt_version,
                input_digest: digest,
            };
            (BodyInput::Provider(state), manifest, None)
        }
        None => {
            let summary =
                summarize_text(seams.summarizer, &folded_events, previous_record, newly, budget, cpt)
                    .await
                    .map_err(|e: SummarizeError| fail(e.reason()))?
                    .ok_or_else(|| fail("empty_summary"))?;
            let report = check_faithfulness(&summary.text, &folded_events);
            if exceeds(&report, policy.faithfulness_max_unsupported_ratio) {
                return Err(fail("faithfulness_rejected"));
            }
            let identity = seams.summarizer.identity();
            let manifest = CheckpointManifest {
                summarizer: identity.name,
                prompt_version: identity.prompt_version,
                input_digest: summary.input_digest,
            };
            (BodyInput::Text { summary: summary.text, legacy: false }, manifest, Some(report))
        }
    };
    let build = |body: BodyInput, faithfulness| {
        build_checkpoint(CheckpointInput {
            session: &folded_events[0].session_id,
            covered: &folded_events,
            body,
            previous: previous.map(|p| p.checkpoint.checkpoint.clone()),
            phase: if anchor.is_some() { CheckpointPhase::MidTurn } else { CheckpointPhase::PreTurn },
            head_anchor: anchor.map(|a| a.id.clone()),
            extraction_boundary: seams.extraction.and_then(|disposition| {
                folded_events.last().map(|last| ExtractionBoundary {
                    run: last.run_id.clone(),
                    turn: last.turn_id.clone(),
                    event: last.id.clone(),
                    disposition,
                })
            }),
            now: Some(seams.now),
            manifest: manifest.clone(),
            faithfulness,
            chars_per_token: cpt,
        })
        .map_err(|e| e.reason())
    };
    let shorter = match &body {
        BodyInput::Text { summary, .. } => Some(summary.clone()),
        _ => None,
    };
    let mut checkpoint = build(body, faithfulness.clone()).map_err(fail)?;
    if let Err(reason) = replay_fits(&checkpoint, tail_tokens, Some(source_tokens), policy) {
        // Both `prefix_over_budget` and `replacement_not_smaller` are a summary too long for its room.
        // A shorter summary rather than a refusal: drop its oldest lines until block and tail fit.
        let room = policy
            .max_history()
            .min(source_tokens.saturating_sub(1))
            .saturating_sub(tail_tokens)
            .saturating_mul(cpt);
        let block_overhead = crate::checkpoint::replay_token_estimate(&checkpoint, cpt)
            .saturating_mul(cpt)
            .saturating_sub(shorter.as_deref().map_or(0, crate::projection::utf16_len));
        let shortened = shorter
            .as_deref()
            .and_then(|text| shorten_summary(text, room.saturating_sub(block_overhead)))
            .ok_or_else(|| fail(reason))?;
        let report = check_faithfulness(&shortened, &folded_events);
        checkpoint =
            build(BodyInput::Text { summary: shortened, legacy: false }, Some(report)).map_err(fail)?;
        replay_fits(&checkpoint, tail_tokens, Some(source_tokens), policy).map_err(fail)?;
    }
    match seams.coordinator.record(&checkpoint).await {
        Ok(logged) => Ok(Written::Recorded(logged)),
        Err(_) => Err(fail("write_failed")),
    }
}

fn raw(
    ledger: &SessionLedger<'_>,
    prior: &[LoggedEvent],
    policy: &CompactionPolicy,
    mut diagnostics: Diagnostics,
) -> AssembledHistory {
    diagnostics.fit = FitReport::default();
    let reason = diagnostics.reason.clone().unwrap_or_else(|| "compaction_skipped".to_owned());
    // Raw history is what the host's model saw: from its latest compaction on (decision 0215).
    let from = latest_host_compaction(prior).unwrap_or(0);
    diagnostics.host_compaction = (from > 0).then(|| start_at(prior, from, policy.chars_per_token));
    let mut history = AssembledHistory {
        session: ledger.session().clone(),
        position: ledger.position(),
        items: event_items(&prior[from..]),
        boundary: None,
        diagnostics,
        notes: Vec::new(),
    };
    fit_history(&mut history, policy, Some(&reason));
    note_host_compaction(&mut history);
    history
}

fn replay_with_retained(
    ledger: &SessionLedger<'_>,
    logged: &LoggedCheckpoint,
    retained: &[LoggedEvent],
    policy: &CompactionPolicy,
    mut diagnostics: Diagnostics,
) -> AssembledHistory {
    let mut items = checkpoint_items(&logged.checkpoint);
    items.extend(event_items(retained));
    diagnostics.decision = Decision::Replaced;
    diagnostics.phase = Some(logged.checkpoint.phase);
    diagnostics.boundary_kind = Some("history_compact");
    diagnostics.boundary_ids = vec![logged.checkpoint.checkpoint.to_string()];
    diagnostics.folded_events = logged.checkpoint.coverage.event_count;
    diagnostics.tokens_after = items_tokens(&items, policy.chars_per_token);
    let mut history = AssembledHistory {
        session: ledger.session().clone(),
        position: ledger.position(),
        items,
        boundary: Some(boundary_of(logged)),
        diagnostics,
        notes: Vec::new(),
    };
    fit_history(&mut history, policy, None);
    history
}

/// The fail-open context (§3.4): the old checkpoint, if one still matches, with every event after
/// it; else the raw history. Either is then fitted (elided, and dropped oldest first with the
/// failure as the reason). Nothing is claimed covered that no recorded checkpoint covers, and the
/// note says exactly what was left out, if anything.
fn fail_open(
    ledger: &SessionLedger<'_>,
    failed: Failed,
    prior: &[LoggedEvent],
    _retained: &[LoggedEvent],
    options: &AssemblyOptions,
    mut diagnostics: Diagnostics,
) -> AssembledHistory {
    let policy = &options.policy;
    diagnostics.decision = Decision::FailedOpen;
    diagnostics.compaction_due = false;
    diagnostics.fail_open_reason = Some(failed.reason.clone());
    *diagnostics.skipped_reason_counts.entry(failed.reason.clone()).or_insert(0) += 1;
    let mut items = Vec::new();
    let mut boundary = None;
    // Without a checkpoint later than the host's latest compaction, the history starts at that
    // compaction's summary, as the host's model saw it (decision 0215).
    let host = latest_host_compaction(prior);
    let mut from = host.unwrap_or(0);
    if let Some(old) = &failed.fallback {
        let covered = usize::try_from(old.checkpoint.coverage.event_count).unwrap_or(usize::MAX);
        if covered <= prior.len() && host.is_none_or(|h| h < covered) {
            items = checkpoint_items(&old.checkpoint);
            boundary = Some(boundary_of(old));
            diagnostics.boundary_kind = Some("history_compact");
            diagnostics.boundary_ids = vec![old.checkpoint.checkpoint.to_string()];
            diagnostics.phase = Some(old.checkpoint.phase);
            diagnostics.folded_events = old.checkpoint.coverage.event_count;
            from = covered;
            if let (CheckpointPhase::MidTurn, Some(anchor)) =
                (old.checkpoint.phase, &old.checkpoint.head_anchor)
                && let Some(event) = prior[..covered].iter().find(|e| e.event.id == anchor.event)
            {
                items.extend(event_items(std::slice::from_ref(event)));
            }
        }
    }
    diagnostics.host_compaction =
        (boundary.is_none() && from > 0).then(|| start_at(prior, from, policy.chars_per_token));
    items.extend(event_items(&prior[from..]));
    let mut history = AssembledHistory {
        session: ledger.session().clone(),
        position: ledger.position(),
        items,
        boundary,
        diagnostics,
        notes: Vec::new(),
    };
    fit_history(&mut history, policy, Some(&failed.reason));
    let sent = match (&history.boundary, &history.diagnostics.fit.dropped) {
        (_, Some(dropped)) => {
            format!("{} earlier events are not in this request (see the drop note)", dropped.events)
        }
        (Some(boundary), None) => {
            format!("the previous checkpoint {} and every event after it are sent", boundary.checkpoint)
        }
        (None, None) => "the whole history is sent, without a checkpoint".to_owned(),
    };
    history.notes.insert(
        0,
        Note {
            kind: "context_compaction_failed_open".to_owned(),
            text: format!("Compaction failed ({}); {sent}.", failed.reason),
        },
    );
    note_host_compaction(&mut history);
    history
}
