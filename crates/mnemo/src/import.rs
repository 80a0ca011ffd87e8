//! Appending an import: what the file yields that the log does not hold yet, cut into appends
//! within the log's limits, after every check that could refuse the file.

use std::io::{BufRead, BufReader, Read as _, Seek as _, SeekFrom};

use mnemo_core::limits::{APPEND_BYTES_MAX, APPEND_RECORDS_MAX};
use mnemo_core::{Position, Record, StreamId, StreamRevision, TimestampMs};
use mnemo_log::{Durability, ExpectedRevision, KeyRefusal, NewRecord, RulePrecheck, StreamHead};
use tracing::info_span;

use mnemo_transcript::{
    DOCUMENT_PROBE_BYTES_MAX, IMPORT_FILE_BYTES_MAX, IMPORT_READ_BUFFER_BYTES, Identities, ImportError,
    ImportFormat, ImportReport, ImportStatus, RecordStream, SOURCE_LINE_BYTES_MAX, SessionCheck, StreamState,
    Taken, TranscriptError, TranscriptRecord, detect_format,
};

use crate::error::Error;
use crate::mnemo::{Mnemo, encode_for};
use crate::workspace::workspace_of;

/// Envelopes read per call while collecting what a session's stream holds.
const STREAM_READ_ENVELOPES: usize = 4096;

/// What an import reads: bytes in memory, or a file read a line at a time, twice (once to check
/// the whole of it, once to append).
enum Input<'i> {
    Bytes(&'i [u8]),
    File(&'i std::fs::File),
}

impl<'i> Input<'i> {
    /// The input from its first byte.
    fn open(&self, source: &str) -> Result<Box<dyn BufRead + 'i>, Error> {
        match self {
            Input::Bytes(bytes) => Ok(Box::new(*bytes)),
            Input::File(file) => {
                let read_error = |error| Error::Read { path: source.to_owned(), source: error };
                let mut file = file.try_clone().map_err(read_error)?;
                file.seek(SeekFrom::Start(0)).map_err(read_error)?;
                Ok(Box::new(BufReader::with_capacity(IMPORT_READ_BUFFER_BYTES, file)))
            }
        }
    }

    /// The whole input in memory, for a whole-document format (within the file limit).
    fn whole(&self, source: &str) -> Result<Vec<u8>, Error> {
        let mut bytes = Vec::new();
        self.open(source)?
            .take(IMPORT_FILE_BYTES_MAX + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| Error::Read { path: source.to_owned(), source: error })?;
        if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
            return Err(too_large(source, None));
        }
        Ok(bytes)
    }

    /// The records of the input in `format` (never `auto`), from its first byte; at most `bytes`
    /// of it when given. With `resume`, the input is what follows the bytes the state's stream
    /// read, and its records are those that follow the state's.
    fn records<'s>(
        &self,
        source: &'s str,
        format: ImportFormat,
        bytes: Option<u64>,
        resume: Option<&StreamState>,
    ) -> Result<RecordStream<'s, Box<dyn BufRead + 'i>>, Error>
    where
        'i: 's,
    {
        if let Some(state) = resume {
            let reader: Box<dyn BufRead + 'i> = match bytes {
                Some(limit) => Box::new(self.open(source)?.take(limit)),
                None => self.open(source)?,
            };
            return Ok(RecordStream::resumed(reader, source, state.clone()));
        }
        let reader: Box<dyn BufRead + 'i> = match bytes {
            Some(limit) => Box::new(self.open(source)?.take(limit)),
            None => self.open(source)?,
        };
        match (self, format.is_whole_document()) {
            (Input::Bytes(bytes), true) => Ok(RecordStream::whole(bytes, source, format)?),
            _ => Ok(RecordStream::lines(reader, source, format)?),
        }
    }
}

fn too_large(source: &str, size: Option<u64>) -> Error {
    Error::InvalidInput(match size {
        Some(size) => format!(
            "{source}: the file is {size} bytes, larger than {IMPORT_FILE_BYTES_MAX}, the limit for one import"
        ),
        None => format!(
            "{source}: the file is larger than {IMPORT_FILE_BYTES_MAX} bytes, the limit for one import"
        ),
    })
}

/// One session of an import, as the first reading found it.
struct SessionPass {
    stream: StreamId,
    head: Option<StreamHead>,
    check: SessionCheck,
    /// The identities the file's records before this reading's first had (a resumed capture).
    start: Identities,
    /// Whether the session's records before this reading's first were compared with the log by
    /// an earlier capture (a resumed capture).
    resumed: bool,
}

/// Where a capture of one file left off.
#[derive(Debug)]
pub struct FileCursor {
    /// The file's device and inode when it was read: another file at the same path is read whole.
    pub file: (u64, u64),
    /// SHA-256 of the file's first [`ImportCursor::bytes`] bytes, as they were read.
    pub prefix: [u8; 32],
    /// The import's state at the end of those bytes.
    pub import: ImportCursor,
}

/// Where a capture of a growing file left off: the file's records stream as it stood at the end of
/// the complete lines read, and what each of its sessions' streams held then. A capture of the
/// file grown since reads only what follows (`Mnemo::import_resumed`), as long as the file's
/// bytes before it are the same (the caller checks) and the sessions' streams hold nothing more
/// ([`Mnemo::import_cursor_is_current`]). It lives in memory only.
pub struct ImportCursor {
    state: StreamState,
    sessions: Vec<CursorSession>,
}

struct CursorSession {
    stream: StreamId,
    /// The stream's head after the capture.
    revision: Option<StreamRevision>,
    taken: Taken,
    identities: Identities,
}

impl ImportCursor {
    /// The format the file was read in.
    pub fn format(&self) -> ImportFormat {
        self.state.format()
    }

    /// The bytes of the file read (whole lines, the last ending with its newline).
    pub fn bytes(&self) -> u64 {
        self.state.bytes()
    }
}

impl std::fmt::Debug for ImportCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImportCursor")
            .field("format", &self.format())
            .field("bytes", &self.bytes())
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

/// What the first reading of an input found: everything an import reports, and what the second
/// reading appends.
struct Checked {
    sessions: Vec<SessionPass>,
    lines: usize,
    format: ImportFormat,
    skipped: std::collections::BTreeMap<String, u64>,
    fresh: usize,
    /// Bytes read and their SHA-256, for a file: the second reading must read the same.
    read: Option<(u64, [u8; 32])>,
    /// Whether a session's records come after another session's began (then the records are
    /// appended a session at a time, one reading each).
    interleaved: bool,
    /// The stream's state at the end of the input, when asked for.
    end: Option<StreamState>,
    /// Records the file yielded before this reading (a resumed capture).
    before: usize,
}

/// The append being gathered: one session's records, in file order.
struct Gathering {
    slot: usize,
    records: Vec<NewRecord>,
    bytes: usize,
    timestamp: Option<TimestampMs>,
}

impl Mnemo {
    /// Imports a transcript in the mnemo format; see [`Mnemo::import`].
    pub fn import_transcript(&self, bytes: &[u8], source: &str) -> Result<ImportReport, Error> {
        self.import(bytes, source, ImportFormat::Mnemo)
    }

    /// Reads a file to import (`-` is standard input) through [`IMPORT_FILE_BYTES_MAX`]: a larger
    /// one, or an endless one, is an error naming it, and never read whole.
    pub fn read_import_file(path: &str) -> Result<Vec<u8>, Error> {
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
                return Err(too_large(path, Some(metadata.len())));
            }
            file.take(limit).read_to_end(&mut bytes).map_err(read_error)?;
        }
        if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
            return Err(too_large(path, None));
        }
        Ok(bytes)
    }

    /// Imports a file (`-` is standard input) in `format`, as [`Mnemo::import`] does, reading it a
    /// line at a time: what the import holds in memory does not grow with the file (the formats
    /// that are one JSON document, openai-chat and swe-agent, are read whole). The file is read
    /// twice, once to check all of it and once to append; a file that changes in between is an
    /// error after what was appended, which importing it again completes. Standard input is first
    /// copied to an unnamed file in the store directory. A file larger than
    /// [`IMPORT_FILE_BYTES_MAX`] is refused before a byte of it is read.
    pub fn import_file(&self, path: &str, format: ImportFormat) -> Result<ImportReport, Error> {
        let read_error = |source| Error::Read { path: path.to_owned(), source };
        let file = if path == "-" {
            self.spool(&mut std::io::stdin().lock(), path)?
        } else {
            let mut file = std::fs::File::open(path).map_err(read_error)?;
            let metadata = file.metadata().map_err(read_error)?;
            if metadata.is_dir() {
                return Err(Error::InvalidInput(format!("{path} is a directory: name a transcript file")));
            }
            if metadata.is_file() && metadata.len() > IMPORT_FILE_BYTES_MAX {
                return Err(too_large(path, Some(metadata.len())));
            }
            // A pipe (`<(cat file)`, a FIFO) cannot be read twice: it is spooled as standard input is.
            if metadata.is_file() { file } else { self.spool(&mut file, path)? }
        };
        self.import_opened(&file, path, format)
    }

    /// Imports what `input` holds, as [`Mnemo::import_file`] imports standard input: copied first to
    /// an unnamed file in the store directory, and reported under the name `source`. For an input
    /// this process did not open by a path of its own (a stream another process handed over).
    pub fn import_stream(
        &self,
        input: &mut dyn std::io::Read,
        source: &str,
        format: ImportFormat,
    ) -> Result<ImportReport, Error> {
        let file = self.spool(input, source)?;
        self.import_opened(&file, source, format)
    }

    /// Imports an open regular file, reported under the name `path`.
    fn import_opened(
        &self,
        file: &std::fs::File,
        path: &str,
        format: ImportFormat,
    ) -> Result<ImportReport, Error> {
        let input = Input::File(file);
        let format = match format {
            ImportFormat::Auto => match self.detect_streamed(&input, path)? {
                Some(format) => format,
                None => {
                    // Nothing in the first lines tells: the file may be one document over many
                    // lines, which only the whole of it tells.
                    let bytes = input.whole(path)?;
                    return self.import(&bytes, path, ImportFormat::Auto);
                }
            },
            format => format,
        };
        if format.is_whole_document() {
            let bytes = input.whole(path)?;
            return self.import(&bytes, path, format);
        }
        self.import_input(&input, path, format, None, false).map(|(report, _)| report)
    }

    /// The format the first lines of a file name, read from its start.
    fn detect_streamed(&self, input: &Input<'_>, source: &str) -> Result<Option<ImportFormat>, Error> {
        let mut prefix = Vec::new();
        input
            .open(source)?
            .take(SOURCE_LINE_BYTES_MAX as u64)
            .read_to_end(&mut prefix)
            .map_err(|error| Error::Read { path: source.to_owned(), source: error })?;
        Ok(mnemo_transcript::detect_from_lines(&prefix))
    }

    /// An input that cannot be read twice (standard input, a pipe) copied to a file in the store
    /// directory that has no name (removed as soon as it is open), so an import can read it twice
    /// and a crash leaves nothing behind.
    fn spool(&self, input: &mut dyn std::io::Read, source: &str) -> Result<std::fs::File, Error> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let write_error =
            |path: &std::path::Path, source| Error::Write { path: path.display().to_string(), source };
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = self.local_dir().join(format!(".import-spool-{}-{nanos}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mnemo_log::PRIVATE_FILE_MODE)
            .open(&path)
            .map_err(|e| write_error(&path, e))?;
        std::fs::remove_file(&path).map_err(|e| write_error(&path, e))?;
        let copied = std::io::copy(&mut input.take(IMPORT_FILE_BYTES_MAX + 1), &mut file)
            .map_err(|error| Error::Read { path: source.to_owned(), source: error })?;
        if copied > IMPORT_FILE_BYTES_MAX {
            return Err(too_large(source, None));
        }
        Ok(file)
    }

    /// Imports a transcript in `format` (`Auto` tells it from the first lines). The whole file is
    /// converted and checked first; a bad line appends nothing.
    ///
    /// Importing a file again appends only what the log does not hold yet: the rest of an import
    /// that was interrupted, or the new lines of a session file that has grown. Each record is
    /// known by its identity (an event by its id, which the importers take from each source
    /// line's own identity), never by its offset in the file. A line imported before that has
    /// changed, or is gone, is an error naming it, and nothing is appended.
    ///
    /// Records are appended in file order, a session's consecutive records in one append (within
    /// the log's limits); a record that is not an event ends its append.
    pub fn import(&self, bytes: &[u8], source: &str, format: ImportFormat) -> Result<ImportReport, Error> {
        if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
            return Err(too_large(source, Some(bytes.len() as u64)));
        }
        let format = match format {
            ImportFormat::Auto => detect_format(bytes).unwrap_or(ImportFormat::Mnemo),
            format => format,
        };
        self.import_input(&Input::Bytes(bytes), source, format, None, false).map(|(report, _)| report)
    }

    /// Imports `bytes`, the complete lines of a file that may grow, as [`Mnemo::import`] does,
    /// and returns with the report where the import left off: a cursor from which
    /// [`Mnemo::import_resumed`] reads only what the file holds beyond those bytes. No cursor for
    /// a format that is one JSON document, or bytes whose last line has no newline.
    pub fn import_resumable(
        &self,
        bytes: &[u8],
        source: &str,
        format: ImportFormat,
    ) -> Result<(ImportReport, Option<ImportCursor>), Error> {
        if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
            return Err(too_large(source, Some(bytes.len() as u64)));
        }
        let format = match format {
            ImportFormat::Auto => detect_format(bytes).unwrap_or(ImportFormat::Mnemo),
            format => format,
        };
        self.import_input(&Input::Bytes(bytes), source, format, None, !format.is_whole_document())
    }

    /// Imports `more`, what a file holds beyond the bytes `cursor` read (complete lines), as
    /// importing the whole file would: the file's records that follow those the cursor's import
    /// yielded, each compared with what its session's stream holds, the new ones appended. The
    /// caller makes sure the file's first [`ImportCursor::bytes`] are the bytes the cursor's import
    /// read, and [`Mnemo::import_cursor_is_current`] that the streams hold nothing more since.
    pub fn import_resumed(
        &self,
        more: &[u8],
        source: &str,
        cursor: ImportCursor,
    ) -> Result<(ImportReport, Option<ImportCursor>), Error> {
        let total = cursor.bytes().saturating_add(more.len() as u64);
        if total > IMPORT_FILE_BYTES_MAX {
            return Err(too_large(source, Some(total)));
        }
        let format = cursor.format();
        self.import_input(&Input::Bytes(more), source, format, Some(cursor), true)
    }

    /// Whether every session `cursor` saw holds in the log what it held when the cursor was
    /// made: nothing was appended to them since, by this import or another writer.
    pub fn import_cursor_is_current(&self, cursor: &ImportCursor) -> Result<bool, Error> {
        for session in &cursor.sessions {
            let head = self.log.stream_head(&session.stream)?.map(|head| head.revision);
            if head != session.revision {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn import_input(
        &self,
        input: &Input<'_>,
        source: &str,
        format: ImportFormat,
        resume: Option<ImportCursor>,
        keep_cursor: bool,
    ) -> Result<(ImportReport, Option<ImportCursor>), Error> {
        let _span = info_span!("import", source, format = format.name()).entered();
        let (state, resumed_sessions) = match resume {
            Some(ImportCursor { state, sessions }) => (Some(state), sessions),
            None => (None, Vec::new()),
        };
        // NOTE: the first reading checks every record (converted, parsed, encoded, compared with
        // the log, its event id new to the store) before the second appends any, so a record the
        // log would refuse refuses the whole file, not a tail of it.
        let checked = self
            .check_input(input, source, format, state.as_ref(), resumed_sessions, keep_cursor)
            .map_err(|error| match state {
                Some(_) => error,
                None => probe_document(input, source, format, error),
            })?;
        let (mut created, mut already, mut store_ahead) = (0, checked.before, 0);
        for pass in &checked.sessions {
            created += usize::from(pass.head.is_none());
            already += pass.check.already();
            // NOTE: a resumed session's earlier records were compared with the log by the capture
            // that made the cursor, of the same bytes: only a session the file did not yield
            // before is checked for records the log holds that the file does not.
            if !pass.resumed {
                store_ahead += pass.check.finish(source, pass.stream.as_str())?;
            }
        }
        let fresh = checked.fresh;
        let (lines, format, skipped, sessions_in_file) =
            (checked.lines, checked.format, checked.skipped.clone(), checked.sessions.len());
        let identities: Vec<Identities> =
            checked.sessions.iter().map(|pass| pass.check.identities().clone()).collect();
        let mut end = checked.end.clone();
        let (positions, passes) = if fresh == 0 {
            let passes = checked
                .sessions
                .into_iter()
                .map(|pass| (pass.stream, pass.head.map(|h| h.revision), pass.check.into_taken()))
                .collect();
            (None, passes)
        } else {
            self.append_input(input, source, checked, state.as_ref())?
        };
        let cursor = match end.take() {
            Some(end) if keep_cursor => Some(self.cursor_after(end, passes, identities)?),
            _ => None,
        };
        if let Some((_, last)) = positions {
            // NOTE: the import is committed here. A stage that cannot fold it now (a full disk fails
            // its commit too) catches up when the store is next opened; failing the import would
            // tell the caller that a durable append did not happen.
            if let Err(error) = self.catch_up_to(last) {
                tracing::warn!(%error, "import committed; the projections will catch up on the next open");
            }
        }
        let status = if fresh == 0 {
            ImportStatus::AlreadyComplete
        } else if already > 0 {
            ImportStatus::Resumed
        } else {
            ImportStatus::Imported
        };
        let report = ImportReport {
            source: source.to_owned(),
            status,
            lines,
            sessions: created,
            sessions_in_file,
            records: fresh,
            already,
            store_ahead,
            positions,
            format,
            skipped,
        };
        Ok((report, cursor))
    }

    /// The cursor of an import that read up to `end`: each session's stream as the log holds it
    /// now (what the import appended read back, so the cursor holds what the log holds).
    fn cursor_after(
        &self,
        end: StreamState,
        passes: Vec<(StreamId, Option<StreamRevision>, Taken)>,
        identities: Vec<Identities>,
    ) -> Result<ImportCursor, Error> {
        let mut sessions = Vec::with_capacity(passes.len());
        for ((stream, revision, mut taken), identities) in passes.into_iter().zip(identities) {
            let from = revision.map_or(StreamRevision::FIRST, |r| StreamRevision(r.0 + 1));
            let revision = self.read_taken(&stream, from, &mut taken)?.or(revision);
            sessions.push(CursorSession { stream, revision, taken, identities });
        }
        Ok(ImportCursor { state: end, sessions })
    }

    /// The first reading: every record converted, parsed, encoded and compared with the log, every
    /// new event's id checked against the store's, and every new record's key rules (its run's
    /// identity and seal, its tool call's pairing) checked against the log's key index and the
    /// file's earlier records; nothing is appended. The writer decides the rules again as each
    /// append lands, but a file's appends must all land or none.
    fn check_input(
        &self,
        input: &Input<'_>,
        source: &str,
        format: ImportFormat,
        resume: Option<&StreamState>,
        resumed: Vec<CursorSession>,
        keep_end: bool,
    ) -> Result<Checked, Error> {
        let mut records = input.records(source, format, None, resume)?;
        if keep_end {
            records.keep_end_state();
        }
        let before = resume.map_or(0, |state| state.yielded());
        let directories = names_directories(records.format());
        let mut sessions: Vec<SessionPass> = Vec::new();
        for session in resumed {
            let head = self.log.stream_head(&session.stream)?;
            let start = session.identities.clone();
            let check = session_check(session.taken, session.identities, directories);
            sessions.push(SessionPass { stream: session.stream, head, check, start, resumed: true });
        }
        let (mut fresh, mut interleaved, mut last_slot) = (0, false, 0);
        let mut rules = RulePrecheck::default();
        let held = |key: &[u8]| self.log.held_key(key);
        while let Some((slot, record)) = records.next_record()? {
            let record = resolve_workspace(record, directories, source)?;
            interleaved |= slot < last_slot;
            last_slot = slot;
            if slot == sessions.len() {
                let stream = StreamId::session(&records.sessions()[slot]);
                let head = self.log.stream_head(&stream)?;
                let mut taken = Taken::default();
                if head.is_some() {
                    self.read_taken(&stream, StreamRevision::FIRST, &mut taken)?;
                }
                let (check, start) =
                    (session_check(taken, Identities::default(), directories), Identities::default());
                sessions.push(SessionPass { stream, head, check, start, resumed: false });
            }
            let Some(pass) = sessions.get_mut(slot) else {
                return Err(Error::InvalidInput(format!(
                    "{source}: line {} names a session the reading did not meet in order",
                    record.line
                )));
            };
            let encoded = encode_record(&pass.stream, &record, source)?;
            if pass.check.record(&record, &encoded.bytes, source, pass.stream.as_str())? {
                fresh += 1;
                if let Record::RuntimeEvent(event) = &record.record {
                    self.check_event_id_is_new(event.id.as_str(), record.line, source)?;
                }
                if let Some(refusal) = rules.check(&encoded.rules, &held)? {
                    return Err(rule_refused(&pass.stream, &refusal, record.line, source));
                }
            }
        }
        Ok(Checked {
            lines: records.line_count(),
            format: records.format(),
            skipped: records.skipped().clone(),
            read: records.read(),
            end: records.end_state(),
            sessions,
            fresh,
            interleaved,
            before,
        })
    }

    /// The second reading: the records the first found new, appended session by session in order
    /// of first appearance, each session's in file order. A file whose sessions interleave is read
    /// once per session, so that what it holds in memory stays one line and one append.
    #[expect(clippy::type_complexity, reason = "positions, and each session's stream, head and records")]
    fn append_input(
        &self,
        input: &Input<'_>,
        source: &str,
        checked: Checked,
        resume: Option<&StreamState>,
    ) -> Result<(Option<(Position, Position)>, Vec<(StreamId, Option<StreamRevision>, Taken)>), Error> {
        let Checked { sessions, fresh, read, format, interleaved, .. } = checked;
        let count = sessions.len();
        let heads: Vec<Option<StreamRevision>> =
            sessions.iter().map(|p| p.head.map(|h| h.revision)).collect();
        let directories = names_directories(format);
        let mut appender = Appender {
            mnemo: self,
            sessions: sessions
                .into_iter()
                .map(|pass| {
                    let expected =
                        pass.head.map_or(ExpectedRevision::NoStream, |h| ExpectedRevision::Exact(h.revision));
                    (pass.stream, expected, session_check(pass.check.into_taken(), pass.start, directories))
                })
                .collect(),
            directories,
            gathering: None,
            positions: None,
            appended: 0,
            fresh,
        };
        let readings: Vec<Option<usize>> =
            if interleaved { (0..count).map(Some).collect() } else { vec![None] };
        for only in readings {
            let mut records = input.records(source, format, read.map(|(bytes, _)| bytes), resume)?;
            loop {
                let next = match records.next_record() {
                    Ok(next) => next,
                    Err(ImportError::Transcript(error)) => {
                        return Err(appender.changed(source, error.to_string()));
                    }
                    Err(other) => return Err(other.into()),
                };
                let Some((slot, record)) = next else { break };
                if only.is_none_or(|only| only == slot) {
                    appender.add(slot, record, source)?;
                }
            }
            if records.read() != read {
                return Err(appender.changed(source, "its bytes differ from the first reading's".to_owned()));
            }
        }
        appender.flush(self.durability())?;
        if appender.appended != fresh {
            let what = format!("a second reading found {} records to append, not {fresh}", appender.appended);
            return Err(appender.changed(source, what));
        }
        let positions = appender.positions;
        let passes = appender
            .sessions
            .into_iter()
            .zip(heads)
            .map(|((stream, _, check), head)| (stream, head, check.into_taken()))
            .collect();
        Ok((positions, passes))
    }

    /// Adds what a session's stream holds from revision `from` on to `taken`, by identity;
    /// returns the last revision read, if any.
    fn read_taken(
        &self,
        stream: &StreamId,
        from: StreamRevision,
        taken: &mut Taken,
    ) -> Result<Option<StreamRevision>, Error> {
        let (mut from, mut last_read) = (from, None);
        loop {
            let envelopes = self.log.read_stream(stream, from, STREAM_READ_ENVELOPES)?;
            let Some(last) = envelopes.last() else { break };
            from = StreamRevision(last.revision.0 + 1);
            last_read = Some(last.revision);
            for envelope in &envelopes {
                let record = Record::decode(envelope.kind, envelope.kind_schema, &envelope.record)
                    .map_err(|e| Error::InvalidInput(format!("{stream} at {}: {e}", envelope.position)))?;
                taken.add(&record, &envelope.record, envelope.position);
            }
            if envelopes.len() < STREAM_READ_ENVELOPES {
                break;
            }
        }
        Ok(last_read)
    }

    /// Refuses the file when one of its new events reuses an event id the store already holds
    /// (an event id is unique in a store, across sessions and files).
    fn check_event_id_is_new(&self, id: &str, line: usize, source: &str) -> Result<(), Error> {
        // One point read of the log's key index per event, however long the log.
        let Some(position) = self.log.key_holder(&mnemo_core::event_key(id))? else { return Ok(()) };
        let stream = self.log.read(position)?.map_or_else(|| "the log".to_owned(), |e| e.stream.to_string());
        Err(Error::Transcript(TranscriptError {
            source_name: source.to_owned(),
            line,
            field: Some("id".to_owned()),
            reason: format!(
                "event id {id} is already in the store ({stream}, position {position}); an event id \
                 is used once per store; nothing was appended"
            ),
        }))
    }
}

/// The second reading's appends: a session's consecutive new records in one append, within the
/// log's limits. Only the last append waits for the disk: persisting it persists every earlier one.
struct Appender<'m> {
    mnemo: &'m Mnemo,
    sessions: Vec<(StreamId, ExpectedRevision, SessionCheck)>,
    /// Whether the file's session lines name directories ([`names_directories`]).
    directories: bool,
    gathering: Option<Gathering>,
    positions: Option<(Position, Position)>,
    /// New records met so far, and how many the first reading found.
    appended: usize,
    fresh: usize,
}

impl Appender<'_> {
    /// One record of the second reading, gathered into an append when it is new.
    fn add(&mut self, slot: usize, record: TranscriptRecord, source: &str) -> Result<(), Error> {
        let record = &resolve_workspace(record, self.directories, source)?;
        let Some((stream, _, check)) = self.sessions.get_mut(slot) else {
            let what = format!("line {} names a session the first reading did not find", record.line);
            return Err(self.changed(source, what));
        };
        let encoded = encode_record(stream, record, source)?;
        match check.record(record, &encoded.bytes, source, stream.as_str()) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(error) => return Err(self.changed(source, error.to_string())),
        }
        self.appended += 1;
        if self.gathering.as_ref().is_some_and(|g| {
            g.slot != slot
                || g.records.len() == APPEND_RECORDS_MAX
                || g.bytes + encoded.bytes.len() > APPEND_BYTES_MAX
        }) {
            self.flush(Durability::Buffered)?;
        }
        let current = self.gathering.get_or_insert_with(|| Gathering {
            slot,
            records: Vec::new(),
            bytes: 0,
            timestamp: None,
        });
        current.bytes += encoded.bytes.len();
        current.records.push(encoded);
        current.timestamp = Some(record.timestamp);
        // A record that is not an event (a session, turn end, flags or archive line, whose time
        // lives only in its envelope) ends its append, so its envelope carries its own time and an
        // export writes back exactly the time the file gave.
        if !matches!(record.record, Record::RuntimeEvent(_)) {
            let last = self.appended == self.fresh;
            self.flush(if last { self.mnemo.durability() } else { Durability::Buffered })?;
        }
        Ok(())
    }

    /// Appends what was gathered, if anything.
    fn flush(&mut self, durability: Durability) -> Result<(), Error> {
        let Some(gathered) = self.gathering.take() else { return Ok(()) };
        let Some((stream, expected, _)) = self.sessions.get_mut(gathered.slot) else { return Ok(()) };
        let appended = self.mnemo.append_encoded(
            stream,
            *expected,
            gathered.records,
            gathered.timestamp,
            durability,
            mnemo_log::BatchLimits::Standard,
        )?;
        *expected = ExpectedRevision::Exact(appended.last_revision);
        self.positions =
            Some((self.positions.map_or(appended.first_position, |p| p.0), appended.last_position));
        Ok(())
    }

    /// The error for a file that did not read the same the second time (it changed during the
    /// import): what was appended stays, and importing the file again completes it.
    fn changed(&self, source: &str, what: String) -> Error {
        let appended = match self.positions {
            Some((first, last)) => format!("positions {first}..={last} were appended before the change"),
            None => "nothing was appended".to_owned(),
        };
        Error::InvalidInput(format!(
            "{source}: the file changed while it was imported ({what}); {appended}; import it again to complete it"
        ))
    }
}

/// A first reading's error, or, when it is at the first line of a JSON Lines file that is one
/// JSON document over several lines, the error that says so.
fn probe_document(input: &Input<'_>, source: &str, format: ImportFormat, error: Error) -> Error {
    let Error::Transcript(transcript) = error else { return error };
    if format.is_whole_document() || transcript.line > 1 && !first_line_at(input, source, transcript.line) {
        return Error::Transcript(transcript);
    }
    let bytes = match input {
        Input::Bytes(bytes) => std::borrow::Cow::Borrowed(*bytes),
        Input::File(file) => match file.metadata() {
            Ok(metadata) if metadata.len() <= DOCUMENT_PROBE_BYTES_MAX => match input.whole(source) {
                Ok(bytes) => std::borrow::Cow::Owned(bytes),
                Err(_) => return Error::Transcript(transcript),
            },
            _ => return Error::Transcript(transcript),
        },
    };
    Error::Transcript(mnemo_transcript::whole_document(&bytes, source, format).unwrap_or(transcript))
}

/// Whether `line` is the first line of the input that is not blank.
fn first_line_at(input: &Input<'_>, source: &str, line: usize) -> bool {
    input.open(source).is_ok_and(|reader| mnemo_transcript::is_first_line(reader, line))
}

/// The error for a new record that breaks a rule of the log's key index (a run sealed, a tool
/// result without its call, ...), naming its line.
fn rule_refused(stream: &StreamId, refusal: &KeyRefusal, line: usize, source: &str) -> Error {
    let reason = mnemo_core::AppendRefusal::of_rule(&refusal.rule);
    Error::Transcript(TranscriptError {
        source_name: source.to_owned(),
        line,
        field: None,
        reason: format!("{stream}: {reason}; nothing was appended"),
    })
}

/// Whether the session lines of a file in `format` name the directory each session ran in
/// ([`Importer::workspace_is_directory`](mnemo_transcript::Importer::workspace_is_directory)).
fn names_directories(format: ImportFormat) -> bool {
    mnemo_transcript::importer(format).is_some_and(|importer| importer.workspace_is_directory())
}

/// The check of one session's records against its stream; for a file whose session lines name
/// directories, a session keeps the workspace it was recorded with.
fn session_check(taken: Taken, identities: Identities, directories: bool) -> SessionCheck {
    let check = SessionCheck::resumed(taken, identities);
    if directories { check.workspace_as_recorded() } else { check }
}

/// `record`, with the directory its session line names replaced by that directory's workspace
/// ([`workspace_of`]) when the file's session lines name directories: the log records the
/// workspace, so nothing that reads it back looks at a file system.
fn resolve_workspace(
    mut record: TranscriptRecord,
    directories: bool,
    source: &str,
) -> Result<TranscriptRecord, Error> {
    let line = record.line;
    if let (true, Record::SessionOpened(opened)) = (directories, &mut record.record)
        && let Some(directory) = &opened.workspace
    {
        let workspace = workspace_of(directory.as_str()).map_err(|error| {
            Error::Transcript(TranscriptError {
                source_name: source.to_owned(),
                line,
                field: Some("cwd".to_owned()),
                reason: format!("the workspace of {directory}: {error}"),
            })
        })?;
        opened.workspace = Some(workspace);
    }
    Ok(record)
}

/// A record encoded for its stream; a record that does not encode names its line.
fn encode_record(stream: &StreamId, record: &TranscriptRecord, source: &str) -> Result<NewRecord, Error> {
    encode_for(stream, &record.record).map_err(|error| {
        Error::Transcript(TranscriptError {
            source_name: source.to_owned(),
            line: record.line,
            field: None,
            reason: error.to_string(),
        })
    })
}
