//! Extraction (memory.md §3): triggers, gates, the range engine with its admission pipeline,
//! and the model seams with their embedded defaults.

pub(crate) mod admission;
mod backlog;
pub(crate) mod embedded;
mod engine;
pub(crate) mod evidence;
pub(crate) mod proposal;
mod ranges;
mod remember;
pub(crate) mod seams;

use mnemo_core::{CheckpointId, CheckpointRecord, EventId, MemoryScope, SessionId, ToolCallId};
use serde::Serialize;

use crate::error::MemoryError;
use crate::ops::MemoryLedger;
use crate::state::{PendingFailure, Receipt};

pub use admission::{Rejection, check_faithful};
pub use backlog::{SessionBacklog, extraction_backlog};
pub use embedded::{EmbeddedCanonicalizer, EmbeddedProposer};
pub use engine::{MODEL_CALL_TIMEOUT, MODEL_CALLS_PER_RANGE_MAX, execute};
pub use evidence::{LocalizationQuery, LocalizationSearch, ScanLocalization, SessionEvent};
pub use proposal::{Canonicalization, Proposal, parse_canonicalization, parse_proposal};
pub use ranges::{EXTRACT_USER_EVENTS_PER_RANGE_MAX, extraction_boundaries, turn_start_before};
pub use remember::{NotStored, RememberResult, RememberStatus};
pub use seams::{
    BoxFuture, CanonicalCandidate, CanonicalizePrompt, Canonicalizer, CitationView, ContextLine,
    EvidenceView, HeldItem, MemoryProposer, ModelError, ProposalPrompt,
};

/// Why extraction may not run for a session now (memory.md §3.3), in evaluation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GateReason {
    /// The session is incognito.
    Incognito,
    /// Memory is disabled for the session.
    Disabled,
    /// The host is draining; nothing is settled, the work is recoverable later.
    Unavailable,
    /// A subagent's or an archived session.
    Ineligible,
}

impl GateReason {
    /// The reason's snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            GateReason::Incognito => "incognito",
            GateReason::Disabled => "disabled",
            GateReason::Unavailable => "unavailable",
            GateReason::Ineligible => "ineligible",
        }
    }
}

/// What set an extraction off, with its stable boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trigger {
    /// Explicit user intent (foreground). With a tool call id, the range ends just before the
    /// `memory_remember` call; without one, at `through` or the session's last event.
    Remember {
        /// The `memory_remember` call.
        tool_call: Option<ToolCallId>,
        /// The last event to consider when there is no tool call.
        through: Option<EventId>,
    },
    /// Agent-requested extraction of incidental facts (background); the range ends at
    /// `terminal_event` or the session's last event.
    Extract {
        /// The turn's terminal event.
        terminal_event: Option<EventId>,
    },
    /// A compaction checkpoint was recorded (background); the range ends at its extraction
    /// boundary.
    Compaction {
        /// The checkpoint.
        checkpoint: CheckpointId,
    },
}

/// What the engine needs from its host beyond the ledger: gates, the session's events and
/// checkpoints, and the session's memory scope.
pub trait ExtractionHost: MemoryLedger {
    /// `None` when extraction may run; the first closed gate otherwise.
    fn gate(&self, session: &SessionId) -> Result<Option<GateReason>, MemoryError>;
    /// The session's RuntimeEvents with their ordinals, in order.
    fn session_events(&self, session: &SessionId) -> Result<Vec<SessionEvent>, MemoryError>;
    /// The session's accepted checkpoints, in order.
    fn checkpoints(&self, session: &SessionId) -> Result<Vec<CheckpointRecord>, MemoryError>;
    /// The stream the session's memory records go to: its workspace, or global.
    fn session_scope(&self, session: &SessionId) -> Result<MemoryScope, MemoryError>;
}

/// The model seams an extraction uses.
#[derive(Debug, Clone, Copy)]
pub struct Models<'a> {
    /// Proposal calls.
    pub proposer: &'a dyn MemoryProposer,
    /// Canonicalization calls.
    pub canonicalizer: &'a dyn Canonicalizer,
    /// Localization searches.
    pub localization: &'a dyn LocalizationSearch,
}

/// How an extraction ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExtractionOutcome {
    /// Items, cursor and receipt were committed (or had been: `replayed`).
    Committed {
        /// The receipt.
        receipt: Receipt,
        /// Whether this call found it already committed.
        replayed: bool,
    },
    /// The range failed for the first time; one later trigger retries it.
    RetryLater {
        /// Why it failed.
        class: mnemo_core::ExtractionFailureClass,
        /// The pending range.
        pending: PendingFailure,
    },
    /// The range failed its retry and was discarded.
    Discarded {
        /// Why it failed.
        class: mnemo_core::ExtractionFailureClass,
        /// The discard receipt.
        receipt: Receipt,
    },
    /// A gate closed or a model call was aborted mid-way: nothing was committed or settled.
    Blocked {
        /// Why.
        reason: String,
    },
    /// Nothing ran (gate closed, bad boundary, a pending range waiting for another trigger).
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The cursor is already at or past the boundary.
    NothingToProcess,
}

/// A candidate admission turned down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedCandidate {
    /// Whether the user asked for it.
    pub requested: bool,
    /// Its proposed content.
    pub content: String,
    /// Why.
    pub rejection: Rejection,
}

/// What an extraction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtractionReport {
    /// The trigger's operation id (`memory_<hex>`), if the boundary resolved.
    pub operation: Option<String>,
    /// A pending range's retry, if one ran first.
    pub retried: Option<ExtractionOutcome>,
    /// The outcome for the trigger's own range.
    pub outcome: ExtractionOutcome,
    /// Model calls made.
    pub model_calls: u32,
    /// Candidates turned down.
    pub rejections: Vec<RejectedCandidate>,
    /// Items the committed ranges of this report stored (created, updated or archived); a replayed
    /// commit stores nothing again.
    pub stored: u64,
}

impl ExtractionOutcome {
    /// Items this outcome's commit stored: none unless it committed now.
    pub fn stored(&self) -> u64 {
        match self {
            ExtractionOutcome::Committed { receipt, replayed: false } => receipt.items.len() as u64,
            _ => 0,
        }
    }
}
