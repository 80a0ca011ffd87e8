//! One store, many processes: with `mnemo mcp` running on a store (which starts the store server
//! that then holds it), the person's commands run through that server — at the same time as each
//! other and as the inspector — and print exactly what they print on a twin store that no server
//! holds.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod support;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{MNEMO, SAMPLE, code, command, mnemo, real, stderr, stdout};

/// `mnemo mcp` on a store, initialized and made to call the store server once, so that the server
/// is up and holds the store.
struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Agent {
    fn start(store: &Path) -> Agent {
        let mut child = command(store)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut answers = BufReader::new(child.stdout.take().unwrap());
        let messages = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"served-cli-test","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_history","arguments":{"query":"hello","all_workspaces":true}}}"#,
        ];
        for message in messages {
            writeln!(stdin, "{message}").unwrap();
        }
        // The answer to the tool call: the store server has answered it, so it holds the store.
        let mut line = String::new();
        loop {
            line.clear();
            assert!(answers.read_line(&mut line).unwrap() > 0, "mnemo mcp ended before answering");
            if line.contains(r#""id":2"#) {
                break;
            }
        }
        assert!(store.join("server.sock").exists(), "a store server runs: {line}");
        Agent { child, stdin: Some(stdin) }
    }

    /// Closes the MCP client's side: `mnemo mcp` ends (the store server keeps its idle period).
    fn stop(mut self) {
        drop(self.stdin.take());
        self.child.wait().unwrap();
    }
}

/// Two stores built alike: `served` will be held by a store server, `alone` by nobody.
fn twin_stores(root: &Path) -> (PathBuf, PathBuf) {
    let served = root.join("served");
    let alone = root.join("alone");
    for store in [&served, &alone] {
        let imported = mnemo(store, &["import", SAMPLE]);
        assert_eq!(code(&imported), 0, "{}", stderr(&imported));
    }
    (served, alone)
}

/// What a run leaves for the comparison: its exit code and its standard output, with the store's
/// path written the same for both stores.
fn seen(output: &Output, store: &Path) -> (i32, String) {
    (code(output), stdout(output).replace(&store.display().to_string(), "STORE"))
}

/// `seen` with the memory index's digests masked: a sync extracts memories, and each extraction
/// commit records when it committed, which twin stores synced apart never share. The stage's
/// verdict (live equal to rebuilt) is kept.
fn timeless((code, text): (i32, String)) -> (i32, String) {
    let lines: Vec<String> = text
        .lines()
        .map(|line| match line.starts_with("stage") && line.contains(" memory-index ") {
            true => line.split(" sha256:").next().unwrap_or(line).to_owned(),
            false => line.to_owned(),
        })
        .collect();
    (code, lines.join("\n"))
}

/// The commands that only read, each with its arguments.
const READS: &[&[&str]] = &[
    &["sessions"],
    &["search", "test"],
    &["--json", "search", "server"],
    &["memory", "list"],
    &["verify"],
    &["export"],
    &["log", "--limit", "5"],
];

#[test]
fn with_the_store_server_holding_the_store_every_command_runs_through_it_and_prints_the_same() {
    let root = tempfile::tempdir().unwrap();
    let (served, alone) = twin_stores(root.path());
    let agent = Agent::start(&served);
    // Held: a command that needs the store alone is refused by its lock, and told which process
    // to stop; so the commands below that succeed ran through the server.
    let alone_only = mnemo(&served, &["salvage", "--to", root.path().join("salvaged").to_str().unwrap()]);
    assert_eq!(code(&alone_only), 4, "{}", stderr(&alone_only));
    assert!(stderr(&alone_only).contains("the store server holds it"), "{}", stderr(&alone_only));

    // The reads, all at once, beside the inspector.
    let ui = Command::new(MNEMO)
        .arg("--store")
        .arg(&served)
        .args(["ui", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runs: Vec<_> = READS
        .iter()
        .map(|args| {
            let store = served.clone();
            std::thread::spawn(move || mnemo(&store, args))
        })
        .collect();
    for (args, run) in READS.iter().zip(runs) {
        let through_server = run.join().unwrap();
        let in_process = mnemo(&alone, args);
        assert_eq!(
            seen(&through_server, &served),
            seen(&in_process, &alone),
            "mnemo {args:?} through the server differs from in-process; stderr: {}",
            stderr(&through_server)
        );
        assert_eq!(stderr(&through_server), stderr(&in_process), "mnemo {args:?}: stderr");
    }
    let mut ui = ui;
    let mut address = String::new();
    BufReader::new(ui.stdout.take().unwrap()).read_line(&mut address).unwrap();
    assert!(address.contains("http://127.0.0.1:"), "the inspector printed its address: {address}");
    ui.kill().unwrap();
    ui.wait().unwrap();

    // The writes: a file and a pipe through `import`, a folder through `sync`; each twice, so the
    // second finds everything already there.
    let file = real("small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    let folder = root.path().join("sessions");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(real("incremental-simple/turn-1.jsonl"), folder.join("turn-1.jsonl")).unwrap();
    for _ in 0..2 {
        for store in [&served, &alone] {
            let imported = mnemo(store, &["import", file.to_str().unwrap()]);
            let piped = command(store)
                .args(["import", "-"])
                .stdin(std::fs::File::open(&file).unwrap())
                .output()
                .unwrap();
            let synced = mnemo(store, &["sync", folder.to_str().unwrap()]);
            for output in [&imported, &piped, &synced] {
                assert_eq!(code(output), 0, "{}", stderr(output));
            }
        }
        for args in [&["sessions"][..], &["export"], &["verify"]] {
            let (served_seen, alone_seen) =
                (seen(&mnemo(&served, args), &served), seen(&mnemo(&alone, args), &alone));
            assert_eq!(timeless(served_seen), timeless(alone_seen), "{args:?}");
        }
    }

    // A relative path is the caller's: resolved in its working directory, not the server's.
    let relative = command(&served).args(["import", "turn-1.jsonl"]).current_dir(&folder).output().unwrap();
    assert_eq!(code(&relative), 0, "{}", stderr(&relative));
    assert!(stdout(&relative).contains("already complete"), "{}", stdout(&relative));

    // A usage error keeps its exit code and its message.
    let wrong = mnemo(&served, &["show", "no-such-session"]);
    let wrong_alone = mnemo(&alone, &["show", "no-such-session"]);
    assert_eq!(seen(&wrong, &served), seen(&wrong_alone, &alone));
    assert_eq!(stderr(&wrong), stderr(&wrong_alone));

    agent.stop();
    // The server still holds the store (its idle period); after it stops, the store verifies
    // in this process.
    let stopped = mnemo_server_stop(&served);
    assert!(stopped, "the store server stopped");
    let verified = mnemo(&served, &["verify"]);
    assert_eq!(code(&verified), 0, "{}{}", stdout(&verified), stderr(&verified));
}

/// Asks the store's server to stop and waits for its socket to go.
fn mnemo_server_stop(store: &Path) -> bool {
    use mnemo_server::client::{Client, ConnectOptions};
    let mut client = Client::connect(store, &ConnectOptions::new("served-cli-test")).unwrap();
    client.call::<mnemo_server::methods::Shutdown>(&mnemo_server::methods::Empty {}).unwrap();
    let began = Instant::now();
    while store.join("server.sock").exists() {
        if began.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The socket goes first; the store's lock is let go once the server has closed it.
    loop {
        let probe = mnemo(store, &["stats"]);
        if code(&probe) == 0 {
            return true;
        }
        if began.elapsed() > Duration::from_secs(60) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
