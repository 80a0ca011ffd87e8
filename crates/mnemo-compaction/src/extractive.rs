//! The embedded summarizer: deterministic and extractive, so everything runs offline. It fills every
//! required section from the conversation it is given, with what a model needs to carry the work
//! on (decision 0127):
//! - **Goal**: the user's substantive requests in order (not slash-command markup, injected
//!   context, greetings or acknowledgements), the latest marked, and the user's constraints and
//!   preferences copied verbatim;
//! - **Progress**: files changed (from tool arguments), commands run with their outcome (a failure
//!   with its first error line), and the reply that closed each request;
//! - **Key Decisions**: the assistant's own sentences that state a choice;
//! - **Next Steps**: open errors first, then the unanswered request, or, when the last reply closed
//!   the work, waiting for the user (never asking again for work reported done);
//! - **Critical Context**: files changed and read, errors still open.
//!
//! Every line is copied from the events (cut to a bound, never rephrased), so its claims are
//! faithful by construction. Rolling forward keeps the previous summary's lines unless newer
//! events supersede them (a later success of a failed command closes its error).

use serde_json::Value;

use crate::summarizer::{
    BoxFuture, FinishReason, SummarizeError, Summarizer, SummarizerIdentity, SummaryRequest, SummaryResponse,
};
use crate::summary::{SUMMARY_FLOOR_SPAN_TOKENS, SUMMARY_FLOOR_TOKENS};

/// The embedded summarizer's name in manifests.
pub const EXTRACTIVE_SUMMARIZER_NAME: &str = "mnemo.extractive";
/// The version of its algorithm.
pub const EXTRACTIVE_SUMMARIZER_VERSION: &str = "2";

/// Longest excerpt line, in characters.
const LINE_CHARS_MAX: usize = 240;
/// Most requests kept in the goal (the first two and the newest).
const GOAL_REQUESTS_MAX: usize = 8;
/// Most user constraints kept.
const CONSTRAINTS_MAX: usize = 12;
/// Most lines kept in "Done".
const DONE_LINES_MAX: usize = 30;
/// Most decisions kept.
const DECISIONS_MAX: usize = 8;
/// Most lines kept in "Critical Context".
const CONTEXT_LINES_MAX: usize = 48;

/// The prefixes of the summary's own lines, so rolling forward can tell them apart.
const REQUEST: &str = "- Request: ";
const LATEST: &str = "- Latest request: ";
const CONSTRAINT: &str = "- User constraint (verbatim): ";
const CHANGED: &str = "- Changed: ";
const READ: &str = "- Read: ";
const OPEN_ERROR: &str = "- Open error: ";

/// The embedded extractive summarizer.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractiveSummarizer;

impl Summarizer for ExtractiveSummarizer {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity {
            name: EXTRACTIVE_SUMMARIZER_NAME.to_owned(),
            prompt_version: EXTRACTIVE_SUMMARIZER_VERSION.to_owned(),
        }
    }

    fn limits_input(&self) -> bool {
        // Extraction reads the input; no model context bounds it.
        false
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
        Box::pin(async move { Ok(SummaryResponse { text: summarize(request), finish: FinishReason::Stop }) })
    }
}

/// One thing the conversation holds, in order.
#[derive(Debug)]
enum Item {
    User(String),
    Reply(String),
    Call { id: String, name: String, input: Value },
    Result { id: String, value: String, error: bool },
}

fn items(request: &SummaryRequest) -> Vec<Item> {
    let skip = usize::from(request.previous_summary.is_some());
    let mut out = Vec::new();
    for message in request.messages.iter().skip(skip) {
        let role = message["role"].as_str().unwrap_or_default();
        for part in message["content"].as_array().into_iter().flatten() {
            match (role, part["type"].as_str().unwrap_or_default()) {
                ("user", "text") => {
                    out.push(Item::User(part["text"].as_str().unwrap_or_default().to_owned()))
                }
                ("assistant", "text") => {
                    out.push(Item::Reply(part["text"].as_str().unwrap_or_default().to_owned()))
                }
                ("assistant", "tool-call") => out.push(Item::Call {
                    id: part["toolCallId"].as_str().unwrap_or_default().to_owned(),
                    name: part["toolName"].as_str().unwrap_or_default().to_owned(),
                    input: part["input"].clone(),
                }),
                ("tool", "tool-result") => {
                    let output = &part["output"];
                    let value = match &output["value"] {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    out.push(Item::Result {
                        id: part["toolCallId"].as_str().unwrap_or_default().to_owned(),
                        value,
                        error: output["type"].as_str().is_some_and(|t| t.starts_with("error")),
                    });
                }
                _ => {}
            }
        }
    }
    out
}

/// Collapses whitespace, removes fence runs, cuts to a bound and drops trailing marks that would
/// read as truncation, so a copied line can never break the summary's structure.
fn clean(text: &str, max_chars: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut line = collapsed.replace("```", "'''").replace("~~~", "'''");
    let cut = line.chars().count() > max_chars;
    if cut {
        line = cut_whole(&line, max_chars);
    }
    let line = strip_trailing_marks(line);
    match (cut, line.is_empty()) {
        (true, true) => TRUNCATED.to_owned(),
        (true, false) => format!("{line} {TRUNCATED}"),
        (false, _) => line,
    }
}

/// The longest start of `line` within `max_chars` that ends between words and leaves no code span
/// open: a cut inside a word or a backticked span would put a fragment (`cargo te`) in the summary,
/// which reads as a command or path that was never there and is checked as a claim.
fn cut_whole(line: &str, max_chars: usize) -> String {
    let mut kept: String = line.chars().take(max_chars).collect();
    let next = line.chars().nth(max_chars);
    if next.is_some_and(|c| !c.is_whitespace())
        && let Some(space) = kept.rfind(char::is_whitespace)
    {
        kept.truncate(space);
    }
    if kept.matches('`').count() % 2 == 1
        && let Some(open) = kept.rfind('`')
    {
        kept.truncate(open);
    }
    kept.trim_end().to_owned()
}

/// The mark a cut excerpt ends with (never a claim, never a truncation of the summary).
const TRUNCATED: &str = "[…]";

fn strip_trailing_marks(mut line: String) -> String {
    loop {
        let trimmed = line.trim_end();
        let stripped = ["...", ":", "：", ",", "，", "、", ";", "；", "…", "(", "（", "—", "-"]
            .iter()
            .find_map(|mark| trimmed.strip_suffix(mark));
        match stripped {
            Some(rest) => line = rest.to_owned(),
            None => return trimmed.to_owned(),
        }
    }
}

/// Markup and context a client injects into user-role text: never a request.
const INJECTED_PREFIXES: [&str; 16] = [
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<environment_context>",
    "<user_instructions>",
    "<instructions>",
    "<turn_aborted>",
    "caveat:",
    "# agents.md instructions",
    "this session is being continued from a previous conversation",
    "[request interrupted by user",
    "<steering>",
];

/// Words that make a short message a greeting or an acknowledgement rather than a request.
const FILLER_WORDS: [&str; 22] = [
    "hi", "hello", "hey", "thanks", "thank", "you", "ok", "okay", "yes", "no", "sure", "great", "good",
    "cool", "nice", "perfect", "continue", "go", "on", "please", "yep", "thx",
];

/// Removes `<system-reminder>` blocks and similar injected spans from user text.
fn strip_injected(text: &str) -> String {
    let mut out = text.to_owned();
    for tag in ["system-reminder", "user-prompt-submit-hook"] {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        while let Some(start) = out.find(&open) {
            let end = out[start..].find(&close).map_or(out.len(), |e| start + e + close.len());
            out.replace_range(start..end, " ");
        }
    }
    out
}

/// The request a user message makes, if it is one.
fn substantive_request(text: &str) -> Option<String> {
    let text = strip_injected(text);
    let trimmed = text.trim();
    let lower = trimmed.to_lowercase();
    if trimmed.is_empty() || INJECTED_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return None;
    }
    let words: Vec<String> =
        lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned).collect();
    if words.is_empty() || (words.len() <= 4 && words.iter().all(|w| FILLER_WORDS.contains(&w.as_str()))) {
        return None;
    }
    Some(trimmed.to_owned())
}

/// Phrases that mark a user sentence as a constraint or a preference.
const CONSTRAINT_MARKERS: [&str; 25] = [
    "follow ",
    "don't",
    "do not",
    "dont ",
    "never",
    "always",
    "must",
    "should not",
    "shouldn't",
    "make sure",
    "prefer",
    "only ",
    "avoid",
    "without",
    "until",
    "crucial",
    "important",
    "keep ",
    "no need to",
    "instead of",
    "rather than",
    "not allowed",
    "need to be",
    "needs to be",
    "has to",
];

/// The sentences of `text`: a line ends one, and so does `.`, `!`, `?` or `;` followed by a space
/// (never the dot inside a file name such as `CLAUDE.md`).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut current = String::new();
        let mut chars = line.chars().peekable();
        while let Some(ch) = chars.next() {
            current.push(ch);
            let ends = chars.peek().is_none_or(|next| next.is_whitespace());
            if matches!(ch, '.' | '!' | '?' | ';') && ends {
                out.push(std::mem::take(&mut current));
            }
        }
        out.push(current);
    }
    out.into_iter().map(|s| s.trim().to_owned()).filter(|s| s.split_whitespace().count() >= 3).collect()
}

/// The user's constraints and preferences in a request, verbatim.
fn constraints(request: &str) -> Vec<String> {
    sentences(request)
        .into_iter()
        .filter(|s| {
            let lower = format!("{} ", s.to_lowercase());
            CONSTRAINT_MARKERS.iter().any(|m| lower.contains(m))
        })
        .map(|s| clean(&s, LINE_CHARS_MAX))
        .collect()
}

/// Phrases that mark an assistant sentence as a decision.
const DECISION_MARKERS: [&str; 10] = [
    "i'll use",
    "i will use",
    "decided",
    "instead of",
    "rather than",
    "going with",
    "we'll go with",
    "i chose",
    "chosen",
    "the approach",
];

fn decisions(reply: &str) -> Vec<String> {
    sentences(reply)
        .into_iter()
        .filter(|s| {
            let lower = s.to_lowercase();
            DECISION_MARKERS.iter().any(|m| lower.contains(m)) && !s.contains('{')
        })
        .map(|s| clean(&s, LINE_CHARS_MAX))
        .collect()
}

/// Openings of a reply that only acknowledges or announces (never progress on its own).
const FILLER_OPENINGS: [&str; 14] = [
    "you're absolutely right",
    "you are absolutely right",
    "great",
    "perfect",
    "sure",
    "okay",
    "ok,",
    "got it",
    "let me",
    "now let me",
    "i'll ",
    "i will ",
    "good",
    "excellent",
];

fn is_filler_reply(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    lower.is_empty() || (text.len() < 160 && FILLER_OPENINGS.iter().any(|o| lower.starts_with(o)))
}

/// The first line of a reply worth reporting: its first line with words, headings unmarked.
fn reply_line(text: &str) -> Option<String> {
    let line = text
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| l.chars().filter(|c| c.is_alphanumeric()).count() >= 3)?;
    Some(clean(line, 200))
}

/// A command in a tool call's input, if it names one.
fn command_of(input: &Value) -> Option<String> {
    ["cmd", "command", "script"].iter().find_map(|key| match &input[key] {
        Value::String(cmd) if !cmd.contains('`') && !cmd.trim().is_empty() => Some(clean(cmd, 160)),
        Value::Array(parts) => {
            let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
            (!words.is_empty() && words.iter().all(|w| !w.contains('`')))
                .then(|| clean(&words.join(" "), 160))
        }
        _ => None,
    })
}

/// Whether a tool (by name) changes the files it names.
fn writes_files(name: &str) -> bool {
    let name = name.to_lowercase();
    ["write", "edit", "patch", "create", "replace", "delete", "insert", "move", "rename"]
        .iter()
        .any(|w| name.contains(w))
}

/// Paths a tool call names in its arguments (and the files an `apply_patch` body touches).
fn call_paths(input: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["file_path", "path", "filePath", "notebook_path", "target_file", "file", "filename"] {
        if let Some(path) = input[key].as_str().filter(|p| !p.trim().is_empty() && p.len() < 300) {
            out.push(path.trim().to_owned());
        }
    }
    for text in [input["input"].as_str(), input["patch"].as_str(), command_text(input).as_deref()]
        .into_iter()
        .flatten()
    {
        out.extend(patched_files(text));
    }
    out
}

fn command_text(input: &Value) -> Option<String> {
    match &input["cmd"].is_null() {
        false => input["cmd"].as_str().map(str::to_owned),
        true => input["command"].as_str().map(str::to_owned),
    }
}

/// Files an `apply_patch` envelope adds, updates or deletes.
fn patched_files(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
                .iter()
                .find_map(|p| l.trim().strip_prefix(p))
        })
        .map(|p| p.trim().to_owned())
        .collect()
}

/// Lines of tool output that are bookkeeping of the tool, not output.
const OUTPUT_METADATA: [&str; 8] = [
    "chunk id:",
    "wall time:",
    "process exited with code",
    "original token count:",
    "output:",
    "exit code:",
    "total output lines:",
    "process running with session id",
];

/// A command's exit code, as its output reports it.
fn exit_code(output: &str) -> Option<i64> {
    for line in output.lines().take(12) {
        let lower = line.trim().to_lowercase();
        for prefix in ["process exited with code ", "exit code: ", "exit code "] {
            if let Some(rest) = lower.strip_prefix(prefix) {
                return rest.split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok();
            }
        }
    }
    let json: Value = serde_json::from_str(output).ok()?;
    json.pointer("/metadata/exit_code").or_else(|| json.get("exit_code")).and_then(Value::as_i64)
}

/// Without an exit code: whether the output reads as a failure (a compiler or test error line,
/// a panic, a traceback).
fn reads_as_failure(output: &str) -> bool {
    output.lines().any(|line| {
        let line = line.trim_start();
        let lower = line.to_lowercase();
        lower.starts_with("error:")
            || lower.starts_with("error[")
            || line.starts_with("FAILED")
            || lower.contains("panicked at")
            || line.starts_with("Traceback (most recent call last)")
    })
}

/// The first line of output that reads as an error, else the first line of output.
fn first_error_line(output: &str) -> String {
    let body: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter(|l| {
            let lower = l.to_lowercase();
            !OUTPUT_METADATA.iter().any(|m| lower.starts_with(m))
        })
        .collect();
    let error = body.iter().find(|l| {
        let lower = l.to_lowercase();
        ["error", "failed", "fail:", "panicked", "traceback", "exception", "not found", "denied", "fatal"]
            .iter()
            .any(|m| lower.contains(m))
    });
    clean(error.or(body.first()).copied().unwrap_or("(no output)"), 200)
}

/// Previous sections, by heading, when rolling forward.
fn previous_section(summary: Option<&str>, heading: &str) -> Vec<String> {
    let Some(summary) = summary else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    let mut inside = false;
    for line in summary.lines() {
        if line.starts_with("## ") {
            inside = line.trim() == heading;
            continue;
        }
        if inside && !line.trim().is_empty() && !line.starts_with("### ") {
            lines.push(line.trim_end().to_owned());
        }
    }
    lines
}

fn push_unique(lines: &mut Vec<String>, line: String) {
    if !line.trim_start_matches("- ").trim().is_empty() && !lines.contains(&line) {
        lines.push(line);
    }
}

/// Keeps the first `head` and the newest lines of `lines` so at most `max` remain, with a mark
/// where lines were left out.
fn bound(lines: &mut Vec<String>, head: usize, max: usize) {
    if lines.len() > max {
        let removed: Vec<String> = lines.drain(head..lines.len() - (max - head - 1)).collect();
        let earlier = removed.iter().filter(|l| !l.starts_with("- […")).count();
        lines.insert(head, format!("- […{earlier} earlier lines left out]"));
    }
}

/// What one command did.
struct Ran {
    command: String,
    failed: bool,
    line: String,
}

fn summarize(request: &SummaryRequest) -> String {
    let items = items(request);
    let prior = request.previous_summary.as_deref();

    // Goal: the substantive requests (earlier summaries' first), the newest marked.
    let mut goal: Vec<String> = previous_section(prior, "## Goal")
        .into_iter()
        .map(|l| match l.strip_prefix(LATEST) {
            Some(rest) => format!("{REQUEST}{rest}"),
            None => l,
        })
        .collect();
    let mut constraint_lines: Vec<String> =
        goal.iter().filter(|l| l.starts_with(CONSTRAINT)).cloned().collect();
    goal.retain(|l| l.starts_with(REQUEST));
    for item in &items {
        if let Item::User(text) = item
            && let Some(request) = substantive_request(text)
        {
            push_unique(&mut goal, format!("{REQUEST}{}", clean(&request, LINE_CHARS_MAX)));
            for constraint in constraints(&request) {
                push_unique(&mut constraint_lines, format!("{CONSTRAINT}{constraint}"));
            }
        }
    }
    bound(&mut goal, 2, GOAL_REQUESTS_MAX);
    if let Some(last) = goal.last_mut()
        && let Some(rest) = last.strip_prefix(REQUEST)
    {
        *last = format!("{LATEST}{rest}");
    }
    bound(&mut constraint_lines, 0, CONSTRAINTS_MAX);
    if goal.is_empty() {
        goal.push("- Continue the task the conversation is about.".to_owned());
    }
    goal.extend(constraint_lines);

    // Progress: commands and their outcome, files changed, the reply that closed each request.
    let mut done = previous_section(prior, "## Progress");
    done.retain(|l| !l.starts_with("- Waiting on"));
    let mut context = previous_section(prior, "## Critical Context");
    context.retain(|l| l.trim() != "(none)");
    let mut decisions_lines = previous_section(prior, "## Key Decisions");
    let mut runs: Vec<Ran> = Vec::new();
    let mut open_calls: Vec<(String, String)> = Vec::new();
    let mut last_closing: Option<String> = None;
    let mut answered = true;
    for (index, item) in items.iter().enumerate() {
        match item {
            Item::User(text) => {
                if substantive_request(text).is_some() {
                    answered = false;
                    last_closing = None;
                }
            }
            Item::Call { id, name, input } => {
                open_calls.push((id.clone(), name.clone()));
                for path in call_paths(input) {
                    let line = if writes_files(name) || !patched_files(&input.to_string()).is_empty() {
                        format!("{CHANGED}{}", clean(&path, 200))
                    } else {
                        format!("{READ}{}", clean(&path, 200))
                    };
                    if line.starts_with(CHANGED) {
                        context.retain(|l| *l != format!("{READ}{}", clean(&path, 200)));
                    } else if context.contains(&format!("{CHANGED}{}", clean(&path, 200))) {
                        continue;
                    }
                    push_unique(&mut context, line);
                }
            }
            Item::Result { id, value, error } => {
                let call = open_calls.iter().position(|(open, _)| open == id);
                let name = call.map(|i| open_calls.remove(i).1).unwrap_or_default();
                let input = items[..index].iter().rev().find_map(|i| match i {
                    Item::Call { id: call_id, input, .. } if call_id == id => Some(input),
                    _ => None,
                });
                let failed = *error
                    || match exit_code(value) {
                        Some(code) => code != 0,
                        None => reads_as_failure(value),
                    };
                if let Some(command) = input.and_then(command_of) {
                    runs.push(Ran { command, failed, line: first_error_line(value) });
                } else if failed {
                    runs.push(Ran { command: name, failed, line: first_error_line(value) });
                }
            }
            Item::Reply(text) => {
                for decision in decisions(text) {
                    push_unique(&mut decisions_lines, format!("- {decision}"));
                }
                // The reply that ends a request's work closes it.
                let closes =
                    !items[index + 1..].iter().any(|i| matches!(i, Item::Call { .. } | Item::Result { .. }))
                        || matches!(items.get(index + 1), Some(Item::User(_)));
                // Only a reply to a substantive request reports work (not one to a greeting).
                if closes && !answered && !is_filler_reply(text) {
                    answered = true;
                    last_closing = reply_line(text);
                    if let Some(line) = &last_closing {
                        push_unique(&mut done, format!("- Reported: {line}"));
                    }
                }
            }
        }
    }
    for run in &runs {
        let line = if run.failed {
            format!("- Ran `{}`: failed: {}", run.command, run.line)
        } else {
            format!("- Ran `{}`: ok", run.command)
        };
        done.retain(|l| !l.starts_with(&format!("- Ran `{}`:", run.command)));
        push_unique(&mut done, line);
    }
    bound(&mut done, 0, DONE_LINES_MAX);
    if done.is_empty() {
        done.push("- Nothing completed yet.".to_owned());
    }
    bound(&mut decisions_lines, 0, DECISIONS_MAX);

    // Errors still open: the last run of a command failed (an earlier summary's too, unless a
    // later run of the same command succeeded).
    let mut open_errors: Vec<String> =
        context.iter().filter(|l| l.starts_with(OPEN_ERROR)).cloned().collect();
    context.retain(|l| !l.starts_with(OPEN_ERROR));
    for run in &runs {
        let key = format!("{OPEN_ERROR}`{}`", run.command);
        open_errors.retain(|l| !l.starts_with(&key));
        if run.failed {
            open_errors.push(format!("{key}: {}", run.line));
        }
    }
    let in_progress: Vec<String> =
        open_calls.iter().map(|(_, name)| format!("- Waiting on `{name}`")).collect();

    let mut next = Vec::new();
    for error in &open_errors {
        next.push(format!("Resolve the open error from {}", error.trim_start_matches(OPEN_ERROR)));
    }
    let latest = goal.iter().find_map(|l| l.strip_prefix(LATEST)).map(str::to_owned);
    match (&latest, answered) {
        (Some(request), false) => next.push(format!("Carry on with the latest request: {request}")),
        (_, true) if open_errors.is_empty() => next.push(match &last_closing {
            Some(line) => {
                format!("Wait for the user's next request; the last reply reported the work done: {line}")
            }
            None => "Wait for the user's next request; nothing is left open.".to_owned(),
        }),
        _ => {}
    }
    if next.is_empty() {
        next.push("Continue from the latest event.".to_owned());
    }

    let mut context_lines: Vec<String> = context.iter().filter(|l| l.starts_with(CHANGED)).cloned().collect();
    context_lines.extend(open_errors.iter().cloned());
    context_lines.extend(context.iter().filter(|l| !l.starts_with(CHANGED)).cloned());
    bound(&mut context_lines, CONTEXT_LINES_MAX / 2, CONTEXT_LINES_MAX);
    if context_lines.is_empty() {
        context_lines.push("(none)".to_owned());
    }

    let mut summary = render(&goal, &done, &in_progress, &decisions_lines, &next, &context_lines);
    if request.span_tokens > SUMMARY_FLOOR_SPAN_TOKENS {
        summary = pad_to_floor(summary, &items);
    }
    summary
}

fn render(
    goal: &[String],
    done: &[String],
    in_progress: &[String],
    decisions: &[String],
    next: &[String],
    context: &[String],
) -> String {
    let mut out = String::from("## Goal\n");
    out.push_str(&goal.join("\n"));
    out.push_str("\n\n## Progress\n### Done\n");
    out.push_str(&done.join("\n"));
    if !in_progress.is_empty() {
        out.push_str("\n\n### In Progress\n");
        out.push_str(&in_progress.join("\n"));
    }
    if !decisions.is_empty() {
        out.push_str("\n\n## Key Decisions\n");
        out.push_str(&decisions.join("\n"));
    }
    out.push_str("\n\n## Next Steps\n");
    for (index, step) in next.iter().enumerate() {
        out.push_str(&format!("{}. {step}\n", index + 1));
    }
    out.push_str("\n## Critical Context\n");
    out.push_str(&context.join("\n"));
    out
}

/// A summary standing in for a large span must reach the size floor: add verbatim excerpts of the
/// newest requests and replies (never tool payloads) until it does.
fn pad_to_floor(mut summary: String, items: &[Item]) -> String {
    let floor_chars = (SUMMARY_FLOOR_TOKENS * 4 + 100) as usize;
    if summary.encode_utf16().count() >= floor_chars {
        return summary;
    }
    summary.push_str("\n\n### Excerpts");
    for item in items.iter().rev() {
        let text = match item {
            Item::User(t) => substantive_request(t).unwrap_or_default(),
            Item::Reply(t) => t.clone(),
            Item::Result { value, error: true, .. } => first_error_line(value),
            _ => continue,
        };
        let excerpt = clean(&text, 400);
        if !excerpt.is_empty() && !summary.contains(&excerpt) {
            summary.push_str(&format!("\n- {excerpt}"));
        }
        if summary.encode_utf16().count() >= floor_chars {
            break;
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_cut_excerpt_ends_between_words_and_leaves_no_code_span_open() {
        assert_eq!(clean("run `cargo test --workspace` before every commit", 20), "run […]");
        assert_eq!(clean("the parser in src/transcript.rs refuses empty lines", 30), "the parser in […]");
        assert_eq!(clean("edit `a.rs` and then `b.rs` too", 25), "edit `a.rs` and then […]");
        assert_eq!(clean("short enough", 30), "short enough");
        assert_eq!(clean("`a-very-long-code-span-with-no-space-in-it`", 10), "[…]");
    }

    use super::*;
    use crate::faithfulness::check_faithfulness;
    use crate::summarizer::summarize_text;
    use crate::summary::{SummaryChecks, find_summary_defect};
    use crate::testing::{build_text, call, result, text_event};

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(future))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn summary_of(events: &[mnemo_core::RuntimeEvent]) -> String {
        let summary = block_on(summarize_text(&ExtractiveSummarizer, events, None, events, None, 4));
        let text = summary.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert_eq!(find_summary_defect(&text, SummaryChecks::full(10, 4)), None, "{text}");
        let report = check_faithfulness(&text, events);
        assert_eq!(report.unsupported, Vec::<String>::new(), "{text}");
        text
    }

    fn session() -> Vec<mnemo_core::RuntimeEvent> {
        vec![
            text_event("e1", "t1", "user", "Fix the failing build in crates/mnemo/src/lib.rs"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "cargo build -p mnemo"})),
            result(
                "e3",
                "t1",
                "c1",
                "shell",
                json!("Compiling mnemo\nerror[E0308]: mismatched types\n  --> src/lib.rs:3"),
            ),
            text_event("e4", "t1", "model", "The return type of open() was wrong; fixed it."),
            text_event("e5", "t2", "user", "Now run the tests:"),
        ]
    }

    #[test]
    fn fills_every_section_faithfully() {
        let text = summary_of(&session());
        assert!(text.contains("- Request: Fix the failing build in crates/mnemo/src/lib.rs"), "{text}");
        assert!(text.contains("- Latest request: Now run the tests"), "{text}");
        assert!(
            text.contains("- Ran `cargo build -p mnemo`: failed: error[E0308]: mismatched types"),
            "{text}"
        );
        assert!(text.contains("1. Resolve the open error from `cargo build -p mnemo`"), "{text}");
        assert!(text.contains("2. Carry on with the latest request: Now run the tests"), "{text}");
    }

    /// Regression: the goal was the first user text (slash-command markup, a greeting), "Done"
    /// listed acknowledgements and tool-output ids, constraints and errors were lost, and the next
    /// steps asked again for work the last reply reported done.
    #[test]
    fn carries_the_work_and_nothing_else() {
        let events = vec![
            text_event(
                "e1",
                "t1",
                "user",
                "<command-name>/clear</command-name>\n<command-message>clear</command-message>",
            ),
            text_event("e2", "t2", "user", "hi"),
            text_event("e3", "t2", "model", "Hello! How can I help?"),
            text_event(
                "e4",
                "t3",
                "user",
                "Add a retry to the uploader in src/upload.rs. Performance is crucial here. Don't commit until the final step. Keep the config in settings.toml unchanged.",
            ),
            text_event("e5", "t3", "model", "You're absolutely right!"),
            call("e6", "t3", "c1", "exec_command", json!({"cmd": "cargo test -p upload"})),
            result(
                "e7",
                "t3",
                "c1",
                "exec_command",
                json!(
                    "Chunk ID: 22b2db\nWall time: 1.2 seconds\nProcess exited with code 101\nOutput:\nrunning 3 tests\nthread 'retry' panicked at src/upload.rs:40"
                ),
            ),
            call(
                "e8",
                "t3",
                "c2",
                "apply_patch",
                json!({"input": "*** Begin Patch\n*** Update File: src/upload.rs\n@@\n-a\n+b\n*** End Patch"}),
            ),
            result("e9", "t3", "c2", "apply_patch", json!("Done")),
            call("e10", "t3", "c3", "Read", json!({"file_path": "src/config.rs"})),
            result("e11", "t3", "c3", "Read", json!("fn config() {}")),
            call("e12", "t3", "c4", "exec_command", json!({"cmd": "cargo test -p upload"})),
            result(
                "e13",
                "t3",
                "c4",
                "exec_command",
                json!("Process exited with code 0\nOutput:\ntest result: ok. 3 passed"),
            ),
            text_event("e14", "t3", "model", "The uploader now retries three times; all tests pass."),
        ];
        let text = summary_of(&events);
        assert!(!text.contains("/clear") && !text.contains("Request: hi"), "{text}");
        assert!(text.contains("- Latest request: Add a retry to the uploader in src/upload.rs"), "{text}");
        assert!(text.contains("- User constraint (verbatim): Performance is crucial here."), "{text}");
        assert!(text.contains("- User constraint (verbatim): Don't commit until the final step."), "{text}");
        assert!(
            text.contains("Keep the config in settings.toml unchanged."),
            "a dotted name is no sentence end: {text}"
        );
        assert!(
            text.contains("- Changed: src/upload.rs") && text.contains("- Read: src/config.rs"),
            "{text}"
        );
        assert!(text.contains("- Ran `cargo test -p upload`: ok"), "{text}");
        assert!(!text.contains("Open error"), "the later success closed it: {text}");
        assert!(
            !text.contains("absolutely right") && !text.contains("Chunk ID") && !text.contains("Hello!"),
            "{text}"
        );
        assert!(text.contains("1. Wait for the user's next request"), "{text}");
        assert!(!text.contains("Carry on with"), "never asks again for work reported done: {text}");
    }

    #[test]
    fn rolls_forward_from_the_previous_summary_and_reaches_the_floor() {
        let events = session();
        let first =
            block_on(summarize_text(&ExtractiveSummarizer, &events[..4], None, &events[..4], None, 4));
        let first_text = first.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert!(first_text.contains("Open error"), "{first_text}");
        let previous = build_text(&events[..4], &first_text, None);
        let mut more = events.clone();
        more.push(call("e6", "t2", "c2", "shell", json!({"cmd": "cargo build -p mnemo"})));
        more.push(result("e7", "t2", "c2", "shell", json!("Finished")));
        let rolled =
            block_on(summarize_text(&ExtractiveSummarizer, &more, Some(&previous), &more[4..], None, 4));
        let rolled = rolled.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert!(rolled.contains("- Request: Fix the failing build"), "kept from before: {rolled}");
        assert!(rolled.contains("- Latest request: Now run the tests"), "{rolled}");
        assert!(!rolled.contains("Open error"), "superseded by the later success: {rolled}");
        let big: Vec<_> = (0..6)
            .map(|i| text_event(&format!("e{i}"), "t1", "user", &format!("{i} {}", "word ".repeat(1_800))))
            .collect();
        let summary = block_on(summarize_text(&ExtractiveSummarizer, &big, None, &big, None, 4));
        let text = summary.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert!(text.encode_utf16().count() >= 800, "{text}");
    }
}
