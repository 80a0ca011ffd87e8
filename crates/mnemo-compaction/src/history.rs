//! The history a request receives and how it was made: its items, the checkpoint it stands on,
//! the notes the turn shows and every decision's diagnostics. Assembly makes it; fitting, mid-turn
//! compaction and history search read and amend it. A leaf of the crate's assembly modules: it
//! names their reports, never their procedures.

use std::collections::BTreeMap;

use mnemo_core::{
    CheckpointBody, CheckpointId, CheckpointPhase, CheckpointRecord, Position, RuntimeEvent, SessionId,
};
use serde::Serialize;
use serde_json::Value;

use crate::checkpoint::{provider_message, render_block};
use crate::fit::FitReport;
use crate::host_compaction::HostCompactionStart;
use crate::ledger::{LoadPath, LoggedEvent};
use crate::policy::CompactionPolicy;
use crate::projection::{estimate_events_tokens, estimate_tokens};

/// One item of the assembled history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryItem {
    /// A V2 checkpoint's rendered block, sent as a user message.
    Checkpoint {
        /// The checkpoint.
        checkpoint: CheckpointId,
        /// The rendered block.
        text: String,
    },
    /// A V3 checkpoint's opaque state, sent as an assistant custom part (never as text).
    ProviderState {
        /// The checkpoint.
        checkpoint: CheckpointId,
        /// The assistant message.
        message: Value,
    },
    /// Earlier events of the session that the context-budget history search found for the request
    /// (§3.10, decision 0148), rendered as text and sent as a user message between the checkpoint and
    /// the raw events (never as raw events, so no call goes without its result).
    Retrieved {
        /// The retrieved events' log positions, in log order.
        positions: Vec<Position>,
        /// The rendered block.
        text: String,
    },
    /// A raw event.
    Event {
        /// Its log position.
        position: Position,
        /// The event.
        event: Box<RuntimeEvent>,
    },
}

/// What assembly did with the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Raw history (perhaps trimmed by whole turns).
    Unchanged,
    /// A checkpoint replaced the prefix it covers.
    Replaced,
    /// A compaction failed and history fell back.
    FailedOpen,
}

/// The checkpoint a request stands on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Boundary {
    /// The checkpoint.
    pub checkpoint: CheckpointId,
    /// 2 (text) or 3 (provider state).
    pub version: u8,
    /// Its phase.
    pub phase: CheckpointPhase,
    /// Events it covers.
    pub covered_events: u64,
    /// Its log position.
    pub position: Position,
}

/// A note the turn shows the user about compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// `context_compacted` or `context_compaction_failed_open`.
    pub kind: String,
    /// What happened.
    pub text: String,
}

/// Every decision assembly made and why (§6.1 decision diagnostics).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostics {
    /// `prior_replay`.
    pub stage: &'static str,
    /// `runtime_events`.
    pub source_kind: &'static str,
    /// What happened.
    pub decision: Decision,
    /// The boundary's phase, when a checkpoint was used.
    pub phase: Option<CheckpointPhase>,
    /// `history_compact` when a checkpoint was used.
    pub boundary_kind: Option<&'static str>,
    /// The checkpoint ids used.
    pub boundary_ids: Vec<String>,
    /// Why history was left as it was (a skip reason), if it was.
    pub reason: Option<String>,
    /// Why a compaction failed open, if one did.
    pub fail_open_reason: Option<String>,
    /// Every reason something was skipped, counted.
    pub skipped_reason_counts: BTreeMap<String, u64>,
    /// Compactable prior history, in tokens (from the index when replaying).
    pub tokens_before: u64,
    /// The assembled history, in tokens.
    pub tokens_after: u64,
    /// The history budget.
    pub max_history_tokens: u64,
    /// The high-water mark.
    pub high_water_tokens: u64,
    /// The reserve.
    pub reserve_tokens: u64,
    /// Characters per token.
    pub chars_per_token: u64,
    /// Whether a writer would compact now (read-only assembly only reports it).
    pub compaction_due: bool,
    /// Whether a retained turn alone exceeds the budget (§3.5).
    pub oversized_turn: bool,
    /// Set when the turn must end with `context_budget_exhausted`: `no_safe_completed_span`,
    /// `summarizer_failed` or `head_anchor_exceeds_capacity`.
    pub context_budget_exhausted: Option<&'static str>,
    /// How the latest checkpoint was found.
    pub load_path: Option<LoadPath>,
    /// RuntimeEvents assembly read from the log.
    pub events_read: u64,
    /// Events the checkpoint in use stands in for (0 without one).
    pub folded_events: u64,
    /// Whether the history fits the budget, what was elided or dropped to make it fit, and why
    /// it cannot when it does not (decision 0125).
    pub fit: FitReport,
    /// What the context-budget history search did, when the policy switches it on (§3.10).
    pub history_search: Option<crate::retrieval::HistorySearchReport>,
    /// Where the request starts because the host compacted its conversation after the latest
    /// checkpoint in use, if it did (decision 0215).
    pub host_compaction: Option<HostCompactionStart>,
}

/// Diagnostics before any decision.
pub(crate) fn empty_diagnostics(policy: &CompactionPolicy) -> Diagnostics {
    Diagnostics::new(policy)
}

impl Diagnostics {
    fn new(policy: &CompactionPolicy) -> Self {
        Diagnostics {
            stage: "prior_replay",
            source_kind: "runtime_events",
            decision: Decision::Unchanged,
            phase: None,
            boundary_kind: None,
            boundary_ids: Vec::new(),
            reason: None,
            fail_open_reason: None,
            skipped_reason_counts: BTreeMap::new(),
            tokens_before: 0,
            tokens_after: 0,
            max_history_tokens: policy.max_history(),
            high_water_tokens: policy.high_water(),
            reserve_tokens: policy.reserve(),
            chars_per_token: policy.chars_per_token,
            compaction_due: false,
            oversized_turn: false,
            context_budget_exhausted: None,
            load_path: None,
            events_read: 0,
            folded_events: 0,
            fit: FitReport::default(),
            history_search: None,
            host_compaction: None,
        }
    }

    /// Counts a skip reason and makes it the reason.
    pub(crate) fn skip(&mut self, reason: &str) {
        *self.skipped_reason_counts.entry(reason.to_owned()).or_insert(0) += 1;
        self.reason = Some(reason.to_owned());
    }
}

/// The history a request receives, with how it was made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssembledHistory {
    /// The session.
    pub session: SessionId,
    /// The log position it was assembled at.
    pub position: Position,
    /// The items, in order.
    pub items: Vec<HistoryItem>,
    /// The checkpoint it stands on, if any (reported only when one was actually used).
    pub boundary: Option<Boundary>,
    /// Decisions and reasons.
    pub diagnostics: Diagnostics,
    /// Notes the turn shows.
    pub notes: Vec<Note>,
}

impl AssembledHistory {
    /// The raw events of the history, in order.
    pub fn events(&self) -> impl Iterator<Item = &RuntimeEvent> {
        self.items.iter().filter_map(|item| match item {
            HistoryItem::Event { event, .. } => Some(event.as_ref()),
            _ => None,
        })
    }
}

pub(crate) fn event_items(events: &[LoggedEvent]) -> Vec<HistoryItem> {
    events
        .iter()
        .map(|e| HistoryItem::Event { position: e.position, event: Box::new(e.event.clone()) })
        .collect()
}

pub(crate) fn items_tokens(items: &[HistoryItem], cpt: u64) -> u64 {
    items
        .iter()
        .map(|item| match item {
            HistoryItem::Checkpoint { text, .. } | HistoryItem::Retrieved { text, .. } => {
                estimate_tokens(crate::projection::utf16_len(text), cpt)
            }
            HistoryItem::ProviderState { message, .. } => {
                estimate_tokens(crate::projection::json_utf16_len(message), cpt)
            }
            HistoryItem::Event { event, .. } => estimate_events_tokens([event.as_ref()], cpt),
        })
        .sum()
}

/// The items a checkpoint replays as, before its tail.
pub(crate) fn checkpoint_items(checkpoint: &CheckpointRecord) -> Vec<HistoryItem> {
    match &checkpoint.body {
        CheckpointBody::Text { .. } => render_block(checkpoint)
            .map(|text| HistoryItem::Checkpoint { checkpoint: checkpoint.checkpoint.clone(), text })
            .into_iter()
            .collect(),
        CheckpointBody::Provider { state } => {
            vec![HistoryItem::ProviderState {
                checkpoint: checkpoint.checkpoint.clone(),
                message: provider_message(state),
            }]
        }
        _ => Vec::new(),
    }
}
