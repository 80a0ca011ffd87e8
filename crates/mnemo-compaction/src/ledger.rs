//! One session's compaction ledger: its recorded checkpoints and its events, read from the log and
//! the `latest-checkpoint` stage, now or as of an earlier log position (compaction.md §4.4).

use std::sync::Arc;

use mnemo_core::{Position, Record, RuntimeEvent, SessionId, StreamId, StreamRevision, TurnId};
use mnemo_log::LogBackend;
use mnemo_pipeline::{Changes, LoggedRecord, MemoryStore, Projector, StageMeta, StateStore, StateTxn};

use crate::checkpoint::{is_synthetic, validate_loadable};
use crate::error::CompactionError;
use crate::projection::is_compactable;
use crate::stage::{IndexedProjection, LatestCheckpointStage, LatestView, LoggedCheckpoint, select, view};

/// Envelopes read from a stream per call.
const STREAM_READ_BATCH: usize = 1024;

/// A RuntimeEvent with where the log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Its log position.
    pub position: Position,
    /// Its revision in the session stream.
    pub revision: StreamRevision,
    /// The event.
    pub event: RuntimeEvent,
}

/// How the latest checkpoint was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadPath {
    /// From the stage's view, without reading the log.
    View,
    /// The view said the session has none, without reading the log.
    Empty,
    /// The view was uninitialised or invalid: the session stream was scanned.
    Scan,
}

/// One session's ledger.
#[derive(Debug)]
pub struct SessionLedger<'a> {
    log: &'a dyn LogBackend,
    store: Arc<dyn StateStore>,
    session: SessionId,
    stream: StreamId,
    as_of: Position,
}

impl<'a> SessionLedger<'a> {
    /// The ledger of `session` at the log's head, over the live stage store (which the caller has
    /// caught up to the head).
    pub fn at_head(
        log: &'a dyn LogBackend,
        store: Arc<dyn StateStore>,
        session: &SessionId,
    ) -> Result<Self, CompactionError> {
        let ledger = SessionLedger {
            log,
            store,
            session: session.clone(),
            stream: StreamId::session(session),
            as_of: log.head(),
        };
        ledger.check_exists()?;
        Ok(ledger)
    }

    /// The ledger of `session` as it stood at `position`: the stage is folded afresh, in memory,
    /// over the session's records up to that position, by the same projector that runs live.
    pub fn as_of(
        log: &'a dyn LogBackend,
        session: &SessionId,
        position: Position,
    ) -> Result<Self, CompactionError> {
        let position = position.min(log.head());
        let mut ledger = SessionLedger {
            log,
            store: Arc::new(MemoryStore::new()),
            session: session.clone(),
            stream: StreamId::session(session),
            as_of: position,
        };
        ledger.check_exists()?;
        let store = Arc::new(MemoryStore::new());
        let mut changes = Changes::new();
        let mut stage = LatestCheckpointStage;
        for logged in ledger.records(StreamRevision(0))? {
            let mut txn = StateTxn::new(store.as_ref(), &mut changes);
            stage.apply(&mut txn, &logged)?;
        }
        let meta = StageMeta { watermark: position, version: stage.version(), config_hash: [0; 32] };
        store.commit(&changes, &meta)?;
        ledger.store = store;
        Ok(ledger)
    }

    fn check_exists(&self) -> Result<(), CompactionError> {
        let first = self.log.read_stream(&self.stream, StreamRevision(0), 1)?;
        match first.first() {
            Some(envelope) if envelope.position <= self.as_of => Ok(()),
            _ => Err(CompactionError::UnknownSession(self.session.clone())),
        }
    }

    /// The session.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// The log position the ledger stands at.
    pub fn position(&self) -> Position {
        self.as_of
    }

    /// The log.
    pub fn log(&self) -> &dyn LogBackend {
        self.log
    }

    /// The stage's index of the session's compactable projection.
    pub fn projection(&self) -> Result<IndexedProjection<'_>, CompactionError> {
        Ok(IndexedProjection::open(self.store.as_ref(), &self.session)?)
    }

    /// The latest valid checkpoint (§4.4): the stage's view when it has one; an empty view means
    /// none without a scan; an uninitialised or no-longer-valid view falls back to scanning the
    /// session stream and selecting as the stage does. A failed scan propagates.
    pub fn latest(&self) -> Result<(Option<LoggedCheckpoint>, LoadPath), CompactionError> {
        match view(self.store.as_ref(), &self.session) {
            Ok(LatestView::Empty) => return Ok((None, LoadPath::Empty)),
            Ok(LatestView::Checkpoint(logged))
                if validate_loadable(&logged.checkpoint, Some(&self.session)).is_ok() =>
            {
                return Ok((Some(*logged), LoadPath::View));
            }
            Ok(_) => {}
            // A damaged view is a projection problem, never the truth: the log is scanned instead,
            // and `verify` reports the stage until `rebuild` repairs it (§6.1 "ledger load").
            Err(error) => {
                tracing::warn!(%error, session = %self.session, "latest-checkpoint view is damaged; scanning the log");
            }
        }
        let candidates = self.recorded_checkpoints()?;
        Ok((select(&candidates).cloned(), LoadPath::Scan))
    }

    /// Every valid checkpoint recorded on the session stream, in log order (for inspection and
    /// recovery).
    pub fn recorded_checkpoints(&self) -> Result<Vec<LoggedCheckpoint>, CompactionError> {
        let mut out: Vec<LoggedCheckpoint> = Vec::new();
        for logged in self.records(StreamRevision(0))? {
            if let Record::CheckpointRecorded(checkpoint) = logged.record {
                let duplicate = out.iter().any(|c| c.checkpoint.checkpoint == checkpoint.checkpoint);
                if !duplicate && validate_loadable(&checkpoint, Some(&self.session)).is_ok() {
                    out.push(LoggedCheckpoint {
                        position: logged.position,
                        timestamp: logged.timestamp,
                        checkpoint,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The session's records from `revision` up to the ledger's position.
    pub fn records(&self, mut revision: StreamRevision) -> Result<Vec<LoggedRecord>, CompactionError> {
        let mut out = Vec::new();
        loop {
            let envelopes = self.log.read_stream(&self.stream, revision, STREAM_READ_BATCH)?;
            let full = envelopes.len() == STREAM_READ_BATCH;
            for envelope in envelopes {
                if envelope.position > self.as_of {
                    return Ok(out);
                }
                revision = StreamRevision(envelope.revision.0 + 1);
                out.push(LoggedRecord::decode(envelope)?);
            }
            if !full {
                return Ok(out);
            }
        }
    }

    /// The compactable events from `revision` on, in stream order, without synthetic events and
    /// without the events of `exclude_turn` (the turn being answered, which is never prior history).
    pub fn compactable_from(
        &self,
        revision: StreamRevision,
        exclude_turn: Option<&TurnId>,
    ) -> Result<Vec<LoggedEvent>, CompactionError> {
        Ok(self
            .records(revision)?
            .into_iter()
            .filter_map(|logged| match logged.record {
                Record::RuntimeEvent(event) => {
                    Some(LoggedEvent { position: logged.position, revision: logged.revision, event })
                }
                _ => None,
            })
            .filter(|e| is_compactable(&e.event) && !is_synthetic(&e.event))
            .filter(|e| exclude_turn != Some(&e.event.turn_id))
            .collect())
    }

    /// One event by position, if it is a RuntimeEvent of this session.
    pub fn event_at(&self, position: Position) -> Result<Option<RuntimeEvent>, CompactionError> {
        let Some(envelope) = self.log.read(position)? else {
            return Ok(None);
        };
        match LoggedRecord::decode(envelope)?.record {
            Record::RuntimeEvent(event) if event.session_id == self.session => Ok(Some(event)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use mnemo_log::{AppendOutcome, AppendRequest, ExpectedRevision, FjallLog, LogOptions, NewRecord};

    use super::*;
    use crate::testing::{GOOD_SUMMARY, build_text, sid, text_event};

    fn append(log: &FjallLog, records: &[Record]) {
        let new = records
            .iter()
            .map(|record| {
                let kind = record.kind();
                let bytes = record.encode().unwrap_or_else(|e| panic!("{e}"));
                NewRecord::new(kind.code(), kind.schema_version(), bytes)
            })
            .collect();
        let request = AppendRequest::new(StreamId::session(&sid()), ExpectedRevision::Any, new);
        let outcome = log.append(request).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(outcome, AppendOutcome::Appended(_)));
    }

    #[test]
    fn a_damaged_view_falls_back_to_scanning_the_log() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = FjallLog::open(dir.path(), LogOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let events: Vec<RuntimeEvent> =
            (1..=4).map(|i| text_event(&format!("e{i}"), &format!("t{i}"), "user", "hello")).collect();
        let checkpoint = build_text(&events[..2], GOOD_SUMMARY, None);
        let mut records: Vec<Record> = events.into_iter().map(Record::RuntimeEvent).collect();
        records.push(Record::CheckpointRecorded(checkpoint.clone()));
        append(&log, &records);

        let store = Arc::new(MemoryStore::new());
        let mut damage = Changes::new();
        damage.insert(crate::stage::view_key(&sid()), Some(b"\xff not a view".to_vec()));
        let meta = StageMeta { watermark: log.head(), version: 1, config_hash: [0; 32] };
        store.commit(&damage, &meta).unwrap_or_else(|e| panic!("{e}"));
        assert!(view(store.as_ref(), &sid()).is_err(), "the view really is damaged");

        let ledger = SessionLedger::at_head(&log, store, &sid()).unwrap_or_else(|e| panic!("{e}"));
        let (latest, path) = ledger.latest().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path, LoadPath::Scan);
        assert_eq!(latest.map(|l| l.checkpoint.checkpoint), Some(checkpoint.checkpoint));
    }
}
