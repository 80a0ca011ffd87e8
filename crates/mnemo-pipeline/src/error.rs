//! The pipeline's errors.

use mnemo_core::Position;

/// Errors of the projection pipeline. Each variant says how a caller should react.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// Reading the log failed; the stage stopped where it was and keeps its last committed state.
    #[error(transparent)]
    Log(#[from] mnemo_log::LogError),
    /// A stage's state store failed; the stage stopped and keeps its last committed state.
    /// `diagnosis` is what the system says of the failure when the engine's error does not (it
    /// says only "poisoned" after a first failed write, which may have been another stage's or
    /// the log's).
    #[error("state store of stage {stage}: {}", store_failure(stage, source, diagnosis.as_deref()))]
    Store {
        stage: String,
        #[source]
        source: fjall::Error,
        diagnosis: Option<String>,
    },
    /// An envelope in the log does not decode as a record this build knows. Upgrade Mnemo, or the
    /// log is damaged at that position.
    #[error("record at position {position} does not decode: {reason}")]
    Undecodable { position: Position, reason: String },
    /// A projector refused an envelope. Its state stays at the last committed watermark.
    #[error("stage {stage} failed at position {position}: {reason}")]
    Projection { stage: String, position: Position, reason: String },
    /// A stage no longer follows the log: it failed or panicked (reads and appends are refused until
    /// the pipeline restarts, after a `rebuild` of the stage or a fix), or the pipeline was shut
    /// down (a wait for a position the stage never reached can never be met).
    #[error("stage {stage} has stopped: {stop}")]
    StageStopped { stage: String, stop: StageStop },
    /// Waiting for a stage to reach a position timed out.
    #[error("stage {stage} reached position {reached}, not {wanted}, before the timeout")]
    Timeout { stage: String, wanted: Position, reached: Position },
    /// No stage of that name runs in this pipeline.
    #[error("no stage named {0:?} in this pipeline")]
    UnknownStage(String),
    /// The pipeline spec is not valid. Fix the file; nothing was started.
    #[error("pipeline spec {origin}: {reason}")]
    InvalidSpec { origin: String, reason: String },
    /// Stored state is not in the form this build writes. Rebuild the stage.
    #[error("stage {stage}: stored state is damaged: {reason}")]
    DamagedState { stage: String, reason: String },
    /// A stage has folded positions the log does not hold: the log lost envelopes it had
    /// acknowledged. Nothing was reset; salvage the store or accept the loss before it is used.
    #[error(
        "stage {stage} has folded up to position {watermark} but the log ends at {head}: \
         acknowledged envelopes {}..={watermark} are missing from the log",
        head.next()
    )]
    AheadOfLog { stage: String, watermark: Position, head: Position },
    /// The system refused to start one of the pipeline's threads (too many threads or processes, or
    /// no memory); nothing of the pipeline runs. Free resources and open the store again.
    #[error("cannot start thread {thread}: {source}")]
    Spawn {
        thread: String,
        #[source]
        source: std::io::Error,
    },
    /// The pipeline was shut down.
    #[error("pipeline is shut down")]
    ShutDown,
}

/// A store failure, naming the damage when the storage engine reports damaged files, and the
/// system's cause when the engine stopped accepting writes.
fn store_failure(stage: &str, source: &fjall::Error, diagnosis: Option<&str>) -> String {
    if let Some(what) = mnemo_log::damage(source) {
        return format!(
            "damaged: {what}; rebuilding the stage replays it from the log (mnemo rebuild --stage {stage})"
        );
    }
    match diagnosis {
        Some(cause) => format!("{cause} ({})", mnemo_log::describe(source)),
        None => mnemo_log::describe(source),
    }
}

/// Why a stage stopped following the log. As JSON: `{"kind": "failed"|"panicked", "reason": ...}`
/// or `{"kind": "shut_down"}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", content = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StageStop {
    /// Folding or committing failed with this error; the stage keeps its last committed state.
    #[error("{0}")]
    Failed(String),
    /// The stage's thread panicked with this message; it keeps its last committed state.
    #[error("its thread panicked: {0}")]
    Panicked(String),
    /// The pipeline was shut down.
    #[error("the pipeline was shut down")]
    ShutDown,
}

impl StageStop {
    /// Whether the stop is a fault (a failure or a panic) rather than an orderly shutdown.
    pub fn is_fault(&self) -> bool {
        !matches!(self, StageStop::ShutDown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_store_stopped_by_an_earlier_failed_write_names_the_systems_cause() {
        let error = PipelineError::Store {
            stage: "memory-index".to_owned(),
            source: fjall::Error::Poisoned,
            diagnosis: Some("the disk is full (no space left on device)".to_owned()),
        };
        assert_eq!(
            error.to_string(),
            "state store of stage memory-index: the disk is full (no space left on device) \
             (the storage engine stopped accepting writes after an earlier write failed)"
        );
        let undiagnosed = PipelineError::Store {
            stage: "memory-index".to_owned(),
            source: fjall::Error::Poisoned,
            diagnosis: None,
        };
        assert_eq!(
            undiagnosed.to_string(),
            "state store of stage memory-index: the storage engine stopped accepting writes after an earlier \
             write failed"
        );
    }
}
