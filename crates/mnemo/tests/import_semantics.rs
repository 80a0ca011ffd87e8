//! What the importers make of what the source tools write about themselves: turn boundaries,
//! input given while a turn runs, interruptions, the hosts' own compaction, slash commands,
//! sub-agents and documents no importer reads. Each test is named after what went wrong before.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::BTreeMap;
use std::path::PathBuf;

use mnemo::records::{Author, Content, Record, Role, TurnStatus};
use mnemo::transcript::{ImportFormat, parse_import};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import").join(name)).unwrap()
}

/// Each event as (turn, role, author, text or tool name, steering), and each turn end as
/// (turn, status, time).
struct Flat {
    events: Vec<(String, Role, Author, String, bool)>,
    ends: Vec<(String, TurnStatus, u64)>,
    sessions: Vec<(String, bool, Option<String>)>,
    titles: Vec<String>,
}

fn flat(bytes: &[u8], format: ImportFormat) -> Flat {
    let parsed = parse_import(bytes, "fixture", format).unwrap();
    let mut flat = Flat { events: Vec::new(), ends: Vec::new(), sessions: Vec::new(), titles: Vec::new() };
    for (_, records) in &parsed.transcript.sessions {
        for r in records {
            match &r.record {
                Record::SessionOpened(s) => {
                    flat.sessions.push((s.session.to_string(), s.subagent, s.title.clone()))
                }
                Record::SessionFlagsChanged(f) => flat.titles.extend(f.title.clone()),
                Record::RuntimeEvent(e) => {
                    let (what, steering) = match &e.content {
                        Some(Content::Text(t)) => (t.text.clone(), t.steering == Some(true)),
                        Some(Content::Thinking(t)) => (t.text.clone(), false),
                        Some(Content::FunctionCall(c)) => (c.name.clone(), false),
                        Some(Content::FunctionResponse(c)) => (c.name.clone(), false),
                        _ => (String::new(), false),
                    };
                    flat.events.push((e.turn_id.to_string(), e.role, e.author, what, steering));
                }
                Record::TurnEnded(t) => flat.ends.push((t.turn.to_string(), t.status, r.timestamp.0)),
                _ => {}
            }
        }
    }
    flat
}

#[test]
fn codex_exec_rollouts_whose_user_input_is_only_an_event_keep_it_and_their_turns() {
    let flat = flat(&fixture("codex-rollout-0.128.jsonl"), ImportFormat::Codex);
    let users: Vec<(&str, &str, bool)> =
        flat.events.iter().filter(|e| e.1 == Role::User).map(|e| (e.0.as_str(), e.3.as_str(), e.4)).collect();
    assert_eq!(
        users,
        [
            (
                "019e1b7a-3d02-7c31-9f1e-0a6b2d8c5e13",
                "The totals test fails after the currency change. Fix it and keep rounding half-even.",
                false
            ),
            ("019e1b7c-0a19-7e55-8b40-7d3c1e9f2a64", "Now add a test for negative amounts.", false),
            ("019e1b7c-0a19-7e55-8b40-7d3c1e9f2a64", "use the table-driven style from tests/parse.rs", true),
            ("019e1b7d-4410-7a08-91cc-2e5f0b6d7a38", "summarise what changed today", false),
        ],
        "each input once, in the turn task_started names; input during a turn is steering"
    );
    let ends: Vec<(&str, TurnStatus)> = flat.ends.iter().map(|e| (e.0.as_str(), e.1)).collect();
    assert_eq!(
        ends,
        [
            ("019e1b7a-3d02-7c31-9f1e-0a6b2d8c5e13", TurnStatus::Completed),
            ("019e1b7c-0a19-7e55-8b40-7d3c1e9f2a64", TurnStatus::Aborted),
            ("t3", TurnStatus::Completed),
            ("019e1b7d-4410-7a08-91cc-2e5f0b6d7a38", TurnStatus::Completed),
        ]
    );
    // The aborted turn ends at the turn_aborted line's own time.
    assert_eq!(flat.ends[1].2, 1_777_882_846_000);
    // Developer messages, injected instructions, the compaction and errors are the host's system events.
    let system: Vec<&str> = flat
        .events
        .iter()
        .filter(|e| e.1 == Role::System)
        .inspect(|e| assert_eq!(e.2, Author::Host))
        .map(|e| e.3.lines().next().unwrap_or_default())
        .collect();
    assert_eq!(
        system,
        [
            "<permissions instructions>",
            "# AGENTS.md instructions for /home/ines/src/tally",
            "<environment_context>",
            "<turn_aborted>",
            "Codex compacted the conversation. Its summary:",
            "Codex error: stream disconnected before completion: Transport error: error decoding response body",
        ]
    );
    assert_eq!(flat.titles, ["Fix half-even rounding in totals"]);
}

#[test]
fn codex_failures_in_plain_text_output_and_exec_command_end_are_errors() {
    let parsed = parse_import(&fixture("codex-rollout-0.128.jsonl"), "f", ImportFormat::Codex).unwrap();
    let results: Vec<(String, bool)> = parsed.transcript.sessions[0]
        .1
        .iter()
        .filter_map(|r| match &r.record {
            Record::RuntimeEvent(e) => match &e.content {
                Some(Content::FunctionResponse(c)) => Some((c.name.clone(), c.is_error == Some(true))),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let expect = [
        ("exec_command", true), // exit 101: `Process exited with code 101` and exec_command_end
        ("shell_command", false), // `Exit code: 0`
        ("shell_command", true), // `Exit code: 1`
        ("web_search", false),
        ("apply_patch", false),
        ("exec_command", false),
        ("exec_command", false),
    ];
    let results: Vec<(&str, bool)> = results.iter().map(|(n, e)| (n.as_str(), *e)).collect();
    assert_eq!(results, expect);
}

#[test]
fn claude_code_compaction_and_commands_are_the_hosts_system_events_never_user_turns() {
    let flat = flat(&fixture("claude-code-2.0-compaction.jsonl"), ImportFormat::ClaudeCode);
    let users: Vec<&str> = flat.events.iter().filter(|e| e.1 == Role::User).map(|e| e.3.as_str()).collect();
    assert_eq!(
        users,
        [
            "the CSV importer drops rows with quoted commas, fix it",
            "use a small state machine instead of a regex"
        ]
    );
    let system: Vec<(&str, &str)> = flat
        .events
        .iter()
        .filter(|e| e.1 == Role::System)
        .inspect(|e| assert_eq!(e.2, Author::Host))
        .map(|e| (e.0.as_str(), e.3.get(..40).unwrap_or(&e.3)))
        .collect();
    let first_turn = flat.events.iter().find(|e| e.1 == Role::User).unwrap().0.clone();
    let second_turn = flat.events.iter().filter(|e| e.1 == Role::User).nth(1).unwrap().0.clone();
    assert_eq!(
        system,
        [
            (first_turn.as_str(), "Caveat: The messages below were generate"),
            (first_turn.as_str(), "<command-name>/model</command-name>\n    "),
            (first_turn.as_str(), "<local-command-stdout>Set model to \u{1b}[1mo"),
            (second_turn.as_str(), "Claude Code compacted the conversation ("),
            (second_turn.as_str(), "This session is being continued from a p"),
        ],
        "commands go in the turn of the request they precede; compaction in the turn it happened in"
    );
    let compaction = flat.events.iter().find(|e| e.3.starts_with("Claude Code compacted")).unwrap();
    assert_eq!(compaction.3, "Claude Code compacted the conversation (trigger: auto; 155312 tokens before).");
    // The interruption ends the first turn, aborted, at the interruption line's time.
    assert_eq!(flat.ends[0].0, first_turn);
    assert_eq!(flat.ends[0].1, TurnStatus::Aborted);
    assert_eq!(flat.ends[0].2, 1_770_714_041_010);
    // The summary whose leaf is in the file titles the session; the other one is another session's.
    assert_eq!(flat.titles, ["Fix CSV quoted-comma parsing with a state machine"]);
}

#[test]
fn claude_code_sub_agent_files_are_sub_agent_sessions_named_after_their_parent() {
    let real = std::env::var_os("MNEMO_REAL_FIXTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real"),
        PathBuf::from,
    );
    let path = real.join("claude-code/small-with-subagents/agent-36541525.jsonl");
    let flat = flat(&std::fs::read(&path).unwrap(), ImportFormat::Auto);
    assert_eq!(
        flat.sessions,
        [("4c2ddfdc-b619-4525-8d03-1950fb1b0257/agent-36541525".to_owned(), true, None)]
    );
    assert_eq!(flat.events.iter().filter(|e| e.1 == Role::User).count(), 1);
}

#[test]
fn a_pretty_printed_document_no_importer_reads_is_named_as_such_not_as_line_1_eof() {
    let bytes = b"{\n  \"runs\": [\n    {\"id\": 1}\n  ],\n  \"version\": 2\n}\n";
    let error = parse_import(bytes, "results.json", ImportFormat::Auto).unwrap_err().to_string();
    assert!(error.contains("one JSON document over 6 lines"), "{error}");
    assert!(error.contains("keys runs, version"), "{error}");
    assert!(!error.contains("EOF"), "{error}");
    // Read as a JSON Lines format, it is named as what it is too, and a document another importer
    // reads says which.
    for format in [ImportFormat::Codex, ImportFormat::ClaudeCode, ImportFormat::Mnemo, ImportFormat::Maka] {
        let error = parse_import(bytes, "results.json", format).unwrap_err().to_string();
        assert!(error.contains("one JSON document over 6 lines"), "{error}");
        let traj = fixture("swe-agent-thought-action.traj");
        let error = parse_import(&traj, "run.traj", format).unwrap_err().to_string();
        assert!(error.contains("the swe-agent importer reads it"), "{error}");
    }
    // A SWE-agent trajectory is told apart and read.
    let parsed =
        parse_import(&fixture("swe-agent-function-calling.traj"), "t.traj", ImportFormat::Auto).unwrap();
    assert_eq!(parsed.format, ImportFormat::SweAgent);
}

#[test]
fn swe_agent_task_is_a_user_message_and_a_run_that_did_not_submit_fails() {
    let bytes = fixture("swe-agent-thought-action.traj");
    let flat = flat(&bytes, ImportFormat::SweAgent);
    assert!(flat.events.iter().any(|e| e.1 == Role::User && e.3.starts_with("We're currently solving")));
    assert_eq!(flat.ends.iter().map(|e| e.1).collect::<Vec<_>>(), [TurnStatus::Completed]);
    let text = String::from_utf8(bytes)
        .unwrap()
        .replace("\"exit_status\": \"submitted\"", "\"exit_status\": \"exit_cost\"");
    let flat = self::flat(text.as_bytes(), ImportFormat::SweAgent);
    assert_eq!(flat.ends.iter().map(|e| e.1).collect::<Vec<_>>(), [TurnStatus::Failed]);
    assert!(flat.events.iter().any(|e| e.3.starts_with("SWE-agent finished with exit status exit_cost.")));
}

#[test]
fn codex_bare_2025_rollouts_without_the_envelope_are_read() {
    let parsed = parse_import(&fixture("codex-rollout-bare-2025.jsonl"), "bare", ImportFormat::Auto).unwrap();
    assert_eq!(parsed.format, ImportFormat::Codex);
    assert_eq!(parsed.skipped.get("record_type state"), Some(&3));
    let Record::SessionOpened(opened) = &parsed.transcript.sessions[0].1[0].record else {
        panic!("no session line")
    };
    assert_eq!(opened.session.as_str(), "c3c4b301-27c8-4c70-b6e4-46b99fdf0236");
    assert_eq!(opened.workspace.as_ref().map(|w| w.as_str()), Some("/home/omar/feeds"));
    let flat = flat(&fixture("codex-rollout-bare-2025.jsonl"), ImportFormat::Codex);
    let errors: Vec<bool> = parsed.transcript.sessions[0]
        .1
        .iter()
        .filter_map(|r| match &r.record {
            Record::RuntimeEvent(e) => match &e.content {
                Some(Content::FunctionResponse(c)) => Some(c.is_error == Some(true)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(errors, [false, true]);
    assert!(flat.events.iter().any(|e| e.1 == Role::User && e.3.starts_with("the RSS parser")));
}

/// Each session's (id, subagent, parent, source) as its session record has them.
fn opened(bytes: &[u8], format: ImportFormat) -> Vec<(String, bool, Option<String>, Option<String>)> {
    let parsed = parse_import(bytes, "fixture", format).unwrap();
    let mut sessions = Vec::new();
    for (_, records) in &parsed.transcript.sessions {
        for r in records {
            if let Record::SessionOpened(s) = &r.record {
                let parent = s.parent.as_ref().map(ToString::to_string);
                sessions.push((s.session.to_string(), s.subagent, parent, s.source.clone()));
            }
        }
    }
    sessions
}

#[test]
fn codex_sub_agent_rollouts_are_linked_to_the_thread_that_spawned_them() {
    // A spawned thread's session_meta names its parent in `source.subagent.thread_spawn`.
    let child = opened(&fixture("codex-rollout-subagent.jsonl"), ImportFormat::Auto);
    let parent = opened(&fixture("codex-rollout-0.128.jsonl"), ImportFormat::Auto);
    assert_eq!(
        parent,
        [("019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21".to_owned(), false, None, Some("codex".to_owned()))]
    );
    assert_eq!(
        child,
        [(
            "019e1b7c-81a0-7d52-b3c4-2f6e9a1d0b77".to_owned(),
            true,
            Some(parent[0].0.clone()),
            Some("codex".to_owned())
        )]
    );
    // A review sub-agent names no parent thread: a sub-agent's session without a link.
    let text = String::from_utf8(fixture("codex-rollout-subagent.jsonl")).unwrap();
    let first = text.lines().next().unwrap();
    let start = first.find("{\"thread_spawn\"").unwrap();
    let end =
        first.find(",\"agent_nickname\":\"Noether\",\"agent_role\":\"explorer\",\"model_provider\"").unwrap();
    let review = text.replacen(&first[start..end], "\"review\"}", 1);
    let review = opened(review.as_bytes(), ImportFormat::Codex);
    assert_eq!((review[0].1, review[0].2.as_deref()), (true, None));
}

#[test]
fn every_imported_session_names_the_format_it_came_from_and_claude_sub_agents_their_parent() {
    let real = std::env::var_os("MNEMO_REAL_FIXTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real"),
        PathBuf::from,
    );
    let agent = std::fs::read(real.join("claude-code/small-with-subagents/agent-36541525.jsonl")).unwrap();
    assert_eq!(
        opened(&agent, ImportFormat::Auto),
        [(
            "4c2ddfdc-b619-4525-8d03-1950fb1b0257/agent-36541525".to_owned(),
            true,
            Some("4c2ddfdc-b619-4525-8d03-1950fb1b0257".to_owned()),
            Some("claude-code".to_owned())
        )]
    );
    for (name, source) in [
        ("claude-code.jsonl", "claude-code"),
        ("codex-rollout-legacy.jsonl", "codex"),
        ("swe-agent-function-calling.traj", "swe-agent"),
        ("chat-completions.json", "openai-chat"),
    ] {
        let sessions = opened(&fixture(name), ImportFormat::Auto);
        assert!(!sessions.is_empty(), "{name}");
        for (session, _, _, got) in sessions {
            assert_eq!(got.as_deref(), Some(source), "{name}: {session}");
        }
    }
    // A mnemo transcript's session line names its source itself, or none (as an export of a
    // session a host opened does), so export → import keeps the log as it was.
    let mnemo = b"{\"kind\":\"session\",\"session\":\"s1\",\"source\":\"codex\"}\n{\"kind\":\"session\",\"session\":\"s2\"}\n{\"session\":\"s1\",\"turn\":\"t1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\"}]}\n";
    let sessions = opened(mnemo, ImportFormat::Mnemo);
    assert_eq!(sessions[0].3.as_deref(), Some("codex"));
    assert_eq!(sessions[1].3, None);
    // A source that is not a lowercase name is refused naming the line and the field.
    let bad = b"{\"kind\":\"session\",\"session\":\"s1\",\"source\":\"Claude Code\"}\n";
    let error = parse_import(bad, "bad.jsonl", ImportFormat::Mnemo).unwrap_err().to_string();
    assert!(error.starts_with("bad.jsonl:1:") && error.contains("source"), "{error}");
}

#[test]
fn claude_code_2_1_commands_images_rejections_and_interruptions_keep_the_users_two_turns() {
    let flat = flat(&fixture("claude-code-2.1.jsonl"), ImportFormat::Auto);
    let users: Vec<&str> = flat.events.iter().filter(|e| e.1 == Role::User).map(|e| e.3.as_str()).collect();
    assert_eq!(
        users,
        [
            "Why does `cargo test -p tally totals` fail on the CI runner but not here?",
            "Fix it, and here is the CI log for the failing case.",
            "[image: image/png, 96 bytes of base64 not kept]"
        ]
    );
    // The caveat, the /model command and its output are the host's, in the turn of the request
    // they come before; the rejected edit ends that turn aborted at the interruption's time.
    let second = flat.events.iter().find(|e| e.3.starts_with("Fix it")).unwrap().0.clone();
    let host: Vec<&(String, Role, Author, String, bool)> =
        flat.events.iter().filter(|e| e.2 == Author::Host).collect();
    assert_eq!(host.len(), 3, "{host:?}");
    assert!(host.iter().all(|e| e.0 == second && e.1 == Role::System), "{host:?}");
    assert_eq!(flat.ends.len(), 2);
    assert_eq!(flat.ends[0].1, TurnStatus::Completed);
    assert_eq!((flat.ends[1].0.as_str(), flat.ends[1].1), (second.as_str(), TurnStatus::Aborted));
    assert_eq!(flat.ends[1].2, 1_771_581_711_310, "the interruption's own time");
    assert_eq!(flat.titles, ["Half-even rounding in report totals"]);
}

/// The base64 data of the 1x1 PNG in `claude-code-2.1.jsonl` (a Read of an image file and a
/// pasted screenshot).
const FIXTURE_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[test]
fn claude_code_images_in_tool_results_and_user_lines_are_placeholders_not_base64_text() {
    let bytes = fixture("claude-code-2.1.jsonl");
    let parsed = parse_import(&bytes, "fixture", ImportFormat::ClaudeCode).unwrap();
    let mut results = Vec::new();
    let mut user_texts = Vec::new();
    for (_, records) in &parsed.transcript.sessions {
        for r in records {
            let serialized = format!("{:?}", r.record);
            assert!(!serialized.contains(FIXTURE_PNG), "a record holds the image's base64: {serialized}");
            if let Record::RuntimeEvent(e) = &r.record {
                match &e.content {
                    Some(Content::FunctionResponse(f)) => results.push((f.id.to_string(), f.result.clone())),
                    Some(Content::Text(t)) if e.role == Role::User => user_texts.push(t.text.clone()),
                    _ => {}
                }
            }
        }
    }
    // The text block of the Read result is kept as it was, the image is its placeholder.
    let read = results.iter().find(|(id, _)| id == "toolu_01Vr2Cs6Nm8Qx4Lt1Jw7Ye3B").unwrap();
    assert_eq!(
        read.1,
        serde_json::json!(
            "    86\tpub fn total(cents: i64) -> f64 {\n    87\t    // rounds to whole cents\n    88\t    (cents as f64 / 100.0).round()\n    89\t}\n[image: image/png, 96 bytes of base64 not kept]"
        )
    );
    // The pasted screenshot: the user's text as typed, then the placeholder.
    assert!(user_texts.contains(&"Fix it, and here is the CI log for the failing case.".to_owned()));
    assert!(user_texts.contains(&"[image: image/png, 96 bytes of base64 not kept]".to_owned()));
    // Both are counted in the import summary.
    let counted = |what: &str| parsed.skipped.get(what).copied();
    assert_eq!(
        counted("image in a tool_result (its base64 data not kept; a placeholder in its place)"),
        Some(1)
    );
    assert_eq!(counted("user image block (its base64 data not kept; a placeholder in its place)"), Some(1));
    assert_eq!(counted("user block image"), None, "{:?}", parsed.skipped);
}

/// A Claude Code 2.1.51 session whose two large tool outputs were saved to files, as Claude Code
/// lays them out: `<sessionId>.jsonl` and `<sessionId>/tool-results/<tool_use_id>.txt` beside it.
/// The Bash output's file is there; the Grep output's is not.
fn persisted_session() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-persisted/5d2f8e31-7c4a-4b9e-9f03-2a6c1d8e4b70.jsonl")
}

const BASH_CALL: &str = "toolu_01Hx7Qm3Rt9Vb2Nc5Lp8Wd4K";
const GREP_CALL: &str = "toolu_01Jd5Fs8Kw2Yt6Gm9Xc3Bn7P";
const MISSING: &str = "persisted tool output not found beside the session file (its preview kept)";

/// Each tool result's text by call id, and the skip counts, of `bytes` imported from `source`.
fn results_of(bytes: &[u8], source: &str) -> (BTreeMap<String, String>, BTreeMap<String, u64>) {
    let parsed = parse_import(bytes, source, ImportFormat::ClaudeCode).unwrap();
    let mut results = BTreeMap::new();
    for (_, records) in &parsed.transcript.sessions {
        for r in records {
            if let Record::RuntimeEvent(e) = &r.record
                && let Some(Content::FunctionResponse(f)) = &e.content
            {
                let text = f.result.as_str().map_or_else(|| f.result.to_string(), str::to_owned);
                results.insert(f.id.to_string(), text);
            }
        }
    }
    (results, parsed.skipped)
}

#[test]
fn claude_code_outputs_saved_to_files_are_read_back_in_place_of_their_previews() {
    let path = persisted_session();
    let bytes = std::fs::read(&path).unwrap();
    let (results, skipped) = results_of(&bytes, path.to_str().unwrap());
    let saved = path.with_extension("").join("tool-results").join(format!("{BASH_CALL}.txt"));
    let full = std::fs::read_to_string(saved).unwrap();
    assert!(full.len() > 50_000 && full.contains("test export::case_1799 ... ok"));
    assert_eq!(results[BASH_CALL], full, "the whole test log, not its 2KB preview");
    // The Grep output's file is not there: its preview stays, and the summary says so.
    assert!(results[GREP_CALL].starts_with("<persisted-output>\nOutput too large (67.2KB)."));
    assert_eq!(skipped.get(MISSING), Some(&1), "{skipped:?}");
    // The screenshot, a tool result of only an image, is its placeholder.
    assert_eq!(results["toolu_01Pq4Wz8Mv2Ls6Dk9Hr3Tf5X"], "[image: image/png, 96 bytes of base64 not kept]");
}

#[test]
fn claude_code_saved_outputs_are_looked_for_only_beside_a_session_file_and_within_the_limit() {
    let path = persisted_session();
    let bytes = std::fs::read(&path).unwrap();
    // Imported by a name that is not its path, nothing is read: both previews stay, counted.
    let (results, skipped) = results_of(&bytes, "fixture");
    assert!(results[BASH_CALL].starts_with("<persisted-output>\nOutput too large (53.3KB)."));
    assert_eq!(skipped.get(MISSING), Some(&2), "{skipped:?}");
    // A saved output over the limit is not read: its preview stays, and the count names the limit.
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join(path.file_name().unwrap());
    std::fs::write(&session, &bytes).unwrap();
    let results_dir = session.with_extension("").join("tool-results");
    std::fs::create_dir_all(&results_dir).unwrap();
    std::fs::write(results_dir.join(format!("{BASH_CALL}.txt")), "x".repeat(512 * 1024 + 1)).unwrap();
    let (results, skipped) = results_of(&bytes, session.to_str().unwrap());
    assert!(results[BASH_CALL].starts_with("<persisted-output>\nOutput too large (53.3KB)."));
    assert_eq!(
        skipped.get("persisted tool output over the 524288-byte limit (its preview kept)"),
        Some(&1),
        "{skipped:?}"
    );
    // At the limit exactly, it is read.
    std::fs::write(results_dir.join(format!("{BASH_CALL}.txt")), "x".repeat(512 * 1024)).unwrap();
    let (results, _) = results_of(&bytes, session.to_str().unwrap());
    assert_eq!(results[BASH_CALL].len(), 512 * 1024);
}

#[test]
fn claude_code_real_sub_agent_preview_of_a_saved_output_is_recognised_and_counted_when_missing() {
    // Claude Code 2.1.7 cut a 126.7KB Grep output to a preview in this real sub-agent file; the
    // fixtures hold no `tool-results` folder, so the preview stays and the summary says so.
    let base = std::env::var_os("MNEMO_REAL_FIXTURES").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real"),
        PathBuf::from,
    );
    let path = base.join("claude-code/incremental-subagents/turn-2/subagents/agent-a485154.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let (results, skipped) = results_of(&bytes, path.to_str().unwrap());
    assert!(
        results["toolu_bdrk_01CaTZ658VzFpoM9YptVLjGg"]
            .starts_with("<persisted-output>\nOutput too large (126.7KB).")
    );
    assert_eq!(skipped.get(MISSING), Some(&1), "{skipped:?}");
}
