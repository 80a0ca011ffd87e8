//! One call: a method's parameters read into their type, the facade call it mirrors, and its result
//! or error in the protocol's terms. Runs on a worker thread (the facade blocks); it decides nothing
//! the facade does not.

use mnemo::compaction::ContextOptions;
use mnemo::history::{HistoryContext, HistoryReadRequest, HistorySearchRequest};
use mnemo::log::ExpectedRevision as FacadeExpected;
use mnemo::memory::{RecallMemory, StartBlockRequest};
use mnemo::records::{
    ItemId, Position, Record, RecordKind, SessionId, StreamId, StreamRevision, ToolCallId, TurnId,
    WorkspaceId,
};
use mnemo::transcript::ImportFormat;
use mnemo::{Error, ErrorCategory, Mnemo};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::runtime::Handle;

use crate::extraction::BackgroundExtraction;
use crate::methods::{self as m, Method, Route};
use crate::protocol::{Reason, RpcError};
use crate::seams::ConnectionSeams;

pub(crate) mod host;

/// What a handler gets besides its params: the store, the runtime to block on, and the calling
/// connection's seams.
pub(crate) struct Call<'a> {
    pub(crate) mnemo: &'a Mnemo,
    pub(crate) runtime: &'a Handle,
    pub(crate) seams: &'a ConnectionSeams,
    /// Memory extraction after a call appended a session's records; waking it never waits.
    pub(crate) extraction: &'a BackgroundExtraction,
}

/// Runs `method` against the store, by the route the methods' table gives it. The methods the
/// connection answers itself (`initialize`, `shutdown`, the subscriptions, the seams' registration)
/// never come here.
pub(crate) fn call(call: &Call<'_>, method: &str, params: Value) -> Result<Value, RpcError> {
    match m::MethodInfo::named(method).map(|info| info.route) {
        Some(Route::Worker(handler)) => handler(call, params),
        Some(Route::Connection) | None => {
            Err(RpcError::new(Reason::MethodNotFound, format!("no method {method:?}")))
        }
    }
}

/// Reads `params` as `M::Params` (absent or `null` reads as `{}`), runs `body`, writes its result.
pub(crate) fn run<M: Method>(
    params: Value,
    body: impl FnOnce(M::Params) -> Result<M::Result, RpcError>,
) -> Result<Value, RpcError> {
    let params = parse_params::<M::Params>(M::NAME, params)?;
    let result = body(params)?;
    serde_json::to_value(result)
        .map_err(|e| RpcError::new(Reason::Internal, format!("{}: result does not serialize: {e}", M::NAME)))
}

pub(crate) fn parse_params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() { Value::Object(serde_json::Map::new()) } else { params };
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(Reason::InvalidParams, format!("{method}: invalid params: {e}")))
}

/// A facade output as a JSON object.
fn object<T: Serialize>(value: &T) -> Result<m::Object, RpcError> {
    match serde_json::to_value(value) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => {
            Err(RpcError::new(Reason::Internal, format!("expected an object, the facade gave {other}")))
        }
        Err(e) => Err(RpcError::new(Reason::Internal, format!("result does not serialize: {e}"))),
    }
}

/// A facade error in the protocol's terms.
pub(crate) fn store(error: Error) -> RpcError {
    let message = error.to_string();
    if let Error::Conflict { conflict, .. } = &error {
        let mut rpc = RpcError::new(Reason::Conflict, message);
        rpc.data.expected = Some(match conflict.expected {
            FacadeExpected::Any => "any".to_owned(),
            FacadeExpected::NoStream => "no_stream".to_owned(),
            FacadeExpected::Exact(revision) => revision.0.to_string(),
            _ => format!("{:?}", conflict.expected),
        });
        rpc.data.actual = Some(conflict.actual.map_or_else(|| "no_stream".to_owned(), |r| r.0.to_string()));
        return rpc;
    }
    let reason = match error.category() {
        ErrorCategory::Input => Reason::InvalidInput,
        ErrorCategory::Conflict => Reason::Conflict,
        ErrorCategory::Integrity => Reason::Integrity,
        _ => Reason::StoreFailure,
    };
    RpcError::new(reason, message)
}

fn invalid_id(what: &'static str) -> impl Fn(mnemo::records::IdError) -> RpcError {
    move |e| RpcError::new(Reason::InvalidParams, format!("{what}: {e}"))
}

fn session_id(text: String) -> Result<SessionId, RpcError> {
    SessionId::new(text).map_err(invalid_id("session"))
}

pub(crate) fn ping(_: &Call<'_>, _: m::Empty) -> Result<m::Empty, RpcError> {
    Ok(m::Empty {})
}

pub(crate) fn transcript(call: &Call<'_>, p: m::TranscriptParams) -> Result<Option<m::Object>, RpcError> {
    let session = session_id(p.session)?;
    let transcript = call.mnemo.history().transcript(&session, p.as_of.map(Position)).map_err(store)?;
    transcript.map(|t| object(&t)).transpose()
}

pub(crate) fn session(call: &Call<'_>, p: m::SessionParams) -> Result<Option<m::Object>, RpcError> {
    let session = session_id(p.session)?;
    call.mnemo.history().session(&session).map_err(store)?.map(|s| object(&s)).transpose()
}

pub(crate) fn memory_get(call: &Call<'_>, p: m::MemoryGetParams) -> Result<Option<m::Object>, RpcError> {
    let item = ItemId::new(p.item).map_err(invalid_id("item"))?;
    call.mnemo.memory().get(&item).map_err(store)?.map(|i| object(&i)).transpose()
}

pub(crate) fn stats(call: &Call<'_>, _: m::Empty) -> Result<m::Object, RpcError> {
    object(&call.mnemo.stats().map_err(store)?)
}

pub(crate) fn verify(call: &Call<'_>, _: m::Empty) -> Result<m::Object, RpcError> {
    object(&call.mnemo.verify(&mut |_| {}).map_err(store)?)
}

pub(crate) fn log_head(call: &Call<'_>, _: m::Empty) -> Result<m::LogHeadResult, RpcError> {
    Ok(m::LogHeadResult { position: call.mnemo.log().head().0 })
}

pub(crate) fn append(call: &Call<'_>, p: m::AppendParams) -> Result<m::AppendResult, RpcError> {
    let stream = StreamId::new(p.stream).map_err(invalid_id("stream"))?;
    let expected = match p.expected_revision {
        m::ExpectedRevision::Any => FacadeExpected::Any,
        m::ExpectedRevision::NoStream => FacadeExpected::NoStream,
        m::ExpectedRevision::Exact(revision) => FacadeExpected::Exact(StreamRevision(revision)),
    };
    let mut records = Vec::with_capacity(p.records.len());
    for (index, record) in p.records.into_iter().enumerate() {
        let invalid = |detail: String| {
            RpcError::new(Reason::InvalidParams, format!("append: records[{index}]: {detail}"))
        };
        let kind = RecordKind::ALL.into_iter().find(|kind| kind.name() == record.kind).ok_or_else(|| {
            let names: Vec<&str> = RecordKind::ALL.iter().map(|kind| kind.name()).collect();
            invalid(format!("unknown kind {:?}; expected one of {}", record.kind, names.join(", ")))
        })?;
        let payload = serde_json::to_vec(&record.record).map_err(|e| invalid(e.to_string()))?;
        // Parsed, not validated: the facade's append prepares the record as every door does
        // (spec §1.2) and validates it then.
        let record = Record::parse(kind.code(), kind.schema_version(), &payload)
            .map_err(|e| invalid(e.to_string()))?;
        records.push(record);
    }
    let appended = match p.durability {
        None => call.mnemo.append(&stream, expected, &records),
        Some(durability) => {
            let durability = match durability {
                m::Durability::Buffered => mnemo::log::Durability::Buffered,
                m::Durability::SyncData => mnemo::log::Durability::SyncData,
                m::Durability::SyncAll => mnemo::log::Durability::SyncAll,
            };
            call.mnemo.append_with_durability(&stream, expected, &records, durability)
        }
    }
    .map_err(store)?;
    Ok(m::AppendResult {
        first_position: appended.first_position.0,
        last_position: appended.last_position.0,
        last_revision: appended.last_revision.0,
    })
}

pub(crate) fn import(call: &Call<'_>, p: m::ImportParams) -> Result<m::Object, RpcError> {
    let format = match p.format.as_deref() {
        None => ImportFormat::Auto,
        Some(name) => name
            .parse::<ImportFormat>()
            .map_err(|e| RpcError::new(Reason::InvalidParams, format!("import: format: {e}")))?,
    };
    let (bytes, source) = match (p.path, p.text) {
        (Some(path), None) => {
            absolute_path(m::Import::NAME, &path)?;
            (Mnemo::read_import_file(&path).map_err(store)?, p.source.unwrap_or(path))
        }
        (None, Some(text)) => (text.into_bytes(), p.source.unwrap_or_else(|| "request".to_owned())),
        _ => {
            return Err(RpcError::new(
                Reason::InvalidParams,
                "import: give exactly one of `path` and `text`",
            ));
        }
    };
    object(&call.mnemo.import(&bytes, &source, format).map_err(store)?)
}

/// Refuses a relative path: the server would read it in its own working directory, which is not
/// its client's (nor `-`, its own standard input).
fn absolute_path(method: &str, path: &str) -> Result<(), RpcError> {
    if std::path::Path::new(path).is_absolute() {
        return Ok(());
    }
    Err(RpcError::new(
        Reason::InvalidParams,
        format!(
            "{method}: path {path:?} is not absolute: the server would read it in its own working \
             directory, not yours; send the absolute path (the TypeScript and Python clients make it so)"
        ),
    ))
}

fn import_format(method: &str, format: Option<&str>) -> Result<ImportFormat, RpcError> {
    match format {
        None => Ok(ImportFormat::Auto),
        Some(name) => name
            .parse::<ImportFormat>()
            .map_err(|e| RpcError::new(Reason::InvalidParams, format!("{method}: format: {e}"))),
    }
}

pub(crate) fn capture(call: &Call<'_>, p: m::CaptureParams) -> Result<m::Object, RpcError> {
    let format = import_format(m::Capture::NAME, p.format.as_deref())?;
    absolute_path(m::Capture::NAME, &p.path)?;
    let captured =
        crate::capture::capture_file(call.mnemo, std::path::Path::new(&p.path), format).map_err(store)?;
    // The capture answers now; extraction over what it appended runs behind it.
    if let crate::capture::Captured::Imported { report, .. } = &captured
        && report.records > 0
    {
        call.extraction.wake();
    }
    object(&captured)
}

pub(crate) fn start_block(call: &Call<'_>, p: m::StartBlockParams) -> Result<m::StartBlockResult, RpcError> {
    let request = StartBlockRequest {
        session: p.session.map(session_id).transpose()?,
        workspace: p.workspace.map(WorkspaceId::new).transpose().map_err(invalid_id("workspace"))?,
        query: p.query,
        budget_tokens: p.budget_tokens,
    };
    let block = call.mnemo.memory().start_block(&request).map_err(store)?;
    let standing = block.items.iter().filter(|item| item.standing).count() as u64;
    Ok(m::StartBlockResult {
        text: block.text,
        tokens: block.tokens,
        items: block.items.into_iter().map(recalled).collect(),
        standing,
    })
}

pub(crate) fn sessions(call: &Call<'_>, _: m::Empty) -> Result<Vec<m::SessionInfo>, RpcError> {
    let listings = call.mnemo.history().session_list().map_err(store)?;
    Ok(listings
        .into_iter()
        .map(|listing| m::SessionInfo {
            session: listing.summary.session.to_string(),
            workspace: listing.summary.workspace.as_ref().map(ToString::to_string),
            title: listing.display_title,
            event_count: listing.summary.event_count,
            turn_count: listing.summary.turn_count,
            first_activity: listing.first_activity.map(|t| t.0),
            last_activity: listing.last_activity.map(|t| t.0),
            incognito: listing.summary.incognito,
            archived: listing.summary.archived,
            subagent: listing.summary.subagent,
            source: listing.summary.source,
            parent: listing.summary.parent.as_ref().map(ToString::to_string),
        })
        .collect())
}

/// The owned ids a [`HistoryContext`] borrows.
struct ToolIds {
    session: Option<SessionId>,
    turn: Option<TurnId>,
    workspace: Option<WorkspaceId>,
    incognito: bool,
}

impl ToolIds {
    fn parse(context: m::ToolContext) -> Result<ToolIds, RpcError> {
        Ok(ToolIds {
            session: context.current_session.map(session_id).transpose()?,
            turn: context.current_turn.map(TurnId::new).transpose().map_err(invalid_id("current_turn"))?,
            workspace: context
                .workspace
                .map(WorkspaceId::new)
                .transpose()
                .map_err(invalid_id("workspace"))?,
            incognito: context.incognito,
        })
    }

    fn context(&self) -> HistoryContext<'_> {
        HistoryContext {
            current_session: self.session.as_ref(),
            current_turn: self.turn.as_ref(),
            incognito_active: self.incognito,
            abort: None,
            workspace: self.workspace.as_ref(),
        }
    }
}

/// A history tool's refusal: its reason travels as `tool_reason`.
fn refused<R: Serialize + std::fmt::Display>(failure: &mnemo::history::ToolFailure<R>) -> RpcError {
    let mut error = RpcError::new(Reason::ToolRefused, failure.to_string());
    error.data.tool_reason =
        serde_json::to_value(&failure.reason).ok().and_then(|r| r.as_str().map(str::to_owned));
    error
}

fn wire_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

pub(crate) fn search_history(
    call: &Call<'_>,
    p: m::SearchHistoryParams,
) -> Result<m::SearchHistoryResult, RpcError> {
    let ids = ToolIds::parse(p.context)?;
    let request = HistorySearchRequest { query: p.query, limit: p.limit, cursor: p.cursor };
    let found =
        call.mnemo.history().search(&request, &ids.context(), p.as_of.map(Position)).map_err(store)?;
    let found = found.map_err(|failure| refused(&failure))?;
    Ok(m::SearchHistoryResult {
        query: found.query,
        truncated: found.truncated,
        next_cursor: found.next_cursor,
        rows: found
            .rows
            .into_iter()
            .map(|row| m::SearchRow {
                session_id: row.session_id,
                turn_id: row.turn_id,
                message_id: row.message_id,
                match_kind: row.match_kind.as_ref().map(wire_name),
                message_timestamp: row.message_timestamp,
                is_current_session: row.is_current_session,
                title: row.title,
                summary: row.summary,
                snippet: row.snippet,
                last_message_at: row.last_message_at,
                truncated: row.truncated,
            })
            .collect(),
    })
}

pub(crate) fn read_history(
    call: &Call<'_>,
    p: m::ReadHistoryParams,
) -> Result<m::ReadHistoryResult, RpcError> {
    let ids = ToolIds::parse(p.context)?;
    let request = HistoryReadRequest {
        session_id: p.session_id,
        message_id: p.message_id,
        turn_id: p.turn_id,
        before: p.before,
        after: p.after,
    };
    let read = call.mnemo.history().read(&request, &ids.context(), p.as_of.map(Position)).map_err(store)?;
    let read = read.map_err(|failure| refused(&failure))?;
    Ok(m::ReadHistoryResult {
        session_id: read.session_id,
        is_current_session: read.is_current_session,
        anchor_message_id: read.anchor_message_id,
        anchor_turn_id: read.anchor_turn_id,
        title: read.title,
        last_message_at: read.last_message_at,
        turns: read
            .turns
            .into_iter()
            .map(|turn| m::ReadTurn {
                turn_id: turn.turn_id,
                messages: turn
                    .messages
                    .into_iter()
                    .map(|message| m::ReadMessage {
                        message_id: message.message_id,
                        match_kind: wire_name(&message.match_kind),
                        role: message.role.to_owned(),
                        text: message.text,
                        timestamp: message.timestamp,
                    })
                    .collect(),
            })
            .collect(),
        has_more_before: read.has_more_before,
        has_more_after: read.has_more_after,
        truncated: read.truncated,
    })
}

pub(crate) fn recall(call: &Call<'_>, p: m::RecallParams) -> Result<Vec<m::RecalledItem>, RpcError> {
    let session = session_id(p.session)?;
    let request = RecallMemory { query: p.query, limit: p.limit };
    let items = call.mnemo.memory().recall(&session, &request).map_err(store)?;
    Ok(items.into_iter().map(recalled).collect())
}

fn recalled(item: mnemo::memory::RecalledItem) -> m::RecalledItem {
    m::RecalledItem {
        item: item.item.to_string(),
        version: item.version,
        content: item.content,
        kind: wire_name(&item.kind),
        scope: item.scope.to_string(),
        keys: item.keys,
        sources: item
            .sources
            .into_iter()
            .map(|s| m::SourceRef {
                session: s.session.to_string(),
                run: s.run.to_string(),
                turn: s.turn.to_string(),
                event: s.event.to_string(),
            })
            .collect(),
        score: item.score,
    }
}

pub(crate) fn remember(call: &Call<'_>, p: m::RememberParams) -> Result<m::RememberResult, RpcError> {
    let session = session_id(p.session)?;
    let tool_call = p.tool_call.map(ToolCallId::new).transpose().map_err(invalid_id("tool_call"))?;
    let result = call.runtime.block_on(call.mnemo.memory().remember(&session, tool_call)).map_err(store)?;
    let text = result.text();
    Ok(m::RememberResult {
        status: wire_name(&result.status),
        items: result
            .items
            .into_iter()
            .map(|r| m::RememberedItem {
                item: r.item.to_string(),
                kind: wire_name(&r.kind),
                scope: r.scope.as_text(),
                requested: r.requested,
                outcome: wire_name(&r.outcome),
                content: r.content,
            })
            .collect(),
        reason: result.reason.map(|r| wire_name(&r)),
        detail: result.detail,
        text,
    })
}

pub(crate) fn context(call: &Call<'_>, p: m::ContextParams) -> Result<m::Object, RpcError> {
    let session = session_id(p.session)?;
    let options = ContextOptions {
        window: p.window,
        as_of: p.as_of.map(Position),
        current_turn: p.current_turn.map(TurnId::new).transpose().map_err(invalid_id("current_turn"))?,
        ..ContextOptions::default()
    };
    object(&call.mnemo.compaction().context(&session, &options).map_err(store)?)
}

pub(crate) fn log(call: &Call<'_>, p: m::LogParams) -> Result<Vec<m::Object>, RpcError> {
    let limit = p.limit.unwrap_or(50);
    if !(1..=m::LOG_ENTRIES_MAX).contains(&limit) {
        return Err(RpcError::new(
            Reason::InvalidParams,
            format!("log: limit {limit} is not in 1..={}", m::LOG_ENTRIES_MAX),
        )
        .with_limit(m::LOG_ENTRIES_MAX));
    }
    if p.last && (p.stream.is_none() || p.from.is_some()) {
        return Err(RpcError::new(
            Reason::InvalidParams,
            "log: `last` reads a `stream`'s end, without `from`",
        ));
    }
    let entries = match p.stream {
        Some(stream) => {
            let stream = StreamId::new(stream).map_err(invalid_id("stream"))?;
            if p.last {
                call.mnemo.stream_tail(&stream, limit as usize)
            } else {
                call.mnemo.stream_entries(&stream, StreamRevision(p.from.unwrap_or(0)), limit as usize)
            }
        }
        None => call.mnemo.log_entries(Position(p.from.unwrap_or(1)), limit as usize),
    }
    .map_err(store)?;
    entries.iter().map(object).collect()
}
