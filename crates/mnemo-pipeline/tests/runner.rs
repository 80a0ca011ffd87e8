//! The runner, stores and specs through the public API, on a real log.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;
use std::time::Duration;

use mnemo_core::{Position, Record, SessionArchived, SessionId, StreamId};
use mnemo_log::{AppendRequest, ExpectedRevision, FjallLog, LogBackend, LogOptions, NewRecord};
use mnemo_pipeline::{
    FjallStore, LIVE_COMMIT_DELAY, LoggedRecord, MemoryStore, Pipeline, PipelineError, PipelineSpec,
    Projector, Stage, StageRegistry, StageStop, StateStore, StateTxn, fold_to, projection_digest,
};

/// Counts records per stream; `fail_at` makes it refuse one position, `panic_at` panic at one;
/// `delay` slows it down.
#[derive(Debug, Clone)]
struct Counter {
    name: &'static str,
    version: u32,
    fail_at: Option<Position>,
    panic_at: Option<Position>,
    delay: Duration,
}

impl Counter {
    fn new(name: &'static str) -> Self {
        Counter { name, version: 1, fail_at: None, panic_at: None, delay: Duration::ZERO }
    }
}

impl Projector for Counter {
    fn name(&self) -> &str {
        self.name
    }
    fn version(&self) -> u32 {
        self.version
    }
    fn apply(&mut self, state: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError> {
        if Some(logged.position) == self.fail_at {
            return Err(PipelineError::Projection {
                stage: self.name.to_owned(),
                position: logged.position,
                reason: "refused on purpose".to_owned(),
            });
        }
        assert!(Some(logged.position) != self.panic_at, "panicked on purpose at {}", logged.position);
        std::thread::sleep(self.delay);
        let key = logged.stream.as_str().as_bytes().to_vec();
        let count = state.get(&key)?.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
        state.put(key, (count + 1).to_be_bytes().to_vec());
        state.put(b"version".to_vec(), self.version.to_be_bytes().to_vec());
        Ok(())
    }
}

fn append(log: &FjallLog, session: &str, count: usize) -> Position {
    let session_id = SessionId::new(session).unwrap();
    let record = Record::SessionArchived(SessionArchived { session: session_id.clone(), archived: true });
    let kind = record.kind();
    let records = (0..count)
        .map(|_| NewRecord::new(kind.code(), kind.schema_version(), record.encode().unwrap()))
        .collect();
    let request = AppendRequest::new(StreamId::session(&session_id), ExpectedRevision::Any, records);
    match log.append(request).unwrap() {
        mnemo_log::AppendOutcome::Appended(appended) => appended.last_position,
        other => panic!("{other:?}"),
    }
}

fn count(store: &dyn StateStore, session: &str) -> u64 {
    store
        .get(format!("session/{session}").as_bytes())
        .unwrap()
        .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()))
}

fn start(log: &Arc<FjallLog>, projectors: Vec<(Counter, [u8; 32])>) -> (Pipeline, Vec<Arc<dyn StateStore>>) {
    start_with(log, projectors, LIVE_COMMIT_DELAY)
}

fn start_with(
    log: &Arc<FjallLog>,
    projectors: Vec<(Counter, [u8; 32])>,
    live_commit_delay: Duration,
) -> (Pipeline, Vec<Arc<dyn StateStore>>) {
    let mut stages = Vec::new();
    let mut stores = Vec::new();
    for (projector, config_hash) in projectors {
        let store: Arc<dyn StateStore> = Arc::new(FjallStore::open(log.database(), projector.name).unwrap());
        stores.push(Arc::clone(&store));
        stages.push(Stage { projector: Box::new(projector), store, config_hash });
    }
    let pipeline = Pipeline::start_with(Arc::clone(log) as Arc<dyn LogBackend>, stages, live_commit_delay);
    (pipeline.unwrap(), stores)
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn stages_follow_the_log_and_queries_can_wait_for_their_writes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let (pipeline, stores) = start(&log, vec![(Counter::new("count"), [0; 32])]);
    let last = append(&log, "a", 3);
    pipeline.wait_until("count", last, WAIT).unwrap();
    assert_eq!(count(stores[0].as_ref(), "a"), 3);
    let last = append(&log, "a", 2);
    pipeline.wait_until("count", last, WAIT).unwrap();
    assert_eq!(count(stores[0].as_ref(), "a"), 5);
    assert_eq!(stores[0].meta().unwrap().map(|m| m.watermark), Some(last));

    let error = pipeline.wait_until("count", Position(last.0 + 1), Duration::from_millis(50)).unwrap_err();
    assert!(matches!(error, PipelineError::Timeout { reached, .. } if reached == last), "{error}");
    assert!(matches!(pipeline.wait_until("nope", last, WAIT), Err(PipelineError::UnknownStage(_))));
}

#[test]
fn a_waiting_reader_makes_the_stage_commit_what_it_has_folded_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    // No commit falls due by time within the test: only the reader's wait can make one.
    let (pipeline, stores) =
        start_with(&log, vec![(Counter::new("count"), [0; 32])], Duration::from_secs(3600));
    for round in 1..=3 {
        let last = append(&log, "a", 2);
        // Most likely folded by now, so the wait below must nudge the stage rather than be seen
        // by it after its next fold (a stage that has not folded yet commits either way).
        std::thread::sleep(Duration::from_millis(100));
        pipeline.wait_until("count", last, WAIT).unwrap();
        assert_eq!(count(stores[0].as_ref(), "a"), 2 * round);
        assert_eq!(stores[0].meta().unwrap().map(|m| m.watermark), Some(last));
    }
}

#[test]
fn folded_records_are_committed_without_a_reader_after_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let (pipeline, stores) = start(&log, vec![(Counter::new("count"), [0; 32])]);
    let last = append(&log, "a", 3);
    // Polls the committed state only: nothing here waits through the pipeline.
    let deadline = std::time::Instant::now() + WAIT;
    while stores[0].meta().unwrap().map(|m| m.watermark) != Some(last) {
        assert!(std::time::Instant::now() < deadline, "the stage never committed position {last}");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(count(stores[0].as_ref(), "a"), 3);
    assert_eq!(pipeline.status()[0].watermark, last);
}

#[test]
fn a_new_projector_version_or_config_rebuilds_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let last = append(&log, "a", 4);
    {
        let (pipeline, _) = start(&log, vec![(Counter::new("count"), [0; 32])]);
        pipeline.wait_until("count", last, WAIT).unwrap();
    }
    // Same version and config: the stage resumes, it does not refold (the count stays 4).
    let (pipeline, stores) = start(&log, vec![(Counter::new("count"), [0; 32])]);
    pipeline.wait_until("count", last, WAIT).unwrap();
    assert_eq!(count(stores[0].as_ref(), "a"), 4);
    drop(pipeline);

    let v2 = Counter { version: 2, ..Counter::new("count") };
    let (pipeline, stores) = start(&log, vec![(v2, [0; 32])]);
    pipeline.wait_until("count", last, WAIT).unwrap();
    assert_eq!(count(stores[0].as_ref(), "a"), 4, "rebuilt from zero, not added on top");
    assert_eq!(stores[0].get(b"version").unwrap(), Some(2u32.to_be_bytes().to_vec()));
    assert_eq!(stores[0].meta().unwrap().map(|m| m.version), Some(2));
    drop(pipeline);

    let (pipeline, stores) = start(&log, vec![(Counter { version: 2, ..Counter::new("count") }, [7; 32])]);
    pipeline.wait_until("count", last, WAIT).unwrap();
    assert_eq!(count(stores[0].as_ref(), "a"), 4);
    assert_eq!(stores[0].meta().unwrap().map(|m| m.config_hash), Some([7; 32]));
}

#[test]
fn a_failing_stage_stops_with_its_reason_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let failing = Counter { fail_at: Some(Position(3)), ..Counter::new("failing") };
    let (pipeline, stores) = start(&log, vec![(failing, [0; 32]), (Counter::new("healthy"), [0; 32])]);
    let last = append(&log, "a", 5);
    pipeline.wait_until("healthy", last, WAIT).unwrap();
    let error = pipeline.wait_until("failing", last, WAIT).unwrap_err();
    assert!(error.to_string().contains("refused on purpose"), "{error}");
    // The failed stage kept only what it committed before the failure.
    assert!(stores[0].meta().unwrap().is_none_or(|m| m.watermark < Position(3)));
    assert_eq!(count(stores[1].as_ref(), "a"), 5);
}

/// How long a reader is prepared to wait in the tests below: the facade's catch-up timeout. A wait
/// that fails at once fails long before it.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(600);

/// A bound far above a prompt failure on a loaded machine, far below the catch-up timeout.
const PROMPT_BOUND: Duration = Duration::from_secs(60);

#[test]
fn a_stage_that_panics_fails_every_waiting_reader_at_once_naming_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let panicky = Counter { panic_at: Some(Position(3)), ..Counter::new("panicky") };
    let (pipeline, stores) = start(&log, vec![(panicky, [0; 32]), (Counter::new("healthy"), [0; 32])]);
    let last = append(&log, "a", 5);
    let started = std::time::Instant::now();
    let readers: Vec<_> = std::thread::scope(|scope| {
        let waits: Vec<_> =
            (0..3).map(|_| scope.spawn(|| pipeline.wait_until("panicky", last, CATCH_UP_TIMEOUT))).collect();
        waits.into_iter().map(|wait| wait.join().unwrap()).collect()
    });
    for error in readers {
        match error.unwrap_err() {
            PipelineError::StageStopped { stage, stop: StageStop::Panicked(message) } => {
                assert_eq!(stage, "panicky");
                assert!(message.contains("panicked on purpose at 3"), "{message}");
            }
            other => panic!("not a stopped stage: {other}"),
        }
    }
    assert!(started.elapsed() < PROMPT_BOUND, "the readers waited {:?}", started.elapsed());
    let error = pipeline.wait_until("panicky", Position(1), CATCH_UP_TIMEOUT).unwrap_err();
    assert_eq!(error.to_string(), "stage panicky has stopped: its thread panicked: panicked on purpose at 3");
    assert!(
        matches!(pipeline.check_running(), Err(PipelineError::StageStopped { stage, .. }) if stage == "panicky")
    );
    let status = pipeline.status();
    assert!(matches!(&status[0].stopped, Some(StageStop::Panicked(_))), "{status:?}");
    assert_eq!(status[1].stopped, None);
    // The other stage goes on, and the panicked one kept what it committed before.
    pipeline.wait_until("healthy", last, WAIT).unwrap();
    assert_eq!(count(stores[1].as_ref(), "a"), 5);
    assert!(stores[0].meta().unwrap().is_none_or(|m| m.watermark < Position(3)));
}

#[test]
fn a_shut_down_pipeline_refuses_waits_for_positions_it_never_reached() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let (mut pipeline, _stores) = start(&log, vec![(Counter::new("count"), [0; 32])]);
    let last = append(&log, "a", 2);
    pipeline.wait_until("count", last, WAIT).unwrap();
    pipeline.shutdown();
    // What was committed stays readable; a later position will never come.
    pipeline.wait_until("count", last, WAIT).unwrap();
    let started = std::time::Instant::now();
    let error = pipeline.wait_until("count", last.next(), CATCH_UP_TIMEOUT).unwrap_err();
    assert!(
        matches!(&error, PipelineError::StageStopped { stage, stop: StageStop::ShutDown } if stage == "count"),
        "{error}"
    );
    assert!(started.elapsed() < PROMPT_BOUND);
    assert!(pipeline.check_running().is_ok(), "a shut-down pipeline has not failed");
}

#[test]
fn a_slow_stage_applies_back_pressure_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let total = mnemo_pipeline::STAGE_QUEUE_DEPTH_MAX * 2 + 17;
    let mut last = Position::ZERO;
    for _ in 0..total / 500 + 1 {
        last = append(&log, "bulk", 500.min(total - last.0 as usize));
        if last.0 as usize >= total {
            break;
        }
    }
    let slow = Counter { delay: Duration::from_micros(20), ..Counter::new("slow") };
    let (pipeline, stores) = start(&log, vec![(slow, [0; 32]), (Counter::new("fast"), [0; 32])]);
    pipeline.wait_all(last, WAIT).unwrap();
    assert_eq!(count(stores[0].as_ref(), "bulk"), total as u64);
    assert_eq!(count(stores[1].as_ref(), "bulk"), total as u64);
}

#[test]
fn the_reference_fold_equals_the_live_stage() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let (pipeline, stores) = start(&log, vec![(Counter::new("count"), [0; 32])]);
    append(&log, "a", 3);
    append(&log, "b", 2);
    let last = append(&log, "a", 1);
    pipeline.wait_until("count", last, WAIT).unwrap();
    let live = projection_digest(stores[0].as_ref()).unwrap();
    let reference =
        fold_to(log.as_ref(), Box::new(Counter::new("count")), Arc::new(MemoryStore::new()), [0; 32], last)
            .unwrap();
    assert_eq!(live, reference);
    let earlier = fold_to(
        log.as_ref(),
        Box::new(Counter::new("count")),
        Arc::new(MemoryStore::new()),
        [0; 32],
        Position(2),
    )
    .unwrap();
    assert_ne!(live, earlier, "folding to an earlier position gives an earlier state");
}

#[test]
fn specs_name_what_is_wrong() {
    let registry = StageRegistry::with_builtin();
    let default = PipelineSpec::default_spec().unwrap();
    assert_eq!(default.stages[0].name, "session-catalog");
    assert!(registry.build(&default.stages[0]).is_ok());

    let cases = [
        ("[[stage]]\nname = \"a\"\n[[stage]]\nname = \"a\"\n", "listed twice"),
        ("[[stage]]\nname = \"Bad Name\"\n", "must be 1..=64 of a-z"),
        ("[[stage]]\nname = \"a\"\ncolour = 1\n", "unknown field `colour`"),
        ("stages = 3\n", "unknown field `stages`"),
    ];
    for (text, expected) in cases {
        let error = PipelineSpec::parse(text, "test.toml").unwrap_err();
        assert!(error.to_string().contains("test.toml") && error.to_string().contains(expected), "{error}");
    }
    let unknown = PipelineSpec::parse("[[stage]]\nname = \"no-such-stage\"\n", "t.toml").unwrap();
    let error = registry.build(&unknown.stages[0]).unwrap_err();
    assert!(error.to_string().contains("known stages: session-catalog"), "{error}");
    let configured =
        PipelineSpec::parse("[[stage]]\nname = \"session-catalog\"\n[stage.config]\nx = 1\n", "t.toml")
            .unwrap();
    assert!(
        registry.build(&configured.stages[0]).unwrap_err().to_string().contains("takes no configuration")
    );
    assert_ne!(configured.stages[0].config_hash().unwrap(), default.stages[0].config_hash().unwrap());
}

#[test]
fn transactions_see_their_own_changes_over_the_committed_state() {
    let store = MemoryStore::new();
    let mut committed = mnemo_pipeline::Changes::new();
    committed.insert(b"k1".to_vec(), Some(b"old".to_vec()));
    committed.insert(b"k2".to_vec(), Some(b"keep".to_vec()));
    let meta = mnemo_pipeline::StageMeta { watermark: Position(1), version: 1, config_hash: [0; 32] };
    store.commit(&committed, &meta).unwrap();

    let mut changes = mnemo_pipeline::Changes::new();
    let mut txn = StateTxn::new(&store, &mut changes);
    txn.put(b"k1".to_vec(), b"new".to_vec());
    txn.delete(b"k2".to_vec());
    txn.put(b"k3".to_vec(), b"added".to_vec());
    assert_eq!(txn.get(b"k1").unwrap(), Some(b"new".to_vec()));
    assert_eq!(txn.get(b"k2").unwrap(), None);
    let keys: Vec<_> = txn.scan_prefix(b"k").unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![b"k1".to_vec(), b"k3".to_vec()]);
    // Nothing reaches the store until the commit.
    assert_eq!(store.get(b"k2").unwrap(), Some(b"keep".to_vec()));
}

/// Each folded position with the nice value of the thread that folded it.
#[cfg(target_os = "linux")]
type NiceValues = Arc<std::sync::Mutex<Vec<(Position, i32)>>>;

/// Records the nice value of the thread that folds each position.
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct NiceRecorder(NiceValues);

#[cfg(target_os = "linux")]
impl Projector for NiceRecorder {
    fn name(&self) -> &str {
        "nice"
    }
    fn version(&self) -> u32 {
        1
    }
    fn apply(&mut self, _: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError> {
        let nice = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        self.0.lock().unwrap().push((logged.position, nice));
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn fold_nice_values(log: &Arc<FjallLog>, replay_until: Option<Position>) -> (Pipeline, NiceValues) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
    let stages =
        vec![Stage { projector: Box::new(NiceRecorder(Arc::clone(&seen))), store, config_hash: [0; 32] }];
    let log = Arc::clone(log) as Arc<dyn LogBackend>;
    let pipeline = match replay_until {
        Some(until) => Pipeline::start_replay(log, stages, until),
        None => Pipeline::start(log, stages),
    };
    (pipeline.unwrap(), seen)
}

/// A rebuild nobody appends beside folded at nice 10 like live folding: on a busy machine it got a
/// tenth of the processor time of the scan it is measured against.
#[cfg(target_os = "linux")]
#[test]
fn a_replay_folds_at_the_hosts_priority_until_it_has_caught_up_then_in_the_background() {
    let host = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
    if host + mnemo_pipeline::PIPELINE_NICE_INCREMENT > 19 {
        // The background nice value would be clamped: nothing to tell apart.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), LogOptions::default()).unwrap());
    let replayed = append(&log, "a", 50);
    let (pipeline, seen) = fold_nice_values(&log, Some(replayed));
    pipeline.wait_until("nice", replayed, WAIT).unwrap();
    let live = append(&log, "a", 1);
    pipeline.wait_until("nice", live, WAIT).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 51);
    for (position, nice) in &seen {
        let expected =
            if *position <= replayed { host } else { host + mnemo_pipeline::PIPELINE_NICE_INCREMENT };
        assert_eq!(*nice, expected, "position {position}");
    }

    // A live pipeline folds everything in the background, its catch-up included.
    let (pipeline, seen) = fold_nice_values(&log, None);
    pipeline.wait_until("nice", live, WAIT).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 51);
    assert!(seen.iter().all(|(_, nice)| *nice == host + mnemo_pipeline::PIPELINE_NICE_INCREMENT), "{seen:?}");
}
