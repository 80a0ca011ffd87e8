//! SWE-agent trajectories (`*.traj`): one pretty-printed JSON document
//! `{"trajectory": [...], "history": [...], "info": {...}, ...}`, one run of the agent on one task.
//!
//! The conversation is read from `history` (SWE-agent's `HistoryItem`s), in either layout:
//! - function calling: an `assistant` item's `content` is the model's text, its `tool_calls`
//!   (`{id, function: {name, arguments}}`) the calls with their arguments, and each `tool` item
//!   (`tool_call_ids`) the result of its call;
//! - the older thought/action layout: an `assistant` item's `thought` is the model's text and its
//!   `action` (a command line such as `open src/app.py` or `submit`) a call named by the command's
//!   first word with `{"command": action}` as arguments; the `user` item with the observation that
//!   follows is that call's result.
//!
//! The first `user` item is the task (a user message); `system` items and user items that answer
//! no call (format-error prompts) are system events written by the host; `thinking_blocks` become
//! thinking. Demonstration items (`is_demo`, or `message_type` `demonstration`) are examples shown
//! to the model, not this run: skipped and counted. A file with no `history` is read from
//! `trajectory` (each step's `thought`, `action`, `observation`). The whole run is one turn, ended
//! `completed` when `info.exit_status` says it submitted and `failed` otherwise, after a system
//! event holding the exit status and the submitted patch.
//!
//! The session id is `swe-agent-<12 hex of the file's SHA-256>`, so the same file gets the same id;
//! the title is the task's instance id when the run's `replay_config` names one. A trajectory
//! carries no times: they are derived (the transcript format's rule).

use serde_json::{Map, Value, json};

use super::importer::{Conversion, Importer, Way};
use super::{Converted, ImportFormat, Turns, content_id, error, json_or_string, text_part};
use crate::format::TranscriptError;

/// The importer of SWE-agent trajectories.
pub(crate) struct SweAgent;

impl Importer for SweAgent {
    fn format(&self) -> ImportFormat {
        ImportFormat::SweAgent
    }

    fn about(&self) -> &'static str {
        "A SWE-agent trajectory (`.traj`, one JSON document)"
    }

    fn detects_document(&self, object: &Map<String, Value>) -> bool {
        is_trajectory(object)
    }

    fn conversion(&self) -> Conversion {
        Conversion(Way::Document(convert))
    }
}

/// Whether a JSON document is a SWE-agent trajectory.
pub(crate) fn is_trajectory(object: &Map<String, Value>) -> bool {
    object.get("trajectory").is_some_and(Value::is_array)
        && (object.contains_key("history") || object.contains_key("info"))
}

struct Run<'a> {
    source: &'a str,
    session: String,
    turns: Turns,
    /// Calls not yet answered, oldest first: id and tool name.
    pending: Vec<(String, String)>,
    /// Whether the task (the first user item) was read.
    task_read: bool,
}

pub(crate) fn convert(bytes: &[u8], source: &str, out: &mut Converted) -> Result<(), TranscriptError> {
    let document: Value = crate::json::parse(bytes)
        .map_err(|e| error(source, e.line(), None, format!("not valid JSON: {e}")))?;
    let Value::Object(document) = document else {
        return Err(error(source, 1, None, "a SWE-agent trajectory is a JSON object"));
    };
    if !is_trajectory(&document) {
        return Err(error(
            source,
            1,
            Some("trajectory"),
            "is missing; a SWE-agent trajectory has `trajectory` and `history` or `info`",
        ));
    }
    let session = content_id("swe-agent", bytes);
    let title = instance_id(&document);
    out.session(1, &session, None, title.as_deref(), None);
    let mut run = Run { source, session, turns: Turns::default(), pending: Vec::new(), task_read: false };
    match document.get("history") {
        Some(Value::Array(items)) if !items.is_empty() => {
            for (index, item) in items.iter().enumerate() {
                let Value::Object(item) = item else {
                    return Err(error(source, 1, Some(&format!("history[{index}]")), "must be an object"));
                };
                run.history_item(item, index, out)?;
            }
        }
        _ => {
            let Some(Value::Array(steps)) = document.get("trajectory") else { return Ok(()) };
            for (index, step) in steps.iter().enumerate() {
                run.step(step, index, out);
            }
        }
    }
    run.finish(document.get("info"), out);
    Ok(())
}

/// The task's instance id, from the run's `replay_config` (a JSON string or object).
fn instance_id(document: &Map<String, Value>) -> Option<String> {
    let config = match document.get("replay_config")? {
        Value::String(text) => serde_json::from_str::<Value>(text).ok()?,
        other => other.clone(),
    };
    let id = config.pointer("/problem_statement/id").or_else(|| config.pointer("/instance_id"))?;
    id.as_str().filter(|id| !id.trim().is_empty()).map(str::to_owned)
}

/// A history item's text: a string, or the `text` of its blocks.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

impl Run<'_> {
    fn history_item(
        &mut self,
        item: &Map<String, Value>,
        index: usize,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let path = format!("history[{index}]");
        let role = item.get("role").and_then(Value::as_str).ok_or_else(|| {
            error(self.source, 1, Some(&format!("{path}.role")), "is missing or not a string")
        })?;
        let kind = item.get("message_type").and_then(Value::as_str).unwrap_or_default();
        if item.get("is_demo").and_then(Value::as_bool) == Some(true) || kind == "demonstration" {
            out.skip("history demonstration item");
            return Ok(());
        }
        let id = format!("{}/h{index}", self.session);
        let text = text_of(item.get("content"));
        let session = self.session.clone();
        match role {
            "system" => self.turns.event_by(out, 1, &session, "system", "host", None, &id, parts_of(&text)),
            "user" if self.pending.is_empty() => {
                if !self.task_read {
                    self.task_read = true;
                    self.turns.user(out, 1, &session, None, None, &id, parts_of(&text));
                } else {
                    self.turns.event_by(out, 1, &session, "system", "host", None, &id, parts_of(&text));
                }
            }
            "user" | "tool" => {
                let ids: Vec<String> = match item.get("tool_call_ids") {
                    Some(Value::Array(ids)) => {
                        ids.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                    }
                    _ => Vec::new(),
                };
                let calls: Vec<(String, String)> = if ids.is_empty() {
                    self.pending.drain(..1.min(self.pending.len())).collect()
                } else {
                    let found: Vec<(String, String)> =
                        self.pending.iter().filter(|(call, _)| ids.contains(call)).cloned().collect();
                    self.pending.retain(|(call, _)| !ids.contains(call));
                    found
                };
                if calls.is_empty() {
                    self.turns.event_by(out, 1, &session, "system", "host", None, &id, parts_of(&text));
                }
                let parts = calls
                    .into_iter()
                    .map(|(call, name)| {
                        json!({"type": "tool_result", "id": call, "name": name, "result": text, "is_error": false})
                    })
                    .collect();
                self.turns.event(out, 1, &session, "tool", None, &id, parts);
            }
            "assistant" => self.assistant(item, &id, &path, out)?,
            other => out.skip(format!("history item role {other}")),
        }
        Ok(())
    }

    fn assistant(
        &mut self,
        item: &Map<String, Value>,
        id: &str,
        path: &str,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let mut parts = Vec::new();
        if let Some(Value::Array(blocks)) = item.get("thinking_blocks") {
            for block in blocks {
                if let Some(thinking) =
                    block.get("thinking").and_then(Value::as_str).filter(|t| !t.is_empty())
                {
                    let mut part = json!({"type": "thinking", "text": thinking});
                    if let Some(signature) =
                        block.get("signature").and_then(Value::as_str).filter(|s| !s.is_empty())
                    {
                        part["signature"] = json!(signature);
                    }
                    parts.push(part);
                }
            }
        }
        match item.get("tool_calls") {
            Some(Value::Array(calls)) if !calls.is_empty() => {
                parts.extend(parts_of(&text_of(item.get("content"))));
                for (index, call) in calls.iter().enumerate() {
                    let call_path = format!("{path}.tool_calls[{index}]");
                    let call_id = call.get("id").and_then(Value::as_str).ok_or_else(|| {
                        error(self.source, 1, Some(&format!("{call_path}.id")), "is missing or not a string")
                    })?;
                    let name = call.pointer("/function/name").and_then(Value::as_str).ok_or_else(|| {
                        error(
                            self.source,
                            1,
                            Some(&format!("{call_path}.function.name")),
                            "is missing or not a string",
                        )
                    })?;
                    let args = match call.pointer("/function/arguments") {
                        Some(Value::String(text)) => json_or_string(text),
                        Some(other) => other.clone(),
                        None => Value::Object(Map::new()),
                    };
                    self.pending.push((call_id.to_owned(), name.to_owned()));
                    parts.push(json!({"type": "tool_call", "id": call_id, "name": name, "args": args}));
                }
            }
            _ => {
                let thought = item.get("thought").and_then(Value::as_str).unwrap_or_default();
                let text =
                    if thought.trim().is_empty() { text_of(item.get("content")) } else { thought.to_owned() };
                parts.extend(parts_of(&text));
                if let Some(action) =
                    item.get("action").and_then(Value::as_str).filter(|a| !a.trim().is_empty())
                {
                    parts.push(self.action_call(action, id));
                }
            }
        }
        let session = self.session.clone();
        self.turns.event(out, 1, &session, "model", None, id, parts);
        Ok(())
    }

    /// A thought/action layout's action as a call named by its command's first word.
    fn action_call(&mut self, action: &str, id: &str) -> Value {
        let name = action.split_whitespace().next().unwrap_or("action").to_owned();
        let call = format!("{id}/action");
        self.pending.push((call.clone(), name.clone()));
        json!({"type": "tool_call", "id": call, "name": name, "args": {"command": action}})
    }

    /// A `trajectory` step, for files without `history`.
    fn step(&mut self, step: &Value, index: usize, out: &mut Converted) {
        let id = format!("{}/s{index}", self.session);
        let session = self.session.clone();
        let field = |key: &str| step.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut parts = parts_of(&field("thought"));
        let action = field("action");
        if !action.trim().is_empty() {
            parts.push(self.action_call(&action, &id));
        }
        self.turns.event(out, 1, &session, "model", None, &id, parts);
        if let Some((call, name)) = self.pending.pop() {
            let part = json!({"type": "tool_result", "id": call, "name": name, "result": field("observation"), "is_error": false});
            self.turns.event(out, 1, &session, "tool", None, &format!("{id}/observation"), vec![part]);
        }
    }

    /// The run's outcome (`info.exit_status`, `info.submission`), and the turn's end.
    fn finish(&mut self, info: Option<&Value>, out: &mut Converted) {
        let session = self.session.clone();
        let status = info.and_then(|i| i.get("exit_status")).and_then(Value::as_str);
        let submission = info.and_then(|i| i.get("submission")).and_then(Value::as_str).unwrap_or_default();
        if let Some(status) = status {
            let mut text = format!("SWE-agent finished with exit status {status}.");
            if !submission.trim().is_empty() {
                text.push_str("\nSubmission:\n");
                text.push_str(submission);
            }
            let id = format!("{session}/info");
            self.turns.event_by(out, 1, &session, "system", "host", None, &id, vec![text_part(&text)]);
            if !status.starts_with("submitted") {
                self.turns.set_status("failed");
            }
        }
        self.turns.end(out, 1, &session, None);
    }
}

fn parts_of(text: &str) -> Vec<Value> {
    if text.trim().is_empty() { Vec::new() } else { vec![text_part(text)] }
}
