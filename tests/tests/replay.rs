//! The core property: for seeded random work on every record kind — session lifecycle, turns,
//! checkpoints, memory mutations and extraction commits, extraction failures, policy denials and
//! conversation copies — with random batch boundaries and random crash points (the store dropped
//! mid-projection and reopened), the five stages' incremental, rebuilt, reopened and in-memory
//! reference digests are equal, and every acknowledged append is present.
//!
//! Every record is made the way a host makes it: session facts and runtime events are appended by
//! the host; checkpoints come from the facade's compaction writers (`compact`, `prepare_history`,
//! `compact_mid_turn`), memory mutations from its single memory writer (`memory().apply`),
//! extraction commits, failure settlements and policy denials from the extraction engine
//! (`remember`, `extract`, the compaction hook) with a proposer that sometimes fails, and copies from
//! `copy`. So each one passed the checks its writer applies (a valid checkpoint, a memory commit that
//! applies to the state it was decided on), and a refused operation is checked to have appended
//! nothing.
//!
//! The 11 record kinds (`RecordKind::ALL`) and what makes them here: `session_opened`,
//! `session_flags_changed`, `session_archived`, `runtime_event` and `turn_ended` (the host's
//! appends); `checkpoint_recorded` (manual, pre-turn and mid-turn compaction, copies' rebuilt ones);
//! `memory_mutation` (create, update, archive, restore, some at stale versions); `memory_commit`
//! (remember, extract, compaction-triggered extraction, policy skips); `extraction_failure` (a
//! proposer that fails or answers nonsense); `policy_denial` (the compaction hook on an incognito or
//! memory-disabled session); `conversation_copied` (copies). Each seed's run ends with every kind in
//! its log: a kind the random steps did not produce is produced by a short forced tail, and the test
//! fails if one is still missing.
//!
//! Set MNEMO_SEED to replay a failure; the seed is printed at the start of every run.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::BTreeMap;
use std::sync::Arc;

use mnemo::compaction::{CompactOptions, ContextOptions};
use mnemo::log::{ExpectedRevision, ManualClock};
use mnemo::memory::{
    BoxFuture, ItemInput, KeyInput, ListRequest, MemoryModels, MemoryProposer, ModelError, MutationInput,
    MutationRequest, ProposalPrompt,
};
use mnemo::records::{ItemId, Position, Record, StreamId};
use mnemo::records::{
    KeyOrigin, KeyType, MemoryKind, MemoryMode, MemoryOrigin, MemoryScope, OperationId, RecordKind,
    SessionArchived, SessionFlagsChanged, SessionId, SessionOpened, SourcePointer, StatementType,
    TemporalType, TurnEnded, TurnId, TurnStatus, WorkspaceId,
};
use mnemo::{Config, ErrorCategory, Mnemo};
use mnemo_acceptance::sim::{Rng, event_records, seed_from_env};

const SEEDS_PER_RUN: u64 = 6;
const STEPS_PER_SEED: u64 = 70;
/// Sessions the random steps open (copies add more, up to `SESSIONS_MAX`).
const SESSIONS_OPENED: usize = 4;
const SESSIONS_MAX: usize = 6;
/// The stages of the default pipeline, all of which the property covers.
const STAGES: [&str; 5] =
    ["session-catalog", "latest-checkpoint", "memory-index", "history-messages", "history-search"];
/// What users say that the embedded proposer stores (a request to remember, a stated preference).
const MEMORABLE: &[&str] = &[
    "Please remember that the staging deploy needs the VPN.",
    "I prefer tabs over spaces in this repo.",
    "Remember that cargo test runs with --release on CI.",
    "We use squash merges only.",
    "I always run the parser tests before pushing.",
    "Our staging database is stage-db-02.",
    "We moved the staging database, it is now stage-db-03.",
    "I prefer tabs over spaces in this repo!",
];
const WORDS: &[&str] = &["parser", "deploy", "staging", "tabs", "cache", "retry", "timeout", "token", "über"];

/// A proposer whose model fails or answers with something that is not the proposal schema: the
/// extraction engine settles such a range as a failure (retry later, then discard).
#[derive(Debug)]
struct BrokenProposer {
    nonsense: bool,
}

impl MemoryProposer for BrokenProposer {
    fn name(&self) -> &str {
        "broken"
    }

    fn propose<'a>(&'a self, _: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        let answer = if self.nonsense {
            Ok("{\"not\": \"a proposal\"".to_owned())
        } else {
            Err(ModelError::Provider("503 from the provider".to_owned()))
        };
        Box::pin(async move { answer })
    }
}

/// What the generator knows of one session.
#[derive(Debug, Clone)]
struct Session {
    id: SessionId,
    opened: bool,
    workspace: Option<WorkspaceId>,
    /// The running turn's number and how many events it has.
    turn: u64,
    turn_events: usize,
    /// Events appended by the host, all turns.
    events: usize,
    /// The running turn's latest user event: the anchor of a mid-turn compaction.
    anchor: Option<mnemo::records::EventId>,
    copies: u64,
}

impl Session {
    fn new(name: &str, workspace: Option<&str>) -> Self {
        Session {
            id: SessionId::new(name).unwrap(),
            opened: false,
            workspace: workspace.map(|w| WorkspaceId::new(w).unwrap()),
            turn: 1,
            turn_events: 0,
            events: 0,
            anchor: None,
            copies: 0,
        }
    }

    fn stream(&self) -> StreamId {
        StreamId::session(&self.id)
    }

    fn turn_id(&self) -> TurnId {
        TurnId::new(format!("t{}", self.turn)).unwrap()
    }
}

/// One seed's run: the store, the generator and what it has acknowledged.
struct Run {
    seed: u64,
    rng: Rng,
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    runtime: tokio::runtime::Runtime,
    mnemo: Option<Mnemo>,
    sessions: Vec<Session>,
    items: Vec<ItemId>,
    operations: u64,
    batches: u64,
    /// Every record the host appended itself, by position (writers' records are read back).
    acknowledged: BTreeMap<u64, Vec<u8>>,
    refused: BTreeMap<&'static str, u64>,
    /// Checkpoints by the writer that recorded them.
    checkpoints: BTreeMap<&'static str, u64>,
}

impl Run {
    fn new(seed: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_767_225_600_000, 1_000));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let mut run = Run {
            seed,
            rng: Rng::new(seed),
            dir,
            clock,
            runtime,
            mnemo: None,
            sessions: Vec::new(),
            items: Vec::new(),
            operations: 0,
            batches: 0,
            acknowledged: BTreeMap::new(),
            refused: BTreeMap::new(),
            checkpoints: BTreeMap::new(),
        };
        for index in 0..SESSIONS_OPENED {
            let workspace = ["acme/api", "acme/web", ""][index % 3];
            run.sessions.push(Session::new(&format!("s{index}"), Some(workspace).filter(|w| !w.is_empty())));
        }
        run.open();
        run
    }

    fn config(&self) -> Config {
        Config { clock: self.clock.clone(), ..Config::default() }
    }

    fn open(&mut self) {
        self.mnemo = Some(Mnemo::open(self.dir.path(), self.config()).unwrap());
    }

    fn mnemo(&self) -> &Mnemo {
        self.mnemo.as_ref().unwrap()
    }

    fn head(&self) -> Position {
        self.mnemo().stats().unwrap().head
    }

    /// A crash point: the store is dropped without waiting for its projections, then reopened.
    fn crash(&mut self) {
        drop(self.mnemo.take());
        self.open();
    }

    /// Appends records the host writes itself and remembers what was acknowledged.
    fn append(&mut self, stream: &StreamId, records: &[Record]) {
        let appended = self.mnemo().append(stream, ExpectedRevision::Any, records).unwrap();
        for (offset, record) in records.iter().enumerate() {
            self.acknowledged.insert(appended.first_position.0 + offset as u64, record.encode().unwrap());
        }
    }

    /// An operation a writer refused: it must say why in a known category and append nothing.
    fn refused(&mut self, what: &'static str, before: Position, error: &mnemo::Error) {
        assert!(
            matches!(error.category(), ErrorCategory::Input | ErrorCategory::Conflict),
            "seed {}: {what} failed unexpectedly: {error}",
            self.seed
        );
        assert_eq!(self.head(), before, "seed {}: a refused {what} appended something: {error}", self.seed);
        *self.refused.entry(what).or_default() += 1;
    }

    fn pick(&mut self) -> usize {
        self.rng.below(self.sessions.len() as u64) as usize
    }

    fn longest(&self) -> usize {
        (0..self.sessions.len()).max_by_key(|&i| (self.sessions[i].events, i)).unwrap_or(0)
    }

    fn next_operation(&mut self) -> OperationId {
        self.operations += 1;
        OperationId::new(format!("op-{}", self.operations)).unwrap()
    }

    // ---- the host's own appends: session facts and runtime events ----

    fn open_session(&mut self, which: usize) {
        let session = &self.sessions[which];
        let record = Record::SessionOpened(SessionOpened {
            session: session.id.clone(),
            workspace: session.workspace.clone(),
            incognito: self.rng.chance(15),
            memory: if self.rng.chance(15) { MemoryMode::Disabled } else { MemoryMode::Enabled },
            subagent: false,
            title: Some(format!("session {}", session.id)),
            source: None,
            parent: None,
        });
        let stream = session.stream();
        self.append(&stream, &[record]);
        self.sessions[which].opened = true;
    }

    /// A batch of the running turn's events; sometimes a user line the proposer will remember.
    fn events(&mut self, which: usize) {
        self.batches += 1;
        let count = 1 + self.rng.below(12) as usize;
        let session = self.sessions[which].clone();
        let mut records = event_records(&mut self.rng, session.id.as_str(), self.batches, count);
        for record in &mut records {
            let Record::RuntimeEvent(event) = record else { continue };
            event.turn_id = session.turn_id();
            event.run_id = mnemo::records::RunId::new(format!("run-{}", session.turn)).unwrap();
            event.invocation_id = mnemo::records::InvocationId::new(format!("run-{}", session.turn)).unwrap();
        }
        self.append(&session.stream(), &records);
        self.sessions[which].turn_events += records.len();
        self.sessions[which].events += records.len();
        if self.rng.chance(30) {
            let line = MEMORABLE[self.rng.below(MEMORABLE.len() as u64) as usize];
            self.say(which, line);
        }
    }

    fn end_turn(&mut self, which: usize) {
        let session = self.sessions[which].clone();
        let status = if self.rng.chance(15) { TurnStatus::Failed } else { TurnStatus::Completed };
        let record = Record::TurnEnded(TurnEnded {
            session: session.id.clone(),
            turn: session.turn_id(),
            run: None,
            status,
        });
        self.append(&session.stream(), &[record]);
        self.sessions[which].turn += 1;
        self.sessions[which].turn_events = 0;
        self.sessions[which].anchor = None;
    }

    fn change_flags(&mut self, which: usize) {
        let session = self.sessions[which].clone();
        let mut change =
            SessionFlagsChanged { session: session.id.clone(), incognito: None, memory: None, title: None };
        match self.rng.below(3) {
            0 => change.incognito = Some(self.rng.chance(30)),
            1 => {
                change.memory =
                    Some(if self.rng.chance(30) { MemoryMode::Disabled } else { MemoryMode::Enabled })
            }
            _ => change.title = Some(format!("{} about {}", session.id, self.word())),
        }
        self.append(&session.stream(), &[Record::SessionFlagsChanged(change)]);
    }

    fn archive(&mut self, which: usize) {
        let session = self.sessions[which].clone();
        let record = Record::SessionArchived(SessionArchived {
            session: session.id.clone(),
            archived: self.rng.chance(60),
        });
        self.append(&session.stream(), &[record]);
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.rng.below(WORDS.len() as u64) as usize]
    }

    // ---- the facade's writers ----

    /// A checkpoint from the manual trigger or from preparing the next request under a small
    /// window; then the host's compaction hook, as a host calls it after every checkpoint.
    fn compact(&mut self, which: usize) {
        let session = self.sessions[which].clone();
        let before = self.head();
        let manual = self.rng.chance(50);
        // Windows the generated sessions outgrow (their histories are a few hundred tokens).
        let window = 200 + self.rng.below(1_000);
        let options = CompactOptions {
            context: ContextOptions { window: (!manual).then_some(window), ..ContextOptions::default() },
            min_recent_turns: manual.then_some(self.rng.below(2)),
            ..CompactOptions::default()
        };
        let compaction = self.mnemo().compaction();
        let outcome = if manual {
            self.runtime.block_on(compaction.compact(&session.id, &options))
        } else {
            self.runtime.block_on(compaction.prepare_history(&session.id, &options))
        };
        match outcome {
            Ok(outcome) => {
                if let Some(recorded) = outcome.recorded {
                    *self.checkpoints.entry(if manual { "manual" } else { "pre-turn" }).or_default() += 1;
                    let checkpoint = recorded.checkpoint.checkpoint.clone();
                    let hook = self.mnemo().memory();
                    self.runtime.block_on(hook.on_checkpoint_recorded(&session.id, &checkpoint)).unwrap();
                }
            }
            Err(error) => self.refused("compaction", before, &error),
        }
    }

    /// A checkpoint inside the running turn, anchored at its user line, as a host makes one when a
    /// step's request would not fit.
    fn compact_mid_turn(&mut self, which: usize) {
        let session = self.sessions[which].clone();
        let Some(anchor) = session.anchor.clone() else { return self.compact(which) };
        let before = self.head();
        let reference_tokens = 200 + self.rng.below(2_000);
        let mid_turn = mnemo::compaction::MidTurnOptions::new(session.turn_id(), anchor, reference_tokens);
        let options = CompactOptions::default();
        let compaction = self.mnemo().compaction();
        match self.runtime.block_on(compaction.compact_mid_turn(&session.id, &mid_turn, &options)) {
            Ok(mnemo::compaction::MidTurnOutcome::Replaced { checkpoint, .. }) => {
                *self.checkpoints.entry("mid-turn").or_default() += 1;
                let hook = self.mnemo().memory();
                let id = &checkpoint.checkpoint.checkpoint;
                self.runtime.block_on(hook.on_checkpoint_recorded(&session.id, id)).unwrap();
            }
            Ok(_) => assert_eq!(
                self.head(),
                before,
                "seed {}: a failed-open mid-turn compaction appended",
                self.seed
            ),
            Err(error) => self.refused("mid-turn compaction", before, &error),
        }
    }

    fn mutate(&mut self) {
        let before = self.head();
        let request = match (self.items.is_empty(), self.rng.below(4)) {
            (true, _) | (false, 0) => {
                let count = 1 + self.rng.below(2) as usize;
                let items = (0..count).map(|_| MutationInput::Create { item: self.item_input() }).collect();
                MutationRequest { operation: self.next_operation(), mutations: items }
            }
            (false, kind) => {
                let item = self.items[self.rng.below(self.items.len() as u64) as usize].clone();
                let version = self.mnemo().memory().get(&item).unwrap().map_or(1, |i| i.version);
                // Now and then a stale version: a conflict that appends nothing.
                let expected_version = if self.rng.chance(20) { version + 1 } else { version };
                let mutation = match kind {
                    1 => MutationInput::Update { item_id: item, expected_version, item: self.item_input() },
                    2 => MutationInput::Archive { item_id: item, expected_version },
                    _ => MutationInput::Restore { item_id: item, expected_version },
                };
                MutationRequest { operation: self.next_operation(), mutations: vec![mutation] }
            }
        };
        match self.mnemo().memory().apply(&request) {
            Ok(result) => {
                for outcome in &result.results {
                    if !self.items.contains(&outcome.item) {
                        self.items.push(outcome.item.clone());
                    }
                }
                // The same operation again is a replay: the same result, nothing appended.
                if self.rng.chance(20) {
                    let head = self.head();
                    let again = self.mnemo().memory().apply(&request).unwrap();
                    assert!(again.replayed, "seed {}: a repeated operation was not a replay", self.seed);
                    assert_eq!(self.head(), head, "seed {}: a replayed operation appended", self.seed);
                }
            }
            Err(error) => self.refused("memory mutation", before, &error),
        }
    }

    fn item_input(&mut self) -> ItemInput {
        let (a, b) = (self.word(), self.word());
        let scope = match self.rng.below(3) {
            0 => MemoryScope::Global,
            _ => MemoryScope::Workspace(
                WorkspaceId::new(if self.rng.chance(50) { "acme/api" } else { "acme/web" }).unwrap(),
            ),
        };
        let session = self.sessions[0].id.clone();
        ItemInput {
            content: format!("The {a} step uses the {b} settings."),
            kind: MemoryKind::Preference,
            statement_type: StatementType::Fact,
            temporal_type: TemporalType::Undated,
            scope,
            event_started_at: None,
            event_ended_at: None,
            observed_at: 0,
            origin: MemoryOrigin::UserRequested,
            keys: [a, b]
                .iter()
                .map(|k| KeyInput {
                    key: (*k).to_owned(),
                    key_type: KeyType::Concept,
                    key_origin: KeyOrigin::User,
                })
                .collect(),
            sources: vec![SourcePointer {
                session,
                run: mnemo::records::RunId::new("run-1").unwrap(),
                turn: TurnId::new("t1").unwrap(),
                event: mnemo::records::EventId::new("s0:1:0").unwrap(),
            }],
        }
    }

    /// Remember or extract with the embedded models: a commit (items, or a no-op) or an answer that
    /// the gate is closed.
    fn extract(&mut self, which: usize) {
        let session = self.sessions[which].id.clone();
        let before = self.head();
        let remember = self.rng.chance(50);
        let memory = self.mnemo().memory();
        let result = if remember {
            self.runtime.block_on(memory.remember(&session, None)).map(|_| ())
        } else {
            self.runtime.block_on(memory.extract(&session, None)).map(|_| ())
        };
        if let Err(error) = result {
            self.refused("extraction", before, &error);
        }
        if self.rng.chance(25) {
            self.unmerge();
        }
    }

    /// Undoes the newest merge or supersession of a random item: a mutation record naming what it
    /// undoes, or a conflict that appends nothing when there is none.
    fn unmerge(&mut self) {
        let request = ListRequest { include_archived: true, ..ListRequest::default() };
        let all = self.mnemo().memory().list(&request).unwrap();
        if all.is_empty() {
            return;
        }
        let item = all[self.rng.below(all.len() as u64) as usize].item.clone();
        let before = self.head();
        let operation = self.next_operation();
        if let Err(error) = self.mnemo().memory().unmerge(&item, operation) {
            self.refused("unmerge", before, &error);
        }
    }

    /// Extraction with a proposer that fails: the engine settles the range as a failure.
    fn failed_extraction(&mut self, which: usize) {
        let session = self.sessions[which].id.clone();
        let before = self.head();
        let proposer = Arc::new(BrokenProposer { nonsense: self.rng.chance(50) });
        self.mnemo().memory().set_models(MemoryModels { proposer, ..MemoryModels::default() });
        let result = self.runtime.block_on(self.mnemo().memory().extract(&session, None));
        self.mnemo().memory().set_models(MemoryModels::default());
        if let Err(error) = result {
            self.refused("failed extraction", before, &error);
        }
    }

    fn copy(&mut self, which: usize) {
        let before = self.head();
        let source = self.sessions[which].clone();
        self.sessions[which].copies += 1;
        let name = format!("{}-copy{}", source.id, source.copies + 1);
        let target = SessionId::new(&name).unwrap();
        match self.mnemo().compaction().copy(&source.id, None, Some(target)) {
            Ok(_) if self.sessions.len() < SESSIONS_MAX => {
                let mut copy = Session::new(&name, None);
                copy.opened = true;
                copy.workspace = source.workspace.clone();
                copy.turn = source.turn + 1;
                self.sessions.push(copy);
            }
            Ok(_) => {}
            Err(error) => self.refused("copy", before, &error),
        }
    }

    /// One random step.
    fn step(&mut self) {
        if self.rng.chance(8) {
            self.crash();
            return;
        }
        let which = self.pick();
        if !self.sessions[which].opened {
            self.open_session(which);
            return;
        }
        match self.rng.below(100) {
            0..35 => self.events(which),
            35..50 if self.sessions[which].turn_events > 0 => self.end_turn(which),
            35..50 => self.events(which),
            50..55 => self.change_flags(which),
            55..57 => self.archive(which),
            57..61 => self.compact(which),
            61..64 => self.compact_mid_turn(which),
            // Most often the longest conversation: the one a window is most likely to overflow.
            64..71 => self.compact(self.longest()),
            71..80 => self.mutate(),
            80..89 => self.extract(which),
            89..94 => self.failed_extraction(which),
            _ => self.copy(which),
        }
    }

    /// How many records of each kind the log holds.
    fn kinds(&self) -> BTreeMap<String, u64> {
        let mut kinds = BTreeMap::new();
        for entry in self.mnemo().log_entries(Position(1), usize::MAX).unwrap() {
            *kinds.entry(entry.kind).or_default() += 1;
        }
        kinds
    }

    fn missing(&self) -> Vec<RecordKind> {
        let kinds = self.kinds();
        RecordKind::ALL.into_iter().filter(|kind| !kinds.contains_key(kind.name())).collect()
    }

    /// A forced tail for the kinds the random steps did not produce, on a session of its own: a
    /// conversation long enough to compact, then mutated, remembered, failed, denied, copied and
    /// archived, in that order (an archived or memory-disabled session closes the memory gate).
    fn cover(&mut self) {
        let missing = self.missing();
        if missing.is_empty() {
            return;
        }
        self.sessions.push(Session::new("cover", Some("acme/api")));
        let which = self.sessions.len() - 1;
        let session = self.sessions[which].id.clone();
        let stream = self.sessions[which].stream();
        let opened = SessionOpened {
            session: session.clone(),
            workspace: self.sessions[which].workspace.clone(),
            incognito: false,
            memory: MemoryMode::Enabled,
            subagent: false,
            title: None,
            source: None,
            parent: None,
        };
        self.append(&stream, &[Record::SessionOpened(opened)]);
        self.sessions[which].opened = true;
        let title = SessionFlagsChanged {
            session: session.clone(),
            incognito: None,
            memory: None,
            title: Some("cover".to_owned()),
        };
        self.append(&stream, &[Record::SessionFlagsChanged(title)]);
        for _ in 0..4 {
            self.events(which);
            self.events(which);
            self.end_turn(which);
        }
        if missing.contains(&RecordKind::MemoryMutation) {
            self.mutate();
        }
        if missing.contains(&RecordKind::MemoryCommit) {
            self.say(which, MEMORABLE[0]);
            self.runtime.block_on(self.mnemo().memory().remember(&session, None)).unwrap();
        }
        if missing.contains(&RecordKind::ExtractionFailure) {
            self.say(which, MEMORABLE[1]);
            self.failed_extraction(which);
        }
        if missing.contains(&RecordKind::CheckpointRecorded) || missing.contains(&RecordKind::PolicyDenial) {
            let disabled = SessionFlagsChanged {
                session: session.clone(),
                incognito: None,
                memory: Some(MemoryMode::Disabled),
                title: None,
            };
            self.append(&stream, &[Record::SessionFlagsChanged(disabled)]);
            self.end_turn(which);
            self.events(which);
            let options = CompactOptions { min_recent_turns: Some(1), ..CompactOptions::default() };
            let outcome =
                self.runtime.block_on(self.mnemo().compaction().compact(&session, &options)).unwrap();
            let Some(recorded) = outcome.recorded else {
                panic!("seed {}: the cover session did not compact", self.seed)
            };
            let checkpoint = recorded.checkpoint.checkpoint;
            let hook = self.mnemo().memory();
            self.runtime.block_on(hook.on_checkpoint_recorded(&session, &checkpoint)).unwrap();
        }
        if missing.contains(&RecordKind::ConversationCopied) {
            self.end_turn(which);
            self.copy(which);
        }
        let archived = SessionArchived { session, archived: true };
        self.append(&stream, &[Record::SessionArchived(archived)]);
    }

    /// A user line of its own in the running turn.
    fn say(&mut self, which: usize, text: &str) {
        self.batches += 1;
        let session = self.sessions[which].clone();
        let mut event = match event_records(&mut self.rng, session.id.as_str(), self.batches, 1).pop() {
            Some(Record::RuntimeEvent(event)) => event,
            other => panic!("not an event: {other:?}"),
        };
        event.turn_id = session.turn_id();
        event.run_id = mnemo::records::RunId::new(format!("run-{}", session.turn)).unwrap();
        event.invocation_id = mnemo::records::InvocationId::new(format!("run-{}", session.turn)).unwrap();
        event.role = mnemo::records::Role::User;
        event.author = mnemo::records::Author::User;
        event.content = Some(mnemo::records::Content::Text(mnemo::records::TextContent::new(text)));
        let id = event.id.clone();
        self.append(&session.stream(), &[Record::RuntimeEvent(event)]);
        self.sessions[which].anchor = Some(id);
        self.sessions[which].turn_events += 1;
    }

    /// The property.
    fn check(mut self) -> BTreeMap<String, u64> {
        for (position, bytes) in &self.acknowledged {
            let envelope = self.mnemo().log().read(Position(*position)).unwrap();
            assert_eq!(
                envelope.map(|e| e.record).as_ref(),
                Some(bytes),
                "seed {}: position {position}",
                self.seed
            );
        }
        let kinds = self.kinds();
        let missing = self.missing();
        assert!(
            missing.is_empty(),
            "seed {}: no record of kinds {missing:?} in the log: {kinds:?}",
            self.seed
        );
        let seed = self.seed;
        let mnemo = self.mnemo.take().unwrap();
        mnemo.catch_up().unwrap();
        let incremental = mnemo.stats().unwrap().stages;
        let names: Vec<&str> = incremental.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, STAGES, "seed {seed}: the stages the property covers");
        let verification = mnemo.verify(&mut |_| {}).unwrap();
        assert!(
            verification.ok(),
            "seed {seed}: live differs from the in-memory reference: {verification:?}"
        );
        let rebuilt = mnemo.rebuild(None).unwrap();
        assert_eq!(incremental, rebuilt, "seed {seed}: incremental and rebuilt digests differ");
        for (stage, reference) in rebuilt.iter().zip(&verification.stages) {
            assert_eq!(
                stage.digest, reference.rebuilt,
                "seed {seed}: rebuilt and reference differ for {}",
                stage.name
            );
        }
        drop(mnemo);
        let reopened = Mnemo::open(self.dir.path(), self.config()).unwrap();
        reopened.catch_up().unwrap();
        assert_eq!(reopened.stats().unwrap().stages, rebuilt, "seed {seed}: reopened digests differ");
        reopened.close().unwrap();
        kinds
    }
}

fn run_seed(seed: u64) -> BTreeMap<String, u64> {
    let mut run = Run::new(seed);
    for _ in 0..STEPS_PER_SEED {
        run.step();
    }
    let random = run.kinds();
    run.cover();
    let refused = run.refused.clone();
    let checkpoints = run.checkpoints.clone();
    let kinds = run.check();
    eprintln!("seed {seed}: records by kind {kinds:?}");
    eprintln!("    of which the random steps made {random:?}; refused operations {refused:?}");
    eprintln!("    checkpoints by writer {checkpoints:?}");
    kinds
}

#[test]
fn incremental_rebuilt_reopened_and_reference_projections_agree_over_every_record_kind() {
    let base = seed_from_env();
    eprintln!("replay property seed: MNEMO_SEED={base}");
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for offset in 0..SEEDS_PER_RUN {
        for (kind, count) in run_seed(base.wrapping_add(offset)) {
            *total.entry(kind).or_default() += count;
        }
    }
    eprintln!("records by kind over {SEEDS_PER_RUN} seeds: {total:?}");
    for kind in RecordKind::ALL {
        assert!(total.contains_key(kind.name()), "no {} record in any seed", kind.name());
    }
}
