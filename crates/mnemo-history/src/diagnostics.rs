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

#[cfg(test)]
mod tests {
    use mnemo_core::{
        Actions, Author, ErrorContent, FunctionCall, FunctionResponse, InvocationId, Refs, RunId, SessionId,
        TextContent, TimestampMs, ToolCallId,
    };
    use serde_json::json;

    use super::*;

    fn event(role: Role, content: Option<Content>) -> RuntimeEvent {
        let mut event = RuntimeEvent::new(
            EventId::new("e1".to_owned()).unwrap(),
            InvocationId::new("i1".to_owned()).unwrap(),
            RunId::new("r1".to_owned()).unwrap(),
            SessionId::new("s1".to_owned()).unwrap(),
            TurnId::new("t1".to_owned()).unwrap(),
            TimestampMs(1_767_225_600_000),
            role,
            if role == Role::User { Author::User } else { Author::Agent },
        );
        event.content = content;
        event
    }

    fn call_id(text: &str) -> ToolCallId {
        ToolCallId::new(text.to_owned()).unwrap()
    }

    fn code(event: &RuntimeEvent) -> Option<DiagnosticCode> {
        diagnose(event, Position(7)).map(|d| {
            assert_eq!(d.severity, d.code.severity());
            assert_eq!((d.event_id.as_str(), d.turn_id.as_str(), d.position), ("e1", "t1", Position(7)));
            d.code
        })
    }

    #[test]
    fn an_ordinary_event_has_no_diagnostic() {
        assert_eq!(code(&event(Role::User, Some(Content::Text(TextContent::new("hi"))))), None);
        let call = Content::FunctionCall(FunctionCall::new(call_id("c1"), "grep", json!({})));
        assert_eq!(code(&event(Role::Model, Some(call))), None);
        let result = Content::FunctionResponse(FunctionResponse::new(call_id("c1"), "grep", json!("ok")));
        assert_eq!(code(&event(Role::Tool, Some(result))), None);
        let mut status_only = event(Role::Model, None);
        status_only.status = Some(EventStatus::Completed);
        assert_eq!(code(&status_only), None);
        let mut state_and_artifact = event(Role::Model, None);
        state_and_artifact.actions = Some(Actions {
            artifact_delta: Some([("report".to_owned(), json!("v1"))].into()),
            ..Actions::default()
        });
        assert_eq!(code(&state_and_artifact), None);
    }

    #[test]
    fn each_event_no_row_can_show_gets_its_code_and_severity() {
        let mut partial = event(Role::Model, Some(Content::Text(TextContent::new("hel"))));
        partial.partial = true;
        assert_eq!(code(&partial), Some(DiagnosticCode::PartialSkipped));
        let tool_text = event(Role::Tool, Some(Content::Text(TextContent::new("stray"))));
        assert_eq!(code(&tool_text), Some(DiagnosticCode::UnsupportedEvent));
        let null_result =
            Content::FunctionResponse(FunctionResponse::new(call_id("c1"), "grep", json!(null)));
        assert_eq!(code(&event(Role::Tool, Some(null_result))), Some(DiagnosticCode::IncompleteEvent));
        let error = event(Role::Model, Some(Content::Error(ErrorContent::new("rate limited"))));
        assert_eq!(code(&error), Some(DiagnosticCode::UnsupportedEvent));
        let mut ending_error = event(Role::Model, Some(Content::Error(ErrorContent::new("rate limited"))));
        ending_error.status = Some(EventStatus::Failed);
        assert_eq!(code(&ending_error), None, "an error that ends its invocation is the turn's end");
        let mut mismatched = event(
            Role::Model,
            Some(Content::FunctionCall(FunctionCall::new(call_id("c1"), "grep", json!({})))),
        );
        mismatched.refs = Some(Refs { tool_call_id: Some("c2".to_owned()), ..Refs::default() });
        assert_eq!(code(&mismatched), Some(DiagnosticCode::ToolUseIdMismatch));
        let mut state_only = event(Role::Model, None);
        state_only.actions =
            Some(Actions { state_delta: Some([("k".to_owned(), json!(1))].into()), ..Actions::default() });
        assert_eq!(code(&state_only), Some(DiagnosticCode::UnclaimedControlFact));
        assert_eq!(code(&event(Role::Model, None)), Some(DiagnosticCode::UnclaimedControlFact));
        assert_eq!(DiagnosticCode::ToolUseIdMismatch.severity(), Severity::Hard);
        assert_eq!(DiagnosticCode::UnclaimedControlFact.severity(), Severity::Soft);
    }

    #[test]
    fn a_terminal_event_sets_its_turns_state_and_names_a_step_limit() {
        let text = || Some(Content::Text(TextContent::new("done")));
        assert_eq!(turn_state(&event(Role::Model, text()), Position(3)), None, "not terminal");
        let mut completed = event(Role::Model, text());
        completed.status = Some(EventStatus::Completed);
        let state = turn_state(&completed, Position(3)).unwrap();
        assert_eq!(
            (state.status, state.position, state.step_limit),
            (TurnStatus::Completed, Position(3), false)
        );
        let mut capped = ErrorContent::new("too many tool steps");
        capped.code = Some(STEP_LIMIT_ERROR_CLASS.to_owned());
        let mut ended = event(Role::Model, Some(Content::Error(capped)));
        ended.actions = Some(Actions { end_invocation: Some(true), ..Actions::default() });
        let state = turn_state(&ended, Position(4)).unwrap();
        assert_eq!(state.status, TurnStatus::Failed, "endInvocation with an error fails the turn");
        assert_eq!(state.error_class.as_deref(), Some(STEP_LIMIT_ERROR_CLASS));
        assert!(state.step_limit);
        let mut aborted = event(Role::Model, None);
        aborted.status = Some(EventStatus::Aborted);
        assert_eq!(turn_state(&aborted, Position(5)).unwrap().status, TurnStatus::Aborted);
        let mut partial = completed.clone();
        partial.partial = true;
        assert_eq!(turn_state(&partial, Position(6)), None, "a streaming chunk ends nothing");
    }
}
