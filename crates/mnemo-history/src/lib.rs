//! Visible-message projection, history search index, SearchHistory / ReadHistory.
//!
//! Two projector stages: `history-messages` ([`messages`]) keeps each session's visible transcript,
//! its header and a recency index of sessions; `history-search` ([`index`]) keeps an inverted index
//! of the redacted searchable text with BM25 statistics, for the whole store and for each
//! workspace. [`search_history`] and [`read_history`] answer the agent tools of spec §3 from their
//! stores, each inside the caller's workspace ([`Scope`]), redacting secrets with
//! `mnemo_core::redaction`, the rules memory admission and checkpoint summaries share.
//!
//! It is not:
//! - a store: the stages write through `mnemo-pipeline`'s state stores and never touch the log;
//! - a host API: the `mnemo` facade decides which position a query answers at (live, or as of an
//!   earlier position by folding the log into memory) and hands the stores in;
//! - the model's history: what the next provider request receives is compaction's business.

pub mod analysis;
mod codec;
pub mod diagnostics;
pub mod index;
mod listing;
pub mod messages;
mod read;
mod search;
pub mod text;
mod tool;

pub use diagnostics::{
    DiagnosticCode, ProjectionDiagnostic, STEP_LIMIT_ERROR_CLASS, Severity, TurnState, diagnose, turn_state,
};
pub use index::{BM25_B_DEFAULT, BM25_K1_DEFAULT, HistorySearchIndex, IndexedDoc, MatchKind, Scope};
pub use listing::{RELAY_SESSION_SOURCE, SessionListing, session_listings};
pub use messages::{
    HistoryMessages, MessageKind, REQUEST_TITLE_CHARS_MAX, SessionHeader, TOOL_RESULT_SCAN_BYTES_MAX,
    VisibleMessage, request_title,
};
pub use read::{
    HistoryRead, HistoryReadRequest, READ_AFTER_TURNS_DEFAULT, READ_BEFORE_TURNS_DEFAULT, READ_BYTES_MAX,
    READ_ID_CHARS_MAX, READ_MESSAGE_BYTES_MAX, READ_SIDE_TURNS_MAX, READ_TURNS_MAX, ReadFailure,
    ReadFailureReason, ReadMessage, ReadOutcome, ReadTurn, read_history,
};
pub use search::{
    HistorySearch, HistorySearchRequest, SEARCH_CURSOR_CHARS_MAX, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX,
    SEARCH_PAYLOAD_BYTES_MAX, SEARCH_QUERY_CHARS_MAX, SEARCH_SESSIONS_MAX, SNIPPET_CODE_POINTS_MAX,
    SNIPPET_CONTEXT_HALF_CHARS, SearchFailure, SearchFailureReason, SearchOutcome, SearchRow, search_history,
};
pub use tool::{HistoryContext, ToolFailure};

/// Registers both stages with a registry.
pub fn register(registry: &mut mnemo_pipeline::StageRegistry) {
    registry.register(messages::STAGE_NAME, messages::factory);
    registry.register(index::STAGE_NAME, index::factory);
}
