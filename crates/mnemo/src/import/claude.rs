//! Claude Code session files (`~/.claude/projects/<project>/<session>.jsonl`): one object per line,
//! `type` `user` or `assistant` with an API `message`, plus bookkeeping lines.
//!
//! A user line's text opens a turn (named by the line's `uuid`); its `tool_result` blocks become
//! tool results. An assistant line's `thinking` (with its signature), `text` and `tool_use` blocks
//! become model parts. `isMeta` user lines (injected caveats and command output) become system
//! events; `isSidechain` lines belong to a subagent's conversation and are skipped, as are
//! `system`, `file-history-snapshot`, `queue-operation` and `progress` lines. The first `summary`
//! line titles the session. `cwd` is the workspace. "[Request interrupted by user...]" ends the turn
//! as aborted.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Converted, SourceLine, Turns, error, str_field, text_part, timestamp_field};
use crate::transcript::TranscriptError;

/// The line types of a session file.
pub(crate) const LINE_TYPES: [&str; 7] =
    ["user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation", "progress"];

/// The text Claude Code writes as a user message when the user interrupts a turn.
const INTERRUPTED: &str = "[Request interrupted by user";

#[derive(Default)]
struct Session {
    turns: Turns,
    last_line: usize,
}

struct ClaudeFile<'a> {
    source: &'a str,
    title: Option<String>,
    sessions: BTreeMap<String, Session>,
    order: Vec<String>,
    tool_names: BTreeMap<String, String>,
}

pub(crate) fn convert(
    lines: &[SourceLine],
    source: &str,
    out: &mut Converted,
) -> Result<(), TranscriptError> {
    let title = lines.iter().find_map(|l| {
        (l.object.get("type").and_then(Value::as_str) == Some("summary"))
            .then(|| l.object.get("summary").and_then(Value::as_str).map(str::to_owned))
            .flatten()
    });
    let mut file = ClaudeFile {
        source,
        title,
        sessions: BTreeMap::new(),
        order: Vec::new(),
        tool_names: BTreeMap::new(),
    };
    for SourceLine { line, object } in lines {
        let kind = str_field(object, "type", source, *line, "")?;
        match kind {
            "user" | "assistant" if object.get("isSidechain").and_then(Value::as_bool) == Some(true) => {
                out.skip(format!("{kind} (sidechain)"));
            }
            "user" | "assistant" => file.message(object, kind, *line, out)?,
            other => out.skip(other),
        }
    }
    for session in file.order.clone() {
        if let Some(state) = file.sessions.get_mut(&session) {
            let line = state.last_line;
            state.turns.finish(out, line, &session);
        }
    }
    Ok(())
}

impl ClaudeFile<'_> {
    fn message(
        &mut self,
        object: &Map<String, Value>,
        kind: &str,
        line: usize,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let session = str_field(object, "sessionId", self.source, line, "")?.to_owned();
        let uuid = str_field(object, "uuid", self.source, line, "")?.to_owned();
        let ts = timestamp_field(object, "timestamp", self.source, line)?;
        let Some(Value::Object(message)) = object.get("message") else {
            return Err(error(self.source, line, Some("message"), "must be an object with role and content"));
        };
        if !self.sessions.contains_key(&session) {
            let workspace = object.get("cwd").and_then(Value::as_str);
            let title = if self.order.is_empty() { self.title.as_deref() } else { None };
            out.session(line, &session, workspace, title, ts);
            self.sessions.insert(session.clone(), Session::default());
            self.order.push(session.clone());
        }
        let blocks = blocks(message, self.source, line)?;
        let meta = object.get("isMeta").and_then(Value::as_bool) == Some(true);
        let mut state = self.sessions.remove(&session).unwrap_or_default();
        state.last_line = line;
        let result = if kind == "user" {
            self.user(&mut state, &blocks, &session, &uuid, meta, line, ts, out)
        } else {
            self.assistant(&mut state, &blocks, &session, &uuid, line, ts, out)
        };
        self.sessions.insert(session, state);
        result
    }

    #[expect(clippy::too_many_arguments, reason = "the line's identity and content, each distinct")]
    fn user(
        &mut self,
        state: &mut Session,
        blocks: &[Map<String, Value>],
        session: &str,
        uuid: &str,
        meta: bool,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let mut texts = Vec::new();
        let mut results = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            let path = format!("message.content[{index}]");
            match str_field(block, "type", self.source, line, &path)? {
                "text" => texts.push(text_part(str_field(block, "text", self.source, line, &path)?)),
                "tool_result" => results.push(self.tool_result(block, line, &path)?),
                other => out.skip(format!("user block {other}")),
            }
        }
        state.turns.event(out, line, session, "tool", ts, &format!("{uuid}/results"), results);
        let interrupted =
            texts.len() == 1 && texts[0]["text"].as_str().is_some_and(|t| t.starts_with(INTERRUPTED));
        if interrupted {
            state.turns.set_status("aborted");
            out.skip("user interruption notice");
        } else if meta {
            state.turns.event(out, line, session, "system", ts, uuid, texts);
        } else {
            state.turns.user(out, line, session, Some(uuid), ts, uuid, texts);
        }
        Ok(())
    }

    fn tool_result(
        &self,
        block: &Map<String, Value>,
        line: usize,
        path: &str,
    ) -> Result<Value, TranscriptError> {
        let id = str_field(block, "tool_use_id", self.source, line, path)?;
        let name = self.tool_names.get(id).cloned().unwrap_or_else(|| "unknown".to_owned());
        let result = match block.get("content") {
            None | Some(Value::Null) => Value::String(String::new()),
            Some(Value::String(text)) => Value::String(text.clone()),
            // A list of blocks: keep the text of text blocks, the blocks themselves otherwise.
            Some(Value::Array(items)) => {
                let texts: Vec<&str> =
                    items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect();
                if texts.len() == items.len() {
                    Value::String(texts.join("\n"))
                } else {
                    Value::Array(items.clone())
                }
            }
            Some(_) => {
                return Err(error(
                    self.source,
                    line,
                    Some(&format!("{path}.content")),
                    "must be a string or an array of blocks",
                ));
            }
        };
        let is_error = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        Ok(json!({"type": "tool_result", "id": id, "name": name, "result": result, "is_error": is_error}))
    }

    #[expect(clippy::too_many_arguments, reason = "the line's identity and content, each distinct")]
    fn assistant(
        &mut self,
        state: &mut Session,
        blocks: &[Map<String, Value>],
        session: &str,
        uuid: &str,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let mut parts = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            let path = format!("message.content[{index}]");
            match str_field(block, "type", self.source, line, &path)? {
                "text" => parts.push(text_part(str_field(block, "text", self.source, line, &path)?)),
                "thinking" => {
                    let mut part = json!({"type": "thinking", "text": str_field(block, "thinking", self.source, line, &path)?});
                    if let Some(Value::String(signature)) = block.get("signature")
                        && !signature.is_empty()
                    {
                        part["signature"] = json!(signature);
                    }
                    parts.push(part);
                }
                "tool_use" => {
                    let id = str_field(block, "id", self.source, line, &path)?;
                    let name = str_field(block, "name", self.source, line, &path)?;
                    let input = block.get("input").cloned().unwrap_or_else(|| Value::Object(Map::new()));
                    self.tool_names.insert(id.to_owned(), name.to_owned());
                    parts.push(json!({"type": "tool_call", "id": id, "name": name, "args": input}));
                }
                other => out.skip(format!("assistant block {other}")),
            }
        }
        state.turns.event(out, line, session, "model", ts, uuid, parts);
        Ok(())
    }
}

/// A message's content as blocks: a string is one text block.
fn blocks(
    message: &Map<String, Value>,
    source: &str,
    line: usize,
) -> Result<Vec<Map<String, Value>>, TranscriptError> {
    match message.get("content") {
        Some(Value::String(text)) => {
            let mut block = Map::new();
            block.insert("type".to_owned(), json!("text"));
            block.insert("text".to_owned(), json!(text));
            Ok(if text.is_empty() { Vec::new() } else { vec![block] })
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::Object(block) => Ok(block.clone()),
                _ => Err(error(
                    source,
                    line,
                    Some(&format!("message.content[{index}]")),
                    "a content block must be an object",
                )),
            })
            .collect(),
        _ => Err(error(source, line, Some("message.content"), "must be a string or an array of blocks")),
    }
}
