//! Memory item store (ops, versions, idempotency), extraction (admission, secrets, cursor,
//! receipts, failures, denials, the backlog past each session's cursor, windows that fit one
//! proposer call), recall.
//!
//! It is not:
//! - a writer of the log: it decides records and hands them to a [`MemoryLedger`] (the facade),
//!   which appends them under one writer;
//! - a model client: proposal and canonicalization are [`MemoryProposer`] and [`Canonicalizer`]
//!   seams, with deterministic embedded implementations;
//! - a history index: localization search goes through the [`LocalizationSearch`] seam.
//!
//! Every write is one record on a `memory/<scope>` stream; the `memory-index` stage
//! ([`MemoryIndex`]) folds them into items, a key index, operations, receipts, cursors, pending
//! failures and denials, and can be rebuilt from the log.
//!
//! The `search_required` localization searches through the [`LocalizationSearch`] seam, whose
//! default [`ScanLocalization`] scans the session's events as the reference does; a host may plug in
//! another through the facade's `MemoryModels` without changing this crate's checks. Secret
//! detection ([`is_sensitive`]) is memory.md §3.8 by the shared rules of `mnemo_core::redaction`: a
//! text is sensitive when redacting it would change it, so memory refuses exactly what search and
//! read hide.

mod consolidate;
mod eligibility;
mod error;
mod extract;
mod facts;
mod index;
mod lane;
mod ops;
mod provenance;
mod recall;
mod scope;
mod secrets;
mod state;
mod terms;
pub mod testing;
mod text;
mod write;

pub use consolidate::{Link, Relation, merge_fields, relation, signature};
pub use eligibility::{boundary_disposition, session_gate};
pub use error::{Conflict, ConflictReason, MemoryError};
pub use extract::{
    BoxFuture, CanonicalCandidate, Canonicalization, CanonicalizePrompt, Canonicalizer, CitationView,
    ContextLine, EXTRACT_USER_EVENTS_PER_RANGE_MAX, EmbeddedCanonicalizer, EmbeddedProposer, EvidenceView,
    ExtractionHost, ExtractionOutcome, ExtractionReport, GateReason, HeldItem, LocalizationQuery,
    LocalizationSearch, MODEL_CALL_TIMEOUT, MODEL_CALLS_PER_RANGE_MAX, MemoryProposer, ModelError, Models,
    NotStored, Proposal, ProposalPrompt, RejectedCandidate, Rejection, RememberResult, RememberStatus,
    ScanLocalization, SessionBacklog, SessionEvent, Trigger, check_faithful, execute, extraction_backlog,
    extraction_boundaries, parse_canonicalization, parse_proposal, turn_start_before,
};
pub use index::MemoryIndex;
pub use lane::{LaneGuard, Priority, SessionLanes};
pub use ops::{
    CommitRequest, CommitResult, Decide, LIST_RESULTS_DEFAULT, LIST_RESULTS_MAX, ListRequest, MatchMode,
    MemoryLedger, MutationInput, MutationRequest, SEARCH_RESULTS_DEFAULT, SEARCH_RESULTS_MAX,
    SEARCH_TERMS_MAX, SearchRequest, SettleRequest, SettleResult, apply_mutations, commit_extraction,
    item_id_for, list, record_denial, search, settle_failure,
};
pub use provenance::{HISTORY_ITEMS_MAX, ItemHistory, history, unmerge};
pub use recall::{
    RECALL_BUDGET_CONFIG_KEY, RECALL_BUDGET_TOKENS_DEFAULT, RECALL_QUERY_CODE_POINTS_MAX,
    RECALL_RECENT_EVENTS_MAX, RECALL_RESULTS_DEFAULT, RECALL_RESULTS_MAX, RECALL_SCAN_ITEMS_MAX,
    RECALL_STANDING_BUDGET_PERCENT, RECALL_STANDING_ITEMS_MAX, RecallBlock, RecallMemory, RecalledItem,
    START_BLOCK_TOKENS_MAX, recall, recall_block, recall_budget_tokens, recall_text, start_block_session,
};
pub use scope::{holds_everywhere, item_scope};
pub use secrets::{is_sensitive, is_sensitive_key};
pub use state::{
    Cursor, Denial, DiscardedRange, ItemAction, ItemEvent, MemoryView, MutationOutcome, MutationResult,
    MutationType, OperationResult, OperationType, PendingFailure, Receipt, STAGE_NAME, StoredItem,
};
pub use text::{
    IDENTIFIER_CODE_POINTS_MAX, check_identifier, normalize_content, normalize_evidence, visible_key,
};
pub use write::{ItemInput, KeyInput, key_priority, normalize_keys, normalize_sources};

/// Registers this crate's stage (`memory-index`) with a registry.
pub fn register(registry: &mut mnemo_pipeline::StageRegistry) {
    registry.register(STAGE_NAME, index::factory);
}
