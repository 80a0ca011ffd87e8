//! `compact`, `context` and `copy` as processes on a long imported transcript.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use support::{mnemo, stdout};

/// A transcript of `turns` turns, each a request, a shell call and its result, and a reply.
fn long_transcript(turns: usize) -> String {
    let mut out = String::from("{\"kind\":\"session\",\"session\":\"long\",\"title\":\"a long session\"}\n");
    for i in 0..turns {
        let t = format!("t{i:03}");
        out.push_str(&format!("{{\"session\":\"long\",\"turn\":\"{t}\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"Step {i}: fix src/part_{i}.rs\"}}]}}\n"));
        out.push_str(&format!("{{\"session\":\"long\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"tool_call\",\"id\":\"c{i}\",\"name\":\"shell\",\"args\":{{\"cmd\":\"cargo test part_{i}\"}}}}]}}\n"));
        out.push_str(&format!("{{\"session\":\"long\",\"turn\":\"{t}\",\"role\":\"tool\",\"parts\":[{{\"type\":\"tool_result\",\"id\":\"c{i}\",\"name\":\"shell\",\"result\":\"{}\"}}]}}\n", "test output line ".repeat(30)));
        out.push_str(&format!("{{\"session\":\"long\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"text\",\"text\":\"Fixed src/part_{i}.rs.\"}}]}}\n"));
    }
    out
}

#[test]
fn context_on_a_long_transcript_prints_the_block_the_tail_and_the_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("long.jsonl");
    std::fs::write(&file, long_transcript(120)).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());

    let before = mnemo(&store, &["context", "long", "--window", "20000"]);
    assert!(before.status.success());
    let text = stdout(&before);
    assert!(text.contains("checkpoint none") && text.contains("compaction due  yes"), "{text}");

    let compact = mnemo(&store, &["compact", "long"]);
    assert_eq!(compact.status.code(), Some(0), "{}", stdout(&compact));
    assert!(stdout(&compact).starts_with("recorded hcheckpoint-"), "{}", stdout(&compact));

    let after = mnemo(&store, &["context", "long"]);
    let text = stdout(&after);
    assert!(text.contains("[checkpoint]\n<maka_history_compact_checkpoint id=\"hcheckpoint-"), "{text}");
    assert!(text.contains("## Goal") && text.contains("## Critical Context"), "{text}");
    assert!(text.contains("t119 user] Step 119: fix src/part_119.rs"), "the tail: {text}");
    assert!(!text.contains("t118 user]"), "covered events are not replayed raw: {text}");
    assert!(text.contains("decision        replaced") && text.contains("events read     4"), "{text}");

    let json = mnemo(&store, &["context", "long", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["diagnostics"]["decision"], "replaced");
    assert_eq!(value["items"][0]["kind"], "checkpoint");

    let early = mnemo(&store, &["context", "long", "--as-of", "10", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&early.stdout).unwrap();
    assert_eq!(value["boundary"], serde_json::Value::Null);

    let copy = mnemo(&store, &["copy", "long", "--to", "long-copy"]);
    assert_eq!(stdout(&copy).trim(), "long-copy");
    let copied = mnemo(&store, &["context", "long-copy"]);
    assert!(stdout(&copied).contains("decision        replaced"), "{}", stdout(&copied));
    assert!(mnemo(&store, &["verify"]).status.success());
}

#[test]
fn context_of_an_unknown_session_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = mnemo(&dir.path().join("store"), &["context", "nope"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn context_with_the_history_search_pipeline_brings_back_what_the_request_asks_about() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("long.jsonl");
    std::fs::write(&file, long_transcript(60)).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());
    assert_eq!(mnemo(&store, &["compact", "long"]).status.code(), Some(0));
    let pipeline = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/history-search.toml");
    let args = ["--pipeline", pipeline, "context", "long", "--search-text", "What broke in src/part_7.rs?"];
    let output = mnemo(&store, &args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = stdout(&output);
    assert!(text.contains("[history search]\n<history_search_results>"), "{text}");
    assert!(text.contains("t007, user] Step 7: fix src/part_7.rs"), "{text}");
    assert!(text.contains("history search  \"what broke in src/part_7.rs\""), "{text}");
    // The default pipeline keeps it off.
    let plain = stdout(&mnemo(&store, &["context", "long", "--search-text", "What broke in src/part_7.rs?"]));
    assert!(!plain.contains("[history search]") && !plain.contains("history search  "), "{plain}");
}
