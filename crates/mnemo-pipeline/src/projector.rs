//! The projector trait, and the worker that folds envelopes into a stage's store.

use std::sync::Arc;

use mnemo_core::{Position, Record, StreamId, StreamRevision, TimestampMs};
use mnemo_log::Envelope;

use crate::error::PipelineError;
use crate::store::{Changes, StageMeta, StateStore};
use crate::txn::StateTxn;

/// Most envelopes a stage folds before it commits, so a long catch-up commits in bounded pieces.
pub const COMMIT_ENVELOPES_MAX: usize = 4096;

/// An envelope with its record decoded: what projectors fold. The runner decodes each envelope once
/// and shares it with every stage.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRecord {
    /// Global position in the log.
    pub position: Position,
    /// The stream the record was appended to.
    pub stream: StreamId,
    /// Its revision within the stream.
    pub revision: StreamRevision,
    /// When it was appended.
    pub timestamp: TimestampMs,
    /// The record.
    pub record: Record,
}

impl LoggedRecord {
    /// Decodes an envelope's record.
    pub fn decode(envelope: Envelope) -> Result<LoggedRecord, PipelineError> {
        let record = Record::decode(envelope.kind, envelope.kind_schema, &envelope.record)
            .map_err(|e| PipelineError::Undecodable { position: envelope.position, reason: e.to_string() })?;
        Ok(LoggedRecord {
            position: envelope.position,
            stream: envelope.stream,
            revision: envelope.revision,
            timestamp: envelope.timestamp,
            record,
        })
    }
}

/// A pure fold of the log into key-value state.
///
/// Architecture invariant: `apply` depends only on the state and the record: no clock, no
/// randomness, no I/O, no HashMap iteration order in what it writes. That is what lets a rebuild,
/// a crash recovery and an in-memory reference fold all reach the same digest.
pub trait Projector: Send + std::fmt::Debug {
    /// The stage's name (also its keyspace name).
    fn name(&self) -> &str;
    /// The version of the projector's code. Changing what it writes means a new version, which
    /// rebuilds the stage.
    fn version(&self) -> u32;
    /// Folds one record into the state.
    fn apply(&mut self, state: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError>;

    /// Called before every commit: a projector that keeps decoded state between records (to avoid
    /// decoding and encoding the same value for every record) writes it to `state` here and forgets
    /// it. What it writes must not depend on where commits fall, so that every replay agrees.
    fn before_commit(&mut self, state: &mut StateTxn<'_>) -> Result<(), PipelineError> {
        let _ = state;
        Ok(())
    }
}

/// Folds envelopes into one stage's store and commits them with the watermark.
#[derive(Debug)]
pub(crate) struct StageWorker {
    pub projector: Box<dyn Projector>,
    pub store: Arc<dyn StateStore>,
    pub config_hash: [u8; 32],
    pub watermark: Position,
    changes: Changes,
    pending: usize,
}

impl StageWorker {
    pub(crate) fn new(
        projector: Box<dyn Projector>,
        store: Arc<dyn StateStore>,
        config_hash: [u8; 32],
        watermark: Position,
    ) -> Self {
        StageWorker { projector, store, config_hash, watermark, changes: Changes::new(), pending: 0 }
    }

    /// Folds one record, unless the stage has already folded its position.
    pub(crate) fn apply(&mut self, logged: &LoggedRecord) -> Result<(), PipelineError> {
        if logged.position <= self.watermark {
            return Ok(());
        }
        debug_assert_eq!(logged.position, self.watermark.next(), "stages fold every position in order");
        let mut txn = StateTxn::new(self.store.as_ref(), &mut self.changes);
        self.projector.apply(&mut txn, logged)?;
        self.watermark = logged.position;
        self.pending += 1;
        Ok(())
    }

    pub(crate) fn should_commit(&self) -> bool {
        self.pending >= COMMIT_ENVELOPES_MAX
    }

    /// Writes the pending changes and the watermark in one commit.
    pub(crate) fn commit(&mut self) -> Result<(), PipelineError> {
        if self.pending == 0 {
            return Ok(());
        }
        let mut txn = StateTxn::new(self.store.as_ref(), &mut self.changes);
        self.projector.before_commit(&mut txn)?;
        let meta = StageMeta {
            watermark: self.watermark,
            version: self.projector.version(),
            config_hash: self.config_hash,
        };
        self.store.commit(&self.changes, &meta)?;
        self.changes.clear();
        self.pending = 0;
        Ok(())
    }
}
