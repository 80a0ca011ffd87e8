//! `show`, `search` and `read`: a session's visible transcript and the two history tools.
//!
//! `search` and `read` print the tools' own output shapes with `--json`. A call the tool refuses
//! prints the tool's error shape (`{kind, ok: false, reason, message}`) and exits 2.

use std::process::ExitCode;

use clap::Args;
use mnemo::history::{
    HistoryContext, HistoryRead, HistoryReadRequest, HistorySearch, HistorySearchRequest, SessionTranscript,
    ToolFailure, VisibleMessage,
};
use mnemo::records::{Position, SessionId, TurnId, WorkspaceId};
use serde::Serialize;

use crate::term::{say, say_err};
use crate::{Cli, open, output, print_json};

/// Longest tool-result text `show` prints per message, in characters.
const SHOW_RESULT_CHARS_MAX: usize = 200;

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The session.
    session: String,
    /// Show the session as it was at this log position.
    #[arg(long)]
    as_of: Option<u64>,
}

/// Where a history tool call runs from.
#[derive(Debug, Args)]
pub(crate) struct ContextArgs {
    /// The session the call runs in: its current turn is excluded, its revision family is
    /// represented by it, and an incognito session refuses the call.
    #[arg(long = "current-session", alias = "session", value_name = "SESSION")]
    current_session: Option<String>,
    /// The turn the call runs in (excluded inside the current session).
    #[arg(long = "current-turn", value_name = "TURN")]
    current_turn: Option<String>,
    /// Act as if the runtime's incognito mode were active.
    #[arg(long)]
    incognito: bool,
    /// Answer as of this log position instead of the whole log.
    #[arg(long, value_name = "POSITION")]
    as_of: Option<u64>,
    /// Without a current session: answer inside this workspace only, with its statistics.
    #[arg(long, value_name = "WORKSPACE")]
    workspace: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// What to look for.
    query: String,
    /// Rows to return (1..=10, default 5).
    #[arg(long, allow_negative_numbers = true)]
    limit: Option<i64>,
    /// A `next_cursor` from an earlier search with the same query.
    #[arg(long)]
    cursor: Option<String>,
    #[command(flatten)]
    context: ContextArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// The session to read.
    session: String,
    /// Center on this message.
    #[arg(long)]
    message: Option<String>,
    /// Center on this turn (with --message: must be the message's turn).
    #[arg(long)]
    turn: Option<String>,
    /// Turns before the anchor (0..=4, default 1).
    #[arg(long, allow_negative_numbers = true)]
    before: Option<i64>,
    /// Turns after the anchor (0..=4, default 1; before + 1 + after <= 5).
    #[arg(long, allow_negative_numbers = true)]
    after: Option<i64>,
    #[command(flatten)]
    context: ContextArgs,
}

/// The parsed context: owned ids that a [`HistoryContext`] borrows.
struct Context {
    session: Option<SessionId>,
    turn: Option<TurnId>,
    incognito: bool,
    as_of: Option<Position>,
    workspace: Option<WorkspaceId>,
}

impl Context {
    fn parse(args: &ContextArgs) -> anyhow::Result<Context> {
        let session = args.current_session.clone().map(SessionId::new).transpose();
        let turn = args.current_turn.clone().map(TurnId::new).transpose();
        let workspace = args.workspace.clone().map(WorkspaceId::new).transpose();
        Ok(Context {
            workspace: workspace.map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?,
            session: session.map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?,
            turn: turn.map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?,
            incognito: args.incognito,
            as_of: args.as_of.map(Position),
        })
    }

    fn tool(&self) -> HistoryContext<'_> {
        HistoryContext {
            current_session: self.session.as_ref(),
            current_turn: self.turn.as_ref(),
            incognito_active: self.incognito,
            abort: None,
            workspace: self.workspace.as_ref(),
        }
    }
}

pub(crate) fn show(cli: &Cli, args: &ShowArgs) -> anyhow::Result<ExitCode> {
    let session =
        SessionId::new(args.session.clone()).map_err(|e| mnemo::Error::InvalidInput(e.to_string()))?;
    let Some(transcript) = open(cli, true)?.history().transcript(&session, args.as_of.map(Position))? else {
        say_err!("error: no session {session}");
        return Ok(ExitCode::from(1));
    };
    output(cli, &transcript, || print_transcript(&transcript));
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn search(cli: &Cli, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let context = Context::parse(&args.context)?;
    let request =
        HistorySearchRequest { query: args.query.clone(), limit: args.limit, cursor: args.cursor.clone() };
    match open(cli, true)?.history().search(&request, &context.tool(), context.as_of)? {
        Ok(found) => {
            output(cli, &found, || print_search(&found));
            Ok(if found.rows.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Err(refused) => Ok(refuse(cli, &refused)),
    }
}

pub(crate) fn read(cli: &Cli, args: &ReadArgs) -> anyhow::Result<ExitCode> {
    let context = Context::parse(&args.context)?;
    let request = HistoryReadRequest {
        session_id: args.session.clone(),
        message_id: args.message.clone(),
        turn_id: args.turn.clone(),
        before: args.before,
        after: args.after,
    };
    match open(cli, true)?.history().read(&request, &context.tool(), context.as_of)? {
        Ok(read) => {
            output(cli, &read, || print_read(&read));
            Ok(ExitCode::SUCCESS)
        }
        Err(refused) => Ok(refuse(cli, &refused)),
    }
}

/// A refused tool call: its error shape on stdout with `--json`, a line on stderr, exit 2.
fn refuse<R: Serialize + std::fmt::Display>(cli: &Cli, refused: &ToolFailure<R>) -> ExitCode {
    if cli.json {
        print_json(refused);
    }
    say_err!("error: {refused}");
    ExitCode::from(2)
}

fn print_transcript(transcript: &SessionTranscript) {
    let header = &transcript.header;
    // Named as `sessions` names it: its title, else its first request in quotes.
    let title = match (&header.title, &header.first_request) {
        (Some(title), _) => title.clone(),
        (None, Some(request)) => format!("“{request}”"),
        (None, None) => "(untitled)".to_owned(),
    };
    say!(
        "session {}  {}  ({} messages{})",
        header.session,
        title,
        transcript.messages.len(),
        if header.archived { ", archived" } else { "" }
    );
    let mut turn = None;
    for message in &transcript.messages {
        if turn != Some(&message.turn_id) {
            say!("── turn {}", message.turn_id);
            turn = Some(&message.turn_id);
        }
        say!("  {}", describe(message));
    }
    for ended in transcript.turns.iter().filter(|t| t.status != mnemo::records::TurnStatus::Completed) {
        let class = ended.error_class.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        let limit = if ended.step_limit { ", stopped at the tool step limit" } else { "" };
        let status = format!("{:?}", ended.status).to_lowercase();
        say!("── turn {} ended {status}{class}{limit}", ended.turn_id);
    }
    print_diagnostics(&transcript.diagnostics);
}

/// Hard diagnostics one per line, soft ones counted by code.
fn print_diagnostics(diagnostics: &[mnemo::history::ProjectionDiagnostic]) {
    use mnemo::history::Severity;
    if diagnostics.is_empty() {
        return;
    }
    let hard: Vec<_> = diagnostics.iter().filter(|d| d.severity == Severity::Hard).collect();
    say!("── diagnostics: {} hard, {} soft", hard.len(), diagnostics.len() - hard.len());
    for diagnostic in hard {
        say!(
            "  [{}] event {} at {}: {}",
            diagnostic.code.as_str(),
            diagnostic.event_id,
            diagnostic.position,
            diagnostic.detail
        );
    }
    let mut soft: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for diagnostic in diagnostics.iter().filter(|d| d.severity == Severity::Soft) {
        *soft.entry(diagnostic.code.as_str()).or_default() += 1;
    }
    for (code, count) in soft {
        say!("  [{code}] {count} event{}", if count == 1 { "" } else { "s" });
    }
}

fn describe(message: &VisibleMessage) -> String {
    let tool = message.tool_name.as_deref().unwrap_or("tool");
    match message.kind {
        mnemo::history::MessageKind::User => format!("[user] {}", message.text),
        mnemo::history::MessageKind::Assistant => format!("[assistant] {}", message.text),
        mnemo::history::MessageKind::ToolCall if message.text.is_empty() => format!("[tool call {tool}]"),
        mnemo::history::MessageKind::ToolCall => format!("[tool call {tool}] {}", message.text),
        _ => {
            let status = if message.is_error == Some(true) { "error" } else { "ok" };
            let mut text: String = message.text.chars().take(SHOW_RESULT_CHARS_MAX).collect();
            if text.len() < message.text.len() {
                text.push('…');
            }
            format!("[tool result {tool} {status}] {text}")
        }
    }
}

fn print_search(found: &HistorySearch) {
    for (rank, row) in found.rows.iter().enumerate() {
        let place = match (&row.turn_id, &row.message_id) {
            (Some(turn), Some(message)) => format!(" turn {turn} message {message}"),
            _ => String::new(),
        };
        let title = if row.title.is_empty() { String::new() } else { format!("  \"{}\"", row.title) };
        say!("{:>2}. {}  session {}{place}{title}", rank + 1, row.summary, row.session_id);
        say!("    {}", row.snippet);
    }
    if found.rows.is_empty() {
        say!("no match for {:?}", found.query);
    }
    if found.truncated {
        say!("(truncated: more matched than shown)");
    }
    if let Some(cursor) = &found.next_cursor {
        say!("next page: --cursor {cursor}");
    }
}

fn print_read(read: &HistoryRead) {
    let title = if read.title.is_empty() { "(untitled)" } else { read.title.as_str() };
    say!("session {}  {title}", read.session_id);
    if read.has_more_before {
        say!("  (earlier turns exist)");
    }
    for turn in &read.turns {
        say!("── turn {}", turn.turn_id);
        for message in &turn.messages {
            say!("  [{}] {}", message.role, message.text);
        }
    }
    if read.has_more_after {
        say!("  (later turns exist)");
    }
    if read.truncated == Some(true) {
        say!("(truncated to fit the read budget)");
    }
}
