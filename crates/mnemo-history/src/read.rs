//! ReadHistory (spec §3.6–3.8): a bounded window of one session's visible turns.
//!
//! Check order: arguments, abort, privacy, abort, session (a logical representative), messages,
//! abort, current-turn exclusion, anchor, visible turns, window, byte bounding. Limits: at most 5
//! turns (`before + 1 + after`, defaults included), 32 KiB of message records, 8 KiB of text per
//! message. Thinking, tool names, raw tool arguments, tool results and provider payloads are never
//! shown; texts and the title are redacted.
//!
//! As in the reference system, the schema checks the trimmed `session_id`, but the lookup uses the
//! id as given.

use std::collections::BTreeMap;

use mnemo_core::SessionId;
use mnemo_pipeline::{PipelineError, StateStore};
use serde::Serialize;
use serde_json::Value;

use crate::index::{IndexReader, MatchKind};
use crate::messages::{self, MessageKind, VisibleMessage};
use crate::tool::{
    HistoryContext, ToolFailure, check_integer, check_string, failure_reasons, integer_arg, strict_object,
    string_arg,
};
use mnemo_core::redaction::redact_secrets;

/// Most turns one read returns (`before + 1 + after`).
pub const READ_TURNS_MAX: i64 = 5;
/// Turns before the anchor when the caller gives none.
pub const READ_BEFORE_TURNS_DEFAULT: i64 = 1;
/// Turns after the anchor when the caller gives none.
pub const READ_AFTER_TURNS_DEFAULT: i64 = 1;
/// Most turns on one side of the anchor.
pub const READ_SIDE_TURNS_MAX: i64 = 4;
/// Budget of message records in UTF-8 bytes.
pub const READ_BYTES_MAX: usize = 32 * 1024;
/// Most text of one message in UTF-8 bytes.
pub const READ_MESSAGE_BYTES_MAX: usize = 8 * 1024;
/// Longest id argument in characters.
pub const READ_ID_CHARS_MAX: usize = 256;

failure_reasons! {
    /// Why a read failed.
    ReadFailureReason {
        /// The arguments break the tool's schema (the reference system's tool runtime reports this
        /// as `InvalidArguments` before the tool runs).
        InvalidArguments => "invalid_arguments",
        /// Incognito is active (or the privacy state could not be verified).
        IncognitoActive => "incognito_active",
        /// No such logical session (a superseded revision is not found either).
        SessionNotFound => "session_not_found",
        /// The anchor message does not exist or has no searchable text.
        MessageNotFound => "message_not_found",
        /// `turn_id` names another turn than the anchor message's.
        AnchorMismatch => "anchor_mismatch",
        /// The anchor turn has no visible message.
        TurnNotFound => "turn_not_found",
        /// The session has no visible turn.
        EmptyTranscript => "empty_transcript",
        /// The call was aborted.
        Aborted => "aborted",
    }
}

/// A read's error: `{kind: "history_read_error", ok: false, reason, message}`.
pub type ReadFailure = ToolFailure<ReadFailureReason>;

/// What a read call returns: its output, or the tool's error.
pub type ReadOutcome = Result<HistoryRead, ReadFailure>;

fn failure(reason: ReadFailureReason, message: impl Into<String>) -> ReadFailure {
    ToolFailure::new("history_read_error", reason, message)
}

/// The `session_not_found` failure, also for a session the caller may not see: another
/// workspace's session answers exactly as a session that does not exist.
fn session_not_found() -> ReadFailure {
    failure(ReadFailureReason::SessionNotFound, "no such session")
}

fn invalid(message: impl Into<String>) -> ReadFailure {
    failure(ReadFailureReason::InvalidArguments, message)
}

/// ReadHistory's arguments, raw: checking them is part of the call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryReadRequest {
    /// The session to read.
    pub session_id: String,
    /// The message to center on (preferred anchor).
    pub message_id: Option<String>,
    /// The turn to center on.
    pub turn_id: Option<String>,
    /// Turns before the anchor (0..=4, default 1).
    pub before: Option<i64>,
    /// Turns after the anchor (0..=4, default 1).
    pub after: Option<i64>,
}

impl HistoryReadRequest {
    /// A request for the last turns of `session_id`.
    pub fn new(session_id: impl Into<String>) -> Self {
        HistoryReadRequest { session_id: session_id.into(), ..HistoryReadRequest::default() }
    }

    /// Reads the tool's JSON arguments: `session_id` and optional `message_id`, `turn_id`, `before`
    /// and `after`, nothing else.
    pub fn from_tool_args(args: &Value) -> Result<HistoryReadRequest, ReadFailure> {
        let map = strict_object(args, &["session_id", "message_id", "turn_id", "before", "after"])
            .map_err(invalid)?;
        let session_id = string_arg(map, "session_id")
            .map_err(invalid)?
            .ok_or_else(|| invalid("`session_id` is required"))?;
        Ok(HistoryReadRequest {
            session_id,
            message_id: string_arg(map, "message_id").map_err(invalid)?,
            turn_id: string_arg(map, "turn_id").map_err(invalid)?,
            before: integer_arg(map, "before").map_err(invalid)?,
            after: integer_arg(map, "after").map_err(invalid)?,
        })
    }

    fn before(&self) -> usize {
        usize::try_from(self.before.unwrap_or(READ_BEFORE_TURNS_DEFAULT)).unwrap_or(0)
    }

    fn after(&self) -> usize {
        usize::try_from(self.after.unwrap_or(READ_AFTER_TURNS_DEFAULT)).unwrap_or(0)
    }

    /// The schema's checks, including `before + 1 + after <= 5` with defaults counted.
    fn check(&self) -> Result<(), ReadFailure> {
        check_string("session_id", &self.session_id, true, READ_ID_CHARS_MAX).map_err(invalid)?;
        for (name, value) in [("message_id", &self.message_id), ("turn_id", &self.turn_id)] {
            if let Some(value) = value {
                check_string(name, value, false, READ_ID_CHARS_MAX).map_err(invalid)?;
            }
        }
        check_integer("before", self.before, 0, READ_SIDE_TURNS_MAX).map_err(invalid)?;
        check_integer("after", self.after, 0, READ_SIDE_TURNS_MAX).map_err(invalid)?;
        let before = self.before.unwrap_or(READ_BEFORE_TURNS_DEFAULT);
        let after = self.after.unwrap_or(READ_AFTER_TURNS_DEFAULT);
        if before + 1 + after > READ_TURNS_MAX {
            return Err(invalid(format!(
                "before ({before}) + 1 + after ({after}) must be at most {READ_TURNS_MAX} turns (defaults count)"
            )));
        }
        Ok(())
    }
}

/// ReadHistory's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRead {
    kind: &'static str,
    /// The session read.
    pub session_id: String,
    /// Whether it is the session the tool runs in.
    pub is_current_session: bool,
    /// The anchor message, when the read was anchored on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_message_id: Option<String>,
    /// The anchor turn, when the read was anchored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_turn_id: Option<String>,
    /// The session's title, redacted ("" when it has none).
    pub title: String,
    /// The session's last message time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message_at: Option<u64>,
    /// The turns of the window, oldest first.
    pub turns: Vec<ReadTurn>,
    /// Whether turns before the window exist.
    pub has_more_before: bool,
    /// Whether turns after the window exist.
    pub has_more_after: bool,
    /// `true` when a message was cut or dropped to fit the budgets; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// One turn of a read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadTurn {
    /// The turn.
    pub turn_id: String,
    /// Its visible messages in order.
    pub messages: Vec<ReadMessage>,
}

/// One message of a read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadMessage {
    /// The message.
    pub message_id: String,
    /// `user_message`, `assistant_message` or `tool_intent`.
    pub match_kind: MatchKind,
    /// `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// The redacted text, possibly cut (ending in `…`).
    pub text: String,
    /// The message's time.
    pub timestamp: u64,
}

/// The record whose JSON length, with an empty text, is a message's overhead in the byte budget.
/// Its field names and order are the reference system's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BudgetRecord<'a> {
    message_id: &'a str,
    match_kind: MatchKind,
    role: &'a str,
    text: &'a str,
    timestamp: u64,
}

impl ReadMessage {
    fn overhead_bytes(&self) -> usize {
        let record = BudgetRecord {
            message_id: &self.message_id,
            match_kind: self.match_kind,
            role: self.role,
            text: "",
            timestamp: self.timestamp,
        };
        serde_json::to_vec(&record).map_or(0, |json| json.len())
    }
}

/// Runs ReadHistory against the `history-messages` stage's store; the `history-search` stage's
/// store says which workspace each session is in. From inside a session only sessions of its
/// workspace can be read (see [`crate::index::Scope`]); from no session, any.
pub fn read_history(
    messages: &dyn StateStore,
    index: &dyn StateStore,
    request: &HistoryReadRequest,
    context: &HistoryContext<'_>,
) -> Result<ReadOutcome, PipelineError> {
    if let Err(refused) = request.check() {
        return Ok(Err(refused));
    }
    if context.aborted() {
        return Ok(Err(aborted()));
    }
    let current = context.current_header(messages)?;
    if context.incognito(current.as_ref()) {
        return Ok(Err(failure(
            ReadFailureReason::IncognitoActive,
            "history read is unavailable while incognito is active",
        )));
    }
    if context.aborted() {
        return Ok(Err(aborted()));
    }
    let not_found = || Ok(Err(session_not_found()));
    let Ok(session) = SessionId::new(request.session_id.as_str()) else {
        return not_found();
    };
    let reader = IndexReader::open(index)?;
    if !reader.in_scope(reader.scope_of(context.current_session, context.workspace)?, &session)? {
        return not_found();
    }
    let Some(header) = messages::header(messages, &session)? else {
        return not_found();
    };
    if !messages::is_representative(messages, &header, current.as_ref())? {
        return not_found();
    }
    let mut rows = messages::messages(messages, &session)?;
    if context.aborted() {
        return Ok(Err(aborted()));
    }
    let is_current = context.current_session == Some(&session);
    if is_current && let Some(turn) = context.current_turn {
        rows.retain(|row| row.turn_id != *turn);
    }
    let (anchor_message, anchor_turn) = match anchor(&rows, request) {
        Ok(anchor) => anchor,
        Err(refused) => return Ok(Err(refused)),
    };
    let turns = visible_turns(&rows);
    if turns.is_empty() {
        return Ok(Err(failure(ReadFailureReason::EmptyTranscript, "the session has no visible messages")));
    }
    let window = match window(&turns, anchor_turn.as_deref(), request.before(), request.after()) {
        Some(window) => window,
        None => {
            return Ok(Err(failure(
                ReadFailureReason::TurnNotFound,
                "the anchor turn has no visible messages",
            )));
        }
    };
    let (turns, truncated) = bound(&turns, &window, anchor_message.as_deref());
    Ok(Ok(HistoryRead {
        kind: "history_read",
        session_id: session.as_str().to_owned(),
        is_current_session: is_current,
        anchor_message_id: anchor_message,
        anchor_turn_id: anchor_turn,
        title: redact_secrets(header.title.as_deref().unwrap_or_default()).into_owned(),
        last_message_at: header.last_message_at.map(|t| t.0),
        turns,
        has_more_before: window.more_before,
        has_more_after: window.more_after,
        truncated: truncated.then_some(true),
    }))
}

fn aborted() -> ReadFailure {
    failure(ReadFailureReason::Aborted, "history read was aborted")
}

/// The anchor message and turn (spec §3.7 step 6).
fn anchor(
    rows: &[VisibleMessage],
    request: &HistoryReadRequest,
) -> Result<(Option<String>, Option<String>), ReadFailure> {
    let Some(message_id) = &request.message_id else {
        return Ok((None, request.turn_id.clone()));
    };
    let row = rows
        .iter()
        // A tool call is found by search through its arguments even when it states no intent,
        // so it anchors a read too (its turn is shown; the call itself has no text to show).
        .find(|row| {
            row.message_id == *message_id
                && (row.searchable_text().is_some() || row.kind == MessageKind::ToolCall)
        })
        .ok_or_else(|| {
            failure(ReadFailureReason::MessageNotFound, format!("no message {message_id:?} in this session"))
        })?;
    let turn = row.turn_id.as_str();
    if let Some(asked) = &request.turn_id
        && asked != turn
    {
        return Err(failure(
            ReadFailureReason::AnchorMismatch,
            format!("message {message_id:?} belongs to turn {turn:?}, not {asked:?}"),
        ));
    }
    Ok((Some(message_id.clone()), Some(turn.to_owned())))
}

/// A visible turn: its id and its visible messages, each with its unredacted row's id.
type Turn = (String, Vec<ReadMessage>);

/// The session's visible turns in first-appearance order (spec §3.7 step 7).
fn visible_turns(rows: &[VisibleMessage]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut places: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows {
        let (match_kind, role) = match row.kind {
            MessageKind::User => (MatchKind::UserMessage, "user"),
            MessageKind::Assistant if !row.text.trim().is_empty() => {
                (MatchKind::AssistantMessage, "assistant")
            }
            MessageKind::ToolCall if !row.text.trim().is_empty() => (MatchKind::ToolIntent, "tool"),
            _ => continue,
        };
        let message = ReadMessage {
            message_id: row.message_id.clone(),
            match_kind,
            role,
            text: redact_secrets(&row.text).into_owned(),
            timestamp: row.timestamp.0,
        };
        match places.get(row.turn_id.as_str()) {
            Some(&place) => turns[place].1.push(message),
            None => {
                places.insert(row.turn_id.as_str(), turns.len());
                turns.push((row.turn_id.as_str().to_owned(), vec![message]));
            }
        }
    }
    turns
}

/// Which turns a read shows.
#[derive(Debug, Clone, Copy)]
struct Window {
    first: usize,
    last: usize,
    anchor: Option<usize>,
    more_before: bool,
    more_after: bool,
}

/// The window (spec §3.7 step 8); `None` when the anchor turn is not a visible turn.
fn window(turns: &[Turn], anchor_turn: Option<&str>, before: usize, after: usize) -> Option<Window> {
    let last_turn = turns.len() - 1;
    let Some(anchor_turn) = anchor_turn else {
        let first = turns.len().saturating_sub(before + 1 + after);
        return Some(Window {
            first,
            last: last_turn,
            anchor: None,
            more_before: first > 0,
            more_after: false,
        });
    };
    let index = turns.iter().position(|(turn, _)| turn == anchor_turn)?;
    let first = index.saturating_sub(before);
    let last = (index + after).min(last_turn);
    Some(Window { first, last, anchor: Some(index), more_before: first > 0, more_after: last < last_turn })
}

/// Fits the window's messages into the byte budgets (spec §3.7 step 9): the anchor message first,
/// then the rest in order (unanchored: newest first); returns the kept turns in order and whether
/// anything was cut or dropped.
fn bound(turns: &[Turn], window: &Window, anchor_message: Option<&str>) -> (Vec<ReadTurn>, bool) {
    let chronological = (window.first..=window.last).flat_map(|t| (0..turns[t].1.len()).map(move |m| (t, m)));
    let order: Vec<(usize, usize)> = match window.anchor {
        Some(anchor) => {
            let messages = &turns[anchor].1;
            let first = anchor_message.and_then(|id| messages.iter().position(|m| m.message_id == id));
            let first = (anchor, first.unwrap_or(0));
            std::iter::once(first).chain(chronological.filter(|slot| *slot != first)).collect()
        }
        None => chronological.rev().collect(),
    };
    let mut kept: Vec<Vec<Option<ReadMessage>>> =
        (window.first..=window.last).map(|t| vec![None; turns[t].1.len()]).collect();
    let mut remaining = READ_BYTES_MAX;
    let mut truncated = false;
    for (t, m) in order {
        let message = &turns[t].1[m];
        let overhead = message.overhead_bytes();
        if remaining <= overhead {
            truncated = true;
            continue;
        }
        let budget = (remaining - overhead).min(READ_MESSAGE_BYTES_MAX);
        let (text, cut) = fit_text(&message.text, budget);
        truncated |= cut;
        remaining -= overhead + text.len();
        kept[t - window.first][m] = Some(ReadMessage { text, ..message.clone() });
    }
    let turns = (window.first..=window.last)
        .zip(kept)
        .filter_map(|(t, messages)| {
            let messages: Vec<ReadMessage> = messages.into_iter().flatten().collect();
            (!messages.is_empty()).then(|| ReadTurn { turn_id: turns[t].0.clone(), messages })
        })
        .collect();
    (turns, truncated)
}

/// Cuts text to `budget` UTF-8 bytes: whole if it fits; empty if the budget is 3 bytes or less;
/// else the first `budget - 3` bytes (a cut character and any U+FFFD before the cut dropped) and
/// `…`. Returns whether it was cut.
pub(crate) fn fit_text(text: &str, budget: usize) -> (String, bool) {
    if text.len() <= budget {
        return (text.to_owned(), false);
    }
    if budget <= 3 {
        return (String::new(), true);
    }
    let prefix = String::from_utf8_lossy(&text.as_bytes()[..budget - 3]);
    let mut cut = prefix.trim_end_matches('\u{fffd}').to_owned();
    cut.push('…');
    (cut, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_to_its_budget() {
        assert_eq!(fit_text("hello", 5), ("hello".to_owned(), false));
        assert_eq!(fit_text("hello", 3), (String::new(), true));
        assert_eq!(fit_text("hello", 4), ("h…".to_owned(), true));
        // "é" is two bytes: a cut through it drops it whole.
        assert_eq!(fit_text("aébcd", 5), ("a…".to_owned(), true));
        let (cut, _) = fit_text(&"x".repeat(9 * 1024), READ_MESSAGE_BYTES_MAX);
        assert_eq!(cut.len(), READ_MESSAGE_BYTES_MAX);
    }

    #[test]
    fn overhead_is_the_reference_record_with_empty_text() {
        let message = ReadMessage {
            message_id: "m1".to_owned(),
            match_kind: MatchKind::UserMessage,
            role: "user",
            text: "ignored".to_owned(),
            timestamp: 7,
        };
        let expected =
            r#"{"messageId":"m1","matchKind":"user_message","role":"user","text":"","timestamp":7}"#;
        assert_eq!(message.overhead_bytes(), expected.len());
    }
}
