//! `serve`: the store server on the store's Unix socket (`docs/PROTOCOL.md`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mnemo::Config;
use mnemo::log::LogLocation;
use mnemo_server::server::{ServeOptions, StopCause, serve};

use crate::term::say_err;
use crate::{Cli, output};

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Exit after this many seconds without a connection (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = mnemo_server::limits::IDLE_EXIT_DEFAULT.as_secs())]
    idle_exit: u64,
}

pub(crate) fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let log = cli.log.as_deref().map(LogLocation::parse).transpose()?;
    let config =
        Config { pipeline: cli.pipeline.clone(), verify_tail_on_open: true, log, ..Config::default() };
    let mut options = ServeOptions::new(config);
    options.idle_exit = (args.idle_exit > 0).then(|| Duration::from_secs(args.idle_exit));
    let report = serve(&cli.store, options)?;
    let stopped_by = match report.stopped_by {
        StopCause::Signal => "signal",
        StopCause::Request => "shutdown request",
        StopCause::Idle => "idle period",
        _ => "other",
    };
    let summary = serde_json::json!({
        "socket": report.socket.display().to_string(),
        "calls": report.calls,
        "connections": report.connections,
        "stopped_by": stopped_by,
    });
    output(cli, &summary, || {
        say_err!(
            "stopped by {stopped_by}: answered {} calls on {} connections at {}",
            report.calls,
            report.connections,
            report.socket.display()
        );
    });
    Ok(ExitCode::SUCCESS)
}
