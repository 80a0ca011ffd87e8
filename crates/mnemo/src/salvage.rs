//! Salvage: every envelope of a damaged store whose hash chain still verifies, from position 1 up to
//! the first damage, copied into a new store, with a report of exactly what was lost.
//!
//! The damaged store is never opened in place (the storage engine would repair, and so change, what
//! it opens): its log is read from a private copy beside the new store, whose journal is cut before
//! the first batch the storage engine refuses (see `mnemo_log::DamagedCopy`), and the copy is deleted
//! at the end.
//!
//! The copy keeps each envelope's position, stream, revision, record and time, so its hashes are
//! the original's: the new log is the intact prefix of the old one, byte for byte. The new store's
//! projections are folded from it as for any store.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use mnemo_core::limits::{APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use mnemo_core::{Position, StreamId, TimestampMs};
use mnemo_log::{
    ChainVerifier, DamagedCopy, Durability, Envelope, ExpectedRevision, FjallLog, GENESIS_HASH, LogBackend,
    LogOptions, NewRecord,
};
use tracing::info_span;

use crate::error::Error;
use crate::mnemo::{Config, Mnemo};
use crate::stages::StageReport;

/// The prefix of the scratch directory that holds the damaged store's copy during a salvage.
const SCRATCH_PREFIX: &str = ".mnemo-salvage-";

/// What `salvage` recovered and what it could not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SalvageReport {
    /// The damaged store.
    pub from: String,
    /// The new store.
    pub to: String,
    /// Envelopes copied: positions 1 up to this one, every one verified.
    pub recovered: u64,
    /// The last position the damaged store is known to have held: its log's last stored position
    /// or its high-water mark (the last it acknowledged), whichever is higher.
    pub known_head: u64,
    /// Positions not recovered (`FIRST..=LAST`), if any.
    pub lost: Option<String>,
    /// How many envelopes that is.
    pub lost_envelopes: u64,
    /// What stopped the copy: the first damage met, if any.
    pub damage: Option<String>,
    /// Where the damaged store's journal had to be cut for the storage engine to read it (a batch
    /// that fails its checksum or does not decode), if it had to be.
    pub journal_cut: Option<String>,
    /// The new store's stages, folded from the recovered log.
    pub stages: Vec<StageReport>,
}

/// Copies what verifies of the store in `from` into a new store in `to` (a new path or an empty
/// directory). `progress` hears each copied position.
pub fn salvage(from: &Path, to: &Path, progress: &mut dyn FnMut(Position)) -> Result<SalvageReport, Error> {
    let _span = info_span!("salvage", from = %from.display(), to = %to.display()).entered();
    let acknowledged = mnemo_log::read_high_water(from)?.map_or(Position::ZERO, |mark| mark.position);
    let options = LogOptions { verify_tail_on_open: false, ..LogOptions::default() };
    let copy = DamagedCopy::open(from, &scratch_beside(to)?, &options)?;
    let source = copy.log();
    let target = Mnemo::open(to, Config { durability: Durability::SyncAll, ..Config::default() })?;
    if target.log().head() > Position::ZERO {
        return Err(Error::InvalidInput(format!(
            "salvage writes only into a new store, and {} already holds {} envelopes",
            to.display(),
            target.log().head()
        )));
    }
    let (recovered, damage) = copy_verified(source, &target, progress)?;
    // NOTE: envelopes are copied verbatim, without their key rules (a store written before the key
    // index may hold an event twice, and the copy must keep it to hash as the original): the index
    // is built from the copy once it is complete.
    target.local.rebuild_key_index(mnemo_core::key_rules_of_encoded)?;
    let known_head = source.head().max(acknowledged);
    let journal_cut = copy.journal_cut().map(ToString::to_string);
    drop(copy);
    target.catch_up()?;
    let stages = target.stats()?.stages;
    target.close()?;
    let lost = (known_head > recovered).then(|| format!("{}..={}", recovered.0 + 1, known_head.0));
    Ok(SalvageReport {
        from: from.display().to_string(),
        to: to.display().to_string(),
        recovered: recovered.0,
        known_head: known_head.0,
        lost,
        lost_envelopes: known_head.0.saturating_sub(recovered.0),
        damage,
        journal_cut,
        stages,
    })
}

/// A new scratch directory's path beside the store `to` (whose parent is created if missing), for
/// the copy of the damaged store: on the file system the salvaged store goes to.
fn scratch_beside(to: &Path) -> Result<std::path::PathBuf, Error> {
    let parent = match to.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mnemo_log::PRIVATE_DIR_MODE)
        .create(&parent)
        .map_err(|source| Error::Write { path: parent.display().to_string(), source })?;
    let name = to.file_name().map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
    Ok(parent.join(format!("{SCRATCH_PREFIX}{name}.{}", std::process::id())))
}

/// A run of envelopes that go into one append: one stream, one time, within the append limits.
#[derive(Default)]
struct Group {
    envelopes: Vec<Envelope>,
    bytes: usize,
}

impl Group {
    fn accepts(&self, envelope: &Envelope) -> bool {
        self.envelopes.first().is_none_or(|first| {
            first.stream == envelope.stream
                && first.timestamp == envelope.timestamp
                && self.envelopes.len() < APPEND_RECORDS_MAX
                && self.bytes + envelope.record.len() <= APPEND_BYTES_MAX
        })
    }
}

/// Copies envelopes in order while the chain verifies; returns the last copied position and the
/// damage that stopped the copy, if any.
fn copy_verified(
    source: &FjallLog,
    target: &Mnemo,
    progress: &mut dyn FnMut(Position),
) -> Result<(Position, Option<String>), Error> {
    let mut verifier = ChainVerifier::new(Position::ZERO, GENESIS_HASH);
    let mut group = Group::default();
    let mut damage = None;
    for envelope in source.scan(Position::FIRST) {
        let checked = envelope.and_then(|envelope| verifier.check(&envelope).map(|()| envelope));
        let envelope = match checked {
            Ok(envelope) => envelope,
            Err(error) => {
                damage = Some(error.to_string());
                break;
            }
        };
        if !group.accepts(&envelope) {
            flush(target, std::mem::take(&mut group), Durability::Buffered, progress)?;
        }
        group.bytes += envelope.record.len();
        group.envelopes.push(envelope);
    }
    flush(target, group, Durability::SyncAll, progress)?;
    let copied = target.log().head();
    if damage.is_none() && copied < source.head() {
        damage =
            Some(format!("the log's last stored position is {}, but only {copied} chain", source.head()));
    }
    Ok((copied, damage))
}

/// Appends one group with its original time and checks that it landed where it was and hashes as
/// it did.
fn flush(
    target: &Mnemo,
    group: Group,
    durability: Durability,
    progress: &mut dyn FnMut(Position),
) -> Result<(), Error> {
    let (Some(first), Some(last)) = (group.envelopes.first(), group.envelopes.last()) else {
        return Ok(());
    };
    let stream: StreamId = first.stream.clone();
    let expected = match first.revision.0 {
        0 => ExpectedRevision::NoStream,
        revision => ExpectedRevision::Exact(mnemo_core::StreamRevision(revision - 1)),
    };
    let timestamp: TimestampMs = first.timestamp;
    let (first_position, last_position, last_hash) = (first.position, last.position, last.hash);
    let records =
        group.envelopes.into_iter().map(|e| NewRecord::new(e.kind, e.kind_schema, e.record)).collect();
    let appended = target.append_encoded(
        &stream,
        expected,
        records,
        Some(timestamp),
        durability,
        mnemo_log::BatchLimits::Standard,
    )?;
    let copied = target.log.read(last_position)?;
    if appended.first_position != first_position || copied.is_none_or(|c| c.hash != last_hash) {
        return Err(Error::InvalidInput(format!(
            "salvage copied positions {first_position}..={last_position} to {}.., and they do not hash as the originals",
            appended.first_position
        )));
    }
    progress(last_position);
    Ok(())
}
