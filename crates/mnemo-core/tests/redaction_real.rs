//! Redaction over real session files (`tests/fixtures/real/` from the repository root): what
//! the rules hide in ordinary coding sessions, as a snapshot. A rule that starts hiding ordinary
//! text (a port after `-p`, prose about passwords, code) changes the snapshot and names the text.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};

use mnemo_core::redaction::{REDACTED, redact_secrets};
use serde_json::Value;

fn real_fixtures() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("tests/fixtures/real");
    assert!(dir.is_dir(), "the real session files are expected at {}", dir.display());
    dir
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| strings(item, out)),
        _ => {}
    }
}

/// Each redaction in `redacted`, with the word before it (which names the rule that fired).
fn hidden_words(redacted: &str) -> Vec<String> {
    let words: Vec<&str> = redacted.split_whitespace().collect();
    let mut hidden = Vec::new();
    for (index, word) in words.iter().enumerate() {
        if word.contains(REDACTED) {
            let previous = index.checked_sub(1).map_or("", |i| words[i]);
            hidden.push(format!("{previous} {word}"));
        }
    }
    hidden
}

#[test]
fn real_sessions_lose_only_credentials_and_long_hex_runs() {
    let mut checked = 0usize;
    let mut hidden = Vec::new();
    for file in jsonl_files(&real_fixtures()) {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            let mut texts = Vec::new();
            strings(&value, &mut texts);
            for text in texts {
                checked += 1;
                let redacted = redact_secrets(text);
                if redacted != text {
                    hidden.extend(hidden_words(&redacted));
                }
            }
        }
    }
    hidden.sort();
    hidden.dedup();
    assert!(checked > 3_000, "the real files hold {checked} strings");
    // Every entry is a credential (a placeholder `--api-key sk-...` counts) or a run of at least
    // 40 hex digits (the rule for hex secrets also hides commit ids and content digests).
    let expected = [
        "\"gitHead\": \"[redacted]\"",
        "\"packageManager\": \"npm@10.8.1+sha256.[redacted]\"",
        "\"typesPublisherContentHash\": \"[redacted]\",",
        "--api-key [redacted]",
    ];
    assert_eq!(hidden, expected, "what redaction hides in the real sessions changed");
}
