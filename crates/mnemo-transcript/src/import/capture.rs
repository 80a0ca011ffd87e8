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

use mnemo_core::{Position, Record, RecordKind, SessionOpened};
use sha2::{Digest as _, Sha256};

use crate::format::{TranscriptError, TranscriptRecord};

/// A record's identity within its session's stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identity {
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
#[derive(Debug, Default, Clone)]
pub struct Identities {
    counts: HashMap<u16, u64>,
}

impl Identities {
    /// The record's identity, or `None` for a record an import never writes (checkpoints, copies,
    /// memory records), which the comparison leaves alone.
    pub fn of(&mut self, record: &Record) -> Option<Identity> {
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
#[derive(Debug, Default)]
pub struct Taken {
    records: HashMap<Identity, ([u8; 32], Position)>,
    /// The identities of the stream's records so far.
    identities: Identities,
    /// The stream's session record, once read.
    opened: Option<SessionOpened>,
}

impl Taken {
    /// Notes one record read from the stream (records of kinds an import never writes are ignored).
    pub fn add(&mut self, record: &Record, bytes: &[u8], position: Position) {
        if let Record::SessionOpened(opened) = record {
            self.opened = Some(opened.clone());
        }
        if let Some(identity) = self.identities.of(record) {
            self.records.insert(identity, (hash(bytes), position));
        }
    }
}

/// One session's records compared, a record at a time in file order, with what its stream holds.
#[derive(Debug)]
pub struct SessionCheck {
    taken: Taken,
    identities: Identities,
    /// Each matched identity's position in the log and line in the file.
    matched: HashMap<Identity, (Position, usize)>,
    /// Records to append, so far.
    fresh: usize,
    /// Whether a session record naming another workspace than the stream's is the same session.
    workspace_as_recorded: bool,
}

impl SessionCheck {
    pub fn new(taken: Taken) -> Self {
        Self::resumed(taken, Identities::default())
    }

    /// A check of what follows the records a file yielded earlier, whose identities `identities`
    /// gave.
    pub fn resumed(taken: Taken, identities: Identities) -> Self {
        SessionCheck { taken, identities, matched: HashMap::new(), fresh: 0, workspace_as_recorded: false }
    }

    /// The check of a file whose session lines name the directory each session ran in
    /// ([`Importer::workspace_is_directory`](crate::Importer::workspace_is_directory)): the
    /// workspace that directory resolves to can change with the file system (a repository made
    /// above it, a folder moved) or with the rule (a session recorded with the directory itself,
    /// before workspaces were resolved), so a session record that differs from the stream's only
    /// by its workspace is the same session, which keeps the workspace it was recorded with.
    pub fn workspace_as_recorded(mut self) -> Self {
        self.workspace_as_recorded = true;
        self
    }

    /// Whether `record` (encoded as `bytes`) is to be appended: it is not when the stream holds it
    /// already. A record the stream holds with other bytes is an error naming its line.
    pub fn record(
        &mut self,
        record: &TranscriptRecord,
        bytes: &[u8],
        source: &str,
        session: &str,
    ) -> Result<bool, TranscriptError> {
        let Some(identity) = self.identities.of(&record.record) else {
            self.fresh += 1;
            return Ok(true);
        };
        match self.taken.records.get(&identity) {
            None => {
                self.fresh += 1;
                Ok(true)
            }
            Some((digest, position))
                if *digest == hash(bytes) || self.same_session(&record.record, digest) =>
            {
                self.matched.insert(identity, (*position, record.line));
                Ok(false)
            }
            Some((_, position)) => Err(TranscriptError {
                source_name: source.to_owned(),
                line: record.line,
                field: None,
                reason: format!(
                    "this line changed since it was imported: its {} differs from the one the store \
                     holds at position {position} (session {session}); nothing was appended",
                    describe(&identity)
                ),
            }),
        }
    }

    /// Whether `record` is a session record that differs from the one the stream holds only by
    /// what the held one was recorded without or with otherwise: the source and parent it lacks (a
    /// session imported before sources were recorded is the same session, decision 0166), and,
    /// with [`SessionCheck::workspace_as_recorded`], its workspace. Its file re-imports as already
    /// complete.
    fn same_session(&self, record: &Record, digest: &[u8; 32]) -> bool {
        let (Record::SessionOpened(opened), Some(held)) = (record, &self.taken.opened) else { return false };
        let mut same = opened.clone();
        if held.source.is_none() && held.parent.is_none() {
            same.source = None;
            same.parent = None;
        }
        if self.workspace_as_recorded {
            same.workspace.clone_from(&held.workspace);
        }
        same != *opened && Record::SessionOpened(same).encode().is_ok_and(|bytes| hash(&bytes) == *digest)
    }

    /// Records the log holds already.
    pub fn already(&self) -> usize {
        self.matched.len()
    }

    /// Once the file is read: the records the log holds after the last one the file yields (the
    /// file is an earlier snapshot of one imported since), or, for a record of the stream that the
    /// file no longer yields anywhere else, an error naming the line after which it was. A record
    /// missing from the file is allowed only when every such record comes after all the file
    /// yields and the file yields nothing new.
    pub fn finish(&self, source: &str, session: &str) -> Result<usize, TranscriptError> {
        let last_matched = self.matched.values().map(|(position, _)| *position).max();
        let mut missing: Vec<(&Identity, Position)> = self
            .taken
            .records
            .iter()
            .filter(|(identity, _)| !self.matched.contains_key(*identity))
            .map(|(identity, (_, position))| (identity, *position))
            .collect();
        missing.sort_by_key(|(_, position)| *position);
        let Some((identity, position)) = missing.first() else { return Ok(0) };
        let earlier = last_matched.is_some_and(|last| *position < last);
        if !earlier && self.fresh == 0 {
            return Ok(missing.len());
        }
        // The line before the gap: the matched record just before it in the log.
        let line = self
            .matched
            .values()
            .filter(|(p, _)| p < position)
            .max_by_key(|(p, _)| *p)
            .map_or(1, |(_, line)| *line);
        let what = if earlier {
            "a line after this one was changed or removed since it was imported"
        } else {
            "the file goes on differently from what was imported after this line"
        };
        Err(TranscriptError {
            source_name: source.to_owned(),
            line,
            field: None,
            reason: format!(
                "{what}: session {session} in the store holds {} (position {position}) that this file \
                 no longer yields; nothing was appended",
                describe(identity)
            ),
        })
    }

    /// What the stream holds, for a second reading of the file.
    pub fn into_taken(self) -> Taken {
        self.taken
    }

    /// The identities given so far to the file's records.
    pub fn identities(&self) -> &Identities {
        &self.identities
    }
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
