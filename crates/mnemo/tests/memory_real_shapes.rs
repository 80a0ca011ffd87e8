//! Extraction on sessions in the exact shape Claude Code writes: beside an IDE, the open file and
//! the selected code come as text blocks of the user's own line (`<ide_opened_file>…`,
//! `<ide_selection>…`) before what the user typed; requests of several lines, with a pasted error
//! log. Held to what a user would accept as their memory: what they said, whole, scoped where it
//! holds, each pointing at the block they typed.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};

use mnemo::memory::ListRequest;
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory").join(name)
}

/// `kind/scope: content @ event` of every active item after importing the fixture `name` (one
/// session, `session`) into a fresh store and extracting it.
fn extracted(dir: &Path, name: &str, session: &str) -> Vec<String> {
    let mnemo = Mnemo::open(dir, Config::default()).unwrap();
    let bytes = std::fs::read(fixture(name)).unwrap();
    mnemo.import(&bytes, name, ImportFormat::ClaudeCode).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let found = mnemo.history().sessions().unwrap().into_iter().next().unwrap().session;
    assert_eq!(found.as_str(), session);
    rt.block_on(mnemo.memory().extract(&found, None)).unwrap();
    let mut items: Vec<String> = mnemo
        .memory()
        .list(&ListRequest::default())
        .unwrap()
        .iter()
        .map(|i| {
            let scope = i.fields.scope.as_text();
            let events: Vec<&str> = i.fields.sources.iter().map(|s| s.event.as_str()).collect();
            format!("{:?}/{scope}: {} @ {}", i.fields.kind, i.fields.content, events.join(","))
        })
        .collect();
    items.sort();
    items
}

#[test]
fn an_ide_selection_beside_the_request_is_no_instruction_and_a_dotted_name_stays_whole() {
    // Before: the selected code's comment "connect() must be called before init()" became
    // "The user's instruction: ts: // connect() must be called before init() export function
    // init() {} This may or may not be related to the current task.", "we deploy with fly.io"
    // became "The team deploys with fly." (cut at the dot) as a global preference, and "never run
    // migrations by hand in production" was lost inside it.
    let dir = tempfile::tempdir().unwrap();
    let items = extracted(dir.path(), "claude-code-ide-blocks.jsonl", "a1b2c3d4-1111-4222-8333-944455556666");
    let first_request = "a1b2c3d4-0000-0000-0000-000000000001#1";
    let pnpm = "a1b2c3d4-0000-0000-0000-000000000007";
    let expected = [
        format!("Context/workspace:/home/dev/shop: The team deploys with fly.io. @ {first_request}"),
        // Which package manager is the project's choice: nothing in the words reaches further.
        format!("Preference/workspace:/home/dev/shop: The user prefers pnpm over npm. @ {pnpm}"),
        format!(
            "Preference/workspace:/home/dev/shop: The user's instruction: never run migrations by hand in production. @ {first_request}"
        ),
    ];
    assert_eq!(items, expected, "extracted: {items:#?}");
}

#[test]
fn lines_of_a_request_are_sentences_and_a_pasted_log_with_a_guess_is_no_instruction() {
    // Before: evidence joined the lines, so "fix the flaky test in api.test.ts / always run jest
    // with --runInBand / the project uses Node 20" gave nothing, and the pasted ECONNREFUSED log
    // with "it must be the database" under it became "The user's instruction: they get this error
    // when they run it: Error: connect ECONNREFUSED 127.0.0.1:5432 at TCPConnectWrap… it must be
    // the database." The GitHub token the user asked to remember is never stored.
    let dir = tempfile::tempdir().unwrap();
    let items =
        extracted(dir.path(), "claude-code-multiline-requests.jsonl", "c1b2c3d4-1111-4222-8333-944455556666");
    let event = |n: u32| format!("c1b2c3d4-0000-0000-0000-{n:012}");
    let expected = [
        format!("Context/workspace:/home/dev/api: The project uses Node 20. @ {}", event(1)),
        format!(
            "Context/workspace:/home/dev/api: The user's instruction: use docker compose up db instead of brew services. @ {}",
            event(7)
        ),
        format!("Identity/global: The user is a backend engineer. @ {}", event(9)),
        // Who the user is holds everywhere; what they work on is this workspace's.
        format!("Identity/workspace:/home/dev/api: The user works on the billing service. @ {}", event(9)),
        format!(
            "Preference/workspace:/home/dev/api: The user's instruction: always run jest with --runInBand. @ {}",
            event(1)
        ),
    ];
    assert_eq!(items, expected, "extracted: {items:#?}");
}

/// A Claude Code session file of `prompts` turns, each a user prompt and the assistant's reply, in
/// the shape Claude Code 2.1 writes them; prompt `special.0` reads `special.1`.
fn long_session(session: &str, prompts: usize, special: (usize, &str)) -> String {
    let mut lines = Vec::new();
    let mut parent = serde_json::Value::Null;
    for n in 0..prompts * 2 {
        let uuid = format!("e1b2c3d4-0000-0000-0000-{:012}", n + 1);
        let (i, user) = (n / 2, n % 2 == 0);
        let message = if user {
            let text = if i == special.0 {
                special.1.to_owned()
            } else {
                format!("now fix the failing test number {i} in src/module{i}.ts and rerun the suite")
            };
            serde_json::json!({"role": "user", "content": text})
        } else {
            serde_json::json!({"model": "claude-sonnet-4-5-20250929", "id": format!("msg_{n}"), "type": "message",
                "role": "assistant", "content": [{"type": "text", "text": "Done."}], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}})
        };
        let line = serde_json::json!({"parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": "/home/dev/long", "sessionId": session, "version": "2.1.7", "gitBranch": "main",
            "type": if user { "user" } else { "assistant" }, "message": message, "uuid": uuid,
            "timestamp": format!("2026-01-23T{:02}:{:02}:{:02}.000Z", 10 + n / 3600, (n / 60) % 60, n % 60)});
        lines.push(line.to_string());
        parent = serde_json::Value::String(uuid);
    }
    lines.join("\n") + "\n"
}

#[test]
fn a_session_of_many_prompts_is_extracted_in_ranges_that_fit() {
    // Before: one range over all 150 prompts, whose evidence can never fit the model's 12,000
    // characters: "failed (evidence)", and every later call "the failed range waits for another
    // trigger"; no item, ever. The preference stated at prompt 141 is now an item.
    let dir = tempfile::tempdir().unwrap();
    let session = "e1b2c3d4-1111-4222-8333-944455556666";
    let file = long_session(session, 150, (140, "I prefer small commits with one change each"));
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import(file.as_bytes(), "long.jsonl", ImportFormat::ClaudeCode).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let id = mnemo.history().sessions().unwrap().into_iter().next().unwrap().session;
    assert_eq!(id.as_str(), session);
    let report = rt.block_on(mnemo.memory().extract(&id, None)).unwrap();
    assert!(matches!(report.outcome, mnemo::memory::ExtractionOutcome::Committed { .. }), "{report:?}");
    // 150 prompts in five ranges of at most 32: a proposal each, and a canonicalization for the
    // range that proposes the preference.
    assert_eq!(report.model_calls, 6, "{report:?}");
    assert_eq!(mnemo.memory().cursor(&id).unwrap(), 300, "every prompt and reply is covered");
    let items: Vec<String> = mnemo
        .memory()
        .list(&ListRequest::default())
        .unwrap()
        .iter()
        .map(|i| format!("{} @ {}", i.fields.content, i.fields.sources[0].event))
        .collect();
    assert_eq!(
        items,
        ["The user prefers small commits with one change each. @ e1b2c3d4-0000-0000-0000-000000000281"]
    );
}

#[test]
fn a_request_to_remember_at_the_end_of_a_long_session_is_remembered() {
    // Before: the remember range held all 150 prompts, could not fit and answered "unavailable:
    // the failed range waits for another trigger". Now the 149 turns before the request are
    // extracted first in ranges that fit, and the request's own range is its turn.
    let dir = tempfile::tempdir().unwrap();
    let session = "e1b2c3d4-1111-4222-8333-944455556666";
    let file = long_session(session, 150, (149, "remember that we deploy on Fridays only"));
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import(file.as_bytes(), "long.jsonl", ImportFormat::ClaudeCode).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let id = mnemo.history().sessions().unwrap().into_iter().next().unwrap().session;
    let result = rt.block_on(mnemo.memory().remember(&id, None)).unwrap();
    assert_eq!(result.status, mnemo::memory::RememberStatus::Remembered, "{result:?}");
    let items: Vec<String> = mnemo
        .memory()
        .list(&ListRequest::default())
        .unwrap()
        .iter()
        .map(|i| i.fields.content.clone())
        .collect();
    assert_eq!(items, ["The team deploys on Fridays only."]);
    assert_eq!(mnemo.memory().cursor(&id).unwrap(), 300);
}

/// The active items' contents, sorted.
fn contents(mnemo: &Mnemo) -> Vec<String> {
    let mut items: Vec<String> =
        mnemo.memory().list(&ListRequest::default()).unwrap().into_iter().map(|i| i.fields.content).collect();
    items.sort();
    items
}

#[test]
fn compact_then_extract_on_a_long_session_finds_what_extract_alone_finds() {
    // Before: the fold's extraction took all the folded prompts as one range, split it at most
    // once, failed (evidence) and then marked the range processed: "nothing new to process", no
    // item, where extract alone found the preference.
    let session = "e1b2c3d4-1111-4222-8333-944455556666";
    let file = long_session(session, 150, (20, "I prefer small commits with one change each"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let alone_dir = tempfile::tempdir().unwrap();
    let alone = Mnemo::open(alone_dir.path(), Config::default()).unwrap();
    alone.import(file.as_bytes(), "long.jsonl", ImportFormat::ClaudeCode).unwrap();
    let id = alone.history().sessions().unwrap().into_iter().next().unwrap().session;
    rt.block_on(alone.memory().extract(&id, None)).unwrap();
    let expected = contents(&alone);
    assert_eq!(expected, ["The user prefers small commits with one change each."]);

    let compacted_dir = tempfile::tempdir().unwrap();
    let compacted = Mnemo::open(compacted_dir.path(), Config::default()).unwrap();
    compacted.import(file.as_bytes(), "long.jsonl", ImportFormat::ClaudeCode).unwrap();
    let options = mnemo::compaction::CompactOptions::default();
    let outcome = rt.block_on(compacted.compaction().compact(&id, &options)).unwrap();
    assert!(outcome.recorded.is_some(), "the session was folded: {:?}", outcome.history.diagnostics);
    rt.block_on(compacted.memory().extract(&id, None)).unwrap();
    assert_eq!(contents(&compacted), expected);
    assert_eq!(compacted.memory().cursor(&id).unwrap(), 300, "every prompt and reply is covered");
}

#[test]
fn a_codex_prompt_in_the_message_of_its_environment_block_is_the_users() {
    // Before: a user message opening with Codex's `<environment_context>` (and the instructions
    // block) was taken whole as the host's, so what the user typed after it was never evidence and
    // a Codex session gave no item. Codex writes the prompt as a content part of that message, with
    // no `user_message` event when it writes none at all.
    let env = "<environment_context>\n  <cwd>/home/raj/work/ledger</cwd>\n  <shell>zsh</shell>\n</environment_context>";
    let agents = "# AGENTS.md instructions for /home/raj/work/ledger\n\n<INSTRUCTIONS>\nAlways run `make check`.\n</INSTRUCTIONS>";
    let lines = [
        serde_json::json!({"timestamp": "2026-08-19T10:00:00.000Z", "type": "session_meta", "payload": {
            "id": "019f0a11-2b3c-7d4e-8f50-6a7b8c9d0e1f", "timestamp": "2026-08-19T10:00:00.000Z",
            "cwd": "/home/raj/work/ledger", "originator": "codex_cli_rs", "cli_version": "0.148.0",
            "source": "cli", "model_provider": "openai"}}),
        serde_json::json!({"timestamp": "2026-08-19T10:00:01.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [
                {"type": "input_text", "text": agents},
                {"type": "input_text", "text": env},
                {"type": "input_text", "text": "Design first, no code yet. Never touch the vendor directory."}]}}),
        serde_json::json!({"timestamp": "2026-08-19T10:00:05.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Here is a design."}]}}),
        serde_json::json!({"timestamp": "2026-08-19T10:01:00.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [
                {"type": "input_text", "text": format!("{env}\nfyi our staging database is stage-db-02")}]}}),
    ];
    let bytes: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import(bytes.as_bytes(), "rollout.jsonl", ImportFormat::Codex).unwrap();
    let session = mnemo.history().sessions().unwrap().into_iter().next().unwrap().session;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(mnemo.memory().extract(&session, None)).unwrap();
    let mut items: Vec<String> =
        mnemo.memory().list(&ListRequest::default()).unwrap().into_iter().map(|i| i.fields.content).collect();
    items.sort();
    assert_eq!(
        items,
        [
            "The team's staging database is stage-db-02.",
            "The user's instruction: design first, no code yet.",
            "The user's instruction: never touch the vendor directory.",
        ],
        "the instructions block is Codex's, not the user's"
    );
}
