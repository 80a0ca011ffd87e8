//! One store, many processes: when the store server holds the store (an agent's hooks and `mnemo
//! mcp` start one, which keeps it while the agent works), a command that uses the store runs inside
//! that server, as its client, instead of failing on the store's lock.
//!
//! - The caller ([`through_server`]): a command that uses the store and finds a server on the store's
//!   socket sends it its command line (`command/run`), with its working directory, the environment
//!   variables commands read ([`CALLER_VARIABLES`]), and the inputs another process cannot open by
//!   their path (standard input, a pipe), spooled to files in the store directory. It writes the
//!   output as it arrives and exits with the command's exit code. With no server, the command runs
//!   in this process, as it always did.
//! - The server ([`Runner`], which `mnemo serve` registers): parses the command line as the caller
//!   did, resolves its relative paths in the caller's directory, and runs it against the server's
//!   open store, with what it prints sent back ([`context`], that thread's context).
//!
//! Commands that need the store alone (`salvage`, `accept-loss`), that start or are servers (`serve`,
//! `mcp`, `ui`), or that do not use the store (`setup`, `hook`, `demo`) never go through a server.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use mnemo::Mnemo;
use mnemo_server::client::{Client, ClientError, ConnectOptions};
use mnemo_server::command::{CommandIo, CommandRunner};
use mnemo_server::methods::{Method as _, OutputStream, RunCommand, RunCommandParams, SpooledInput};
use mnemo_server::protocol::Reason;

use crate::{Cli, Command};

pub(crate) mod context;

use context::Served;

/// The caller's environment variables a served command reads instead of the server's.
const CALLER_VARIABLES: &[&str] = &["HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"];

/// How long the caller waits for a server on the store's socket to accept it.
const SERVER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a command uses the store and may run in the server that holds it.
pub(crate) fn uses_the_store(command: &Command) -> bool {
    match command {
        Command::Import { .. }
        | Command::Export { .. }
        | Command::Sessions
        | Command::Show(_)
        | Command::Search(_)
        | Command::Read(_)
        | Command::Log { .. }
        | Command::Stats
        | Command::Rebuild { .. }
        | Command::Verify
        | Command::Compact(_)
        | Command::Context(_)
        | Command::Copy(_)
        | Command::Memory { .. }
        | Command::Recall(_)
        | Command::Sync(_) => true,
        Command::Eval { command } => crate::eval_cmd::uses_the_store(command),
        _ => false,
    }
}

// The caller's side.

/// Runs the command in the store server when one holds the store; `None` when none answers (or it
/// runs no command lines), so that the command runs in this process.
pub(crate) fn through_server(cli: &Cli) -> Option<ExitCode> {
    if !uses_the_store(&cli.command) {
        return None;
    }
    // NOTE: a command line that is not UTF-8 cannot be sent; it runs here, where a held store's
    // lock names the server to stop.
    let argv = own_command_line()?;
    match run_in_server(cli, argv)? {
        Ok(code) => Some(ExitCode::from(code)),
        Err(error) => Some(crate::report_error(cli, &error)),
    }
}

/// Runs `argv` (a `mnemo` command line on `cli`'s store) in the store server, its output written
/// here as it arrives; `None` when no server answers or it runs no command lines.
pub(crate) fn run_in_server(cli: &Cli, argv: Vec<String>) -> Option<anyhow::Result<u8>> {
    let options = ConnectOptions::new("mnemo").call_timeout(SERVER_CONNECT_TIMEOUT);
    let mut client = Client::connect(&cli.store, &options).ok()?;
    // A server of an earlier version does not know the method: nothing is sent, nothing spooled.
    if !client.server().methods.iter().any(|method| method == RunCommand::NAME) {
        return None;
    }
    match send(cli, &mut client, argv) {
        Err(error) if runs_no_commands(&error) => None,
        result => Some(result),
    }
}

/// This process's command line, if it is UTF-8 (which it must be to be sent).
fn own_command_line() -> Option<Vec<String>> {
    std::env::args_os().map(|arg| arg.into_string().ok()).collect()
}

/// A server another host embeds may run no command lines: the command then runs here, and the
/// store's lock says who holds it.
fn runs_no_commands(error: &anyhow::Error) -> bool {
    matches!(error.downcast_ref::<ClientError>(), Some(ClientError::Rpc(e)) if e.reason() == Reason::MethodNotFound)
}

fn send(cli: &Cli, client: &mut Client, argv: Vec<String>) -> anyhow::Result<u8> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let store = std::path::absolute(&cli.store)?;
    let mut env: BTreeMap<String, String> = CALLER_VARIABLES
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value)))
        .collect();
    env.insert("MNEMO_STORE".to_owned(), store.display().to_string());
    if let Some(log) = &cli.log {
        env.insert("MNEMO_LOG".to_owned(), log.clone());
    }
    let spooled = Spooled::inputs_of(cli, &store)?;
    let params =
        RunCommandParams { argv, cwd: cwd.display().to_string(), env, inputs: spooled.inputs.clone() };
    let code = client.run_command(&params, write_output).map_err(|error| match error {
        ClientError::Interrupted { .. } => anyhow::Error::new(error).context(
            "the store server stopped while it ran the command, which may have run in part (each file \
             is imported all or nothing): run the command again",
        ),
        other => other.into(),
    })?;
    drop(spooled);
    Ok(code)
}

/// Writes a piece of a served command's output where the command would have written it. A closed
/// standard output (`mnemo log | head`) ends the process quietly, as it does in-process.
fn write_output(stream: OutputStream, text: &str) {
    let written = match stream {
        OutputStream::Stdout => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
        }
        OutputStream::Stderr => std::io::stderr().write_all(text.as_bytes()),
    };
    if written.is_err() && stream == OutputStream::Stdout {
        std::process::exit(0);
    }
}

/// The caller's inputs copied to files in the store directory for the server to read, removed when
/// the command is done.
struct Spooled {
    inputs: Vec<SpooledInput>,
}

impl Spooled {
    /// `import`'s standard input (`-`) and its inputs that are not regular files (a pipe such as
    /// `<(cat file)`), each copied once, up to the import limit (a larger one is refused by the import).
    fn inputs_of(cli: &Cli, store: &Path) -> anyhow::Result<Spooled> {
        let mut spooled = Spooled { inputs: Vec::new() };
        let Command::Import { files, .. } = &cli.command else { return Ok(spooled) };
        for name in files {
            let is_regular = name != "-" && std::fs::metadata(name).is_ok_and(|m| m.is_file() || m.is_dir());
            if is_regular || spooled.inputs.iter().any(|input| &input.name == name) {
                continue;
            }
            let path = store.join(format!(".command-input-{}-{}", std::process::id(), spooled.inputs.len()));
            let input = SpooledInput { name: name.clone(), path: path.display().to_string() };
            spooled.inputs.push(input);
            spool(name, &path)?;
        }
        Ok(spooled)
    }
}

impl Drop for Spooled {
    fn drop(&mut self) {
        for input in &self.inputs {
            let _ = std::fs::remove_file(&input.path);
        }
    }
}

fn spool(name: &str, path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let read_error = |source| mnemo::Error::Read { path: name.to_owned(), source };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot spool {name} to {}", path.display()))?;
    let limit = mnemo::transcript::IMPORT_FILE_BYTES_MAX + 1;
    if name == "-" {
        std::io::copy(&mut std::io::stdin().lock().take(limit), &mut file).map_err(read_error)?;
    } else {
        let input = std::fs::File::open(name).map_err(read_error)?;
        std::io::copy(&mut input.take(limit), &mut file).map_err(read_error)?;
    }
    Ok(())
}

// The server's side.

/// Runs the command lines of `command/run` (registered by `mnemo serve`).
#[derive(Debug)]
pub(crate) struct Runner;

impl CommandRunner for Runner {
    fn run(&self, store: Arc<Mnemo>, command: RunCommandParams, io: CommandIo) -> u8 {
        let served = Rc::new(Served {
            store,
            io,
            cwd: PathBuf::from(&command.cwd),
            env: command.env,
            inputs: command.inputs,
        });
        let code = context::with(&served, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_command_line(&command.argv, &served)
            }))
            .unwrap_or_else(|_| {
                let pid = std::process::id();
                crate::term::say_err!(
                    "error: the command failed unexpectedly in the store server (pid {pid}); stop it \
                     with `kill {pid}` and run the command again: it then runs in its own process"
                );
                ExitCode::from(4)
            })
        });
        for input in &served.inputs {
            let _ = std::fs::remove_file(&input.path);
        }
        exit_code_number(code)
    }
}

fn run_command_line(argv: &[String], served: &Served) -> ExitCode {
    let mut cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(error) => {
            crate::term::print_err(&error.render().to_string());
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    if !uses_the_store(&cli.command) {
        crate::term::say_err!("error: this command does not run in the store server; run it on its own");
        return ExitCode::from(2);
    }
    if let Some(store) = served.env.get("MNEMO_STORE") {
        cli.store = PathBuf::from(store);
    }
    cli.log = served.env.get("MNEMO_LOG").cloned();
    resolve_paths(&mut cli, &served.cwd, &served.inputs);
    if let Some(pipeline) = &cli.pipeline {
        let pid = std::process::id();
        crate::term::say_err!(
            "note: the store server (pid {pid}) holds the store with its own pipeline, so --pipeline {} \
             is not applied; to run with it, stop the server (`kill {pid}`) and run the command again",
            pipeline.display()
        );
    }
    match crate::run(&cli) {
        Ok(code) => code,
        Err(error) => crate::report_error(&cli, &error),
    }
}

/// The number of an exit code (`ExitCode` keeps it to itself).
fn exit_code_number(code: ExitCode) -> u8 {
    (0..=u8::MAX).find(|number| ExitCode::from(*number) == code).unwrap_or(4)
}

/// Resolves the command line's relative paths in the caller's working directory: the server's is
/// another. Names of spooled inputs stay as they are.
fn resolve_paths(cli: &mut Cli, cwd: &Path, inputs: &[SpooledInput]) {
    let resolve = |path: &mut PathBuf| {
        if path.is_relative() {
            *path = cwd.join(&*path);
        }
    };
    if let Some(pipeline) = &mut cli.pipeline {
        resolve(pipeline);
    }
    match &mut cli.command {
        Command::Import { files, .. } => {
            for file in files.iter_mut() {
                if file != "-"
                    && !inputs.iter().any(|input| &input.name == file)
                    && Path::new(file).is_relative()
                {
                    *file = cwd.join(&*file).display().to_string();
                }
            }
        }
        Command::Export { out: Some(out), .. } => resolve(out),
        Command::Sync(args) => args.dirs_mut().iter_mut().for_each(resolve),
        Command::Eval { command } => crate::eval_cmd::paths_mut(command).into_iter().for_each(resolve),
        _ => {}
    }
}
