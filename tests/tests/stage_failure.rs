//! A stage that stops surfaces at once: every reader and appender gets a typed error naming the
//! stage (not the 600 s catch-up timeout), `stats` and `verify` report it, and a rebuild of the
//! stage heals the store. The stage here stops the way a real one does, on stored state it cannot
//! read; a panicking stage is covered at the runner (`mnemo-pipeline`'s `tests/runner.rs`).
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::time::{Duration, Instant};

use mnemo::history::{HistoryContext, HistorySearchRequest};
use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::{Record, SessionArchived, SessionId, StreamId};
use mnemo::stages::{PipelineError, StageStop};
use mnemo::{Config, Error, Mnemo};
use mnemo_log::{FjallLog, LogOptions};
use mnemo_pipeline::{Changes, FjallStore, StateStore};

const TRANSCRIPT: &str = r#"{"kind":"session","session":"s1","workspace":"w1","title":"plans"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"the rollout plan"}]}
"#;

/// Far above a prompt failure on a loaded machine, far below the catch-up timeout.
const PROMPT_BOUND: Duration = Duration::from_secs(60);

fn config() -> Config {
    Config { durability: Durability::Buffered, ..Config::default() }
}

fn archive(mnemo: &Mnemo) -> Result<mnemo::records::Position, Error> {
    let session = SessionId::new("s1").unwrap();
    let record = Record::SessionArchived(SessionArchived { session: session.clone(), archived: true });
    Ok(mnemo.append(&StreamId::session(&session), ExpectedRevision::Any, &[record])?.last_position)
}

fn assert_names_the_stage(error: &Error) {
    match error {
        Error::Pipeline(PipelineError::StageStopped { stage, stop: StageStop::Failed(reason) }) => {
            assert_eq!(stage, "history-messages");
            assert!(reason.contains("damaged"), "{reason}");
        }
        other => panic!("not a stopped stage: {other}"),
    }
}

#[test]
fn a_failed_stage_is_named_to_readers_appenders_stats_and_verify_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), config()).unwrap();
    mnemo.import_transcript(TRANSCRIPT.as_bytes(), "t").unwrap();
    mnemo.close().unwrap();
    // The session's header in `history-messages` becomes bytes the stage cannot decode.
    {
        let log = FjallLog::open(dir.path(), LogOptions::default()).unwrap();
        let store = FjallStore::open(log.database(), "history-messages").unwrap();
        let meta = store.meta().unwrap().unwrap();
        let mut changes = Changes::new();
        changes.insert(b"h\0s1".to_vec(), Some(b"not json".to_vec()));
        store.commit(&changes, &meta).unwrap();
    }
    let mnemo = Mnemo::open(dir.path(), config()).unwrap();
    // Nothing has failed yet: this append is taken, and folding it stops the stage.
    archive(&mnemo).unwrap();

    let started = Instant::now();
    let session = SessionId::new("s1").unwrap();
    assert_names_the_stage(&mnemo.show(&session, None).unwrap_err());
    let search =
        mnemo.search_history(&HistorySearchRequest::new("rollout"), &HistoryContext::default(), None);
    assert_names_the_stage(&search.unwrap_err());
    assert_names_the_stage(&archive(&mnemo).unwrap_err());
    assert!(started.elapsed() < PROMPT_BOUND, "took {:?}", started.elapsed());

    let stats = mnemo.stats().unwrap();
    assert_eq!(stats.sessions, 1, "the other stages still count");
    let stopped: Vec<_> =
        stats.stages.iter().filter(|s| s.stopped.is_some()).map(|s| s.name.as_str()).collect();
    assert_eq!(stopped, ["history-messages"]);
    let json = serde_json::to_value(&stats).unwrap();
    let reported =
        json["stages"].as_array().unwrap().iter().find(|s| s["name"] == "history-messages").unwrap();
    assert_eq!(reported["stopped"]["kind"], "failed", "{reported}");

    let verification = mnemo.verify(&mut |_| {}).unwrap();
    assert!(!verification.ok());
    let failed = verification.stages.iter().find(|s| s.name == "history-messages").unwrap();
    assert!(matches!(failed.stopped, Some(StageStop::Failed(_))), "{failed:?}");
    assert!(verification.stages.iter().filter(|s| s.name != "history-messages").all(|s| s.stopped.is_none()));

    // Rebuilding the stage replays it from the log: readers and appenders work again.
    mnemo.rebuild(Some("history-messages")).unwrap();
    archive(&mnemo).unwrap();
    assert!(mnemo.show(&session, None).unwrap().is_some());
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}
