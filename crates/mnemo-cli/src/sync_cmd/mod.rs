//! `mnemo sync [DIR...]`: capture every new or grown session file of the agents' own session
//! folders, once or (`--watch`) continuously.
//!
//! Each file is captured with the importer's live capture, which appends only the lines the store
//! does not hold yet (known by identity), so a run is safe to repeat at any time: a file that has
//! not changed appends nothing. A sync state file in the store directory remembers each file's
//! size and modification time at its last capture, so that unchanged files are not read again;
//! it is a cache only (without it every file is read and nothing is appended twice). A second
//! run while the store is held waits for it, up to `--wait` seconds, then says the store is busy.

mod roots;
mod state;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use mnemo::transcript::{ImportFormat, ImportStatus};
use mnemo::{Error, ErrorCategory, Mnemo};
use serde::Serialize;

use crate::capture::{Captured, capture_file};
use crate::term::{say, say_err};
use crate::{Cli, output, progress};
use roots::Root;
use state::{FileMark, SyncState};

/// Longest `--wait` for a busy store, in seconds.
const WAIT_SECONDS_MAX: u64 = 3600;

/// How often a run waiting for a busy store tries it again, in milliseconds.
const BUSY_RETRY_MS: u64 = 250;

#[derive(Debug, Args)]
pub(crate) struct SyncArgs {
    /// Folders (or session files) to capture. Default: Claude Code's `projects` folder
    /// (`$CLAUDE_CONFIG_DIR`, else `~/.claude`) and Codex's `sessions` folder (`$CODEX_HOME`,
    /// else `~/.codex`).
    dirs: Vec<PathBuf>,
    /// Keep running: capture files as they change (file-system notifications, debounced) until
    /// interrupted (SIGINT or SIGTERM).
    #[arg(long)]
    watch: bool,
    /// How long to wait for a store another process holds, in seconds.
    #[arg(long, default_value_t = 30)]
    wait: u64,
    /// With `--watch`: how long files must be quiet before they are captured, in milliseconds.
    #[arg(long, default_value_t = watch::DEBOUNCE_MS_DEFAULT)]
    debounce_ms: u64,
}

impl SyncArgs {
    /// The folders named on the command line.
    pub(crate) fn dirs_mut(&mut self) -> &mut Vec<PathBuf> {
        &mut self.dirs
    }
}

/// What a run did with one file.
#[derive(Debug, Serialize)]
pub(crate) struct FileResult {
    path: String,
    #[serde(flatten)]
    outcome: Outcome,
}

#[derive(Debug, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
enum Outcome {
    /// Its size and time are what the last capture saw: not read.
    Unchanged,
    /// Read and captured.
    Captured(Captured),
    /// Reading or importing it failed; nothing of it was appended.
    Failed { kind: &'static str, error: String },
}

/// A run's results.
#[derive(Debug, Default, Serialize)]
pub(crate) struct SyncReport {
    roots: Vec<roots::RootReport>,
    files: Vec<FileResult>,
    summary: Summary,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    files: usize,
    new_files: usize,
    grown_files: usize,
    records_appended: usize,
    unchanged: usize,
    already_complete: usize,
    partial_lines_left: usize,
    without_conversation: usize,
    failed: usize,
    unreadable_folders: usize,
    /// Sessions memory extraction read after the capture (those with events past their cursor).
    sessions_extracted: usize,
    /// Memory items that extraction stored.
    memories_extracted: u64,
}

pub(crate) fn run(cli: &Cli, args: &SyncArgs) -> anyhow::Result<ExitCode> {
    if args.wait > WAIT_SECONDS_MAX {
        return Err(
            Error::InvalidInput(format!("--wait {}: at most {WAIT_SECONDS_MAX} seconds", args.wait)).into()
        );
    }
    let roots = roots::resolve(&args.dirs)?;
    if args.watch {
        return watch::run(cli, args, &roots);
    }
    let report = sync_once(cli, &roots, Duration::from_secs(args.wait))?;
    output(cli, &report, || print_report(&report, true));
    Ok(exit_code(&report))
}

/// One pass over every root: walk, then capture each new or grown file.
pub(crate) fn sync_once(cli: &Cli, roots: &[Root], wait: Duration) -> anyhow::Result<SyncReport> {
    let mut report = SyncReport::default();
    let mut files = Vec::new();
    for root in roots {
        let (root_report, found) = root.walk()?;
        report.summary.unreadable_folders += root_report.unreadable.len();
        report.roots.push(root_report);
        files.extend(found);
    }
    let mnemo = open_waiting(cli, wait)?;
    capture_files(&mnemo, cli, &files, &mut report)?;
    Ok(report)
}

/// Captures `files` (each with the format to read it in) into `report`, and saves the sync state.
fn capture_files(
    mnemo: &Mnemo,
    cli: &Cli,
    files: &[(PathBuf, ImportFormat)],
    report: &mut SyncReport,
) -> anyhow::Result<()> {
    let mut state = SyncState::load(&cli.store);
    let bar = progress(files.len() as u64, "syncing");
    for (path, format) in files {
        bar.set_message(path.display().to_string());
        let outcome = capture_one(mnemo, &mut state, path, *format);
        report.summary.add(&outcome);
        report.files.push(FileResult { path: path.display().to_string(), outcome });
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Err(error) = state.save(&cli.store) {
        // The state is a cache: without it the next run reads every file again, appending nothing twice.
        say_err!("warning: {error:#}; the next sync reads every file again");
    }
    extract_after_capture(mnemo, report);
    Ok(())
}

/// Memory extraction over every session the store holds events of that no extraction has read
/// (what this capture appended, and anything an earlier one left), inline: a sync waits for it.
/// A failure is a warning: what was captured stays, and the next sync extracts it.
fn extract_after_capture(mnemo: &Mnemo, report: &mut SyncReport) {
    let runs = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| Ok(runtime.block_on(mnemo.memory().extract_backlog())?));
    match runs {
        Ok(runs) => {
            report.summary.sessions_extracted += runs.len();
            report.summary.memories_extracted += runs.iter().map(|(_, r)| r.stored).sum::<u64>();
        }
        Err(error) => say_err!("warning: memory extraction after the sync failed: {error:#}"),
    }
}

fn capture_one(mnemo: &Mnemo, state: &mut SyncState, path: &Path, format: ImportFormat) -> Outcome {
    // NOTE: the mark is taken before the file is read: a file that grows while it is read then
    // differs from its mark next time and is read again; a mark taken after would hide the growth.
    let mark = match FileMark::of(path) {
        Ok(mark) => mark,
        Err(error) => return failed(&Error::Read { path: path.display().to_string(), source: error }),
    };
    if state.is_unchanged(path, &mark) {
        return Outcome::Unchanged;
    }
    match capture_file(mnemo, path, format) {
        Ok(captured) => {
            state.mark(path, mark);
            Outcome::Captured(captured)
        }
        Err(error) => {
            state.forget(path);
            failed(&error)
        }
    }
}

fn failed(error: &Error) -> Outcome {
    let kind = match error.category() {
        ErrorCategory::Input => "input",
        ErrorCategory::Conflict => "conflict",
        ErrorCategory::Integrity => "integrity",
        _ => "failure",
    };
    Outcome::Failed { kind, error: error.to_string() }
}

impl Summary {
    fn add(&mut self, outcome: &Outcome) {
        self.files += 1;
        match outcome {
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Failed { .. } => self.failed += 1,
            Outcome::Captured(Captured::NothingYet) => self.partial_lines_left += 1,
            Outcome::Captured(Captured::NoConversation { .. }) => self.without_conversation += 1,
            Outcome::Captured(Captured::Imported { report, partial_tail_bytes, .. }) => {
                self.records_appended += report.records;
                if *partial_tail_bytes > 0 {
                    self.partial_lines_left += 1;
                }
                match report.status {
                    ImportStatus::Imported => self.new_files += 1,
                    ImportStatus::Resumed => self.grown_files += 1,
                    _ => self.already_complete += 1,
                }
            }
        }
    }
}

/// Opens the store, waiting up to `wait` while another process holds it.
pub(crate) fn open_waiting(cli: &Cli, wait: Duration) -> anyhow::Result<std::sync::Arc<Mnemo>> {
    let deadline = Instant::now() + wait;
    let mut told = false;
    loop {
        match crate::open(cli, true) {
            Err(error) if is_locked(&error) => {
                if Instant::now() >= deadline {
                    return Err(error.context(format!(
                        "the store {} is busy: another mnemo process holds it (waited {} s; --wait sets how long)",
                        cli.store.display(),
                        wait.as_secs()
                    )));
                }
                if !told && !cli.json {
                    say_err!(
                        "the store {} is busy (another mnemo process holds it); waiting up to {} s",
                        cli.store.display(),
                        wait.as_secs()
                    );
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(BUSY_RETRY_MS));
            }
            other => return other,
        }
    }
}

fn is_locked(error: &anyhow::Error) -> bool {
    matches!(error.downcast_ref::<Error>(), Some(Error::Log(mnemo::log::LogError::Locked { .. })))
}

fn exit_code(report: &SyncReport) -> ExitCode {
    if report.summary.unreadable_folders > 0 {
        return ExitCode::from(4);
    }
    if report.summary.failed == 0 {
        return ExitCode::SUCCESS;
    }
    let input_only = report.files.iter().all(|f| match &f.outcome {
        Outcome::Failed { kind, .. } => *kind == "input",
        _ => true,
    });
    ExitCode::from(if input_only { 2 } else { 4 })
}

/// Prints each file that was read (unchanged files only in the summary), then the summary.
pub(crate) fn print_report(report: &SyncReport, with_roots: bool) {
    if with_roots {
        for root in &report.roots {
            say!("{root}");
        }
    }
    for file in &report.files {
        if let Some(line) = describe(&file.outcome) {
            say!("{}: {line}", file.path);
        }
    }
    let s = &report.summary;
    let unreadable = match s.unreadable_folders {
        0 => String::new(),
        n => format!("; {n} folders could not be read"),
    };
    say!(
        "synced {} files: {} new, {} grown, {} records appended; {} unchanged, {} already complete, \
         {} with a line still being written, {} without conversation yet, {} failed{unreadable}",
        s.files,
        s.new_files,
        s.grown_files,
        s.records_appended,
        s.unchanged,
        s.already_complete,
        s.partial_lines_left,
        s.without_conversation,
        s.failed
    );
    if s.sessions_extracted > 0 {
        say!(
            "extracted {} memory item(s) from {} session(s) with new events",
            s.memories_extracted,
            s.sessions_extracted
        );
    }
}

fn describe(outcome: &Outcome) -> Option<String> {
    let (report, partial) = match outcome {
        Outcome::Unchanged => return None,
        Outcome::Failed { error, .. } => return Some(format!("FAILED: {error}")),
        Outcome::Captured(Captured::NothingYet) => {
            return Some("no complete line yet; left for the next sync".to_owned());
        }
        Outcome::Captured(Captured::NoConversation { format }) => {
            return Some(format!("{format}: no conversation lines yet"));
        }
        Outcome::Captured(Captured::Imported { report, partial_tail_bytes, .. }) => {
            (report, *partial_tail_bytes)
        }
    };
    let what = match report.status {
        ImportStatus::Imported => {
            format!("new: {} records in {} sessions", report.records, report.sessions_in_file)
        }
        ImportStatus::Resumed => {
            format!(
                "grown: appended {} new records after {} already in the store",
                report.records, report.already
            )
        }
        _ => format!("nothing new ({} records already in the store)", report.already),
    };
    let tail = if partial > 0 {
        format!("; a last line still being written ({partial} bytes) is left for the next sync")
    } else {
        String::new()
    };
    Some(format!("{}, {what}{tail}", report.format))
}
