//! `mnemo memory ...` and `mnemo recall` as a process: results, `--json`, idempotent retries
//! and exit codes (0 ok, 1 nothing found, 2 input error, 3 conflict).
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::path::Path;

use support::{mnemo, ok_json};

const TRANSCRIPT: &str = r#"{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"Our project uses fjall for storage. I prefer tabs over spaces in every project."}]}
{"session":"s1","turn":"t2","role":"user","parts":[{"type":"text","text":"Remember that I never use unwrap in library code."}]}
"#;

#[test]
fn remember_search_lifecycle_and_recall() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, TRANSCRIPT).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());

    let remembered = ok_json(&mnemo(&store, &["--json", "memory", "remember", "s1"]));
    assert_eq!(remembered["status"], "remembered");
    assert_eq!(remembered["items"][0]["content"], "The user never uses unwrap in library code.");
    assert_eq!(remembered["items"][0]["requested"], true);
    let id = remembered["items"][0]["item"].as_str().unwrap().to_owned();

    let found = ok_json(&mnemo(&store, &["--json", "memory", "search", "fjall", "--workspace", "acme/api"]));
    assert_eq!(found.as_array().unwrap().len(), 1);
    let elsewhere = mnemo(&store, &["--json", "memory", "search", "fjall", "--workspace", "other/ws"]);
    assert_eq!(elsewhere.status.code(), Some(1), "nothing found");

    let archive = ["--json", "memory", "archive", id.as_str(), "--expected-version", "1", "--op", "a1"];
    assert_eq!(ok_json(&mnemo(&store, &archive))["replayed"], false);
    assert_eq!(ok_json(&mnemo(&store, &archive))["replayed"], true);
    let stale = mnemo(&store, &["memory", "archive", &id, "--expected-version", "1", "--op", "a2"]);
    assert_eq!(stale.status.code(), Some(3), "a version conflict");
    assert_eq!(
        mnemo(&store, &["memory", "search", "unwrap", "--workspace", "acme/api"]).status.code(),
        Some(1)
    );
    assert!(
        mnemo(&store, &["memory", "search", "unwrap", "--workspace", "acme/api", "--include-archived"])
            .status
            .success()
    );
    let restored = ok_json(&mnemo(&store, &["--json", "memory", "restore", &id, "--expected-version", "2"]));
    assert_eq!(restored["results"][0]["version"], 3);
    let updated = ok_json(&mnemo(
        &store,
        &["--json", "memory", "update", &id, "--expected-version", "3", "--key", "Rust style"],
    ));
    assert_eq!(updated["results"][0]["outcome"], "updated");
    assert_eq!(
        ok_json(&mnemo(&store, &["--json", "memory", "get", &id]))["fields"]["keys"][0]["key"],
        "Rust style"
    );
    assert_eq!(mnemo(&store, &["memory", "get", "mem_missing"]).status.code(), Some(1));
    assert_eq!(mnemo(&store, &["memory", "search", "a\u{200B}b"]).status.code(), Some(2), "an input error");

    let recalled =
        ok_json(&mnemo(&store, &["--json", "recall", "s1", "--query", "which storage engine, fjall?"]));
    assert!(recalled[0]["content"].as_str().unwrap().contains("fjall"));
    let block = ok_json(&mnemo(&store, &["--json", "recall", "s1"]));
    assert!(block["tokens"].as_u64().unwrap() > 0);
    assert!(mnemo(&store, &["verify"]).status.success());
}

#[test]
fn memory_list_filters_by_workspace_kind_and_lifecycle_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, TRANSCRIPT).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());
    assert_eq!(mnemo(&store, &["memory", "list"]).status.code(), Some(1), "nothing yet");
    let remembered = ok_json(&mnemo(&store, &["--json", "memory", "remember", "s1"]));
    assert_eq!(remembered["status"], "remembered");
    let extracted = mnemo(&store, &["memory", "extract", "s1"]);
    assert_eq!(extracted.status.code(), Some(1), "remember already read the session");
    let text = String::from_utf8_lossy(&extracted.stdout).into_owned();
    assert!(text.starts_with("not run: nothing new to process"), "{text}");

    let all = ok_json(&mnemo(&store, &["--json", "memory", "list"]));
    let contents: Vec<&str> =
        all.as_array().unwrap().iter().map(|i| i["fields"]["content"].as_str().unwrap()).collect();
    assert_eq!(contents.len(), 3, "{contents:?}");
    assert_eq!(contents[0], "The user prefers tabs over spaces in every project.", "global items first");
    let mut here: Vec<&str> = contents[1..].to_vec();
    here.sort_unstable();
    assert_eq!(
        here,
        ["The team's project uses fjall for storage.", "The user never uses unwrap in library code."]
    );
    let preferences = ok_json(&mnemo(&store, &["--json", "memory", "list", "--kind", "preference"]));
    assert_eq!(preferences.as_array().unwrap().len(), 2);
    let here = ok_json(&mnemo(&store, &["--json", "memory", "list", "--workspace", "acme/api"]));
    assert_eq!(here.as_array().unwrap().len(), 3);
    let elsewhere = ok_json(&mnemo(&store, &["--json", "memory", "list", "--workspace", "other/ws"]));
    assert_eq!(elsewhere.as_array().unwrap().len(), 1, "global items only");

    let listed = mnemo(&store, &["memory", "list", "--kind", "context"]);
    let text = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(text.contains("active  context  workspace:acme/api") && text.contains("fjall"), "{text}");
    assert!(text.contains("sources: 1 event(s) in s1"), "{text}");

    let id = contents_id(&all, "fjall");
    assert!(mnemo(&store, &["memory", "archive", &id, "--expected-version", "1"]).status.success());
    assert_eq!(ok_json(&mnemo(&store, &["--json", "memory", "list"])).as_array().unwrap().len(), 2);
    let with_archived = ok_json(&mnemo(&store, &["--json", "memory", "list", "--include-archived"]));
    assert_eq!(with_archived.as_array().unwrap().len(), 3);

    let bad = mnemo(&store, &["memory", "list", "--kind", "opinion"]);
    assert_eq!(bad.status.code(), Some(2), "an input error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown kind \"opinion\""));
    assert_eq!(mnemo(&store, &["memory", "list", "--limit", "0"]).status.code(), Some(2));
}

/// `(item, content, kind, scope)` of each item, sorted: of a remember answer's `items` or of
/// `memory list --json`.
fn rows(items: &serde_json::Value, fields: &str) -> Vec<[String; 4]> {
    let text = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
    let mut out: Vec<[String; 4]> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let f = if fields.is_empty() { i } else { &i[fields] };
            [text(&i["item"]), text(&f["content"]), text(&f["kind"]), text(&f["scope"])]
        })
        .collect();
    out.sort();
    out
}

#[test]
fn remember_answers_exactly_what_memory_list_then_holds() {
    // Before: "I like turtles" answered "not_applicable" while a global preference was stored, and
    // of two instructions in one request the answer named only the first.
    let transcript = r#"{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"I like turtles"}]}
{"kind":"session","session":"s2","workspace":"acme/api","title":"t"}
{"session":"s2","turn":"t1","role":"user","parts":[{"type":"text","text":"Remember: never force-push to main; always open a PR"}]}
"#;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());

    let remark = mnemo(&store, &["memory", "remember", "s1"]);
    assert_eq!(
        String::from_utf8_lossy(&remark.stdout),
        "Stored 1 item:\n- The user likes turtles. (preference, workspace acme/api)\n"
    );
    let listed = ok_json(&mnemo(&store, &["--json", "memory", "list"]));
    let answered = ok_json(&mnemo(&store, &["--json", "memory", "remember", "s1"]));
    assert_eq!(answered["status"], "remembered", "a replay answers the same");
    assert_eq!(rows(&answered["items"], ""), rows(&listed, "fields"));

    let said = mnemo(&store, &["memory", "remember", "s2"]);
    assert_eq!(
        String::from_utf8_lossy(&said.stdout),
        "Remembered 2 items:\n- Never force-push to main. (preference, workspace acme/api)\n\
         - Always open a PR. (preference, workspace acme/api)\n"
    );
    let rules = ok_json(&mnemo(&store, &["--json", "memory", "remember", "s2"]));
    let all = ok_json(&mnemo(&store, &["--json", "memory", "list"]));
    let mut both = rows(&answered["items"], "");
    both.extend(rows(&rules["items"], ""));
    both.sort();
    assert_eq!(both, rows(&all, "fields"), "the answers list every stored item, and only those");
    let elsewhere = mnemo(&store, &["--json", "memory", "list", "--workspace", "other/ws"]);
    assert_eq!(elsewhere.status.code(), Some(1), "nothing reaches another project");
}

#[test]
fn remember_of_nothing_to_keep_says_why_and_what_to_do() {
    let transcript = r#"{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"hello there"}]}
"#;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());
    let said = mnemo(&store, &["memory", "remember", "s1"]);
    assert_eq!(said.status.code(), Some(1), "nothing stored");
    let text = String::from_utf8_lossy(&said.stdout);
    assert!(
        text.starts_with("Nothing was stored: nothing in the request reads as a fact, a preference or a standing instruction")
            && text.contains("for example \"remember that"),
        "{text}"
    );
    let json = mnemo(&store, &["--json", "memory", "remember", "s1"]);
    let answer: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (answer["status"].as_str(), answer["reason"].as_str(), answer["items"].as_array().map(Vec::len)),
        (Some("not_applicable"), Some("nothing_to_keep"), Some(0))
    );
}

fn contents_id(list: &serde_json::Value, needle: &str) -> String {
    let item =
        list.as_array().unwrap().iter().find(|i| i["fields"]["content"].as_str().unwrap().contains(needle));
    item.unwrap()["item"].as_str().unwrap().to_owned()
}

#[test]
fn eval_recall_reports_hits_per_category_over_the_development_set() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recall");
    let sessions = fixtures.join("sessions.jsonl");
    assert!(mnemo(&store, &["import", sessions.to_str().unwrap()]).status.success());
    for session in ["s1", "s2", "s3", "s4", "s5"] {
        assert!(mnemo(&store, &["memory", "extract", session]).status.success());
    }
    let qa = fixtures.join("qa.jsonl");
    let report =
        ok_json(&mnemo(&store, &["--json", "eval", "recall", "--qa", qa.to_str().unwrap(), "--k", "1,5,10"]));
    assert_eq!(report["overall"]["questions"], 6);
    let category =
        |name: &str, metric: &str, k: &str| report["categories"][name][metric][k].as_f64().unwrap();
    assert_eq!(category("standing", "hit", "5"), 1.0, "{report:#}");
    assert_eq!(category("standing", "recall_all", "5"), 1.0, "{report:#}");
    // The relevant item comes after the session's six standing facts (rank 7), inside the block.
    assert_eq!(category("relevant", "hit", "10"), 1.0, "{report:#}");
    assert_eq!(category("pull", "hit", "1"), 1.0, "{report:#}");
    assert_eq!(category("other-workspace", "hit", "5"), 0.0, "another workspace's item is never recalled");
    assert_eq!(report["missed"], serde_json::json!(["q5"]));
    let text = mnemo(&store, &["eval", "recall", "--qa", qa.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("hit@10"));
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\":\"x\",\"session\":\"s1\",\"expected\":[]}\n").unwrap();
    let refused = mnemo(&store, &["eval", "recall", "--qa", bad.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("line 1"));
}

#[test]
fn extract_all_runs_every_session_and_says_why_one_is_not_run() {
    // Sessions captured from earlier work (`mnemo sync`) were extracted only one `memory extract
    // SESSION` at a time. Two sessions with facts, and an incognito one memory may not read.
    let transcript = r#"{"kind":"session","session":"a","workspace":"acme/api","title":"a"}
{"session":"a","turn":"t1","role":"user","parts":[{"type":"text","text":"Our project uses fjall for storage."}]}
{"kind":"session","session":"b","workspace":"acme/web","title":"b"}
{"session":"b","turn":"t1","role":"user","parts":[{"type":"text","text":"I prefer tabs over spaces."}]}
{"kind":"session","session":"c","workspace":"acme/web","title":"c","incognito":true}
{"session":"c","turn":"t1","role":"user","parts":[{"type":"text","text":"I prefer vim over emacs."}]}
"#;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, transcript).unwrap();
    let imported = mnemo(&store, &["import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));

    let output = mnemo(&store, &["memory", "extract", "--all"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (session, outcome) in [("a", "committed"), ("b", "committed"), ("c", "not run: incognito")] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{session}  {outcome}"))),
            "{session}: {outcome} in {text}"
        );
    }
    let items = ok_json(&mnemo(&store, &["--json", "memory", "list"]));
    let contents: Vec<&str> =
        items.as_array().unwrap().iter().map(|i| i["fields"]["content"].as_str().unwrap()).collect();
    assert!(contents.iter().any(|c| c.contains("fjall")), "{contents:?}");
    assert!(contents.iter().any(|c| c.contains("tabs")), "{contents:?}");
    assert!(!contents.iter().any(|c| c.contains("vim")), "the incognito session was read: {contents:?}");

    // Again: nothing new anywhere, and `--json` is one entry per session.
    let again = ok_json(&mnemo(&store, &["--json", "memory", "extract", "--all"]));
    let sessions: Vec<&str> =
        again.as_array().unwrap().iter().map(|e| e["session"].as_str().unwrap()).collect();
    assert_eq!(sessions.len(), 3, "{again}");
    // A session or `--all`, not both and not neither.
    assert_eq!(mnemo(&store, &["memory", "extract"]).status.code(), Some(2));
    assert_eq!(mnemo(&store, &["memory", "extract", "a", "--all"]).status.code(), Some(2));
}

#[test]
fn memory_status_shows_each_session_extraction_has_yet_to_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("t.jsonl");
    let incognito = r#"{"kind":"session","session":"s2","workspace":"acme/api","incognito":true}
{"session":"s2","turn":"t1","role":"user","parts":[{"type":"text","text":"I prefer spaces."}]}
"#;
    std::fs::write(&file, format!("{TRANSCRIPT}{incognito}")).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());

    let text = support::stdout(&mnemo(&store, &["memory", "status"]));
    assert!(text.starts_with("pending: 1 session(s), 2 event(s) not yet extracted\n"), "{text}");
    assert!(text.contains("  s1  2 event(s) pending (extracted through 0 of 2)\n"), "{text}");
    assert!(
        text.contains("  s2  1 event(s) pending (extracted through 0 of 1); not extracted: incognito\n"),
        "{text}"
    );
    let status = ok_json(&mnemo(&store, &["--json", "memory", "status"]));
    let pending = status["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 2, "{status:#}");

    assert!(mnemo(&store, &["memory", "extract", "s1"]).status.success());
    let status = ok_json(&mnemo(&store, &["--json", "memory", "status"]));
    let sessions: Vec<&str> =
        status["pending"].as_array().unwrap().iter().map(|p| p["session"].as_str().unwrap()).collect();
    assert_eq!(sessions, ["s2"], "{status:#}");
    // A store opened by this command alone ran no extraction of its own.
    assert_eq!(status["last"], serde_json::json!([]));
}

const FACTS: &str = r#"{"kind":"session","session":"f1","workspace":"acme/api","title":"t"}
{"session":"f1","turn":"t1","role":"user","parts":[{"type":"text","text":"Our staging database is stage-db-02."}]}
{"session":"f1","turn":"t2","role":"user","parts":[{"type":"text","text":"I prefer tabs over spaces."}]}
{"kind":"session","session":"f2","workspace":"acme/api","title":"t"}
{"session":"f2","turn":"t1","role":"user","parts":[{"type":"text","text":"We moved the staging database, it is now stage-db-03."}]}
{"session":"f2","turn":"t2","role":"user","parts":[{"type":"text","text":"I prefer tabs over spaces!"}]}
"#;

#[test]
fn history_why_and_unmerge_of_facts_said_in_two_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("f.jsonl");
    std::fs::write(&file, FACTS).unwrap();
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());
    assert!(mnemo(&store, &["memory", "extract", "f1"]).status.success());
    assert!(mnemo(&store, &["memory", "extract", "f2"]).status.success());

    let active = ok_json(&mnemo(&store, &["--json", "memory", "list"]));
    let current = contents_id(&active, "stage-db-03");
    let history = ok_json(&mnemo(&store, &["--json", "memory", "history", &current]));
    let values: Vec<(&str, bool)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["item"]["fields"]["content"].as_str().unwrap(), h["current"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        values,
        [
            ("The team's staging database is stage-db-02.", false),
            ("The team's staging database is stage-db-03.", true)
        ]
    );
    let text = mnemo(&store, &["memory", "history", &current]);
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(
        shown.contains("said at position") && shown.contains("in f1") && shown.contains("in f2"),
        "{shown}"
    );

    let tabs = contents_id(&active, "tabs");
    let why = mnemo(&store, &["memory", "why", &tabs]);
    let shown = String::from_utf8_lossy(&why.stdout);
    assert!(
        shown.contains("I prefer tabs over spaces.") && shown.contains("I prefer tabs over spaces!"),
        "{shown}"
    );
    assert!(shown.contains("merged"), "{shown}");

    let unmerged = ok_json(&mnemo(&store, &["--json", "memory", "unmerge", &tabs, "--op", "u1"]));
    assert_eq!(unmerged["results"].as_array().unwrap().len(), 2);
    let after = ok_json(&mnemo(&store, &["--json", "memory", "list"]));
    let tabs_items = after
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["fields"]["content"].as_str().unwrap().contains("tabs"));
    assert_eq!(tabs_items.count(), 2, "both items are back");
    assert_eq!(
        mnemo(&store, &["memory", "unmerge", &tabs, "--op", "u2"]).status.code(),
        Some(3),
        "nothing left to undo"
    );
    assert_eq!(mnemo(&store, &["memory", "why", "mem_missing"]).status.code(), Some(1));
    assert!(mnemo(&store, &["verify"]).status.success());
}
