//! Several hosts on one shared NATS JetStream log: appends to their own and to the same sessions,
//! conflicts that surface as conflicts, identical projection digests, and a new host that rebuilds
//! every projection from the cluster. Skipped (with the reason printed) without a test cluster.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;
use std::time::Duration;

use mnemo::log::ExpectedRevision;
use mnemo::records::{Position, Record, SessionId, StreamId};
use mnemo::{Error, ErrorCategory, Mnemo};
use mnemo_acceptance::nats_cluster;
use mnemo_acceptance::sim::{Rng, event_records};
use mnemo_core::{MemoryMode, SessionOpened, StreamRevision};

fn opened(session: &str) -> Record {
    Record::SessionOpened(SessionOpened {
        session: SessionId::new(session).unwrap(),
        workspace: None,
        incognito: false,
        memory: MemoryMode::Enabled,
        subagent: false,
        title: Some(format!("session {session}")),
        source: None,
        parent: None,
    })
}

fn stream(session: &str) -> StreamId {
    StreamId::new(format!("session/{session}")).unwrap()
}

fn revision(mnemo: &Mnemo, session: &str) -> StreamRevision {
    mnemo.log().stream_head(&stream(session)).unwrap().unwrap().revision
}

/// Every stage's name, watermark and digest once the store has folded `head`.
fn digests(mnemo: &Mnemo, head: Position) -> Vec<(String, Position, String)> {
    assert_eq!(mnemo.log().wait_for(head, Duration::from_secs(30)), head);
    mnemo.catch_up_to(head).unwrap();
    mnemo.stats().unwrap().stages.into_iter().map(|s| (s.name, s.watermark, s.digest)).collect()
}

#[test]
fn hosts_sharing_a_log_conflict_and_converge() {
    let Some(urls) = nats_cluster::urls() else { return };
    let name = nats_cluster::fresh_stream("hosts");
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = Arc::new(nats_cluster::open(&urls, &name, dirs[0].path()));
    let b = Arc::new(nats_cluster::open(&urls, &name, dirs[1].path()));
    let mut rng = Rng::new(7);

    // Different sessions.
    a.append(&stream("sa"), ExpectedRevision::NoStream, &[opened("sa")]).unwrap();
    b.append(&stream("sb"), ExpectedRevision::NoStream, &[opened("sb")]).unwrap();

    // The same session: the second opener conflicts, whichever host it is on.
    let shared = a.append(&stream("shared"), ExpectedRevision::NoStream, &[opened("shared")]).unwrap();
    let again = b.append(&stream("shared"), ExpectedRevision::NoStream, &[opened("shared")]).unwrap_err();
    assert_eq!(again.category(), ErrorCategory::Conflict, "{again}");
    assert!(matches!(again, Error::Conflict { .. }), "{again:?}");
    // b appends on the revision it now knows; a, still expecting the opening revision, conflicts.
    let events = event_records(&mut rng, "shared", 1, 5);
    b.append(&stream("shared"), ExpectedRevision::Exact(revision(&b, "shared")), &events).unwrap();
    let stale = event_records(&mut rng, "shared", 2, 2);
    let error =
        a.append(&stream("shared"), ExpectedRevision::Exact(shared.last_revision), &stale).unwrap_err();
    match error {
        Error::Conflict { conflict, .. } => assert_eq!(conflict.actual, Some(StreamRevision(5))),
        other => panic!("expected a conflict, got {other:?}"),
    }

    // Both hosts at once, to their own sessions and to the shared one.
    let workers: Vec<_> = [(Arc::clone(&a), "sa", 100), (Arc::clone(&b), "sb", 200)]
        .into_iter()
        .map(|(host, own, turns)| {
            std::thread::spawn(move || {
                let mut rng = Rng::new(turns);
                for turn in turns..turns + 20 {
                    let count = 1 + rng.below(4) as usize;
                    let records = event_records(&mut rng, own, turn, count);
                    host.append(&stream(own), ExpectedRevision::Any, &records).unwrap();
                    let count = 1 + rng.below(4) as usize;
                    let records = event_records(&mut rng, "shared", turn, count);
                    host.append(&stream("shared"), ExpectedRevision::Any, &records).unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }

    let head = a.log().head().max(b.log().head());
    let on_a = digests(&a, head);
    assert_eq!(on_a, digests(&b, head), "two hosts folded one log into different projections");
    assert!(on_a.iter().all(|(_, watermark, _)| *watermark == head));

    // A new host rebuilds everything from the cluster alone.
    let fresh = tempfile::tempdir().unwrap();
    let c = nats_cluster::open(&urls, &name, fresh.path());
    assert_eq!(c.log().head(), head);
    assert_eq!(digests(&c, head), on_a, "a new host's projections differ from the others'");
    let verification = c.verify(&mut |_| {}).unwrap();
    assert!(verification.ok(), "{verification:?}");
    assert_eq!(verification.envelopes, head.0);
    let sessions: Vec<String> =
        c.history().sessions().unwrap().into_iter().map(|s| s.session.to_string()).collect();
    assert_eq!(sessions, ["sa", "sb", "shared"]);
}

#[test]
fn a_store_follows_one_log() {
    let Some(urls) = nats_cluster::urls() else { return };
    let dir = tempfile::tempdir().unwrap();
    drop(nats_cluster::open(&urls, &nats_cluster::fresh_stream("bind"), dir.path()));
    let error = Mnemo::open(dir.path(), mnemo::Config::default()).unwrap_err();
    assert_eq!(error.category(), ErrorCategory::Input, "{error}");
    assert!(error.to_string().contains("follows the log nats:"), "{error}");
}
