//! The key-check workload: what the key index (an event's identity, its run's claims and seal, its
//! tool call's pairing; decisions 0140 and 0141) costs a bulk append. The same corpus goes into two
//! stores, a session at a time alternately, through the log's append: into one with every record's
//! key rules, into the other with none (the log as it was before the index). Both encode every
//! record inside the timing; only the first derives and checks rules. The figure is the ratio.

use std::time::{Duration, Instant};

use mnemo::log::{AppendOutcome, AppendRequest, Durability, ExpectedRevision, NewRecord};
use mnemo::records::{Record, StreamId};

use crate::harness::{
    BenchError, BenchOptions, CORPUS_EVENTS_PER_SESSION, IMPORT_CHUNK_RECORDS, WorkloadResult, fresh_dir,
    open_mnemo, ratio,
};
use crate::workload::{SessionEvents, session_name};

/// Target: the append rate with the key check, as a share of the rate without it.
pub const KEY_CHECK_TARGET: f64 = 0.9;

/// Imports the corpus with and without key rules; returns the workload's figures.
pub fn key_check(options: &BenchOptions) -> Result<WorkloadResult, BenchError> {
    let sessions = options.corpus_events.div_ceil(CORPUS_EVENTS_PER_SESSION);
    let checked = open_mnemo(&fresh_dir(&options.out, "keys-checked")?, Durability::SyncData)?;
    let unchecked = open_mnemo(&fresh_dir(&options.out, "keys-unchecked")?, Durability::SyncData)?;
    let (mut checked_time, mut unchecked_time) = (Duration::ZERO, Duration::ZERO);
    let mut remaining = options.corpus_events;
    for s in 0..sessions {
        let count = remaining.min(CORPUS_EVENTS_PER_SESSION);
        remaining -= count;
        let records: Vec<Record> = SessionEvents::new(options.seed, 20_000 + s, count).collect();
        let stream = StreamId::new(format!("session/{}", session_name(20_000 + s)))
            .map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
        // Which store goes first alternates, so neither always follows the other's writes.
        let order = if s % 2 == 0 { [true, false] } else { [false, true] };
        for with_rules in order {
            let (mnemo, time) =
                if with_rules { (&checked, &mut checked_time) } else { (&unchecked, &mut unchecked_time) };
            // Both stores' stages catch up first, untimed: the appends timed then share the machine
            // with their own store's stages, as a host's do, and not with the other store's
            // backlog (which fell on whichever store came second, about a tenth of the rate).
            checked.catch_up()?;
            unchecked.catch_up()?;
            let started = Instant::now();
            for chunk in records.chunks(IMPORT_CHUNK_RECORDS) {
                append(mnemo, &stream, chunk, with_rules)?;
            }
            *time += started.elapsed();
        }
    }
    checked.catch_up()?;
    unchecked.catch_up()?;
    let events = options.corpus_events as f64;
    let (with, without) = (events / checked_time.as_secs_f64(), events / unchecked_time.as_secs_f64());
    Ok(WorkloadResult {
        name: "append_key_check".to_owned(),
        unit: "events/s".to_owned(),
        higher_is_better: true,
        mnemo: with,
        baseline_name: "the same appends without key rules".to_owned(),
        baseline: without,
        ratio: ratio(with, without),
        target: format!(">= {KEY_CHECK_TARGET}x the rate without key rules"),
        met: ratio(with, without) >= KEY_CHECK_TARGET,
    })
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
