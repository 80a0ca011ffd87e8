//! `mnemo ui` as a process: it refuses a non-loopback address, refuses every request without its
//! token, answers only GET, leaves the store exactly as it found it, and opens a 10,000-event
//! session (the time is printed, never asserted).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mnemo_server::client::{Client, ConnectOptions};
use mnemo_server::methods::{Empty, Shutdown};
use serde_json::Value;

use support::{MNEMO, real_fixtures};

fn mnemo(store: &Path, args: &[&str]) -> std::process::Output {
    let output = Command::new(MNEMO).arg("--store").arg(store).args(args).output().unwrap();
    assert!(output.status.success(), "mnemo {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn json(store: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_slice(&mnemo(store, &all).stdout).unwrap()
}

/// A store holding every real session file, one of them compacted into a checkpoint.
fn real_store(dir: &Path) -> (PathBuf, String) {
    let store = dir.join("store");
    let fixtures = real_fixtures();
    let files = [
        "incremental-simple/turn-2.jsonl",
        "incremental-subagents/turn-2.jsonl",
        "incremental-subagents/turn-2/subagents/agent-a485154.jsonl",
        "small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
    ];
    let paths: Vec<String> = files.iter().map(|f| fixtures.join(f).display().to_string()).collect();
    let mut args = vec!["import"];
    args.extend(paths.iter().map(String::as_str));
    mnemo(&store, &args);
    let session = "4c2ddfdc-b619-4525-8d03-1950fb1b0257".to_owned();
    mnemo(&store, &["compact", &session]);
    (store, session)
}

/// A running `mnemo ui` and the store server it started; both stop on drop.
struct Ui {
    child: Child,
    store: PathBuf,
    address: String,
    token: String,
}

impl Ui {
    fn start(store: &Path) -> Ui {
        let mut child = Command::new(MNEMO)
            .arg("--store")
            .arg(store)
            .args(["--json", "ui", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // `--json` prints one JSON document (over several lines): read lines until it parses.
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut text = String::new();
        let printed: Value = loop {
            let read = stdout.read_line(&mut text).unwrap();
            assert!(read > 0, "mnemo ui printed no address: {text:?}");
            if let Ok(printed) = serde_json::from_str(&text) {
                break printed;
            }
        };
        let url = printed["url"].as_str().unwrap();
        let rest = url.strip_prefix("http://").unwrap();
        let (address, token) = rest.split_once("/?token=").unwrap();
        assert!(address.starts_with("127.0.0.1:"), "{url}");
        Ui { child, store: store.to_owned(), address: address.to_owned(), token: token.to_owned() }
    }

    /// Sends `method target` with `headers`; returns the status and the body.
    fn request(&self, method: &str, target: &str, headers: &[&str]) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        let mut head =
            format!("{method} {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.address);
        for header in headers {
            head.push_str(header);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let status_line = String::from_utf8_lossy(&answer[..end]).lines().next().unwrap().to_owned();
        let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        (status, answer[end + 4..].to_vec())
    }

    /// A session's whole timeline: the first answer's events followed by the rest's, with the rest's
    /// positions, checkpoints and memory commits.
    fn timeline(&self, session: &str) -> Value {
        let first = self.api(&format!("timeline?session={}", encode(session)));
        let shown = first["events"].as_array().unwrap().len();
        let mut rest = self.api(&format!("timeline?session={}&from={shown}", encode(session)));
        assert_eq!(rest["from"], shown);
        let mut events = first["events"].as_array().unwrap().clone();
        events.extend(rest["events"].as_array().unwrap().iter().cloned());
        assert_eq!(rest["total"], events.len());
        let positions = rest["positions"].as_array().unwrap();
        assert_eq!(first["envelopes"], positions.len(), "the first answer knows how long the stream is");
        assert_eq!(&first["last_position"], positions.last().unwrap(), "and where it ends");
        rest["events"] = Value::Array(events);
        rest
    }

    /// GET `/api/{path}` with the token; the JSON answer (panics on another status than 200).
    fn api(&self, path: &str) -> Value {
        let separator = if path.contains('?') { '&' } else { '?' };
        let (status, body) = self.request("GET", &format!("/api/{path}{separator}token={}", self.token), &[]);
        assert_eq!(status, 200, "/api/{path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The store server the inspector started would otherwise wait out its idle period; it
        // holds the store's lock until its process ends.
        if let Ok(mut client) = Client::connect(&self.store, &ConnectOptions::new("ui test")) {
            let pid = client.server().pid;
            let _ = client.call::<Shutdown>(&Empty {});
            let began = Instant::now();
            while running(pid) && began.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Whether process `pid` is alive (a zombie has ended).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn ui_refuses_a_non_loopback_address_before_starting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    for address in ["0.0.0.0", "::", "192.0.2.1"] {
        let output =
            Command::new(MNEMO).arg("--store").arg(&store).args(["ui", "--bind", address]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "--bind {address}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("not a loopback address") && stderr.contains("--allow-remote"), "{stderr}");
        assert!(output.stdout.is_empty(), "no address printed: {}", String::from_utf8_lossy(&output.stdout));
    }
    assert!(!store.exists(), "nothing was started, so no store was created");
}

#[test]
fn ui_refuses_requests_without_the_token_and_anything_but_get() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = real_store(dir.path());
    let ui = Ui::start(&store);
    let wrong = "0".repeat(ui.token.len());
    for target in ["/", "/app.js", "/style.css", "/api/sessions", "/api/health", "/api/verify", "/nowhere"] {
        assert_eq!(ui.request("GET", target, &[]).0, 401, "{target} without a token");
        assert_eq!(ui.request("GET", &format!("{target}?token={wrong}"), &[]).0, 401, "{target} wrong token");
        let short = &ui.token[..ui.token.len() - 1];
        assert_eq!(ui.request("GET", &format!("{target}?token={short}"), &[]).0, 401, "{target} cut token");
        let cookie = format!("Cookie: mnemo_ui_other={}", ui.token);
        assert_eq!(ui.request("GET", target, &[&cookie]).0, 401, "{target} another inspector's cookie");
    }
    let (status, body) = ui.request("GET", &format!("/?token={}", ui.token), &[]);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("<script type=\"module\" src=\"/app.js\">"));
    let header = format!("X-Mnemo-Token: {}", ui.token);
    assert_eq!(ui.request("GET", "/api/sessions", &[&header]).0, 200);
    let port = ui.address.rsplit(':').next().unwrap();
    let cookie = format!("Cookie: mnemo_ui_{port}={}", ui.token);
    assert_eq!(ui.request("GET", "/app.js", &[&cookie]).0, 200);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        assert_eq!(ui.request(method, &format!("/api/sessions?token={}", ui.token), &[]).0, 405, "{method}");
    }
}

/// Every stage's digest, the log's head and the head envelope's hash.
fn fingerprint(store: &Path) -> (Value, Value) {
    let stats = json(store, &["stats"]);
    let head = stats["head"].as_u64().unwrap();
    let last = json(store, &["log", "--from", &head.to_string(), "--limit", "1"]);
    (
        serde_json::json!({"head": stats["head"], "stages": stats["stages"], "events": stats["events"]}),
        last[0]["hash"].clone(),
    )
}

#[test]
fn a_ui_session_leaves_the_store_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (store, session) = real_store(dir.path());
    let before = fingerprint(&store);
    {
        let ui = Ui::start(&store);
        let sessions = ui.api("sessions");
        assert_eq!(sessions.as_array().unwrap().len(), 4, "{sessions}");
        let found = ui.api("search?q=hello.py");
        assert!(found["rows"].as_array().unwrap().iter().any(|row| row["session_id"] == session.as_str()));
        for listed in sessions.as_array().unwrap() {
            let timeline = ui.timeline(listed["session"].as_str().unwrap());
            assert!(!timeline["events"].as_array().unwrap().is_empty());
        }
        let timeline = ui.timeline(&session);
        let checkpoint = &timeline["checkpoints"][0];
        assert!(checkpoint["summary"].as_str().unwrap().contains("hello.py"), "{checkpoint}");
        let positions: Vec<u64> =
            timeline["positions"].as_array().unwrap().iter().map(|p| p.as_u64().unwrap()).collect();
        let mut previous = None;
        for at in &positions {
            let prev = previous.map(|p: u64| format!("&prev={p}")).unwrap_or_default();
            let context = ui.api(&format!("context?session={session}&at={at}{prev}"));
            assert!(context["tokens"].as_u64().unwrap() <= context["window"].as_u64().unwrap());
            previous = Some(*at);
        }
        ui.api(&format!("event?position={}", positions[1]));
        let memory = ui.api("memory");
        for item in memory["items"].as_array().unwrap() {
            ui.api(&format!("memory/item?id={}", encode(item["item"].as_str().unwrap())));
        }
        ui.api("health");
        let verified = ui.api("verify");
        assert!(verified["stages"].as_array().unwrap().iter().all(|s| s["live"] == s["rebuilt"]));
    }
    assert_eq!(fingerprint(&store), before, "the store changed during a UI session");
}

#[test]
fn time_travel_across_a_checkpoint_shows_the_summary_replace_the_events_it_folds() {
    let dir = tempfile::tempdir().unwrap();
    let (store, session) = real_store(dir.path());
    let ui = Ui::start(&store);
    let timeline = ui.timeline(&session);
    let checkpoint = &timeline["checkpoints"][0];
    let at = checkpoint["position"].as_u64().unwrap();
    let positions: Vec<u64> =
        timeline["positions"].as_array().unwrap().iter().map(|p| p.as_u64().unwrap()).collect();
    let index = positions.iter().position(|p| *p == at).unwrap();
    let before = positions[index - 1];
    let context = ui.api(&format!("context?session={session}&at={at}&prev={before}"));
    let id = checkpoint["checkpoint"].as_str().unwrap();
    assert_eq!(context["items"][0]["kind"], "checkpoint");
    assert_eq!(context["diff"]["added"][0], format!("checkpoint:{id}"));
    let removed = context["diff"]["removed"].as_array().unwrap();
    assert!(!removed.is_empty(), "the folded events left the context: {context}");
    let first = checkpoint["first_position"].as_u64().unwrap();
    let through = checkpoint["through_position"].as_u64().unwrap();
    for key in removed {
        let position: u64 = key.as_str().unwrap().strip_prefix("event:").unwrap().parse().unwrap();
        assert!((first..=through).contains(&position), "{key} is outside the band {first}..={through}");
    }
    assert!(context["tokens"].as_u64() < context["diff"]["tokens_before"].as_u64());
}

/// A session of `events` runtime events in the mnemo transcript format: turns of a user request,
/// a tool call, its (long) result and a reply.
fn large_session(events: usize) -> String {
    let mut out = String::from(
        "{\"kind\":\"session\",\"session\":\"big\",\"workspace\":\"/work/big\",\"title\":\"A long session\"}\n",
    );
    let result = "line of a long tool result\n".repeat(40);
    for turn in 0..events / 4 {
        let ts = 1_767_225_600_000u64 + turn as u64 * 1000;
        let t = format!("t{turn}");
        out.push_str(
            &serde_json::json!({"session": "big", "turn": t, "role": "user", "ts": ts,
            "parts": [{"type": "text", "text": format!("step {turn}: run the tests again")}]})
            .to_string(),
        );
        out.push('\n');
        out.push_str(&serde_json::json!({"session": "big", "turn": t, "role": "model", "ts": ts + 1,
            "parts": [{"type": "tool_call", "id": format!("c{turn}"), "name": "shell", "args": {"cmd": "cargo test"}}]}).to_string());
        out.push('\n');
        out.push_str(&serde_json::json!({"session": "big", "turn": t, "role": "tool", "ts": ts + 2,
            "parts": [{"type": "tool_result", "id": format!("c{turn}"), "name": "shell", "result": result, "is_error": turn % 10 == 0}]}).to_string());
        out.push('\n');
        out.push_str(
            &serde_json::json!({"session": "big", "turn": t, "role": "model", "ts": ts + 3,
            "parts": [{"type": "text", "text": format!("step {turn} done")}]})
            .to_string(),
        );
        out.push('\n');
    }
    out
}

#[test]
fn a_ten_thousand_event_session_opens() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("big.jsonl");
    std::fs::write(&file, large_session(10_000)).unwrap();
    mnemo(&store, &["import", file.to_str().unwrap()]);
    let ui = Ui::start(&store);
    let began = Instant::now();
    let timeline = ui.api("timeline?session=big");
    let first = began.elapsed();
    let shown = timeline["events"].as_array().unwrap().len();
    assert!(shown < 1_000, "the first answer carries a first screen, not {shown} events");
    assert_eq!(timeline["envelopes"], 10_001, "the session's opening and its events");
    let began = Instant::now();
    let rest = ui.api(&format!("timeline?session=big&from={shown}"));
    let second = began.elapsed();
    assert_eq!(rest["from"], shown);
    let events: Vec<&Value> =
        timeline["events"].as_array().unwrap().iter().chain(rest["events"].as_array().unwrap()).collect();
    assert_eq!(rest["total"], events.len());
    let runtime_events = events.iter().filter(|e| e["kind"] == "event").count();
    assert_eq!(runtime_events, 10_000);
    assert_eq!(events.iter().filter(|e| e["error"] == true).count(), 250, "every tenth result is an error");
    let positions: Vec<u64> = events.iter().map(|e| e["position"].as_u64().unwrap()).collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "the pages join in log order, without a gap or repeat"
    );
    let result = events.iter().find(|e| e["content"] == "function_response" && e["error"] == false).unwrap();
    assert_eq!(result["result_cut"], true, "long tool results travel as a preview: {result}");
    let error = events.iter().find(|e| e["error"] == true).unwrap();
    assert!(error.get("result_cut").is_none(), "an error's result is shown open, whole: {error}");
    let timeline = rest;
    let last = timeline["positions"].as_array().unwrap().last().unwrap().as_u64().unwrap();
    let began = Instant::now();
    let context = ui.api(&format!("context?session=big&at={last}&prev={}", last - 1));
    let travel = began.elapsed();
    assert!(context["tokens"].as_u64().is_some());
    println!(
        "10,000-event session ({} build): timeline {} ms (first screen), {} ms (the rest); \
         context at the head with its diff {} ms",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        first.as_millis(),
        second.as_millis(),
        travel.as_millis()
    );
}

#[test]
fn checkpoint_claims_link_each_supported_claim_to_covered_events_that_state_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, session) = real_store(dir.path());
    let ui = Ui::start(&store);
    let timeline = ui.timeline(&session);
    let checkpoint = &timeline["checkpoints"][0];
    let id = checkpoint["checkpoint"].as_str().unwrap();
    let (first, through) =
        (checkpoint["first_position"].as_u64().unwrap(), checkpoint["through_position"].as_u64().unwrap());
    let report = ui.api(&format!("claims?session={session}&checkpoint={id}"));
    let claims = report["claims"].as_array().unwrap();
    assert!(!claims.is_empty(), "{report}");
    assert_eq!(report["matches_recorded"], true, "checked again, the claims agree with the recorded report");
    assert_eq!(claims.len() as u64, checkpoint["faithfulness"]["checked"].as_u64().unwrap());
    let mut linked = 0;
    for claim in claims {
        let text = claim["claim"].as_str().unwrap();
        let events = claim["events"].as_array().unwrap();
        if claim["supported"] == false {
            assert!(events.is_empty(), "an unsupported claim links no event: {claim}");
            continue;
        }
        assert!(events.len() as u64 <= claim["event_count"].as_u64().unwrap());
        for event in events {
            let position = event["position"].as_u64().unwrap();
            assert!(
                (first..=through).contains(&position),
                "{text}: {position} is outside {first}..={through}"
            );
            let envelope = ui.api(&format!("event?position={position}"));
            assert_eq!(envelope["record"]["id"], event["event"]);
            let stated = envelope["record"].to_string();
            let escaped = serde_json::to_string(text).unwrap();
            assert!(
                stated.contains(&escaped[1..escaped.len() - 1]),
                "event {position} does not state the claim {text:?}: {stated}"
            );
            linked += 1;
        }
    }
    assert!(linked > 0, "some claim links its events: {report}");
    let (status, _) =
        ui.request("GET", &format!("/api/claims?session={session}&checkpoint=nope&token={}", ui.token), &[]);
    assert_eq!(status, 400, "an unknown checkpoint is a bad request: {status}");
}

/// A Mnemo transcript of one turn in workspace `/tmp/private`.
fn one_turn(session: &str, user: &str, model: &str, ts: u64) -> String {
    [
        serde_json::json!({"kind": "session", "session": session, "workspace": "/tmp/private", "title": session}),
        serde_json::json!({"session": session, "turn": "t1", "role": "user", "ts": ts,
            "parts": [{"type": "text", "text": user}]}),
        serde_json::json!({"session": session, "turn": "t1", "role": "model", "ts": ts + 1,
            "parts": [{"type": "text", "text": model}]}),
        serde_json::json!({"session": session, "turn": "t1", "kind": "turn_end", "status": "completed"}),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect()
}

#[test]
fn time_travel_shows_the_recall_block_as_memory_stood_at_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let prefs = dir.path().join("prefs.jsonl");
    let text = "Remember that this project always uses pnpm, never npm.";
    std::fs::write(&prefs, one_turn("prefs", text, "Noted: pnpm only.", 1_765_395_600_000)).unwrap();
    mnemo(&store, &["import", prefs.to_str().unwrap()]);
    mnemo(&store, &["memory", "remember", "prefs"]);
    let later = dir.path().join("later.jsonl");
    let build =
        one_turn("later", "Install the build dependencies with pnpm.", "Installing.", 1_765_396_600_000);
    std::fs::write(&later, build).unwrap();
    mnemo(&store, &["import", later.to_str().unwrap()]);
    let ui = Ui::start(&store);
    let last = |session: &str| {
        let timeline = ui.timeline(session);
        timeline["positions"].as_array().unwrap().last().unwrap().as_u64().unwrap()
    };
    let pushed = |session: &str, at: u64| -> Vec<String> {
        let block = ui.api(&format!("recall?session={session}&at={at}"));
        assert_eq!(block["position"], at);
        block["items"].as_array().unwrap().iter().map(|i| i["content"].as_str().unwrap().to_owned()).collect()
    };
    // The session the fact came from speaks of pnpm, but at its positions the fact was not stored yet.
    let prefs_last = last("prefs");
    assert_eq!(
        pushed("prefs", prefs_last),
        Vec::<String>::new(),
        "nothing was pushed before the fact existed"
    );
    let head = ui.api("health")["stats"]["head"].as_u64().unwrap();
    assert!(pushed("prefs", head).iter().any(|c| c.contains("pnpm")), "at the head the same text recalls it");
    let later_items = pushed("later", last("later"));
    assert!(later_items.iter().any(|c| c.contains("pnpm")), "{later_items:?}");
    let (status, _) =
        ui.request("GET", &format!("/api/recall?session=later&at={}&token={}", head + 5, ui.token), &[]);
    assert_eq!(status, 400, "a position beyond the head is a bad request");
}
