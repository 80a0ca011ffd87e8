//! The fitting guarantee: the history a request receives fits the history budget, or says exactly
//! why it cannot (decision 0125).
//!
//! Two tools, applied to the raw events of an assembled history and never to the log:
//! - **elision**: a tool result larger than its share of the budget keeps its head and its end, and
//!   its middle is replaced by a marker that says how much was cut, which event it was and how to
//!   read it whole (the log keeps every byte);
//! - **dropping**, the last resort when no checkpoint can be written (read-only assembly, a failed
//!   write): the oldest raw events go first, never a tool call without its result, never the
//!   request that opens the newest turn, and every drop is counted and explained.
//!
//! When the pinned items alone (a checkpoint block, the newest request) exceed the budget, the
//! history is returned as it is with a typed [`UnfitReason`].

use mnemo_core::{Author, Content, EventId, Position, Role, RuntimeEvent};
use serde::Serialize;
use serde_json::Value;

use crate::history::{AssembledHistory, HistoryItem, items_tokens};
use crate::policy::CompactionPolicy;
use crate::projection::{estimated_chars, utf16_len};

/// The smallest share of a tool result kept when its middle is elided, in characters.
pub const ELIDED_RESULT_CHARS_MIN: u64 = 1_024;
/// A tool result may take at most this fraction (1/N) of the history budget before its middle is
/// elided.
pub const RESULT_BUDGET_DIVISOR: u64 = 8;
/// The share of the kept characters taken from the head of an elided result (the rest is its end).
const HEAD_SHARE_NUM: u64 = 2;
const HEAD_SHARE_DEN: u64 = 3;

/// One tool result whose middle was elided from the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Elision {
    /// The event.
    pub event: EventId,
    /// Its log position.
    pub position: Position,
    /// Characters of the result (UTF-16 units, as every estimate).
    pub original_chars: u64,
    /// Characters removed from its middle.
    pub elided_chars: u64,
}

/// Events left out of a request, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// How many raw events.
    pub events: u64,
    /// Their estimated tokens.
    pub tokens: u64,
    /// The first and last dropped positions.
    pub positions: (Position, Position),
    /// Why no checkpoint stands in for them: `compaction_due` (read-only assembly: a compaction
    /// would fold them), or the typed reason a compaction failed.
    pub reason: String,
}

/// Why a history cannot fit its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnfitReason {
    /// The request that opens the newest turn is larger than the budget on its own.
    UserMessageExceedsBudget,
    /// The checkpoint's block plus the newest request exceed the budget.
    CheckpointExceedsBudget,
    /// The budget is below the supported minimum (a window of 4,096 tokens).
    BudgetTooSmall,
}

impl UnfitReason {
    /// Its code.
    pub fn code(self) -> &'static str {
        match self {
            UnfitReason::UserMessageExceedsBudget => "user_message_exceeds_budget",
            UnfitReason::CheckpointExceedsBudget => "checkpoint_exceeds_budget",
            UnfitReason::BudgetTooSmall => "budget_too_small",
        }
    }
}

/// The smallest window the guarantee holds for.
pub const WINDOW_MIN: u64 = 4_096;

/// Characters a single tool result may keep under `policy`.
pub fn result_cap_chars(policy: &CompactionPolicy) -> u64 {
    let budget_chars = policy.max_history().saturating_mul(policy.chars_per_token.max(1));
    (budget_chars / RESULT_BUDGET_DIVISOR).max(ELIDED_RESULT_CHARS_MIN)
}

/// The marker that replaces an elided middle.
pub fn elision_marker(event: &EventId, position: Position, elided: u64, total: u64) -> String {
    format!(
        "\n[... {elided} of {total} characters elided from the middle of this tool result (event {event}, \
         log position {position}); the log keeps it whole: read it with `mnemo log --from {position} \
         --limit 1 --json` ...]\n"
    )
}

fn output_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Characters of `text`'s first `n` UTF-16 units, rounded down to a character boundary.
fn take_utf16(text: &str, n: u64) -> &str {
    let mut units = 0u64;
    for (index, ch) in text.char_indices() {
        units += ch.len_utf16() as u64;
        if units > n {
            return &text[..index];
        }
    }
    text
}

fn last_utf16(text: &str, n: u64) -> &str {
    let mut units = 0u64;
    for (index, ch) in text.char_indices().rev() {
        units += ch.len_utf16() as u64;
        if units > n {
            return &text[index + ch.len_utf8()..];
        }
    }
    text
}

/// The middle of `text` elided so that `keep` of its characters remain around `marker`.
fn elide_text(text: &str, keep: u64, marker: &str) -> String {
    let head = take_utf16(text, keep * HEAD_SHARE_NUM / HEAD_SHARE_DEN);
    let tail = last_utf16(text, keep.saturating_sub(utf16_len(head)));
    format!("{head}{marker}{tail}")
}

/// The event with its oversized tool payload elided to about `cap` characters: a tool result's
/// middle, or the middles of a tool call's longest string arguments (the call stays valid JSON
/// with the same keys). `None` when the event is no tool payload or already small enough.
pub fn elide_event(event: &RuntimeEvent, position: Position, cap: u64) -> Option<(RuntimeEvent, Elision)> {
    match &event.content {
        Some(Content::FunctionResponse(response)) => {
            let provider =
                matches!((response.provider_executed, &response.provider_output), (Some(true), Some(_)));
            let output = if provider { response.provider_output.as_ref()? } else { &response.result };
            let text = output_text(output);
            let total = utf16_len(&text);
            if total <= cap {
                return None;
            }
            let marker = elision_marker(&event.id, position, total - cap, total);
            let shortened = Value::String(elide_text(&text, cap, &marker));
            let mut event = event.clone();
            if let Some(Content::FunctionResponse(response)) = &mut event.content {
                if provider {
                    response.provider_output = Some(shortened);
                } else {
                    response.result = shortened;
                }
            }
            let elision = Elision {
                event: event.id.clone(),
                position,
                original_chars: total,
                elided_chars: total - cap,
            };
            Some((event, elision))
        }
        Some(Content::FunctionCall(call)) => {
            let total = crate::projection::json_utf16_len(&call.args);
            if total <= cap {
                return None;
            }
            let mut args = call.args.clone();
            let mut leaves: Vec<u64> = Vec::new();
            string_leaves(&args, &mut leaves);
            leaves.sort_unstable_by(|a, b| b.cmp(a));
            // Shorten the longest strings to one common length that brings the call under its cap.
            let excess = total - cap;
            let mut limit = leaves.first().copied().unwrap_or(0);
            let mut saved = 0u64;
            while saved < excess && limit > ELIDED_ARG_CHARS_MIN {
                limit = (limit / 2).max(ELIDED_ARG_CHARS_MIN);
                saved = leaves.iter().map(|l| l.saturating_sub(limit)).sum();
            }
            if saved == 0 {
                return None;
            }
            let mut elided = 0u64;
            shorten_leaves(&mut args, limit, &event.id, position, &mut elided);
            let mut event = event.clone();
            if let Some(Content::FunctionCall(call)) = &mut event.content {
                call.args = args;
            }
            Some((
                event.clone(),
                Elision { event: event.id, position, original_chars: total, elided_chars: elided },
            ))
        }
        _ => None,
    }
}

/// The shortest a tool call's string argument is cut to.
pub const ELIDED_ARG_CHARS_MIN: u64 = 256;

fn string_leaves(value: &Value, out: &mut Vec<u64>) {
    match value {
        Value::String(text) => out.push(utf16_len(text)),
        Value::Array(items) => items.iter().for_each(|v| string_leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| string_leaves(v, out)),
        _ => {}
    }
}

fn shorten_leaves(value: &mut Value, limit: u64, event: &EventId, position: Position, elided: &mut u64) {
    match value {
        Value::String(text) => {
            let total = utf16_len(text);
            if total > limit {
                let marker = format!(
                    "\n[... {} of {total} characters of this tool call's argument elided (event {event}, log \
                     position {position}); the log keeps it whole: `mnemo log --from {position} --limit 1 \
                     --json` ...]\n",
                    total - limit
                );
                *elided += total - limit;
                *text = elide_text(text, limit, &marker);
            }
        }
        Value::Array(items) => {
            items.iter_mut().for_each(|v| shorten_leaves(v, limit, event, position, elided))
        }
        Value::Object(map) => {
            map.values_mut().for_each(|v| shorten_leaves(v, limit, event, position, elided))
        }
        _ => {}
    }
}

/// The estimated characters an event takes once elided under `cap`.
pub fn fitted_chars(event: &RuntimeEvent, cap: u64) -> u64 {
    match elide_event(event, Position::ZERO, cap) {
        Some((elided, _)) => estimated_chars(&elided),
        None => estimated_chars(event),
    }
}

/// What the fitting pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FitReport {
    /// Whether the history fits the budget.
    pub fits: bool,
    /// Tool results whose middle was elided.
    pub elided: Vec<Elision>,
    /// Raw events left out, if any.
    pub dropped: Option<Dropped>,
    /// Why it cannot fit, when it does not.
    pub unfit_reason: Option<UnfitReason>,
    /// Tool calls the log holds no result for although their conversation went on (a turn
    /// interrupted while the tool ran, a rollout that lost the output): the request answers each
    /// with a note saying so (see [`answer_unanswered_calls`]). Their call ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unanswered_calls: Vec<String>,
}

/// The prefix of the id of an answer the request makes up for a call the log holds no result for.
pub const UNANSWERED_CALL_ID_PREFIX: &str = "history-unanswered:";

/// What the made-up answer says.
pub const UNANSWERED_CALL_RESULT: &str =
    "No result was recorded for this tool call: the conversation went on before the tool answered.";

/// Gives every tool call in `history` that has no result in it although the conversation went on
/// after it an answer saying no result was recorded, placed after the run of calls and results it
/// belongs to. Providers refuse a request with a call left unanswered, and hosts write such calls
/// (an interrupted turn, a tool that never returned). A call in the run of calls and results at the
/// very end of the history is left alone: its tool may still be running. The log is not changed;
/// the answers are counted in `fit.unanswered_calls`. A history already answered is left as it is.
pub fn answer_unanswered_calls(history: &mut AssembledHistory, chars_per_token: u64) {
    let answered: std::collections::HashSet<String> = history
        .events()
        .filter_map(|event| match &event.content {
            Some(Content::FunctionResponse(response)) => Some(response.id.as_str().to_owned()),
            _ => None,
        })
        .collect();
    let mut items = Vec::with_capacity(history.items.len());
    let mut waiting: Vec<HistoryItem> = Vec::new();
    let mut unanswered = Vec::new();
    for item in std::mem::take(&mut history.items) {
        let in_tool_run = matches!(
            &item,
            HistoryItem::Event { event, .. }
                if matches!(event.content, Some(Content::FunctionCall(_) | Content::FunctionResponse(_)))
        );
        if !in_tool_run {
            // The conversation went on: the calls of the run before this item will not be answered.
            items.append(&mut waiting);
        }
        if let HistoryItem::Event { position, event } = &item
            && let Some(Content::FunctionCall(call)) = &event.content
            && !answered.contains(call.id.as_str())
            && let Some(answer) = unanswered_answer(event, call)
        {
            unanswered.push(call.id.as_str().to_owned());
            waiting.push(HistoryItem::Event { position: *position, event: Box::new(answer) });
        }
        items.push(item);
    }
    // A run of calls at the very end may still be answered: its made-up answers are taken back.
    let pending: Vec<String> = waiting
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Event { event, .. } => match &event.content {
                Some(Content::FunctionResponse(response)) => Some(response.id.as_str().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    unanswered.retain(|id| !pending.contains(id));
    history.items = items;
    if !unanswered.is_empty() {
        history.diagnostics.tokens_after = items_tokens(&history.items, chars_per_token);
        history.diagnostics.fit.unanswered_calls = unanswered;
    }
}

/// The answer the request gives `call` (made by `event`), or `None` when its id would not be valid.
fn unanswered_answer(event: &RuntimeEvent, call: &mnemo_core::FunctionCall) -> Option<RuntimeEvent> {
    let id = EventId::new(format!("{UNANSWERED_CALL_ID_PREFIX}{}", event.id.as_str())).ok()?;
    let mut response = mnemo_core::FunctionResponse::new(
        call.id.clone(),
        call.name.clone(),
        Value::String(UNANSWERED_CALL_RESULT.to_owned()),
    );
    response.is_error = Some(true);
    let mut answer = event.clone();
    answer.id = id;
    answer.role = Role::Tool;
    answer.author = Author::Tool;
    answer.content = Some(Content::FunctionResponse(response));
    answer.actions = None;
    answer.refs = None;
    answer.status = None;
    Some(answer)
}

fn is_user_request(event: &RuntimeEvent) -> bool {
    event.role == Role::User
        && event.author == Author::User
        && matches!(&event.content, Some(Content::Text(text)) if text.steering != Some(true))
}

/// Elides, then (only if `drop_reason` allows it) drops, until `history` fits its budget; records
/// what it did in the history's diagnostics and, for drops, in a note.
pub fn fit_history(history: &mut AssembledHistory, policy: &CompactionPolicy, drop_reason: Option<&str>) {
    let cpt = policy.chars_per_token;
    let max = policy.max_history();
    let mut report = FitReport::default();
    let mut tokens = items_tokens(&history.items, cpt);
    if tokens > max {
        let cap = result_cap_chars(policy);
        for item in &mut history.items {
            if let HistoryItem::Event { position, event } = item
                && let Some((elided, elision)) = elide_event(event, *position, cap)
            {
                **event = elided;
                report.elided.push(elision);
            }
        }
        tokens = items_tokens(&history.items, cpt);
    }
    if tokens > max
        && let Some(reason) = drop_reason
    {
        tokens = drop_oldest(history, policy, reason, &mut report);
    }
    report.fits = tokens <= max;
    if !report.fits {
        report.unfit_reason = Some(unfit_reason(history, policy));
    }
    history.diagnostics.tokens_after = tokens;
    history.diagnostics.fit = report;
}

fn unfit_reason(history: &AssembledHistory, policy: &CompactionPolicy) -> UnfitReason {
    if policy.context_window.is_some_and(|w| w < WINDOW_MIN) {
        return UnfitReason::BudgetTooSmall;
    }
    let has_checkpoint = history
        .items
        .iter()
        .any(|i| matches!(i, HistoryItem::Checkpoint { .. } | HistoryItem::ProviderState { .. }));
    let request_too_big = history.items.iter().any(|i| match i {
        HistoryItem::Event { event, .. } => {
            is_user_request(event)
                && crate::projection::estimate_events_tokens([event.as_ref()], policy.chars_per_token)
                    > policy.max_history()
        }
        _ => false,
    });
    if request_too_big || !has_checkpoint {
        UnfitReason::UserMessageExceedsBudget
    } else {
        UnfitReason::CheckpointExceedsBudget
    }
}

/// Drops the oldest raw events (never splitting a call from its result, never the request that
/// opens the newest turn) until the history fits; returns its tokens.
fn drop_oldest(
    history: &mut AssembledHistory,
    policy: &CompactionPolicy,
    reason: &str,
    report: &mut FitReport,
) -> u64 {
    let cpt = policy.chars_per_token;
    let max = policy.max_history();
    let item_tokens: Vec<u64> =
        history.items.iter().map(|item| items_tokens(std::slice::from_ref(item), cpt)).collect();
    let events: Vec<(usize, &RuntimeEvent)> = history
        .items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            HistoryItem::Event { event, .. } => Some((i, event.as_ref())),
            _ => None,
        })
        .collect();
    // The newest turn's request stays: the model must see what it is answering.
    let newest_turn = events.last().map(|(_, e)| e.turn_id.clone());
    let pinned = events
        .iter()
        .find(|(_, e)| Some(&e.turn_id) == newest_turn.as_ref() && is_user_request(e))
        .map(|(i, _)| *i);
    let plain: Vec<&RuntimeEvent> = events.iter().map(|(_, e)| *e).collect();
    let mut total: u64 = item_tokens.iter().sum();
    let mut remove = vec![false; history.items.len()];
    let (mut removed, mut removed_chars) = (0u64, 0u64);
    let (mut first, mut last) = (None::<Position>, None::<Position>);
    let mut index = 0usize;
    while total > max && index < events.len() {
        // A call goes with its result: drop the whole span up to the last result of its calls.
        let end = span_end(&plain, index);
        for (k, event) in events.iter().take(end + 1).skip(index) {
            if Some(*k) == pinned || remove[*k] {
                continue;
            }
            remove[*k] = true;
            removed += 1;
            removed_chars += estimated_chars(event);
            total -= item_tokens[*k];
            if let HistoryItem::Event { position, .. } = &history.items[*k] {
                first = Some(first.map_or(*position, |p| p.min(*position)));
                last = Some(last.map_or(*position, |p| p.max(*position)));
            }
        }
        index = end + 1;
    }
    if removed == 0 {
        return total;
    }
    let (first, last) = (first.unwrap_or(Position::ZERO), last.unwrap_or(Position::ZERO));
    // An elided event that was then dropped is not in the request: it is reported as dropped only.
    let dropped_positions: std::collections::HashSet<Position> = history
        .items
        .iter()
        .zip(&remove)
        .filter_map(|(item, gone)| match item {
            HistoryItem::Event { position, .. } if *gone => Some(*position),
            _ => None,
        })
        .collect();
    report.elided.retain(|elision| !dropped_positions.contains(&elision.position));
    let dropped = Dropped {
        events: removed,
        tokens: crate::projection::estimate_tokens(removed_chars, cpt),
        positions: (first, last),
        reason: reason.to_owned(),
    };
    history.notes.push(crate::history::Note {
        kind: "context_history_dropped".to_owned(),
        text: format!(
            "{} earlier events (~{} tokens, log positions {}..={}) are not in this request: {}.",
            dropped.events,
            dropped.tokens,
            first,
            last,
            drop_explanation(reason)
        ),
    });
    report.dropped = Some(dropped);
    let mut index = 0usize;
    history.items.retain(|_| {
        let keep = !remove[index];
        index += 1;
        keep
    });
    total
}

fn drop_explanation(reason: &str) -> String {
    match reason {
        "compaction_due" => {
            "no checkpoint covers them yet; a compaction (`mnemo compact`, or the runtime's next turn) \
             folds them into a summary"
                .to_owned()
        }
        other => format!("the compaction that would have summarised them failed ({other})"),
    }
}

/// The index of the last event that must leave together with `events[index]`: a span from it that
/// holds the result of every call in it. Parallel calls come before their results (`call A, call B,
/// result A, result B`), so the span of `call A` reaches `result B`; a span ending at `result A`
/// would leave `result B` in the request without its call, which providers refuse.
fn span_end(events: &[&RuntimeEvent], index: usize) -> usize {
    let mut end = pair_end(events, index);
    let mut k = index + 1;
    while k <= end {
        end = end.max(pair_end(events, k));
        k += 1;
    }
    end
}

/// The index of the last event that must leave together with `events[index]`: the result of a
/// call, else the event itself.
fn pair_end(events: &[&RuntimeEvent], index: usize) -> usize {
    let Some(Content::FunctionCall(call)) = &events[index].content else {
        return index;
    };
    events
        .iter()
        .enumerate()
        .skip(index + 1)
        .find(|(_, e)| matches!(&e.content, Some(Content::FunctionResponse(r)) if r.id == call.id))
        .map_or(index, |(j, _)| j)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{call, result, text_event};

    #[test]
    fn elision_keeps_head_and_end_and_says_how_to_read_the_rest() {
        let big = format!("HEAD{}TAIL", "x".repeat(10_000));
        let event = result("e2", "t1", "c1", "shell", json!(big));
        let (elided, elision) = elide_event(&event, Position(7), 1_200).unwrap_or_else(|| panic!("elided"));
        let Some(Content::FunctionResponse(response)) = &elided.content else { panic!("response") };
        let text = response.result.as_str().unwrap_or_default();
        assert!(text.starts_with("HEAD") && text.ends_with("TAIL"), "{text}");
        assert!(text.contains("event e2") && text.contains("--from 7"), "{text}");
        assert_eq!(elision.original_chars, 10_008);
        assert_eq!(elision.elided_chars, 10_008 - 1_200);
        let write = call("e3", "t1", "c2", "Write", json!({"file_path": "a.md", "content": big}));
        let (elided, elision) = elide_event(&write, Position(8), 1_200).unwrap_or_else(|| panic!("elided"));
        let Some(Content::FunctionCall(shortened)) = &elided.content else { panic!("call") };
        assert_eq!(shortened.args["file_path"], json!("a.md"));
        let content = shortened.args["content"].as_str().unwrap_or_default();
        assert!(content.starts_with("HEAD") && content.ends_with("TAIL") && content.contains("--from 8"));
        assert!(crate::projection::estimated_chars(&elided) < 2_000, "{}", elision.elided_chars);
        assert!(elide_event(&text_event("e1", "t1", "user", &big), Position(1), 100).is_none());
    }

    /// The event ids of a history's events, and the call ids its made-up answers answer.
    fn shape(history: &AssembledHistory) -> Vec<String> {
        history
            .events()
            .map(|event| match &event.content {
                Some(Content::FunctionResponse(r))
                    if event.id.as_str().starts_with(UNANSWERED_CALL_ID_PREFIX) =>
                {
                    assert_eq!(r.result, json!(UNANSWERED_CALL_RESULT));
                    assert_eq!(
                        (event.role, event.author, r.is_error),
                        (Role::Tool, Author::Tool, Some(true))
                    );
                    format!("answer {}", r.id.as_str())
                }
                _ => event.id.as_str().to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_call_left_without_result_is_answered_where_its_run_ends_but_not_at_the_end() {
        let policy = CompactionPolicy::default();
        let events = [
            text_event("e1", "t1", "user", "go"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "sleep 600"})),
            call("e3", "t1", "c2", "shell", json!({"cmd": "ls"})),
            result("e4", "t1", "c2", "shell", json!("ok")),
            text_event("e5", "t2", "user", "stop, do something else"),
            call("e6", "t2", "c3", "shell", json!({"cmd": "pwd"})),
            text_event("e7", "t2", "model", "waiting"),
            result("e8", "t2", "c3", "shell", json!("/")),
            call("e9", "t2", "c4", "shell", json!({"cmd": "make"})),
        ];
        let mut history = AssembledHistory {
            session: mnemo_core::SessionId::new("s").unwrap_or_else(|e| panic!("{e}")),
            position: Position(9),
            items: events
                .iter()
                .enumerate()
                .map(|(i, e)| HistoryItem::Event {
                    position: Position(i as u64 + 1),
                    event: Box::new(e.clone()),
                })
                .collect(),
            boundary: None,
            diagnostics: crate::history::empty_diagnostics(&policy),
            notes: Vec::new(),
        };
        answer_unanswered_calls(&mut history, policy.chars_per_token);
        // c1 is answered after its run (c1, c2, c2's result); c3's result comes later; c4 may still run.
        assert_eq!(shape(&history), ["e1", "e2", "e3", "e4", "answer c1", "e5", "e6", "e7", "e8", "e9"]);
        assert_eq!(history.diagnostics.fit.unanswered_calls, ["c1"]);
        let tokens = history.diagnostics.tokens_after;
        assert!(tokens > 0);
        answer_unanswered_calls(&mut history, policy.chars_per_token);
        assert_eq!(shape(&history).len(), 10, "a second pass answers nothing more");
    }

    #[test]
    fn pairs_leave_together() {
        let events = [
            text_event("e1", "t1", "user", "go"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "ls"})),
            text_event("e3", "t1", "model", "waiting"),
            result("e4", "t1", "c1", "shell", json!("ok")),
        ];
        let refs: Vec<&RuntimeEvent> = events.iter().collect();
        assert_eq!(pair_end(&refs, 1), 3);
        assert_eq!(pair_end(&refs, 2), 2);
    }

    #[test]
    fn parallel_calls_leave_with_every_result() {
        // Claude Code and Codex record parallel calls first, then their results.
        let events = [
            text_event("e1", "t1", "user", "go"),
            call("e2", "t1", "c1", "Read", json!({"file_path": "a"})),
            call("e3", "t1", "c2", "Read", json!({"file_path": "b"})),
            call("e4", "t1", "c3", "Glob", json!({"pattern": "*"})),
            result("e5", "t1", "c1", "Read", json!("a")),
            result("e6", "t1", "c3", "Glob", json!("*")),
            result("e7", "t1", "c2", "Read", json!("b")),
            text_event("e8", "t1", "model", "done"),
        ];
        let refs: Vec<&RuntimeEvent> = events.iter().collect();
        assert_eq!(span_end(&refs, 1), 6);
        assert_eq!(span_end(&refs, 7), 7);
    }
}
