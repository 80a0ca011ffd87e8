//! `Mnemo`: one store directory, its log and its running projection pipeline.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, TryLockError};

use mnemo_core::{Digest, Position, Record, SessionId, StreamId, StreamRevision, TimestampMs};
use mnemo_log::{
    AppendOutcome, AppendRequest, Appended, BatchLimits, Clock, Durability, ExpectedRevision, FjallLog,
    LogBackend, LogOptions, LostRange, NewRecord, SystemClock,
};
use mnemo_pipeline::stages::session_catalog::{self, SessionSummary};
use mnemo_pipeline::{
    FjallStore, MemoryStore, Pipeline, PipelineError, PipelineSpec, Stage, StageRegistry, StageStatus,
    StateStore,
};
use tracing::info_span;

use crate::error::Error;
use crate::log_location::{LogLocation, open_log};
use crate::stages::{CATCH_UP_TIMEOUT, StageReport, StageVerification, Stats, Verification};

/// How to open a store.
#[derive(Debug, Clone)]
pub struct Config {
    /// A pipeline spec file; `None` uses the built-in `pipelines/default.toml`.
    pub pipeline: Option<PathBuf>,
    /// Durability of appends.
    pub durability: Durability,
    /// Where append timestamps come from.
    pub clock: Arc<dyn Clock>,
    /// Whether opening refuses a log whose newest envelopes do not verify (only `verify` turns it off,
    /// to report on a damaged log instead of refusing it).
    pub verify_tail_on_open: bool,
    /// The log the store follows; `None` takes the pipeline spec's `[log]`, else the embedded log.
    pub log: Option<LogLocation>,
    /// The range of acknowledged envelopes the owner accepts as lost (exactly what the refused open
    /// named): the open records it, lowers the high-water mark to the log's head, and rebuilds the
    /// stages that had folded the lost envelopes.
    pub accept_loss: Option<LostRange>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pipeline: None,
            durability: Durability::default(),
            clock: Arc::new(SystemClock),
            verify_tail_on_open: true,
            log: None,
            accept_loss: None,
        }
    }
}

/// One envelope as `log` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogEntry {
    /// Global position.
    pub position: Position,
    /// Stream.
    pub stream: String,
    /// Revision in the stream.
    pub revision: u64,
    /// Record kind name.
    pub kind: String,
    /// Append time.
    pub timestamp: TimestampMs,
    /// The envelope's hash, hex.
    pub hash: String,
    /// The record as JSON.
    pub record: serde_json::Value,
}

fn log_entry(envelope: mnemo_log::Envelope) -> Result<LogEntry, Error> {
    let logged = mnemo_pipeline::LoggedRecord::decode(envelope.clone())?;
    Ok(LogEntry {
        position: envelope.position,
        stream: envelope.stream.to_string(),
        revision: envelope.revision.0,
        kind: logged.record.kind().name().to_owned(),
        timestamp: envelope.timestamp,
        hash: envelope.hash_hex(),
        record: serde_json::from_slice(&envelope.record).unwrap_or(serde_json::Value::Null),
    })
}

/// An open store: the log and its projections.
#[derive(Debug)]
pub struct Mnemo {
    /// The log the store follows: `local` itself, or a shared one.
    pub(crate) log: Arc<dyn LogBackend>,
    /// The store directory's database: the projections, and the embedded log when it is the one followed.
    pub(crate) local: Arc<FjallLog>,
    location: LogLocation,
    pipeline: RwLock<Pipeline>,
    spec: PipelineSpec,
    registry: StageRegistry,
    durability: Durability,
    /// Serializes each session's checkpoint writes (see `compaction.rs`).
    pub(crate) compaction: Arc<mnemo_compaction::Coordinator>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) memory: crate::memory_runtime::MemoryRuntime,
    /// Where captures of growing files left off (memory only).
    pub(crate) file_cursors: mnemo_transcript::FileCursors<crate::import::FileCursor>,
}

impl Mnemo {
    /// Opens (or creates) the store in `dir` and starts its projections, which catch up in the
    /// background.
    pub fn open(dir: &Path, config: Config) -> Result<Mnemo, Error> {
        let spec = match &config.pipeline {
            Some(path) => PipelineSpec::load(path)?,
            None => PipelineSpec::default_spec()?,
        };
        let registry = crate::stages::registry();
        let options = LogOptions {
            clock: Arc::clone(&config.clock),
            verify_tail_on_open: config.verify_tail_on_open,
            accept_loss: config.accept_loss,
            key_rules_of: Some(mnemo_core::key_rules_of_encoded),
        };
        let memory = crate::memory_runtime::MemoryRuntime::new(Arc::clone(&config.clock));
        let location = match (&config.log, &spec.log) {
            (Some(location), _) => location.clone(),
            (None, Some(log)) => LogLocation::parse(&log.url)?,
            (None, None) => LogLocation::Local,
        };
        let local = Arc::new(FjallLog::open(dir, options)?);
        let log = open_log(&location, &local, Arc::clone(&config.clock))?;
        if config.accept_loss.is_some() {
            reset_stages_ahead(&local, &spec, log.head())?;
        }
        // A log that lost acknowledged envelopes is open only to be verified or salvaged: its stages
        // have folded what it no longer holds, so none runs.
        let pipeline = if local.lost().is_some() {
            Pipeline::start(Arc::clone(&log), Vec::new())?
        } else {
            start_pipeline(&log, &local, &spec, &registry, None)?
        };
        let compaction = crate::checkpoint_recorder::coordinator(&log, config.durability);
        Ok(Mnemo {
            log,
            local,
            location,
            pipeline: RwLock::new(pipeline),
            spec,
            registry,
            durability: config.durability,
            compaction,
            clock: Arc::clone(&config.clock),
            memory,
            file_cursors: mnemo_transcript::FileCursors::default(),
        })
    }

    /// Closes the store: memory takes no new work, the projections fold everything already appended
    /// and stop, and the handle is gone. Dropping a `Mnemo` also stops it, but reports nothing.
    pub fn close(self) -> Result<(), Error> {
        self.memory().begin_drain();
        let caught_up = self.catch_up();
        self.pipeline.write().unwrap_or_else(PoisonError::into_inner).shutdown();
        caught_up
    }

    /// The log, for reads.
    pub fn log(&self) -> &dyn LogBackend {
        self.log.as_ref()
    }

    /// The loss of acknowledged envelopes this open accepted ([`Config::accept_loss`]), if it did.
    pub fn accepted_loss(&self) -> Option<LostRange> {
        self.local.accepted_loss()
    }

    /// Where the log the store follows is.
    pub fn log_location(&self) -> &LogLocation {
        &self.location
    }

    /// Appends records to one stream atomically, acknowledged at the store's durability. A
    /// revision mismatch is [`Error::Conflict`].
    ///
    /// This is the generic append path of the reference store (spec events-and-history.md §1.8):
    /// event text is normalised, reserved facts are refused, and the log decides every event's
    /// identity, run and tool-ledger rules. An exact retry of a stored event is not stored again:
    /// it is answered with the original's position ([`Appended::retried`] counts them). A broken
    /// rule is [`Error::Refused`] with its typed reason, and nothing of the append is stored.
    pub fn append(
        &self,
        stream: &StreamId,
        expected: ExpectedRevision,
        records: &[Record],
    ) -> Result<Appended, Error> {
        self.append_with_durability(stream, expected, records, self.durability())
    }

    /// [`Mnemo::append`], acknowledged at `durability` instead of the store's own (`Buffered`: once
    /// written to the operating system, which survives the process but not a power loss; `SyncAll`:
    /// with the journal's metadata synced too). Appends committed in one group are persisted at the
    /// strongest durability any of them asked for. The records are prepared exactly as
    /// [`Mnemo::append`] prepares them: durability changes when the answer comes, never what is
    /// stored.
    pub fn append_with_durability(
        &self,
        stream: &StreamId,
        expected: ExpectedRevision,
        records: &[Record],
        durability: Durability,
    ) -> Result<Appended, Error> {
        let prepared = prepare_generic(stream, records)?;
        self.append_records(stream, expected, &prepared, durability)
    }

    /// The one body every record append goes through: encode, commit, and drop the compaction
    /// cache of a session that gained a checkpoint.
    fn append_records(
        &self,
        stream: &StreamId,
        expected: ExpectedRevision,
        records: &[Record],
        durability: Durability,
    ) -> Result<Appended, Error> {
        let _span = info_span!("append", stream = %stream, records = records.len()).entered();
        let encoded = records
            .iter()
            .enumerate()
            .map(|(index, record)| {
                encode_for(stream, record)
                    .map_err(|error| Error::InvalidInput(format!("records[{index}]: {error}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let appended =
            self.append_encoded(stream, expected, encoded, None, durability, BatchLimits::Standard)?;
        for record in records {
            if let Record::CheckpointRecorded(checkpoint) = record {
                self.compaction.invalidate(&checkpoint.session);
            }
        }
        Ok(appended)
    }

    pub(crate) fn append_encoded(
        &self,
        stream: &StreamId,
        expected: ExpectedRevision,
        encoded: Vec<NewRecord>,
        timestamp: Option<TimestampMs>,
        durability: Durability,
        limits: BatchLimits,
    ) -> Result<Appended, Error> {
        self.check_stages()?;
        let mut request = AppendRequest::new(stream.clone(), expected, encoded);
        request.durability = durability;
        request.timestamp = timestamp;
        request.limits = limits;
        match crate::blocking::wait(|| self.log.append(request))? {
            AppendOutcome::Appended(appended) => Ok(appended),
            AppendOutcome::Conflict(conflict) => {
                Err(Error::Conflict { stream: stream.to_string(), conflict })
            }
            AppendOutcome::Refused(refusal) => Err(Error::Refused {
                stream: stream.to_string(),
                record: refusal.record,
                reason: mnemo_core::AppendRefusal::of_rule(&refusal.rule),
                held_at: refusal.held_at,
            }),
        }
    }

    /// Blocks until every stage has folded `position`.
    pub fn catch_up_to(&self, position: Position) -> Result<(), Error> {
        Ok(crate::blocking::wait(|| self.pipeline().wait_all(position, CATCH_UP_TIMEOUT))?)
    }

    /// Blocks until every stage has folded the whole log as it is now.
    pub fn catch_up(&self) -> Result<(), Error> {
        self.catch_up_to(self.log.head())
    }

    /// Every session, in id order.
    pub(crate) fn sessions(&self) -> Result<Vec<SessionSummary>, Error> {
        let store = self.caught_up_store(session_catalog::STAGE_NAME)?;
        Ok(session_catalog::list(store.as_ref())?)
    }

    /// One session's summary.
    pub(crate) fn session(&self, session: &SessionId) -> Result<Option<SessionSummary>, Error> {
        let store = self.caught_up_store(session_catalog::STAGE_NAME)?;
        Ok(session_catalog::get(store.as_ref(), session)?)
    }

    /// Envelopes from `from`, at most `limit`, with their records decoded.
    pub fn log_entries(&self, from: Position, limit: usize) -> Result<Vec<LogEntry>, Error> {
        let mut entries = Vec::new();
        for envelope in self.log.scan(from.max(Position::FIRST)).take(limit) {
            entries.push(log_entry(envelope?)?);
        }
        Ok(entries)
    }

    /// One stream's envelopes from revision `from`, at most `limit`, with their records decoded:
    /// reads only that stream, however long the log.
    pub fn stream_entries(
        &self,
        stream: &StreamId,
        from: StreamRevision,
        limit: usize,
    ) -> Result<Vec<LogEntry>, Error> {
        let page = crate::blocking::wait(|| self.log.read_stream(stream, from, limit))?;
        page.into_iter().map(log_entry).collect()
    }

    /// One stream's last `limit` envelopes (fewer when it holds fewer), in order, with their records
    /// decoded: found from the stream's head, not by reading the stream.
    pub fn stream_tail(&self, stream: &StreamId, limit: usize) -> Result<Vec<LogEntry>, Error> {
        let Some(head) = self.log.stream_head(stream)? else {
            return Ok(Vec::new());
        };
        let from = StreamRevision((head.revision.0 + 1).saturating_sub(limit as u64));
        self.stream_entries(stream, from, limit)
    }

    /// Refuses to go on while a stage has failed or panicked ([`PipelineError::StageStopped`]
    /// naming it): what is appended now would not reach that stage's readers. `rebuild` restarts
    /// the pipeline.
    pub(crate) fn check_stages(&self) -> Result<(), Error> {
        // NOTE: `try_read`: a rebuild holds the pipeline for its whole replay, and appends must not
        // wait for it; the pipeline it starts is checked by the appends after it.
        match self.pipeline.try_read() {
            Ok(pipeline) => Ok(pipeline.check_running()?),
            Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner().check_running()?),
            Err(TryLockError::WouldBlock) => Ok(()),
        }
    }

    /// Counts and every stage's digest and state. A stopped stage is reported, not an error; the
    /// counts then come from the session catalog as far as it got.
    pub fn stats(&self) -> Result<Stats, Error> {
        let sessions = match self.sessions() {
            Err(Error::Pipeline(PipelineError::StageStopped { .. })) => {
                session_catalog::list(self.pipeline().store(session_catalog::STAGE_NAME)?.as_ref())?
            }
            other => other?,
        };
        let pipeline = self.pipeline();
        let stages = stage_reports(&pipeline)?;
        Ok(Stats {
            dir: self.local.dir().display().to_string(),
            head: self.log.head(),
            sessions: sessions.len() as u64,
            events: sessions.iter().map(|s| s.event_count).sum(),
            turns: sessions.iter().map(|s| s.turn_count).sum(),
            disk_bytes: self.local.database().disk_space().unwrap_or(0)
                + self.local.key_database().disk_space().unwrap_or(0),
            stages,
        })
    }

    /// Every stage's progress.
    pub fn stage_status(&self) -> Vec<StageStatus> {
        self.pipeline().status()
    }

    /// Drops and replays the named stage (or every stage) from position 0, through the same runner
    /// that follows the log live, and reports each stage's digest once it has caught up.
    pub fn rebuild(&self, stage: Option<&str>) -> Result<Vec<StageReport>, Error> {
        let mut pipeline = self.pipeline.write().unwrap_or_else(PoisonError::into_inner);
        let names: Vec<String> = match stage {
            Some(name) => {
                pipeline.store(name)?;
                vec![name.to_owned()]
            }
            None => pipeline.stage_names(),
        };
        // NOTE: the running pipeline must stop before its stores are reset, or a stage thread could
        // commit a stale watermark over the emptied state.
        pipeline.shutdown();
        for name in &names {
            FjallStore::open(self.local.database(), name)?.reset()?;
        }
        let head = self.log.head();
        *pipeline = start_pipeline(&self.log, &self.local, &self.spec, &self.registry, Some(head))?;
        pipeline.wait_all(head, CATCH_UP_TIMEOUT)?;
        let reports = stage_reports(&pipeline)?;
        Ok(reports.into_iter().filter(|r| names.contains(&r.name)).collect())
    }

    /// Checks the whole hash chain, then that every live stage's digest equals a fresh in-memory
    /// rebuild's at the same position. A stage that stopped is compared where it stopped and
    /// reported as stopped. `progress` hears each verified position.
    pub fn verify(&self, progress: &mut dyn FnMut(Position)) -> Result<Verification, Error> {
        let envelopes = self.log.verify_chain(progress)?;
        if let Some(lost) = self.local.lost() {
            return Ok(Verification { envelopes, lost: Some(lost.to_string()), stages: Vec::new() });
        }
        let head = self.log.head();
        let pipeline = self.pipeline();
        let mut stages = Vec::new();
        for stage_spec in &self.spec.stages {
            let stopped = match pipeline.wait_until(&stage_spec.name, head, CATCH_UP_TIMEOUT) {
                Ok(()) => None,
                Err(PipelineError::StageStopped { stop, .. }) => Some(stop),
                Err(error) => return Err(error.into()),
            };
            let (watermark, live) = pipeline.digest(&stage_spec.name)?;
            let projector = self.registry.build(stage_spec)?;
            let reference: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
            let rebuilt = mnemo_pipeline::fold_to(
                self.log.as_ref(),
                projector,
                reference,
                stage_spec.config_hash()?,
                watermark,
            )?;
            stages.push(StageVerification {
                name: stage_spec.name.clone(),
                watermark,
                live: live.to_string(),
                rebuilt: rebuilt.to_string(),
                stopped,
            });
        }
        Ok(Verification { envelopes, lost: None, stages })
    }

    pub(crate) fn pipeline(&self) -> RwLockReadGuard<'_, Pipeline> {
        self.pipeline.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stage's store once the stage has folded the whole log as it is now (read-your-writes).
    pub(crate) fn caught_up_store(&self, stage: &str) -> Result<Arc<dyn StateStore>, Error> {
        let pipeline = self.pipeline();
        crate::blocking::wait(|| pipeline.wait_until(stage, self.log.head(), CATCH_UP_TIMEOUT))?;
        Ok(pipeline.store(stage)?)
    }

    /// The pipeline spec the store runs.
    pub(crate) fn pipeline_spec(&self) -> &PipelineSpec {
        &self.spec
    }

    /// A stage's store as of `as_of`: the live store once caught up with the log when `None`, else
    /// a fresh in-memory fold of the log up to that position (exact, and linear in the position).
    pub(crate) fn store_as_of(
        &self,
        stage: &str,
        as_of: Option<Position>,
    ) -> Result<Arc<dyn StateStore>, Error> {
        let Some(position) = as_of else {
            return self.caught_up_store(stage);
        };
        let head = self.log.head();
        if position > head {
            return Err(Error::InvalidInput(format!("position {position} is beyond the log head {head}")));
        }
        let spec = self
            .spec
            .stages
            .iter()
            .find(|s| s.name == stage)
            .ok_or_else(|| mnemo_pipeline::PipelineError::UnknownStage(stage.to_owned()))?;
        let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
        let projector = self.registry.build(spec)?;
        let config_hash = spec.config_hash()?;
        crate::blocking::wait(|| {
            mnemo_pipeline::fold_to(self.log.as_ref(), projector, Arc::clone(&store), config_hash, position)
        })?;
        Ok(store)
    }

    /// The durability appends use.
    /// The store directory.
    pub(crate) fn local_dir(&self) -> &Path {
        self.local.dir()
    }

    pub(crate) fn durability(&self) -> Durability {
        self.durability
    }
}

/// The generic append path's preparation of a host's records (spec §1.2, §1.8 item 1): event text
/// normalised, a reserved fact refused with the index of its record. Records are copied only when
/// one needs normalising; the common case checks them in place.
fn prepare_generic<'a>(stream: &StreamId, records: &'a [Record]) -> Result<Cow<'a, [Record]>, Error> {
    let refused =
        |record: usize, reason| Error::Refused { stream: stream.to_string(), record, reason, held_at: None };
    if !records.iter().any(Record::needs_generic_preparation) {
        if let Some((index, reason)) = records
            .iter()
            .enumerate()
            .find_map(|(index, r)| r.generic_append_refusal().map(|why| (index, why)))
        {
            return Err(refused(index, reason));
        }
        return Ok(Cow::Borrowed(records));
    }
    let mut copies = records.to_vec();
    for (index, record) in copies.iter_mut().enumerate() {
        record.prepare_generic_append().map_err(|reason| refused(index, reason))?;
    }
    Ok(Cow::Owned(copies))
}

/// One record ready for the log, checked to belong on `stream`.
pub(crate) fn encode_for(stream: &StreamId, record: &Record) -> Result<NewRecord, Error> {
    if record.stream() != *stream {
        return Err(Error::InvalidInput(format!(
            "a {} record belongs on {}, not {stream}",
            record.kind().name(),
            record.stream()
        )));
    }
    let code = record.kind().code();
    Ok(NewRecord::new(code, record.schema_version(), record.encode()?).with_rules(record.key_rules()))
}

fn start_pipeline(
    log: &Arc<dyn LogBackend>,
    local: &FjallLog,
    spec: &PipelineSpec,
    registry: &StageRegistry,
    replay_until: Option<Position>,
) -> Result<Pipeline, Error> {
    let mut stages = Vec::with_capacity(spec.stages.len());
    for stage_spec in &spec.stages {
        let projector = registry.build(stage_spec)?;
        let store: Arc<dyn StateStore> = Arc::new(FjallStore::open(local.database(), &stage_spec.name)?);
        stages.push(Stage { projector, store, config_hash: stage_spec.config_hash()? });
    }
    Ok(match replay_until {
        // An explicit rebuild holds the pipeline's write lock, and every append checks the stages
        // under its read lock first: nothing appends while it replays, so it folds in the foreground.
        Some(until) => Pipeline::start_replay(Arc::clone(log), stages, until)?,
        None => Pipeline::start(Arc::clone(log), stages)?,
    })
}

/// Resets every stage that has folded beyond the log's head, once its owner accepted that the
/// envelopes there are lost: it rebuilds from the log as it is.
fn reset_stages_ahead(local: &FjallLog, spec: &PipelineSpec, head: Position) -> Result<(), Error> {
    for stage_spec in &spec.stages {
        let store = FjallStore::open(local.database(), &stage_spec.name)?;
        if store.meta()?.is_some_and(|meta| meta.watermark > head) {
            store.reset()?;
        }
    }
    Ok(())
}

fn stage_reports(pipeline: &Pipeline) -> Result<Vec<StageReport>, Error> {
    pipeline
        .status()
        .into_iter()
        .map(|status| {
            let (watermark, digest): (Position, Digest) = pipeline.digest(&status.name)?;
            Ok(StageReport {
                name: status.name,
                watermark,
                digest: digest.to_string(),
                stopped: status.stopped,
            })
        })
        .collect()
}
