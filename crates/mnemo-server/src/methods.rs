//! Every method of the host protocol: its name, its parameters and its result, as Rust types that
//! serialize to the wire and derive their JSON Schema ([`schemas`]).
//!
//! Names mirror the facade: a method of a sub-handle is `<handle>/<call>` (`history/search` is
//! `mnemo.history().search`), a method of the store is its bare name (`append`, `stats`). Parameter
//! and result members are snake_case, as the facade's serialized outputs are.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One method: its wire name and its types.
pub trait Method {
    /// The `method` member of the request.
    const NAME: &'static str;
    /// Whether running it twice has the effect of running it once, so a client may send it again
    /// after a lost connection.
    const REPEATABLE: bool;
    /// What `params` holds.
    type Params: Serialize + DeserializeOwned + JsonSchema;
    /// What `result` holds.
    type Result: Serialize + DeserializeOwned + JsonSchema;
}

macro_rules! method {
    ($(#[$doc:meta])* $ty:ident, $name:literal, repeatable: $repeatable:literal, $params:ty => $result:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            const REPEATABLE: bool = $repeatable;
            type Params = $params;
            type Result = $result;
        }
    };
}

method!(
    /// The handshake: must be a connection's first call; states the protocol version.
    Initialize, "initialize", repeatable: true, InitializeParams => InitializeResult);
method!(
    /// Answers at once; checks that the server is alive.
    Ping, "ping", repeatable: true, Empty => Empty);
method!(
    /// `Mnemo::append`: one atomic append of records to a stream at an expected revision.
    Append, "append", repeatable: false, AppendParams => AppendResult);
method!(
    /// `Mnemo::import`: a transcript file (or its text), all or nothing; records already in the store
    /// are recognised and not appended again, so it also captures a file that grew.
    Import, "import", repeatable: true, ImportParams => Object);
method!(
    /// Captures a session file its agent may still be writing (a host's hook names it): its
    /// complete lines are imported as `import` does, and a last line still being written is left
    /// for the next capture.
    Capture, "capture", repeatable: true, CaptureParams => Object);
method!(
    /// `history().session_list`: every session, most recent activity first.
    Sessions, "history/sessions", repeatable: true, Empty => Vec<SessionInfo>);
method!(
    /// `history().transcript`: a session's visible messages (as of a position); `null` if unknown.
    Transcript, "history/transcript", repeatable: true, TranscriptParams => Option<Object>);
method!(
    /// `history().search`: the SearchHistory tool, ranked, paged by `next_cursor`.
    SearchHistory, "history/search", repeatable: true, SearchHistoryParams => SearchHistoryResult);
method!(
    /// `history().read`: the ReadHistory tool, a bounded window of turns around a message or turn.
    ReadHistory, "history/read", repeatable: true, ReadHistoryParams => ReadHistoryResult);
method!(
    /// `memory().recall`: the RecallMemory pull tool for a session's workspace.
    Recall, "memory/recall", repeatable: true, RecallParams => Vec<RecalledItem>);
method!(
    /// `memory().remember`: stores what the user of a session explicitly asked to remember.
    Remember, "memory/remember", repeatable: true, RememberParams => RememberResult);
method!(
    /// `memory().get`: one memory item; `null` if unknown.
    MemoryGet, "memory/get", repeatable: true, MemoryGetParams => Option<Object>);
method!(
    /// `memory().start_block`: the push block for a session that is starting (which the store may
    /// not hold yet): its workspace's standing facts and most relevant items, within a budget.
    StartBlock, "memory/start_block", repeatable: true, StartBlockParams => StartBlockResult);
method!(
    /// `compaction().context`: the history the session's next provider request would receive (as
    /// of a position), with the checkpoint it stands on and diagnostics.
    Context, "compaction/context", repeatable: true, ContextParams => Object);
method!(
    /// `Mnemo::stats`: counts, disk use and every stage's digest.
    Stats, "stats", repeatable: true, Empty => Object);
method!(
    /// `Mnemo::verify`: the hash chain and every projection against a fresh rebuild.
    Verify, "verify", repeatable: true, Empty => Object);
method!(
    /// `Mnemo::log_entries`: envelopes of the log from a position.
    Log, "log", repeatable: true, LogParams => Vec<Object>);
method!(
    /// Stops the server gracefully, as SIGTERM does: running calls finish, then the store closes.
    Shutdown, "shutdown", repeatable: true, Empty => Empty);

mod host;
pub use host::*;

/// Every method name, in the order `docs/PROTOCOL.md` lists them.
pub const METHOD_NAMES: &[&str] = &[
    Initialize::NAME,
    Ping::NAME,
    Append::NAME,
    Import::NAME,
    Capture::NAME,
    Sessions::NAME,
    Transcript::NAME,
    SearchHistory::NAME,
    ReadHistory::NAME,
    Recall::NAME,
    Remember::NAME,
    MemoryGet::NAME,
    StartBlock::NAME,
    Context::NAME,
    Stats::NAME,
    Verify::NAME,
    Log::NAME,
    Shutdown::NAME,
    Prepare::NAME,
    Compact::NAME,
    RecoverOverflow::NAME,
    CopySession::NAME,
    Policy::NAME,
    Claims::NAME,
    Extract::NAME,
    RecallBlock::NAME,
    MemoryList::NAME,
    MemorySearch::NAME,
    MemoryApply::NAME,
    MemoryCursor::NAME,
    Rebuild::NAME,
    Export::NAME,
    Subscribe::NAME,
    Unsubscribe::NAME,
    RegisterSeams::NAME,
];

/// A JSON object whose members the facade's own output defines (documented in `docs/FORMAT.md`).
pub type Object = Map<String, Value>;

/// No parameters, or no result: `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `initialize` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeParams {
    /// The protocol version the client speaks.
    pub protocol_version: u32,
    /// Who the client is, for the server's log (at most 256 bytes).
    #[serde(default)]
    pub client_name: Option<String>,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InitializeResult {
    /// The protocol version of this connection.
    pub protocol_version: u32,
    /// `mnemo`.
    pub server_name: String,
    /// The server's package version.
    pub server_version: String,
    /// The store directory the server owns.
    pub store: String,
    /// The server's process id.
    pub pid: u32,
    /// Every method this server answers.
    pub methods: Vec<String>,
    /// The limits a client must respect.
    pub limits: Limits,
}

/// The limits `initialize` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    /// Largest frame, in bytes.
    pub frame_bytes_max: u64,
    /// Most calls one connection may have unanswered.
    pub connection_calls_max: u64,
    /// Most calls admitted across all connections.
    pub calls_admitted_max: u64,
    /// Most connections.
    pub connections_max: u64,
    /// Seconds without a connection after which the server exits; 0: never.
    pub idle_exit_secs: u64,
}

/// Which revision an append expects its stream at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedRevision {
    /// Append whatever the stream's state.
    Any,
    /// The stream must not exist yet.
    NoStream,
    /// The stream's last envelope must have exactly this revision.
    Exact(u64),
}

/// `append` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendParams {
    /// The stream: `session/<id>` or `memory/<scope>`.
    pub stream: String,
    /// The revision the stream must be at.
    pub expected_revision: ExpectedRevision,
    /// The records, appended as one atomic batch.
    pub records: Vec<WireRecord>,
    /// How far the batch must have reached before it is acknowledged; the store's own (`sync_data`
    /// unless configured otherwise) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
}

/// How far an append must have reached before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Written to the operating system: survives the server being killed, not a power loss.
    Buffered,
    /// The journal's data synced (`fdatasync`): survives a power loss.
    SyncData,
    /// The journal synced with its metadata (`fsync`).
    SyncAll,
}

/// A record as `append` takes it: its kind and its payload in the log's JSON form (`docs/FORMAT.md`,
/// at the kind's current schema version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireRecord {
    /// The record kind: `session_opened`, `runtime_event`, `turn_ended`, ...
    pub kind: String,
    /// The payload.
    pub record: Object,
}

impl WireRecord {
    /// A record in this form: its kind's name and its canonical JSON payload (validated as an
    /// append validates it).
    pub fn from_record(record: &mnemo::records::Record) -> Result<WireRecord, mnemo::records::EncodeError> {
        let bytes = record.encode()?;
        let payload = match serde_json::from_slice(&bytes) {
            Ok(Value::Object(payload)) => payload,
            // The canonical encoding of every record kind is a JSON object.
            _ => Object::new(),
        };
        Ok(WireRecord { kind: record.kind().name().to_owned(), record: payload })
    }
}

/// `append` result: where the records landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppendResult {
    /// Position of the first appended envelope.
    pub first_position: u64,
    /// Position of the last appended envelope.
    pub last_position: u64,
    /// The stream's revision after the append.
    pub last_revision: u64,
}

/// `import` parameters: exactly one of `path` and `text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportParams {
    /// A file the server reads (absolute, or relative to the server's working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// The file's text, sent inline (bounded by the frame size).
    #[serde(default)]
    pub text: Option<String>,
    /// The name reports and errors use for inline text (default `request`).
    #[serde(default)]
    pub source: Option<String>,
    /// `auto` (default), `mnemo`, `openai-chat`, `codex`, `claude-code`, `maka` or `swe-agent`.
    #[serde(default)]
    pub format: Option<String>,
}

/// `capture` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureParams {
    /// The session file (absolute, or relative to the server's working directory).
    pub path: String,
    /// `auto` (default), `codex`, `claude-code`, or another `import` format.
    #[serde(default)]
    pub format: Option<String>,
}

/// `memory/start_block` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBlockParams {
    /// The starting session; when the store holds it, its workspace and recent turns are used.
    #[serde(default)]
    pub session: Option<String>,
    /// The workspace when the store does not hold the session (the host's working directory).
    #[serde(default)]
    pub workspace: Option<String>,
    /// Match the items against this text instead of recent turns.
    #[serde(default)]
    pub query: Option<String>,
    /// The block's budget in tokens, 1..=16000 (default: the pipeline's `recall_budget_tokens`).
    #[serde(default)]
    pub budget_tokens: Option<u64>,
}

/// `memory/start_block` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StartBlockResult {
    /// The rendered block; empty when no item is included.
    pub text: String,
    /// Its estimated size in tokens.
    pub tokens: u64,
    /// The items included, in the block's order.
    pub items: Vec<RecalledItem>,
    /// How many of the first `items` are standing facts (identity, preferences, standing
    /// instructions), included whatever the recent turns are about.
    pub standing: u64,
}

/// `history/transcript` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TranscriptParams {
    /// The session.
    pub session: String,
    /// Answer as of this log position.
    #[serde(default)]
    pub as_of: Option<u64>,
}

/// Where a history tool call runs from (the facade's `HistoryContext`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolContext {
    /// The session the call runs in: the search is scoped to its workspace, its current turn is
    /// excluded, and an incognito session refuses the call.
    #[serde(default)]
    pub current_session: Option<String>,
    /// The turn the call runs in.
    #[serde(default)]
    pub current_turn: Option<String>,
    /// With no current session: answer inside this workspace only (its sessions, its statistics),
    /// as a call from one of its sessions would.
    #[serde(default)]
    pub workspace: Option<String>,
    /// The runtime's incognito mode is on: the tools refuse.
    #[serde(default)]
    pub incognito: bool,
}

/// `history/search` parameters (the SearchHistory tool's arguments and context).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchHistoryParams {
    /// What to look for (at most 500 characters).
    pub query: String,
    /// Rows to return, 1..=10 (default 5).
    #[serde(default)]
    pub limit: Option<i64>,
    /// A `next_cursor` from an earlier search with the same query.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Where the call runs from.
    #[serde(default)]
    pub context: ToolContext,
    /// Answer as of this log position.
    #[serde(default)]
    pub as_of: Option<u64>,
}

/// `history/search` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHistoryResult {
    /// The query as searched.
    pub query: String,
    /// More matched than the rows or the payload cap allowed.
    pub truncated: bool,
    /// Pass as `cursor` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The matches, best first.
    pub rows: Vec<SearchRow>,
}

/// One SearchHistory match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchRow {
    /// The session.
    pub session_id: String,
    /// The matched message's turn (absent for a title match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The matched message (absent for a title match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// What matched: `user`, `assistant`, `tool_call`, `tool_result` or `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_kind: Option<String>,
    /// The message's time (UTC ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_timestamp: Option<u64>,
    /// Whether the row is from the calling session.
    pub is_current_session: bool,
    /// The session's title.
    pub title: String,
    /// A one-line summary of the session.
    pub summary: String,
    /// The matched text around the match, redacted.
    pub snippet: String,
    /// The session's last message time (UTC ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_at: Option<u64>,
    /// The snippet was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// `history/read` parameters (the ReadHistory tool's arguments and context).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadHistoryParams {
    /// The session to read.
    pub session_id: String,
    /// Center on this message.
    #[serde(default)]
    pub message_id: Option<String>,
    /// Center on this turn (with `message_id`: the message's turn).
    #[serde(default)]
    pub turn_id: Option<String>,
    /// Turns before the anchor, 0..=4 (default 1).
    #[serde(default)]
    pub before: Option<i64>,
    /// Turns after the anchor, 0..=4 (default 1); before + 1 + after <= 5.
    #[serde(default)]
    pub after: Option<i64>,
    /// Where the call runs from.
    #[serde(default)]
    pub context: ToolContext,
    /// Answer as of this log position.
    #[serde(default)]
    pub as_of: Option<u64>,
}

/// `history/read` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReadHistoryResult {
    /// The session read.
    pub session_id: String,
    /// Whether it is the calling session.
    pub is_current_session: bool,
    /// The anchor message, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_message_id: Option<String>,
    /// The anchor turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_turn_id: Option<String>,
    /// The session's title.
    pub title: String,
    /// The session's last message time (UTC ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_at: Option<u64>,
    /// The turns of the window, in order.
    pub turns: Vec<ReadTurn>,
    /// Earlier turns exist.
    pub has_more_before: bool,
    /// Later turns exist.
    pub has_more_after: bool,
    /// Texts were cut to fit the read budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// One turn of a ReadHistory window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReadTurn {
    /// The turn.
    pub turn_id: String,
    /// Its visible messages.
    pub messages: Vec<ReadMessage>,
}

/// One message of a ReadHistory window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReadMessage {
    /// The message.
    pub message_id: String,
    /// What it is: `user`, `assistant`, `tool_call` or `tool_result`.
    pub match_kind: String,
    /// Its role.
    pub role: String,
    /// Its text, redacted.
    pub text: String,
    /// Its time (UTC ms).
    pub timestamp: u64,
}

/// One session of `history/sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    /// The session.
    pub session: String,
    /// Its workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The title to show: its own, else its first real request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Runtime events.
    pub event_count: u64,
    /// Turns.
    pub turn_count: u64,
    /// The own time of its first user or assistant message (UTC ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_activity: Option<u64>,
    /// The own time of its latest user or assistant message (UTC ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<u64>,
    /// Incognito: history tools refuse it, memory never learns from it.
    pub incognito: bool,
    /// Archived.
    pub archived: bool,
    /// A sub-agent's session.
    pub subagent: bool,
    /// The format it was imported from (`claude-code`, `codex`, ...) or the name its host gave
    /// its runtime; absent for a session that names none (decision 0166).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The session that started it (a sub-agent's parent), when its session record names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// `memory/recall` parameters (the RecallMemory tool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallParams {
    /// The session whose workspace is searched (with the global items).
    pub session: String,
    /// What to look for.
    pub query: String,
    /// 1 to 50 (default 10).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// One recalled memory item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecalledItem {
    /// The item.
    pub item: String,
    /// Its version.
    pub version: u64,
    /// Its statement.
    pub content: String,
    /// What it is about.
    pub kind: String,
    /// `global` or `workspace:<id>`.
    pub scope: String,
    /// Its keys.
    pub keys: Vec<String>,
    /// Where it was learned.
    pub sources: Vec<SourceRef>,
    /// The match score.
    pub score: u64,
}

/// Where a memory item was learned: one event of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SourceRef {
    /// The session.
    pub session: String,
    /// The run.
    pub run: String,
    /// The turn.
    pub turn: String,
    /// The event.
    pub event: String,
}

/// `memory/remember` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberParams {
    /// The session whose user asked.
    pub session: String,
    /// The `memory_remember` tool call: the evidence ends just before it (else at the session's last
    /// event).
    #[serde(default)]
    pub tool_call: Option<String>,
}

/// `memory/remember` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RememberResult {
    /// `remembered`, `not_applicable` or `unavailable`.
    pub status: String,
    /// The items stored, with their stored content.
    pub requested_items: Vec<RequestedItem>,
    /// Why nothing was stored, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An item `memory/remember` stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RequestedItem {
    /// The item.
    pub item: String,
    /// Its stored content.
    pub content: String,
}

/// `memory/get` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGetParams {
    /// The item.
    pub item: String,
}

/// `compaction/context` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextParams {
    /// The session.
    pub session: String,
    /// Override the policy's context window, in tokens.
    #[serde(default)]
    pub window: Option<u64>,
    /// Assemble as of this log position (time travel).
    #[serde(default)]
    pub as_of: Option<u64>,
    /// The turn being answered, never part of prior history.
    #[serde(default)]
    pub current_turn: Option<String>,
}

/// `log` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    /// The first position (default 1); with `stream`, the first revision in it (default 0).
    #[serde(default)]
    pub from: Option<u64>,
    /// Envelopes to return, 1..=`LOG_ENTRIES_MAX` (default 50).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Read only this stream (`session/<id>`, `memory/<scope>`), however long the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// With `stream`: its last `limit` envelopes instead of those from `from` (which must be absent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last: bool,
}

/// Most envelopes one `log` call returns.
pub const LOG_ENTRIES_MAX: u64 = 1000;

/// The JSON Schema of every method's parameters and result, and of the frames and the error, as
/// one document: `{"methods": {NAME: {"params": ..., "result": ...}}, "request": ..., "response":
/// ..., "error": ...}`. Clients in other languages are generated from it.
pub fn schemas() -> Value {
    fn entry<M: Method>(methods: &mut Map<String, Value>) {
        let params = schemars::schema_for!(M::Params);
        let result = schemars::schema_for!(M::Result);
        methods.insert(
            M::NAME.to_owned(),
            serde_json::json!({ "repeatable": M::REPEATABLE, "params": params, "result": result }),
        );
    }
    let mut methods = Map::new();
    entry::<Initialize>(&mut methods);
    entry::<Ping>(&mut methods);
    entry::<Append>(&mut methods);
    entry::<Import>(&mut methods);
    entry::<Capture>(&mut methods);
    entry::<Sessions>(&mut methods);
    entry::<Transcript>(&mut methods);
    entry::<SearchHistory>(&mut methods);
    entry::<ReadHistory>(&mut methods);
    entry::<Recall>(&mut methods);
    entry::<Remember>(&mut methods);
    entry::<MemoryGet>(&mut methods);
    entry::<StartBlock>(&mut methods);
    entry::<Context>(&mut methods);
    entry::<Stats>(&mut methods);
    entry::<Verify>(&mut methods);
    entry::<Log>(&mut methods);
    entry::<Shutdown>(&mut methods);
    entry::<Prepare>(&mut methods);
    entry::<Compact>(&mut methods);
    entry::<RecoverOverflow>(&mut methods);
    entry::<CopySession>(&mut methods);
    entry::<Policy>(&mut methods);
    entry::<Claims>(&mut methods);
    entry::<Extract>(&mut methods);
    entry::<RecallBlock>(&mut methods);
    entry::<MemoryList>(&mut methods);
    entry::<MemorySearch>(&mut methods);
    entry::<MemoryApply>(&mut methods);
    entry::<MemoryCursor>(&mut methods);
    entry::<Rebuild>(&mut methods);
    entry::<Export>(&mut methods);
    entry::<Subscribe>(&mut methods);
    entry::<Unsubscribe>(&mut methods);
    entry::<RegisterSeams>(&mut methods);
    fn server_entry<M: ServerMessage>(into: &mut Map<String, Value>, with_result: bool) {
        let mut schema = serde_json::json!({ "params": schemars::schema_for!(M::Params) });
        if with_result {
            schema["result"] = serde_json::to_value(schemars::schema_for!(M::Result)).unwrap_or_default();
        }
        into.insert(M::NAME.to_owned(), schema);
    }
    let mut server_requests = Map::new();
    server_entry::<SummarizeSeam>(&mut server_requests, true);
    server_entry::<ProviderCompactSeam>(&mut server_requests, true);
    server_entry::<ProposeSeam>(&mut server_requests, true);
    let mut notifications = Map::new();
    server_entry::<Appended>(&mut notifications, false);
    serde_json::json!({
        "protocol_version": crate::protocol::PROTOCOL_VERSION,
        "methods": methods,
        "server_requests": server_requests,
        "notifications": notifications,
        "request": schemars::schema_for!(crate::protocol::Request),
        "response": schemars::schema_for!(crate::protocol::Response),
        "error": schemars::schema_for!(crate::protocol::RpcError),
    })
}

/// Where the checked-in schema document lives, relative to the repository root.
pub const SCHEMA_PATH: &str = "crates/mnemo-server/schema/protocol.json";

/// The command that regenerates the checked-in schema document from these types.
pub const SCHEMA_REGENERATE_COMMAND: &str =
    "cargo run -q -p mnemo-cli -- serve --print-schema > crates/mnemo-server/schema/protocol.json";

/// [`schemas`] as the checked-in file holds it: pretty-printed, ending in a newline.
pub fn schema_document() -> String {
    format!("{:#}\n", schemas())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_document_covers_every_method() {
        let document = schemas();
        let methods = document["methods"].as_object().unwrap();
        let names: Vec<&str> = methods.keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = METHOD_NAMES.to_vec();
        expected.sort_unstable();
        assert_eq!(names, expected);
        // Parameters with members are described member by member, not as a bare object.
        let search = &methods["history/search"]["params"]["properties"];
        assert!(search["query"]["type"] == "string", "{search}");
        let reason = document["error"]["$defs"]["Reason"].to_string();
        assert!(reason.contains(r#""const":"overloaded""#), "{reason}");
    }

    #[test]
    fn expected_revision_reads_as_documented() {
        let exact: ExpectedRevision = serde_json::from_str(r#"{"exact":3}"#).unwrap();
        assert_eq!(exact, ExpectedRevision::Exact(3));
        let none: ExpectedRevision = serde_json::from_str(r#""no_stream""#).unwrap();
        assert_eq!(none, ExpectedRevision::NoStream);
    }
}
