//! Kill -9 between an extraction's proposal and its commit: nothing partial is left, and the
//! retry after reopening commits exactly once.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use mnemo::memory::RememberStatus;
use mnemo::records::{Position, SessionId};
use mnemo::{Config, Mnemo};

const TRANSCRIPT: &str = r#"{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"I prefer tabs over spaces."}]}
{"session":"s1","turn":"t2","role":"user","parts":[{"type":"text","text":"Remember that I never use unwrap in library code."}]}
"#;

fn memory_records(mnemo: &Mnemo) -> Vec<String> {
    mnemo
        .log_entries(Position(1), 1000)
        .unwrap()
        .into_iter()
        .filter(|e| e.stream.starts_with("memory/"))
        .map(|e| e.kind)
        .collect()
}

#[test]
fn killed_between_proposal_and_commit_then_retried_commits_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
        mnemo.import_transcript(TRANSCRIPT.as_bytes(), "t.jsonl").unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_memory-crash"))
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "canonicalizing", "the child reached the point between proposal and commit");
    child.kill().unwrap();
    child.wait().unwrap();

    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    assert!(memory_records(&mnemo).is_empty(), "nothing partial was written");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let session = SessionId::new("s1").unwrap();
    let first = runtime.block_on(mnemo.memory().remember(&session, None)).unwrap();
    assert_eq!(first.status, RememberStatus::Remembered);
    let second = runtime.block_on(mnemo.memory().remember(&session, None)).unwrap();
    assert_eq!(second, first);
    assert_eq!(memory_records(&mnemo), vec!["memory_commit".to_owned()], "exactly one commit");
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}
