//! A tool call's name is bounded (`TOOL_NAME_BYTES_MAX`): an import that exceeds it is refused
//! with the file, line, field and limit named, and nothing of the file is appended; appending such
//! an event directly is refused the same way.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use mnemo::log::ExpectedRevision;
use mnemo::records::{Record, SessionId, StreamId};
use mnemo::{Config, Mnemo};
use mnemo_core::limits::TOOL_NAME_BYTES_MAX;
use serde_json::json;

fn transcript(name: &str) -> String {
    let lines = [
        json!({"kind":"session","session":"s1","title":"tools"}),
        json!({"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"list the files"}]}),
        json!({"session":"s1","turn":"t1","role":"model","parts":[
            {"type":"tool_call","id":"c1","name":name,"args":{"cmd":"ls"}}]}),
        json!({"session":"s1","turn":"t1","role":"tool","parts":[
            {"type":"tool_result","id":"c1","name":name,"result":"a.txt","is_error":false}]}),
    ];
    lines.iter().map(|line| format!("{line}\n")).collect()
}

#[test]
fn an_unbounded_tool_call_name_is_refused_at_import_and_append() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(&dir.path().join("store"), Config::default()).unwrap();

    let long = "n".repeat(TOOL_NAME_BYTES_MAX + 1);
    let error = mnemo.import_transcript(transcript(&long).as_bytes(), "tools.jsonl").unwrap_err();
    let message = error.to_string();
    for part in ["tools.jsonl:3", "content.name", "is 257 bytes, the limit is 256 bytes"] {
        assert!(message.contains(part), "{part} in: {message}");
    }
    assert_eq!(error.category(), mnemo::ErrorCategory::Input);
    assert_eq!(mnemo.log().head().0, 0, "nothing of the file is appended");

    // At the limit, the same file imports.
    let at_limit = "n".repeat(TOOL_NAME_BYTES_MAX);
    mnemo.import_transcript(transcript(&at_limit).as_bytes(), "tools.jsonl").unwrap();

    // A host appending the event directly meets the same limit.
    let parsed = mnemo::transcript::parse_transcript(transcript(&at_limit).as_bytes(), "again").unwrap();
    let mut call = parsed.sessions[0].1.iter().map(|r| r.record.clone()).find(|r| {
        matches!(r, Record::RuntimeEvent(e) if matches!(e.content, Some(mnemo_core::Content::FunctionCall(_))))
    });
    let Some(Record::RuntimeEvent(event)) = &mut call else { panic!("a function call in {parsed:?}") };
    if let Some(mnemo_core::Content::FunctionCall(function)) = &mut event.content {
        function.name = long;
    }
    let stream = StreamId::session(&SessionId::new("s1").unwrap());
    let refused = mnemo.append(&stream, ExpectedRevision::Any, &[call.unwrap()]).unwrap_err().to_string();
    assert!(refused.contains("is 257 bytes, the limit is 256 bytes"), "{refused}");
}
