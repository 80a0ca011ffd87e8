//! `serve`: the store server on the store's Unix socket (`docs/PROTOCOL.md`).

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mnemo::Config;
use mnemo::log::{LogLocation, ManualClock};
use mnemo_server::server::{ServeOptions, StopCause, serve, serve_stdio};

use crate::term::{say, say_err};
use crate::{Cli, output, progress};

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

/// `mnemo bench --server`: the load workload on a fresh store under `out`, its report written to
/// `out/server-load.json`. Exit 1 when an acknowledged append is missing from the log afterwards.
pub(crate) fn bench(cli: &Cli, out: &std::path::Path, clients: usize, secs: u64) -> anyhow::Result<ExitCode> {
    use mnemo_server::client::{Client, ConnectOptions, StartCommand};
    use mnemo_server::load::{LoadOptions, missing_acknowledged, run};
    use mnemo_server::methods::{Empty, Shutdown};

    std::fs::create_dir_all(out)?;
    let store = std::path::absolute(out.join(format!("server-store-{}", std::process::id())))?;
    let start = StartCommand::current_exe(&store)?.arg("--idle-exit").arg("60");
    let connect = ConnectOptions::new("mnemo bench").start_with(start);
    let spinner = progress(0, "bench");
    spinner.set_message(format!("store server: {clients} clients for {secs} s"));
    let report = run(&store, &LoadOptions::new(clients, Duration::from_secs(secs), connect.clone()));
    let stopped = Client::connect(&store, &ConnectOptions::new("mnemo bench"))
        .and_then(|mut c| c.call::<Shutdown>(&Empty {}));
    let report = report?;
    stopped?;
    spinner.set_message("checking every acknowledged append");
    // The server closes the store after its last answer; wait for the store's lock to be free.
    let began = std::time::Instant::now();
    let missing = loop {
        match missing_acknowledged(&store, &report) {
            Err(mnemo::Error::Log(mnemo::log::LogError::Locked { .. }))
                if began.elapsed() < Duration::from_secs(120) =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => break other?,
        }
    };
    spinner.finish_and_clear();
    let summary = serde_json::json!({
        "workload": "store server: appends and searches on one Unix socket",
        "report": report,
        "acknowledged": report.acknowledged.len(),
        "missing_acknowledged": missing.len(),
    });
    let path = out.join("server-load.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&summary)?)?;
    output(cli, &summary, || {
        say!("store server, {} clients, {:.1} s", report.clients, report.elapsed_ms as f64 / 1000.0);
        say!("  call     count      p50 µs     p99 µs     max µs");
        for (name, latency) in [("append", report.appends), ("search", report.searches)] {
            say!(
                "  {name:<6} {:>7} {:>11} {:>10} {:>10}",
                latency.calls,
                latency.p50_us,
                latency.p99_us,
                latency.max_us
            );
        }
        say!(
            "  {} acknowledged appends/s; {} calls refused as overloaded (retried)",
            report.appends_per_sec,
            report.overloaded
        );
        say!("  acknowledged appends missing from the log afterwards: {}", missing.len());
        say!("wrote {}", path.display());
    });
    Ok(if missing.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
