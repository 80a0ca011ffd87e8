//! `mnemo setup claude-code|codex [--print] [--remove] [--yes]`: the MCP server and hooks that give
//! a coding agent a memory, written into the host's own configuration (`docs/HOOKS.md`).
//!
//! - Claude Code: the `mnemo` MCP server in `~/.claude.json` (`mcpServers`, its user scope) and the
//!   `SessionStart`, `Stop`, `SubagentStop`, `PreCompact` and `SessionEnd` hooks in `~/.claude/settings.json`
//!   (`$CLAUDE_CONFIG_DIR` instead of `~/.claude` and `~` when set).
//! - Codex: `[mcp_servers.mnemo]` and `[[hooks.SessionStart]]`, `[[hooks.Stop]]` and
//!   `[[hooks.PreCompact]]` in `~/.codex/config.toml` (`$CODEX_HOME` when set), as one marked block.
//!
//! Without `--yes` it only shows the change. It adds entries and never rewrites anything else:
//! every byte it did not add stays as it was (JSON members and elements are inserted and taken out
//! in place; the TOML block is appended and taken out whole). A file it cannot parse is refused,
//! and so is an entry named `mnemo` it did not add. `--remove` takes out exactly what it added.

mod json_text;
mod toml_text;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use mnemo::Error;

use crate::Cli;
use crate::hook_cmd::Host;
use crate::term::say;

/// The timeout written into each hook entry, in seconds: the host's outer bound; the hook keeps
/// to its own budget (2 s by default) well inside it.
pub(crate) const HOOK_HOST_TIMEOUT_SECS: u64 = 10;

/// Largest configuration file read, in bytes.
const CONFIG_BYTES_MAX: u64 = 64 * 1024 * 1024;

#[derive(Debug, Args)]
pub(crate) struct SetupArgs {
    /// The host to configure.
    host: Host,
    /// Print the configuration to add, touching nothing.
    #[arg(long)]
    print: bool,
    /// Take out what an earlier `mnemo setup` added.
    #[arg(long)]
    remove: bool,
    /// Write the change (without it the change is only shown).
    #[arg(long)]
    yes: bool,
}

/// What setup writes for a store: the commands the host runs.
struct Commands {
    /// The MCP server: the program and its arguments.
    program: String,
    mcp_args: Vec<String>,
    /// The hook command line (run by the host's shell).
    hook: String,
}

impl Commands {
    fn new(host: Host, store: &Path) -> anyhow::Result<Commands> {
        let exe = std::env::current_exe().context("cannot name the mnemo executable")?;
        let program = exe.display().to_string();
        let store = store.display().to_string();
        let hook = format!("{} --store {} hook {}", shell_word(&program), shell_word(&store), host.name());
        Ok(Commands { program, mcp_args: vec!["--store".to_owned(), store, "mcp".to_owned()], hook })
    }
}

/// `word` as one word of a POSIX shell command line.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// One configuration file's change.
struct Change {
    path: PathBuf,
    /// The file's text before (`None`: it does not exist).
    before: Option<String>,
    /// After (`None`: delete it: it held only what setup had added).
    after: Option<String>,
}

pub(crate) fn run(cli: &Cli, args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let store = setup_store(cli)?;
    let commands = Commands::new(args.host, &store)?;
    if args.print {
        print_configuration(args.host, &commands);
        return Ok(ExitCode::SUCCESS);
    }
    let changes = match args.host {
        Host::ClaudeCode => claude_changes(&commands, args.remove)?,
        Host::Codex => codex_changes(&commands, args.remove)?,
    };
    let changes: Vec<Change> = changes.into_iter().filter(|c| c.before != c.after).collect();
    if changes.is_empty() {
        say!(
            "{}: nothing to change ({})",
            args.host.name(),
            if args.remove { "no entry of mnemo setup is there" } else { "already set up" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    say!("store: {}", store.display());
    for change in &changes {
        print_diff(change);
    }
    if !args.yes {
        say!("nothing written; run again with --yes to write this change");
        return Ok(ExitCode::SUCCESS);
    }
    for change in &changes {
        write(change)?;
    }
    say!(
        "{} {} file(s){}",
        if args.remove { "updated" } else { "wrote" },
        changes.len(),
        if args.remove { "" } else { "; restart the agent to load the configuration" }
    );
    Ok(ExitCode::SUCCESS)
}

/// The store the host's commands name: `--store` (or `$MNEMO_STORE`, else the default store,
/// `~/.mnemo`) made absolute, so that it is the same whichever directory the agent works in.
fn setup_store(cli: &Cli) -> anyhow::Result<PathBuf> {
    Ok(std::path::absolute(&cli.store)?)
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).ok_or_else(|| {
        Error::InvalidInput("HOME is not set: cannot find the host's configuration".to_owned()).into()
    })
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::Read { path: path.display().to_string(), source: e }.into()),
        Ok(m) if m.len() > CONFIG_BYTES_MAX => {
            return Err(Error::InvalidInput(format!(
                "{}: {} bytes, more than {CONFIG_BYTES_MAX}",
                path.display(),
                m.len()
            ))
            .into());
        }
        Ok(_) => {}
    }
    let bytes =
        std::fs::read(path).map_err(|e| Error::Read { path: path.display().to_string(), source: e })?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Error::InvalidInput(format!("{}: not UTF-8 text; not touched", path.display())).into())
}

/// Writes the change whole or not at all (a new file renamed over the old one, keeping its mode).
fn write(change: &Change) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let Some(after) = &change.after else {
        std::fs::remove_file(&change.path)
            .with_context(|| format!("cannot remove {}", change.path.display()))?;
        say!("removed {} (it held only what mnemo setup had added)", change.path.display());
        return Ok(());
    };
    let parent = change.path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let mode = std::fs::metadata(&change.path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let name = change.path.file_name().map_or_else(|| "config".into(), |n| n.to_string_lossy().into_owned());
    let partial = parent.join(format!(".{name}.mnemo-setup.partial"));
    let written = (|| -> std::io::Result<()> {
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&partial)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(after.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&partial, &change.path)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(anyhow::Error::from(error).context(format!("cannot write {}", change.path.display())));
    }
    say!("wrote {}", change.path.display());
    Ok(())
}

/// The change as a diff of lines: the unchanged lines around it are left out.
fn print_diff(change: &Change) {
    let before: Vec<&str> = change.before.as_deref().map_or_else(Vec::new, |t| t.lines().collect());
    let after: Vec<&str> = change.after.as_deref().map_or_else(Vec::new, |t| t.lines().collect());
    let head = before.iter().zip(&after).take_while(|(a, b)| a == b).count();
    let tail =
        before[head..].iter().rev().zip(after[head..].iter().rev()).take_while(|(a, b)| a == b).count();
    let from =
        if change.before.is_some() { change.path.display().to_string() } else { "/dev/null".to_owned() };
    let to = if change.after.is_some() { change.path.display().to_string() } else { "/dev/null".to_owned() };
    say!("--- {from}");
    say!("+++ {to}");
    say!("@@ -{},{} +{},{} @@", head + 1, before.len() - head - tail, head + 1, after.len() - head - tail);
    for line in &before[head..before.len() - tail] {
        say!("-{line}");
    }
    for line in &after[head..after.len() - tail] {
        say!("+{line}");
    }
}

fn print_configuration(host: Host, commands: &Commands) {
    match host {
        Host::ClaudeCode => {
            let (settings, claude_json) = claude_paths().unwrap_or_default();
            say!("# {}: the MCP server (user scope)", claude_json.display());
            say!("{}", pretty(&serde_json::json!({ "mcpServers": { "mnemo": claude_mcp(commands) } })));
            say!("# {}: the hooks", settings.display());
            say!("{}", pretty(&serde_json::json!({ "hooks": claude_hooks(commands) })));
        }
        Host::Codex => {
            let config = codex_path().unwrap_or_default();
            say!("# {}", config.display());
            say!("{}", toml_text::block(commands));
        }
    }
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

// Claude Code ----------------------------------------------------------------------------------

/// The hook events setup registers with Claude Code.
const CLAUDE_EVENTS: [&str; 5] = ["SessionStart", "Stop", "SubagentStop", "PreCompact", "SessionEnd"];

/// `settings.json` and `.claude.json`.
fn claude_paths() -> anyhow::Result<(PathBuf, PathBuf)> {
    Ok(match env_dir("CLAUDE_CONFIG_DIR") {
        Some(dir) => (dir.join("settings.json"), dir.join(".claude.json")),
        None => {
            let home = home()?;
            (home.join(".claude/settings.json"), home.join(".claude.json"))
        }
    })
}

fn claude_mcp(commands: &Commands) -> serde_json::Value {
    serde_json::json!({ "type": "stdio", "command": commands.program, "args": commands.mcp_args, "env": {} })
}

fn claude_group(commands: &Commands) -> serde_json::Value {
    serde_json::json!({
        "hooks": [{ "type": "command", "command": commands.hook, "timeout": HOOK_HOST_TIMEOUT_SECS }]
    })
}

fn claude_hooks(commands: &Commands) -> serde_json::Value {
    let mut hooks = serde_json::Map::new();
    for event in CLAUDE_EVENTS {
        hooks.insert(event.to_owned(), serde_json::json!([claude_group(commands)]));
    }
    serde_json::Value::Object(hooks)
}

fn claude_changes(commands: &Commands, remove: bool) -> anyhow::Result<Vec<Change>> {
    let (settings, claude_json) = claude_paths()?;
    let mut changes = Vec::new();
    let before = read(&claude_json)?;
    let after = json_edit(&claude_json, before.as_deref(), |text, root| {
        json_server_edits(text, root, "mcpServers", &claude_mcp(commands), remove)
    })?;
    changes.push(Change { path: claude_json, before, after });
    let before = read(&settings)?;
    let after = json_edit(&settings, before.as_deref(), |text, root| {
        json_hook_edits(text, root, &CLAUDE_EVENTS, &claude_group(commands), remove, " hook claude-code")
    })?;
    changes.push(Change { path: settings, before, after });
    Ok(changes)
}

/// The text of a JSON configuration file after `edits`, read and checked first. A missing file is
/// read as `{}`; a file that `--remove` leaves as the `{}` setup would have made it from nothing is
/// deleted (`None`).
fn json_edit(
    path: &Path,
    text: Option<&str>,
    edits: impl FnOnce(&str, &json_text::Node) -> anyhow::Result<Vec<json_text::Edit>>,
) -> anyhow::Result<Option<String>> {
    const NEW: &str = "{\n}\n";
    const EMPTY: &str = "{}\n";
    const CREATED_SERVERS_EMPTIED: &str = "{\n  \"mcpServers\": {}\n}\n";
    let source = text.unwrap_or(NEW);
    if let Err(error) = serde_json::from_str::<serde_json::Value>(source) {
        return Err(Error::InvalidInput(format!(
            "{}: not valid JSON ({error}); not touched: fix it, or add the entries `mnemo setup --print` shows by hand",
            path.display()
        ))
        .into());
    }
    let root =
        json_text::parse(source).map_err(|e| Error::InvalidInput(format!("{}: {e}", path.display())))?;
    if !matches!(root, json_text::Node::Object { .. }) {
        return Err(Error::InvalidInput(format!("{}: not a JSON object; not touched", path.display())).into());
    }
    let edits = edits(source, &root)
        .map_err(|e| Error::InvalidInput(format!("{}: {e:#}; not touched", path.display())))?;
    if edits.is_empty() {
        return Ok(text.map(str::to_owned));
    }
    let after = json_text::apply(source, edits);
    serde_json::from_str::<serde_json::Value>(&after).with_context(|| {
        format!("{}: the edited text would not be valid JSON; not touched", path.display())
    })?;
    // NOTE: setup makes a missing file `{}` plus its members, so `{}` alone after a removal is a
    // file it created: it is deleted rather than left behind.
    if after == EMPTY || after == CREATED_SERVERS_EMPTIED {
        return Ok(None);
    }
    Ok(Some(after))
}

/// The edits that add (or take out) `"mnemo": server` in the root's `section` object.
fn json_server_edits(
    text: &str,
    root: &json_text::Node,
    section: &str,
    server: &serde_json::Value,
    remove: bool,
) -> anyhow::Result<Vec<json_text::Edit>> {
    let Some(servers) = root.member(section) else {
        if remove {
            return Ok(Vec::new());
        }
        return Ok(vec![json_text::add(text, root, Some(section), &serde_json::json!({ "mnemo": server }))]);
    };
    let json_text::Node::Object { members, .. } = &servers.value else {
        anyhow::bail!("`{section}` is not an object");
    };
    let existing = members.iter().position(|m| m.key == "mnemo");
    match (existing, remove) {
        (None, false) => Ok(vec![json_text::add(text, &servers.value, Some("mnemo"), server)]),
        (None, true) => Ok(Vec::new()),
        (Some(index), _) => {
            let span = members[index].value.span();
            let value: serde_json::Value = serde_json::from_str(&text[span])?;
            let ours = value.get("args").and_then(|a| a.as_array()).and_then(|a| a.last())
                == Some(&"mcp".into())
                && value.get("command").and_then(|c| c.as_str()).is_some_and(|c| c.ends_with("mnemo"));
            if !ours {
                anyhow::bail!(
                    "`{section}.mnemo` is there and was not added by mnemo setup; remove or rename it first"
                );
            }
            if !remove {
                if value == *server {
                    return Ok(Vec::new());
                }
                anyhow::bail!(
                    "`{section}.mnemo` names another executable or store; `mnemo setup --remove` it first"
                );
            }
            // NOTE: the section itself stays (hosts write an empty one themselves).
            Ok(vec![json_text::remove(&servers.value, index)])
        }
    }
}

fn root_index(root: &json_text::Node, key: &str) -> usize {
    match root {
        json_text::Node::Object { members, .. } => members.iter().position(|m| m.key == key).unwrap_or(0),
        _ => 0,
    }
}

/// Whether a hook group is one setup added: its only hook runs `mnemo ... hook HOST`.
fn is_our_group(text: &str, group: &json_text::Node, suffix: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text[group.span()]) else { return false };
    let Some(hooks) = value.get("hooks").and_then(|h| h.as_array()) else { return false };
    hooks.len() == 1
        && hooks[0]
            .get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| c.ends_with(suffix) && c.contains(" --store "))
}

/// The edits that add (or take out) setup's hook group under each of `events` in the root's
/// `hooks` object; an event array or `hooks` object left empty by `--remove` is taken out too.
fn json_hook_edits(
    text: &str,
    root: &json_text::Node,
    events: &[&str],
    group: &serde_json::Value,
    remove: bool,
    suffix: &str,
) -> anyhow::Result<Vec<json_text::Edit>> {
    let Some(hooks) = root.member("hooks") else {
        if remove {
            return Ok(Vec::new());
        }
        let mut all = serde_json::Map::new();
        for event in events {
            all.insert((*event).to_owned(), serde_json::json!([group]));
        }
        return Ok(vec![json_text::add(text, root, Some("hooks"), &serde_json::Value::Object(all))]);
    };
    let json_text::Node::Object { members, .. } = &hooks.value else {
        anyhow::bail!("`hooks` is not an object");
    };
    let mut edits = Vec::new();
    let mut emptied_events = 0;
    for event in events {
        let Some(index) = members.iter().position(|m| m.key == *event) else {
            if !remove {
                edits.push(json_text::add(text, &hooks.value, Some(event), &serde_json::json!([group])));
            }
            continue;
        };
        let json_text::Node::Array { items, .. } = &members[index].value else {
            anyhow::bail!("`hooks.{event}` is not an array");
        };
        let ours: Vec<usize> = (0..items.len()).filter(|i| is_our_group(text, &items[*i], suffix)).collect();
        match (remove, ours.is_empty()) {
            (false, true) => edits.push(json_text::add(text, &members[index].value, None, group)),
            (false, false) | (true, true) => {}
            (true, false) if ours.len() == items.len() => {
                emptied_events += 1;
                edits.push(json_text::remove(&hooks.value, index));
            }
            (true, false) => {
                // Taken out last first, so that each edit's neighbours are still where they were.
                for i in ours.iter().rev() {
                    edits.push(json_text::remove(&members[index].value, *i));
                }
            }
        }
    }
    if remove && emptied_events > 0 && emptied_events == members.len() {
        return Ok(vec![json_text::remove(root, root_index(root, "hooks"))]);
    }
    if edits.len() > 1 {
        merge_adjacent(&mut edits);
    }
    Ok(edits)
}

/// Removals of neighbouring children overlap at their shared separators; several removals in one
/// container are joined into one edit covering them all.
fn merge_adjacent(edits: &mut Vec<json_text::Edit>) {
    edits.sort_by_key(|e| e.range.start);
    let mut merged: Vec<json_text::Edit> = Vec::new();
    for edit in edits.drain(..) {
        match merged.last_mut() {
            Some(last)
                if edit.range.start < last.range.end && edit.text.is_empty() && last.text.is_empty() =>
            {
                last.range.end = last.range.end.max(edit.range.end);
            }
            _ => merged.push(edit),
        }
    }
    *edits = merged;
}

// Codex -----------------------------------------------------------------------------------------

/// The hook events setup registers with Codex (which has no session-end event).
pub(crate) const CODEX_EVENTS: [&str; 3] = ["SessionStart", "Stop", "PreCompact"];

fn codex_path() -> anyhow::Result<PathBuf> {
    Ok(match env_dir("CODEX_HOME") {
        Some(dir) => dir.join("config.toml"),
        None => home()?.join(".codex/config.toml"),
    })
}

fn codex_changes(commands: &Commands, remove: bool) -> anyhow::Result<Vec<Change>> {
    let path = codex_path()?;
    let before = read(&path)?;
    let after = toml_text::edit(&path, before.as_deref(), commands, remove)?;
    Ok(vec![Change { path, before, after }])
}
