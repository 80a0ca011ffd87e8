//! Automatic compaction triggers memory extraction: a checkpoint recorded before a turn freezes an
//! extraction boundary, and extraction then runs over the turns it folded, so their stated facts
//! become items without an explicit `remember`. Manual compaction freezes no boundary.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::compaction::CompactOptions;
use mnemo::log::ManualClock;
use mnemo::memory::RecallMemory;
use mnemo::records::{Position, SessionId};
use mnemo::{Config, Mnemo};
use mnemo_core::BoundaryDisposition;

const TRANSCRIPT: &str = r#"{"kind":"session","session":"s1","workspace":"w1"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"I prefer tabs over spaces in every file."}]}
{"session":"s1","turn":"t1","role":"model","parts":[{"type":"text","text":"Noted, tabs it is."}]}
{"session":"s1","turn":"t2","role":"user","parts":[{"type":"text","text":"Run the tests in src/parser."}]}
{"session":"s1","turn":"t2","role":"model","parts":[{"type":"text","text":"All 12 parser tests pass."}]}
{"session":"s1","turn":"t3","role":"user","parts":[{"type":"text","text":"Now look at the lexer."}]}
{"session":"s1","turn":"t3","role":"model","parts":[{"type":"text","text":"The lexer looks fine."}]}
{"session":"s1","turn":"t4","role":"user","parts":[{"type":"text","text":"And the printer?"}]}
{"session":"s1","turn":"t4","role":"model","parts":[{"type":"text","text":"The printer needs a fix in src/printer.rs."}]}
{"session":"s1","turn":"t5","role":"user","parts":[{"type":"text","text":"Fix it please."}]}
{"session":"s1","turn":"t5","role":"model","parts":[{"type":"text","text":"Fixed."}]}
"#;

/// The transcript with long model replies in the early turns, so a summary is smaller than them.
fn transcript() -> String {
    let long =
        "The parser walks the token stream, builds the tree and reports errors with spans. ".repeat(40);
    TRANSCRIPT
        .replace("Noted, tabs it is.", &format!("Noted, tabs it is. {long}"))
        .replace("All 12 parser tests pass.", &format!("All 12 parser tests pass. {long}"))
}

/// The default stages, with a history budget small enough that the transcript is due for compaction.
const PIPELINE: &str = r#"
[[stage]]
name = "session-catalog"
[[stage]]
name = "memory-index"
[[stage]]
name = "latest-checkpoint"
[stage.config]
max_history_tokens = 600
"#;

fn open(dir: &std::path::Path) -> Mnemo {
    let pipeline = dir.join("pipeline.toml");
    std::fs::write(&pipeline, PIPELINE).unwrap();
    let config = Config {
        pipeline: Some(pipeline),
        clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)),
        ..Config::default()
    };
    Mnemo::open(&dir.join("store"), config).unwrap()
}

#[test]
fn an_automatic_checkpoint_runs_extraction_over_the_turns_it_folds() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(transcript().as_bytes(), "t.jsonl").unwrap();
    let session = SessionId::new("s1").unwrap();
    assert_eq!(mnemo.memory().cursor(&session).unwrap(), 0);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let outcome =
        runtime.block_on(mnemo.compaction().prepare_history(&session, &CompactOptions::default())).unwrap();
    let recorded =
        outcome.recorded.unwrap_or_else(|| panic!("no checkpoint: {:?}", outcome.history.diagnostics));
    let boundary = recorded.checkpoint.extraction_boundary.as_ref().unwrap();
    assert_eq!(boundary.disposition, BoundaryDisposition::Eligible);

    let kinds: Vec<String> = mnemo
        .log_entries(Position(recorded.position.0 + 1), 10)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("memory_commit"), "{kinds:?}");
    assert!(mnemo.memory().cursor(&session).unwrap() > 0, "the extraction cursor advanced");
    let recalled =
        mnemo.memory().recall(&session, &RecallMemory { query: "tabs".to_owned(), limit: None }).unwrap();
    assert!(!recalled.is_empty(), "the stated preference became an item");
}

#[test]
fn manual_compaction_freezes_no_extraction_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(transcript().as_bytes(), "t.jsonl").unwrap();
    let session = SessionId::new("s1").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let outcome = runtime.block_on(mnemo.compaction().compact(&session, &CompactOptions::default())).unwrap();
    let recorded =
        outcome.recorded.unwrap_or_else(|| panic!("no checkpoint: {:?}", outcome.history.diagnostics));
    assert_eq!(recorded.checkpoint.extraction_boundary, None);
    assert_eq!(mnemo.memory().cursor(&session).unwrap(), 0, "no extraction ran");
}
