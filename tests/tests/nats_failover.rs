//! Killing the JetStream stream's leader while a host appends: appends go on through the other
//! servers after the election, no acknowledged append is lost, and appends retried across the
//! failover are stored once. Its own test binary, so that no other cluster test sees the kill.
//! Skipped (with the reason printed) without a test cluster.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo::log::ExpectedRevision;
use mnemo::records::{Position, StreamId};
use mnemo_acceptance::nats_cluster;
use mnemo_acceptance::sim::{Rng, event_records};

const APPENDS: u64 = 240;

#[test]
fn appends_survive_the_stream_leader_being_killed() {
    let Some(urls) = nats_cluster::urls() else { return };
    let name = nats_cluster::fresh_stream("failover");
    let store = tempfile::tempdir().unwrap();
    let host = Arc::new(nats_cluster::open(&urls, &name, store.path()));
    let observer =
        mnemo_log_nats::NatsLog::open(mnemo_log_nats::NatsOptions::new(&urls, &name).unwrap()).unwrap();

    let done = Arc::new(AtomicU64::new(0));
    let acknowledged: Arc<Mutex<BTreeMap<u64, Vec<u8>>>> = Arc::default();
    let writer = {
        let (host, done, acknowledged) = (Arc::clone(&host), Arc::clone(&done), Arc::clone(&acknowledged));
        std::thread::spawn(move || {
            let mut rng = Rng::new(11);
            for turn in 0..APPENDS {
                let session = format!("s{}", turn % 4);
                let count = 1 + rng.below(3) as usize;
                let records = event_records(&mut rng, &session, turn, count);
                let stream = StreamId::new(format!("session/{session}")).unwrap();
                let appended = host.append(&stream, ExpectedRevision::Any, &records).unwrap();
                let mut acknowledged = acknowledged.lock().unwrap();
                for (offset, record) in records.iter().enumerate() {
                    acknowledged.insert(appended.first_position.0 + offset as u64, record.encode().unwrap());
                }
                done.fetch_add(1, Ordering::Release);
            }
        })
    };

    wait_until(|| done.load(Ordering::Acquire) >= APPENDS / 4);
    let leader = observer.stream_leader().unwrap().expect("the stream has a leader");
    let pid = nats_cluster::server_pid(&leader);
    assert_eq!(kill_hard(pid), 0, "cannot kill {leader} (pid {pid})");
    // The server comes back even if the test fails, so that the cluster stays whole.
    let restart = Restart(leader.clone());
    let killed_at = done.load(Ordering::Acquire);
    eprintln!("killed the stream leader {leader} after {killed_at} appends");

    wait_until(|| done.load(Ordering::Acquire) >= killed_at + APPENDS / 4);
    let new_leader = observer.stream_leader().unwrap();
    assert!(new_leader.as_ref().is_some_and(|l| *l != leader), "no new leader: {new_leader:?}");
    drop(restart);
    writer.join().unwrap();

    let acknowledged = acknowledged.lock().unwrap();
    let head = Position(*acknowledged.keys().last().unwrap());
    host.catch_up_to(head).unwrap();
    // Every position holds exactly what was acknowledged there: nothing lost, nothing stored twice
    // (a duplicate would take a position no acknowledgement names, and the head would run past).
    assert_eq!(host.log().head(), head);
    assert_eq!(acknowledged.len() as u64, head.0, "positions without an acknowledged append");
    for envelope in host.log().scan(Position::FIRST) {
        let envelope = envelope.unwrap();
        assert_eq!(
            Some(&envelope.record),
            acknowledged.get(&envelope.position.0),
            "at {}",
            envelope.position
        );
    }
    let verification = host.verify(&mut |_| {}).unwrap();
    assert!(verification.ok(), "{verification:?}");
    assert_eq!(verification.envelopes, head.0);
}

/// Starts the killed server again when dropped.
struct Restart(String);

impl Drop for Restart {
    fn drop(&mut self) {
        nats_cluster::restart_server(&self.0);
    }
}

fn wait_until(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "the appends stalled");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends SIGKILL to `pid` with the `kill` command (no unsafe code for a syscall).
fn kill_hard(pid: i32) -> i32 {
    let status = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().unwrap();
    status.code().unwrap_or(-1)
}
