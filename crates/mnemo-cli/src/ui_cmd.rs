//! `ui`: the context inspector in the browser, on the loopback interface, read-only
//! (`mnemo_server::ui`). It reads through the store server, starting it when none runs; a server
//! it started exits soon after the inspector stops.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use clap::Args;
use mnemo_server::client::ConnectOptions;
use mnemo_server::ui::{Inspector, UiError, UiOptions};

use crate::term::{say, say_err};
use crate::{Cli, output};

#[derive(Debug, Args)]
pub(crate) struct UiArgs {
    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The address to listen on: loopback (127.0.0.1 or ::1) unless `--allow-remote`.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Listen on an address that is not loopback. Anyone who can reach it and has the printed
    /// address (with its token) can read the whole store.
    #[arg(long)]
    allow_remote: bool,
}

/// How long a store server the inspector started runs on once nothing is connected to it.
const UI_SERVER_IDLE_EXIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) fn run(cli: &Cli, args: &UiArgs) -> anyhow::Result<ExitCode> {
    let store = std::path::absolute(&cli.store)?;
    // A server the inspector starts is not left holding the store: it exits once the inspector's
    // connections have been gone a little while. A server already running keeps its own period.
    let start = crate::mcp_cmd::start_command(cli, &store)?
        .arg("--idle-exit")
        .arg(UI_SERVER_IDLE_EXIT.as_secs().to_string());
    let mut options = UiOptions::new(args.port, ConnectOptions::new("mnemo ui").start_with(start));
    options.address = SocketAddr::new(args.bind, args.port);
    options.allow_remote = args.allow_remote;
    let inspector = match Inspector::bind(&store, options) {
        Ok(inspector) => inspector,
        // A usage error (exit 2), refused before anything started.
        Err(refused @ UiError::NotLoopback { .. }) => {
            say_err!("error: {refused}");
            return Ok(ExitCode::from(2));
        }
        Err(other) => return Err(other.into()),
    };
    let url = inspector.url()?;
    let printed = serde_json::json!({ "url": url, "store": store.display().to_string() });
    output(cli, &printed, || {
        say!("Mnemo inspector for {} (read-only): open {url}", store.display());
        say!("Press Ctrl-C to stop.");
    });
    // The address is read by whoever started the inspector, often through a pipe.
    std::io::stdout().flush()?;
    inspector.run()?;
    Ok(ExitCode::SUCCESS)
}
