//! The sub-handles `Mnemo` hands out: [`History`], [`Memory`] and [`Compaction`]. Each borrows the
//! store and groups one concern's calls; they are `Copy`, cost nothing to make, and hold no state of
//! their own, so a host may take one per call (`mnemo.history().search(..)`) or keep one around.
//!
//! The calls wire the domain crates to the store; each says whether it waits and for what (the
//! crate documentation's "Blocking" section states the contract for all of them).

use mnemo_compaction::{
    AssembledHistory, CompactionOutcome, CompactionPolicy, MidTurnOutcome, OverflowLatch, TurnGuard,
};
use mnemo_core::{
    CheckpointId, CopyBoundary, EventId, ItemId, MemoryItem, OperationId, Position, SessionId, ToolCallId,
    TurnId,
};
use mnemo_history::{HistoryContext, HistoryReadRequest, HistorySearchRequest, ReadOutcome, SearchOutcome};
use mnemo_memory::{
    ExtractionReport, ItemInput, ListRequest, MutationRequest, OperationResult, RecallBlock, RecallMemory,
    RecalledItem, RememberResult, SearchRequest,
};
use mnemo_pipeline::stages::session_catalog::SessionSummary;

use crate::Result;
use crate::compaction::{
    CheckpointClaims, CompactOptions, ContextOptions, CopyReport, MidTurnOptions, OverflowRecovery,
    ProviderOverflow,
};
use crate::history::{SessionListing, SessionTranscript};
use crate::memory::{ExtractToolResult, MemoryModels, StartBlockRequest};
use crate::mnemo::Mnemo;

impl Mnemo {
    /// Sessions, transcripts, and the SearchHistory / ReadHistory agent tools.
    pub fn history(&self) -> History<'_> {
        History { mnemo: self }
    }

    /// Long-term memory: extraction triggers, recall, and the item store's operations.
    pub fn memory(&self) -> Memory<'_> {
        Memory { mnemo: self }
    }

    /// The next provider request's history, compaction, overflow recovery and conversation copy.
    pub fn compaction(&self) -> Compaction<'_> {
        Compaction { mnemo: self }
    }
}

/// Sessions and their history, live or as of an earlier log position ([`Mnemo::history`]).
///
/// Every call is synchronous and waits for the stages it reads to fold the log as it is now (at
/// most [`CATCH_UP_TIMEOUT`](crate::stages::CATCH_UP_TIMEOUT)); an `as_of` call instead folds the log
/// up to that position in memory, which takes time linear in the position.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    mnemo: &'a Mnemo,
}

impl History<'_> {
    /// Every session, in id order.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>> {
        self.mnemo.sessions()
    }

    /// Every session as a person reads the list: most recent activity first (by the events' own
    /// times), each with its activity span and a title (its own, else its first real request).
    pub fn session_list(&self) -> Result<Vec<SessionListing>> {
        self.mnemo.session_list()
    }

    /// One session's summary; `None` for a session the store does not hold.
    pub fn session(&self, session: &SessionId) -> Result<Option<SessionSummary>> {
        self.mnemo.session(session)
    }

    /// A session's visible messages, as of `as_of` (the whole log when `None`); `None` when the
    /// session has no records by then.
    pub fn transcript(
        &self,
        session: &SessionId,
        as_of: Option<Position>,
    ) -> Result<Option<SessionTranscript>> {
        self.mnemo.show(session, as_of)
    }

    /// SearchHistory: ranked matches across logical sessions, as of `as_of` (the whole log when
    /// `None`). A refused call (bad arguments, incognito, abort) is the inner `Err`, in the tool's
    /// error shape; the outer error is a store failure.
    pub fn search(
        &self,
        request: &HistorySearchRequest,
        context: &HistoryContext<'_>,
        as_of: Option<Position>,
    ) -> Result<SearchOutcome> {
        self.mnemo.search_history(request, context, as_of)
    }

    /// ReadHistory: a bounded window of one session's visible turns, as of `as_of` (the whole log
    /// when `None`). A refused call is the inner `Err`, in the tool's error shape.
    pub fn read(
        &self,
        request: &HistoryReadRequest,
        context: &HistoryContext<'_>,
        as_of: Option<Position>,
    ) -> Result<ReadOutcome> {
        self.mnemo.read_history(request, context, as_of)
    }
}

/// Long-term memory ([`Mnemo::memory`]): the extraction triggers (async: they call the model seams
/// and run in per-session lanes), recall, and the item store's reads and writes (synchronous: each
/// waits for the `memory-index` stage, and a write for its durable append).
#[derive(Debug, Clone, Copy)]
pub struct Memory<'a> {
    mnemo: &'a Mnemo,
}

impl Memory<'_> {
    /// Replaces the model seams extraction uses (the embedded defaults until then).
    pub fn set_models(&self, models: MemoryModels) {
        self.mnemo.set_memory_models(models);
    }

    /// Starts draining: remember and extract calls become unavailable and nothing new is settled;
    /// compaction-triggered work settles only policy denials. [`Mnemo::close`] begins it itself.
    pub fn begin_drain(&self) {
        self.mnemo.begin_memory_drain();
    }

    /// The `memory_remember` tool: stores what the user explicitly asked to remember. Runs in the
    /// session's lane ahead of queued background work. With a tool call id, the range ends just
    /// before that `memory_remember` call; without one, at the session's last event. A replay
    /// returns the same result with no model call.
    pub async fn remember(
        self,
        session: &SessionId,
        tool_call: Option<ToolCallId>,
    ) -> Result<RememberResult> {
        self.mnemo.remember(session, tool_call).await
    }

    /// [`Memory::remember`] with the whole extraction report.
    pub async fn remember_report(
        self,
        session: &SessionId,
        tool_call: Option<ToolCallId>,
    ) -> Result<ExtractionReport> {
        self.mnemo.remember_report(session, tool_call).await
    }

    /// Agent-requested extraction of incidental facts through `terminal_event` (or the session's
    /// last event), in the session's background lane.
    pub async fn extract(
        self,
        session: &SessionId,
        terminal_event: Option<EventId>,
    ) -> Result<ExtractionReport> {
        self.mnemo.extract(session, terminal_event).await
    }

    /// The `memory_extract` tool: flags the running `turn` and answers at once; the extraction runs
    /// when the host reports the turn complete ([`Memory::complete_turn`]). A closed gate answers
    /// `unavailable` and flags nothing.
    pub fn request_extraction(&self, session: &SessionId, turn: &TurnId) -> Result<ExtractToolResult> {
        self.mnemo.request_extraction(session, turn)
    }

    /// Tells memory that `turn` completed (its terminal event is durable). If the turn asked for
    /// extraction, it runs now through the turn's last event and its report is returned; otherwise
    /// nothing runs. Hosts that must not wait spawn this.
    pub async fn complete_turn(self, session: &SessionId, turn: &TurnId) -> Result<Option<ExtractionReport>> {
        self.mnemo.complete_turn(session, turn).await
    }

    /// Extraction over what `checkpoint` covers, in the session's background lane. Compaction calls
    /// it after recording an eligible checkpoint; a host calls it only to retry one.
    pub async fn on_checkpoint_recorded(
        self,
        session: &SessionId,
        checkpoint: &CheckpointId,
    ) -> Result<ExtractionReport> {
        self.mnemo.on_checkpoint_recorded(session, checkpoint).await
    }

    /// One memory item, re-validated on read.
    pub fn get(&self, item: &ItemId) -> Result<Option<MemoryItem>> {
        self.mnemo.memory_get(item)
    }

    /// Items by scope, without a key: every scope, or global items and one workspace's,
    /// optionally of one kind and with archived ones.
    pub fn list(&self, request: &ListRequest) -> Result<Vec<MemoryItem>> {
        self.mnemo.memory_list(request)
    }

    /// Items by keys.
    pub fn search(&self, request: &SearchRequest) -> Result<Vec<MemoryItem>> {
        self.mnemo.memory_search(request)
    }

    /// Applies a batch of mutations under one operation id. Content or a key that holds credential
    /// material is refused before anything is appended.
    pub fn apply(&self, request: &MutationRequest) -> Result<OperationResult> {
        self.mnemo.memory_apply(request)
    }

    /// Creates one item.
    pub fn create(&self, operation: OperationId, item: ItemInput) -> Result<OperationResult> {
        self.mnemo.memory_create(operation, item)
    }

    /// Replaces an item's fields at `expected_version`.
    pub fn update(
        &self,
        operation: OperationId,
        item: ItemId,
        expected_version: u64,
        fields: ItemInput,
    ) -> Result<OperationResult> {
        self.mnemo.memory_update(operation, item, expected_version, fields)
    }

    /// Archives an active item at `expected_version`.
    pub fn archive(
        &self,
        operation: OperationId,
        item: ItemId,
        expected_version: u64,
    ) -> Result<OperationResult> {
        self.mnemo.memory_archive(operation, item, expected_version)
    }

    /// Restores an archived item at `expected_version`.
    pub fn restore(
        &self,
        operation: OperationId,
        item: ItemId,
        expected_version: u64,
    ) -> Result<OperationResult> {
        self.mnemo.memory_restore(operation, item, expected_version)
    }

    /// The pull route: the `RecallMemory {query, limit}` tool for a session's model. Never returns
    /// another workspace's items.
    pub fn recall(&self, session: &SessionId, request: &RecallMemory) -> Result<Vec<RecalledItem>> {
        self.mnemo.recall_memory(session, request)
    }

    /// The push route: the block of items relevant to the session's recent turns (or `query`) that
    /// fits the recall budget (`recall_budget_tokens` of the `memory-index` stage config).
    pub fn recall_block(&self, session: &SessionId, query: Option<&str>) -> Result<RecallBlock> {
        self.mnemo.recall_block(session, query, None)
    }

    /// The push block as it would have been built at log position `as_of`: the memory items as
    /// they stood then (the memory index folded afresh from the log up to it) matched against the
    /// session's turns up to it (or `query`). Linear in the position, as every `as_of` read.
    pub fn recall_block_as_of(
        &self,
        session: &SessionId,
        query: Option<&str>,
        as_of: Position,
    ) -> Result<RecallBlock> {
        self.mnemo.recall_block(session, query, Some(as_of))
    }

    /// The push route at a session's start, when the store may not hold the session yet: the
    /// standing facts of its workspace (the session's own, else `request.workspace`) and the items
    /// relevant to `query`, else to the session's recent turns, else to those of the workspace's
    /// most recently active other session; within `budget_tokens`.
    pub fn start_block(&self, request: &StartBlockRequest) -> Result<RecallBlock> {
        self.mnemo.start_block(request)
    }

    /// A session's extraction cursor (the highest event ordinal already evaluated), 0 when none.
    pub fn cursor(&self, session: &SessionId) -> Result<u64> {
        self.mnemo.memory_cursor(session)
    }
}

/// The next provider request's history and how it is compacted ([`Mnemo::compaction`]).
///
/// `policy`, `context` and `copy` are synchronous; `compact`, `prepare_history`, `compact_mid_turn`
/// and `recover_from_overflow` are async (they call the summarizer seams) and, once a checkpoint is
/// recorded, run memory extraction over what it folded before they return.
#[derive(Debug, Clone, Copy)]
pub struct Compaction<'a> {
    mnemo: &'a Mnemo,
}

impl<'a> Compaction<'a> {
    /// The compaction policy of this store's pipeline (the `latest-checkpoint` stage's config), or
    /// the defaults when the pipeline does not run that stage.
    pub fn policy(&self) -> Result<CompactionPolicy> {
        self.mnemo.compaction_policy()
    }

    /// The history the next provider request of `session` would receive, with the checkpoint it
    /// stands on and every decision's diagnostics. Nothing is written; a compaction the selector
    /// would make shows as `compaction_due`.
    pub fn context(&self, session: &SessionId, options: &ContextOptions) -> Result<AssembledHistory> {
        self.mnemo.context(session, options)
    }

    /// A checkpoint's faithfulness report with each claim of its summary linked to the covered
    /// events that support it, or marked unsupported (the check's own rule, run again).
    pub fn claims(&self, session: &SessionId, checkpoint: &CheckpointId) -> Result<CheckpointClaims> {
        self.mnemo.checkpoint_claims(session, checkpoint)
    }

    /// Compacts `session` now (the manual trigger). A failure to summarize or record is not an
    /// error: the outcome's history says how it failed open.
    pub async fn compact(self, session: &SessionId, options: &CompactOptions) -> Result<CompactionOutcome> {
        self.mnemo.compact(session, options).await
    }

    /// Prepares the next request's history the way a runtime does before each turn: replays a
    /// fitting checkpoint, or compacts when the policy says so, or falls back.
    pub async fn prepare_history(
        self,
        session: &SessionId,
        options: &CompactOptions,
    ) -> Result<CompactionOutcome> {
        self.mnemo.prepare_history(session, options).await
    }

    /// Marks a turn as running on `session` until the guard drops: manual compaction is refused
    /// meanwhile (`session_busy`). `None` if a turn already runs.
    pub fn begin_turn(&self, session: &SessionId) -> Option<TurnGuard<'a>> {
        self.mnemo.begin_turn(session)
    }

    /// Copies `session` (up to `up_to`, or whole) into a new session under new identities, with its
    /// text checkpoints rebuilt: one atomic append of a new stream, whatever the session's length
    /// (the copy's own batch limits, `limits::COPY_RECORDS_MAX`). A copy through or before a turn
    /// keeps the turns' events wherever they were logged; streaming chunks are never copied. A
    /// target that already holds this copy returns it (retry freely); a target holding anything else,
    /// an archived revision family and a continuation run are refused
    /// ([`CopyRefusal`](crate::compaction::CopyRefusal)). Without a `target`, one is derived from
    /// the source and the log's position, so each call makes a new copy: give one to retry safely.
    /// Blocks for one durable append.
    pub fn copy(
        &self,
        session: &SessionId,
        up_to: Option<CopyBoundary>,
        target: Option<SessionId>,
    ) -> Result<CopyReport> {
        self.mnemo.copy_conversation(session, up_to, target)
    }

    /// Compacts inside a running turn: folds a safe prefix of prior history and the turn so far
    /// (never splitting a tool call from its result), records it, and returns what later steps send.
    /// Every failure is a fail-open outcome; the turn keeps its raw projection. Waits at most
    /// `mid_turn.ledger_wait` for `mid_turn.durable_through`.
    pub async fn compact_mid_turn(
        self,
        session: &SessionId,
        mid_turn: &MidTurnOptions,
        options: &CompactOptions,
    ) -> Result<MidTurnOutcome> {
        self.mnemo.compact_mid_turn(session, mid_turn, options).await
    }

    /// Reactive recovery after the provider rejected a request as too long: once per turn
    /// (`latch`), before any output, with steps left. The first resort is dropping historical
    /// images; otherwise a compaction whose replacement must be smaller than the rejected request.
    /// On failure the host surfaces the provider's real error; nothing synthetic is produced.
    pub async fn recover_from_overflow(
        self,
        session: &SessionId,
        latch: &mut OverflowLatch,
        overflow: &ProviderOverflow,
        options: &CompactOptions,
    ) -> Result<OverflowRecovery> {
        self.mnemo.recover_from_overflow(session, latch, overflow, options).await
    }
}
