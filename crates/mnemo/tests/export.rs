//! Export round trips: export → import → export is byte-identical, and import → export → import
//! gives the same log (every envelope's hash, so every record, time and position) and the same
//! projection digests.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mnemo::log::ManualClock;
use mnemo::records::{Position, SessionId};
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};

const FIXTURES: [&str; 13] = [
    "codex-rollout.jsonl",
    "codex-rollout-subagent.jsonl",
    "codex-rollout-0.128.jsonl",
    "codex-rollout-legacy.jsonl",
    "codex-rollout-bare-2025.jsonl",
    "claude-code.jsonl",
    "claude-code-2.0-compaction.jsonl",
    "claude-code-2.1.jsonl",
    "swe-agent-function-calling.traj",
    "swe-agent-thought-action.traj",
    "chat-completions.json",
    "chat-dataset.jsonl",
    "maka-events.jsonl",
];

fn fixture(name: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = if name.starts_with("samples/") {
        root.join("../mnemo-cli").join(name)
    } else {
        root.join("tests/fixtures/import").join(name)
    };
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn open(dir: &Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn export(mnemo: &Mnemo) -> Vec<u8> {
    let mut out = Vec::new();
    mnemo.export_transcript(&mut out).unwrap();
    out
}

/// Every envelope's position, stream, time and hash: equal lists mean equal logs.
fn log_digest(mnemo: &Mnemo) -> Vec<(u64, String, u64, String)> {
    let entries = mnemo.log_entries(Position::FIRST, usize::MAX).unwrap();
    entries.into_iter().map(|e| (e.position.0, e.stream, e.timestamp.0, e.hash)).collect()
}

fn stage_digests(mnemo: &Mnemo) -> Vec<(String, String)> {
    mnemo.stats().unwrap().stages.into_iter().map(|s| (s.name, s.digest)).collect()
}

fn import_all(mnemo: &Mnemo) {
    for name in
        FIXTURES.iter().copied().chain(["samples/coding-session.jsonl", "samples/research-session.jsonl"])
    {
        mnemo.import(&fixture(name), name, ImportFormat::Auto).unwrap();
    }
}

#[test]
fn import_export_import_gives_the_same_log_and_export_import_export_the_same_bytes() {
    let (a, b, c) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = open(a.path());
    import_all(&first);
    let exported = export(&first);

    let second = open(b.path());
    let report = second.import(&exported, "export.jsonl", ImportFormat::Auto).unwrap();
    assert_eq!(report.format, ImportFormat::Mnemo);
    assert!(report.skipped.is_empty());
    assert_eq!(log_digest(&second), log_digest(&first), "import → export → import changed the log");
    assert_eq!(stage_digests(&second), stage_digests(&first));

    let again = export(&second);
    assert_eq!(String::from_utf8(again.clone()).unwrap(), String::from_utf8(exported.clone()).unwrap());

    let third = open(c.path());
    third.import(&again, "again.jsonl", ImportFormat::Mnemo).unwrap();
    assert_eq!(export(&third), exported, "export → import → export changed the bytes");
}

#[test]
fn events_the_parts_form_cannot_hold_travel_whole_and_other_records_are_counted() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = open(a.path());
    first.import(&fixture("maka-events.jsonl"), "maka", ImportFormat::Maka).unwrap();
    first.import(&fixture("samples/coding-session.jsonl"), "coding", ImportFormat::Mnemo).unwrap();
    // A copy adds a record the transcript format does not carry, and a session made of copies.
    let copy = first.compaction().copy(&SessionId::new("sess-2026-01-05-auth").unwrap(), None, None).unwrap();
    let mut exported = Vec::new();
    let report = first.export_transcript(&mut exported).unwrap();
    assert_eq!(report.sessions, 3);
    // Every maka event but the plain user text carries what `parts` cannot hold.
    assert!(report.runtime_event_lines >= 6, "{report:?}");
    assert_eq!(report.skipped.get("conversation_copied"), Some(&1), "{report:?}");
    let text = String::from_utf8(exported.clone()).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with(r#"{"kind":"runtime_event","event":{"id":"rt-event_mjr2k1_5""#))
    );
    assert!(text.contains(copy.session.as_str()));

    let second = open(b.path());
    second.import(&exported, "export", ImportFormat::Mnemo).unwrap();
    assert_eq!(export(&second), exported);
}
