//! `mnemo sync` over folders laid out like `~/.claude/projects` and `~/.codex/sessions`, holding
//! real Claude Code session files (`tests/fixtures/real/`) and Codex rollouts written in the
//! shape Codex writes them: what each run captures, that a second run appends only what grew, and
//! that runs at the same time, a busy store and a half-written last line are handled.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{MNEMO, json, real, written};

/// `mnemo --store STORE ARGS` with HOME set to `home` and the agents' own variables unset.
fn command(home: &Path, store: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(MNEMO);
    command
        .arg("--store")
        .arg(store)
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("MNEMO_STORE")
        .env_remove("RUST_LOG");
    command
}

fn run(home: &Path, store: &Path, args: &[&str]) -> Output {
    command(home, store, args).output().unwrap()
}

fn sync(home: &Path, store: &Path) -> serde_json::Value {
    let output = run(home, store, &["sync", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    json(&output)
}

/// Each file's result, by path relative to `home`.
fn results(report: &serde_json::Value, home: &Path) -> Vec<(String, String, u64)> {
    let home = std::fs::canonicalize(home).unwrap();
    report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let relative = Path::new(path).strip_prefix(&home).unwrap().display().to_string();
            let what = match f["result"].as_str().unwrap() {
                "captured" if f["outcome"] == "imported" => {
                    f["report"]["status"].as_str().unwrap().to_owned()
                }
                "captured" => f["outcome"].as_str().unwrap().to_owned(),
                "failed" => format!("failed: {}", f["error"].as_str().unwrap()),
                other => other.to_owned(),
            };
            (relative, what, f["report"]["records"].as_u64().unwrap_or(0))
        })
        .collect()
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

/// The first `n` lines of a file.
fn first_lines(path: &Path, n: usize) -> String {
    std::fs::read_to_string(path).unwrap().lines().take(n).map(|l| format!("{l}\n")).collect()
}

const PROJECT: &str = ".claude/projects/-Users-User-repo-codemie-ai-codemie-code";
const SESSION: &str = "e9fb405b-169f-40eb-9396-7e75076f045d";
const SMALL: &str = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
const ROLLOUT: &str = ".codex/sessions/2026/01/12/rollout-2026-01-12T09-30-00-0197a1b2-c3d4.jsonl";
const OLD_ROLLOUT: &str = ".codex/sessions/2025/11/03/rollout-2025-11-03T14-00-00-0196f0e1-d2c3.jsonl";

/// A home holding every fixture as it stood at the first snapshot.
fn lay_out_first_snapshots(home: &Path) {
    copy(&real("incremental-subagents/turn-1.jsonl"), &home.join(PROJECT).join(format!("{SESSION}.jsonl")));
    copy(
        &real("incremental-subagents/turn-1/subagents/agent-a485154.jsonl"),
        &home.join(PROJECT).join(SESSION).join("subagents/agent-a485154.jsonl"),
    );
    for name in
        [format!("{SMALL}.jsonl"), "agent-36541525.jsonl".to_owned(), "agent-50243ee8.jsonl".to_owned()]
    {
        copy(
            &real(&format!("small-with-subagents/{name}")),
            &home.join(".claude/projects/-tmp-private").join(name),
        );
    }
    std::fs::create_dir_all(home.join(ROLLOUT).parent().unwrap()).unwrap();
    std::fs::write(home.join(ROLLOUT), first_lines(&written("codex-rollout-0.128.jsonl"), 30)).unwrap();
    copy(&written("codex-rollout-legacy.jsonl"), &home.join(OLD_ROLLOUT));
}

/// The same home after the sessions grew: the session and its sub-agent file at their second
/// snapshot (the sub-agent's holds a new line in the middle), the rollout whole, and a line
/// being written at the end of the session file.
fn grow(home: &Path) {
    let session = home.join(PROJECT).join(format!("{SESSION}.jsonl"));
    let mut grown = std::fs::read(real("incremental-subagents/turn-2.jsonl")).unwrap();
    grown.extend_from_slice(br#"{"parentUuid":"0a6dceb2","isSidechain":false,"type":"user","mess"#);
    std::fs::write(&session, grown).unwrap();
    copy(
        &real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl"),
        &home.join(PROJECT).join(SESSION).join("subagents/agent-a485154.jsonl"),
    );
    copy(&written("codex-rollout-0.128.jsonl"), &home.join(ROLLOUT));
}

/// The store's export, each session's lines in order, sessions by id (the order in which sessions
/// were first captured differs between a store synced in steps and one synced once). Session and
/// turn-end lines (and flags lines, such as a Codex thread's title) carry their envelope's time,
/// and the log's times never go backwards, so those of a file dated before what was appended ahead
/// of it (files captured first, the memory commits of a sync's extraction, stamped with the clock)
/// depend on what came first: their `ts` is left out of the comparison.
fn export(home: &Path, store: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let output = run(home, store, &["export"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let mut sessions = std::collections::BTreeMap::<String, Vec<String>>::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
        if matches!(value["kind"].as_str(), Some("session" | "turn_end" | "flags")) {
            value.as_object_mut().unwrap().remove("ts");
        }
        sessions.entry(value["session"].as_str().unwrap().to_owned()).or_default().push(value.to_string());
    }
    sessions
}

/// Two stores hold the same sessions, record for record (the first difference is named).
fn assert_same_sessions(home: &Path, one: &Path, other: &Path) {
    let (one, other) = (export(home, one), export(home, other));
    assert_eq!(one.keys().collect::<Vec<_>>(), other.keys().collect::<Vec<_>>());
    for (session, lines) in &one {
        let theirs = &other[session];
        for (index, (a, b)) in lines.iter().zip(theirs).enumerate() {
            assert_eq!(a, b, "session {session}, line {index}");
        }
        assert_eq!(lines.len(), theirs.len(), "session {session}");
    }
}

#[test]
fn a_second_sync_appends_only_the_lines_that_grew_and_a_third_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    lay_out_first_snapshots(&home);
    let first = sync(&home, &store);
    let subagent = format!("{PROJECT}/{SESSION}/subagents/agent-a485154.jsonl");
    let session = format!("{PROJECT}/{SESSION}.jsonl");
    let small = format!(".claude/projects/-tmp-private/{SMALL}.jsonl");
    let names = |r: &[(String, String, u64)]| -> Vec<(String, String)> {
        r.iter().map(|(path, what, _)| (path.clone(), what.clone())).collect()
    };
    let first_results = results(&first, &home);
    let imported = |path: &str| (path.to_owned(), "imported".to_owned());
    assert_eq!(
        names(&first_results),
        vec![
            imported(&subagent),
            imported(&session),
            imported(&small),
            imported(".claude/projects/-tmp-private/agent-36541525.jsonl"),
            imported(".claude/projects/-tmp-private/agent-50243ee8.jsonl"),
            imported(OLD_ROLLOUT),
            imported(ROLLOUT),
        ]
    );
    let appended_first = first["summary"]["records_appended"].as_u64().unwrap();
    assert_eq!(appended_first, first_results.iter().map(|r| r.2).sum::<u64>());

    grow(&home);
    let second = sync(&home, &store);
    let second_results = results(&second, &home);
    let resumed = |path: &str| (path.to_owned(), "resumed".to_owned());
    let unchanged = |path: &str| (path.to_owned(), "unchanged".to_owned());
    // The sub-agent file's new middle line is a `progress` line, which records nothing.
    assert_eq!(
        names(&second_results),
        vec![
            (subagent.clone(), "already_complete".to_owned()),
            resumed(&session),
            unchanged(&small),
            unchanged(".claude/projects/-tmp-private/agent-36541525.jsonl"),
            unchanged(".claude/projects/-tmp-private/agent-50243ee8.jsonl"),
            unchanged(OLD_ROLLOUT),
            resumed(ROLLOUT),
        ]
    );
    assert_eq!(second["summary"]["partial_lines_left"], 1, "the half-written line is left, not an error");
    let session_result = &second["files"][1];
    assert!(session_result["partial_tail_bytes"].as_u64().unwrap() > 0, "{session_result}");

    // Only the new lines were appended: the store now equals one that captured the final
    // snapshots in a single run, record for record.
    let once = dir.path().join("once");
    let appended_once = sync(&home, &once)["summary"]["records_appended"].as_u64().unwrap();
    let appended_second = second["summary"]["records_appended"].as_u64().unwrap();
    assert!(appended_second > 0);
    assert_eq!(appended_first + appended_second, appended_once);
    assert_same_sessions(&home, &store, &once);

    // Nothing changed since: nothing is read, nothing appended.
    let third = sync(&home, &store);
    assert_eq!(third["summary"]["unchanged"], 7, "{third}");
    assert_eq!(third["summary"]["records_appended"], 0);

    // Without the sync state every file is read again, and still nothing is appended twice.
    std::fs::remove_file(store.join("sync-state.json")).unwrap();
    let fourth = sync(&home, &store);
    assert_eq!(fourth["summary"]["records_appended"], 0, "{fourth}");
    assert_eq!(fourth["summary"]["already_complete"], 7, "{fourth}");
}

#[test]
fn the_agents_own_variables_name_their_folders_and_given_folders_replace_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    let (claude, codex) = (dir.path().join("claude-config"), dir.path().join("codex-home"));
    copy(&real(&format!("small-with-subagents/{SMALL}.jsonl")), &claude.join("projects/-tmp/s.jsonl"));
    copy(&written("codex-rollout.jsonl"), &codex.join("sessions/2026/01/01/rollout-a.jsonl"));
    let output = command(&home, &store, &["sync", "--json"])
        .env("CLAUDE_CONFIG_DIR", &claude)
        .env("CODEX_HOME", &codex)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let report = json(&output);
    let roots: Vec<(&str, &str, u64)> = report["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["path"].as_str().unwrap(), r["format"].as_str().unwrap(), r["files"].as_u64().unwrap()))
        .collect();
    let claude_projects = std::fs::canonicalize(claude.join("projects")).unwrap();
    let codex_sessions = std::fs::canonicalize(codex.join("sessions")).unwrap();
    assert_eq!(
        roots,
        vec![
            (claude_projects.to_str().unwrap(), "claude-code", 1),
            (codex_sessions.to_str().unwrap(), "codex", 1)
        ]
    );
    assert_eq!(report["summary"]["new_files"], 2);

    // A given folder is read in whatever format each file is (auto), and replaces the defaults.
    let other = dir.path().join("elsewhere");
    copy(&written("claude-code.jsonl"), &other.join("x.jsonl"));
    let output = run(&home, &store, &["sync", "--json", other.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let report = json(&output);
    assert_eq!(report["roots"].as_array().unwrap().len(), 1);
    assert_eq!(report["files"][0]["report"]["format"], "claude-code");

    // A given folder that does not exist is a usage error naming it.
    let output = run(&home, &store, &["sync", "/no/such/folder"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("/no/such/folder: no such folder or file to sync")
    );
}

#[test]
fn a_changed_earlier_line_fails_that_file_only_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    lay_out_first_snapshots(&home);
    sync(&home, &store);
    // Rewrite the first user request of the old rollout: a line already captured has changed.
    let path = home.join(OLD_ROLLOUT);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().position(|l| l.contains("\"role\":\"user\"")).unwrap();
    let edited: String = text
        .lines()
        .enumerate()
        .map(
            |(i, l)| {
                if i == line { l.replacen("\"text\":\"", "\"text\":\"EDITED ", 1) } else { l.to_owned() }
            },
        )
        .map(|l| l + "\n")
        .collect();
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    grow(&home);
    let output = run(&home, &store, &["sync"]);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let canonical = std::fs::canonicalize(&path).unwrap();
    assert!(
        stdout.contains(&format!("{}: FAILED: {}:", canonical.display(), canonical.display())),
        "{stdout}"
    );
    assert!(stdout.contains("changed since it was imported"), "{stdout}");
    // The other files grew and were captured all the same.
    assert!(stdout.contains("2 grown"), "{stdout}");
    assert!(stdout.contains("1 failed"), "{stdout}");
}

#[test]
fn runs_at_the_same_time_capture_each_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    lay_out_first_snapshots(&home);
    let children: Vec<_> = (0..3)
        .map(|_| command(&home, &store, &["sync", "--json"]).stdout(Stdio::piped()).spawn().unwrap())
        .collect();
    let mut appended = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        appended += json(&output)["summary"]["records_appended"].as_u64().unwrap();
    }
    let once = dir.path().join("once");
    assert_eq!(appended, sync(&home, &once)["summary"]["records_appended"].as_u64().unwrap());
    assert_same_sessions(&home, &store, &once);
}

#[test]
fn a_busy_store_is_named_as_busy_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    lay_out_first_snapshots(&home);
    sync(&home, &store);
    let held = mnemo::Mnemo::open(&store, mnemo::Config::default()).unwrap();
    let output = run(&home, &store, &["sync", "--wait", "0"]);
    drop(held);
    assert_eq!(output.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is busy: another mnemo process holds it"), "{stderr}");
}

/// A child process that is killed when a failing test unwinds, so that it does not outlive it.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How long a test waits for a line from the watching child: generous, since a loaded machine
/// can take long to build and sync; the test fails only when the line never comes.
const LINE_WAIT_SECONDS: u64 = 600;

/// Reads lines from a child's stdout until one satisfies `until`, or fails after a long wait.
fn read_until(lines: &std::sync::mpsc::Receiver<String>, until: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(LINE_WAIT_SECONDS);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left).unwrap_or_else(|_| {
            panic!("no such line (the child ended, or nothing came for {LINE_WAIT_SECONDS} s); saw {seen:#?}")
        });
        seen.push(line);
        if until(seen.last().unwrap()) {
            return seen;
        }
    }
}

#[test]
fn watch_captures_a_file_as_it_grows_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    lay_out_first_snapshots(&home);
    let child = command(&home, &store, &["sync", "--watch", "--debounce-ms", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(Some(child));
    let child_ref = child.0.as_mut().unwrap();
    let (sender, lines) = std::sync::mpsc::channel();
    let stdout = child_ref.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = sender.send(line.unwrap());
        }
    });
    let first = read_until(&lines, |l| l.starts_with("synced "));
    assert!(first.last().unwrap().starts_with("synced 7 files: 7 new"), "{first:#?}");
    // A file that grows while the watch runs is captured; a new file too.
    grow(&home);
    let mut changed = read_until(&lines, |l| l.starts_with("synced "));
    let fresh = home.join(".claude/projects/-tmp-new/s.jsonl");
    copy(&real("incremental-simple/turn-1.jsonl"), &fresh);
    changed.extend(read_until(&lines, |l| l.starts_with("synced ")));
    let text = changed.join("\n");
    assert!(text.contains(&format!("{SESSION}.jsonl: claude-code, grown: appended")), "{text}");
    assert!(text.contains("agent-a485154.jsonl: claude-code, nothing new"), "{text}");
    assert!(text.contains("s.jsonl: claude-code, new: "), "{text}");
    rustix::process::kill_process(rustix::process::Pid::from_child(child_ref), rustix::process::Signal::TERM)
        .unwrap();
    let output = child.0.take().unwrap().wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stopped after 2 batches of changes"), "{stderr}");
    // Everything captured equals a single sync of the final files.
    let once = dir.path().join("once");
    sync(&home, &once);
    assert_same_sessions(&home, &store, &once);
}

/// A Codex sub-agent writes its own rollout beside its parent's; a sync that captured both used
/// to leave nothing saying which thread the sub-agent served, and Claude Code sub-agent files
/// were linked only by their session id's shape.
#[test]
fn synced_sub_agent_sessions_name_their_parent_and_every_session_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let (home, store) = (dir.path().join("home"), dir.path().join("store"));
    lay_out_first_snapshots(&home);
    let child = home.join(
        ".codex/sessions/2026/05/04/rollout-2026-05-04T08-14-20-019e1b7c-81a0-7d52-b3c4-2f6e9a1d0b77.jsonl",
    );
    copy(&written("codex-rollout-subagent.jsonl"), &child);
    sync(&home, &store);
    let output = run(&home, &store, &["sessions", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let sessions = json(&output);
    let sessions = sessions.as_array().unwrap();
    let of = |id: &str| {
        sessions.iter().find(|s| s["session"] == id).unwrap_or_else(|| panic!("{id}: {sessions:?}"))
    };
    let codex_parent = "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21";
    assert_eq!(of("019e1b7c-81a0-7d52-b3c4-2f6e9a1d0b77")["parent"], codex_parent);
    assert!(of(codex_parent)["parent"].is_null());
    assert_eq!(of(&format!("{SESSION}/agent-a485154"))["parent"], SESSION);
    assert_eq!(of(&format!("{SMALL}/agent-36541525"))["parent"], SMALL);
    let rollouts =
        [codex_parent, "019e1b7c-81a0-7d52-b3c4-2f6e9a1d0b77", "5973b6c0-94b8-487b-a530-2aeb6098ae0e"];
    assert_eq!(sessions.len(), 8, "{sessions:?}");
    for session in sessions {
        let codex = rollouts.iter().any(|id| session["session"] == *id);
        assert_eq!(session["source"], if codex { "codex" } else { "claude-code" }, "{session}");
    }
}

#[test]
fn sync_extracts_what_the_captured_sessions_said_and_a_second_sync_extracts_nothing_again() {
    // Before: sync imported the sessions and extracted nothing: `memory list` stayed empty until
    // a manual `mnemo memory extract --all`.
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("store");
    let written_session = support::repo_root()
        .join("crates/mnemo/tests/fixtures/memory/claude-code-standing-instructions.jsonl");
    copy(
        &written_session,
        &home.path().join(".claude/projects/-home-dev-queue/7d0c4b9e-2f1a-4c55-9d3e-5b8a1f0e6c21.jsonl"),
    );
    copy(
        &real("incremental-simple/turn-2.jsonl"),
        &home.path().join(PROJECT).join(format!("{SESSION}.jsonl")),
    );
    let report = sync(home.path(), &store);
    assert_eq!(report["summary"]["sessions_extracted"], 2, "{report:#}");
    assert_eq!(report["summary"]["memories_extracted"], 6, "{report:#}");
    let listed = json(&run(home.path(), &store, &["--json", "memory", "list"]));
    assert_eq!(listed.as_array().unwrap().len(), 6, "{listed:#}");
    let status = json(&run(home.path(), &store, &["--json", "memory", "status"]));
    assert_eq!(status["pending"], serde_json::json!([]), "{status:#}");

    // Nothing new: nothing read again, nothing extracted again; the human output has no line for it.
    let again = run(home.path(), &store, &["sync"]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(!text.contains("extracted"), "{text}");
    // A grown file: only its new events are extracted, and the line says so.
    let path =
        home.path().join(".claude/projects/-home-dev-queue/7d0c4b9e-2f1a-4c55-9d3e-5b8a1f0e6c21.jsonl");
    let mut grown = std::fs::read_to_string(&path).unwrap();
    let last: serde_json::Value = serde_json::from_str(grown.lines().last().unwrap()).unwrap();
    let line = serde_json::json!({"parentUuid": last["uuid"], "isSidechain": false, "userType": "external",
        "cwd": "/home/dev/queue", "sessionId": "7d0c4b9e-2f1a-4c55-9d3e-5b8a1f0e6c21", "version": "2.1.7",
        "gitBranch": "retry-queue", "type": "user",
        "message": {"role": "user", "content": "Always run clippy before you say a change is done."},
        "uuid": "5eed0000-0000-0000-0000-000000000099", "timestamp": "2026-01-23T12:00:00.000Z"});
    grown.push_str(&format!("{line}\n"));
    std::fs::write(&path, grown).unwrap();
    let grown = run(home.path(), &store, &["sync"]);
    let text = String::from_utf8_lossy(&grown.stdout);
    assert!(text.contains("extracted 1 memory item(s) from 1 session(s) with new events"), "{text}");
}
