//! Codex rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one
//! `{"timestamp", "type", "payload"}` object per line, `type` one of `session_meta`,
//! `response_item`, `event_msg`, `turn_context` and `compacted` (Codex's `RolloutItem`).
//!
//! What is kept, and from where:
//! - the session: `session_meta` (`id`, `cwd` as the workspace; a `source` naming a sub-agent
//!   marks the session as a sub-agent's, linked to the thread that spawned it when the source
//!   names one, `thread_spawn.parent_thread_id`; a forked session is linked to the session it was
//!   forked from, `forked_from_id`); `event_msg` `thread_name_updated` retitles it. A forked
//!   rollout goes on with the history Codex copied from the session it was forked from, that
//!   session's own `session_meta` first: the history is kept as the fork's, the meta line skipped;
//! - turns: `event_msg` `task_started` / `turn_started` opens one (named by its `turn_id` when it
//!   has one), as does a `turn_context` naming a turn other than the open one; `task_complete` /
//!   `turn_complete` ends it completed and `turn_aborted` aborted, at that line's time. Rollouts
//!   older than those events get a turn per user message;
//! - user input: the `response_item` user message, or the `event_msg` `user_message` when the
//!   rollout holds no such item (newer exec and desktop rollouts record only the event). Each
//!   input is kept once: an event and an item of the same text in the same turn are one input.
//!   Input given while a turn runs is kept as steering text in that turn;
//! - assistant text and thinking likewise from `response_item` `message` / `reasoning` (its
//!   summaries; its `reasoning_text` content when it has no summary) or their `agent_message` /
//!   `agent_reasoning` / `agent_reasoning_raw_content` echoes when the item is absent. Reasoning
//!   with only `encrypted_content` is unreadable and counted as skipped;
//! - `developer` and `system` messages, and user-role messages that Codex injects (environment
//!   context, AGENTS.md and other instructions), as system events written by the host;
//! - tool calls with their arguments: `function_call`, `custom_tool_call` (`apply_patch` and
//!   other freeform tools, with their `input`), `local_shell_call` (its `action`),
//!   `tool_search_call`, `image_generation_call`, and `web_search_call` (its `action`, the query,
//!   as arguments, answered at once by a result marked as recorded without its results, since the
//!   search runs on the provider and the rollout keeps none);
//! - tool results: `function_call_output`, `custom_tool_call_output`, `tool_search_output` (one whose
//!   call is not in the rollout is kept as a system event by the host naming the call). A result
//!   is an error when its output says so (`metadata.exit_code`, `success: false`, a header line
//!   `Exit code: N` or `Process exited with code N` with N ≠ 0), or when an `exec_command_end`
//!   (non-zero `exit_code`), `patch_apply_end` (`success: false`) or `mcp_tool_call_end` (an error
//!   result) of the same call says so, before the result or after it within its turn (a file is
//!   read a line at a time, and what a turn converted to is final when the turn ends);
//! - Codex's own compaction: a `compacted` line becomes a system event written by the host that
//!   holds its summary text; `event_msg` `error` a system event with the error's message.
//!
//! Everything else is counted as skipped by type: `turn_context` settings, token counts, the
//! `event_msg`s that only echo items kept above (`exec_command_end` and friends after their flag
//! is read, `context_compacted`, `web_search_end`), `ghost_snapshot`, encrypted `compaction` items.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::importer::{Conversion, Converter, Importer, SOURCE_LINE_BYTES_MAX, Way};
use super::{
    Converted, ImportFormat, SourceLine, Turns, error, json_or_string, str_field, text_part, timestamp_field,
};
use crate::format::TranscriptError;

/// The importer of Codex CLI rollouts.
pub(crate) struct Codex;

impl Importer for Codex {
    fn format(&self) -> ImportFormat {
        ImportFormat::Codex
    }

    fn about(&self) -> &'static str {
        "Codex CLI rollout JSON Lines"
    }

    fn detects_line(&self, object: &Map<String, Value>) -> bool {
        let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
        (object.contains_key("payload") && LINE_TYPES.contains(&kind))
            || is_bare_header(object)
            || (object.get("record_type").is_some() && kind.is_empty())
    }

    fn workspace_is_directory(&self) -> bool {
        true
    }

    fn conversion(&self) -> Conversion {
        // A bare rollout names its working directory in one of its first lines.
        Conversion(Way::Lines {
            line_bytes_max: SOURCE_LINE_BYTES_MAX,
            ahead: BARE_CWD_LINES_MAX,
            start: |source, first| Converter::Codex(Rollout::new(source, first)),
        })
    }
}

/// The line types of a rollout file.
pub(crate) const LINE_TYPES: [&str; 5] =
    ["session_meta", "response_item", "event_msg", "turn_context", "compacted"];

/// Prefixes of user-role messages that Codex injects rather than the user types.
const INJECTED_PREFIXES: [&str; 8] = [
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<permissions instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
    "<skill>",
];

/// The blocks Codex put at the start of a user message (each opened by one of
/// [`INJECTED_PREFIXES`] and running to its closing tag, or to the end when it has none), joined,
/// and what follows them: what the user typed.
fn split_injected(text: &str) -> (String, &str) {
    let mut blocks = Vec::new();
    let mut rest = text.trim();
    while let Some(prefix) = INJECTED_PREFIXES.iter().find(|p| rest.starts_with(**p)) {
        let close = if prefix.starts_with("# AGENTS.md") {
            "</INSTRUCTIONS>".to_owned()
        } else {
            format!("</{}", &prefix[1..])
        };
        let end = rest.find(&close).map_or(rest.len(), |at| at + close.len());
        blocks.push(&rest[..end]);
        rest = rest[end..].trim();
    }
    (blocks.join("\n"), rest)
}

/// How an output whose call is not in the rollout is counted. Codex has written such rollouts (its
/// own requests then fail with "No tool call found for function call output"); the output cannot
/// be a result (no call made it), so its content is kept as a system event by the host.
const ORPHANED_OUTPUT: &str =
    "response_item output whose call is not in the rollout (its content kept as a system event)";

/// How many header lines of a tool's text output are read for its exit code: Codex writes the
/// code above the `Output:` line, and the command's own output must not be mistaken for it.
const OUTPUT_HEADER_LINES_MAX: usize = 8;

/// What a piece of conversation text is, for telling an item and its event echo apart.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Said {
    User,
    Assistant,
    Thinking,
}

/// Which line type a piece of text came from.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum From {
    Item,
    Event,
}

#[derive(Clone)]
pub(crate) struct Rollout<'a> {
    source: &'a str,
    session: Option<String>,
    turns: Turns,
    tool_names: BTreeMap<String, String>,
    /// Texts kept that the other line type has not echoed yet, with the turn they were kept in.
    unechoed: Vec<(Said, From, String, String)>,
    /// Tool results by call id: the index of their line, to set the error flag an event after them tells.
    results: BTreeMap<String, usize>,
    /// Calls that an event before their result declared failed.
    failed: BTreeMap<String, bool>,
    /// A bare rollout's working directory, from its first lines.
    bare_cwd: Option<String>,
    /// The session this rollout was forked from, and the sessions that one was forked from,
    /// as far as the rollout's meta lines tell.
    forked_from: Vec<String>,
    /// The last line read.
    last_line: usize,
}

impl<'a> Rollout<'a> {
    /// A rollout read a line at a time; `first_lines` are its first lines (at most
    /// [`BARE_CWD_LINES_MAX`]), where a bare rollout's working directory is found.
    pub(crate) fn new(source: &'a str, first_lines: &[SourceLine]) -> Self {
        Rollout {
            source,
            session: None,
            turns: Turns::default(),
            tool_names: BTreeMap::new(),
            unechoed: Vec::new(),
            results: BTreeMap::new(),
            failed: BTreeMap::new(),
            bare_cwd: bare_cwd(first_lines),
            forked_from: Vec::new(),
            last_line: 1,
        }
    }

    /// The same state, naming another source in its errors (a capture resumed from it).
    pub(crate) fn with_source<'b>(self, source: &'b str) -> Rollout<'b> {
        let Rollout {
            source: _,
            session,
            turns,
            tool_names,
            unechoed,
            results,
            failed,
            bare_cwd,
            forked_from,
            last_line,
        } = self;
        Rollout {
            source,
            session,
            turns,
            tool_names,
            unechoed,
            results,
            failed,
            bare_cwd,
            forked_from,
            last_line,
        }
    }

    /// Converts one line. A tool result stays open to the exit status an event after it reports
    /// until its turn ends: the lines converted are final (`Converted::settle`) at each turn's end.
    pub(crate) fn line(
        &mut self,
        source_line: &SourceLine,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let SourceLine { line, object } = source_line;
        let (source, line) = (self.source, *line);
        self.last_line = line;
        let turn = self.turns.current().map(str::to_owned);
        let before = out.len();
        self.convert_line(object, source, line, out)?;
        if self.turns.current().is_none() || self.turns.current() != turn.as_deref() {
            // NOTE: a turn ended (or another began) with this line: what the lines before it
            // converted to is final, whatever a later line says (with no turn open, this line's too).
            let open_from = if self.turns.current().is_some() { before } else { out.len() };
            out.settle_before(open_from);
            self.results.retain(|_, at| *at >= open_from);
        }
        Ok(())
    }

    /// At the end of the file: the open turn as `Turns::finish` leaves it.
    pub(crate) fn finish(&mut self, out: &mut Converted) {
        if let Some(session) = self.session.clone() {
            self.turns.finish(out, self.last_line, &session);
        }
    }

    fn convert_line(
        &mut self,
        object: &Map<String, Value>,
        source: &str,
        line: usize,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        // The bare layout of 2025 rollouts: a header object, `{"record_type":"state"}` markers and
        // response items without the `{timestamp, type, payload}` envelope.
        if object.get("record_type").is_some() && !object.contains_key("type") {
            out.skip(format!(
                "record_type {}",
                object.get("record_type").and_then(Value::as_str).unwrap_or("unknown")
            ));
            return Ok(());
        }
        if is_bare_header(object) {
            let ts = timestamp_field(object, "timestamp", source, line)?;
            let mut meta = object.clone();
            if let Some(cwd) = self.bare_cwd.clone() {
                meta.insert("cwd".to_owned(), Value::String(cwd));
            }
            return self.meta(&meta, line, ts, out);
        }
        if !object.contains_key("payload")
            && object.get("type").and_then(Value::as_str).is_some_and(|t| !LINE_TYPES.contains(&t))
        {
            return self.item(object, line, None, out);
        }
        let kind = str_field(object, "type", source, line, "")?;
        let ts = timestamp_field(object, "timestamp", source, line)?;
        let payload = match object.get("payload") {
            Some(Value::Object(payload)) => payload,
            _ if !LINE_TYPES.contains(&kind) => {
                out.skip(kind);
                return Ok(());
            }
            _ => return Err(error(source, line, Some("payload"), "must be an object")),
        };
        match kind {
            "session_meta" => self.meta(payload, line, ts, out)?,
            "response_item" => self.item(payload, line, ts, out)?,
            "event_msg" => self.event_msg(payload, line, ts, out)?,
            "turn_context" => self.turn_context(payload, line, ts, out)?,
            "compacted" => self.compacted(payload, line, ts, out)?,
            other => out.skip(other),
        }
        Ok(())
    }
}

/// The header line of a bare-layout rollout: `{"id", "timestamp", "instructions", "git"}`.
pub(crate) fn is_bare_header(object: &Map<String, Value>) -> bool {
    !object.contains_key("type")
        && object.get("id").is_some_and(Value::is_string)
        && object.get("timestamp").is_some_and(Value::is_string)
        && object.contains_key("instructions")
}

/// Longest stretch of a bare rollout read for the `<cwd>` of its environment context.
pub(crate) const BARE_CWD_LINES_MAX: usize = 8;

/// A bare rollout's working directory, as its first `<environment_context>` message names it (the
/// header has none).
fn bare_cwd(lines: &[SourceLine]) -> Option<String> {
    lines.iter().take(BARE_CWD_LINES_MAX).find_map(|l| {
        let text = l.object.get("content")?.as_array()?.iter().find_map(|c| c.get("text")?.as_str())?;
        let start = text.find("<environment_context>")?;
        let rest = &text[start..];
        // `<cwd>/path</cwd>`, or the older `Current working directory: /path` line.
        let cwd = match rest.split("<cwd>").nth(1) {
            Some(after) => after.split("</cwd>").next()?,
            None => rest.lines().find_map(|l| l.trim().strip_prefix("Current working directory:"))?,
        }
        .trim();
        (!cwd.is_empty()).then(|| cwd.to_owned())
    })
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
        let forked_from = payload
            .get("forked_from_id")
            .and_then(Value::as_str)
            .filter(|from| !from.is_empty() && *from != id);
        if let Some(previous) = &self.session {
            if previous == id {
                out.skip("session_meta (repeated)");
                return Ok(());
            }
            // A forked rollout holds, after its own session_meta, the history it was forked from
            // as Codex copied it: the session_meta of the session it was forked from (and of that
            // one's, when it was a fork too), then that session's lines. They are this session's
            // history; the other session's meta line is not this session's.
            if self.forked_from.iter().any(|from| from == id) {
                self.forked_from.extend(forked_from.map(str::to_owned));
                out.skip("session_meta (of the forked history)");
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
        let at = out.len();
        out.session(line, id, workspace, None, ts);
        // `source` is "cli", "exec", "vscode", {"custom": ...}, ... or {"subagent": ...} for an
        // agent Codex started: "review", "compact", {"other": ...}, or {"thread_spawn": {...}}
        // naming the thread that spawned it. A sub-agent's parent is the thread that spawned it;
        // any other session's is the one it was forked from (`forked_from_id`), if any.
        let subagent = payload.get("source").and_then(|s| s.get("subagent"));
        let spawned_by = subagent
            .and_then(|s| s.pointer("/thread_spawn/parent_thread_id"))
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty() && *p != id);
        if let Some(value) = out.line_mut(at) {
            if subagent.is_some() {
                value["subagent"] = json!(true);
            }
            if let Some(parent) = spawned_by.or(forked_from) {
                value["parent"] = json!(parent);
            }
        }
        self.forked_from.extend(forked_from.map(str::to_owned));
        self.session = Some(id.to_owned());
        Ok(())
    }

    fn session(&self, line: usize) -> Result<String, TranscriptError> {
        self.session.clone().ok_or_else(|| {
            error(self.source, line, Some("type"), "a conversation line comes before the session_meta line")
        })
    }

    /// Whether `text` echoes a text of the other line type kept in the open turn (then it is
    /// consumed: each item has at most one echo).
    fn is_echo(&mut self, said: Said, from: From, text: &str) -> bool {
        let turn = self.turns.current().unwrap_or_default().to_owned();
        match self
            .unechoed
            .iter()
            .position(|(s, f, t, at)| *s == said && *f != from && *at == turn && echoes(said, t, text))
        {
            Some(at) => {
                self.unechoed.remove(at);
                true
            }
            None => false,
        }
    }

    fn kept(&mut self, said: Said, from: From, text: &str) {
        let turn = self.turns.current().unwrap_or_default().to_owned();
        // Echoes stay within their turn: what earlier turns left unechoed can never match again.
        self.unechoed.retain(|(_, _, _, at)| *at == turn);
        self.unechoed.push((said, from, text.to_owned(), turn));
    }

    /// A user input, from an item or an event, kept once.
    #[expect(clippy::too_many_arguments, reason = "the line's identity and content, each distinct")]
    fn user_input(
        &mut self,
        text: &str,
        from: From,
        session: &str,
        id: &str,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) {
        if text.trim().is_empty() {
            out.skip("empty user message");
            return;
        }
        if self.is_echo(Said::User, from, text) {
            out.skip(match from {
                From::Item => "response_item user message (echo of its user_message event)",
                From::Event => "event_msg user_message (echo of its response_item)",
            });
            return;
        }
        // A message can carry Codex's blocks and what the user typed after them (its content parts
        // joined): the blocks are the host's, the rest is the user's. Taken whole as the host's,
        // the user's words were lost, and nothing they said could be remembered.
        let (injected, typed) = split_injected(text);
        if injected.is_empty() {
            self.turns.user(out, line, session, None, ts, id, vec![text_part(text)]);
        } else if typed.is_empty() {
            self.turns.event_by(out, line, session, "system", "host", ts, id, vec![text_part(text)]);
        } else {
            let context = format!("{id}#context");
            self.turns.event_by(
                out,
                line,
                session,
                "system",
                "host",
                ts,
                &context,
                vec![text_part(&injected)],
            );
            if self.is_echo(Said::User, from, typed) {
                return;
            }
            self.turns.user(out, line, session, None, ts, id, vec![text_part(typed)]);
            self.kept(Said::User, from, typed);
            return;
        }
        self.kept(Said::User, from, text);
    }

    /// Model text or thinking, from an item or an event, kept once.
    #[expect(clippy::too_many_arguments, reason = "the line's identity and content, each distinct")]
    fn model_texts(
        &mut self,
        said: Said,
        texts: Vec<String>,
        from: From,
        session: &str,
        id: &str,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) {
        let mut parts = Vec::new();
        for text in texts.into_iter().filter(|t| !t.trim().is_empty()) {
            if self.is_echo(said, from, &text) {
                out.skip(match (said, from) {
                    (Said::Thinking, From::Event) => "event_msg agent_reasoning (echo of its response_item)",
                    (Said::Thinking, From::Item) => {
                        "response_item reasoning (echo of its agent_reasoning event)"
                    }
                    (_, From::Event) => "event_msg agent_message (echo of its response_item)",
                    (_, From::Item) => "response_item assistant message (echo of its agent_message event)",
                });
                continue;
            }
            self.kept(said, from, &text);
            parts.push(match said {
                Said::Thinking => json!({"type": "thinking", "text": text}),
                _ => text_part(&text),
            });
        }
        self.turns.event(out, line, session, "model", ts, id, parts);
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
                let texts = reasoning_texts(payload);
                if texts.is_empty() {
                    out.skip(if payload.get("encrypted_content").is_some_and(Value::is_string) {
                        "response_item reasoning (encrypted only)"
                    } else {
                        "response_item reasoning (empty)"
                    });
                } else {
                    self.model_texts(Said::Thinking, texts, From::Item, &session, &id, line, ts, out);
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" | "tool_search_call" => {
                let call = call_id(payload, self.source, line)?;
                let (name, args) = match kind {
                    "function_call" => {
                        let name = str_field(payload, "name", self.source, line, "payload")?;
                        let arguments = str_field(payload, "arguments", self.source, line, "payload")?;
                        (name.to_owned(), json_or_string(arguments))
                    }
                    "custom_tool_call" => {
                        let name = str_field(payload, "name", self.source, line, "payload")?;
                        let input = str_field(payload, "input", self.source, line, "payload")?;
                        (name.to_owned(), Value::String(input.to_owned()))
                    }
                    "tool_search_call" => {
                        ("tool_search".to_owned(), payload.get("arguments").cloned().unwrap_or(Value::Null))
                    }
                    _ => ("local_shell".to_owned(), payload.get("action").cloned().unwrap_or(Value::Null)),
                };
                self.tool_names.insert(call.clone(), name.clone());
                let part = json!({"type": "tool_call", "id": call, "name": name, "args": args});
                self.turns.event(out, line, &session, "model", ts, &id, vec![part]);
            }
            "web_search_call" | "image_generation_call" => {
                // Both run on the provider: the call and what the rollout says of its outcome.
                let call = payload
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty())
                    .map_or_else(|| format!("{session}/L{line}/call"), str::to_owned);
                let status = payload.get("status").cloned().unwrap_or(Value::Null);
                let (name, args, result) = if kind == "web_search_call" {
                    let action = payload.get("action").cloned().unwrap_or(Value::Null);
                    let result = json!({"status": status, "results": "not recorded: the search ran on the provider and the rollout keeps no results"});
                    ("web_search", action, result)
                } else {
                    let prompt = payload.get("revised_prompt").cloned().unwrap_or(Value::Null);
                    let result = json!({"status": status, "image": "not kept: the generated image's bytes stay in the rollout"});
                    ("image_generation", json!({"revised_prompt": prompt}), result)
                };
                let call_part = json!({"type": "tool_call", "id": call, "name": name, "args": args});
                let result_part = json!({"type": "tool_result", "id": call, "name": name, "result": result, "is_error": status == "failed"});
                self.turns.event(out, line, &session, "model", ts, &id, vec![call_part]);
                self.turns.event(out, line, &session, "tool", ts, &format!("{id}/result"), vec![result_part]);
            }
            "function_call_output" | "custom_tool_call_output" | "tool_search_output" => {
                let call = call_id(payload, self.source, line)?;
                let name = self.tool_names.get(&call).cloned().unwrap_or_else(|| "unknown".to_owned());
                let result = match (kind, payload.get("output")) {
                    ("tool_search_output", _) => Value::Object(payload.clone()),
                    (_, Some(Value::String(text))) => json_or_string(text),
                    (_, Some(other)) => other.clone(),
                    (_, None) => return Err(error(self.source, line, Some("payload.output"), "is missing")),
                };
                let failed = self.failed.remove(&call).unwrap_or(false) || output_failed(&result);
                if !self.tool_names.contains_key(&call) {
                    // No call in the rollout made it: its content is kept as the host's note.
                    out.skip(ORPHANED_OUTPUT);
                    let content = match &result {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    let error = if failed { " (an error)" } else { "" };
                    let text = format!(
                        "Codex recorded an output{error} for tool call {call}, whose call is not in the rollout:\n{content}"
                    );
                    self.turns.event_by(
                        out,
                        line,
                        &session,
                        "system",
                        "host",
                        ts,
                        &id,
                        vec![text_part(&text)],
                    );
                    return Ok(());
                }
                let part = json!({"type": "tool_result", "id": call, "name": name, "result": result, "is_error": failed});
                self.results.insert(call, out.len());
                self.turns.event(out, line, &session, "tool", ts, &id, vec![part]);
            }
            "ghost_snapshot" | "compaction" | "compaction_summary" => {
                out.skip(format!("response_item {kind}"))
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
        match role {
            "user" => self.user_input(&text, From::Item, session, id, line, ts, out),
            "assistant" => {
                self.model_texts(Said::Assistant, vec![text], From::Item, session, id, line, ts, out)
            }
            "developer" | "system" if !text.trim().is_empty() => {
                self.turns.event_by(out, line, session, "system", "host", ts, id, vec![text_part(&text)]);
            }
            "developer" | "system" => out.skip(format!("response_item {role} message (empty)")),
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
        let text = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        match kind {
            "task_started" | "turn_started" => {
                let session = self.session(line)?;
                let name = payload.get("turn_id").and_then(Value::as_str).filter(|t| !t.is_empty());
                self.start_turn(&session, name, line, ts, out);
            }
            "task_complete" | "turn_complete" | "turn_aborted" => {
                let session = self.session(line)?;
                if kind == "turn_aborted" {
                    self.turns.set_status("aborted");
                }
                self.turns.end(out, line, &session, ts);
            }
            "user_message" => {
                let session = self.session(line)?;
                let message = text("message");
                let id = format!("{session}/L{line}");
                self.user_input(&message, From::Event, &session, &id, line, ts, out);
            }
            "agent_message" | "agent_reasoning" | "agent_reasoning_raw_content" => {
                let session = self.session(line)?;
                let (said, key) = match kind {
                    "agent_message" => (Said::Assistant, "message"),
                    _ => (Said::Thinking, "text"),
                };
                let id = format!("{session}/L{line}");
                self.model_texts(said, vec![text(key)], From::Event, &session, &id, line, ts, out);
            }
            "exec_command_end" | "patch_apply_end" | "mcp_tool_call_end" => {
                let call = str_field(payload, "call_id", self.source, line, "payload")?.to_owned();
                let failed = match kind {
                    "exec_command_end" => {
                        payload.get("exit_code").and_then(Value::as_i64).is_some_and(|c| c != 0)
                    }
                    "patch_apply_end" => payload.get("success").and_then(Value::as_bool) == Some(false),
                    _ => mcp_failed(payload.get("result")),
                };
                self.flag(&call, failed, out);
                out.skip(format!("event_msg {kind} (its exit status read)"));
            }
            "thread_name_updated" => {
                let session = self.session(line)?;
                let name = payload.get("thread_name").or_else(|| payload.get("name"));
                match name.and_then(Value::as_str) {
                    Some(title) if !title.trim().is_empty() => out.title(line, &session, title, ts),
                    _ => out.skip("event_msg thread_name_updated (no name)"),
                }
            }
            "error" => {
                let session = self.session(line)?;
                let message = text("message");
                let id = format!("{session}/L{line}");
                let parts = vec![text_part(&format!("Codex error: {message}"))];
                self.turns.event_by(out, line, &session, "system", "host", ts, &id, parts);
            }
            other => out.skip(format!("event_msg {other}")),
        }
        Ok(())
    }

    /// Starts a turn the rollout marks.
    fn start_turn(
        &mut self,
        session: &str,
        name: Option<&str>,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) {
        self.turns.start(out, line, session, name, ts);
    }

    /// Records that call `call` failed (or not), on its result when that is already kept.
    fn flag(&mut self, call: &str, failed: bool, out: &mut Converted) {
        if !failed {
            return;
        }
        match self.results.get(call).and_then(|at| out.line_mut(*at)) {
            Some(value) => value["parts"][0]["is_error"] = json!(true),
            None => {
                self.failed.insert(call.to_owned(), true);
            }
        }
    }

    fn turn_context(
        &mut self,
        payload: &Map<String, Value>,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let session = self.session(line)?;
        match payload.get("turn_id").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            Some(turn) if self.turns.current() != Some(turn) => {
                self.start_turn(&session, Some(turn), line, ts, out);
                out.skip("turn_context (its turn kept; settings skipped)");
            }
            _ => out.skip("turn_context (settings)"),
        }
        Ok(())
    }

    fn compacted(
        &mut self,
        payload: &Map<String, Value>,
        line: usize,
        ts: Option<u64>,
        out: &mut Converted,
    ) -> Result<(), TranscriptError> {
        let session = self.session(line)?;
        let message = payload.get("message").and_then(Value::as_str).unwrap_or_default();
        let id = format!("{session}/L{line}");
        let text = if message.trim().is_empty() {
            "Codex compacted the conversation.".to_owned()
        } else {
            format!("Codex compacted the conversation. Its summary:\n{message}")
        };
        self.turns.event_by(out, line, &session, "system", "host", ts, &id, vec![text_part(&text)]);
        Ok(())
    }
}

/// Whether two texts of one kind are an item and its echo: the same text, or (model text and
/// thinking, whose echoes some versions shorten) one is the other's beginning, a trailing `...`
/// aside.
fn echoes(said: Said, a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return true;
    }
    if said == Said::User {
        return false;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let short = short.trim_end_matches("...").trim_end_matches('…').trim_end();
    !short.is_empty() && long.starts_with(short)
}

/// A tool call's id: `call_id`, or (chat-completions `local_shell_call`s) `id`.
fn call_id(payload: &Map<String, Value>, source: &str, line: usize) -> Result<String, TranscriptError> {
    match (payload.get("call_id"), payload.get("id")) {
        (Some(Value::String(call)), _) if !call.is_empty() => Ok(call.clone()),
        (_, Some(Value::String(id))) if !id.is_empty() => Ok(id.clone()),
        _ => Err(error(source, line, Some("payload.call_id"), "is missing")),
    }
}

/// Whether a tool's output says it failed: the old `{"output", "metadata": {"exit_code"}}` JSON,
/// a `success: false` payload, or a text output whose header has a non-zero exit code.
fn output_failed(result: &Value) -> bool {
    if let Some(code) = result.pointer("/metadata/exit_code").and_then(Value::as_i64) {
        return code != 0;
    }
    if result.get("success").and_then(Value::as_bool) == Some(false) {
        return true;
    }
    let text = match result {
        Value::String(text) => text.as_str(),
        _ => match result.get("content").or_else(|| result.get("output")) {
            Some(Value::String(text)) => text.as_str(),
            _ => return false,
        },
    };
    text_exit_code(text).is_some_and(|code| code != 0)
}

/// The exit code a tool's text output states in its header (`Exit code: 1`, `Process exited
/// with code 1`), read only above the `Output:` line.
fn text_exit_code(text: &str) -> Option<i64> {
    for line in text.lines().take(OUTPUT_HEADER_LINES_MAX) {
        let line = line.trim();
        if line == "Output:" {
            return None;
        }
        let code = line.strip_prefix("Exit code:").or_else(|| line.strip_prefix("Process exited with code"));
        if let Some(code) = code.and_then(|c| c.trim().parse::<i64>().ok()) {
            return Some(code);
        }
    }
    None
}

/// Whether an `mcp_tool_call_end` result is an error: `{"Err": ...}`, or `{"Ok": {"isError": true}}`.
fn mcp_failed(result: Option<&Value>) -> bool {
    let Some(result) = result else { return false };
    if result.get("Err").is_some() {
        return true;
    }
    let ok = result.get("Ok").unwrap_or(result);
    ok.get("isError").or_else(|| ok.get("is_error")).and_then(Value::as_bool) == Some(true)
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

/// The readable parts of a reasoning item: its summary texts, else its `reasoning_text` content.
fn reasoning_texts(payload: &Map<String, Value>) -> Vec<String> {
    let texts = |key: &str| -> Vec<String> {
        payload
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .filter(|t| !t.trim().is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let summary = texts("summary");
    if summary.is_empty() { texts("content") } else { summary }
}
