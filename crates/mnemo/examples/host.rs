//! A host embedding Mnemo: open a store, append turns as they happen, assemble each provider
//! request's history, recover when the provider rejects a request as too long, give the model its
//! history tools, remember and recall, close.
//!
//! Run it with `cargo run -p mnemo --example host [STORE_DIR]` (a temporary directory by default).

use std::error::Error;

use mnemo::compaction::{
    CompactOptions, ContextOptions, HistoryItem, MidTurnOptions, OverflowLatch, OverflowRecovery,
    ProviderOverflow,
};
use mnemo::history::{HistoryContext, HistoryReadRequest, HistorySearchRequest};
use mnemo::log::ExpectedRevision;
use mnemo::memory::RecallMemory;
use mnemo::records::{
    Author, Content, EventId, FunctionCall, FunctionResponse, InvocationId, Record, Role, RunId,
    RuntimeEvent, SessionId, SessionOpened, StreamId, TextContent, TimestampMs, ToolCallId, TurnEnded,
    TurnId, TurnStatus, WorkspaceId,
};
use mnemo::{Config, Mnemo};
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The first event's time; each later event is a second after the previous one.
const START_MS: u64 = 1_767_225_600_000;

/// A conversation as the host's runtime produces it, one record at a time.
struct Conversation<'a> {
    mnemo: &'a Mnemo,
    session: SessionId,
    events: u64,
}

impl Conversation<'_> {
    fn stream(&self) -> StreamId {
        StreamId::session(&self.session)
    }

    fn event(&mut self, turn: &str, role: Role, author: Author, content: Content) -> Result<RuntimeEvent> {
        self.events += 1;
        let run = format!("run-{turn}");
        let mut event = RuntimeEvent::new(
            EventId::new(format!("{}-e{}", self.session, self.events))?,
            InvocationId::new(run.clone())?,
            RunId::new(run)?,
            self.session.clone(),
            TurnId::new(turn)?,
            TimestampMs(START_MS + self.events * 1_000),
            role,
            author,
        );
        event.content = Some(content);
        Ok(event)
    }

    /// Appends one step's records atomically (what a runtime does after each model step).
    fn append(&self, records: Vec<Record>) -> Result<()> {
        self.mnemo.append(&self.stream(), ExpectedRevision::Any, &records)?;
        Ok(())
    }

    /// One whole turn: the user asks, the model runs a tool, the tool answers, the model replies.
    fn turn(&mut self, turn: &str, ask: &str, command: &str, output: &str, reply: &str) -> Result<()> {
        let text = |t: &str| Content::Text(TextContent::new(t));
        let call = ToolCallId::new(format!("call-{turn}"))?;
        let user = self.event(turn, Role::User, Author::User, text(ask))?;
        let args = json!({ "cmd": command });
        let call_event = self.event(
            turn,
            Role::Model,
            Author::Agent,
            Content::FunctionCall(FunctionCall::new(call.clone(), "shell", args)),
        )?;
        let response = FunctionResponse::new(call, "shell", json!(output));
        let result = self.event(turn, Role::Tool, Author::Tool, Content::FunctionResponse(response))?;
        let answer = self.event(turn, Role::Model, Author::Agent, text(reply))?;
        self.append(vec![Record::RuntimeEvent(user)])?;
        self.append(vec![Record::RuntimeEvent(call_event), Record::RuntimeEvent(result)])?;
        let end = TurnEnded {
            session: self.session.clone(),
            turn: TurnId::new(turn)?,
            run: None,
            status: TurnStatus::Completed,
        };
        self.append(vec![Record::RuntimeEvent(answer), Record::TurnEnded(end)])?;
        Ok(())
    }
}

/// What the tour saw, for the test that runs it.
#[derive(Debug, Default)]
pub struct Tour {
    /// What `remember` stored.
    pub remembered: Vec<String>,
    /// Whether preparing the next request recorded a checkpoint.
    pub compacted: bool,
    /// Whether the overflow was recovered by a checkpoint and a resend.
    pub overflow_resent: bool,
    /// Whether a second overflow in the same turn surfaced the provider's error.
    pub second_overflow_surfaced: bool,
    /// Search hits for "cargo cache".
    pub search_rows: usize,
    /// Items the recall tool returned.
    pub recalled: usize,
    /// Whether verification found every projection equal to a rebuild.
    pub verified: bool,
    /// The turn whose first request overflowed.
    pub overflow_turn: String,
}

fn main() -> Result<()> {
    let temporary = tempfile::tempdir()?;
    let dir = std::env::args().nth(1).map_or_else(|| temporary.path().to_path_buf(), Into::into);
    let tour = tour(&dir)?;
    println!("{tour:?}");
    Ok(())
}

/// The whole life of a host's session, in a store at `dir`.
pub fn tour(dir: &std::path::Path) -> Result<Tour> {
    let mut seen = Tour::default();
    // Open (or create) the store; its projections catch up in the background.
    let mnemo = Mnemo::open(dir, Config::default())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let session = SessionId::new("host-demo")?;
    let opened = SessionOpened {
        session: session.clone(),
        workspace: Some(WorkspaceId::new("acme/api")?),
        incognito: false,
        memory: mnemo::records::MemoryMode::Enabled,
        subagent: false,
        title: Some("Speed up the CI pipeline".to_owned()),
        source: None,
        parent: None,
    };
    mnemo.append(
        &StreamId::session(&session),
        ExpectedRevision::NoStream,
        &[Record::SessionOpened(opened)],
    )?;
    let mut conversation = Conversation { mnemo: &mnemo, session: session.clone(), events: 0 };

    // 1. Append turns as they happen.
    let log = "test result: ok. 412 passed; 0 failed; finished in 388.2s ".repeat(30);
    let turns = [
        (
            "CI takes 25 minutes. Find the slowest step. I prefer GitHub Actions caches over self-hosted runners.",
            "ci timings --last 20",
            "The test step takes 6.5 minutes of the 25; the rest is compiling from scratch on every run.",
        ),
        (
            "Cache the cargo target directory keyed by Cargo.lock.",
            "apply-patch .github/workflows/ci.yml",
            "Added actions/cache for target/ and ~/.cargo keyed by the hash of Cargo.lock.",
        ),
        (
            "Split the test job by crate.",
            "apply-patch .github/workflows/ci.yml",
            "The test job now runs as a matrix over the six crates.",
        ),
        (
            "Which crate's tests are slowest now?",
            "ci timings --job test --last 5",
            "mnemo-acceptance at 4.1 minutes; the others finish under a minute.",
        ),
        (
            "Run the acceptance crash tests only on main.",
            "apply-patch .github/workflows/ci.yml",
            "The crash tests are behind `if: github.ref == 'refs/heads/main'`.",
        ),
    ];
    for (index, (ask, command, reply)) in turns.iter().enumerate() {
        conversation.turn(&format!("t{}", index + 1), ask, command, &log, reply)?;
    }
    // The user asks for something to be remembered; the runtime runs the memory_remember tool.
    conversation.turn(
        "t6",
        "Please remember that the release branch must never use the cache.",
        "apply-patch .github/workflows/release.yml",
        "patched 1 file",
        "Done: release.yml restores nothing and saves nothing.",
    )?;
    let remembered = runtime.block_on(mnemo.memory().remember(&session, None))?;
    let contents: Vec<&str> = remembered.items.iter().map(|i| i.content.as_str()).collect();
    println!("appended 6 turns; remember: {:?} {contents:?}", remembered.status);
    seen.remembered = contents.iter().map(|c| (*c).to_owned()).collect();

    // 2. Before each turn: the history the next request carries (compacting when it must).
    let options = CompactOptions {
        context: ContextOptions { window: Some(3_000), ..ContextOptions::default() },
        ..CompactOptions::default()
    };
    let prepared = runtime.block_on(mnemo.compaction().prepare_history(&session, &options))?;
    let history = &prepared.history;
    seen.compacted = prepared.recorded.is_some();
    println!(
        "next request: {} items, ~{} tokens (was ~{}); checkpoint {}",
        history.items.len(),
        history.diagnostics.tokens_after,
        history.diagnostics.tokens_before,
        prepared.recorded.as_ref().map_or("none".to_owned(), |r| r.checkpoint.checkpoint.to_string())
    );

    // 3. A new turn whose first request the provider rejects as too long: recover once.
    let new_turn = format!("t{}", turns.len() + 2);
    let question = conversation.event(
        &new_turn,
        Role::User,
        Author::User,
        Content::Text(TextContent::new("Now make the test step faster.")),
    )?;
    let anchor = question.id.clone();
    conversation.append(vec![Record::RuntimeEvent(question)])?;
    let overflow = ProviderOverflow {
        context_length_error: true,
        produced_output: false,
        steps_remaining: true,
        step: 0,
        historical_images: false,
        request: MidTurnOptions::new(TurnId::new(&new_turn)?, anchor, 3_000),
    };
    seen.overflow_turn = new_turn;
    let mut latch = OverflowLatch::default();
    match runtime.block_on(mnemo.compaction().recover_from_overflow(
        &session,
        &mut latch,
        &overflow,
        &CompactOptions::default(),
    ))? {
        OverflowRecovery::Resend { checkpoint, items } => {
            seen.overflow_resent = true;
            let summarized = items.iter().filter(|i| matches!(i, HistoryItem::Checkpoint { .. })).count();
            println!(
                "overflow: recorded {} and resend {} items ({summarized} summary)",
                checkpoint.checkpoint.checkpoint,
                items.len()
            );
        }
        OverflowRecovery::RetryWithoutImages => println!("overflow: resend without historical images"),
        other => println!("overflow: surface the provider's error ({other:?})"),
    }
    // A second overflow in the same turn is never retried.
    let again = runtime.block_on(mnemo.compaction().recover_from_overflow(
        &session,
        &mut latch,
        &overflow,
        &CompactOptions::default(),
    ))?;
    println!("second overflow in the turn: {again:?}");
    seen.second_overflow_surfaced = again == OverflowRecovery::SurfaceProviderError;

    // 4. The model's history tools.
    let tools = HistoryContext::default();
    if let Ok(search) = mnemo.history().search(&HistorySearchRequest::new("cargo cache"), &tools, None)? {
        seen.search_rows = search.rows.len();
        for row in search.rows.iter().take(3) {
            println!("search: {} {} {}", row.session_id, row.summary, row.snippet);
        }
    }
    let read = HistoryReadRequest {
        session_id: session.to_string(),
        turn_id: Some("t2".to_owned()),
        ..HistoryReadRequest::default()
    };
    if let Ok(read) = mnemo.history().read(&read, &tools, None)? {
        println!("read: {} turns around t2", read.turns.len());
    }

    // 5. Recall what was remembered: pushed into the next request, or pulled by the model's tool.
    let block = mnemo.memory().recall_block(&session, Some("release branch cache"))?;
    println!("recall block (~{} tokens):\n{}", block.tokens, block.text);
    let pulled = mnemo
        .memory()
        .recall(&session, &RecallMemory { query: "release cache".to_owned(), limit: Some(3) })?;
    println!("recall tool: {} item(s)", pulled.len());
    seen.recalled = pulled.len();

    // 6. Close: projections fold what was appended, memory stops taking work.
    let verification = mnemo.verify(&mut |_| {})?;
    println!(
        "verify: {} envelopes, projections match a rebuild: {}",
        verification.envelopes,
        verification.ok()
    );
    seen.verified = verification.ok();
    mnemo.close()?;
    println!("closed");
    Ok(seen)
}
