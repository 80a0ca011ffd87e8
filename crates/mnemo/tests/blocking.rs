//! The blocking contract: an async call that waits (here for the log to reach a position) does not
//! hold up the other tasks of the runtime worker it runs on.

use std::sync::Arc;
use std::time::Duration;

use mnemo::compaction::{CompactOptions, MidTurnOptions, MidTurnOutcome};
use mnemo::records::{EventId, Position, SessionId, TurnId};
use mnemo::{Config, Mnemo};

#[test]
fn an_async_call_waiting_for_the_log_does_not_hold_up_its_runtime_worker() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Arc::new(Mnemo::open(dir.path(), Config::default()).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mut request = MidTurnOptions::new(TurnId::new("t1").unwrap(), EventId::new("e1").unwrap(), 1_000);
    // A position the log never reaches: the call waits the whole `ledger_wait`, then fails open.
    request.durable_through = Some(Position(mnemo.log().head().0 + 1));
    request.ledger_wait = Duration::from_secs(2);
    let waiting = {
        let mnemo = Arc::clone(&mnemo);
        runtime.spawn(async move {
            let session = SessionId::new("s1").unwrap();
            mnemo.compaction().compact_mid_turn(&session, &request, &CompactOptions::default()).await
        })
    };
    // Give the runtime's only worker time to start the waiting call before anything else is queued.
    std::thread::sleep(Duration::from_millis(200));
    let other = runtime.spawn(async {});
    runtime.block_on(other).unwrap();
    assert!(!waiting.is_finished(), "another task ran only after the waiting call had given up");
    let outcome = runtime.block_on(waiting).unwrap().unwrap();
    assert_eq!(
        outcome,
        MidTurnOutcome::FailOpen {
            detail: "no_safe_completed_span",
            reason: "ledger_wait_aborted".to_owned()
        }
    );
}
