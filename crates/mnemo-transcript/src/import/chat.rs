//! OpenAI chat-completions messages: a JSON array of messages (one conversation), a request body
//! `{"model": ..., "messages": [...]}` (one conversation), or JSON Lines whose every line is such
//! a body (one conversation per line, the fine-tuning dataset shape).
//!
//! Roles: `system` / `developer` become system events, `user` opens a turn, `assistant` becomes
//! model text (plus `reasoning_content` as thinking, and each of `tool_calls` as a tool call),
//! `tool` becomes the tool result of its `tool_call_id`. Other roles (the legacy `function`) and
//! non-text content parts (images, audio, files) are skipped with a count.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::importer::{Conversion, Importer, Way};
use super::{
    Converted, ImportFormat, SourceLine, Turns, content_id, error, json_or_string, str_field, text_part,
};
use crate::format::TranscriptError;

/// The importer of chat-completions messages.
pub(crate) struct Chat;

impl Importer for Chat {
    fn format(&self) -> ImportFormat {
        ImportFormat::OpenaiChat
    }

    fn about(&self) -> &'static str {
        "OpenAI chat-completions messages (an array, a request body, or JSON Lines of them)"
    }

    fn detects_start(&self, text: &str) -> bool {
        text.trim_start().starts_with('[')
    }

    fn detects_line(&self, object: &Map<String, Value>) -> bool {
        object.get("messages").is_some_and(Value::is_array)
    }

    fn detects_document(&self, object: &Map<String, Value>) -> bool {
        object.get("messages").is_some_and(Value::is_array)
    }

    fn conversion(&self) -> Conversion {
        Conversion(Way::Document(convert))
    }
}

pub(crate) fn convert(bytes: &[u8], source: &str, out: &mut Converted) -> Result<(), TranscriptError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| error(source, 1, None, format!("not valid UTF-8: {e}")))?;
    let base = content_id("chat", bytes);
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || !looks_like_json_lines(text) {
        // One document: an array of messages or a request body.
        let value: Value = crate::json::parse(text.as_bytes())
            .map_err(|e| error(source, e.line(), None, format!("not valid JSON: {e}")))?;
        let messages = match &value {
            Value::Array(messages) => messages,
            Value::Object(object) => messages_of(object, source, 1)?,
            _ => {
                return Err(error(
                    source,
                    1,
                    None,
                    "expected an array of messages or an object with `messages`",
                ));
            }
        };
        let session = conversation_id(&value, &base);
        return conversation(messages, &session, source, 1, out);
    }
    for (index, line) in super::read_lines(bytes, source)?.into_iter().enumerate() {
        let SourceLine { line, object } = line;
        let messages = messages_of(&object, source, line)?;
        let session = conversation_id(&Value::Object(object.clone()), &format!("{base}-{}", index + 1));
        conversation(messages, &session, source, line, out)?;
    }
    Ok(())
}

/// JSON Lines when the first non-blank line is a whole JSON object by itself.
fn looks_like_json_lines(text: &str) -> bool {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| matches!(serde_json::from_str::<Value>(l), Ok(Value::Object(_))))
}

fn messages_of<'a>(
    object: &'a Map<String, Value>,
    source: &str,
    line: usize,
) -> Result<&'a Vec<Value>, TranscriptError> {
    match object.get("messages") {
        Some(Value::Array(messages)) => Ok(messages),
        Some(_) => Err(error(source, line, Some("messages"), "must be an array of messages")),
        None => Err(error(source, line, Some("messages"), "is missing; each line must be a conversation")),
    }
}

/// A conversation's own `id` (a completion or dataset id) when it has one, else `fallback`.
fn conversation_id(value: &Value, fallback: &str) -> String {
    value
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.len() <= 200)
        .map_or_else(|| fallback.to_owned(), str::to_owned)
}

fn conversation(
    messages: &[Value],
    session: &str,
    source: &str,
    line: usize,
    out: &mut Converted,
) -> Result<(), TranscriptError> {
    out.session(line, session, None, None, None);
    let mut turns = Turns::default();
    let mut tool_names: BTreeMap<String, String> = BTreeMap::new();
    for (index, message) in messages.iter().enumerate() {
        let path = format!("messages[{index}]");
        let Value::Object(message) = message else {
            return Err(error(source, line, Some(&path), "a message must be an object"));
        };
        let role = str_field(message, "role", source, line, &path)?;
        let id = format!("{session}/m{index}");
        match role {
            "system" | "developer" => {
                let parts = text_parts(message, source, line, &path, out)?;
                turns.event(out, line, session, "system", None, &id, parts);
            }
            "user" => {
                let parts = text_parts(message, source, line, &path, out)?;
                turns.user(out, line, session, None, None, &id, parts);
            }
            "assistant" => {
                let parts = assistant_parts(message, source, line, &path, &mut tool_names, out)?;
                turns.event(out, line, session, "model", None, &id, parts);
            }
            "tool" => {
                let call = str_field(message, "tool_call_id", source, line, &path)?;
                let name = tool_names.get(call).cloned().unwrap_or_else(|| "unknown".to_owned());
                let result = match message.get("content") {
                    Some(Value::String(text)) => json_or_string(text),
                    Some(Value::Array(_)) => Value::String(joined_text(message, source, line, &path, out)?),
                    _ => {
                        return Err(error(
                            source,
                            line,
                            Some(&format!("{path}.content")),
                            "must be a string or an array of parts",
                        ));
                    }
                };
                let part = json!({"type": "tool_result", "id": call, "name": name, "result": result});
                turns.event(out, line, session, "tool", None, &id, vec![part]);
            }
            other => out.skip(format!("message role {other}")),
        }
    }
    turns.end(out, line, session, None);
    Ok(())
}

/// The text of `content`: a string, or the `text` parts of an array (others skipped by type).
fn joined_text(
    message: &Map<String, Value>,
    source: &str,
    line: usize,
    path: &str,
    out: &mut Converted,
) -> Result<String, TranscriptError> {
    let field = format!("{path}.content");
    match message.get("content") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (index, part) in parts.iter().enumerate() {
                let part_path = format!("{field}[{index}]");
                let Value::Object(part) = part else {
                    return Err(error(source, line, Some(&part_path), "a content part must be an object"));
                };
                match str_field(part, "type", source, line, &part_path)? {
                    "text" | "input_text" | "output_text" => {
                        texts.push(str_field(part, "text", source, line, &part_path)?.to_owned())
                    }
                    "refusal" => texts.push(str_field(part, "refusal", source, line, &part_path)?.to_owned()),
                    other => out.skip(format!("content part {other}")),
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err(error(source, line, Some(&field), "must be a string, an array of parts or null")),
    }
}

fn text_parts(
    message: &Map<String, Value>,
    source: &str,
    line: usize,
    path: &str,
    out: &mut Converted,
) -> Result<Vec<Value>, TranscriptError> {
    let text = joined_text(message, source, line, path, out)?;
    Ok(if text.is_empty() { Vec::new() } else { vec![text_part(&text)] })
}

fn assistant_parts(
    message: &Map<String, Value>,
    source: &str,
    line: usize,
    path: &str,
    tool_names: &mut BTreeMap<String, String>,
    out: &mut Converted,
) -> Result<Vec<Value>, TranscriptError> {
    let mut parts = Vec::new();
    if let Some(Value::String(reasoning)) =
        message.get("reasoning_content").or_else(|| message.get("reasoning"))
        && !reasoning.is_empty()
    {
        parts.push(json!({"type": "thinking", "text": reasoning}));
    }
    parts.extend(text_parts(message, source, line, path, out)?);
    if let Some(Value::String(refusal)) = message.get("refusal") {
        parts.push(text_part(refusal));
    }
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => return Ok(parts),
        Some(Value::Array(calls)) => calls,
        Some(_) => return Err(error(source, line, Some(&format!("{path}.tool_calls")), "must be an array")),
    };
    for (index, call) in calls.iter().enumerate() {
        let call_path = format!("{path}.tool_calls[{index}]");
        let Value::Object(call) = call else {
            return Err(error(source, line, Some(&call_path), "a tool call must be an object"));
        };
        let id = str_field(call, "id", source, line, &call_path)?;
        let function_path = format!("{call_path}.function");
        let Some(Value::Object(function)) = call.get("function") else {
            return Err(error(
                source,
                line,
                Some(&function_path),
                "must be an object with name and arguments",
            ));
        };
        let name = str_field(function, "name", source, line, &function_path)?;
        let args = match function.get("arguments") {
            Some(Value::String(text)) => {
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
            }
            Some(value) => value.clone(),
            None => Value::Object(Map::new()),
        };
        tool_names.insert(id.to_owned(), name.to_owned());
        parts.push(json!({"type": "tool_call", "id": id, "name": name, "args": args}));
    }
    Ok(parts)
}
