//! The facade's error type.

use mnemo_core::Position;

use mnemo_transcript::{ImportError, TranscriptError};

/// Errors of the Mnemo facade. [`Error::category`] tells a caller (and the CLI's exit code) what kind
/// of failure it is.
/// The facade's result: its error is always [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The log failed (I/O, a locked store, a damaged log).
    #[error(transparent)]
    Log(#[from] mnemo_log::LogError),
    /// The projection pipeline failed.
    #[error(transparent)]
    Pipeline(#[from] mnemo_pipeline::PipelineError),
    /// A transcript line is not valid; nothing from that file was appended.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// A memory operation failed: invalid input, a conflict (with expected and actual), or state.
    /// (A failure of this facade met inside a memory operation is returned as itself.)
    #[error(transparent)]
    Memory(mnemo_memory::MemoryError),
    /// A record failed to encode.
    #[error("record does not encode: {0}")]
    Encode(#[from] mnemo_core::EncodeError),
    /// An append met a stream at another revision than expected; nothing was appended.
    #[error("conflict on {stream}: {conflict}")]
    Conflict { stream: String, conflict: mnemo_log::RevisionConflict },
    /// An append broke a rule of the events it carries (an event id stored with another payload,
    /// ...); nothing of it was appended. `record` is the offending record's index in the append.
    #[error("append to {stream} refused at record {record}: {reason}")]
    Refused {
        /// The stream appended to.
        stream: String,
        /// The offending record's index (0-based) in the append.
        record: usize,
        /// Why.
        reason: mnemo_core::AppendRefusal,
        /// Where the record it conflicts with is, when there is one.
        held_at: Option<Position>,
    },
    /// Compaction, assembly or conversation copy failed (fail-open outcomes are not errors).
    /// (A failure of this facade met while recording a checkpoint is returned as itself.)
    #[error(transparent)]
    Compaction(mnemo_compaction::CompactionError),
    /// The caller's input is not valid (what and why in the message).
    #[error("{0}")]
    InvalidInput(String),
    /// Reading an input file failed.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Writing an output failed.
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Verification found a difference between the log and a projection.
    #[error(
        "stage {stage} at position {watermark}: live digest {live} differs from a fresh rebuild's {rebuilt}"
    )]
    DigestMismatch { stage: String, watermark: Position, live: String, rebuilt: String },
}

impl From<ImportError> for Error {
    fn from(error: ImportError) -> Self {
        match error {
            ImportError::Transcript(error) => Error::Transcript(error),
            ImportError::Read { path, source } => Error::Read { path, source },
            // NOTE: the enum is non-exhaustive; a reading failure it adds is the input's.
            other => Error::InvalidInput(other.to_string()),
        }
    }
}

impl From<mnemo_memory::MemoryError> for Error {
    fn from(error: mnemo_memory::MemoryError) -> Self {
        use mnemo_memory::MemoryError;
        match error {
            MemoryError::Host(host) => match host.downcast::<Error>() {
                Ok(facade) => *facade,
                Err(other) => Error::Memory(MemoryError::Host(other)),
            },
            other => Error::Memory(other),
        }
    }
}

impl From<mnemo_compaction::CompactionError> for Error {
    fn from(error: mnemo_compaction::CompactionError) -> Self {
        use mnemo_compaction::CompactionError;
        match error {
            CompactionError::Record(recorder) => match recorder.downcast::<Error>() {
                Ok(facade) => *facade,
                Err(other) => Error::Compaction(CompactionError::Record(other)),
            },
            other => Error::Compaction(other),
        }
    }
}

/// The kind of an [`Error`], for exit codes and for deciding how to react.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCategory {
    /// Bad input or usage: fix the input.
    Input,
    /// A revision or version conflict: re-read and retry.
    Conflict,
    /// The store failed verification: the log or a projection is damaged.
    Integrity,
    /// Anything else: I/O, a locked store, an internal failure.
    Failure,
}

impl Error {
    /// What kind of failure this is.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Error::Transcript(_) | Error::InvalidInput(_) | Error::Encode(_) | Error::Read { .. } => {
                ErrorCategory::Input
            }
            Error::Log(mnemo_log::LogError::InvalidAppend(_) | mnemo_log::LogError::NotAStore { .. }) => {
                ErrorCategory::Input
            }
            Error::Pipeline(mnemo_pipeline::PipelineError::InvalidSpec { .. }) => ErrorCategory::Input,
            Error::Conflict { .. } => ErrorCategory::Conflict,
            Error::Refused { reason, .. } if reason.is_conflict() => ErrorCategory::Conflict,
            Error::Refused { .. } => ErrorCategory::Input,
            Error::Compaction(error) => compaction_category(error),
            Error::Memory(mnemo_memory::MemoryError::Invalid(_)) => ErrorCategory::Input,
            Error::Memory(mnemo_memory::MemoryError::Conflict(_)) => ErrorCategory::Conflict,
            Error::Log(
                mnemo_log::LogError::Corrupt { .. }
                | mnemo_log::LogError::Damaged { .. }
                | mnemo_log::LogError::AcknowledgedLost { .. },
            )
            | Error::Pipeline(mnemo_pipeline::PipelineError::AheadOfLog { .. })
            | Error::DigestMismatch { .. } => ErrorCategory::Integrity,
            _ => ErrorCategory::Failure,
        }
    }
}

fn compaction_category(error: &mnemo_compaction::CompactionError) -> ErrorCategory {
    use mnemo_compaction::CompactionError as E;
    match error {
        E::UnknownSession(_) | E::InvalidInput(_) | E::Copy(_) => ErrorCategory::Input,
        E::CopyRefused(
            mnemo_compaction::CopyRefusal::TargetExists { .. }
            | mnemo_compaction::CopyRefusal::ArchivedFamily { .. },
        ) => ErrorCategory::Conflict,
        E::CopyRefused(_) => ErrorCategory::Input,
        E::Superseded(_) | E::SessionBusy(_) => ErrorCategory::Conflict,
        _ => ErrorCategory::Failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_memory::MemoryError;

    #[test]
    fn a_facade_failure_inside_a_memory_operation_comes_back_as_itself() {
        let damaged = Error::DigestMismatch {
            stage: "memory-index".to_owned(),
            watermark: Position(7),
            live: "sha256:aa".to_owned(),
            rebuilt: "sha256:bb".to_owned(),
        };
        let error = Error::from(MemoryError::host(damaged));
        assert!(matches!(error, Error::DigestMismatch { .. }), "{error:?}");
        assert_eq!(error.category(), ErrorCategory::Integrity);

        let foreign = Error::from(MemoryError::host(std::io::Error::other("disk")));
        assert_eq!(foreign.category(), ErrorCategory::Failure);
        let Error::Memory(MemoryError::Host(host)) = foreign else {
            panic!("a foreign host error stays memory's")
        };
        assert!(host.downcast_ref::<std::io::Error>().is_some());
    }

    #[test]
    fn a_facade_failure_while_recording_a_checkpoint_comes_back_as_itself() {
        use mnemo_compaction::CompactionError;
        let conflict = mnemo_log::RevisionConflict {
            expected: mnemo_log::ExpectedRevision::NoStream,
            actual: Some(mnemo_core::StreamRevision(3)),
        };
        let error = Error::from(CompactionError::record(Error::Conflict {
            stream: "session/s".to_owned(),
            conflict,
        }));
        assert!(matches!(error, Error::Conflict { .. }), "{error:?}");
        assert_eq!(error.category(), ErrorCategory::Conflict);

        let foreign = Error::from(CompactionError::record(std::io::Error::other("disk")));
        let Error::Compaction(CompactionError::Record(recorder)) = foreign else {
            panic!("a foreign recorder error stays compaction's")
        };
        assert!(recorder.downcast_ref::<std::io::Error>().is_some());
    }

    #[test]
    fn a_thread_that_cannot_start_is_a_failure_not_a_bad_pipeline_spec() {
        let source = std::io::Error::new(std::io::ErrorKind::WouldBlock, "Resource temporarily unavailable");
        let error =
            Error::from(mnemo_pipeline::PipelineError::Spawn { thread: "stage-history".to_owned(), source });
        assert_eq!(error.category(), ErrorCategory::Failure);
        assert_eq!(error.to_string(), "cannot start thread stage-history: Resource temporarily unavailable");
    }
}
