//! The NATS log on a real JetStream cluster: appends, conflicts across hosts, replay, tailing.
//! Skipped (with a printed reason) when `MNEMO_TEST_NATS_URLS` is unset.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use mnemo_core::{Position, StreamRevision};
use mnemo_log::{AppendOutcome, ExpectedRevision, LogBackend, RevisionConflict};
use support::{append, appended, cluster, fresh_stream, open, stream};

#[test]
fn two_hosts_share_positions_revisions_and_the_chain() {
    let Some(urls) = cluster() else { return };
    let name = fresh_stream("share");
    let a = open(&urls, &name);
    let b = open(&urls, &name);

    let first = appended(append(&a, "session/s1", ExpectedRevision::NoStream, &["a1", "a2"]));
    assert_eq!(
        (first.first_position, first.last_position, first.last_revision),
        (Position(1), Position(2), StreamRevision(1))
    );
    // Host b has not necessarily folded a's append yet; its append is decided on the server's head.
    let second = appended(append(&b, "session/s1", ExpectedRevision::Exact(StreamRevision(1)), &["b1"]));
    assert_eq!((second.first_position, second.last_revision), (Position(3), StreamRevision(2)));
    let other = appended(append(&b, "session/s2", ExpectedRevision::NoStream, &["b2"]));
    assert_eq!(other.first_position, Position(4));

    // a's stale expectation is a conflict carrying the actual revision, not an error.
    let stale = append(&a, "session/s1", ExpectedRevision::Exact(StreamRevision(1)), &["late"]);
    assert_eq!(
        stale,
        AppendOutcome::Conflict(RevisionConflict {
            expected: ExpectedRevision::Exact(StreamRevision(1)),
            actual: Some(StreamRevision(2))
        })
    );
    let exists = append(&b, "session/s2", ExpectedRevision::NoStream, &["again"]);
    assert!(
        matches!(exists, AppendOutcome::Conflict(RevisionConflict { actual: Some(StreamRevision(0)), .. })),
        "{exists:?}"
    );

    for log in [&a, &b] {
        assert_eq!(log.wait_for(Position(4), Duration::from_secs(10)), Position(4));
        assert_eq!(log.verify_chain(&mut |_| {}).unwrap(), 4);
        let s1 = log.read_stream(&stream("session/s1"), StreamRevision(1), 10).unwrap();
        assert_eq!(s1.iter().map(|e| e.record.as_slice()).collect::<Vec<_>>(), vec![b"a2".as_slice(), b"b1"]);
        assert_eq!(log.stream_head(&stream("session/s2")).unwrap().unwrap().position, Position(4));
        assert_eq!(log.read(Position(3)).unwrap().unwrap().record, b"b1");
        assert!(log.read(Position(5)).unwrap().is_none());
    }
    let hashes =
        |log: &dyn LogBackend| log.scan(Position::FIRST).map(|e| e.unwrap().hash).collect::<Vec<_>>();
    assert_eq!(hashes(&a), hashes(&b));
}

#[test]
fn concurrent_hosts_append_without_gaps_or_duplicates() {
    let Some(urls) = cluster() else { return };
    let name = fresh_stream("race");
    let hosts: Vec<Arc<_>> = (0..2).map(|_| Arc::new(open(&urls, &name))).collect();
    let per_host = 40;
    let workers: Vec<_> = hosts
        .iter()
        .enumerate()
        .map(|(h, log)| {
            let log = Arc::clone(log);
            std::thread::spawn(move || {
                for i in 0..per_host {
                    // Both hosts write to a shared stream and to their own.
                    let shared = format!("h{h}-shared-{i}");
                    appended(append(log.as_ref(), "session/shared", ExpectedRevision::Any, &[&shared]));
                    let own = format!("h{h}-own-{i}");
                    appended(append(log.as_ref(), &format!("session/h{h}"), ExpectedRevision::Any, &[&own]));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let total = 2 * 2 * per_host as u64;
    for log in &hosts {
        assert_eq!(log.wait_for(Position(total), Duration::from_secs(10)), Position(total));
        assert_eq!(log.verify_chain(&mut |_| {}).unwrap(), total);
        let shared = log.read_stream(&stream("session/shared"), StreamRevision::FIRST, 1000).unwrap();
        assert_eq!(shared.len(), 2 * per_host);
        assert!(shared.iter().enumerate().all(|(i, e)| e.revision == StreamRevision(i as u64)));
    }
}

#[test]
fn concurrent_appends_of_one_host_are_pipelined_in_order_with_conflicts_kept() {
    let Some(urls) = cluster() else { return };
    let name = fresh_stream("group");
    let a = Arc::new(open(&urls, &name));
    let b = Arc::new(open(&urls, &name));
    let (writers, per_writer) = (16, 12);
    let mut workers = Vec::new();
    // Each writer of host a owns a stream and appends to it with exact expectations: every one
    // must land, in its order, however the host groups them.
    for w in 0..writers {
        let log = Arc::clone(&a);
        workers.push(std::thread::spawn(move || {
            let mut conflicts = 0;
            for i in 0..per_writer {
                let expected = if i == 0 {
                    ExpectedRevision::NoStream
                } else {
                    ExpectedRevision::Exact(StreamRevision(i - 1))
                };
                let text = format!("w{w}-{i}");
                appended(append(log.as_ref(), &format!("session/w{w}"), expected, &[&text]));
                // And races the others for one shared stream, from the head it last saw.
                let seen = log.stream_head(&stream("session/contended")).unwrap().map(|h| h.revision);
                let expected = seen.map_or(ExpectedRevision::NoStream, ExpectedRevision::Exact);
                match append(log.as_ref(), "session/contended", expected, &[&text]) {
                    AppendOutcome::Appended(_) => {}
                    AppendOutcome::Conflict(conflict) => {
                        assert_eq!(conflict.expected, expected);
                        assert_ne!(conflict.actual, seen, "a conflict carries the revision that moved");
                        conflicts += 1;
                    }
                    other => panic!("{other:?}"),
                }
            }
            conflicts
        }));
    }
    // Host b appends at the same time: a's groups must give way to b's messages, not overwrite them.
    let other = Arc::clone(&b);
    let foreign = std::thread::spawn(move || {
        for i in 0..40 {
            appended(append(other.as_ref(), "session/b", ExpectedRevision::Any, &[&format!("b-{i}")]));
        }
    });
    let conflicts: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    foreign.join().unwrap();

    let contended = writers * per_writer - conflicts;
    let total = writers * per_writer + contended + 40;
    for log in [&a, &b] {
        assert_eq!(log.wait_for(Position(total), Duration::from_secs(20)), Position(total));
        assert_eq!(log.verify_chain(&mut |_| {}).unwrap(), total, "no gap, no duplicate, one chain");
        for w in 0..writers {
            let own = log.read_stream(&stream(&format!("session/w{w}")), StreamRevision::FIRST, 100).unwrap();
            let texts: Vec<String> =
                own.iter().map(|e| String::from_utf8(e.record.clone()).unwrap()).collect();
            assert_eq!(texts, (0..per_writer).map(|i| format!("w{w}-{i}")).collect::<Vec<_>>());
        }
        let shared = log.read_stream(&stream("session/contended"), StreamRevision::FIRST, 1000).unwrap();
        assert_eq!(shared.len() as u64, contended);
        assert!(shared.iter().enumerate().all(|(i, e)| e.revision == StreamRevision(i as u64)));
        assert!(shared.windows(2).all(|pair| pair[0].position < pair[1].position));
    }
}

#[test]
fn a_new_host_replays_from_any_position_and_tails() {
    let Some(urls) = cluster() else { return };
    let name = fresh_stream("replay");
    let writer = open(&urls, &name);
    for i in 0..30 {
        let texts: Vec<String> = (0..3).map(|j| format!("r{i}-{j}")).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        appended(append(&writer, "session/long", ExpectedRevision::Any, &texts));
    }
    // More envelopes than the in-memory window behind the head, so old ones are replayed from the
    // server with an ordered consumer.
    let big: Vec<String> = (0..1000).map(|i| format!("big-{i}")).collect();
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    for _ in 0..9 {
        appended(append(&writer, "session/big", ExpectedRevision::Any, &big));
    }
    let reader = open(&urls, &name);
    assert_eq!(reader.head(), Position(9090), "opening folds the whole stream");
    let from_middle: Vec<_> = reader.scan(Position(44)).map(|e| e.unwrap().position.0).collect();
    assert_eq!(from_middle, (44..=9090).collect::<Vec<_>>());
    assert_eq!(reader.read(Position(2)).unwrap().unwrap().record, b"r0-1");
    assert_eq!(reader.verify_chain(&mut |_| {}).unwrap(), 9090);
    let old = reader.read_stream(&stream("session/long"), StreamRevision(88), 5).unwrap();
    assert_eq!(old.iter().map(|e| e.revision.0).collect::<Vec<_>>(), vec![88, 89]);

    let tail = std::thread::spawn(move || {
        let head = reader.wait_for(Position(9091), Duration::from_secs(20));
        let last = reader.scan(Position(9091)).next().unwrap().unwrap();
        (head, last.record)
    });
    std::thread::sleep(Duration::from_millis(100));
    appended(append(&writer, "session/long", ExpectedRevision::Exact(StreamRevision(89)), &["live"]));
    let (head, record) = tail.join().unwrap();
    assert_eq!(head, Position(9091));
    assert_eq!(record, b"live");
}

#[test]
fn an_unreachable_cluster_is_an_error_not_a_hang() {
    let error =
        mnemo_log_nats::NatsLog::open(mnemo_log_nats::NatsOptions::new("nats://127.0.0.1:1", "X").unwrap())
            .unwrap_err();
    assert!(error.to_string().contains("cannot connect"), "{error}");
}
