//! Pure types: ids (newtypes), records, RuntimeEvent, checkpoints, MemoryItem, canonical encoding,
//! digests, limits. No I/O, no clock, no randomness.
//!
//! It also holds [`redaction`], the one secret redaction every crate shares: history search and
//! read, memory admission and checkpoint summaries decide what a secret is by the same rules.
//!
//! It is not:
//! - a store: nothing here reads or writes files (see `mnemo-log`);
//! - a projection: nothing here folds records into state (see `mnemo-pipeline`).
//!
//! The log carries [`Record`]s. Each is encoded by [`Record::encode`] as the canonical JSON of its
//! payload and decoded by [`Record::decode`] from a kind code and schema version; both validate.

mod checkpoint;
mod digest;
mod event;
mod ids;
mod key_rules;
pub mod limits;
mod memory;
mod record;
mod record_keys;
pub mod redaction;
mod validation;

pub use checkpoint::{
    BoundaryDisposition, CheckpointBody, CheckpointCoverage, CheckpointManifest, CheckpointPhase,
    CheckpointRecord, EventPoint, ExtractionBoundary, FaithfulnessReport, HeadAnchor, ProviderState,
    ProviderStateKind, SOURCE_POLICY_VERSION_V1, SummaryFormat,
};
pub use digest::{Digest, DigestParseError, EncodeError, canonical_json};
pub use event::{
    AcceptedRequest, Actions, Attachment, AttachmentKind, Author, Content, ContentKind, ErrorContent,
    EventStatus, ExecutionOrigin, FunctionCall, FunctionResponse, InlineReference, InlineReferenceKind,
    ModelVisibility, PermissionClosure, PermissionClosureReason, PermissionDecision, Quote, Refs, Role,
    RuntimeEvent, StorageRef, TOKEN_USAGE_EXTRA_KEYS, TextContent, ThinkingContent, TokenUsage, TurnOrigin,
};
pub use ids::{
    CheckpointId, EventId, IdError, InvocationId, ItemId, OperationId, Position, RunId, SessionId, StreamId,
    StreamRevision, TimestampMs, ToolCallId, TurnId, WorkspaceId,
};
pub use key_rules::{KeyRules, RuleRef, RulesIter};
pub use memory::{
    CursorAdvance, DenialReason, ExtractionFailure, ExtractionFailureClass, ExtractionReceipt,
    ExtractionTrigger, FailureOutcome, ItemMerge, KeyOrigin, KeyType, LifecycleState, MemoryCommit,
    MemoryItem, MemoryItemFields, MemoryKey, MemoryKind, MemoryMutation, MemoryOrigin, MemoryScope, Mutation,
    NewMemoryItem, NoOpReason, PolicyDenial, ReceiptStatus, ScopeParseError, SkipReason, SourcePointer,
    StatementType, Supersession, TemporalType, Unmerge,
};
pub use record::{
    ConversationCopied, CopyBoundary, DecodeError, MemoryMode, Record, RecordKind, SessionArchived,
    SessionFlagsChanged, SessionOpened, TurnEnded, TurnStatus,
};
pub use record_keys::{
    AppendRefusal, KeyMeaning, KeyRule, event_key, key_meaning, key_rules_of_encoded, prepare_generic_event,
};
pub use validation::ValidationError;
