//! `mnemo demo`: the main job, offline, on the embedded defaults. It imports the bundled sample
//! transcripts (three formats, four workspaces, one session long enough to cross the compaction high
//! water) into a fresh store, prepares the long session's next request (which compacts it and
//! extracts memories from the folded turns), runs `remember` and `extract`, recalls, prints the
//! context the next request would receive, searches and reads the history, copies a conversation,
//! then rebuilds every projection and verifies the digests and the chain. Each step is timed.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use mnemo::compaction::{CompactOptions, ContextOptions, HistoryItem};
use mnemo::history::{HistoryContext, HistoryReadRequest, HistorySearchRequest};
use mnemo::memory::RecallMemory;
use mnemo::records::{Position, SessionId};
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};
use serde::Serialize;

use crate::term::say;
use crate::{dir_is_empty, fresh_demo_dir, print_json};

/// The bundled samples: realistic coding sessions with tool calls, in three formats.
const SAMPLES: &[(&str, &str)] = &[
    ("samples/coding-session.jsonl", include_str!("../samples/coding-session.jsonl")),
    ("samples/research-session.jsonl", include_str!("../samples/research-session.jsonl")),
    ("samples/long-session.jsonl", include_str!("../samples/long-session.jsonl")),
    ("samples/claude-code-session.jsonl", include_str!("../samples/claude-code-session.jsonl")),
    ("samples/codex-rollout.jsonl", include_str!("../samples/codex-rollout.jsonl")),
];

/// The session long enough to cross the compaction high water at [`DEMO_WINDOW_TOKENS`].
const LONG_SESSION: &str = "sess-2026-01-12-migrate";
/// The session the demo copies.
const COPIED_SESSION: &str = "sess-2026-01-05-auth";
/// Sessions `extract` runs on (agent-requested extraction of what users said about themselves).
const EXTRACTED_SESSIONS: &[&str] = &["sess-2026-01-07-docs", "5f2e8b0c-1d3a-4e6f-8a9b-0c1d2e3f4a5b"];
/// The context window the demo assembles for: a small model's, so the long session must compact.
const DEMO_WINDOW_TOKENS: u64 = 8_192;
/// What the demo asks SearchHistory; ReadHistory then reads the best match's turn.
const DEMO_QUERY: &str = "flaky token refresh test";
/// What the model asks the pull recall route.
const RECALL_QUERY: &str = "may I UPDATE a wrong row in the entries table";
/// Characters of each message the human report shows.
const SHOWN_CHARS: usize = 110;
/// Lines of the checkpoint summary the human report shows.
const SUMMARY_LINES_SHOWN: usize = 12;

#[derive(Serialize)]
struct DemoReport {
    store: String,
    imports: Vec<mnemo::transcript::ImportReport>,
    sessions: Vec<mnemo::history::SessionSummary>,
    workspaces: Vec<String>,
    compaction: mnemo::compaction::CompactionOutcome,
    memory: MemoryReport,
    context: mnemo::compaction::AssembledHistory,
    search: mnemo::history::HistorySearch,
    read: Option<mnemo::history::HistoryRead>,
    copy: mnemo::compaction::CopyReport,
    stats: mnemo::stages::Stats,
    rebuild: Vec<mnemo::stages::StageReport>,
    verification: mnemo::stages::Verification,
    timings_ms: Timings,
}

#[derive(Serialize)]
struct MemoryReport {
    remember: mnemo::memory::RememberResult,
    extractions: Vec<(String, mnemo::memory::ExtractionReport)>,
    items: Vec<mnemo::records::MemoryItem>,
    recall_block: mnemo::memory::RecallBlock,
    recall_query: String,
    recalled: Vec<mnemo::memory::RecalledItem>,
}

#[derive(Serialize, Default)]
struct Timings {
    import: u128,
    compaction: u128,
    memory: u128,
    context: u128,
    history: u128,
    copy: u128,
    rebuild: u128,
    verify: u128,
    total: u128,
}

fn timed<T>(slot: &mut u128, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let started = Instant::now();
    let result = work();
    *slot = started.elapsed().as_millis();
    result
}

fn session(id: &str) -> anyhow::Result<SessionId> {
    Ok(SessionId::new(id)?)
}

pub(crate) fn run(dir: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let dir = dir.map_or_else(fresh_demo_dir, Path::to_path_buf);
    if !dir_is_empty(&dir) {
        anyhow::bail!(mnemo::Error::InvalidInput(format!(
            "demo directory {} is not empty; give a new one with --dir",
            dir.display()
        )));
    }
    let mnemo = Mnemo::open(&dir, Config::default())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let mut t = Timings::default();

    let imports = timed(&mut t.import, || {
        SAMPLES
            .iter()
            .map(|(name, text)| Ok(mnemo.import(text.as_bytes(), name, ImportFormat::Auto)?))
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let sessions = mnemo.history().sessions()?;
    let workspaces: BTreeSet<String> =
        sessions.iter().filter_map(|s| s.workspace.as_ref().map(ToString::to_string)).collect();

    let long = session(LONG_SESSION)?;
    let window = ContextOptions { window: Some(DEMO_WINDOW_TOKENS), ..ContextOptions::default() };
    // What a runtime does before each turn: the long session crosses the high water, so this
    // compacts it, and the checkpoint triggers extraction over the turns it folded.
    let compaction = timed(&mut t.compaction, || {
        let options = CompactOptions { context: window.clone(), ..CompactOptions::default() };
        Ok(runtime.block_on(mnemo.compaction().prepare_history(&long, &options))?)
    })?;
    let memory = timed(&mut t.memory, || memory(&mnemo, &runtime, &long))?;
    let context = timed(&mut t.context, || Ok(mnemo.compaction().context(&long, &window)?))?;
    let (search, read) = timed(&mut t.history, || history(&mnemo))?;
    let copy = timed(&mut t.copy, || Ok(mnemo.compaction().copy(&session(COPIED_SESSION)?, None, None)?))?;
    let stats = mnemo.stats()?;
    let rebuild = timed(&mut t.rebuild, || Ok(mnemo.rebuild(None)?))?;
    let verification = timed(&mut t.verify, || Ok(mnemo.verify(&mut |_| {})?))?;
    t.total = started.elapsed().as_millis();

    let report = DemoReport {
        store: dir.display().to_string(),
        imports,
        sessions,
        workspaces: workspaces.into_iter().collect(),
        compaction,
        memory,
        context,
        search,
        read,
        copy,
        stats,
        rebuild,
        verification,
        timings_ms: t,
    };
    if json {
        print_json(&report);
    } else {
        print_report(&report);
    }
    Ok(if report.verification.ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `remember` on the long session's last turn, `extract` on two others, every item the log now
/// holds, and both recall routes for the long session.
fn memory(
    mnemo: &Mnemo,
    runtime: &tokio::runtime::Runtime,
    long: &SessionId,
) -> anyhow::Result<MemoryReport> {
    let remember = runtime.block_on(mnemo.memory().remember(long, None))?;
    let mut extractions = Vec::new();
    for id in EXTRACTED_SESSIONS {
        extractions.push(((*id).to_owned(), runtime.block_on(mnemo.memory().extract(&session(id)?, None))?));
    }
    let recall_block = mnemo.memory().recall_block(long, None)?;
    let request = RecallMemory { query: RECALL_QUERY.to_owned(), limit: Some(5) };
    let recalled = mnemo.memory().recall(long, &request)?;
    Ok(MemoryReport {
        remember,
        extractions,
        items: stored_items(mnemo)?,
        recall_block,
        recall_query: RECALL_QUERY.to_owned(),
        recalled,
    })
}

/// Every item the memory commits in the log created, as the item store holds it now.
fn stored_items(mnemo: &Mnemo) -> anyhow::Result<Vec<mnemo::records::MemoryItem>> {
    let mut items = Vec::new();
    for entry in mnemo.log_entries(Position::FIRST, usize::MAX)? {
        if entry.kind != "memory_commit" {
            continue;
        }
        let created = entry.record["items"].as_array().cloned().unwrap_or_default();
        for new in created {
            let Some(id) = new["item"].as_str() else { continue };
            if let Some(item) = mnemo.memory().get(&mnemo::records::ItemId::new(id)?)? {
                items.push(item);
            }
        }
    }
    Ok(items)
}

/// Searches the samples, then reads the turn of the best message match.
fn history(
    mnemo: &Mnemo,
) -> anyhow::Result<(mnemo::history::HistorySearch, Option<mnemo::history::HistoryRead>)> {
    let context = HistoryContext::default();
    let search = mnemo
        .history()
        .search(&HistorySearchRequest::new(DEMO_QUERY), &context, None)?
        .map_err(|refused| anyhow::anyhow!("the demo search was refused: {refused}"))?;
    let Some(best) = search.rows.iter().find(|row| row.message_id.is_some()) else {
        return Ok((search, None));
    };
    let request = HistoryReadRequest {
        session_id: best.session_id.clone(),
        message_id: best.message_id.clone(),
        before: Some(0),
        after: Some(0),
        ..HistoryReadRequest::default()
    };
    let read = mnemo
        .history()
        .read(&request, &context, None)?
        .map_err(|refused| anyhow::anyhow!("the demo read was refused: {refused}"))?;
    Ok((search, Some(read)))
}

fn shorten(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = flat.chars().take(SHOWN_CHARS).collect();
    if short.len() < flat.len() {
        short.push('…');
    }
    short
}

fn print_report(report: &DemoReport) {
    say!("Mnemo demo");
    say!("==========");
    say!(
        "Store: {}  (every fact in one hash-chained log; everything else is rebuilt from it)\n",
        report.store
    );
    print_import(report);
    print_compaction(report);
    print_memory(&report.memory, report.timings_ms.memory);
    print_context(report);
    print_history(report);
    let copy = &report.copy;
    say!("\n7. Copy a conversation ({} ms)", report.timings_ms.copy);
    say!(
        "   {} -> {}: {} events under new ids, {} checkpoints rebuilt, positions {}..={}",
        copy.source,
        copy.session,
        copy.events,
        copy.checkpoints_rebuilt,
        copy.positions.0,
        copy.positions.1
    );
    print_rebuild(report);
}

fn print_import(report: &DemoReport) {
    say!("1. Import the bundled samples ({} ms)", report.timings_ms.import);
    for import in &report.imports {
        let skipped: u64 = import.skipped.values().sum();
        let skipped =
            if skipped == 0 { String::new() } else { format!(", {skipped} lines of other types skipped") };
        say!(
            "   {:<36} {:<12} {:>3} records, {} session(s){skipped}",
            import.source,
            import.format.name(),
            import.records,
            import.sessions
        );
    }
    say!("\n2. Sessions ({} in {} workspaces)", report.sessions.len(), report.workspaces.len());
    for s in &report.sessions {
        let workspace = s.workspace.as_ref().map_or("-".to_owned(), ToString::to_string);
        say!(
            "   {:<38} {:<28} {:>3} events {:>2} turns  {}",
            s.session.as_str(),
            workspace,
            s.event_count,
            s.turn_count,
            s.title.as_deref().unwrap_or("")
        );
    }
}

fn print_compaction(report: &DemoReport) {
    let history = &report.compaction.history;
    let d = &history.diagnostics;
    say!(
        "\n3. Prepare the next request of {LONG_SESSION} for a {DEMO_WINDOW_TOKENS}-token window ({} ms)",
        report.timings_ms.compaction
    );
    say!(
        "   history was ~{} tokens, the high water is {}: compaction is due",
        d.tokens_before,
        d.high_water_tokens
    );
    match &report.compaction.recorded {
        Some(recorded) => {
            let c = &recorded.checkpoint;
            say!(
                "   recorded {} at position {}: {} events across {} turns folded into ~{} tokens",
                c.checkpoint,
                recorded.position,
                c.coverage.event_count,
                c.coverage.turn_count,
                c.estimated_tokens
            );
            if let Some(f) = &c.faithfulness {
                say!(
                    "   faithfulness: {} claims checked against the folded events, {} unsupported",
                    f.checked,
                    f.unsupported.len()
                );
            }
            say!("   the checkpoint triggered memory extraction over the folded turns");
        }
        None => say!(
            "   nothing recorded ({})",
            d.fail_open_reason.as_deref().or(d.reason.as_deref()).unwrap_or("-")
        ),
    }
    say!("   the next request now carries ~{} tokens", d.tokens_after);
}

fn print_memory(memory: &MemoryReport, ms: u128) {
    say!("\n4. Long-term memory: remember, extract, recall ({ms} ms)");
    let requested: Vec<&str> = memory.remember.items.iter().map(|i| i.content.as_str()).collect();
    say!("   remember ({:?}): {}", memory.remember.status, requested.join("; "));
    for (session, report) in &memory.extractions {
        say!(
            "   extract {session}: {} model call(s), {} candidate(s) turned down",
            report.model_calls,
            report.rejections.len()
        );
    }
    say!("   {} items stored:", memory.items.len());
    for item in &memory.items {
        let fields = &item.fields;
        say!("     [{:?}, {}] {}", fields.kind, fields.scope, shorten(&fields.content));
    }
    say!(
        "   push recall for {LONG_SESSION} ({} items, ~{} tokens):",
        memory.recall_block.items.len(),
        memory.recall_block.tokens
    );
    for line in memory.recall_block.text.lines() {
        say!("     {line}");
    }
    say!("   pull recall {:?}:", memory.recall_query);
    for item in &memory.recalled {
        say!("     {}", shorten(&item.content));
    }
}

fn print_context(report: &DemoReport) {
    let context = &report.context;
    say!(
        "\n5. The context the next request of {LONG_SESSION} receives ({} ms): {} items, ~{} tokens",
        report.timings_ms.context,
        context.items.len(),
        context.diagnostics.tokens_after
    );
    for item in &context.items {
        match item {
            HistoryItem::Checkpoint { text, .. } => {
                say!("   [checkpoint summary]");
                let lines: Vec<&str> = text.lines().collect();
                for line in lines.iter().take(SUMMARY_LINES_SHOWN) {
                    say!("     {}", shorten(line));
                }
                if lines.len() > SUMMARY_LINES_SHOWN {
                    say!("     … {} more lines", lines.len() - SUMMARY_LINES_SHOWN);
                }
            }
            HistoryItem::ProviderState { checkpoint, .. } => say!("   [provider state {checkpoint}]"),
            HistoryItem::Retrieved { positions, .. } => {
                say!("   [history search: {} earlier events]", positions.len())
            }
            HistoryItem::Event { event, position } => {
                say!("   [{position:>4} {:?}] {}", event.role, shorten(&event_text(event)));
            }
        }
    }
}

fn event_text(event: &mnemo::records::RuntimeEvent) -> String {
    match &event.content {
        Some(mnemo::records::Content::Text(text)) => text.text.clone(),
        Some(mnemo::records::Content::Thinking(thinking)) => format!("(thinking) {}", thinking.text),
        Some(mnemo::records::Content::FunctionCall(call)) => format!("call {} {}", call.name, call.args),
        Some(mnemo::records::Content::FunctionResponse(response)) => {
            format!("result {} {}", response.name, response.result)
        }
        _ => String::new(),
    }
}

fn print_history(report: &DemoReport) {
    say!("\n6. Search history for {DEMO_QUERY:?}, ranked ({} ms with the read)", report.timings_ms.history);
    for (rank, row) in report.search.rows.iter().take(5).enumerate() {
        let turn = row.turn_id.as_deref().map_or(String::new(), |t| format!(" turn {t}"));
        say!("   {}. {:<18} {}{turn}", rank + 1, row.summary, row.session_id);
        say!("      {}", shorten(&row.snippet));
    }
    if let Some(read) = &report.read {
        let turn = read.anchor_turn_id.as_deref().unwrap_or("-");
        say!("   Read around the best match (turn {turn}, at most 5 turns and 32 KiB):");
        for message in read.turns.iter().flat_map(|t| &t.messages) {
            say!("     [{}] {}", message.role, shorten(&message.text));
        }
    }
}

fn print_rebuild(report: &DemoReport) {
    say!(
        "\n8. Rebuild every projection from the log ({} ms): {} envelopes, {} bytes on disk",
        report.timings_ms.rebuild,
        report.stats.head,
        report.stats.disk_bytes
    );
    for stage in &report.rebuild {
        say!("   {:<20} at {:>4}  {}", stage.name, stage.watermark.0, stage.digest);
    }
    say!("\n9. Verify ({} ms)", report.timings_ms.verify);
    say!("   hash chain: {} envelopes verified", report.verification.envelopes);
    for stage in &report.verification.stages {
        let verdict = if stage.matches() { "live digest equals a fresh rebuild" } else { "MISMATCH" };
        say!("   {:<20} {verdict}", stage.name);
    }
    say!("\nDone in {} ms.", report.timings_ms.total);
}
