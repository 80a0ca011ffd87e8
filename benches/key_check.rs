//! The key-check workload: what the key index (an event's identity, its run's claims and seal, its
//! tool call's pairing; decisions 0140 and 0141) costs a bulk append. The same corpus is imported,
//! each time into a fresh store of its own, through the log's append, as the bulk-import row
//! imports it: with every record's key rules, and with none (the log as it was before the
//! index). Both encode every record inside the timing; only the first derives and checks rules.
//! The figure is the ratio of the two rates.
//!
//! The imports run one after the other, each into a store of its own that is closed and removed
//! once its import is timed, so that each import shares the machine only with its own store's
//! work: its projection stages, and its storage engine flushing and compacting what it writes, the
//! key index included. That background work is part of what the check costs a host (decision
//! 0142). The stages' and the engines' work left when an import ends is not waited for (it took
//! about 70 s an import at 1M events, seven times the import); closing the store stops it, and the
//! store's files are removed, so that the disk does not write them back during the next import.
//!
//! The first import of a process grows its heap, and the zeroing of those fresh pages (about
//! 0.75 s of the main thread's time in the first import at 1M events, under 0.1 s in each later
//! one) fell on whichever kind ran first. So an untimed import, with key rules, into a store of
//! its own runs before the timed ones (`KEY_CHECK_WARM_UP_EVENTS`). Then each kind is imported
//! `KEY_CHECK_IMPORTS_PER_KIND` times, in the order A B B A B A A B, so that a drift of the machine,
//! steady or bending, falls on both alike. Each rate is the corpus over the median of its kind's
//! import times, as the harness's other rows take the median of their rounds: an import during
//! which the whole machine slowed (every thread of the process did more of its own work in a
//! longer window, the import's and the engine's alike) moved the rate over all imports by several
//! points, and the median sets it aside whichever kind it fell on (decision 0142).

use std::time::{Duration, Instant};

use mnemo::log::{AppendOutcome, AppendRequest, Durability, ExpectedRevision, NewRecord};
use mnemo::records::{Record, StreamId};

use crate::harness::{
    BenchError, BenchOptions, CORPUS_EVENTS_PER_SESSION, IMPORT_CHUNK_RECORDS, WorkloadResult, fresh_dir, io,
    median, open_mnemo, ratio,
};
use crate::workload::{Rng, SessionEvents, session_name};

/// Target: the append rate with the key check, as a share of the rate without it.
pub const KEY_CHECK_TARGET: f64 = 0.9;

/// Mixed into the corpus seed for the draw of which import runs first.
const KEY_CHECK_ORDER_SEED: u64 = 0x6b65_795f_6f72_6465;

/// The pause after a store is closed and removed, before the next import starts: the file system
/// commits its journal every five seconds, and the removal's share of that commit then falls
/// outside the next import.
pub const KEY_CHECK_PAUSE: Duration = Duration::from_secs(6);

/// Imports of fewer events than this are not followed by `KEY_CHECK_PAUSE`: their stores take a few
/// MiB, and sixteen pauses would be most of a quick run's time.
pub const KEY_CHECK_PAUSE_EVENTS_MIN: u64 = 100_000;

/// Events of the untimed import before the timed ones (at most the corpus): enough that the
/// heap's first growth falls on it. The allocator still gives memory back and faults it in again
/// during every import, of either kind.
pub const KEY_CHECK_WARM_UP_EVENTS: u64 = 100_000;

/// Imports of each kind (with key rules, without). Half of an import at 1M events is the writer's
/// commits (the batch, the journal's write and its sync), whose time moved by almost a second from
/// one import to the next whatever its kind; with four imports of each kind, a run's ratio still
/// moved by several points with the machine (decision 0142).
pub const KEY_CHECK_IMPORTS_PER_KIND: usize = 8;

/// Imports the corpus with and without key rules; returns the workload's figures. `progress` hears
/// of each timed import as it ends.
pub fn key_check(
    options: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<WorkloadResult, BenchError> {
    // NOTE: which import runs first is drawn from the seed, so that runs with different seeds spread
    // whatever running first or second costs over both.
    let checked_first = Rng::new(options.seed ^ KEY_CHECK_ORDER_SEED).chance(50);
    import_corpus(options, options.corpus_events.min(KEY_CHECK_WARM_UP_EVENTS), true, "keys-warm-up")?;
    let (mut checked_times, mut unchecked_times) = (Vec::new(), Vec::new());
    // NOTE: the Thue-Morse order (A B B A B A A B B A A B A B B A): the kinds' rounds have the same
    // sum, sum of squares and sum of cubes, so a drift up to cubic in time costs both alike.
    let order =
        (0..2 * KEY_CHECK_IMPORTS_PER_KIND).map(|round| checked_first ^ (round.count_ones() % 2 == 1));
    for (round, with_rules) in order.enumerate() {
        let name = if with_rules { "keys-checked" } else { "keys-unchecked" };
        let time = import_corpus(options, options.corpus_events, with_rules, &format!("{name}-{round}"))?;
        let kind = if with_rules { "with key rules" } else { "without key rules" };
        progress(&format!(
            "key check: import {} of {}, {kind}: {} events in {:.2} s",
            round + 1,
            2 * KEY_CHECK_IMPORTS_PER_KIND,
            options.corpus_events,
            time.as_secs_f64()
        ));
        (if with_rules { &mut checked_times } else { &mut unchecked_times }).push(time.as_secs_f64());
    }
    let events = options.corpus_events as f64;
    let (with, without) = (events / median(checked_times), events / median(unchecked_times));
    let first = if checked_first { "with key rules" } else { "without key rules" };
    let order = format!(
        "each imported {KEY_CHECK_IMPORTS_PER_KIND} times, the median import, the import {first} first"
    );
    Ok(WorkloadResult {
        name: "append_key_check".to_owned(),
        unit: "events/s".to_owned(),
        higher_is_better: true,
        mnemo: with,
        baseline_name: format!("the same appends without key rules ({order})"),
        baseline: without,
        ratio: ratio(with, without),
        target: format!(">= {KEY_CHECK_TARGET}x the rate without key rules"),
        met: ratio(with, without) >= KEY_CHECK_TARGET,
    })
}

/// Imports the first `events` events of the corpus into a fresh store named `store`, a session at
/// a time in appends of `IMPORT_CHUNK_RECORDS`; returns the time the appends took. The store is
/// then closed without waiting for its stages, removed, and followed by `KEY_CHECK_PAUSE` when it
/// held `KEY_CHECK_PAUSE_EVENTS_MIN` events or more.
fn import_corpus(
    options: &BenchOptions,
    events: u64,
    with_rules: bool,
    store: &str,
) -> Result<Duration, BenchError> {
    // NOTE: a store of its own per import, so that nothing of the last import's store is in the
    // engine's memory or on its disk.
    let dir = fresh_dir(&options.out, store)?;
    let mnemo = open_mnemo(&dir, Durability::SyncData)?;
    let sessions = events.div_ceil(CORPUS_EVENTS_PER_SESSION);
    let mut remaining = events;
    let mut time = Duration::ZERO;
    for s in 0..sessions {
        let count = remaining.min(CORPUS_EVENTS_PER_SESSION);
        remaining -= count;
        let records: Vec<Record> = SessionEvents::new(options.seed, 20_000 + s, count).collect();
        let stream = StreamId::new(format!("session/{}", session_name(20_000 + s)))
            .map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
        let started = Instant::now();
        for chunk in records.chunks(IMPORT_CHUNK_RECORDS) {
            append(&mnemo, &stream, chunk, with_rules)?;
        }
        time += started.elapsed();
    }
    // NOTE: dropping the store stops its stages where they are and its engine's background work;
    // its files are scratch (up to about 0.7 GB at 1M events), and removed ones are never written
    // back to the disk, which a store kept until the run ends would be, during the next imports.
    drop(mnemo);
    std::fs::remove_dir_all(&dir).map_err(io(format!("cannot remove {}", dir.display())))?;
    if events >= KEY_CHECK_PAUSE_EVENTS_MIN {
        std::thread::sleep(KEY_CHECK_PAUSE);
    }
    Ok(time)
}

/// One append of `records`, encoded as the facade encodes them; with their key rules or none.
fn append(
    mnemo: &mnemo::Mnemo,
    stream: &StreamId,
    records: &[Record],
    with_rules: bool,
) -> Result<(), BenchError> {
    let mut encoded = Vec::with_capacity(records.len());
    for record in records {
        let kind = record.kind();
        let new =
            NewRecord::new(kind.code(), kind.schema_version(), record.encode().map_err(mnemo::Error::from)?);
        encoded.push(if with_rules { new.with_rules(record.key_rules()) } else { new });
    }
    let mut request = AppendRequest::new(stream.clone(), ExpectedRevision::Any, encoded);
    request.durability = Durability::SyncData;
    match mnemo.log().append(request).map_err(mnemo::Error::from)? {
        AppendOutcome::Appended(_) => Ok(()),
        other => Err(BenchError::Mnemo(mnemo::Error::InvalidInput(format!(
            "{stream}: append not taken: {other:?}"
        )))),
    }
}
