//! `mnemo mcp`: a Model Context Protocol server on stdio (on `rmcp`, decision 0162) whose tools
//! forward to the store server, so any number of agent sessions — each host starts one `mnemo mcp`
//! per session — share one store.
//!
//! The tools are sized for a model's context: every result is bounded and paged, and every text
//! from the store is redacted before it is returned. They answer inside the caller's workspace: the
//! workspace (`mnemo::workspace_of`, the repository's root from any of its folders) of the first
//! root the client lists (a `file://` URI), else of `--workspace`, else of the working directory.
//!
//! What the agent asks to remember is recorded, with the user's words as the evidence, in a session
//! of this MCP connection (`mcp-<millis>-<pid>`, in the caller's workspace, titled after the
//! client); memory then admits it under the same rules as any session's request to remember.
//!
//! It uses: the Rust client ([`crate::client`]) and the methods' types ([`crate::methods`]), as
//! any client of the store server does; `rmcp` for the Model Context Protocol; the facade only for
//! its redaction rule and its workspace rule.
//!
//! It is not:
//! - a store owner: it never opens the store; every tool is one or more calls to the store server;
//! - a protocol: a tool is shaped for a model's context and may make several method calls, so
//!   adding a protocol method adds no tool, and a tool needs no new method;
//! - part of the store server: nothing of the server's core (`server`, `dispatch`) is used here,
//!   and the core uses nothing of this module (`tests/rooms.rs` checks both).

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use mnemo::records::redaction::redact_secrets;

use crate::client::{Client, ClientError, ConnectOptions};
use crate::methods::{
    self as m, Import, ImportParams, MemoryWhy, Method, ReadHistory, ReadHistoryParams, Recall, RecallParams,
    Remember, RememberParams, SearchHistory, SearchHistoryParams, Sessions, ToolContext,
};

/// The MCP protocol versions `mnemo mcp` speaks: the newest with an `initialize` handshake, the one
/// before it, and the newest, which has none (rmcp answers its per-request lifecycle).
pub const MCP_PROTOCOL_VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28];

/// Most sessions one `list_sessions` page holds.
pub const SESSIONS_PAGE_MAX: usize = 20;
/// Most memory items one `recall_memory` call returns.
pub const RECALL_ITEMS_MAX: u64 = 20;
/// Most characters of one `session_context` page.
pub const CONTEXT_PAGE_CHARS_MAX: usize = 12_000;
/// Most characters of one event's text in `session_context`.
pub const CONTEXT_EVENT_CHARS_MAX: usize = 2_000;
/// Longest text `remember` takes, in characters.
pub const REMEMBER_REQUEST_CHARS_MAX: usize = 2_000;
/// How long the server waits for the client to list its roots.
pub const ROOTS_WAIT: Duration = Duration::from_secs(5);

/// How `mnemo mcp` runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpOptions {
    /// The store the store server owns.
    pub store: PathBuf,
    /// How to reach (and start) the store server.
    pub connect: ConnectOptions,
    /// The workspace to answer in when the client lists no roots (default: the working directory).
    pub workspace: Option<String>,
}

impl McpOptions {
    /// Options for the store at `store`, connecting with `connect`.
    pub fn new(store: PathBuf, connect: ConnectOptions) -> McpOptions {
        McpOptions { store, connect, workspace: None }
    }
}

/// Why `mnemo mcp` stopped with a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpServeError {
    /// The runtime could not start.
    #[error("mcp: {0}")]
    Io(#[from] std::io::Error),
    /// The MCP session failed to start or ended with an error.
    #[error("mcp: {0}")]
    Session(String),
}

/// Serves MCP on stdin and stdout until the client closes stdin. Blocks the calling thread.
pub fn run_stdio(options: McpOptions) -> Result<(), McpServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async move {
        let server = MnemoMcp::new(options);
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpServeError::Session(e.to_string()))?;
        running.waiting().await.map_err(|e| McpServeError::Session(e.to_string()))?;
        Ok(())
    })
}

/// `search_history` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to look for in past conversations (at most 500 characters). Matches are ranked by
    /// relevance; any word may match.
    query: String,
    /// How many matches to return, 1 to 10 (default 5).
    #[serde(default)]
    limit: Option<i64>,
    /// The `next_cursor` of a previous call with the same query, for the next page.
    #[serde(default)]
    cursor: Option<String>,
    /// Search every workspace's history instead of only the current workspace's.
    #[serde(default)]
    all_workspaces: bool,
}

/// `read_history` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The session to read (a `session_id` from `search_history` or `list_sessions`).
    session_id: String,
    /// Center the window on this message (a `message_id` from `search_history`).
    #[serde(default)]
    message_id: Option<String>,
    /// Center the window on this turn instead (or the message's turn).
    #[serde(default)]
    turn_id: Option<String>,
    /// Turns before the center, 0 to 4 (default 1).
    #[serde(default)]
    before: Option<i64>,
    /// Turns after the center, 0 to 4 (default 1). At most 5 turns in all.
    #[serde(default)]
    after: Option<i64>,
    /// Read a session of another workspace.
    #[serde(default)]
    all_workspaces: bool,
}

/// `recall_memory` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    /// What you want to know: the topic, names or keywords of the facts to recall.
    query: String,
    /// How many facts to return, 1 to 20 (default 10).
    #[serde(default)]
    limit: Option<u64>,
}

/// `why_memory` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WhyArgs {
    /// The remembered fact's item id, as recall_memory returned it (`item`).
    item: String,
}

/// `remember` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    /// The user's own words asking you to remember something, quoted exactly as they said them
    /// (for example "Remember that we deploy with make release"). This text is stored as the
    /// evidence for the memory; do not paraphrase or add to it.
    request: String,
}

/// `list_sessions` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListSessionsArgs {
    /// How many sessions to return, 1 to 20 (default 10).
    #[serde(default)]
    limit: Option<u64>,
    /// The `next_cursor` of a previous call, for the next page.
    #[serde(default)]
    cursor: Option<String>,
    /// List every workspace's sessions instead of only the current workspace's.
    #[serde(default)]
    all_workspaces: bool,
}

/// `session_context` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ContextArgs {
    /// The session.
    session_id: String,
    /// Show the context as it was when the store's log ended at this position (time travel);
    /// omit for now.
    #[serde(default)]
    as_of_position: Option<u64>,
    /// The `next_cursor` of a previous call, for the next page of a long context.
    #[serde(default)]
    cursor: Option<String>,
}

/// The tools, with descriptions written for the model that calls them.
fn tools() -> Vec<Tool> {
    fn tool<T: JsonSchema>(
        name: &'static str,
        title: &str,
        description: &'static str,
        read_only: bool,
    ) -> Tool {
        let schema =
            schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>();
        let mut schema = match serde_json::to_value(schema) {
            Ok(Value::Object(schema)) => schema,
            _ => Map::new(),
        };
        schema.remove("$schema");
        schema.remove("title");
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = Some(read_only);
        annotations.open_world_hint = Some(false);
        Tool::new(name, description, Arc::new(schema)).with_title(title).with_annotations(annotations)
    }
    vec![
        tool::<SearchArgs>(
            "search_history",
            "Search past conversations",
            "Search the history of past conversations with the user in this workspace (earlier sessions \
             of this and other agents), ranked by relevance. Use it when the user refers to earlier work, \
             a past decision, or something \"we did before\". Returns up to 10 matches, each with the \
             session, turn and message it is in and a short snippet; pass a match's session_id and \
             message_id to read_history to read the conversation around it. Secrets are redacted.",
            true,
        ),
        tool::<ReadArgs>(
            "read_history",
            "Read a past conversation",
            "Read a window of a past session's conversation: the turn holding a message (or a given turn) \
             and up to 4 turns before and after it, with the user's and assistant's messages and tool \
             calls in order. Use it after search_history to see the context of a match. Long texts are \
             shortened to fit; secrets are redacted.",
            true,
        ),
        tool::<RecallArgs>(
            "recall_memory",
            "Recall remembered facts",
            "Recall facts and preferences remembered from earlier sessions (what the user asked to be \
             remembered, stated preferences, facts about the user and the project) that match a query, \
             for this workspace and globally, best match first, each with where it was learned.",
            true,
        ),
        tool::<WhyArgs>(
            "why_memory",
            "Why a fact is remembered",
            "Show why a remembered fact exists: the user's own words it was learned from (with the \
             session, the store's log position and hash of each), the values it replaced and what \
             replaced it, and the merges that made it. Pass an item id from recall_memory. Secrets \
             are redacted.",
            true,
        ),
        tool::<RememberArgs>(
            "remember",
            "Remember what the user asked",
            "Store something the user explicitly asked you to remember, so that later sessions can \
             recall it. Pass the user's own words exactly as they said them; they are kept as the \
             evidence. Only what the words support is stored; credentials are never stored.",
            false,
        ),
        tool::<ListSessionsArgs>(
            "list_sessions",
            "List past sessions",
            "List the sessions of this workspace, most recently active first, with their titles, sizes \
             and times. Use a session_id with read_history or session_context.",
            true,
        ),
        tool::<ContextArgs>(
            "session_context",
            "A session's context at a point in time",
            "Show what a session's next model request would carry: the summary of its compacted earlier \
             part (if any) and its recent messages, now or as of a past position of the store's log \
             (time travel: as_of_position). Paged for long sessions; secrets are redacted.",
            true,
        ),
    ]
}

/// The MCP handler: one per `mnemo mcp` process.
#[derive(Clone)]
struct MnemoMcp {
    inner: Arc<Inner>,
}

struct Inner {
    options: McpOptions,
    /// The store server connection, made at the first tool call.
    client: Mutex<Option<Client>>,
    /// The workspace, once resolved; cleared when the client's roots change.
    workspace: Mutex<Option<Option<String>>>,
    /// This connection's session in the store, once created.
    session: Mutex<Option<String>>,
    /// Everything this connection recorded, as one growing transcript in the mnemo format: each
    /// record is imported by importing the whole of it again, so the store's capture appends only
    /// the new lines and a retried import appends nothing twice.
    transcript: tokio::sync::Mutex<String>,
    /// The next turn number of this connection's session.
    turns: AtomicU64,
    session_id: String,
}

/// A tool failure the model should read.
struct ToolError(String);

impl From<ClientError> for ToolError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Rpc(error) => ToolError(error.message),
            other => ToolError(format!("the memory store is unavailable: {other}")),
        }
    }
}

type ToolResult = Result<(String, Value), ToolError>;

impl MnemoMcp {
    fn new(options: McpOptions) -> MnemoMcp {
        let millis =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        MnemoMcp {
            inner: Arc::new(Inner {
                options,
                client: Mutex::new(None),
                workspace: Mutex::new(None),
                session: Mutex::new(None),
                transcript: tokio::sync::Mutex::new(String::new()),
                turns: AtomicU64::new(1),
                session_id: format!("mcp-{millis}-{}", std::process::id()),
            }),
        }
    }

    /// Calls the store server on a blocking thread, connecting (and starting it) first if needed.
    async fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ToolError>
    where
        M::Params: Send + 'static,
        M::Result: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let joined = tokio::task::spawn_blocking(move || -> Result<M::Result, ClientError> {
            let mut slot = inner.client.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if slot.is_none() {
                *slot = Some(Client::connect(&inner.options.store, &inner.options.connect)?);
            }
            match slot.as_mut() {
                Some(client) => client.call::<M>(&params),
                None => Err(ClientError::NoServer { socket: String::new() }),
            }
        })
        .await;
        match joined {
            Ok(result) => result.map_err(ToolError::from),
            Err(error) => Err(ToolError(format!("the store call failed: {error}"))),
        }
    }

    /// The workspace tool calls answer in.
    async fn workspace(&self, peer: &Peer<RoleServer>) -> Option<String> {
        if let Some(known) = self.inner.workspace.lock().ok().and_then(|w| w.clone()) {
            return known;
        }
        let from_roots = roots_workspace(peer).await;
        let resolved = from_roots
            .or_else(|| self.inner.options.workspace.clone())
            .or_else(|| std::env::current_dir().ok().map(|dir| dir.display().to_string()))
            .map(directory_workspace);
        if let Ok(mut slot) = self.inner.workspace.lock() {
            *slot = Some(resolved.clone());
        }
        resolved
    }

    /// This connection's session, created (in `workspace`) at first use.
    async fn session(&self, peer: &Peer<RoleServer>) -> Result<String, ToolError> {
        let known = || self.inner.session.lock().ok().and_then(|s| s.clone());
        if let Some(session) = known() {
            return Ok(session);
        }
        let workspace = self.workspace(peer).await;
        // NOTE: creation is decided under the transcript's lock, so two first calls at once make one
        // session line.
        let mut transcript = self.inner.transcript.lock().await;
        if let Some(session) = known() {
            return Ok(session);
        }
        let client = peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .unwrap_or_else(|| "an MCP client".to_owned());
        let mut line = json!({
            "kind": "session", "session": self.inner.session_id,
            "title": format!("Requests relayed by {client} through mnemo mcp"),
            // Kept out of every session list: it holds the evidence of remember requests, no
            // conversation.
            "source": mnemo::history::RELAY_SESSION_SOURCE,
        });
        if let Some(workspace) = workspace {
            line["workspace"] = Value::String(workspace);
        }
        let text = format!("{line}\n");
        self.import(text.clone()).await?;
        transcript.push_str(&text);
        if let Ok(mut slot) = self.inner.session.lock() {
            *slot = Some(self.inner.session_id.clone());
        }
        Ok(self.inner.session_id.clone())
    }

    /// Adds `lines` to this connection's transcript and imports it; on failure the lines are
    /// dropped again, so the transcript stays what the store holds.
    async fn record(&self, lines: &str) -> Result<m::Object, ToolError> {
        let mut transcript = self.inner.transcript.lock().await;
        let before = transcript.len();
        transcript.push_str(lines);
        let imported = self.import(transcript.clone()).await;
        if imported.is_err() {
            transcript.truncate(before);
        }
        imported
    }

    async fn import(&self, text: String) -> Result<m::Object, ToolError> {
        let params = ImportParams {
            path: None,
            text: Some(text),
            source: Some(format!("mnemo mcp {}", self.inner.session_id)),
            format: Some("mnemo".to_owned()),
        };
        self.call::<Import>(params).await
    }

    fn context(&self, workspace: Option<String>, all_workspaces: bool) -> ToolContext {
        ToolContext { workspace: if all_workspaces { None } else { workspace }, ..ToolContext::default() }
    }

    async fn search_history(&self, args: SearchArgs, peer: &Peer<RoleServer>) -> ToolResult {
        let workspace = self.workspace(peer).await;
        let scoped_to = if args.all_workspaces { None } else { workspace.clone() };
        let params = SearchHistoryParams {
            query: args.query,
            limit: args.limit,
            cursor: args.cursor,
            context: self.context(workspace.clone(), args.all_workspaces),
            as_of: None,
        };
        let found = self.call::<SearchHistory>(params).await?;
        let mut text = match (found.rows.len(), scoped_to) {
            // Say what was left out: an agent started outside the project's folder, or asking about
            // another project, would otherwise take "nothing" for the whole history's answer.
            (0, Some(workspace)) => format!(
                "No past conversation in this workspace ({workspace}) matches {:?}. Sessions of other \
                 workspaces were not searched: call again with all_workspaces=true to search them too.",
                found.query
            ),
            (0, None) => format!("No past conversation matches {:?}.", found.query),
            (n, _) => format!("{n} matches for {:?}, best first:", found.query),
        };
        for (rank, row) in found.rows.iter().enumerate() {
            let title =
                if row.title.is_empty() { String::new() } else { format!(" \"{}\"", redact(&row.title)) };
            let place = match (&row.turn_id, &row.message_id, &row.match_kind) {
                (Some(turn), Some(message), kind) => format!(
                    " turn_id={turn} message_id={message}{}",
                    kind.as_ref().map_or(String::new(), |k| format!(" ({k})"))
                ),
                _ => " (title)".to_owned(),
            };
            text.push_str(&format!(
                "\n{}. session_id={}{title}{place}\n   {}",
                rank + 1,
                row.session_id,
                row.snippet
            ));
        }
        if let Some(cursor) = &found.next_cursor {
            text.push_str(&format!("\nMore matches: call again with cursor={cursor:?}."));
        }
        Ok((text, serde_json::to_value(&found).unwrap_or(Value::Null)))
    }

    async fn read_history(&self, args: ReadArgs, peer: &Peer<RoleServer>) -> ToolResult {
        let workspace = self.workspace(peer).await;
        let params = ReadHistoryParams {
            session_id: args.session_id,
            message_id: args.message_id,
            turn_id: args.turn_id,
            before: args.before,
            after: args.after,
            context: self.context(workspace, args.all_workspaces),
            as_of: None,
        };
        let read = self.call::<ReadHistory>(params).await?;
        let title =
            if read.title.is_empty() { String::new() } else { format!(" \"{}\"", redact(&read.title)) };
        let mut text = format!("Session {}{title}", read.session_id);
        if read.has_more_before {
            text.push_str("\n(earlier turns exist)");
        }
        for turn in &read.turns {
            text.push_str(&format!("\n--- turn {}", turn.turn_id));
            for message in &turn.messages {
                let anchor =
                    if Some(&message.message_id) == read.anchor_message_id.as_ref() { " <<" } else { "" };
                text.push_str(&format!("\n[{}] {}{anchor}", message.role, message.text));
            }
        }
        if read.has_more_after {
            text.push_str("\n(later turns exist)");
        }
        Ok((text, serde_json::to_value(&read).unwrap_or(Value::Null)))
    }

    async fn recall_memory(&self, args: RecallArgs, peer: &Peer<RoleServer>) -> ToolResult {
        let limit = args.limit.unwrap_or(10);
        if !(1..=RECALL_ITEMS_MAX).contains(&limit) {
            return Err(ToolError(format!("limit must be 1 to {RECALL_ITEMS_MAX}, not {limit}")));
        }
        let session = self.session(peer).await?;
        let items =
            self.call::<Recall>(RecallParams { session, query: args.query, limit: Some(limit) }).await?;
        let mut text = match items.len() {
            0 => "Nothing remembered matches.".to_owned(),
            n => format!("{n} remembered facts, best first:"),
        };
        for (rank, item) in items.iter().enumerate() {
            let learned = item
                .sources
                .first()
                .map_or(String::new(), |s| format!(" (learned in session {})", s.session));
            text.push_str(&format!("\n{}. {}{learned}", rank + 1, redact(&item.content)));
        }
        Ok((text, json!({ "items": items })))
    }

    async fn why_memory(&self, args: WhyArgs, peer: &Peer<RoleServer>) -> ToolResult {
        let workspace = self.workspace(peer).await;
        let why = self.call::<MemoryWhy>(m::MemoryGetParams { item: args.item.clone() }).await?;
        let scope = why.as_ref().and_then(|w| w.get("item")?.get("fields")?.get("scope")?.as_str());
        // Another workspace's item is no more visible here than recall would make it.
        let visible = scope.is_some_and(|scope| {
            scope == "global" || workspace.as_deref().is_some_and(|w| scope == format!("workspace:{w}"))
        });
        let Some(why) = why.filter(|_| visible) else {
            return Err(ToolError(format!("no remembered fact {} in this workspace", args.item)));
        };
        let content =
            why.get("item").and_then(|i| i.get("fields")?.get("content")?.as_str()).unwrap_or_default();
        let mut text = format!("{}\nLearned from:", redact(content));
        for evidence in why.get("evidence").and_then(Value::as_array).into_iter().flatten() {
            let field = |name: &str| {
                evidence.get(name).map_or(String::new(), |v| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => "-".to_owned(),
                    other => other.to_string(),
                })
            };
            text.push_str(&format!(
                "\n- session {}, log position {}, hash {}: {}",
                field("session"),
                field("position"),
                field("hash"),
                cut(&redact(&field("text")), CONTEXT_EVENT_CHARS_MAX)
            ));
        }
        for record in why.get("records").and_then(Value::as_array).into_iter().flatten() {
            let action = record.get("action").and_then(Value::as_str).unwrap_or_default();
            let other =
                record.get("other").and_then(Value::as_str).map(|o| format!(" {o}")).unwrap_or_default();
            let position = record.get("position").and_then(Value::as_u64).unwrap_or_default();
            text.push_str(&format!("\n{action}{other} at log position {position}"));
        }
        Ok((text, Value::Object(why)))
    }

    async fn remember(&self, args: RememberArgs, peer: &Peer<RoleServer>) -> ToolResult {
        let request = args.request.trim();
        if request.is_empty() {
            return Err(ToolError(
                "request is empty: pass the user's words asking you to remember".to_owned(),
            ));
        }
        if request.chars().count() > REMEMBER_REQUEST_CHARS_MAX {
            return Err(ToolError(format!("request is longer than {REMEMBER_REQUEST_CHARS_MAX} characters")));
        }
        let session = self.session(peer).await?;
        let turn = self.inner.turns.fetch_add(1, Ordering::AcqRel);
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // NOTE: each request is a turn of its own run: a run's invocation belongs to one turn, and
        // the turn's end seals its run, so a run shared by turns would take only the first.
        let event = json!({
            "session": session, "turn": format!("t{turn}"), "id": format!("{session}-t{turn}-request"),
            "run": format!("{session}-t{turn}-run"), "ts": millis, "role": "user", "author": "user",
            "parts": [{"type": "text", "text": request}],
        });
        let end = json!({"session": session, "turn": format!("t{turn}"), "kind": "turn_end", "status": "completed"});
        self.record(&format!("{event}\n{end}\n")).await?;
        let result = self.call::<Remember>(RememberParams { session, tool_call: None }).await?;
        // The protocol's answer in words, built from the items it lists.
        Ok((redact(&result.text), serde_json::to_value(&result).unwrap_or(Value::Null)))
    }

    async fn list_sessions(&self, args: ListSessionsArgs, peer: &Peer<RoleServer>) -> ToolResult {
        let limit = args.limit.unwrap_or(10) as usize;
        if !(1..=SESSIONS_PAGE_MAX).contains(&limit) {
            return Err(ToolError(format!("limit must be 1 to {SESSIONS_PAGE_MAX}, not {limit}")));
        }
        let offset = page_offset(args.cursor.as_deref())?;
        let workspace = self.workspace(peer).await;
        let sessions = self.call::<Sessions>(m::Empty {}).await?;
        let visible: Vec<&m::SessionInfo> = sessions
            .iter()
            .filter(|s| !s.incognito && (args.all_workspaces || s.workspace == workspace))
            .collect();
        let page: Vec<&m::SessionInfo> = visible.iter().skip(offset).take(limit).copied().collect();
        let next = (offset + page.len() < visible.len()).then(|| (offset + page.len()).to_string());
        let mut text = format!(
            "{} sessions{}:",
            visible.len(),
            if args.all_workspaces { "" } else { " in this workspace" }
        );
        let mut rows = Vec::new();
        for session in &page {
            let title = session.title.as_deref().map(redact).unwrap_or_default();
            text.push_str(&format!(
                "\n- session_id={} \"{title}\" ({}{} turns, {} events{}{})",
                session.session,
                session.source.as_ref().map_or(String::new(), |s| format!("{s}, ")),
                session.turn_count,
                session.event_count,
                session
                    .workspace
                    .as_ref()
                    .filter(|_| args.all_workspaces)
                    .map_or(String::new(), |w| format!(", workspace {w}")),
                session.parent.as_ref().map_or(String::new(), |p| format!(", sub-agent of {p}"))
            ));
            let mut row = serde_json::to_value(session).unwrap_or(Value::Null);
            row["title"] = json!(title);
            rows.push(row);
        }
        if let Some(next) = &next {
            text.push_str(&format!("\nMore sessions: call again with cursor={next:?}."));
        }
        Ok((text, json!({ "sessions": rows, "total": visible.len(), "next_cursor": next })))
    }

    async fn session_context(&self, args: ContextArgs) -> ToolResult {
        let offset = page_offset(args.cursor.as_deref())?;
        let params = m::ContextParams {
            session: args.session_id,
            window: None,
            as_of: args.as_of_position,
            current_turn: None,
        };
        let context = self.call::<m::Context>(params).await?;
        let items = context.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut text = String::new();
        let mut next = None;
        for (index, item) in items.iter().enumerate().skip(offset) {
            let line = render_item(item);
            if !text.is_empty() && text.chars().count() + line.chars().count() > CONTEXT_PAGE_CHARS_MAX {
                next = Some(index.to_string());
                break;
            }
            text.push_str(&line);
            text.push('\n');
        }
        let position = context.get("position").cloned().unwrap_or(Value::Null);
        let header = format!(
            "Context of session {} at log position {position}, items {offset}..",
            context.get("session").and_then(Value::as_str).unwrap_or_default()
        );
        let mut text = format!("{header}\n{text}");
        if let Some(next) = &next {
            text.push_str(&format!("More: call again with cursor={next:?}."));
        }
        Ok((text, json!({ "position": position, "items": items.len(), "next_cursor": next })))
    }
}

/// A page cursor: the index of the first row, as text.
fn page_offset(cursor: Option<&str>) -> Result<usize, ToolError> {
    cursor.map_or(Ok(0), |cursor| {
        cursor.parse().map_err(|_| ToolError(format!("cursor {cursor:?} is not one this tool returned")))
    })
}

fn redact(text: &str) -> String {
    redact_secrets(text).into_owned()
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

/// One item of an assembled history as a line for the model: a checkpoint's summary, or an event's
/// role and visible text (tool calls by name, results shortened), redacted.
fn render_item(item: &Value) -> String {
    match item.get("kind").and_then(Value::as_str) {
        Some("checkpoint") => {
            let summary = item.get("text").and_then(Value::as_str).unwrap_or_default();
            return format!("[summary of earlier conversation]\n{}", redact(summary));
        }
        Some("event") => {}
        _ => return "[provider state]".to_owned(),
    }
    let event = item.get("event").cloned().unwrap_or(Value::Null);
    let role = event.get("role").and_then(Value::as_str).unwrap_or("event");
    let content = event.get("content").cloned().unwrap_or(Value::Null);
    let name = || content.get("name").and_then(Value::as_str).unwrap_or("a tool").to_owned();
    let body = match content.get("kind").and_then(Value::as_str) {
        Some("text") => content.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
        Some("thinking") => return format!("[{role}] (thinking)"),
        Some("function_call") => format!("calls {}", name()),
        Some("function_response") => {
            let result = content.get("result").map(|r| match r {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            });
            format!("result of {}: {}", name(), result.unwrap_or_default())
        }
        Some(other) => format!("({other})"),
        None => String::new(),
    };
    format!("[{role}] {}", cut(&redact(&body), CONTEXT_EVENT_CHARS_MAX))
}

/// The workspace of the client's first `file://` root, if it lists any.
#[expect(
    deprecated,
    reason = "roots are how clients of the 2025 protocol versions (the ones agents speak) name their workspace"
)]
async fn roots_workspace(peer: &Peer<RoleServer>) -> Option<String> {
    let info = peer.peer_info()?;
    info.capabilities.roots.as_ref()?;
    let roots = tokio::time::timeout(ROOTS_WAIT, peer.list_roots()).await.ok()?.ok()?;
    roots.roots.iter().find_map(|root| file_uri_path(&root.uri))
}

/// The workspace of `directory` as a session started there is recorded in
/// ([`mnemo::workspace_of`]); the directory as given when it resolves to no valid workspace id,
/// which the store then refuses by name.
fn directory_workspace(directory: String) -> String {
    mnemo::workspace_of(&directory).map_or(directory, |workspace| workspace.as_str().to_owned())
}

/// The path of a `file://` URI, percent-decoded; `None` for another scheme or a bad encoding.
fn file_uri_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    let mut bytes = Vec::with_capacity(path.len());
    let mut iter = path.bytes();
    while let Some(byte) = iter.next() {
        if byte == b'%' {
            let hex = [iter.next()?, iter.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(byte);
        }
    }
    let path = String::from_utf8(bytes).ok()?;
    let path = path.trim_end_matches('/');
    (!path.is_empty()).then(|| path.to_owned()).or_else(|| Some("/".to_owned()))
}

fn parse_args<T: DeserializeOwned>(
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
        .map_err(|e| ToolError(format!("{tool}: invalid arguments: {e}")))
}

fn respond(result: ToolResult) -> CallToolResult {
    match result {
        Ok((text, structured)) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            if structured.is_object() {
                result.structured_content = Some(structured);
            }
            result
        }
        Err(ToolError(message)) => CallToolResult::error(vec![ContentBlock::text(message)]),
    }
}

impl MnemoMcp {
    /// Runs one of the listed tools with its arguments parsed into the tool's own type.
    async fn run_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        peer: &Peer<RoleServer>,
    ) -> ToolResult {
        match name {
            "search_history" => self.search_history(parse_args(name, arguments)?, peer).await,
            "read_history" => self.read_history(parse_args(name, arguments)?, peer).await,
            "recall_memory" => self.recall_memory(parse_args(name, arguments)?, peer).await,
            "remember" => self.remember(parse_args(name, arguments)?, peer).await,
            "why_memory" => self.why_memory(parse_args(name, arguments)?, peer).await,
            "list_sessions" => self.list_sessions(parse_args(name, arguments)?, peer).await,
            "session_context" => self.session_context(parse_args(name, arguments)?).await,
            other => Err(ToolError(format!("no tool {other:?}"))),
        }
    }
}

impl ServerHandler for MnemoMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mnemo", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Mnemo keeps the history of past conversations and remembered facts for this workspace. \
                 Search it (search_history, then read_history around a match) when the user refers to \
                 earlier work; recall_memory for remembered facts and preferences (why_memory shows the \
                 words one was learned from); remember when the user asks you to remember something.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(MCP_PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        if !tools().iter().any(|tool| tool.name == name) {
            return Err(McpError::invalid_params(format!("no tool {name:?}"), None));
        }
        let result = self.run_tool(name, request.arguments, &context.peer).await;
        Ok(respond(result).into())
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        if let Ok(mut workspace) = self.inner.workspace.lock() {
            *workspace = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(file_uri_path("file:///Users/me/my%20repo/").as_deref(), Some("/Users/me/my repo"));
        assert_eq!(file_uri_path("file://localhost/srv/x").as_deref(), Some("/srv/x"));
        assert_eq!(file_uri_path("https://example.com/x"), None);
        assert_eq!(file_uri_path("file:///bad%zz"), None);
    }

    #[test]
    fn a_root_in_a_repositorys_sub_folder_answers_in_the_repositorys_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("my repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        let uri = format!("file://{}/src/", root.display()).replace(' ', "%20");
        let directory = file_uri_path(&uri).unwrap();
        assert_eq!(directory_workspace(directory), root.to_str().unwrap());
        assert_eq!(directory_workspace("/nowhere/x/".to_owned()), "/nowhere/x");
    }

    #[test]
    fn every_tool_has_an_object_schema_without_references() {
        for tool in tools() {
            let schema = Value::Object((*tool.input_schema).clone());
            assert_eq!(schema["type"], "object", "{}", tool.name);
            assert!(!schema.to_string().contains("$ref"), "{}: {schema}", tool.name);
            assert!(tool.description.as_deref().is_some_and(|d| d.len() > 80), "{}", tool.name);
        }
    }

    #[test]
    fn an_event_line_is_redacted_and_cut() {
        let secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
        let item = json!({"kind": "event", "position": 3, "event": {"role": "user", "content": {"kind": "text", "text": format!("key {secret}")}}});
        let line = render_item(&item);
        assert!(line.starts_with("[user] key "), "{line}");
        assert!(!line.contains(secret), "{line}");
    }
}
