//! The recorder of the store's checkpoints: the one per-store compaction [`Coordinator`] records a
//! checkpoint through it, which appends the record durably to the session stream before anything
//! else sees it. A dedicated writer: a checkpoint is no host record and takes no generic preparation.

use std::sync::Arc;

use mnemo_compaction::{CheckpointRecorder, CompactionError, Coordinator, LoggedCheckpoint, SessionLedger};
use mnemo_core::{Record, SessionId, StreamId, TimestampMs};
use mnemo_log::{AppendOutcome, AppendRequest, Durability, ExpectedRevision, LogBackend, NewRecord};
use mnemo_pipeline::{MemoryStore, StateStore};

use crate::error::Error;

/// The recorder the facade's coordinator uses: loads by scanning the session stream (the result is
/// cached by the coordinator), appends at the store's durability.
#[derive(Debug)]
struct LogRecorder {
    log: Arc<dyn LogBackend>,
    durability: Durability,
}

impl CheckpointRecorder for LogRecorder {
    fn load<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> mnemo_compaction::BoxFuture<'a, Result<Option<LoggedCheckpoint>, CompactionError>> {
        Box::pin(async move {
            let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
            crate::blocking::wait(|| match SessionLedger::at_head(self.log.as_ref(), store, session) {
                Ok(ledger) => Ok(ledger.latest()?.0),
                Err(CompactionError::UnknownSession(_)) => Ok(None),
                Err(error) => Err(error),
            })
        })
    }

    fn append<'a>(
        &'a self,
        checkpoint: &'a mnemo_core::CheckpointRecord,
    ) -> mnemo_compaction::BoxFuture<'a, Result<LoggedCheckpoint, CompactionError>> {
        Box::pin(async move {
            let record = Record::CheckpointRecorded(checkpoint.clone());
            let kind = record.kind();
            let bytes = record.encode().map_err(|e| CompactionError::record(Error::Encode(e)))?;
            let new = NewRecord::new(kind.code(), kind.schema_version(), bytes);
            let mut request =
                AppendRequest::new(StreamId::session(&checkpoint.session), ExpectedRevision::Any, vec![new]);
            request.durability = self.durability;
            match crate::blocking::wait(|| self.log.append(request))? {
                AppendOutcome::Appended(appended) => {
                    let timestamp = self
                        .log
                        .read(appended.last_position)?
                        .map_or(TimestampMs(0), |envelope| envelope.timestamp);
                    Ok(LoggedCheckpoint {
                        position: appended.last_position,
                        timestamp,
                        checkpoint: checkpoint.clone(),
                    })
                }
                AppendOutcome::Conflict(conflict) => Err(CompactionError::record(Error::Conflict {
                    stream: StreamId::session(&checkpoint.session).to_string(),
                    conflict,
                })),
                // A checkpoint record has no key rules, so the log cannot refuse it on one.
                AppendOutcome::Refused(refusal) => Err(CompactionError::record(Error::Refused {
                    stream: StreamId::session(&checkpoint.session).to_string(),
                    record: refusal.record,
                    reason: mnemo_core::AppendRefusal::of_rule(&refusal.rule),
                    held_at: refusal.held_at,
                })),
            }
        })
    }
}

/// The coordinator a newly opened store uses.
pub(crate) fn coordinator(log: &Arc<dyn LogBackend>, durability: Durability) -> Arc<Coordinator> {
    Arc::new(Coordinator::new(Arc::new(LogRecorder { log: Arc::clone(log), durability })))
}
