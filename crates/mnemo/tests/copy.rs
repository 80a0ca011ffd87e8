//! Conversation copy at any size and by turn (events-and-history.md §4, decision 0147): a copy is
//! one atomic append whatever the session's length, slices by turn membership, returns the committed
//! copy when retried, and refuses archived families and continuation runs with typed reasons.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use mnemo::compaction::{CompactionError, CopyRefusal};
use mnemo::log::ExpectedRevision;
use mnemo::records::{CopyBoundary, Record, RuntimeEvent, SessionArchived, SessionId, StreamId, TurnId};
use mnemo::{Config, Error, Mnemo};
use serde_json::json;

const SESSION: &str = "s-copy";

fn sid() -> SessionId {
    SessionId::new(SESSION).unwrap()
}

fn turn(id: &str) -> TurnId {
    TurnId::new(id).unwrap()
}

fn open(dir: &std::path::Path) -> Mnemo {
    Mnemo::open(&dir.join("store"), Config::default()).unwrap()
}

/// `turns` turns of four events each (request, call, result, reply) in the mnemo transcript format.
fn turns_jsonl(turns: usize) -> String {
    let mut out = format!("{{\"kind\":\"session\",\"session\":\"{SESSION}\",\"title\":\"long\"}}\n");
    for i in 0..turns {
        let t = format!("t{i:05}");
        out.push_str(&format!(
            "{{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"Turn {i}: run the tests of crate_{i}\"}}]}}\n\
             {{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"tool_call\",\"id\":\"c{i}\",\"name\":\"shell\",\"args\":{{\"cmd\":\"cargo test -p crate_{i}\"}}}}]}}\n\
             {{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"tool\",\"parts\":[{{\"type\":\"tool_result\",\"id\":\"c{i}\",\"name\":\"shell\",\"result\":\"ok: {i} passed\"}}]}}\n\
             {{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"text\",\"text\":\"crate_{i} passes.\"}}]}}\n"
        ));
    }
    out
}

fn event(id: &str, turn: &str, run: &str, text: &str, extra: serde_json::Value) -> Record {
    let mut value = json!({"id": id, "invocationId": format!("i-{run}"), "runId": run, "sessionId": SESSION,
        "turnId": turn, "ts": 1_767_225_600_000u64, "partial": false, "role": "user", "author": "user",
        "content": {"kind": "text", "text": text}});
    value.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    Record::RuntimeEvent(serde_json::from_value::<RuntimeEvent>(value).unwrap())
}

fn append(mnemo: &Mnemo, session: &SessionId, records: &[Record]) {
    let appended = mnemo.append(&StreamId::session(session), ExpectedRevision::Any, records).unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
}

fn refusal(error: Error) -> CopyRefusal {
    match error {
        Error::Compaction(CompactionError::CopyRefused(refusal)) => refusal,
        other => panic!("not a copy refusal: {other:?}"),
    }
}

fn texts(mnemo: &Mnemo, session: &SessionId) -> Vec<String> {
    let transcript = mnemo.history().transcript(session, None).unwrap().unwrap();
    transcript.messages.into_iter().map(|m| m.text).collect()
}

#[test]
fn a_ten_thousand_event_session_copies_atomically_and_a_retry_returns_the_same_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(turns_jsonl(2_500).as_bytes(), "long").unwrap();
    let target = SessionId::new("s-copy-branch").unwrap();
    let report = mnemo.compaction().copy(&sid(), None, Some(target.clone())).unwrap();
    assert_eq!(report.events, 10_000);
    assert_eq!(report.session, target);
    assert!(report.positions.1.0 - report.positions.0.0 + 1 > 10_000, "one append holds the whole copy");
    assert_eq!(texts(&mnemo, &target), texts(&mnemo, &sid()));
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());

    let head = mnemo.log().head();
    let again = mnemo.compaction().copy(&sid(), None, Some(target.clone())).unwrap();
    assert_eq!(again, report, "a retried copy returns the committed copy");
    assert_eq!(mnemo.log().head(), head, "and appends nothing");
}

#[test]
fn a_retried_copy_returns_the_committed_copy_even_after_the_source_grew() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(turns_jsonl(3).as_bytes(), "short").unwrap();
    let target = SessionId::new("s-copy-retry").unwrap();
    let through = Some(CopyBoundary::ThroughTurn(turn("t00001")));
    let report = mnemo.compaction().copy(&sid(), through.clone(), Some(target.clone())).unwrap();
    assert_eq!(report.events, 8);
    let whole = SessionId::new("s-copy-whole").unwrap();
    let whole_report = mnemo.compaction().copy(&sid(), None, Some(whole.clone())).unwrap();
    append(&mnemo, &sid(), &[event("late", "t00009", "r9", "a new turn after the copies", json!({}))]);
    assert_eq!(mnemo.compaction().copy(&sid(), through.clone(), Some(target.clone())).unwrap(), report);
    assert_eq!(mnemo.compaction().copy(&sid(), None, Some(whole.clone())).unwrap(), whole_report);

    // Another boundary, another source, or a session that is not a copy: a typed conflict.
    let other =
        mnemo.compaction().copy(&sid(), Some(CopyBoundary::ThroughTurn(turn("t00002"))), Some(target));
    assert_eq!(refusal(other.unwrap_err()).code(), "target_exists");
    let error = mnemo.compaction().copy(&whole, None, Some(sid())).unwrap_err();
    assert_eq!(error.category(), mnemo::ErrorCategory::Conflict);
    assert_eq!(refusal(error).code(), "target_exists");
}

#[test]
fn the_same_copy_made_twice_at_once_returns_one_committed_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(turns_jsonl(50).as_bytes(), "racing").unwrap();
    // Two hosts retry the same copy at the same moment: both find no target, both append, the log
    // takes one; the other is answered with the committed copy instead of a revision conflict.
    for round in 0..4 {
        let target = SessionId::new(format!("s-copy-race-{round}")).unwrap();
        let start = std::sync::Barrier::new(2);
        let copies: Vec<_> = std::thread::scope(|scope| {
            let copy = || {
                start.wait();
                mnemo.compaction().copy(&sid(), None, Some(target.clone()))
            };
            let workers = [scope.spawn(copy), scope.spawn(copy)];
            workers.map(|worker| worker.join().unwrap()).into_iter().collect()
        });
        let [first, second] = [&copies[0], &copies[1]].map(|copy| match copy {
            Ok(report) => report.clone(),
            Err(error) => panic!("round {round}: a racing copy failed: {error:?}"),
        });
        assert_eq!(first, second, "round {round}: both copies answer the one committed copy");
        assert_eq!(first.events, 200);
    }
}

#[test]
fn a_copy_through_a_turn_keeps_its_events_logged_after_the_next_turn_began() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    append(
        &mnemo,
        &sid(),
        &[
            event("e1", "turn-1", "r1", "first request", json!({})),
            event("e2", "turn-2", "r2", "second request", json!({})),
            // A turn-1 event (a late tool result, a steering note) logged after turn 2 began.
            event("e3", "turn-1", "r1", "late part of turn one", json!({})),
            event("e4", "turn-2", "r2", "more of turn two", json!({})),
        ],
    );
    for boundary in [CopyBoundary::ThroughTurn(turn("turn-1")), CopyBoundary::BeforeTurn(turn("turn-2"))] {
        let report = mnemo.compaction().copy(&sid(), Some(boundary), None).unwrap();
        assert_eq!(report.events, 2);
        assert_eq!(texts(&mnemo, &report.session), ["first request", "late part of turn one"]);
    }
    let missing = mnemo.compaction().copy(&sid(), Some(CopyBoundary::ThroughTurn(turn("turn-9"))), None);
    assert_eq!(refusal(missing.unwrap_err()).code(), "source_turn_not_found");
}

#[test]
fn copies_of_archived_families_and_continuation_runs_are_refused_with_typed_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    append(
        &mnemo,
        &sid(),
        &[
            event("e1", "turn-1", "r1", "first request", json!({})),
            event("e2", "turn-2", "r2", "second request", json!({})),
        ],
    );
    // A revision (a copy before a turn) joins the source's revision family; archiving it archives a
    // member of the family, and the source can no longer be copied.
    let revision =
        mnemo.compaction().copy(&sid(), Some(CopyBoundary::BeforeTurn(turn("turn-2"))), None).unwrap();
    let archive = |archived: bool| {
        let record = Record::SessionArchived(SessionArchived { session: revision.session.clone(), archived });
        append(&mnemo, &revision.session, &[record]);
    };
    archive(true);
    let error = mnemo.compaction().copy(&sid(), None, None).unwrap_err();
    assert_eq!(error.category(), mnemo::ErrorCategory::Conflict);
    assert_eq!(refusal(error), CopyRefusal::ArchivedFamily { member: revision.session.clone() });
    archive(false);
    mnemo.compaction().copy(&sid(), None, None).unwrap();

    // A run that continues another run cannot be copied.
    append(
        &mnemo,
        &sid(),
        &[event(
            "e3",
            "turn-3",
            "r3",
            "continue where the other run stopped",
            json!({"refs": {"sourceRunId": "r2", "sourceInvocationId": "i-r2", "sourceTurnId": "turn-2"}}),
        )],
    );
    let error = mnemo.compaction().copy(&sid(), None, None).unwrap_err();
    let refusal = refusal(error);
    assert_eq!(refusal.code(), "branch_runtime_fact_rewrite_unsupported");
    assert!(matches!(&refusal, CopyRefusal::ContinuationRun { run } if run.as_str() == "r3"), "{refusal:?}");
    // A copy before the continuing turn carries no continuation and is made.
    let before =
        mnemo.compaction().copy(&sid(), Some(CopyBoundary::BeforeTurn(turn("turn-3"))), None).unwrap();
    assert_eq!(before.events, 2);
}
