//! Pure types: ids (newtypes), records, RuntimeEvent, checkpoints, MemoryItem, canonical encoding,
//! digests, limits. No I/O, no clock, no randomness.
//!
//! It is not:
//! - a store: nothing here reads or writes files (see `mnemo-log`);
//! - a projection: nothing here folds records into state (see `mnemo-pipeline`).

mod ids;
pub mod limits;

pub use ids::{
    CheckpointId, EventId, IdError, InvocationId, ItemId, OperationId, Position, RunId, SessionId,
    StreamId, StreamRevision, TimestampMs, ToolCallId, TurnId, WorkspaceId,
};
