//! Importers: transcripts of other agent runtimes converted, line by line, into the mnemo
//! transcript format and parsed by its parser, so every format yields the same records and passes
//! the same checks (the facade then appends a file's records all or nothing).
//!
//! Each converter reads its format's lines, turns the ones it understands into mnemo lines (tagged
//! with the source line they came from, so errors name the source line), skips line types it does
//! not import with a count by type, and fails on a malformed line with its line number.

mod capture;
mod chat;
mod claude;
mod codex;
mod cursors;
mod importer;
mod lines;
mod list;
mod maka;
mod native;
mod report;
mod stream;
mod swe_agent;
mod time;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::format::{TRANSCRIPT_LINE_BYTES_MAX, Transcript, TranscriptError};

pub use capture::{Identities, SessionCheck, Taken};
pub use cursors::{CAPTURE_CURSORS_MAX, FileCursors};
pub use importer::{Conversion, Importer, SOURCE_LINE_BYTES_MAX};
pub use lines::{LineReader, RawLine, is_first_line};
pub use list::{importer, importers};
pub use report::{DOCUMENT_PROBE_BYTES_MAX, IMPORT_READ_BUFFER_BYTES, ImportReport, ImportStatus};
pub use stream::{CONVERT_HOLD_LINES_MAX, RecordStream, StreamState};

/// Why reading an import's records failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// A line is not valid (in its format or as a mnemo line): fix the file; nothing of it was
    /// appended.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// Reading the input failed: the caller's I/O, to retry or report.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The input read (`-` for standard input).
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Largest file an import reads, in bytes. The whole file is checked before anything is appended,
/// and an import holds it in memory while it does (see `docs/FORMAT.md`, "Import").
pub const IMPORT_FILE_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// Lines `auto` looks at before it settles on the mnemo format.
pub const DETECT_LINES_MAX: usize = 32;

/// How the error for a file that holds no conversation line of its format begins (line 1): a
/// capture of a session file that so far holds only metadata lines tells it apart by this.
pub const NO_CONVERSATION_LINES: &str = "no line is a ";

/// A transcript format the importer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ImportFormat {
    /// Tell the format from the file's first lines.
    Auto,
    /// The mnemo transcript format (JSON Lines).
    Mnemo,
    /// OpenAI chat-completions messages: a JSON array of messages, a request body with
    /// `messages`, or JSON Lines of `{"messages": [...]}` conversations.
    OpenaiChat,
    /// Codex CLI rollout JSON Lines (`session_meta`, `response_item`, `event_msg`, ...).
    Codex,
    /// Claude Code session JSON Lines (`user` / `assistant` lines with content blocks).
    ClaudeCode,
    /// The reference system's RuntimeEvent JSON, one event per line.
    Maka,
    /// A SWE-agent trajectory: one JSON document with `trajectory`, `history` and `info`.
    SweAgent,
}

impl ImportFormat {
    /// Every format, `auto` first, then each importer's in [`importers`]' order.
    pub const ALL: [ImportFormat; 7] = [
        ImportFormat::Auto,
        ImportFormat::Mnemo,
        ImportFormat::OpenaiChat,
        ImportFormat::Codex,
        ImportFormat::ClaudeCode,
        ImportFormat::Maka,
        ImportFormat::SweAgent,
    ];

    /// Whether the format is one JSON document, read whole, rather than JSON Lines, read a line
    /// at a time.
    pub fn is_whole_document(self) -> bool {
        importer(self).is_some_and(|importer| importer.conversion().is_whole_document())
    }

    /// What the format is, in one line (the CLI's help beside its name): its importer's
    /// [`Importer::about`].
    pub fn about(self) -> &'static str {
        match importer(self) {
            Some(importer) => importer.about(),
            None => "Tell the format from the file's first lines",
        }
    }

    /// The name the CLI's `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::Auto => "auto",
            ImportFormat::Mnemo => "mnemo",
            ImportFormat::OpenaiChat => "openai-chat",
            ImportFormat::Codex => "codex",
            ImportFormat::ClaudeCode => "claude-code",
            ImportFormat::Maka => "maka",
            ImportFormat::SweAgent => "swe-agent",
        }
    }
}

impl fmt::Display for ImportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ImportFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ImportFormat::ALL.into_iter().find(|f| f.name() == text).ok_or_else(|| {
            let names: Vec<&str> = ImportFormat::ALL.iter().map(|f| f.name()).collect();
            format!("unknown format {text:?}; expected one of {}", names.join(", "))
        })
    }
}

/// A file parsed by an importer: the format used, the records, and the lines skipped by type.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedImport {
    /// The format the file was read as (never `auto`).
    pub format: ImportFormat,
    /// The records, by session.
    pub transcript: Transcript,
    /// Lines (or content blocks) of types the importer does not import, counted by type.
    pub skipped: BTreeMap<String, u64>,
}

/// Parses a whole file in `format` (`auto` detects it first).
pub fn parse_import(
    bytes: &[u8],
    source: &str,
    format: ImportFormat,
) -> Result<ParsedImport, TranscriptError> {
    let format = match format {
        // Nothing recognisable: the native format's parser says precisely what is wrong, unless the
        // file is one JSON document spread over lines, which no line-by-line reading can name.
        ImportFormat::Auto => detect_format(bytes).unwrap_or(ImportFormat::Mnemo),
        format => format,
    };
    let as_transcript_error = |failure: ImportError| match failure {
        ImportError::Transcript(failure) => failure,
        // NOTE: reading a byte slice cannot fail, and converting and parsing fail only as above.
        other => error(source, 1, None, other.to_string()),
    };
    // A file that is one JSON document over several lines fails at its first line when read as
    // JSON Lines; the error then says what the file is.
    let failed = |failure: ImportError| {
        let failure = as_transcript_error(failure);
        whole_document(bytes, source, format).unwrap_or(failure)
    };
    let mut stream = if format.is_whole_document() {
        RecordStream::whole(bytes, source, format).map_err(as_transcript_error)?
    } else {
        RecordStream::lines(bytes, source, format).map_err(failed)?
    };
    let mut by_session: Vec<Vec<crate::format::TranscriptRecord>> = Vec::new();
    while let Some((slot, record)) = stream.next_record().map_err(failed)? {
        by_session.resize_with(by_session.len().max(slot + 1), Vec::new);
        by_session[slot].push(record);
    }
    let sessions = stream.sessions().iter().cloned().zip(by_session).collect();
    let transcript = Transcript { sessions, lines: stream.line_count() };
    Ok(ParsedImport { format, transcript, skipped: stream.skipped().clone() })
}

/// Tells a file's format from its first lines, or `None` when no line looks like any format.
pub fn detect_format(bytes: &[u8]) -> Option<ImportFormat> {
    if let Some(format) = detect_from_lines(bytes) {
        return Some(format);
    }
    // A pretty-printed document spans lines: try the file as one document.
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => {
            importers().iter().find(|importer| importer.detects_document(&object)).map(|i| i.format())
        }
        _ => None,
    }
}

/// Tells a file's format from its first lines alone (the first [`SOURCE_LINE_BYTES_MAX`] bytes of
/// `bytes`, so that a first line as long as a tool's line may be reads whole, at most
/// [`DETECT_LINES_MAX`] lines), or `None` when they do not tell.
pub fn detect_from_lines(bytes: &[u8]) -> Option<ImportFormat> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(SOURCE_LINE_BYTES_MAX)]);
    if let Some(importer) = importers().iter().find(|importer| importer.detects_start(&text)) {
        return Some(importer.format());
    }
    text.lines().filter(|l| !l.trim().is_empty()).take(DETECT_LINES_MAX).find_map(|line| {
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else { return None };
        list::detect_line(&object)
    })
}

/// The error for a file that is one JSON document over several lines read as JSON Lines `format`;
/// `None` when the file is not such a document.
pub fn whole_document(bytes: &[u8], source: &str, format: ImportFormat) -> Option<TranscriptError> {
    let lines = bytes.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).count();
    if lines < 2 || !matches!(serde_json::from_slice::<Value>(bytes), Ok(Value::Object(_) | Value::Array(_)))
    {
        return None;
    }
    match detect_format(bytes) {
        Some(reader) if reader != format => Some(error(
            source,
            1,
            None,
            format!(
                "the file is one JSON document over {lines} lines, not {format} JSON Lines; \
                 the {reader} importer reads it (--format {reader} or auto)"
            ),
        )),
        _ => unknown_document(bytes, source).err(),
    }
}

/// Keys of an unrecognised document named in its error, at most.
const UNKNOWN_KEYS_NAMED_MAX: usize = 12;

/// An error for a file that is a single JSON document over several lines that no importer reads
/// (each of its lines alone is not JSON, so the line-by-line formats could only say "line 1: EOF").
fn unknown_document(bytes: &[u8], source: &str) -> Result<(), TranscriptError> {
    let lines = bytes.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).count();
    if lines < 2 {
        return Ok(());
    }
    let what = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => {
            let keys: Vec<&str> = object.keys().take(UNKNOWN_KEYS_NAMED_MAX).map(String::as_str).collect();
            let more = if object.len() > keys.len() { ", ..." } else { "" };
            format!("an object with keys {}{more}", keys.join(", "))
        }
        Ok(Value::Array(items)) => format!("an array of {} items", items.len()),
        _ => return Ok(()),
    };
    Err(error(
        source,
        1,
        None,
        format!(
            "the file is one JSON document over {lines} lines ({what}), which no importer reads: \
             expected JSON Lines (mnemo, codex, claude-code, maka), a chat-completions array or request \
             body (openai-chat), or a SWE-agent trajectory with `trajectory` and `history` (swe-agent)"
        ),
    ))
}

/// A source line decoded as a JSON object, with its 1-based line number.
#[derive(Clone)]
pub(crate) struct SourceLine {
    pub(crate) line: usize,
    pub(crate) object: Map<String, Value>,
}

/// Splits a whole document's JSON Lines into objects (the chat format's conversation-per-line
/// form). A line that is not UTF-8, not JSON, not an object, or too long is an error naming it;
/// blank lines are skipped.
fn read_lines(bytes: &[u8], source: &str) -> Result<Vec<SourceLine>, TranscriptError> {
    let mut lines = Vec::new();
    for (index, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = index + 1;
        let fail = |reason: String| error(source, line, None, reason);
        if raw.len() > TRANSCRIPT_LINE_BYTES_MAX {
            return Err(fail(format!(
                "line is {} bytes, the limit is {TRANSCRIPT_LINE_BYTES_MAX}",
                raw.len()
            )));
        }
        let text = std::str::from_utf8(raw).map_err(|e| fail(format!("not valid UTF-8: {e}")))?;
        if text.trim().is_empty() {
            continue;
        }
        match crate::json::parse(text.as_bytes()) {
            Ok(Value::Object(object)) => lines.push(SourceLine { line, object }),
            Ok(_) => return Err(fail("a line must be a JSON object".to_owned())),
            Err(e) => return Err(fail(format!("not valid JSON: {e}"))),
        }
    }
    Ok(lines)
}

pub(crate) fn error(
    source: &str,
    line: usize,
    field: Option<&str>,
    reason: impl Into<String>,
) -> TranscriptError {
    TranscriptError {
        source_name: source.to_owned(),
        line,
        field: field.map(str::to_owned),
        reason: reason.into(),
    }
}

/// What a converter produced and the parser has not taken yet: mnemo lines tagged with their source
/// line, and skip counts. Lines are numbered from the file's first; a converter may amend a line
/// until it is settled, and the parser takes settled lines only.
#[derive(Default, Clone)]
pub(crate) struct Converted {
    lines: std::collections::VecDeque<(usize, Value)>,
    /// The number of the first line in `lines` (lines before it were taken).
    base: usize,
    /// Lines before this number are final.
    settled: usize,
    skipped: BTreeMap<String, u64>,
}

/// A title a tool wrote, trimmed and cut at a character boundary to the log's title limit: a tool's
/// title (a name the user gave, a generated summary) is no reason to refuse its session.
fn bounded_title(title: &str) -> &str {
    let title = title.trim();
    let mut end = title.len().min(mnemo_core::limits::TITLE_BYTES_MAX);
    while !title.is_char_boundary(end) {
        end -= 1;
    }
    title[..end].trim_end()
}

/// One part of an event line, in the mnemo format.
pub(crate) fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

impl Converted {
    pub(crate) fn skip(&mut self, what: impl Into<String>) {
        *self.skipped.entry(what.into()).or_insert(0) += 1;
    }

    pub(crate) fn push(&mut self, line: usize, value: Value) {
        self.lines.push_back((line, value));
    }

    /// How many lines were produced so far: the number the next line gets.
    pub(crate) fn len(&self) -> usize {
        self.base + self.lines.len()
    }

    /// A line produced earlier, to amend what a later source line tells about it (a tool
    /// result's error flag learnt from an event that follows the result); `None` once it was taken.
    pub(crate) fn line_mut(&mut self, index: usize) -> Option<&mut Value> {
        let at = index.checked_sub(self.base)?;
        self.lines.get_mut(at).map(|(_, value)| value)
    }

    /// Makes every line before `index` final.
    pub(crate) fn settle_before(&mut self, index: usize) {
        self.settled = self.settled.max(index.min(self.len()));
    }

    /// Makes every line produced so far final.
    pub(crate) fn settle(&mut self) {
        self.settled = self.len();
    }

    /// Lines produced and not final yet.
    pub(crate) fn unsettled(&self) -> usize {
        self.len() - self.settled
    }

    /// The next final line, taken.
    pub(crate) fn take_settled(&mut self) -> Option<(usize, Value)> {
        if self.base >= self.settled {
            return None;
        }
        let line = self.lines.pop_front()?;
        self.base += 1;
        Some(line)
    }

    /// A `flags` line changing the session's title.
    pub(crate) fn title(&mut self, line: usize, session: &str, title: &str, ts: Option<u64>) {
        let title = bounded_title(title);
        if title.is_empty() {
            return;
        }
        let mut value = json!({"kind": "flags", "session": session, "title": title});
        if let Some(ts) = ts {
            value["ts"] = json!(ts);
        }
        self.push(line, value);
    }

    pub(crate) fn session(
        &mut self,
        line: usize,
        session: &str,
        workspace: Option<&str>,
        title: Option<&str>,
        ts: Option<u64>,
    ) {
        let mut value = json!({"kind": "session", "session": session});
        if let Some(workspace) = workspace.filter(|w| !w.is_empty()) {
            value["workspace"] = json!(workspace);
        }
        if let Some(title) = title.map(bounded_title).filter(|t| !t.is_empty()) {
            value["title"] = json!(title);
        }
        if let Some(ts) = ts {
            value["ts"] = json!(ts);
        }
        self.push(line, value);
    }

    /// An event line; `id` is the event id (the parser appends `#<part>` when there are several).
    #[expect(clippy::too_many_arguments, reason = "an event line's fields, each distinct")]
    pub(crate) fn event(
        &mut self,
        line: usize,
        session: &str,
        turn: &str,
        role: &str,
        ts: Option<u64>,
        id: &str,
        parts: Vec<Value>,
    ) {
        if parts.is_empty() {
            return;
        }
        let mut value = json!({"session": session, "turn": turn, "role": role, "id": id, "parts": parts});
        if let Some(ts) = ts {
            value["ts"] = json!(ts);
        }
        self.push(line, value);
    }

    pub(crate) fn turn_end(&mut self, line: usize, session: &str, turn: &str, status: &str, ts: Option<u64>) {
        let mut value = json!({"kind": "turn_end", "session": session, "turn": turn, "status": status});
        if let Some(ts) = ts {
            value["ts"] = json!(ts);
        }
        self.push(line, value);
    }
}

/// Turn bookkeeping shared by the converters of chat-shaped formats: a user message opens a new
/// turn once the current one has had its user message, and an open turn is ended when the next
/// opens and at the end of the file.
#[derive(Default, Clone)]
pub(crate) struct Turns {
    count: u64,
    current: Option<String>,
    has_user: bool,
    has_events: bool,
    status: Option<&'static str>,
    /// The open turn was started by the source's own turn boundary: a second user message inside
    /// it is input given while the turn ran (steering), not a new turn.
    explicit: bool,
}

impl Turns {
    fn open(&mut self, name: Option<&str>) -> String {
        if self.current.is_none() {
            self.count += 1;
            self.current = Some(name.map_or_else(|| format!("t{}", self.count), str::to_owned));
        }
        self.current.clone().unwrap_or_default()
    }

    /// A system, model or tool event in the open turn (opening one if none is). Nothing for no parts.
    #[expect(clippy::too_many_arguments, reason = "an event line's fields, each distinct")]
    pub(crate) fn event(
        &mut self,
        out: &mut Converted,
        line: usize,
        session: &str,
        role: &str,
        ts: Option<u64>,
        id: &str,
        parts: Vec<Value>,
    ) {
        if parts.is_empty() {
            return;
        }
        let turn = self.open(None);
        self.has_events = true;
        out.event(line, session, &turn, role, ts, id, parts);
    }

    /// A user message: it ends the open turn when that already had one, and opens a turn named
    /// `name` (or numbered) when none is open. Nothing for no parts.
    #[expect(clippy::too_many_arguments, reason = "an event line's fields, each distinct")]
    pub(crate) fn user(
        &mut self,
        out: &mut Converted,
        line: usize,
        session: &str,
        name: Option<&str>,
        ts: Option<u64>,
        id: &str,
        parts: Vec<Value>,
    ) {
        if parts.is_empty() {
            return;
        }
        let mut parts = parts;
        if self.has_user && self.explicit && self.current.is_some() {
            for part in &mut parts {
                if part["type"] == "text" {
                    part["steering"] = json!(true);
                }
            }
        } else if self.has_user {
            self.end(out, line, session, ts);
        }
        let turn = self.open(name);
        self.has_user = true;
        self.has_events = true;
        out.event(line, session, &turn, "user", ts, id, parts);
    }

    /// Starts a turn at the source's own boundary (named `name` when the source names it): the
    /// open turn, if any, ends first.
    pub(crate) fn start(
        &mut self,
        out: &mut Converted,
        line: usize,
        session: &str,
        name: Option<&str>,
        ts: Option<u64>,
    ) {
        self.end(out, line, session, ts);
        self.open(name);
        self.explicit = true;
    }

    /// Before what comes ahead of a user's request (a slash command, its output): the open turn
    /// ends if it already had its user message, and a turn named `name` opens if none is open,
    /// which the request that follows then joins.
    pub(crate) fn before_request(
        &mut self,
        out: &mut Converted,
        line: usize,
        session: &str,
        name: &str,
        ts: Option<u64>,
    ) {
        if self.has_user {
            self.end(out, line, session, ts);
        }
        self.open(Some(name));
    }

    /// The name of the open turn, if one is open.
    pub(crate) fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// An event written by `author` (`host` for what the host runtime injected or did itself).
    #[expect(clippy::too_many_arguments, reason = "an event line's fields, each distinct")]
    pub(crate) fn event_by(
        &mut self,
        out: &mut Converted,
        line: usize,
        session: &str,
        role: &str,
        author: &str,
        ts: Option<u64>,
        id: &str,
        parts: Vec<Value>,
    ) {
        let before = out.len();
        self.event(out, line, session, role, ts, id, parts);
        if out.len() > before
            && let Some(value) = out.line_mut(before)
        {
            value["author"] = json!(author);
        }
    }

    /// Marks how the open turn will end (`aborted`, ...); `completed` unless said otherwise.
    pub(crate) fn set_status(&mut self, status: &'static str) {
        self.status = Some(status);
    }

    /// At the end of the file: a turn whose status a line set (an interruption) ends now; any other
    /// open turn stays open, because the file may still grow and its next line decides how the
    /// turn ends. Ending it here would put a turn end in the log that a later import of the grown
    /// file could not take back.
    pub(crate) fn finish(&mut self, out: &mut Converted, line: usize, session: &str) {
        if self.status.is_some() {
            self.end(out, line, session, None);
        }
    }

    /// Ends the open turn, if it has events.
    pub(crate) fn end(&mut self, out: &mut Converted, line: usize, session: &str, ts: Option<u64>) {
        if let Some(turn) = self.current.take()
            && self.has_events
        {
            out.turn_end(line, session, &turn, self.status.unwrap_or("completed"), ts);
        }
        self.has_user = false;
        self.has_events = false;
        self.status = None;
        self.explicit = false;
    }
}

/// A session id derived from a file's bytes, for formats that carry none: the same file always
/// gets the same id.
pub(crate) fn content_id(prefix: &str, bytes: &[u8]) -> String {
    format!("{prefix}-{}", &hex::encode(Sha256::digest(bytes))[..12])
}

/// A string field of a JSON object, or an error naming it.
pub(crate) fn str_field<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    source: &str,
    line: usize,
    path: &str,
) -> Result<&'a str, TranscriptError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(error(source, line, Some(&join(path, key)), "must be a string")),
        None => Err(error(source, line, Some(&join(path, key)), "is missing")),
    }
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// An optional RFC 3339 timestamp field, as Unix milliseconds.
pub(crate) fn timestamp_field(
    object: &Map<String, Value>,
    key: &str,
    source: &str,
    line: usize,
) -> Result<Option<u64>, TranscriptError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => {
            time::parse_rfc3339_ms(text).map(Some).map_err(|reason| error(source, line, Some(key), reason))
        }
        Some(_) => Err(error(source, line, Some(key), "must be an RFC 3339 timestamp string")),
    }
}

/// A tool result's JSON: a string that holds JSON becomes that JSON, anything else stays as it is.
pub(crate) fn json_or_string(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Object(_) | Value::Array(_))) => value,
        _ => Value::String(text.to_owned()),
    }
}
