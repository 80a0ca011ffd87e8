//! The history-assembly workload: latency of assembling the next request for sessions of growing
//! length that carry a checkpoint, on Mnemo and on the baseline's latest-checkpoint-plus-tail query.

use std::time::{Duration, Instant};

use mnemo::Mnemo;
use mnemo::compaction::{CompactOptions, ContextOptions};
use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::{Record, SessionId, StreamId};

use crate::baseline::Baseline;
use crate::harness::{BenchError, BenchOptions, WorkloadResult, fresh_dir, open_mnemo, payloads, ratio};
use crate::workload::{SessionEvents, session_name};

/// Assemblies timed per size.
pub const ASSEMBLY_SAMPLES: usize = 200;

fn percentile(samples: &mut [Duration], at: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * at).round() as usize;
    samples.get(index).copied().unwrap_or_default()
}

/// p50 of `samples` runs of `work`, in microseconds.
fn p50_us(samples: usize, mut work: impl FnMut() -> Result<(), BenchError>) -> Result<f64, BenchError> {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        work()?;
        times.push(started.elapsed());
    }
    Ok(percentile(&mut times, 0.5).as_secs_f64() * 1e6)
}

/// One session of `events` events, compacted, in a fresh Mnemo store; the same events and a
/// checkpoint over the same prefix in the baseline.
fn stores(options: &BenchOptions, events: u64) -> Result<(Mnemo, Baseline, SessionId), BenchError> {
    let index = 50_000 + events;
    let name = session_name(index);
    let records: Vec<Record> = SessionEvents::new(options.seed, index, events).collect();
    let mnemo =
        open_mnemo(&fresh_dir(&options.out, &format!("assembly-mnemo-{events}"))?, Durability::Buffered)?;
    let stream =
        StreamId::new(format!("session/{name}")).map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
    for chunk in records.chunks(crate::harness::IMPORT_CHUNK_RECORDS) {
        mnemo.append(&stream, ExpectedRevision::Any, chunk)?;
    }
    let session = SessionId::new(name.clone()).map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
    // Memory is off for this session: compacting would otherwise extract memories over every folded
    // turn, which the memory workloads measure, not this one.
    let flags = mnemo::records::SessionFlagsChanged {
        session: session.clone(),
        incognito: None,
        memory: Some(mnemo::records::MemoryMode::Disabled),
        title: None,
    };
    mnemo.append(&stream, ExpectedRevision::Any, &[Record::SessionFlagsChanged(flags)])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(crate::harness::io("cannot start a runtime for compaction"))?;
    let outcome = runtime.block_on(mnemo.compaction().compact(&session, &CompactOptions::default()))?;
    let covered = outcome.recorded.as_ref().map_or(0, |c| c.checkpoint.coverage.event_count);

    let mut baseline = Baseline::open(&fresh_dir(&options.out, &format!("assembly-sqlite-{events}"))?)?;
    let batch = payloads(&records)?;
    for chunk in batch.chunks(crate::harness::IMPORT_CHUNK_RECORDS) {
        baseline.append_batch(chunk)?;
    }
    let summary = outcome.recorded.as_ref().map_or_else(String::new, |c| format!("{:?}", c.checkpoint.body));
    baseline.record_checkpoint(&name, "checkpoint-1", covered as i64, &summary)?;
    Ok((mnemo, baseline, session))
}

/// Assembly p50 per size, beside the baseline, and the flatness of Mnemo's figures.
pub fn assembly(options: &BenchOptions) -> Result<Vec<WorkloadResult>, BenchError> {
    let mut results = Vec::new();
    let mut mnemo_p50s = Vec::new();
    for &events in &options.assembly_sizes {
        let (mnemo, baseline, session) = stores(options, events)?;
        let context = ContextOptions::default();
        let mnemo_p50 = p50_us(ASSEMBLY_SAMPLES, || {
            mnemo.compaction().context(&session, &context).map(drop).map_err(Into::into)
        })?;
        let baseline_p50 =
            p50_us(ASSEMBLY_SAMPLES, || baseline.assemble(session.as_str()).map(drop).map_err(Into::into))?;
        mnemo_p50s.push((events, mnemo_p50));
        results.push(WorkloadResult {
            name: format!("assembly_p50_{events}_events"),
            unit: "us".to_owned(),
            higher_is_better: false,
            mnemo: mnemo_p50,
            baseline_name: "sqlite latest checkpoint + events after it".to_owned(),
            baseline: baseline_p50,
            ratio: ratio(mnemo_p50, baseline_p50),
            target: "reported (flatness below)".to_owned(),
            met: true,
        });
    }
    if let (Some((small, first)), Some((large, last))) = (mnemo_p50s.first(), mnemo_p50s.last()) {
        results.push(WorkloadResult {
            name: "assembly_flatness".to_owned(),
            unit: "us".to_owned(),
            higher_is_better: false,
            mnemo: *last,
            baseline_name: format!("mnemo at {small} events (this row: {large} events)"),
            baseline: *first,
            ratio: ratio(*last, *first),
            target: "latency at the largest size <= 2x latency at the smallest".to_owned(),
            met: ratio(*last, *first) <= 2.0,
        });
    }
    Ok(results)
}
