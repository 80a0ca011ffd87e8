//! Long-term memory through the facade: the item store's operations, extraction triggers run
//! in per-session lanes with the model seams, and recall.
//!
//! How compaction wires in: after the compaction module appends a `CheckpointRecorded` whose
//! `extraction_boundary` is set, it calls [`Mnemo::on_checkpoint_recorded`] (awaiting it, or
//! spawning it on the host's runtime; the call runs in the session's background lane and never
//! fails the compaction). A checkpoint whose disposition is `policy_denied`, or a session whose
//! gate is closed by incognito or a disabled memory, is settled by a denial and a policy-skip
//! commit instead of an extraction.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

pub use mnemo_memory::{
    BoxFuture, CanonicalCandidate, Canonicalization, CanonicalizePrompt, Canonicalizer, CitationView,
    Conflict, ConflictReason, ContextLine, EXTRACT_USER_EVENTS_PER_RANGE_MAX, EmbeddedCanonicalizer,
    EmbeddedProposer, EvidenceView, ExtractionOutcome, ExtractionReport, HeldItem, ItemInput, KeyInput,
    LIST_RESULTS_DEFAULT, LIST_RESULTS_MAX, Link, ListRequest, LocalizationQuery, LocalizationSearch,
    MODEL_CALL_TIMEOUT, MODEL_CALLS_PER_RANGE_MAX, MatchMode, MemoryError, MemoryProposer, ModelError,
    MutationInput, MutationOutcome, MutationRequest, MutationResult, MutationType, NotStored,
    OperationResult, OperationType, Proposal, ProposalPrompt, RECALL_BUDGET_TOKENS_DEFAULT,
    RECALL_RESULTS_DEFAULT, RECALL_RESULTS_MAX, RecallBlock, RecallMemory, RecalledItem, Receipt,
    RejectedCandidate, Rejection, RememberResult, RememberStatus, SEARCH_RESULTS_DEFAULT, SEARCH_RESULTS_MAX,
    START_BLOCK_TOKENS_MAX, ScanLocalization, SearchRequest, SessionBacklog, SessionEvent, StoredItem,
};

use mnemo_core::{
    CheckpointId, CheckpointRecord, EventId, ItemId, MemoryItem, MemoryScope, OperationId, Position, Record,
    SessionId, StreamId, StreamRevision, ToolCallId, TurnId, WorkspaceId,
};
use mnemo_log::ExpectedRevision;
use mnemo_memory::{Decide, ExtractionHost, GateReason, MemoryLedger, MemoryView, Models, Priority, Trigger};
use mnemo_pipeline::StateStore;

mod provenance;

pub use mnemo_memory::{HISTORY_ITEMS_MAX, ItemAction, ItemEvent, ItemHistory};
pub use provenance::{EVIDENCE_TEXT_CHARS_MAX, Evidence, ItemWhy, RecordedEvent};

use crate::error::Error;
pub use crate::memory_runtime::{LastExtraction, MemoryModels};
use crate::mnemo::Mnemo;

/// What [`Memory::start_block`] recalls for: a session that is starting, which the store may not
/// hold yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartBlockRequest {
    /// The session; when the store holds it, its workspace and recent turns are used.
    pub session: Option<SessionId>,
    /// The workspace when the store does not hold the session (a host's working directory).
    pub workspace: Option<WorkspaceId>,
    /// Match the items against this text instead of recent turns.
    pub query: Option<String>,
    /// The block's budget in tokens (1..=[`START_BLOCK_TOKENS_MAX`]); the pipeline's
    /// `recall_budget_tokens` when absent.
    pub budget_tokens: Option<u64>,
}

/// Envelopes read per page when loading a session's events.
const SESSION_PAGE_ENVELOPES_MAX: usize = 1024;

/// What the `memory_extract` tool answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExtractToolResult {
    /// The turn is flagged; extraction runs when it completes.
    Accepted,
    /// The gate is closed (`incognito`, `disabled`, `unavailable`, `ineligible`).
    Unavailable {
        /// Why.
        reason: &'static str,
    },
}

/// The facade's error as memory's host failure, whole: `Error::from` unwraps it again.
fn host_error(error: Error) -> MemoryError {
    MemoryError::host(error)
}

impl MemoryLedger for Mnemo {
    fn state(&self) -> Result<Arc<dyn StateStore>, MemoryError> {
        self.caught_up_store(mnemo_memory::STAGE_NAME).map_err(host_error)
    }

    fn write(&self, decide: &mut Decide<'_>) -> Result<(), MemoryError> {
        // NOTE: the decision and the append happen under one lock, and the state is caught up
        // with the whole log first, so what was checked is what the record meets when folded.
        let _writer = self.memory.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let store = MemoryLedger::state(self)?;
        let now = self.memory.clock.now();
        if let Some(record) = decide(store.as_ref(), now)? {
            let appended =
                self.append(&record.stream(), ExpectedRevision::Any, &[record]).map_err(host_error)?;
            self.catch_up_to(appended.last_position).map_err(host_error)?;
        }
        Ok(())
    }
}

impl ExtractionHost for Mnemo {
    fn gate(&self, session: &SessionId) -> Result<Option<GateReason>, MemoryError> {
        let summary = self.session(session).map_err(host_error)?;
        let draining = self.memory.draining.load(Ordering::SeqCst);
        Ok(mnemo_memory::session_gate(summary.as_ref(), draining))
    }

    fn session_events(&self, session: &SessionId) -> Result<Vec<SessionEvent>, MemoryError> {
        let mut events = Vec::new();
        for record in self.session_records(session).map_err(host_error)? {
            if let Record::RuntimeEvent(event) = record {
                events.push(SessionEvent { ordinal: events.len() as u64 + 1, event });
            }
        }
        Ok(events)
    }

    fn checkpoints(&self, session: &SessionId) -> Result<Vec<CheckpointRecord>, MemoryError> {
        let records = self.session_records(session).map_err(host_error)?;
        Ok(records
            .into_iter()
            .filter_map(|r| match r {
                Record::CheckpointRecorded(c) => Some(c),
                _ => None,
            })
            .collect())
    }

    fn session_scope(&self, session: &SessionId) -> Result<MemoryScope, MemoryError> {
        let summary = self.session(session).map_err(host_error)?;
        Ok(summary.and_then(|s| s.workspace).map_or(MemoryScope::Global, MemoryScope::Workspace))
    }
}

impl Mnemo {
    fn session_records(&self, session: &SessionId) -> Result<Vec<Record>, Error> {
        self.session_records_through(session, Position(u64::MAX))
    }

    /// A session's records at log positions up to `through`, read page by page.
    fn session_records_through(&self, session: &SessionId, through: Position) -> Result<Vec<Record>, Error> {
        let stream = StreamId::session(session);
        let mut records = Vec::new();
        let mut from = StreamRevision(0);
        loop {
            let page =
                crate::blocking::wait(|| self.log.read_stream(&stream, from, SESSION_PAGE_ENVELOPES_MAX))?;
            let Some(last) = page.last() else { break };
            from = StreamRevision(last.revision.0 + 1);
            let full = page.len() == SESSION_PAGE_ENVELOPES_MAX;
            for envelope in page {
                if envelope.position > through {
                    return Ok(records);
                }
                records.push(mnemo_pipeline::LoggedRecord::decode(envelope)?.record);
            }
            if !full {
                break;
            }
        }
        Ok(records)
    }

    async fn run_extraction(
        &self,
        session: &SessionId,
        trigger: Trigger,
        priority: Priority,
    ) -> Result<ExtractionReport, Error> {
        let models = self.memory.models.read().unwrap_or_else(PoisonError::into_inner).clone();
        let _lane = self.memory.lanes.acquire(std::slice::from_ref(session), priority).await;
        let seams = Models {
            proposer: models.proposer.as_ref(),
            canonicalizer: models.canonicalizer.as_ref(),
            localization: models.localization.as_ref(),
        };
        Ok(mnemo_memory::execute(self, seams, session, &trigger).await?)
    }

    /// The workspace a session's recall may see (besides global items).
    fn recall_workspace(&self, session: &SessionId) -> Result<Option<mnemo_core::WorkspaceId>, Error> {
        match self.session(session)? {
            Some(summary) => Ok(summary.workspace),
            None => Err(Error::InvalidInput(format!("no session {session}"))),
        }
    }

    /// A session's runtime events at log positions up to `through`, numbered as
    /// [`ExtractionHost::session_events`] numbers them.
    fn session_events_through(
        &self,
        session: &SessionId,
        through: Position,
    ) -> Result<Vec<SessionEvent>, Error> {
        let events =
            self.session_records_through(session, through)?.into_iter().filter_map(|record| match record {
                Record::RuntimeEvent(event) => Some(event),
                _ => None,
            });
        Ok(events
            .enumerate()
            .map(|(index, event)| SessionEvent { ordinal: index as u64 + 1, event })
            .collect())
    }
}

impl Mnemo {
    /// Long-term memory: extraction triggers, recall, and the item store's operations.
    pub fn memory(&self) -> Memory<'_> {
        Memory { mnemo: self }
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
        *self.mnemo.memory.models.write().unwrap_or_else(PoisonError::into_inner) = models;
    }

    /// Starts draining: remember and extract calls become unavailable and nothing new is settled;
    /// compaction-triggered work settles only policy denials. [`Mnemo::close`] begins it itself.
    pub fn begin_drain(&self) {
        self.mnemo.memory.draining.store(true, Ordering::SeqCst);
    }

    /// The `memory_remember` tool: stores what the user explicitly asked to remember. Runs in the
    /// session's lane ahead of queued background work. With a tool call id, the range ends just
    /// before that `memory_remember` call; without one, at the session's last event. A replay
    /// returns the same result with no model call.
    pub async fn remember(
        self,
        session: &SessionId,
        tool_call: Option<ToolCallId>,
    ) -> crate::Result<RememberResult> {
        let report = self.remember_report(session, tool_call).await?;
        Ok(report.remember_result())
    }

    /// [`Memory::remember`] with the whole extraction report.
    pub async fn remember_report(
        self,
        session: &SessionId,
        tool_call: Option<ToolCallId>,
    ) -> crate::Result<ExtractionReport> {
        // A long stretch before the request's turn is extracted first, in ranges that fit (as
        // `extract` does): one range through the request would hold all of it and never fit.
        if let Some(before) = mnemo_memory::turn_start_before(self.mnemo, session, tool_call.as_ref())?
            && mnemo_memory::extraction_boundaries(self.mnemo, session, Some(&before))?.len() > 1
        {
            self.extract(session, Some(before)).await?;
        }
        let trigger = Trigger::Remember { tool_call, through: None };
        self.mnemo.run_extraction(session, trigger, Priority::Foreground).await
    }

    /// The extraction backlog: every session, most recently active first, with events no
    /// extraction has read yet (past its extraction cursor) or a failed range awaiting its retry,
    /// and what keeps a session from extraction, if anything does.
    pub fn backlog(&self) -> crate::Result<Vec<SessionBacklog>> {
        let sessions = self.mnemo.history().sessions()?;
        let store = MemoryLedger::state(self.mnemo)?;
        let draining = self.mnemo.memory.draining.load(Ordering::SeqCst);
        Ok(mnemo_memory::extraction_backlog(store.as_ref(), &sessions, draining)?)
    }

    /// Extracts the backlog: every session of [`Memory::backlog`] that extraction may read, one
    /// after another, each from its cursor to its last event (in ranges that fit, as
    /// [`Memory::extract`]); never a range twice, since each commit moves the cursor past what it
    /// read. Each run is kept as the session's last extraction ([`Memory::last_extractions`]).
    /// Returns each session with what its extraction did; a session whose extraction failed is
    /// logged and left in the backlog. A store handle's hosts run this after an
    /// import or capture appended records: inline, or on a thread of their own when a caller must
    /// not wait.
    pub async fn extract_backlog(self) -> crate::Result<Vec<(SessionId, ExtractionReport)>> {
        let mut runs = Vec::new();
        for pending in self.backlog()?.into_iter().filter(SessionBacklog::extractable) {
            // One session's failure does not keep the others from extraction; it stays in the
            // backlog for the next pass.
            match self.extract(&pending.session, None).await {
                Ok(report) => {
                    self.keep_last(&pending.session, &report);
                    runs.push((pending.session, report));
                }
                Err(error) => {
                    tracing::warn!(%error, session = %pending.session, "backlog extraction failed");
                }
            }
        }
        Ok(runs)
    }

    fn keep_last(&self, session: &SessionId, report: &ExtractionReport) {
        let last = LastExtraction {
            session: session.clone(),
            at: self.mnemo.memory.clock.now(),
            outcome: report.outcome.clone(),
            stored: report.stored,
            model_calls: report.model_calls,
        };
        let mut kept = self.mnemo.memory.last_extractions.lock().unwrap_or_else(PoisonError::into_inner);
        kept.insert(session.clone(), last);
        if kept.len() > crate::memory_runtime::LAST_EXTRACTIONS_MAX
            && let Some(oldest) = kept.values().min_by_key(|l| l.at).map(|l| l.session.clone())
        {
            kept.remove(&oldest);
        }
    }

    /// What the last backlog extraction of each session did, most recent first, as this store
    /// handle ran them (none after a fresh open).
    pub fn last_extractions(&self) -> Vec<LastExtraction> {
        let kept = self.mnemo.memory.last_extractions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut last: Vec<LastExtraction> = kept.values().cloned().collect();
        last.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.session.cmp(&b.session)));
        last
    }

    /// Agent-requested extraction of incidental facts through `terminal_event` (or the session's
    /// last event), in the session's background lane.
    pub async fn extract(
        self,
        session: &SessionId,
        terminal_event: Option<EventId>,
    ) -> crate::Result<ExtractionReport> {
        // A long stretch runs as consecutive ranges, each through the event before the
        // (EXTRACT_USER_EVENTS_PER_RANGE_MAX + 1)-th user event after the cursor, each with its
        // own boundary, operation and receipt; the first that does not commit ends the run.
        let mut report: Option<ExtractionReport> = None;
        for boundary in mnemo_memory::extraction_boundaries(self.mnemo, session, terminal_event.as_ref())? {
            let next = self.mnemo.run_extraction(
                session,
                Trigger::Extract { terminal_event: Some(boundary) },
                Priority::Background,
            );
            let next = next.await?;
            let committed = matches!(next.outcome, ExtractionOutcome::Committed { .. });
            report = Some(match report.take() {
                None => next,
                Some(mut before) => {
                    before.model_calls += next.model_calls;
                    before.rejections.extend(next.rejections);
                    ExtractionReport {
                        model_calls: before.model_calls,
                        rejections: before.rejections,
                        stored: before.stored + next.stored,
                        ..next
                    }
                }
            });
            if !committed {
                break;
            }
        }
        match report {
            Some(report) => Ok(report),
            None => {
                self.mnemo
                    .run_extraction(session, Trigger::Extract { terminal_event }, Priority::Background)
                    .await
            }
        }
    }

    /// The `memory_extract` tool: flags the running `turn` and answers at once; the extraction runs
    /// when the host reports the turn complete ([`Memory::complete_turn`]). A closed gate answers
    /// `unavailable` and flags nothing.
    pub fn request_extraction(&self, session: &SessionId, turn: &TurnId) -> crate::Result<ExtractToolResult> {
        if let Some(reason) = ExtractionHost::gate(self.mnemo, session)? {
            return Ok(ExtractToolResult::Unavailable { reason: reason.name() });
        }
        let mut flagged = self.mnemo.memory.flagged_turns.lock().unwrap_or_else(PoisonError::into_inner);
        flagged.insert((session.clone(), turn.clone()));
        Ok(ExtractToolResult::Accepted)
    }

    /// Tells memory that `turn` completed (its terminal event is durable). If the turn asked for
    /// extraction, it runs now through the turn's last event and its report is returned; otherwise
    /// nothing runs. Hosts that must not wait spawn this.
    pub async fn complete_turn(
        self,
        session: &SessionId,
        turn: &TurnId,
    ) -> crate::Result<Option<ExtractionReport>> {
        let key = (session.clone(), turn.clone());
        let flagged =
            self.mnemo.memory.flagged_turns.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
        if !flagged {
            return Ok(None);
        }
        let terminal = ExtractionHost::session_events(self.mnemo, session)?
            .into_iter()
            .rev()
            .find(|e| &e.event.turn_id == turn)
            .map(|e| e.event.id);
        let Some(terminal) = terminal else {
            return Err(Error::InvalidInput(format!("turn {turn} of session {session} has no events")));
        };
        Ok(Some(self.extract(session, Some(terminal)).await?))
    }

    /// Extraction over what `checkpoint` covers, in the session's background lane. Compaction calls
    /// it after recording an eligible checkpoint; a host calls it only to retry one.
    pub async fn on_checkpoint_recorded(
        self,
        session: &SessionId,
        checkpoint: &CheckpointId,
    ) -> crate::Result<ExtractionReport> {
        let trigger = Trigger::Compaction { checkpoint: checkpoint.clone() };
        self.mnemo.run_extraction(session, trigger, Priority::Background).await
    }

    /// One memory item, re-validated on read.
    pub fn get(&self, item: &ItemId) -> crate::Result<Option<MemoryItem>> {
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(MemoryView::new(store.as_ref()).item(item)?)
    }

    /// Items by scope, without a key: every scope, or global items and one workspace's,
    /// optionally of one kind and with archived ones.
    pub fn list(&self, request: &ListRequest) -> crate::Result<Vec<MemoryItem>> {
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(mnemo_memory::list(store.as_ref(), request)?)
    }

    /// Items by keys.
    pub fn search(&self, request: &SearchRequest) -> crate::Result<Vec<MemoryItem>> {
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(mnemo_memory::search(store.as_ref(), request)?)
    }

    /// Applies a batch of mutations under one operation id. Content or a key that holds credential
    /// material is refused before anything is appended.
    pub fn apply(&self, request: &MutationRequest) -> crate::Result<OperationResult> {
        Ok(mnemo_memory::apply_mutations(self.mnemo, request)?)
    }

    /// Creates one item.
    pub fn create(&self, operation: OperationId, item: ItemInput) -> crate::Result<OperationResult> {
        self.apply(&MutationRequest { operation, mutations: vec![MutationInput::Create { item }] })
    }

    /// Replaces an item's fields at `expected_version`.
    pub fn update(
        &self,
        operation: OperationId,
        item_id: ItemId,
        expected_version: u64,
        item: ItemInput,
    ) -> crate::Result<OperationResult> {
        let mutation = MutationInput::Update { item_id, expected_version, item };
        self.apply(&MutationRequest { operation, mutations: vec![mutation] })
    }

    /// Archives an active item at `expected_version`.
    pub fn archive(
        &self,
        operation: OperationId,
        item_id: ItemId,
        expected_version: u64,
    ) -> crate::Result<OperationResult> {
        let mutation = MutationInput::Archive { item_id, expected_version };
        self.apply(&MutationRequest { operation, mutations: vec![mutation] })
    }

    /// Restores an archived item at `expected_version`.
    pub fn restore(
        &self,
        operation: OperationId,
        item_id: ItemId,
        expected_version: u64,
    ) -> crate::Result<OperationResult> {
        let mutation = MutationInput::Restore { item_id, expected_version };
        self.apply(&MutationRequest { operation, mutations: vec![mutation] })
    }

    /// The pull route: the `RecallMemory {query, limit}` tool for a session's model. Never returns
    /// another workspace's items.
    pub fn recall(&self, session: &SessionId, request: &RecallMemory) -> crate::Result<Vec<RecalledItem>> {
        let workspace = self.mnemo.recall_workspace(session)?;
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(mnemo_memory::recall(store.as_ref(), workspace.as_ref(), request)?)
    }

    /// The push route: the block of items relevant to the session's recent turns (or `query`) that
    /// fits the recall budget (`recall_budget_tokens` of the `memory-index` stage config).
    pub fn recall_block(&self, session: &SessionId, query: Option<&str>) -> crate::Result<RecallBlock> {
        self.block(session, query, None)
    }

    /// The push block as it would have been built at log position `as_of`: the memory items as
    /// they stood then (the memory index folded afresh from the log up to it) matched against the
    /// session's turns up to it (or `query`). Linear in the position, as every `as_of` read.
    pub fn recall_block_as_of(
        &self,
        session: &SessionId,
        query: Option<&str>,
        as_of: Position,
    ) -> crate::Result<RecallBlock> {
        self.block(session, query, Some(as_of))
    }

    /// The push block, live (`as_of` `None`) or as of a log position.
    fn block(
        &self,
        session: &SessionId,
        query: Option<&str>,
        as_of: Option<Position>,
    ) -> crate::Result<RecallBlock> {
        let workspace = self.mnemo.recall_workspace(session)?;
        let text = mnemo_memory::recall_text(query, || match as_of {
            None => ExtractionHost::session_events(self.mnemo, session),
            Some(position) => self.mnemo.session_events_through(session, position).map_err(host_error),
        })?;
        let config = self.mnemo.pipeline_spec().stages.iter().find(|s| s.name == mnemo_memory::STAGE_NAME);
        let budget = mnemo_memory::recall_budget_tokens(config.map(|stage| &stage.config));
        let store = match as_of {
            None => MemoryLedger::state(self.mnemo)?,
            Some(position) => self.mnemo.store_as_of(mnemo_memory::STAGE_NAME, Some(position))?,
        };
        Ok(mnemo_memory::recall_block(store.as_ref(), workspace.as_ref(), &text, budget)?)
    }

    /// The push route at a session's start, when the store may not hold the session yet: the
    /// standing facts of its workspace (the session's own, else `request.workspace`) and the items
    /// relevant to `query`, else to the session's recent turns, else to those of the workspace's
    /// most recently active other session; within `budget_tokens`.
    pub fn start_block(&self, request: &StartBlockRequest) -> crate::Result<RecallBlock> {
        if request.budget_tokens == Some(0)
            || request.budget_tokens.is_some_and(|t| t > START_BLOCK_TOKENS_MAX)
        {
            return Err(Error::InvalidInput(format!(
                "budget_tokens {}: expected 1..={START_BLOCK_TOKENS_MAX}",
                request.budget_tokens.unwrap_or_default()
            )));
        }
        let known = match &request.session {
            Some(session) => self.mnemo.session(session)?.map(|summary| (session.clone(), summary.workspace)),
            None => None,
        };
        let workspace = match &known {
            Some((_, workspace)) => workspace.clone(),
            None => request.workspace.clone(),
        };
        // The text the items are matched against: the query, else the session's own recent turns,
        // else those of the workspace's most recently active other session.
        let session_for_text = match (&request.query, &known) {
            (Some(_), _) => None,
            (None, Some((session, _))) => Some(session.clone()),
            (None, None) => match &workspace {
                Some(workspace) => {
                    let sessions = self.mnemo.history().session_list()?;
                    mnemo_memory::start_block_session(
                        workspace,
                        sessions.iter().map(|listing| &listing.summary),
                    )
                }
                None => None,
            },
        };
        let text = mnemo_memory::recall_text(request.query.as_deref(), || match &session_for_text {
            Some(session) => ExtractionHost::session_events(self.mnemo, session),
            None => Ok(Vec::new()),
        })?;
        let budget = match request.budget_tokens {
            Some(tokens) => tokens,
            None => {
                let config =
                    self.mnemo.pipeline_spec().stages.iter().find(|s| s.name == mnemo_memory::STAGE_NAME);
                mnemo_memory::recall_budget_tokens(config.map(|stage| &stage.config))
            }
        };
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(mnemo_memory::recall_block(store.as_ref(), workspace.as_ref(), &text, budget)?)
    }

    /// A session's extraction cursor (the highest event ordinal already evaluated), 0 when none.
    pub fn cursor(&self, session: &SessionId) -> crate::Result<u64> {
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(MemoryView::new(store.as_ref()).cursor(session)?.map_or(0, |c| c.processed_ordinal))
    }
}
