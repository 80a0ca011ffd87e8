//! Codex CLI rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one
//! `{"timestamp", "type", "payload"}` object per line.
//!
//! `session_meta` opens the session (its `id`, with `cwd` as the workspace). `response_item`s carry
//! the conversation: `message` (user, assistant, developer/system; user messages that only inject
//! `<environment_context>` or `<user_instructions>` become system events), `reasoning` (its readable
//! summary as thinking; encrypted-only reasoning is skipped), `function_call` /
//! `custom_tool_call` / `local_shell_call` and their outputs. `event_msg` `task_complete` and
//! `turn_aborted` end turns; the other `event_msg`s repeat what the response items say and are
//! skipped with a count, as are `turn_context` and `compacted` lines.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Converted, SourceLine, Turns, error, json_or_string, str_field, text_part, timestamp_field};
use crate::transcript::TranscriptError;

/// The line types of a rollout file.
pub(crate) const LINE_TYPES: [&str; 5] =
    ["session_meta", "response_item", "event_msg", "turn_context", "compacted"];

/// Prefixes of user messages that the CLI injects rather than the user types.
const INJECTED_PREFIXES: [&str; 4] =
    ["<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>"];

struct Rollout<'a> {
    source: &'a str,
    session: Option<String>,
    turns: Turns,
    tool_names: BTreeMap<String, String>,
}

pub(crate) fn convert(
    lines: &[SourceLine],
    source: &str,
    out: &mut Converted,
) -> Result<(), TranscriptError> {
    let mut rollout = Rollout { source, session: None, turns: Turns::default(), tool_names: BTreeMap::new() };
    let mut last_line = 1;
    for SourceLine { line, object } in lines {
        last_line = *line;
        let kind = str_field(object, "type", source, *line, "")?;
        let ts = timestamp_field(object, "timestamp", source, *line)?;
        let payload = match object.get("payload") {
            Some(Value::Object(payload)) => payload,
            _ if !LINE_TYPES.contains(&kind) => {
                out.skip(kind);
                continue;
            }
            _ => return Err(error(source, *line, Some("payload"), "must be an object")),
        };
        match kind {
            "session_meta" => rollout.meta(payload, *line, ts, out)?,
            "response_item" => rollout.item(payload, *line, ts, out)?,
            "event_msg" => rollout.event_msg(payload, *line, ts, out)?,
            other => out.skip(other),
        }
    }
    if let Some(session) = rollout.session.clone() {
        rollout.turns.finish(out, last_line, &session);
    }
    Ok(())
}

impl Rollout<'_> {
    fn meta(
        &mut self,
        payload: &Map<String, Value>,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let id = str_field(payload, "id", self.source, line, "payload")?;
        if let Some(previous) = &self.session {
            if previous == id {
                out.skip("session_meta (repeated)");
                return Ok(());
            }
            return Err(error(
                self.source,
                line,
                Some("payload.id"),
                format!("a second session {id} in a rollout of session {previous}"),
            ));
        }
        let workspace = payload.get("cwd").and_then(Value::as_str);
        out.session(line, id, workspace, None, ts);
        self.session = Some(id.to_owned());
        Ok(())
    }

    fn session(&self, line: usize) -> Result<String, TranscriptError> {
        self.session.clone().ok_or_else(|| {
            error(self.source, line, Some("type"), "a conversation line comes before the session_meta line")
        })
    }

    fn item(
        &mut self,
        payload: &Map<String, Value>,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let session = self.session(line)?;
        let kind = str_field(payload, "type", self.source, line, "payload")?;
        let id = format!("{session}/L{line}");
        match kind {
            "message" => self.message(payload, &session, &id, line, ts, out)?,
            "reasoning" => {
                let text = reasoning_text(payload);
                if text.is_empty() {
                    out.skip("response_item reasoning (encrypted)");
                } else {
                    self.turns.event(
                        out,
                        line,
                        &session,
                        "model",
                        ts,
                        &id,
                        vec![json!({"type": "thinking", "text": text})],
                    );
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let call = str_field(payload, "call_id", self.source, line, "payload")?;
                let (name, args) = match kind {
                    "function_call" => {
                        let name = str_field(payload, "name", self.source, line, "payload")?;
                        let arguments = str_field(payload, "arguments", self.source, line, "payload")?;
                        (name.to_owned(), json_or_string(arguments))
                    }
                    "custom_tool_call" => {
                        let name = str_field(payload, "name", self.source, line, "payload")?;
                        (name.to_owned(), payload.get("input").cloned().unwrap_or(Value::Null))
                    }
                    _ => ("local_shell".to_owned(), payload.get("action").cloned().unwrap_or(Value::Null)),
                };
                self.tool_names.insert(call.to_owned(), name.clone());
                let part = json!({"type": "tool_call", "id": call, "name": name, "args": args});
                self.turns.event(out, line, &session, "model", ts, &id, vec![part]);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call = str_field(payload, "call_id", self.source, line, "payload")?;
                let name = self.tool_names.get(call).cloned().unwrap_or_else(|| "unknown".to_owned());
                let result = match payload.get("output") {
                    Some(Value::String(text)) => json_or_string(text),
                    Some(other) => other.clone(),
                    None => return Err(error(self.source, line, Some("payload.output"), "is missing")),
                };
                let failed = result
                    .pointer("/metadata/exit_code")
                    .and_then(Value::as_i64)
                    .is_some_and(|code| code != 0);
                let part = json!({"type": "tool_result", "id": call, "name": name, "result": result, "is_error": failed});
                self.turns.event(out, line, &session, "tool", ts, &id, vec![part]);
            }
            other => out.skip(format!("response_item {other}")),
        }
        Ok(())
    }

    fn message(
        &mut self,
        payload: &Map<String, Value>,
        session: &str,
        id: &str,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let role = str_field(payload, "role", self.source, line, "payload")?;
        let text = content_text(payload, self.source, line, out)?;
        if text.is_empty() {
            return Ok(());
        }
        let parts = vec![text_part(&text)];
        match role {
            "user" if INJECTED_PREFIXES.iter().any(|p| text.trim_start().starts_with(p)) => {
                self.turns.event(out, line, session, "system", ts, id, parts);
            }
            "user" => self.turns.user(out, line, session, None, ts, id, parts),
            "assistant" => self.turns.event(out, line, session, "model", ts, id, parts),
            "developer" | "system" => self.turns.event(out, line, session, "system", ts, id, parts),
            other => out.skip(format!("response_item message role {other}")),
        }
        Ok(())
    }

    fn event_msg(
        &mut self,
        payload: &Map<String, Value>,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let kind = str_field(payload, "type", self.source, line, "payload")?;
        match kind {
            "task_complete" | "turn_aborted" => {
                let session = self.session(line)?;
                if kind == "turn_aborted" {
                    self.turns.set_status("aborted");
                }
                self.turns.end(out, line, &session, ts);
            }
            other => out.skip(format!("event_msg {other}")),
        }
        Ok(())
    }
}

/// A message's text: its `input_text` / `output_text` parts joined (images and others skipped).
fn content_text(
    payload: &Map<String, Value>,
    source: &str,
    line: usize,
    out: &mut Converted,
) -> Result<String, TranscriptError> {
    let Some(Value::Array(parts)) = payload.get("content") else {
        return Err(error(source, line, Some("payload.content"), "must be an array of content parts"));
    };
    let mut texts = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let path = format!("payload.content[{index}]");
        let Value::Object(part) = part else {
            return Err(error(source, line, Some(&path), "a content part must be an object"));
        };
        match str_field(part, "type", source, line, &path)? {
            "input_text" | "output_text" | "text" => {
                texts.push(str_field(part, "text", source, line, &path)?)
            }
            other => out.skip(format!("content part {other}")),
        }
    }
    Ok(texts.join("\n"))
}

/// The readable part of a reasoning item: its summary texts, else its `reasoning_text` content.
fn reasoning_text(payload: &Map<String, Value>) -> String {
    let texts = |key: &str| -> Vec<String> {
        payload
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let summary = texts("summary");
    if summary.is_empty() { texts("content").join("\n") } else { summary.join("\n") }
}
