//! `mnemo demo`: the main job, offline. Today it covers what the store can do so far: import the
//! bundled sample transcripts, list sessions and counts, search the history and read around the best
//! match, rebuild every projection and verify the chain and the digests. Compaction and memory join
//! it as they land.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use mnemo::{Config, HistoryContext, HistoryReadRequest, HistorySearchRequest, Mnemo};
use serde::Serialize;

use crate::{dir_is_empty, fresh_demo_dir, print_json};

/// The bundled samples: realistic multi-turn sessions with tool calls, in the mnemo format.
const SAMPLES: &[(&str, &str)] = &[
    ("samples/coding-session.jsonl", include_str!("../samples/coding-session.jsonl")),
    ("samples/research-session.jsonl", include_str!("../samples/research-session.jsonl")),
];

/// What the demo asks SearchHistory; ReadHistory then reads the best match's turn.
const DEMO_QUERY: &str = "flaky token refresh test";
/// Characters of each message the human report shows.
const SHOWN_CHARS: usize = 100;

#[derive(Serialize)]
struct DemoReport {
    store: String,
    imports: Vec<mnemo::ImportReport>,
    sessions: Vec<mnemo::SessionSummary>,
    stats: mnemo::Stats,
    search: mnemo::HistorySearch,
    read: Option<mnemo::HistoryRead>,
    rebuild: Vec<mnemo::StageReport>,
    verification: mnemo::Verification,
    timings_ms: Timings,
}

#[derive(Serialize)]
struct Timings {
    import: u128,
    rebuild: u128,
    verify: u128,
}

pub(crate) fn run(dir: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let dir = dir.map_or_else(fresh_demo_dir, Path::to_path_buf);
    if !dir_is_empty(&dir) {
        anyhow::bail!(mnemo::Error::InvalidInput(format!(
            "demo directory {} is not empty; give a new one with --dir",
            dir.display()
        )));
    }
    let mnemo = Mnemo::open(&dir, Config::default())?;

    let started = Instant::now();
    let mut imports = Vec::new();
    for (name, text) in SAMPLES {
        imports.push(mnemo.import_transcript(text.as_bytes(), name)?);
    }
    let import_ms = started.elapsed().as_millis();
    let sessions = mnemo.sessions()?;
    let stats = mnemo.stats()?;
    let (search, read) = history(&mnemo)?;

    let started = Instant::now();
    let rebuild = mnemo.rebuild(None)?;
    let rebuild_ms = started.elapsed().as_millis();

    let started = Instant::now();
    let verification = mnemo.verify(&mut |_| {})?;
    let verify_ms = started.elapsed().as_millis();

    let report = DemoReport {
        store: dir.display().to_string(),
        imports,
        sessions,
        stats,
        search,
        read,
        rebuild,
        verification,
        timings_ms: Timings { import: import_ms, rebuild: rebuild_ms, verify: verify_ms },
    };
    if json {
        print_json(&report);
    } else {
        print_report(&report);
    }
    Ok(if report.verification.ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Searches the samples, then reads the turn of the best message match.
fn history(mnemo: &Mnemo) -> anyhow::Result<(mnemo::HistorySearch, Option<mnemo::HistoryRead>)> {
    let context = HistoryContext::default();
    let search = mnemo
        .search_history(&HistorySearchRequest::new(DEMO_QUERY), &context, None)?
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
        .read_history(&request, &context, None)?
        .map_err(|refused| anyhow::anyhow!("the demo read was refused: {refused}"))?;
    Ok((search, Some(read)))
}

fn shorten(text: &str) -> String {
    let mut short: String = text.chars().take(SHOWN_CHARS).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

fn print_history(report: &DemoReport) {
    println!("\n3. Search history for {DEMO_QUERY:?}, ranked by BM25");
    for (rank, row) in report.search.rows.iter().enumerate() {
        let turn = row.turn_id.as_deref().map_or(String::new(), |t| format!(" turn {t}"));
        println!("   {}. {:<18} {}{turn}", rank + 1, row.summary, row.session_id);
        println!("      {}", shorten(&row.snippet));
    }
    if let Some(read) = &report.read {
        let turn = read.anchor_turn_id.as_deref().unwrap_or("-");
        println!("   Read around the best match (turn {turn}, at most 5 turns and 32 KiB):");
        for message in read.turns.iter().flat_map(|t| &t.messages) {
            println!("     [{}] {}", message.role, shorten(&message.text));
        }
    }
}

fn print_report(report: &DemoReport) {
    println!("Mnemo demo");
    println!("==========");
    println!(
        "This run covers what the store does today: import, the session catalog, history search and read, rebuild and verify."
    );
    println!("Store: {}\n", report.store);
    println!("1. Import ({} ms)", report.timings_ms.import);
    for import in &report.imports {
        println!("   {:<32} {:>3} records, {} session(s)", import.source, import.records, import.sessions);
    }
    println!("\n2. Sessions");
    for s in &report.sessions {
        let workspace = s.workspace.as_ref().map_or("-".to_owned(), ToString::to_string);
        println!(
            "   {:<24} {:<20} {:>3} events {:>2} turns  {}",
            s.session.as_str(),
            workspace,
            s.event_count,
            s.turn_count,
            s.title.as_deref().unwrap_or("")
        );
    }
    print_history(report);
    println!("\n4. Log");
    println!("   head position {}, {} bytes on disk", report.stats.head, report.stats.disk_bytes);
    println!("\n5. Rebuild every projection from the log ({} ms)", report.timings_ms.rebuild);
    for stage in &report.rebuild {
        println!("   {:<20} at {:>4}  {}", stage.name, stage.watermark.0, stage.digest);
    }
    println!("\n6. Verify ({} ms)", report.timings_ms.verify);
    println!("   hash chain: {} envelopes verified", report.verification.envelopes);
    for stage in &report.verification.stages {
        let verdict = if stage.matches() { "live digest equals a fresh rebuild" } else { "MISMATCH" };
        println!("   {:<20} {verdict}", stage.name);
    }
}
