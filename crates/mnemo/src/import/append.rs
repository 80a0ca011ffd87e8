//! Appending an import: what the file yields that the log does not hold yet, cut into appends
//! within the log's limits, after every check that could refuse the file.

use mnemo_core::limits::{APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use mnemo_core::{KeyRule, Position, Record, StreamId, StreamRevision, TimestampMs};
use mnemo_log::{Durability, ExpectedRevision, NewRecord};
use tracing::info_span;

use super::capture::{self, Identities, Taken};
use super::{IMPORT_FILE_BYTES_MAX, ImportFormat, parse_import};
use crate::error::Error;
use crate::mnemo::{Mnemo, encode_for};
use crate::transcript::{TranscriptError, TranscriptRecord};

/// Envelopes read per call while collecting what a session's stream holds.
const STREAM_READ_ENVELOPES: usize = 4096;

/// How an import ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ImportStatus {
    /// Nothing the file yields was in the store: all of it was appended.
    Imported,
    /// Part of what the file yields was in the store already (an import that was interrupted, or a
    /// session file that has grown since): the rest was appended.
    Resumed,
    /// Everything the file yields is in the store already: nothing was appended.
    AlreadyComplete,
}

impl ImportStatus {
    /// The status as the CLI prints it.
    pub fn name(self) -> &'static str {
        match self {
            ImportStatus::Imported => "imported",
            ImportStatus::Resumed => "resumed",
            ImportStatus::AlreadyComplete => "already complete",
        }
    }
}

/// What an import appended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportReport {
    /// The file imported.
    pub source: String,
    /// How the import ended.
    pub status: ImportStatus,
    /// Lines read.
    pub lines: usize,
    /// Sessions created.
    pub sessions: usize,
    /// Sessions the file holds records for (created or added to).
    pub sessions_in_file: usize,
    /// Records appended.
    pub records: usize,
    /// Records the file yields that the store held already (taken by an earlier import).
    pub already: usize,
    /// Records the store holds beyond the end of this file: it is an earlier snapshot of a
    /// session file imported since (nothing is appended then).
    pub store_ahead: usize,
    /// First and last position appended (none when nothing was).
    pub positions: Option<(Position, Position)>,
    /// The format the file was read as (what `auto` chose, when it chose).
    pub format: ImportFormat,
    /// Lines (or content blocks) of types the importer does not import, counted by type.
    pub skipped: std::collections::BTreeMap<String, u64>,
}

/// One append of an import: its records and the time to append them at.
type ImportChunk = (Vec<NewRecord>, Option<TimestampMs>);

/// One session's part of an import.
struct SessionAppend {
    stream: StreamId,
    expected: ExpectedRevision,
    chunks: Vec<ImportChunk>,
}

impl Mnemo {
    /// Imports a transcript in the mnemo format; see [`Mnemo::import`].
    pub fn import_transcript(&self, bytes: &[u8], source: &str) -> Result<ImportReport, Error> {
        self.import(bytes, source, ImportFormat::Mnemo)
    }

    /// Reads a file to import (`-` is standard input) through [`IMPORT_FILE_BYTES_MAX`]: a larger
    /// one, or an endless one, is an error naming it, and never read whole.
    pub fn read_import_file(path: &str) -> Result<Vec<u8>, Error> {
        use std::io::Read as _;
        let read_error = |source| Error::Read { path: path.to_owned(), source };
        let mut bytes = Vec::new();
        let limit = IMPORT_FILE_BYTES_MAX + 1;
        if path == "-" {
            std::io::stdin().lock().take(limit).read_to_end(&mut bytes).map_err(read_error)?;
        } else {
            let file = std::fs::File::open(path).map_err(read_error)?;
            // A regular file too large is refused before a byte of it is read.
            let metadata = file.metadata().map_err(read_error)?;
            if metadata.is_file() && metadata.len() > IMPORT_FILE_BYTES_MAX {
                return Err(Error::InvalidInput(format!(
                    "{path}: the file is {} bytes, larger than {IMPORT_FILE_BYTES_MAX}, the limit for one import",
                    metadata.len()
                )));
            }
            file.take(limit).read_to_end(&mut bytes).map_err(read_error)?;
        }
        if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
            return Err(Error::InvalidInput(format!(
                "{path}: the file is larger than {IMPORT_FILE_BYTES_MAX} bytes, the limit for one import"
            )));
        }
        Ok(bytes)
    }

    /// Imports a transcript in `format` (`Auto` tells it from the first lines). The whole file is
    /// converted and checked first; a bad line appends nothing.
    ///
    /// Importing a file again appends only what the log does not hold yet: the rest of an import
    /// that was interrupted, or the new lines of a session file that has grown. Each record is
    /// known by its identity (an event by its id, which the importers take from each source
    /// line's own identity), never by its offset in the file. A line imported before that has
    /// changed, or is gone, is an error naming it, and nothing is appended.
    pub fn import(&self, bytes: &[u8], source: &str, format: ImportFormat) -> Result<ImportReport, Error> {
        let _span = info_span!("import", source, format = format.name()).entered();
        if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
            return Err(Error::InvalidInput(format!(
                "{source}: the file is {} bytes, larger than {IMPORT_FILE_BYTES_MAX}, the limit for one import",
                bytes.len()
            )));
        }
        let parsed = parse_import(bytes, source, format)?;
        let transcript = &parsed.transcript;
        // NOTE: every record is encoded, compared with the log and cut into appends before the
        // first append, so a record the log would refuse refuses the whole file, not a tail of it.
        let mut appends = Vec::with_capacity(transcript.sessions.len());
        let mut new_events: Vec<(&str, usize)> = Vec::new();
        let mut fresh_rules: Vec<(StreamId, usize, Vec<KeyRule>)> = Vec::new();
        let (mut created, mut already, mut fresh_records, mut store_ahead) = (0, 0, 0, 0);
        for (session, records) in &transcript.sessions {
            let stream = StreamId::session(session);
            let encoded = encode_records(&stream, records, source)?;
            let head = self.log.stream_head(&stream)?;
            let taken = match head {
                Some(_) => self.taken(&stream)?,
                None => Taken::default(),
            };
            let plan = capture::plan(&taken, records, &encoded, source, session.as_str())?;
            if head.is_none() {
                created += 1;
            }
            already += plan.already;
            store_ahead += plan.store_ahead;
            fresh_records += plan.fresh.len();
            for index in &plan.fresh {
                if let Record::RuntimeEvent(event) = &records[*index].record {
                    new_events.push((event.id.as_str(), records[*index].line));
                }
                fresh_rules.push((stream.clone(), records[*index].line, encoded[*index].rules.clone()));
            }
            let mut encoded: Vec<Option<NewRecord>> = encoded.into_iter().map(Some).collect();
            let fresh = plan.fresh.iter().filter_map(|i| Some((&records[*i], encoded[*i].take()?)));
            let expected = head.map_or(ExpectedRevision::NoStream, |h| ExpectedRevision::Exact(h.revision));
            appends.push(SessionAppend { stream, expected, chunks: import_chunks(fresh) });
        }
        self.check_event_ids_are_new(&new_events, source)?;
        self.check_rules(&fresh_rules, source)?;
        let positions = self.append_chunks(appends)?;
        if let Some((_, last)) = positions {
            // NOTE: the import is committed here. A stage that cannot fold it now (a full disk fails
            // its commit too) catches up when the store is next opened; failing the import would
            // tell the caller that a durable append did not happen.
            if let Err(error) = self.catch_up_to(last) {
                tracing::warn!(%error, "import committed; the projections will catch up on the next open");
            }
        }
        let status = if fresh_records == 0 {
            ImportStatus::AlreadyComplete
        } else if already > 0 {
            ImportStatus::Resumed
        } else {
            ImportStatus::Imported
        };
        Ok(ImportReport {
            source: source.to_owned(),
            status,
            lines: transcript.lines,
            sessions: created,
            sessions_in_file: transcript.sessions.len(),
            records: fresh_records,
            already,
            store_ahead,
            positions,
            format: parsed.format,
            skipped: parsed.skipped,
        })
    }

    /// What a session's stream holds, by identity.
    fn taken(&self, stream: &StreamId) -> Result<Taken, Error> {
        let mut taken = Taken::default();
        let mut identities = Identities::default();
        let mut from = StreamRevision::FIRST;
        loop {
            let envelopes = self.log.read_stream(stream, from, STREAM_READ_ENVELOPES)?;
            let Some(last) = envelopes.last() else { break };
            from = StreamRevision(last.revision.0 + 1);
            for envelope in &envelopes {
                let record = Record::decode(envelope.kind, envelope.kind_schema, &envelope.record)
                    .map_err(|e| Error::InvalidInput(format!("{stream} at {}: {e}", envelope.position)))?;
                taken.add(&mut identities, &record, &envelope.record, envelope.position);
            }
            if envelopes.len() < STREAM_READ_ENVELOPES {
                break;
            }
        }
        Ok(taken)
    }

    /// Refuses the file when one of its new events reuses an event id the store already holds
    /// (an event id is unique in a store, across sessions and files).
    fn check_event_ids_are_new(&self, events: &[(&str, usize)], source: &str) -> Result<(), Error> {
        for (id, line) in events {
            // One point read of the log's key index per event, however long the log.
            let Some(position) = self.log.key_holder(&mnemo_core::event_key(id))? else { continue };
            let stream =
                self.log.read(position)?.map_or_else(|| "the log".to_owned(), |e| e.stream.to_string());
            return Err(Error::Transcript(TranscriptError {
                source_name: source.to_owned(),
                line: *line,
                field: Some("id".to_owned()),
                reason: format!(
                    "event id {id} is already in the store ({stream}, position {position}); an event id \
                     is used once per store; nothing was appended"
                ),
            }));
        }
        Ok(())
    }

    /// Refuses the file when one of its new records breaks a rule of the log's key index (a run
    /// sealed, a tool result without its call, ...), before the first of its appends: the appends
    /// of one file must all land or none. The writer decides again as each append lands.
    fn check_rules(&self, records: &[(StreamId, usize, Vec<KeyRule>)], source: &str) -> Result<(), Error> {
        let held = |key: &[u8]| self.log.held_key(key);
        let refusal = mnemo_log::precheck_rules(records.iter().map(|(_, _, rules)| rules.as_slice()), &held)?;
        let Some(refusal) = refusal else { return Ok(()) };
        let (stream, line, _) = &records[refusal.record];
        let reason = mnemo_core::AppendRefusal::of_rule(&refusal.rule);
        Err(Error::Transcript(TranscriptError {
            source_name: source.to_owned(),
            line: *line,
            field: None,
            reason: format!("{stream}: {reason}; nothing was appended"),
        }))
    }

    fn append_chunks(&self, appends: Vec<SessionAppend>) -> Result<Option<(Position, Position)>, Error> {
        let total: usize = appends.iter().map(|a| a.chunks.len()).sum();
        let mut done = 0;
        let mut positions: Option<(Position, Position)> = None;
        for SessionAppend { stream, mut expected, chunks } in appends {
            for (encoded, timestamp) in chunks {
                done += 1;
                // Only the last append waits for the disk: persisting it persists every earlier one.
                let durability = if done == total { self.durability() } else { Durability::Buffered };
                let appended = self.append_encoded(
                    &stream,
                    expected,
                    encoded,
                    timestamp,
                    durability,
                    mnemo_log::BatchLimits::Standard,
                )?;
                expected = ExpectedRevision::Exact(appended.last_revision);
                positions =
                    Some((positions.map_or(appended.first_position, |p| p.0), appended.last_position));
            }
        }
        Ok(positions)
    }
}

/// Every record of a session encoded for its stream; a record that does not encode names its line.
fn encode_records(
    stream: &StreamId,
    records: &[TranscriptRecord],
    source: &str,
) -> Result<Vec<NewRecord>, Error> {
    records
        .iter()
        .map(|record| {
            encode_for(stream, &record.record).map_err(|error| {
                Error::Transcript(TranscriptError {
                    source_name: source.to_owned(),
                    line: record.line,
                    field: None,
                    reason: error.to_string(),
                })
            })
        })
        .collect()
}

/// Records cut into appends within the log's record-count and byte limits, each with the time of
/// its last record. A record that is not an event (a session, turn end, flags or archive line,
/// whose time lives only in its envelope) closes its append, so its envelope carries its own time
/// and an export writes back exactly the time the file gave. The cuts depend only on the records
/// from the start of the current append, so the appends of a resumed import are the ones an
/// uninterrupted import would have made.
fn import_chunks<'a>(records: impl Iterator<Item = (&'a TranscriptRecord, NewRecord)>) -> Vec<ImportChunk> {
    let mut chunks = Vec::new();
    let mut current: Vec<NewRecord> = Vec::new();
    let mut current_bytes = 0;
    let mut timestamp = None;
    for (record, encoded) in records {
        let bytes = encoded.bytes.len();
        if !current.is_empty()
            && (current.len() == APPEND_RECORDS_MAX || current_bytes + bytes > APPEND_BYTES_MAX)
        {
            chunks.push((std::mem::take(&mut current), timestamp));
            current_bytes = 0;
        }
        current.push(encoded);
        current_bytes += bytes;
        timestamp = Some(record.timestamp);
        if !matches!(record.record, Record::RuntimeEvent(_)) {
            chunks.push((std::mem::take(&mut current), timestamp));
            current_bytes = 0;
        }
    }
    if !current.is_empty() {
        chunks.push((current, timestamp));
    }
    chunks
}
