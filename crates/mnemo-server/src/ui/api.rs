//! The inspector's JSON endpoints: each one a few read calls to the store server, shaped for the
//! page. Texts in timelines are shortened to [`TEXT_CHARS_MAX`]; `/api/event` gives one envelope
//! whole.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::http::{Request, Response};
use super::store::Reads;
use crate::client::ClientError;
use crate::methods::{
    self as m, ClaimsParams, ContextParams, Empty, LogParams, MemoryGetParams, MemoryListParams,
    RecallBlockParams, SearchHistoryParams, ToolContext,
};

/// Longest text (message, thinking, arguments, result) a timeline or context carries, in chars;
/// the rest is fetched by position.
pub(crate) const TEXT_CHARS_MAX: usize = 2_000;

/// Longest preview of folded text (thinking, tool arguments and results) a timeline carries, in
/// chars: the page shows it folded and fetches the whole event when it is opened.
pub(crate) const PREVIEW_CHARS_MAX: usize = 80;

/// Envelopes in a timeline's first answer: enough for the first screen; the page asks for the
/// rest (`from`) while the first is already shown.
pub(crate) const TIMELINE_FIRST_EVENTS: usize = 150;

/// Most search results one request asks for (the SearchHistory tool's own maximum).
pub(crate) const SEARCH_ROWS_MAX: i64 = 10;

/// Most memory items listed.
pub(crate) const MEMORY_ITEMS_MAX: usize = 1_000;

/// Answers one authorised GET under `/api/`.
pub(crate) fn answer(reads: &Reads, request: &Request) -> Response {
    let result = match request.path.as_str() {
        "/api/sessions" => sessions(reads),
        "/api/search" => search(reads, request),
        "/api/timeline" => timeline(reads, request),
        "/api/context" => context(reads, request),
        "/api/recall" => recall(reads, request),
        "/api/claims" => claims(reads, request),
        "/api/event" => event(reads, request),
        "/api/memory" => memory_list(reads),
        "/api/memory/item" => memory_item(reads, request),
        "/api/health" => health(reads),
        "/api/verify" => reads.call::<m::Verify>(&Empty {}).map(Value::Object).map_err(ApiError::from),
        _ => Err(ApiError::NotFound(format!("no endpoint {}", request.path))),
    };
    match result {
        Ok(value) => Response::json(200, &value),
        Err(error) => error.response(),
    }
}

/// Why an endpoint failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// A parameter is missing or malformed: 400.
    #[error("{0}")]
    BadRequest(String),
    /// Nothing there: 404.
    #[error("{0}")]
    NotFound(String),
    /// The store server refused or failed: 502 with its message.
    #[error(transparent)]
    Store(#[from] ClientError),
}

impl ApiError {
    fn response(&self) -> Response {
        let status = match self {
            ApiError::BadRequest(_) => 400,
            ApiError::NotFound(_) => 404,
            ApiError::Store(ClientError::Rpc(error))
                if matches!(
                    error.reason(),
                    crate::protocol::Reason::InvalidParams | crate::protocol::Reason::InvalidInput
                ) =>
            {
                400
            }
            ApiError::Store(_) => 502,
        };
        Response::error(status, self.to_string())
    }
}

type Answer = Result<Value, ApiError>;

fn required<'a>(request: &'a Request, name: &str) -> Result<&'a str, ApiError> {
    request
        .param(name)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| ApiError::BadRequest(format!("missing query parameter `{name}`")))
}

fn number(request: &Request, name: &str) -> Result<Option<u64>, ApiError> {
    request
        .param(name)
        .filter(|value| !value.is_empty())
        .map(|value| {
            value
                .parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("`{name}` is not a number: {value:?}")))
        })
        .transpose()
}

fn sessions(reads: &Reads) -> Answer {
    let sessions = reads.call::<m::Sessions>(&Empty {})?;
    Ok(serde_json::to_value(sessions).unwrap_or(Value::Null))
}

fn search(reads: &Reads, request: &Request) -> Answer {
    let query = required(request, "q")?.to_owned();
    let limit = number(request, "limit")?.map_or(SEARCH_ROWS_MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let limit = limit.clamp(1, SEARCH_ROWS_MAX);
    let params = SearchHistoryParams {
        query,
        limit: Some(limit),
        cursor: request.param("cursor").map(str::to_owned),
        context: ToolContext::default(),
        as_of: None,
    };
    let found = reads.call::<m::SearchHistory>(&params)?;
    Ok(serde_json::to_value(found).unwrap_or(Value::Null))
}

/// Shortens `text` to `chars` chars; the flag says whether it was cut.
fn shorten(text: &str, chars: usize) -> (String, bool) {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => (text[..cut].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// `text` as member `name`, shortened to `chars`; a cut one is flagged (`<name>_cut`) with its
/// whole length (`<name>_chars`).
fn shortened(out: &mut Map<String, Value>, name: &str, text: &str, chars: usize) {
    let (short, cut) = shorten(text, chars);
    out.insert(name.to_owned(), Value::String(short));
    if cut {
        out.insert(format!("{name}_cut"), Value::Bool(true));
        out.insert(format!("{name}_chars"), Value::from(text.chars().count()));
    }
}

/// A value as text: strings as they are, anything else as JSON.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A RuntimeEvent record in the page's terms: who, what kind, its text shortened.
pub(crate) fn shape_event(record: &Value) -> Value {
    let mut out = Map::new();
    for (from, to) in [("id", "id"), ("turnId", "turn"), ("role", "role"), ("author", "author"), ("ts", "ts")]
    {
        if let Some(value) = record.get(from) {
            out.insert(to.to_owned(), value.clone());
        }
    }
    let content = record.get("content").cloned().unwrap_or(Value::Null);
    let kind = content.get("kind").and_then(Value::as_str).unwrap_or("none").to_owned();
    match kind.as_str() {
        "text" => shortened(
            &mut out,
            "text",
            content.get("text").and_then(Value::as_str).unwrap_or(""),
            TEXT_CHARS_MAX,
        ),
        "thinking" => shortened(
            &mut out,
            "text",
            content.get("text").and_then(Value::as_str).unwrap_or(""),
            PREVIEW_CHARS_MAX,
        ),
        "function_call" => {
            out.insert("name".into(), content.get("name").cloned().unwrap_or(Value::Null));
            out.insert("call".into(), content.get("id").cloned().unwrap_or(Value::Null));
            shortened(
                &mut out,
                "args",
                &as_text(content.get("args").unwrap_or(&Value::Null)),
                PREVIEW_CHARS_MAX,
            );
        }
        "function_response" => {
            out.insert("name".into(), content.get("name").cloned().unwrap_or(Value::Null));
            out.insert("call".into(), content.get("id").cloned().unwrap_or(Value::Null));
            let is_error =
                content.get("isError").or_else(|| content.get("is_error")).and_then(Value::as_bool);
            out.insert("error".into(), Value::Bool(is_error.unwrap_or(false)));
            // An error's result is shown open, so it travels as a text rather than a preview.
            let chars = if is_error.unwrap_or(false) { TEXT_CHARS_MAX } else { PREVIEW_CHARS_MAX };
            shortened(&mut out, "result", &as_text(content.get("result").unwrap_or(&Value::Null)), chars);
        }
        "error" => {
            out.insert("error".into(), Value::Bool(true));
            shortened(
                &mut out,
                "text",
                content.get("message").and_then(Value::as_str).unwrap_or(""),
                TEXT_CHARS_MAX,
            );
        }
        _ => {}
    }
    out.insert("content".into(), Value::String(kind));
    Value::Object(out)
}

fn field<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |value, key| value.get(key).unwrap_or(&Value::Null))
}

/// A session's timeline, in two answers so that a long one shows at once. Without `from`: the
/// first [`TIMELINE_FIRST_EVENTS`] envelopes shaped, and where the stream ends (`last_position`,
/// `envelopes`), read from the stream's two ends only. With `from` (an index into the shaped
/// events): the events from there on, with every position, checkpoint and memory commit.
fn timeline(reads: &Reads, request: &Request) -> Answer {
    let session = required(request, "session")?.to_owned();
    let stream = format!("session/{session}");
    if let Some(from) = number(request, "from")? {
        let (events, frame) = read_timeline(reads, &session)?;
        let from = (from as usize).min(events.len());
        return Ok(json!({
            "session": session,
            "from": from,
            "total": events.len(),
            "events": &events[from..],
            "positions": frame.positions,
            "checkpoints": frame.checkpoints,
            "memory": frame.memory,
        }));
    }
    let (first, last) = reads.stream_ends(&stream, TIMELINE_FIRST_EVENTS as u64)?;
    let Some(last) = last else {
        return Err(ApiError::NotFound(format!("no session {session:?} in the log")));
    };
    let mut events = Vec::with_capacity(first.len());
    let mut positions = Vec::with_capacity(first.len());
    let mut event_positions = BTreeMap::new();
    for envelope in &first {
        if let Some(at) = envelope.get("position").and_then(Value::as_u64) {
            positions.push(at);
        }
        if let Some(event) = shape_entry(envelope, &mut event_positions) {
            events.push(event);
        }
    }
    Ok(json!({
        "session": session,
        "events": events,
        "envelopes": last.get("revision").and_then(Value::as_u64).map_or(0, |revision| revision + 1),
        "last_position": last.get("position"),
        "complete": first.len() < TIMELINE_FIRST_EVENTS,
        "positions": positions,
    }))
}

/// What a timeline's second answer carries besides its events.
struct TimelineFrame {
    positions: Vec<u64>,
    checkpoints: Vec<Value>,
    memory: Vec<Value>,
}

/// A session envelope as a timeline row (`None` for those that are not rows: checkpoints, the
/// session's opening); remembers where each runtime event is.
fn shape_entry(envelope: &Value, event_positions: &mut BTreeMap<String, u64>) -> Option<Value> {
    let position = envelope.get("position").cloned().unwrap_or(Value::Null);
    let kind = envelope.get("kind").and_then(Value::as_str).unwrap_or_default();
    let record = envelope.get("record").unwrap_or(&Value::Null);
    match kind {
        "runtime_event" => {
            let mut shaped = shape_event(record);
            if let (Some(id), Some(at)) = (record.get("id").and_then(Value::as_str), position.as_u64()) {
                event_positions.insert(id.to_owned(), at);
            }
            if let Value::Object(map) = &mut shaped {
                map.insert("position".into(), position);
                map.insert("kind".into(), "event".into());
            }
            Some(shaped)
        }
        "checkpoint_recorded" | "session_opened" => None,
        _ => Some(json!({
            "position": position,
            "kind": kind,
            "turn": record.get("turn").or_else(|| record.get("turnId")),
            "status": record.get("status"),
        })),
    }
}

/// Reads `session`'s stream (and the memory streams it may have written to) and shapes it.
fn read_timeline(reads: &Reads, session: &str) -> Result<(Vec<Value>, TimelineFrame), ApiError> {
    let envelopes = reads.stream(&format!("session/{session}"))?;
    if envelopes.is_empty() {
        return Err(ApiError::NotFound(format!("no session {session:?} in the log")));
    }
    let mut positions = Vec::with_capacity(envelopes.len());
    let mut events = Vec::with_capacity(envelopes.len());
    let mut checkpoints = Vec::new();
    let mut event_positions = BTreeMap::new();
    let mut scopes = BTreeSet::from(["global".to_owned()]);
    for envelope in &envelopes {
        if let Some(at) = envelope.get("position").and_then(Value::as_u64) {
            positions.push(at);
        }
        match envelope.get("kind").and_then(Value::as_str) {
            Some("checkpoint_recorded") => checkpoints.push(shape_checkpoint(envelope, &event_positions)),
            Some("session_opened") => {
                if let Some(workspace) = field(envelope, &["record", "workspace"]).as_str() {
                    scopes.insert(format!("workspace:{workspace}"));
                }
            }
            _ => {}
        }
        if let Some(event) = shape_entry(envelope, &mut event_positions) {
            events.push(event);
        }
    }
    let memory: Vec<Value> = reads
        .memory(&scopes)?
        .iter()
        .filter(|entry| field(entry, &["record", "session"]).as_str() == Some(session))
        .map(shape_memory_commit)
        .collect();
    Ok((events, TimelineFrame { positions, checkpoints, memory }))
}

/// A checkpoint with the positions of the first and last event it folds.
fn shape_checkpoint(envelope: &Value, event_positions: &BTreeMap<String, u64>) -> Value {
    let record = field(envelope, &["record"]);
    let coverage = field(record, &["coverage"]);
    let first = coverage.get("first_event").and_then(Value::as_str).and_then(|id| event_positions.get(id));
    let through = field(coverage, &["through", "event"]).as_str().and_then(|id| event_positions.get(id));
    json!({
        "position": envelope.get("position"),
        "checkpoint": record.get("checkpoint"),
        "summary": field(record, &["body", "summary"]),
        "coverage": coverage,
        "first_position": first,
        "through_position": through,
        "faithfulness": record.get("faithfulness"),
        "estimated_tokens": record.get("estimated_tokens"),
        "created_at": record.get("created_at"),
        "limitations": record.get("limitations"),
    })
}

/// A memory commit or mutation as a marker: which items, why.
fn shape_memory_commit(envelope: &Value) -> Value {
    let record = field(envelope, &["record"]);
    let items: Vec<Value> = record
        .get("items")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|item| json!({"item": item.get("item"), "content": field(item, &["fields", "content"])}))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "position": envelope.get("position"),
        "kind": envelope.get("kind"),
        "trigger": record.get("trigger"),
        "checkpoint": record.get("checkpoint"),
        "status": field(record, &["receipt", "status"]),
        "item": record.get("item"),
        "items": items,
    })
}

/// Identity of a context item, for the diff between two positions.
fn item_key(item: &Value) -> String {
    match item.get("kind").and_then(Value::as_str) {
        Some("checkpoint") | Some("provider_state") => {
            format!("checkpoint:{}", field(item, &["checkpoint"]).as_str().unwrap_or_default())
        }
        Some("event") => {
            format!("event:{}", item.get("position").and_then(Value::as_u64).unwrap_or_default())
        }
        Some(kind) => format!("{kind}:{}", item.get("text").and_then(Value::as_str).map_or(0, str::len)),
        None => "unknown".to_owned(),
    }
}

/// A context item in the page's terms.
fn shape_item(item: &Value) -> Value {
    let kind = item.get("kind").and_then(Value::as_str).unwrap_or("unknown");
    let mut out = Map::new();
    out.insert("key".into(), Value::String(item_key(item)));
    out.insert("kind".into(), Value::String(kind.to_owned()));
    match kind {
        "event" => {
            out.insert("position".into(), item.get("position").cloned().unwrap_or(Value::Null));
            out.insert("event".into(), shape_event(item.get("event").unwrap_or(&Value::Null)));
        }
        _ => {
            for name in ["checkpoint", "positions"] {
                if let Some(value) = item.get(name) {
                    out.insert(name.into(), value.clone());
                }
            }
            let text = item
                .get("text")
                .map_or_else(|| as_text(item.get("message").unwrap_or(&Value::Null)), as_text);
            shortened(&mut out, "text", &text, TEXT_CHARS_MAX);
        }
    }
    Value::Object(out)
}

fn context_at(reads: &Reads, session: &str, at: u64) -> Result<Map<String, Value>, ApiError> {
    let params =
        ContextParams { session: session.to_owned(), window: None, as_of: Some(at), current_turn: None };
    Ok(reads.call::<m::Context>(&params)?)
}

/// The keys of `items`.
fn keys(items: &[Value]) -> Vec<String> {
    items.iter().filter_map(|item| item.get("key").and_then(Value::as_str).map(str::to_owned)).collect()
}

/// What is in `current` and not in `previous` (added), and the other way round (removed).
pub(crate) fn diff(previous: &[String], current: &[String]) -> (Vec<String>, Vec<String>) {
    let before: BTreeSet<&String> = previous.iter().collect();
    let after: BTreeSet<&String> = current.iter().collect();
    let added = current.iter().filter(|key| !before.contains(key)).cloned().collect();
    let removed = previous.iter().filter(|key| !after.contains(key)).cloned().collect();
    (added, removed)
}

fn context(reads: &Reads, request: &Request) -> Answer {
    let session = required(request, "session")?;
    let at =
        number(request, "at")?.ok_or_else(|| ApiError::BadRequest("missing query parameter `at`".into()))?;
    let assembled = context_at(reads, session, at)?;
    let items: Vec<Value> = assembled
        .get("items")
        .and_then(Value::as_array)
        .map(|items| items.iter().map(shape_item).collect())
        .unwrap_or_default();
    let diagnostics = assembled.get("diagnostics").cloned().unwrap_or(Value::Null);
    let mut answer = json!({
        "session": session,
        "position": at,
        "boundary": assembled.get("boundary"),
        "tokens": diagnostics.get("tokens_after"),
        "window": diagnostics.get("max_history_tokens"),
        "fits": field(&diagnostics, &["fit", "fits"]),
        "decision": diagnostics.get("decision"),
        "diagnostics": diagnostics,
        "notes": assembled.get("notes"),
        "items": items,
    });
    if let Some(previous) = number(request, "prev")? {
        let before = context_at(reads, session, previous)?;
        let before_items: Vec<Value> = before
            .get("items")
            .and_then(Value::as_array)
            .map(|items| items.iter().map(shape_item).collect())
            .unwrap_or_default();
        let (added, removed) = diff(&keys(&before_items), &keys(&items));
        answer["diff"] = json!({
            "from": previous,
            "added": added,
            "removed": removed,
            "tokens_before": before.get("diagnostics").map(|d| field(d, &["tokens_after"])),
            "boundary_before": before.get("boundary"),
        });
    }
    Ok(answer)
}

/// The push recall block the session's next request would have received at position `at`: the
/// memory items as they stood then, matched against the session's turns up to it.
fn recall(reads: &Reads, request: &Request) -> Answer {
    let session = required(request, "session")?.to_owned();
    let at =
        number(request, "at")?.ok_or_else(|| ApiError::BadRequest("missing query parameter `at`".into()))?;
    let block = reads.call::<m::RecallBlock>(&RecallBlockParams { session, query: None, as_of: Some(at) })?;
    let mut answer = Value::Object(block);
    answer["position"] = Value::from(at);
    Ok(answer)
}

/// A checkpoint's claims, each with the events that support it.
fn claims(reads: &Reads, request: &Request) -> Answer {
    let params = ClaimsParams {
        session: required(request, "session")?.to_owned(),
        checkpoint: required(request, "checkpoint")?.to_owned(),
    };
    Ok(serde_json::to_value(reads.call::<m::Claims>(&params)?).unwrap_or(Value::Null))
}

fn event(reads: &Reads, request: &Request) -> Answer {
    let position = number(request, "position")?
        .ok_or_else(|| ApiError::BadRequest("missing query parameter `position`".into()))?;
    let page =
        reads.call::<m::Log>(&LogParams { from: Some(position), limit: Some(1), ..LogParams::default() })?;
    page.into_iter()
        .find(|entry| entry.get("position").and_then(Value::as_u64) == Some(position))
        .map(Value::Object)
        .ok_or_else(|| ApiError::NotFound(format!("no envelope at position {position}")))
}

/// Every envelope of the memory streams, in log order: the global scope's, each session
/// workspace's and that of every item `memory/list` names (read by stream, not by scanning the log).
fn memory_entries(reads: &Reads) -> Result<Vec<Value>, ApiError> {
    let mut scopes = BTreeSet::from(["global".to_owned()]);
    for session in reads.call::<m::Sessions>(&Empty {})? {
        if let Some(workspace) = session.workspace {
            scopes.insert(format!("workspace:{workspace}"));
        }
    }
    let listed = MemoryListParams {
        include_archived: true,
        limit: Some(MEMORY_ITEMS_MAX as u64),
        ..MemoryListParams::default()
    };
    for item in reads.call::<m::MemoryList>(&listed)? {
        if let Some(scope) = item.get("fields").and_then(|f| f.get("scope")).and_then(Value::as_str) {
            scopes.insert(scope.to_owned());
        }
    }
    Ok(reads.memory(&scopes)?)
}

/// Every item the memory streams name, with the positions that touched it.
fn memory_list(reads: &Reads) -> Answer {
    let entries = memory_entries(reads)?;
    let mut items: BTreeMap<String, Value> = BTreeMap::new();
    for entry in &entries {
        for (item, fields) in touched_items(entry) {
            let slot = items.entry(item.clone()).or_insert_with(|| json!({"item": item, "positions": []}));
            if let Some(positions) = slot.get_mut("positions").and_then(Value::as_array_mut) {
                positions.push(entry.get("position").cloned().unwrap_or(Value::Null));
            }
            if let Some(fields) = fields {
                for name in ["content", "kind", "scope", "origin"] {
                    if let Some(value) = fields.get(name) {
                        slot[name] = value.clone();
                    }
                }
            }
        }
    }
    let total = items.len();
    let items: Vec<Value> = items.into_values().take(MEMORY_ITEMS_MAX).collect();
    Ok(json!({ "total": total, "items": items }))
}

/// The items a memory envelope touches, with their fields when it states them.
fn touched_items(entry: &Value) -> Vec<(String, Option<&Value>)> {
    let record = field(entry, &["record"]);
    let mut out = Vec::new();
    if let Some(items) = record.get("items").and_then(Value::as_array) {
        for item in items {
            if let Some(id) = item.get("item").and_then(Value::as_str) {
                out.push((id.to_owned(), item.get("fields")));
            }
        }
    }
    if let Some(id) = record.get("item").and_then(Value::as_str) {
        out.push((id.to_owned(), record.get("fields")));
    }
    out
}

fn memory_item(reads: &Reads, request: &Request) -> Answer {
    let item = required(request, "id")?.to_owned();
    let current = reads
        .call::<m::MemoryGet>(&MemoryGetParams { item: item.clone() })?
        .ok_or_else(|| ApiError::NotFound(format!("no memory item {item:?}")))?;
    // The item's commits and mutations are on its scope's stream.
    let scope =
        field(&Value::Object(current.clone()), &["fields", "scope"]).as_str().unwrap_or("global").to_owned();
    let history: Vec<Value> = reads
        .memory(&BTreeSet::from([scope]))?
            .iter()
            .filter(|entry| touched_items(entry).iter().any(|(id, _)| *id == item))
            .map(|entry| {
                let record = field(entry, &["record"]);
                let fields = touched_items(entry).into_iter().find(|(id, _)| *id == item).and_then(|(_, f)| f.cloned());
                json!({
                    "position": entry.get("position"),
                    "kind": entry.get("kind"),
                    "timestamp": entry.get("timestamp"),
                    "operation": record.get("operation").or_else(|| record.get("op")),
                    "trigger": record.get("trigger"),
                    "session": record.get("session"),
                    "fields": fields,
                    "record": if entry.get("kind").and_then(Value::as_str) == Some("memory_commit") { Value::Null } else { record.clone() },
                })
            })
            .collect()
    ;
    Ok(json!({ "item": current, "history": history }))
}

fn health(reads: &Reads) -> Answer {
    let stats = reads.call::<m::Stats>(&Empty {})?;
    let head = stats.get("head").and_then(Value::as_u64).unwrap_or(0);
    let last = if head > 0 {
        reads
            .call::<m::Log>(&LogParams { from: Some(head), limit: Some(1), ..LogParams::default() })?
            .into_iter()
            .next()
    } else {
        None
    };
    Ok(json!({
        "stats": stats,
        "head_hash": last.as_ref().and_then(|entry| entry.get("hash")),
        "head_timestamp": last.as_ref().and_then(|entry| entry.get("timestamp")),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_what_came_and_went() {
        let before = vec!["event:1".to_owned(), "event:2".to_owned(), "event:3".to_owned()];
        let after = vec!["checkpoint:c1".to_owned(), "event:3".to_owned(), "event:4".to_owned()];
        let (added, removed) = diff(&before, &after);
        assert_eq!(added, ["checkpoint:c1", "event:4"]);
        assert_eq!(removed, ["event:1", "event:2"]);
    }

    #[test]
    fn long_texts_are_cut_and_flagged() {
        let long = "é".repeat(TEXT_CHARS_MAX + 5);
        let shaped = shape_event(&json!({"id": "e", "content": {"kind": "text", "text": long}}));
        assert_eq!(shaped["text"].as_str().unwrap().chars().count(), TEXT_CHARS_MAX);
        assert_eq!(shaped["text_cut"], true);
        let short = shape_event(&json!({"id": "e", "content": {"kind": "thinking", "text": "hm"}}));
        assert_eq!(short["text"], "hm");
        assert_eq!(short["content"], "thinking");
        assert!(short.get("text_cut").is_none());
    }

    #[test]
    fn tool_results_carry_their_error_flag() {
        let shaped = shape_event(&json!({"id": "e", "content": {
            "kind": "function_response", "id": "c1", "name": "Bash", "result": {"out": 1}, "isError": true}}));
        assert_eq!(shaped["error"], true);
        assert_eq!(shaped["name"], "Bash");
        assert!(shaped["result"].as_str().unwrap().contains("\"out\": 1"));
    }
}
