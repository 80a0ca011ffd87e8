//! The compaction crate's errors.

use mnemo_core::SessionId;

/// Errors of compaction, assembly and copy. Fail-open outcomes are not errors: they are reported
/// in an assembly's diagnostics. These are the failures a caller must see.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// Reading the log failed.
    #[error(transparent)]
    Log(#[from] mnemo_log::LogError),
    /// The stage's state could not be read, or a record did not decode.
    #[error(transparent)]
    Pipeline(#[from] mnemo_pipeline::PipelineError),
    /// The session has no records (at the position asked about). Check the id.
    #[error("no session {0}")]
    UnknownSession(SessionId),
    /// A turn is running on the session; manual compaction waits until it ends.
    #[error("session {0} is busy")]
    SessionBusy(SessionId),
    /// Recording a checkpoint failed; the cache and the log are unchanged. The recorder's error is
    /// kept whole (a host may downcast it to its own type).
    #[error("recording the checkpoint failed: {0}")]
    Record(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A newer checkpoint was recorded first; this one may not replace it (compaction.md §4.2).
    #[error("checkpoint {0} was superseded before persistence")]
    Superseded(String),
    /// A conversation copy cannot be made; nothing was appended.
    #[error("cannot copy the conversation: {0}")]
    Copy(String),
    /// A conversation copy was refused for a typed reason (its `code()` is stable); nothing was
    /// appended.
    #[error("cannot copy the conversation ({code}): {0}", code = .0.code())]
    CopyRefused(crate::copy::CopyRefusal),
    /// The caller's input is not valid.
    #[error("{0}")]
    InvalidInput(String),
}

impl CompactionError {
    /// A recorder's failure, keeping its error and the error's type.
    pub fn record(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        CompactionError::Record(Box::new(error))
    }
}
