//! Extraction on real Claude Code sessions (`tests/fixtures/real/` from the repository root)
//! and on a session written in the exact shape Claude Code writes: standing instructions,
//! corrections and project facts the user states become items; tasks, questions, slash-command
//! markup and the assistant's guesses while debugging never do. The items are a snapshot: a rule
//! that starts reading junk changes it and names the item.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};

use mnemo::memory::ListRequest;
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn real_session_files() -> Vec<PathBuf> {
    let dir = repo_root().join("tests/fixtures/real/claude-code");
    assert!(dir.is_dir(), "the real session files are expected at {}", dir.display());
    let mut files = Vec::new();
    let mut todo = vec![dir];
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

/// Imports `files` into a fresh store, extracts every session and returns the active items'
/// contents with their kind and scope, in listing order.
fn extracted(dir: &Path, files: &[PathBuf]) -> Vec<String> {
    let mnemo = Mnemo::open(dir, Config::default()).unwrap();
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        mnemo.import(&bytes, &file.display().to_string(), ImportFormat::ClaudeCode).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for summary in mnemo.history().sessions().unwrap() {
        rt.block_on(mnemo.memory().extract(&summary.session, None)).unwrap();
    }
    let items = mnemo.memory().list(&ListRequest::default()).unwrap();
    items
        .iter()
        .map(|i| {
            let scope =
                if i.fields.scope == mnemo::records::MemoryScope::Global { "global" } else { "workspace" };
            format!("{:?}/{scope}: {}", i.fields.kind, i.fields.content)
        })
        .collect()
}

#[test]
fn real_sessions_give_no_junk() {
    let dir = tempfile::tempdir().unwrap();
    let items = extracted(dir.path(), &real_session_files());
    // These sessions hold tasks ("create hello.py, md and js", "tell me more about agent module")
    // and sub-agent prompts; none states a standing fact, and nothing is made up from them.
    assert_eq!(items, Vec::<String>::new());
}

#[test]
fn standing_instructions_corrections_and_project_facts_are_extracted_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        repo_root().join("crates/mnemo/tests/fixtures/memory/claude-code-standing-instructions.jsonl");
    let items = extracted(dir.path(), &[fixture]);
    let expected = [
        "Preference/workspace: The user's instruction: TODO is not acceptable, implementation must be full.",
        "Preference/workspace: The user's instruction: performance is crucial, the queue sits on the hot path.",
        "Context/workspace: The user's instruction: use tokio::sync::Mutex instead of std::sync::Mutex in async code.",
        "Context/workspace: The project uses nextest for tests, so run cargo nextest run instead of cargo test.",
        "Preference/workspace: The user's instruction: don't commit until the final step, they will review the diff first.",
        "Preference/workspace: The user's instruction: never push to main without asking them.",
    ];
    let mut sorted_items = items.clone();
    sorted_items.sort();
    let mut sorted_expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    sorted_expected.sort();
    assert_eq!(sorted_items, sorted_expected, "extracted: {items:#?}");
}

/// A store holding `files`, each session compacted first when `compact`, then extracted: its
/// items' contents, sorted, and each session's extraction cursor with its event count.
fn extracted_after(dir: &Path, files: &[PathBuf], compact: bool) -> (Vec<String>, Vec<(String, u64, u64)>) {
    let mnemo = Mnemo::open(dir, Config::default()).unwrap();
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        mnemo.import(&bytes, &file.display().to_string(), ImportFormat::ClaudeCode).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut cursors = Vec::new();
    for summary in mnemo.history().sessions().unwrap() {
        if compact {
            let options = mnemo::compaction::CompactOptions::default();
            rt.block_on(mnemo.compaction().compact(&summary.session, &options)).unwrap();
        }
        rt.block_on(mnemo.memory().extract(&summary.session, None)).unwrap();
        let events = mnemo.memory().cursor(&summary.session).unwrap();
        cursors.push((summary.session.to_string(), events, summary.event_count));
    }
    cursors.sort();
    let mut items: Vec<String> =
        mnemo.memory().list(&ListRequest::default()).unwrap().into_iter().map(|i| i.fields.content).collect();
    items.sort();
    (items, cursors)
}

#[test]
fn compact_then_extract_finds_what_extract_alone_finds_on_real_sessions() {
    let mut files = real_session_files();
    files
        .push(repo_root().join("crates/mnemo/tests/fixtures/memory/claude-code-standing-instructions.jsonl"));
    let (alone_dir, compacted_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (expected, alone_cursors) = extracted_after(alone_dir.path(), &files, false);
    let (found, cursors) = extracted_after(compacted_dir.path(), &files, true);
    assert_eq!(expected.len(), 6, "the standing instructions are extracted: {expected:#?}");
    assert_eq!(found, expected);
    assert_eq!(cursors, alone_cursors);
}
