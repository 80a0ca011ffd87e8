//! The cross-language conformance test: one scripted session (`tests/conformance/scenario.json`) run
//! identically through the Rust client (here), the TypeScript client
//! (`clients/typescript/conformance/runner.ts`) and the Python client
//! (`clients/python/conformance_runner.py`), each against its own `mnemo serve --fixed-clock` on a
//! fresh store, gives the same answer to every step, the same log (its chain head hash, which covers
//! every byte of every envelope), the same assembled history and the same claims of the checkpoint it
//! stands on.
//!
//! Needs `node` with the TypeScript client built (`npm ci && npm run build` in clients/typescript)
//! and `python3` (3.10+; the Python client uses only the standard library). `.ci/run` provides them.
//! Without them the test says so and passes outside CI; under CI (`CI` set) their absence fails it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mnemo_server::client::{Client, ClientError, ConnectOptions, StartCommand};
use mnemo_server::methods::{
    Append, Claims, Context, Empty, Import, Log, LogParams, Method, Prepare, ReadHistory, Recall,
    RecallBlock, Remember, SearchHistory, Sessions, Shutdown, Transcript,
};
use serde_json::{Value, json};

use support::{MNEMO, repo_root};

/// Envelopes read per `log` call while looking for the chain head (the protocol's `LOG_ENTRIES_MAX`).
const LOG_PAGE: u64 = 1000;

fn scenario_path() -> PathBuf {
    repo_root().join("tests/conformance/scenario.json")
}

/// One step through the Rust client's typed call for its method.
fn step(client: &mut Client, method: &str, params: &Value) -> Result<Value, ClientError> {
    fn typed<M: Method>(client: &mut Client, params: &Value) -> Result<Value, ClientError> {
        let params: M::Params = serde_json::from_value(params.clone())
            .unwrap_or_else(|e| panic!("the scenario's params for {} do not fit: {e}", M::NAME));
        let result = client.call::<M>(&params)?;
        Ok(serde_json::to_value(result).unwrap())
    }
    match method {
        Append::NAME => typed::<Append>(client, params),
        Import::NAME => typed::<Import>(client, params),
        Sessions::NAME => typed::<Sessions>(client, params),
        SearchHistory::NAME => typed::<SearchHistory>(client, params),
        ReadHistory::NAME => typed::<ReadHistory>(client, params),
        Transcript::NAME => typed::<Transcript>(client, params),
        Remember::NAME => typed::<Remember>(client, params),
        Recall::NAME => typed::<Recall>(client, params),
        RecallBlock::NAME => typed::<RecallBlock>(client, params),
        Claims::NAME => typed::<Claims>(client, params),
        Context::NAME => typed::<Context>(client, params),
        Prepare::NAME => typed::<Prepare>(client, params),
        other => panic!("the scenario's method {other} has no typed call here"),
    }
}

/// The scenario through the Rust client; the same document the other runners print.
fn run_rust(scenario: &Value, store: &Path) -> Value {
    let clock = scenario["fixed_clock_ms"].as_u64().expect("fixed_clock_ms").to_string();
    let start =
        StartCommand::mnemo(MNEMO, store).arg("--fixed-clock").arg(clock).arg("--idle-exit").arg("60");
    let options = ConnectOptions::new("conformance-rust").start_with(start);
    let mut client = Client::connect(store, &options).unwrap();
    let mut steps = Vec::new();
    for s in scenario["steps"].as_array().expect("steps") {
        let method = s["method"].as_str().expect("method");
        match step(&mut client, method, &s["params"]) {
            Ok(result) => steps.push(json!({ "method": method, "result": result })),
            Err(ClientError::Rpc(error)) => steps.push(json!({
                "method": method,
                "error": {
                    "reason": error.reason().name(),
                    "code": error.code,
                    "tool_reason": error.data.tool_reason,
                    "expected": error.data.expected,
                    "actual": error.data.actual,
                },
            })),
            Err(other) => panic!("{method}: {other}"),
        }
    }
    let mut head = Value::Null;
    let mut from = 1;
    loop {
        let page = client
            .call::<Log>(&LogParams { from: Some(from), limit: Some(LOG_PAGE), ..LogParams::default() })
            .unwrap();
        let Some(last) = page.last() else { break };
        head = Value::Object(last.clone());
        from += LOG_PAGE;
    }
    let spec = &scenario["history"];
    let history =
        step(&mut client, Context::NAME, &json!({ "session": spec["session"], "window": spec["window"] }))
            .unwrap();
    let checkpoint = &history["boundary"]["checkpoint"];
    let claims =
        step(&mut client, Claims::NAME, &json!({ "session": spec["session"], "checkpoint": checkpoint }))
            .unwrap();
    client.call::<Shutdown>(&Empty {}).unwrap();
    json!({
        "client": "rust",
        "steps": steps,
        "log_head": head.get("position").cloned().unwrap_or(json!(0)),
        "log_digest": head.get("hash").cloned().unwrap_or(Value::Null),
        "log_timestamp": head.get("timestamp").cloned().unwrap_or(Value::Null),
        "history": history,
        "claims": claims,
    })
}

/// Another language's runner: `program args.. SCENARIO STORE MNEMO_BIN`, its stdout one JSON document.
fn run_other(name: &str, program: &str, args: &[PathBuf], store: &Path) -> Value {
    let output = Command::new(program)
        .args(args)
        .arg(scenario_path())
        .arg(store)
        .arg(MNEMO)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {program} did not start: {e}"));
    assert!(
        output.status.success(),
        "the {name} runner failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "the {name} runner printed no JSON document ({e}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// A document as compared: members that are `null` left out (a client may leave an absent optional
/// member out or write it as `null`), and every number as a float (a language may write `1.0` as `1`).
fn normalized(value: &Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), normalized(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Number(n) => json!(n.as_f64()),
        other => other.clone(),
    }
}

fn tool_available(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).output().is_ok_and(|o| o.status.success())
}

#[test]
fn one_scripted_session_gives_the_same_log_and_history_through_rust_typescript_and_python() {
    let ts_runner = repo_root().join("clients/typescript/dist/conformance/runner.js");
    let py_runner = repo_root().join("clients/python/conformance_runner.py");
    let python = std::env::var("MNEMO_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let ready =
        ts_runner.is_file() && tool_available("node", "--version") && tool_available(&python, "--version");
    if !ready {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install node and python3 and build clients/typescript (npm ci && npm run build) before the tests"
        );
        eprintln!(
            "skipped: node, python3 or clients/typescript/dist is missing (npm ci && npm run build there)"
        );
        return;
    }
    let scenario: Value = serde_json::from_str(&std::fs::read_to_string(scenario_path()).unwrap()).unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let rust = run_rust(&scenario, &dirs[0].path().join("store"));
    let typescript = run_other("typescript", "node", &[ts_runner], &dirs[1].path().join("store"));
    let python = run_other("python", &python, &[py_runner], &dirs[2].path().join("store"));

    // The Rust run did what the scenario says, so that agreement below is about something.
    let digest = rust["log_digest"].as_str().expect("a log digest");
    // The last append (remember's memory commit) was stamped by the fixed clock, not the system's.
    assert_eq!(rust["log_timestamp"], scenario["fixed_clock_ms"], "the server's clock is not the fixed one");
    assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()), "{digest}");
    let steps = scenario["steps"].as_array().unwrap();
    assert_eq!(rust["steps"].as_array().unwrap().len(), steps.len());
    for (index, (planned, done)) in steps.iter().zip(rust["steps"].as_array().unwrap()).enumerate() {
        match planned.get("expect_error") {
            Some(reason) => assert_eq!(&done["error"]["reason"], reason, "step {index}: {done}"),
            None => {
                assert!(done.get("result").is_some(), "step {index} ({}) failed: {done}", planned["method"])
            }
        }
    }
    let recalled = rust["steps"].as_array().unwrap().iter().find(|s| s["method"] == "memory/recall").unwrap();
    assert!(!recalled["result"].as_array().unwrap().is_empty(), "nothing recalled: {recalled}");
    assert!(!rust["history"]["items"].as_array().unwrap().is_empty(), "no assembled history");
    let prepared =
        rust["steps"].as_array().unwrap().iter().find(|s| s["method"] == "compaction/prepare").unwrap();
    assert!(
        prepared["result"]["recorded"].is_object(),
        "the prepare step recorded no checkpoint: {prepared}"
    );

    let blocks: Vec<&Value> =
        rust["steps"].as_array().unwrap().iter().filter(|s| s["method"] == "memory/recall_block").collect();
    let [then, now] = blocks.as_slice() else { panic!("two recall block steps: {blocks:?}") };
    assert_eq!(then["result"]["items"], json!([]), "as of before remember the block is empty: {then}");
    assert!(!now["result"]["items"].as_array().unwrap().is_empty(), "the block now holds the item: {now}");
    let claims = &rust["claims"];
    assert_eq!(claims["checkpoint"], rust["history"]["boundary"]["checkpoint"]);
    assert!(
        !claims["claims"].as_array().unwrap().is_empty(),
        "the checkpoint's summary states no claim: {claims}"
    );

    for other in [&typescript, &python] {
        let name = other["client"].as_str().unwrap();
        let (ours, theirs) = (rust["steps"].as_array().unwrap(), other["steps"].as_array().unwrap());
        assert_eq!(ours.len(), theirs.len(), "{name}: steps run");
        for (index, (a, b)) in ours.iter().zip(theirs).enumerate() {
            assert_eq!(
                normalized(a),
                normalized(b),
                "step {index} ({}): rust and {name} differ",
                a["method"]
            );
        }
        assert_eq!(other["log_head"], rust["log_head"], "{name}: log head position");
        assert_eq!(other["log_digest"], rust["log_digest"], "{name}: log digest (chain head hash)");
        assert_eq!(normalized(&other["history"]), normalized(&rust["history"]), "{name}: assembled history");
        assert_eq!(
            normalized(&other["claims"]),
            normalized(&rust["claims"]),
            "{name}: the checkpoint's claims"
        );
    }
}
