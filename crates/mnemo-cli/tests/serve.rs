//! `mnemo serve` as a process: clients that start it (one server under a race), idle exit, SIGTERM
//! with every acknowledged append durable, and a short load run of 64 clients.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo_server::client::{Client, ClientError, ConnectOptions, StartCommand};
use mnemo_server::load::{self, LoadOptions};
use mnemo_server::methods::{Append, AppendParams, Empty, ExpectedRevision, Ping, Shutdown, WireRecord};

use support::MNEMO;

fn starting(name: &str, store: &Path) -> ConnectOptions {
    ConnectOptions::new(name)
        .start_with(StartCommand::mnemo(MNEMO, store))
        .start_wait(Duration::from_secs(60))
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let began = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(began.elapsed() < within, "the server did not exit within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn event(session: &str, id: &str) -> WireRecord {
    use mnemo::records::*;
    let mut event = RuntimeEvent::new(
        EventId::new(id).unwrap(),
        InvocationId::new("r").unwrap(),
        RunId::new("r").unwrap(),
        SessionId::new(session).unwrap(),
        TurnId::new("t1").unwrap(),
        TimestampMs(1_767_225_600_000),
        Role::User,
        Author::User,
    );
    event.content = Some(Content::Text(TextContent::new(format!("note {id}"))));
    WireRecord::from_record(&Record::RuntimeEvent(event)).unwrap()
}

#[test]
fn clients_racing_to_start_a_server_all_reach_the_one_that_won() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let pids: Vec<u32> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let store = &store;
                scope.spawn(move || {
                    let mut client = Client::connect(store, &starting(&format!("racer-{i}"), store)).unwrap();
                    client.call::<Ping>(&Empty {}).unwrap();
                    client.server().pid
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: BTreeSet<u32> = pids.iter().copied().collect();
    assert_eq!(distinct.len(), 1, "clients reached different servers: {pids:?}");
    // A client that outlives its server reconnects, starting a new one, and its call goes through.
    let mut survivor = Client::connect(&store, &starting("survivor", &store)).unwrap();
    let mut client = Client::connect(&store, &ConnectOptions::new("stopper")).unwrap();
    client.call::<Shutdown>(&Empty {}).unwrap();
    let began = Instant::now();
    while store.join("server.sock").exists() {
        assert!(began.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    survivor.call::<Ping>(&Empty {}).unwrap();
    assert_ne!(survivor.server().pid, pids[0], "the survivor did not reconnect to a new server");
    survivor.call::<Shutdown>(&Empty {}).unwrap();
    // The server removes its socket and releases the store; the next client starts a new one.
    let began = Instant::now();
    while store.join("server.sock").exists() {
        assert!(began.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut again = Client::connect(&store, &starting("again", &store)).unwrap();
    assert_ne!(again.server().pid, pids[0], "a stopped server answered");
    again.call::<Shutdown>(&Empty {}).unwrap();
    // Without a start command, a client that finds no server says so.
    let began = Instant::now();
    while store.join("server.sock").exists() {
        assert!(began.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    let none = Client::connect(&store, &ConnectOptions::new("no-start")).unwrap_err();
    assert!(matches!(none, ClientError::NoServer { .. }), "{none}");
}

#[test]
fn a_server_without_connections_exits_after_its_idle_period() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut server = Command::new(MNEMO)
        .args(["--store", store.to_str().unwrap(), "serve", "--idle-exit", "1"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let mut client = loop {
        match Client::connect(&store, &ConnectOptions::new("idle")) {
            Ok(client) => break client,
            Err(ClientError::NoServer { .. }) if began.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(other) => panic!("{other}"),
        }
    };
    assert_eq!(client.server().limits.idle_exit_secs, 1);
    // Connected for longer than the idle period: the server stays.
    std::thread::sleep(Duration::from_millis(1500));
    client.call::<Ping>(&Empty {}).unwrap();
    assert!(server.try_wait().unwrap().is_none(), "the server exited with a client connected");
    drop(client);
    let status = wait_exit(&mut server, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    assert!(!store.join("server.sock").exists());
}

#[test]
fn sigterm_keeps_every_acknowledged_append() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut server = Command::new(MNEMO)
        .args(["--store", store.to_str().unwrap(), "serve", "--idle-exit", "0"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let began = Instant::now();
    while Client::connect(&store, &ConnectOptions::new("probe")).is_err() {
        assert!(began.elapsed() < Duration::from_secs(30), "the server did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let store = store.clone();
            let acknowledged = Arc::clone(&acknowledged);
            std::thread::spawn(move || {
                let mut client = Client::connect(&store, &ConnectOptions::new("writer")).unwrap();
                for i in 0.. {
                    let id = format!("w{w}-{i}");
                    let params = AppendParams {
                        stream: format!("session/w{w}"),
                        expected_revision: ExpectedRevision::Any,
                        records: vec![event(&format!("w{w}"), &id)],
                        durability: None,
                    };
                    match client.call::<Append>(&params) {
                        Ok(_) => {
                            acknowledged.lock().unwrap().insert(id);
                        }
                        // After SIGTERM: refused, or the connection closed. Nothing acknowledged.
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    while acknowledged.lock().unwrap().len() < 200 {
        std::thread::sleep(Duration::from_millis(5));
    }
    rustix::process::kill_process(rustix::process::Pid::from_child(&server), rustix::process::Signal::TERM)
        .unwrap();
    let status = wait_exit(&mut server, Duration::from_secs(60));
    assert!(status.success(), "{status}");
    for writer in writers {
        writer.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let report = load_report_of(acknowledged);
    let missing = load::missing_acknowledged(&store, &report).unwrap();
    assert!(
        missing.is_empty(),
        "{} acknowledged appends lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}

fn load_report_of(acknowledged: BTreeSet<String>) -> load::LoadReport {
    let zero = load::Latency { calls: 0, p50_us: 0, p99_us: 0, max_us: 0 };
    load::LoadReport {
        clients: 0,
        elapsed_ms: 0,
        appends: zero,
        searches: zero,
        appends_per_sec: 0,
        overloaded: 0,
        acknowledged,
    }
}

#[test]
fn sixty_four_clients_appending_and_searching_lose_no_acknowledged_append() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let options = LoadOptions::new(64, Duration::from_secs(5), starting("load", &store));
    let report = load::run(&store, &options).unwrap();
    assert!(report.appends.calls >= 64, "{report:?}");
    assert!(report.searches.calls >= 64, "{report:?}");
    assert_eq!(report.acknowledged.len() as u64, report.appends.calls);
    Client::connect(&store, &ConnectOptions::new("stopper")).unwrap().call::<Shutdown>(&Empty {}).unwrap();
    let began = Instant::now();
    let missing = loop {
        match load::missing_acknowledged(&store, &report) {
            Ok(missing) => break missing,
            // The server is still closing the store.
            Err(error)
                if error.to_string().contains("locked") && began.elapsed() < Duration::from_secs(60) =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => panic!("{error}"),
        }
    };
    assert!(missing.is_empty(), "{} acknowledged appends lost", missing.len());
    eprintln!(
        "load: {} appends (p50 {} µs, p99 {} µs), {} searches (p50 {} µs, p99 {} µs), {} overloaded",
        report.appends.calls,
        report.appends.p50_us,
        report.appends.p99_us,
        report.searches.calls,
        report.searches.p50_us,
        report.searches.p99_us,
        report.overloaded
    );
}

/// `mnemo serve --stdio`: one client on the child's standard input and output, no socket; the end of
/// its input stops it after every admitted call is answered, and the store is free again.
#[test]
fn serve_stdio_answers_its_spawner_and_stops_when_its_input_ends() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut child = Command::new(MNEMO)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    let hello = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocol_version": 1}});
    writeln!(input, "{hello}").unwrap();
    assert_eq!(answer()["result"]["server_name"], "mnemo");
    assert!(!store.join("server.sock").exists(), "a stdio server places no socket");
    // Five appends, then the input ends at once: each is still answered and durable.
    for n in 1..=5 {
        let append = serde_json::json!({"jsonrpc": "2.0", "id": 10 + n, "method": "append", "params": {
            "stream": "session/s1", "expected_revision": "any", "records": [event("s1", &format!("e{n}"))]}});
        writeln!(input, "{append}").unwrap();
    }
    drop(input);
    let mut answered = BTreeSet::new();
    for _ in 1..=5 {
        let frame = answer();
        assert!(frame.get("result").is_some(), "{frame}");
        answered.insert(frame["id"].as_u64().unwrap());
    }
    assert_eq!(answered, (11..=15).collect());
    assert!(wait_exit(&mut child, Duration::from_secs(60)).success());
    let mnemo = mnemo::Mnemo::open(&store, mnemo::Config::default()).unwrap();
    assert_eq!(mnemo.log().head().0, 5);
    mnemo.close().unwrap();
}
