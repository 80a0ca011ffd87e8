//! `mnemo hook claude-code|codex` as the hosts run it: the event's JSON on stdin, in exactly the
//! members each host sends (Claude Code's hooks reference; Codex's `codex-rs/hooks` input schemas),
//! on the real Claude Code session files (`tests/fixtures/real/`) and a Codex rollout written as
//! Codex writes one. The session-start output parses as both hosts read it and stays within its
//! token budget; capture appends only what grew; and a killed server, a locked store, a server that
//! never answers or garbage on stdin each end in exit 0 with nothing on stdout and a logged line.
//! Timings are printed (and bounded only loosely: a hook's own budget enforces the real bound).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mnemo_server::client::{Client, ConnectOptions};
use mnemo_server::methods::{Empty, Sessions, Shutdown};

use support::{MNEMO, mnemo, real, written};

/// The workspace of the real Claude Code fixtures (their `cwd`).
const WORKSPACE: &str = "/Users/User/repo/codemie-ai/codemie-code";
const SESSION: &str = "3fb74381-1bf4-475e-8c6f-442d872b1bcf";
const CODEX_SESSION: &str = "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21";
const CODEX_WORKSPACE: &str = "/home/ines/src/tally";

/// How many times its budget a hook may take in these tests before it counts as hanging: a loose
/// bound (the budget itself is what the hook enforces; the times are printed).
const BUDGETS_PER_WALL_MAX: u32 = 5;

/// The budget the calls whose results a test checks run with: far above the default 2 s, so that a
/// loaded machine running a debug build does not turn a slow capture into a failed test. The
/// default budget is exercised by the calls that must fail.
const GENEROUS: &[&str] = &["--budget-ms", "30000"];

/// A store holding two standing preferences that hold in every project (global) and a workspace
/// fact, learned in a session of the fixtures' workspace.
fn store_with_memories(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    let transcript = dir.join("memories.jsonl");
    std::fs::write(
        &transcript,
        format!(
            r#"{{"kind":"session","session":"m1","workspace":"{WORKSPACE}","title":"preferences"}}
{{"session":"m1","turn":"t1","role":"user","parts":[{{"type":"text","text":"Our project uses fjall for storage. I prefer tabs over spaces in every project."}}]}}
{{"session":"m1","turn":"t2","role":"user","parts":[{{"type":"text","text":"Remember that I never use unwrap in library code, in any project."}}]}}
"#
        ),
    )
    .unwrap();
    for args in [&["import", transcript.to_str().unwrap()][..], &["memory", "remember", "m1"]] {
        let output = mnemo(&store, args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    store
}

struct Ran {
    output: Output,
    took: Duration,
}

/// Runs `mnemo --store STORE hook HOST ARGS` with `input` on stdin, as a host does.
fn hook(store: &Path, host: &str, args: &[&str], input: &str) -> Ran {
    let began = Instant::now();
    let mut child = Command::new(MNEMO)
        .arg("--store")
        .arg(store)
        .args(["hook", host])
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("MNEMO_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hook that stops reading early (it refused an overlong input) closes the pipe: not an error.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let output = child.wait_with_output().unwrap();
    let took = began.elapsed();
    eprintln!("hook {host} {args:?}: exit {:?} in {} ms", output.status.code(), took.as_millis());
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let budget_ms = args
        .iter()
        .position(|a| *a == "--budget-ms")
        .and_then(|i| args.get(i + 1))
        .map_or(2_000, |ms| ms.parse::<u64>().unwrap_or(2_000).max(1));
    let wall_max = Duration::from_millis(budget_ms) * BUDGETS_PER_WALL_MAX;
    assert!(took < wall_max, "the hook took {took:?}, more than {wall_max:?}");
    Ran { output, took }
}

fn stdout(ran: &Ran) -> &str {
    std::str::from_utf8(&ran.output.stdout).unwrap()
}

/// The session-start output as Claude Code and Codex read it: one JSON object whose only member is
/// `hookSpecificOutput` with `hookEventName` `SessionStart` and a string `additionalContext`
/// (Codex refuses any other member there); returns the context.
fn additional_context(ran: &Ran) -> String {
    let text = stdout(ran);
    assert!(text.ends_with('\n') && text.trim_end().lines().count() == 1, "{text:?}");
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    let object = value.as_object().unwrap();
    assert_eq!(object.keys().collect::<Vec<_>>(), ["hookSpecificOutput"], "{value}");
    let specific = object["hookSpecificOutput"].as_object().unwrap();
    let mut members: Vec<&String> = specific.keys().collect();
    members.sort();
    assert_eq!(members, ["additionalContext", "hookEventName"], "{value}");
    assert_eq!(specific["hookEventName"], "SessionStart");
    specific["additionalContext"].as_str().unwrap().to_owned()
}

/// Estimated tokens as the budget counts them (four characters a token).
fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

fn log_lines(store: &Path) -> Vec<String> {
    std::fs::read_to_string(store.join("hooks.log")).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn client(store: &Path) -> Client {
    Client::connect(store, &ConnectOptions::new("hook test")).unwrap()
}

fn events_of(store: &Path, session: &str) -> u64 {
    let sessions = client(store).call::<Sessions>(&Empty {}).unwrap();
    sessions.iter().find(|s| s.session == session).map_or(0, |s| s.event_count)
}

fn shut_down(store: &Path) {
    if let Ok(mut client) = Client::connect(store, &ConnectOptions::new("hook test")) {
        let _ = client.call::<Shutdown>(&Empty {});
    }
    // The store's lock is free once the server has closed it; wait for its socket to go.
    let began = Instant::now();
    while store.join("server.sock").exists() && began.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Claude Code's common members and the event's own, as its hooks reference lists them.
fn claude_input(event: &str, transcript: &Path, extra: serde_json::Value) -> String {
    let mut input = serde_json::json!({
        "session_id": SESSION,
        "transcript_path": transcript.display().to_string(),
        "cwd": WORKSPACE,
        "permission_mode": "default",
        "hook_event_name": event,
    });
    for (key, value) in extra.as_object().unwrap() {
        input[key] = value.clone();
    }
    input.to_string()
}

#[test]
fn claude_code_hooks_capture_a_growing_session_and_start_the_next_with_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_memories(dir.path());
    let project = dir.path().join("home/.claude/projects/-Users-User-repo-codemie-ai-codemie-code");
    std::fs::create_dir_all(&project).unwrap();
    let transcript = project.join(format!("{SESSION}.jsonl"));

    // A new session starts: its transcript does not exist yet; the context comes from the store.
    let start = claude_input(
        "SessionStart",
        &transcript,
        serde_json::json!({"source": "startup", "model": "claude-sonnet-4-5"}),
    );
    let started = hook(&store, "claude-code", GENEROUS, &start);
    let context = additional_context(&started);
    assert!(context.contains("The user prefers tabs over spaces in every project."), "{context}");
    assert!(context.contains("The user never uses unwrap in library code, in any project."), "{context}");
    assert!(tokens(&context) <= 1_500, "{} tokens", tokens(&context));
    eprintln!("session start: {} tokens of context in {} ms", tokens(&context), started.took.as_millis());

    // The first turn ends.
    std::fs::copy(real("incremental-simple/turn-1.jsonl"), &transcript).unwrap();
    let stop = claude_input("Stop", &transcript, serde_json::json!({"stop_hook_active": false}));
    assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &stop)), "");
    let after_first = events_of(&store, SESSION);
    assert!(after_first > 0);

    // More turns, and a line still being written: compaction comes before it is complete.
    let mut grown = std::fs::read(real("incremental-simple/turn-2.jsonl")).unwrap();
    grown.extend_from_slice(br#"{"parentUuid":"d3b5f9ba","isSidechain":false,"type":"user","mess"#);
    std::fs::write(&transcript, grown).unwrap();
    let compact = claude_input(
        "PreCompact",
        &transcript,
        serde_json::json!({"trigger": "auto", "custom_instructions": ""}),
    );
    assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &compact)), "");
    let after_grown = events_of(&store, SESSION);
    assert!(after_grown > after_first, "{after_grown} events after growth, {after_first} before");

    // The session ends: nothing new, nothing appended twice.
    std::fs::copy(real("incremental-simple/turn-2.jsonl"), &transcript).unwrap();
    let end = claude_input("SessionEnd", &transcript, serde_json::json!({"reason": "prompt_input_exit"}));
    assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &end)), "");
    assert_eq!(events_of(&store, SESSION), after_grown);

    // The same file imported whole into a fresh store holds the same events.
    let whole = dir.path().join("whole");
    let imported = Command::new(MNEMO)
        .arg("--store")
        .arg(&whole)
        .args(["--json", "import", "--format", "claude-code"])
        .arg(&transcript)
        .output()
        .unwrap();
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let sessions =
        Command::new(MNEMO).arg("--store").arg(&whole).args(["--json", "sessions"]).output().unwrap();
    let sessions: serde_json::Value = serde_json::from_slice(&sessions.stdout).unwrap();
    let whole_events =
        sessions.as_array().unwrap().iter().find(|s| s["session"] == SESSION).unwrap()["event_count"]
            .as_u64()
            .unwrap();
    assert_eq!(after_grown, whole_events);

    // A resumed session gets a context from its own turns, within a smaller budget when told.
    let resume = claude_input("SessionStart", &transcript, serde_json::json!({"source": "resume"}));
    let small = hook(&store, "claude-code", &["--context-tokens", "40", "--budget-ms", "30000"], &resume);
    if !stdout(&small).is_empty() {
        let context = additional_context(&small);
        assert!(tokens(&context) <= 40, "{} tokens: {context}", tokens(&context));
    }
    assert!(log_lines(&store).is_empty(), "{:?}", log_lines(&store));
    shut_down(&store);
}

#[test]
fn claude_code_stop_captures_the_sessions_subagent_files_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let project = dir.path().join("projects/-Users-User-repo-codemie-ai-codemie-code");
    let session = "e9fb405b-169f-40eb-9396-7e75076f045d";
    let transcript = project.join(format!("{session}.jsonl"));
    std::fs::create_dir_all(project.join(session).join("subagents")).unwrap();
    std::fs::copy(real("incremental-subagents/turn-2.jsonl"), &transcript).unwrap();
    std::fs::copy(
        real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl"),
        project.join(session).join("subagents/agent-a485154.jsonl"),
    )
    .unwrap();
    let mut input: serde_json::Value = serde_json::from_str(&claude_input(
        "Stop",
        &transcript,
        serde_json::json!({"stop_hook_active": false}),
    ))
    .unwrap();
    input["session_id"] = session.into();
    // A first capture of the whole session starts the server and reads both files: a larger budget
    // than the default, which a debug build on a busy machine may need.
    assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &input.to_string())), "");
    let sessions = client(&store).call::<Sessions>(&Empty {}).unwrap();
    assert!(sessions.iter().any(|s| s.session == session && !s.subagent), "{sessions:?}");
    assert!(sessions.iter().any(|s| s.subagent), "the sub-agent's file was not captured: {sessions:?}");
    assert!(log_lines(&store).is_empty(), "{:?}", log_lines(&store));
    shut_down(&store);
}

/// Claude Code runs `SubagentStop` when a sub-agent finishes, naming the parent's transcript
/// (`transcript_path`) and the sub-agent's own (`agent_transcript_path`). The event was refused
/// ("hook_event_name \"SubagentStop\": expected ...", logged) and the sub-agent's work waited for
/// the parent's next `Stop`.
#[test]
fn claude_code_subagent_stop_captures_the_sub_agents_transcript_linked_to_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let project = dir.path().join("projects/-Users-User-repo-codemie-ai-codemie-code");
    let session = "e9fb405b-169f-40eb-9396-7e75076f045d";
    let transcript = project.join(format!("{session}.jsonl"));
    let agent = project.join(session).join("subagents/agent-a485154.jsonl");
    std::fs::create_dir_all(agent.parent().unwrap()).unwrap();
    std::fs::copy(real("incremental-subagents/turn-1.jsonl"), &transcript).unwrap();
    std::fs::copy(real("incremental-subagents/turn-1/subagents/agent-a485154.jsonl"), &agent).unwrap();
    let subagent_stop = || {
        let mut input: serde_json::Value = serde_json::from_str(&claude_input(
            "SubagentStop",
            &transcript,
            serde_json::json!({
                "stop_hook_active": false,
                "agent_id": "a485154",
                "agent_type": "solution-architect",
                "agent_transcript_path": agent.display().to_string(),
                "last_assistant_message": "Perfect! Now I have a comprehensive understanding of the codebase.",
            }),
        ))
        .unwrap();
        input["session_id"] = session.into();
        assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &input.to_string())), "");
    };
    subagent_stop();
    let sessions = client(&store).call::<Sessions>(&Empty {}).unwrap();
    let child = format!("{session}/agent-a485154");
    let captured = sessions.iter().find(|s| s.session == child);
    let captured =
        captured.unwrap_or_else(|| panic!("no {child}: {sessions:?}; log {:?}", log_lines(&store)));
    assert!(captured.subagent);
    assert_eq!(captured.parent.as_deref(), Some(session));
    assert_eq!(captured.source.as_deref(), Some("claude-code"));
    // Only the sub-agent's file was read: the parent's turn is still running.
    assert!(!sessions.iter().any(|s| s.session == session), "{sessions:?}");
    let first = captured.event_count;

    // The sub-agent file as it stood later (one line new in the middle, which adds no event):
    // captured again without complaint and without appending anything twice.
    std::fs::copy(real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl"), &agent).unwrap();
    subagent_stop();
    assert_eq!(events_of(&store, &child), first);
    assert!(log_lines(&store).is_empty(), "{:?}", log_lines(&store));

    // A sub-agent whose transcript is not there is logged, and nothing else happens.
    std::fs::remove_file(&agent).unwrap();
    subagent_stop();
    let log = log_lines(&store);
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(
        log[0].contains("SubagentStop") && log[0].contains("agent-a485154.jsonl: no such file"),
        "{log:?}"
    );
    shut_down(&store);
}

/// Codex's members for an event, as its `codex-rs/hooks` input schemas require them.
fn codex_input(event: &str, transcript: Option<&Path>, extra: serde_json::Value) -> String {
    let mut input = serde_json::json!({
        "session_id": CODEX_SESSION,
        "transcript_path": transcript.map(|p| p.display().to_string()),
        "cwd": CODEX_WORKSPACE,
        "hook_event_name": event,
        "model": "gpt-5.1-codex",
        "permission_mode": "default",
    });
    for (key, value) in extra.as_object().unwrap() {
        input[key] = value.clone();
    }
    input.to_string()
}

#[test]
fn codex_hooks_capture_a_rollout_and_answer_session_start_in_codexs_shape() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_memories(dir.path());
    let rollout = dir.path().join("sessions/2026/05/04/rollout-2026-05-04T08-12-01-019e1b7a.jsonl");
    std::fs::create_dir_all(rollout.parent().unwrap()).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(written("codex-rollout-0.128.jsonl"))
        .unwrap()
        .lines()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&rollout, lines[..30].concat()).unwrap();

    let turn = serde_json::json!({"turn_id": "019e1b7a-3d02-7c31-9f1e-0a6b2d8c5e13", "stop_hook_active": false, "last_assistant_message": "Done."});
    assert_eq!(
        stdout(&hook(&store, "codex", GENEROUS, &codex_input("Stop", Some(&rollout), turn.clone()))),
        ""
    );
    let first = events_of(&store, CODEX_SESSION);
    assert!(first > 0);
    std::fs::write(&rollout, lines.concat()).unwrap();
    let compact = serde_json::json!({"turn_id": "019e1b7a-3d02-7c31-9f1e-0a6b2d8c5e13", "trigger": "manual"});
    assert_eq!(
        stdout(&hook(&store, "codex", GENEROUS, &codex_input("PreCompact", Some(&rollout), compact))),
        ""
    );
    assert!(events_of(&store, CODEX_SESSION) > first);

    // Session start with no rollout yet (`transcript_path` null), in another workspace than the one
    // the memories were learned in: the global preferences come, that workspace's fact does not; in
    // the shape Codex parses with unknown members refused.
    let start = hook(
        &store,
        "codex",
        GENEROUS,
        &codex_input("SessionStart", None, serde_json::json!({"source": "startup"})),
    );
    let context = additional_context(&start);
    assert!(context.contains("The user prefers tabs over spaces in every project."), "{context}");
    assert!(!context.contains("fjall"), "another workspace's item: {context}");
    assert!(tokens(&context) <= 1_500);
    // A stop without a rollout is logged, not fatal.
    let before = log_lines(&store).len();
    assert_eq!(stdout(&hook(&store, "codex", &[], &codex_input("Stop", None, turn))), "");
    let log = log_lines(&store);
    assert_eq!(log.len(), before + 1, "{log:?}");
    assert!(log[before].contains("codex Stop") && log[before].contains("no transcript_path"), "{log:?}");
    shut_down(&store);
}

/// A store holding a fact of each of two workspaces (`fjall` of one, `sqlite` of the other), each
/// learned in a session recorded with that workspace, and the global preferences; and a fact
/// (`redb`) of a session `old` recorded, as a store written before workspaces were resolved holds
/// it, with the directory it ran in.
fn store_with_workspace_facts(dir: &Path, repository: &str, notes: &str, old: &str) -> PathBuf {
    let store = dir.join("store");
    let transcript = dir.join("memories.jsonl");
    let said = |session: &str, turn: &str, text: &str| {
        serde_json::json!({"session": session, "turn": turn, "role": "user",
            "parts": [{"type": "text", "text": text}]})
    };
    let lines = [
        serde_json::json!({"kind": "session", "session": "m1", "workspace": repository}),
        said("m1", "t1", "Our project uses fjall for storage. I prefer tabs over spaces."),
        said("m1", "t2", "Remember that I never use unwrap in library code."),
        serde_json::json!({"kind": "session", "session": "m2", "workspace": notes}),
        said("m2", "t1", "Our project uses sqlite for storage."),
        said("m2", "t2", "Remember that I never use unwrap in tests either."),
        serde_json::json!({"kind": "session", "session": "old", "workspace": old}),
        said("old", "t1", "Our project uses redb for storage."),
        said("old", "t2", "Remember that I review every diff before a commit."),
    ];
    std::fs::write(&transcript, lines.iter().map(|line| format!("{line}\n")).collect::<String>()).unwrap();
    for args in [
        &["import", transcript.to_str().unwrap()][..],
        &["memory", "remember", "m1"],
        &["memory", "remember", "m2"],
        &["memory", "remember", "old"],
    ] {
        let output = mnemo(&store, args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    store
}

/// What Claude Code's `SessionStart` hook prints for `session` started in `cwd`.
fn start_hook(store: &Path, session: &str, cwd: &str) -> Ran {
    let input = serde_json::json!({
        "session_id": session, "transcript_path": format!("{cwd}/{session}.jsonl"), "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "SessionStart", "source": "startup",
    });
    hook(store, "claude-code", GENEROUS, &input.to_string())
}

/// The context Claude Code's `SessionStart` gets for `session` started in `cwd`.
fn start_context(store: &Path, session: &str, cwd: &str) -> String {
    additional_context(&start_hook(store, session, cwd))
}

/// A session started anywhere in a repository (its root, a sub-folder, with a trailing slash,
/// through a symlink, in a second working tree) gets the repository's memory; outside any
/// repository a folder is its own workspace. The repository is laid out by hand as git lays it
/// out, so no git is needed.
#[test]
fn session_start_anywhere_in_a_repository_gets_the_repositorys_memory() {
    let dir = tempfile::tempdir().unwrap();
    let temp = std::fs::canonicalize(dir.path()).unwrap();
    let root = temp.join("repo");
    std::fs::create_dir_all(root.join(".git/worktrees/feature")).unwrap();
    std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(root.join("src/module")).unwrap();
    std::os::unix::fs::symlink(root.join("src"), temp.join("link")).unwrap();
    let tree = temp.join("repo-feature");
    std::fs::create_dir_all(tree.join("src")).unwrap();
    std::fs::write(root.join(".git/worktrees/feature/commondir"), "../..\n").unwrap();
    std::fs::write(tree.join(".git"), format!("gitdir: {}\n", root.join(".git/worktrees/feature").display()))
        .unwrap();
    let notes = temp.join("notes");
    std::fs::create_dir_all(notes.join("drafts")).unwrap();
    std::os::unix::fs::symlink(&notes, temp.join("notes-link")).unwrap();
    let text = |path: &Path| path.to_str().unwrap().to_owned();
    let store = store_with_workspace_facts(&temp, &text(&root), &text(&notes), &text(&root.join("src")));

    let in_repository = [
        text(&root),
        format!("{}/", root.display()),
        text(&root.join("src")),
        format!("{}/src/module/", root.display()),
        text(&temp.join("link")),
        text(&tree.join("src")),
    ];
    for (n, cwd) in in_repository.iter().enumerate() {
        let context = start_context(&store, &format!("r{n}"), cwd);
        assert!(context.contains("fjall"), "{cwd}: {context}");
        assert!(!context.contains("sqlite") && !context.contains("redb"), "{cwd}: {context}");
        assert!(context.contains("The user prefers tabs over spaces."), "{cwd}: {context}");
    }
    for (n, cwd) in [format!("{}/", notes.display()), text(&temp.join("notes-link"))].iter().enumerate() {
        let context = start_context(&store, &format!("n{n}"), cwd);
        assert!(context.contains("sqlite") && !context.contains("fjall"), "{cwd}: {context}");
    }
    // A session recorded with its directory itself keeps that workspace and its memory.
    let context = start_context(&store, "old", &text(&root.join("src")));
    assert!(context.contains("redb") && !context.contains("fjall"), "{context}");

    // A folder inside the plain folder is a workspace of its own: neither fact (and, as no item
    // holds everywhere, nothing to give at all).
    let printed = start_hook(&store, "d", &text(&notes.join("drafts")));
    assert_eq!(stdout(&printed), "", "no memory, no output");

    // A session run in a sub-folder is captured into the repository's workspace.
    let cwd = format!("{}/src/module/", root.display());
    let transcript = temp.join(format!("{SESSION}.jsonl"));
    let session = std::fs::read_to_string(real("incremental-simple/turn-1.jsonl")).unwrap();
    std::fs::write(&transcript, session.replace(WORKSPACE, &cwd)).unwrap();
    let mut stop: serde_json::Value =
        serde_json::from_str(&claude_input("Stop", &transcript, serde_json::json!({}))).unwrap();
    stop["cwd"] = serde_json::json!(cwd);
    assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &stop.to_string())), "");
    let sessions = client(&store).call::<Sessions>(&Empty {}).unwrap();
    let captured = sessions.iter().find(|s| s.session == SESSION).unwrap();
    assert_eq!(captured.workspace.as_deref(), Some(text(&root).as_str()));
    assert!(log_lines(&store).is_empty(), "{:?}", log_lines(&store));
    shut_down(&store);
}

/// Every way a hook's input can be wrong: each exits 0 with nothing on stdout and logs one line.
#[test]
fn garbage_on_stdin_exits_0_with_nothing_on_stdout_and_a_logged_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let inputs = [
        "".to_owned(),
        "garbage {".to_owned(),
        "\u{0}\u{1}\u{ff}".to_owned(),
        "[1,2,3]".to_owned(),
        r#"{"session_id":"s","hook_event_name":"Stop"}"#.to_owned(),
        r#"{"session_id":"s","cwd":"/w","transcript_path":"/w/t.jsonl","hook_event_name":"PreToolUse"}"#
            .to_owned(),
        "x".repeat(2 * 1024 * 1024),
    ];
    for (index, input) in inputs.iter().enumerate() {
        for host in ["claude-code", "codex"] {
            let ran = hook(&store, host, &[], input);
            assert_eq!(stdout(&ran), "", "input {index}");
        }
    }
    // Nothing was started for input that could not be read.
    assert!(!store.join("server.sock").exists());
    // Options out of range are bad input too.
    let start = r#"{"session_id":"s","cwd":"/w","transcript_path":null,"hook_event_name":"SessionStart","source":"startup"}"#;
    assert_eq!(stdout(&hook(&store, "codex", &["--context-tokens", "0"], start)), "");
    assert_eq!(stdout(&hook(&store, "codex", &["--context-tokens", "16001"], start)), "");
    let log = log_lines(&store);
    assert!(log[log.len() - 2].contains("--context-tokens 0: expected 1..=16000"), "{log:#?}");
    assert!(log[log.len() - 1].contains("--context-tokens 16001"), "{log:#?}");
    let log = log[..log.len() - 2].to_vec();
    assert_eq!(log.len(), inputs.len() * 2, "{log:#?}");
    assert!(log[0].contains("not the host's hook JSON"), "{}", log[0]);
    assert!(log[10].contains("hook_event_name \"PreToolUse\""), "{}", log[10]);
    assert!(log[12].contains("longer than"), "{}", log[12]);
}

#[test]
fn a_killed_server_a_locked_store_and_a_silent_server_each_end_in_exit_0_and_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_memories(dir.path());
    let transcript = dir.path().join(format!("{SESSION}.jsonl"));
    std::fs::copy(real("incremental-simple/turn-1.jsonl"), &transcript).unwrap();
    let start = claude_input("SessionStart", &transcript, serde_json::json!({"source": "startup"}));
    let stop = claude_input("Stop", &transcript, serde_json::json!({"stop_hook_active": false}));

    // A server started by a hook, then killed without a chance to clean up (its socket stays).
    assert!(!additional_context(&hook(&store, "claude-code", GENEROUS, &start)).is_empty());
    let pid = client(&store).server().pid;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let began = Instant::now();
    while client_alive(&store) && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for input in [&start, &stop] {
        let ran = hook(&store, "claude-code", &["--no-start"], input);
        assert_eq!(stdout(&ran), "");
    }
    let log = log_lines(&store);
    assert_eq!(log.len(), 2, "{log:#?}");
    assert!(log.iter().all(|line| line.contains("no server answers")), "{log:#?}");

    // Without --no-start a hook starts a new server in place of the killed one.
    assert!(!additional_context(&hook(&store, "claude-code", GENEROUS, &start)).is_empty());
    shut_down(&store);

    // A store another process holds (here this test, with the store open): no server can start.
    {
        let _held = open_when_free(&store);
        for input in [&start, &stop] {
            let ran = hook(&store, "claude-code", &["--budget-ms", "1000"], input);
            assert_eq!(stdout(&ran), "");
        }
    }
    let log = log_lines(&store);
    assert_eq!(log.len(), 4, "{log:#?}");
    // The started server's own word ("store is locked") is quoted when it came within the budget.
    assert!(
        log[2..].iter().all(|line| line.contains("did not start") || line.contains("time budget")),
        "{log:#?}"
    );

    // A socket that accepts and never answers: the budget ends the hook.
    let listener = std::os::unix::net::UnixListener::bind(store.join("server.sock")).unwrap();
    let accepting = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(2) {
            held.push(stream);
        }
        std::thread::sleep(Duration::from_secs(3));
    });
    for input in [&start, &stop] {
        let ran = hook(&store, "claude-code", &["--budget-ms", "500"], input);
        assert_eq!(stdout(&ran), "");
    }
    accepting.join().unwrap();
    let log = log_lines(&store);
    assert_eq!(log.len(), 6, "{log:#?}");
    assert!(
        log[4..].iter().all(|line| line.contains("did not answer within") || line.contains("time budget")),
        "{log:#?}"
    );
}

/// Opens the store once the server that held it has closed it.
fn open_when_free(store: &Path) -> mnemo::Mnemo {
    let began = Instant::now();
    loop {
        match mnemo::Mnemo::open(store, mnemo::Config::default()) {
            Err(mnemo::Error::Log(mnemo::log::LogError::Locked { .. }))
                if began.elapsed() < Duration::from_secs(30) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
}

fn client_alive(store: &Path) -> bool {
    Client::connect(store, &ConnectOptions::new("hook test")).is_ok()
}

/// The written Claude Code session of standing instructions (`/home/dev/queue`).
const QUEUE_SESSION: &str = "7d0c4b9e-2f1a-4c55-9d3e-5b8a1f0e6c21";
const QUEUE_WORKSPACE: &str = "/home/dev/queue";

/// A hook's input from Claude Code for `session` running in `cwd`.
fn claude_event(
    event: &str,
    session: &str,
    cwd: &str,
    transcript: &Path,
    extra: serde_json::Value,
) -> String {
    let mut input: serde_json::Value = serde_json::from_str(&claude_input(event, transcript, extra)).unwrap();
    input["session_id"] = session.into();
    input["cwd"] = cwd.into();
    input.to_string()
}

/// `memory status --json` as a person would run it beside the agent (through the store server the
/// hooks started): the sessions with events no extraction has read, and the last extractions.
fn memory_status(store: &Path) -> serde_json::Value {
    let output = support::mnemo(store, &["--json", "memory", "status"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Waits until no session that extraction may read has events past its cursor and each of
/// `sessions` has a last extraction: background extraction is asynchronous, so the wait is long
/// and nothing is asserted on how long it took.
fn wait_for_extraction(store: &Path, sessions: &[&str]) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let status = memory_status(store);
        let waiting = status["pending"].as_array().unwrap().iter().any(|p| p["gate"].is_null());
        let last = status["last"].as_array().unwrap();
        let ran = sessions.iter().all(|session| last.iter().any(|l| l["session"] == *session));
        if !waiting && ran {
            return status;
        }
        assert!(Instant::now() < deadline, "extraction never caught up: {status:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_hooks_alone_extract_what_sessions_said_and_the_next_session_start_injects_it() {
    // Before: Stop, PreCompact and SessionEnd imported the transcript and nothing extracted it:
    // `memory list` stayed empty and the next SessionStart injected nothing until a manual
    // `mnemo memory extract --all`.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let projects = dir.path().join("home/.claude/projects");

    // Claude Code: the written session of standing instructions ends (Stop, then SessionEnd), and
    // the real sessions' turns end; Codex: a rollout in the shape Codex 0.128 writes, whose user
    // states a standing instruction, stops.
    let queue = projects.join("-home-dev-queue");
    std::fs::create_dir_all(&queue).unwrap();
    let transcript = queue.join(format!("{QUEUE_SESSION}.jsonl"));
    let written_session = support::repo_root()
        .join("crates/mnemo/tests/fixtures/memory/claude-code-standing-instructions.jsonl");
    std::fs::copy(written_session, &transcript).unwrap();
    let stop = serde_json::json!({"stop_hook_active": false});
    for (event, extra) in [("Stop", stop.clone()), ("SessionEnd", serde_json::json!({"reason": "clear"}))] {
        let input = claude_event(event, QUEUE_SESSION, QUEUE_WORKSPACE, &transcript, extra);
        assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &input)), "");
    }
    let codemie = projects.join("-Users-User-repo-codemie-ai-codemie-code");
    std::fs::create_dir_all(&codemie).unwrap();
    let mut real_sessions = Vec::new();
    for (file, session, cwd) in [
        ("incremental-simple/turn-2.jsonl", SESSION, WORKSPACE),
        ("incremental-subagents/turn-2.jsonl", "e9fb405b-169f-40eb-9396-7e75076f045d", WORKSPACE),
        (
            "small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
            "4c2ddfdc-b619-4525-8d03-1950fb1b0257",
            "/tmp/private",
        ),
    ] {
        let path = codemie.join(format!("{session}.jsonl"));
        std::fs::copy(real(file), &path).unwrap();
        let input = claude_event("Stop", session, cwd, &path, stop.clone());
        assert_eq!(stdout(&hook(&store, "claude-code", GENEROUS, &input)), "");
        real_sessions.push(session);
    }
    let rollout = dir.path().join("sessions/2026/05/04/rollout-2026-05-04T08-12-01-019e1b7a.jsonl");
    std::fs::create_dir_all(rollout.parent().unwrap()).unwrap();
    let original = std::fs::read_to_string(written("codex-rollout-0.128.jsonl")).unwrap();
    let asked = "The totals test fails after the currency change. Fix it and keep rounding half-even.";
    assert!(original.contains(asked));
    let rollout_text =
        original.replace(asked, "Fix the totals test. Never push to main without asking me first.");
    std::fs::write(&rollout, rollout_text).unwrap();
    let turn = serde_json::json!({"turn_id": "019e1b7a-3d02-7c31-9f1e-0a6b2d8c5e13", "stop_hook_active": false, "last_assistant_message": "Done."});
    assert_eq!(stdout(&hook(&store, "codex", GENEROUS, &codex_input("Stop", Some(&rollout), turn))), "");

    // No manual command: extraction ran behind the captures, each session through its last event.
    let mut sessions = real_sessions.clone();
    sessions.extend([QUEUE_SESSION, CODEX_SESSION]);
    let status = wait_for_extraction(&store, &sessions);
    for last in status["last"].as_array().unwrap() {
        assert_eq!(last["outcome"]["outcome"], "committed", "{status:#}");
    }
    // Never twice over the same range: each session's commits follow one another, from 0.
    let log = support::mnemo(&store, &["--json", "log", "--limit", "100000"]);
    let mut ranges: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
    for entry in serde_json::from_slice::<serde_json::Value>(&log.stdout).unwrap().as_array().unwrap() {
        if entry["kind"] == "memory_commit" {
            let (record, cursor) = (&entry["record"], &entry["record"]["cursor"]);
            let range = (cursor["expected"].as_u64().unwrap(), cursor["next"].as_u64().unwrap());
            ranges.entry(record["session"].as_str().unwrap().to_owned()).or_default().push(range);
        }
    }
    for session in &sessions {
        let commits = &ranges[*session];
        assert_eq!(commits[0].0, 0, "{session}: {commits:?}");
        assert!(commits.windows(2).all(|pair| pair[0].1 == pair[1].0), "{session}: {commits:?}");
    }

    // The next session in the same project starts with the standing instructions.
    let next = queue.join("0a0b0c0d-1111-4222-8333-944455556666.jsonl");
    let start = claude_event(
        "SessionStart",
        "0a0b0c0d-1111-4222-8333-944455556666",
        QUEUE_WORKSPACE,
        &next,
        serde_json::json!({"source": "startup", "model": "claude-sonnet-4-5"}),
    );
    let context = additional_context(&hook(&store, "claude-code", GENEROUS, &start));
    for instruction in [
        "TODO is not acceptable, implementation must be full.",
        "performance is crucial, the queue sits on the hot path.",
        "don't commit until the final step, they will review the diff first.",
        "never push to main without asking them.",
    ] {
        assert!(context.contains(instruction), "missing {instruction:?}: {context}");
    }
    assert!(tokens(&context) <= 1_500, "{} tokens", tokens(&context));

    // A Codex session starting in the rollout's project gets its instruction.
    let start = hook(
        &store,
        "codex",
        GENEROUS,
        &codex_input("SessionStart", None, serde_json::json!({"source": "startup"})),
    );
    let context = additional_context(&start);
    assert!(context.contains("never push to main without asking them first."), "{context}");
    assert!(!context.contains("the queue sits on the hot path"), "another workspace's item: {context}");
    assert!(tokens(&context) <= 1_500, "{} tokens", tokens(&context));
    assert!(log_lines(&store).is_empty(), "{:?}", log_lines(&store));
    shut_down(&store);
}
