//! The host-facing facade: `Mnemo::open(dir, config)`, the store's log and projections behind one
//! handle, transcript import, inspection, rebuild and verification. The only API boundary.
//!
//! It is not:
//! - a place for domain logic: that lives in the crates behind it, which hosts never name;
//! - a command-line tool: `mnemo-cli` is a thin client of this crate.
//!
//! # Embedding
//!
//! A host opens a store, appends each turn's events as they happen, asks for the history the next
//! provider request should carry, and lets the model search and read older history and recall
//! what it was asked to remember. `examples/host.rs` is the full tour (a provider overflow
//! included); this is its core:
//!
//! ```
//! use mnemo::compaction::ContextOptions;
//! use mnemo::history::{HistoryContext, HistorySearchRequest};
//! use mnemo::log::ExpectedRevision;
//! use mnemo::records::{
//!     Author, Content, EventId, InvocationId, Record, Role, RunId, RuntimeEvent, SessionId, StreamId,
//!     TextContent, TimestampMs, TurnId,
//! };
//! use mnemo::{Config, Mnemo};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let mnemo = Mnemo::open(dir.path(), Config::default())?;
//! let session = SessionId::new("s1")?;
//! let turn = TurnId::new("t1")?;
//! let say = |id: &str, role, author, text: &str| -> Result<Record, Box<dyn std::error::Error>> {
//!     let mut event = RuntimeEvent::new(
//!         EventId::new(id)?, InvocationId::new("run-1")?, RunId::new("run-1")?, session.clone(),
//!         turn.clone(), TimestampMs(1_767_225_600_000), role, author,
//!     );
//!     event.content = Some(Content::Text(TextContent::new(text)));
//!     Ok(Record::RuntimeEvent(event))
//! };
//! // One atomic append per step; the stream is the session's.
//! let records = [
//!     say("e1", Role::User, Author::User, "Please remember that I deploy with make release.")?,
//!     say("e2", Role::Model, Author::Agent, "Noted: deploys go through make release.")?,
//! ];
//! mnemo.append(&StreamId::session(&session), ExpectedRevision::Any, &records)?;
//!
//! // The next provider request's history: a checkpoint summary (once compacted) and the raw tail.
//! let history = mnemo.compaction().context(&session, &ContextOptions::default())?;
//! assert_eq!(history.items.len(), 2);
//!
//! // The model's SearchHistory tool.
//! let found = mnemo.history().search(&HistorySearchRequest::new("deploy"), &HistoryContext::default(), None)?;
//! assert!(found.is_ok_and(|search| !search.rows.is_empty()));
//!
//! // The memory_remember tool, then recall for the next request.
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! runtime.block_on(mnemo.memory().remember(&session, None))?;
//! let block = mnemo.memory().recall_block(&session, Some("how do I deploy"))?;
//! assert!(block.text.contains("make release"));
//! mnemo.close()?;
//! # Ok(())
//! # }
//! ```

mod blocking;
pub mod compaction;
mod error;
mod export;
mod handles;
pub mod history;
mod import;
mod json;
mod listing;
mod log_location;
pub mod memory;
mod mnemo;
mod salvage;
pub mod stages;
pub mod transcript;

/// The facade's result: its error is always [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The log: what an append takes and returns, the envelope readers see, the clock appends are
/// stamped by, and where the log lives.
pub mod log {
    pub use crate::log_location::{LOG_SOURCE_FILE_NAME, LogLocation};
    pub use crate::mnemo::LogEntry;
    pub use mnemo_log::{
        AppendOutcome, AppendRequest, Appended, Clock, CorruptionKind, Durability, ENVELOPE_FORMAT_VERSION,
        Envelope, EnvelopeIter, ExpectedRevision, GENESIS_HASH, HASH_BYTES, LogBackend, LogError,
        ManualClock, NewRecord, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, RevisionConflict,
        STORE_MARKER_FILE_NAME, StreamHead, SystemClock,
    };
}

/// The facts the log carries: records and their kinds, runtime events and their content, ids,
/// checkpoints, memory items, digests, and the limits every one of them is checked against.
pub mod records {
    pub use mnemo_core::limits;
    pub use mnemo_core::{
        AcceptedRequest, Actions, Attachment, AttachmentKind, Author, BoundaryDisposition, CheckpointBody,
        CheckpointCoverage, CheckpointId, CheckpointManifest, CheckpointPhase, CheckpointRecord, Content,
        ContentKind, ConversationCopied, CopyBoundary, CursorAdvance, DecodeError, DenialReason, Digest,
        DigestParseError, EncodeError, ErrorContent, EventId, EventPoint, EventStatus, ExecutionOrigin,
        ExtractionBoundary, ExtractionFailure, ExtractionFailureClass, ExtractionReceipt, ExtractionTrigger,
        FailureOutcome, FaithfulnessReport, FunctionCall, FunctionResponse, HeadAnchor, IdError,
        InlineReference, InlineReferenceKind, InvocationId, ItemId, KeyOrigin, KeyType, LifecycleState,
        MemoryCommit, MemoryItem, MemoryItemFields, MemoryKey, MemoryKind, MemoryMode, MemoryMutation,
        MemoryOrigin, MemoryScope, ModelVisibility, Mutation, NewMemoryItem, NoOpReason, OperationId,
        PermissionClosure, PermissionClosureReason, PermissionDecision, PolicyDenial, Position,
        ProviderState, ProviderStateKind, Quote, ReceiptStatus, Record, RecordKind, Refs, Role, RunId,
        RuntimeEvent, ScopeParseError, SessionArchived, SessionFlagsChanged, SessionId, SessionOpened,
        SkipReason, SourcePointer, StatementType, StorageRef, StreamId, StreamRevision, SummaryFormat,
        TemporalType, TextContent, ThinkingContent, TimestampMs, TokenUsage, ToolCallId, TurnEnded, TurnId,
        TurnOrigin, TurnStatus, ValidationError, WorkspaceId,
    };
}

pub use compaction::{
    CompactOptions, ContextOptions, CopyReport, LEDGER_WAIT_DEFAULT, MidTurnOptions, OverflowRecovery,
    ProviderOverflow,
};
pub use error::{Error, ErrorCategory};
pub use export::ExportReport;
pub use history::SessionTranscript;
pub use import::{
    DETECT_LINES_MAX, IMPORT_FILE_BYTES_MAX, ImportFormat, ImportReport, ImportStatus, ParsedImport,
    detect_format, parse_import,
};
pub use listing::SessionListing;
pub use log_location::{LOG_SOURCE_FILE_NAME, LogLocation};
pub use memory::{ExtractToolResult, MemoryModels};
pub use mnemo::{
    CATCH_UP_TIMEOUT, Config, LogEntry, Mnemo, StageReport, StageVerification, Stats, Verification,
};
pub use mnemo_compaction::{
    AssembledHistory, Boundary, CompactionOutcome, CompactionPolicy, Connection, Decision, Diagnostics,
    ExtractiveSummarizer, FinishReason, HistoryItem, LoggedCheckpoint, MidTurnOutcome, Note, OverflowLatch,
    ProviderCompactionRequest, ProviderCompactor, SummarizeError, Summarizer, SummarizerIdentity,
    SummaryRequest, SummaryResponse, TurnGuard,
};
/// The record and event types a host appends.
pub use mnemo_core::{
    Author, FunctionCall, FunctionResponse, InvocationId, MemoryMode, Role, RunId, SessionArchived,
    SessionFlagsChanged, SessionOpened, TextContent, ThinkingContent, TimestampMs, TurnEnded, TurnStatus,
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
pub use mnemo_log::{
    Durability, ExpectedRevision, LostRange, ManualClock, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE,
    STORE_MARKER_FILE_NAME,
};
pub use mnemo_memory::{
    BoxFuture, CanonicalizePrompt, Canonicalizer, Conflict, ConflictReason, EmbeddedCanonicalizer,
    EmbeddedProposer, ExtractionOutcome, ExtractionReport, ItemInput, KeyInput, LocalizationQuery,
    LocalizationSearch, MatchMode, MemoryError, MemoryProposer, ModelError, MutationInput, MutationOutcome,
    MutationRequest, MutationResult, OperationResult, ProposalPrompt, RecallBlock, RecallMemory,
    RecalledItem, Receipt, RememberResult, RememberStatus, RequestedItem, ScanLocalization, SearchRequest,
    SessionEvent,
};
pub use mnemo_pipeline::stages::session_catalog::SessionSummary;
pub use mnemo_pipeline::{PipelineError, StageStatus, StageStop};
pub use salvage::{SalvageReport, salvage};
pub use transcript::{IMPORT_EPOCH_MS, TIMESTAMP_MS_MAX, Transcript, TranscriptError, parse_transcript};

/// The async API may be shared across threads and its futures moved between them: a host runs it
/// on a multi-threaded runtime. This fails to compile if that stops being true.
#[expect(dead_code, reason = "a compile-time assertion, never called")]
fn async_api_is_send_and_sync(mnemo: &Mnemo, session: &SessionId, turn: &TurnId, options: &CompactOptions) {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<Mnemo>();
    send(&mnemo.compaction().compact(session, options));
    send(&mnemo.compaction().prepare_history(session, options));
    send(&mnemo.memory().remember(session, None));
    send(&mnemo.memory().extract(session, None));
    send(&mnemo.memory().complete_turn(session, turn));
    send_sync::<history::History<'_>>();
    send_sync::<memory::Memory<'_>>();
    send_sync::<compaction::Compaction<'_>>();
}

/// The README's Rust examples compile as doctests, so the embedding guide stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
