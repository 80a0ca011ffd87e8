//! `mnemo memory ...` and `mnemo recall` as a process: results, `--json`, idempotent retries
//! and exit codes (0 ok, 1 nothing found, 2 input error, 3 conflict).
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;
use std::process::{Command, Output};

const TRANSCRIPT: &str = r#"{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"Our project uses fjall for storage. I prefer tabs over spaces."}]}
{"session":"s1","turn":"t2","role":"user","parts":[{"type":"text","text":"Remember that I never use unwrap in library code."}]}
"#;

fn mnemo(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn remember_search_lifecycle_and_recall() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, TRANSCRIPT).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());

    let remembered = json(&mnemo(&store, &["--json", "memory", "remember", "s1"]));
    assert_eq!(remembered["status"], "remembered");
    assert_eq!(remembered["requested_items"][0]["content"], "The user never uses unwrap in library code.");
    let id = remembered["requested_items"][0]["item"].as_str().unwrap().to_owned();

    let found = json(&mnemo(&store, &["--json", "memory", "search", "fjall", "--workspace", "acme/api"]));
    assert_eq!(found.as_array().unwrap().len(), 1);
    let elsewhere = mnemo(&store, &["--json", "memory", "search", "fjall", "--workspace", "other/ws"]);
    assert_eq!(elsewhere.status.code(), Some(1), "nothing found");

    let archive = ["--json", "memory", "archive", id.as_str(), "--expected-version", "1", "--op", "a1"];
    assert_eq!(json(&mnemo(&store, &archive))["replayed"], false);
    assert_eq!(json(&mnemo(&store, &archive))["replayed"], true);
    let stale = mnemo(&store, &["memory", "archive", &id, "--expected-version", "1", "--op", "a2"]);
    assert_eq!(stale.status.code(), Some(3), "a version conflict");
    assert_eq!(mnemo(&store, &["memory", "search", "unwrap"]).status.code(), Some(1));
    assert!(mnemo(&store, &["memory", "search", "unwrap", "--include-archived"]).status.success());
    let restored = json(&mnemo(&store, &["--json", "memory", "restore", &id, "--expected-version", "2"]));
    assert_eq!(restored["results"][0]["version"], 3);
    let updated = json(&mnemo(
        &store,
        &["--json", "memory", "update", &id, "--expected-version", "3", "--key", "Rust style"],
    ));
    assert_eq!(updated["results"][0]["outcome"], "updated");
    assert_eq!(
        json(&mnemo(&store, &["--json", "memory", "get", &id]))["fields"]["keys"][0]["key"],
        "Rust style"
    );
    assert_eq!(mnemo(&store, &["memory", "get", "mem_missing"]).status.code(), Some(1));
    assert_eq!(mnemo(&store, &["memory", "search", "a\u{200B}b"]).status.code(), Some(2), "an input error");

    let recalled =
        json(&mnemo(&store, &["--json", "recall", "s1", "--query", "which storage engine, fjall?"]));
    assert!(recalled[0]["content"].as_str().unwrap().contains("fjall"));
    let block = json(&mnemo(&store, &["--json", "recall", "s1"]));
    assert!(block["tokens"].as_u64().unwrap() > 0);
    assert!(mnemo(&store, &["verify"]).status.success());
}
