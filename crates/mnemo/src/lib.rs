//! The host-facing facade: `Mnemo::open(dir, config)`, the store's log and projections behind one
//! handle, transcript import, inspection, rebuild and verification. The only API boundary.
//!
//! It is not:
//! - a place for domain logic: that lives in the crates behind it, which hosts never name;
//! - a command-line tool: `mnemo-cli` is a thin client of this crate.

mod compaction;
mod error;
mod export;
mod history;
mod import;
mod log_location;
mod memory;
mod mnemo;
mod stages;
mod transcript;

pub use compaction::{
    CompactOptions, ContextOptions, CopyReport, LEDGER_WAIT_DEFAULT, MidTurnOptions, OverflowRecovery,
    ProviderOverflow,
};
pub use error::{Error, ErrorCategory};
pub use export::ExportReport;
pub use history::SessionTranscript;
pub use import::{DETECT_LINES_MAX, ImportFormat, ParsedImport, detect_format, parse_import};
pub use log_location::{LOG_SOURCE_FILE_NAME, LogLocation};
pub use memory::{ExtractToolResult, MemoryModels};
pub use mnemo::{
    CATCH_UP_TIMEOUT, Config, ImportReport, LogEntry, Mnemo, StageReport, StageVerification, Stats,
    Verification,
};
pub use mnemo_compaction::{
    AssembledHistory, Boundary, CompactionOutcome, CompactionPolicy, Connection, Decision, Diagnostics,
    ExtractiveSummarizer, FinishReason, HistoryItem, LoggedCheckpoint, MidTurnOutcome, Note, OverflowLatch,
    ProviderCompactionRequest, ProviderCompactor, SummarizeError, Summarizer, SummarizerIdentity,
    SummaryRequest, SummaryResponse, TurnGuard,
};
pub use mnemo_core::{
    CheckpointPhase, CheckpointRecord, Content, CopyBoundary, EventId, ItemId, KeyOrigin, KeyType,
    MemoryItem, MemoryScope, OperationId, Position, Record, RuntimeEvent, SessionId, StreamId, ToolCallId,
    TurnId, WorkspaceId,
};
pub use mnemo_history::{
    HistoryContext, HistoryRead, HistoryReadRequest, HistorySearch, HistorySearchRequest, MatchKind,
    MessageKind, ReadFailure, ReadFailureReason, ReadMessage, ReadOutcome, ReadTurn, SearchFailure,
    SearchFailureReason, SearchOutcome, SearchRow, SessionHeader, ToolFailure, VisibleMessage,
};
pub use mnemo_log::{Durability, ExpectedRevision, ManualClock};
pub use mnemo_memory::{
    BoxFuture, CanonicalizePrompt, Canonicalizer, Conflict, ConflictReason, EmbeddedCanonicalizer,
    EmbeddedProposer, ExtractionOutcome, ExtractionReport, ItemInput, KeyInput, LocalizationQuery,
    LocalizationSearch, MatchMode, MemoryError, MemoryProposer, ModelError, MutationInput, MutationOutcome,
    MutationRequest, MutationResult, OperationResult, ProposalPrompt, RecallBlock, RecallMemory,
    RecalledItem, Receipt, RememberResult, RememberStatus, RequestedItem, ScanLocalization, SearchRequest,
    SessionEvent,
};
pub use mnemo_pipeline::stages::session_catalog::SessionSummary;
pub use transcript::{IMPORT_EPOCH_MS, TIMESTAMP_MS_MAX, Transcript, TranscriptError, parse_transcript};
