//! The test NATS cluster (`.ci/nats-cluster.sh`): its address from the environment, fresh stream
//! names, stores that follow a stream, and killing and restarting one of its servers.

use std::path::{Path, PathBuf};

use mnemo::log::LogLocation;
use mnemo::{Config, Mnemo};

/// Names the test cluster's servers (comma-separated `nats://` URLs).
pub const URLS_VAR: &str = "MNEMO_TEST_NATS_URLS";
/// Names the directory the cluster script started the servers from (their configs and pid files).
pub const DIR_VAR: &str = "MNEMO_TEST_NATS_DIR";

/// The cluster's servers, or `None` with the reason printed when the variable is unset (a local run
/// without a cluster). When it is set, an unreachable cluster fails the test that opens a store.
pub fn urls() -> Option<String> {
    match std::env::var(URLS_VAR) {
        Ok(urls) if !urls.trim().is_empty() => Some(urls),
        _ => {
            eprintln!(
                "skipped: {URLS_VAR} is unset; run `.ci/nats-cluster.sh start DIR` and export what it prints"
            );
            None
        }
    }
}

/// The cluster's directory; a test that kills servers needs it whenever the cluster is there.
pub fn dir() -> PathBuf {
    let dir = std::env::var(DIR_VAR).unwrap_or_else(|_| panic!("{URLS_VAR} is set but {DIR_VAR} is not"));
    PathBuf::from(dir)
}

/// A JetStream stream name that no other test or run uses.
pub fn fresh_stream(tag: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("T_{tag}_{}_{nanos}", std::process::id())
}

/// Opens the store in `store` following `stream` on the cluster.
pub fn open(urls: &str, stream: &str, store: &Path) -> Mnemo {
    let location = LogLocation::parse(&format!("{urls}/{stream}")).unwrap_or_else(|e| panic!("{e}"));
    let config = Config { log: Some(location), ..Config::default() };
    Mnemo::open(store, config).unwrap_or_else(|e| panic!("cannot open a store on the cluster {urls}: {e}"))
}

/// The pid of server `name` (`n1`..`n3`), from the pid file it writes.
pub fn server_pid(name: &str) -> i32 {
    let path = dir().join(format!("{name}.pid"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("{} holds {text:?}: {e}", path.display()))
}

/// Starts server `name` again from its config; it rejoins the cluster and catches up. A shell starts
/// it in the background, so the server outlives the test process as the others do, and the cluster
/// script's `stop` ends it through its pid file.
pub fn restart_server(name: &str) {
    let dir = dir();
    let config = dir.join(format!("{name}.conf"));
    let log = dir.join(format!("{name}.log"));
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("nats-server -c \"$1\" >> \"$2\" 2>&1 &")
        .arg("restart")
        .arg(&config)
        .arg(&log)
        .status()
        .unwrap_or_else(|e| panic!("cannot start nats-server {name}: {e}"));
    assert!(status.success(), "starting nats-server {name} failed: {status}");
}
