//! `mcp`: a Model Context Protocol server on stdio whose tools forward to the store server, started
//! if none runs (`mnemo_server::mcp`).

use std::process::ExitCode;

use clap::Args;
use mnemo_server::client::{ConnectOptions, StartCommand};
use mnemo_server::mcp::{McpOptions, run_stdio};

use crate::Cli;

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// The directory whose workspace the tools answer in when the client lists no roots (default:
    /// the working directory); a directory in a repository answers in the repository's.
    #[arg(long)]
    workspace: Option<String>,
}

pub(crate) fn run(cli: &Cli, args: &McpArgs) -> anyhow::Result<ExitCode> {
    let store = std::path::absolute(&cli.store)?;
    let start = start_command(cli, &store)?;
    let mut options = McpOptions::new(store, ConnectOptions::new("mnemo mcp").start_with(start));
    options.workspace = args.workspace.clone();
    run_stdio(options)?;
    Ok(ExitCode::SUCCESS)
}

/// The command that starts this binary's store server for `store` with the options this command
/// was given (`--pipeline`, `--log`).
pub(crate) fn start_command(cli: &Cli, store: &std::path::Path) -> std::io::Result<StartCommand> {
    let mut start = StartCommand::current_exe(store)?;
    if let Some(pipeline) = &cli.pipeline {
        start = StartCommand {
            args: [vec!["--pipeline".into(), pipeline.as_os_str().to_owned()], start.args].concat(),
            ..start
        };
    }
    if let Some(log) = &cli.log {
        start = StartCommand { args: [vec!["--log".into(), log.into()], start.args].concat(), ..start };
    }
    Ok(start)
}
