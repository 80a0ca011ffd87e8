//! Export: records written back in the mnemo transcript format, a line a record, each session's
//! records in stream order (the facade reads the log and writes the lines).
//!
//! Every line carries its time, ids and run, so importing an export yields the same records at the
//! same times: export → import → export is byte-identical, and import → export → import gives the
//! same log. An event the `parts` form cannot express exactly (a status, actions, refs, hidden or
//! partial, provider options, an invocation other than its run, a tool result the export has not
//! seen called) is written whole as a `runtime_event` line. Records that are not conversation
//! (checkpoints, copy markers, memory streams) are skipped and counted by kind; a fresh store
//! re-derives them by compacting and extracting again.

use std::collections::{BTreeMap, BTreeSet};

use mnemo_core::{
    Author, Content, MemoryMode, Record, Role, RuntimeEvent, SessionId, TimestampMs, TurnStatus,
};
use serde::Serialize;
use serde_json::Value;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExportReport {
    /// Sessions written.
    pub sessions: u64,
    /// Lines written.
    pub lines: u64,
    /// Events written whole as `runtime_event` lines.
    pub runtime_event_lines: u64,
    /// Records not written, counted by kind.
    pub skipped: BTreeMap<String, u64>,
}

#[derive(Serialize)]
struct SessionOut<'a> {
    kind: &'static str,
    session: &'a SessionId,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<&'a str>,
    incognito: bool,
    memory: MemoryMode,
    subagent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<&'a SessionId>,
    ts: TimestampMs,
}

#[derive(Serialize)]
struct EventOut<'a> {
    session: &'a SessionId,
    turn: &'a str,
    role: Role,
    author: Author,
    ts: TimestampMs,
    id: &'a str,
    run: &'a str,
    parts: [PartOut<'a>; 1],
}

#[derive(Serialize)]
struct RuntimeEventOut<'a> {
    kind: &'static str,
    event: &'a RuntimeEvent,
}

#[derive(Serialize)]
struct TurnEndOut<'a> {
    kind: &'static str,
    session: &'a SessionId,
    turn: &'a str,
    status: TurnStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a str>,
    ts: TimestampMs,
}

#[derive(Serialize)]
struct FlagsOut<'a> {
    kind: &'static str,
    session: &'a SessionId,
    #[serde(skip_serializing_if = "Option::is_none")]
    incognito: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<MemoryMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    ts: TimestampMs,
}

#[derive(Serialize)]
struct ArchiveOut<'a> {
    kind: &'static str,
    session: &'a SessionId,
    archived: bool,
    ts: TimestampMs,
}

/// What the export remembers within one session, so every line it writes imports: one is made
/// per session and given that session's records in stream order.
#[derive(Debug, Default)]
pub struct SessionExport {
    tool_calls: BTreeSet<String>,
}

impl SessionExport {
    /// One record's line (without its newline), or `None` for a record the transcript format does
    /// not carry. An event written whole as a `runtime_event` line is counted in `report`.
    pub fn line(
        &mut self,
        record: &Record,
        ts: TimestampMs,
        report: &mut ExportReport,
    ) -> Result<Option<String>, serde_json::Error> {
        export_line(record, ts, self, report)
    }
}

fn json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string(value)
}

/// One record's line, or `None` for a record the transcript format does not carry.
fn export_line(
    record: &Record,
    ts: TimestampMs,
    seen: &mut SessionExport,
    report: &mut ExportReport,
) -> Result<Option<String>, serde_json::Error> {
    let line = match record {
        Record::SessionOpened(r) => json(&SessionOut {
            kind: "session",
            session: &r.session,
            workspace: r.workspace.as_ref().map(|w| w.as_str()),
            incognito: r.incognito,
            memory: r.memory,
            subagent: r.subagent,
            title: r.title.as_deref(),
            source: r.source.as_deref(),
            parent: r.parent.as_ref(),
            ts,
        })?,
        Record::RuntimeEvent(event) => match compact_part(event, seen) {
            Some(part) => json(&EventOut {
                session: &event.session_id,
                turn: event.turn_id.as_str(),
                role: event.role,
                author: event.author,
                ts: event.ts,
                id: event.id.as_str(),
                run: event.run_id.as_str(),
                parts: [part],
            })?,
            None => {
                report.runtime_event_lines += 1;
                if let Some(Content::FunctionCall(call)) = &event.content {
                    seen.tool_calls.insert(call.id.as_str().to_owned());
                }
                json(&RuntimeEventOut { kind: "runtime_event", event })?
            }
        },
        Record::TurnEnded(r) => json(&TurnEndOut {
            kind: "turn_end",
            session: &r.session,
            turn: r.turn.as_str(),
            status: r.status,
            run: r.run.as_ref().map(|r| r.as_str()),
            ts,
        })?,
        Record::SessionFlagsChanged(r) => json(&FlagsOut {
            kind: "flags",
            session: &r.session,
            incognito: r.incognito,
            memory: r.memory,
            title: r.title.as_deref(),
            ts,
        })?,
        Record::SessionArchived(r) => {
            json(&ArchiveOut { kind: "archive", session: &r.session, archived: r.archived, ts })?
        }
        _ => return Ok(None),
    };
    Ok(Some(line))
}

/// One entry of an event line's `parts`, keys in the order FORMAT.md shows them.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum PartOut<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        steering: bool,
    },
    Thinking {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<&'a str>,
    },
    ToolCall {
        id: &'a str,
        name: &'a str,
        args: &'a Value,
    },
    ToolResult {
        id: &'a str,
        name: &'a str,
        result: &'a Value,
        is_error: bool,
    },
}

/// The event as one `parts` entry, when importing that part gives back exactly this event.
fn compact_part<'a>(event: &'a RuntimeEvent, seen: &mut SessionExport) -> Option<PartOut<'a>> {
    let plain = event.invocation_id.as_str() == event.run_id.as_str()
        && !event.partial
        && event.branch.is_none()
        && event.origin.is_none()
        && event.model_visibility.is_none()
        && event.status.is_none()
        && event.actions.is_none()
        && event.refs.is_none();
    if !plain {
        return None;
    }
    match event.content.as_ref()? {
        Content::Text(text) => {
            let mut bare = mnemo_core::TextContent::new(text.text.clone());
            bare.steering = text.steering;
            (*text == bare)
                .then_some(PartOut::Text { text: &text.text, steering: text.steering == Some(true) })
        }
        Content::Thinking(thinking) => thinking
            .provider_options
            .is_none()
            .then_some(PartOut::Thinking { text: &thinking.text, signature: thinking.signature.as_deref() }),
        Content::FunctionCall(call) => {
            // The parts form refuses a call id used twice in a session.
            let exact = call.provider_options.is_none()
                && call.provider_executed.is_none()
                && seen.tool_calls.insert(call.id.as_str().to_owned());
            exact.then_some(PartOut::ToolCall { id: call.id.as_str(), name: &call.name, args: &call.args })
        }
        Content::FunctionResponse(response) => {
            let exact = response.is_error != Some(false)
                && response.provider_executed.is_none()
                && response.provider_output.is_none()
                && seen.tool_calls.contains(response.id.as_str());
            exact.then_some(PartOut::ToolResult {
                id: response.id.as_str(),
                name: &response.name,
                result: &response.result,
                is_error: response.is_error == Some(true),
            })
        }
        _ => None,
    }
}
