//! The embedded summarizer: deterministic and extractive, so everything runs offline. It fills every
//! required section from the conversation it is given: the goal from the user's requests, progress
//! from completed tool work and replies, next steps from what is unfinished or failed, and critical
//! context with the exact paths, commands and errors. Every line is copied from the events, so its
//! claims are faithful by construction.

use serde_json::Value;

use crate::claims::paths;
use crate::summarizer::{
    BoxFuture, FinishReason, SummarizeError, Summarizer, SummarizerIdentity, SummaryRequest, SummaryResponse,
};
use crate::summary::{SUMMARY_FLOOR_SPAN_TOKENS, SUMMARY_FLOOR_TOKENS};

/// The embedded summarizer's name in manifests.
pub const EXTRACTIVE_SUMMARIZER_NAME: &str = "mnemo.extractive";
/// The version of its algorithm.
pub const EXTRACTIVE_SUMMARIZER_VERSION: &str = "1";

/// Longest excerpt line, in characters.
const LINE_CHARS_MAX: usize = 240;
/// Most lines kept in "Done".
const DONE_LINES_MAX: usize = 24;
/// Most lines kept in "Critical Context".
const CONTEXT_LINES_MAX: usize = 40;

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
    Result { id: String, name: String, value: String, error: bool },
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
                        name: part["toolName"].as_str().unwrap_or_default().to_owned(),
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
    if line.chars().count() > max_chars {
        line = line.chars().take(max_chars).collect();
    }
    loop {
        let trimmed = line.trim_end();
        let stripped = ["...", ":", "：", ",", "，", "、", ";", "；", "…", "(", "（", "—"]
            .iter()
            .find_map(|mark| trimmed.strip_suffix(mark));
        match stripped {
            Some(rest) => line = rest.to_owned(),
            None => return trimmed.to_owned(),
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default()
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
    if !line.trim_start_matches("- ").is_empty() && !lines.contains(&line) {
        lines.push(line);
    }
}

fn summarize(request: &SummaryRequest) -> String {
    let items = items(request);
    let prior = request.previous_summary.as_deref();
    let users: Vec<&String> =
        items.iter().filter_map(|i| if let Item::User(t) = i { Some(t) } else { None }).collect();

    let mut goal = previous_section(prior, "## Goal");
    match (goal.is_empty(), users.first(), users.last()) {
        (true, Some(first), _) => goal.push(clean(first, LINE_CHARS_MAX)),
        (false, _, Some(last)) => {
            push_unique(&mut goal, format!("- Latest request: {}", clean(last, LINE_CHARS_MAX)))
        }
        _ => {}
    }
    if goal.iter().all(|l| l.trim().is_empty()) {
        goal = vec!["Continue the task the conversation is about.".to_owned()];
    }

    let mut done = previous_section(prior, "## Progress");
    done.retain(|l| !l.starts_with("- Working on") && !l.starts_with("- Waiting on"));
    let mut open_calls: Vec<(String, String)> = Vec::new();
    let mut last_error: Option<(String, String)> = None;
    for item in &items {
        match item {
            Item::Call { id, name, .. } => open_calls.push((id.clone(), name.clone())),
            Item::Result { id, name, value, error } => {
                open_calls.retain(|(open, _)| open != id);
                let call = items.iter().find_map(|i| match i {
                    Item::Call { id: call_id, input, .. } if call_id == id => command_of(input),
                    _ => None,
                });
                let what = call.map_or_else(|| format!("`{name}`"), |cmd| format!("`{name}` `{cmd}`"));
                let outcome = if *error { "failed" } else { "returned" };
                push_unique(
                    &mut done,
                    format!("- Ran {what}; it {outcome} {}", clean(first_line(value), 160)),
                );
                last_error = error.then(|| (name.clone(), clean(first_line(value), 200)));
                if !error {
                    last_error = None;
                }
            }
            Item::Reply(text) => {
                push_unique(&mut done, format!("- Replied: {}", clean(first_line(text), 200)))
            }
            Item::User(_) => {}
        }
    }
    if done.len() > DONE_LINES_MAX {
        done.drain(..done.len() - DONE_LINES_MAX);
    }
    if done.is_empty() {
        done.push("- Nothing completed yet.".to_owned());
    }

    let mut in_progress: Vec<String> =
        open_calls.iter().map(|(_, name)| format!("- Waiting on `{name}`")).collect();
    if let Some(Item::User(text)) = items.last() {
        in_progress.push(format!("- Working on: {}", clean(text, LINE_CHARS_MAX)));
    }

    let mut next = Vec::new();
    if let Some((name, error)) = &last_error {
        next.push(format!("Resolve the failure of `{name}`: {error}"));
    }
    if let Some(last) = users.last() {
        next.push(format!("Continue with the latest request: {}", clean(last, LINE_CHARS_MAX)));
    }
    if next.is_empty() {
        next.push("Continue from the latest event.".to_owned());
    }

    let mut context = previous_section(prior, "## Critical Context");
    context.retain(|l| l.trim() != "(none)");
    for item in &items {
        let text = match item {
            Item::User(t) | Item::Reply(t) => t.clone(),
            Item::Call { input, .. } => {
                if let Some(cmd) = command_of(input) {
                    push_unique(&mut context, format!("- Command: `{cmd}`"));
                }
                input.to_string()
            }
            Item::Result { value, error, name, .. } => {
                if *error {
                    push_unique(
                        &mut context,
                        format!("- Error from `{name}`: {}", clean(first_line(value), 200)),
                    );
                }
                value.clone()
            }
        };
        for path in paths(&text) {
            push_unique(&mut context, format!("- Path: {}", clean(&path, 200)));
        }
    }
    if context.len() > CONTEXT_LINES_MAX {
        context.drain(..context.len() - CONTEXT_LINES_MAX);
    }
    if context.is_empty() {
        context.push("(none)".to_owned());
    }

    let mut summary = render(&goal, &done, &in_progress, &next, &context);
    if request.span_tokens > SUMMARY_FLOOR_SPAN_TOKENS {
        summary = pad_to_floor(summary, &items);
    }
    summary
}

fn render(
    goal: &[String],
    done: &[String],
    in_progress: &[String],
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
    out.push_str("\n\n## Next Steps\n");
    for (index, step) in next.iter().enumerate() {
        out.push_str(&format!("{}. {step}\n", index + 1));
    }
    out.push_str("\n## Critical Context\n");
    out.push_str(&context.join("\n"));
    out
}

/// A summary standing in for a large span must reach the size floor: add verbatim excerpts of the
/// newest events until it does.
fn pad_to_floor(mut summary: String, items: &[Item]) -> String {
    let floor_chars = (SUMMARY_FLOOR_TOKENS * 4 + 100) as usize;
    if summary.encode_utf16().count() >= floor_chars {
        return summary;
    }
    summary.push_str("\n\n### Excerpts");
    for item in items.iter().rev() {
        let text = match item {
            Item::User(t) | Item::Reply(t) => t.clone(),
            Item::Call { input, .. } => input.to_string(),
            Item::Result { value, .. } => value.clone(),
        };
        let excerpt = clean(&text, 400);
        if !excerpt.is_empty() {
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

    fn session() -> Vec<mnemo_core::RuntimeEvent> {
        vec![
            text_event("e1", "t1", "user", "Fix the failing build in crates/mnemo/src/lib.rs"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "cargo build -p mnemo"})),
            result("e3", "t1", "c1", "shell", json!("error[E0308]: mismatched types")),
            text_event("e4", "t1", "model", "The return type of open() was wrong; fixed it."),
            text_event("e5", "t2", "user", "Now run the tests:"),
        ]
    }

    #[test]
    fn fills_every_section_faithfully() {
        let events = session();
        let summary = block_on(summarize_text(&ExtractiveSummarizer, &events, None, &events, None, 4));
        let text = summary.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert_eq!(find_summary_defect(&text, SummaryChecks::full(10, 4)), None, "{text}");
        assert!(text.contains("crates/mnemo/src/lib.rs"), "{text}");
        assert!(text.contains("`cargo build -p mnemo`"), "{text}");
        assert!(text.contains("error[E0308]: mismatched types"), "{text}");
        assert!(text.contains("Continue with the latest request: Now run the tests"), "{text}");
        let report = check_faithfulness(&text, &events);
        assert_eq!(report.unsupported, Vec::<String>::new(), "{text}");
    }

    #[test]
    fn rolls_forward_from_the_previous_summary_and_reaches_the_floor() {
        let events = session();
        let first =
            block_on(summarize_text(&ExtractiveSummarizer, &events[..4], None, &events[..4], None, 4));
        let first_text = first.ok().flatten().map(|s| s.text).unwrap_or_default();
        let previous = build_text(&events[..4], &first_text, None);
        let rolled =
            block_on(summarize_text(&ExtractiveSummarizer, &events, Some(&previous), &events[4..], None, 4));
        let rolled = rolled.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert!(rolled.contains("Fix the failing build"), "{rolled}");
        assert!(rolled.contains("Latest request: Now run the tests"), "{rolled}");
        let big: Vec<_> = (0..6)
            .map(|i| text_event(&format!("e{i}"), "t1", "user", &format!("{i} {}", "word ".repeat(1_800))))
            .collect();
        let summary = block_on(summarize_text(&ExtractiveSummarizer, &big, None, &big, None, 4));
        let text = summary.ok().flatten().map(|s| s.text).unwrap_or_default();
        assert!(text.encode_utf16().count() >= 800, "{text}");
    }
}
