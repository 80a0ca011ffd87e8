//! The append workloads on a shared NATS JetStream log (`mnemo bench --nats URLS`): one writer and
//! 64 concurrent sessions, each append acknowledged by a quorum of the stream's replicas, beside the
//! same workloads on the embedded fjall log in the same run.

use std::sync::Arc;
use std::time::Instant;

use mnemo::log::{Durability, ExpectedRevision, LogLocation};
use mnemo::records::{Record, StreamId};
use mnemo::{Config, Mnemo};

use crate::harness::{
    BenchError, BenchOptions, CONCURRENT_SESSIONS, WorkloadResult, fresh_dir, median, open_mnemo, ratio,
    run_threads,
};
use crate::workload::{SessionEvents, session_name};

/// Target: 64 concurrent sessions append at least this many times as fast as one writer, whose
/// appends each wait for their own round trip.
pub const GROUP_COMMIT_TARGET: f64 = 10.0;

/// Runs the append workloads on the cluster at `servers` (comma-separated `nats://HOST:PORT`), each
/// round on a fresh JetStream stream.
pub fn run(options: &BenchOptions, servers: &str) -> Result<Vec<WorkloadResult>, BenchError> {
    let single: Vec<Record> = SessionEvents::new(options.seed, 0, options.single_writer_events).collect();
    let sessions: Vec<Vec<Record>> = (0..CONCURRENT_SESSIONS)
        .map(|s| SessionEvents::new(options.seed, 100 + s, options.events_per_concurrent_session).collect())
        .collect();
    let (mut nats_single, mut local_single, mut nats_many, mut local_many) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let local = open_mnemo(
            &fresh_dir(&options.out, &format!("nats-local-single-{round}"))?,
            Durability::SyncData,
        )?;
        local_single.push(one_writer(&local, &single)?);
        drop(local);
        let shared = open_shared(options, servers, &format!("single-{round}"))?;
        nats_single.push(one_writer(&shared, &single)?);
        drop(shared);

        let local = Arc::new(open_mnemo(
            &fresh_dir(&options.out, &format!("nats-local-many-{round}"))?,
            Durability::SyncData,
        )?);
        local_many.push(many_writers(&local, &sessions)?);
        drop(local);
        let shared = Arc::new(open_shared(options, servers, &format!("many-{round}"))?);
        nats_many.push(many_writers(&shared, &sessions)?);
    }
    let one_writer_rate = median(nats_single.clone());
    let result = |name: &str, nats: Vec<f64>, local: Vec<f64>, target: String, met: &dyn Fn(f64) -> bool| {
        let (nats, local) = (median(nats), median(local));
        WorkloadResult {
            name: name.to_owned(),
            unit: "events/s".to_owned(),
            higher_is_better: true,
            mnemo: nats,
            baseline_name: "the embedded fjall log, SyncData, same workload".to_owned(),
            baseline: local,
            ratio: ratio(nats, local),
            target,
            met: met(nats),
        }
    };
    Ok(vec![
        result(
            "append_nats_3_replicas_1_writer",
            nats_single,
            local_single,
            "reported: each append waits for its round trip to the stream leader and a quorum write"
                .to_owned(),
            &|nats| nats > 0.0,
        ),
        result(
            "append_nats_3_replicas_64_sessions",
            nats_many,
            local_many,
            format!(
                ">= {GROUP_COMMIT_TARGET}x one writer's rate on NATS ({one_writer_rate:.0}/s, one round trip each): \
                 concurrent appends share round trips"
            ),
            &|nats| nats >= GROUP_COMMIT_TARGET * one_writer_rate,
        ),
    ])
}

/// A store following a fresh JetStream stream on the cluster.
fn open_shared(options: &BenchOptions, servers: &str, tag: &str) -> Result<Mnemo, BenchError> {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let stream = format!("BENCH_{tag}_{}_{nanos}", std::process::id());
    let log = LogLocation::parse(&format!("{servers}/{stream}"))?;
    let dir = fresh_dir(&options.out, &format!("nats-{tag}"))?;
    Ok(Mnemo::open(&dir, Config { durability: Durability::SyncData, log: Some(log), ..Config::default() })?)
}

fn one_writer(mnemo: &Mnemo, events: &[Record]) -> Result<f64, BenchError> {
    let stream = session_stream(0)?;
    let started = Instant::now();
    for record in events {
        mnemo.append(&stream, ExpectedRevision::Any, std::slice::from_ref(record))?;
    }
    Ok(events.len() as f64 / started.elapsed().as_secs_f64())
}

fn many_writers(mnemo: &Arc<Mnemo>, sessions: &[Vec<Record>]) -> Result<f64, BenchError> {
    let total: usize = sessions.iter().map(Vec::len).sum();
    let started = Instant::now();
    run_threads(sessions.to_vec(), |index, records| {
        let stream = session_stream(100 + index as u64)?;
        for record in &records {
            mnemo.append(&stream, ExpectedRevision::Any, std::slice::from_ref(record))?;
        }
        Ok(())
    })?;
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

fn session_stream(session: u64) -> Result<StreamId, BenchError> {
    StreamId::new(format!("session/{}", session_name(session)))
        .map_err(|e| BenchError::Mnemo(mnemo::Error::InvalidInput(e.to_string())))
}
