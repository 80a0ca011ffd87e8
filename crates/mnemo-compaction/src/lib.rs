//! Context budget, compaction selector, summarizer seam, checkpoint ledger (latest-checkpoint view,
//! CAS, recovery), history assembly for the next provider request, conversation copy.
//!
//! "Compaction is a projection of the log, never a mutation of it": a checkpoint is a recorded fact
//! that stands in for a prefix of a session's compactable projection, and every decision to use it
//! is re-checked against the log it came from.
//!
//! It is not:
//! - a model client: summarizers and provider compactors are traits a host implements (an
//!   extractive summarizer is embedded), and their output is recorded so replay never calls a model;
//! - the log or the pipeline: it reads the log through `mnemo_log::LogBackend` and registers the
//!   `latest-checkpoint` stage with the pipeline, but appends only through the facade's recorder;
//! - the visible transcript or history search (`mnemo-history`), nor memory (`mnemo-memory`).

mod assembly;
mod checkpoint;
mod claims;
mod coordinator;
mod copy;
mod error;
mod extractive;
mod faithfulness;
mod fit;
mod history;
mod host_compaction;
mod ledger;
mod midturn;
mod policy;
mod projection;
mod retrieval;
mod stage;
mod summarizer;
mod summary;
#[doc(hidden)]
pub mod testing;
mod writer;

pub use assembly::{
    AssemblyOptions, DRAFT_EVENT_CHARS_MAX, DRAFT_SUMMARY_TOKENS_MAX, FoldPlan, TAIL_BUDGET_DIVISOR,
    assemble, fitted_tokens, has_oversized_turn, replay_fits, select_fold, trim_whole_turns,
};
pub use checkpoint::{
    BodyInput, BuildError, CHECKPOINT_ID_PREFIX, CODEX_PROVIDER_TYPE, CheckpointInput, Connection,
    EntryFacts, MatchMiss, PROVIDER_LIMITATIONS, PROVIDER_PART_KIND, ProjectionView, SYNTHETIC_EVENT_PREFIX,
    TEXT_LIMITATIONS, build_checkpoint, can_continue, can_replace, can_replay, checkpoint_id, is_synthetic,
    match_prefix, provider_message, render_block, replay_token_estimate, stored_token_estimate,
    synthetic_event, validate_loadable, validate_provider_state, validate_shape,
};
pub use coordinator::{CheckpointRecorder, Coordinator, TurnGuard};
pub use copy::{
    CopyOptions, CopyPlan, CopyRefusal, committed_copy, default_target as default_copy_target, plan_copy,
};
pub use error::CompactionError;
pub use extractive::{EXTRACTIVE_SUMMARIZER_NAME, EXTRACTIVE_SUMMARIZER_VERSION, ExtractiveSummarizer};
pub use faithfulness::{
    CLAIM_EVENTS_MAX, ClaimSupport, check_faithfulness, claim_support, evidence_text,
    exceeds as faithfulness_exceeds,
};
pub use fit::{
    Dropped, ELIDED_RESULT_CHARS_MIN, Elision, FitReport, RESULT_BUDGET_DIVISOR, UNANSWERED_CALL_ID_PREFIX,
    UNANSWERED_CALL_RESULT, UnfitReason, WINDOW_MIN, answer_unanswered_calls, elide_event, elision_marker,
    fit_history, result_cap_chars,
};
pub use history::{AssembledHistory, Boundary, Decision, Diagnostics, HistoryItem, Note};
pub use host_compaction::{CLAUDE_CODE_CONTINUATION, HostCompactionStart, is_host_compaction};
pub use ledger::{LoadPath, LoggedEvent, SessionLedger};
pub use midturn::{
    LEDGER_WAIT_DEFAULT, MidTurnOutcome, MidTurnRequest, OverflowLatch, capacity_exceeded, compact_mid_turn,
    estimate_payload_tokens, overflow_phase, select_safe_boundary,
};
pub use policy::{
    CapacitySource, CompactMode, CompactionPolicy, HISTORY_SEARCH_AROUND_DEFAULT, HISTORY_SEARCH_AROUND_MAX,
    HISTORY_SEARCH_RESULTS_DEFAULT, HISTORY_SEARCH_RESULTS_MAX, HISTORY_SEARCH_TOKENS_DEFAULT,
    MANUAL_HIGH_WATER_RATIO,
};
pub use projection::{
    CHARS_PER_TOKEN_DEFAULT, SOURCE_POLICY_VERSION, SourceDigester, estimate_events_tokens, estimate_tokens,
    estimated_chars, is_compactable, source_digest, stable_event, stable_json, turn_groups, utf16_len,
};
pub use retrieval::{
    HISTORY_SEARCH_QUERY_CHARS_MAX, HISTORY_SEARCH_TERM_CHARS_MIN, HISTORY_SEARCH_TERMS_MAX, HistorySearch,
    HistorySearchReport, SearchHit, add_retrieved, history_search_query, retrieve,
};
pub use stage::{
    IndexedProjection, LatestCheckpointStage, LatestView, LoggedCheckpoint, ProjectedEntry,
    STAGE_NAME as LATEST_CHECKPOINT_STAGE, quarantined, select as select_checkpoint, view as latest_view,
};
pub use summarizer::{
    BoxFuture, FinishReason, PROMPT_VERSION, ProviderCompactionRequest, ProviderCompactor, SummarizeError,
    Summarizer, SummarizerIdentity, SummaryRequest, SummaryResponse, TOOL_OUTPUT_OMITTED, TextSummary,
    compact_provider, fit_input, project_messages, summarize_text, summarizer_instructions,
};
pub use summary::{
    REQUIRED_SUMMARY_SECTIONS, SUMMARY_FLOOR_SPAN_TOKENS, SUMMARY_FLOOR_TOKENS, SUMMARY_FORMAT_TEMPLATE,
    SummaryChecks, SummaryDefect, find_summary_defect, shorten_summary,
};
pub use writer::{CompactionOutcome, ManualOptions, WriterSeams, compact_now, prepare_history};

/// Registers this crate's stage (`latest-checkpoint`) with a registry.
pub fn register(registry: &mut mnemo_pipeline::StageRegistry) {
    registry.register(stage::STAGE_NAME, stage::factory);
}
