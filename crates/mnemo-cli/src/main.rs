//! The `mnemo` binary: a thin client of the `mnemo` facade.
//!
//! The benchmark harness (`mnemo bench`) is in it only when built with the feature `bench`, so that
//! the binary users install links neither SQLite nor plotters (decision 0220).
//!
//! Exit codes: 0 success, 1 nothing found or verification failed, 2 usage or input error,
//! 3 conflict, 4 any other failure (I/O, a locked store).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mnemo::log::LogLocation;
use mnemo::records::Position;
use mnemo::{Config, Error, ErrorCategory, Mnemo};
use serde::Serialize;
use term::{say, say_err};

/// The binary's allocator (the library leaves the choice to its host; see decision 0080).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "bench")]
mod bench_cmd;
mod capture;
mod compaction_cmd;
mod demo;
mod eval_cmd;
mod history_cmd;
mod hook_cmd;
mod mcp_cmd;
mod memory_cmd;
#[cfg(feature = "bench")]
mod protocol_bench;
mod recall_eval_cmd;
mod serve_cmd;
mod served;
mod setup_cmd;
mod sync_cmd;
mod term;
mod ui_cmd;

#[derive(Debug, Parser)]
#[command(name = "mnemo", version, about = "A replayable context and memory ledger for AI agent runtimes")]
struct Cli {
    /// The store directory: one for every command, the agents' hooks and `mnemo mcp` (decision 0230).
    #[arg(long, global = true, env = "MNEMO_STORE", default_value_os_t = default_store())]
    store: PathBuf,
    /// A pipeline spec file (default: the built-in pipelines/default.toml).
    #[arg(long, global = true)]
    pipeline: Option<PathBuf>,
    /// The log the store follows: `local` (the store's own, the default) or a shared NATS JetStream
    /// log, `nats://HOST:PORT[,nats://HOST:PORT...][/STREAM]` (overrides the pipeline file's `[log]`).
    #[arg(long, global = true, env = "MNEMO_LOG")]
    log: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The main job, offline: import the bundled samples into a fresh store, compact, remember,
    /// extract, recall, print the next request's context, search, read, copy, rebuild and verify.
    Demo {
        /// Where to create the demo store (default: a new directory under the system temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Append transcripts; `-` reads standard input.
    Import {
        #[arg(required = true)]
        files: Vec<String>,
        /// The files' format; `auto` tells it from the first lines and reports what it chose.
        #[arg(long, value_parser = import_formats(), default_value = "auto")]
        format: mnemo::transcript::ImportFormat,
    },
    /// Write the log back as a transcript (the mnemo format) that imports to the same log.
    Export {
        /// The output format.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write to this file instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List sessions.
    Sessions,
    /// Print a session's visible messages.
    Show(history_cmd::ShowArgs),
    /// SearchHistory: matches across sessions, ranked (BM25 over stemmed words and tool arguments).
    Search(history_cmd::SearchArgs),
    /// ReadHistory: a bounded window of one session's turns.
    Read(history_cmd::ReadArgs),
    /// Print envelopes of the log.
    Log {
        #[arg(long, default_value_t = 1)]
        from: u64,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Counts, disk use and every stage's digest.
    Stats,
    /// Drop and replay projections from the log.
    Rebuild {
        #[arg(long)]
        stage: Option<String>,
    },
    /// Check the hash chain, that nothing acknowledged is lost, and that every projection equals a
    /// fresh rebuild.
    Verify,
    /// Copy every envelope whose hash chain still verifies from a damaged store (`--store`) into a
    /// new store, and report exactly which positions were lost. Exit 1 when any were.
    Salvage {
        /// The new store: a new path or an empty directory.
        #[arg(long)]
        to: PathBuf,
    },
    /// Accept, in place, the loss of acknowledged envelopes that opening the store reported, so that
    /// it can be used again: give the range exactly as reported (`FIRST..=LAST`). The acceptance is
    /// recorded in the store, and the stages that had folded the lost envelopes are rebuilt.
    AcceptLoss {
        /// The lost positions, as the refused open named them.
        range: String,
    },
    /// Run compaction now (the manual trigger): fold the session's history into a checkpoint.
    Compact(compaction_cmd::CompactArgs),
    /// The history the next provider request would receive, with the checkpoint used and diagnostics.
    Context(compaction_cmd::ContextArgs),
    /// Copy a conversation into a new session; prints the new session id.
    Copy(compaction_cmd::CopyArgs),
    /// Run the benchmark harness: Mnemo beside a SQLite baseline, report.json and SVG charts.
    #[cfg(feature = "bench")]
    Bench(bench_cmd::BenchArgs),
    /// The benchmark harness, which is not in this build (it links SQLite): run it with
    /// `cargo run --release -p mnemo-cli --features bench -- bench`.
    #[cfg(not(feature = "bench"))]
    #[command(disable_help_flag = true)]
    Bench {
        /// Whatever was asked of the harness: it is refused whole.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Long-term memory: remember, extract, get, search, update, archive, restore.
    Memory {
        #[command(subcommand)]
        command: memory_cmd::MemoryCommand,
    },
    /// The memory items recall would give a session (`--query` for the pull route).
    Recall(memory_cmd::RecallArgs),
    /// Serve the store to local clients on its Unix socket (JSON-RPC 2.0, one object per line).
    Serve(serve_cmd::ServeArgs),
    /// A Model Context Protocol server on stdio for agents, forwarding to the store server.
    Mcp(mcp_cmd::McpArgs),
    /// The context inspector in the browser: loopback only, a token in the printed address, read-only.
    Ui(ui_cmd::UiArgs),
    /// Capture the agents' session folders: import every new or grown session file (`--watch`:
    /// keep capturing as they change).
    Sync(sync_cmd::SyncArgs),
    /// Run as a coding agent's hook (`claude-code` or `codex`): the event's JSON on stdin; at
    /// session start print the memory context, at stop, compaction and session end capture the
    /// transcript. Always exits 0; failures go to `hooks.log` in the store directory.
    Hook(hook_cmd::HookArgs),
    /// Give Claude Code or Codex a memory: add the `mnemo mcp` server and the hooks to the host's
    /// configuration (shown first; `--yes` writes; `--print` only prints; `--remove` undoes).
    Setup(setup_cmd::SetupArgs),
    /// Measure retrieval quality: `eval search` ranks the evidence of a QA file's questions.
    Eval {
        #[command(subcommand)]
        command: eval_cmd::EvalCommand,
    },
}

/// The `--format` choices of `import`: `auto`, then each importer of the transcript crate's one list,
/// with its line of help.
fn import_formats() -> impl clap::builder::TypedValueParser<Value = mnemo::transcript::ImportFormat> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    use mnemo::transcript::{ImportFormat, importers};
    let formats =
        std::iter::once(ImportFormat::Auto).chain(importers().iter().map(|importer| importer.format()));
    let choices: Vec<PossibleValue> =
        formats.map(|format| PossibleValue::new(format.name()).help(format.about())).collect();
    PossibleValuesParser::new(choices).try_map(|name| name.parse::<ImportFormat>())
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// The mnemo transcript format (JSON Lines).
    Jsonl,
}

/// What the binary's file-creation mask withholds: every file and directory it creates (the store's,
/// the storage engine's, an export) is its owner's alone from the moment it exists.
const CREATION_MASK: u32 = 0o077;

fn main() -> ExitCode {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(CREATION_MASK));
    survive_file_size_limit();
    exit_quietly_when_stdout_closes();
    init_tracing();
    let cli = parse();
    if let Some(code) = served::through_server(&cli) {
        return code;
    }
    match run(&cli) {
        Ok(code) => code,
        Err(error) => report_error(&cli, &error),
    }
}

/// The default store: `~/.mnemo` (`.mnemo` in the working directory when `HOME` is not set).
fn default_store() -> PathBuf {
    match std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        Some(home) => PathBuf::from(home).join(".mnemo"),
        None => PathBuf::from(".mnemo"),
    }
}

/// The command line; when it leaves the store to its default and the working directory holds a
/// `.mnemo` (the default of earlier versions), says which store is used and how to use the other:
/// nothing is moved between them.
fn parse() -> Cli {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let defaulted = matches.value_source("store") == Some(clap::parser::ValueSource::DefaultValue);
    let here = Path::new(".mnemo");
    if defaulted && served::uses_the_store(&cli.command) && here.is_dir() && !same_dir(here, &cli.store) {
        say_err!(
            "note: using the default store {}; this folder holds another at .mnemo: pass `--store .mnemo` \
             (or set MNEMO_STORE) to use that one",
            cli.store.display()
        );
    }
    cli
}

fn same_dir(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// A write past the file-size limit (`ulimit -f`) sends SIGXFSZ, whose default action ends the
/// process without a word. With a handler installed the write fails with `EFBIG` instead, which the
/// store reports as the file-size limit it is (decision 0101). The flag the handler sets is not read.
fn survive_file_size_limit() {
    let caught = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Err(error) = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, caught) {
        say_err!("warning: cannot catch SIGXFSZ ({error}); a file-size limit will end the process");
    }
}

/// A reader that stops early (`mnemo log | head`) closes the pipe; the command then ends quietly,
/// as Unix tools do, instead of reporting the panic `say!` raises on a closed stdout. Every
/// other panic keeps the default report.
fn exit_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn init_tracing() {
    // Tracing stays quiet unless RUST_LOG asks for it, and never writes to stdout.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn report_error(cli: &Cli, error: &anyhow::Error) -> ExitCode {
    let category = error.downcast_ref::<Error>().map(Error::category);
    let code = match category {
        Some(ErrorCategory::Input) => 2,
        Some(ErrorCategory::Conflict) => 3,
        Some(ErrorCategory::Integrity) => 1,
        _ => 4,
    };
    if cli.json {
        let kind = match category {
            Some(ErrorCategory::Input) => "input",
            Some(ErrorCategory::Conflict) => "conflict",
            Some(ErrorCategory::Integrity) => "integrity",
            _ => "failure",
        };
        let message = error_text(error);
        print_json(&serde_json::json!({ "error": { "kind": kind, "message": message } }));
    }
    // A closed stderr must not turn the error's exit code into a panic's.
    say_err!("error: {}", error_text(error));
    if let Some(server) = locked_by_server(cli, error) {
        say_err!("{server}");
    }
    ExitCode::from(code)
}

/// How long a refused command waits for the store server to say who it is.
const SERVER_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// When a command found the store locked and the store server is what holds it (agents' hooks and
/// `mnemo mcp` start one, which keeps the store until it has been idle a while): which process it
/// is and how to let go, so that the lock is not a dead end.
fn locked_by_server(cli: &Cli, error: &anyhow::Error) -> Option<String> {
    let locked = error.chain().any(|cause| {
        matches!(cause.downcast_ref::<Error>(), Some(Error::Log(mnemo::log::LogError::Locked { .. })))
    });
    if !locked {
        return None;
    }
    let options = mnemo_server::client::ConnectOptions::new("mnemo").call_timeout(SERVER_PROBE_TIMEOUT);
    let client = mnemo_server::client::Client::connect(&cli.store, &options).ok()?;
    let server = client.server();
    let exits = match server.limits.idle_exit_secs {
        0 => "it does not exit by itself".to_owned(),
        secs => format!("it exits after {secs} s without a connection"),
    };
    Some(format!(
        "note: the store server holds it (`mnemo serve`, pid {pid}; agents' hooks and `mnemo mcp` start \
         one, and {exits}). Stop it with `kill {pid}` and run the command again; the next hook or \
         client starts it again.",
        pid = server.pid,
    ))
}

/// The error and its causes on one line, each cause once: many errors already name their
/// cause in their own message (`cannot read FILE: CAUSE`), so a cause whose text the line
/// already ends with is not repeated.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.is_empty() {
            text = cause;
        } else if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The store: the store server's, when this command runs in it for a caller (`served`), else opened
/// here.
fn open(cli: &Cli, verify_tail_on_open: bool) -> anyhow::Result<std::sync::Arc<Mnemo>> {
    if let Some(store) = served::context::store() {
        return Ok(store);
    }
    let log = cli.log.as_deref().map(LogLocation::parse).transpose()?;
    let config = Config { pipeline: cli.pipeline.clone(), verify_tail_on_open, log, ..Config::default() };
    Ok(std::sync::Arc::new(Mnemo::open(&cli.store, config)?))
}

/// What `mnemo bench` answers in a build without the harness.
#[cfg(not(feature = "bench"))]
const BENCH_NOT_BUILT: &str = "this mnemo is built without the benchmark harness (it links SQLite); \
     run it from the repository with `cargo run --release -p mnemo-cli --features bench -- bench ...`";

fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    if only_reads(&cli.command) && cli.log.is_none() {
        require_store(&cli.store)?;
    }
    match &cli.command {
        Command::Demo { dir } => demo::run(dir.as_deref(), cli.json),
        Command::Import { files, format } => import(cli, files, *format),
        Command::Export { format: ExportFormat::Jsonl, out } => export(cli, out.as_deref()),
        Command::Sessions => sessions(cli),
        Command::Show(args) => history_cmd::show(cli, args),
        Command::Search(args) => history_cmd::search(cli, args),
        Command::Read(args) => history_cmd::read(cli, args),
        Command::Log { from, limit } => log(cli, Position(*from), *limit),
        Command::Stats => {
            let stats = open(cli, true)?.stats()?;
            output(cli, &stats, || print_stats(&stats));
            Ok(ExitCode::SUCCESS)
        }
        Command::Rebuild { stage } => rebuild(cli, stage.as_deref()),
        Command::Verify => verify(cli),
        Command::Salvage { to } => salvage(cli, to),
        Command::AcceptLoss { range } => accept_loss(cli, range),
        Command::Compact(args) => compaction_cmd::compact(cli, args),
        Command::Context(args) => compaction_cmd::context(cli, args),
        Command::Copy(args) => compaction_cmd::copy(cli, args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench_cmd::run(cli, args),
        #[cfg(not(feature = "bench"))]
        Command::Bench { .. } => Err(Error::InvalidInput(BENCH_NOT_BUILT.to_owned()).into()),
        Command::Memory { command } => memory_cmd::run(cli, command),
        Command::Recall(args) => memory_cmd::recall(cli, args),
        Command::Serve(args) => serve_cmd::run(cli, args),
        Command::Mcp(args) => mcp_cmd::run(cli, args),
        Command::Ui(args) => ui_cmd::run(cli, args),
        Command::Sync(args) => sync_cmd::run(cli, args),
        Command::Eval { command } => eval_cmd::run(cli, command),
        Command::Hook(args) => hook_cmd::run(cli, args),
        Command::Setup(args) => setup_cmd::run(cli, args),
    }
}

/// Whether a command only reads a store: run on a path that holds none, it says so and creates
/// nothing (a command that writes creates the store it is given).
fn only_reads(command: &Command) -> bool {
    use memory_cmd::MemoryCommand as M;
    match command {
        Command::Sessions
        | Command::Show(_)
        | Command::Search(_)
        | Command::Read(_)
        | Command::Log { .. }
        | Command::Stats
        | Command::Verify
        | Command::Export { .. }
        | Command::Context(_)
        | Command::Recall(_) => true,
        Command::Memory { command } => matches!(command, M::Get { .. } | M::List { .. } | M::Search { .. }),
        _ => false,
    }
}

/// Refuses a read of a store that does not exist, naming the path and what to do.
fn require_store(store: &Path) -> anyhow::Result<()> {
    // NOTE: a directory with something in it is left to the store's open, whose refusal says what
    // it holds; only a path with nothing there is "no store".
    let nothing_there = match std::fs::read_dir(store) {
        Ok(mut entries) => entries.next().is_none(),
        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
    };
    if !nothing_there {
        return Ok(());
    }
    Err(Error::InvalidInput(format!(
        "there is no store at {}: pass --store (or set MNEMO_STORE) to the store you use, or create one \
         here with `mnemo import FILE` or `mnemo sync`",
        store.display()
    ))
    .into())
}

/// Imports each file all or nothing, in order. A file that fails stops the command: the files
/// before it stay committed (their reports are printed), and the error names the failing file,
/// its line, what was committed before it and what was not imported.
fn import(cli: &Cli, files: &[String], format: mnemo::transcript::ImportFormat) -> anyhow::Result<ExitCode> {
    refuse_folders(files)?;
    let mnemo = open(cli, true)?;
    let mut reports = Vec::new();
    let bar = progress(files.len() as u64, "importing");
    for (index, file) in files.iter().enumerate() {
        bar.set_message(file.clone());
        let result = match served::context::input(file) {
            // What the caller of the store server read for it (its standard input, a pipe).
            Some(spooled) => spooled
                .map_err(|source| Error::Read { path: file.clone(), source })
                .and_then(|mut spooled| mnemo.import_stream(&mut spooled, file, format)),
            None => mnemo.import_file(file, format),
        }
        .map_err(anyhow::Error::from);
        match result {
            Ok(report) => reports.push(report),
            Err(error) => {
                bar.finish_and_clear();
                if !cli.json {
                    print_import_reports(&reports, format);
                }
                if files.len() == 1 {
                    return Err(error);
                }
                return Err(error.context(import_stopped(file, &reports, &files[index + 1..])));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    output(cli, &reports, || print_import_reports(&reports, format));
    Ok(ExitCode::SUCCESS)
}

/// A folder given to `import` is refused before anything is read, naming the command that
/// captures folders, so that no file of the list is imported.
fn refuse_folders(files: &[String]) -> Result<(), Error> {
    match files.iter().find(|file| Path::new(file).is_dir()) {
        Some(folder) => Err(Error::InvalidInput(format!(
            "{folder} is a folder: `mnemo import` reads transcript files; \
             `mnemo sync {folder}` imports every session file under a folder"
        ))),
        None => Ok(()),
    }
}

/// What a multi-file import that stopped at `file` leaves: which files were committed, which not.
fn import_stopped(file: &str, committed: &[mnemo::transcript::ImportReport], rest: &[String]) -> String {
    let committed = if committed.is_empty() {
        "nothing".to_owned()
    } else {
        let files: Vec<String> = committed
            .iter()
            .map(|r| format!("{} ({}, {} records appended)", r.source, r.status.name(), r.records))
            .collect();
        files.join(", ")
    };
    let mut not_imported = vec![file.to_owned()];
    not_imported.extend(rest.iter().cloned());
    format!(
        "import stopped at {file}; committed before it: {committed}; not imported: {}",
        not_imported.join(", ")
    )
}

fn print_import_reports(
    reports: &[mnemo::transcript::ImportReport],
    format: mnemo::transcript::ImportFormat,
) {
    for r in reports {
        let chosen = if matches!(format, mnemo::transcript::ImportFormat::Auto) { " (detected)" } else { "" };
        let what = match r.status {
            mnemo::transcript::ImportStatus::Imported => {
                format!("imported {} records in {} new sessions", r.records, r.sessions)
            }
            mnemo::transcript::ImportStatus::Resumed => format!(
                "resumed: appended {} new records after {} already in the store",
                r.records, r.already
            ),
            mnemo::transcript::ImportStatus::AlreadyComplete if r.store_ahead > 0 => format!(
                "already complete: all {} records are in the store, which holds {} more from a later \
                 version of this file; nothing appended",
                r.already, r.store_ahead
            ),
            mnemo::transcript::ImportStatus::AlreadyComplete => {
                format!("already complete: all {} records are in the store, nothing appended", r.already)
            }
            _ => format!("{} records appended", r.records),
        };
        let span = r.positions.map_or(String::new(), |(a, b)| format!(" (positions {a}..={b})"));
        say!("{}: {} format{chosen}, {} lines: {what}{span}", r.source, r.format, r.lines);
        for (what, count) in &r.skipped {
            say!("  skipped {count} × {what}");
        }
    }
}

fn export(cli: &Cli, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    let report = match out {
        Some(path) => {
            let file = create_export_file(path)?;
            let mut writer = std::io::BufWriter::new(file);
            mnemo.export_transcript(&mut writer)?
        }
        None => {
            let mut writer = std::io::BufWriter::new(term::stdout_writer());
            match mnemo.export_transcript(&mut writer) {
                Ok(report) => report,
                // A reader that stops early (`mnemo export | head`): end quietly, as `log` does.
                Err(Error::Write { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
                    return Ok(ExitCode::SUCCESS);
                }
                Err(error) => return Err(error.into()),
            }
        }
    };
    // The transcript may be on stdout, so the report goes there only when asked for and the
    // transcript went to a file.
    if cli.json && out.is_some() {
        print_json(&report);
    } else {
        let skipped: Vec<String> = report.skipped.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let skipped =
            if skipped.is_empty() { String::new() } else { format!("; skipped {}", skipped.join(", ")) };
        say_err!("exported {} sessions in {} lines{skipped}", report.sessions, report.lines);
    }
    Ok(if report.sessions == 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// The file `export --out` writes: created new and owner-only, since a transcript holds whatever its
/// sessions held. An existing regular file is refused rather than overwritten (Mnemo changes no file
/// it did not create); a device or pipe (`/dev/stdout`, a FIFO) is written to as it is.
fn create_export_file(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let error = |e: std::io::Error| Error::Write { path: path.display().to_string(), source: e };
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() || metadata.is_dir() => Err(Error::InvalidInput(format!(
            "--out {}: it exists; export writes only a new file (remove it or name another)",
            path.display()
        ))
        .into()),
        Ok(_) => Ok(std::fs::OpenOptions::new().write(true).open(path).map_err(error)?),
        Err(_) => Ok(std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mnemo::log::PRIVATE_FILE_MODE)
            .open(path)
            .map_err(error)?),
    }
}

fn sessions(cli: &Cli) -> anyhow::Result<ExitCode> {
    let sessions = open(cli, true)?.history().session_list()?;
    output(cli, &sessions, || {
        let mut rows = vec![
            [
                "last activity",
                "first activity",
                "session",
                "source",
                "workspace",
                "events",
                "turns",
                "flags",
                "parent",
                "title",
            ]
            .map(str::to_owned),
        ];
        for listing in &sessions {
            let s = &listing.summary;
            let mut flags = Vec::new();
            if s.incognito {
                flags.push("incog");
            }
            if s.archived {
                flags.push("archived");
            }
            if s.subagent {
                flags.push("sub");
            } else if s.parent.is_some() {
                flags.push("fork");
            }
            let title = match (&listing.display_title, listing.title_from_request) {
                (Some(title), true) => format!("“{title}”"),
                (Some(title), false) => title.clone(),
                (None, _) => String::new(),
            };
            rows.push([
                listing.last_activity.map_or_else(|| "-".to_owned(), date_time),
                listing.first_activity.map_or_else(|| "-".to_owned(), date_time),
                s.session.to_string(),
                s.source.clone().unwrap_or_else(|| "-".to_owned()),
                s.workspace.as_ref().map_or_else(|| "-".to_owned(), ToString::to_string),
                s.event_count.to_string(),
                s.turn_count.to_string(),
                if flags.is_empty() { "-".to_owned() } else { flags.join(",") },
                s.parent.as_ref().map_or_else(|| "-".to_owned(), ToString::to_string),
                title,
            ]);
        }
        for row in aligned(&rows, &[false, false, false, false, false, true, true, false, false, false]) {
            say!("{row}");
        }
    });
    Ok(if sessions.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// A time as `YYYY-MM-DD HH:MM` UTC.
fn date_time(at: mnemo::records::TimestampMs) -> String {
    let nanos = i128::from(at.0) * 1_000_000;
    match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute()
        ),
        Err(_) => at.0.to_string(),
    }
}

/// Table rows as lines whose columns line up (widths in characters after control characters are
/// escaped); `right[i]` right-aligns column `i`. The last column is not padded.
fn aligned<const N: usize>(rows: &[[String; N]], right: &[bool; N]) -> Vec<String> {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| term::escape_controls(cell).into_owned()).collect())
        .collect();
    let mut widths = [0; N];
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    cells
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let pad = " ".repeat(widths[i] - cell.chars().count());
                match (i + 1 == N, right[i]) {
                    (true, _) => line.push_str(cell),
                    (false, true) => line.push_str(&format!("{pad}{cell}  ")),
                    (false, false) => line.push_str(&format!("{cell}{pad}  ")),
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
}

fn log(cli: &Cli, from: Position, limit: usize) -> anyhow::Result<ExitCode> {
    let entries = open(cli, true)?.log_entries(from, limit)?;
    output(cli, &entries, || {
        for e in &entries {
            say!(
                "{:>8} {:<40} r{:<5} {:<20} {} {}",
                e.position.0,
                e.stream,
                e.revision,
                e.kind,
                e.timestamp.0,
                &e.hash[..16]
            );
        }
    });
    Ok(if entries.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn print_stats(stats: &mnemo::stages::Stats) {
    say!("store       {}", stats.dir);
    say!("log head    {}", stats.head);
    say!("sessions    {}", stats.sessions);
    say!("turns       {}", stats.turns);
    say!("events      {}", stats.events);
    say!("disk bytes  {}", stats.disk_bytes);
    for stage in &stats.stages {
        say!("stage       {:<20} at {:>8}  {}", stage.name, stage.watermark.0, stage.digest);
        if let Some(stop) = &stage.stopped {
            say!("            {:<20} STOPPED: {stop}", stage.name);
        }
    }
}

fn rebuild(cli: &Cli, stage: Option<&str>) -> anyhow::Result<ExitCode> {
    let mnemo = open(cli, true)?;
    let spinner = progress(0, "rebuilding");
    let reports = mnemo.rebuild(stage)?;
    spinner.finish_and_clear();
    output(cli, &reports, || {
        for r in &reports {
            say!("{:<20} at {:>8}  {}", r.name, r.watermark.0, r.digest);
        }
    });
    Ok(ExitCode::SUCCESS)
}

fn verify(cli: &Cli) -> anyhow::Result<ExitCode> {
    // The tail check on open is off so that a damaged log is reported here, by position, rather than
    // refused; the full chain check below finds the same damage and more.
    let mnemo = open(cli, false)?;
    let bar = progress(mnemo.log().head().0, "verifying chain");
    let verification = mnemo.verify(&mut |position| bar.set_position(position.0))?;
    bar.finish_and_clear();
    output(cli, &verification, || {
        say!("chain       {} envelopes verified", verification.envelopes);
        if let Some(lost) = &verification.lost {
            say!("lost        acknowledged positions {lost} are missing from the log");
        }
        for stage in &verification.stages {
            let verdict = match (&stage.stopped, stage.matches()) {
                (Some(_), _) => "STOPPED",
                (None, true) => "ok",
                (None, false) => "MISMATCH",
            };
            say!(
                "stage       {:<20} at {:>8}  {verdict}  live {}  rebuilt {}",
                stage.name,
                stage.watermark.0,
                stage.live,
                stage.rebuilt
            );
            if let Some(stop) = &stage.stopped {
                say!("            {:<20} stopped: {stop}", stage.name);
            }
        }
    });
    if verification.ok() {
        return Ok(ExitCode::SUCCESS);
    }
    if !cli.json {
        if let Some(lost) = &verification.lost {
            say_err!(
                "error: verification failed: acknowledged positions {lost} are lost \
                 (`mnemo salvage --to DIR` or `mnemo accept-loss {lost}`)"
            );
        } else if let Some(stage) = verification.stages.iter().find(|s| s.stopped.is_some()) {
            say_err!(
                "error: verification failed: stage {} has stopped; `mnemo rebuild --stage {}` replays it",
                stage.name,
                stage.name
            );
        } else {
            say_err!("error: verification failed: a live projection differs from a fresh rebuild");
        }
    }
    Ok(ExitCode::from(1))
}

fn salvage(cli: &Cli, to: &Path) -> anyhow::Result<ExitCode> {
    let spinner = progress(0, "salvaging");
    let report =
        mnemo::log::salvage(&cli.store, to, &mut |position| spinner.set_message(position.to_string()))?;
    spinner.finish_and_clear();
    output(cli, &report, || {
        say!(
            "recovered   {} envelopes (positions 1..={}) into {}",
            report.recovered,
            report.recovered,
            report.to
        );
        match &report.lost {
            Some(lost) => say!("lost        {} envelopes: positions {lost}", report.lost_envelopes),
            None => say!("lost        nothing"),
        }
        if let Some(damage) = &report.damage {
            say!("damage      {damage}");
        }
        if let Some(cut) = &report.journal_cut {
            say!("journal     {cut}");
        }
        for stage in &report.stages {
            say!("stage       {:<20} at {:>8}  {}", stage.name, stage.watermark.0, stage.digest);
        }
    });
    Ok(if report.lost.is_some() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn accept_loss(cli: &Cli, range: &str) -> anyhow::Result<ExitCode> {
    let range = mnemo::log::LostRange::parse(range).ok_or_else(|| {
        Error::InvalidInput(format!("{range:?}: expected the lost range as reported, FIRST..=LAST"))
    })?;
    let log = cli.log.as_deref().map(LogLocation::parse).transpose()?;
    let config =
        Config { pipeline: cli.pipeline.clone(), log, accept_loss: Some(range), ..Config::default() };
    let mnemo = Mnemo::open(&cli.store, config)?;
    if mnemo.accepted_loss().is_none() {
        return Err(Error::InvalidInput(format!(
            "{}: the log has lost no acknowledged envelopes; nothing to accept",
            cli.store.display()
        ))
        .into());
    }
    mnemo.catch_up()?;
    let head = mnemo.log().head();
    output(cli, &serde_json::json!({ "accepted": range.to_string(), "head": head }), || {
        say!(
            "accepted the loss of positions {range}; the log ends at {head}; the stages are rebuilt from it"
        );
    });
    Ok(ExitCode::SUCCESS)
}

/// How often a spinner redraws, in milliseconds.
const PROGRESS_TICK_MS: u64 = 120;

/// A progress bar on a terminal's stderr, hidden when stderr is not a terminal.
fn progress(length: u64, label: &'static str) -> ProgressBar {
    if !std::io::stderr().is_terminal() || served::context::active() {
        return ProgressBar::hidden();
    }
    let bar = if length == 0 { ProgressBar::new_spinner() } else { ProgressBar::new(length) };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    let template = if length == 0 {
        "{spinner} {prefix} {elapsed} {msg}"
    } else {
        "{prefix} [{bar:40}] {pos}/{len} {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    if length == 0 {
        // A spinner moves on its own: the work it covers reports no steps.
        bar.enable_steady_tick(std::time::Duration::from_millis(PROGRESS_TICK_MS));
    }
    bar.set_prefix(label);
    bar
}

fn output<T: Serialize>(cli: &Cli, value: &T, human: impl FnOnce()) {
    if cli.json {
        print_json(value);
    } else {
        human();
    }
}

fn print_json<T: Serialize>(value: &T) {
    // JSON escapes every control character in a string, so it is written as it is.
    if let Ok(mut text) = serde_json::to_string_pretty(value) {
        text.push('\n');
        term::print_out(&text);
    }
}

/// The directory `demo` uses when none is given: new, and named in the report.
pub(crate) fn fresh_demo_dir() -> PathBuf {
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    std::env::temp_dir().join(format!("mnemo-demo-{}-{stamp}", std::process::id()))
}

pub(crate) fn dir_is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none())
}
