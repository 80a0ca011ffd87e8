//! The memory-quality evaluation behind `mnemo eval memory`: sessions written in the exact line
//! shapes of Claude Code and Codex, each with a hand-labelled list of the standing facts that must
//! be extracted from it (standing instructions and constraints, corrections, project facts,
//! preferences) and of the lines that must not be (one-off replies, fragments, secrets, agent
//! statements, harness text). Each session is imported into a store of its own and extracted with
//! the embedded proposer; the report gives recall (labelled facts found) and precision (items that
//! state a labelled fact, each fact once, in the third person).
//!
//! The sessions are in two halves (`eval/memory/dev.txt`, `eval/memory/heldout.txt`): the rules are
//! tuned on the first only, and the second is reported as it was written.

use std::path::Path;

use mnemo::memory::ListRequest;
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};
use serde::Serialize;
use serde_json::{Value, json};

/// The development half: the rules are tuned on it.
pub const DEV: &str = include_str!("eval/memory/dev.txt");
/// The held-out half: written before any tuning and never changed to fit.
pub const HELDOUT: &str = include_str!("eval/memory/heldout.txt");

/// Most sessions one labelled file may hold.
const SESSIONS_MAX: usize = 1_000;

/// Why the evaluation could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryEvalError {
    /// A labelled file does not parse: fix the line it names.
    #[error("labelled sessions, line {line}: {reason}")]
    Parse {
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The store failed: the message says why.
    #[error(transparent)]
    Store(#[from] mnemo::Error),
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// The tool whose line shape a session is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// Claude Code session JSON Lines.
    Claude,
    /// Codex rollout JSON Lines, each message a `response_item` with its `event_msg` echo.
    Codex,
    /// Codex rollout JSON Lines as 0.148 writes them: no `event_msg` echoes, and Codex's blocks
    /// (environment, `AGENTS.md`) content parts of the message that carries the user's prompt.
    CodexItems,
}

/// Who wrote a message, and its label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A user message stating standing facts; each fact is a list of cues, any of which an item
    /// stating it contains (whole words, case aside).
    Facts(Vec<Vec<String>>, String),
    /// A user message nothing may be extracted from.
    Not(String),
    /// A task: nothing in it is labelled a standing fact.
    Task(String),
    /// The agent's message.
    Agent(String),
    /// Text the harness writes in the user's role.
    Harness(String),
}

/// One labelled session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its name in reports.
    pub name: String,
    /// The line shape it is written in.
    pub tool: Tool,
    /// Its working directory.
    pub cwd: String,
    /// Its messages in order.
    pub lines: Vec<Line>,
}

impl Session {
    /// The labelled facts, each a list of cues.
    pub fn facts(&self) -> Vec<&[String]> {
        self.lines
            .iter()
            .filter_map(|l| if let Line::Facts(facts, _) = l { Some(facts) } else { None })
            .flat_map(|facts| facts.iter().map(Vec::as_slice))
            .collect()
    }
}

fn parse_error(line: usize, reason: &str) -> MemoryEvalError {
    MemoryEvalError::Parse { line, reason: reason.to_owned() }
}

/// `{cue|cue}{cue}… text` into the facts and the text.
fn facts_of(rest: &str, line: usize) -> Result<(Vec<Vec<String>>, String), MemoryEvalError> {
    let mut facts = Vec::new();
    let mut rest = rest.trim_start();
    while let Some(after) = rest.strip_prefix('{') {
        let close = after.find('}').ok_or_else(|| parse_error(line, "a cue list is not closed"))?;
        let cues: Vec<String> =
            after[..close].split('|').map(|c| c.trim().to_lowercase()).filter(|c| !c.is_empty()).collect();
        if cues.is_empty() {
            return Err(parse_error(line, "a fact without cues"));
        }
        facts.push(cues);
        rest = after[close + 1..].trim_start();
    }
    if facts.is_empty() {
        return Err(parse_error(line, "`U+` names no fact"));
    }
    Ok((facts, rest.to_owned()))
}

/// Reads a labelled file (the format is described at the top of `eval/memory/heldout.txt`).
pub fn parse(text: &str) -> Result<Vec<Session>, MemoryEvalError> {
    let mut sessions: Vec<Session> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let raw = raw.trim_end();
        if raw.is_empty() || raw.starts_with("# ") || raw == "#" {
            continue;
        }
        if let Some(header) = raw.strip_prefix("## ") {
            let fields: Vec<&str> = header.split_whitespace().collect();
            let [name, tool, cwd] = fields[..] else {
                return Err(parse_error(number, "a session header is `## name tool cwd`"));
            };
            let tool = match tool {
                "claude" => Tool::Claude,
                "codex" => Tool::Codex,
                "codex-0.148" => Tool::CodexItems,
                _ => return Err(parse_error(number, "the tool is `claude`, `codex` or `codex-0.148`")),
            };
            if sessions.len() == SESSIONS_MAX {
                return Err(parse_error(number, "too many sessions"));
            }
            sessions.push(Session { name: name.to_owned(), tool, cwd: cwd.to_owned(), lines: Vec::new() });
            continue;
        }
        let session =
            sessions.last_mut().ok_or_else(|| parse_error(number, "a message before any session"))?;
        let (tag, rest) = raw.split_once(' ').ok_or_else(|| parse_error(number, "a message without text"))?;
        let text = |t: &str| t.trim().replace("\\n", "\n");
        let line = match tag {
            "U+" => {
                let (facts, said) = facts_of(rest, number)?;
                Line::Facts(facts, text(&said))
            }
            "U-" => Line::Not(text(rest)),
            "U" => Line::Task(text(rest)),
            "A" => Line::Agent(text(rest)),
            "H" => Line::Harness(text(rest)),
            _ => return Err(parse_error(number, "a message is tagged U+, U-, U, A or H")),
        };
        session.lines.push(line);
    }
    Ok(sessions)
}

/// A fixed session id of the `n`th session, in the shape each tool uses.
fn session_id(n: usize) -> String {
    format!("5e5510{n:02}-7c4a-4b9e-9f03-2a6c1d8e4b70")
}

fn timestamp(second: usize) -> String {
    format!("2026-03-02T09:{:02}:{:02}.000Z", (second / 60) % 60, second % 60)
}

/// The session as Claude Code 2.1 writes it: one line per message, chained by `parentUuid`; the
/// caveat before local commands is a meta line.
pub fn claude_code_lines(session: &Session, n: usize) -> String {
    let id = session_id(n);
    let mut parent = Value::Null;
    let mut out = String::new();
    for (i, line) in session.lines.iter().enumerate() {
        let uuid = format!("c0de{n:04}-0000-4000-8000-{:012}", i + 1);
        let (user, text) = match line {
            Line::Facts(_, t) | Line::Not(t) | Line::Task(t) | Line::Harness(t) => (true, t),
            Line::Agent(t) => (false, t),
        };
        let message = if user {
            json!({"role": "user", "content": text})
        } else {
            json!({"model": "claude-sonnet-4-5-20250929", "id": format!("msg_{n}_{i}"), "type": "message",
                "role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 40}})
        };
        let mut object = json!({"parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": session.cwd, "sessionId": id, "version": "2.1.7", "gitBranch": "main",
            "type": if user { "user" } else { "assistant" }, "message": message, "uuid": uuid,
            "timestamp": timestamp(i * 7)});
        if text.starts_with("Caveat:")
            && let Some(map) = object.as_object_mut()
        {
            map.insert("isMeta".to_owned(), Value::Bool(true));
        }
        out.push_str(&object.to_string());
        out.push('\n');
        parent = Value::String(uuid);
    }
    out
}

/// The session as Codex 0.128 writes its rollout: the meta and turn context, then each message
/// as a `response_item` and, for what the user typed and the agent said, its `event_msg` echo; or
/// as 0.148 writes it ([`Tool::CodexItems`]): without the echoes, Codex's blocks in the prompt's
/// message.
pub fn codex_lines(session: &Session, n: usize) -> String {
    let id = format!("019e1b7a-{n:04}-7f10-8a2d-5b9e0c7d4e21");
    let turn = format!("019e1b7a-{n:04}-7c31-9f1e-0a6b2d8c5e13");
    let mut lines = vec![
        json!({"timestamp": timestamp(0), "type": "session_meta", "payload": {"id": id, "timestamp": timestamp(0),
            "cwd": session.cwd, "originator": "codex_cli_rs", "cli_version": "0.128.0", "source": "cli",
            "model_provider": "openai", "base_instructions": {"text": "You are Codex, a coding agent based on GPT-5."},
            "git": {"commit_hash": "4be1f07c2d9a", "branch": "main"}}}),
        json!({"timestamp": timestamp(0), "type": "event_msg", "payload": {"type": "task_started", "turn_id": turn,
            "model_context_window": 258_400}}),
        json!({"timestamp": timestamp(0), "type": "turn_context", "payload": {"turn_id": turn, "cwd": session.cwd,
            "approval_policy": "on-request", "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5.5",
            "effort": "medium", "summary": "auto"}}),
    ];
    let items_only = session.tool == Tool::CodexItems;
    let mut blocks: Vec<Value> = Vec::new();
    for (i, line) in session.lines.iter().enumerate() {
        let at = timestamp(1 + i * 5);
        let (role, text, echo) = match line {
            Line::Facts(_, t) | Line::Not(t) | Line::Task(t) => ("user", t, !items_only),
            Line::Harness(t) if items_only => {
                blocks.push(json!({"type": "input_text", "text": t}));
                continue;
            }
            Line::Harness(t) => ("user", t, false),
            Line::Agent(t) => ("assistant", t, !items_only),
        };
        let block = if role == "user" { "input_text" } else { "output_text" };
        let mut content = if role == "user" { std::mem::take(&mut blocks) } else { Vec::new() };
        content.push(json!({"type": block, "text": text}));
        lines.push(
            json!({"timestamp": at, "type": "response_item", "payload": {"type": "message", "role": role,
            "content": content}}),
        );
        if echo {
            let payload = if role == "user" {
                json!({"type": "user_message", "message": text, "images": [], "local_images": [], "text_elements": []})
            } else {
                json!({"type": "agent_message", "message": text, "phase": "final_answer"})
            };
            lines.push(json!({"timestamp": at, "type": "event_msg", "payload": payload}));
        }
    }
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

/// How one half did.
#[derive(Debug, Clone, Serialize)]
pub struct HalfReport {
    /// `dev` or `heldout`.
    pub name: String,
    /// Sessions run.
    pub sessions: usize,
    /// Labelled facts.
    pub facts: usize,
    /// Labelled facts an item states.
    pub found: usize,
    /// Items extracted.
    pub items: usize,
    /// Items that state a labelled fact not stated by an item before them, in the third person.
    pub correct: usize,
    /// `found / facts`.
    pub recall: f64,
    /// `correct / items` (1 with no items).
    pub precision: f64,
    /// `session: cues` of each fact no item states.
    pub missed: Vec<String>,
    /// `session: content` of each item that is not correct.
    pub wrong: Vec<String>,
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '.' | '_' | '\'')))
        .map(|w| w.trim_matches(['.', '\'']).to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `content` holds the cue's words in order, each a whole word.
fn states(content: &[String], cue: &str) -> bool {
    let cue = words(cue);
    !cue.is_empty() && content.windows(cue.len()).any(|w| w == cue.as_slice())
}

/// Whether an item still speaks in the user's first person.
fn first_person(content: &[String]) -> bool {
    content.iter().any(|w| matches!(w.as_str(), "i" | "me" | "my" | "i'm" | "we" | "our"))
}

/// The items extracted from one session, imported into a fresh store under `dir`.
pub fn extracted(dir: &Path, session: &Session, n: usize) -> Result<Vec<String>, MemoryEvalError> {
    let mnemo = Mnemo::open(dir, Config::default())?;
    let (bytes, format) = match session.tool {
        Tool::Claude => (claude_code_lines(session, n), ImportFormat::ClaudeCode),
        Tool::Codex | Tool::CodexItems => (codex_lines(session, n), ImportFormat::Codex),
    };
    mnemo.import(bytes.as_bytes(), &format!("{}.jsonl", session.name), format)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    for summary in mnemo.history().sessions()? {
        runtime.block_on(mnemo.memory().extract(&summary.session, None))?;
    }
    let items = mnemo.memory().list(&ListRequest::default())?;
    Ok(items.into_iter().map(|i| i.fields.content).collect())
}

/// Scores one session's items against its labels into `report`.
fn score(session: &Session, items: &[String], report: &mut HalfReport) {
    let facts = session.facts();
    let mut stated = vec![false; facts.len()];
    for item in items {
        let content = words(item);
        let fact = facts
            .iter()
            .enumerate()
            .find(|(i, cues)| !stated[*i] && cues.iter().any(|c| states(&content, c)))
            .map(|(i, _)| i);
        match fact {
            Some(i) if !first_person(&content) => {
                stated[i] = true;
                report.correct += 1;
            }
            _ => report.wrong.push(format!("{}: {item}", session.name)),
        }
    }
    report.items += items.len();
    report.facts += facts.len();
    report.found += stated.iter().filter(|s| **s).count();
    for (cues, _) in facts.iter().zip(&stated).filter(|(_, s)| !**s) {
        report.missed.push(format!("{}: {}", session.name, cues.join(" | ")));
    }
}

/// Runs one half: each session in a store of its own under `dir`.
pub fn evaluate(name: &str, sessions: &[Session], dir: &Path) -> Result<HalfReport, MemoryEvalError> {
    let mut report = HalfReport {
        name: name.to_owned(),
        sessions: sessions.len(),
        facts: 0,
        found: 0,
        items: 0,
        correct: 0,
        recall: 0.0,
        precision: 0.0,
        missed: Vec::new(),
        wrong: Vec::new(),
    };
    for (n, session) in sessions.iter().enumerate() {
        let items = extracted(&dir.join(format!("{name}-{n:03}")), session, n)?;
        score(session, &items, &mut report);
    }
    report.recall = ratio(report.found, report.facts);
    report.precision = ratio(report.correct, report.items);
    Ok(report)
}

#[expect(clippy::cast_precision_loss, reason = "counts of labelled facts are far below 2^52")]
fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 1.0 } else { part as f64 / whole as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_halves_parse_and_are_varied() {
        for (name, text) in [("dev", DEV), ("heldout", HELDOUT)] {
            let sessions = parse(text).unwrap();
            assert!(sessions.len() >= 15, "{name}: {} sessions", sessions.len());
            let codex = sessions.iter().filter(|s| s.tool != Tool::Claude).count();
            assert!(codex * 3 >= sessions.len(), "{name}: {codex} Codex sessions");
            assert!(sessions.iter().all(|s| !s.facts().is_empty()), "{name}: a session without facts");
        }
    }

    #[test]
    fn a_cue_is_whole_words_in_order() {
        let content = words("The user's instruction: don't commit until the final step.");
        assert!(states(&content, "final step"));
        assert!(states(&content, "commit"));
        assert!(!states(&content, "step final"));
        assert!(!states(&content, "comm"));
        assert!(first_person(&words("I prefer tabs")));
        assert!(!first_person(&words("The user prefers tabs")));
    }

    #[test]
    fn each_fact_counts_once_and_an_item_in_the_first_person_is_wrong() {
        let sessions =
            parse("## s claude /x\nU+ {tabs}{final step} tabs. don't commit until the final step\n").unwrap();
        let mut report = HalfReport {
            name: "t".to_owned(),
            sessions: 1,
            facts: 0,
            found: 0,
            items: 0,
            correct: 0,
            recall: 0.0,
            precision: 0.0,
            missed: Vec::new(),
            wrong: Vec::new(),
        };
        let items = ["The user prefers tabs.", "The user likes tabs.", "I commit at the final step."];
        score(&sessions[0], &items.map(str::to_owned), &mut report);
        assert_eq!((report.facts, report.found, report.items, report.correct), (2, 1, 3, 1));
        assert_eq!(report.missed, ["s: final step"]);
    }
}
