//! `mnemo import` of several files and of files imported before: what each file committed, what
//! a failure left, and the difference between an import that resumed and one already complete.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::path::Path;

use support::{MNEMO, SAMPLE, mnemo, ok_json, real, written};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn head(store: &Path) -> u64 {
    let stats = mnemo(store, &["stats", "--json"]);
    serde_json::from_slice::<serde_json::Value>(&stats.stdout).unwrap()["head"].as_u64().unwrap()
}

const ONE: &str = r#"{"session":"one","turn":"t1","role":"user","id":"one-1","parts":[{"type":"text","text":"first"}]}
"#;
const BAD: &str = r#"{"session":"two","turn":"t1","role":"user","id":"two-1","parts":[{"type":"text","text":"fine"}]}
{"session":"two","turn":"t1","role":"model","id":"two-2","parts":[{"type":"text","text":"broken"}
"#;
const THREE: &str = r#"{"session":"three","turn":"t1","role":"user","id":"three-1","parts":[{"type":"text","text":"never"}]}
"#;

#[test]
fn a_multi_file_import_that_fails_names_the_file_and_line_and_what_was_committed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path.display().to_string()
    };
    let (one, bad, three) = (write("one.jsonl", ONE), write("bad.jsonl", BAD), write("three.jsonl", THREE));
    let output = mnemo(&store, &["import", &one, SAMPLE, &bad, &three]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    // Every committed file is reported on stdout with what it committed.
    assert!(
        stdout.contains(&format!("{one}: mnemo format (detected), 1 lines: imported 1 records")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("{SAMPLE}: mnemo format (detected), ")), "{stdout}");
    assert!(stdout.contains("imported 23 records"), "{stdout}");
    // The error names the failing file and line, what was committed before it and what was not.
    assert!(stderr.contains(&format!("{bad}:2: not valid JSON")), "{stderr}");
    assert!(stderr.contains(&format!("import stopped at {bad}")), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "committed before it: {one} (imported, 1 records appended), {SAMPLE} (imported, 23 records appended)"
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("not imported: {bad}, {three}")), "{stderr}");
    assert_eq!(head(&store), 24, "the two files before the bad one, nothing of it or after it");
}

#[test]
fn importing_again_says_already_complete_and_a_grown_file_says_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let path = dir.path().join("growing.jsonl");
    let first = "{\"session\":\"g\",\"turn\":\"t1\",\"role\":\"user\",\"id\":\"g-1\",\"parts\":[{\"type\":\"text\",\"text\":\"a\"}]}\n";
    std::fs::write(&path, first).unwrap();
    let file = path.display().to_string();
    let output = mnemo(&store, &["import", &file]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let output = mnemo(&store, &["import", &file]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("already complete: all 1 records are in the store, nothing appended"),
        "{}",
        text(&output.stdout)
    );
    let grown = format!(
        "{first}{{\"session\":\"g\",\"turn\":\"t1\",\"role\":\"model\",\"id\":\"g-2\",\"parts\":[{{\"type\":\"text\",\"text\":\"b\"}}]}}\n"
    );
    std::fs::write(&path, grown).unwrap();
    let output = mnemo(&store, &["import", &file, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report[0]["status"], "resumed");
    assert_eq!((report[0]["records"].as_u64(), report[0]["already"].as_u64()), (Some(1), Some(1)));
    assert_eq!(head(&store), 2);
}

#[test]
fn a_file_over_the_import_limit_is_refused_before_it_is_read_and_an_endless_spec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // A sparse file one byte over the limit: refused from its size, so the test reads nothing.
    let big = dir.path().join("big.jsonl");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(mnemo::transcript::IMPORT_FILE_BYTES_MAX + 1).unwrap();
    let output = mnemo(&store, &["import", big.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("the limit for one import"), "{}", text(&output.stderr));
    // A pipeline spec with no end is read only up to its limit.
    let output = mnemo(&store, &["--pipeline", "/dev/zero", "stats"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("/dev/zero") && stderr.contains("the limit for a pipeline spec"), "{stderr}");
}

/// A path that cannot be read twice (`<(cat file)`, a FIFO) imports as standard input does: it is
/// spooled first, and importing it again appends nothing.
#[test]
fn a_pipe_imports_like_standard_input_and_again_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let import = || {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(r#""$0" --store "$1" import <(cat "$2")"#)
            .args([MNEMO, store.to_str().unwrap(), SAMPLE])
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let first = import();
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(text(&first.stdout).contains("imported 23 records"), "{}", text(&first.stdout));
    let head_after_first = head(&store);
    let again = import();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("nothing appended"), "{}", text(&again.stdout));
    assert_eq!(head(&store), head_after_first);
    // The spooled copy has no name: nothing of it is left in the store directory.
    let left: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".import-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A Claude Code session and a Codex rollout started in a repository's sub-folders are recorded in
/// the repository's workspace; a `cwd` that does not exist here is normalised as written.
#[test]
fn an_import_records_the_workspace_of_the_sessions_directory() {
    let dir = tempfile::tempdir().unwrap();
    let temp = std::fs::canonicalize(dir.path()).unwrap();
    let root = temp.join("repo");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("src/module")).unwrap();
    let claude = std::fs::read_to_string(real("incremental-simple/turn-1.jsonl")).unwrap();
    let claude = claude
        .replace("/Users/User/repo/codemie-ai/codemie-code", &format!("{}/src/module/", root.display()));
    let codex = std::fs::read_to_string(written("codex-rollout.jsonl")).unwrap();
    let codex = codex.replace("/home/dana/src/ledger-sync", "/home/dana/src/ledger-sync/./");
    let (claude_file, codex_file) = (temp.join("claude.jsonl"), temp.join("rollout.jsonl"));
    std::fs::write(&claude_file, claude).unwrap();
    std::fs::write(&codex_file, codex).unwrap();
    let store = temp.join("store");
    let imported = mnemo(&store, &["import", claude_file.to_str().unwrap(), codex_file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    let sessions = ok_json(&mnemo(&store, &["--json", "sessions"]));
    let mut workspaces: Vec<&str> =
        sessions.as_array().unwrap().iter().map(|s| s["workspace"].as_str().unwrap()).collect();
    let mut expected = ["/home/dana/src/ledger-sync", root.to_str().unwrap()];
    workspaces.sort_unstable();
    expected.sort_unstable();
    assert_eq!(workspaces, expected);
}
