//! The `history-messages` stage: each session's visible messages (spec §2.1–2.2), its header
//! (title, last message time, flags, revision family) and a recency index of sessions.
//!
//! Which events become rows ([`project`]):
//! - role `user` text -> a `user` row with `displayText ?? text`;
//! - role `model` text -> an `assistant` row;
//! - `function_call` -> a `tool_call` row with the tool's name and, from `actions.stateDelta`, its
//!   `intent` and `displayName` (never the arguments);
//! - `function_response` -> a `tool_result` row with the result as it reads ([`result_text`]: a
//!   string result is its characters, any other value compact JSON whose strings are written
//!   unescaped, without the agent host's `<system-reminder>` notes), cut to
//!   [`TOOL_RESULT_SCAN_BYTES_MAX`] (never `providerOutput`).
//!
//! A tool result whose result is null is no row (a hard `incomplete_event` diagnostic).
//! Nothing else becomes a row: partial (streaming) events are skipped, so a stream shows only
//! once its final event arrives; events with `modelVisibility: hidden`, thinking, errors, text on
//! the tool or system lane, and control facts stay hidden. A row's id is
//! `refs.storedMessageId ?? refs.providerEventId ?? event id` (a call's is its tool-call id); an
//! event whose id is already a row of the session replaces that row in place. What does not become
//! a row gets a diagnostic where the spec gives it one, and terminal facts a turn state
//! ([`crate::diagnostics`]).
//!
//! Keys (`\0` separates; ids never contain control characters, and a message id is always last):
//! - `h\0<session>` -> [`SessionHeader`] (canonical JSON);
//! - `m\0<session>\0<seq u64 BE>` -> [`VisibleMessage`] (canonical JSON), `seq` dense per session;
//! - `i\0<session>\0<message id>` -> `seq`;
//! - `r\0<u64::MAX - last message ms, BE><session>` -> empty: sessions, most recent first, ties by id;
//! - `T` -> the [`RECENT_SESSIONS_MAX`] most recent sessions' recency key suffixes in order, each
//!   as its length (u16 BE) and bytes: the first page of a search without a range scan (a range
//!   scan of `r` must step over every key a busy session's recency left behind until compaction);
//! - `F\0<family>` -> the recency key suffix (`<u64::MAX - last message ms, BE><session>`) of the
//!   family's freshest member. Times only grow, so the freshest is the least suffix ever seen;
//! - `d\0<session>\0<position u64 BE>` -> the [`ProjectionDiagnostic`] of the event at that position
//!   (canonical JSON): what the projection could not show, and why (decision 0146);
//! - `s\0<session>\0<turn>` -> the turn's [`TurnState`] from its latest terminal fact.

use mnemo_core::{
    Content, CopyBoundary, EventId, ModelVisibility, Position, Record, RuntimeEvent, SessionId, TimestampMs,
    TurnId,
};
use mnemo_pipeline::{LoggedRecord, PipelineError, Projector, StateStore, StateTxn};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codec::Codec;
use crate::diagnostics::{ProjectionDiagnostic, TurnState, diagnose, turn_state};
use crate::text::{byte_prefix_lossy, prefix_at_char_boundary};

/// The stage's registered name.
pub const STAGE_NAME: &str = "history-messages";

/// Bumped whenever what the stage writes changes; a new version rebuilds the stage.
const VERSION: u32 = 5;

const CODEC: Codec = Codec::new(STAGE_NAME);

/// How much of a tool result's text is kept and searched, in UTF-8 bytes (the reference system's
/// `TOOL_RESULT_SCAN_CAP_BYTES`). The cut may fall inside a character, which then reads as U+FFFD.
pub const TOOL_RESULT_SCAN_BYTES_MAX: usize = 10_240;

const HEADER_TAG: &[u8] = b"h\0";
const MESSAGE_TAG: &[u8] = b"m\0";
const ID_TAG: &[u8] = b"i\0";
const RECENCY_TAG: &[u8] = b"r\0";
const FRESHEST_TAG: &[u8] = b"F\0";
const RECENT_KEY: &[u8] = b"T";
const DIAGNOSTIC_TAG: &[u8] = b"d\0";
const TURN_STATE_TAG: &[u8] = b"s\0";

/// Longest title taken from a session's first request, in characters (an ellipsis marks a cut).
pub const REQUEST_TITLE_CHARS_MAX: usize = 80;

/// Longest markup tag the request title removes, in bytes between `<` and `>`.
const MARKUP_TAG_BYTES_MAX: usize = 64;

/// Sessions kept in the most-recent list: a search page (200) and room for collapsed revisions.
pub const RECENT_SESSIONS_MAX: usize = 256;

/// What kind of visible message a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessageKind {
    /// A user message.
    User,
    /// Model text.
    Assistant,
    /// A tool call.
    ToolCall,
    /// A tool result.
    ToolResult,
}

/// One row of a session's visible transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisibleMessage {
    /// The message's stable id.
    pub message_id: String,
    /// The turn it belongs to.
    pub turn_id: TurnId,
    /// What it is.
    pub kind: MessageKind,
    /// The event's own time.
    pub timestamp: TimestampMs,
    /// The event it was projected from (the latest, if it was replaced).
    pub event_id: EventId,
    /// That event's log position.
    pub position: Position,
    /// User: `displayText ?? text`; assistant: the text; tool call: the intent (may be empty);
    /// tool result: the result as it reads ([`result_text`]), cut to [`TOOL_RESULT_SCAN_BYTES_MAX`].
    pub text: String,
    /// Tool calls and results: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Tool calls: the display name the runtime gave the call, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Tool results: whether the result is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

impl VisibleMessage {
    /// The text the history tools search (spec §3.3 step 6d): user and assistant text, a tool
    /// call's intent, a tool result's capped JSON; `None` when there is none.
    pub fn searchable_text(&self) -> Option<&str> {
        (!self.text.is_empty()).then_some(self.text.as_str())
    }
}

/// What the stage knows of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// The session.
    pub session: SessionId,
    /// Its title, if any (raw; callers redact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Latest time of a user or assistant row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_at: Option<TimestampMs>,
    /// Earliest time of a user or assistant row: the event's own time, not its append time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message_at: Option<TimestampMs>,
    /// The session's first real user request as a title ([`request_title`]), for sessions
    /// without one of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_request: Option<String>,
    /// Whether the session is incognito.
    pub incognito: bool,
    /// Whether it is archived (archived sessions stay searchable and readable).
    pub archived: bool,
    /// The root of its revision family: itself, unless it is a revision (a copy before a turn).
    pub family: SessionId,
    /// Rows so far; the next row's sequence number.
    pub messages: u64,
}

impl SessionHeader {
    fn new(session: SessionId) -> Self {
        SessionHeader {
            family: session.clone(),
            session,
            title: None,
            last_message_at: None,
            first_message_at: None,
            first_request: None,
            incognito: false,
            archived: false,
            messages: 0,
        }
    }

    /// The sort key of the recency index: most recent first, sessions without messages last.
    fn recency(&self) -> [u8; 8] {
        (u64::MAX - self.last_message_at.map_or(0, |t| t.0)).to_be_bytes()
    }
}

/// Builds the stage; it takes no configuration.
pub fn factory(config: &toml::Table) -> Result<Box<dyn Projector>, String> {
    if let Some(key) = config.keys().next() {
        return Err(format!("{STAGE_NAME} takes no configuration, found key {key:?}"));
    }
    Ok(Box::new(HistoryMessages))
}

/// The projector.
#[derive(Debug, Default)]
pub struct HistoryMessages;

impl Projector for HistoryMessages {
    fn name(&self) -> &str {
        STAGE_NAME
    }

    fn version(&self) -> u32 {
        VERSION
    }

    fn apply(&mut self, state: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError> {
        let Some(session) = logged.stream.session_id() else {
            return Ok(());
        };
        let existing = match state.get(&header_key(&session))? {
            Some(bytes) => Some(CODEC.decode::<SessionHeader>(&bytes)?),
            None => None,
        };
        let before = existing.clone();
        let mut header = existing.unwrap_or_else(|| SessionHeader::new(session.clone()));
        match &logged.record {
            Record::SessionOpened(opened) => {
                header.title = opened.title.clone();
                header.incognito = opened.incognito;
            }
            Record::SessionFlagsChanged(changed) => {
                if let Some(title) = &changed.title {
                    header.title = Some(title.clone());
                }
                if let Some(incognito) = changed.incognito {
                    header.incognito = incognito;
                }
            }
            Record::SessionArchived(archived) => header.archived = archived.archived,
            Record::ConversationCopied(copy) => {
                if matches!(copy.up_to, CopyBoundary::BeforeTurn(_)) {
                    // A revision joins its source's family; a branch is a session of its own.
                    header.family = match state.get(&header_key(&copy.source))? {
                        Some(bytes) => CODEC.decode::<SessionHeader>(&bytes)?.family,
                        None => copy.source.clone(),
                    };
                }
            }
            Record::RuntimeEvent(event) => {
                if let Some(message) = project(event, logged.position) {
                    add_message(state, &mut header, message)?;
                }
                if let Some(diagnostic) = diagnose(event, logged.position) {
                    let key = sub_key(DIAGNOSTIC_TAG, &session, &logged.position.0.to_be_bytes());
                    state.put(key, CODEC.encode(&diagnostic)?);
                }
                if let Some(ended) = turn_state(event, logged.position) {
                    put_turn_state(state, &session, &ended)?;
                }
            }
            Record::TurnEnded(ended) => {
                let ended = TurnState {
                    turn_id: ended.turn.clone(),
                    status: ended.status,
                    event_id: None,
                    position: logged.position,
                    error_class: None,
                    step_limit: false,
                };
                put_turn_state(state, &session, &ended)?;
            }
            _ => {}
        }
        if before.as_ref() != Some(&header) {
            reindex(state, before.as_ref(), &header)?;
            state.put(header_key(&session), CODEC.encode(&header)?);
        }
        Ok(())
    }
}

/// The visible row an event becomes, if any (see the module docs).
pub fn project(event: &RuntimeEvent, position: Position) -> Option<VisibleMessage> {
    if event.partial || event.model_visibility == Some(ModelVisibility::Hidden) {
        return None;
    }
    let row = |message_id: String, kind: MessageKind, text: String| VisibleMessage {
        message_id,
        turn_id: event.turn_id.clone(),
        kind,
        timestamp: event.ts,
        event_id: event.id.clone(),
        position,
        text,
        tool_name: None,
        display_name: None,
        is_error: None,
    };
    match event.content.as_ref()? {
        Content::Text(text) => {
            let kind = match event.role {
                mnemo_core::Role::User => MessageKind::User,
                mnemo_core::Role::Model => MessageKind::Assistant,
                _ => return None,
            };
            let shown = text.display_text.as_ref().unwrap_or(&text.text).clone();
            Some(row(stable_id(event), kind, shown))
        }
        Content::FunctionCall(call) => {
            let mut message =
                row(call.id.as_str().to_owned(), MessageKind::ToolCall, state_text(event, "intent"));
            message.tool_name = Some(call.name.clone());
            message.display_name = Some(state_text(event, "displayName")).filter(|name| !name.is_empty());
            Some(message)
        }
        // A result that is not there is no row (spec §2.1 `incomplete_event`, see `diagnostics`).
        Content::FunctionResponse(response) if response.result.is_null() => None,
        Content::FunctionResponse(response) => {
            let text = result_text(&response.result, TOOL_RESULT_SCAN_BYTES_MAX);
            let mut message = row(stable_id(event), MessageKind::ToolResult, text);
            message.tool_name = Some(response.name.clone());
            message.is_error = Some(response.is_error.unwrap_or(false));
            Some(message)
        }
        _ => None,
    }
}

/// A tool result as it reads, cut to `max_bytes` (a cut inside a character reads as U+FFFD): a
/// string result is its characters, any other value compact JSON whose strings are written as
/// they are. Escaped JSON (`"Found 2 files\nsrc/a.ts\nsrc/b.ts"`) glued the escape's letter to
/// the first word of every line (`nsrc`), so a log's `FAILED` or `error` at the start of a line
/// was never found, and snippets showed `\n`. Control characters other than line breaks and tabs
/// read as spaces (a terminal must never receive them from a snippet).
pub(crate) fn result_text(result: &Value, max_bytes: usize) -> String {
    let mut out = String::new();
    match result {
        Value::String(text) => push_text(&mut out, text, max_bytes),
        other => push_readable(&mut out, other, max_bytes),
    }
    byte_prefix_lossy(&out, max_bytes)
}

/// Appends as much of `text` as a cut at `max_bytes` of the whole can show (the character that
/// straddles the cut included), control characters but `\n` and `\t` as spaces, and without the
/// [`SYSTEM_REMINDER`] blocks the agent host appended.
fn push_text(out: &mut String, text: &str, max_bytes: usize) {
    let text = without_reminders(text);
    // A character is at most 4 bytes: one that starts before the cut ends before `max_bytes + 4`.
    let room = (max_bytes + 4).saturating_sub(out.len());
    let shown = prefix_at_char_boundary(&text, room);
    out.extend(shown.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { ' ' } else { c }));
}

/// The tags around the note Claude Code appends to what a tool returned (`<system-reminder>
/// Whenever you read a file, you should consider whether it would be considered malware. …
/// </system-reminder>` after every file read): words the tool never returned, which made every
/// file read a match for "malware" or "write reports".
const SYSTEM_REMINDER: (&str, &str) = ("<system-reminder>", "</system-reminder>");

/// `text` without its complete [`SYSTEM_REMINDER`] blocks (an unclosed one stays).
fn without_reminders(text: &str) -> std::borrow::Cow<'_, str> {
    let (open, close) = SYSTEM_REMINDER;
    if !text.contains(open) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let Some(end) = rest[start..].find(close) else { break };
        kept.push_str(&rest[..start]);
        rest = &rest[start + end + close.len()..];
    }
    kept.push_str(rest);
    std::borrow::Cow::Owned(kept)
}

fn push_readable(out: &mut String, value: &Value, max_bytes: usize) {
    if out.len() > max_bytes {
        return;
    }
    match value {
        Value::String(text) => {
            out.push('"');
            push_text(out, text, max_bytes);
            out.push('"');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_readable(out, item, max_bytes);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('"');
                push_text(out, key, max_bytes);
                out.push_str("\":");
                push_readable(out, item, max_bytes);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `storedMessageId ?? providerEventId ?? event id`; an empty ref counts as absent.
fn stable_id(event: &RuntimeEvent) -> String {
    let refs = event.refs.as_ref();
    refs.and_then(|r| r.stored_message_id.as_deref())
        .filter(|id| !id.is_empty())
        .or_else(|| refs.and_then(|r| r.provider_event_id.as_deref()).filter(|id| !id.is_empty()))
        .unwrap_or(event.id.as_str())
        .to_owned()
}

/// A string the runtime put in `actions.stateDelta` (a call's intent, display name), or "".
fn state_text(event: &RuntimeEvent, key: &str) -> String {
    event
        .actions
        .as_ref()
        .and_then(|a| a.state_delta.as_ref())
        .and_then(|delta| delta.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn add_message(
    state: &mut StateTxn<'_>,
    header: &mut SessionHeader,
    message: VisibleMessage,
) -> Result<(), PipelineError> {
    let id_key = id_key(&header.session, &message.message_id);
    let seq = match state.get(&id_key)? {
        Some(bytes) => CODEC.decode_u64(&bytes)?,
        None => {
            let seq = header.messages;
            header.messages += 1;
            state.put(id_key, seq.to_be_bytes().to_vec());
            seq
        }
    };
    if matches!(message.kind, MessageKind::User | MessageKind::Assistant) {
        header.last_message_at = header.last_message_at.max(Some(message.timestamp));
        header.first_message_at =
            Some(header.first_message_at.map_or(message.timestamp, |first| first.min(message.timestamp)));
    }
    if message.kind == MessageKind::User && header.first_request.is_none() {
        header.first_request = request_title(&message.text);
    }
    state.put(message_key(&header.session, seq), CODEC.encode(&message)?);
    Ok(())
}

/// Moves a session's recency entry when its time changed, and keeps its family's freshest member.
fn reindex(
    state: &mut StateTxn<'_>,
    before: Option<&SessionHeader>,
    after: &SessionHeader,
) -> Result<(), PipelineError> {
    if let Some(before) = before {
        if before.recency() == after.recency() && before.family == after.family {
            return Ok(());
        }
        state.delete(recency_key(before));
        if before.family != after.family {
            state.delete(freshest_key(&before.family));
        }
    }
    state.put(recency_key(after), Vec::new());
    let suffix = recency_suffix(after);
    update_recent(state, &after.session, &suffix)?;
    let freshest = state.get(&freshest_key(&after.family))?;
    if freshest.is_none_or(|current| suffix < current) {
        state.put(freshest_key(&after.family), suffix);
    }
    Ok(())
}

/// Moves a session to its place in the most-recent list. Times only grow, so a session only ever
/// moves towards the front, and the list always holds the truly most recent sessions.
fn update_recent(state: &mut StateTxn<'_>, session: &SessionId, suffix: &[u8]) -> Result<(), PipelineError> {
    let stored = state.get(RECENT_KEY)?.unwrap_or_default();
    // The common case, a session that is already the most recent getting another message: only the
    // first entry changes.
    if let [high, low, rest @ ..] = stored.as_slice() {
        let length = usize::from(u16::from_be_bytes([*high, *low]));
        if rest.get(8..length) == Some(session.as_str().as_bytes()) && suffix.len() == length {
            let mut bytes = stored.clone();
            bytes[2..2 + length].copy_from_slice(suffix);
            state.put(RECENT_KEY.to_vec(), bytes);
            return Ok(());
        }
    }
    let mut recent = decode_recent(&stored)?;
    recent.retain(|entry| entry.get(8..) != Some(session.as_str().as_bytes()));
    let place = recent.partition_point(|entry| entry.as_slice() < suffix);
    if place < RECENT_SESSIONS_MAX {
        recent.insert(place, suffix.to_vec());
        recent.truncate(RECENT_SESSIONS_MAX);
    }
    let mut bytes = Vec::with_capacity(recent.iter().map(|e| e.len() + 2).sum());
    for entry in &recent {
        // A suffix is 8 bytes and a session id of at most 256 bytes.
        bytes.extend_from_slice(&(entry.len() as u16).to_be_bytes());
        bytes.extend_from_slice(entry);
    }
    state.put(RECENT_KEY.to_vec(), bytes);
    Ok(())
}

fn decode_recent(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>, PipelineError> {
    let mut recent = Vec::new();
    while let [high, low, rest @ ..] = bytes {
        let length = usize::from(u16::from_be_bytes([*high, *low]));
        let entry = rest
            .get(..length)
            .ok_or_else(|| CODEC.damaged("the recent-session list is cut short".to_owned()))?;
        recent.push(entry.to_vec());
        bytes = &rest[length..];
    }
    if !bytes.is_empty() {
        return Err(CODEC.damaged("the recent-session list is cut short".to_owned()));
    }
    Ok(recent)
}

fn header_key(session: &SessionId) -> Vec<u8> {
    [HEADER_TAG, session.as_str().as_bytes()].concat()
}

fn session_prefix(tag: &[u8], session: &SessionId) -> Vec<u8> {
    [tag, session.as_str().as_bytes(), b"\0"].concat()
}

fn message_key(session: &SessionId, seq: u64) -> Vec<u8> {
    [session_prefix(MESSAGE_TAG, session).as_slice(), &seq.to_be_bytes()].concat()
}

fn id_key(session: &SessionId, message_id: &str) -> Vec<u8> {
    [session_prefix(ID_TAG, session).as_slice(), message_id.as_bytes()].concat()
}

fn recency_suffix(header: &SessionHeader) -> Vec<u8> {
    [&header.recency()[..], header.session.as_str().as_bytes()].concat()
}

fn recency_key(header: &SessionHeader) -> Vec<u8> {
    [RECENCY_TAG, &recency_suffix(header)].concat()
}

fn freshest_key(family: &SessionId) -> Vec<u8> {
    [FRESHEST_TAG, family.as_str().as_bytes()].concat()
}

/// A user request as a title: markup tags (`<command-name>`, `</x>`) removed, whitespace folded,
/// cut to [`REQUEST_TITLE_CHARS_MAX`] characters; `None` when nothing readable is left or the text
/// is a host's caveat rather than a request.
pub fn request_title(text: &str) -> Option<String> {
    let mut plain = String::with_capacity(text.len().min(REQUEST_TITLE_CHARS_MAX * 4));
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        plain.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let tag = after.find('>').filter(|&close| {
            close <= MARKUP_TAG_BYTES_MAX
                && after[..close]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!')
                && !after[..close].contains(['<', '\n'])
        });
        match tag {
            Some(close) => {
                plain.push(' ');
                rest = &after[close + 1..];
            }
            None => {
                plain.push('<');
                rest = after;
            }
        }
    }
    plain.push_str(rest);
    let folded = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.is_empty() || folded.starts_with("Caveat:") {
        return None;
    }
    let mut chars = folded.chars();
    let mut title: String = chars.by_ref().take(REQUEST_TITLE_CHARS_MAX).collect();
    if chars.next().is_some() {
        title.pop();
        title.push('…');
    }
    Some(title)
}

/// Every session's header, in session id order.
pub fn headers(store: &dyn StateStore) -> Result<Vec<SessionHeader>, PipelineError> {
    let mut headers = Vec::new();
    let mut failure = None;
    store.scan_prefix(HEADER_TAG, &mut |_, value| match CODEC.decode(value) {
        Ok(header) => {
            headers.push(header);
            true
        }
        Err(error) => {
            failure = Some(error);
            false
        }
    })?;
    failure.map_or(Ok(headers), Err)
}

/// An archived member of `session`'s revision family (the session itself included), if any: a
/// conversation copy of such a family is refused (events-and-history.md §4.7). Reads every header
/// (no index of family members is kept; a copy is rare).
pub fn archived_family_member(
    store: &dyn StateStore,
    session: &SessionId,
) -> Result<Option<SessionId>, PipelineError> {
    let Some(own) = header(store, session)? else {
        return Ok(None);
    };
    if own.archived {
        return Ok(Some(own.session));
    }
    Ok(headers(store)?.into_iter().find(|h| h.family == own.family && h.archived).map(|h| h.session))
}

/// A session's projection diagnostics, in log order.
pub fn diagnostics(
    store: &dyn StateStore,
    session: &SessionId,
) -> Result<Vec<ProjectionDiagnostic>, PipelineError> {
    scan_json(store, &sub_key(DIAGNOSTIC_TAG, session, b""))
}

/// How each of a session's ended turns ended, in the order of their terminal facts.
pub fn turn_states(store: &dyn StateStore, session: &SessionId) -> Result<Vec<TurnState>, PipelineError> {
    let mut states: Vec<TurnState> = scan_json(store, &sub_key(TURN_STATE_TAG, session, b""))?;
    states.sort_by_key(|state| state.position);
    Ok(states)
}

fn scan_json<T: serde::de::DeserializeOwned>(
    store: &dyn StateStore,
    prefix: &[u8],
) -> Result<Vec<T>, PipelineError> {
    let mut out = Vec::new();
    let mut failure = None;
    store.scan_prefix(prefix, &mut |_, value| match CODEC.decode(value) {
        Ok(item) => {
            out.push(item);
            true
        }
        Err(error) => {
            failure = Some(error);
            false
        }
    })?;
    failure.map_or(Ok(out), Err)
}

fn put_turn_state(
    state: &mut StateTxn<'_>,
    session: &SessionId,
    ended: &TurnState,
) -> Result<(), PipelineError> {
    state.put(sub_key(TURN_STATE_TAG, session, ended.turn_id.as_str().as_bytes()), CODEC.encode(ended)?);
    Ok(())
}

/// `tag`, the session, `\0`, then `rest`.
fn sub_key(tag: &[u8], session: &SessionId, rest: &[u8]) -> Vec<u8> {
    [tag, session.as_str().as_bytes(), b"\0", rest].concat()
}

/// A session's header.
pub fn header(store: &dyn StateStore, session: &SessionId) -> Result<Option<SessionHeader>, PipelineError> {
    store.get(&header_key(session))?.map(|bytes| CODEC.decode(&bytes)).transpose()
}

/// A session's rows in order.
pub fn messages(store: &dyn StateStore, session: &SessionId) -> Result<Vec<VisibleMessage>, PipelineError> {
    let mut rows = Vec::new();
    let mut failure = None;
    store.scan_prefix(&session_prefix(MESSAGE_TAG, session), &mut |_, value| match CODEC.decode(value) {
        Ok(row) => {
            rows.push(row);
            true
        }
        Err(error) => {
            failure = Some(error);
            false
        }
    })?;
    failure.map_or(Ok(rows), Err)
}

/// One row by its message id.
pub fn message(
    store: &dyn StateStore,
    session: &SessionId,
    message_id: &str,
) -> Result<Option<VisibleMessage>, PipelineError> {
    let Some(seq) = store.get(&id_key(session, message_id))? else {
        return Ok(None);
    };
    let seq = CODEC.decode_u64(&seq)?;
    store.get(&message_key(session, seq))?.map(|bytes| CODEC.decode(&bytes)).transpose()
}

/// Whether `header` is the session that stands for its revision family ("logical session"): the
/// current session if it is in the family, else the family's most recent member (ties: lowest id).
pub fn is_representative(
    store: &dyn StateStore,
    header: &SessionHeader,
    current: Option<&SessionHeader>,
) -> Result<bool, PipelineError> {
    if let Some(current) = current
        && current.family == header.family
    {
        return Ok(current.session == header.session);
    }
    let freshest = store.get(&freshest_key(&header.family))?;
    Ok(freshest.is_some_and(|suffix| suffix.get(8..) == Some(header.session.as_str().as_bytes())))
}

/// Where a page of sessions starts: strictly after this (last message time, session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    /// The last message time of the last session already seen (0 when it had none).
    pub last_message_at: u64,
    /// That session's id.
    pub session: String,
}

/// Logical sessions (one per revision family) in recency order (last message time descending,
/// then id ascending), starting after `after`. Visits each with its header until `visit` returns
/// false.
pub fn visit_logical_sessions(
    store: &dyn StateStore,
    current: Option<&SessionHeader>,
    after: Option<&SessionCursor>,
    visit: &mut dyn FnMut(SessionHeader) -> bool,
) -> Result<(), PipelineError> {
    let mut resume =
        after.map(|c| [&(u64::MAX - c.last_message_at).to_be_bytes()[..], c.session.as_bytes()].concat());
    // The most-recent list first: it answers a first page with point lookups only.
    let recent = match store.get(RECENT_KEY)? {
        Some(bytes) => decode_recent(&bytes)?,
        None => Vec::new(),
    };
    for suffix in &recent {
        if resume.as_ref().is_some_and(|r| suffix <= r) {
            continue;
        }
        if !visit_suffix(store, current, suffix, visit)? {
            return Ok(());
        }
        resume = Some(suffix.clone());
    }
    if recent.len() < RECENT_SESSIONS_MAX {
        return Ok(());
    }
    // Past the list: the recency index, in batches. NOTE: ids are collected first and their headers
    // looked up outside the scan callback, so a store's read guard is never held across a read.
    loop {
        let mut batch = Vec::new();
        store.scan_prefix(RECENCY_TAG, &mut |key, _| {
            let suffix = &key[RECENCY_TAG.len()..];
            if resume.as_ref().is_some_and(|r| suffix <= r.as_slice()) {
                return true;
            }
            batch.push(suffix.to_vec());
            batch.len() < SESSION_SCAN_BATCH
        })?;
        for suffix in &batch {
            if !visit_suffix(store, current, suffix, visit)? {
                return Ok(());
            }
        }
        if batch.len() < SESSION_SCAN_BATCH {
            return Ok(());
        }
        resume = batch.pop();
    }
}

/// Visits the session of a recency suffix if it represents its family; false when `visit` stops.
fn visit_suffix(
    store: &dyn StateStore,
    current: Option<&SessionHeader>,
    suffix: &[u8],
    visit: &mut dyn FnMut(SessionHeader) -> bool,
) -> Result<bool, PipelineError> {
    let id = std::str::from_utf8(suffix.get(8..).unwrap_or_default())
        .ok()
        .and_then(|id| SessionId::new(id).ok())
        .ok_or_else(|| CODEC.damaged("the recency index holds an invalid session id".to_owned()))?;
    let header = header(store, &id)?
        .ok_or_else(|| CODEC.damaged(format!("the recency index names session {id}, which has no header")))?;
    Ok(!is_representative(store, &header, current)? || visit(header))
}

/// How many recency entries one scan of [`visit_logical_sessions`] takes before it looks them up.
const SESSION_SCAN_BATCH: usize = 1024;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{REQUEST_TITLE_CHARS_MAX, request_title, result_text};

    #[test]
    fn a_tool_result_reads_as_text_without_escapes_notes_or_control_characters() {
        assert_eq!(
            result_text(&json!("Found 2 files\nsrc/a.ts\nsrc/b.ts"), 100),
            "Found 2 files\nsrc/a.ts\nsrc/b.ts"
        );
        assert_eq!(
            result_text(&json!({"stdout": "ok\n\"done\"", "code": 0, "lines": [1, null]}), 100),
            "{\"code\":0,\"lines\":[1,null],\"stdout\":\"ok\n\"done\"\"}"
        );
        assert_eq!(
            result_text(
                &json!("1→fn main() {}\n\n<system-reminder>\nconsider malware\n</system-reminder>\n"),
                100
            ),
            "1→fn main() {}\n\n\n"
        );
        assert_eq!(
            result_text(&json!("open <system-reminder> never closed"), 100),
            "open <system-reminder> never closed"
        );
        assert_eq!(result_text(&json!("\u{1b}[31mred\u{1b}[0m\tx\r\n"), 100), " [31mred [0m\tx \n");
        // The cut: at most `max_bytes`, a character it splits reading as U+FFFD.
        assert_eq!(result_text(&json!("abcé"), 4), "abc\u{fffd}");
        assert_eq!(result_text(&json!(["abcdef", "ghi"]), 5), "[\"abc");
    }

    #[test]
    fn a_request_title_drops_markup_and_folds_whitespace() {
        assert_eq!(
            request_title(
                "<command-message>review</command-message>\n  <command-args>src/lib.rs</command-args>"
            ),
            Some("review src/lib.rs".to_owned())
        );
        assert_eq!(request_title("fix   the\nbuild"), Some("fix the build".to_owned()));
        assert_eq!(request_title("is a < b and b > c?"), Some("is a < b and b > c?".to_owned()));
        assert_eq!(request_title("<local-command-stdout></local-command-stdout>"), None);
        assert_eq!(request_title("Caveat: The messages below were generated by the user"), None);
        let long = "word ".repeat(40);
        let title = request_title(&long).unwrap();
        assert_eq!(title.chars().count(), REQUEST_TITLE_CHARS_MAX);
        assert!(title.ends_with('…'));
    }
}
