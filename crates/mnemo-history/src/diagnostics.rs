//! What the visible-message projection could not show, and how each turn ended (spec §2.1).
//!
//! The reference projection reports every event it cannot turn into a row as a typed diagnostic,
//! *hard* (`unsupported_event`, `incomplete_event`, `tool_use_id_mismatch`: the reference refuses to
//! serve the session) or *soft* (the rest). Mnemo keeps the same codes and severities, stores them
//! with the session's rows, and reports them (`show --json`) instead of refusing the session: the log
//! stays readable, and the caller sees what was left out and why (decision 0146).
//!
//! [`diagnose`] decides an event's diagnostic and [`turn_state`] a terminal fact's turn state; both
//! are pure functions of the event, so a rebuild finds the same ones.

use mnemo_core::{Content, EventId, EventStatus, Position, Role, RuntimeEvent, TurnId, TurnStatus};
use serde::{Deserialize, Serialize};

/// The failure class a step-capped turn carries (the reference's `tool_step_cap_reached`).
pub const STEP_LIMIT_ERROR_CLASS: &str = "tool_step_cap_reached";

/// How serious a diagnostic is (spec §2.1's severity table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// The reference system refuses to serve a session with one: the transcript is missing
    /// something the log holds, or holds it inconsistently.
    Hard,
    /// Left out by design; reported so nothing is left out silently.
    Soft,
}

/// What the projection could not show (spec §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiagnosticCode {
    /// Content no row can hold: text on the tool lane, an error that does not end its invocation.
    UnsupportedEvent,
    /// An event missing what its row needs: a tool result without a result. No row.
    IncompleteEvent,
    /// A tool call or result whose provider id and `refs.toolCallId` differ. The row is kept.
    ToolUseIdMismatch,
    /// A streaming chunk, never a row (decision 0145).
    PartialSkipped,
    /// An event with no content and no action or status the projection knows.
    UnclaimedControlFact,
}

impl DiagnosticCode {
    /// The code's severity.
    pub fn severity(self) -> Severity {
        match self {
            DiagnosticCode::UnsupportedEvent
            | DiagnosticCode::IncompleteEvent
            | DiagnosticCode::ToolUseIdMismatch => Severity::Hard,
            DiagnosticCode::PartialSkipped | DiagnosticCode::UnclaimedControlFact => Severity::Soft,
        }
    }

    /// The code as the spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticCode::UnsupportedEvent => "unsupported_event",
            DiagnosticCode::IncompleteEvent => "incomplete_event",
            DiagnosticCode::ToolUseIdMismatch => "tool_use_id_mismatch",
            DiagnosticCode::PartialSkipped => "partial_skipped",
            DiagnosticCode::UnclaimedControlFact => "unclaimed_control_fact",
        }
    }
}

/// One diagnostic of a session's projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectionDiagnostic {
    /// What happened.
    pub code: DiagnosticCode,
    /// How serious it is (always `code.severity()`).
    pub severity: Severity,
    /// The event.
    pub event_id: EventId,
    /// Its turn.
    pub turn_id: TurnId,
    /// Its log position.
    pub position: Position,
    /// What exactly, in a sentence.
    pub detail: String,
}

/// How a turn ended, from its latest terminal fact (a terminal event or a turn end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnState {
    /// The turn.
    pub turn_id: TurnId,
    /// How it ended.
    pub status: TurnStatus,
    /// The terminal event, when the fact was an event (a turn end has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<EventId>,
    /// The fact's log position.
    pub position: Position,
    /// The failure class: the terminal error's `code`, else its `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    /// The turn stopped at the runtime's tool step limit (`error_class` is
    /// [`STEP_LIMIT_ERROR_CLASS`]); the reference shows a `step_limit` system note for it.
    pub step_limit: bool,
}

/// The diagnostic an event gets, if any, whether or not it also became a row.
pub fn diagnose(event: &RuntimeEvent, position: Position) -> Option<ProjectionDiagnostic> {
    let (code, detail) = decide(event)?;
    Some(ProjectionDiagnostic {
        code,
        severity: code.severity(),
        event_id: event.id.clone(),
        turn_id: event.turn_id.clone(),
        position,
        detail,
    })
}

fn decide(event: &RuntimeEvent) -> Option<(DiagnosticCode, String)> {
    if event.partial {
        return Some((DiagnosticCode::PartialSkipped, "a streaming chunk is never a row".to_owned()));
    }
    let tool_call_ref = event.refs.as_ref().and_then(|r| r.tool_call_id.as_deref());
    let mismatch = |id: &str| {
        tool_call_ref.filter(|r| *r != id).map(|r| {
            (
                DiagnosticCode::ToolUseIdMismatch,
                format!("tool call id {id:?} differs from refs.toolCallId {r:?}"),
            )
        })
    };
    match &event.content {
        // Text on the system lane is Mnemo's injected instructions and a source tool's notes about
        // itself: hidden by design, not a diagnostic. On the tool lane no row can hold it.
        Some(Content::Text(_)) if event.role == Role::Tool => {
            Some((DiagnosticCode::UnsupportedEvent, "text on the tool lane becomes no row".to_owned()))
        }
        Some(Content::FunctionCall(call)) => mismatch(call.id.as_str()),
        Some(Content::FunctionResponse(response)) if response.result.is_null() => Some((
            DiagnosticCode::IncompleteEvent,
            format!("the result of tool call {:?} ({}) is null; no row", response.id.as_str(), response.name),
        )),
        Some(Content::FunctionResponse(response)) => mismatch(response.id.as_str()),
        Some(Content::Error(error)) if !event.is_terminal() => Some((
            DiagnosticCode::UnsupportedEvent,
            format!("an error that does not end its invocation: {}", error.message),
        )),
        Some(_) => None,
        None if event.status.is_some() => None,
        None => {
            let claimed = event
                .actions
                .as_ref()
                .is_some_and(|a| a.present_keys().iter().any(|key| *key != "stateDelta"));
            (!claimed).then(|| {
                (
                    DiagnosticCode::UnclaimedControlFact,
                    "an event with no content and no action or status the projection knows".to_owned(),
                )
            })
        }
    }
}

/// The turn state a terminal event sets (status terminal, or `endInvocation: true`), if it is one.
pub fn turn_state(event: &RuntimeEvent, position: Position) -> Option<TurnState> {
    if event.partial || !event.is_terminal() {
        return None;
    }
    let error = match &event.content {
        Some(Content::Error(error)) => Some(error),
        _ => None,
    };
    let status = match event.status {
        Some(EventStatus::Failed) => TurnStatus::Failed,
        Some(EventStatus::Aborted) => TurnStatus::Aborted,
        Some(EventStatus::Cancelled) => TurnStatus::Cancelled,
        Some(EventStatus::Completed) => TurnStatus::Completed,
        // `endInvocation` alone: an error ends it as a failure, anything else completes it.
        _ if error.is_some() => TurnStatus::Failed,
        _ => TurnStatus::Completed,
    };
    let error_class = error.and_then(|e| e.code.clone().or_else(|| e.reason.clone()));
    Some(TurnState {
        turn_id: event.turn_id.clone(),
        status,
        event_id: Some(event.id.clone()),
        position,
        step_limit: error_class.as_deref() == Some(STEP_LIMIT_ERROR_CLASS),
        error_class,
    })
}
