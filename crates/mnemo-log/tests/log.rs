//! Behaviour of the embedded log through its public API.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;
use std::time::Duration;

use mnemo_core::{Position, StreamId, StreamRevision, TimestampMs};
use mnemo_log::{
    AppendOutcome, AppendRequest, Appended, CorruptionKind, ExpectedRevision, FjallLog, LogBackend, LogError,
    LogOptions, ManualClock, NewRecord, RevisionConflict,
};

fn options() -> LogOptions {
    LogOptions { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..LogOptions::default() }
}

fn record(text: &str) -> NewRecord {
    NewRecord::new(4, 1, text.as_bytes().to_vec())
}

fn stream(name: &str) -> StreamId {
    StreamId::new(format!("session/{name}")).unwrap()
}

fn append(log: &FjallLog, name: &str, expected: ExpectedRevision, texts: &[&str]) -> AppendOutcome {
    let records = texts.iter().map(|t| record(t)).collect();
    log.append(AppendRequest::new(stream(name), expected, records)).unwrap()
}

fn appended(outcome: AppendOutcome) -> Appended {
    match outcome {
        AppendOutcome::Appended(appended) => appended,
        AppendOutcome::Conflict(conflict) => panic!("unexpected conflict: {conflict}"),
        AppendOutcome::Refused(refusal) => panic!("unexpected refusal: {refusal}"),
    }
}

#[test]
fn appends_get_dense_positions_and_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    let first = appended(append(&log, "a", ExpectedRevision::NoStream, &["a0", "a1"]));
    assert_eq!((first.first_position, first.last_position), (Position(1), Position(2)));
    assert_eq!(first.last_revision, StreamRevision(1));
    let second = appended(append(&log, "b", ExpectedRevision::Any, &["b0"]));
    assert_eq!((second.first_position, second.last_revision), (Position(3), StreamRevision(0)));
    let third = appended(append(&log, "a", ExpectedRevision::Exact(StreamRevision(1)), &["a2"]));
    assert_eq!((third.first_position, third.last_revision), (Position(4), StreamRevision(2)));
    assert_eq!(log.head(), Position(4));

    let all: Vec<_> = log.scan(Position::FIRST).map(Result::unwrap).collect();
    assert_eq!(
        all.iter().map(|e| e.record.clone()).collect::<Vec<_>>(),
        vec![b"a0".to_vec(), b"a1".to_vec(), b"b0".to_vec(), b"a2".to_vec()]
    );
    for pair in all.windows(2) {
        assert_eq!(pair[1].previous_hash, pair[0].hash);
        assert!(pair[1].timestamp >= pair[0].timestamp);
    }
    let a = log.read_stream(&stream("a"), StreamRevision(1), 10).unwrap();
    assert_eq!(a.iter().map(|e| e.position).collect::<Vec<_>>(), vec![Position(2), Position(4)]);
    assert_eq!(log.stream_head(&stream("b")).unwrap().map(|h| h.position), Some(Position(3)));
    assert_eq!(log.stream_head(&stream("none")).unwrap(), None);
    assert_eq!(log.read(Position(3)).unwrap().map(|e| e.record), Some(b"b0".to_vec()));
    assert_eq!(log.read(Position(5)).unwrap(), None);
}

#[test]
fn stale_expected_revision_is_a_conflict_and_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    appended(append(&log, "a", ExpectedRevision::NoStream, &["a0", "a1"]));
    let outcome = append(&log, "a", ExpectedRevision::Exact(StreamRevision(0)), &["late"]);
    assert_eq!(
        outcome,
        AppendOutcome::Conflict(RevisionConflict {
            expected: ExpectedRevision::Exact(StreamRevision(0)),
            actual: Some(StreamRevision(1)),
        })
    );
    let outcome = append(&log, "a", ExpectedRevision::NoStream, &["late"]);
    assert!(matches!(
        outcome,
        AppendOutcome::Conflict(RevisionConflict { actual: Some(StreamRevision(1)), .. })
    ));
    let outcome = append(&log, "new", ExpectedRevision::Exact(StreamRevision(0)), &["x"]);
    assert_eq!(
        outcome,
        AppendOutcome::Conflict(RevisionConflict {
            expected: ExpectedRevision::Exact(StreamRevision(0)),
            actual: None
        })
    );
    assert_eq!(log.head(), Position(2));
    assert_eq!(log.scan(Position::FIRST).count(), 2);
}

#[test]
fn eight_racing_writers_with_exact_revisions_leave_a_gap_free_stream() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), options()).unwrap());
    let per_thread = 25;
    let threads: Vec<_> = (0..8)
        .map(|thread| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut written = 0;
                let mut conflicts = 0;
                while written < per_thread {
                    let expected = match log.stream_head(&stream("race")).unwrap() {
                        Some(head) => ExpectedRevision::Exact(head.revision),
                        None => ExpectedRevision::NoStream,
                    };
                    let request = AppendRequest::new(
                        stream("race"),
                        expected,
                        vec![record(&format!("{thread}-{written}"))],
                    );
                    match log.append(request).unwrap() {
                        AppendOutcome::Appended(_) => written += 1,
                        AppendOutcome::Conflict(_) => conflicts += 1,
                        AppendOutcome::Refused(refusal) => panic!("no record has a key: {refusal}"),
                    }
                }
                conflicts
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let envelopes = log.read_stream(&stream("race"), StreamRevision(0), 1000).unwrap();
    assert_eq!(envelopes.len(), 8 * per_thread);
    for (index, envelope) in envelopes.iter().enumerate() {
        assert_eq!(envelope.revision, StreamRevision(index as u64));
        assert_eq!(envelope.position, Position(index as u64 + 1));
    }
    let mut seen: Vec<_> = envelopes.iter().map(|e| e.record.clone()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 8 * per_thread, "every acknowledged append is stored once");
}

#[test]
fn reopening_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let hash = {
        let log = FjallLog::open(dir.path(), options()).unwrap();
        appended(append(&log, "a", ExpectedRevision::NoStream, &["a0", "a1"]));
        log.read(Position(2)).unwrap().unwrap().hash
    };
    let log = FjallLog::open(dir.path(), options()).unwrap();
    assert_eq!(log.head(), Position(2));
    let next = appended(append(&log, "a", ExpectedRevision::Exact(StreamRevision(1)), &["a2"]));
    assert_eq!(next.first_position, Position(3));
    assert_eq!(log.read(Position(3)).unwrap().unwrap().previous_hash, hash);
    assert_eq!(log.verify_chain(&mut |_| {}).unwrap(), 3);
}

#[test]
fn a_second_open_of_the_same_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _log = FjallLog::open(dir.path(), options()).unwrap();
    let error = FjallLog::open(dir.path(), options()).unwrap_err();
    assert!(matches!(error, LogError::Locked { .. }), "{error}");
    assert!(error.to_string().contains("store is locked by another process"));
}

#[test]
fn appends_that_break_a_limit_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    let empty = log.append(AppendRequest::new(stream("a"), ExpectedRevision::Any, vec![]));
    assert!(matches!(empty, Err(LogError::InvalidAppend(_))));
    let huge = NewRecord::new(4, 1, vec![b'x'; mnemo_core::limits::RECORD_BYTES_MAX + 1]);
    let error = log.append(AppendRequest::new(stream("a"), ExpectedRevision::Any, vec![huge])).unwrap_err();
    assert!(error.to_string().contains("the limit is"), "{error}");
    assert_eq!(log.head(), Position::ZERO);
}

#[test]
fn followers_wake_when_the_head_moves() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(FjallLog::open(dir.path(), options()).unwrap());
    assert_eq!(log.wait_for(Position(1), Duration::from_millis(10)), Position::ZERO);
    let follower = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.wait_for(Position(1), Duration::from_secs(30)))
    };
    appended(append(&log, "a", ExpectedRevision::Any, &["a0"]));
    assert_eq!(follower.join().unwrap(), Position(1));
}

#[test]
fn imports_may_carry_their_own_timestamps_which_never_run_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    for ts in [5_000, 3_000] {
        let mut request = AppendRequest::new(stream("a"), ExpectedRevision::Any, vec![record("x")]);
        request.timestamp = Some(TimestampMs(ts));
        appended(log.append(request).unwrap());
    }
    let stamps: Vec<_> = log.scan(Position::FIRST).map(|e| e.unwrap().timestamp.0).collect();
    assert_eq!(stamps, vec![5_000, 5_000]);
}

/// Rewrites one stored envelope with a byte flipped, as damage below the storage engine's
/// checksums (or a hand edit) would.
fn flip_stored_byte(dir: &std::path::Path, position: Position, at: usize) {
    let db = fjall::Database::builder(dir.join(mnemo_log::DATABASE_DIR_NAME)).open().unwrap();
    let log = db.keyspace(mnemo_log::LOG_KEYSPACE, fjall::KeyspaceCreateOptions::default).unwrap();
    let mut bytes = log.get(position.to_key()).unwrap().unwrap().to_vec();
    bytes[at] ^= 0x20;
    log.insert(position.to_key(), bytes).unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
}

#[test]
fn a_flipped_byte_is_found_and_named_by_position() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = FjallLog::open(dir.path(), options()).unwrap();
        for i in 0..5 {
            appended(append(&log, "a", ExpectedRevision::Any, &[&format!("record {i}")]));
        }
    }
    flip_stored_byte(dir.path(), Position(3), 40);

    let error = FjallLog::open(dir.path(), options()).unwrap_err();
    assert!(
        matches!(error, LogError::Corrupt { position: Position(3), kind: CorruptionKind::HashMismatch }),
        "{error}"
    );
    assert!(error.to_string().contains("position 3"), "{error}");

    let unchecked = LogOptions { verify_tail_on_open: false, ..options() };
    let log = FjallLog::open(dir.path(), unchecked).unwrap();
    let error = log.verify_chain(&mut |_| {}).unwrap_err();
    assert!(matches!(error, LogError::Corrupt { position: Position(3), .. }), "{error}");
}

#[test]
fn a_scan_reads_across_its_chunks_and_stops_at_the_head_it_began_with() {
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    let total = 2 * mnemo_log::limits::SCAN_CHUNK_ENVELOPES as usize + 7;
    let texts: Vec<String> = (0..total).map(|n| format!("r{n}")).collect();
    for chunk in texts.chunks(500) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        appended(append(&log, "long", ExpectedRevision::Any, &refs));
    }
    let positions: Vec<u64> = log.scan(Position::FIRST).map(|e| e.unwrap().position.0).collect();
    assert_eq!(positions, (1..=total as u64).collect::<Vec<_>>());

    let from = mnemo_log::limits::SCAN_CHUNK_ENVELOPES - 3;
    let mut scan = log.scan(Position(from));
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first.record, format!("r{}", from - 1).into_bytes());
    // What is appended once a scan has begun is not part of it, whichever chunk it reaches.
    appended(append(&log, "long", ExpectedRevision::Any, &["late"]));
    assert_eq!(scan.map(|e| e.unwrap().position.0).last(), Some(total as u64));
    assert_eq!(log.scan(Position(total as u64 + 1)).count(), 1);
}

fn keyed(text: &str, rules: Vec<mnemo_core::KeyRule>) -> NewRecord {
    record(text).with_rules(rules)
}

fn refused(outcome: AppendOutcome) -> mnemo_log::KeyRefusal {
    match outcome {
        AppendOutcome::Refused(refusal) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_identity_retry_is_answered_with_the_original_and_a_conflict_appends_nothing() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    let first = vec![keyed("a", vec![Identity(b"ea".to_vec())]), keyed("b", vec![Identity(b"eb".to_vec())])];
    let landed = appended(
        log.append(AppendRequest::new(stream("s"), ExpectedRevision::NoStream, first.clone())).unwrap(),
    );
    assert_eq!((landed.first_position, landed.last_position, landed.retried), (Position(1), Position(2), 0));
    // The whole batch again, with the revision it expected the first time: the original answer.
    let again =
        appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::NoStream, first)).unwrap());
    assert_eq!((again.first_position, again.last_position, again.retried), (Position(1), Position(2), 2));
    assert_eq!(log.head(), Position(2));
    // The same identity with other bytes: refused, and the new record before it is not stored.
    let conflict =
        vec![keyed("c", vec![Identity(b"ec".to_vec())]), keyed("B", vec![Identity(b"eb".to_vec())])];
    let refusal =
        refused(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, conflict)).unwrap());
    assert_eq!((refusal.record, refusal.held_at), (1, Some(Position(2))));
    assert_eq!(log.head(), Position(2));
    // The same bytes on another stream are another record.
    let elsewhere = vec![keyed("a", vec![Identity(b"ea".to_vec())])];
    assert!(matches!(
        log.append(AppendRequest::new(stream("t"), ExpectedRevision::Any, elsewhere)).unwrap(),
        AppendOutcome::Refused(_)
    ));
    assert_eq!(log.key_holder(b"ea").unwrap(), Some(Position(1)));
    assert_eq!(log.key_holder(b"ec").unwrap(), None);
}

#[test]
fn claims_unique_required_and_forbidden_keys_hold_across_records_and_appends() {
    use mnemo_core::KeyRule::{Claim, Forbids, Requires, Unique};
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    let claim = |value: &str| Claim { key: b"inv".to_vec(), value: value.as_bytes().to_vec() };
    let go = |records: Vec<NewRecord>| {
        log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap()
    };
    // A call and its result in one append: the result finds the call written before it.
    appended(go(vec![
        keyed("call", vec![claim("run1"), Unique(b"c1".to_vec())]),
        keyed("result", vec![claim("run1"), Requires(b"c1".to_vec()), Unique(b"r1".to_vec())]),
    ]));
    assert_eq!(refused(go(vec![keyed("x", vec![claim("run2")])])).held_at, Some(Position(1)));
    assert_eq!(refused(go(vec![keyed("again", vec![Unique(b"c1".to_vec())])])).held_at, Some(Position(1)));
    assert_eq!(refused(go(vec![keyed("orphan", vec![Requires(b"c9".to_vec())])])).held_at, None);
    assert_eq!(refused(go(vec![keyed("late", vec![Forbids(b"r1".to_vec())])])).held_at, Some(Position(2)));
    assert_eq!(log.head(), Position(2));
}

/// Waits until the log's key filter answers lookups.
/// Key rules of a record whose bytes are its identity, for logs that index envelopes themselves.
fn identity_rules_of(_: u16, _: u16, bytes: &[u8]) -> mnemo_core::KeyRules {
    vec![mnemo_core::KeyRule::Identity(bytes.to_vec())].into()
}

/// The test options, with the log indexing envelopes by `identity_rules_of`.
fn with_identity_rules() -> LogOptions {
    LogOptions { key_rules_of: Some(identity_rules_of), ..options() }
}

fn wait_for_key_filter(log: &FjallLog) {
    let began = std::time::Instant::now();
    while !log.key_filter_ready() {
        assert!(began.elapsed() < Duration::from_secs(60), "the key filter was not built");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn keys_held_before_an_open_are_found_once_the_key_filter_answers() {
    use mnemo_core::KeyRule::{Claim, Identity};
    let dir = tempfile::tempdir().unwrap();
    let run = |value: &str| Claim { key: b"run".to_vec(), value: value.as_bytes().to_vec() };
    let first = vec![
        keyed("a", vec![Identity(b"ea".to_vec()), run("one")]),
        keyed("b", vec![Identity(b"eb".to_vec())]),
    ];
    let log = FjallLog::open(dir.path(), options()).unwrap();
    appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, first.clone())).unwrap());
    drop(log);
    let log = FjallLog::open(dir.path(), options()).unwrap();
    wait_for_key_filter(&log);
    let go = |records: Vec<NewRecord>| {
        log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap()
    };
    let again = appended(go(first));
    assert_eq!((again.first_position, again.retried), (Position(1), 2));
    assert_eq!(refused(go(vec![keyed("B", vec![Identity(b"eb".to_vec())])])).held_at, Some(Position(2)));
    assert_eq!(refused(go(vec![keyed("c", vec![run("two")])])).held_at, Some(Position(1)));
    let new = vec![keyed("d", vec![Identity(b"ed".to_vec()), run("one")])];
    assert_eq!(appended(go(new.clone())).first_position, Position(3));
    assert_eq!(appended(go(new)).retried, 1, "a key written since the open is found too");
    assert_eq!(log.head(), Position(3));
}

#[test]
fn a_key_index_rebuilt_from_the_log_keeps_each_key_with_its_first_holder() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    // Appended without rules, as a salvage copies envelopes (a retry stored twice before the index
    // existed included).
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    appended(append(&log, "s", ExpectedRevision::Any, &["x", "y", "x"]));
    assert_eq!(log.key_holder(b"x").unwrap(), None);
    // The writer's key filter knows none of the keys the rebuild writes.
    wait_for_key_filter(&log);
    log.rebuild_key_index(identity_rules_of).unwrap();
    assert_eq!(log.key_holder(b"x").unwrap(), Some(Position(1)), "the first holder keeps the key");
    assert_eq!(log.key_holder(b"y").unwrap(), Some(Position(2)));
    let retry = vec![keyed("y", vec![Identity(b"y".to_vec())])];
    let retry = appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, retry)).unwrap());
    assert_eq!((retry.first_position, retry.retried), (Position(2), 1));
    drop(log);
    let log = FjallLog::open(dir.path(), options()).unwrap();
    assert_eq!(log.key_holder(b"y").unwrap(), Some(Position(2)), "the index is durable");
}

#[test]
fn a_key_is_found_by_a_reader_as_soon_as_its_append_is_acknowledged() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    // The writer indexes a group's keys just after answering it: a reader must wait for them.
    for n in 0..300 {
        let key = format!("e{n}").into_bytes();
        let records = vec![keyed(&format!("r{n}"), vec![Identity(key.clone())])];
        let landed =
            appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap());
        assert_eq!(log.key_holder(&key).unwrap(), Some(landed.first_position), "key {n}");
    }
}

#[test]
fn keys_lost_with_their_mark_are_caught_up_from_the_log_when_the_store_opens() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    let records = vec![keyed("x", vec![Identity(b"x".to_vec())]), keyed("y", vec![Identity(b"y".to_vec())])];
    appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap());
    drop(log);
    // What a crash while the keys are staged leaves: the envelopes, and an index without their
    // keys or the mark that covers them.
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    let keys =
        log.key_database().keyspace(mnemo_log::KEYS_KEYSPACE, mnemo_log::keys_keyspace_options).unwrap();
    for guard in keys.iter() {
        keys.remove(guard.key().unwrap()).unwrap();
    }
    drop(keys);
    drop(log);
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    assert_eq!(log.key_holder(b"x").unwrap(), Some(Position(1)));
    assert_eq!(log.key_holder(b"y").unwrap(), Some(Position(2)));
    let retry = vec![keyed("y", vec![Identity(b"y".to_vec())])];
    let retry = appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, retry)).unwrap());
    assert_eq!((retry.first_position, retry.retried), (Position(2), 1));
}

#[test]
fn an_index_kept_in_the_log_database_is_dropped_there_and_built_again_in_its_own() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    let records = vec![keyed("x", vec![Identity(b"x".to_vec())]), keyed("y", vec![Identity(b"y".to_vec())])];
    appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap());
    drop(log);
    // Where stores kept the index before it had a database of its own: a `keys` keyspace in the
    // log's database (here with a wrong holder for `x`, which must not survive), and no index in
    // the index's own database.
    let db = fjall::Database::builder(dir.path().join(mnemo_log::DATABASE_DIR_NAME)).open().unwrap();
    let earlier = db.keyspace(mnemo_log::KEYS_KEYSPACE, mnemo_log::keys_keyspace_options).unwrap();
    earlier.insert(b"kx", 2u64.to_be_bytes()).unwrap();
    earlier.insert(b"m", 2u64.to_be_bytes()).unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
    drop((earlier, db));
    std::fs::remove_dir_all(dir.path().join(mnemo_log::KEYS_DATABASE_DIR_NAME)).unwrap();

    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    assert!(!log.database().keyspace_exists(mnemo_log::KEYS_KEYSPACE), "the earlier index is dropped");
    assert_eq!(log.key_holder(b"x").unwrap(), Some(Position(1)));
    assert_eq!(log.key_holder(b"y").unwrap(), Some(Position(2)));
    let retry = vec![keyed("x", vec![Identity(b"x".to_vec())])];
    let retry = appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, retry)).unwrap());
    assert_eq!((retry.first_position, retry.retried), (Position(1), 1));
    assert_eq!(
        log.verify_chain(&mut |_| {}).unwrap(),
        2,
        "the retry is not stored; the rebuilt index verifies"
    );
}

#[test]
fn keys_are_staged_in_memory_while_the_store_is_open_and_ingested_when_it_closes() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    for n in 1..=100 {
        let records = vec![keyed(&format!("e{n}"), vec![Identity(format!("e{n}").into_bytes())])];
        appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap());
    }
    let keys =
        log.key_database().keyspace(mnemo_log::KEYS_KEYSPACE, mnemo_log::keys_keyspace_options).unwrap();
    assert_eq!(keys.prefix(b"h").count(), 0, "fewer keys than a table's worth stay staged");
    assert_eq!(log.key_holder(b"e7").unwrap(), Some(Position(7)), "a staged key is found");
    let retry = vec![keyed("e7", vec![Identity(b"e7".to_vec())])];
    let retry = appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, retry)).unwrap());
    assert_eq!((retry.first_position, retry.retried), (Position(7), 1), "a staged key decides a retry");
    let conflict = vec![keyed("other", vec![Identity(b"e8".to_vec())])];
    let conflict = log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, conflict)).unwrap();
    assert_eq!(refused(conflict).held_at, Some(Position(8)), "a staged key decides a conflict");
    drop(keys);
    drop(log);
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    let keys =
        log.key_database().keyspace(mnemo_log::KEYS_KEYSPACE, mnemo_log::keys_keyspace_options).unwrap();
    assert_eq!(keys.prefix(b"h").count(), 100, "closing hands every staged key to the keyspace");
    assert_eq!(keys.get(b"m").unwrap().as_deref(), Some(&100u64.to_be_bytes()[..]), "with the mark");
    drop(keys);
    assert_eq!(log.head(), Position(100));
    log.verify_chain(&mut |_| {}).unwrap();
}

#[test]
fn a_table_of_staged_keys_is_ingested_with_its_mark_once_enough_are_staged() {
    use mnemo_core::KeyRule::Identity;
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), with_identity_rules()).unwrap();
    let total = mnemo_log::limits::KEYS_STAGED_MAX + 1000;
    for chunk in 0..total.div_ceil(1000) {
        let records = (chunk * 1000..((chunk + 1) * 1000).min(total))
            .map(|n| keyed(&format!("e{n}"), vec![Identity(format!("e{n}").into_bytes())]))
            .collect();
        appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, records)).unwrap());
    }
    let keys =
        log.key_database().keyspace(mnemo_log::KEYS_KEYSPACE, mnemo_log::keys_keyspace_options).unwrap();
    // The table is written by the ingestion thread while the writer goes on.
    let began = std::time::Instant::now();
    while keys.get(b"m").unwrap().is_none() {
        assert!(began.elapsed() < std::time::Duration::from_secs(60), "no table was ingested");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let held = keys.prefix(b"h").count();
    assert!(held >= mnemo_log::limits::KEYS_STAGED_MAX, "{held} keys in the keyspace");
    assert!(held < total, "the keys of the last appends are still staged");
    let mark = u64::from_be_bytes(keys.get(b"m").unwrap().unwrap().as_ref().try_into().unwrap());
    assert_eq!(mark, held as u64, "the mark covers exactly the ingested keys");
    drop(keys);
    for n in [0, total / 2, total - 1] {
        assert_eq!(log.key_holder(format!("e{n}").as_bytes()).unwrap(), Some(Position(n as u64 + 1)));
    }
    let retry = vec![keyed("e5", vec![Identity(b"e5".to_vec())])];
    let retry = appended(log.append(AppendRequest::new(stream("s"), ExpectedRevision::Any, retry)).unwrap());
    assert_eq!((retry.first_position, retry.retried), (Position(6), 1), "an ingested key decides a retry");
    log.verify_chain(&mut |_| {}).unwrap();
}

/// The nice value of each of this process's threads named `name`, from `/proc`.
#[cfg(target_os = "linux")]
fn nice_values_of_threads_named(name: &str) -> Vec<i32> {
    // The kernel keeps the first 15 bytes of a thread's name.
    let name = &name[..name.len().min(15)];
    let mut values = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        // A thread that ended since the listing has no files left: it is not one to look at.
        let (Ok(comm), Ok(stat)) =
            (std::fs::read_to_string(task.join("comm")), std::fs::read_to_string(task.join("stat")))
        else {
            continue;
        };
        if comm.trim_end() != name {
            continue;
        }
        // The fields after the command's closing parenthesis start at the third (the state); the
        // nice value is the nineteenth.
        let after_command = &stat[stat.rfind(')').unwrap() + 1..];
        values.push(after_command.split_whitespace().nth(16).unwrap().parse().unwrap());
    }
    values
}

#[cfg(target_os = "linux")]
#[test]
fn the_key_ingestion_thread_runs_below_the_hosts_priority() {
    let host = rustix::process::getpriority_process(None).unwrap();
    let expected = (host + mnemo_log::limits::KEYS_INGEST_NICE_INCREMENT).min(19);
    let dir = tempfile::tempdir().unwrap();
    let log = FjallLog::open(dir.path(), options()).unwrap();
    appended(append(&log, "a", ExpectedRevision::Any, &["a0"]));
    // NOTE: the thread lowers its own priority as it starts, which may be after the open returns;
    // other tests of this binary may have ingestion threads of their own at the same time.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let values = nice_values_of_threads_named("mnemo-key-ingest");
        if !values.is_empty() && values.iter().all(|&nice| nice == expected) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ingestion threads' nice values {values:?}, expected {expected}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(log);
}
