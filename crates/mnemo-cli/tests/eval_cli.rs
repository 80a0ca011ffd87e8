//! `mnemo eval search` as a process: metrics over a store and a QA file, workspace scoping, bad QA
//! files named with their line, and the development set's run; `mnemo eval memory`'s two halves;
//! `mnemo eval facts` over its generated fact-update sequences.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use support::{json, mnemo};

const CODING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/coding-session.jsonl");
const RESEARCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/research-session.jsonl");

#[test]
fn eval_search_reports_hits_per_category_for_each_ranker() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(mnemo(&store, &["import", CODING, RESEARCH]).status.code(), Some(0));
    let qa = dir.path().join("qa.jsonl");
    let lines = [
        // The flaky test is discussed in the first turn of the coding session.
        r#"{"id":"flaky","question":"refresh_after_expiry flaky","workspace":"acme/payments-api","evidence":[{"session":"sess-2026-01-05-auth","turn":"t1"}],"category":"single"}"#,
        // Asked in the other workspace, the coding session cannot be found.
        r#"{"id":"elsewhere","question":"refresh_after_expiry flaky","workspace":"acme/handbook","evidence":[{"session":"sess-2026-01-05-auth","turn":"t1"}],"category":"scoped"}"#,
    ];
    std::fs::write(&qa, lines.join("\n")).unwrap();
    let out = mnemo(&store, &["eval", "search", "--qa", qa.to_str().unwrap(), "--k", "1,10", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let rankers = report[0]["rankers"].as_array().unwrap();
    let names: Vec<&str> = rankers.iter().map(|r| r["ranker"].as_str().unwrap()).collect();
    assert_eq!(names, ["mnemo", "bm25"]);
    for ranker in rankers {
        assert_eq!(ranker["overall"]["questions"], 2);
        assert_eq!(ranker["categories"]["single"]["hit"]["10"], 1.0, "{ranker}");
        assert_eq!(ranker["categories"]["scoped"]["hit"]["10"], 0.0, "{ranker}");
        assert_eq!(ranker["missed"], serde_json::json!(["elsewhere"]));
    }
    let text =
        String::from_utf8(mnemo(&store, &["eval", "search", "--qa", qa.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("mnemo@10") && text.contains("bm25@10") && text.contains("single"), "{text}");
}

#[test]
fn a_bad_qa_file_is_an_input_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let qa = dir.path().join("qa.jsonl");
    std::fs::write(&qa, "{\"id\":\"a\",\"question\":\"x\",\"evidence\":[{\"session\":\"s\",\"turn\":\"t\"}]}\n{\"id\":\"b\"}\n")
        .unwrap();
    let out = mnemo(&store, &["eval", "search", "--qa", qa.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("qa.jsonl:2:") && stderr.contains("question"), "{stderr}");
    let out = mnemo(&store, &["eval", "search", "--qa", qa.to_str().unwrap(), "--k", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = mnemo(&store, &["eval", "search", "--qa", qa.to_str().unwrap(), "--ranker", "magic"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!store.exists() || std::fs::read_dir(&store).is_ok());
}

#[test]
fn the_development_set_reports_both_splits_and_three_rankers() {
    let dir = tempfile::tempdir().unwrap();
    let out = mnemo(
        &dir.path().join("unused"),
        &["eval", "search", "--devset", "--dir", dir.path().join("runs").to_str().unwrap(), "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let splits: Vec<&str> = report.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(splits, ["dev", "heldout"]);
    for split in report.as_array().unwrap() {
        let rankers: Vec<&str> =
            split["rankers"].as_array().unwrap().iter().map(|r| r["ranker"].as_str().unwrap()).collect();
        assert_eq!(rankers, ["mnemo", "before", "bm25"]);
        assert!(split["questions"].as_u64().unwrap() > 100);
    }
}

#[test]
fn eval_memory_reports_recall_and_precision_for_both_halves() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let out =
        mnemo(&dir.path().join("store"), &["eval", "memory", "--dir", runs.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json(&out);
    let halves: Vec<&str> = report.as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(halves, ["dev", "heldout"]);
    for half in report.as_array().unwrap() {
        let (facts, found) = (half["facts"].as_u64().unwrap(), half["found"].as_u64().unwrap());
        let (items, correct) = (half["items"].as_u64().unwrap(), half["correct"].as_u64().unwrap());
        assert!(facts >= 30 && found <= facts && correct <= items, "{half}");
        assert_eq!(half["missed"].as_array().unwrap().len() as u64, facts - found, "{half}");
        assert_eq!(half["wrong"].as_array().unwrap().len() as u64, items - correct, "{half}");
    }
    // Each session ran in a store of its own under --dir.
    assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 33);
}

#[test]
fn eval_facts_returns_the_current_value_of_generated_sequences_and_complete_histories() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = mnemo(&store, &["--json", "eval", "facts"]);
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let sequences = report["sequences"].as_u64().unwrap();
    assert!(sequences >= 200, "{report:#}");
    assert!(report["passing_mentions"].as_u64().unwrap() > 0 && report["changes_back"].as_u64().unwrap() > 0);
    assert!(report["current_value"].as_u64().unwrap() * 100 >= sequences * 95, "{report:#}");
    assert_eq!(report["history_complete"].as_u64(), Some(sequences), "{report:#}");
    assert!(!store.exists(), "the evaluation runs in a store of its own");
    let bad = mnemo(&store, &["eval", "facts", "--sequences", "0"]);
    assert_eq!(bad.status.code(), Some(2), "an input error");
}
