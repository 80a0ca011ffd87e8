//! The CLI on real session files (`../shared/fixtures/real/`, read in place) and on files in the
//! exact shape the real tools write: what a user sees end to end, held to what the files contain.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn mnemo(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn ok_json(output: &Output) -> Value {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn real(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/real/claude-code").join(path)
}

/// The call ids of results whose call is not earlier in the request, and of calls without a result.
fn unpaired(context: &Value) -> (Vec<String>, Vec<String>) {
    let (mut calls, mut open, mut orphans) = (HashSet::new(), Vec::new(), Vec::new());
    for item in context["items"].as_array().unwrap() {
        let content = &item["event"]["content"];
        let id = content["id"].as_str().unwrap_or_default().to_owned();
        match content["kind"].as_str() {
            Some("function_call") => {
                calls.insert(id.clone());
                open.push(id);
            }
            Some("function_response") => {
                if !calls.contains(&id) {
                    orphans.push(id.clone());
                }
                open.retain(|o| *o != id);
            }
            _ => {}
        }
    }
    (orphans, open)
}

#[test]
fn a_context_that_drops_parallel_tool_calls_keeps_no_result_without_its_call() {
    // The sub-agent ran its tools five at a time (five calls, then their five results); a window
    // too small for its history drops the oldest events, and a result whose call was dropped is
    // a request every provider refuses.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    let session = "e9fb405b-169f-40eb-9396-7e75076f045d/agent-a485154";
    for window in ["8000", "12000", "16000", "24000"] {
        let context = ok_json(&mnemo(&store, &["--json", "context", session, "--window", window]));
        let fit = &context["diagnostics"]["fit"];
        assert_eq!(fit["fits"], true, "window {window}: {fit}");
        assert!(fit["dropped"]["events"].as_u64().unwrap() > 0, "window {window} drops: {fit}");
        let (orphans, open) = unpaired(&context);
        assert!(orphans.is_empty(), "window {window}: results without their call: {orphans:?}");
        assert!(open.is_empty(), "window {window}: calls without their result: {open:?}");
        // What it reports as elided is in the request, never among what it dropped.
        let (first, last) = (
            fit["dropped"]["positions"][0].as_u64().unwrap(),
            fit["dropped"]["positions"][1].as_u64().unwrap(),
        );
        for elision in fit["elided"].as_array().unwrap() {
            let position = elision["position"].as_u64().unwrap();
            assert!(!(first..=last).contains(&position), "window {window}: {position} elided and dropped");
        }
    }
}
