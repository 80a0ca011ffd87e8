//! `show`, `search` and `read` as a process: the tools' output shapes with `--json`, their error
//! shape with exit code 2, exit 1 for nothing found, and `--as-of`.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use support::{SAMPLE, code, json, mnemo};

const SESSION: &str = "sess-2026-01-05-auth";

fn imported() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    assert_eq!(code(&mnemo(&store, &["import", SAMPLE])), 0);
    (dir, store)
}

#[test]
fn show_prints_the_visible_transcript() {
    let (_dir, store) = imported();
    let show = mnemo(&store, &["show", SESSION, "--json"]);
    assert_eq!(code(&show), 0);
    let show = json(&show);
    assert_eq!(show["header"]["title"], "Fix the flaky token refresh test");
    let messages = show["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 19);
    assert!(messages.iter().all(|m| m["kind"] != "thinking"));
    let text = String::from_utf8(mnemo(&store, &["show", SESSION]).stdout).unwrap();
    assert!(text.contains("── turn t1") && text.contains("[tool call shell]"), "{text}");
    assert_eq!(code(&mnemo(&store, &["show", "no-such-session"])), 1);
    assert_eq!(code(&mnemo(&store, &["show", SESSION, "--as-of", "1", "--json"])), 0);
}

#[test]
fn search_prints_the_tool_shape_and_refusals_exit_2() {
    let (_dir, store) = imported();
    let found = mnemo(&store, &["search", "token clock", "--limit", "2", "--json"]);
    assert_eq!(code(&found), 0);
    let found = json(&found);
    assert_eq!(found["kind"], "history_search");
    assert_eq!(found["query"], "token clock");
    assert_eq!(found["rows"].as_array().unwrap().len(), 2);
    assert_eq!(found["rows"][0]["session_id"], SESSION);

    assert_eq!(code(&mnemo(&store, &["search", "zebraquokka", "--json"])), 1);

    for (args, reason) in [
        (&["search", "x", "--limit", "11", "--json"][..], "invalid_arguments"),
        (&["search", "x", "--limit", "0", "--json"], "invalid_arguments"),
        (&["search", "sk-ant-abcdefgh12345", "--json"], "invalid_query"),
        (&["search", "x", "--cursor", "bm90IGEgY3Vyc29y", "--json"], "invalid_query"),
    ] {
        let refused = mnemo(&store, args);
        assert_eq!(code(&refused), 2, "{args:?}");
        let refused = json(&refused);
        assert_eq!(refused["kind"], "history_search_error");
        assert_eq!(refused["ok"], false);
        assert_eq!(refused["reason"], reason, "{args:?}");
    }
    let incognito = mnemo(&store, &["search", "token", "--incognito", "--json"]);
    assert_eq!((code(&incognito), json(&incognito)["reason"].clone()), (2, "incognito_active".into()));
    assert_eq!(code(&mnemo(&store, &["search", "clock", "--json"])), 0);
    let before = mnemo(&store, &["search", "clock", "--as-of", "3", "--json"]);
    assert_eq!(code(&before), 1, "no message mentions a clock by position 3");
}

#[test]
fn read_prints_the_tool_shape_and_refusals_exit_2() {
    let (_dir, store) = imported();
    let read = mnemo(&store, &["read", SESSION, "--turn", "t1", "--before", "0", "--after", "0", "--json"]);
    assert_eq!(code(&read), 0);
    let read = json(&read);
    assert_eq!(read["kind"], "history_read");
    assert_eq!(read["anchor_turn_id"], "t1");
    assert_eq!(read["turns"].as_array().unwrap().len(), 1);
    assert_eq!(read["has_more_after"], true);
    let text = serde_json::to_string(&read).unwrap();
    assert!(
        !text.contains("read_file") && !text.contains("PASS [200/200]"),
        "tool names and results stay out"
    );

    for (args, reason) in [
        (&["read", SESSION, "--before", "4", "--json"][..], "invalid_arguments"),
        (&["read", "nope", "--json"], "session_not_found"),
        (&["read", SESSION, "--turn", "t9", "--json"], "turn_not_found"),
        (&["read", SESSION, "--message", "zzz", "--json"], "message_not_found"),
    ] {
        let refused = mnemo(&store, args);
        assert_eq!(code(&refused), 2, "{args:?}");
        let refused = json(&refused);
        assert_eq!(
            (refused["kind"].as_str(), refused["reason"].as_str()),
            (Some("history_read_error"), Some(reason))
        );
    }
    let current =
        mnemo(&store, &["read", SESSION, "--current-session", SESSION, "--current-turn", "t2", "--json"]);
    let current = json(&current);
    assert_eq!(current["is_current_session"], true);
    assert_eq!(current["turns"].as_array().unwrap().len(), 1, "the current turn is excluded");
}

/// A RuntimeEvent line of session `sd`, turn `t1`, with the envelope filled in.
fn maka_line(id: &str, ts: u64, rest: &str) -> String {
    format!(
        "{{\"id\":\"{id}\",\"invocationId\":\"i1\",\"runId\":\"r1\",\"sessionId\":\"sd\",\"turnId\":\"t1\",\"ts\":{ts},{rest}}}\n"
    )
}

#[test]
fn show_json_reports_projection_diagnostics_and_turn_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("events.jsonl");
    let base = 1_767_225_600_000u64;
    let lines = [
        maka_line(
            "u1",
            base,
            r#""partial":false,"role":"user","author":"user","content":{"kind":"text","text":"list the files"}"#,
        ),
        // The provider's call id and the runtime's tool-call ref disagree: a row, and a hard diagnostic.
        maka_line(
            "c1",
            base + 1,
            r#""partial":false,"role":"model","author":"agent","content":{"kind":"function_call","id":"call-1","name":"shell","args":{"cmd":"ls"}},"refs":{"toolCallId":"call-X"}"#,
        ),
        // A malformed tool result (no result): no row, a hard diagnostic.
        maka_line(
            "x1",
            base + 2,
            r#""partial":false,"role":"tool","author":"tool","content":{"kind":"function_response","id":"call-1","name":"shell","result":null}"#,
        ),
        maka_line(
            "w1",
            base + 3,
            r#""partial":false,"role":"tool","author":"tool","content":{"kind":"text","text":"stray tool text"}"#,
        ),
        maka_line(
            "er",
            base + 4,
            r#""partial":false,"role":"system","author":"system","content":{"kind":"error","message":"provider hiccup"}"#,
        ),
        maka_line(
            "cf",
            base + 5,
            r#""partial":false,"role":"system","author":"host","actions":{"stateDelta":{"x":1}}"#,
        ),
        maka_line(
            "p1",
            base + 6,
            r#""partial":true,"role":"model","author":"agent","content":{"kind":"text","text":"hel"},"refs":{"providerEventId":"m1"}"#,
        ),
        maka_line(
            "end",
            base + 7,
            r#""partial":false,"role":"system","author":"host","status":"failed","content":{"kind":"error","message":"too many steps","code":"tool_step_cap_reached"}"#,
        ),
    ];
    std::fs::write(&file, lines.concat()).unwrap();
    assert_eq!(code(&mnemo(&store, &["import", file.to_str().unwrap(), "--format", "maka"])), 0);
    let show = json(&mnemo(&store, &["show", "sd", "--json"]));
    let kinds: Vec<&str> =
        show["messages"].as_array().unwrap().iter().map(|m| m["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "tool_call"], "the null tool result is no row");
    let diagnostics: Vec<(&str, &str, &str)> = show["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (d["code"].as_str().unwrap(), d["severity"].as_str().unwrap(), d["event_id"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        diagnostics,
        [
            ("tool_use_id_mismatch", "hard", "c1"),
            ("incomplete_event", "hard", "x1"),
            ("unsupported_event", "hard", "w1"),
            ("unsupported_event", "hard", "er"),
            ("unclaimed_control_fact", "soft", "cf"),
            ("partial_skipped", "soft", "p1"),
        ]
    );
    let turns = show["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["status"], "failed");
    assert_eq!(turns[0]["error_class"], "tool_step_cap_reached");
    assert_eq!(turns[0]["step_limit"], true);
    let text = String::from_utf8(mnemo(&store, &["show", "sd"]).stdout).unwrap();
    assert!(text.contains("diagnostics: 4 hard, 2 soft"), "{text}");
    assert!(text.contains("ended failed (tool_step_cap_reached), stopped at the tool step limit"), "{text}");
    assert_eq!(code(&mnemo(&store, &["verify"])), 0, "diagnostics rebuild byte for byte");
}
