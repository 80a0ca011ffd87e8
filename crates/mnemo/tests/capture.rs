//! Importing a file again: live capture of a growing session file and the rerun of an import that
//! stopped part-way are one mechanism — the records the log holds are what was taken — so an import
//! in steps leaves the log a single import leaves, and a file imported again appends only what is
//! new. Real Claude Code snapshots of growing sessions are read from `tests/fixtures/real/`.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mnemo::log::ManualClock;
use mnemo::records::{Position, SessionId};
use mnemo::stages::StageReport;
use mnemo::transcript::{ImportFormat, ImportStatus};
use mnemo::{Config, Error, Mnemo};

fn open(dir: &Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn real(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real/claude-code").join(path)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn import(mnemo: &Mnemo, path: &Path) -> mnemo::transcript::ImportReport {
    mnemo.import(&read(path), &path.display().to_string(), ImportFormat::Auto).unwrap()
}

/// Every stage's digest, and every session's visible messages (text and ids), as the store ends.
fn observed(mnemo: &Mnemo) -> (Vec<StageReport>, Vec<String>) {
    mnemo.catch_up().unwrap();
    let stages = mnemo.stats().unwrap().stages;
    let mut messages = Vec::new();
    for summary in mnemo.history().sessions().unwrap() {
        let transcript = mnemo.history().transcript(&summary.session, None).unwrap().unwrap();
        for message in transcript.messages {
            messages.push(format!("{} {} {:?}", summary.session, message.event_id, message.text));
        }
    }
    (stages, messages)
}

/// Each growing real file as two snapshots. The sub-agent file's later snapshot holds a new line
/// in the middle (line 23 of 45).
const GROWING: [(&str, &str); 3] = [
    ("incremental-simple/turn-1.jsonl", "incremental-simple/turn-2.jsonl"),
    ("incremental-subagents/turn-1.jsonl", "incremental-subagents/turn-2.jsonl"),
    (
        "incremental-subagents/turn-1/subagents/agent-a485154.jsonl",
        "incremental-subagents/turn-2/subagents/agent-a485154.jsonl",
    ),
];

#[test]
fn importing_a_grown_session_file_after_its_earlier_snapshot_equals_importing_it_once() {
    for (first, second) in GROWING {
        let name = second;
        let (first, second) = (real(first), real(second));
        let (stepwise_dir, once_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let stepwise = open(stepwise_dir.path());
        let early = import(&stepwise, &first);
        assert_eq!(early.status, ImportStatus::Imported, "{name}");
        let grown = import(&stepwise, &second);
        assert_eq!(grown.already, early.records, "{name}: every record of the first snapshot is taken");
        if grown.records == 0 {
            // Only lines that yield no record were added (the sub-agent file's `progress` line).
            assert_eq!(grown.status, ImportStatus::AlreadyComplete, "{name}");
        } else {
            assert_eq!(grown.status, ImportStatus::Resumed, "{name}");
        }
        let once = open(once_dir.path());
        let whole = import(&once, &second);
        assert_eq!(whole.records, early.records + grown.records, "{name}");
        let (stepwise_view, once_view) = (observed(&stepwise), observed(&once));
        assert!(!once_view.1.is_empty(), "{name}: the session has visible messages");
        assert_eq!(stepwise_view, once_view, "{name}: same digests and visible messages");
        assert_eq!(stepwise.log().head(), once.log().head(), "{name}: same positions");

        // Importing either snapshot again appends nothing and says so.
        for (path, ahead) in [(&second, 0), (&first, grown.records)] {
            let head = stepwise.log().head();
            let again = import(&stepwise, path);
            assert_eq!(again.status, ImportStatus::AlreadyComplete, "{name} {}", path.display());
            assert_eq!((again.records, again.positions, again.store_ahead), (0, None, ahead), "{name}");
            assert_eq!(stepwise.log().head(), head, "{name}: nothing appended");
        }
        let again = import(&once, &second);
        assert_eq!((again.status, again.already), (ImportStatus::AlreadyComplete, whole.records));
    }
}

#[test]
fn capture_resumes_from_the_log_after_a_rebuild_and_in_another_store_handle() {
    let name = "incremental-simple";
    let dir = tempfile::tempdir().unwrap();
    {
        let mnemo = open(dir.path());
        import(&mnemo, &real(&format!("{name}/turn-1.jsonl")));
        mnemo.rebuild(None).unwrap();
        mnemo.close().unwrap();
    }
    let mnemo = open(dir.path());
    let grown = import(&mnemo, &real(&format!("{name}/turn-2.jsonl")));
    assert_eq!(grown.status, ImportStatus::Resumed);
    let once_dir = tempfile::tempdir().unwrap();
    let once = open(once_dir.path());
    import(&once, &real(&format!("{name}/turn-2.jsonl")));
    assert_eq!(observed(&mnemo), observed(&once));
}

/// Replaces the first occurrence of `from` in line `line` (1-based) of `bytes`.
fn edit_line(bytes: &[u8], line: usize, from: &str, to: &str) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines[line - 1].contains(from), "line {line} holds {from:?}");
    lines[line - 1] = lines[line - 1].replacen(from, to, 1);
    (lines.join("\n") + "\n").into_bytes()
}

fn without_line(bytes: &[u8], line: usize) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let lines: Vec<&str> = text.lines().enumerate().filter(|(i, _)| i + 1 != line).map(|(_, l)| l).collect();
    (lines.join("\n") + "\n").into_bytes()
}

/// The first line of a real file that is a user or assistant message outside a sidechain.
fn message_lines(bytes: &[u8]) -> Vec<usize> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let value: serde_json::Value = serde_json::from_str(l).unwrap();
            matches!(value["type"].as_str(), Some("user" | "assistant")) && value["isSidechain"] != true
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn a_changed_or_removed_earlier_line_is_refused_naming_the_file_and_line_and_appends_nothing() {
    let path = real("incremental-simple/turn-2.jsonl");
    let bytes = read(&path);
    let lines = message_lines(&bytes);
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    import(&mnemo, &path);
    let head = mnemo.log().head();

    let changed_line = lines[2];
    let changed = edit_line(&bytes, changed_line, "\"timestamp\":\"2026-", "\"timestamp\":\"2025-");
    let error = mnemo.import(&changed, "grown.jsonl", ImportFormat::Auto).unwrap_err();
    let Error::Transcript(error) = error else { panic!("{error}") };
    assert_eq!((error.source_name.as_str(), error.line), ("grown.jsonl", changed_line), "{error}");
    assert!(error.reason.contains("changed since it was imported"), "{error}");
    assert_eq!(mnemo.log().head(), head);

    let removed_line = lines[2];
    let removed = without_line(&bytes, removed_line);
    let error = mnemo.import(&removed, "shrunk.jsonl", ImportFormat::Auto).unwrap_err();
    let Error::Transcript(error) = error else { panic!("{error}") };
    assert_eq!(error.source_name, "shrunk.jsonl");
    assert!(error.reason.contains("changed or removed since it was imported"), "{error}");
    // The error names the line the removed one followed (the previous message line).
    assert_eq!(error.line, lines[1], "{error}");
    assert_eq!(mnemo.log().head(), head);
}

#[test]
fn an_interrupted_import_is_completed_by_a_rerun_and_the_log_equals_an_uninterrupted_one() {
    // A turn end closes an append, so this file is imported in 700 appends.
    let mut text = String::from("{\"kind\":\"session\",\"session\":\"big\"}\n");
    for turn in 0..700 {
        text.push_str(&format!(
            "{{\"session\":\"big\",\"turn\":\"t{turn}\",\"role\":\"user\",\"id\":\"u{turn}\",\"parts\":[{{\"type\":\"text\",\"text\":\"question {turn}\"}}]}}\n\
             {{\"session\":\"big\",\"turn\":\"t{turn}\",\"role\":\"model\",\"id\":\"m{turn}\",\"parts\":[{{\"type\":\"text\",\"text\":\"answer {turn}\"}}]}}\n\
             {{\"kind\":\"turn_end\",\"session\":\"big\",\"turn\":\"t{turn}\",\"status\":\"completed\"}}\n"
        ));
    }
    let once_dir = tempfile::tempdir().unwrap();
    let once = open(once_dir.path());
    let whole = once.import_transcript(text.as_bytes(), "big.jsonl").unwrap();
    // An import cut short leaves its first appends: here the file up to turn 400. (The
    // acceptance suite kills a real import at random moments.)
    let cut = text.lines().take(1 + 3 * 400).collect::<Vec<_>>().join("\n") + "\n";
    let dir = tempfile::tempdir().unwrap();
    let resumed = open(dir.path());
    resumed.import_transcript(cut.as_bytes(), "big.jsonl").unwrap();
    let rest = resumed.import_transcript(text.as_bytes(), "big.jsonl").unwrap();
    assert_eq!(rest.status, ImportStatus::Resumed);
    assert_eq!(rest.records + rest.already, whole.records);
    assert_eq!(observed(&resumed), observed(&once));
    let envelopes =
        |m: &Mnemo| m.log().scan(Position::FIRST).map(|e| e.unwrap().encode()).collect::<Vec<_>>();
    assert_eq!(envelopes(&resumed), envelopes(&once), "byte for byte the same log");
}

#[test]
fn an_event_id_already_used_by_another_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let first =
        r#"{"session":"s1","turn":"t1","role":"user","id":"e1","parts":[{"type":"text","text":"hi"}]}"#;
    mnemo.import_transcript(first.as_bytes(), "one.jsonl").unwrap();
    let head = mnemo.log().head();
    let second = "{\"session\":\"s2\",\"turn\":\"t1\",\"role\":\"user\",\"id\":\"e2\",\"parts\":[{\"type\":\"text\",\"text\":\"a\"}]}\n\
                  {\"session\":\"s2\",\"turn\":\"t1\",\"role\":\"model\",\"id\":\"e1\",\"parts\":[{\"type\":\"text\",\"text\":\"b\"}]}\n";
    let error = mnemo.import_transcript(second.as_bytes(), "two.jsonl").unwrap_err();
    let Error::Transcript(error) = error else { panic!("{error}") };
    assert_eq!((error.source_name.as_str(), error.line), ("two.jsonl", 2), "{error}");
    assert!(error.reason.contains("event id e1 is already in the store"), "{error}");
    assert_eq!(mnemo.log().head(), head, "nothing appended");
    assert!(mnemo.history().session(&SessionId::new("s2").unwrap()).unwrap().is_none());
}

/// A store whose sessions were imported before session records named their source (schema
/// version 1): the same files import again as already complete, and a grown one resumes, instead
/// of every session line being refused as changed.
#[test]
fn a_session_imported_before_sources_were_recorded_is_the_same_session_when_imported_again() {
    let files =
        ["incremental-subagents/turn-1.jsonl", "incremental-subagents/turn-1/subagents/agent-a485154.jsonl"];
    let (now_dir, before_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let now = open(now_dir.path());
    for file in files {
        import(&now, &real(file));
    }
    let sessions = now.history().sessions().unwrap();
    assert!(sessions.iter().all(|s| s.source.as_deref() == Some("claude-code")), "{sessions:?}");
    let agent = sessions.iter().find(|s| s.subagent).unwrap();
    assert_eq!(
        agent.parent.as_ref().map(SessionId::as_str),
        Some(sessions.iter().find(|s| !s.subagent).unwrap().session.as_str())
    );

    // The same log as an older build wrote it: session lines without source or parent.
    let mut exported = Vec::new();
    now.export_transcript(&mut exported).unwrap();
    let mut older = String::new();
    for line in String::from_utf8(exported).unwrap().lines() {
        let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
        if value["kind"] == "session" {
            let object = value.as_object_mut().unwrap();
            assert!(object.remove("source").is_some());
            object.remove("parent");
        }
        older.push_str(&serde_json::to_string(&value).unwrap());
        older.push('\n');
    }
    let before = open(before_dir.path());
    before.import(older.as_bytes(), "older.jsonl", ImportFormat::Mnemo).unwrap();
    assert!(before.history().sessions().unwrap().iter().all(|s| s.source.is_none() && s.parent.is_none()));

    for file in files {
        let again = import(&before, &real(file));
        assert_eq!((again.status, again.records), (ImportStatus::AlreadyComplete, 0), "{file}");
    }
    let grown = import(&before, &real("incremental-subagents/turn-2.jsonl"));
    assert_eq!(grown.status, ImportStatus::Resumed);
    assert!(grown.records > 0);
    // What the log holds is not rewritten: the sessions still name no source.
    assert!(before.history().sessions().unwrap().iter().all(|s| s.source.is_none()));

    // A session line that differs in anything else is still a changed line: in a mnemo
    // transcript, its workspace too.
    let changed: String = older
        .lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            if value["kind"] == "session" {
                value["workspace"] = serde_json::json!("/elsewhere");
            }
            format!("{value}\n")
        })
        .collect();
    let refused = before.import(changed.as_bytes(), "changed.jsonl", ImportFormat::Mnemo).unwrap_err();
    assert!(refused.to_string().contains("changed since it was imported"), "{refused}");

    // A Claude Code session's workspace is resolved from its `cwd` when it is first recorded and
    // stays as recorded: the same file with the session started elsewhere is the same session.
    let text = String::from_utf8(read(&real(files[0]))).unwrap();
    let cwd =
        serde_json::from_str::<serde_json::Value>(text.lines().find(|l| l.contains("\"cwd\"")).unwrap())
            .unwrap()["cwd"]
            .as_str()
            .unwrap()
            .to_owned();
    let moved = text.replace(&format!("\"cwd\":\"{cwd}\""), "\"cwd\":\"/elsewhere\"");
    let again = before.import(moved.as_bytes(), "moved.jsonl", ImportFormat::ClaudeCode).unwrap();
    assert_eq!((again.status, again.records), (ImportStatus::AlreadyComplete, 0));
    let workspaces = before.history().sessions().unwrap().into_iter().map(|s| s.workspace);
    assert!(workspaces.into_iter().all(|w| w.is_some_and(|w| w.as_str() == cwd)));
}
