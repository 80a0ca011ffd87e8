//! The model seams of compaction: the text [`Summarizer`] (V2) and the [`ProviderCompactor`] (V3),
//! the input they are given (compaction.md §2.2), and the checks run on what they return (§2.3,
//! §3.10).
//!
//! Both traits are async and object-safe (boxed futures). Their output is recorded in the
//! checkpoint, so replay never calls a model.

use std::future::Future;
use std::pin::Pin;

use mnemo_core::redaction::redact_secrets;
use mnemo_core::{
    CheckpointBody, CheckpointRecord, Content, Digest, ModelVisibility, ProviderState, ProviderStateKind,
    Role, RuntimeEvent,
};
use serde_json::{Value, json};

use crate::checkpoint::{Connection, PROVIDER_PART_KIND, provider_message};
use crate::projection::{estimate_events_tokens, stable_json, utf16_len};
use crate::summary::{SUMMARY_FORMAT_TEMPLATE, SummaryChecks, SummaryDefect, find_summary_defect};

/// A boxed, sendable future: what the model seams return, so the traits stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The marker an oversized tool output is replaced with when the input must shrink.
pub const TOOL_OUTPUT_OMITTED: &str =
    "[Tool output omitted because it exceeded the compaction input budget.]";

/// The version of [`summarizer_instructions`]; recorded in each checkpoint's manifest.
pub const PROMPT_VERSION: &str = "mnemo.summary_prompt.v1";

/// The system instructions a text summarizer is given. The template is the validator's own.
pub fn summarizer_instructions() -> String {
    format!(
        "You are a context-summarisation assistant. Read the conversation between a user and an \
         assistant and produce a structured summary that another model will use to continue the same \
         task. Do not continue the conversation and do not answer questions in it: output only the \
         summary. Use exactly this format:\n\n{SUMMARY_FORMAT_TEMPLATE}\n\nKeep each section concise, \
         but preserve exact file paths, function names, commands and error messages."
    )
}

/// Why a summarizer or compactor produced nothing usable. The codes are the reference system's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// The model stopped at its output limit; partial text is never used.
    #[error("the summary was cut off at the output limit")]
    OutputLength,
    /// The input does not fit the budget even with every tool output omitted; nothing was sent.
    #[error("summarizer input of {estimate} tokens does not fit the budget of {budget}")]
    InputTooLarge {
        /// The estimate after shrinking, in tokens.
        estimate: u64,
        /// The budget, in tokens.
        budget: u64,
    },
    /// The provider failed.
    #[error("provider error: {0}")]
    Provider(String),
    /// V3 output did not carry exactly one valid compaction item.
    #[error("invalid provider state: {0}")]
    InvalidProviderState(String),
    /// The summary breaks a rule of §2.3.
    #[error("malformed summary: {}", .0.code())]
    Malformed(SummaryDefect),
    /// The caller aborted the compaction.
    #[error("compaction aborted")]
    Aborted,
}

impl SummarizeError {
    /// The reason code a fail-open decision reports.
    pub fn reason(&self) -> &'static str {
        match self {
            SummarizeError::OutputLength => "output_length",
            SummarizeError::InputTooLarge { .. } => "input_too_large",
            SummarizeError::Provider(_) => "provider_error",
            SummarizeError::InvalidProviderState(_) => "invalid_provider_state",
            SummarizeError::Malformed(defect) => defect.code(),
            SummarizeError::Aborted => "aborted",
        }
    }
}

/// Who a summarizer is, for the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarizerIdentity {
    /// Its name (an embedded summarizer's, or a provider and model).
    pub name: String,
    /// The version of the prompt or algorithm.
    pub prompt_version: String,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinishReason {
    /// It finished.
    Stop,
    /// It hit the output limit.
    Length,
}

/// What a text summarizer is given.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// The system instructions.
    pub instructions: String,
    /// The conversation as provider messages (user / assistant / tool), fitted to the budget.
    pub messages: Vec<Value>,
    /// The previous summary when rolling forward (it is also the first message).
    pub previous_summary: Option<String>,
    /// The token estimate of the whole span the summary will replace.
    pub span_tokens: u64,
    /// Digest of the instructions and messages: the manifest's input digest.
    pub input_digest: Digest,
}

/// What a text summarizer returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryResponse {
    /// The summary text.
    pub text: String,
    /// Why the model stopped.
    pub finish: FinishReason,
}

/// A text summarizer (V2).
pub trait Summarizer: Send + Sync + std::fmt::Debug {
    /// Who it is.
    fn identity(&self) -> SummarizerIdentity;
    /// Whether its input must fit the history budget (a model's context is bounded). An embedded,
    /// non-model summarizer may take any input.
    fn limits_input(&self) -> bool {
        true
    }
    /// Summarizes the request's conversation.
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>>;
}

/// What a provider compactor is given.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderCompactionRequest {
    /// The conversation, led by the previous compaction item when rolling forward.
    pub messages: Vec<Value>,
    /// Digest of the messages.
    pub input_digest: Digest,
}

/// A provider-native compactor (V3), bound to one connection and model.
pub trait ProviderCompactor: Send + Sync + std::fmt::Debug {
    /// Who it is.
    fn identity(&self) -> SummarizerIdentity;
    /// The connection and model its state is bound to.
    fn connection(&self) -> Connection;
    /// Compacts the conversation; returns the output parts of the provider's response.
    fn compact<'a>(
        &'a self,
        request: &'a ProviderCompactionRequest,
    ) -> BoxFuture<'a, Result<Vec<Value>, SummarizeError>>;
}

/// Projects events into provider messages for a summarizer (§2.2): partial, hidden, error and
/// system events are dropped, thinking is skipped, a step's tool calls share one assistant message
/// and its results follow it.
pub fn project_messages(events: &[RuntimeEvent]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut step = OpenStep::default();
    for event in events {
        if event.partial || event.model_visibility == Some(ModelVisibility::Hidden) {
            continue;
        }
        let step_id = event.refs.as_ref().and_then(|r| r.step_id.clone());
        match (&event.content, event.role) {
            (Some(Content::Text(text)), Role::User) if !text.text.is_empty() => {
                step.flush(&mut out);
                let body = if text.steering == Some(true) {
                    format!("<steering>\n{}\n</steering>", text.text)
                } else {
                    text.text.clone()
                };
                out.push(json!({"role": "user", "content": [{"type": "text", "text": body}]}));
            }
            (Some(Content::Text(text)), Role::Model) if !text.text.is_empty() => {
                step.join(step_id, &mut out);
                step.parts.push(json!({"type": "text", "text": text.text}));
            }
            (Some(Content::FunctionCall(call)), _) => {
                step.join(step_id, &mut out);
                step.parts.push(json!({
                    "type": "tool-call", "toolCallId": call.id.as_str(), "toolName": call.name, "input": call.args,
                }));
                step.open_calls.push(call.id.as_str().to_owned());
                step.calls.push(call.id.as_str().to_owned());
            }
            (Some(Content::FunctionResponse(response)), _) => {
                let output = tool_output(&response.result, response.is_error == Some(true));
                let part = json!({
                    "type": "tool-result", "toolCallId": response.id.as_str(), "toolName": response.name, "output": output,
                });
                if step.calls.iter().any(|c| c == response.id.as_str()) {
                    step.open_calls.retain(|c| c != response.id.as_str());
                    step.results.push(part);
                } else {
                    step.flush(&mut out);
                    out.push(json!({"role": "tool", "content": [part]}));
                }
            }
            _ => {}
        }
    }
    step.flush(&mut out);
    out
}

fn tool_output(result: &Value, is_error: bool) -> Value {
    match (result, is_error) {
        (Value::String(text), true) => json!({"type": "error-text", "value": text}),
        (Value::String(text), false) => json!({"type": "text", "value": text}),
        (other, true) => json!({"type": "error-json", "value": other}),
        (other, false) => json!({"type": "json", "value": other}),
    }
}

/// The assistant step being assembled.
#[derive(Debug, Default)]
struct OpenStep {
    step_id: Option<String>,
    parts: Vec<Value>,
    calls: Vec<String>,
    open_calls: Vec<String>,
    results: Vec<Value>,
}

impl OpenStep {
    /// Makes the open step the one an assistant item with `step_id` belongs to: the same step id
    /// decides when both carry one; otherwise an item joins while calls are unsettled, or while
    /// the step has no calls yet.
    fn join(&mut self, step_id: Option<String>, out: &mut Vec<Value>) {
        let same = match (&self.step_id, &step_id) {
            (Some(open), Some(item)) => open == item,
            _ => !self.open_calls.is_empty() || self.calls.is_empty(),
        };
        if !same || (!self.results.is_empty() && self.open_calls.is_empty()) {
            self.flush(out);
        }
        if self.step_id.is_none() {
            self.step_id = step_id;
        }
    }

    fn flush(&mut self, out: &mut Vec<Value>) {
        if !self.parts.is_empty() {
            out.push(json!({"role": "assistant", "content": std::mem::take(&mut self.parts)}));
        }
        if !self.results.is_empty() {
            out.push(json!({"role": "tool", "content": std::mem::take(&mut self.results)}));
        }
        *self = OpenStep::default();
    }
}

/// Fits messages into `budget_tokens` (§2.2): if over, replace tool outputs oldest first with
/// [`TOOL_OUTPUT_OMITTED`] (only where that shrinks them) until the input fits; if it never fits,
/// fail before anything is sent. Call and result pairs are always kept.
pub fn fit_input(
    mut messages: Vec<Value>,
    fixed_chars: u64,
    budget_tokens: Option<u64>,
    chars_per_token: u64,
) -> Result<Vec<Value>, SummarizeError> {
    let Some(budget) = budget_tokens.filter(|b| *b > 0) else {
        return Ok(messages);
    };
    let limit = budget.saturating_mul(chars_per_token.max(1));
    let size =
        |messages: &[Value]| fixed_chars + utf16_len(&serde_json::to_string(messages).unwrap_or_default());
    let mut total = size(&messages);
    'walk: for message in messages.iter_mut() {
        if total <= limit {
            break;
        }
        let Some(parts) = message.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        for part in parts.iter_mut() {
            if total <= limit {
                break 'walk;
            }
            if part.get("type") != Some(&json!("tool-result")) {
                continue;
            }
            let is_error = part["output"]["type"].as_str().is_some_and(|t| t.starts_with("error"));
            let marker =
                json!({"type": if is_error { "error-text" } else { "text" }, "value": TOOL_OUTPUT_OMITTED});
            let before = utf16_len(&part["output"].to_string());
            let after = utf16_len(&marker.to_string());
            if after < before {
                part["output"] = marker;
                total = total - before + after;
            }
        }
    }
    let total = size(&messages);
    if total > limit {
        return Err(SummarizeError::InputTooLarge {
            estimate: total.div_ceil(chars_per_token.max(1)),
            budget,
        });
    }
    Ok(messages)
}

/// The summary a text checkpoint may roll forward from: the previous checkpoint's, if it is text.
pub fn previous_summary(previous: Option<&CheckpointRecord>) -> Option<&str> {
    match previous.map(|p| &p.body) {
        Some(CheckpointBody::Text { summary, .. }) => Some(summary),
        _ => None,
    }
}

/// What a successful text summarization produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSummary {
    /// The summary.
    pub text: String,
    /// Digest of the exact input.
    pub input_digest: Digest,
}

/// Runs a text summarizer over a fold (§2.2) and checks its output (§2.3): rolling from a text
/// predecessor sends its summary and the newly folded events only; a provider-state predecessor is
/// ignored and the whole span re-summarised; an empty selection returns the previous summary (or
/// nothing) without a call. A `length` finish is `output_length`; the output must pass every rule
/// over the whole folded span.
///
/// A selection larger than the summarizer's input budget, even with every tool output omitted, is
/// summarised in parts (decision 0195): the longest settled part that fits is summarised, and each
/// next part is sent with the summary so far as its rolling preface, up to [`SUMMARY_PARTS_MAX`]
/// calls. Only a part that cannot fit on its own (one huge message) is `input_too_large`.
///
/// The accepted text has passed through the shared secret redaction: a summary is logged, sent with
/// every later request and copied with the conversation, so a credential the events held (and the
/// extractive summarizer or a host's model repeated) is never recorded in one.
pub async fn summarize_text(
    summarizer: &dyn Summarizer,
    folded: &[RuntimeEvent],
    previous: Option<&CheckpointRecord>,
    newly_folded: &[RuntimeEvent],
    budget_tokens: Option<u64>,
    chars_per_token: u64,
) -> Result<Option<TextSummary>, SummarizeError> {
    let prior = previous_summary(previous);
    let selected = if prior.is_some() { newly_folded } else { folded };
    if selected.is_empty() {
        return Ok(prior.map(|text| TextSummary {
            // A summary recorded before redaction covered a rule is redacted when it rolls forward.
            text: redact_secrets(text).into_owned(),
            input_digest: Digest::sha256(text.as_bytes()),
        }));
    }
    let instructions = summarizer_instructions();
    let budget_tokens = budget_tokens.filter(|_| summarizer.limits_input());
    // The events before `selected` in `folded`: a rolling fold selects a suffix of the span.
    let covered_before = folded.len().saturating_sub(selected.len());
    let cuts = settled_cuts(selected);
    let mut rolling = prior.map(str::to_owned);
    let mut start = 0;
    let mut digests = Vec::new();
    while start < selected.len() {
        if digests.len() == SUMMARY_PARTS_MAX {
            return Err(SummarizeError::InputTooLarge {
                estimate: estimate_events_tokens(&selected[start..], chars_per_token),
                budget: budget_tokens.unwrap_or_default(),
            });
        }
        let (end, messages) = largest_fitting_part(
            selected,
            start,
            &cuts,
            rolling.as_deref(),
            &instructions,
            budget_tokens,
            chars_per_token,
        )?;
        // Each part is checked against the span summarised so far; the last one against the whole.
        let span_tokens = estimate_events_tokens(&folded[..covered_before + end], chars_per_token);
        let input_digest = Digest::sha256(stable_json(&json!([instructions, messages])).as_bytes());
        let request = SummaryRequest {
            instructions: instructions.clone(),
            messages,
            previous_summary: rolling.clone(),
            span_tokens,
            input_digest,
        };
        let response = summarizer.summarize(&request).await?;
        if response.finish == FinishReason::Length {
            return Err(SummarizeError::OutputLength);
        }
        let text = redact_secrets(response.text.trim()).into_owned();
        if text.is_empty() {
            return Ok(None);
        }
        if let Some(defect) = find_summary_defect(&text, SummaryChecks::full(span_tokens, chars_per_token)) {
            return Err(SummarizeError::Malformed(defect));
        }
        digests.push(input_digest);
        rolling = Some(text);
        start = end;
    }
    let text = rolling.unwrap_or_default();
    let input_digest = match digests.as_slice() {
        [only] => *only,
        parts => Digest::sha256(parts.iter().map(Digest::to_hex).collect::<Vec<_>>().join("\n").as_bytes()),
    };
    Ok(Some(TextSummary { text, input_digest }))
}

/// The most model calls one text summarization makes when its fold is larger than the
/// summarizer's input (each call rolls the summary so far forward over the next part).
pub const SUMMARY_PARTS_MAX: usize = 32;

/// The summarizer's messages for one part: the rolling preface (when there is a summary so far)
/// and the part's events.
fn part_messages(rolling: Option<&str>, events: &[RuntimeEvent]) -> Vec<Value> {
    let mut messages = Vec::new();
    if let Some(summary) = rolling {
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": format!(
            "This is the previous continuation summary:\n\n{summary}\n\nUpdate it using the newer events that follow."
        )}]}));
    }
    messages.extend(project_messages(events));
    messages
}

/// Where a fold may be cut into parts: after an event at which no tool call is waiting for its
/// result, so a call and its result always travel in the same part. Ends with `events.len()`.
fn settled_cuts(events: &[RuntimeEvent]) -> Vec<usize> {
    let mut open: Vec<&str> = Vec::new();
    let mut cuts = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match &event.content {
            Some(Content::FunctionCall(call)) => open.push(call.id.as_str()),
            Some(Content::FunctionResponse(response)) => open.retain(|id| *id != response.id.as_str()),
            _ => {}
        }
        if open.is_empty() && index + 1 < events.len() {
            cuts.push(index + 1);
        }
    }
    cuts.push(events.len());
    cuts
}

/// The longest part from `start` that fits the input budget (§2.2's fitting applied to the part):
/// the whole rest when it fits, as one call always did; else the largest settled cut that fits.
/// When not even the shortest part fits, its `input_too_large` is the answer.
fn largest_fitting_part(
    events: &[RuntimeEvent],
    start: usize,
    cuts: &[usize],
    rolling: Option<&str>,
    instructions: &str,
    budget_tokens: Option<u64>,
    chars_per_token: u64,
) -> Result<(usize, Vec<Value>), SummarizeError> {
    let fit = |end: usize| {
        fit_input(
            part_messages(rolling, &events[start..end]),
            utf16_len(instructions),
            budget_tokens,
            chars_per_token,
        )
    };
    let ends: Vec<usize> = cuts.iter().copied().filter(|&cut| cut > start).collect();
    let whole = ends.last().copied().unwrap_or(events.len());
    let error = match fit(whole) {
        Ok(messages) => return Ok((whole, messages)),
        Err(error) => error,
    };
    // Fitting only grows with the part, so the last end that fits is found by bisection.
    let (mut low, mut high) = (0, ends.len() - 1);
    let mut best = None;
    while low < high {
        let middle = low + (high - low) / 2;
        match fit(ends[middle]) {
            Ok(messages) => {
                best = Some((ends[middle], messages));
                low = middle + 1;
            }
            Err(_) => high = middle,
        }
    }
    match best {
        Some(found) => Ok(found),
        None => Err(match fit(ends[0]) {
            Err(shortest) => shortest,
            Ok(_) => error,
        }),
    }
}

/// Runs a provider compactor (§3.10): rolling from a V3 predecessor bound to the same connection
/// sends its compaction item and the newly folded events; otherwise all folded events. The output
/// must hold exactly one valid compaction item, which is bound to the compactor's connection.
pub async fn compact_provider(
    compactor: &dyn ProviderCompactor,
    folded: &[RuntimeEvent],
    previous: Option<&CheckpointRecord>,
    newly_folded: &[RuntimeEvent],
    budget_tokens: Option<u64>,
    chars_per_token: u64,
) -> Result<(ProviderState, Digest), SummarizeError> {
    let connection = compactor.connection();
    let rolling = match previous.map(|p| &p.body) {
        Some(CheckpointBody::Provider { state })
            if state.connection == connection.slug && state.model == connection.model =>
        {
            Some(state)
        }
        _ => None,
    };
    let mut messages = Vec::new();
    let selected = match rolling {
        Some(state) => {
            messages.push(provider_message(state));
            newly_folded
        }
        None => folded,
    };
    messages.extend(project_messages(selected));
    let messages = fit_input(messages, 0, budget_tokens, chars_per_token)?;
    let input_digest = Digest::sha256(stable_json(&Value::Array(messages.clone())).as_bytes());
    let output = compactor.compact(&ProviderCompactionRequest { messages, input_digest }).await?;
    let items: Vec<&Value> = output
        .iter()
        .filter(|part| {
            part.get("type") == Some(&json!("custom")) && part.get("kind") == Some(&json!(PROVIDER_PART_KIND))
        })
        .collect();
    let [item] = items.as_slice() else {
        return Err(SummarizeError::InvalidProviderState(format!(
            "expected one compaction item, found {}",
            items.len()
        )));
    };
    let field = |name: &str| {
        item["providerMetadata"]["openai"][name].as_str().filter(|s| !s.is_empty()).map(str::to_owned)
    };
    match (field("itemId"), field("encryptedContent")) {
        (Some(item), Some(encrypted_content)) => Ok((
            ProviderState {
                kind: ProviderStateKind::OpenaiCodexRemoteV2,
                connection: connection.slug,
                model: connection.model,
                item,
                encrypted_content,
            },
            input_digest,
        )),
        _ => Err(SummarizeError::InvalidProviderState(
            "the compaction item lacks its id or content".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::sync::Mutex;

    use super::*;
    use crate::testing::{GOOD_SUMMARY, call, result, text_event};

    /// A model-like summarizer: its input is bounded, and it records every request it is sent.
    #[derive(Debug, Default)]
    struct Bounded {
        seen: Mutex<Vec<SummaryRequest>>,
    }

    impl Summarizer for Bounded {
        fn identity(&self) -> SummarizerIdentity {
            SummarizerIdentity { name: "bounded".to_owned(), prompt_version: "test".to_owned() }
        }
        fn summarize<'a>(
            &'a self,
            request: &'a SummaryRequest,
        ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(request.clone());
            }
            let number = self.seen.lock().map(|seen| seen.len()).unwrap_or_default();
            let text = format!("{GOOD_SUMMARY}\n- part {number}");
            Box::pin(async move { Ok(SummaryResponse { text, finish: FinishReason::Stop }) })
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(future))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Twelve turns of plain talk, about 2,400 tokens: no tool output to omit.
    fn long_talk() -> Vec<RuntimeEvent> {
        (0..12)
            .flat_map(|turn| {
                let t = format!("t{turn}");
                [
                    text_event(
                        &format!("u{turn}"),
                        &t,
                        "user",
                        &format!("question {turn} {}", "why ".repeat(200)),
                    ),
                    text_event(
                        &format!("m{turn}"),
                        &t,
                        "model",
                        &format!("answer {turn} {}", "because ".repeat(80)),
                    ),
                ]
            })
            .collect()
    }

    #[test]
    fn a_fold_larger_than_the_summarizers_input_is_summarised_in_rolling_parts() {
        let events = long_talk();
        // Before: one call could not fit 1,000 tokens, so the fold failed before dispatch.
        let whole =
            fit_input(project_messages(&events), utf16_len(&summarizer_instructions()), Some(1_000), 4);
        assert!(matches!(whole, Err(SummarizeError::InputTooLarge { .. })));

        let bounded = Bounded::default();
        let summary = block_on(summarize_text(&bounded, &events, None, &events, Some(1_000), 4))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("a summary"));
        let seen = bounded.seen.lock().map(|seen| seen.clone()).unwrap_or_default();
        assert!(seen.len() >= 3, "{} calls", seen.len());
        assert_eq!(summary.text, format!("{GOOD_SUMMARY}\n- part {}", seen.len()), "the last part's summary");
        assert_eq!(seen[0].previous_summary, None);
        for (index, request) in seen.iter().enumerate() {
            let size = utf16_len(&request.instructions)
                + utf16_len(&serde_json::to_string(&request.messages).unwrap_or_default());
            assert!(size <= 4_000, "part {index} is {size} chars, over the budget");
            if index > 0 {
                // Each next part rolls the summary so far forward.
                assert_eq!(request.previous_summary, Some(format!("{GOOD_SUMMARY}\n- part {index}")));
                let preface = request.messages[0]["content"][0]["text"].as_str().unwrap_or_default();
                assert!(preface.contains(&format!("- part {index}")), "{preface}");
            }
        }
        // Every user question was sent exactly once, in order, across the parts.
        let questions: Vec<String> = seen
            .iter()
            .flat_map(|request| request.messages.iter())
            .filter_map(|message| message["content"][0]["text"].as_str())
            .filter(|text| text.starts_with("question "))
            .map(|text| text.split(' ').take(2).collect::<Vec<_>>().join(" "))
            .collect();
        let expected: Vec<String> = (0..12).map(|turn| format!("question {turn}")).collect();
        assert_eq!(questions, expected);
        // The last part is checked against the whole span; the digest names every part's input.
        assert_eq!(seen.last().map(|r| r.span_tokens), Some(estimate_events_tokens(&events, 4)));
        assert_ne!(summary.input_digest, seen[0].input_digest);
    }

    #[test]
    fn parts_never_separate_a_tool_call_from_its_result() {
        let mut events = long_talk();
        events.insert(3, call("c-call", "t1", "c1", "shell", json!({"cmd": "ls"})));
        events.insert(4, text_event("c-note", "t1", "model", &"while it runs ".repeat(100)));
        events.insert(5, result("c-result", "t1", "c1", "shell", json!("a.rs")));
        let bounded = Bounded::default();
        let summary = block_on(summarize_text(&bounded, &events, None, &events, Some(1_000), 4));
        assert!(matches!(summary, Ok(Some(_))), "{summary:?}");
        let seen = bounded.seen.lock().map(|seen| seen.clone()).unwrap_or_default();
        let with = |needle: &str| {
            seen.iter().position(|r| serde_json::to_string(&r.messages).unwrap_or_default().contains(needle))
        };
        assert!(with("tool-call").is_some());
        assert_eq!(with("tool-call"), with("tool-result"), "the call and its result are in one part");
        assert!(settled_cuts(&events).iter().all(|&cut| cut <= 3 || cut >= 6));
    }

    #[test]
    fn one_message_larger_than_the_input_is_still_refused_before_dispatch() {
        let events = vec![
            text_event("e1", "t1", "user", "hello"),
            text_event("e2", "t1", "model", "hi"),
            text_event("e3", "t2", "user", &"x".repeat(20_000)),
        ];
        let bounded = Bounded::default();
        let summary = block_on(summarize_text(&bounded, &events, None, &events, Some(1_000), 4));
        assert!(matches!(summary, Err(SummarizeError::InputTooLarge { .. })), "{summary:?}");
        // The first part fitted and was summarised; the part that cannot fit stops the fold.
        assert!(bounded.seen.lock().map(|seen| seen.len()).unwrap_or_default() <= 1);
    }

    #[test]
    fn a_step_keeps_its_calls_together_and_results_after_them() {
        let events = vec![
            text_event("e1", "t1", "user", "list and read"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "ls"})),
            call("e3", "t1", "c2", "read", json!({"path": "a.rs"})),
            result("e4", "t1", "c2", "read", json!("fn main() {}")),
            result("e5", "t1", "c1", "shell", json!({"files": ["a.rs"]})),
            text_event("e6", "t1", "model", "done"),
        ];
        let messages = project_messages(&events);
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, vec!["user", "assistant", "tool", "assistant"]);
        assert_eq!(messages[1]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            messages[2]["content"][1]["output"],
            json!({"type": "json", "value": {"files": ["a.rs"]}})
        );
        assert_eq!(messages[2]["content"][0]["output"]["type"], json!("text"));
    }

    #[test]
    fn fitting_omits_oldest_tool_outputs_first_and_fails_before_dispatch() {
        let events = vec![
            call("e1", "t1", "c1", "shell", json!({})),
            result("e2", "t1", "c1", "shell", json!("a".repeat(2_000))),
            call("e3", "t1", "c2", "shell", json!({})),
            result("e4", "t1", "c2", "shell", json!("b".repeat(2_000))),
        ];
        let messages = project_messages(&events);
        let fitted = fit_input(messages.clone(), 0, Some(700), 4).unwrap_or_default();
        let text = serde_json::to_string(&fitted).unwrap_or_default();
        assert!(text.contains(TOOL_OUTPUT_OMITTED) && text.contains(&"b".repeat(2_000)));
        assert_eq!(fit_input(messages.clone(), 0, None, 4).ok(), Some(messages.clone()));
        assert!(matches!(
            fit_input(messages.clone(), 0, Some(10), 4),
            Err(SummarizeError::InputTooLarge { .. })
        ));
        let user = project_messages(&[text_event("e1", "t1", "user", &"x".repeat(5_000))]);
        assert!(matches!(fit_input(user, 0, Some(100), 4), Err(SummarizeError::InputTooLarge { .. })));
        // Instructions count against the budget.
        let small = project_messages(&[text_event("e1", "t1", "user", "hi")]);
        assert!(matches!(fit_input(small, 1_000, Some(100), 4), Err(SummarizeError::InputTooLarge { .. })));
    }
}
