//! The CLI as a process in a temp dir: exit codes, `--json` output, and the errors a user sees.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use support::{MNEMO, SAMPLE, code, import_fixtures, json, mnemo, real_fixtures, stderr, written};

#[test]
fn import_then_inspect_rebuild_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let import = mnemo(&store, &["import", SAMPLE, "--json"]);
    assert_eq!(code(&import), 0, "{}", stderr(&import));
    assert_eq!(json(&import)[0]["records"], 23);

    let sessions = mnemo(&store, &["sessions", "--json"]);
    assert_eq!(code(&sessions), 0);
    let sessions = json(&sessions);
    assert_eq!(sessions[0]["session"], "sess-2026-01-05-auth");
    assert_eq!(sessions[0]["turn_count"], 2);

    let log = mnemo(&store, &["log", "--from", "2", "--limit", "3", "--json"]);
    let log = json(&log);
    assert_eq!(log.as_array().unwrap().len(), 3);
    assert_eq!(log[0]["position"], 2);
    assert_eq!(log[0]["kind"], "runtime_event");

    let stats = json(&mnemo(&store, &["stats", "--json"]));
    assert_eq!(stats["head"], 23);
    assert_eq!(stats["events"], 20);

    let rebuild = mnemo(&store, &["rebuild", "--json"]);
    assert_eq!(code(&rebuild), 0, "{}", stderr(&rebuild));
    assert_eq!(json(&rebuild)[0]["digest"], stats["stages"][0]["digest"]);

    let verify = mnemo(&store, &["verify", "--json"]);
    assert_eq!(code(&verify), 0, "{}", stderr(&verify));
    assert_eq!(json(&verify)["envelopes"], 23);
}

#[test]
fn a_bad_line_is_exit_2_names_the_line_and_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("bad.jsonl");
    let mut text = std::fs::read_to_string(SAMPLE).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut bad: Vec<String> = lines[..6].iter().map(|l| l.to_string()).collect();
    bad.push(r#"{"session":"sess-2026-01-05-auth","turn":"t1","role":"model","parts":[{"type":"tool_call","id":"c","name":"x"}]}"#.to_owned());
    text = bad.join("\n");
    std::fs::write(&file, text).unwrap();
    let output = mnemo(&store, &["import", file.to_str().unwrap()]);
    assert_eq!(code(&output), 2);
    let message = stderr(&output);
    assert!(message.contains("bad.jsonl:7: field `parts[0]`: missing field `args`"), "{message}");
    assert_eq!(code(&mnemo(&store, &["sessions"])), 1, "no session was imported");

    let missing = mnemo(&store, &["import", "/nonexistent/file.jsonl"]);
    assert_eq!(code(&missing), 2);
    assert!(stderr(&missing).contains("cannot read /nonexistent/file.jsonl"));
    let usage = mnemo(&store, &["import"]);
    assert_eq!(code(&usage), 2);
}

#[test]
fn an_error_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = mnemo(&dir.path().join("store"), &["import", "/nonexistent/file.jsonl"]);
    let message = stderr(&missing);
    assert_eq!(message.matches("No such file").count(), 1, "the cause repeated: {message}");
}

#[test]
fn a_folder_given_to_import_is_refused_naming_sync_and_nothing_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let folder = dir.path().join("sessions");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(SAMPLE, folder.join("coding-session.jsonl")).unwrap();
    let output = mnemo(&store, &["import", SAMPLE, folder.to_str().unwrap()]);
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains(&format!("{} is a folder", folder.display())), "{message}");
    assert!(message.contains("mnemo sync"), "{message}");
    assert!(!message.contains("os error"), "{message}");
    let sessions = mnemo(&store, &["sessions"]);
    assert_eq!(code(&sessions), 2, "the file before the folder was not imported either");
    assert!(stderr(&sessions).contains("there is no store at"), "{}", stderr(&sessions));
}

#[test]
fn errors_in_json_mode_are_a_json_document_too() {
    let dir = tempfile::tempdir().unwrap();
    let output = mnemo(&dir.path().join("s"), &["import", "/nonexistent.jsonl", "--json"]);
    assert_eq!(code(&output), 2);
    let error = json(&output);
    assert_eq!(error["error"]["kind"], "input");
    assert!(error["error"]["message"].as_str().unwrap().contains("/nonexistent.jsonl"));
}

/// Flips one byte of the stored envelope at `position` through the storage engine, as damage below
/// its checksums or a hand edit would. The layout (`db/`, keyspace `log`, big-endian position keys)
/// is the documented on-disk format.
fn flip_envelope_byte(store: &Path, position: u64, at: usize) {
    let db = fjall::Database::builder(store.join("db")).open().unwrap();
    let log = db.keyspace("log", fjall::KeyspaceCreateOptions::default).unwrap();
    let mut bytes = log.get(position.to_be_bytes()).unwrap().unwrap().to_vec();
    bytes[at] ^= 0x04;
    log.insert(position.to_be_bytes(), bytes).unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
}

#[test]
fn a_flipped_byte_fails_verify_with_exit_1_naming_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(code(&mnemo(&store, &["import", SAMPLE])), 0);
    flip_envelope_byte(&store, 9, 60);
    let verify = mnemo(&store, &["verify"]);
    assert_eq!(code(&verify), 1, "{}", stderr(&verify));
    let message = stderr(&verify);
    assert!(message.contains("log is damaged at position 9"), "{message}");
    // Any other command refuses the damaged log on open, naming the position too.
    let stats = mnemo(&store, &["stats"]);
    assert_ne!(code(&stats), 0);
    assert!(stderr(&stats).contains("position 9"), "{}", stderr(&stats));
}

#[test]
fn a_second_process_gets_store_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(code(&mnemo(&store, &["import", SAMPLE])), 0);
    // Hold the store's lock the way a running process does, then ask the CLI in.
    let lock = std::fs::File::options().write(true).open(store.join("mnemo.lock")).unwrap();
    lock.try_lock().unwrap();
    let output = mnemo(&store, &["stats"]);
    assert_eq!(code(&output), 4);
    assert!(stderr(&output).contains("store is locked by another process"), "{}", stderr(&output));
    // No server answers on the store's socket, so none is named.
    assert!(!stderr(&output).contains("store server"), "{}", stderr(&output));
    drop(lock);
    assert_eq!(code(&mnemo(&store, &["stats"])), 0);
}

#[test]
fn a_store_held_by_its_server_serves_commands_and_names_itself_to_one_that_needs_the_store_alone() {
    use mnemo_server::client::{Client, ClientError, ConnectOptions};
    use mnemo_server::methods::{Empty, Shutdown};

    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(code(&mnemo(&store, &["import", SAMPLE])), 0);
    // The server agents' hooks start, holding the store until it has been idle a while.
    let mut server = Command::new(MNEMO)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--idle-exit", "600"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let began = std::time::Instant::now();
    let mut client = loop {
        match Client::connect(&store, &ConnectOptions::new("test")) {
            Ok(client) => break client,
            Err(ClientError::NoServer { .. }) if began.elapsed() < std::time::Duration::from_secs(60) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(other) => panic!("{other}"),
        }
    };
    // A command that uses the store runs through the server...
    let through_server = mnemo(&store, &["sessions"]);
    assert_eq!(code(&through_server), 0, "{}", stderr(&through_server));
    // ...and one that needs the store alone names the server and how to stop it.
    let output = mnemo(&store, &["salvage", "--to", dir.path().join("copy").to_str().unwrap()]);
    let message = stderr(&output);
    assert_eq!(code(&output), 4, "{message}");
    assert!(message.contains("store is locked by another process"), "{message}");
    let pid = server.id();
    assert!(message.contains(&format!("the store server holds it (`mnemo serve`, pid {pid};")), "{message}");
    assert!(message.contains("it exits after 600 s without a connection"), "{message}");
    assert!(message.contains(&format!("Stop it with `kill {pid}`")), "{message}");
    client.call::<Shutdown>(&Empty {}).unwrap();
    drop(client);
    assert!(server.wait().unwrap().success());
    let output = mnemo(&store, &["sessions"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
}

#[test]
fn the_demo_runs_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        Command::new(MNEMO).args(["demo", "--json", "--dir"]).arg(dir.path().join("demo")).output().unwrap();
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let report = json(&output);
    let formats: Vec<&str> =
        report["imports"].as_array().unwrap().iter().map(|i| i["format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["mnemo", "mnemo", "mnemo", "claude-code", "codex"]);
    // Five sessions and the sub-agent session of the Claude Code sample's sidechain lines.
    assert_eq!(report["sessions"].as_array().unwrap().len(), 6);
    assert!(report["workspaces"].as_array().unwrap().len() >= 2);
    // The long session crossed the high water: a checkpoint was recorded and the next request is smaller.
    assert!(report["compaction"]["recorded"]["position"].as_u64().is_some(), "{}", report["compaction"]);
    let diagnostics = &report["context"]["diagnostics"];
    assert!(diagnostics["tokens_after"].as_u64() < diagnostics["tokens_before"].as_u64(), "{diagnostics}");
    assert_eq!(report["memory"]["remember"]["status"], "remembered");
    let items: Vec<&str> = report["memory"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["fields"]["content"].as_str().unwrap())
        .collect();
    assert!(items.iter().any(|i| i.contains("entries table is append-only")), "{items:?}");
    assert!(items.iter().any(|i| i.contains("British spelling")), "{items:?}");
    assert!(!report["memory"]["recall_block"]["items"].as_array().unwrap().is_empty());
    assert!(!report["memory"]["recalled"].as_array().unwrap().is_empty());
    assert_eq!(report["copy"]["events"], 20);
    assert!(!report["search"]["rows"].as_array().unwrap().is_empty());
    let head = report["stats"]["head"].as_u64().unwrap();
    assert_eq!(report["verification"]["envelopes"].as_u64(), Some(head));
    assert!(report["verification"]["stages"].as_array().unwrap().iter().all(|s| s["live"] == s["rebuilt"]));
    assert!(report["timings_ms"]["total"].as_u64().is_some());
    let used = Command::new(MNEMO).args(["demo", "--dir"]).arg(dir.path().join("demo")).output().unwrap();
    assert_eq!(code(&used), 2, "a used demo directory is refused");
}

#[test]
fn import_detects_the_format_and_export_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let codex = written("codex-rollout.jsonl");
    let codex = codex.to_str().unwrap();
    let import = mnemo(&first, &["import", codex, SAMPLE]);
    assert_eq!(code(&import), 0, "{}", stderr(&import));
    let printed = String::from_utf8_lossy(&import.stdout);
    assert!(printed.contains("codex format (detected)"), "{printed}");
    assert!(printed.contains("skipped 2 × turn_context"), "{printed}");

    let exported = dir.path().join("export.jsonl");
    let export = mnemo(&first, &["export", "--out", exported.to_str().unwrap(), "--json"]);
    assert_eq!(code(&export), 0, "{}", stderr(&export));
    assert_eq!(json(&export)["sessions"], 2);
    let import = mnemo(&second, &["import", exported.to_str().unwrap(), "--format", "mnemo"]);
    assert_eq!(code(&import), 0, "{}", stderr(&import));
    let again = mnemo(&second, &["export"]);
    assert_eq!(code(&again), 0);
    assert_eq!(again.stdout, std::fs::read(&exported).unwrap());

    let wrong = mnemo(&second, &["import", codex, "--format", "claude-code"]);
    assert_eq!(code(&wrong), 2, "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("codex-rollout.jsonl:1: no line is a claude-code conversation line"),
        "{}",
        stderr(&wrong)
    );
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(code(&mnemo(&store, &["import", SAMPLE])), 0);
    for command in ["log", "export"] {
        // The read end is closed before the command writes: its first line meets a closed pipe.
        let mut child = Command::new(MNEMO)
            .arg("--store")
            .arg(&store)
            .arg(command)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{command}: {}", stderr(&output));
        assert!(stderr(&output).is_empty(), "{command}: {}", stderr(&output));
    }
}

#[test]
fn a_closed_stderr_as_well_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(code(&mnemo(&store, &["import", SAMPLE])), 0);
    // `mnemo export 2>&1 | head`: both streams go to one pipe, closed before anything is written.
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = Command::new(MNEMO)
        .arg("--store")
        .arg(&store)
        .arg("export")
        .env_remove("RUST_LOG")
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    drop(reader);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_store_pointed_at_a_directory_with_an_executable_script_leaves_its_mode_alone_and_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("v");
    std::fs::create_dir_all(project.join("bin")).unwrap();
    let script = project.join("bin/run.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for path in [&project, &project.join("bin")] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for args in [&["sessions"][..], &["stats"], &["verify"], &["import", SAMPLE]] {
        let output = mnemo(&project, args);
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains("is not a Mnemo store and is not empty (it holds bin)"),
            "{}",
            stderr(&output)
        );
        assert_eq!(mode(&script), 0o755, "{args:?}");
        assert_eq!(mode(&project), 0o755, "{args:?}");
        assert_eq!(mode(&project.join("bin")), 0o755, "{args:?}");
        let entries: Vec<_> = std::fs::read_dir(&project).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(entries, ["bin"], "{args:?}");
    }
    // Nothing was created beside it either.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn every_file_of_a_new_store_and_of_an_export_is_owner_only_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let import = mnemo(&store, &["import", SAMPLE]);
    assert_eq!(code(&import), 0, "{}", stderr(&import));
    let mut checked = 0;
    let mut pending = vec![store.clone()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        if metadata.is_dir() {
            assert_eq!(mode(&path), 0o700, "{}", path.display());
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
        checked += 1;
    }
    assert!(checked > 5, "only {checked} paths");

    let exported = dir.path().join("out.jsonl");
    let export = mnemo(&store, &["export", "--out", exported.to_str().unwrap()]);
    assert_eq!(code(&export), 0, "{}", stderr(&export));
    assert_eq!(mode(&exported), 0o600);
    let length = std::fs::metadata(&exported).unwrap().len();
    assert!(length > 0);
    // A second export to the same path refuses to overwrite what is there.
    let again = mnemo(&store, &["export", "--out", exported.to_str().unwrap()]);
    assert_eq!(code(&again), 2, "{}", stderr(&again));
    assert!(stderr(&again).contains("it exists"), "{}", stderr(&again));
    assert_eq!(std::fs::metadata(&exported).unwrap().len(), length);
}

#[test]
fn an_empty_directory_becomes_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let import = mnemo(dir.path(), &["import", SAMPLE]);
    assert_eq!(code(&import), 0, "{}", stderr(&import));
    assert!(dir.path().join("mnemo-store").is_file());
    assert_eq!(code(&mnemo(dir.path(), &["sessions"])), 0);
}

#[test]
fn a_store_shorter_than_its_acknowledged_mark_is_refused_verified_salvaged_and_accepted() {
    let dir = tempfile::tempdir().unwrap();
    // A store that acknowledged the whole sample (23 envelopes), and one that holds only its first
    // three lines (five envelopes): giving the second the first's high-water mark is what a journal cut leaves.
    let full = dir.path().join("full");
    assert_eq!(code(&mnemo(&full, &["import", SAMPLE])), 0);
    let store = dir.path().join("store");
    let head: String =
        std::fs::read_to_string(SAMPLE).unwrap().lines().take(3).map(|l| format!("{l}\n")).collect();
    let partial = dir.path().join("partial.jsonl");
    std::fs::write(&partial, head).unwrap();
    assert_eq!(code(&mnemo(&store, &["import", partial.to_str().unwrap()])), 0);
    std::fs::copy(full.join("acknowledged"), store.join("acknowledged")).unwrap();

    for args in [&["stats"][..], &["sessions"], &["import", SAMPLE]] {
        let refused = mnemo(&store, args);
        assert_eq!(code(&refused), 1, "{args:?}: {}", stderr(&refused));
        assert!(stderr(&refused).contains("positions 6..=23 were acknowledged"), "{}", stderr(&refused));
    }
    let verify = mnemo(&store, &["verify", "--json"]);
    assert_eq!(code(&verify), 1, "{}", stderr(&verify));
    assert_eq!(json(&verify)["lost"], "6..=23");

    let salvaged = dir.path().join("salvaged");
    let salvage = mnemo(&store, &["salvage", "--to", salvaged.to_str().unwrap(), "--json"]);
    assert_eq!(code(&salvage), 1, "{}", stderr(&salvage));
    let report = json(&salvage);
    assert_eq!((report["recovered"].as_u64(), report["lost"].as_str()), (Some(5), Some("6..=23")));
    assert_eq!(code(&mnemo(&salvaged, &["verify"])), 0);

    let wrong = mnemo(&store, &["accept-loss", "6..=22"]);
    assert_eq!(code(&wrong), 1, "{}", stderr(&wrong));
    let accepted = mnemo(&store, &["accept-loss", "6..=23"]);
    assert_eq!(code(&accepted), 0, "{}", stderr(&accepted));
    assert_eq!(code(&mnemo(&store, &["verify"])), 0);
    let again = mnemo(&store, &["accept-loss", "6..=23"]);
    assert_eq!(code(&again), 2, "{}", stderr(&again));
}

/// Sessions imported out of date order used to list by append time (a September session imported
/// last showed as the newest) and untitled ones showed no title.
#[test]
fn sessions_list_by_their_own_event_times_with_a_title_from_the_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fixtures = import_fixtures();
    // Newest first on disk order, oldest imported last.
    for name in
        ["codex-rollout-0.128.jsonl", "claude-code-2.0-compaction.jsonl", "codex-rollout-legacy.jsonl"]
    {
        let path = fixtures.join(name);
        assert_eq!(code(&mnemo(&store, &["import", path.to_str().unwrap()])), 0);
    }
    let output = mnemo(&store, &["sessions"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("last activity"), "{text}");
    assert!(lines[1].starts_with("2026-05-04 08:31  2026-05-04 08:12  019e1b7a"), "{text}");
    assert!(lines[2].starts_with("2026-02-10 09:02  2026-02-10 09:00  7d3f9a12"), "{text}");
    assert!(lines[3].starts_with("2025-09-02 17:41  2025-09-02 17:40  5973b6c0"), "{text}");
    assert!(lines[3].ends_with("“why does GET /notes?tag=x return 500?”"), "{text}");
    assert!(lines[1].ends_with("Fix half-even rounding in totals"), "{text}");
    // Every left-aligned column starts at the same character on every line.
    for column in ["first activity", "session", "workspace", "flags", "title"] {
        let at = lines[0].find(column).unwrap();
        for line in &lines[1..] {
            let chars: Vec<char> = line.chars().collect();
            assert!(chars[at - 1] == ' ' && chars[at] != ' ', "{column} not at {at}: {line}");
        }
    }
    let json = json(&mnemo(&store, &["--json", "sessions"]));
    let first = &json.as_array().unwrap()[0];
    assert_eq!(first["last_activity"], 1_777_883_469_000_u64);
    assert_eq!(first["first_activity"], 1_777_882_321_135_u64);
}

/// A file-size limit below the storage engine's 64 MiB journal preallocation used to end the
/// process by SIGXFSZ (exit 153, no message).
#[test]
fn a_file_size_limit_is_exit_4_with_one_line_naming_it_and_leaves_no_half_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let output = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -f 1024; exec "$0" --store "$1" import "$2""#)
        .arg(MNEMO)
        .arg(&store)
        .arg(SAMPLE)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "{:?}: {}", output.status, stderr(&output));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.contains("file-size limit"), "{message}");
    assert!(!message.contains("FjallError"), "{message}");
    // The store was being created: nothing of it is left.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `sessions` could not tell a captured Claude Code session from a Codex one or from one the
/// host appended, nor which thread a Codex sub-agent's session belongs to.
#[test]
fn sessions_show_the_format_each_session_came_from_and_a_sub_agent_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fixtures = import_fixtures();
    for path in [
        fixtures.join("codex-rollout-0.128.jsonl"),
        fixtures.join("codex-rollout-subagent.jsonl"),
        fixtures.join("claude-code-2.0-compaction.jsonl"),
        Path::new(SAMPLE).to_path_buf(),
    ] {
        let output = mnemo(&store, &["import", path.to_str().unwrap()]);
        assert_eq!(code(&output), 0, "{}", stderr(&output));
    }
    let output = mnemo(&store, &["sessions"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines[0].find("source").unwrap();
    let source_of = |session: &str| {
        let line = lines.iter().find(|l| l.contains(session)).unwrap_or_else(|| panic!("{session}: {text}"));
        let chars: Vec<char> = line.chars().collect();
        assert!(chars[at - 1] == ' ' && chars[at] != ' ', "source not at {at}: {line}");
        chars[at..].iter().collect::<String>().split_whitespace().next().unwrap().to_owned()
    };
    assert_eq!(source_of("019e1b7a-3c44"), "codex", "{text}");
    assert_eq!(source_of("019e1b7c-81a0"), "codex", "{text}");
    assert_eq!(source_of("7d3f9a12"), "claude-code", "{text}");
    // The sample is a mnemo transcript whose session line names no source.
    assert_eq!(source_of("sess-2026-01-05-auth"), "-", "{text}");

    let json = json(&mnemo(&store, &["--json", "sessions"]));
    let child =
        json.as_array().unwrap().iter().find(|s| s["session"] == "019e1b7c-81a0-7d52-b3c4-2f6e9a1d0b77");
    let child = child.unwrap();
    assert_eq!((child["source"].as_str(), child["subagent"].as_bool()), (Some("codex"), Some(true)));
    assert_eq!(child["parent"], "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21");
    let sample = json.as_array().unwrap().iter().find(|s| s["session"] == "sess-2026-01-05-auth").unwrap();
    assert!(sample["source"].is_null() && sample["parent"].is_null(), "{sample}");
}

/// The text view of `sessions` named no sub-agent's parent (only `--json` had it), so a Claude
/// Code session's sub-agents could not be told apart from sessions of their own.
#[test]
fn sessions_text_names_the_parent_of_each_sub_agent_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let real = real_fixtures();
    let parent = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
    let codex = import_fixtures();
    for path in [
        real.join(format!("small-with-subagents/{parent}.jsonl")),
        real.join("small-with-subagents/agent-36541525.jsonl"),
        real.join("small-with-subagents/agent-50243ee8.jsonl"),
        codex.join("codex-rollout-subagent.jsonl"),
        codex.join("codex-rollout-forked.jsonl"),
    ] {
        let output = mnemo(&store, &["import", path.to_str().unwrap()]);
        assert_eq!(code(&output), 0, "{}: {}", path.display(), stderr(&output));
    }
    let output = mnemo(&store, &["sessions"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines[0].find("parent").unwrap_or_else(|| panic!("no parent column: {text}"));
    let column = |line: &str, at: usize| {
        let chars: Vec<char> = line.chars().collect();
        chars[at..].iter().collect::<String>().split_whitespace().next().unwrap().to_owned()
    };
    let session_at = lines[0].find("session").unwrap();
    let parent_of = |session: &str| {
        let line = lines
            .iter()
            .find(|l| column(l, session_at) == session)
            .unwrap_or_else(|| panic!("{session}: {text}"));
        let chars: Vec<char> = line.chars().collect();
        assert!(chars[at - 1] == ' ' && chars[at] != ' ', "parent not at {at}: {line}");
        column(line, at)
    };
    assert_eq!(parent_of(&format!("{parent}/agent-36541525")), parent, "{text}");
    assert_eq!(parent_of(parent), "-", "{text}");
    assert_eq!(
        parent_of("019e1b7c-81a0-7d52-b3c4-2f6e9a1d0b77"),
        "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21",
        "{text}"
    );
    // A forked Codex session names the session it was forked from, flagged as a fork.
    assert_eq!(
        parent_of("019e1ba8-7b21-7c64-a1f3-4e8d2c6b9f05"),
        "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21",
        "{text}"
    );
    let flags_at = lines[0].find("flags").unwrap();
    let flags_of = |session: &str| {
        let line = lines.iter().find(|l| column(l, session_at) == session).unwrap();
        column(line, flags_at)
    };
    assert_eq!(flags_of("019e1ba8-7b21-7c64-a1f3-4e8d2c6b9f05"), "fork", "{text}");
    assert_eq!(flags_of(&format!("{parent}/agent-36541525")), "sub", "{text}");
}

/// The default build leaves the benchmark harness out (decision 0220): asking for it says how to run
/// it, and touches no store.
#[cfg(not(feature = "bench"))]
#[test]
fn bench_in_a_build_without_the_harness_says_how_to_run_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let output = mnemo(&store, &["bench", "--quick", "--out", dir.path().join("out").to_str().unwrap()]);
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("cargo run --release -p mnemo-cli --features bench -- bench"), "{message}");
    assert!(!store.exists() && !dir.path().join("out").exists());
}

/// Without `--store` or `MNEMO_STORE` every command uses `~/.mnemo`, wherever it runs; a `.mnemo`
/// in the working directory (the earlier default) is named, and left alone.
#[test]
fn the_default_store_is_the_home_folders_and_a_store_here_is_named_not_used() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(MNEMO)
            .args(args)
            .current_dir(work.path())
            .env("HOME", home.path())
            .env_remove("MNEMO_STORE")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let here = run(&["--store", ".mnemo", "import", SAMPLE]);
    assert_eq!(code(&here), 0, "{}", stderr(&here));

    let default = home.path().join(".mnemo");
    let missing = run(&["sessions"]);
    assert_eq!(code(&missing), 2, "{}", stderr(&missing));
    let message = stderr(&missing);
    assert!(message.contains(&format!("there is no store at {}", default.display())), "{message}");
    assert!(message.contains("this folder holds another at .mnemo: pass `--store .mnemo`"), "{message}");

    let imported = run(&["import", SAMPLE]);
    assert_eq!(code(&imported), 0, "{}", stderr(&imported));
    assert!(default.join("db").is_dir(), "the import made the default store");
    let listed = run(&["--json", "sessions"]);
    assert_eq!(json(&listed).as_array().unwrap().len(), 1);
    // The store here is as it was: one import, never touched by the commands above.
    let here_listed = run(&["--store", ".mnemo", "--json", "sessions"]);
    assert_eq!(json(&here_listed).as_array().unwrap().len(), 1);
}
