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
