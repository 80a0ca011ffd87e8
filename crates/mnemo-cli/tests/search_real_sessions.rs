//! `mnemo search` and `mnemo recall` on real Claude Code session files
//! (`tests/fixtures/real/`, read in place) and on files in the exact shape Claude Code writes:
//! what a user looking for something they know is there gets back, held to what the files contain.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::path::Path;

use serde_json::Value;

use support::{mnemo, ok_json, real};

/// `(match_kind, message_id, snippet)` of each row `mnemo search QUERY` returns (exit 1 is
/// "no match", with an empty page on stdout).
fn search(store: &Path, query: &str) -> Vec<(String, String, String)> {
    let output = mnemo(store, &["--json", "search", query, "--limit", "10"]);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&output.stderr));
    let found: Value = serde_json::from_slice(&output.stdout).unwrap();
    found["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let field = |name: &str| row[name].as_str().unwrap_or_default().to_owned();
            (field("match_kind"), field("message_id"), field("snippet"))
        })
        .collect()
}

#[test]
fn a_word_that_starts_a_line_of_a_tool_result_is_found_and_the_snippet_reads_as_text() {
    // The sub-agent's Glob answered "Found 4 files\nsrc/utils/paths.ts\n…": every path starts a
    // line. The result was indexed as escaped JSON, so each line's first word was `nsrc`, and the
    // snippet showed `\n` between the paths.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));

    assert_eq!(search(&store, "nsrc"), Vec::new(), "no word of the sessions is `nsrc`");
    let rows = search(&store, "src/utils/paths.ts");
    let glob = rows
        .iter()
        .find(|(_, message, _)| message == "973a7a8c-011b-463b-9f85-ac277eed1923/results")
        .unwrap_or_else(|| panic!("the Glob result that lists the file is not found: {rows:#?}"));
    assert_eq!(glob.0, "tool_result");
    assert_eq!(
        glob.2,
        "Found 4 files src/utils/paths.ts src/utils/config.ts src/utils/__tests__/paths.test.ts src/uti…"
    );
    // The Grep listing: its paths each start a line too.
    let rows = search(&store, "src/migrations/registry.ts");
    assert_eq!(rows[0].1, "ad4498a1-9641-4f92-b691-a3b15801e045/results", "{rows:#?}");
    assert!(!rows[0].2.contains("\\n"), "{}", rows[0].2);
}

#[test]
fn the_note_claude_code_appends_to_a_file_read_is_not_what_the_file_says() {
    // Claude Code appends `<system-reminder>Whenever you read a file, you should consider whether
    // it would be considered malware. … write reports …</system-reminder>` to every Read result.
    // Every file read matched "malware" and "write reports" (the one Read here; 15 results across
    // the real files' latest snapshots), though no file the sessions read says either.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = real("small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));

    assert_eq!(search(&store, "malware"), Vec::new());
    assert_eq!(search(&store, "write reports"), Vec::new());
    // What the file says is still found, in the file read's result.
    let rows = search(&store, "print main");
    let read = rows
        .iter()
        .find(|(_, message, _)| message == "fe215010-5a2f-4ce0-995d-931072824cfd/results")
        .unwrap_or_else(|| panic!("the Read result of hello.py is not found: {rows:#?}"));
    assert!(read.2.starts_with("1→#!/usr/bin/env python3 2→ 3→def main():"), "{}", read.2);
}
