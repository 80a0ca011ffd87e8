//! The memory crate's errors and conflict outcomes.

use std::fmt;

use mnemo_core::{EncodeError, ItemId, ValidationError};
use mnemo_pipeline::PipelineError;
use serde::Serialize;

/// Why a write was refused although the request itself was valid (memory.md §2.2 item 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConflictReason {
    /// The operation id was already used with a different request. Use a new operation id.
    OperationReused,
    /// The item's version is not the expected one. Re-read the item and retry.
    VersionConflict,
    /// The item does not exist.
    ItemNotFound,
    /// The extraction cursor or the pending failed range is not the expected one. Re-read state.
    CursorConflict,
    /// Archive of an item that is not active, or restore of one that is not archived.
    InvalidLifecycleTransition,
}

impl ConflictReason {
    /// The reason's snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ConflictReason::OperationReused => "operation_reused",
            ConflictReason::VersionConflict => "version_conflict",
            ConflictReason::ItemNotFound => "item_not_found",
            ConflictReason::CursorConflict => "cursor_conflict",
            ConflictReason::InvalidLifecycleTransition => "invalid_lifecycle_transition",
        }
    }
}

impl fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A conflict outcome: nothing was written; what was expected and what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{reason}{}: expected {expected}, actual {actual}", item.as_ref().map(|i| format!(" on item {i}")).unwrap_or_default())]
pub struct Conflict {
    /// Why.
    pub reason: ConflictReason,
    /// The item, for item-level reasons.
    pub item: Option<ItemId>,
    /// What the request expected (a version, an ordinal, a request hash, a lifecycle state).
    pub expected: String,
    /// What the store holds.
    pub actual: String,
}

impl Conflict {
    pub(crate) fn new(reason: ConflictReason, expected: impl ToString, actual: impl ToString) -> Self {
        Conflict { reason, item: None, expected: expected.to_string(), actual: actual.to_string() }
    }

    pub(crate) fn on(mut self, item: &ItemId) -> Self {
        self.item = Some(item.clone());
        self
    }
}

/// Errors of the memory crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The request broke a rule (field and reason); nothing was written. Fix the input.
    #[error("invalid memory request: {0}")]
    Invalid(ValidationError),
    /// A version, cursor or operation conflict; nothing was written. Re-read and retry, or use a
    /// new operation id.
    #[error(transparent)]
    Conflict(#[from] Conflict),
    /// The memory-index state could not be read or is damaged. Rebuild the stage.
    #[error(transparent)]
    State(#[from] PipelineError),
    /// The host failed to append or read the log; its error is kept whole (a host may downcast it
    /// to its own type). Retry; the operation id makes it safe.
    #[error("memory host failed: {0}")]
    Host(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A record or a hashed value did not encode.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// What was just written is not in the state the writer reads back, or a decision produced no
    /// outcome: a broken invariant of this crate or a damaged stage. Rebuild the stage.
    #[error("memory state is inconsistent: {0}")]
    Inconsistent(String),
}

impl MemoryError {
    /// A host failure, keeping the host's error and its type.
    pub fn host(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        MemoryError::Host(Box::new(error))
    }
}

impl From<ValidationError> for MemoryError {
    fn from(error: ValidationError) -> Self {
        MemoryError::Invalid(error)
    }
}

pub(crate) fn invalid<T>(field: impl Into<String>, reason: impl Into<String>) -> Result<T, MemoryError> {
    Err(MemoryError::Invalid(ValidationError::new(field, reason)))
}
