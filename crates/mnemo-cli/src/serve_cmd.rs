//! `serve`: the store server on the store's Unix socket (`docs/PROTOCOL.md`).

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mnemo::Config;
use mnemo::log::{LogLocation, ManualClock};
use mnemo_server::server::{ServeOptions, StopCause, serve, serve_stdio};

use crate::term::say_err;
use crate::{Cli, output};

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Exit after this many seconds without a connection (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = mnemo_server::limits::IDLE_EXIT_DEFAULT.as_secs())]
    idle_exit: u64,
    /// Print the protocol's JSON Schema document (every method's params and result, the frames and
    /// the error) and exit without opening the store.
    #[arg(long)]
    print_schema: bool,
    /// Stamp every append with this fixed time (ms since the Unix epoch) instead of the system
    /// clock's, so that the same calls make the same log byte for byte (conformance tests across
    /// clients, reproducible demonstrations). An import still stamps its records with their own
    /// times, and the log's times never run backwards.
    #[arg(long, value_name = "MS")]
    fixed_clock: Option<u64>,
    /// Serve one client on standard input and output instead of the store's socket: the process
    /// that spawns `mnemo serve --stdio` owns the store until it closes standard input.
    #[arg(long, conflicts_with = "print_schema")]
    stdio: bool,
}

pub(crate) fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if args.print_schema {
        // Written as is: the document is JSON, whose strings escape every control character.
        std::io::stdout().write_all(mnemo_server::methods::schema_document().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let log = cli.log.as_deref().map(LogLocation::parse).transpose()?;
    let mut config =
        Config { pipeline: cli.pipeline.clone(), verify_tail_on_open: true, log, ..Config::default() };
    if let Some(ms) = args.fixed_clock {
        config.clock = std::sync::Arc::new(ManualClock::new(ms, 0));
    }
    let mut options = ServeOptions::new(config);
    // A command line that finds the store held by this server runs in it (`served`).
    options.commands = Some(std::sync::Arc::new(crate::served::Runner));
    options.idle_exit = (args.idle_exit > 0).then(|| Duration::from_secs(args.idle_exit));
    let stopped_by = |cause| match cause {
        StopCause::Signal => "signal",
        StopCause::Request => "shutdown request",
        StopCause::Idle => "idle period",
        StopCause::InputClosed => "end of standard input",
        _ => "other",
    };
    if args.stdio {
        // Standard output carries the protocol: the report goes to standard error only.
        let report = serve_stdio(&cli.store, options)?;
        say_err!(
            "stopped by {}: answered {} calls on standard input",
            stopped_by(report.stopped_by),
            report.calls
        );
        return Ok(ExitCode::SUCCESS);
    }
    let report = serve(&cli.store, options)?;
    let stopped_by = stopped_by(report.stopped_by);
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
