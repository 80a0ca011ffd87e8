//! The mnemo transcript format (JSON Lines): its parsing and validation into records, and the
//! error a line that is not valid gets.
//!
//! A file is validated whole before anything is appended, so a bad line appends nothing. Ids and
//! timestamps that a line leaves out are derived from the file alone, so the same file always
//! yields the same records.

use std::collections::{BTreeMap, BTreeSet};

use mnemo_core::limits::{ID_BYTES_MAX, RECORD_BYTES_MAX};
use mnemo_core::{
    Author, Content, EventId, FunctionCall, FunctionResponse, InvocationId, MemoryMode, Record, Role, RunId,
    RuntimeEvent, SessionArchived, SessionFlagsChanged, SessionId, SessionOpened, TextContent,
    ThinkingContent, TimestampMs, ToolCallId, TurnEnded, TurnId, TurnStatus, WorkspaceId,
};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Longest transcript line in bytes.
pub const TRANSCRIPT_LINE_BYTES_MAX: usize = RECORD_BYTES_MAX;

/// The time given to a file's first event when it carries none: 2026-01-01T00:00:00Z. Later events
/// without a time get the previous event's time plus one millisecond.
pub const IMPORT_EPOCH_MS: u64 = 1_767_225_600_000;

/// Latest timestamp a transcript may carry: the last millisecond of the year 9999.
pub const TIMESTAMP_MS_MAX: u64 = 253_402_300_799_999;

/// A transcript line that is not valid, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {}{reason}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct TranscriptError {
    /// The file (or `-` for standard input).
    pub source_name: String,
    /// 1-based line number.
    pub line: usize,
    /// The field at fault, as a path (`parts[0].args`), when one is.
    pub field: Option<String>,
    /// What is wrong.
    pub reason: String,
}

/// One record ready to append, with the time to append it at and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptRecord {
    /// The record.
    pub record: Record,
    /// Its time (the event's own time, or derived).
    pub timestamp: TimestampMs,
    /// The line it came from.
    pub line: usize,
}

/// A parsed transcript: each session's records in file order, sessions in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    /// Sessions and their records.
    pub sessions: Vec<(SessionId, Vec<TranscriptRecord>)>,
    /// Lines read (blank lines included).
    pub lines: usize,
}

impl Transcript {
    /// How many records the transcript holds.
    pub fn record_count(&self) -> usize {
        self.sessions.iter().map(|(_, records)| records.len()).sum()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionLine {
    #[serde(rename = "kind")]
    _kind: String,
    session: SessionId,
    #[serde(default)]
    workspace: Option<WorkspaceId>,
    #[serde(default)]
    incognito: bool,
    #[serde(default)]
    memory: Option<MemoryMode>,
    #[serde(default)]
    subagent: bool,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    parent: Option<SessionId>,
    #[serde(default)]
    ts: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlagsLine {
    #[serde(rename = "kind")]
    _kind: String,
    session: SessionId,
    #[serde(default)]
    incognito: Option<bool>,
    #[serde(default)]
    memory: Option<MemoryMode>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    ts: Option<u64>,
}

/// A RuntimeEvent in the reference system's own JSON shape, for events the `parts` form cannot
/// express (statuses, actions, refs, hidden or partial events, provider options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeEventLine {
    #[serde(rename = "kind")]
    _kind: String,
    event: RuntimeEvent,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventLine {
    #[serde(default, rename = "kind")]
    _kind: Option<String>,
    session: SessionId,
    turn: TurnId,
    role: Role,
    #[serde(default)]
    author: Option<Author>,
    #[serde(default)]
    ts: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    run: Option<RunId>,
    parts: Vec<PartLine>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum PartLine {
    Text {
        text: String,
        #[serde(default)]
        steering: bool,
    },
    Thinking {
        text: String,
        #[serde(default)]
        signature: Option<String>,
    },
    ToolCall {
        id: ToolCallId,
        name: String,
        args: Value,
    },
    ToolResult {
        id: ToolCallId,
        name: String,
        result: Value,
        #[serde(default)]
        is_error: bool,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnEndLine {
    #[serde(rename = "kind")]
    _kind: String,
    session: SessionId,
    turn: TurnId,
    status: TurnStatus,
    #[serde(default)]
    run: Option<RunId>,
    #[serde(default)]
    ts: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchiveLine {
    #[serde(rename = "kind")]
    _kind: String,
    session: SessionId,
    #[serde(default = "yes")]
    archived: bool,
    #[serde(default)]
    ts: Option<u64>,
}

fn yes() -> bool {
    true
}

/// What the parser remembers across lines, for the checks that span lines. Records leave it as
/// they are parsed (`ready`), so a reader of a long file holds the checks' keys, not the records.
#[derive(Default, Clone)]
struct ParseState {
    sessions: Vec<SessionId>,
    index: BTreeMap<SessionId, usize>,
    opened: BTreeSet<SessionId>,
    /// Every event id met, with a digest of its event's canonical encoding: a repeated id is told
    /// apart from an exact repeat of the event without holding the events.
    event_ids: EventIds,
    tool_calls: BTreeSet<(SessionId, ToolCallId)>,
    turns: BTreeSet<(SessionId, TurnId)>,
    /// Event lines seen per turn, for the ids derived for lines that give none.
    event_lines: BTreeMap<(SessionId, TurnId), u64>,
    last_ts: Option<u64>,
    /// Records parsed and not taken yet, each with its session's place in `sessions`.
    ready: std::collections::VecDeque<(usize, TranscriptRecord)>,
}

/// The mnemo format's parser, fed a line at a time: what the lines yield comes out as records in
/// file order, each with its session's place among the sessions met so far.
#[derive(Default, Clone)]
pub(crate) struct TranscriptParser {
    state: ParseState,
}

impl TranscriptParser {
    /// Parses one raw line of a mnemo-format file (blank lines yield nothing).
    pub(crate) fn mnemo_line(
        &mut self,
        raw: &[u8],
        line: usize,
        source_name: &str,
    ) -> Result<(), TranscriptError> {
        let fail = |field: Option<String>, reason: String| TranscriptError {
            source_name: source_name.to_owned(),
            line,
            field,
            reason,
        };
        if raw.len() > TRANSCRIPT_LINE_BYTES_MAX {
            return Err(line_too_long(source_name, line, raw.len() as u64));
        }
        let text = std::str::from_utf8(raw).map_err(|e| fail(None, format!("not valid UTF-8: {e}")))?;
        let text = text.strip_suffix('\r').unwrap_or(text);
        if text.trim().is_empty() {
            return Ok(());
        }
        let value: Value =
            crate::json::parse(text.as_bytes()).map_err(|e| fail(None, format!("not valid JSON: {e}")))?;
        parse_value(&mut self.state, value, line).map_err(|(field, reason)| fail(field, reason))
    }

    /// Parses a line already decoded as JSON, as the importers of other formats produce them.
    pub(crate) fn value(
        &mut self,
        value: Value,
        line: usize,
        source_name: &str,
    ) -> Result<(), TranscriptError> {
        parse_value(&mut self.state, value, line).map_err(|(field, reason)| TranscriptError {
            source_name: source_name.to_owned(),
            line,
            field,
            reason,
        })
    }

    /// The next record parsed, with its session's place in [`TranscriptParser::sessions`].
    pub(crate) fn pop(&mut self) -> Option<(usize, TranscriptRecord)> {
        self.state.ready.pop_front()
    }

    /// The sessions met so far, in order of first appearance.
    pub(crate) fn sessions(&self) -> &[SessionId] {
        &self.state.sessions
    }

    /// The error for a file that yielded no record, once it is read to its end.
    pub(crate) fn check_not_empty(&self, source_name: &str, lines: usize) -> Result<(), TranscriptError> {
        if self.state.sessions.is_empty() {
            return Err(TranscriptError {
                source_name: source_name.to_owned(),
                line: lines.max(1),
                field: None,
                reason: "the file holds no records".to_owned(),
            });
        }
        Ok(())
    }

    /// Every record parsed so far, by session (what a whole-file parse returns).
    fn collect(mut self, lines: usize) -> Transcript {
        let mut sessions: Vec<(SessionId, Vec<TranscriptRecord>)> =
            self.state.sessions.iter().map(|s| (s.clone(), Vec::new())).collect();
        while let Some((slot, record)) = self.pop() {
            sessions[slot].1.push(record);
        }
        Transcript { sessions, lines }
    }
}

/// The error for a line longer than [`TRANSCRIPT_LINE_BYTES_MAX`].
pub(crate) fn line_too_long(source_name: &str, line: usize, length: u64) -> TranscriptError {
    line_over(source_name, line, length, TRANSCRIPT_LINE_BYTES_MAX)
}

/// The error for a line longer than `limit`.
pub(crate) fn line_over(source_name: &str, line: usize, length: u64, limit: usize) -> TranscriptError {
    TranscriptError {
        source_name: source_name.to_owned(),
        line,
        field: None,
        reason: format!("line is {length} bytes, the limit is {limit}"),
    }
}

/// Parses and validates a whole transcript.
pub fn parse_transcript(bytes: &[u8], source_name: &str) -> Result<Transcript, TranscriptError> {
    let mut parser = TranscriptParser::default();
    let mut reader = crate::import::LineReader::new(bytes);
    // NOTE: reading a byte slice cannot fail; the error is mapped for the type's sake.
    let unreadable = |error: std::io::Error| TranscriptError {
        source_name: source_name.to_owned(),
        line: 1,
        field: None,
        reason: format!("cannot read: {error}"),
    };
    while let Some(raw) = reader.next_line().map_err(unreadable)? {
        match raw {
            crate::import::RawLine::Line(line, raw) => parser.mnemo_line(raw, line, source_name)?,
            crate::import::RawLine::TooLong(line, length) => {
                return Err(line_too_long(source_name, line, length));
            }
        }
    }
    let lines = reader.lines();
    parser.check_not_empty(source_name, lines)?;
    Ok(parser.collect(lines))
}

type LineError = (Option<String>, String);

fn parse_value(state: &mut ParseState, value: Value, line: usize) -> Result<(), LineError> {
    let Value::Object(object) = &value else {
        return Err((None, "a line must be a JSON object".to_owned()));
    };
    let kind = match object.get("kind") {
        None => "event",
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err((Some("kind".to_owned()), "must be a string".to_owned())),
    };
    match kind {
        "session" => session_line(state, decode(value)?, line),
        "event" => event_line(state, decode(value)?, line),
        "turn_end" => turn_end_line(state, decode(value)?, line),
        "runtime_event" => runtime_event_line(state, decode(value)?, line),
        "archive" => {
            let archive: ArchiveLine = decode(value)?;
            let record = Record::SessionArchived(SessionArchived {
                session: archive.session.clone(),
                archived: archive.archived,
            });
            let ts = record_timestamp(state, archive.ts)?;
            push(state, &archive.session, record, ts, line)
        }
        "flags" => {
            let flags: FlagsLine = decode(value)?;
            let record = Record::SessionFlagsChanged(SessionFlagsChanged {
                session: flags.session.clone(),
                incognito: flags.incognito,
                memory: flags.memory,
                title: flags.title,
            });
            let ts = record_timestamp(state, flags.ts)?;
            push(state, &flags.session, record, ts, line)
        }
        other => Err((
            Some("kind".to_owned()),
            format!(
                "unknown kind {other:?}; expected session, event, runtime_event, turn_end, flags or archive"
            ),
        )),
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, LineError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let field = (path != ".").then_some(path);
        (field, error.into_inner().to_string())
    })
}

fn session_line(state: &mut ParseState, line_value: SessionLine, line: usize) -> Result<(), LineError> {
    let session = line_value.session;
    if state.index.contains_key(&session) {
        return Err((
            Some("session".to_owned()),
            format!("session {session} already has records above; its session line must come first and once"),
        ));
    }
    let record = Record::SessionOpened(SessionOpened {
        session: session.clone(),
        workspace: line_value.workspace,
        incognito: line_value.incognito,
        memory: line_value.memory.unwrap_or(MemoryMode::Enabled),
        subagent: line_value.subagent,
        title: line_value.title,
        source: line_value.source,
        parent: line_value.parent,
    });
    state.opened.insert(session.clone());
    let ts = record_timestamp(state, line_value.ts)?;
    push(state, &session, record, ts, line)
}

/// The time of a record that is not an event: its own `ts` when the line gives one (which later
/// lines then follow), else the previous line's time.
fn record_timestamp(state: &mut ParseState, given: Option<u64>) -> Result<u64, LineError> {
    match given {
        Some(_) => next_timestamp(state, given),
        None => Ok(state.last_ts.unwrap_or(IMPORT_EPOCH_MS)),
    }
}

fn runtime_event_line(
    state: &mut ParseState,
    line_value: RuntimeEventLine,
    line: usize,
) -> Result<(), LineError> {
    let field = |f: &str| Some(format!("event.{f}"));
    // The reference decoder normalises text content (spec §1.2) before any check, so an event in
    // either form is the same event; a reserved fact has no place on this generic path (§1.8).
    let mut event = line_value.event;
    mnemo_core::prepare_generic_event(&mut event).map_err(|refusal| (None, refusal.to_string()))?;
    next_timestamp(state, Some(event.ts.0)).map_err(|(_, reason)| (field("ts"), reason))?;
    event.validate().map_err(|e| (field(&e.field), e.reason.clone()))?;
    if let Some(earlier) = state.event_ids.get(&event.id) {
        // An exact repeat of an event (a runtime that logged a retry) is the same event: it is
        // taken once. The same id with another payload is an identity conflict (spec §1.8 item 8).
        if earlier == event_digest(&event) {
            return Ok(());
        }
        return Err((
            field("id"),
            format!("event id {} is used by an earlier line with another payload", event.id),
        ));
    }
    state.event_ids.insert(&event.id, event_digest(&event));
    let session = event.session_id.clone();
    // A call made here may be answered by a later `parts` line.
    if let Some(Content::FunctionCall(call)) = &event.content {
        state.tool_calls.insert((session.clone(), call.id.clone()));
    }
    state.turns.insert((session.clone(), event.turn_id.clone()));
    let ts = event.ts.0;
    push(state, &session, Record::RuntimeEvent(event), ts, line)
}

/// Bytes of the SHA-256 prefixes [`EventIds`] keeps of an id and of its event.
const EVENT_DIGEST_BYTES: usize = 16;

/// A digest of an event id or an event: the first [`EVENT_DIGEST_BYTES`] of its SHA-256.
type EventDigest = [u8; EVENT_DIGEST_BYTES];

/// The event ids of one file, each with its event's digest, held as digests: 32 bytes an entry
/// where the ids themselves cost about a hundred, so that the check does not make an import's
/// memory grow with the file beyond that (a 500 MB transcript holds some 400,000 events). Two ids
/// or events whose 128-bit digests are equal are taken for equal; the chance of that among a
/// million events is about 10^-27.
#[derive(Default, Clone)]
struct EventIds(std::collections::HashMap<EventDigest, EventDigest>);

impl EventIds {
    /// The digest of the event met earlier under `id`.
    fn get(&self, id: &EventId) -> Option<EventDigest> {
        self.0.get(&digest_of(id.as_str().as_bytes())).copied()
    }

    fn insert(&mut self, id: &EventId, event: EventDigest) {
        self.0.insert(digest_of(id.as_str().as_bytes()), event);
    }
}

fn digest_of(bytes: &[u8]) -> EventDigest {
    let full: [u8; 32] = Sha256::digest(bytes).into();
    let mut digest = [0; EVENT_DIGEST_BYTES];
    digest.copy_from_slice(&full[..EVENT_DIGEST_BYTES]);
    digest
}

/// A digest of an event's JSON (its fields in declaration order, object keys sorted): equal events,
/// equal digests, without a copy of the event.
fn event_digest(event: &RuntimeEvent) -> EventDigest {
    let mut hasher = Sha256::new();
    // NOTE: writing into a hasher cannot fail, and a RuntimeEvent always serializes.
    let _ = serde_json::to_writer(&mut hasher, event);
    let full: [u8; 32] = hasher.finalize().into();
    let mut digest = [0; EVENT_DIGEST_BYTES];
    digest.copy_from_slice(&full[..EVENT_DIGEST_BYTES]);
    digest
}

fn event_line(state: &mut ParseState, event: EventLine, line: usize) -> Result<(), LineError> {
    if event.parts.is_empty() {
        return Err((Some("parts".to_owned()), "must hold at least one part".to_owned()));
    }
    let ts = next_timestamp(state, event.ts)?;
    let author = event.author.unwrap_or(match event.role {
        Role::User => Author::User,
        Role::Model => Author::Agent,
        Role::Tool => Author::Tool,
        _ => Author::System,
    });
    let run = match event.run {
        Some(run) => run,
        None => RunId::new(event.turn.as_str()).map_err(|e| (Some("turn".to_owned()), e.to_string()))?,
    };
    let invocation = InvocationId::new(run.as_str()).map_err(|e| (Some("run".to_owned()), e.to_string()))?;
    let part_count = event.parts.len();
    let ordinal = state.event_lines.entry((event.session.clone(), event.turn.clone())).or_insert(0);
    *ordinal += 1;
    let ordinal = *ordinal;
    for (index, part) in event.parts.into_iter().enumerate() {
        let field = format!("parts[{index}]");
        let id = event_id(event.id.as_deref(), &event.session, &event.turn, ordinal, index, part_count)
            .map_err(|reason| (Some("id".to_owned()), reason))?;
        if state.event_ids.get(&id).is_some() {
            return Err((Some("id".to_owned()), format!("event id {id} is used by an earlier line")));
        }
        let content =
            part_content(state, &event.session, part).map_err(|(f, r)| (Some(join(&field, f)), r))?;
        let runtime_event = RuntimeEvent {
            id,
            invocation_id: invocation.clone(),
            run_id: run.clone(),
            session_id: event.session.clone(),
            turn_id: event.turn.clone(),
            ts: TimestampMs(ts),
            partial: false,
            branch: None,
            role: event.role,
            author,
            origin: None,
            model_visibility: None,
            status: None,
            content: Some(content),
            actions: None,
            refs: None,
        };
        runtime_event
            .validate()
            .map_err(|e| (Some(join(&field, Some(e.field.clone()))), e.reason.clone()))?;
        state.event_ids.insert(&runtime_event.id, event_digest(&runtime_event));
        state.turns.insert((event.session.clone(), event.turn.clone()));
        push(state, &event.session, Record::RuntimeEvent(runtime_event), ts, line)?;
    }
    Ok(())
}

fn join(prefix: &str, field: Option<String>) -> String {
    match field {
        Some(field) if !field.is_empty() => format!("{prefix}.{field}"),
        _ => prefix.to_owned(),
    }
}

fn part_content(
    state: &mut ParseState,
    session: &SessionId,
    part: PartLine,
) -> Result<Content, (Option<String>, String)> {
    Ok(match part {
        PartLine::Text { text, steering } => {
            let mut content = TextContent::new(text);
            content.steering = steering.then_some(true);
            Content::Text(content)
        }
        PartLine::Thinking { text, signature } => {
            let mut content = ThinkingContent::new(text);
            content.signature = signature;
            Content::Thinking(content)
        }
        PartLine::ToolCall { id, name, args } => {
            if !state.tool_calls.insert((session.clone(), id.clone())) {
                return Err((
                    Some("id".to_owned()),
                    format!("tool call {id} is already used in this session"),
                ));
            }
            Content::FunctionCall(FunctionCall::new(id, name, args))
        }
        PartLine::ToolResult { id, name, result, is_error } => {
            if !state.tool_calls.contains(&(session.clone(), id.clone())) {
                return Err((
                    Some("id".to_owned()),
                    format!("tool result for {id}, which no earlier tool call in this session made"),
                ));
            }
            let mut content = FunctionResponse::new(id, name, result);
            content.is_error = is_error.then_some(true);
            Content::FunctionResponse(content)
        }
    })
}

fn turn_end_line(state: &mut ParseState, end: TurnEndLine, line: usize) -> Result<(), LineError> {
    if !state.turns.contains(&(end.session.clone(), end.turn.clone())) {
        return Err((
            Some("turn".to_owned()),
            format!("turn {} of session {} has no events above", end.turn, end.session),
        ));
    }
    let ts = next_timestamp(state, end.ts)?;
    let record = Record::TurnEnded(TurnEnded {
        session: end.session.clone(),
        turn: end.turn,
        run: end.run,
        status: end.status,
    });
    push(state, &end.session, record, ts, line)
}

fn next_timestamp(state: &mut ParseState, given: Option<u64>) -> Result<u64, LineError> {
    let ts = match given {
        Some(ts) if ts > TIMESTAMP_MS_MAX => {
            return Err((Some("ts".to_owned()), format!("{ts} is beyond the year 9999")));
        }
        Some(ts) => ts,
        None => state.last_ts.map_or(IMPORT_EPOCH_MS, |last| last + 1),
    };
    state.last_ts = Some(ts);
    Ok(ts)
}

/// The event id: the line's own (with `#<part>` when the line has several parts), or one derived
/// from the session, turn, the line's place among the turn's event lines and the part, so the same
/// file always yields the same ids, and a line added to another turn (a session file that grew)
/// changes none of them.
fn event_id(
    given: Option<&str>,
    session: &SessionId,
    turn: &TurnId,
    ordinal: u64,
    part: usize,
    parts: usize,
) -> Result<EventId, String> {
    let text = match given {
        Some(id) if parts == 1 => id.to_owned(),
        Some(id) => format!("{id}#{part}"),
        None => {
            let mut hasher = Sha256::new();
            for piece in [session.as_str(), turn.as_str(), &ordinal.to_string(), &part.to_string()] {
                hasher.update((piece.len() as u64).to_le_bytes());
                hasher.update(piece.as_bytes());
            }
            format!("evt_{}", &hex::encode(hasher.finalize())[..24])
        }
    };
    if text.len() > ID_BYTES_MAX {
        return Err(format!("event id is {} bytes, the limit is {ID_BYTES_MAX}", text.len()));
    }
    EventId::new(text).map_err(|e| e.to_string())
}

fn push(
    state: &mut ParseState,
    session: &SessionId,
    record: Record,
    ts: u64,
    line: usize,
) -> Result<(), LineError> {
    record.validate_for_append().map_err(|e| (Some(e.field.clone()), e.reason.clone()))?;
    let slot = match state.index.get(session) {
        Some(slot) => *slot,
        None => {
            state.index.insert(session.clone(), state.sessions.len());
            state.sessions.push(session.clone());
            state.sessions.len() - 1
        }
    };
    state.ready.push_back((slot, TranscriptRecord { record, timestamp: TimestampMs(ts), line }));
    Ok(())
}
