"""The protocol's object types as frozen dataclasses, generated from
``crates/mnemo-server/schema/protocol.json`` by ``scripts/generate_types.py``. Do not edit:
regenerate (``python3 scripts/generate_types.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

JsonObject = dict[str, Any]

#: The protocol version the schema describes.
SCHEMA_PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class AppendParams:
    """`append` parameters."""

    #: The revision the stream must be at.
    expected_revision: Any
    #: The records, appended as one atomic batch.
    records: list[WireRecord]
    #: The stream: `session/<id>` or `memory/<scope>`.
    stream: str
    #: How far the batch must have reached before it is acknowledged; the store's own (`sync_data`
    #: unless configured otherwise) when absent.
    durability: Optional[str] = None


@dataclass(frozen=True)
class AppendResult:
    """`append` result: where the records landed."""

    #: Position of the first appended envelope.
    first_position: int
    #: Position of the last appended envelope.
    last_position: int
    #: The stream's revision after the append.
    last_revision: int


@dataclass(frozen=True)
class AppendedParams:
    """`log/appended` notification parameters."""

    #: Consecutive envelopes (as `log` returns them), in position order, with no gap since the
    #: previous notification.
    entries: list[JsonObject]
    #: The subscription.
    subscription: int


@dataclass(frozen=True)
class CaptureParams:
    """`capture` parameters."""

    #: The session file (absolute, or relative to the server's working directory).
    path: str
    #: `auto` (default), `codex`, `claude-code`, or another `import` format.
    format: Optional[str] = None


@dataclass(frozen=True)
class ClaimEvent:
    """A covered event supporting a claim."""

    #: Its id.
    event: str
    #: Its log position.
    position: int


@dataclass(frozen=True)
class ClaimsParams:
    """`compaction/claims` parameters."""

    #: The checkpoint, one the session stream records.
    checkpoint: str
    #: The session.
    session: str


@dataclass(frozen=True)
class ClaimsResult:
    """`compaction/claims` result: a checkpoint's summary checked claim by claim."""

    #: The checkpoint.
    checkpoint: str
    #: Every claim of its summary, in order; empty for a provider-state checkpoint.
    claims: list[LinkedClaim]
    #: The covered events found on the session stream (the checkpoint's `coverage.event_count`
    #: when the stream holds them all).
    covered_events: int
    #: The log position it was recorded at.
    position: int
    #: Whether checking again found exactly the unsupported claims the recorded report lists
    #: (`null` when there is no recorded report).
    matches_recorded: Optional[bool] = None
    #: The faithfulness report recorded with the checkpoint, when it has one.
    recorded: Optional[FaithfulnessReport] = None


@dataclass(frozen=True)
class CommandOutputParams:
    """`command/output` parameters: a chunk of a running command's output."""

    #: The stream it was written to.
    stream: str
    #: The text, as written (chunks of one stream concatenate to its output).
    text: str


@dataclass(frozen=True)
class CompactParams:
    """`compaction/prepare` and `compaction/compact` parameters."""

    #: The session.
    session: str
    #: Use the seams this connection registered (default true); false: the embedded summarizer.
    client_seams: bool = True
    #: The provider connection the request goes to.
    connection: Optional[ProviderConnection] = None
    #: The turn being answered, never part of prior history.
    current_turn: Optional[str] = None
    #: Turns to keep raw; the policy's value when absent.
    min_recent_turns: Optional[int] = None
    #: The new request's text, for the policy's context-budget history search.
    search_text: Optional[str] = None
    #: Override the policy's context window, in tokens.
    window: Optional[int] = None


@dataclass(frozen=True)
class CompactResult:
    """What a compaction or prepare did, and how the client's seams answered during it."""

    #: The history the next request receives (`items`, `boundary`, `diagnostics`, ...).
    history: JsonObject
    #: Seam calls to this client that failed (it answered an error, did not answer in time, or
    #: went away); compaction failed open on them and the history says so.
    seam_failures: list[SeamFailure]
    #: The checkpoint recorded, if one was.
    recorded: Optional[JsonObject] = None


@dataclass(frozen=True)
class ContextParams:
    """`compaction/context` parameters."""

    #: The session.
    session: str
    #: Assemble as of this log position (time travel).
    as_of: Optional[int] = None
    #: The turn being answered, never part of prior history.
    current_turn: Optional[str] = None
    #: Override the policy's context window, in tokens.
    window: Optional[int] = None


@dataclass(frozen=True)
class CopyParams:
    """`compaction/copy` parameters."""

    #: The session to copy.
    session: str
    #: The new session's id. When absent it is derived from the source and the log's position,
    #: so each call makes a new copy; give it to retry a copy safely.
    target: Optional[str] = None
    #: Where the copy stops; the whole session when absent.
    up_to: Optional[Any] = None


@dataclass(frozen=True)
class CursorResult:
    """`memory/cursor` result."""

    #: The highest event ordinal extraction has evaluated; 0 when none.
    cursor: int


@dataclass(frozen=True)
class ExportResult:
    """`export` result."""

    #: What was written and what was skipped.
    report: JsonObject
    #: The Mnemo transcript lines (`docs/FORMAT.md`), newline-terminated.
    text: str


@dataclass(frozen=True)
class ExtractParams:
    """`memory/extract` parameters."""

    #: The session.
    session: str
    #: Extract through this event; the session's last event when absent.
    terminal_event: Optional[str] = None


@dataclass(frozen=True)
class FaithfulnessReport:
    """A checkpoint's faithfulness report, as recorded with it."""

    #: How many distinct claims were looked up in the covered events.
    checked: int
    #: The claims not found there, in the order the summary states them.
    unsupported: list[str]


@dataclass(frozen=True)
class ImportParams:
    """`import` parameters: exactly one of `path` and `text`."""

    #: `auto` (default), `mnemo`, `openai-chat`, `codex`, `claude-code`, `maka` or `swe-agent`.
    format: Optional[str] = None
    #: A file the server reads (absolute, or relative to the server's working directory).
    path: Optional[str] = None
    #: The name reports and errors use for inline text (default `request`).
    source: Optional[str] = None
    #: The file's text, sent inline (bounded by the frame size).
    text: Optional[str] = None


@dataclass(frozen=True)
class InitializeParams:
    """`initialize` parameters."""

    #: The protocol version the client speaks.
    protocol_version: int
    #: Who the client is, for the server's log (at most 256 bytes).
    client_name: Optional[str] = None


@dataclass(frozen=True)
class InitializeResult:
    """`initialize` result."""

    #: The limits a client must respect.
    limits: Limits
    #: Every method this server answers.
    methods: list[str]
    #: The server's process id.
    pid: int
    #: The protocol version of this connection.
    protocol_version: int
    #: `mnemo`.
    server_name: str
    #: The server's package version.
    server_version: str
    #: The store directory the server owns.
    store: str


@dataclass(frozen=True)
class Limits:
    """The limits `initialize` reports."""

    #: Most calls admitted across all connections.
    calls_admitted_max: int
    #: Most calls one connection may have unanswered.
    connection_calls_max: int
    #: Most connections.
    connections_max: int
    #: Largest frame, in bytes.
    frame_bytes_max: int
    #: Seconds without a connection after which the server exits; 0: never.
    idle_exit_secs: int


@dataclass(frozen=True)
class LinkedClaim:
    """One claim of a checkpoint's summary and the covered events that support it."""

    #: The claim as the summary states it.
    claim: str
    #: How many covered events support it on their own.
    event_count: int
    #: The first 20 covered events whose own text supports it, in log order. A supported claim
    #: may have none: found only across two events' texts.
    events: list[ClaimEvent]
    #: `path`, `code`, `identifier`, `number` or `quoted`.
    kind: str
    #: Whether the covered events support it (the faithfulness check's rule).
    supported: bool


@dataclass(frozen=True)
class LogHeadResult:
    """`log/head` result."""

    #: The position of the log's last envelope; 0 when the log is empty.
    position: int


@dataclass(frozen=True)
class LogParams:
    """`log` parameters."""

    #: The first position (default 1); with `stream`, the first revision in it (default 0).
    from_: Optional[int] = field(default=None, metadata={"wire": "from"})
    #: With `stream`: its last `limit` envelopes instead of those from `from` (which must be absent).
    last: Optional[bool] = None
    #: Envelopes to return, 1..=`LOG_ENTRIES_MAX` (default 50).
    limit: Optional[int] = None
    #: Read only this stream (`session/<id>`, `memory/<scope>`), however long the log.
    stream: Optional[str] = None


@dataclass(frozen=True)
class MemoryApplyParams:
    """`memory/apply` parameters."""

    #: 1 to 32 mutations, all or nothing: `{"type": "create", "item": ITEM}`, `{"type": "update",
    #: "item_id", "expected_version", "item": ITEM}`, `{"type": "archive" | "restore", "item_id",
    #: "expected_version"}`; ITEM is an item's fields as `docs/FORMAT.md` gives them.
    mutations: list[JsonObject]
    #: The operation's idempotency key.
    operation: str


@dataclass(frozen=True)
class MemoryGetParams:
    """`memory/get` parameters."""

    #: The item.
    item: str


@dataclass(frozen=True)
class MemoryListParams:
    """`memory/list` parameters."""

    #: Also archived items.
    include_archived: bool = False
    #: Only items of this kind (`preference`, `project_fact`, ...).
    kind: Optional[str] = None
    #: 1 to 1000; 200 when absent.
    limit: Optional[int] = None
    #: Global items and this workspace's; every scope when absent.
    workspace: Optional[str] = None


@dataclass(frozen=True)
class MemoryProposerSeam:
    """A memory proposer the client implements."""

    #: Its name, for extraction reports.
    name: str


@dataclass(frozen=True)
class MemorySearchParams:
    """`memory/search` parameters."""

    #: 1 to 32 terms, normalized like keys.
    terms: list[str]
    #: Also archived items.
    include_archived: bool = False
    #: 1 to 100; 20 when absent.
    limit: Optional[int] = None
    #: `exact` (default) or `prefix`.
    match_mode: str = 'exact'
    #: Also this workspace's items (global items are always candidates).
    workspace: Optional[str] = None


@dataclass(frozen=True)
class MemoryUnmergeParams:
    """`memory/unmerge` parameters."""

    #: The item whose newest merge or supersession is undone.
    item: str
    #: The idempotency key; reuse it to retry safely.
    operation: str


@dataclass(frozen=True)
class OverflowParams:
    """`compaction/recover_overflow` parameters: what the host saw when the provider rejected a request."""

    #: The turn's user event, already appended.
    anchor: str
    #: The provider's error classifies as a context-length error.
    context_length_error: bool
    #: The failed attempt produced output before failing.
    produced_output: bool
    #: The rejected request's size in tokens; the replacement must be strictly smaller.
    reference_tokens: int
    #: The session.
    session: str
    #: The step that failed (0 = the turn's first request).
    step: int
    #: The turn has steps left to resend in.
    steps_remaining: bool
    #: The turn being answered.
    turn: str
    #: Use the seams this connection registered (default true).
    client_seams: bool = True
    #: The provider connection.
    connection: Optional[ProviderConnection] = None
    #: The log position of the step's last append; the ledger is read once the log holds it.
    durable_through: Optional[int] = None
    #: The rejected request carried historical image tool results that can be dropped.
    historical_images: bool = False
    #: Override the policy's context window, in tokens.
    window: Optional[int] = None


@dataclass(frozen=True)
class OverflowResult:
    """What to do after a provider overflow."""

    #: `retry_without_images`, `resend` (with `checkpoint` and `items`), `surface_provider_error`,
    #: or `failed_open` (with `reason`, `detail`, `diagnostic`).
    action: str
    #: Seam calls to this client that failed during the recovery.
    seam_failures: list[SeamFailure]
    #: For `resend`: the recorded checkpoint.
    checkpoint: Optional[JsonObject] = None
    #: For `failed_open`: the mid-turn detail (`no_safe_completed_span`, `summarizer_failed`, ...).
    detail: Optional[str] = None
    #: For `failed_open`: the typed reason of the failed compaction.
    diagnostic: Optional[str] = None
    #: For `resend`: the items to send in place of the folded history.
    items: Optional[list[Any]] = None
    #: For `failed_open`: always `overflow`.
    reason: Optional[str] = None


@dataclass(frozen=True)
class ProposeParams:
    """`seam/propose` parameters."""

    #: The proposal prompt: `trigger`, `requested_turn`, `evidence`, `prior_summary`, `context`,
    #: `localized_terms` (memory.md §3.9).
    prompt: JsonObject


@dataclass(frozen=True)
class ProposeResult:
    """`seam/propose` result."""

    #: Strict JSON of the proposal schema, as text; the server checks it as it checks the embedded
    #: proposer's.
    text: str


@dataclass(frozen=True)
class ProviderCompactParams:
    """`seam/provider_compact` parameters."""

    #: The input's digest (hex).
    input_digest: str
    #: The conversation, led by the previous compaction item when rolling forward.
    messages: list[Any]


@dataclass(frozen=True)
class ProviderCompactResult:
    """`seam/provider_compact` result."""

    #: The output parts of the provider's response (exactly one compaction item is kept).
    output: list[Any]


@dataclass(frozen=True)
class ProviderCompactorSeam:
    """A provider compactor the client implements."""

    #: The connection and model its state is bound to.
    connection: ProviderConnection
    #: Its name.
    name: str
    #: The version of its prompt.
    prompt_version: str


@dataclass(frozen=True)
class ProviderConnection:
    """The provider connection and model a request goes to (V3 checkpoints replay only to their own)."""

    #: The model.
    model: str
    #: The provider type (`openai-codex` can replay provider state).
    provider_type: str
    #: The connection's slug.
    slug: str


@dataclass(frozen=True)
class ReadHistoryParams:
    """`history/read` parameters (the ReadHistory tool's arguments and context)."""

    #: The session to read.
    session_id: str
    #: Turns after the anchor, 0..=4 (default 1); before + 1 + after <= 5.
    after: Optional[int] = None
    #: Answer as of this log position.
    as_of: Optional[int] = None
    #: Turns before the anchor, 0..=4 (default 1).
    before: Optional[int] = None
    #: Where the call runs from.
    context: Optional[ToolContext] = None
    #: Center on this message.
    message_id: Optional[str] = None
    #: Center on this turn (with `message_id`: the message's turn).
    turn_id: Optional[str] = None


@dataclass(frozen=True)
class ReadHistoryResult:
    """`history/read` result."""

    #: Later turns exist.
    has_more_after: bool
    #: Earlier turns exist.
    has_more_before: bool
    #: Whether it is the calling session.
    is_current_session: bool
    #: The session read.
    session_id: str
    #: The session's title.
    title: str
    #: The turns of the window, in order.
    turns: list[ReadTurn]
    #: The anchor message, when one was given.
    anchor_message_id: Optional[str] = None
    #: The anchor turn.
    anchor_turn_id: Optional[str] = None
    #: The session's last message time (UTC ms).
    last_message_at: Optional[int] = None
    #: Texts were cut to fit the read budget.
    truncated: Optional[bool] = None


@dataclass(frozen=True)
class ReadMessage:
    """One message of a ReadHistory window."""

    #: What it is: `user`, `assistant`, `tool_call` or `tool_result`.
    match_kind: str
    #: The message.
    message_id: str
    #: Its role.
    role: str
    #: Its text, redacted.
    text: str
    #: Its time (UTC ms).
    timestamp: int


@dataclass(frozen=True)
class ReadTurn:
    """One turn of a ReadHistory window."""

    #: Its visible messages.
    messages: list[ReadMessage]
    #: The turn.
    turn_id: str


@dataclass(frozen=True)
class RebuildParams:
    """`rebuild` parameters."""

    #: The stage to rebuild; every stage when absent.
    stage: Optional[str] = None


@dataclass(frozen=True)
class RecallBlockParams:
    """`memory/recall_block` parameters."""

    #: The session whose recent turns (or `query`) select the items.
    session: str
    #: The block as it would have been built at this log position (the memory items as they stood
    #: then, the session's turns up to it).
    as_of: Optional[int] = None
    #: What to look for instead of the recent turns.
    query: Optional[str] = None


@dataclass(frozen=True)
class RecallParams:
    """`memory/recall` parameters (the RecallMemory tool)."""

    #: What to look for.
    query: str
    #: The session whose workspace is searched (with the global items).
    session: str
    #: 1 to 50 (default 10).
    limit: Optional[int] = None


@dataclass(frozen=True)
class RecalledItem:
    """One recalled memory item."""

    #: Its statement.
    content: str
    #: The item.
    item: str
    #: Its keys.
    keys: list[str]
    #: What it is about.
    kind: str
    #: `global` or `workspace:<id>`.
    scope: str
    #: The match score.
    score: int
    #: Where it was learned.
    sources: list[SourceRef]
    #: Its version.
    version: int


@dataclass(frozen=True)
class RegisterSeamsParams:
    """`seams/register` parameters: the seams this connection answers. Each call replaces the
connection's earlier registration.
    """

    #: Answer `seam/propose`. The store has one set of memory models: the latest registration of
    #: any connection is used by every extraction until that connection closes.
    memory_proposer: Optional[MemoryProposerSeam] = None
    #: Answer `seam/provider_compact`.
    provider_compactor: Optional[ProviderCompactorSeam] = None
    #: Answer `seam/summarize`.
    summarizer: Optional[SummarizerSeam] = None
    #: How long the server waits for each seam answer, in milliseconds (default and most:
    #: `SEAM_TIMEOUT_MAX`).
    timeout_ms: Optional[int] = None


@dataclass(frozen=True)
class RegisterSeamsResult:
    """`seams/register` result."""

    #: The server requests this connection will receive.
    registered: list[str]
    #: The timeout of each, in milliseconds.
    timeout_ms: int


@dataclass(frozen=True)
class RememberParams:
    """`memory/remember` parameters."""

    #: The session whose user asked.
    session: str
    #: The `memory_remember` tool call: the evidence ends just before it (else at the session's last
    #: event).
    tool_call: Optional[str] = None


@dataclass(frozen=True)
class RememberResult:
    """`memory/remember` result."""

    #: Every item the call created, updated or archived, as the store holds it.
    items: list[RememberedItem]
    #: `remembered` when `items` holds anything, `not_applicable` when the request was read and
    #: nothing came of it, `unavailable` when it could not be served now.
    status: str
    #: The answer in words, built from `items` (or `reason`): what to tell the user.
    text: str
    #: What the extraction engine said when `reason` is `unavailable` and no gate explains it.
    detail: Optional[str] = None
    #: Why nothing was stored, absent when something was: `nothing_to_keep`,
    #: `sensitive_information`, `no_workspace`, `nothing_new`, `incognito`, `disabled`,
    #: `ineligible`, `retry_later`, `gave_up` or `unavailable`.
    reason: Optional[str] = None


@dataclass(frozen=True)
class RememberedItem:
    """An item `memory/remember` created, updated or archived."""

    #: Its stored content.
    content: str
    #: The item.
    item: str
    #: `preference`, `identity`, `context`, `knowledge`, `failure` or `note`.
    kind: str
    #: `created`; `updated` or `noop` when it restated an item memory held; `archived` when an
    #: item of the same call contradicted it.
    outcome: str
    #: Whether the request asked for it, not found beside it in the session.
    requested: bool
    #: `global` or `workspace:<workspace>`.
    scope: str


@dataclass(frozen=True)
class RunCommandParams:
    """`command/run` parameters: a command line as the `mnemo` binary was given it, and what it needs
of the caller's process.
    """

    #: The arguments, the program's name first (at most [`crate::limits::COMMAND_ARGS_MAX`]).
    argv: list[str]
    #: The caller's working directory (absolute): relative paths in `argv` are resolved in it.
    cwd: str
    #: The caller's environment variables that the command reads (`HOME`, `CODEX_HOME`, ...).
    env: Optional[JsonObject] = None
    #: Inputs the caller read for the command (standard input, a pipe), each spooled to a file
    #: in the store directory: the name `argv` gives it and the spooled file's absolute path.
    inputs: Optional[list[SpooledInput]] = None


@dataclass(frozen=True)
class RunCommandResult:
    """`command/run` result."""

    #: The command's exit code, as it would have exited in the caller's process.
    exit_code: int


@dataclass(frozen=True)
class SeamFailure:
    """A seam call to the client that did not give an answer the server could use."""

    #: What happened, for people.
    message: str
    #: `timeout` (no answer within the registered timeout), `client_error` (the client answered
    #: an error), `invalid_answer` (the answer does not fit the seam's result), or `disconnected`.
    reason: str
    #: The server request: `seam/summarize`, `seam/provider_compact` or `seam/propose`.
    seam: str


@dataclass(frozen=True)
class SearchHistoryParams:
    """`history/search` parameters (the SearchHistory tool's arguments and context)."""

    #: What to look for (at most 500 characters).
    query: str
    #: Answer as of this log position.
    as_of: Optional[int] = None
    #: Where the call runs from.
    context: Optional[ToolContext] = None
    #: A `next_cursor` from an earlier search with the same query.
    cursor: Optional[str] = None
    #: Rows to return, 1..=10 (default 5).
    limit: Optional[int] = None


@dataclass(frozen=True)
class SearchHistoryResult:
    """`history/search` result."""

    #: The query as searched.
    query: str
    #: The matches, best first.
    rows: list[SearchRow]
    #: More matched than the rows or the payload cap allowed.
    truncated: bool
    #: Pass as `cursor` for the next page.
    next_cursor: Optional[str] = None


@dataclass(frozen=True)
class SearchRow:
    """One SearchHistory match."""

    #: Whether the row is from the calling session.
    is_current_session: bool
    #: The session.
    session_id: str
    #: The matched text around the match, redacted.
    snippet: str
    #: A one-line summary of the session.
    summary: str
    #: The session's title.
    title: str
    #: The session's last message time (UTC ms).
    last_message_at: Optional[int] = None
    #: What matched: `user`, `assistant`, `tool_call`, `tool_result` or `title`.
    match_kind: Optional[str] = None
    #: The matched message (absent for a title match).
    message_id: Optional[str] = None
    #: The message's time (UTC ms).
    message_timestamp: Optional[int] = None
    #: The snippet was cut.
    truncated: Optional[bool] = None
    #: The matched message's turn (absent for a title match).
    turn_id: Optional[str] = None


@dataclass(frozen=True)
class SessionInfo:
    """One session of `history/sessions`."""

    #: Archived.
    archived: bool
    #: Runtime events.
    event_count: int
    #: Incognito: history tools refuse it, memory never learns from it.
    incognito: bool
    #: The session.
    session: str
    #: A sub-agent's session.
    subagent: bool
    #: Turns.
    turn_count: int
    #: The own time of its first user or assistant message (UTC ms).
    first_activity: Optional[int] = None
    #: The own time of its latest user or assistant message (UTC ms).
    last_activity: Optional[int] = None
    #: The session that started it (a sub-agent's parent), when its session record names one.
    parent: Optional[str] = None
    #: The format it was imported from (`claude-code`, `codex`, ...) or the name its host gave
    #: its runtime; absent for a session that names none (decision 0166).
    source: Optional[str] = None
    #: The title to show: its own, else its first real request.
    title: Optional[str] = None
    #: Its workspace.
    workspace: Optional[str] = None


@dataclass(frozen=True)
class SessionParams:
    """Parameters naming one session."""

    #: The session.
    session: str


@dataclass(frozen=True)
class SourceRef:
    """Where a memory item was learned: one event of one session."""

    #: The event.
    event: str
    #: The run.
    run: str
    #: The session.
    session: str
    #: The turn.
    turn: str


@dataclass(frozen=True)
class SpooledInput:
    """An input of a `command/run` command line, spooled by the caller."""

    #: The name the command line gives it (`-`, `/dev/fd/63`).
    name: str
    #: The spooled file (absolute, in the store directory); the server removes it once read.
    path: str


@dataclass(frozen=True)
class StartBlockParams:
    """`memory/start_block` parameters."""

    #: The block's budget in tokens, 1..=16000 (default: the pipeline's `recall_budget_tokens`).
    budget_tokens: Optional[int] = None
    #: Match the items against this text instead of recent turns.
    query: Optional[str] = None
    #: The starting session; when the store holds it, its workspace and recent turns are used.
    session: Optional[str] = None
    #: The workspace when the store does not hold the session (the host's working directory).
    workspace: Optional[str] = None


@dataclass(frozen=True)
class StartBlockResult:
    """`memory/start_block` result."""

    #: The items included, in the block's order.
    items: list[RecalledItem]
    #: How many of the first `items` are standing facts (identity, preferences, standing
    #: instructions), included whatever the recent turns are about.
    standing: int
    #: The rendered block; empty when no item is included.
    text: str
    #: Its estimated size in tokens.
    tokens: int


@dataclass(frozen=True)
class SubscribeParams:
    """`log/subscribe` parameters."""

    #: The first position to send; the next one appended when absent (the log's head + 1).
    from_: Optional[int] = field(default=None, metadata={"wire": "from"})


@dataclass(frozen=True)
class SubscribeResult:
    """`log/subscribe` result."""

    #: The first position its notifications will carry.
    from_: int = field(metadata={"wire": "from"})
    #: The subscription's id, which its notifications carry.
    subscription: int


@dataclass(frozen=True)
class SummarizeParams:
    """`seam/summarize` parameters: what a text summarizer is given."""

    #: The input's digest (hex), recorded in the checkpoint's manifest.
    input_digest: str
    #: The system instructions (the summary format the server checks the answer against).
    instructions: str
    #: The conversation as provider messages (`{"role", "content": [parts]}`), fitted to the budget.
    messages: list[Any]
    #: The token estimate of the span the summary replaces.
    span_tokens: int
    #: The previous summary when rolling forward (it is also the first message).
    previous_summary: Optional[str] = None


@dataclass(frozen=True)
class SummarizeResult:
    """`seam/summarize` result."""

    #: The summary, in the format the instructions give.
    text: str
    #: Why the model stopped (default `stop`).
    finish: str = 'stop'


@dataclass(frozen=True)
class SummarizerSeam:
    """A summarizer the client implements."""

    #: Its name (a provider and model), recorded in each checkpoint's manifest.
    name: str
    #: The version of its prompt, recorded likewise.
    prompt_version: str
    #: Whether its input must fit the history budget (default true: a model's context is bounded).
    limits_input: bool = True


@dataclass(frozen=True)
class ToolContext:
    """Where a history tool call runs from (the facade's `HistoryContext`)."""

    #: The session the call runs in: the search is scoped to its workspace, its current turn is
    #: excluded, and an incognito session refuses the call.
    current_session: Optional[str] = None
    #: The turn the call runs in.
    current_turn: Optional[str] = None
    #: The runtime's incognito mode is on: the tools refuse.
    incognito: bool = False
    #: With no current session: answer inside this workspace only (its sessions, its statistics),
    #: as a call from one of its sessions would.
    workspace: Optional[str] = None


@dataclass(frozen=True)
class TranscriptParams:
    """`history/transcript` parameters."""

    #: The session.
    session: str
    #: Answer as of this log position.
    as_of: Optional[int] = None


@dataclass(frozen=True)
class UnsubscribeParams:
    """`log/unsubscribe` parameters."""

    #: The subscription.
    subscription: int


@dataclass(frozen=True)
class WireRecord:
    """A record as `append` takes it: its kind and its payload in the log's JSON form (`docs/FORMAT.md`,
at the kind's current schema version).
    """

    #: The record kind: `session_opened`, `runtime_event`, `turn_ended`, ...
    kind: str
    #: The payload.
    record: JsonObject


__all__ = [
    "JsonObject",
    "SCHEMA_PROTOCOL_VERSION",
    "AppendParams",
    "AppendResult",
    "AppendedParams",
    "CaptureParams",
    "ClaimEvent",
    "ClaimsParams",
    "ClaimsResult",
    "CommandOutputParams",
    "CompactParams",
    "CompactResult",
    "ContextParams",
    "CopyParams",
    "CursorResult",
    "ExportResult",
    "ExtractParams",
    "FaithfulnessReport",
    "ImportParams",
    "InitializeParams",
    "InitializeResult",
    "Limits",
    "LinkedClaim",
    "LogHeadResult",
    "LogParams",
    "MemoryApplyParams",
    "MemoryGetParams",
    "MemoryListParams",
    "MemoryProposerSeam",
    "MemorySearchParams",
    "MemoryUnmergeParams",
    "OverflowParams",
    "OverflowResult",
    "ProposeParams",
    "ProposeResult",
    "ProviderCompactParams",
    "ProviderCompactResult",
    "ProviderCompactorSeam",
    "ProviderConnection",
    "ReadHistoryParams",
    "ReadHistoryResult",
    "ReadMessage",
    "ReadTurn",
    "RebuildParams",
    "RecallBlockParams",
    "RecallParams",
    "RecalledItem",
    "RegisterSeamsParams",
    "RegisterSeamsResult",
    "RememberParams",
    "RememberResult",
    "RememberedItem",
    "RunCommandParams",
    "RunCommandResult",
    "SeamFailure",
    "SearchHistoryParams",
    "SearchHistoryResult",
    "SearchRow",
    "SessionInfo",
    "SessionParams",
    "SourceRef",
    "SpooledInput",
    "StartBlockParams",
    "StartBlockResult",
    "SubscribeParams",
    "SubscribeResult",
    "SummarizeParams",
    "SummarizeResult",
    "SummarizerSeam",
    "ToolContext",
    "TranscriptParams",
    "UnsubscribeParams",
    "WireRecord",
]
