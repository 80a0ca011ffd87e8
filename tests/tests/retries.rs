//! The retry property: a random stream of appends in which the host retries at random — the same
//! batch sent again, a part of it, later and out of order, and on the shared NATS log through
//! another host — leaves the same log, the same projections (every stage's digest) and the same
//! assembled history as the stream sent once. The NATS case runs when `MNEMO_TEST_NATS_URLS`
//! names a test cluster (CI starts one).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mnemo::compaction::ContextOptions;
use mnemo::log::{ExpectedRevision, ManualClock};
use mnemo::records::{
    Author, EventId, EventStatus, InvocationId, MemoryMode, Position, Record, Role, RunId, RuntimeEvent,
    SessionId, SessionOpened, StreamId, TimestampMs, TurnId,
};
use mnemo::{Config, Error, Mnemo};
use mnemo_acceptance::nats_cluster;
use mnemo_acceptance::sim::{Rng, event_records};
use proptest::prelude::*;

const SESSIONS: usize = 3;

/// One step of the stream: which session, how many events, whether the run ends with it.
#[derive(Debug, Clone)]
struct Step {
    session: usize,
    events: usize,
    ends_run: bool,
}

/// How the host retries a step's batch.
#[derive(Debug, Clone)]
enum Retry {
    /// Sent once.
    Never,
    /// The whole batch again, at once.
    Resend,
    /// Some of its records again (those whose bit is set; at least one), `delay` steps later.
    Partial { mask: u64, delay: usize },
    /// The whole batch again, `delay` steps later.
    Later { delay: usize },
}

fn step() -> impl Strategy<Value = Step> {
    (0..SESSIONS, 1..6usize, prop::bool::weighted(0.3)).prop_map(|(session, events, ends_run)| Step {
        session,
        events,
        ends_run,
    })
}

fn retry() -> impl Strategy<Value = Retry> {
    prop_oneof![
        2 => Just(Retry::Never),
        2 => Just(Retry::Resend),
        2 => (any::<u64>(), 0..4usize).prop_map(|(mask, delay)| Retry::Partial { mask, delay }),
        1 => (1..6usize).prop_map(|delay| Retry::Later { delay }),
    ]
}

fn session_name(index: usize) -> String {
    format!("s{index}")
}

fn stream(session: &str) -> StreamId {
    StreamId::session(&SessionId::new(session).unwrap())
}

/// One batch: the stream it goes to and its records.
#[derive(Debug, Clone)]
struct Batch {
    stream: StreamId,
    records: Vec<Record>,
}

/// The batches of a script: each session's opening, then each step's events of its own run (turn
/// `index`), closed by a terminal event when the step ends its run.
fn batches(seed: u64, steps: &[Step]) -> Vec<Batch> {
    let mut batches: Vec<Batch> = (0..SESSIONS)
        .map(|s| {
            let session = session_name(s);
            let opened = Record::SessionOpened(SessionOpened {
                session: SessionId::new(&session).unwrap(),
                workspace: None,
                incognito: false,
                memory: MemoryMode::Enabled,
                subagent: false,
                title: Some(format!("session {s}")),
                source: None,
                parent: None,
            });
            Batch { stream: stream(&session), records: vec![opened] }
        })
        .collect();
    let mut rng = Rng::new(seed);
    for (index, step) in steps.iter().enumerate() {
        let session = session_name(step.session);
        let turn = index as u64 + 1;
        let mut records = event_records(&mut rng, &session, turn, step.events);
        if step.ends_run {
            let mut end = RuntimeEvent::new(
                EventId::new(format!("{session}:{turn}:end")).unwrap(),
                InvocationId::new(format!("run-{turn}")).unwrap(),
                RunId::new(format!("run-{turn}")).unwrap(),
                SessionId::new(&session).unwrap(),
                TurnId::new(format!("t{turn}")).unwrap(),
                TimestampMs(1_767_225_600_000 + turn * 1000 + 999),
                Role::System,
                Author::System,
            );
            end.status = Some(EventStatus::Completed);
            records.push(Record::RuntimeEvent(end));
        }
        batches.push(Batch { stream: stream(&session), records });
    }
    batches
}

fn config() -> Config {
    Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() }
}

/// Sends a retry: answered as a retry, or, for a session's opening (which has no identity: a
/// retry of it relies on its expected revision), refused as a conflict. Nothing is appended.
fn retry_batch(mnemo: &Mnemo, batch: &Batch, records: &[Record]) {
    let head = mnemo.log().head();
    if matches!(records.first(), Some(Record::SessionOpened(_))) {
        let refused = mnemo.append(&batch.stream, ExpectedRevision::NoStream, records).unwrap_err();
        assert!(matches!(refused, Error::Conflict { .. }), "{refused:?}");
    } else {
        let answered = mnemo.append(&batch.stream, ExpectedRevision::Any, records).unwrap();
        assert_eq!(answered.retried as usize, records.len(), "a retry appends nothing");
    }
    assert_eq!(mnemo.log().head(), head, "a retry appends nothing");
}

fn send(mnemo: &Mnemo, batch: &Batch) {
    let expected = match batch.records.first() {
        Some(Record::SessionOpened(_)) => ExpectedRevision::NoStream,
        _ => ExpectedRevision::Any,
    };
    let appended = mnemo.append(&batch.stream, expected, &batch.records).unwrap();
    assert_eq!(appended.retried, 0);
}

/// The records of `batch` a retry plan re-sends, if any, and when.
fn retried(batch: &Batch, retry: &Retry) -> Option<(usize, Vec<Record>)> {
    match retry {
        Retry::Never => None,
        Retry::Resend => Some((0, batch.records.clone())),
        Retry::Later { delay } => Some((*delay, batch.records.clone())),
        Retry::Partial { mask, delay } => {
            let mut part: Vec<Record> = batch
                .records
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> (i % 64) & 1 == 1)
                .map(|(_, r)| r.clone())
                .collect();
            if part.is_empty() {
                part.push(batch.records[batch.records.len() - 1].clone());
            }
            Some((*delay, part))
        }
    }
}

/// Sends every batch once, and the retries the plan asks for, each retry by `retrier` (the same
/// host, or another host of a shared log) after its delay; the retries still pending at the end go
/// out in reverse order.
fn run(host: &Mnemo, retrier: &Mnemo, batches: &[Batch], retries: &[Retry]) {
    let mut pending: Vec<(usize, usize, Vec<Record>)> = Vec::new();
    for (index, batch) in batches.iter().enumerate() {
        send(host, batch);
        if let Some((delay, records)) = retries.get(index).and_then(|r| retried(batch, r)) {
            pending.push((index + delay, index, records));
        }
        let (due, later): (Vec<_>, Vec<_>) = pending.into_iter().partition(|(at, _, _)| *at <= index);
        pending = later;
        for (_, batch_index, records) in due {
            wait_for(retrier, host.log().head());
            retry_batch(retrier, &batches[batch_index], &records);
        }
    }
    wait_for(retrier, host.log().head());
    for (_, batch_index, records) in pending.into_iter().rev() {
        retry_batch(retrier, &batches[batch_index], &records);
    }
}

fn wait_for(mnemo: &Mnemo, head: Position) {
    assert_eq!(
        mnemo.log().wait_for(head, Duration::from_secs(30)),
        head,
        "the host did not see the log's head"
    );
}

/// What must not change: every envelope, every stage's digest, every session's next request.
type Observed = (Vec<Vec<u8>>, Vec<(String, String)>, Vec<String>);

fn observed(mnemo: &Mnemo) -> Observed {
    let head = mnemo.log().head();
    let envelopes = mnemo.log().scan(Position::FIRST).map(|e| e.unwrap().encode()).collect();
    mnemo.catch_up_to(head).unwrap();
    let digests = mnemo.stats().unwrap().stages.into_iter().map(|s| (s.name, s.digest)).collect();
    let histories = (0..SESSIONS)
        .map(|s| {
            let session = SessionId::new(session_name(s)).unwrap();
            let history = mnemo.compaction().context(&session, &ContextOptions::default()).unwrap();
            format!("{:?}", history.items)
        })
        .collect();
    (envelopes, digests, histories)
}

fn open(dir: &Path) -> Mnemo {
    Mnemo::open(dir, config()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn retried_appends_leave_the_log_projections_and_history_as_sent_once(
        seed in any::<u64>(),
        steps in prop::collection::vec(step(), 1..24),
        retries in prop::collection::vec(retry(), 30),
    ) {
        let batches = batches(seed, &steps);
        let once_dir = tempfile::tempdir().unwrap();
        let once = open(once_dir.path());
        for batch in &batches {
            send(&once, batch);
        }
        let retried_dir = tempfile::tempdir().unwrap();
        let retried = open(retried_dir.path());
        run(&retried, &retried, &batches, &retries);
        let (expected, got) = (observed(&once), observed(&retried));
        prop_assert_eq!(&expected.0, &got.0, "the log differs");
        prop_assert_eq!(&expected.1, &got.1, "a projection differs");
        prop_assert_eq!(&expected.2, &got.2, "an assembled history differs");
        // Reopened, the store still knows every event: the whole stream again is all retries.
        drop(retried);
        let reopened = open(retried_dir.path());
        for batch in batches.iter().skip(SESSIONS) {
            retry_batch(&reopened, batch, &batch.records);
        }
    }
}

/// On a shared NATS log, the retries go through a second host, in another order than the
/// originals: the log, the projections and the histories are the stream's sent once (on a store
/// of its own, with the same clock).
#[test]
fn retries_through_another_host_of_a_shared_log_change_nothing() {
    let Some(urls) = nats_cluster::urls() else { return };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(4));
    let strategy = (any::<u64>(), prop::collection::vec(step(), 1..16), prop::collection::vec(retry(), 20));
    runner
        .run(&strategy, |(seed, steps, retries)| {
            let batches = batches(seed, &steps);
            let once_dir = tempfile::tempdir().unwrap();
            let once = open(once_dir.path());
            for batch in &batches {
                send(&once, batch);
            }
            let name = nats_cluster::fresh_stream("retries");
            let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
            let host = nats_host(&urls, &name, dirs[0].path());
            let other = nats_host(&urls, &name, dirs[1].path());
            run(&host, &other, &batches, &retries);
            let (expected, got) = (observed(&once), observed(&host));
            prop_assert_eq!(&expected.0, &got.0, "the shared log differs");
            prop_assert_eq!(&expected.1, &got.1, "a projection differs");
            prop_assert_eq!(&expected.2, &got.2, "an assembled history differs");
            wait_for(&other, host.log().head());
            prop_assert_eq!(&expected, &observed(&other), "the other host sees another log");
            Ok(())
        })
        .unwrap();
}

/// A store following the shared log `stream`, with the reference store's clock: the host that
/// appends the originals stamps them as the reference does.
fn nats_host(urls: &str, stream: &str, dir: &Path) -> Mnemo {
    let location = mnemo::log::LogLocation::parse(&format!("{urls}/{stream}")).unwrap();
    Mnemo::open(dir, Config { log: Some(location), ..config() }).unwrap()
}

/// Two hosts of a shared log send the same events at the same moment (a host and its failover
/// both retrying): the events land once, and one host is answered with the other's positions.
#[test]
fn the_same_events_from_two_hosts_at_once_land_once() {
    let Some(urls) = nats_cluster::urls() else { return };
    let name = nats_cluster::fresh_stream("twice");
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let hosts = [
        Arc::new(nats_host(&urls, &name, dirs[0].path())),
        Arc::new(nats_host(&urls, &name, dirs[1].path())),
    ];
    let batches = batches(11, &[Step { session: 0, events: 5, ends_run: true }]);
    send(&hosts[0], &batches[0]);
    wait_for(&hosts[1], hosts[0].log().head());
    let events = batches[SESSIONS].clone();
    let answers: Vec<_> = hosts
        .iter()
        .map(|host| {
            let (host, events) = (Arc::clone(host), events.clone());
            std::thread::spawn(move || {
                host.append(&events.stream, ExpectedRevision::Any, &events.records).unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|worker| worker.join().unwrap())
        .collect();
    let retried: u32 = answers.iter().map(|a| a.retried).sum();
    assert_eq!(
        retried as usize,
        events.records.len(),
        "one host stored them, the other was answered: {answers:?}"
    );
    assert_eq!(answers[0].first_position, answers[1].first_position);
    assert_eq!(answers[0].last_position, answers[1].last_position);
    let head = Position(1 + events.records.len() as u64);
    wait_for(&hosts[1], head);
    assert_eq!(hosts[0].log().head(), head);
}
