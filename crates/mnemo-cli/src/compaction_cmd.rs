//! `compact`, `context` and `copy`: compaction, the next request's history, and conversation copy.

use std::process::ExitCode;

use clap::Args;
use mnemo::compaction::{AssembledHistory, CompactOptions, ContextOptions, Decision, HistoryItem};
use mnemo::records::{Content, CopyBoundary, Position, RuntimeEvent, SessionId, TurnId};
use serde_json::Value;

use crate::term::{say, say_err};
use crate::{Cli, open, output};

/// Arguments of `compact`.
#[derive(Debug, Args)]
pub(crate) struct CompactArgs {
    /// The session.
    session: String,
    /// The model's context window in tokens (default: the pipeline's policy).
    #[arg(long)]
    window: Option<u64>,
    /// Turns to keep raw (default: the policy's; the latest turn always stays raw unless 0).
    #[arg(long)]
    keep_turns: Option<u64>,
}

/// Arguments of `context`.
#[derive(Debug, Args)]
pub(crate) struct ContextArgs {
    /// The session.
    session: String,
    /// The model's context window in tokens (default: the pipeline's policy).
    #[arg(long)]
    window: Option<u64>,
    /// Assemble as of this log position instead of now.
    #[arg(long)]
    as_of: Option<u64>,
    /// The turn being answered (left out of prior history).
    #[arg(long)]
    turn: Option<String>,
    /// The new request's text, for a pipeline that switches the history search on
    /// (`history_search`; default: the session's latest user message).
    #[arg(long, value_name = "TEXT")]
    search_text: Option<String>,
}

/// Arguments of `copy`.
#[derive(Debug, Args)]
pub(crate) struct CopyArgs {
    /// The session to copy.
    session: String,
    /// Copy turns up to and including this one (a branch).
    #[arg(long, conflicts_with = "before_turn")]
    through_turn: Option<String>,
    /// Copy the turns strictly before this one (a revision).
    #[arg(long)]
    before_turn: Option<String>,
    /// The new session's id (default: derived from the source and the log's position, so each
    /// copy without it makes a new session; give it to retry a copy safely).
    #[arg(long)]
    to: Option<String>,
}

fn session_id(text: &str) -> anyhow::Result<SessionId> {
    SessionId::new(text).map_err(|e| mnemo::Error::InvalidInput(format!("session: {e}")).into())
}

fn turn_id(text: &str) -> anyhow::Result<TurnId> {
    TurnId::new(text).map_err(|e| mnemo::Error::InvalidInput(format!("turn: {e}")).into())
}

pub(crate) fn compact(cli: &Cli, args: &CompactArgs) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    let session = session_id(&args.session)?;
    let options = CompactOptions {
        context: ContextOptions { window: args.window, ..ContextOptions::default() },
        min_recent_turns: args.keep_turns,
        ..CompactOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let outcome = runtime.block_on(mnemo.compaction().compact(&session, &options))?;
    let history = &outcome.history;
    output(cli, &redacted(&serde_json::to_value(&outcome)?), || {
        match &outcome.recorded {
            Some(recorded) => {
                let checkpoint = &recorded.checkpoint;
                say!(
                    "recorded {} at position {}: {} events across {} turns, ~{} tokens",
                    checkpoint.checkpoint,
                    recorded.position,
                    checkpoint.coverage.event_count,
                    checkpoint.coverage.turn_count,
                    checkpoint.estimated_tokens
                );
                if let Some(report) = &checkpoint.faithfulness {
                    say!(
                        "faithfulness: {} claims checked, {} unsupported",
                        report.checked,
                        report.unsupported.len()
                    );
                }
            }
            None => say!("nothing recorded: {}", reason(history)),
        }
        print_fit(history);
        print_notes(history);
    });
    let kept =
        outcome.recorded.is_some() || history.diagnostics.reason.as_deref() == Some("already_compacted");
    Ok(if kept { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn reason(history: &AssembledHistory) -> String {
    let diagnostics = &history.diagnostics;
    diagnostics
        .fail_open_reason
        .clone()
        .or_else(|| diagnostics.reason.clone())
        .unwrap_or_else(|| "-".to_owned())
}

pub(crate) fn context(cli: &Cli, args: &ContextArgs) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    let session = session_id(&args.session)?;
    let options = ContextOptions {
        window: args.window,
        as_of: args.as_of.map(Position),
        current_turn: args.turn.as_deref().map(turn_id).transpose()?,
        search_text: args.search_text.clone(),
        ..ContextOptions::default()
    };
    let history = mnemo.compaction().context(&session, &options)?;
    output(cli, &redacted(&serde_json::to_value(&history)?), || print_history(&history));
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn copy(cli: &Cli, args: &CopyArgs) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    let session = session_id(&args.session)?;
    let up_to = match (&args.through_turn, &args.before_turn) {
        (Some(turn), _) => Some(CopyBoundary::ThroughTurn(turn_id(turn)?)),
        (None, Some(turn)) => Some(CopyBoundary::BeforeTurn(turn_id(turn)?)),
        (None, None) => None,
    };
    let target = args.to.as_deref().map(session_id).transpose()?;
    let report = mnemo.compaction().copy(&session, up_to, target)?;
    output(cli, &report, || {
        say!("{}", report.session);
        say_err!(
            "copied {} events of {} ({} checkpoints rebuilt, {} dropped) at positions {}..={}",
            report.events,
            report.source,
            report.checkpoints_rebuilt,
            report.checkpoints_dropped,
            report.positions.0,
            report.positions.1
        );
    });
    Ok(ExitCode::SUCCESS)
}

/// Opaque provider state never leaves as text: its encrypted content is replaced by its length.
fn redacted(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| match (key.as_str(), item) {
                    ("encryptedContent" | "encrypted_content", Value::String(blob)) => {
                        (key.clone(), Value::String(format!("[redacted: {} chars]", blob.len())))
                    }
                    _ => (key.clone(), redacted(item)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redacted).collect()),
        other => other.clone(),
    }
}

fn print_history(history: &AssembledHistory) {
    let diagnostics = &history.diagnostics;
    say!("session {} at position {}", history.session, history.position);
    match &history.boundary {
        Some(boundary) => say!(
            "checkpoint {} (v{}, {:?}) covering {} events, recorded at position {}",
            boundary.checkpoint,
            boundary.version,
            boundary.phase,
            boundary.covered_events,
            boundary.position
        ),
        None => say!("checkpoint none"),
    }
    say!("--- history: {} items, ~{} tokens", history.items.len(), diagnostics.tokens_after);
    for item in &history.items {
        match item {
            HistoryItem::Checkpoint { text, .. } => say!("[checkpoint]\n{text}"),
            HistoryItem::ProviderState { checkpoint, .. } => {
                say!("[provider state] {checkpoint} (opaque, replayed as an assistant custom part)")
            }
            HistoryItem::Retrieved { text, .. } => say!("[history search]\n{text}"),
            HistoryItem::Event { event, position } => say!("{}", event_line(*position, event)),
        }
    }
    say!("--- diagnostics");
    let decision = match diagnostics.decision {
        Decision::Unchanged => "unchanged",
        Decision::Replaced => "replaced",
        Decision::FailedOpen => "failed_open",
    };
    say!("decision        {decision}");
    say!("reason          {}", reason(history));
    let skipped: Vec<String> =
        diagnostics.skipped_reason_counts.iter().map(|(reason, count)| format!("{reason}={count}")).collect();
    say!("skipped         {}", if skipped.is_empty() { "-".to_owned() } else { skipped.join(", ") });
    print_fit(history);
    say!(
        "budget          {} history, {} high water, {} reserve, {} chars/token",
        diagnostics.max_history_tokens,
        diagnostics.high_water_tokens,
        diagnostics.reserve_tokens,
        diagnostics.chars_per_token
    );
    say!("compaction due  {}", if diagnostics.compaction_due { "yes" } else { "no" });
    say!("events read     {}", diagnostics.events_read);
    if let Some(search) = &diagnostics.history_search {
        match &search.skipped {
            Some(reason) => say!("history search  skipped: {reason}"),
            None => say!(
                "history search  {:?}: {} hits, {} taken, {} events (~{} tokens), {} skipped over budget",
                search.query.as_deref().unwrap_or_default(),
                search.hits,
                search.hits_taken,
                search.events,
                search.tokens,
                search.skipped_events
            ),
        }
    }
    print_notes(history);
}

/// Tokens before and after against the budget, and what was folded, elided or dropped, and why.
fn print_fit(history: &AssembledHistory) {
    let diagnostics = &history.diagnostics;
    let fit = &diagnostics.fit;
    say!(
        "tokens          {} before, {} after, budget {}",
        diagnostics.tokens_before,
        diagnostics.tokens_after,
        diagnostics.max_history_tokens
    );
    match fit.unfit_reason {
        None if fit.fits => say!("fits            yes"),
        Some(reason) => say!(
            "fits            NO ({}): {} tokens over the budget",
            reason.code(),
            diagnostics.tokens_after.saturating_sub(diagnostics.max_history_tokens)
        ),
        None => say!("fits            NO"),
    }
    if diagnostics.folded_events > 0 {
        say!(
            "folded          {} events into {}",
            diagnostics.folded_events,
            diagnostics.boundary_ids.first().map_or("-", String::as_str)
        );
    }
    if !fit.elided.is_empty() {
        let cut: u64 = fit.elided.iter().map(|e| e.elided_chars).sum();
        let positions: Vec<String> = fit.elided.iter().map(|e| e.position.to_string()).collect();
        say!(
            "elided          {} tool payloads, {cut} characters cut from their middles (log positions {})",
            fit.elided.len(),
            positions.join(", ")
        );
    }
    if let Some(dropped) = &fit.dropped {
        say!(
            "dropped         {} events (~{} tokens, log positions {}..={}): {}",
            dropped.events,
            dropped.tokens,
            dropped.positions.0,
            dropped.positions.1,
            dropped.reason
        );
    }
}

fn print_notes(history: &AssembledHistory) {
    for note in &history.notes {
        say!("note            {}: {}", note.kind, note.text);
    }
}

fn event_line(position: Position, event: &RuntimeEvent) -> String {
    let body = match &event.content {
        Some(Content::Text(text)) => text.text.clone(),
        Some(Content::Thinking(thinking)) => format!("(thinking) {}", thinking.text),
        Some(Content::FunctionCall(call)) => format!("call {} {}", call.name, call.args),
        Some(Content::FunctionResponse(response)) => match &response.result {
            Value::String(text) => format!("result {} {text}", response.name),
            other => format!("result {} {other}", response.name),
        },
        Some(Content::Error(error)) => format!("error {}", error.message),
        _ => String::new(),
    };
    let flat = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown: String = flat.chars().take(EVENT_LINE_CHARS_MAX).collect();
    let cut = if shown.len() < flat.len() { " [...]" } else { "" };
    let role =
        serde_json::to_value(event.role).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    format!("[{position:>6} {} {role}] {shown}{cut}", event.turn_id)
}

/// Characters of an event shown on one line of `context`.
const EVENT_LINE_CHARS_MAX: usize = 400;
