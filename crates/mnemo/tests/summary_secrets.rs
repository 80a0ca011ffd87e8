//! Secrets stay out of checkpoint summaries: the embedded extractive summarizer's and a host's
//! summaries pass through the shared redaction before they are recorded, and the faithfulness
//! check does not count a redaction as an unsupported claim.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::compaction::{
    CompactOptions, FinishReason, SummarizeError, Summarizer, SummarizerIdentity, SummaryRequest,
    SummaryResponse,
};
use mnemo::memory::BoxFuture;
use mnemo::records::{CheckpointRecord, Position, SessionId};
use mnemo::{Config, Mnemo};
use mnemo_core::CheckpointBody;
use mnemo_core::redaction::{REDACTED, redact_secrets};
use serde_json::json;

const SESSION: &str = "s-secrets";
/// The credentials the session holds; none may reach a recorded summary.
const SECRETS: [&str; 5] = ["hunter2", "S3cretPw", "sk-ant-api03-abcdefghijkl", "Tr0ub4dor", "swordfish"];

/// A session whose early turns hand the agent credentials in every shape the redaction knows.
fn transcript(turns: usize) -> String {
    let mut lines = vec![json!({"kind":"session","session":SESSION,"title":"db access"})];
    let first: [(&str, &str, &str); 4] = [
        (
            "Connect to the staging db. My password is swordfish; the api key is sk-ant-api03-abcdefghijkl.",
            "PGPASSWORD=hunter2 psql -h db.internal -U app -c 'select 1'",
            "?column?\n1\n(1 row)",
        ),
        (
            "Now dump the shop database from mysql.",
            "mysqldump -u root -pS3cretPw shop > shop.sql",
            "dump written to shop.sql",
        ),
        (
            "Log in to the registry too.",
            "docker login -u deploy --password Tr0ub4dor registry.internal",
            "Login Succeeded",
        ),
        ("Check the connection string works.", "psql postgres://app:hunter2@db.internal/app", "ok"),
    ];
    for i in 0..turns {
        let turn = format!("t{i:03}");
        let (ask, cmd, out) = first.get(i).copied().unwrap_or((
            "Continue with the next module and run the tests.",
            "cargo test -p app_module",
            "test result: ok. 12 passed",
        ));
        let padding = " the module keeps its state in a map and the tests cover every branch".repeat(6);
        lines.push(json!({"session":SESSION,"turn":turn,"role":"user","parts":[{"type":"text","text":ask}]}));
        lines.push(json!({"session":SESSION,"turn":turn,"role":"model","parts":[
            {"type":"text","text":format!("Running `{cmd}`.")},
            {"type":"tool_call","id":format!("c{i}"),"name":"shell","args":{"cmd":cmd}}]}));
        lines.push(json!({"session":SESSION,"turn":turn,"role":"tool","parts":[{"type":"tool_result",
            "id":format!("c{i}"),"name":"shell","result":format!("{out}{padding}")}]}));
        lines.push(json!({"session":SESSION,"turn":turn,"role":"model","parts":[
            {"type":"text","text":format!("Done: `{cmd}` printed {out:?}.")}]}));
        lines.push(json!({"kind":"turn_end","session":SESSION,"turn":turn,"status":"completed"}));
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

fn store(turns: usize) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        "[[stage]]\nname = \"session-catalog\"\n\n[[stage]]\nname = \"latest-checkpoint\"\n\n[stage.config]\nmax_history_tokens = 3000\n",
    )
    .unwrap();
    let mnemo =
        Mnemo::open(&dir.path().join("store"), Config { pipeline: Some(pipeline), ..Config::default() })
            .unwrap();
    mnemo.import_transcript(transcript(turns).as_bytes(), "secrets").unwrap();
    (dir, mnemo)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn compact(mnemo: &Mnemo, summarizer: Option<Arc<dyn Summarizer>>) -> CheckpointRecord {
    let options = CompactOptions { summarizer, ..CompactOptions::default() };
    let outcome = block_on(mnemo.compaction().compact(&SessionId::new(SESSION).unwrap(), &options)).unwrap();
    let recorded =
        outcome.recorded.unwrap_or_else(|| panic!("a checkpoint is recorded: {:?}", outcome.history));
    // What the log holds, not only what the call returned.
    let logged: Vec<CheckpointRecord> = mnemo
        .log_entries(Position(1), usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "checkpoint_recorded")
        .map(|e| serde_json::from_value(e.record).unwrap())
        .collect();
    assert_eq!(logged.last(), Some(&recorded.checkpoint));
    recorded.checkpoint
}

fn summary(checkpoint: &CheckpointRecord) -> &str {
    match &checkpoint.body {
        CheckpointBody::Text { summary, .. } => summary,
        other => panic!("a text checkpoint, not {other:?}"),
    }
}

fn assert_no_secret(checkpoint: &CheckpointRecord) {
    let recorded = serde_json::to_string(checkpoint).unwrap();
    for secret in SECRETS {
        assert!(!recorded.contains(secret), "{secret} recorded in the checkpoint:\n{}", summary(checkpoint));
    }
}

#[test]
fn the_extractive_summary_of_a_session_with_credentials_records_none_of_them() {
    let (_dir, mnemo) = store(12);
    let checkpoint = compact(&mnemo, None);
    assert_eq!(checkpoint.manifest.summarizer, "mnemo.extractive");
    let text = summary(&checkpoint);
    assert!(text.contains(REDACTED), "the summary kept the commands, redacted:\n{text}");
    assert_no_secret(&checkpoint);
    let report = checkpoint.faithfulness.clone().unwrap();
    assert!(report.checked > 0, "{report:?}");
    assert!(report.unsupported.iter().all(|claim| !claim.contains("redacted")), "{report:?}");
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}

/// A host's summarizer that repeats what it was told, credentials included.
#[derive(Debug)]
struct Careless;

const CARELESS: &str = "## Goal\nGive the agent access to the staging db and the shop dump.\n\n## Progress\n### Done\n\
- Ran `PGPASSWORD=hunter2 psql -h db.internal -U app -c 'select 1'`.\n\
- Ran `mysqldump -u root -pS3cretPw shop > shop.sql`.\n\
- The user said: my password is swordfish.\n\n## Next Steps\n1. Continue with the next module.\n\n\
## Critical Context\n- docker login -u deploy --password Tr0ub4dor registry.internal\n- sk-ant-api03-abcdefghijkl";

impl Summarizer for Careless {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: "careless".to_owned(), prompt_version: "1".to_owned() }
    }
    fn summarize<'a>(
        &'a self,
        _: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
        Box::pin(async { Ok(SummaryResponse { text: CARELESS.to_owned(), finish: FinishReason::Stop }) })
    }
}

#[test]
fn a_host_summary_repeating_credentials_is_recorded_redacted_and_still_faithful() {
    let (_dir, mnemo) = store(12);
    let checkpoint = compact(&mnemo, Some(Arc::new(Careless)));
    assert_no_secret(&checkpoint);
    assert_eq!(summary(&checkpoint), redact_secrets(CARELESS));
    let text = summary(&checkpoint);
    for kept in [
        "`PGPASSWORD=[redacted] psql -h db.internal -U app -c 'select 1'`",
        "`mysqldump -u root -p[redacted] shop > shop.sql`",
        "my password is [redacted].",
        "--password [redacted] registry.internal",
    ] {
        assert!(text.contains(kept), "{kept} in:\n{text}");
    }
    // The redacted commands are the commands the events ran: nothing is unsupported.
    let report = checkpoint.faithfulness.clone().unwrap();
    assert!(report.checked >= 2, "{report:?}");
    assert_eq!(report.unsupported, Vec::<String>::new());
}

#[test]
fn a_copy_does_not_carry_a_secret_from_a_summary_recorded_before_redaction() {
    let (_dir, mnemo) = store(3);
    let session = SessionId::new(SESSION).unwrap();
    let events: Vec<mnemo::records::RuntimeEvent> = mnemo
        .log_entries(Position(1), usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "runtime_event")
        .map(|e| serde_json::from_value(e.record).unwrap())
        .collect();
    // A checkpoint as one recorded before summaries were redacted: it holds the credentials.
    let old = mnemo_compaction::testing::build_text(&events[..5], CARELESS, None);
    let stream = mnemo::records::StreamId::session(&session);
    let appended = mnemo
        .append(
            &stream,
            mnemo::log::ExpectedRevision::Any,
            &[mnemo::records::Record::CheckpointRecorded(old)],
        )
        .unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();

    let report = mnemo.compaction().copy(&session, None, None).unwrap();
    assert_eq!(report.checkpoints_rebuilt, 1);
    let copied: Vec<CheckpointRecord> = mnemo
        .log_entries(appended.last_position, usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "checkpoint_recorded")
        .map(|e| serde_json::from_value(e.record).unwrap())
        .filter(|c: &CheckpointRecord| c.session == report.session)
        .collect();
    assert_eq!(copied.len(), 1);
    assert_no_secret(&copied[0]);
    assert_eq!(summary(&copied[0]), redact_secrets(CARELESS));
}
