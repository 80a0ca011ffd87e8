//! `mnemo sync --watch`: a full sync, then a capture of each session file that changes, on the
//! file system's notifications (decision 0165), until SIGINT or SIGTERM.
//!
//! Notifications are debounced: a batch is captured once no file has changed for the debounce
//! period, or once its first change is [`BATCH_DELAY_DEBOUNCES_MAX`] periods old (an agent that
//! writes without pause is still captured). The store is opened for each batch and closed after
//! it, so other commands can use it between batches. A stop request lets the batch being
//! captured finish (each file is appended all or nothing either way) and then ends the command.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mnemo::Error;
use mnemo::transcript::ImportFormat;
use notify::Watcher as _;

use super::roots::{Root, SESSION_FILE_EXTENSION};
use super::{SyncArgs, SyncReport, capture_files, open_waiting, print_report, sync_once};
use crate::term::{say, say_err};
use crate::{Cli, print_json};

/// The default quiet period before changed files are captured, in milliseconds.
pub(crate) const DEBOUNCE_MS_DEFAULT: u64 = 500;

/// Longest debounce period, in milliseconds.
const DEBOUNCE_MS_MAX: u64 = 60_000;

/// A batch is captured at the latest this many debounce periods after its first change.
const BATCH_DELAY_DEBOUNCES_MAX: u32 = 10;

/// How often the loop looks at the stop flag while no notification arrives, in milliseconds.
const STOP_POLL_MS: u64 = 100;

/// Most changed files one batch collects; past it the batch is captured at once.
const BATCH_FILES_MAX: usize = 10_000;

pub(crate) fn run(cli: &Cli, args: &SyncArgs, roots: &[Root]) -> anyhow::Result<ExitCode> {
    if args.debounce_ms == 0 || args.debounce_ms > DEBOUNCE_MS_MAX {
        return Err(Error::InvalidInput(format!(
            "--debounce-ms {}: expected 1..={DEBOUNCE_MS_MAX}",
            args.debounce_ms
        ))
        .into());
    }
    let stop = stop_flag()?;
    let wait = Duration::from_secs(args.wait);
    let (sender, events) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(sender).context("cannot start watching the file system")?;
    let watched: Vec<&Root> = roots.iter().filter(|r| r.path.exists()).collect();
    for root in &watched {
        watcher
            .watch(&root.path, notify::RecursiveMode::Recursive)
            .with_context(|| format!("cannot watch {}", root.path.display()))?;
    }
    // NOTE: the watches are in place before the first full sync, so a change made during it is
    // seen by a batch after it rather than lost between the two.
    let first = sync_once(cli, roots, wait)?;
    report(cli, &first, true);
    if !cli.json {
        let paths: Vec<String> = watched.iter().map(|r| r.path.display().to_string()).collect();
        say_err!("watching {} for changes; SIGINT or SIGTERM stops", paths.join(", "));
    }
    let debounce = Duration::from_millis(args.debounce_ms);
    let mut batch = Batch::default();
    let mut batches = 0_u64;
    while !stop.load(Ordering::Relaxed) {
        match events.recv_timeout(Duration::from_millis(STOP_POLL_MS)) {
            Ok(Ok(event)) => batch.add(&event, roots),
            Ok(Err(error)) => say_err!("warning: a file-system notification failed: {error}"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the file-system watcher stopped");
            }
        }
        if batch.is_due(debounce) {
            let files: Vec<(PathBuf, ImportFormat)> = std::mem::take(&mut batch).files.into_iter().collect();
            capture_batch(cli, &files, wait)?;
            batches += 1;
        }
    }
    if !cli.json {
        say_err!("stopped after {batches} batches of changes");
    }
    Ok(ExitCode::SUCCESS)
}

/// Captures a batch of changed files in this process, or through the store server when one holds
/// the store (an agent started while the watch ran): `mnemo sync FILE...` runs in it and prints
/// the batch's report here.
fn capture_batch(cli: &Cli, files: &[(PathBuf, ImportFormat)], wait: Duration) -> anyhow::Result<()> {
    if !crate::served::context::active() {
        let mut argv = vec!["mnemo".to_owned()];
        if cli.json {
            argv.push("--json".to_owned());
        }
        argv.extend(["sync".to_owned(), "--wait".to_owned(), wait.as_secs().to_string()]);
        argv.extend(files.iter().map(|(path, _)| path.display().to_string()));
        if let Some(ran) = crate::served::run_in_server(cli, argv) {
            // The report, and each file's failure, were printed by the command itself.
            ran?;
            return Ok(());
        }
    }
    let mnemo = open_waiting(cli, wait)?;
    let mut captured = SyncReport::default();
    capture_files(&mnemo, cli, files, &mut captured)?;
    drop(mnemo);
    report(cli, &captured, false);
    Ok(())
}

/// A flag that SIGINT and SIGTERM set; in the store server, the flag its caller's leaving sets.
fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    if let Some(stop) = crate::served::context::stop_flag() {
        return Ok(stop);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot catch SIGINT and SIGTERM")?;
    }
    Ok(stop)
}

/// With `--json` each batch's report is one JSON document (so `--watch --json` writes a stream of
/// them); otherwise the batch's files and summary.
fn report(cli: &Cli, report: &SyncReport, first: bool) {
    if cli.json {
        print_json(report);
    } else if first || !report.files.is_empty() {
        print_report(report, first);
    } else {
        say!("(no session file changed)");
    }
}

/// Deepest folder level below a newly created folder that is searched for session files.
const NEW_FOLDER_DEPTH_MAX: usize = 8;

/// Session files in `dir` and its subfolders (to [`NEW_FOLDER_DEPTH_MAX`] levels, symlinks not
/// followed, at most [`BATCH_FILES_MAX`]); unreadable folders are skipped, as the full sync's walk
/// reports them.
fn session_files_under(dir: &std::path::Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if found.len() >= BATCH_FILES_MAX {
            return;
        }
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_dir() && depth < NEW_FOLDER_DEPTH_MAX {
            session_files_under(&path, depth + 1, found);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == SESSION_FILE_EXTENSION) {
            found.push(path);
        }
    }
}

/// The session files changed since the last capture.
#[derive(Default)]
struct Batch {
    files: BTreeMap<PathBuf, ImportFormat>,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Batch {
    fn add(&mut self, event: &notify::Event, roots: &[Root]) {
        if event.kind.is_access() || event.kind.is_remove() {
            return;
        }
        for path in &event.paths {
            if path.is_dir() {
                // A new folder (a new project) is watched only from its own creation event on,
                // so files written into it before then raise nothing: look for them now.
                let mut found = Vec::new();
                session_files_under(path, 0, &mut found);
                for file in found {
                    self.add_file(file, roots);
                }
            } else if path.extension().is_some_and(|e| e == SESSION_FILE_EXTENSION) && path.is_file() {
                self.add_file(path.clone(), roots);
            }
        }
    }

    fn add_file(&mut self, path: PathBuf, roots: &[Root]) {
        // The deepest root the file is under says how to read it.
        let root =
            roots.iter().filter(|r| path.starts_with(&r.path)).max_by_key(|r| r.path.as_os_str().len());
        if let Some(root) = root {
            self.files.insert(path, root.format);
            let now = Instant::now();
            self.first.get_or_insert(now);
            self.last = Some(now);
        }
    }

    fn is_due(&self, debounce: Duration) -> bool {
        let (Some(first), Some(last)) = (self.first, self.last) else { return false };
        self.files.len() >= BATCH_FILES_MAX
            || last.elapsed() >= debounce
            || first.elapsed() >= debounce * BATCH_DELAY_DEBOUNCES_MAX
    }
}
