//! Transcript import through the facade: validation names the line and field and appends nothing,
//! and the same file always yields the same log.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::log::ManualClock;
use mnemo::records::Position;
use mnemo::{Config, ErrorCategory, Mnemo};

const GOOD: &str = r#"{"kind":"session","session":"s1","workspace":"w1","title":"Demo"}
{"session":"s1","turn":"t1","role":"user","ts":1767225600000,"parts":[{"type":"text","text":"list the files"}]}
{"session":"s1","turn":"t1","role":"model","parts":[{"type":"thinking","text":"use ls"},{"type":"tool_call","id":"c1","name":"shell","args":{"cmd":"ls"}}]}
{"session":"s1","turn":"t1","role":"tool","parts":[{"type":"tool_result","id":"c1","name":"shell","result":"a.txt\nb.txt","is_error":false}]}
{"session":"s1","turn":"t1","role":"model","parts":[{"type":"text","text":"Two files: a.txt and b.txt."}]}
{"session":"s1","turn":"t1","kind":"turn_end","status":"completed"}
"#;

fn open(dir: &std::path::Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn with_line_7(line: &str) -> String {
    format!("{GOOD}{line}\n")
}

#[test]
fn a_good_transcript_becomes_records_and_a_catalog_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let report = mnemo.import_transcript(GOOD.as_bytes(), "good.jsonl").unwrap();
    assert_eq!((report.lines, report.sessions, report.records), (6, 1, 7));
    assert_eq!(report.positions, Some((Position(1), Position(7))));
    let sessions = mnemo.history().sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].event_count, sessions[0].turn_count), (5, 1));
    assert_eq!(sessions[0].workspace.as_ref().map(ToString::to_string), Some("w1".to_owned()));
    assert_eq!(sessions[0].title.as_deref(), Some("Demo"));
}

#[test]
fn an_error_on_line_7_names_the_line_and_field_and_appends_nothing() {
    let cases = [
        (r#"{"kind":"session","session":"s2","incognito":"yes"}"#, "incognito", "invalid type"),
        (
            r#"{"session":"s2","turn":"t1","role":"user","parts":[{"type":"text","text":"x","colour":1}]}"#,
            "parts[0]",
            "unknown field `colour`",
        ),
        (
            r#"{"session":"s2","turn":"t1","role":"narrator","parts":[{"type":"text","text":"x"}]}"#,
            "role",
            "unknown variant `narrator`",
        ),
        (
            r#"{"session":"s2","turn":"t1","role":"tool","parts":[{"type":"tool_result","id":"c9","name":"shell","result":"x"}]}"#,
            "parts[0].id",
            "no earlier tool call",
        ),
        (
            r#"{"session":"s2","turn":"t9","kind":"turn_end","status":"completed"}"#,
            "turn",
            "has no events above",
        ),
        (
            r#"{"session":"s1","turn":"t1","role":"user","id":"dup","parts":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}"#,
            "",
            "",
        ),
        (
            r#"{"session":"","turn":"t1","role":"user","parts":[{"type":"text","text":"x"}]}"#,
            "session",
            "session id is empty",
        ),
        (
            r#"{"session":"s2","turn":"t1","role":"user","ts":-5,"parts":[{"type":"text","text":"x"}]}"#,
            "ts",
            "invalid value",
        ),
        (
            r#"{"session":"s2","turn":"t1","role":"user","ts":99999999999999999,"parts":[{"type":"text","text":"x"}]}"#,
            "ts",
            "beyond the year 9999",
        ),
        (r#"[1,2,3]"#, "", "must be a JSON object"),
        (r#"{"kind":"snapshot","session":"s2"}"#, "kind", "unknown kind"),
    ];
    for (line, field, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mnemo = open(dir.path());
        let text = with_line_7(line);
        let result = mnemo.import_transcript(text.as_bytes(), "bad.jsonl");
        if field.is_empty() && reason.is_empty() {
            // Two parts of one line with an explicit id get distinct ids: this line is fine.
            assert!(result.is_ok(), "{line}: {result:?}");
            continue;
        }
        let error = result.unwrap_err();
        let message = error.to_string();
        assert_eq!(error.category(), ErrorCategory::Input, "{message}");
        assert!(message.starts_with("bad.jsonl:7: "), "{line}: {message}");
        if !field.is_empty() {
            assert!(message.contains(&format!("field `{field}")), "{line}: {message}");
        }
        assert!(message.contains(reason), "{line}: {message}");
        assert_eq!(mnemo.log().head(), Position::ZERO, "{line}: something was appended");
    }
}

#[test]
fn bytes_that_are_not_text_or_not_records_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let mut bytes = GOOD.as_bytes().to_vec();
    bytes.extend_from_slice(b"{\"session\":\"s1\",\"turn\":\"t1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"\xff\"}]}\n");
    let message = mnemo.import_transcript(&bytes, "bin.jsonl").unwrap_err().to_string();
    assert!(message.starts_with("bin.jsonl:7: not valid UTF-8"), "{message}");
    let message = mnemo.import_transcript(b"", "empty.jsonl").unwrap_err().to_string();
    assert!(message.contains("holds no records"), "{message}");
    let message = mnemo.import_transcript(b"\n\n", "blank.jsonl").unwrap_err().to_string();
    assert!(message.contains("holds no records"), "{message}");
    assert_eq!(mnemo.log().head(), Position::ZERO);
}

#[test]
fn duplicate_event_ids_in_a_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let text = r#"{"session":"s1","turn":"t1","role":"user","id":"e1","parts":[{"type":"text","text":"a"}]}
{"session":"s1","turn":"t1","role":"user","id":"e1","parts":[{"type":"text","text":"b"}]}
"#;
    let message = mnemo.import_transcript(text.as_bytes(), "dup.jsonl").unwrap_err().to_string();
    assert!(
        message.starts_with("dup.jsonl:2: field `id`: event id e1 is used by an earlier line"),
        "{message}"
    );
    assert_eq!(mnemo.log().head(), Position::ZERO);
}

#[test]
fn the_same_file_yields_identical_logs_in_two_stores() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let envelopes = |dir: &std::path::Path| {
        let mnemo = open(dir);
        mnemo.import_transcript(GOOD.as_bytes(), "good.jsonl").unwrap();
        mnemo.log().scan(Position::FIRST).map(|e| e.unwrap().encode()).collect::<Vec<_>>()
    };
    let first = envelopes(one.path());
    assert_eq!(first.len(), 7);
    assert_eq!(first, envelopes(two.path()));
}

#[test]
fn importing_a_file_again_appends_only_its_sessions_the_store_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    mnemo.import_transcript(GOOD.as_bytes(), "good.jsonl").unwrap();
    let other = r#"{"session":"s3","turn":"t1","role":"user","parts":[{"type":"text","text":"new"}]}"#;
    let text = format!("{other}\n{GOOD}");
    let report = mnemo.import_transcript(text.as_bytes(), "again.jsonl").unwrap();
    assert_eq!(report.status, mnemo::transcript::ImportStatus::Resumed);
    assert_eq!((report.records, report.already, report.sessions), (1, 7, 1), "{report:?}");
    assert_eq!(mnemo.log().head(), Position(8), "only s3 was appended");
}

#[test]
fn a_json_key_repeated_in_a_line_of_any_format_is_refused_naming_the_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let claude = concat!(
        r#"{"type":"user","sessionId":"s-dup","uuid":"u1","timestamp":"2026-01-14T10:00:00Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"assistant","sessionId":"s-dup","uuid":"u2","uuid":"u3","timestamp":"2026-01-14T10:00:01Z","message":{"role":"assistant","content":[{"type":"text","text":"yo"}]}}"#,
        "\n"
    );
    let error =
        mnemo.import(claude.as_bytes(), "dup-key.jsonl", mnemo::ImportFormat::ClaudeCode).unwrap_err();
    let message = error.to_string();
    assert!(message.starts_with("dup-key.jsonl:2: "), "{message}");
    assert!(message.contains("duplicate key \"uuid\""), "{message}");
    assert_eq!(mnemo.log().head(), Position::ZERO);
}
