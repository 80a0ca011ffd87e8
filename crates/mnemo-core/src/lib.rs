//! Pure types: ids (newtypes), records, RuntimeEvent, checkpoints, MemoryItem, canonical encoding,
//! digests, limits. No I/O, no clock, no randomness.
//!
//! It is not:
//! - a store: nothing here reads or writes files (see `mnemo-log`);
//! - a projection: nothing here folds records into state (see `mnemo-pipeline`).

mod digest;
mod event;
mod ids;
pub mod limits;
mod validation;

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
pub use validation::ValidationError;
