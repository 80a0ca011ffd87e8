//! Every method of the host protocol, each defined once in the table below (`methods!`): its name,
//! its parameters and its result (Rust types that serialize to the wire and derive their JSON
//! Schema), whether it may be sent again, whether it only reads the store, the typed wrapper the
//! clients in other languages generate for it, and the handler that answers it.
//!
//! Derived from the table, never listed again: [`METHOD_NAMES`] (what `initialize` reports),
//! [`METHODS`] (what the server routes each call by), [`schemas`] (the checked-in JSON Schema
//! document the TypeScript and Python clients generate their types and methods from) and
//! [`ReadMethod`] (the only methods the inspector can call).
//!
//! Names mirror the facade: a method of a sub-handle is `<handle>/<call>` (`history/search` is
//! `mnemo.history().search`), a method of the store is its bare name (`append`, `stats`). Parameter
//! and result members are snake_case, as the facade's serialized outputs are.
//!
//! # Adding a method
//!
//! One entry in the table below (its parameter and result types beside it, in this module or in
//! `host`), its handler in `dispatch` (`fn(&Call, Params) -> Result<Result, RpcError>`), then a
//! test; regenerate the schema document and the clients' generated files (the commands are in
//! [`SCHEMA_REGENERATE_COMMAND`] and in each client's `scripts/`), whose staleness tests fail
//! until they are.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dispatch::{self, Call};
use crate::protocol::RpcError;

/// One method: its wire name and its types.
pub trait Method {
    /// The `method` member of the request.
    const NAME: &'static str;
    /// Whether running it twice has the effect of running it once, so a client may send it again
    /// after a lost connection.
    const REPEATABLE: bool;
    /// Whether it only reads the store (the inspector may call it).
    const READ_ONLY: bool;
    /// What `params` holds.
    type Params: Serialize + DeserializeOwned + JsonSchema;
    /// What `result` holds.
    type Result: Serialize + DeserializeOwned + JsonSchema;
}

/// A method that only reads the store: the inspector's calls are bounded to these at compile time.
/// Implemented by the table for every entry marked `read_only: true`, and for no other.
pub trait ReadMethod: Method {}

/// What the table says of one method, for what is derived from it at run time.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct MethodInfo {
    /// The `method` member of the request.
    pub name: &'static str,
    description: &'static str,
    /// See [`Method::REPEATABLE`].
    pub repeatable: bool,
    /// See [`Method::READ_ONLY`].
    pub read_only: bool,
    /// The clients' wrapper: its name (snake_case) and the parameter members it takes in order
    /// before the others; `None` when the clients call the method from their own code (the
    /// handshake).
    pub client: Option<ClientWrapper>,
    schemas: fn() -> (Value, Value),
    pub(crate) route: Route,
}

/// The typed wrapper the TypeScript and Python clients generate for a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientWrapper {
    /// Its name, snake_case (the TypeScript client's is the camelCase of it).
    pub name: &'static str,
    /// The parameter members it takes first, in order; the others follow as options.
    pub arguments: &'static [&'static str],
}

/// Where a call is answered.
#[derive(Clone, Copy)]
pub(crate) enum Route {
    /// By the connection itself (`initialize`, `shutdown`, the subscriptions, the seams' registration):
    /// it holds the state these change.
    Connection,
    /// On a worker thread, against the store: reads the params, runs the handler, writes the result.
    Worker(fn(&Call<'_>, Value) -> Result<Value, RpcError>),
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Route::Connection => "Connection",
            Route::Worker(_) => "Worker",
        })
    }
}

impl MethodInfo {
    /// The method of this name, if the protocol has one.
    pub fn named(name: &str) -> Option<&'static MethodInfo> {
        METHODS.iter().find(|info| info.name == name)
    }

    /// Its documentation as text: the doc comment's lines, each without its leading space.
    pub fn description(&self) -> String {
        let lines: Vec<&str> =
            self.description.lines().map(|line| line.strip_prefix(' ').unwrap_or(line)).collect();
        lines.join("\n").trim_end().to_owned()
    }

    /// Whether the connection answers it itself rather than a worker.
    pub fn answered_by_connection(&self) -> bool {
        matches!(self.route, Route::Connection)
    }
}

fn schemas_of<M: Method>() -> (Value, Value) {
    let params = serde_json::to_value(schemars::schema_for!(M::Params)).unwrap_or_default();
    let result = serde_json::to_value(schemars::schema_for!(M::Result)).unwrap_or_default();
    (params, result)
}

/// Defines every method from one table; see the module's doc for what is derived from it.
macro_rules! methods {
    ($(
        $(#[doc = $doc:literal])*
        $ty:ident = $name:literal {
            params: $params:ty,
            result: $result:ty,
            repeatable: $repeatable:literal,
            read_only: $read_only:tt,
            client: $client:ident $(($($argument:ident),*))?,
            handler: $($handler:tt)+
        }
    )*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl Method for $ty {
                const NAME: &'static str = $name;
                const REPEATABLE: bool = $repeatable;
                const READ_ONLY: bool = $read_only;
                type Params = $params;
                type Result = $result;
            }
            methods!(@read_only $read_only $ty);
        )*

        /// Every method name, in the table's order (the order `docs/PROTOCOL.md` lists them).
        pub const METHOD_NAMES: &[&str] = &[$($name),*];

        /// Every method as the table defines it, in the table's order.
        pub static METHODS: &[MethodInfo] = &[$(
            MethodInfo {
                name: $name,
                description: concat!($($doc, "\n"),*),
                repeatable: $repeatable,
                read_only: $read_only,
                client: methods!(@client $client $(($($argument),*))?),
                schemas: schemas_of::<$ty>,
                route: methods!(@route $ty, $($handler)+),
            }
        ),*];
    };
    (@read_only true $ty:ident) => { impl ReadMethod for $ty {} };
    (@read_only false $ty:ident) => {};
    (@client none) => { None };
    (@client $client:ident ($($argument:ident),*)) => {
        Some(ClientWrapper { name: stringify!($client), arguments: &[$(stringify!($argument)),*] })
    };
    (@route $ty:ident, connection) => { Route::Connection };
    (@route $ty:ident, $handler:path) => {
        Route::Worker(|call, params| dispatch::run::<$ty>(params, |p| $handler(call, p)))
    };
}

methods! {
    /// The handshake: must be a connection's first call; states the protocol version.
    Initialize = "initialize" {
        params: InitializeParams, result: InitializeResult, repeatable: true, read_only: false,
        client: none, handler: connection
    }
    /// Answers at once; checks that the server is alive.
    Ping = "ping" {
        params: Empty, result: Empty, repeatable: true, read_only: true,
        client: ping(), handler: dispatch::ping
    }
    /// `Mnemo::append`: one atomic append of records to a stream at an expected revision.
    Append = "append" {
        params: AppendParams, result: AppendResult, repeatable: false, read_only: false,
        client: append(stream, records, expected_revision), handler: dispatch::append
    }
    /// `Mnemo::import`: a transcript file (or its text), all or nothing; records already in the store
    /// are recognised and not appended again, so it also captures a file that grew.
    Import = "import" {
        params: ImportParams, result: Object, repeatable: true, read_only: false,
        client: import_transcript(), handler: dispatch::import
    }
    /// Captures a session file its agent may still be writing (a host's hook names it): its
    /// complete lines are imported as `import` does, and a last line still being written is left
    /// for the next capture.
    Capture = "capture" {
        params: CaptureParams, result: Object, repeatable: true, read_only: false,
        client: capture(path), handler: dispatch::capture
    }
    /// `history().session_list`: every session, most recent activity first.
    Sessions = "history/sessions" {
        params: Empty, result: Vec<SessionInfo>, repeatable: true, read_only: true,
        client: sessions(), handler: dispatch::sessions
    }
    /// `history().session`: one session's summary (its workspace, counts, flags and source, as the
    /// session catalog holds them); `null` for a session the store does not hold.
    Session = "history/session" {
        params: SessionParams, result: Option<Object>, repeatable: true, read_only: true,
        client: session(session), handler: dispatch::session
    }
    /// `history().transcript`: a session's visible messages (as of a position); `null` if unknown.
    Transcript = "history/transcript" {
        params: TranscriptParams, result: Option<Object>, repeatable: true, read_only: true,
        client: transcript(session), handler: dispatch::transcript
    }
    /// `history().search`: the SearchHistory tool, ranked, paged by `next_cursor`.
    SearchHistory = "history/search" {
        params: SearchHistoryParams, result: SearchHistoryResult, repeatable: true, read_only: true,
        client: search(query), handler: dispatch::search_history
    }
    /// `history().read`: the ReadHistory tool, a bounded window of turns around a message or turn.
    ReadHistory = "history/read" {
        params: ReadHistoryParams, result: ReadHistoryResult, repeatable: true, read_only: true,
        client: read(session_id), handler: dispatch::read_history
    }
    /// `memory().recall`: the RecallMemory pull tool for a session's workspace.
    Recall = "memory/recall" {
        params: RecallParams, result: Vec<RecalledItem>, repeatable: true, read_only: true,
        client: recall(session, query), handler: dispatch::recall
    }
    /// `memory().remember`: stores what the user of a session explicitly asked to remember.
    Remember = "memory/remember" {
        params: RememberParams, result: RememberResult, repeatable: true, read_only: false,
        client: remember(session), handler: dispatch::remember
    }
    /// `memory().get`: one memory item; `null` if unknown.
    MemoryGet = "memory/get" {
        params: MemoryGetParams, result: Option<Object>, repeatable: true, read_only: true,
        client: memory_get(item), handler: dispatch::memory_get
    }
    /// `memory().start_block`: the push block for a session that is starting (which the store may
    /// not hold yet): its workspace's standing facts and most relevant items, within a budget.
    StartBlock = "memory/start_block" {
        params: StartBlockParams, result: StartBlockResult, repeatable: true, read_only: true,
        client: start_block(), handler: dispatch::start_block
    }
    /// `compaction().context`: the history the session's next provider request would receive (as
    /// of a position), with the checkpoint it stands on and diagnostics.
    Context = "compaction/context" {
        params: ContextParams, result: Object, repeatable: true, read_only: true,
        client: context(session), handler: dispatch::context
    }
    /// `Mnemo::stats`: counts, disk use and every stage's digest.
    Stats = "stats" {
        params: Empty, result: Object, repeatable: true, read_only: true,
        client: stats(), handler: dispatch::stats
    }
    /// `Mnemo::verify`: the hash chain and every projection against a fresh rebuild.
    Verify = "verify" {
        params: Empty, result: Object, repeatable: true, read_only: true,
        client: verify(), handler: dispatch::verify
    }
    /// `Mnemo::log_entries`: envelopes of the log from a position.
    Log = "log" {
        params: LogParams, result: Vec<Object>, repeatable: true, read_only: true,
        client: log(), handler: dispatch::log
    }
    /// The log's head: the position of its last envelope (0 for an empty log), to read or follow
    /// from, or to pass as `as_of`.
    LogHead = "log/head" {
        params: Empty, result: LogHeadResult, repeatable: true, read_only: true,
        client: log_head(), handler: dispatch::log_head
    }
    /// Stops the server gracefully, as SIGTERM does: running calls finish, then the store closes.
    Shutdown = "shutdown" {
        params: Empty, result: Empty, repeatable: true, read_only: false,
        client: shutdown(), handler: connection
    }
    /// `compaction().prepare_history`: the next request's history the way a runtime prepares it
    /// before each turn (replay a fitting checkpoint, or compact when the policy says so, or fall
    /// back), with the connection's registered seams unless `client_seams` is false.
    Prepare = "compaction/prepare" {
        params: CompactParams, result: CompactResult, repeatable: true, read_only: false,
        client: prepare(session), handler: dispatch::host::prepare
    }
    /// `compaction().compact`: compacts a session now (the manual trigger).
    Compact = "compaction/compact" {
        params: CompactParams, result: CompactResult, repeatable: false, read_only: false,
        client: compact(session), handler: dispatch::host::compact
    }
    /// `compaction().recover_from_overflow`: reactive recovery after the provider rejected a request
    /// as too long. The single-retry latch is kept per connection, session and turn.
    RecoverOverflow = "compaction/recover_overflow" {
        params: OverflowParams, result: OverflowResult, repeatable: false, read_only: false,
        client: recover_overflow(session), handler: dispatch::host::overflow
    }
    /// `compaction().copy`: copies a session (or its prefix) into a new session.
    CopySession = "compaction/copy" {
        params: CopyParams, result: Object, repeatable: true, read_only: false,
        client: copy(session), handler: dispatch::host::copy
    }
    /// `compaction().policy`: the store's compaction policy.
    Policy = "compaction/policy" {
        params: Empty, result: Object, repeatable: true, read_only: true,
        client: policy(), handler: dispatch::host::policy
    }
    /// `compaction().claims`: a checkpoint's faithfulness report with each claim of its summary
    /// linked to the covered events that support it, or marked unsupported.
    Claims = "compaction/claims" {
        params: ClaimsParams, result: ClaimsResult, repeatable: true, read_only: true,
        client: claims(session, checkpoint), handler: dispatch::host::claims
    }
    /// `memory().extract`: agent-requested extraction of incidental facts, through the registered
    /// `MemoryProposer` when a client registered one.
    Extract = "memory/extract" {
        params: ExtractParams, result: Object, repeatable: true, read_only: false,
        client: extract(session), handler: dispatch::host::extract
    }
    /// `memory().recall_block`: the push route, the block of items that fits the recall budget.
    RecallBlock = "memory/recall_block" {
        params: RecallBlockParams, result: Object, repeatable: true, read_only: true,
        client: recall_block(session), handler: dispatch::host::recall_block
    }
    /// `memory().list`: items by scope.
    MemoryList = "memory/list" {
        params: MemoryListParams, result: Vec<Object>, repeatable: true, read_only: true,
        client: memory_list(), handler: dispatch::host::memory_list
    }
    /// `memory().search`: items by keys.
    MemorySearch = "memory/search" {
        params: MemorySearchParams, result: Vec<Object>, repeatable: true, read_only: true,
        client: memory_search(terms), handler: dispatch::host::memory_search
    }
    /// `memory().apply`: a batch of item mutations (create, update, archive, restore) under one
    /// operation id; a replay of the same operation returns its first result.
    MemoryApply = "memory/apply" {
        params: MemoryApplyParams, result: Object, repeatable: true, read_only: false,
        client: memory_apply(operation, mutations), handler: dispatch::host::memory_apply
    }
    /// `memory().cursor`: a session's extraction cursor.
    MemoryCursor = "memory/cursor" {
        params: SessionParams, result: CursorResult, repeatable: true, read_only: true,
        client: memory_cursor(session), handler: dispatch::host::memory_cursor
    }
    /// `memory().why`: why an item exists: the text, log position and hash of each event it was
    /// learned from, and each record that created, merged, superseded or split it; `null` if
    /// unknown.
    MemoryWhy = "memory/why" {
        params: MemoryGetParams, result: Option<Object>, repeatable: true, read_only: true,
        client: memory_why(item), handler: dispatch::host::memory_why
    }
    /// `memory().history`: every value of the fact an item states, oldest first by log position,
    /// with what each record did to it; the current one is marked.
    MemoryHistory = "memory/history" {
        params: MemoryGetParams, result: Vec<Object>, repeatable: true, read_only: true,
        client: memory_history(item), handler: dispatch::host::memory_history
    }
    /// `memory().unmerge`: undoes the newest merge into an item (the merged statement becomes its
    /// own item again) or the newest supersession of or by it (the replaced item is restored),
    /// under one operation id; a replay of the same operation returns its first result.
    MemoryUnmerge = "memory/unmerge" {
        params: MemoryUnmergeParams, result: Object, repeatable: true, read_only: false,
        client: memory_unmerge(item, operation), handler: dispatch::host::memory_unmerge
    }
    /// `Mnemo::rebuild`: rebuilds one stage (or all) from the log.
    Rebuild = "rebuild" {
        params: RebuildParams, result: Vec<Object>, repeatable: true, read_only: false,
        client: rebuild(), handler: dispatch::host::rebuild
    }
    /// `Mnemo::export_transcript`: every session as Mnemo transcript lines, inline.
    Export = "export" {
        params: Empty, result: ExportResult, repeatable: true, read_only: true,
        client: export(), handler: dispatch::host::export
    }
    /// Follows the log: `log/appended` notifications carry every envelope from `from` on, as they
    /// are appended, until `log/unsubscribe` or the connection closes.
    Subscribe = "log/subscribe" {
        params: SubscribeParams, result: SubscribeResult, repeatable: false, read_only: false,
        client: subscribe(), handler: connection
    }
    /// Ends a tail subscription; no notification of it follows the answer.
    Unsubscribe = "log/unsubscribe" {
        params: UnsubscribeParams, result: Empty, repeatable: true, read_only: false,
        client: unsubscribe(subscription), handler: connection
    }
    /// Runs a `mnemo` command line in the server, against the store it holds, for a command-line
    /// client that found the store held by it: its output comes as `command/output` notifications,
    /// then the answer gives its exit code. Served only by a server the `mnemo` binary runs (other
    /// servers answer `method_not_found`); ends early when the connection closes.
    RunCommand = "command/run" {
        params: RunCommandParams, result: RunCommandResult, repeatable: false, read_only: false,
        client: run_command(argv, cwd), handler: connection
    }
    /// Registers the connection's model seams: compaction and extraction then call back to this
    /// client (`seam/*` requests) while it stays connected.
    RegisterSeams = "seams/register" {
        params: RegisterSeamsParams, result: RegisterSeamsResult, repeatable: true, read_only: false,
        client: register_seams(), handler: connection
    }
}

mod host;
pub use host::*;

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
    /// `remembered` when `items` holds anything, `not_applicable` when the request was read and
    /// nothing came of it, `unavailable` when it could not be served now.
    pub status: String,
    /// Every item the call created, updated or archived, as the store holds it.
    pub items: Vec<RememberedItem>,
    /// Why nothing was stored, absent when something was: `nothing_to_keep`,
    /// `sensitive_information`, `no_workspace`, `nothing_new`, `incognito`, `disabled`,
    /// `ineligible`, `retry_later`, `gave_up` or `unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the extraction engine said when `reason` is `unavailable` and no gate explains it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The answer in words, built from `items` (or `reason`): what to tell the user.
    pub text: String,
}

/// An item `memory/remember` created, updated or archived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RememberedItem {
    /// The item.
    pub item: String,
    /// Its stored content.
    pub content: String,
    /// `preference`, `identity`, `context`, `knowledge`, `failure` or `note`.
    pub kind: String,
    /// `global` or `workspace:<workspace>`.
    pub scope: String,
    /// Whether the request asked for it, not found beside it in the session.
    pub requested: bool,
    /// `created`; `updated` or `noop` when it restated an item memory held; `archived` when an
    /// item of the same call contradicted it.
    pub outcome: String,
}

/// `memory/get` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryGetParams {
    /// The item.
    pub item: String,
}

/// `memory/unmerge` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryUnmergeParams {
    /// The item whose newest merge or supersession is undone.
    pub item: String,
    /// The idempotency key; reuse it to retry safely.
    pub operation: String,
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

/// `log/head` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogHeadResult {
    /// The position of the log's last envelope; 0 when the log is empty.
    pub position: u64,
}

/// Most envelopes one `log` call returns.
pub const LOG_ENTRIES_MAX: u64 = 1000;

/// The JSON Schema of every method's parameters and result, and of the frames and the error, as
/// one document: `{"methods": {NAME: {"description", "repeatable", "read_only", "client": {"name",
/// "arguments"} or null, "params", "result"}}, "request": ..., "response": ..., "error": ...}`, every
/// member of a method from its entry in the table. Clients in other languages generate their types
/// and their typed methods from it.
pub fn schemas() -> Value {
    let mut methods = Map::new();
    for info in METHODS {
        let (params, result) = (info.schemas)();
        let client = info
            .client
            .map(|wrapper| serde_json::json!({ "name": wrapper.name, "arguments": wrapper.arguments }));
        methods.insert(
            info.name.to_owned(),
            serde_json::json!({
                "description": info.description(),
                "repeatable": info.repeatable,
                "read_only": info.read_only,
                "client": client,
                "params": params,
                "result": result,
            }),
        );
    }
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
    server_entry::<CommandOutput>(&mut notifications, false);
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
    fn the_table_names_each_method_and_each_client_wrapper_once() {
        let mut names: Vec<&str> = METHODS.iter().map(|info| info.name).collect();
        assert_eq!(names, METHOD_NAMES);
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len(), "a method name is defined twice");
        let mut wrappers: Vec<&str> = METHODS.iter().filter_map(|info| info.client).map(|w| w.name).collect();
        let count = wrappers.len();
        wrappers.sort_unstable();
        wrappers.dedup();
        assert_eq!(wrappers.len(), count, "two methods have one client wrapper name");
    }

    #[test]
    fn a_client_wrapper_takes_first_only_members_of_its_params() {
        let document = schemas();
        for info in METHODS {
            let Some(wrapper) = info.client else { continue };
            let properties = &document["methods"][info.name]["params"]["properties"];
            for argument in wrapper.arguments {
                assert!(
                    properties.get(argument).is_some(),
                    "{}: {argument} is not a member of its params",
                    info.name
                );
            }
        }
    }

    #[test]
    fn every_read_only_method_is_repeatable_and_answered_by_a_worker() {
        // The inspector sends a read again on a fresh connection when its connection broke.
        for info in METHODS.iter().filter(|info| info.read_only) {
            assert!(info.repeatable, "{} reads only but is not repeatable", info.name);
            assert!(!info.answered_by_connection(), "{} reads only but changes the connection", info.name);
        }
        let writers =
            ["append", "import", "capture", "memory/remember", "memory/apply", "shutdown", "rebuild"];
        for name in writers {
            assert!(!MethodInfo::named(name).unwrap().read_only, "{name} writes");
        }
    }

    #[test]
    fn the_connection_answers_exactly_the_methods_server_rs_has_an_answer_for() {
        // `server::handle_request` answers these itself (they change the connection's state);
        // a new method routed to the connection needs its answer there too.
        let by_connection: Vec<&str> =
            METHODS.iter().filter(|info| info.answered_by_connection()).map(|info| info.name).collect();
        assert_eq!(
            by_connection,
            ["initialize", "shutdown", "log/subscribe", "log/unsubscribe", "command/run", "seams/register"]
        );
    }

    #[test]
    fn the_methods_the_inspector_reads_are_marked_read_only() {
        fn read<M: ReadMethod>() -> &'static str {
            M::NAME
        }
        let inspector = [
            read::<Sessions>(),
            read::<Transcript>(),
            read::<SearchHistory>(),
            read::<ReadHistory>(),
            read::<Recall>(),
            read::<MemoryGet>(),
            read::<Context>(),
            read::<Stats>(),
            read::<Verify>(),
            read::<Log>(),
            read::<RecallBlock>(),
            read::<Claims>(),
            read::<MemoryList>(),
        ];
        for name in inspector {
            assert!(MethodInfo::named(name).unwrap().read_only, "{name}");
        }
    }

    #[test]
    fn expected_revision_reads_as_documented() {
        let exact: ExpectedRevision = serde_json::from_str(r#"{"exact":3}"#).unwrap();
        assert_eq!(exact, ExpectedRevision::Exact(3));
        let none: ExpectedRevision = serde_json::from_str(r#""no_stream""#).unwrap();
        assert_eq!(none, ExpectedRevision::NoStream);
    }
}
