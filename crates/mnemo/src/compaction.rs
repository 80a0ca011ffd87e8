//! Compaction through the facade: the history the next provider request receives (now or as of any
//! log position), manual and automatic compaction, and conversation copy.
//!
//! Checkpoints are recorded through one per-store coordinator, whose recorder (`checkpoint_recorder`)
//! appends the checkpoint record durably to the session stream before anything else sees it. The
//! [`Compaction`] handle's calls are the host's door to all of it.

use std::sync::Arc;
use std::time::Duration;

pub use mnemo_compaction::{
    AssembledHistory, Boundary, BoxFuture, CapacitySource, CompactMode, CompactionError, CompactionOutcome,
    CompactionPolicy, Connection, CopyRefusal, Decision, Diagnostics, ExtractiveSummarizer, FinishReason,
    HistoryItem, HostCompactionStart, LEDGER_WAIT_DEFAULT, LoggedCheckpoint, MidTurnOutcome, Note,
    OverflowLatch, ProviderCompactionRequest, ProviderCompactor, SummarizeError, Summarizer,
    SummarizerIdentity, SummaryRequest, SummaryResponse, TurnGuard,
};

use mnemo_compaction::{
    AssemblyOptions, CopyOptions, LATEST_CHECKPOINT_STAGE, ManualOptions, SessionLedger, WriterSeams,
};
use mnemo_core::BoundaryDisposition;
use mnemo_core::{
    CheckpointBody, CheckpointId, CopyBoundary, EventId, FaithfulnessReport, Position, RuntimeEvent,
    SessionId, StreamId, TurnId,
};
use mnemo_log::{BatchLimits, ExpectedRevision};
use mnemo_pipeline::{MemoryStore, PipelineError};

use crate::error::Error;
use crate::mnemo::Mnemo;

/// What the next request is assembled for.
#[derive(Debug, Clone, Default)]
pub struct ContextOptions {
    /// Override the policy's context window, in tokens.
    pub window: Option<u64>,
    /// Assemble as of this log position instead of now.
    pub as_of: Option<Position>,
    /// The turn being answered, which is never prior history.
    pub current_turn: Option<TurnId>,
    /// The provider connection and model (V3 checkpoints replay only to their own).
    pub connection: Connection,
    /// The new request's text, which the context-budget history search looks for when the policy
    /// switches it on (`history_search`); the session's latest user message (of `current_turn`,
    /// when given) when absent.
    pub search_text: Option<String>,
}

/// How to compact.
#[derive(Debug, Clone, Default)]
pub struct CompactOptions {
    /// What the compaction's history is for (window, connection, current turn).
    pub context: ContextOptions,
    /// Turns to keep raw; the policy's value when absent.
    pub min_recent_turns: Option<u64>,
    /// The text summarizer; the embedded extractive one when absent.
    pub summarizer: Option<Arc<dyn Summarizer>>,
    /// The provider compactor for V3 checkpoints, if the host has one.
    pub provider_compactor: Option<Arc<dyn ProviderCompactor>>,
}

/// What a conversation copy made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CopyReport {
    /// The session copied.
    pub source: SessionId,
    /// The new session.
    pub session: SessionId,
    /// Events copied.
    pub events: u64,
    /// Text checkpoints rebuilt over the copied events.
    pub checkpoints_rebuilt: u64,
    /// Provider-state checkpoints dropped.
    pub checkpoints_dropped: u64,
    /// Where the new stream's records landed.
    pub positions: (Position, Position),
}

impl Mnemo {
    pub(crate) fn ledger(
        &self,
        session: &SessionId,
        as_of: Option<Position>,
    ) -> Result<SessionLedger<'_>, Error> {
        if let Some(position) = as_of {
            return Ok(crate::blocking::wait(|| SessionLedger::as_of(self.log.as_ref(), session, position))?);
        }
        let store = match self.caught_up_store(LATEST_CHECKPOINT_STAGE) {
            Ok(store) => store,
            // A pipeline without the stage still assembles: the ledger recovers by scanning.
            Err(Error::Pipeline(PipelineError::UnknownStage(_))) => Arc::new(MemoryStore::new()),
            Err(error) => return Err(error),
        };
        Ok(crate::blocking::wait(|| SessionLedger::at_head(self.log.as_ref(), store, session))?)
    }

    fn assembly_options(&self, options: &ContextOptions) -> Result<AssemblyOptions, Error> {
        Ok(AssemblyOptions {
            policy: self.compaction().policy()?.with_window(options.window),
            connection: options.connection.clone(),
            current_turn: options.current_turn.clone(),
        })
    }

    /// The context-budget history search (events-and-history.md §3.10, decision 0148), when the
    /// policy switches it on: the query, the hits taken and how they are added are compaction's
    /// ([`mnemo_compaction::retrieve`]); this gives it the history crate's ranked search index
    /// (SearchHistory, from the session) at the position the history is assembled at.
    fn retrieve_history(
        &self,
        ledger: &SessionLedger<'_>,
        history: &mut AssembledHistory,
        options: &ContextOptions,
        policy: &CompactionPolicy,
    ) -> Result<(), Error> {
        let search = IndexSearch {
            mnemo: self,
            session: ledger.session(),
            current_turn: options.current_turn.as_ref(),
            as_of: options.as_of,
            messages: std::cell::OnceCell::new(),
        };
        let (text, turn) = (options.search_text.as_deref(), options.current_turn.as_ref());
        mnemo_compaction::retrieve(ledger, history, text, turn, policy, &search)
    }

    fn seams<'a>(
        &'a self,
        summarizer: &'a dyn Summarizer,
        provider_compactor: Option<&'a dyn ProviderCompactor>,
        extraction: Option<BoundaryDisposition>,
    ) -> WriterSeams<'a> {
        WriterSeams {
            summarizer,
            provider_compactor,
            coordinator: self.compaction.as_ref(),
            now: self.clock.now(),
            extraction,
        }
    }

    /// The memory-extraction decision an automatic checkpoint freezes (memory.md §3.1; the rule is
    /// memory's, [`mnemo_memory::boundary_disposition`]).
    fn extraction_disposition(&self, session: &SessionId) -> Result<BoundaryDisposition, Error> {
        Ok(mnemo_memory::boundary_disposition(self.session(session)?.as_ref()))
    }

    /// What follows a recorded checkpoint: the projections catch up with it, then memory extraction
    /// runs over the turns it folded (memory.md's compaction trigger, on the background lane). An
    /// extraction failure is logged and settled by the memory engine; it never fails the compaction.
    async fn after_checkpoint(&self, session: &SessionId, recorded: &LoggedCheckpoint) -> Result<(), Error> {
        self.catch_up_to(recorded.position)?;
        let eligible = recorded
            .checkpoint
            .extraction_boundary
            .as_ref()
            .is_some_and(|b| b.disposition == BoundaryDisposition::Eligible);
        // A policy-denied boundary is not dispatched; the memory engine settles it when it next
        // recovers the session's unprocessed checkpoints.
        if eligible {
            let checkpoint = &recorded.checkpoint.checkpoint;
            if let Err(error) = self.memory().on_checkpoint_recorded(session, checkpoint).await {
                tracing::warn!(%error, %session, %checkpoint, "memory extraction after compaction failed");
            }
        }
        Ok(())
    }

    /// The copy `options.target` already holds, if it is this copy (else a typed refusal).
    fn committed_copy(&self, ledger: &SessionLedger<'_>, options: &CopyOptions) -> Result<CopyReport, Error> {
        let target = options.target.clone().ok_or_else(|| {
            Error::Compaction(CompactionError::InvalidInput("a committed copy needs its target".to_owned()))
        })?;
        let target_ledger = crate::blocking::wait(|| {
            SessionLedger::at_head(self.log.as_ref(), Arc::new(MemoryStore::new()), &target)
        })?;
        let records = target_ledger.records(mnemo_core::StreamRevision(0))?;
        let (plan, first, last) = mnemo_compaction::committed_copy(ledger, &records, options)?;
        self.catch_up_to(last)?;
        Ok(CopyReport {
            source: ledger.session().clone(),
            session: plan.target,
            events: plan.events,
            checkpoints_rebuilt: plan.checkpoints_rebuilt,
            checkpoints_dropped: plan.checkpoints_dropped,
            positions: (first, last),
        })
    }
}

/// What a mid-turn compaction is asked to do (compaction.md §3.6, §3.8).
#[derive(Debug, Clone)]
pub struct MidTurnOptions {
    /// The turn being answered.
    pub turn: TurnId,
    /// Its user event, already durable.
    pub anchor: mnemo_core::EventId,
    /// `mid_turn`, or `pre_turn` for an overflow at step 0.
    pub phase: mnemo_core::CheckpointPhase,
    /// The payload the replacement must be strictly smaller than, in tokens.
    pub reference_tokens: u64,
    /// The log position of the last append of the step just finished. The ledger is read only once
    /// the log holds it: a host whose appends are still in flight on another thread waits here.
    pub durable_through: Option<Position>,
    /// How long to wait for `durable_through` before failing open with `ledger_wait_aborted`.
    pub ledger_wait: Duration,
}

impl MidTurnOptions {
    /// A mid-turn request for `turn` anchored at `anchor`, with nothing to wait for.
    pub fn new(turn: TurnId, anchor: mnemo_core::EventId, reference_tokens: u64) -> Self {
        MidTurnOptions {
            turn,
            anchor,
            phase: mnemo_core::CheckpointPhase::MidTurn,
            reference_tokens,
            durable_through: None,
            ledger_wait: LEDGER_WAIT_DEFAULT,
        }
    }
}

/// What the host saw when the provider rejected a request (compaction.md §3.8).
#[derive(Debug, Clone)]
pub struct ProviderOverflow {
    /// The provider's error classifies as a context-length error.
    pub context_length_error: bool,
    /// The failed attempt produced observable output (text, tool calls) before failing.
    pub produced_output: bool,
    /// The turn has steps left to resend in.
    pub steps_remaining: bool,
    /// The step that failed (0 = the first request of the turn).
    pub step: u64,
    /// The rejected request carried historical image tool results that can be dropped.
    pub historical_images: bool,
    /// The turn, its anchor, and the rejected request's size in tokens (the replacement must be
    /// strictly smaller). The phase is derived from `step`.
    pub request: MidTurnOptions,
}

/// What to do after a provider overflow: at most one retry per turn, never a synthetic error.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OverflowRecovery {
    /// Resend once without the historical image tool results; nothing was recorded.
    RetryWithoutImages,
    /// A checkpoint was recorded: resend once with these items in place of the folded history.
    Resend {
        /// The recorded checkpoint.
        checkpoint: Box<LoggedCheckpoint>,
        /// `[block | provider part] + anchor + preserved tail`.
        items: Vec<mnemo_compaction::HistoryItem>,
    },
    /// Not recoverable (not a context-length error, output already produced, no steps left, or
    /// the retry already used): surface the provider's own error.
    SurfaceProviderError,
    /// Recovery was attempted and failed open: surface the provider's own error; `reason` is
    /// `overflow` and `detail` / `diagnostic` say why the compaction did not help.
    FailedOpen {
        /// Always `overflow`.
        reason: &'static str,
        /// The mid-turn detail (`no_safe_completed_span`, `summarizer_failed`, ...).
        detail: &'static str,
        /// The typed reason of the failed compaction.
        diagnostic: String,
    },
}

impl Mnemo {
    /// The compactable prior history (without `turn`) and the events of `turn`, from the log.
    fn mid_turn_events(
        &self,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<(Vec<mnemo_core::RuntimeEvent>, Vec<mnemo_core::RuntimeEvent>), Error> {
        let ledger = self.ledger(session, None)?;
        let all = ledger.compactable_from(mnemo_core::StreamRevision(0), None)?;
        let (current, prior): (Vec<_>, Vec<_>) = all.into_iter().partition(|e| &e.event.turn_id == turn);
        Ok((prior.into_iter().map(|e| e.event).collect(), current.into_iter().map(|e| e.event).collect()))
    }
}

/// The history crate's ranked search over one session's history, as compaction's retrieval asks it.
struct IndexSearch<'m> {
    mnemo: &'m Mnemo,
    session: &'m SessionId,
    current_turn: Option<&'m TurnId>,
    as_of: Option<Position>,
    /// The messages store the search read, for the hits' events.
    messages: std::cell::OnceCell<Arc<dyn mnemo_pipeline::StateStore>>,
}

impl mnemo_compaction::HistorySearch for IndexSearch<'_> {
    type Error = Error;

    fn search(&self, query: &str) -> Result<Result<Vec<mnemo_compaction::SearchHit>, String>, Error> {
        use mnemo_history::{HistoryContext, HistorySearchRequest, SEARCH_LIMIT_MAX, messages};
        let stores = self
            .mnemo
            .store_as_of(messages::STAGE_NAME, self.as_of)
            .and_then(|m| Ok((m, self.mnemo.store_as_of(mnemo_history::index::STAGE_NAME, self.as_of)?)));
        let (messages_store, index_store) = match stores {
            Ok(stores) => stores,
            Err(Error::Pipeline(PipelineError::UnknownStage(stage))) => {
                return Ok(Err(format!("no_search_index:{stage}")));
            }
            Err(error) => return Err(error),
        };
        let request =
            HistorySearchRequest { query: query.to_owned(), limit: Some(SEARCH_LIMIT_MAX), cursor: None };
        let context = HistoryContext {
            current_session: Some(self.session),
            current_turn: self.current_turn,
            ..HistoryContext::default()
        };
        let found =
            mnemo_history::search_history(messages_store.as_ref(), index_store.as_ref(), &request, &context)?;
        let _ = self.messages.set(messages_store);
        Ok(match found {
            Ok(found) => Ok(found
                .rows
                .into_iter()
                .map(|row| mnemo_compaction::SearchHit { session: row.session_id, message: row.message_id })
                .collect()),
            Err(refused) => {
                let code = serde_json::to_value(refused.reason).ok();
                let code = code.as_ref().and_then(serde_json::Value::as_str).unwrap_or("unknown");
                Err(format!("search_refused:{code}"))
            }
        })
    }

    fn message_event(&self, message: &str) -> Result<Option<EventId>, Error> {
        let Some(store) = self.messages.get() else { return Ok(None) };
        let found = mnemo_history::messages::message(store.as_ref(), self.session, message)?;
        Ok(found.map(|message| message.event_id))
    }
}

/// One claim of a checkpoint's summary and the events that support it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LinkedClaim {
    /// The claim as the summary states it.
    pub claim: String,
    /// `path`, `code`, `identifier`, `number` or `quoted`.
    pub kind: &'static str,
    /// Whether the covered events support it (the faithfulness check's rule).
    pub supported: bool,
    /// The first [`CLAIM_EVENTS_MAX`](mnemo_compaction::CLAIM_EVENTS_MAX) covered events whose own
    /// text supports it. A supported claim may have none: found only across two events' texts.
    pub events: Vec<ClaimEvent>,
    /// How many covered events support it on their own.
    pub event_count: usize,
}

/// A covered event supporting a claim.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimEvent {
    /// Its log position.
    pub position: Position,
    /// Its id.
    pub event: EventId,
}

/// A checkpoint's faithfulness report with each claim linked to its evidence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CheckpointClaims {
    /// The checkpoint.
    pub checkpoint: CheckpointId,
    /// Where it was recorded.
    pub position: Position,
    /// The covered events found on the session stream (the checkpoint's `coverage.event_count`
    /// when the stream holds them all).
    pub covered_events: u64,
    /// Every claim of its summary, in order; empty for a provider-state checkpoint (nothing to read).
    pub claims: Vec<LinkedClaim>,
    /// The report recorded with the checkpoint, when it has one.
    pub recorded: Option<FaithfulnessReport>,
    /// Whether checking again found exactly the unsupported claims the recorded report lists.
    pub matches_recorded: Option<bool>,
}

impl Mnemo {
    /// The next provider request's history, compaction, overflow recovery and conversation copy.
    pub fn compaction(&self) -> Compaction<'_> {
        Compaction { mnemo: self }
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
    pub fn policy(&self) -> crate::Result<CompactionPolicy> {
        match self.mnemo.pipeline_spec().stages.iter().find(|s| s.name == LATEST_CHECKPOINT_STAGE) {
            Some(stage) => CompactionPolicy::from_table(&stage.config).map_err(Error::InvalidInput),
            None => Ok(CompactionPolicy::default()),
        }
    }

    /// The history the next provider request of `session` would receive, with the checkpoint it
    /// stands on and every decision's diagnostics. Nothing is written; a compaction the selector
    /// would make shows as `compaction_due`.
    pub fn context(&self, session: &SessionId, options: &ContextOptions) -> crate::Result<AssembledHistory> {
        let ledger = self.mnemo.ledger(session, options.as_of)?;
        let assembly = self.mnemo.assembly_options(options)?;
        let mut history = mnemo_compaction::assemble(&ledger, &assembly)?;
        self.mnemo.retrieve_history(&ledger, &mut history, options, &assembly.policy)?;
        Ok(history)
    }

    /// A checkpoint's faithfulness report with each claim of its summary linked to the covered
    /// events that support it, or marked unsupported (the check's own rule, run again).
    pub fn claims(&self, session: &SessionId, checkpoint: &CheckpointId) -> crate::Result<CheckpointClaims> {
        let ledger = self.mnemo.ledger(session, None)?;
        let logged = ledger
            .recorded_checkpoints()?
            .into_iter()
            .find(|c| &c.checkpoint.checkpoint == checkpoint)
            .ok_or_else(|| Error::InvalidInput(format!("no checkpoint {checkpoint} in session {session}")))?;
        // The covered events: the compactable events from the session's start through the one the
        // coverage ends at, recorded before the checkpoint (the events its writer folded).
        let coverage = &logged.checkpoint.coverage;
        let mut covered = Vec::new();
        for event in ledger.compactable_from(mnemo_core::StreamRevision(0), None)? {
            if event.position > logged.position {
                break;
            }
            let last = event.event.id == coverage.through.event;
            covered.push(event);
            if last {
                break;
            }
        }
        let events: Vec<RuntimeEvent> = covered.iter().map(|e| e.event.clone()).collect();
        let claims = match &logged.checkpoint.body {
            CheckpointBody::Text { summary, .. } => mnemo_compaction::claim_support(summary, &events),
            _ => Vec::new(),
        };
        let claims: Vec<LinkedClaim> = claims
            .into_iter()
            .map(|support| LinkedClaim {
                events: support
                    .events
                    .iter()
                    .filter_map(|&index| covered.get(index))
                    .map(|e| ClaimEvent { position: e.position, event: e.event.id.clone() })
                    .collect(),
                claim: support.claim,
                kind: support.kind,
                supported: support.supported,
                event_count: support.event_count,
            })
            .collect();
        let recorded = logged.checkpoint.faithfulness.clone();
        let matches_recorded = recorded.as_ref().map(|report| {
            let unsupported: Vec<&String> =
                claims.iter().filter(|c| !c.supported).map(|c| &c.claim).collect();
            report.checked == claims.len() as u64
                && report.unsupported.iter().collect::<Vec<_>>() == unsupported
        });
        Ok(CheckpointClaims {
            checkpoint: checkpoint.clone(),
            position: logged.position,
            covered_events: covered.len() as u64,
            claims,
            recorded,
            matches_recorded,
        })
    }

    /// Compacts `session` now (the manual trigger). A failure to summarize or record is not an
    /// error: the outcome's history says how it failed open.
    pub async fn compact(
        self,
        session: &SessionId,
        options: &CompactOptions,
    ) -> crate::Result<CompactionOutcome> {
        let ledger = self.mnemo.ledger(session, None)?;
        let mut assembly = self.mnemo.assembly_options(&options.context)?;
        // With neither a window nor a budget, the manual writer would size the fold for the whole
        // history (§3.9: `max(estimate, 32,000)`), and the checkpoint it records would not fit the
        // budget this store assembles the next request with (`max_history`, 32,000 then): the next
        // `context` would pass it over and drop the history instead. Compact for that budget.
        let policy = &mut assembly.policy;
        if policy.max_history_tokens.is_none() && policy.context_window.is_none() {
            policy.max_history_tokens = Some(policy.max_history());
        }
        let extractive = ExtractiveSummarizer;
        let summarizer: &dyn Summarizer = options.summarizer.as_deref().unwrap_or(&extractive);
        // Every fold triggers extraction over what it folded, whatever triggered it (decision 0126):
        // the checkpoint freezes the decision like an automatic one.
        let extraction = Some(self.mnemo.extraction_disposition(session)?);
        let seams = self.mnemo.seams(summarizer, options.provider_compactor.as_deref(), extraction);
        let manual = ManualOptions { min_recent_turns: options.min_recent_turns };
        let outcome = mnemo_compaction::compact_now(&ledger, &assembly, seams, manual).await?;
        if let Some(recorded) = &outcome.recorded {
            self.mnemo.after_checkpoint(session, recorded).await?;
        }
        Ok(outcome)
    }

    /// Prepares the next request's history the way a runtime does before each turn: replays a
    /// fitting checkpoint, or compacts when the policy says so, or falls back.
    pub async fn prepare_history(
        self,
        session: &SessionId,
        options: &CompactOptions,
    ) -> crate::Result<CompactionOutcome> {
        let ledger = self.mnemo.ledger(session, None)?;
        let assembly = self.mnemo.assembly_options(&options.context)?;
        let extractive = ExtractiveSummarizer;
        let summarizer: &dyn Summarizer = options.summarizer.as_deref().unwrap_or(&extractive);
        let extraction = Some(self.mnemo.extraction_disposition(session)?);
        let seams = self.mnemo.seams(summarizer, options.provider_compactor.as_deref(), extraction);
        let mut outcome = mnemo_compaction::prepare_history(&ledger, &assembly, seams).await?;
        if let Some(recorded) = &outcome.recorded {
            self.mnemo.after_checkpoint(session, recorded).await?;
        }
        // The history search reads the stages, which have caught up with a recorded checkpoint.
        let ledger = self.mnemo.ledger(session, None)?;
        self.mnemo.retrieve_history(&ledger, &mut outcome.history, &options.context, &assembly.policy)?;
        Ok(outcome)
    }

    /// Marks a turn as running on `session` until the guard drops: manual compaction is refused
    /// meanwhile (`session_busy`). `None` if a turn already runs.
    pub fn begin_turn(&self, session: &SessionId) -> Option<TurnGuard<'a>> {
        self.mnemo.compaction.begin_turn(session)
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
    ) -> crate::Result<CopyReport> {
        let ledger = self.mnemo.ledger(session, None)?;
        let policy = self.policy()?;
        let target = match target {
            Some(target) => target,
            None => mnemo_compaction::default_copy_target(session, ledger.position())?,
        };
        let archived_member = match self.mnemo.caught_up_store(mnemo_history::messages::STAGE_NAME) {
            Ok(store) => mnemo_history::messages::archived_family_member(store.as_ref(), session)?,
            // A pipeline without the stage keeps no archive flags to refuse by.
            Err(Error::Pipeline(PipelineError::UnknownStage(_))) => None,
            Err(error) => return Err(error),
        };
        let options = CopyOptions {
            up_to,
            target: Some(target.clone()),
            chars_per_token: policy.chars_per_token,
            archived_member,
        };
        let stream = StreamId::session(&target);
        if self.mnemo.log.stream_head(&stream)?.is_some() {
            return self.mnemo.committed_copy(&ledger, &options);
        }
        let plan = mnemo_compaction::plan_copy(&ledger, &options)?;
        let encoded = plan
            .records
            .iter()
            .map(|record| crate::mnemo::encode_for(&stream, record))
            .collect::<Result<Vec<_>, _>>()?;
        let appended = match self.mnemo.append_encoded(
            &stream,
            ExpectedRevision::NoStream,
            encoded,
            None,
            self.mnemo.durability(),
            BatchLimits::ConversationCopy,
        ) {
            Ok(appended) => appended,
            // The same copy, retried concurrently, committed first.
            Err(Error::Conflict { .. }) => return self.mnemo.committed_copy(&ledger, &options),
            Err(error) => return Err(error),
        };
        self.mnemo.catch_up_to(appended.last_position)?;
        Ok(CopyReport {
            source: session.clone(),
            session: plan.target,
            events: plan.events,
            checkpoints_rebuilt: plan.checkpoints_rebuilt,
            checkpoints_dropped: plan.checkpoints_dropped,
            positions: (appended.first_position, appended.last_position),
        })
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
    ) -> crate::Result<MidTurnOutcome> {
        use mnemo_compaction::MidTurnOutcome;
        // NOTE: a blocking wait, like the facade's other read-your-writes waits; it is bounded by
        // `ledger_wait`.
        if let Some(position) = mid_turn.durable_through
            && crate::blocking::wait(|| self.mnemo.log.wait_for(position, mid_turn.ledger_wait)) < position
        {
            return Ok(MidTurnOutcome::FailOpen {
                detail: "no_safe_completed_span",
                reason: "ledger_wait_aborted".to_owned(),
            });
        }
        let (prior, current) = match self.mnemo.mid_turn_events(session, &mid_turn.turn) {
            Ok(events) => events,
            // An unknown session is the caller's mistake, not a ledger that failed to read.
            Err(error) if error.category() == crate::error::ErrorCategory::Input => return Err(error),
            Err(error) => {
                tracing::warn!(%error, %session, "mid-turn compaction could not read the ledger");
                return Ok(MidTurnOutcome::FailOpen {
                    detail: "no_safe_completed_span",
                    reason: "ledger_read_failed".to_owned(),
                });
            }
        };
        let assembly = self.mnemo.assembly_options(&options.context)?;
        let previous = self.mnemo.compaction.load(session).await?;
        let extractive = ExtractiveSummarizer;
        let summarizer: &dyn Summarizer = options.summarizer.as_deref().unwrap_or(&extractive);
        let request = mnemo_compaction::MidTurnRequest {
            prior: &prior,
            current: &current,
            anchor: &mid_turn.anchor,
            phase: mid_turn.phase,
            previous: previous.as_ref(),
            reference_tokens: mid_turn.reference_tokens,
            connection: &assembly.connection,
            policy: &assembly.policy,
            now: self.mnemo.clock.now(),
            extraction: Some(self.mnemo.extraction_disposition(session)?),
        };
        let outcome =
            mnemo_compaction::compact_mid_turn(request, summarizer, self.mnemo.compaction.as_ref()).await;
        if let MidTurnOutcome::Replaced { checkpoint, .. } = &outcome {
            self.mnemo.after_checkpoint(session, checkpoint).await?;
        }
        Ok(outcome)
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
    ) -> crate::Result<OverflowRecovery> {
        if !latch.try_claim(overflow.context_length_error, overflow.produced_output, overflow.steps_remaining)
        {
            return Ok(OverflowRecovery::SurfaceProviderError);
        }
        if overflow.historical_images {
            return Ok(OverflowRecovery::RetryWithoutImages);
        }
        let request = MidTurnOptions {
            phase: mnemo_compaction::overflow_phase(overflow.step),
            ..overflow.request.clone()
        };
        Ok(match self.compact_mid_turn(session, &request, options).await? {
            mnemo_compaction::MidTurnOutcome::Replaced { checkpoint, items } => {
                OverflowRecovery::Resend { checkpoint, items }
            }
            mnemo_compaction::MidTurnOutcome::FailOpen { detail, reason } => {
                OverflowRecovery::FailedOpen { reason: "overflow", detail, diagnostic: reason }
            }
        })
    }
}
