//! Capturing a transcript its agent is still writing, as a hook's `capture` does at every stop: the
//! real Claude Code session files (`tests/fixtures/real/`) and Codex rollouts written as Codex
//! writes them, grown between captures. A capture of a file captured before reads only what
//! follows the bytes the last capture read; a file that shrank, was rewritten, had a line put in
//! before its end, or whose sessions another writer added to since, is read whole. Either way the
//! store ends as one import of the whole file leaves it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mnemo::log::ManualClock;
use mnemo::transcript::{ImportFormat, ImportReport, ImportStatus};
use mnemo::{Config, Error, Mnemo};
use mnemo_server::capture::{Captured, capture_file};

fn real(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real/claude-code").join(path)
}

fn written(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mnemo/tests/fixtures/import").join(name)
}

fn open(dir: &Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

/// A capture's report and where it began reading.
fn captured(mnemo: &Mnemo, path: &Path, format: ImportFormat) -> (ImportReport, u64) {
    match capture_file(mnemo, path, format).unwrap() {
        Captured::Imported { report, read_from_byte, .. } => (report, read_from_byte),
        other => panic!("{}: {other:?}", path.display()),
    }
}

/// The store's whole content: its export and its head.
fn content(mnemo: &Mnemo) -> (String, mnemo::records::Position) {
    let mut exported = Vec::new();
    mnemo.export_transcript(&mut exported).unwrap();
    (String::from_utf8(exported).unwrap(), mnemo.log().head())
}

/// Growing files as two snapshots, the later one the earlier one with lines appended.
const APPENDED: [(&str, &str); 2] = [
    ("incremental-simple/turn-1.jsonl", "incremental-simple/turn-2.jsonl"),
    ("incremental-subagents/turn-1.jsonl", "incremental-subagents/turn-2.jsonl"),
];

/// Every stop used to read, convert and compare the whole transcript again.
#[test]
fn a_capture_after_the_transcript_grew_reads_only_what_follows_the_last_capture() {
    for (early, late) in APPENDED {
        let (dir, once_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (mnemo, once) = (open(&dir.path().join("store")), open(once_dir.path()));
        let transcript = dir.path().join("session.jsonl");
        let (early, late) = (std::fs::read(real(early)).unwrap(), std::fs::read(real(late)).unwrap());
        assert!(late.starts_with(&early), "{late_name}: appended", late_name = late.len());

        std::fs::write(&transcript, &early).unwrap();
        let (first, from) = captured(&mnemo, &transcript, ImportFormat::ClaudeCode);
        assert_eq!((first.status, from), (ImportStatus::Imported, 0));

        std::fs::write(&transcript, &late).unwrap();
        let (grown, from) = captured(&mnemo, &transcript, ImportFormat::ClaudeCode);
        assert_eq!(from, early.len() as u64, "only what follows the first capture's bytes is read");
        assert_eq!(grown.status, ImportStatus::Resumed);
        assert!(grown.records > 0);

        // As one import of the whole file: the same records at the same positions, and the
        // same report of what the file holds.
        let whole = once.import(&late, &transcript.display().to_string(), ImportFormat::ClaudeCode).unwrap();
        assert_eq!(content(&mnemo), content(&once));
        assert_eq!(whole.records, first.records + grown.records);
        assert_eq!((grown.lines, grown.already), (whole.lines, first.records));
        assert_eq!(grown.sessions_in_file, whole.sessions_in_file);

        // Nothing new: the next capture reads nothing but the file's end, and appends nothing.
        let head = mnemo.log().head();
        let (again, from) = captured(&mnemo, &transcript, ImportFormat::ClaudeCode);
        assert_eq!(
            (again.status, again.records, from),
            (ImportStatus::AlreadyComplete, 0, late.len() as u64)
        );
        assert_eq!(again.already, whole.records);
        assert_eq!(mnemo.log().head(), head);
    }
}

/// The outcome of importing `steps` one after another, each the file as it stood then: the
/// store's content after the last, or the first error's message.
type Outcome = Result<(String, mnemo::records::Position), String>;

fn stepwise(steps: &[&[u8]], format: ImportFormat, by_capture: bool) -> (Outcome, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(&dir.path().join("store"));
    let transcript = dir.path().join("transcript.jsonl");
    let mut read_from = Vec::new();
    for step in steps {
        let result = if by_capture {
            std::fs::write(&transcript, step).unwrap();
            capture_file(&mnemo, &transcript, format).map(|captured| match captured {
                Captured::Imported { read_from_byte, .. } => read_from.push(read_from_byte),
                _ => read_from.push(0),
            })
        } else {
            let complete = mnemo_server::capture::complete_len(step);
            match mnemo.import(&step[..complete], &transcript.display().to_string(), format) {
                Ok(_) => Ok(()),
                Err(Error::Transcript(e))
                    if e.reason.starts_with(mnemo::transcript::NO_CONVERSATION_LINES) =>
                {
                    Ok(())
                }
                Err(error) => Err(error),
            }
        };
        if let Err(error) = result {
            return (Err(error.to_string()), read_from);
        }
    }
    (Ok(content(&mnemo)), read_from)
}

/// A resumed capture goes on from the converter's state where the last capture's bytes ended,
/// before what the end of a file does (an open turn's end, a Codex turn's results still open to
/// an exit status a later line reports): cut anywhere, at a line's end or inside a line still
/// being written, two captures leave what two whole imports leave, error for error.
#[test]
fn a_transcript_cut_anywhere_resumes_to_what_reading_it_whole_gives() {
    let cases: [(PathBuf, ImportFormat, usize); 4] = [
        (written("codex-rollout-0.128.jsonl"), ImportFormat::Codex, 9),
        (written("codex-rollout-forked.jsonl"), ImportFormat::Codex, 17),
        (written("claude-code-2.0-compaction.jsonl"), ImportFormat::ClaudeCode, 7),
        (real("incremental-subagents/turn-2.jsonl"), ImportFormat::ClaudeCode, 23),
    ];
    let mut resumed = 0;
    for (path, format, step) in cases {
        let bytes = std::fs::read(&path).unwrap();
        let ends: Vec<usize> =
            bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1).collect();
        for (index, end) in ends.iter().copied().enumerate().step_by(step) {
            // At a line's end, or (every other cut) with half of the next line written too.
            let half = ends.get(index + 1).map_or(end, |next| end + (next - end) / 2);
            let cut = if (index / step) % 2 == 0 { end } else { half };
            let steps: [&[u8]; 2] = [&bytes[..cut], &bytes];
            let (by_capture, read_from) = stepwise(&steps, format, true);
            let (by_import, _) = stepwise(&steps, format, false);
            assert_eq!(by_capture, by_import, "{} cut at byte {cut}", path.display());
            if by_capture.is_ok() && read_from.first() == Some(&0) && read_from.get(1) == Some(&(end as u64))
            {
                resumed += 1;
            }
        }
    }
    assert!(resumed >= 8, "{resumed} second captures resumed");
}

/// What a capture read before must still be the file's first bytes and its sessions' streams
/// must hold nothing more; else the file is read whole, as the first capture read it.
#[test]
fn a_truncated_rewritten_or_otherwise_changed_transcript_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(&dir.path().join("store"));
    let early = std::fs::read(real("incremental-simple/turn-1.jsonl")).unwrap();
    let late = std::fs::read(real("incremental-simple/turn-2.jsonl")).unwrap();
    let format = ImportFormat::ClaudeCode;

    // Truncated to an earlier snapshot after the later one was captured: read whole, nothing
    // appended, the records beyond its end counted.
    let shrunk = dir.path().join("shrunk.jsonl");
    std::fs::write(&shrunk, &late).unwrap();
    let (whole, _) = captured(&mnemo, &shrunk, format);
    std::fs::write(&shrunk, &early).unwrap();
    let (report, from) = captured(&mnemo, &shrunk, format);
    assert_eq!((report.status, from), (ImportStatus::AlreadyComplete, 0));
    assert_eq!(report.store_ahead, whole.records - report.already);

    // Rewritten in place, one byte of an early line changed, and grown: the change is found
    // (reading only the new lines would have missed it) and nothing is appended.
    let other = open(&dir.path().join("other"));
    let rewritten = dir.path().join("rewritten.jsonl");
    std::fs::write(&rewritten, &early).unwrap();
    captured(&other, &rewritten, format);
    let mut changed = late.clone();
    let at = changed.windows(8).position(|w| w == b"\"text\":\"").unwrap() + 10;
    assert!(at < early.len() && changed[at].is_ascii_alphabetic(), "a letter of an early text");
    changed[at] = if changed[at] == b'x' { b'y' } else { b'x' };
    std::fs::write(&rewritten, &changed).unwrap();
    let head = other.log().head();
    let error = capture_file(&other, &rewritten, format).unwrap_err().to_string();
    assert!(error.contains("changed since it was imported"), "{error}");
    assert_eq!(other.log().head(), head);

    // A line put in before the file's end (the real sub-agent file's later snapshot): read whole.
    let agent = dir.path().join("agent-a485154.jsonl");
    std::fs::copy(real("incremental-subagents/turn-1/subagents/agent-a485154.jsonl"), &agent).unwrap();
    captured(&mnemo, &agent, format);
    std::fs::copy(real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl"), &agent).unwrap();
    let (report, from) = captured(&mnemo, &agent, format);
    assert_eq!((report.status, from), (ImportStatus::AlreadyComplete, 0));

    // Another writer took the grown file's records first (an import of it): read whole.
    let third = open(&dir.path().join("third"));
    let grown = dir.path().join("grown.jsonl");
    std::fs::write(&grown, &early).unwrap();
    captured(&third, &grown, format);
    third.import(&late, "elsewhere", format).unwrap();
    std::fs::write(&grown, &late).unwrap();
    let (report, from) = captured(&third, &grown, format);
    assert_eq!((report.status, from), (ImportStatus::AlreadyComplete, 0));
}
