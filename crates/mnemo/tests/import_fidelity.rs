//! Nothing of a source transcript is lost: for each fixture (written ones of every item type, and
//! the real Claude Code sessions under `tests/fixtures/real/`), the user messages, assistant
//! texts, tool calls with their arguments, tool results with their error flags and thinking are
//! counted from the source file line by line, by code written apart from the importers, and the
//! same multiset must be in the log of a store the file was imported into.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mnemo::records::{Content, Position, Role, RuntimeEvent};
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};
use serde_json::Value;

/// One thing a transcript says, as both sides count it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Said {
    User(String),
    Assistant(String),
    Thinking(String),
    /// Tool name and arguments (as canonical JSON).
    Call(String, String),
    /// Tool-call id and error flag.
    Result(String, bool),
}

type Counts = BTreeMap<Said, usize>;

fn add(counts: &mut Counts, said: Said) {
    *counts.entry(said).or_insert(0) += 1;
}

fn written(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import").join(name)
}

/// The real transcripts: `tests/fixtures/real/` from the repository root, or where
/// `MNEMO_REAL_FIXTURES` points. Missing, the test fails: it is never skipped.
fn real(relative: &str) -> PathBuf {
    let base = std::env::var_os("MNEMO_REAL_FIXTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real"),
        PathBuf::from,
    );
    let path = base.join(relative);
    assert!(path.exists(), "{} is missing (set MNEMO_REAL_FIXTURES to the real fixtures)", path.display());
    path
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// What the log holds after the file is imported into a new store, counted from its records.
fn from_log(path: &Path, format: ImportFormat) -> Counts {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import(&std::fs::read(path).unwrap(), &path.display().to_string(), format).unwrap();
    let mut counts = Counts::new();
    for entry in mnemo.log_entries(Position::FIRST, usize::MAX).unwrap() {
        if entry.kind != "runtime_event" {
            continue;
        }
        let event: RuntimeEvent = serde_json::from_value(entry.record).unwrap();
        let said = match (&event.content, event.role) {
            (Some(Content::Text(text)), Role::User) => Said::User(text.text.clone()),
            (Some(Content::Text(text)), Role::Model) => Said::Assistant(text.text.clone()),
            (Some(Content::Thinking(thinking)), _) => Said::Thinking(thinking.text.clone()),
            (Some(Content::FunctionCall(call)), _) => {
                Said::Call(call.name.clone(), serde_json::to_string(&call.args).unwrap())
            }
            (Some(Content::FunctionResponse(result)), _) => {
                Said::Result(result.id.to_string(), result.is_error == Some(true))
            }
            _ => continue,
        };
        add(&mut counts, said);
    }
    counts
}

fn canonical(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

fn assert_same(path: &Path, source: &Counts, log: &Counts) {
    let total: usize = source.values().sum();
    assert!(total > 0, "{}: the source count found nothing", path.display());
    for (said, n) in source {
        assert_eq!(log.get(said), Some(n), "{}: {said:?} is {n} times in the source", path.display());
    }
    for (said, n) in log {
        assert_eq!(source.get(said), Some(n), "{}: {said:?} is {n} times in the log", path.display());
    }
    eprintln!("{}: {total} items, each in the log as often as in the source", path.display());
}

// ---- Codex ----------------------------------------------------------------------------------

/// Text Codex puts in user-role messages itself.
fn codex_injected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('<') || t.starts_with("# AGENTS.md")
}

/// The exit code in the header of a tool's text output (above `Output:`).
fn header_exit_code(text: &str) -> Option<i64> {
    let header = text.split("\nOutput:").next().unwrap_or_default();
    header.lines().find_map(|line| {
        let rest =
            line.strip_prefix("Exit code: ").or_else(|| line.strip_prefix("Process exited with code "))?;
        rest.trim().parse().ok()
    })
}

fn codex_source(path: &Path) -> Counts {
    // Enveloped lines as they are; bare-layout response items wrapped as the envelope would.
    let lines: Vec<Value> = lines(path)
        .into_iter()
        .filter_map(|line| match (line.get("payload"), line.get("type")) {
            (Some(_), _) => Some(line),
            (None, Some(_)) => Some(serde_json::json!({"type": "response_item", "payload": line})),
            (None, None) => None,
        })
        .collect();
    let mut counts = Counts::new();
    // Items and their event echoes: each text counts as often as the more frequent of the two.
    let mut items: BTreeMap<Said, usize> = BTreeMap::new();
    let mut events: BTreeMap<Said, usize> = BTreeMap::new();
    let mut failed_by_event: BTreeMap<String, bool> = BTreeMap::new();
    for line in &lines {
        let p = &line["payload"];
        if line["type"] == "event_msg" {
            let call = p["call_id"].as_str().unwrap_or_default().to_owned();
            match p["type"].as_str().unwrap() {
                "exec_command_end" => {
                    failed_by_event.insert(call, p["exit_code"].as_i64().unwrap() != 0);
                }
                "patch_apply_end" => {
                    failed_by_event.insert(call, !p["success"].as_bool().unwrap());
                }
                "mcp_tool_call_end" => {
                    let result = &p["result"];
                    let failed = result.get("Err").is_some() || result["Ok"]["isError"] == true;
                    failed_by_event.insert(call, failed);
                }
                _ => {}
            }
        }
    }
    for line in &lines {
        let p = &line["payload"];
        match (line["type"].as_str().unwrap(), p["type"].as_str().unwrap_or_default()) {
            ("response_item", "message") => {
                let text: Vec<&str> =
                    p["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect();
                let text = text.join("\n");
                match p["role"].as_str().unwrap() {
                    "user" if !codex_injected(&text) => add(&mut items, Said::User(text)),
                    "assistant" => add(&mut items, Said::Assistant(text)),
                    _ => {}
                }
            }
            ("response_item", "reasoning") => {
                // Its summaries; without any, its raw reasoning text; encrypted content is unreadable.
                let summaries = p["summary"].as_array().unwrap();
                let texts = if summaries.is_empty() {
                    p["content"].as_array().cloned().unwrap_or_default()
                } else {
                    summaries.clone()
                };
                for text in texts {
                    add(&mut items, Said::Thinking(text["text"].as_str().unwrap().to_owned()));
                }
            }
            ("event_msg", "user_message") => {
                let text = p["message"].as_str().unwrap().to_owned();
                if !codex_injected(&text) {
                    add(&mut events, Said::User(text));
                }
            }
            ("event_msg", "agent_message") => {
                add(&mut events, Said::Assistant(p["message"].as_str().unwrap().to_owned()));
            }
            ("event_msg", "agent_reasoning" | "agent_reasoning_raw_content") => {
                add(&mut events, Said::Thinking(p["text"].as_str().unwrap().to_owned()));
            }
            ("response_item", "function_call") => {
                let args: Value = serde_json::from_str(p["arguments"].as_str().unwrap()).unwrap();
                add(&mut counts, Said::Call(p["name"].as_str().unwrap().to_owned(), canonical(&args)));
            }
            ("response_item", "custom_tool_call") => {
                add(&mut counts, Said::Call(p["name"].as_str().unwrap().to_owned(), canonical(&p["input"])));
            }
            ("response_item", "local_shell_call") => {
                add(&mut counts, Said::Call("local_shell".to_owned(), canonical(&p["action"])));
            }
            ("response_item", "tool_search_call") => {
                add(&mut counts, Said::Call("tool_search".to_owned(), canonical(&p["arguments"])));
            }
            ("response_item", "tool_search_output") => {
                add(&mut counts, Said::Result(p["call_id"].as_str().unwrap().to_owned(), false));
            }
            ("response_item", "image_generation_call") => {
                let args = serde_json::json!({"revised_prompt": p["revised_prompt"]});
                add(&mut counts, Said::Call("image_generation".to_owned(), canonical(&args)));
                let id = p["id"].as_str().unwrap_or_default().to_owned();
                add(&mut counts, Said::Result(id, p["status"] == "failed"));
            }
            ("response_item", "web_search_call") => {
                add(&mut counts, Said::Call("web_search".to_owned(), canonical(&p["action"])));
                add(&mut counts, Said::Result(String::new(), false));
            }
            ("response_item", "function_call_output" | "custom_tool_call_output") => {
                let call = p["call_id"].as_str().unwrap().to_owned();
                let output = p["output"].as_str().unwrap();
                let code = match serde_json::from_str::<Value>(output) {
                    Ok(Value::Object(json)) => json["metadata"]["exit_code"].as_i64(),
                    _ => header_exit_code(output),
                };
                let failed = code.is_some_and(|c| c != 0) || failed_by_event.get(&call) == Some(&true);
                add(&mut counts, Said::Result(call, failed));
            }
            _ => {}
        }
    }
    let events = unshortened(&items, events);
    for said in items.keys().chain(events.keys()) {
        let n = items.get(said).copied().unwrap_or(0).max(events.get(said).copied().unwrap_or(0));
        counts.insert(said.clone(), n);
    }
    counts
}

/// Some Codex versions shorten an event's echo of an item: the beginning of the item's text (its
/// heading), or that and `...`. Such an event counts as the item's echo.
fn unshortened(items: &Counts, events: Counts) -> Counts {
    let mut out = Counts::new();
    for (said, n) in events {
        let full = match &said {
            Said::Assistant(text) | Said::Thinking(text) => {
                let trimmed = text.trim_end();
                let prefix =
                    trimmed.strip_suffix("...").or_else(|| trimmed.strip_suffix('…')).or(Some(trimmed));
                prefix.filter(|p| !p.trim().is_empty()).and_then(|prefix| {
                    items.keys().find(|item| {
                        std::mem::discriminant(*item) == std::mem::discriminant(&said)
                            && matches!(item, Said::Assistant(t) | Said::Thinking(t)
                                if t.len() > prefix.len() && t.starts_with(prefix.trim_end()))
                    })
                })
            }
            _ => None,
        };
        *out.entry(full.cloned().unwrap_or(said)).or_insert(0) += n;
    }
    out
}

/// The log's web-search results have generated ids; they are counted by error flag alone.
fn without_search_ids(mut log: Counts) -> Counts {
    let keys: Vec<Said> = log.keys().cloned().collect();
    for said in keys {
        if let Said::Result(id, failed) = &said
            && id.contains("/L")
        {
            let n = log.remove(&said).unwrap();
            *log.entry(Said::Result(String::new(), *failed)).or_insert(0) += n;
        }
    }
    log
}

#[test]
fn codex_rollouts_lose_nothing_old_or_new_layout() {
    for name in [
        "codex-rollout.jsonl",
        "codex-rollout-0.128.jsonl",
        "codex-rollout-legacy.jsonl",
        "codex-rollout-bare-2025.jsonl",
        "codex-rollout-subagent.jsonl",
    ] {
        let path = written(name);
        let log = without_search_ids(from_log(&path, ImportFormat::Codex));
        assert_same(&path, &codex_source(&path), &log);
    }
}

// ---- Claude Code ----------------------------------------------------------------------------

/// Text Claude Code puts in user-role lines itself.
fn claude_injected(line: &Value, text: &str) -> bool {
    let t = text.trim_start();
    line["isMeta"] == true
        || line["isCompactSummary"] == true
        || t.starts_with("Caveat:")
        || t.starts_with("[Request interrupted by user")
        || ["<command-", "<local-command-", "<bash-"].iter().any(|p| t.starts_with(p))
}

/// The placeholder for an image block of `bytes` of base64, as the import summary's docs state it.
fn image_placeholder(media_type: &str, bytes: usize) -> String {
    let digits = bytes.to_string();
    let grouped: Vec<String> =
        digits.as_bytes().rchunks(3).rev().map(|chunk| String::from_utf8(chunk.to_vec()).unwrap()).collect();
    format!("[image: {media_type}, {} bytes of base64 not kept]", grouped.join(","))
}

fn claude_source(paths: &[PathBuf]) -> Counts {
    let mut counts = Counts::new();
    for path in paths {
        for line in lines(path) {
            let content = &line["message"]["content"];
            match line["type"].as_str().unwrap() {
                "user" => {
                    if let Some(text) = content.as_str() {
                        if !claude_injected(&line, text) {
                            add(&mut counts, Said::User(text.to_owned()));
                        }
                        continue;
                    }
                    let texts: Vec<&Value> = content.as_array().unwrap().iter().collect();
                    let only_interruption = texts.len() == 1
                        && texts[0]["text"].as_str().is_some_and(|t| t.starts_with("[Request interrupted"));
                    for block in texts {
                        match block["type"].as_str().unwrap() {
                            "text" if !only_interruption => {
                                let text = block["text"].as_str().unwrap();
                                if !claude_injected(&line, text) {
                                    add(&mut counts, Said::User(text.to_owned()));
                                }
                            }
                            // A pasted image: the text that stands for it, its media type and
                            // the size of its base64 data.
                            "image" => {
                                let source = &block["source"];
                                let bytes = source["data"].as_str().unwrap().len();
                                let media_type = source["media_type"].as_str().unwrap();
                                add(&mut counts, Said::User(image_placeholder(media_type, bytes)));
                            }
                            "tool_result" => add(
                                &mut counts,
                                Said::Result(
                                    block["tool_use_id"].as_str().unwrap().to_owned(),
                                    block["is_error"] == true,
                                ),
                            ),
                            _ => {}
                        }
                    }
                }
                "assistant" => {
                    for block in content.as_array().unwrap() {
                        match block["type"].as_str().unwrap() {
                            "text" => {
                                add(&mut counts, Said::Assistant(block["text"].as_str().unwrap().to_owned()))
                            }
                            "thinking" => add(
                                &mut counts,
                                Said::Thinking(block["thinking"].as_str().unwrap().to_owned()),
                            ),
                            "tool_use" => add(
                                &mut counts,
                                Said::Call(
                                    block["name"].as_str().unwrap().to_owned(),
                                    canonical(&block["input"]),
                                ),
                            ),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
    counts
}

fn claude_log(paths: &[PathBuf]) -> Counts {
    let mut counts = Counts::new();
    for path in paths {
        for (said, n) in from_log(path, ImportFormat::ClaudeCode) {
            *counts.entry(said).or_insert(0) += n;
        }
    }
    counts
}

#[test]
fn claude_code_real_sessions_and_sub_agents_lose_nothing() {
    let sets: Vec<Vec<PathBuf>> = vec![
        vec![real("claude-code/incremental-simple/turn-1.jsonl")],
        vec![real("claude-code/incremental-simple/turn-2.jsonl")],
        vec![
            real("claude-code/incremental-subagents/turn-1.jsonl"),
            real("claude-code/incremental-subagents/turn-1/subagents/agent-a485154.jsonl"),
        ],
        vec![
            real("claude-code/incremental-subagents/turn-2.jsonl"),
            real("claude-code/incremental-subagents/turn-2/subagents/agent-a485154.jsonl"),
        ],
        vec![
            real("claude-code/small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"),
            real("claude-code/small-with-subagents/agent-36541525.jsonl"),
            real("claude-code/small-with-subagents/agent-50243ee8.jsonl"),
        ],
    ];
    for paths in sets {
        assert_same(&paths[0], &claude_source(&paths), &claude_log(&paths));
    }
}

#[test]
fn claude_code_written_sessions_lose_nothing() {
    for name in ["claude-code.jsonl", "claude-code-2.0-compaction.jsonl", "claude-code-2.1.jsonl"] {
        let paths = vec![written(name)];
        assert_same(&paths[0], &claude_source(&paths), &claude_log(&paths));
    }
    let persisted = vec![
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-code-persisted/5d2f8e31-7c4a-4b9e-9f03-2a6c1d8e4b70.jsonl"),
    ];
    assert_same(&persisted[0], &claude_source(&persisted), &claude_log(&persisted));
}

// ---- SWE-agent ------------------------------------------------------------------------------

fn swe_agent_source(path: &Path) -> Counts {
    let document: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let text = |content: &Value| match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    };
    let mut counts = Counts::new();
    let mut task_seen = false;
    let mut open_actions = 0;
    for item in document["history"].as_array().unwrap() {
        if item["is_demo"] == true || item["message_type"] == "demonstration" {
            continue;
        }
        match item["role"].as_str().unwrap() {
            "user" if !task_seen => {
                task_seen = true;
                add(&mut counts, Said::User(text(&item["content"])));
            }
            "user" if open_actions > 0 => {
                open_actions -= 1;
                add(&mut counts, Said::Result(String::new(), false));
            }
            "tool" => {
                for _ in item["tool_call_ids"].as_array().unwrap() {
                    add(&mut counts, Said::Result(String::new(), false));
                }
            }
            "assistant" => {
                for block in item["thinking_blocks"].as_array().into_iter().flatten() {
                    add(&mut counts, Said::Thinking(block["thinking"].as_str().unwrap().to_owned()));
                }
                let calls = item["tool_calls"].as_array().filter(|c| !c.is_empty());
                let said = match calls {
                    Some(_) => text(&item["content"]),
                    None => match item["thought"].as_str() {
                        Some(thought) if !thought.trim().is_empty() => thought.to_owned(),
                        _ => text(&item["content"]),
                    },
                };
                if !said.trim().is_empty() {
                    add(&mut counts, Said::Assistant(said));
                }
                match calls {
                    Some(calls) => {
                        for call in calls {
                            let args: Value =
                                serde_json::from_str(call["function"]["arguments"].as_str().unwrap())
                                    .unwrap();
                            let name = call["function"]["name"].as_str().unwrap().to_owned();
                            add(&mut counts, Said::Call(name, canonical(&args)));
                        }
                    }
                    None => {
                        let action = item["action"].as_str().unwrap_or_default();
                        if !action.trim().is_empty() {
                            let name = action.split_whitespace().next().unwrap().to_owned();
                            add(
                                &mut counts,
                                Said::Call(name, canonical(&serde_json::json!({"command": action}))),
                            );
                            open_actions = 1;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    counts
}

#[test]
fn swe_agent_trajectories_lose_nothing_in_either_layout() {
    for name in ["swe-agent-function-calling.traj", "swe-agent-thought-action.traj"] {
        let path = written(name);
        let mut log = Counts::new();
        for (said, n) in from_log(&path, ImportFormat::SweAgent) {
            let said = match said {
                Said::Result(_, failed) => Said::Result(String::new(), failed),
                other => other,
            };
            *log.entry(said).or_insert(0) += n;
        }
        assert_same(&path, &swe_agent_source(&path), &log);
    }
}

// ---- OpenAI chat-completions ----------------------------------------------------------------

/// A chat message's text: a string, or its text parts joined by newlines (images and audio are
/// not text).
fn chat_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p["type"].as_str() {
                Some("text" | "input_text" | "output_text") => p["text"].as_str(),
                Some("refusal") => p["refusal"].as_str(),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn chat_source(path: &Path) -> Counts {
    let text = std::fs::read_to_string(path).unwrap();
    let conversations: Vec<Value> = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(messages)) => vec![Value::Array(messages)],
        Ok(body @ Value::Object(_)) => vec![body["messages"].clone()],
        _ => lines(path).into_iter().map(|line| line["messages"].clone()).collect(),
    };
    let mut counts = Counts::new();
    for messages in conversations {
        for message in messages.as_array().unwrap() {
            match message["role"].as_str().unwrap() {
                "user" => {
                    let text = chat_text(&message["content"]);
                    if !text.is_empty() {
                        add(&mut counts, Said::User(text));
                    }
                }
                "assistant" => {
                    let reasoning = message.get("reasoning_content").or_else(|| message.get("reasoning"));
                    if let Some(reasoning) = reasoning.and_then(Value::as_str).filter(|r| !r.is_empty()) {
                        add(&mut counts, Said::Thinking(reasoning.to_owned()));
                    }
                    let text = chat_text(&message["content"]);
                    if !text.is_empty() {
                        add(&mut counts, Said::Assistant(text));
                    }
                    for call in message["tool_calls"].as_array().into_iter().flatten() {
                        let arguments = call["function"]["arguments"].as_str().unwrap();
                        let args = serde_json::from_str::<Value>(arguments)
                            .unwrap_or_else(|_| Value::String(arguments.to_owned()));
                        let name = call["function"]["name"].as_str().unwrap().to_owned();
                        add(&mut counts, Said::Call(name, canonical(&args)));
                    }
                }
                // The chat format has no error flag on a tool message.
                "tool" => add(
                    &mut counts,
                    Said::Result(message["tool_call_id"].as_str().unwrap().to_owned(), false),
                ),
                _ => {}
            }
        }
    }
    counts
}

#[test]
fn chat_completions_documents_and_datasets_lose_nothing() {
    for name in ["chat-completions.json", "chat-dataset.jsonl"] {
        let path = written(name);
        assert_same(&path, &chat_source(&path), &from_log(&path, ImportFormat::OpenaiChat));
    }
}

// ---- RuntimeEvent lines (maka) --------------------------------------------------------------

fn runtime_event_source(path: &Path) -> Counts {
    let mut counts = Counts::new();
    for line in lines(path) {
        if line.get("invocationId").is_none() || line.get("turnId").is_none() {
            continue;
        }
        let content = &line["content"];
        let said = match (content["kind"].as_str(), line["role"].as_str()) {
            (Some("text"), Some("user")) => Said::User(content["text"].as_str().unwrap().to_owned()),
            (Some("text"), Some("model")) => Said::Assistant(content["text"].as_str().unwrap().to_owned()),
            (Some("thinking"), _) => Said::Thinking(content["text"].as_str().unwrap().to_owned()),
            (Some("function_call"), _) => {
                Said::Call(content["name"].as_str().unwrap().to_owned(), canonical(&content["args"]))
            }
            (Some("function_response"), _) => {
                Said::Result(content["id"].as_str().unwrap().to_owned(), content["isError"] == true)
            }
            _ => continue,
        };
        add(&mut counts, said);
    }
    counts
}

#[test]
fn runtime_event_lines_lose_nothing() {
    let path = written("maka-events.jsonl");
    assert_same(&path, &runtime_event_source(&path), &from_log(&path, ImportFormat::Maka));
}
