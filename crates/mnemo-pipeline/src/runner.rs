//! The runner: one feeder thread reads and decodes each envelope once and fans it out over bounded
//! channels to one thread per stage. Live catch-up, rebuild and crash recovery are this same path.
//!
//! A stage commits what it has folded in groups, like the log's writer: when a reader waits for a
//! position it has folded, when a piece of `COMMIT_ENVELOPES_MAX` records is full, or at the latest
//! `LIVE_COMMIT_DELAY` after the oldest uncommitted fold. Committing every live append on its own
//! rewrote the same index blocks once per event and made every durable append wait behind them.
//!
//! The feeder and the stages run below the host's priority and yield often, so that folding does
//! not hold up appenders; a replay that nothing appends beside ([`Pipeline::start_replay`], an
//! explicit rebuild) folds at the host's priority until it has caught up, then does the same.
//!
//! A stage that stops says so at once: a fold or commit that fails, a panic on the stage's thread
//! (caught at the thread's top), a feeder that cannot read the log or panics, and a shutdown each
//! record a [`StageStop`] and wake every waiting reader, whose wait fails with
//! [`PipelineError::StageStopped`] naming the stage instead of running into its timeout.
//! [`Pipeline::check_running`] lets appenders refuse to write past a stage that has failed.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use mnemo_core::{Digest, Position};
use mnemo_log::LogBackend;
use tracing::{debug_span, error, info};

use crate::error::{PipelineError, StageStop};
use crate::projector::{LoggedRecord, Projector, StageWorker};
use crate::store::{StateStore, projection_digest};

/// Depth of each stage's queue. A full queue blocks the feeder: a slow stage applies back-pressure
/// and never loses an envelope.
pub const STAGE_QUEUE_DEPTH_MAX: usize = 1024;

/// How long the feeder waits for new appends before checking whether it should stop.
const FOLLOW_POLL: Duration = Duration::from_millis(50);

/// Longest a stage holds folded records uncommitted when no reader waits for them: how stale a
/// read that does not wait (`wait_until`) can be, beyond the time folding takes.
pub const LIVE_COMMIT_DELAY: Duration = Duration::from_millis(100);

/// How long a stage folds before it yields the processor to any thread that is waiting for it.
const FOLD_YIELD_INTERVAL: Duration = Duration::from_micros(100);

/// How much the pipeline's threads raise their nice value over the host's: appends are what callers
/// wait on, so on a busy machine the stages fold in the time appends leave, and catch up after.
pub const PIPELINE_NICE_INCREMENT: i32 = 10;

/// One stage to run: its projector, its store, and the hash of its configuration.
#[derive(Debug)]
pub struct Stage {
    /// The projector.
    pub projector: Box<dyn Projector>,
    /// Where its state lives.
    pub store: Arc<dyn StateStore>,
    /// Hash of its configuration; a change rebuilds the stage.
    pub config_hash: [u8; 32],
}

/// A stage's progress as the runner reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageStatus {
    /// The stage's name.
    pub name: String,
    /// The last position committed.
    pub watermark: Position,
    /// Why the stage stopped, if it did.
    pub stopped: Option<StageStop>,
}

#[derive(Debug, Default)]
struct Progress {
    /// The committed watermark, and why the stage stopped if it did (the first reason stays).
    state: Mutex<(Position, Option<StageStop>)>,
    moved: Condvar,
    /// The highest position a reader has waited for: the stage commits as soon as it has folded it.
    wanted: AtomicU64,
    /// Whether the stage stopped on a fault: appenders check it without taking the lock.
    faulted: AtomicBool,
}

impl Progress {
    fn want(&self, position: Position) {
        self.wanted.fetch_max(position.0, Ordering::AcqRel);
    }

    fn wanted(&self) -> Position {
        Position(self.wanted.load(Ordering::Acquire))
    }

    fn publish(&self, watermark: Position) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).0 = watermark;
        self.moved.notify_all();
    }

    /// Records why the stage stopped, unless it already stopped, and wakes every waiting reader.
    fn stop(&self, stop: StageStop) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.1.is_none() {
            self.faulted.store(stop.is_fault(), Ordering::Release);
            state.1 = Some(stop);
        }
        drop(state);
        self.moved.notify_all();
    }

    fn snapshot(&self) -> (Position, Option<StageStop>) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[derive(Debug)]
struct StageHandle {
    name: String,
    store: Arc<dyn StateStore>,
    progress: Arc<Progress>,
    /// Wakes the stage when a reader starts waiting; dropped at shutdown so the stage thread ends.
    nudge: Option<Sender<StageInput>>,
}

/// The running projection pipeline over one log.
#[derive(Debug)]
pub struct Pipeline {
    stages: Vec<StageHandle>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Pipeline {
    /// Starts every stage from its watermark and follows the log. A stage whose stored version or
    /// configuration hash differs from the code's (or that has no meta) is reset and rebuilt from
    /// position 0 first.
    pub fn start(log: Arc<dyn LogBackend>, stages: Vec<Stage>) -> Result<Pipeline, PipelineError> {
        Pipeline::start_with(log, stages, LIVE_COMMIT_DELAY)
    }

    /// [`Pipeline::start`] with another longest delay before folded records are committed when no
    /// reader waits for them.
    pub fn start_with(
        log: Arc<dyn LogBackend>,
        stages: Vec<Stage>,
        live_commit_delay: Duration,
    ) -> Result<Pipeline, PipelineError> {
        Pipeline::start_inner(log, stages, live_commit_delay, Position::ZERO)
    }

    /// [`Pipeline::start`] for a replay nobody appends beside (an explicit rebuild): the feeder and
    /// each stage run at the host's priority, without yielding, until they have handed over or
    /// folded `until`, and only then go to the background like a live pipeline. A replay in the
    /// background gets a tenth of a busy machine's processor time (nice 10 against the others' 0).
    pub fn start_replay(
        log: Arc<dyn LogBackend>,
        stages: Vec<Stage>,
        until: Position,
    ) -> Result<Pipeline, PipelineError> {
        Pipeline::start_inner(log, stages, LIVE_COMMIT_DELAY, until)
    }

    fn start_inner(
        log: Arc<dyn LogBackend>,
        stages: Vec<Stage>,
        live_commit_delay: Duration,
        foreground_until: Position,
    ) -> Result<Pipeline, PipelineError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(stages.len());
        let mut threads = Vec::with_capacity(stages.len() + 1);
        let mut senders = Vec::with_capacity(stages.len());
        let mut from = None::<Position>;
        for stage in stages {
            let watermark = prepare(&stage, log.head())?;
            from = Some(from.map_or(watermark, |f| f.min(watermark)));
            let name = stage.projector.name().to_owned();
            let progress = Arc::new(Progress::default());
            progress.publish(watermark);
            let worker =
                StageWorker::new(stage.projector, Arc::clone(&stage.store), stage.config_hash, watermark);
            let (sender, receiver) = crossbeam_channel::bounded::<StageInput>(STAGE_QUEUE_DEPTH_MAX);
            let thread_progress = Arc::clone(&progress);
            let thread_name = name.clone();
            threads.push(spawn(&format!("stage:{name}"), move || {
                // NOTE: a panic must reach the readers as a stop, not as a thread that silently
                // ended: they would wait for a watermark that never moves until their timeout.
                let run =
                    || run_stage(worker, receiver, &thread_progress, live_commit_delay, foreground_until);
                let stop = match std::panic::catch_unwind(AssertUnwindSafe(run)) {
                    Ok(()) => StageStop::ShutDown,
                    Err(payload) => {
                        let message = panic_message(payload.as_ref());
                        error!(stage = %thread_name, %message, "stage thread panicked");
                        StageStop::Panicked(message)
                    }
                };
                thread_progress.stop(stop);
            })?);
            let nudge = Some(sender.clone());
            senders.push((sender, Arc::clone(&progress)));
            handles.push(StageHandle { name, store: stage.store, progress, nudge });
        }
        let from = from.unwrap_or(Position::ZERO).next();
        let feeder_stop = Arc::clone(&stop);
        threads.push(spawn("mnemo-feeder", move || {
            let run = || feed(log.as_ref(), from, &senders, &feeder_stop, foreground_until);
            if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(run)) {
                let message = panic_message(payload.as_ref());
                error!(%message, "the log feeder panicked; every stage stops");
                // NOTE: the stops are recorded while the senders live, so a stage that sees its
                // queue close after this already carries the feeder's failure.
                for (_, progress) in &senders {
                    progress.stop(StageStop::Failed(format!("the log feeder panicked: {message}")));
                }
            }
        })?);
        Ok(Pipeline { stages: handles, stop, threads })
    }

    /// Every stage's progress.
    pub fn status(&self) -> Vec<StageStatus> {
        self.stages
            .iter()
            .map(|stage| {
                let (watermark, stopped) = stage.progress.snapshot();
                StageStatus { name: stage.name.clone(), watermark, stopped }
            })
            .collect()
    }

    /// The names of the running stages, in spec order.
    pub fn stage_names(&self) -> Vec<String> {
        self.stages.iter().map(|s| s.name.clone()).collect()
    }

    /// A stage's store, for queries. Pair it with [`Pipeline::wait_until`] to read your writes.
    pub fn store(&self, stage: &str) -> Result<Arc<dyn StateStore>, PipelineError> {
        Ok(Arc::clone(&self.handle(stage)?.store))
    }

    /// Blocks until `stage` has committed `position` (read-your-writes). Fails at once if the stage
    /// has failed or panicked (whatever it committed), or was shut down before reaching `position`;
    /// fails on timeout otherwise.
    pub fn wait_until(
        &self,
        stage: &str,
        position: Position,
        timeout: Duration,
    ) -> Result<(), PipelineError> {
        let handle = self.handle(stage)?;
        let deadline = Instant::now() + timeout;
        if handle.progress.snapshot().0 < position {
            handle.progress.want(position);
            if let Some(nudge) = &handle.nudge {
                // A full queue needs no nudge: the stage checks what readers want after every fold.
                match nudge.try_send(StageInput::ReaderWaits) {
                    Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
                }
            }
        }
        let mut state = handle.progress.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let stopped = |stop: &StageStop| PipelineError::StageStopped {
                stage: stage.to_owned(),
                stop: stop.clone(),
            };
            match &state.1 {
                Some(stop) if stop.is_fault() => return Err(stopped(stop)),
                _ if state.0 >= position => return Ok(()),
                Some(stop) => return Err(stopped(stop)),
                None => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(PipelineError::Timeout {
                    stage: stage.to_owned(),
                    wanted: position,
                    reached: state.0,
                });
            }
            state = handle
                .progress
                .moved
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Fails with the first stage, in spec order, that stopped on a fault (a failure or a panic).
    /// Cheap enough for every append: one atomic load per stage while all is well.
    pub fn check_running(&self) -> Result<(), PipelineError> {
        for stage in &self.stages {
            if stage.progress.faulted.load(Ordering::Acquire)
                && let (_, Some(stop)) = stage.progress.snapshot()
            {
                return Err(PipelineError::StageStopped { stage: stage.name.clone(), stop });
            }
        }
        Ok(())
    }

    /// Blocks until every stage has committed `position`.
    pub fn wait_all(&self, position: Position, timeout: Duration) -> Result<(), PipelineError> {
        for stage in &self.stages {
            self.wait_until(&stage.name, position, timeout)?;
        }
        Ok(())
    }

    /// The projection digest of a stage's committed state, with the watermark it is at.
    /// Call it when no appends are in flight, or after `wait_until`, for a stable answer.
    pub fn digest(&self, stage: &str) -> Result<(Position, Digest), PipelineError> {
        let handle = self.handle(stage)?;
        let watermark = handle.progress.snapshot().0;
        Ok((watermark, projection_digest(handle.store.as_ref())?))
    }

    /// Stops the feeder and the stages after they commit what they have folded. Queries on a
    /// stopped pipeline still read the committed state; waits for positions beyond it fail at once.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        for stage in &mut self.stages {
            stage.nudge = None;
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }

    fn handle(&self, stage: &str) -> Result<&StageHandle, PipelineError> {
        self.stages
            .iter()
            .find(|s| s.name == stage)
            .ok_or_else(|| PipelineError::UnknownStage(stage.to_owned()))
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The message a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(message), _) => (*message).to_owned(),
        (_, Some(message)) => message.clone(),
        _ => "a panic without a message".to_owned(),
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, PipelineError> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map_err(|source| PipelineError::Spawn { thread: name.to_owned(), source })
}

/// Lowers the calling thread's scheduling priority by [`PIPELINE_NICE_INCREMENT`]. An
/// unprivileged thread cannot raise its priority again: a replay thread calls this once, when it
/// has caught up.
fn run_in_background() {
    mnemo_log::lower_this_thread(PIPELINE_NICE_INCREMENT, "pipeline");
}

/// Resets a stage whose stored state was written by other code or configuration; returns its
/// watermark. A stage that has folded beyond the log's head is an error, never a reset: it is the
/// sign that envelopes the log acknowledged (and the stage folded) are gone from the log.
fn prepare(stage: &Stage, log_head: Position) -> Result<Position, PipelineError> {
    let meta = stage.store.meta()?;
    let current =
        meta.is_some_and(|m| m.version == stage.projector.version() && m.config_hash == stage.config_hash);
    match meta {
        Some(meta) if current && meta.watermark > log_head => Err(PipelineError::AheadOfLog {
            stage: stage.projector.name().to_owned(),
            watermark: meta.watermark,
            head: log_head,
        }),
        Some(meta) if current => Ok(meta.watermark),
        _ => {
            info!(
                stage = stage.projector.name(),
                "stage version or configuration changed (or no state): rebuilding"
            );
            stage.store.reset()?;
            Ok(Position::ZERO)
        }
    }
}

/// What the feeder sends a stage.
#[derive(Debug)]
enum StageInput {
    /// The next record to fold.
    Record(Arc<LoggedRecord>),
    /// A reader has started waiting for a position (see [`Progress::wanted`]).
    ReaderWaits,
}

/// Reads the log from `from`, decodes each envelope once and hands it to every stage, then follows
/// the tail until told to stop.
fn feed(
    log: &dyn LogBackend,
    mut from: Position,
    stages: &[(Sender<StageInput>, Arc<Progress>)],
    stop: &AtomicBool,
    foreground_until: Position,
) {
    let mut background = false;
    while !stop.load(Ordering::Acquire) {
        if !background && from > foreground_until {
            run_in_background();
            background = true;
        }
        for envelope in log.scan(from) {
            let logged = match envelope.map_err(PipelineError::from).and_then(LoggedRecord::decode) {
                Ok(logged) => Arc::new(logged),
                Err(failure) => {
                    error!(%failure, "the pipeline cannot read the log; every stage stops");
                    for (_, progress) in stages {
                        progress.stop(StageStop::Failed(failure.to_string()));
                    }
                    return;
                }
            };
            from = logged.position.next();
            for (sender, _) in stages {
                // A stage that stopped has dropped its receiver; the others go on.
                let _ = sender.send(StageInput::Record(Arc::clone(&logged)));
            }
            if stop.load(Ordering::Acquire) {
                return;
            }
        }
        log.wait_for(from, FOLLOW_POLL);
    }
}

/// A stage thread: folds what arrives and commits in groups (see the module's documentation).
fn run_stage(
    mut worker: StageWorker,
    queue: Receiver<StageInput>,
    progress: &Progress,
    delay: Duration,
    foreground_until: Position,
) {
    let name = worker.projector.name().to_owned();
    // A replay folds in the foreground up to `foreground_until`, then goes to the background.
    let mut background = worker.watermark >= foreground_until;
    if background {
        run_in_background();
    }
    let fail = |failure: PipelineError| {
        error!(stage = %name, %failure, "stage stopped");
        progress.stop(StageStop::Failed(failure.to_string()));
    };
    let mut committed = worker.watermark;
    // When the oldest fold not yet committed happened; `None` when everything folded is committed.
    let mut oldest_uncommitted: Option<Instant> = None;
    let mut last_yield = Instant::now();
    loop {
        let input = match oldest_uncommitted {
            None => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(since) => queue.recv_deadline(since + delay),
        };
        let commit_now = match input {
            Ok(StageInput::Record(logged)) => {
                let _span = debug_span!("project", stage = %name, position = logged.position.0).entered();
                if let Err(failure) = worker.apply(&logged) {
                    return fail(failure);
                }
                if worker.watermark > committed {
                    oldest_uncommitted.get_or_insert_with(Instant::now);
                }
                // NOTE: yielding every `FOLD_YIELD_INTERVAL` lets a woken log writer or appender
                // run soon. A lower nice value alone does not: the scheduler lets the running thread
                // finish its time slice (a millisecond or more) first, and with 64 appenders on two
                // cores that halved durable append throughput. Yielding after every fold (a few
                // microseconds each in a replay) cost a fifth of a rebuild's time in system calls.
                if !background && worker.watermark >= foreground_until {
                    run_in_background();
                    background = true;
                }
                if background && last_yield.elapsed() >= FOLD_YIELD_INTERVAL {
                    std::thread::yield_now();
                    last_yield = Instant::now();
                }
                let wanted = progress.wanted();
                worker.should_commit() || (wanted > committed && worker.watermark >= wanted)
            }
            Ok(StageInput::ReaderWaits) => progress.wanted() > committed,
            Err(RecvTimeoutError::Timeout) => true,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if commit_now && worker.watermark > committed {
            if let Err(failure) = worker.commit() {
                return fail(failure);
            }
            committed = worker.watermark;
            oldest_uncommitted = None;
            progress.publish(committed);
        }
    }
    // The feeder is gone: commit what is folded so a clean shutdown loses no work.
    match worker.commit() {
        Ok(()) => progress.publish(worker.watermark),
        Err(failure) => fail(failure),
    }
}

/// Folds the log up to `up_to` into `store` with `projector`, on this thread: the in-memory
/// reference that `verify` compares live stages against. It uses the same worker as the runner.
pub fn fold_to(
    log: &dyn LogBackend,
    projector: Box<dyn Projector>,
    store: Arc<dyn StateStore>,
    config_hash: [u8; 32],
    up_to: Position,
) -> Result<Digest, PipelineError> {
    let mut worker = StageWorker::new(projector, Arc::clone(&store), config_hash, Position::ZERO);
    if up_to > Position::ZERO {
        for envelope in log.scan(Position::FIRST) {
            let logged = LoggedRecord::decode(envelope?)?;
            if logged.position > up_to {
                break;
            }
            worker.apply(&logged)?;
            if worker.should_commit() {
                worker.commit()?;
            }
        }
    }
    worker.commit()?;
    projection_digest(store.as_ref())
}
