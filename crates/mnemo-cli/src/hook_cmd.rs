//! `mnemo hook claude-code|codex`: the command a coding agent's host runs at its lifecycle events,
//! with the event's JSON on standard input (`docs/HOOKS.md`).
//!
//! - `SessionStart`: prints the `hookSpecificOutput.additionalContext` JSON both hosts read — the
//!   workspace's standing facts and the memories most relevant to the session (its recent turns,
//!   else the workspace's latest session), at most `--context-tokens` — and nothing else. No
//!   memory to give: nothing is printed. The workspace is the one the session is recorded in: the
//!   session's own when the store holds it, else what its `cwd` resolves to (`mnemo::workspace_of`:
//!   the repository's root from any of its folders).
//! - `Stop`, `PreCompact`, `SessionEnd`: captures the transcript the host names (its complete
//!   lines; what the store holds already is recognised and not appended again).
//! - `SubagentStop`: captures the sub-agent's own transcript (`agent_transcript_path`), which
//!   the importer links to its parent session as it links every sub-agent's file.
//!
//! Everything goes through the store server (started when none runs), so a running `mnemo serve`
//! or `mnemo mcp` on the same store is no obstacle. A hook runs inside the agent's loop: whatever
//! goes wrong (no server, a locked store, bad input, the time budget spent) it exits 0 with
//! nothing on standard output, and appends what went wrong to `hooks.log` in the store directory.

use std::io::{ErrorKind, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use mnemo_server::client::{Client, ClientError, ConnectOptions, StartCommand};
use mnemo_server::methods::{Capture, CaptureParams, StartBlock, StartBlockParams};
use serde::Deserialize;

use crate::Cli;
use crate::term::say_err;

/// How long a hook may take unless told otherwise (`--budget-ms`).
pub(crate) const HOOK_BUDGET_MS_DEFAULT: u64 = 2_000;

/// Longest `--budget-ms`.
pub(crate) const HOOK_BUDGET_MS_MAX: u64 = 60_000;

/// Largest session-start context unless told otherwise (`--context-tokens`), in tokens.
pub(crate) const HOOK_CONTEXT_TOKENS_DEFAULT: u64 = 1_500;

/// Largest hook input read from standard input, in bytes; a longer one is refused as bad input.
pub(crate) const HOOK_INPUT_BYTES_MAX: u64 = 1024 * 1024;

/// The failure log's name inside the store directory.
pub(crate) const HOOK_LOG_FILE_NAME: &str = "hooks.log";

/// Size past which the failure log is moved to `hooks.log.1` (replacing an older one) before the
/// next line is appended, in bytes.
pub(crate) const HOOK_LOG_BYTES_MAX: u64 = 1024 * 1024;

/// Time kept back from the budget for the answer to be printed and the failure logged.
const HOOK_BUDGET_RESERVE: Duration = Duration::from_millis(150);

#[derive(Debug, Args)]
pub(crate) struct HookArgs {
    /// The host that runs the hook (it decides the transcript's format).
    host: Host,
    /// The time budget, in milliseconds (1..=60000): past it the hook gives up, logs why, and
    /// exits 0 with nothing on standard output.
    #[arg(long, value_name = "MS", default_value_t = HOOK_BUDGET_MS_DEFAULT)]
    budget_ms: u64,
    /// Largest session-start context, in tokens (1..=16000).
    #[arg(long, value_name = "TOKENS", default_value_t = HOOK_CONTEXT_TOKENS_DEFAULT)]
    context_tokens: u64,
    /// Never start a store server: with none running, the hook logs that and does nothing.
    #[arg(long)]
    no_start: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Host {
    /// Claude Code (`~/.claude/settings.json` hooks; transcripts in its session format).
    ClaudeCode,
    /// Codex CLI (`[hooks]` in `~/.codex/config.toml`; transcripts are rollouts).
    Codex,
}

impl Host {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
        }
    }
}

/// The members of a host's hook input this command reads; hosts send more, which is ignored.
#[derive(Debug, Deserialize)]
struct HookInput {
    session_id: String,
    /// `null` in Codex's input when the session has no rollout file.
    #[serde(default)]
    transcript_path: Option<String>,
    cwd: String,
    hook_event_name: String,
    /// `SubagentStop`: the sub-agent's own transcript (`transcript_path` is its parent's).
    #[serde(default)]
    agent_transcript_path: Option<String>,
}

/// What a hook that worked prints: nothing, or one JSON document.
type Printed = Option<String>;

pub(crate) fn run(cli: &Cli, args: &HookArgs) -> anyhow::Result<ExitCode> {
    let began = Instant::now();
    let store = std::path::absolute(&cli.store).unwrap_or_else(|_| cli.store.clone());
    let budget = Duration::from_millis(args.budget_ms.clamp(1, HOOK_BUDGET_MS_MAX));
    let log = FailureLog { store: store.clone(), host: args.host };
    if !(1..=HOOK_BUDGET_MS_MAX).contains(&args.budget_ms) {
        log.record("-", began, &format!("--budget-ms {}: expected 1..={HOOK_BUDGET_MS_MAX}", args.budget_ms));
    }
    let tokens_max = mnemo::memory::START_BLOCK_TOKENS_MAX;
    if !(1..=tokens_max).contains(&args.context_tokens) {
        log.record(
            "-",
            began,
            &format!("--context-tokens {}: expected 1..={tokens_max}", args.context_tokens),
        );
        return Ok(ExitCode::SUCCESS);
    }
    let start = match args.no_start {
        true => None,
        false => match crate::mcp_cmd::start_command(cli, &store) {
            Ok(command) => Some(command),
            Err(error) => {
                log.record("-", began, &format!("cannot name the server to start: {error:#}"));
                None
            }
        },
    };
    let job = Job { host: args.host, store, start, context_tokens: args.context_tokens, began, budget };
    let (done, outcome) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("mnemo-hook".to_owned()).spawn(move || {
        let mut event = String::from("-");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(&mut event)));
        let result = result.unwrap_or_else(|_| Err(anyhow::anyhow!("the hook panicked")));
        // The receiver is gone only when the budget ran out first, which is logged there.
        let _ = done.send((event, result));
    });
    if let Err(error) = spawned {
        log.record("-", began, &format!("cannot start the hook's thread: {error}"));
        return Ok(ExitCode::SUCCESS);
    }
    match outcome.recv_timeout(budget) {
        Ok((_, Ok(Some(printed)))) => {
            let mut stdout = std::io::stdout().lock();
            if let Err(error) = stdout.write_all(printed.as_bytes()).and_then(|()| stdout.flush()) {
                log.record("SessionStart", began, &format!("cannot write the context: {error}"));
            }
        }
        Ok((_, Ok(None))) => {}
        Ok((event, Err(error))) => log.record(&event, began, &format!("{error:#}")),
        Err(_) => log.record("-", began, &format!("gave up at the time budget of {} ms", budget.as_millis())),
    }
    Ok(ExitCode::SUCCESS)
}

/// One hook run's work, done on its own thread so that the budget holds whatever blocks.
struct Job {
    host: Host,
    store: PathBuf,
    start: Option<StartCommand>,
    context_tokens: u64,
    began: Instant,
    budget: Duration,
}

impl Job {
    fn run(&self, event: &mut String) -> anyhow::Result<Printed> {
        let input = read_input()?;
        event.clone_from(&input.hook_event_name);
        match input.hook_event_name.as_str() {
            "SessionStart" => self.session_start(&input),
            "Stop" | "PreCompact" | "SessionEnd" => self.capture(&input).map(|()| None),
            "SubagentStop" => self.capture_subagent(&input).map(|()| None),
            other => anyhow::bail!(
                "hook_event_name {other:?}: expected SessionStart, Stop, SubagentStop, PreCompact or SessionEnd"
            ),
        }
    }

    /// What is left of the budget for waiting on the server.
    fn remaining(&self) -> anyhow::Result<Duration> {
        let left = self.budget.saturating_sub(self.began.elapsed()).saturating_sub(HOOK_BUDGET_RESERVE);
        anyhow::ensure!(!left.is_zero(), "the time budget of {} ms is spent", self.budget.as_millis());
        Ok(left)
    }

    fn connect(&self) -> anyhow::Result<Client> {
        let left = self.remaining()?;
        let mut options = ConnectOptions::new(format!("mnemo hook {}", self.host.name()))
            .call_timeout(left)
            .start_wait(left);
        if let Some(start) = &self.start {
            options = options.start_with(start.clone());
        }
        Client::connect(&self.store, &options).map_err(|error| match error {
            ClientError::Io(io) if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                anyhow::anyhow!("the store server did not answer within {} ms", left.as_millis())
            }
            other => other.into(),
        })
    }

    fn session_start(&self, input: &HookInput) -> anyhow::Result<Printed> {
        // The workspace of the directory the session starts in, as its transcript's import will
        // record it: the repository's root from any of its folders or working trees.
        let workspace = match input.cwd.as_str() {
            "" => None,
            cwd => Some(mnemo::workspace_of(cwd).map_err(|e| anyhow::anyhow!("cwd {cwd:?}: {e}"))?),
        };
        let mut client = self.connect()?;
        let params = StartBlockParams {
            session: Some(input.session_id.clone()).filter(|s| !s.is_empty()),
            workspace: workspace.map(|w| w.as_str().to_owned()),
            query: None,
            budget_tokens: Some(self.context_tokens),
        };
        let block = client.call::<StartBlock>(&params)?;
        if block.text.is_empty() {
            return Ok(None);
        }
        let output = serde_json::json!({
            "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": block.text }
        });
        Ok(Some(format!("{output}\n")))
    }

    fn capture(&self, input: &HookInput) -> anyhow::Result<()> {
        let transcript =
            input.transcript_path.as_deref().filter(|path| !path.is_empty()).ok_or_else(|| {
                anyhow::anyhow!("no transcript_path in the {} input", input.hook_event_name)
            })?;
        let path = transcript_path(transcript, &input.cwd);
        let mut client = self.connect()?;
        for file in std::iter::once(path.clone()).chain(subagent_files(self.host, &path)) {
            self.capture_file(&mut client, &file)?;
        }
        Ok(())
    }

    /// A sub-agent finished: its own transcript is captured. Its lines name the session that ran
    /// it (Claude Code's `sessionId` with `isSidechain`, Codex's `thread_spawn` source), which the
    /// importer records as the sub-agent session's parent; the parent's transcript waits for the
    /// parent's own `Stop`.
    fn capture_subagent(&self, input: &HookInput) -> anyhow::Result<()> {
        let transcript =
            input.agent_transcript_path.as_deref().filter(|path| !path.is_empty()).ok_or_else(|| {
                anyhow::anyhow!("no agent_transcript_path in the {} input", input.hook_event_name)
            })?;
        let path = transcript_path(transcript, &input.cwd);
        anyhow::ensure!(path.is_file(), "agent_transcript_path {}: no such file", path.display());
        let mut client = self.connect()?;
        self.capture_file(&mut client, &path)
    }

    fn capture_file(&self, client: &mut Client, file: &Path) -> anyhow::Result<()> {
        let params =
            CaptureParams { path: file.display().to_string(), format: Some(self.host.name().to_owned()) };
        client.call::<Capture>(&params)?;
        Ok(())
    }
}

/// Claude Code writes each sub-agent's transcript to `<session>/subagents/agent-*.jsonl` beside
/// the session's own file; they are captured with it, in name order. Codex names none.
fn subagent_files(host: Host, transcript: &Path) -> Vec<PathBuf> {
    let (Host::ClaudeCode, Some(stem)) = (host, transcript.file_stem()) else { return Vec::new() };
    let folder = transcript.with_file_name(stem).join("subagents");
    let Ok(entries) = std::fs::read_dir(&folder) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl") && path.is_file())
        .collect();
    files.sort();
    files
}

/// The transcript's path as the server must read it: `~/` is the home directory, and a relative
/// path is relative to the host's working directory (the server runs elsewhere).
fn transcript_path(path: &str, cwd: &str) -> PathBuf {
    if let (Some(rest), Some(home)) = (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        return Path::new(&home).join(rest);
    }
    Path::new(cwd).join(path)
}

fn read_input() -> anyhow::Result<HookInput> {
    let mut bytes = Vec::new();
    std::io::stdin().lock().take(HOOK_INPUT_BYTES_MAX + 1).read_to_end(&mut bytes)?;
    anyhow::ensure!(
        bytes.len() as u64 <= HOOK_INPUT_BYTES_MAX,
        "the hook input on stdin is longer than {HOOK_INPUT_BYTES_MAX} bytes"
    );
    serde_json::from_slice(&bytes).map_err(|error| {
        let shown: String = String::from_utf8_lossy(&bytes).chars().take(80).collect();
        anyhow::anyhow!("the hook input on stdin is not the host's hook JSON ({error}); it begins {shown:?}")
    })
}

/// Where failures go: `hooks.log` in the store directory, one line each.
struct FailureLog {
    store: PathBuf,
    host: Host,
}

impl FailureLog {
    fn record(&self, event: &str, began: Instant, error: &str) {
        let now = time::OffsetDateTime::now_utc();
        let stamp = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            now.year(),
            u8::from(now.month()),
            now.day(),
            now.hour(),
            now.minute(),
            now.second()
        );
        let error = error.replace('\n', " ");
        let line = format!(
            "{stamp} {} {event} after {} ms: {error}\n",
            self.host.name(),
            began.elapsed().as_millis()
        );
        if let Err(write_error) = self.append(&line) {
            say_err!(
                "mnemo hook: {error} (and cannot write {}: {write_error})",
                self.store.join(HOOK_LOG_FILE_NAME).display()
            );
        }
    }

    fn append(&self, line: &str) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.store)?;
        let path = self.store.join(HOOK_LOG_FILE_NAME);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() >= HOOK_LOG_BYTES_MAX) {
            std::fs::rename(&path, self.store.join(format!("{HOOK_LOG_FILE_NAME}.1")))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(mnemo::log::PRIVATE_FILE_MODE)
            .open(&path)?;
        file.write_all(line.as_bytes())
    }
}
