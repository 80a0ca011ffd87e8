//! The CLI on real session files (`tests/fixtures/real/`, read in place) and on files in the
//! exact shape the real tools write: what a user sees end to end, held to what the files contain.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use support::{mnemo, ok_json, real, written};

/// The call ids of results whose call is not earlier in the request, and of calls without a result.
fn unpaired(context: &Value) -> (Vec<String>, Vec<String>) {
    let (mut calls, mut open, mut orphans) = (HashSet::new(), Vec::new(), Vec::new());
    for item in context["items"].as_array().unwrap() {
        let content = &item["event"]["content"];
        let id = content["id"].as_str().unwrap_or_default().to_owned();
        match content["kind"].as_str() {
            Some("function_call") => {
                calls.insert(id.clone());
                open.push(id);
            }
            Some("function_response") => {
                if !calls.contains(&id) {
                    orphans.push(id.clone());
                }
                open.retain(|o| *o != id);
            }
            _ => {}
        }
    }
    (orphans, open)
}

#[test]
fn a_context_that_drops_parallel_tool_calls_keeps_no_result_without_its_call() {
    // The sub-agent ran its tools five at a time (five calls, then their five results); a window
    // too small for its history drops the oldest events, and a result whose call was dropped is
    // a request every provider refuses.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = real("incremental-subagents/turn-2/subagents/agent-a485154.jsonl");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    let session = "e9fb405b-169f-40eb-9396-7e75076f045d/agent-a485154";
    for window in ["8000", "12000", "16000", "24000"] {
        let context = ok_json(&mnemo(&store, &["--json", "context", session, "--window", window]));
        let fit = &context["diagnostics"]["fit"];
        assert_eq!(fit["fits"], true, "window {window}: {fit}");
        assert!(fit["dropped"]["events"].as_u64().unwrap() > 0, "window {window} drops: {fit}");
        let (orphans, open) = unpaired(&context);
        assert!(orphans.is_empty(), "window {window}: results without their call: {orphans:?}");
        assert!(open.is_empty(), "window {window}: calls without their result: {open:?}");
        // What it reports as elided is in the request, never among what it dropped.
        let (first, last) = (
            fit["dropped"]["positions"][0].as_u64().unwrap(),
            fit["dropped"]["positions"][1].as_u64().unwrap(),
        );
        for elision in fit["elided"].as_array().unwrap() {
            let position = elision["position"].as_u64().unwrap();
            assert!(!(first..=last).contains(&position), "window {window}: {position} elided and dropped");
        }
    }
}

/// A Claude Code 2.1 session file in the shape the tool writes (the fields of the real files'
/// lines): a `/clear` command with its caveat, one request, then `groups` assistant steps, each a
/// thinking line with its signature and one to three parallel tool calls (one line each, sharing
/// the message id) followed by their results (one line each, with `toolUseResult`); file reads
/// have Claude Code's line-number gutter. Ends with the answer and a `stop_hook_summary` line.
/// Returns the file and the counts of calls and results it holds.
fn claude_code_session(dir: &Path, session: &str, groups: usize, read_lines: usize) -> (PathBuf, usize) {
    use std::fmt::Write as _;
    let cwd = "/Users/dev/src/ledgerly";
    let mut out = String::new();
    let mut parent = Value::Null;
    let mut n = 0u64;
    let mut line = |out: &mut String, mut body: Value| {
        n += 1;
        let uuid = format!("{n:08x}-2f4d-4a8e-9c31-7d2e6a90b1c4");
        let common = serde_json::json!({
            "parentUuid": parent, "isSidechain": false, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": "2.1.7", "gitBranch": "main",
            "slug": "quiet-running-brook", "uuid": uuid,
            "timestamp": format!("2026-01-14T10:{:02}:{:02}.{:03}Z", n / 60 % 60, n % 60, n % 1000),
        });
        for (key, value) in common.as_object().unwrap() {
            body[key] = value.clone();
        }
        parent = Value::String(uuid);
        writeln!(out, "{body}").unwrap();
    };
    let user =
        |content: Value| serde_json::json!({"type": "user", "message": {"role": "user", "content": content}});
    let assistant = |id: &str, content: Value| {
        serde_json::json!({"type": "assistant", "requestId": format!("req_{id}"), "message": {
            "model": "claude-opus-4-5-20251101", "id": id, "type": "message", "role": "assistant",
            "content": content, "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 3, "cache_creation_input_tokens": 1200, "cache_read_input_tokens": 40000, "output_tokens": 80}}})
    };
    let mut caveat = user(Value::String(
        "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks you to.".into(),
    ));
    caveat["isMeta"] = Value::Bool(true);
    line(&mut out, caveat);
    line(&mut out, user(Value::String("<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n            <command-args></command-args>".into())));
    line(&mut out, user(Value::String("<local-command-stdout></local-command-stdout>".into())));
    line(&mut out, user(Value::String("migrate every module of the ledger from moment to date-fns; the reconciliation report must stay byte-identical".into())));
    let mut calls = 0usize;
    for group in 0..groups {
        let message = format!("msg_01{group:022}");
        let thinking = serde_json::json!([{"type": "thinking", "thinking": format!("Step {group}: read the next modules before editing them."), "signature": format!("EqoBCkgIBxABGAIiQL{}", "x".repeat(300))}]);
        line(&mut out, assistant(&message, thinking));
        let width = 1 + group % 3;
        let ids: Vec<(String, usize)> =
            (0..width).map(|k| (format!("toolu_01{:022}", calls + k), calls + k)).collect();
        for (id, module) in &ids {
            let input = serde_json::json!({"file_path": format!("{cwd}/src/module_{module}.ts")});
            line(
                &mut out,
                assistant(
                    &message,
                    serde_json::json!([{"type": "tool_use", "id": id, "name": "Read", "input": input}]),
                ),
            );
        }
        for (id, module) in &ids {
            let text: String = (1..=read_lines)
                .map(|row| format!("{row:6}\u{2192}  const posting_{module}_{row} = moment(entry.date).format('YYYY-MM-DD');\n"))
                .collect();
            let mut result =
                user(serde_json::json!([{"tool_use_id": id, "type": "tool_result", "content": text}]));
            result["toolUseResult"] = serde_json::json!({"type": "text", "file": {"filePath": format!("{cwd}/src/module_{module}.ts"), "numLines": read_lines, "startLine": 1, "totalLines": read_lines}});
            line(&mut out, result);
        }
        calls += width;
    }
    line(
        &mut out,
        assistant(
            "msg_final",
            serde_json::json!([{"type": "text", "text": "Every module now uses date-fns; the report is byte-identical."}]),
        ),
    );
    line(
        &mut out,
        serde_json::json!({"type": "system", "subtype": "stop_hook_summary", "hookCount": 1, "hookInfos": [], "hookErrors": [], "preventedContinuation": false, "stopReason": "", "hasOutput": false, "level": "suggestion"}),
    );
    let path = dir.join(format!("{session}.jsonl"));
    std::fs::write(&path, out).unwrap();
    (path, calls)
}

#[test]
fn compact_without_a_window_records_a_checkpoint_the_next_context_uses() {
    // A long single-turn session (far past the default 32,000-token budget): `mnemo compact` with
    // no window once sized the fold for the whole history, so the checkpoint left most of it raw,
    // and the next `mnemo context` passed it over (`prefix_over_budget`) and dropped instead.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let session = "5b1f0c7e-2f4d-4a8e-9c31-7d2e6a90b1c4";
    let (file, calls) = claude_code_session(dir.path(), session, 60, 150);
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    let before = ok_json(&mnemo(&store, &["--json", "context", session]));
    assert!(before["diagnostics"]["tokens_before"].as_u64().unwrap() > 100_000, "{}", before["diagnostics"]);
    let compacted = ok_json(&mnemo(&store, &["--json", "compact", session]));
    assert!(compacted["recorded"].is_object(), "{compacted}");
    let context = ok_json(&mnemo(&store, &["--json", "context", session]));
    let diagnostics = &context["diagnostics"];
    assert_eq!(diagnostics["decision"], "replaced", "{diagnostics}");
    assert_eq!(context["boundary"]["checkpoint"], compacted["recorded"]["checkpoint"]["checkpoint"]);
    assert_eq!(diagnostics["fit"]["fits"], true, "{diagnostics}");
    assert!(diagnostics["fit"]["dropped"].is_null(), "nothing dropped once compacted: {diagnostics}");
    let (orphans, open) = unpaired(&context);
    assert!(orphans.is_empty() && open.is_empty(), "{orphans:?} {open:?}");
    assert!(calls > 100, "{calls}");
}

#[test]
fn a_claude_code_file_that_writes_earlier_lines_again_imports_them_once() {
    // Claude Code writes history again into a session file in some modes (with
    // `--input-format stream-json` each exchange was preceded by the earlier ones once more): the
    // real session's first turn (lines 2-14) written again before its second turn. The whole file
    // was refused ("event id ... is used by an earlier line"), so the session was never captured.
    let dir = tempfile::tempdir().unwrap();
    let original = real("small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    let text = std::fs::read_to_string(&original).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut repeated: Vec<&str> = lines[..14].to_vec();
    repeated.extend(&lines[1..14]);
    repeated.extend(&lines[14..]);
    let file = dir.path().join("4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    std::fs::write(&file, repeated.join("\n") + "\n").unwrap();

    let once = dir.path().join("once");
    let expected = ok_json(&mnemo(&once, &["--json", "import", original.to_str().unwrap()]));
    let store = dir.path().join("store");
    let imported = ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    let records = |report: &Value| report[0]["records"].clone();
    assert_eq!(records(&imported), records(&expected), "{imported}");
    let skipped = &imported[0]["skipped"];
    assert_eq!(skipped["repeated line (an earlier line's uuid, saying the same)"], 9, "{imported}");
    let session = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
    let show = |store: &Path| ok_json(&mnemo(store, &["--json", "show", session]));
    assert_eq!(show(&store), show(&once));
    // Importing it again appends nothing.
    let again = ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    assert_eq!((again[0]["records"].as_u64(), again[0]["already"].as_u64()), (Some(0), Some(22)), "{again}");

    // The same uuid saying something else is still refused, naming the line.
    let mut changed: Value = serde_json::from_str(repeated[14]).unwrap();
    changed["message"]["content"] = Value::String("something else".into());
    let changed = changed.to_string();
    repeated[14] = &changed;
    std::fs::write(&file, repeated.join("\n") + "\n").unwrap();
    let refused = mnemo(&dir.path().join("refused"), &["import", file.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl:15:"), "{error}");
}

#[test]
fn a_claude_code_result_whose_call_line_is_missing_keeps_the_file_importable() {
    // Claude Code sometimes writes a tool result whose assistant line (the call) it never wrote
    // (a background task stopped mid-flight), and its compaction has dropped calls whose results
    // stay. The real session without its line 4 (the call that created hello.py): the whole file
    // was refused ("tool result for toolu_…, which no earlier tool call in this session made").
    let dir = tempfile::tempdir().unwrap();
    let original = real("small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    let text = std::fs::read_to_string(original).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let call: Value = serde_json::from_str(lines.remove(3)).unwrap();
    let id = call["message"]["content"][0]["id"].as_str().unwrap().to_owned();
    let file = dir.path().join("4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let store = dir.path().join("store");
    let imported = ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    assert_eq!(imported[0]["records"], 21, "{imported}");
    let skipped = &imported[0]["skipped"];
    assert_eq!(
        skipped["tool_result block without its tool_use in the session (its content kept as a system event)"],
        1,
        "{imported}"
    );
    // The result's content is in the log, as the host's note naming the call.
    let log = ok_json(&mnemo(&store, &["--json", "log", "--limit", "100"]));
    let kept: Vec<&Value> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["record"]["content"]["text"].as_str().is_some_and(|t| t.contains(&id)))
        .collect();
    assert_eq!(kept.len(), 1, "{log}");
    assert_eq!(kept[0]["record"]["role"], "system");
    let text = kept[0]["record"]["content"]["text"].as_str().unwrap();
    assert!(text.ends_with("File created successfully at: /tmp/private/hello.py"), "{text}");
    // The next request pairs every result with its call.
    let session = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
    let context = ok_json(&mnemo(&store, &["--json", "context", session]));
    let (orphans, open) = unpaired(&context);
    assert!(orphans.is_empty() && open.is_empty(), "{orphans:?} {open:?}");
}

#[test]
fn a_codex_output_whose_call_is_missing_keeps_the_rollout_importable() {
    // Codex has written rollouts with a `function_call_output` whose `function_call` is not in
    // them (its own next request then fails with "No tool call found for function call output").
    // The 0.128 rollout fixture without the `function_call` of `call_Vb7Yt2Lm9Qe4Hx1Kc6Ws3Ju8`:
    // the whole rollout was refused ("tool result for call_…, which no earlier tool call in this
    // session made").
    let dir = tempfile::tempdir().unwrap();
    let fixture = written("codex-rollout-0.128.jsonl");
    let call = "call_Vb7Yt2Lm9Qe4Hx1Kc6Ws3Ju8";
    let text = std::fs::read_to_string(&fixture).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| {
            let value: Value = serde_json::from_str(line).unwrap();
            !(value["payload"]["type"] == "function_call" && value["payload"]["call_id"] == call)
        })
        .collect();
    assert_eq!(kept.len() + 1, text.lines().count());
    let file = dir.path().join("rollout-2026-05-04T08-12-01-019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21.jsonl");
    std::fs::write(&file, kept.join("\n") + "\n").unwrap();

    let whole = ok_json(&mnemo(&dir.path().join("whole"), &["--json", "import", fixture.to_str().unwrap()]));
    let store = dir.path().join("store");
    let imported = ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    assert_eq!(imported[0]["records"].as_u64().unwrap() + 1, whole[0]["records"].as_u64().unwrap());
    let skipped = &imported[0]["skipped"];
    let label = "response_item output whose call is not in the rollout (its content kept as a system event)";
    assert_eq!(skipped[label], 1, "{imported}");
    let log = ok_json(&mnemo(&store, &["--json", "log", "--limit", "100"]));
    let note = log
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["record"]["content"]["text"].as_str().filter(|t| t.contains(call)))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(note.contains("41:    amount.round_dp(2)"), "{note}");
    let context = ok_json(&mnemo(&store, &["--json", "context", "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21"]));
    let (orphans, open) = unpaired(&context);
    assert!(orphans.is_empty() && open.is_empty(), "{orphans:?} {open:?}");
}

#[test]
fn a_claude_code_result_for_a_call_of_another_session_of_the_file_keeps_it_importable() {
    // A file that goes on from a session it resumed keeps that session's lines under their own
    // `sessionId`; a result written after the resumption, under the new `sessionId`, for a call
    // made before it is no result of the new session. The file was refused ("tool result for
    // toolu_…, which no earlier tool call in this session made").
    let dir = tempfile::tempdir().unwrap();
    let original = real("small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl");
    let text = std::fs::read_to_string(original).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let resumed = "9d0e1f2a-3b4c-4d5e-8f60-718293a4b5c6";
    let call: Value = serde_json::from_str(lines[3]).unwrap();
    let id = call["message"]["content"][0]["id"].clone();
    let mut result: Value = serde_json::from_str(lines[7]).unwrap();
    result["sessionId"] = Value::String(resumed.into());
    result["uuid"] = Value::String("bbbbbbbb-0000-4000-8000-000000000001".into());
    result["message"]["content"] = serde_json::json!([{"tool_use_id": id, "type": "tool_result",
        "content": "[Request interrupted by user for tool use]", "is_error": true}]);
    let mut request: Value = serde_json::from_str(lines[14]).unwrap();
    request["sessionId"] = Value::String(resumed.into());
    request["uuid"] = Value::String("bbbbbbbb-0000-4000-8000-000000000002".into());
    let mut file_lines: Vec<String> = lines[..4].iter().map(|l| (*l).to_owned()).collect();
    file_lines.extend([result.to_string(), request.to_string()]);
    let file = dir.path().join(format!("{resumed}.jsonl"));
    std::fs::write(&file, file_lines.join("\n") + "\n").unwrap();

    let store = dir.path().join("store");
    let imported = ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    assert_eq!(imported[0]["sessions"], 2, "{imported}");
    let label = "tool_result block without its tool_use in the session (its content kept as a system event)";
    assert_eq!(imported[0]["skipped"][label], 1, "{imported}");
    for session in ["4c2ddfdc-b619-4525-8d03-1950fb1b0257", resumed] {
        let context = ok_json(&mnemo(&store, &["--json", "context", session]));
        let (orphans, _) = unpaired(&context);
        assert!(orphans.is_empty(), "{session}: {orphans:?}");
    }
}

#[test]
fn a_claude_code_request_with_screenshots_past_the_record_limit_imports() {
    // Claude Code keeps pasted screenshots in the request's line as base64: three of 2.2 MB make
    // a 6.6 MB line, past the log's 4 MiB record limit, though the request converts to a few
    // bytes (the images are not kept). The file was refused ("line is 6600… bytes, the limit is
    // 4194304"), the first line too long even to tell the format from.
    let dir = tempfile::tempdir().unwrap();
    let session = "7b7b7b7b-1111-4222-8333-444455556666";
    let base = serde_json::json!({"isSidechain": false, "userType": "external", "cwd": "/Users/dev/src/shots",
        "sessionId": session, "version": "2.1.7", "gitBranch": "main"});
    let image = |seed: u8| {
        let data: String = (0..2_200_000u32).map(|i| char::from(b'A' + ((i as u8) ^ seed) % 26)).collect();
        serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
    };
    let mut request = base.clone();
    request["type"] = "user".into();
    request["parentUuid"] = Value::Null;
    request["uuid"] = "c1c1c1c1-0000-4000-8000-000000000001".into();
    request["timestamp"] = "2026-01-10T10:00:00.000Z".into();
    request["message"] = serde_json::json!({"role": "user", "content": [
        {"type": "text", "text": "compare these three screenshots of the dashboard"}, image(1), image(2), image(3)]});
    let mut answer = base;
    answer["type"] = "assistant".into();
    answer["parentUuid"] = request["uuid"].clone();
    answer["uuid"] = "c1c1c1c1-0000-4000-8000-000000000002".into();
    answer["timestamp"] = "2026-01-10T10:00:03.000Z".into();
    answer["message"] = serde_json::json!({"model": "claude-opus-4-5-20251101", "id": "msg_2", "type": "message",
        "role": "assistant", "content": [{"type": "text", "text": "The third one has the sidebar collapsed."}],
        "stop_reason": null, "usage": {}});
    let text = format!("{request}\n{answer}\n");
    assert!(text.len() > 6_000_000);
    let folder = dir.path().join("projects");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join(format!("{session}.jsonl")), text).unwrap();

    let store = dir.path().join("store");
    let synced = mnemo(&store, &["sync", folder.to_str().unwrap()]);
    assert!(synced.status.success(), "{}", String::from_utf8_lossy(&synced.stderr));
    let shown = ok_json(&mnemo(&store, &["--json", "show", session]));
    let shown = shown.to_string();
    assert!(
        shown.contains("compare these three screenshots") && shown.contains("sidebar collapsed"),
        "{shown}"
    );
}

#[test]
fn a_claude_code_session_the_user_renamed_is_listed_by_that_name() {
    // `/rename` appends `{"type":"custom-title","customTitle":…,"sessionId":…}` to the session
    // file, and newer Claude Code writes its generated titles as `ai-title` lines; Claude Code's
    // own session list shows the user's name first, else the latest generated title. Both were
    // skipped as unknown lines, so `sessions` showed the first request instead.
    let dir = tempfile::tempdir().unwrap();
    let session = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
    let text = std::fs::read_to_string(real(&format!("small-with-subagents/{session}.jsonl"))).unwrap();
    let title = |kind: &str, key: &str, value: &str| {
        serde_json::json!({"type": kind, key: value, "sessionId": session}).to_string()
    };
    let listed = |name: &str, lines: Vec<String>| {
        let file = dir.path().join(name).join(format!("{session}.jsonl"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let store = dir.path().join(name).join("store");
        ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
        let sessions = ok_json(&mnemo(&store, &["--json", "sessions"]));
        sessions[0]["title"].clone()
    };
    let real_lines = || text.lines().map(str::to_owned).collect::<Vec<_>>();

    let mut renamed = real_lines();
    renamed.push(title("ai-title", "aiTitle", "Create hello files"));
    renamed.push(title("custom-title", "customTitle", "hello files"));
    renamed.push(title("ai-title", "aiTitle", "Delete the JavaScript file"));
    assert_eq!(listed("renamed", renamed), "hello files");

    let mut generated = real_lines();
    generated.push(title("ai-title", "aiTitle", "Create hello files"));
    assert_eq!(listed("generated", generated), "Create hello files");

    // A name written before the session's first line titles it when it opens.
    let mut first = vec![title("custom-title", "customTitle", "hello files")];
    first.extend(real_lines());
    assert_eq!(listed("first", first), "hello files");
}

#[test]
fn show_names_an_untitled_session_by_its_first_request_as_sessions_does() {
    // The real session's only `summary` line titles another session: `sessions` lists it by its
    // first request, and `show` printed "(untitled)".
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = real("incremental-subagents/turn-2.jsonl");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    let listed = ok_json(&mnemo(&store, &["--json", "sessions"]));
    let request = listed[0]["display_title"].as_str().unwrap().to_owned();
    assert_eq!(listed[0]["title_from_request"], true);
    let shown = mnemo(&store, &["show", "e9fb405b-169f-40eb-9396-7e75076f045d"]);
    assert!(shown.status.success());
    let first = String::from_utf8_lossy(&shown.stdout).lines().next().unwrap_or_default().to_owned();
    assert!(first.contains(&format!("“{request}”")) && !first.contains("(untitled)"), "{first}");
}

#[test]
fn a_claude_code_name_longer_than_the_title_limit_is_cut_not_refused() {
    // A title line past the log's 512-byte title limit (400 × "é" is 800 bytes) refused the whole
    // file ("field `title`: is 800 bytes, the limit is 512 bytes"); it is cut at a character.
    let dir = tempfile::tempdir().unwrap();
    let session = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
    let mut text = std::fs::read_to_string(real(&format!("small-with-subagents/{session}.jsonl"))).unwrap();
    let name = "é".repeat(400);
    text.push_str(
        &serde_json::json!({"type": "custom-title", "customTitle": name, "sessionId": session}).to_string(),
    );
    text.push('\n');
    let file = dir.path().join(format!("{session}.jsonl"));
    std::fs::write(&file, text).unwrap();
    let store = dir.path().join("store");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));
    let sessions = ok_json(&mnemo(&store, &["--json", "sessions"]));
    assert_eq!(sessions[0]["title"].as_str().unwrap(), "é".repeat(256));
}

#[test]
fn a_codex_call_whose_output_is_missing_is_answered_in_the_next_request() {
    // Codex rollouts hold calls whose `function_call_output` was never written (a turn interrupted
    // while the tool ran). The call imports, and the next request must not carry it unanswered: a
    // provider refuses a request with a call and no output ("No tool output found for function
    // call"). The 0.128 rollout fixture without the output of `call_Vb7Yt2Lm9Qe4Hx1Kc6Ws3Ju8`.
    let dir = tempfile::tempdir().unwrap();
    let fixture = written("codex-rollout-0.128.jsonl");
    let call = "call_Vb7Yt2Lm9Qe4Hx1Kc6Ws3Ju8";
    let text = std::fs::read_to_string(&fixture).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| {
            let value: Value = serde_json::from_str(line).unwrap();
            !(value["payload"]["type"] == "function_call_output" && value["payload"]["call_id"] == call)
        })
        .collect();
    assert_eq!(kept.len() + 1, text.lines().count());
    let file = dir.path().join("rollout-2026-05-04T08-12-01-019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21.jsonl");
    std::fs::write(&file, kept.join("\n") + "\n").unwrap();
    let store = dir.path().join("store");
    ok_json(&mnemo(&store, &["--json", "import", file.to_str().unwrap()]));

    let context = ok_json(&mnemo(&store, &["--json", "context", "019e1b7a-3c44-7f10-8a2d-5b9e0c7d4e21"]));
    let (orphans, open) = unpaired(&context);
    assert!(orphans.is_empty() && open.is_empty(), "{orphans:?} {open:?}");
    assert_eq!(context["diagnostics"]["fit"]["unanswered_calls"], serde_json::json!([call]), "{context}");
    // The answer says what happened and comes right after the run of calls and outputs the call is in.
    let items = context["items"].as_array().unwrap();
    let at = items.iter().position(|i| i["event"]["content"]["id"] == call).unwrap();
    let answer = items[at + 1..]
        .iter()
        .take_while(|i| {
            matches!(i["event"]["content"]["kind"].as_str(), Some("function_call" | "function_response"))
        })
        .find(|i| i["event"]["content"]["kind"] == "function_response" && i["event"]["content"]["id"] == call)
        .unwrap_or_else(|| panic!("no answer in the run after the call: {context}"));
    assert!(answer["event"]["id"].as_str().unwrap().starts_with("history-unanswered:"), "{answer}");
    assert_eq!(answer["event"]["content"]["isError"], true, "{answer}");
    assert!(
        answer["event"]["content"]["result"].as_str().unwrap().contains("No result was recorded"),
        "{answer}"
    );
    // The log is unchanged: the answer is the request's, not a record.
    let log = ok_json(&mnemo(&store, &["--json", "log", "--limit", "200"]));
    assert!(!log.to_string().contains("history-unanswered:"), "the answer reached the log");
}
