//! The host-facing facade: `Mnemo::open(dir, config)`, the store's log and projections behind one
//! handle, transcript import, inspection, rebuild and verification. The only API boundary.
//!
//! It is not:
//! - a place for domain logic: that lives in the crates behind it, which hosts never name;
//! - a transcript reader or writer: formats, detection, converters and the line format are
//!   `mnemo-transcript`'s; the facade appends what they yield and reads back what the log holds;
//! - a command-line tool: `mnemo-cli` is a thin client of this crate.
//!
//! # Shape
//!
//! [`Mnemo`] holds what concerns the whole store: [`open`](Mnemo::open) and [`close`](Mnemo::close),
//! [`append`](Mnemo::append), the [`log`](Mnemo::log), [`import`](Mnemo::import) and
//! [`export_transcript`](Mnemo::export_transcript), [`stats`](Mnemo::stats),
//! [`rebuild`](Mnemo::rebuild) and [`verify`](Mnemo::verify). Each concern has a sub-handle:
//! [`mnemo.history()`](Mnemo::history) (sessions, transcripts, the SearchHistory and ReadHistory
//! tools), [`mnemo.memory()`](Mnemo::memory) (remember, extract, recall, the item store) and
//! [`mnemo.compaction()`](Mnemo::compaction) (the next request's history, compaction, overflow
//! recovery, conversation copy). Types live in the module of their concern: [`records`], [`log`],
//! [`history`], [`memory`], [`compaction`], [`transcript`] and [`stages`]. [`workspace_of`] is the
//! workspace of the directory a session runs in (its repository's root), which an import records
//! for a transcript's `cwd` and a host asks for its own directory's.
//!
//! # Blocking
//!
//! Which calls wait, for what, and for how long:
//!
//! | calls | wait for | at most |
//! |---|---|---|
//! | `Mnemo::open` | opening the database, checking the log's newest envelopes, starting the stages (for a NATS log, connecting and reading the stream) | I/O; the NATS client's timeouts |
//! | `append`, `memory().create/update/archive/restore/apply`, `compaction().copy` | one durable group commit (a write and, at the default durability, one fsync); the writes then wait for their stage as reads do | I/O |
//! | reads: `history().*`, `memory().get/search/recall/recall_block/cursor/backlog/request_extraction`, `compaction().context/policy`, `stats`, `catch_up` | the stages they read folding the log as it is at the call | [`stages::CATCH_UP_TIMEOUT`] (600 s); a stopped stage fails at once |
//! | an `as_of` read, `import`, `export_transcript`, `rebuild`, `verify`, `log_entries` | reading (and for `as_of`, `rebuild` and `verify`, folding) the log | linear in the log read |
//! | `close` | the stages folding everything appended, then their threads | `CATCH_UP_TIMEOUT` |
//! | `compaction().compact/prepare_history/compact_mid_turn/recover_from_overflow`, `memory().remember/remember_report/extract/extract_backlog/complete_turn/on_checkpoint_recorded` (async) | the host's model seams and the session's lane (awaited); the waits above for the ledger they read and the records they append; `compact_mid_turn` also `durable_through` | `MidTurnOptions::ledger_wait` for `durable_through`; otherwise as above |
//!
//! `history()`, `memory()`, `compaction()`, `log_location`, `stage_status`,
//! `compaction().begin_turn`, `memory().set_models`, `memory().last_extractions` and
//! `memory().begin_drain` never wait.
//!
//! Async calls do not hold up a runtime's other tasks: every wait of the facade, in async calls and
//! sync ones alike, runs through `tokio::task::block_in_place` when it is made on a worker of a
//! multi-thread tokio runtime, so the worker hands its queued tasks to another thread before it
//! waits. A current-thread runtime has no other thread to hand them to: there the waits block it,
//! as a synchronous call would. A host that calls the synchronous API from async code on a
//! current-thread runtime moves it onto `tokio::task::spawn_blocking` (a `Mnemo` is `Send + Sync`;
//! share it in an `Arc`).
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
//!     say("e1", Role::User, Author::User, "Please remember that in every project I deploy with make release.")?,
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
mod checkpoint_recorder;
pub mod compaction;
mod cursors;
mod error;
mod export;
pub mod history;
mod import;
mod log_location;
pub mod memory;
mod memory_runtime;
mod mnemo;
mod salvage;
pub mod stages;
mod workspace;

/// Transcripts in and out: the mnemo transcript format (JSON Lines), its parsing and validation into
/// records, the foreign formats [`Mnemo::import`] converts, and what an import or an export
/// reports. The formats, their converters and the parser are the transcript crate's; the facade
/// appends what they yield and reads back what the log holds.
///
/// A file is validated whole before anything is appended, so a bad line appends nothing. Ids and
/// timestamps that a line leaves out are derived from the file alone, so the same file always
/// yields the same records.
pub mod transcript {
    pub use crate::import::FileCursor;
    pub use crate::import::ImportCursor;
    pub use mnemo_transcript::{
        CAPTURE_CURSORS_MAX, CONVERT_HOLD_LINES_MAX, DETECT_LINES_MAX, DOCUMENT_PROBE_BYTES_MAX,
        ExportReport, IMPORT_EPOCH_MS, IMPORT_FILE_BYTES_MAX, IMPORT_READ_BUFFER_BYTES, ImportFormat,
        ImportReport, ImportStatus, Importer, NO_CONVERSATION_LINES, ParsedImport, TIMESTAMP_MS_MAX,
        TRANSCRIPT_LINE_BYTES_MAX, Transcript, TranscriptError, TranscriptRecord, detect_format, importer,
        importers, parse_import, parse_transcript,
    };
}

/// The log: what an append takes and returns, the envelope readers see, the clock appends are
/// stamped by, and where the log lives.
pub mod log {
    pub use crate::log_location::{LOG_SOURCE_FILE_NAME, LogLocation};
    pub use crate::mnemo::LogEntry;
    pub use crate::salvage::{SalvageReport, salvage};
    pub use mnemo_log::{
        AppendOutcome, AppendRequest, Appended, Clock, CorruptionKind, Durability, ENVELOPE_FORMAT_VERSION,
        Envelope, EnvelopeIter, ExpectedRevision, GENESIS_HASH, HASH_BYTES, KEYS_DATABASE_DIR_NAME,
        KeyRefusal, LogBackend, LogError, LostRange, ManualClock, NewRecord, PRIVATE_DIR_MODE,
        PRIVATE_FILE_MODE, RevisionConflict, STORE_MARKER_FILE_NAME, StreamHead, SystemClock,
    };
}

/// The facts the log carries: records and their kinds, runtime events and their content, ids,
/// checkpoints, memory items, digests, and the limits every one of them is checked against.
pub mod records {
    pub use mnemo_core::limits;
    pub use mnemo_core::redaction;
    pub use mnemo_core::{
        AcceptedRequest, Actions, AppendRefusal, Attachment, AttachmentKind, Author, BoundaryDisposition,
        CheckpointBody, CheckpointCoverage, CheckpointId, CheckpointManifest, CheckpointPhase,
        CheckpointRecord, Content, ContentKind, ConversationCopied, CopyBoundary, CursorAdvance, DecodeError,
        DenialReason, Digest, DigestParseError, EncodeError, ErrorContent, EventId, EventPoint, EventStatus,
        ExecutionOrigin, ExtractionBoundary, ExtractionFailure, ExtractionFailureClass, ExtractionReceipt,
        ExtractionTrigger, FailureOutcome, FaithfulnessReport, FunctionCall, FunctionResponse, HeadAnchor,
        IdError, InlineReference, InlineReferenceKind, InvocationId, ItemId, ItemMerge, KeyOrigin, KeyRule,
        KeyRules, KeyType, LifecycleState, MemoryCommit, MemoryItem, MemoryItemFields, MemoryKey, MemoryKind,
        MemoryMode, MemoryMutation, MemoryOrigin, MemoryScope, ModelVisibility, Mutation, NewMemoryItem,
        NoOpReason, OperationId, PermissionClosure, PermissionClosureReason, PermissionDecision,
        PolicyDenial, Position, ProviderState, ProviderStateKind, Quote, ReceiptStatus, Record, RecordKind,
        Refs, Role, RuleRef, RunId, RuntimeEvent, ScopeParseError, SessionArchived, SessionFlagsChanged,
        SessionId, SessionOpened, SkipReason, SourcePointer, StatementType, StorageRef, StreamId,
        StreamRevision, SummaryFormat, Supersession, TemporalType, TextContent, ThinkingContent, TimestampMs,
        TokenUsage, ToolCallId, TurnEnded, TurnId, TurnOrigin, TurnStatus, ValidationError, WorkspaceId,
    };
}

pub use error::{Error, ErrorCategory, Result};
pub use mnemo::{Config, Mnemo};
pub use workspace::workspace_of;

/// The async API may be shared across threads and its futures moved between them: a host runs it
/// on a multi-threaded runtime. This fails to compile if that stops being true.
#[expect(dead_code, reason = "a compile-time assertion, never called")]
fn async_api_is_send_and_sync(
    mnemo: &Mnemo,
    session: &records::SessionId,
    turn: &records::TurnId,
    options: &compaction::CompactOptions,
) {
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
