//! The bad-input corpus (`tests/bad-input/` at the workspace root, plus the cases too big to check
//! in, generated here): each input is imported through the facade and through the CLI into a store
//! that already holds a session. Each must fail with a clear input error naming the file, the line
//! and what is wrong, append nothing, and leave every stage's digest as it was.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::path::{Path, PathBuf};

use mnemo::records::Position;
use mnemo::{Config, ErrorCategory, Mnemo};

use support::{SAMPLE, mnemo};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/bad-input");
/// The record limit, restated so that a change to it shows up here.
const RECORD_BYTES_MAX: usize = 4 * 1024 * 1024;
const HUNDRED_MIB: usize = 100 * 1024 * 1024;

/// A checked-in case: file name, the line the error must name, and words the message must hold.
const CHECKED_IN: &[(&str, usize, &str)] = &[
    ("invalid-utf8.jsonl", 3, "not valid UTF-8"),
    ("deep-nesting.jsonl", 3, "recursion limit exceeded"),
    ("nan-timestamp.jsonl", 3, "not valid JSON"),
    ("negative-timestamp.jsonl", 3, "field `ts`: invalid value: integer `-1`"),
    ("overflowing-timestamp.jsonl", 3, "field `ts`: invalid type: floating point"),
    ("timestamp-beyond-year-9999.jsonl", 3, "field `ts`: 253402300800000 is beyond the year 9999"),
    ("fractional-timestamp.jsonl", 3, "field `ts`: invalid type: floating point"),
    ("infinite-timestamp.jsonl", 3, "not valid JSON: number out of range"),
    ("duplicate-event-ids.jsonl", 4, "field `id`: event id e-dup is used by an earlier line"),
    ("duplicate-json-key.jsonl", 3, "not valid JSON: duplicate key \"text\" in an object"),
    (
        "tool-result-without-call.jsonl",
        3,
        "tool result for c9, which no earlier tool call in this session made",
    ),
    ("turn-end-before-any-event.jsonl", 2, "field `turn`: turn t1 of session bad-1 has no events above"),
    ("unknown-role.jsonl", 3, "field `role`: unknown variant `assistant`"),
    ("empty.jsonl", 1, "the file holds no records"),
    ("blank-lines-only.jsonl", 3, "the file holds no records"),
    ("bad-line-in-second-session.jsonl", 5, "field `parts`: must hold at least one part"),
    ("unknown-field.jsonl", 3, "unknown field `extra`"),
    ("not-an-object.jsonl", 3, "a line must be a JSON object"),
    ("truncated-json.jsonl", 3, "not valid JSON: EOF while parsing"),
    ("control-character-in-id.jsonl", 3, "field `session`"),
];

/// Every case, the generated ones included: (name, bytes, line, words).
fn corpus() -> Vec<(String, Vec<u8>, usize, String)> {
    let mut cases: Vec<(String, Vec<u8>, usize, String)> = CHECKED_IN
        .iter()
        .map(|(name, line, words)| {
            let bytes = std::fs::read(Path::new(CORPUS).join(name)).unwrap();
            ((*name).to_owned(), bytes, *line, (*words).to_owned())
        })
        .collect();
    let listed: Vec<String> = std::fs::read_dir(CORPUS)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .collect();
    for name in &listed {
        assert!(cases.iter().any(|(n, ..)| n == name), "{name} is in the corpus but no case checks it");
    }
    cases.push((
        "line-over-record-limit.jsonl".to_owned(),
        good_head_then(&text_line(RECORD_BYTES_MAX + 1)),
        3,
        format!("line is {} bytes, the limit is {RECORD_BYTES_MAX}", RECORD_BYTES_MAX + 1),
    ));
    cases.push((
        "record-over-limit-once-encoded.jsonl".to_owned(),
        good_head_then(&text_line(RECORD_BYTES_MAX)),
        3,
        "the limit is 4194304".to_owned(),
    ));
    let mut single = vec![b'{'; 1];
    single.extend(std::iter::repeat_n(b' ', HUNDRED_MIB - 2));
    single.push(b'}');
    cases.push((
        "single-line-100-mib.jsonl".to_owned(),
        single,
        1,
        format!("line is {HUNDRED_MIB} bytes, the limit is {RECORD_BYTES_MAX}"),
    ));
    cases
}

/// The two valid lines every checked-in case starts with, then `line`.
fn good_head_then(line: &str) -> Vec<u8> {
    let mut bytes = concat!(
        r#"{"kind":"session","session":"bad-1","workspace":"w-bad"}"#,
        "\n",
        r#"{"session":"bad-1","turn":"t1","role":"user","ts":1767225600000,"parts":[{"type":"text","text":"hello"}]}"#,
        "\n"
    )
    .as_bytes()
    .to_vec();
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    bytes
}

/// A model text event line of exactly `bytes` bytes.
fn text_line(bytes: usize) -> String {
    let open = r#"{"session":"bad-1","turn":"t1","role":"model","parts":[{"type":"text","text":""#;
    let close = r#""}]}"#;
    format!("{open}{}{close}", "a".repeat(bytes - open.len() - close.len()))
}

/// What must not change: the log head and every stage's digest.
fn fingerprint(mnemo: &Mnemo) -> (Position, Vec<(String, String)>) {
    mnemo.catch_up().unwrap();
    let stats = mnemo.stats().unwrap();
    (stats.head, stats.stages.into_iter().map(|s| (s.name, s.digest)).collect())
}

#[test]
fn every_bad_input_fails_clearly_through_the_facade_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import_transcript(&std::fs::read(SAMPLE).unwrap(), "sample.jsonl").unwrap();
    let before = fingerprint(&mnemo);
    let mut tried = 0;
    for (name, bytes, line, words) in corpus() {
        let error = mnemo.import_transcript(&bytes, &name).unwrap_err();
        let message = error.to_string();
        assert_eq!(error.category(), ErrorCategory::Input, "{name}: {message}");
        assert!(message.starts_with(&format!("{name}:{line}: ")), "{name}: names the wrong place: {message}");
        assert!(message.contains(&words), "{name}: expected {words:?} in {message:?}");
        assert!(message.len() < 512, "{name}: the message should be short, it is {} bytes", message.len());
        assert_eq!(fingerprint(&mnemo), before, "{name} changed the store");
        tried += 1;
    }
    // A file already imported appends nothing.
    let again = mnemo.import_transcript(&std::fs::read(SAMPLE).unwrap(), "again.jsonl").unwrap();
    assert_eq!((again.status, again.records), (mnemo::transcript::ImportStatus::AlreadyComplete, 0));
    assert_eq!(fingerprint(&mnemo), before);
    let verification = mnemo.verify(&mut |_| {}).unwrap();
    assert!(verification.ok(), "{verification:?}");
    eprintln!("{} bad inputs refused through the facade; the store is unchanged", tried + 1);
}

fn cli_fingerprint(store: &Path) -> serde_json::Value {
    let output = mnemo(store, &["stats", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    serde_json::json!({ "head": stats["head"], "stages": stats["stages"] })
}

#[test]
fn every_bad_input_fails_clearly_through_the_cli_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let import = mnemo(&store, &["import", SAMPLE]);
    assert_eq!(import.status.code(), Some(0), "{}", String::from_utf8_lossy(&import.stderr));
    let before = cli_fingerprint(&store);
    let files = dir.path().join("inputs");
    std::fs::create_dir(&files).unwrap();
    for (name, bytes, line, words) in corpus() {
        let path: PathBuf = files.join(&name);
        std::fs::write(&path, &bytes).unwrap();
        let path = path.to_str().unwrap();
        let output = mnemo(&store, &["import", path, "--json"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&format!("{path}:{line}: ")), "{name}: names the wrong place: {stderr}");
        assert!(stderr.contains(&words), "{name}: expected {words:?} in {stderr:?}");
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(json["error"]["kind"], "input", "{name}");
        assert_eq!(cli_fingerprint(&store), before, "{name} changed the store");
        std::fs::remove_file(path).unwrap();
    }
    let verify = mnemo(&store, &["verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stderr));
}

/// Regression: a session whose records are each within the record limit but together exceed one
/// append's byte limit used to be appended in part (earlier sessions of the file included) before
/// the append limit refused a chunk. Now the file imports whole.
#[test]
fn a_session_larger_than_one_append_imports_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    let mut bytes = good_head_then(&text_line(RECORD_BYTES_MAX / 2));
    for _ in 0..9 {
        bytes.extend_from_slice(text_line(RECORD_BYTES_MAX / 2).as_bytes());
        bytes.push(b'\n');
    }
    let report = mnemo.import_transcript(&bytes, "big.jsonl").unwrap();
    assert_eq!(report.records, 12);
    assert_eq!(mnemo.log().head(), Position(12));
}
