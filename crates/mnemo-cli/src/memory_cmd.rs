//! `mnemo memory ...` and `mnemo recall`: long-term memory from the command line.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use mnemo::Mnemo;
use mnemo::memory::{
    ExtractionOutcome, ExtractionReport, ItemAction, ItemEvent, ItemHistory, ItemInput, ItemWhy, KeyInput,
    ListRequest, MatchMode, OperationResult, RecallMemory, RememberStatus, SearchRequest,
};
use mnemo::records::{
    EventId, ItemId, KeyOrigin, KeyType, MemoryItem, MemoryKind, OperationId, SessionId, ToolCallId,
    WorkspaceId,
};

use crate::term::{say, say_inline};
use crate::{Cli, open, output};

/// Memory commands.
#[derive(Debug, Subcommand)]
pub(crate) enum MemoryCommand {
    /// Store what the user explicitly asked to remember in a session (foreground extraction).
    Remember {
        session: String,
        /// The `memory_remember` tool call; without it the range ends at the session's last event.
        #[arg(long)]
        tool_call: Option<String>,
    },
    /// Extract incidental facts from a session's new events (background extraction); `--all`:
    /// from every session's, one after another.
    Extract {
        /// The session (or `--all`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        session: Option<String>,
        /// The last event to consider (default: the session's last event).
        #[arg(long, conflicts_with = "all")]
        through: Option<String>,
        /// Every session the store holds (after `mnemo sync` of earlier sessions, say): a line per
        /// session; sessions memory may not read (incognito, memory off, a sub-agent's) say why.
        #[arg(long)]
        all: bool,
    },
    /// What extraction has yet to read: each session with events past its extraction cursor (or a
    /// failed range awaiting its retry), and what the last extractions in the process holding the
    /// store (the store server, when one runs) did.
    Status,
    /// Print one item.
    Get { id: String },
    /// List items without a key: every scope, or global items and one workspace's.
    List {
        /// Global items and this workspace's (default: every scope).
        #[arg(long)]
        workspace: Option<String>,
        /// Only items of this kind: preference, identity, context, knowledge, failure, note.
        #[arg(long)]
        kind: Option<String>,
        /// Also list archived items.
        #[arg(long)]
        include_archived: bool,
        /// 1 to 1000 (default 200).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Find items by keys.
    Search {
        #[arg(required = true)]
        keys: Vec<String>,
        /// Match keys that start with the terms.
        #[arg(long)]
        prefix: bool,
        /// Also return this workspace's items (global items always are candidates).
        #[arg(long)]
        workspace: Option<String>,
        /// Also return archived items.
        #[arg(long)]
        include_archived: bool,
        /// 1 to 100 (default 20).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Replace an item's content and/or keys at its current version.
    Update {
        id: String,
        #[arg(long)]
        expected_version: u64,
        /// New content.
        #[arg(long)]
        content: Option<String>,
        /// New keys (repeatable); they replace all keys.
        #[arg(long = "key")]
        keys: Vec<String>,
        /// Operation id (generated if absent); reuse it to retry safely.
        #[arg(long)]
        op: Option<String>,
    },
    /// Archive an active item.
    Archive {
        id: String,
        #[arg(long)]
        expected_version: u64,
        #[arg(long)]
        op: Option<String>,
    },
    /// Restore an archived item.
    Restore {
        id: String,
        #[arg(long)]
        expected_version: u64,
        #[arg(long)]
        op: Option<String>,
    },
    /// Every value of the fact an item states, oldest first: when and where each was said (log
    /// position, session, time); the current one is marked.
    History { id: String },
    /// Why an item exists: the text, log position and hash of each event it was learned from, and
    /// each record that created, merged, superseded or split it.
    Why { id: String },
    /// Undo the newest merge into an item (the merged statement becomes its own item again, with
    /// its sources) or the newest supersession of or by it (the replaced item is restored).
    Unmerge {
        id: String,
        /// Operation id (generated if absent); reuse it to retry safely.
        #[arg(long)]
        op: Option<String>,
    },
}

/// `mnemo recall SESSION [--query Q] [--limit N]`.
#[derive(Debug, Args)]
pub(crate) struct RecallArgs {
    session: String,
    /// What to look for (default: the session's recent turns, as the push route does).
    #[arg(long)]
    query: Option<String>,
    /// With a query: 1 to 50 results (default 10).
    #[arg(long)]
    limit: Option<u64>,
}

fn input(error: impl std::fmt::Display) -> anyhow::Error {
    mnemo::Error::InvalidInput(error.to_string()).into()
}

fn session(text: &str) -> anyhow::Result<SessionId> {
    SessionId::new(text).map_err(input)
}

fn item_id(text: &str) -> anyhow::Result<ItemId> {
    ItemId::new(text).map_err(input)
}

fn operation(op: Option<&String>) -> anyhow::Result<OperationId> {
    let text = match op {
        Some(op) => op.clone(),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("cli-{}-{stamp}", std::process::id())
        }
    };
    OperationId::new(text).map_err(input)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_time().build()?)
}

fn found(any: bool) -> ExitCode {
    if any { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// The snake_case name serde gives a value (`Active` -> `active`).
fn name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        _ => String::new(),
    }
}

fn kind(text: &str) -> anyhow::Result<MemoryKind> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        input(format!(
            "unknown kind {text:?}; known: preference, identity, context, knowledge, failure, note"
        ))
    })
}

fn print_item(item: &MemoryItem) {
    let keys: Vec<&str> = item.fields.keys.iter().map(|k| k.key.as_str()).collect();
    let sessions: std::collections::BTreeSet<&str> =
        item.fields.sources.iter().map(|s| s.session.as_str()).collect();
    let superseded =
        item.superseded_by.as_ref().map(|by| format!("  superseded by {by}")).unwrap_or_default();
    say!(
        "{}  v{}  {}  {}  {}  [{}]{superseded}\n    {}\n    sources: {} event(s) in {}",
        item.item,
        item.version,
        name(&item.lifecycle),
        name(&item.fields.kind),
        item.fields.scope,
        keys.join(", "),
        item.fields.content,
        item.fields.sources.len(),
        sessions.into_iter().collect::<Vec<_>>().join(", ")
    );
}

fn print_operation(result: &OperationResult) {
    for r in &result.results {
        say!(
            "{}  v{}  {}  {}{}",
            r.item,
            r.version,
            name(&r.lifecycle),
            name(&r.outcome),
            if result.replayed { "  (replayed)" } else { "" }
        );
    }
}

/// Runs a memory command.
pub(crate) fn run(cli: &Cli, command: &MemoryCommand) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    match command {
        MemoryCommand::Remember { session: s, tool_call } => {
            let call = tool_call.as_deref().map(ToolCallId::new).transpose().map_err(input)?;
            let result = runtime()?.block_on(mnemo.memory().remember(&session(s)?, call))?;
            // The answer is the stored items' list, in words; `--json` adds their ids.
            output(cli, &result, || say!("{}", result.text()));
            Ok(found(result.status == RememberStatus::Remembered))
        }
        MemoryCommand::Extract { all: true, .. } => extract_all(cli, &mnemo),
        MemoryCommand::Status => status(cli, &mnemo),
        MemoryCommand::Extract { session: s, through, .. } => {
            let through = through.as_deref().map(EventId::new).transpose().map_err(input)?;
            let s = s.as_deref().unwrap_or_default();
            let report = runtime()?.block_on(mnemo.memory().extract(&session(s)?, through))?;
            output(cli, &report, || print_extraction(&report));
            // 0 when the range is settled (or there was nothing new), 1 when nothing ran.
            let settled = matches!(
                report.outcome,
                ExtractionOutcome::Committed { .. } | ExtractionOutcome::NothingToProcess
            );
            Ok(found(settled))
        }
        MemoryCommand::List { workspace, kind: k, include_archived, limit } => {
            let request = ListRequest {
                workspace: workspace.as_deref().map(WorkspaceId::new).transpose().map_err(input)?,
                kind: k.as_deref().map(kind).transpose()?,
                include_archived: *include_archived,
                limit: *limit,
            };
            let items = mnemo.memory().list(&request)?;
            output(cli, &items, || items.iter().for_each(print_item));
            Ok(found(!items.is_empty()))
        }
        MemoryCommand::Get { id } => {
            let item = mnemo.memory().get(&item_id(id)?)?;
            output(cli, &item, || item.iter().for_each(print_item));
            Ok(found(item.is_some()))
        }
        MemoryCommand::Search { keys, prefix, workspace, include_archived, limit } => {
            let request = SearchRequest {
                terms: keys.clone(),
                match_mode: if *prefix { MatchMode::Prefix } else { MatchMode::Exact },
                workspace: workspace.as_deref().map(WorkspaceId::new).transpose().map_err(input)?,
                include_archived: *include_archived,
                limit: *limit,
            };
            let items = mnemo.memory().search(&request)?;
            output(cli, &items, || items.iter().for_each(print_item));
            Ok(found(!items.is_empty()))
        }
        MemoryCommand::Update { id, expected_version, content, keys, op } => {
            update(cli, &mnemo, id, *expected_version, content.as_deref(), keys, op.as_ref())
        }
        MemoryCommand::Archive { id, expected_version, op } => {
            let result = mnemo.memory().archive(operation(op.as_ref())?, item_id(id)?, *expected_version)?;
            output(cli, &result, || print_operation(&result));
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Restore { id, expected_version, op } => {
            let result = mnemo.memory().restore(operation(op.as_ref())?, item_id(id)?, *expected_version)?;
            output(cli, &result, || print_operation(&result));
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::History { id } => {
            let history = mnemo.memory().history(&item_id(id)?)?;
            output(cli, &history, || history.iter().for_each(print_version));
            Ok(found(!history.is_empty()))
        }
        MemoryCommand::Why { id } => {
            let why = mnemo.memory().why(&item_id(id)?)?;
            output(cli, &why, || why.iter().for_each(print_why));
            Ok(found(why.is_some()))
        }
        MemoryCommand::Unmerge { id, op } => {
            let result = mnemo.memory().unmerge(&item_id(id)?, operation(op.as_ref())?)?;
            output(cli, &result, || print_operation(&result));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One value of a fact: the item, then each record that touched it.
fn print_version(version: &ItemHistory) {
    let item = &version.item;
    let sessions: std::collections::BTreeSet<&str> =
        item.fields.sources.iter().map(|s| s.session.as_str()).collect();
    say!(
        "{} {}  {}\n    said at position {} ({}) in {}",
        if version.current { "*" } else { " " },
        item.item,
        item.fields.content,
        version.said_at(),
        crate::date_time(version.events.first().map_or(item.created_at, |e| e.at)),
        sessions.into_iter().collect::<Vec<_>>().join(", ")
    );
    version.events.iter().skip(1).for_each(print_event);
}

fn print_event(event: &ItemEvent) {
    let other = event.other.as_ref().map(|o| format!(" {o}")).unwrap_or_default();
    let undone = event.undone_at.map(|p| format!(" (undone at position {p})")).unwrap_or_default();
    say!(
        "    {} {}{other} at position {} ({}), v{}{undone}",
        name(&event.action),
        match event.action {
            ItemAction::Superseded => "by",
            ItemAction::Supersedes | ItemAction::Split => "from",
            _ => "",
        },
        event.position,
        crate::date_time(event.at),
        event.version
    );
}

fn print_why(why: &ItemWhy) {
    print_item(&why.item);
    say!("  evidence:");
    for evidence in &why.evidence {
        let position =
            evidence.position.map_or_else(|| "not in the log".to_owned(), |p| format!("position {p}"));
        say!(
            "    {} in {} ({position}, hash {}, {}):",
            evidence.event,
            evidence.session,
            evidence.hash.as_deref().unwrap_or("-"),
            evidence.role.as_deref().unwrap_or("-")
        );
        say!("      {}", evidence.text.as_deref().unwrap_or("(no text)"));
    }
    say!("  records:");
    for record in &why.records {
        print_event(&record.event);
        say!("      hash {}", record.hash.as_deref().unwrap_or("-"));
    }
}

/// `memory extract --all`: every session in turn, most recently active first. Exit 0 when every
/// session's range is settled, had nothing new, or memory may not read the session; 1 otherwise.
fn extract_all(cli: &Cli, mnemo: &Mnemo) -> anyhow::Result<ExitCode> {
    let sessions = mnemo.history().sessions()?;
    let runtime = runtime()?;
    let (mut reports, mut settled) = (Vec::with_capacity(sessions.len()), true);
    for summary in &sessions {
        let report = runtime.block_on(mnemo.memory().extract(&summary.session, None))?;
        if !cli.json {
            say!("{}  {}", summary.session, extraction_line(&report));
        }
        settled &= matches!(
            report.outcome,
            ExtractionOutcome::Committed { .. }
                | ExtractionOutcome::NothingToProcess
                | ExtractionOutcome::Unavailable { .. }
        );
        reports.push(serde_json::json!({ "session": summary.session, "report": report }));
    }
    if cli.json {
        crate::print_json(&reports);
    }
    Ok(found(settled))
}

/// `memory status`: the extraction backlog, per session, and the last extractions.
fn status(cli: &Cli, mnemo: &Mnemo) -> anyhow::Result<ExitCode> {
    let pending = mnemo.memory().backlog()?;
    let last = mnemo.memory().last_extractions();
    if cli.json {
        crate::print_json(&serde_json::json!({ "pending": pending, "last": last }));
        return Ok(ExitCode::SUCCESS);
    }
    let events: u64 = pending.iter().filter(|p| p.extractable()).map(|p| p.unprocessed).sum();
    let waiting = pending.iter().filter(|p| p.extractable()).count();
    say!("pending: {waiting} session(s), {events} event(s) not yet extracted");
    for session in &pending {
        let mut line = format!(
            "  {}  {} event(s) pending (extracted through {} of {})",
            session.session, session.unprocessed, session.processed, session.events
        );
        if let Some((from, through)) = session.failed_range {
            line.push_str(&format!("; failed range {from}..={through} awaits its retry"));
        }
        if let Some(gate) = session.gate {
            line.push_str(&format!("; not extracted: {}", gate.name()));
        }
        say!("{line}");
    }
    if last.is_empty() {
        say!("last extractions: none since the store was opened");
    } else {
        say!("last extractions:");
    }
    for run in &last {
        say!(
            "  {}  at {}  {}; {} item(s) stored, {} model call(s)",
            run.session,
            run.at.0,
            outcome_text(&run.outcome),
            run.stored,
            run.model_calls
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_extraction(report: &ExtractionReport) {
    say!("{}", extraction_line(report));
    for rejected in &report.rejections {
        say!("  turned down: {}  ({})", rejected.content, name(&rejected.rejection));
    }
}

/// What an extraction did, on one line.
fn extraction_line(report: &ExtractionReport) -> String {
    format!(
        "{}; {} model call(s), {} candidate(s) turned down",
        outcome_text(&report.outcome),
        report.model_calls,
        report.rejections.len()
    )
}

/// How an extraction's last range ended, in words.
fn outcome_text(outcome: &ExtractionOutcome) -> String {
    match outcome {
        ExtractionOutcome::Committed { receipt, replayed } => {
            format!("committed ({}){}", name(&receipt.status), if *replayed { ", replayed" } else { "" })
        }
        ExtractionOutcome::RetryLater { class, .. } => {
            format!("failed ({}), retried by the next trigger", name(class))
        }
        ExtractionOutcome::Discarded { class, .. } => {
            format!("failed again ({}), range discarded", name(class))
        }
        ExtractionOutcome::Blocked { reason } => format!("blocked: {reason}"),
        ExtractionOutcome::Unavailable { reason } => format!("not run: {reason}"),
        ExtractionOutcome::NothingToProcess => "nothing new to process".to_owned(),
        _ => name(outcome),
    }
}

fn update(
    cli: &Cli,
    mnemo: &Mnemo,
    id: &str,
    expected_version: u64,
    content: Option<&str>,
    keys: &[String],
    op: Option<&String>,
) -> anyhow::Result<ExitCode> {
    let id = item_id(id)?;
    let Some(current) = mnemo.memory().get(&id)? else {
        return Err(input(format!("no memory item {id}")));
    };
    let fields = current.fields;
    let keys = if keys.is_empty() {
        fields
            .keys
            .iter()
            .map(|k| KeyInput { key: k.key.clone(), key_type: k.key_type, key_origin: k.key_origin })
            .collect()
    } else {
        keys.iter()
            .map(|k| KeyInput { key: k.clone(), key_type: KeyType::Exact, key_origin: KeyOrigin::User })
            .collect()
    };
    let item = ItemInput {
        content: content.map_or(fields.content, str::to_owned),
        kind: fields.kind,
        statement_type: fields.statement_type,
        temporal_type: fields.temporal_type,
        scope: fields.scope,
        event_started_at: fields.event_started_at.map(|t| t.0),
        event_ended_at: fields.event_ended_at.map(|t| t.0),
        observed_at: fields.observed_at.0,
        origin: fields.origin,
        keys,
        sources: fields.sources,
    };
    let result = mnemo.memory().update(operation(op)?, id, expected_version, item)?;
    output(cli, &result, || print_operation(&result));
    Ok(ExitCode::SUCCESS)
}

/// Runs `recall`: with a query, the pull route; without, the push block for the session. In
/// text, what was not given is said: how many items of the session's scope were left out, or
/// that its scope holds none.
pub(crate) fn recall(cli: &Cli, args: &RecallArgs) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    let session = session(&args.session)?;
    let scope = RecallScope::of(&mnemo, &session)?;
    match &args.query {
        Some(query) => {
            let items =
                mnemo.memory().recall(&session, &RecallMemory { query: query.clone(), limit: args.limit })?;
            output(cli, &items, || {
                for item in &items {
                    say!("{}  score {}  {}", item.item, item.score, item.content);
                }
                if items.is_empty() {
                    say!("no memory item matches {query:?}; {}", scope.describe());
                }
            });
            Ok(found(!items.is_empty()))
        }
        None => {
            let block = mnemo.memory().recall_block(&session, None)?;
            output(cli, &block, || {
                say_inline!("{}", block.text);
                let left_out = scope.items.saturating_sub(block.items.len());
                if block.items.is_empty() {
                    say!("no memory item recalled for this session; {}", scope.describe());
                } else if left_out > 0 {
                    say!(
                        "({left_out}{} more active item(s) of its scope left out: past the block's budget or \
                         unrelated to the session's recent turns; `mnemo recall {} --query WORDS` searches them)",
                        if scope.capped { " or more" } else { "" },
                        args.session
                    );
                }
            });
            Ok(found(!block.items.is_empty()))
        }
    }
}

/// The active items a session may be given: the global ones and its workspace's.
struct RecallScope {
    workspace: Option<WorkspaceId>,
    items: usize,
    /// Whether `items` stopped at the listing's limit (there may be more).
    capped: bool,
}

impl RecallScope {
    fn of(mnemo: &Mnemo, session: &SessionId) -> anyhow::Result<RecallScope> {
        let workspace = mnemo.history().session(session)?.and_then(|summary| summary.workspace);
        let request = ListRequest {
            workspace: workspace.clone(),
            limit: Some(mnemo::memory::LIST_RESULTS_MAX),
            ..ListRequest::default()
        };
        let listed = mnemo.memory().list(&request)?;
        let capped = listed.len() as u64 >= mnemo::memory::LIST_RESULTS_MAX;
        // Without a workspace the listing holds every scope; only the global items are the session's.
        let items = listed
            .iter()
            .filter(|item| workspace.is_some() || item.fields.scope == mnemo::records::MemoryScope::Global)
            .count();
        Ok(RecallScope { workspace, items, capped })
    }

    fn describe(&self) -> String {
        let place = match &self.workspace {
            Some(workspace) => format!("global or of workspace {workspace}"),
            None => "global (the session has no workspace)".to_owned(),
        };
        match self.items {
            0 => format!("no active item is {place} (`mnemo memory extract SESSION` finds them)"),
            n => format!("{n}{} active item(s) are {place}", if self.capped { " or more" } else { "" }),
        }
    }
}
