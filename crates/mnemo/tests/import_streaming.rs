//! An import read a line at a time (`Mnemo::import_file`) makes exactly the log an import of the
//! same bytes in memory makes, for every format and for real session files; a file whose sessions
//! interleave still goes out a session at a time; a bad line at the very end of a file too large
//! for one append appends nothing. What it holds in memory is measured by `mnemo bench
//! --import-memory` (see `docs/FORMAT.md`, "Memory").
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mnemo::log::ManualClock;
use mnemo::records::Position;
use mnemo::transcript::{ImportFormat, ImportStatus};
use mnemo::{Config, Error, Mnemo};

fn open(dir: &Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

/// Every envelope's position, stream, time and hash.
type LogRows = Vec<(u64, String, u64, String)>;

/// Every envelope's position, stream, time and hash, and every stage's digest.
fn log_and_stages(mnemo: &Mnemo) -> (LogRows, Vec<(String, String)>) {
    mnemo.catch_up().unwrap();
    let entries = mnemo.log_entries(Position::FIRST, usize::MAX).unwrap();
    let log = entries.into_iter().map(|e| (e.position.0, e.stream, e.timestamp.0, e.hash)).collect();
    let stages = mnemo.stats().unwrap().stages.into_iter().map(|s| (s.name, s.digest)).collect();
    (log, stages)
}

fn files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fixtures/import"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    let real = root.join("../../tests/fixtures/real/claude-code");
    for dir in ["small-with-subagents", "incremental-subagents", "incremental-simple"] {
        for entry in std::fs::read_dir(real.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    files.push(root.join("../mnemo-cli/samples/coding-session.jsonl"));
    files.sort();
    files
}

/// Three sessions whose lines interleave, with enough events that each session takes several
/// appends.
fn interleaved(events: usize) -> String {
    let mut text = String::new();
    for s in 0..3 {
        writeln!(text, r#"{{"kind":"session","session":"mix-{s}","title":"mixed {s}"}}"#).unwrap();
    }
    for e in 0..events {
        for s in 0..3 {
            let role = if e == 0 { "user" } else { "model" };
            writeln!(
                text,
                r#"{{"session":"mix-{s}","turn":"t","role":"{role}","id":"mix-{s}-{e}","parts":[{{"type":"text","text":"line {e} of session {s}"}}]}}"#
            )
            .unwrap();
        }
    }
    for s in 0..3 {
        writeln!(text, r#"{{"kind":"turn_end","session":"mix-{s}","turn":"t","status":"completed"}}"#)
            .unwrap();
    }
    text
}

#[test]
fn a_file_read_in_lines_makes_the_log_its_bytes_make() {
    for path in files() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (in_memory, streamed) = (open(a.path()), open(b.path()));
        let name = path.display().to_string();
        let whole = in_memory.import(&std::fs::read(&path).unwrap(), &name, ImportFormat::Auto).unwrap();
        let lines = streamed.import_file(&name, ImportFormat::Auto).unwrap();
        assert_eq!(lines, whole, "{name}");
        assert_eq!(log_and_stages(&streamed), log_and_stages(&in_memory), "{name}");
        // Read again, it is complete.
        let again = streamed.import_file(&name, ImportFormat::Auto).unwrap();
        assert_eq!(again.status, ImportStatus::AlreadyComplete, "{name}");
    }
}

#[test]
fn interleaved_sessions_go_out_a_session_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mixed.jsonl");
    std::fs::write(&file, interleaved(2_500)).unwrap();
    let store = dir.path().join("store");
    let mnemo = open(&store);
    let report = mnemo.import_file(file.to_str().unwrap(), ImportFormat::Mnemo).unwrap();
    assert_eq!(report.records, 3 * (2_500 + 2));
    let entries = mnemo.log_entries(Position::FIRST, usize::MAX).unwrap();
    let streams: Vec<&str> = entries.iter().map(|e| e.stream.as_str()).collect();
    let mut runs = streams.clone();
    runs.dedup();
    assert_eq!(runs, ["session/mix-0", "session/mix-1", "session/mix-2"]);

    let other = open(&dir.path().join("other"));
    other.import(&std::fs::read(&file).unwrap(), "mixed.jsonl", ImportFormat::Mnemo).unwrap();
    assert_eq!(log_and_stages(&other).0.len(), entries.len());
    assert_eq!(
        log_and_stages(&other).0.iter().map(|e| &e.3).collect::<Vec<_>>(),
        log_and_stages(&mnemo).0.iter().map(|e| &e.3).collect::<Vec<_>>()
    );
}

#[test]
fn a_bad_last_line_of_a_file_of_many_appends_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad-end.jsonl");
    let mut text = interleaved(2_000);
    text.push_str("{\"session\":\"mix-0\",\"turn\":\"t\",\"role\":\"model\",\"parts\":[]}\n");
    std::fs::write(&file, &text).unwrap();
    let mnemo = open(&dir.path().join("store"));
    let error = mnemo.import_file(file.to_str().unwrap(), ImportFormat::Auto).unwrap_err();
    let lines = text.lines().count();
    match &error {
        Error::Transcript(error) => assert_eq!((error.line, error.field.as_deref()), (lines, Some("parts"))),
        other => panic!("expected a transcript error, got {other}"),
    }
    assert_eq!(mnemo.log().head(), Position(0), "{error}");
}

#[test]
fn a_missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(&dir.path().join("store"));
    let missing = dir.path().join("nowhere.jsonl");
    let error = mnemo.import_file(missing.to_str().unwrap(), ImportFormat::Auto).unwrap_err();
    assert!(matches!(error, Error::Read { .. }), "{error}");
    assert!(error.to_string().contains("nowhere.jsonl"), "{error}");
}
