//! The context-quality workload: for each session of a corpus and each window, what the next
//! request would receive (`prepare_history`: replay, compaction, fitting) — whether it fits the
//! history budget (or the typed reason it cannot), its size, and its *fact retention*: the share of
//! the session's listed key facts (the goal, each user constraint, each file changed, each
//! unresolved error) found in the assembled context.
//!
//! The corpus: the real Claude Code sessions under `tests/fixtures/real/` (read in place, never
//! copied; their fact lists are in `context_quality_facts.json`), and long single-request sessions
//! this module writes, seeded, in the exact line format of Claude Code and Codex files (one request,
//! 100–300 tool calls, results of 1–60 KB), whose facts are known by construction.

use std::path::{Path, PathBuf};

use mnemo::compaction::{CompactOptions, ContextOptions, HistoryItem};
use mnemo::log::Durability;
use mnemo::records::Content;
use mnemo::records::SessionId;
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::harness::BenchError;
use crate::workload::Rng;

/// The windows every session is assembled for.
pub const WINDOWS: [u64; 3] = [8_192, 32_768, 131_072];

/// The fact lists of the real fixtures, by path under the fixtures directory.
pub const REAL_FACTS: &str = include_str!("context_quality_facts.json");

/// What a fact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// The user's goal.
    Goal,
    /// A constraint or preference the user stated.
    Constraint,
    /// A file the session changed.
    FileChanged,
    /// An error still open at the end.
    OpenError,
}

/// One key fact: text that must appear (case and whitespace aside) in the assembled context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Its kind.
    pub kind: FactKind,
    /// Its text.
    pub text: String,
}

/// A session of the corpus.
#[derive(Debug, Clone)]
pub struct CorpusSession {
    /// Its name in reports.
    pub name: String,
    /// The transcript file's bytes.
    pub bytes: Vec<u8>,
    /// The session to assemble (a file may also hold sub-agent sessions).
    pub session: String,
    /// Its key facts.
    pub facts: Vec<Fact>,
}

#[derive(Debug, Deserialize)]
struct RealEntry {
    file: String,
    session: String,
    facts: Vec<Fact>,
}

/// The real fixtures under `dir` with their fact lists. A missing file is an error naming it.
pub fn real_corpus(dir: &Path) -> Result<Vec<CorpusSession>, BenchError> {
    let entries: Vec<RealEntry> = serde_json::from_str(REAL_FACTS)
        .map_err(|e| mnemo::Error::InvalidInput(format!("context_quality_facts.json: {e}")))?;
    entries
        .into_iter()
        .map(|entry| {
            let path = dir.join(&entry.file);
            let bytes = std::fs::read(&path)
                .map_err(crate::harness::io(format!("cannot read fixture {}", path.display())))?;
            Ok(CorpusSession { name: entry.file, bytes, session: entry.session, facts: entry.facts })
        })
        .collect()
}

/// The two generated long sessions (Claude Code and Codex format) for `seed`.
pub fn generated_corpus(seed: u64) -> Vec<CorpusSession> {
    vec![long_session(Format::ClaudeCode, seed), long_session(Format::Codex, seed.wrapping_add(1))]
}

/// The line format a generated session is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Claude Code's session file (`~/.claude/projects/*/<session>.jsonl`).
    ClaudeCode,
    /// Codex's rollout file (`~/.codex/sessions/…/rollout-*.jsonl`).
    Codex,
}

/// Fewest and most tool calls of a generated session.
pub const CALLS_MIN: u64 = 100;
/// See [`CALLS_MIN`].
pub const CALLS_MAX: u64 = 300;
/// Smallest and largest tool result of a generated session, in bytes.
pub const RESULT_BYTES_MIN: u64 = 1_024;
/// See [`RESULT_BYTES_MIN`].
pub const RESULT_BYTES_MAX: u64 = 60 * 1_024;

const MODULES: [&str; 8] =
    ["exporter", "ledger", "invoice", "currency", "schedule", "retry", "report", "audit"];

fn code_file(rng: &mut Rng, path: &str, bytes: u64) -> String {
    let mut out = String::new();
    let mut line = 1;
    while (out.len() as u64) < bytes {
        let body = match rng.below(5) {
            0 => format!(
                "pub fn {}_{}(input: &[u8]) -> Result<usize, Error> {{",
                MODULES[rng.below(8) as usize],
                line
            ),
            1 => "    let mut total = 0usize;".to_owned(),
            2 => format!("    // {path}: keeps the running total in a map keyed by account"),
            3 => "    Ok(total)".to_owned(),
            _ => "}".to_owned(),
        };
        out.push_str(&format!("{line:>6}\t{body}\n"));
        line += 1;
    }
    out
}

fn test_log(rng: &mut Rng, bytes: u64, failure: Option<&str>) -> String {
    let mut out = String::from("   Compiling billing v0.4.0 (/home/lena/src/billing)\n");
    let mut n = 0;
    while (out.len() as u64) < bytes {
        out.push_str(&format!("test {}::case_{n} ... ok\n", MODULES[rng.below(8) as usize]));
        n += 1;
    }
    match failure {
        Some(error) => out.push_str(&format!("{error}\n  --> src/export/stream.rs:88:14\nerror: could not compile `billing` (lib) due to 1 previous error\n")),
        None => out.push_str(&format!("test result: ok. {n} passed; 0 failed; 0 ignored\n")),
    }
    out
}

/// One step of a generated session: a call and its result.
struct Step {
    name: &'static str,
    input: Value,
    output: String,
    error: bool,
}

/// The request, constraints, files and error a generated session is about (its facts).
const GOAL: &str = "Port the billing exporter to the streaming writer in src/export/stream.rs";
const CONSTRAINTS: [&str; 3] = [
    "Performance is crucial: never buffer a whole invoice file in memory.",
    "Don't commit until the final step.",
    "Keep the public API of src/export/mod.rs unchanged.",
];
const OPEN_ERROR: &str = "error[E0599]: no method named `flush_all` found for struct `StreamWriter`";

fn steps(rng: &mut Rng, format: Format) -> (Vec<Step>, Vec<String>) {
    let calls = CALLS_MIN + rng.below(CALLS_MAX - CALLS_MIN + 1);
    let changed: Vec<String> = (0..6)
        .map(|i| format!("src/export/{}_{i}.rs", MODULES[rng.below(8) as usize]))
        .chain(["src/export/stream.rs".to_owned()])
        .collect();
    let mut out = Vec::new();
    for index in 0..calls {
        let bytes = RESULT_BYTES_MIN + rng.below(RESULT_BYTES_MAX - RESULT_BYTES_MIN);
        let last = index + 1 == calls;
        let step = if last {
            let command = "cargo test -p billing export";
            let log = test_log(rng, bytes / 4, Some(OPEN_ERROR));
            shell(format, command, log, 101)
        } else {
            match rng.below(6) {
                0 | 1 => {
                    let path = format!(
                        "src/{}/{}.rs",
                        MODULES[rng.below(8) as usize],
                        MODULES[rng.below(8) as usize]
                    );
                    let text = code_file(rng, &path, bytes);
                    read(format, &path, text)
                }
                2 => {
                    let path = changed[rng.below(changed.len() as u64) as usize].clone();
                    edit(format, &path)
                }
                3 => {
                    let command = format!("cargo test -p billing {}", MODULES[rng.below(8) as usize]);
                    let log = test_log(rng, bytes / 2, None);
                    shell(format, &command, log, 0)
                }
                _ => {
                    let command = format!("rg -n \"{}\" src", MODULES[rng.below(8) as usize]);
                    let text = code_file(rng, "src/lib.rs", bytes / 3);
                    shell(format, &command, text, 0)
                }
            }
        };
        out.push(step);
    }
    // Every changed file is edited at least once.
    for path in &changed {
        out.insert(out.len() - 1, edit(format, path));
    }
    (out, changed)
}

fn read(format: Format, path: &str, text: String) -> Step {
    match format {
        Format::ClaudeCode => Step {
            name: "Read",
            input: json!({"file_path": format!("/home/lena/src/billing/{path}")}),
            output: text,
            error: false,
        },
        Format::Codex => Step {
            name: "exec_command",
            input: json!({"cmd": format!("sed -n '1,400p' {path}"), "workdir": "/home/lena/src/billing"}),
            output: codex_output(&text, 0),
            error: false,
        },
    }
}

fn edit(format: Format, path: &str) -> Step {
    match format {
        Format::ClaudeCode => Step {
            name: "Edit",
            input: json!({
                "file_path": format!("/home/lena/src/billing/{path}"),
                "old_string": "    let mut total = 0usize;",
                "new_string": "    let mut total = 0usize; // streamed",
            }),
            output: format!("The file /home/lena/src/billing/{path} has been updated."),
            error: false,
        },
        Format::Codex => Step {
            name: "apply_patch",
            input: json!({"input": format!("*** Begin Patch\n*** Update File: {path}\n@@\n-    let mut total = 0usize;\n+    let mut total = 0usize; // streamed\n*** End Patch\n")}),
            output: format!(
                "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM {path}\n"
            ),
            error: false,
        },
    }
}

fn shell(format: Format, command: &str, log: String, code: i32) -> Step {
    match format {
        Format::ClaudeCode => Step {
            name: "Bash",
            input: json!({"command": command, "description": "Run it"}),
            output: log,
            error: code != 0,
        },
        Format::Codex => Step {
            name: "exec_command",
            input: json!({"cmd": command, "workdir": "/home/lena/src/billing", "yield_time_ms": 10000}),
            output: codex_output(&log, code),
            error: false,
        },
    }
}

fn codex_output(text: &str, code: i32) -> String {
    format!(
        "Chunk ID: 3f9a1c\nWall time: 1.2040 seconds\nProcess exited with code {code}\nOriginal token count: {}\nOutput:\n{text}",
        text.len() / 4
    )
}

fn timestamp(second: u64) -> String {
    format!("2026-03-02T09:{:02}:{:02}.{:03}Z", (second / 60) % 60, second % 60, second % 1000)
}

/// A long single-request session in `format`, seeded.
pub fn long_session(format: Format, seed: u64) -> CorpusSession {
    let mut rng = Rng::new(seed);
    let (steps, changed) = steps(&mut rng, format);
    let request = format!("{GOAL}. {}", CONSTRAINTS.join(" "));
    let final_reply = format!(
        "I ported the exporter to the streaming writer and updated {} files; one error remains: {OPEN_ERROR}.",
        changed.len()
    );
    let session = match format {
        Format::ClaudeCode => format!("7d1c0e52-4b1a-4f0e-9a51-{:012x}", seed & 0xffff_ffff_ffff),
        Format::Codex => format!("019c2f10-7a3e-7b21-9c44-{:012x}", seed & 0xffff_ffff_ffff),
    };
    let bytes = match format {
        Format::ClaudeCode => claude_code_lines(&session, &request, &steps, &final_reply),
        Format::Codex => codex_lines(&session, &request, &steps, &final_reply),
    };
    let mut facts = vec![Fact { kind: FactKind::Goal, text: GOAL.to_owned() }];
    facts.extend(CONSTRAINTS.iter().map(|c| Fact { kind: FactKind::Constraint, text: (*c).to_owned() }));
    facts.extend(changed.iter().map(|p| Fact { kind: FactKind::FileChanged, text: p.clone() }));
    facts.push(Fact { kind: FactKind::OpenError, text: OPEN_ERROR.to_owned() });
    let name = match format {
        Format::ClaudeCode => format!("generated/claude-code-{} calls", steps.len()),
        Format::Codex => format!("generated/codex-{} calls", steps.len()),
    };
    CorpusSession { name, bytes: bytes.into_bytes(), session, facts }
}

fn claude_code_lines(session: &str, request: &str, steps: &[Step], final_reply: &str) -> String {
    let mut lines = Vec::new();
    let mut parent: Option<String> = None;
    let mut second = 0u64;
    let push = |value: Value, uuid: String, lines: &mut Vec<String>, parent: &mut Option<String>| {
        lines.push(value.to_string());
        *parent = Some(uuid);
    };
    let base = |kind: &str, uuid: &str, parent: &Option<String>, second: u64| {
        json!({
            "parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": "/home/lena/src/billing", "sessionId": session, "version": "2.1.7",
            "gitBranch": "streaming-export", "type": kind, "uuid": uuid, "timestamp": timestamp(second),
        })
    };
    let uuid = |n: u64| format!("5b0c9a1e-0000-4000-8000-{n:012x}");
    let mut user = base("user", &uuid(0), &parent, second);
    user["message"] = json!({"role": "user", "content": request});
    push(user, uuid(0), &mut lines, &mut parent);
    for (index, step) in steps.iter().enumerate() {
        let n = index as u64 * 2 + 1;
        second += 3;
        let call_id = format!("toolu_01{:022}", index);
        let mut call = base("assistant", &uuid(n), &parent, second);
        call["message"] = json!({
            "model": "claude-sonnet-4-5-20250929", "id": format!("msg_01{index:022}"), "type": "message",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": step.name, "input": step.input}],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 35066, "output_tokens": 90},
        });
        call["requestId"] = json!(format!("req_01{index:022}"));
        push(call, uuid(n), &mut lines, &mut parent);
        second += 1;
        let mut result = base("user", &uuid(n + 1), &parent, second);
        let mut content = json!({"tool_use_id": call_id, "type": "tool_result", "content": step.output});
        if step.error {
            content["is_error"] = json!(true);
        }
        result["message"] = json!({"role": "user", "content": [content]});
        result["toolUseResult"] = if step.error {
            json!(format!("Error: {}", step.output))
        } else {
            json!({"stdout": step.output, "stderr": "", "interrupted": false})
        };
        push(result, uuid(n + 1), &mut lines, &mut parent);
    }
    let n = steps.len() as u64 * 2 + 1;
    let mut reply = base("assistant", &uuid(n), &parent, second + 5);
    reply["message"] = json!({
        "model": "claude-sonnet-4-5-20250929", "id": "msg_01final", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": final_reply}], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 90000, "output_tokens": 60},
    });
    push(reply, uuid(n), &mut lines, &mut parent);
    lines.join("\n") + "\n"
}

fn codex_lines(session: &str, request: &str, steps: &[Step], final_reply: &str) -> String {
    let turn = "019c2f10-7b00-7c31-9f1e-0a6b2d8c5e13";
    let mut second = 0u64;
    let mut lines = Vec::new();
    let mut line = |second: u64, kind: &str, payload: Value| {
        lines.push(json!({"timestamp": timestamp(second), "type": kind, "payload": payload}).to_string());
    };
    line(
        second,
        "session_meta",
        json!({
            "id": session, "timestamp": timestamp(0), "cwd": "/home/lena/src/billing", "originator": "codex_cli_rs",
            "cli_version": "0.128.0", "source": "cli", "model_provider": "openai",
            "base_instructions": {"text": "You are Codex, a coding agent based on GPT-5."},
        }),
    );
    line(
        second,
        "event_msg",
        json!({"type": "task_started", "turn_id": turn, "started_at": 1_772_442_000, "model_context_window": 258_400, "collaboration_mode_kind": "default"}),
    );
    line(
        second,
        "turn_context",
        json!({"turn_id": turn, "cwd": "/home/lena/src/billing", "approval_policy": "never", "sandbox_policy": {"type": "workspace-write", "writable_roots": [], "network_access": false, "exclude_tmpdir_env_var": false, "exclude_slash_tmp": false}, "model": "gpt-5.5", "effort": "medium", "summary": "auto"}),
    );
    line(
        second,
        "response_item",
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/home/lena/src/billing</cwd>\n  <shell>bash</shell>\n</environment_context>"}]}),
    );
    line(
        second,
        "response_item",
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": request}]}),
    );
    line(
        second,
        "event_msg",
        json!({"type": "user_message", "message": request, "images": [], "local_images": [], "text_elements": []}),
    );
    for (index, step) in steps.iter().enumerate() {
        second += 2;
        let call_id = format!("call_{index:024}");
        if step.name == "apply_patch" {
            let input = step.input["input"].as_str().unwrap_or_default();
            line(
                second,
                "response_item",
                json!({"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": "apply_patch", "input": input}),
            );
            line(
                second,
                "response_item",
                json!({"type": "custom_tool_call_output", "call_id": call_id, "output": step.output}),
            );
        } else {
            line(
                second,
                "response_item",
                json!({"type": "function_call", "name": step.name, "arguments": step.input.to_string(), "call_id": call_id}),
            );
            line(
                second,
                "response_item",
                json!({"type": "function_call_output", "call_id": call_id, "output": step.output}),
            );
        }
    }
    line(
        second + 4,
        "response_item",
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": final_reply}], "phase": "final_answer"}),
    );
    line(
        second + 4,
        "event_msg",
        json!({"type": "agent_message", "message": final_reply, "phase": "final_answer"}),
    );
    line(
        second + 4,
        "event_msg",
        json!({"type": "task_complete", "turn_id": turn, "last_agent_message": final_reply}),
    );
    lines.join("\n") + "\n"
}

/// One session assembled for one window.
#[derive(Debug, Clone, Serialize)]
pub struct QualityRow {
    /// The session's name.
    pub session: String,
    /// The window, in tokens.
    pub window: u64,
    /// The history budget it gives.
    pub budget: u64,
    /// The session's compactable history, in tokens.
    pub tokens_before: u64,
    /// The assembled history, in tokens.
    pub tokens: u64,
    /// Whether it fits the budget.
    pub fits: bool,
    /// Why not, when it does not.
    pub unfit_reason: Option<String>,
    /// Whether a checkpoint stands in for part of it.
    pub checkpoint: bool,
    /// Facts found, of the facts listed.
    pub retained: usize,
    /// Facts listed.
    pub facts: usize,
    /// Facts not found, by kind and text.
    pub missing: Vec<Fact>,
    /// Constraints and changed files found, of those listed (the acceptance aim at 32k: all).
    pub constraints_and_files: (usize, usize),
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The text of everything the history holds, as a model would read it.
fn history_text(items: &[HistoryItem]) -> String {
    let mut out = String::new();
    for item in items {
        match item {
            HistoryItem::Checkpoint { text, .. } | HistoryItem::Retrieved { text, .. } => out.push_str(text),
            HistoryItem::ProviderState { .. } => {}
            HistoryItem::Event { event, .. } => match &event.content {
                Some(Content::Text(text)) => out.push_str(&text.text),
                Some(Content::Thinking(thinking)) => out.push_str(&thinking.text),
                Some(Content::FunctionCall(call)) => {
                    out.push_str(&call.name);
                    out.push(' ');
                    out.push_str(&strings(&call.args));
                }
                Some(Content::FunctionResponse(response)) => out.push_str(&strings(&response.result)),
                Some(Content::Error(error)) => out.push_str(&error.message),
                _ => {}
            },
        }
        out.push('\n');
    }
    out
}

fn strings(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().map(strings).collect::<Vec<_>>().join("\n"),
        Value::Object(map) => map.values().map(strings).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}

/// Imports `corpus` into a fresh store under `dir`, prepares its next request for `window`, and
/// measures it.
pub fn evaluate(dir: &Path, corpus: &CorpusSession, window: u64) -> Result<QualityRow, BenchError> {
    // Fit and retention do not depend on durability; buffered appends keep the run short.
    let mnemo =
        Mnemo::open(&dir.join("store"), Config { durability: Durability::Buffered, ..Config::default() })?;
    mnemo.import(&corpus.bytes, &corpus.name, ImportFormat::Auto)?;
    let session =
        SessionId::new(corpus.session.clone()).map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(crate::harness::io("cannot start a runtime for compaction"))?;
    let options = CompactOptions {
        context: ContextOptions { window: Some(window), ..ContextOptions::default() },
        ..CompactOptions::default()
    };
    let outcome = runtime.block_on(mnemo.compaction().prepare_history(&session, &options))?;
    let history = outcome.history;
    let text = normalize(&history_text(&history.items));
    let missing: Vec<Fact> =
        corpus.facts.iter().filter(|f| !text.contains(&normalize(&f.text))).cloned().collect();
    let key = |f: &&Fact| matches!(f.kind, FactKind::Constraint | FactKind::FileChanged);
    let listed = corpus.facts.iter().filter(key).count();
    let key_missing = missing.iter().filter(key).count();
    let diagnostics = &history.diagnostics;
    Ok(QualityRow {
        session: corpus.name.clone(),
        window,
        budget: diagnostics.max_history_tokens,
        tokens_before: diagnostics.tokens_before,
        tokens: diagnostics.tokens_after,
        fits: diagnostics.fit.fits,
        unfit_reason: diagnostics.fit.unfit_reason.map(|r| r.code().to_owned()),
        checkpoint: history.boundary.is_some(),
        retained: corpus.facts.len() - missing.len(),
        facts: corpus.facts.len(),
        missing,
        constraints_and_files: (listed - key_missing, listed),
    })
}

/// Every session of the corpus at every window of [`WINDOWS`], each in its own store under `out`.
pub fn run(out: &Path, corpus: &[CorpusSession]) -> Result<Vec<QualityRow>, BenchError> {
    let mut rows = Vec::new();
    for (index, session) in corpus.iter().enumerate() {
        for window in WINDOWS {
            let dir: PathBuf = crate::harness::fresh_dir(out, &format!("context-quality-{index}-{window}"))?;
            rows.push(evaluate(&dir, session, window)?);
        }
    }
    Ok(rows)
}

/// The rows as a Markdown table, with the fit rate per window.
pub fn table(rows: &[QualityRow]) -> String {
    let mut out = String::from(
        "| session | window | budget | tokens before | tokens after | fits | checkpoint | facts retained | constraints + files changed |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let fits = match (&row.fits, &row.unfit_reason) {
            (true, _) => "yes".to_owned(),
            (false, Some(reason)) => format!("no: {reason}"),
            (false, None) => "NO".to_owned(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {fits} | {} | {}/{} | {}/{} |\n",
            row.session,
            row.window,
            row.budget,
            row.tokens_before,
            row.tokens,
            if row.checkpoint { "yes" } else { "no" },
            row.retained,
            row.facts,
            row.constraints_and_files.0,
            row.constraints_and_files.1
        ));
    }
    for window in WINDOWS {
        let at: Vec<&QualityRow> = rows.iter().filter(|r| r.window == window).collect();
        let fit = at.iter().filter(|r| r.fits).count();
        let (found, listed) = at.iter().fold((0, 0), |(f, l), r| (f + r.retained, l + r.facts));
        out.push_str(&format!(
            "\nwindow {window}: fit rate {fit}/{} ({:.0}%), fact retention {found}/{listed} ({:.0}%)",
            at.len(),
            100.0 * fit as f64 / at.len().max(1) as f64,
            100.0 * found as f64 / listed.max(1) as f64
        ));
    }
    out.push('\n');
    out
}
