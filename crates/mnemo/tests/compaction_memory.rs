//! Automatic compaction triggers memory extraction: a checkpoint recorded before a turn freezes an
//! extraction boundary, and extraction then runs over the turns it folded, so their stated facts
//! become items without an explicit `remember`. Every fold does so, whatever triggered it
//! (automatic, manual, mid-turn), and a later extraction finds what a fold covered if extraction
//! never ran over it.
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
fn manual_compaction_runs_extraction_over_the_turns_it_folds() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(transcript().as_bytes(), "t.jsonl").unwrap();
    let session = SessionId::new("s1").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let outcome = runtime.block_on(mnemo.compaction().compact(&session, &CompactOptions::default())).unwrap();
    let recorded =
        outcome.recorded.unwrap_or_else(|| panic!("no checkpoint: {:?}", outcome.history.diagnostics));
    let boundary = recorded.checkpoint.extraction_boundary.as_ref().unwrap();
    assert_eq!(boundary.disposition, BoundaryDisposition::Eligible);
    assert!(mnemo.memory_cursor(&session).unwrap() > 0, "extraction ran over the folded turns");
    let recalled =
        mnemo.recall_memory(&session, &RecallMemory { query: "tabs".to_owned(), limit: None }).unwrap();
    assert!(!recalled.is_empty(), "the folded preference became an item");
}

/// Every item content the memory commits of `mnemo` hold, sorted, with each commit's range.
fn committed(mnemo: &Mnemo) -> (Vec<String>, Vec<(u64, u64)>) {
    let mut items = Vec::new();
    let mut ranges = Vec::new();
    for entry in mnemo.log_entries(Position(1), usize::MAX).unwrap() {
        if entry.kind != "memory_commit" {
            continue;
        }
        let cursor = &entry.record["cursor"];
        ranges.push((cursor["expected"].as_u64().unwrap(), cursor["next"].as_u64().unwrap()));
        for item in entry.record["items"].as_array().into_iter().flatten() {
            let content = item.pointer("/fields/content").or_else(|| item.get("content"));
            items.push(content.and_then(|c| c.as_str()).unwrap_or_default().to_owned());
        }
    }
    items.sort();
    (items, ranges)
}

fn samples_store(dir: &std::path::Path) -> Mnemo {
    let mnemo = Mnemo::open(&dir.join("store"), Config::default()).unwrap();
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../mnemo-cli/samples");
    let mut files: Vec<_> = std::fs::read_dir(samples).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        mnemo.import(&bytes, &file.display().to_string(), mnemo::ImportFormat::Auto).unwrap();
    }
    mnemo
}

/// Regression: a manual compaction committed its extraction as skipped and moved the cursor past
/// the folded turns, so compact-then-extract on the bundled samples found 0 items where extract
/// alone found them.
#[test]
fn compact_then_extract_finds_the_same_items_as_extract_alone() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let alone_dir = tempfile::tempdir().unwrap();
    let alone = samples_store(alone_dir.path());
    let sessions: Vec<SessionId> = alone.sessions().unwrap().into_iter().map(|s| s.session).collect();
    for session in &sessions {
        runtime.block_on(alone.extract(session, None)).unwrap();
    }
    let compacted_dir = tempfile::tempdir().unwrap();
    let compacted = samples_store(compacted_dir.path());
    let mut folded = 0;
    for session in &sessions {
        let outcome = runtime.block_on(compacted.compact(session, &CompactOptions::default())).unwrap();
        folded += usize::from(outcome.recorded.is_some());
        runtime.block_on(compacted.extract(session, None)).unwrap();
        // Extract again: nothing is read twice.
        runtime.block_on(compacted.extract(session, None)).unwrap();
    }
    assert!(folded >= 3, "the samples were compacted ({folded} checkpoints)");
    let (expected, _) = committed(&alone);
    let (found, ranges) = committed(&compacted);
    assert!(!expected.is_empty(), "the samples hold facts to extract");
    assert_eq!(found, expected);
    // Exactly once: the commits of one session never overlap.
    for window in ranges.windows(2) {
        let ((_, next), (expected, _)) = (window[0], window[1]);
        assert!(expected == next || expected == 0, "{ranges:?}");
    }
}

/// A checkpoint that carries no extraction boundary (here: rebuilt by a conversation copy, which
/// drops it) does not make the first extraction skip what it folded.
#[test]
fn a_first_extraction_reads_what_a_boundaryless_checkpoint_folded() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(transcript().as_bytes(), "t.jsonl").unwrap();
    let session = SessionId::new("s1").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(mnemo.compact(&session, &CompactOptions::default())).unwrap();
    let copy = mnemo.copy_conversation(&session, None, None).unwrap();
    assert_eq!(copy.checkpoints_rebuilt, 1);
    assert_eq!(mnemo.memory_cursor(&copy.session).unwrap(), 0);
    runtime.block_on(mnemo.extract(&copy.session, None)).unwrap();
    let first = mnemo
        .log_entries(Position(copy.positions.1.0 + 1), usize::MAX)
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "memory_commit")
        .unwrap();
    assert_eq!(first.record["cursor"]["expected"], 0, "{}", first.record);
    assert!(first.record.get("skip_reason").is_none_or(|r| r.is_null()), "{}", first.record);
}
