//! `mnemo bench`: the benchmark harness, Mnemo beside the SQLite baseline in one run. Built only
//! with the feature `bench` (decision 0220).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mnemo_benches::harness::{self, BenchOptions};
use mnemo_benches::report;

use crate::term::{say, say_err, say_inline};
use crate::{Cli, output, progress};

/// Options of `mnemo bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Where the stores, report.json and charts/ go.
    #[arg(long, default_value = "bench-out")]
    out: PathBuf,
    /// A smoke run with tiny sizes: checks the harness works, not the targets.
    #[arg(long)]
    quick: bool,
    /// Events in the generated corpus (bulk import, rebuild, disk use); default 1,000,000.
    #[arg(long)]
    events: Option<u64>,
    /// Events the single durable writer appends, one append each.
    #[arg(long)]
    single_writer_events: Option<u64>,
    /// Events each of the 64 concurrent sessions appends.
    #[arg(long)]
    events_per_session: Option<u64>,
    /// Alternating rounds of the append workloads (the median counts).
    #[arg(long)]
    rounds: Option<usize>,
    /// Seed of the workload generator.
    #[arg(long)]
    seed: Option<u64>,
    /// Corpus sizes of the history-search workload, in messages (comma-separated).
    #[arg(long, value_delimiter = ',')]
    search_sizes: Option<Vec<u64>>,
    /// Item counts of the memory key-search workload (comma-separated).
    #[arg(long, value_delimiter = ',')]
    memory_sizes: Option<Vec<u64>>,
    /// Messages of the scale workload's transcript-shaped corpus (0 skips it); default 1,000,000.
    #[arg(long)]
    scale_messages: Option<u64>,
    /// Also run the append workloads on a NATS JetStream cluster (comma-separated nats://HOST:PORT),
    /// each round on a fresh 3-replica stream.
    #[arg(long, env = "MNEMO_BENCH_NATS")]
    nats: Option<String>,
    /// Run only the context-quality workload: for each session of the corpus (the real fixtures
    /// and two generated long sessions) and windows 8k/32k/128k, whether the next request fits,
    /// its size and its fact retention.
    #[arg(long)]
    context_quality: bool,
    /// Run only the store server's load workload: `--server-clients` clients on one `mnemo serve`,
    /// each appending and searching in turn for `--server-secs`; p50/p99 latencies, throughput, and a
    /// check that every acknowledged append is in the log afterwards.
    #[arg(long)]
    server: bool,
    /// Clients of the server workload.
    #[arg(long, default_value_t = 64)]
    server_clients: usize,
    /// Seconds the server workload runs.
    #[arg(long, default_value_t = 30)]
    server_secs: u64,
    /// Run only the protocol-overhead workload: the same appends and searches through the
    /// in-process facade and through the Rust, TypeScript and Python clients of `mnemo serve`;
    /// p50/p99 per path and each client's p50 over the facade's.
    #[arg(long)]
    protocol: bool,
    /// Calls of each kind (appends, then searches) per path of the protocol workload.
    #[arg(long, default_value_t = 500)]
    protocol_calls: usize,
    /// The repository's `clients/` directory, where the TypeScript and Python runners are.
    #[arg(long, default_value = "clients")]
    clients: PathBuf,
    /// Run only the import-memory workload: a Claude Code session of this many MB, written on the
    /// fly, imported into a fresh store; reports the import's peak resident set size.
    #[arg(long, value_name = "MB")]
    import_memory: Option<u64>,
    /// Run only the key-check workload: the `--events` corpus appended with and without key rules
    /// (event identity, run claims and seals, tool-call pairing), each kind eight times, each into
    /// a fresh store of its own.
    #[arg(long)]
    key_check: bool,
    /// The real fixtures directory of the context-quality workload.
    #[arg(long, default_value = "tests/fixtures/real")]
    fixtures: PathBuf,
}

fn context_quality(cli: &Cli, args: &BenchArgs) -> anyhow::Result<ExitCode> {
    use mnemo_benches::context_quality;
    let mut corpus = context_quality::real_corpus(&args.fixtures)?;
    corpus.extend(context_quality::generated_corpus(args.seed.unwrap_or(7)));
    std::fs::create_dir_all(&args.out)?;
    let spinner = progress(0, "bench");
    spinner.set_message("context quality");
    let rows = context_quality::run(&args.out, &corpus);
    spinner.finish_and_clear();
    let rows = rows?;
    let path = args.out.join("context-quality.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&rows)?)?;
    output(cli, &rows, || {
        say_inline!("{}", context_quality::table(&rows));
        say!("wrote {}", path.display());
    });
    Ok(ExitCode::SUCCESS)
}

fn protocol(cli: &Cli, args: &BenchArgs) -> anyhow::Result<ExitCode> {
    use crate::protocol_bench;
    let spinner = progress(0, "bench");
    spinner.set_message(format!("protocol overhead: {} appends and searches per path", args.protocol_calls));
    let report = protocol_bench::run(&args.out, args.protocol_calls, &args.clients);
    spinner.finish_and_clear();
    let report = report?;
    let path = args.out.join("protocol-overhead.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
    output(cli, &report, || {
        say_inline!("{}", protocol_bench::table(&report));
        say!("wrote {}", path.display());
    });
    Ok(ExitCode::SUCCESS)
}

fn import_memory(cli: &Cli, args: &BenchArgs, megabytes: u64) -> anyhow::Result<ExitCode> {
    use mnemo_benches::import_memory;
    let spinner = progress(0, "bench");
    spinner.set_message(format!("import of a {megabytes} MB Claude Code session"));
    let report = import_memory::run(&args.out, megabytes);
    spinner.finish_and_clear();
    let report = report?;
    let path = args.out.join("import-memory.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
    output(cli, &report, || {
        say!(
            "import of {} bytes ({} lines, {} records) in {:.1} s: peak RSS {:.1} MiB{} (target <= {} MiB: {})",
            report.file_bytes,
            report.lines,
            report.records,
            report.seconds,
            report.peak_rss_mib,
            if report.peak_reset { "" } else { " (whole process)" },
            report.target_mib,
            if report.met { "met" } else { "missed" }
        );
        say!("wrote {}", path.display());
    });
    Ok(ExitCode::SUCCESS)
}

fn key_check(cli: &Cli, options: &BenchOptions) -> anyhow::Result<ExitCode> {
    let spinner = progress(0, "bench");
    spinner.set_message(format!("{} events with and without key rules", options.corpus_events));
    let row = mnemo_benches::key_check::key_check(options, &mut |step| {
        // NOTE: each import's time is printed as it ends: the row takes minutes at 1M events, and
        // the spread of the imports tells how far to trust the ratio.
        if cli.json {
            spinner.set_message(step.to_owned());
        } else {
            spinner.suspend(|| say_err!("{step}"));
        }
    });
    spinner.finish_and_clear();
    let row = row?;
    std::fs::create_dir_all(&options.out)?;
    let path = options.out.join("key-check.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&row)?)?;
    output(cli, &row, || {
        say!(
            "{}: {:.0} {} with key rules, {:.0} without ({}): {:.3}x (target {}: {})",
            row.name,
            row.mnemo,
            row.unit,
            row.baseline,
            row.baseline_name,
            row.ratio,
            row.target,
            if row.met { "met" } else { "missed" }
        );
        say!("wrote {}", path.display());
    });
    Ok(ExitCode::SUCCESS)
}

/// `mnemo bench --server`: the load workload on a fresh store under `out`, its report written to
/// `out/server-load.json`. Exit 1 when an acknowledged append is missing from the log afterwards.
fn server(cli: &Cli, out: &Path, clients: usize, secs: u64) -> anyhow::Result<ExitCode> {
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

pub(crate) fn run(cli: &Cli, args: &BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(megabytes) = args.import_memory {
        return import_memory(cli, args, megabytes);
    }
    if args.context_quality {
        return context_quality(cli, args);
    }
    if args.server {
        return server(cli, &args.out, args.server_clients, args.server_secs);
    }
    if args.protocol {
        return protocol(cli, args);
    }
    let mut options =
        if args.quick { BenchOptions::quick(args.out.clone()) } else { BenchOptions::full(args.out.clone()) };
    if let Some(events) = args.events {
        options.corpus_events = events.max(1);
    }
    if let Some(events) = args.single_writer_events {
        options.single_writer_events = events.max(1);
    }
    if let Some(events) = args.events_per_session {
        options.events_per_concurrent_session = events.max(1);
    }
    if let Some(rounds) = args.rounds {
        options.rounds = rounds.max(1);
    }
    if let Some(messages) = args.scale_messages {
        options.scale_messages = messages;
    }
    if let Some(seed) = args.seed {
        options.seed = seed;
    }
    if let Some(sizes) = &args.search_sizes {
        options.search_sizes = sizes.iter().map(|n| (*n).max(1)).collect();
    }
    if let Some(sizes) = &args.memory_sizes {
        options.memory_sizes = sizes.iter().map(|n| (*n).max(1)).collect();
    }
    if args.key_check {
        return key_check(cli, &options);
    }
    let spinner = progress(0, "bench");
    let result = harness::run(&options, &mut |step| spinner.set_message(step.to_owned()));
    spinner.finish_and_clear();
    let mut bench_report = result?;
    if let Some(servers) = &args.nats {
        let spinner = progress(0, "bench");
        spinner.set_message("append on the NATS cluster");
        let shared = mnemo_benches::nats_workload::run(&options, servers);
        spinner.finish_and_clear();
        bench_report.workloads.extend(shared?);
    }
    let written = report::write(&bench_report)?;
    output(cli, &bench_report, || {
        say_inline!("{}", report::table(&bench_report));
        say!();
        for path in &written {
            say!("wrote {}", path.display());
        }
    });
    Ok(ExitCode::SUCCESS)
}
