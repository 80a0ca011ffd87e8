//! `mnemo bench`: runs the workloads on Mnemo and on the SQLite baseline side by side, interleaved,
//! in one run, and reports ratios, because the machines these run on are shared and noisy.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo::log::{Durability, ExpectedRevision};
use mnemo::records::{Position, Record, StreamId};
use mnemo::{Config, Mnemo};
use serde::Serialize;

use crate::baseline::Baseline;
use crate::probe;
use crate::workload::{SessionEvents, session_name};

/// Concurrent sessions in the concurrent-append workload.
pub const CONCURRENT_SESSIONS: u64 = 64;
/// Target: durable appends of the concurrent sessions, as a multiple of the baseline's.
pub const CONCURRENT_APPEND_TARGET: f64 = 20.0;
/// Events per session in the generated import corpus.
pub const CORPUS_EVENTS_PER_SESSION: u64 = 1000;
/// Records per Mnemo append during bulk import (one atomic append each).
pub const IMPORT_CHUNK_RECORDS: usize = 1000;
/// Rows a history search asks for (SearchHistory's default limit).
pub const SEARCH_ROWS: usize = 5;
/// Rows a memory key search asks for (the memory search's default limit).
pub const MEMORY_SEARCH_ROWS: u32 = 20;

/// What to run and how big.
#[derive(Debug, Clone, Serialize)]
pub struct BenchOptions {
    /// Where the stores, `report.json` and the charts go.
    pub out: PathBuf,
    /// Events in the generated corpus for bulk import and rebuild.
    pub corpus_events: u64,
    /// Events appended by the single durable writer (each one append).
    pub single_writer_events: u64,
    /// Events appended by each of the 64 concurrent sessions.
    pub events_per_concurrent_session: u64,
    /// Alternating rounds (Mnemo, baseline, Mnemo, ...) of the append workloads; the median counts.
    pub rounds: usize,
    /// Session lengths, in events, of the history-assembly workload.
    pub assembly_sizes: Vec<u64>,
    /// Corpus sizes, in visible messages, of the history-search workload (one store grows).
    pub search_sizes: Vec<u64>,
    /// Item counts of the memory key-search workload (one store grows).
    pub memory_sizes: Vec<u64>,
    /// Messages of the scale workload's transcript-shaped corpus (0: the workload does not run).
    pub scale_messages: u64,
    /// Seed of the workload generator.
    pub seed: u64,
}

impl BenchOptions {
    /// The full run: a 1M-event corpus.
    pub fn full(out: PathBuf) -> Self {
        BenchOptions {
            out,
            corpus_events: 1_000_000,
            single_writer_events: 2000,
            events_per_concurrent_session: 100,
            rounds: 3,
            assembly_sizes: vec![1_000, 10_000, 100_000],
            search_sizes: vec![10_000, 100_000, 1_000_000],
            memory_sizes: vec![10_000, 100_000, 1_000_000],
            scale_messages: 1_000_000,
            seed: 1,
        }
    }

    /// A smoke run that checks the harness works (CI), not the targets.
    pub fn quick(out: PathBuf) -> Self {
        BenchOptions {
            out,
            corpus_events: 5000,
            single_writer_events: 50,
            events_per_concurrent_session: 4,
            rounds: 1,
            assembly_sizes: vec![200, 1_000],
            search_sizes: vec![1_000, 5_000],
            memory_sizes: vec![1_000, 5_000],
            scale_messages: 3_000,
            seed: 1,
        }
    }
}

/// One workload's figures.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    /// Workload name.
    pub name: String,
    /// Unit of the figures.
    pub unit: String,
    /// Whether a larger figure is better.
    pub higher_is_better: bool,
    /// Mnemo's figure.
    pub mnemo: f64,
    /// What Mnemo is compared with.
    pub baseline_name: String,
    /// The comparison's figure.
    pub baseline: f64,
    /// `mnemo / baseline`.
    pub ratio: f64,
    /// The target, in words.
    pub target: String,
    /// Whether the target is met.
    pub met: bool,
}

/// The fsync probe's result.
#[derive(Debug, Clone, Serialize)]
pub struct FsyncProbe {
    /// Median write + fdatasync latency of 4 KiB, microseconds.
    pub median_us: f64,
    /// One durable append at a time can go no faster: appends per second.
    pub ceiling_per_s: f64,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The options of the run.
    pub options: BenchOptions,
    /// The fsync probe.
    pub fsync_probe: FsyncProbe,
    /// Every workload.
    pub workloads: Vec<WorkloadResult>,
    /// Processor seconds of the rebuild by thread name (the pipeline's `stage:NAME` threads, its
    /// feeder, the storage engine's workers, and the calling thread's digests), largest first.
    pub rebuild_cpu: ThreadCpu,
}

/// Errors of a bench run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// Mnemo failed.
    #[error(transparent)]
    Mnemo(#[from] mnemo::Error),
    /// The baseline failed.
    #[error("sqlite baseline: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Files of the run could not be written.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A chart could not be drawn.
    #[error("chart {0}")]
    Chart(String),
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let context = context.into();
    move |source| BenchError::Io { context, source }
}

pub(crate) fn ratio(mnemo: f64, baseline: f64) -> f64 {
    if baseline > 0.0 { mnemo / baseline } else { f64::INFINITY }
}

/// The median of `values` (of an even count, the mean of the middle two); 0 for none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => 0.0,
        len if len % 2 == 0 => (values[middle - 1] + values[middle]) / 2.0,
        _ => values[middle],
    }
}

/// The `at` quantile of `samples`, in milliseconds.
pub(crate) fn quantile_ms(samples: &mut [Duration], at: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * at).round() as usize;
    samples.get(index).copied().unwrap_or_default().as_secs_f64() * 1e3
}

pub(crate) fn fresh_dir(out: &Path, name: &str) -> Result<PathBuf, BenchError> {
    let dir = out.join("stores").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io(format!("cannot clear {}", dir.display())))?;
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    Ok(dir)
}

pub(crate) fn open_mnemo(dir: &Path, durability: Durability) -> Result<Mnemo, BenchError> {
    Ok(Mnemo::open(dir, Config { durability, ..Config::default() })?)
}

fn runtime_event(record: &Record) -> Option<&mnemo::records::RuntimeEvent> {
    match record {
        Record::RuntimeEvent(event) => Some(event),
        _ => None,
    }
}

/// Runs every workload and returns the report (it does not write it; see `crate::report`).
pub fn run(options: &BenchOptions, progress: &mut dyn FnMut(&str)) -> Result<BenchReport, BenchError> {
    std::fs::create_dir_all(&options.out).map_err(io(format!("cannot create {}", options.out.display())))?;
    progress("fsync probe");
    let probe_dir = fresh_dir(&options.out, "probe")?;
    let probe = probe::fsync_probe(&probe_dir, 200).map_err(io("fsync probe"))?;
    let fsync_probe = FsyncProbe {
        median_us: probe.as_secs_f64() * 1e6,
        ceiling_per_s: 1.0 / probe.as_secs_f64().max(1e-9),
    };
    let mut workloads = Vec::new();
    progress("durable append, 1 writer");
    workloads.push(single_writer(options, &fsync_probe)?);
    progress("durable append, 64 concurrent sessions");
    workloads.push(concurrent_sessions(options)?);
    progress("bulk import");
    let (import, store, disk) = bulk_import(options)?;
    workloads.push(import);
    workloads.push(disk);
    progress("bulk append with and without key rules");
    workloads.push(crate::key_check::key_check(options, progress)?);
    progress("rebuild and decode-only scan");
    let (rebuild, rebuild_cpu) = rebuild_and_scan(&store)?;
    workloads.extend(rebuild);
    progress("history assembly");
    workloads.extend(crate::assembly_workload::assembly(options)?);
    workloads.extend(crate::search_workload::search_latency(options, progress)?);
    workloads.extend(crate::memory_workload::key_search(options, progress)?);
    if options.scale_messages > 0 {
        workloads.extend(crate::scale_workload::scale(options, progress)?);
    }
    Ok(BenchReport { options: options.clone(), fsync_probe, workloads, rebuild_cpu })
}

fn single_writer(options: &BenchOptions, probe: &FsyncProbe) -> Result<WorkloadResult, BenchError> {
    let events: Vec<Record> = SessionEvents::new(options.seed, 0, options.single_writer_events).collect();
    let (mut mnemo_rates, mut baseline_rates) = (Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let dir = fresh_dir(&options.out, &format!("single-mnemo-{round}"))?;
        let mnemo = open_mnemo(&dir, Durability::SyncData)?;
        let stream = StreamId::new(format!("session/{}", session_name(0)))
            .map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
        let started = Instant::now();
        for record in &events {
            mnemo.append(&stream, ExpectedRevision::Any, std::slice::from_ref(record))?;
        }
        mnemo_rates.push(events.len() as f64 / started.elapsed().as_secs_f64());
        drop(mnemo);

        let dir = fresh_dir(&options.out, &format!("single-sqlite-{round}"))?;
        let mut baseline = Baseline::open(&dir)?;
        let payloads = payloads(&events)?;
        let started = Instant::now();
        for (event, payload) in &payloads {
            baseline.append(event, payload)?;
        }
        baseline_rates.push(payloads.len() as f64 / started.elapsed().as_secs_f64());
    }
    let (mnemo, baseline) = (median(mnemo_rates), median(baseline_rates));
    let of_ceiling = mnemo / probe.ceiling_per_s;
    Ok(WorkloadResult {
        name: "append_durable_1_writer".to_owned(),
        unit: "events/s".to_owned(),
        higher_is_better: true,
        mnemo,
        baseline_name: "sqlite synchronous=FULL, one transaction per append".to_owned(),
        baseline,
        ratio: ratio(mnemo, baseline),
        target: format!(">= 1.0x baseline and >= 70% of the fsync ceiling (at {:.0}%)", of_ceiling * 100.0),
        met: ratio(mnemo, baseline) >= 1.0 && of_ceiling >= 0.7,
    })
}

pub(crate) fn payloads(events: &[Record]) -> Result<Vec<(mnemo::records::RuntimeEvent, String)>, BenchError> {
    let mut out = Vec::with_capacity(events.len());
    for record in events {
        if let Some(event) = runtime_event(record) {
            let bytes = record.encode().map_err(mnemo::Error::from)?;
            out.push((event.clone(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    Ok(out)
}

fn concurrent_sessions(options: &BenchOptions) -> Result<WorkloadResult, BenchError> {
    let per_session = options.events_per_concurrent_session;
    let sessions: Vec<Vec<Record>> = (0..CONCURRENT_SESSIONS)
        .map(|s| SessionEvents::new(options.seed, 100 + s, per_session).collect())
        .collect();
    let total = (CONCURRENT_SESSIONS * per_session) as f64;
    let (mut mnemo_rates, mut baseline_rates) = (Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let dir = fresh_dir(&options.out, &format!("concurrent-mnemo-{round}"))?;
        let mnemo = Arc::new(open_mnemo(&dir, Durability::SyncData)?);
        let started = Instant::now();
        run_threads(sessions.clone(), |index, records| {
            let stream = StreamId::new(format!("session/{}", session_name(100 + index as u64)))
                .map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
            for record in &records {
                mnemo.append(&stream, ExpectedRevision::Any, std::slice::from_ref(record))?;
            }
            Ok(())
        })?;
        mnemo_rates.push(total / started.elapsed().as_secs_f64());
        drop(mnemo);

        let dir = fresh_dir(&options.out, &format!("concurrent-sqlite-{round}"))?;
        Baseline::open(&dir)?;
        let started = Instant::now();
        run_threads(sessions.clone(), |_, records| {
            let mut baseline = Baseline::open(&dir)?;
            for (event, payload) in payloads(&records)? {
                baseline.append(&event, &payload)?;
            }
            Ok(())
        })?;
        baseline_rates.push(total / started.elapsed().as_secs_f64());
    }
    let (mnemo, baseline) = (median(mnemo_rates), median(baseline_rates));
    Ok(WorkloadResult {
        name: "append_durable_64_sessions".to_owned(),
        unit: "events/s".to_owned(),
        higher_is_better: true,
        mnemo,
        baseline_name: "sqlite synchronous=FULL, 64 connections, one transaction per append".to_owned(),
        baseline,
        ratio: ratio(mnemo, baseline),
        target: format!(">= {CONCURRENT_APPEND_TARGET}x baseline"),
        met: ratio(mnemo, baseline) >= CONCURRENT_APPEND_TARGET,
    })
}

/// Runs `work` on one thread per session and returns the first error.
pub(crate) fn run_threads<F>(sessions: Vec<Vec<Record>>, work: F) -> Result<(), BenchError>
where
    F: Fn(usize, Vec<Record>) -> Result<(), BenchError> + Sync,
{
    std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .into_iter()
            .enumerate()
            .map(|(index, records)| {
                let work = &work;
                scope.spawn(move || work(index, records))
            })
            .collect();
        let mut first_error = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => first_error = first_error.or(Some(error)),
                Err(_) => {
                    first_error =
                        first_error.or(Some(BenchError::Chart("a worker thread panicked".to_owned())))
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

/// Imports the corpus into both; returns the import figures, the Mnemo store (for rebuild), and
/// the bytes-on-disk figures.
fn bulk_import(options: &BenchOptions) -> Result<(WorkloadResult, PathBuf, WorkloadResult), BenchError> {
    let sessions = options.corpus_events.div_ceil(CORPUS_EVENTS_PER_SESSION);
    let mnemo_dir = fresh_dir(&options.out, "corpus-mnemo")?;
    let sqlite_dir = fresh_dir(&options.out, "corpus-sqlite")?;
    let (mut mnemo_time, mut sqlite_time) = (Duration::ZERO, Duration::ZERO);
    let mnemo = open_mnemo(&mnemo_dir, Durability::SyncData)?;
    let mut baseline = Baseline::open(&sqlite_dir)?;
    let mut remaining = options.corpus_events;
    // Interleaved: each session goes into Mnemo, then into the baseline.
    for s in 0..sessions {
        let count = remaining.min(CORPUS_EVENTS_PER_SESSION);
        remaining -= count;
        let records: Vec<Record> = SessionEvents::new(options.seed, 10_000 + s, count).collect();
        let stream = StreamId::new(format!("session/{}", session_name(10_000 + s)))
            .map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
        let started = Instant::now();
        for chunk in records.chunks(IMPORT_CHUNK_RECORDS) {
            mnemo.append(&stream, ExpectedRevision::Any, chunk)?;
        }
        mnemo_time += started.elapsed();
        let batch = payloads(&records)?;
        let started = Instant::now();
        for chunk in batch.chunks(IMPORT_CHUNK_RECORDS) {
            baseline.append_batch(chunk)?;
        }
        sqlite_time += started.elapsed();
    }
    mnemo.catch_up()?;
    drop(mnemo);
    drop(baseline);
    let events = options.corpus_events as f64;
    let (mnemo_rate, sqlite_rate) = (events / mnemo_time.as_secs_f64(), events / sqlite_time.as_secs_f64());
    let import = WorkloadResult {
        name: "bulk_import".to_owned(),
        unit: "events/s".to_owned(),
        higher_is_better: true,
        mnemo: mnemo_rate,
        baseline_name: "sqlite, one transaction per 1000-event batch".to_owned(),
        baseline: sqlite_rate,
        ratio: ratio(mnemo_rate, sqlite_rate),
        target: ">= 3x baseline".to_owned(),
        met: ratio(mnemo_rate, sqlite_rate) >= 3.0,
    };
    let mnemo_bytes =
        probe::disk_bytes(&mnemo_dir).map_err(io("disk usage of the Mnemo store"))? as f64 / events;
    let sqlite_bytes =
        probe::disk_bytes(&sqlite_dir).map_err(io("disk usage of the baseline"))? as f64 / events;
    let journal_bytes =
        probe::journal_bytes(&mnemo_dir).map_err(io("journal size of the Mnemo store"))? as f64 / events;
    let disk = WorkloadResult {
        name: "bytes_on_disk_per_event".to_owned(),
        unit: "bytes/event".to_owned(),
        higher_is_better: false,
        mnemo: mnemo_bytes,
        baseline_name: "sqlite database + WAL".to_owned(),
        baseline: sqlite_bytes,
        ratio: ratio(mnemo_bytes, sqlite_bytes),
        target: format!("<= baseline (of Mnemo's, {journal_bytes:.0} in the storage journal)"),
        met: mnemo_bytes <= sqlite_bytes,
    };
    Ok((import, mnemo_dir, disk))
}

/// Processor seconds by thread name, largest first.
pub type ThreadCpu = Vec<(String, f64)>;

fn rebuild_and_scan(store: &Path) -> Result<(Vec<WorkloadResult>, ThreadCpu), BenchError> {
    let mnemo = open_mnemo(store, Durability::SyncData)?;
    mnemo.catch_up()?;
    let head = mnemo.log().head();

    let started = Instant::now();
    let mut decoded = 0u64;
    for envelope in mnemo.log().scan(Position::FIRST) {
        let envelope = envelope.map_err(mnemo::Error::from)?;
        let record = Record::decode(envelope.kind, envelope.kind_schema, &envelope.record)
            .map_err(|e| mnemo::Error::InvalidInput(format!("position {}: {e}", envelope.position)))?;
        std::hint::black_box(&record);
        decoded += 1;
    }
    let scan_rate = decoded as f64 / started.elapsed().as_secs_f64();

    let rss_reset = probe::reset_peak_rss();
    let cpu_before = probe::thread_cpu();
    let started = Instant::now();
    mnemo.rebuild(None)?;
    let rebuild_rate = head.0 as f64 / started.elapsed().as_secs_f64();
    let cpu = probe::thread_cpu_since(&cpu_before);
    let peak = probe::peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);

    let rebuild = WorkloadResult {
        name: "rebuild_all_stages".to_owned(),
        unit: "events/s".to_owned(),
        higher_is_better: true,
        mnemo: rebuild_rate,
        baseline_name: "decode-only scan of the same log".to_owned(),
        baseline: scan_rate,
        ratio: ratio(rebuild_rate, scan_rate),
        target: ">= 50% of the decode-only scan".to_owned(),
        met: ratio(rebuild_rate, scan_rate) >= 0.5,
    };
    let rss = WorkloadResult {
        name: "rebuild_peak_rss".to_owned(),
        unit: "MiB".to_owned(),
        higher_is_better: false,
        mnemo: peak,
        baseline_name: if rss_reset {
            "limit".to_owned()
        } else {
            "limit (peak not reset: whole process)".to_owned()
        },
        baseline: 256.0,
        ratio: peak / 256.0,
        target: "<= 256 MiB for a 1M-event rebuild".to_owned(),
        met: peak <= 256.0,
    };
    Ok((vec![rebuild, rss], cpu))
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(Vec::new()), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 30.0, 2.0]), 3.0);
    }
}
