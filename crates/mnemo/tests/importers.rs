//! The importers on their fixtures: each format's records (as a compact rendering checked against
//! an expected snapshot), auto-detection, skipped line types, malformed lines naming their line,
//! and all-or-nothing appends.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use mnemo::log::ManualClock;
use mnemo::records::{Content, Position, Record};
use mnemo::transcript::{ImportFormat, parse_import};
use mnemo::{Config, Mnemo};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn open(dir: &std::path::Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

/// One line per record: its source line, kind and what it holds; then the skipped counts.
fn render(bytes: &[u8], format: ImportFormat) -> String {
    let parsed = parse_import(bytes, "fixture", format).unwrap();
    let mut out = format!("format {}\n", parsed.format);
    for (session, records) in &parsed.transcript.sessions {
        writeln!(out, "session {session}").unwrap();
        for r in records {
            let what = match &r.record {
                Record::SessionOpened(s) => format!(
                    "opened workspace={} title={}",
                    s.workspace.as_ref().map_or("-", |w| w.as_str()),
                    s.title.as_deref().unwrap_or("-")
                ),
                Record::RuntimeEvent(e) => {
                    let content = match &e.content {
                        Some(Content::Text(t)) => {
                            format!("text {:?}", t.text.chars().take(32).collect::<String>())
                        }
                        Some(Content::Thinking(t)) => format!("thinking signed={}", t.signature.is_some()),
                        Some(Content::FunctionCall(c)) => format!("call {} {}", c.id, c.name),
                        Some(Content::FunctionResponse(r)) => {
                            format!("result {} {} error={}", r.id, r.name, r.is_error == Some(true))
                        }
                        Some(_) => "other".to_owned(),
                        None => "no content".to_owned(),
                    };
                    format!("{} {:?}/{:?} {content}", e.turn_id, e.role, e.author)
                }
                Record::TurnEnded(t) => format!("turn_end {} {:?}", t.turn, t.status),
                other => format!("{:?}", other.kind()),
            };
            writeln!(out, "  L{} @{} {what}", r.line, r.timestamp.0).unwrap();
        }
    }
    for (what, count) in &parsed.skipped {
        writeln!(out, "skipped {count} × {what}").unwrap();
    }
    out
}

/// The fixture read as `format` and as `auto` gives the same records, rendered as `expect`.
fn check(name: &str, format: ImportFormat, expect: &str) {
    let bytes = fixture(name);
    let explicit = render(&bytes, format);
    assert_eq!(render(&bytes, ImportFormat::Auto), explicit, "auto-detection of {name}");
    assert_eq!(explicit.trim(), expect.trim(), "\n--- actual ---\n{explicit}");
}

/// Replaces line `number` (1-based) of a fixture.
fn with_line(bytes: &[u8], number: usize, line: &str) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[number - 1] = line;
    (lines.join("\n") + "\n").into_bytes()
}

/// The malformed fixture fails naming `line` and `needle`, and appends nothing to a store.
fn check_malformed(bytes: &[u8], format: ImportFormat, line: usize, needle: &str) {
    let error = parse_import(bytes, "bad.jsonl", format).unwrap_err();
    assert_eq!(error.line, line, "{error}");
    assert!(error.to_string().contains(needle), "{error} lacks {needle:?}");
    assert!(error.to_string().starts_with(&format!("bad.jsonl:{line}: ")), "{error}");
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    assert!(mnemo.import(bytes, "bad.jsonl", format).is_err());
    assert_eq!(mnemo.log().head(), Position(0), "a failed import appended something");
}

#[test]
fn codex_rollout() {
    check(
        "codex-rollout.jsonl",
        ImportFormat::Codex,
        "
format codex
session 0199a3f2-6c1e-7d40-9b8e-2f1c5e7a9d01
  L1 @1767794531408 opened workspace=/home/dana/src/ledger-sync title=-
  L2 @1767794531410 t1 System/Host text \"<environment_context>\\n  <cwd>/ho\"
  L3 @1767794539002 t1 User/User text \"The nightly sync job fails with \"
  L6 @1767794542731 t1 Model/Agent thinking signed=false
  L8 @1767794543114 t1 Model/Agent call call_Qx7n2kLm0aZ1 shell
  L9 @1767794543680 t1 Tool/Tool result call_Qx7n2kLm0aZ1 shell error=false
  L12 @1767794547440 t1 Model/Agent call call_Vb81pQe4sT9c apply_patch
  L13 @1767794547611 t1 Tool/Tool result call_Vb81pQe4sT9c apply_patch error=false
  L14 @1767794548020 t1 Model/Agent call call_Hh3ZrW0yUe2d shell
  L15 @1767794561377 t1 Tool/Tool result call_Hh3ZrW0yUe2d shell error=false
  L16 @1767794564905 t1 Model/Agent text \"The insert in `src/store/entries\"
  L18 @1767794564930 turn_end t1 Completed
  L19 @1767794702118 t2 User/User text \"Good. We deploy with `make relea\"
  L21 @1767794706551 t2 Model/Agent call call_Lc2Yw8Rt5Ua0 local_shell
  L22 @1767794706802 t2 Tool/Tool result call_Lc2Yw8Rt5Ua0 local_shell error=true
  L23 @1767794709240 t2 Model/Agent text \"There is no CHANGELOG.md yet. Sh\"
  L24 @1767794721700 turn_end t2 Aborted
skipped 1 × event_msg agent_message (echo of its response_item)
skipped 1 × event_msg agent_reasoning (echo of its response_item)
skipped 1 × event_msg token_count
skipped 1 × event_msg user_message (echo of its response_item)
skipped 1 × ghost_snapshot
skipped 1 × response_item reasoning (encrypted only)
skipped 2 × turn_context (settings)
",
    );
}

#[test]
fn claude_code_session() {
    check("claude-code.jsonl", ImportFormat::ClaudeCode, "
format claude-code
session 5f2e8b0c-1d3a-4e6f-8a9b-0c1d2e3f4a5b
  L2 @1767953702114 opened workspace=/Users/mira/work/photo-api title=-
  L2 @1767953702114 a1b2c3d4-0001-4000-8000-000000000001 User/User text \"Uploads can be hammered by one c\"
  L3 @1767953706880 a1b2c3d4-0001-4000-8000-000000000001 Model/Agent thinking signed=true
  L4 @1767953707512 a1b2c3d4-0001-4000-8000-000000000001 Model/Agent call toolu_01A9bC8dE7fG6hI5jK4lM3nO Grep
  L5 @1767953707901 a1b2c3d4-0001-4000-8000-000000000001 Tool/Tool result toolu_01A9bC8dE7fG6hI5jK4lM3nO Grep error=false
  L7 @1767953714230 a1b2c3d4-0001-4000-8000-000000000001 Model/Agent text \"tower is there but no rate limit\"
  L7 @1767953714230 a1b2c3d4-0001-4000-8000-000000000001 Model/Agent call toolu_01P2qR3sT4uV5wX6yZ7aB8cD Edit
  L8 @1767953714602 a1b2c3d4-0001-4000-8000-000000000001 Tool/Tool result toolu_01P2qR3sT4uV5wX6yZ7aB8cD Edit error=false
  L10 @1767953718447 a1b2c3d4-0001-4000-8000-000000000001 Model/Agent call toolu_01Bash9x8y7z6a5b4c3d2e1f Bash
  L11 @1767953731090 a1b2c3d4-0001-4000-8000-000000000001 Tool/Tool result toolu_01Bash9x8y7z6a5b4c3d2e1f Bash error=true
  L12 @1767953733500 turn_end a1b2c3d4-0001-4000-8000-000000000001 Aborted
  L14 @1767953762310 a1b2c3d4-0012-4000-8000-000000000012 User/User text \"Define upload_limit() next to th\"
  L15 @1767953800775 a1b2c3d4-0012-4000-8000-000000000012 Model/Agent text \"Done: `upload_limit()` builds a \"
session 5f2e8b0c-1d3a-4e6f-8a9b-0c1d2e3f4a5b/sidechain
  L9 @1767953715000 opened workspace=/Users/mira/work/photo-api title=-
  L9 @1767953715000 a1b2c3d4-0007-4000-8000-000000000007 User/User text \"Find every route that accepts mu\"
skipped 1 × file-history-snapshot
skipped 1 × summary (of another session)
skipped 1 × system informational
skipped 1 × user interruption notice (the turn ends aborted)
");
}

#[test]
fn openai_chat_message_array() {
    check(
        "chat-completions.json",
        ImportFormat::OpenaiChat,
        "
format openai-chat
session chat-0146d4f537e7
  L1 @1767225600000 opened workspace=- title=-
  L1 @1767225600000 t1 System/System text \"You are a careful SQL assistant.\"
  L1 @1767225600001 t1 User/User text \"Which customers placed more than\"
  L1 @1767225600002 t1 Model/Agent call call_8fKq2Lr1 describe_table
  L1 @1767225600003 t1 Tool/Tool result call_8fKq2Lr1 describe_table error=false
  L1 @1767225600004 t1 Model/Agent text \"I'll count December orders per c\"
  L1 @1767225600004 t1 Model/Agent call call_9gLr3Ms2 run_query
  L1 @1767225600005 t1 Tool/Tool result call_9gLr3Ms2 run_query error=false
  L1 @1767225600006 t1 Model/Agent text \"Two customers: 1042 with 5 order\"
  L1 @1767225600007 turn_end t1 Completed
  L1 @1767225600008 t2 User/User text \"Now chart it.\"
  L1 @1767225600009 t2 Model/Agent text \"I can't draw charts here, but th\"
  L1 @1767225600010 turn_end t2 Completed
skipped 1 × content part image_url
skipped 1 × message role function
",
    );
}

#[test]
fn openai_chat_dataset_lines() {
    check(
        "chat-dataset.jsonl",
        ImportFormat::OpenaiChat,
        "
format openai-chat
session chat-c168698abf40-1
  L1 @1767225600000 opened workspace=- title=-
  L1 @1767225600000 t1 System/System text \"You answer questions about the t\"
  L1 @1767225600001 t1 User/User text \"Who is on call for payments this\"
  L1 @1767225600002 t1 Model/Agent call call_rota_1 lookup_rota
  L1 @1767225600003 t1 Tool/Tool result call_rota_1 lookup_rota error=false
  L1 @1767225600004 t1 Model/Agent text \"Priya on Saturday, Tomás on Sund\"
  L1 @1767225600005 turn_end t1 Completed
session chatcmpl-rota-2
  L2 @1767225600005 opened workspace=- title=-
  L2 @1767225600006 t1 User/User text \"Swap my Sunday with Priya. I'm T\"
  L2 @1767225600007 t1 Model/Agent thinking signed=false
  L2 @1767225600007 t1 Model/Agent text \"I've sent Priya a swap request f\"
  L2 @1767225600008 turn_end t1 Completed
skipped 1 × content part input_audio
",
    );
}

#[test]
fn maka_runtime_events() {
    check(
        "maka-events.jsonl",
        ImportFormat::Maka,
        "
format maka
session maka-session-42
  L2 @1767950000000 turn_a User/User text \"Summarize yesterday's failed dep\"
  L3 @1767950000410 turn_a Model/Agent thinking signed=true
  L4 @1767950000522 turn_a Model/Agent call tc_1 deploy_log
  L5 @1767950001203 turn_a Tool/Tool result tc_1 deploy_log error=false
  L6 @1767950002980 turn_a Model/Agent text \"One failed deploy: billing\"
  L7 @1767950003150 turn_a Model/Agent text \"One failed deploy: billing at 16\"
  L8 @1767950003151 turn_a System/System no content
skipped 1 × non-event line (agent_run_event)
skipped 1 × non-event line (ledger_header)
",
    );
}

#[test]
fn malformed_lines_name_their_line_and_append_nothing() {
    let codex = fixture("codex-rollout.jsonl");
    check_malformed(
        &with_line(&codex, 9, r#"{"timestamp":"2026-01-07T14:02:23.680Z","type":"response_item","#),
        ImportFormat::Codex,
        9,
        "not valid JSON",
    );
    check_malformed(
        &with_line(
            &codex,
            8,
            r#"{"timestamp":"2026-01-07T14:02:23.114Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}"}}"#,
        ),
        ImportFormat::Codex,
        8,
        "field `payload.call_id`: is missing",
    );
    check_malformed(
        &with_line(
            &codex,
            3,
            r#"{"timestamp":"last tuesday","type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
        ),
        ImportFormat::Codex,
        3,
        "field `timestamp`",
    );
    let claude = fixture("claude-code.jsonl");
    check_malformed(
        &with_line(
            &claude,
            4,
            r#"{"type":"assistant","sessionId":"s","uuid":"u4","message":"not an object"}"#,
        ),
        ImportFormat::ClaudeCode,
        4,
        "field `message`",
    );
    // A result whose call is not in the file is not malformed: Claude Code writes such lines (a
    // call its own compaction removed, a stopped background task), so the file imports and the
    // result's content stays, as a host system event naming the call.
    let orphan = with_line(
        &claude,
        5,
        r#"{"type":"user","sessionId":"5f2e8b0c-1d3a-4e6f-8a9b-0c1d2e3f4a5b","uuid":"u5","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_never_made","content":"x"}]}}"#,
    );
    let rendered = render(&orphan, ImportFormat::ClaudeCode);
    assert!(
        rendered.contains("  L5 @1767953707513 a1b2c3d4-0001-4000-8000-000000000001 System/Host text \"Claude Code recorded a result fo\""),
        "{rendered}"
    );
    let dataset = fixture("chat-dataset.jsonl");
    check_malformed(
        &with_line(&dataset, 2, r#"{"messages": [{"content": "who am I?"}]}"#),
        ImportFormat::OpenaiChat,
        2,
        "field `messages[0].role`: is missing",
    );
    let array =
        br#"[{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": "call everything"}]"#;
    check_malformed(array, ImportFormat::OpenaiChat, 1, "field `messages[1].tool_calls`: must be an array");
    let maka = fixture("maka-events.jsonl");
    check_malformed(
        &with_line(
            &maka,
            4,
            r#"{"id":"e4","invocationId":"i","runId":"r","sessionId":"maka-session-42","turnId":"turn_a","ts":1,"role":"tool","author":"tool"}"#,
        ),
        ImportFormat::Maka,
        4,
        "partial",
    );
}

#[test]
fn auto_detection_falls_back_to_the_mnemo_format_which_names_the_fault() {
    assert_eq!(mnemo::transcript::detect_format(b"{\"hello\": \"world\"}\n"), None);
    let error = parse_import(b"{\"hello\": \"world\"}\n", "odd.jsonl", ImportFormat::Auto).unwrap_err();
    assert!(error.to_string().starts_with("odd.jsonl:1: "), "{error}");
    assert!(error.to_string().contains("hello"), "{error}");
}

#[test]
fn every_fixture_imports_into_one_store_and_says_which_format_it_chose() {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let mut formats = Vec::new();
    for name in [
        "codex-rollout.jsonl",
        "claude-code.jsonl",
        "chat-completions.json",
        "chat-dataset.jsonl",
        "maka-events.jsonl",
    ] {
        let report = mnemo.import(&fixture(name), name, ImportFormat::Auto).unwrap();
        formats.push(report.format.name());
        assert!(!report.skipped.is_empty(), "{name} has lines of types the importer skips");
    }
    assert_eq!(formats, ["codex", "claude-code", "openai-chat", "openai-chat", "maka"]);
    let sessions = mnemo.history().sessions().unwrap();
    assert_eq!(
        sessions.len(),
        7,
        "the claude-code fixture's sidechain line is a sub-agent session of its own"
    );
    let codex = sessions.iter().find(|s| s.session.as_str().starts_with("0199a3f2")).unwrap();
    assert_eq!(codex.workspace.as_ref().map(|w| w.as_str()), Some("/home/dana/src/ledger-sync"));
    // The partial and hidden maka events never reach the visible transcript.
    let maka = mnemo
        .history()
        .transcript(&mnemo::records::SessionId::new("maka-session-42").unwrap(), None)
        .unwrap()
        .unwrap();
    let texts: Vec<&str> = maka.messages.iter().map(|m| m.text.as_str()).collect();
    assert!(!texts.contains(&"One failed deploy: billing"), "{texts:?}");
    // Importing a file twice appends nothing the second time.
    let head = mnemo.log().head();
    let again = mnemo.import(&fixture("codex-rollout.jsonl"), "again", ImportFormat::Auto).unwrap();
    assert_eq!((again.status, again.records), (mnemo::transcript::ImportStatus::AlreadyComplete, 0));
    assert_eq!(mnemo.log().head(), head);
}

/// A forked Codex rollout begins with its own `session_meta` naming the session it was forked
/// from (`forked_from_id`), then holds the history Codex copied from that session, the other
/// session's `session_meta` first. Such a file was refused at its second line ("a second
/// session ... in a rollout of session ...") and the fork's origin was not kept.
#[test]
fn a_forked_codex_rollout_is_one_session_whose_parent_is_the_session_it_was_forked_from() {
    let fork = "019e1ba8-7b21-7c64-a1f3-4e8d2c6b9f05";
    let origin = "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21";
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let report = mnemo.import(&fixture("codex-rollout-forked.jsonl"), "forked", ImportFormat::Auto).unwrap();
    assert_eq!((report.format, report.sessions, report.sessions_in_file), (ImportFormat::Codex, 1, 1));
    assert_eq!(report.skipped.get("session_meta (of the forked history)"), Some(&1), "{report:?}");
    let sessions = mnemo.history().sessions().unwrap();
    let [session] = sessions.as_slice() else { panic!("{sessions:?}") };
    assert_eq!(session.session.as_str(), fork);
    assert_eq!(session.parent.as_ref().map(|p| p.as_str()), Some(origin));
    assert!(!session.subagent, "a fork is not a sub-agent's session");
    assert_eq!(session.source.as_deref(), Some("codex"));

    // The copied history is the fork's: its first request, then the fork's own.
    let parsed = parse_import(&fixture("codex-rollout-forked.jsonl"), "forked", ImportFormat::Codex).unwrap();
    let texts: Vec<String> = parsed.transcript.sessions[0]
        .1
        .iter()
        .filter_map(|r| match &r.record {
            Record::RuntimeEvent(e) if e.role == mnemo::records::Role::User => match &e.content {
                Some(Content::Text(t)) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "The totals test fails after the currency change. Fix it and keep rounding half-even.",
            "Round the tax line half-even too."
        ],
        "{texts:?}"
    );

    // The session it was forked from imports beside it, as its own session.
    let report = mnemo.import(&fixture("codex-rollout-0.128.jsonl"), "origin", ImportFormat::Codex).unwrap();
    assert_eq!(report.sessions, 1);
    let origin_session = mnemo.history().sessions().unwrap();
    let origin_session = origin_session.iter().find(|s| s.session.as_str() == origin).unwrap();
    assert!(origin_session.parent.is_none());

    // A second session's meta line that is not the fork's history is still refused.
    let bytes = String::from_utf8(fixture("codex-rollout-forked.jsonl")).unwrap().replacen(
        &format!("\"id\":\"{origin}\""),
        "\"id\":\"019e1bff-0000-7000-8000-000000000000\"",
        1,
    );
    let error = parse_import(bytes.as_bytes(), "forked", ImportFormat::Codex).unwrap_err();
    assert_eq!(error.line, 2, "{error}");
    assert!(error.reason.contains("a second session"), "{error}");
}
