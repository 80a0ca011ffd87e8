//! What an import still has to append: the records a file yields, compared by identity with the
//! records its sessions already hold in the log.
//!
//! One mechanism serves a rerun after an interrupted import and the capture of a session file that
//! grew since it was imported: the records already in the log are the record of what was taken.
//! Every record has an identity within its session (a RuntimeEvent its event id, a turn end its
//! turn, a session line the session, a flags or archive line its order among those); the importer
//! derives ids from each line's own identity (a Claude Code line's `uuid`), never from a byte
//! offset, so a line that a later snapshot holds in the middle still matches. A record whose
//! identity the stream already holds is skipped when it is the same bytes, and is an error naming
//! its line when it is not; a record of the stream that the file no longer yields is an error too.
//! Nothing else is stored, so an import in several steps leaves the log a single import leaves.

use std::collections::HashMap;

use mnemo_core::{Position, Record, RecordKind};
use mnemo_log::NewRecord;
use sha2::{Digest as _, Sha256};

use crate::transcript::{TranscriptError, TranscriptRecord};

/// A record's identity within its session's stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Identity {
    /// The session's opening record.
    Opened,
    /// A RuntimeEvent, by its event id.
    Event(String),
    /// A turn's end, by its turn.
    TurnEnd(String),
    /// The n-th record of a kind that has no identity of its own (flags, archive).
    Nth(u16, u64),
}

/// Gives each record of a session its identity, in stream order.
#[derive(Default)]
pub(crate) struct Identities {
    counts: HashMap<u16, u64>,
}

impl Identities {
    /// The record's identity, or `None` for a record an import never writes (checkpoints, copies,
    /// memory records), which the comparison leaves alone.
    pub(crate) fn of(&mut self, record: &Record) -> Option<Identity> {
        Some(match record {
            Record::SessionOpened(_) => Identity::Opened,
            Record::RuntimeEvent(event) => Identity::Event(event.id.as_str().to_owned()),
            Record::TurnEnded(end) => Identity::TurnEnd(end.turn.as_str().to_owned()),
            Record::SessionFlagsChanged(_) | Record::SessionArchived(_) => {
                let code = record.kind().code();
                let count = self.counts.entry(code).or_insert(0);
                *count += 1;
                Identity::Nth(code, *count)
            }
            _ => return None,
        })
    }
}

/// What a session's stream already holds: each importable record's identity, the hash of its
/// bytes and its position.
#[derive(Default)]
pub(crate) struct Taken {
    records: HashMap<Identity, ([u8; 32], Position)>,
}

impl Taken {
    /// Notes one record read from the stream (records of kinds an import never writes are ignored).
    pub(crate) fn add(
        &mut self,
        identities: &mut Identities,
        record: &Record,
        bytes: &[u8],
        position: Position,
    ) {
        if let Some(identity) = identities.of(record) {
            self.records.insert(identity, (hash(bytes), position));
        }
    }

    /// Records the stream holds.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

/// A session's records split into those already in the log and those to append.
pub(crate) struct Plan {
    /// Indexes (into the session's records) of the records to append, in file order.
    pub(crate) fresh: Vec<usize>,
    /// Records the log already holds.
    pub(crate) already: usize,
    /// Records the log holds after the last one this file yields: the file is an older snapshot
    /// of one imported later (only when the file yields nothing new).
    pub(crate) store_ahead: usize,
}

/// Compares a session's records (and their encoded bytes, index for index) with what its stream
/// holds. A record the stream holds with other bytes is an error naming its line. A record of the
/// stream that the file no longer yields is an error naming the line after which it was, unless
/// every such record comes after all the file yields and the file yields nothing new: then the
/// file is an earlier snapshot of one imported since, and there is nothing to do.
pub(crate) fn plan(
    taken: &Taken,
    records: &[TranscriptRecord],
    encoded: &[NewRecord],
    source: &str,
    session: &str,
) -> Result<Plan, TranscriptError> {
    let fail = |line: usize, reason: String| TranscriptError {
        source_name: source.to_owned(),
        line,
        field: None,
        reason,
    };
    let mut identities = Identities::default();
    let mut fresh = Vec::new();
    // Each matched identity's position in the log and line in the file.
    let mut matched: HashMap<Identity, (Position, usize)> = HashMap::with_capacity(taken.len());
    for (index, (record, encoded)) in records.iter().zip(encoded).enumerate() {
        let Some(identity) = identities.of(&record.record) else {
            fresh.push(index);
            continue;
        };
        match taken.records.get(&identity) {
            None => fresh.push(index),
            Some((digest, position)) if *digest == hash(&encoded.bytes) => {
                matched.insert(identity, (*position, record.line));
            }
            Some((_, position)) => {
                return Err(fail(
                    record.line,
                    format!(
                        "this line changed since it was imported: its {} differs from the one the store \
                         holds at position {position} (session {session}); nothing was appended",
                        describe(&identity)
                    ),
                ));
            }
        }
    }
    let last_matched = matched.values().map(|(position, _)| *position).max();
    let mut missing: Vec<(&Identity, Position)> = taken
        .records
        .iter()
        .filter(|(identity, _)| !matched.contains_key(*identity))
        .map(|(identity, (_, position))| (identity, *position))
        .collect();
    missing.sort_by_key(|(_, position)| *position);
    let mut store_ahead = 0;
    if let Some((identity, position)) = missing.first() {
        let earlier = last_matched.is_some_and(|last| *position < last);
        if earlier || !fresh.is_empty() {
            // The line before the gap: the matched record just before it in the log.
            let line = matched
                .values()
                .filter(|(p, _)| p < position)
                .max_by_key(|(p, _)| *p)
                .map_or(1, |(_, line)| *line);
            let what = if earlier {
                "a line after this one was changed or removed since it was imported"
            } else {
                "the file goes on differently from what was imported after this line"
            };
            return Err(fail(
                line,
                format!(
                    "{what}: session {session} in the store holds {} (position {position}) that this file \
                     no longer yields; nothing was appended",
                    describe(identity)
                ),
            ));
        }
        store_ahead = missing.len();
    }
    Ok(Plan { fresh, already: matched.len(), store_ahead })
}
fn describe(identity: &Identity) -> String {
    match identity {
        Identity::Opened => "session line".to_owned(),
        Identity::Event(id) => format!("event {id}"),
        Identity::TurnEnd(turn) => format!("end of turn {turn}"),
        Identity::Nth(code, n) => {
            let kind = RecordKind::from_code(*code).map_or("record", RecordKind::name);
            format!("{kind} record number {n}")
        }
    }
}

fn hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}
