//! Compaction through the facade: checkpoints, the latest-checkpoint stage, assembly, every
//! fail-open row of compaction.md §6.1, the invariants of §6.3, and conversation copy.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use mnemo::compaction::{
    AssembledHistory, CompactOptions, Connection, ContextOptions, Decision, FinishReason, HistoryItem,
    MidTurnOptions, MidTurnOutcome, OverflowLatch, OverflowRecovery, ProviderCompactionRequest,
    ProviderCompactor, ProviderOverflow, SummarizeError, Summarizer, SummarizerIdentity, SummaryRequest,
    SummaryResponse,
};
use mnemo::log::ExpectedRevision;
use mnemo::memory::BoxFuture;
use mnemo::records::{
    CheckpointPhase, CheckpointRecord, CopyBoundary, Position, Record, RuntimeEvent, SessionId, StreamId,
    TurnId,
};
use mnemo::{Config, Mnemo};
use serde_json::{Value, json};

const SESSION: &str = "s-long";

/// `turns` turns of session `SESSION` from `first`: a request, a tool call and its result, a reply.
fn turns_jsonl(first: usize, turns: usize, with_session_line: bool) -> String {
    let mut out = String::new();
    if with_session_line {
        out.push_str(&format!("{{\"kind\":\"session\",\"session\":\"{SESSION}\",\"title\":\"long\"}}\n"));
    }
    for i in first..first + turns {
        let t = format!("t{i:03}");
        let padding = "the module keeps its state in a map and the tests cover every branch ".repeat(4);
        out.push_str(&format!(
            "{{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"Turn {i}: update src/module_{i}.rs and run the tests\"}}]}}\n"
        ));
        out.push_str(&format!(
            "{{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"tool_call\",\"id\":\"c{i}\",\"name\":\"shell\",\"args\":{{\"cmd\":\"cargo test -p crate_{i}\"}}}}]}}\n"
        ));
        out.push_str(&format!(
            "{{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"tool\",\"parts\":[{{\"type\":\"tool_result\",\"id\":\"c{i}\",\"name\":\"shell\",\"result\":\"ok: {i} passed; {padding}\"}}]}}\n"
        ));
        out.push_str(&format!(
            "{{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"text\",\"text\":\"Updated src/module_{i}.rs; the tests pass.\"}}]}}\n"
        ));
        out.push_str(&format!(
            "{{\"kind\":\"turn_end\",\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"status\":\"completed\"}}\n"
        ));
    }
    out
}

fn spec(dir: &Path, config: &str) -> std::path::PathBuf {
    let path = dir.join("pipeline.toml");
    let text = format!(
        "[[stage]]\nname = \"session-catalog\"\n\n[[stage]]\nname = \"latest-checkpoint\"\n\n[stage.config]\n{config}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A store with `turns` turns imported, under a policy given as TOML keys.
fn store(turns: usize, config: &str) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = spec(dir.path(), config);
    let mnemo =
        Mnemo::open(&dir.path().join("store"), Config { pipeline: Some(pipeline), ..Config::default() })
            .unwrap();
    mnemo.import_transcript(turns_jsonl(0, turns, true).as_bytes(), "gen").unwrap();
    (dir, mnemo)
}

/// Appends more turns to the session.
fn append_turns(mnemo: &Mnemo, first: usize, turns: usize) {
    let transcript =
        mnemo::transcript::parse_transcript(turns_jsonl(first, turns, false).as_bytes(), "more").unwrap();
    let records: Vec<Record> = transcript.sessions[0].1.iter().map(|r| r.record.clone()).collect();
    let appended = mnemo.append(&StreamId::session(&sid()), ExpectedRevision::Any, &records).unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
}

fn sid() -> SessionId {
    SessionId::new(SESSION).unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn context(mnemo: &Mnemo) -> AssembledHistory {
    mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap()
}

fn checkpoint_records(mnemo: &Mnemo) -> Vec<CheckpointRecord> {
    mnemo
        .log_entries(Position(1), usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "checkpoint_recorded")
        .map(|e| serde_json::from_value(e.record).unwrap())
        .collect()
}

fn compact_with(mnemo: &Mnemo, summarizer: Arc<dyn Summarizer>) -> mnemo::compaction::CompactionOutcome {
    let options = CompactOptions { summarizer: Some(summarizer), ..CompactOptions::default() };
    block_on(mnemo.compaction().compact(&sid(), &options)).unwrap()
}

fn compact(mnemo: &Mnemo) -> mnemo::compaction::CompactionOutcome {
    block_on(mnemo.compaction().compact(&sid(), &CompactOptions::default())).unwrap()
}

/// A summarizer that answers with a fixed text (and finish reason), or an error, and records what it
/// was asked.
#[derive(Debug)]
struct Scripted {
    answer: Result<(String, FinishReason), SummarizeError>,
    seen: Mutex<Vec<SummaryRequest>>,
    unlimited: bool,
}

impl Scripted {
    fn text(text: &str) -> Arc<Scripted> {
        Arc::new(Scripted {
            answer: Ok((text.to_owned(), FinishReason::Stop)),
            seen: Mutex::default(),
            unlimited: false,
        })
    }
    fn finish(text: &str, finish: FinishReason) -> Arc<Scripted> {
        Arc::new(Scripted { answer: Ok((text.to_owned(), finish)), seen: Mutex::default(), unlimited: false })
    }
    fn unlimited(text: &str) -> Arc<Scripted> {
        Arc::new(Scripted {
            answer: Ok((text.to_owned(), FinishReason::Stop)),
            seen: Mutex::default(),
            unlimited: true,
        })
    }
    fn error(error: SummarizeError) -> Arc<Scripted> {
        Arc::new(Scripted { answer: Err(error), seen: Mutex::default(), unlimited: false })
    }
}

impl Summarizer for Scripted {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: "scripted".to_owned(), prompt_version: "1".to_owned() }
    }
    fn limits_input(&self) -> bool {
        !self.unlimited
    }
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
        self.seen.lock().unwrap().push(request.clone());
        let answer = self.answer.clone().map(|(text, finish)| SummaryResponse { text, finish });
        Box::pin(async move { answer })
    }
}

const GOOD: &str = "## Goal\nUpdate src/module_1.rs and run the tests.\n\n## Progress\n### Done\n- Ran `cargo test -p crate_1`.\n\n## Next Steps\n1. Continue with the next module.\n\n## Critical Context\n- src/module_1.rs";

fn items_event_ids(history: &AssembledHistory) -> Vec<String> {
    history.events().map(|e| e.id.to_string()).collect()
}

#[test]
fn a_long_session_compacts_and_assembly_reads_only_the_checkpoint_and_the_tail() {
    let (_dir, mnemo) = store(40, "max_history_tokens = 2000");
    let before = context(&mnemo);
    assert!(before.diagnostics.compaction_due, "{:?}", before.diagnostics);
    let outcome = block_on(mnemo.compaction().prepare_history(&sid(), &CompactOptions::default())).unwrap();
    let recorded = outcome.recorded.expect("the writer records a checkpoint");
    assert_eq!(recorded.checkpoint.coverage.event_count, 39 * 4, "everything but the latest turn is folded");
    assert_eq!(outcome.history.notes[0].kind, "context_compacted");
    let report = recorded.checkpoint.faithfulness.clone().unwrap();
    assert!(report.checked > 0 && report.unsupported.is_empty(), "{report:?}");
    assert_eq!(recorded.checkpoint.manifest.summarizer, "mnemo.extractive");

    let history = context(&mnemo);
    assert_eq!(history.diagnostics.decision, Decision::Replaced);
    assert_eq!(history.boundary.as_ref().unwrap().checkpoint, recorded.checkpoint.checkpoint);
    assert!(
        matches!(&history.items[0], HistoryItem::Checkpoint { text, .. } if text.starts_with("<maka_history_compact_checkpoint"))
    );
    assert_eq!(history.items.len(), 1 + 4);
    assert_eq!(history.diagnostics.events_read, 4, "only the tail is read");
    assert!(history.diagnostics.tokens_after < history.diagnostics.tokens_before);
}

#[test]
fn rolling_sends_the_previous_summary_and_only_newly_folded_events() {
    let (_dir, mnemo) = store(12, "max_history_tokens = 4000");
    let first = compact(&mnemo).recorded.unwrap();
    append_turns(&mnemo, 12, 3);
    let scripted = Scripted::text(GOOD);
    let second = compact_with(&mnemo, scripted.clone()).recorded.unwrap();
    assert_eq!(second.checkpoint.previous.as_ref(), Some(&first.checkpoint.checkpoint));
    assert!(second.checkpoint.coverage.event_count > first.checkpoint.coverage.event_count);
    let seen = scripted.seen.lock().unwrap();
    let request = &seen[0];
    assert!(request.previous_summary.is_some());
    let sent = serde_json::to_string(&request.messages).unwrap();
    assert!(sent.contains("previous continuation summary"));
    assert!(sent.contains("Turn 12:") && !sent.contains("Turn 3:"), "only new events after the summary");
    assert_eq!(context(&mnemo).boundary.unwrap().checkpoint, second.checkpoint.checkpoint);
}

#[test]
fn manual_compaction_twice_is_already_compacted_and_writes_nothing() {
    let (_dir, mnemo) = store(8, "");
    assert!(compact(&mnemo).recorded.is_some());
    let again = compact(&mnemo);
    assert!(again.recorded.is_none());
    assert_eq!(again.history.diagnostics.reason.as_deref(), Some("already_compacted"));
    assert_eq!(again.history.diagnostics.decision, Decision::Replaced);
    assert_eq!(checkpoint_records(&mnemo).len(), 1);
}

#[test]
fn rebuilding_the_stage_after_deleting_its_keyspaces_recovers_the_same_checkpoint() {
    let (_dir, mnemo) = store(10, "");
    let recorded = compact(&mnemo).recorded.unwrap();
    append_turns(&mnemo, 10, 2);
    let digest_before =
        mnemo.stats().unwrap().stages.into_iter().find(|s| s.name == "latest-checkpoint").unwrap();
    let rebuilt = mnemo.rebuild(Some("latest-checkpoint")).unwrap();
    assert_eq!(rebuilt[0].digest, digest_before.digest);
    let history = context(&mnemo);
    assert_eq!(history.boundary.unwrap().checkpoint, recorded.checkpoint.checkpoint);
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}

#[test]
fn assembly_as_of_an_earlier_position_sees_the_log_as_it_was() {
    let (_dir, mnemo) = store(10, "");
    let head_before = mnemo.log().head();
    let recorded = compact(&mnemo).recorded.unwrap();
    let then = mnemo
        .compaction()
        .context(&sid(), &ContextOptions { as_of: Some(head_before), ..ContextOptions::default() })
        .unwrap();
    assert!(then.boundary.is_none());
    assert_eq!(then.position, head_before);
    let now = mnemo
        .compaction()
        .context(&sid(), &ContextOptions { as_of: Some(recorded.position), ..ContextOptions::default() })
        .unwrap();
    assert_eq!(now.boundary.unwrap().checkpoint, recorded.checkpoint.checkpoint);
    let early = mnemo
        .compaction()
        .context(&sid(), &ContextOptions { as_of: Some(Position(8)), ..ContextOptions::default() })
        .unwrap();
    assert_eq!(early.events().count(), 6, "the events at positions 2-5, 7 and 8");
}

/// A summarizer that never finishes: the process "crashes" (the future is dropped) between
/// summarizing and the durable append.
#[derive(Debug)]
struct Hanging;

impl Summarizer for Hanging {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: "hanging".to_owned(), prompt_version: "1".to_owned() }
    }
    fn summarize<'a>(
        &'a self,
        _: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
        Box::pin(std::future::pending())
    }
}

#[test]
fn a_crash_between_summarizing_and_the_durable_append_leaves_no_checkpoint() {
    let (_dir, mnemo) = store(10, "");
    let options = CompactOptions { summarizer: Some(Arc::new(Hanging)), ..CompactOptions::default() };
    let cut = block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_millis(200),
            mnemo.compaction().compact(&sid(), &options),
        )
        .await
    });
    assert!(cut.is_err(), "the compaction was cut off");
    assert!(checkpoint_records(&mnemo).is_empty());
    let history = context(&mnemo);
    assert!(history.boundary.is_none());
    assert_eq!(history.diagnostics.decision, Decision::Unchanged);
    assert_eq!(history.events().count(), 40, "raw history, nothing lost");
    // The next compaction is not poisoned.
    assert!(compact(&mnemo).recorded.is_some());
}

/// Each writer fail-open row: its reason, its visible note, nothing persisted.
#[test]
fn every_writer_fail_open_row_records_nothing_and_says_why() {
    let invented = GOOD.replace("src/module_1.rs", "src/invented.rs").replace("crate_1", "crate_zzz");
    let cases: Vec<(Arc<Scripted>, &str, &str)> = vec![
        (Scripted::text("   "), "empty_summary", ""),
        (Scripted::finish(GOOD, FinishReason::Length), "output_length", ""),
        (Scripted::error(SummarizeError::Provider("boom".to_owned())), "provider_error", ""),
        (Scripted::text("Just prose."), "malformed_summary_missing_section", ""),
        (Scripted::text(&format!("{GOOD} and then:")), "malformed_summary_truncated", ""),
        (Scripted::text(&invented), "faithfulness_rejected", "faithfulness_max_unsupported_ratio = 0.2"),
        // Only content lines are removed when shortening: a summary whose sections hold one line
        // each cannot get shorter, and a summary too long for its room is refused.
        (
            Scripted::text(&format!("{GOOD} {}", "x".repeat(40_000))),
            "prefix_over_budget",
            "max_history_tokens = 6000",
        ),
    ];
    for (summarizer, reason, config) in cases {
        let (_dir, mnemo) = store(10, config);
        let outcome = compact_with(&mnemo, summarizer);
        assert!(outcome.recorded.is_none(), "{reason}");
        let diagnostics = &outcome.history.diagnostics;
        assert_eq!(diagnostics.decision, Decision::FailedOpen, "{reason}");
        assert_eq!(diagnostics.fail_open_reason.as_deref(), Some(reason));
        assert_eq!(outcome.history.notes[0].kind, "context_compaction_failed_open", "{reason}");
        assert!(checkpoint_records(&mnemo).is_empty(), "{reason}: nothing persisted");
        // The history fits without a checkpoint, so all of it is sent and the note says so: a
        // failed compaction never claims that history was omitted when none was.
        assert_eq!(outcome.history.events().count(), 40, "{reason}: the whole history is sent");
        assert!(diagnostics.fit.fits && diagnostics.fit.dropped.is_none(), "{reason}");
        assert_eq!(
            outcome.history.notes[0].text,
            format!("Compaction failed ({reason}); the whole history is sent, without a checkpoint."),
        );
    }
}

/// A summary too long for the room its tail leaves is shortened by whole lines, not refused.
#[test]
fn an_oversized_summary_is_shortened_rather_than_refused() {
    let huge = format!("{GOOD}\n{}", "- src/module_1.rs\n".repeat(4_000));
    for config in ["", "max_history_tokens = 6000"] {
        let (_dir, mnemo) = store(10, config);
        let outcome = compact_with(&mnemo, Scripted::text(&huge));
        let recorded = outcome.recorded.unwrap_or_else(|| panic!("{:?}", outcome.history.diagnostics));
        let diagnostics = &outcome.history.diagnostics;
        assert!(diagnostics.tokens_after < diagnostics.tokens_before, "{diagnostics:?}");
        assert!(diagnostics.fit.fits, "{diagnostics:?}");
        let mnemo_core::CheckpointBody::Text { summary, .. } = &recorded.checkpoint.body else {
            panic!("a text checkpoint")
        };
        assert!(summary.starts_with("## Goal") && summary.len() < huge.len(), "{summary}");
        assert!(summary.contains("## Critical Context"), "{summary}");
    }
}

#[test]
fn the_size_floor_and_input_budget_rows() {
    // A span over 10,000 tokens may not be replaced by a summary under 200.
    let (_dir, mnemo) = store(200, "max_history_tokens = 100000");
    let outcome = compact_with(&mnemo, Scripted::text(GOOD));
    assert_eq!(
        outcome.history.diagnostics.fail_open_reason.as_deref(),
        Some("malformed_summary_too_small_for_fold")
    );
}

/// A fold larger than the summarizer's input, even with every tool output omitted, was refused
/// before dispatch (`input_too_large`), so a bounded model could never compact a talk-heavy
/// session. It is now summarised in rolling parts, each within the input budget (decision 0195).
#[test]
fn a_fold_larger_than_a_bounded_summarizers_input_is_summarised_in_rolling_parts() {
    let (_dir, mnemo) = store(60, "max_history_tokens = 1000");
    // A summary of about 280 tokens: over the size floor, and small enough to roll forward.
    let summary = format!("{GOOD}\n{}", "- kept context line\n".repeat(50));
    let scripted = Scripted::text(&summary);
    let outcome = compact_with(&mnemo, scripted.clone());
    let recorded = outcome.recorded.unwrap_or_else(|| panic!("{:?}", outcome.history.diagnostics));
    let seen = scripted.seen.lock().unwrap().clone();
    assert!(seen.len() > 1, "one call could not hold the fold: {} calls", seen.len());
    assert_eq!(seen[0].previous_summary, None);
    for request in &seen[1..] {
        assert_eq!(request.previous_summary.as_deref(), Some(summary.trim()), "each part rolls forward");
    }
    for request in &seen {
        let chars = request.instructions.encode_utf16().count()
            + serde_json::to_string(&request.messages).unwrap().encode_utf16().count();
        assert!(chars <= 4_000, "a part of {chars} chars exceeds the 1,000-token input");
    }
    let mnemo_core::CheckpointBody::Text { summary: recorded_summary, .. } = &recorded.checkpoint.body else {
        panic!("a text checkpoint")
    };
    assert!(recorded_summary.contains("## Critical Context"), "{recorded_summary}");
    assert!(outcome.history.diagnostics.fit.fits, "{:?}", outcome.history.diagnostics);
}

#[test]
fn a_rolling_failure_never_lets_the_old_checkpoint_claim_new_events() {
    let (_dir, mnemo) = store(10, "");
    let old = compact(&mnemo).recorded.unwrap();
    append_turns(&mnemo, 10, 3);
    let outcome = compact_with(&mnemo, Scripted::error(SummarizeError::Provider("down".to_owned())));
    let history = &outcome.history;
    assert_eq!(history.diagnostics.decision, Decision::FailedOpen);
    let boundary = history.boundary.as_ref().expect("the old checkpoint is the fallback");
    assert_eq!(boundary.checkpoint, old.checkpoint.checkpoint);
    assert_eq!(boundary.covered_events, old.checkpoint.coverage.event_count, "coverage unchanged");
    let sent = items_event_ids(history);
    let turns: Vec<String> = history.events().map(|e| e.turn_id.to_string()).collect();
    // Every event the old checkpoint does not cover is sent raw (they fit), none is claimed by it,
    // and no covered event is sent twice.
    assert!(turns.iter().all(|t| t.as_str() >= "t009"), "only uncovered turns: {turns:?}");
    assert_eq!(sent.len(), 16);
    assert!(history.diagnostics.fit.fits && history.diagnostics.fit.dropped.is_none());
    assert_eq!(checkpoint_records(&mnemo).len(), 1);
    // Assembly afterwards still stands on the old checkpoint with every uncovered event raw.
    let after = context(&mnemo);
    assert_eq!(after.boundary.as_ref().unwrap().checkpoint, old.checkpoint.checkpoint);
    assert_eq!(after.events().count(), 4 + 3 * 4);
}

/// Appends a checkpoint record straight to the log (bypassing the writer).
fn append_checkpoint(mnemo: &Mnemo, checkpoint: CheckpointRecord) {
    let appended = mnemo
        .append(&StreamId::session(&sid()), ExpectedRevision::Any, &[Record::CheckpointRecorded(checkpoint)])
        .unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
}

fn session_events(mnemo: &Mnemo) -> Vec<RuntimeEvent> {
    mnemo
        .log_entries(Position(1), usize::MAX)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "runtime_event")
        .map(|e| serde_json::from_value(e.record).unwrap())
        .collect()
}

fn build(events: &[RuntimeEvent], summary: &str) -> CheckpointRecord {
    mnemo_compaction::testing::build_text(events, summary, None)
}

#[test]
fn every_replay_fail_open_row_ignores_the_checkpoint_and_falls_back_to_raw_history() {
    let cases = [
        "coverage_miss",
        "source_hash_mismatch",
        "prefix_over_budget",
        "replacement_not_smaller",
        "invalid_checkpoint",
    ];
    for reason in cases {
        let (_dir, mnemo) = store(6, "");
        let events = session_events(&mnemo);
        let checkpoint = match reason {
            "coverage_miss" => {
                let mut skipping = events[..7].to_vec();
                skipping.push(events[8].clone());
                build(&skipping, GOOD)
            }
            "source_hash_mismatch" => {
                let mut changed = events[..8].to_vec();
                changed[3].ts = mnemo_core::TimestampMs(changed[3].ts.0 + 1);
                build(&changed, GOOD)
            }
            "replacement_not_smaller" => {
                build(&events[..2], &format!("{GOOD}\n{}", "- src/module_1.rs\n".repeat(200)))
            }
            "prefix_over_budget" => {
                build(&events[..20], &format!("{GOOD}\n{}", "- src/module_1.rs\n".repeat(9_000)))
            }
            _ => {
                let mut invalid = build(&events[..8], GOOD);
                invalid.source_policy_version = "maka.compactable_runtime_event_projection.v0".to_owned();
                invalid
            }
        };
        append_checkpoint(&mnemo, checkpoint);
        let history = context(&mnemo);
        assert_eq!(history.diagnostics.decision, Decision::Unchanged, "{reason}");
        assert!(history.boundary.is_none(), "{reason}: a checkpoint that failed is not reported");
        assert_eq!(history.events().count(), 24, "{reason}: raw history");
        if reason == "invalid_checkpoint" {
            // The stage quarantines it at fold time: it is never even a candidate.
            assert_eq!(history.diagnostics.reason.as_deref(), Some("below_high_water"));
        } else {
            assert_eq!(
                history.diagnostics.skipped_reason_counts.get(reason),
                Some(&1),
                "{reason}: {:?}",
                history.diagnostics
            );
        }
    }
}

#[test]
fn every_selector_skip_row_leaves_raw_history() {
    let cases = [
        ("below_high_water", "", 6),
        ("max_history_tokens_missing", "max_history_tokens = 0", 6),
        ("insufficient_turns", "max_history_tokens = 1000\nhigh_water_ratio = 0.05", 1),
        ("lookup_miss", "max_history_tokens = 500\nmode = \"lookup\"", 6),
        ("replay_over_budget", "max_history_tokens = 150", 6),
    ];
    for (reason, config, turns) in cases {
        let (_dir, mnemo) = store(turns, config);
        let history = context(&mnemo);
        assert_eq!(
            history.diagnostics.reason.as_deref(),
            Some(reason),
            "{config}: {:?}",
            history.diagnostics
        );
        if reason == "below_high_water" || reason == "lookup_miss" {
            assert!(!history.diagnostics.compaction_due, "{reason}");
        }
        assert!(history.boundary.is_none());
        assert!(checkpoint_records(&mnemo).is_empty());
    }
}

#[test]
fn an_oversized_latest_turn_folds_everything_or_ends_the_turn() {
    let (_dir, mnemo) = store(6, "max_history_tokens = 900");
    let huge = format!(
        "{{\"session\":\"{SESSION}\",\"turn\":\"t900\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}\n",
        "word ".repeat(1000)
    );
    let transcript = mnemo::transcript::parse_transcript(huge.as_bytes(), "huge").unwrap();
    let records: Vec<Record> = transcript.sessions[0].1.iter().map(|r| r.record.clone()).collect();
    let appended = mnemo.append(&StreamId::session(&sid()), ExpectedRevision::Any, &records).unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
    let history = context(&mnemo);
    assert!(history.diagnostics.oversized_turn, "{:?}", history.diagnostics);
    let options = CompactOptions { summarizer: Some(Scripted::unlimited(GOOD)), ..CompactOptions::default() };
    let outcome = block_on(mnemo.compaction().prepare_history(&sid(), &options)).unwrap();
    let recorded = outcome.recorded.clone().unwrap_or_else(|| panic!("{:?}", outcome.history.diagnostics));
    assert_eq!(recorded.checkpoint.coverage.event_count, 25);
    assert_eq!(outcome.history.diagnostics.context_budget_exhausted, None);
    // The same, with a summarizer that fails: the turn ends with `summarizer_failed`.
    let (_dir, mnemo) = store(6, "max_history_tokens = 900");
    let appended = mnemo.append(&StreamId::session(&sid()), ExpectedRevision::Any, &records).unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
    let options = CompactOptions {
        summarizer: Some(Scripted::error(SummarizeError::Provider("x".to_owned()))),
        ..CompactOptions::default()
    };
    let outcome = block_on(mnemo.compaction().prepare_history(&sid(), &options)).unwrap();
    assert_eq!(outcome.history.diagnostics.context_budget_exhausted, Some("summarizer_failed"));
}

/// A provider compactor bound to `codex` / `gpt-5`, answering with `items` custom parts.
#[derive(Debug)]
struct Codex {
    items: usize,
}

impl ProviderCompactor for Codex {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: "codex".to_owned(), prompt_version: "remote-v2".to_owned() }
    }
    fn connection(&self) -> Connection {
        Connection {
            provider_type: "openai-codex".to_owned(),
            slug: "codex".to_owned(),
            model: "gpt-5".to_owned(),
        }
    }
    fn compact<'a>(
        &'a self,
        _: &'a ProviderCompactionRequest,
    ) -> BoxFuture<'a, Result<Vec<Value>, SummarizeError>> {
        let part = json!({"type": "custom", "kind": "openai.compaction", "providerMetadata": {"openai": {"itemId": "it-1", "encryptedContent": "c2VjcmV0"}}});
        let parts = vec![part; self.items];
        Box::pin(async move { Ok(parts) })
    }
}

#[test]
fn provider_state_replays_only_to_its_own_connection_and_never_as_text() {
    let (_dir, mnemo) = store(8, "");
    let codex = Codex { items: 1 }.connection();
    let options = CompactOptions {
        context: ContextOptions { connection: codex.clone(), ..ContextOptions::default() },
        provider_compactor: Some(Arc::new(Codex { items: 1 })),
        ..CompactOptions::default()
    };
    let recorded = block_on(mnemo.compaction().compact(&sid(), &options)).unwrap().recorded.unwrap();
    assert_eq!(recorded.checkpoint.version(), 3);
    let history = mnemo
        .compaction()
        .context(&sid(), &ContextOptions { connection: codex.clone(), ..ContextOptions::default() })
        .unwrap();
    assert!(
        matches!(&history.items[0], HistoryItem::ProviderState { message, .. } if message["content"][0]["kind"] == "openai.compaction")
    );
    assert!(!history.items.iter().any(|i| matches!(i, HistoryItem::Checkpoint { .. })));
    let other = Connection { model: "gpt-4".to_owned(), ..codex };
    let history = mnemo
        .compaction()
        .context(&sid(), &ContextOptions { connection: other, ..ContextOptions::default() })
        .unwrap();
    assert!(history.boundary.is_none());
    assert_eq!(history.diagnostics.skipped_reason_counts.get("provider_state_unreplayable"), Some(&1));
    // Two compaction items are invalid provider state.
    let (_dir, mnemo) = store(8, "");
    let options = CompactOptions {
        context: ContextOptions { connection: Codex { items: 2 }.connection(), ..ContextOptions::default() },
        provider_compactor: Some(Arc::new(Codex { items: 2 })),
        ..CompactOptions::default()
    };
    let outcome = block_on(mnemo.compaction().compact(&sid(), &options)).unwrap();
    assert_eq!(outcome.history.diagnostics.fail_open_reason.as_deref(), Some("invalid_provider_state"));
}

#[test]
fn mid_turn_compaction_keeps_the_anchor_and_never_splits_a_call() {
    let (_dir, mnemo) = store(30, "");
    let events = session_events(&mnemo);
    let current = TurnId::new("t029").unwrap();
    let anchor = events.iter().find(|e| e.turn_id == current).unwrap().id.clone();
    let request = MidTurnOptions::new(current.clone(), anchor.clone(), 100_000);
    let outcome =
        block_on(mnemo.compaction().compact_mid_turn(&sid(), &request, &CompactOptions::default())).unwrap();
    let MidTurnOutcome::Replaced { checkpoint, items } = outcome else { panic!("{outcome:?}") };
    assert_eq!(checkpoint.checkpoint.phase, CheckpointPhase::MidTurn);
    assert_eq!(checkpoint.checkpoint.head_anchor.as_ref().unwrap().event, anchor);
    assert!(
        matches!(&items[1], HistoryItem::Event { event, .. } if event.id == anchor),
        "block, then the anchor"
    );
    let history = context(&mnemo);
    assert_eq!(history.boundary.unwrap().phase, CheckpointPhase::MidTurn);
    // An anchor that is not durable fails open.
    let missing = MidTurnOptions { anchor: mnemo::records::EventId::new("nope").unwrap(), ..request };
    let outcome =
        block_on(mnemo.compaction().compact_mid_turn(&sid(), &missing, &CompactOptions::default())).unwrap();
    assert_eq!(
        outcome,
        MidTurnOutcome::FailOpen {
            detail: "no_safe_completed_span",
            reason: "head_anchor_not_durable".to_owned()
        }
    );
}

#[test]
fn copy_rebuilds_text_checkpoints_under_new_identities() {
    let (_dir, mnemo) = store(8, "");
    let recorded = compact(&mnemo).recorded.unwrap();
    let report = mnemo.compaction().copy(&sid(), None, None).unwrap();
    assert_eq!(report.events, 32);
    assert_eq!(report.checkpoints_rebuilt, 1);
    let copy = mnemo.compaction().context(&report.session, &ContextOptions::default()).unwrap();
    let boundary = copy.boundary.clone().unwrap();
    assert_ne!(boundary.checkpoint, recorded.checkpoint.checkpoint);
    assert_eq!(boundary.covered_events, recorded.checkpoint.coverage.event_count);
    let original: Vec<String> = context(&mnemo).events().map(|e| e.id.to_string()).collect();
    let copied: Vec<&RuntimeEvent> = copy.events().collect();
    assert!(copied.iter().all(|e| e.session_id == report.session && !original.contains(&e.id.to_string())));
    assert!(copied.iter().all(|e| e.turn_id.as_str() == "t007"), "turn ids are kept");
    // Through a turn: a branch holds that turn's prefix and the checkpoint is left out with it.
    let branch = mnemo
        .compaction()
        .copy(&sid(), Some(CopyBoundary::ThroughTurn(TurnId::new("t002").unwrap())), None)
        .unwrap();
    assert_eq!((branch.events, branch.checkpoints_rebuilt), (12, 0));
    // The same copy to the same target again returns the committed copy: nothing is appended twice.
    let head = mnemo.log().head();
    assert_eq!(mnemo.compaction().copy(&sid(), None, Some(report.session.clone())).unwrap(), report);
    assert_eq!(mnemo.log().head(), head);
}

#[test]
fn copy_drops_provider_state_and_refuses_bad_checkpoints() {
    let (_dir, mnemo) = store(6, "");
    let events = session_events(&mnemo);
    let mut provider = build(&events[..8], GOOD);
    provider.body =
        mnemo_core::CheckpointBody::Provider { state: mnemo_compaction::testing::provider_state() };
    append_checkpoint(&mnemo, provider);
    let report = mnemo.compaction().copy(&sid(), None, None).unwrap();
    assert_eq!((report.checkpoints_rebuilt, report.checkpoints_dropped), (0, 1));

    let mut superseded = build(&events[..12], GOOD);
    superseded.source_policy_version = "maka.compactable_runtime_event_projection.v0".to_owned();
    append_checkpoint(&mnemo, superseded);
    let error = mnemo.compaction().copy(&sid(), None, None).unwrap_err().to_string();
    assert!(
        error.contains("invalid history compact checkpoint") && error.contains("source policy"),
        "{error}"
    );

    let (_dir, mnemo) = store(6, "");
    let events = session_events(&mnemo);
    let mut skipping = events[..7].to_vec();
    skipping.push(events[8].clone());
    append_checkpoint(&mnemo, build(&skipping, GOOD));
    let error = mnemo.compaction().copy(&sid(), None, None).unwrap_err().to_string();
    assert!(error.contains("unmatched") && error.contains("coverage_miss"), "{error}");

    let (_dir, mnemo) = store(200, "");
    let events = session_events(&mnemo);
    let mut small = mnemo_compaction::build_checkpoint(mnemo_compaction::CheckpointInput {
        session: &sid(),
        covered: &events[..600],
        body: mnemo_compaction::BodyInput::Text { summary: GOOD.to_owned(), legacy: true },
        previous: None,
        phase: CheckpointPhase::PreTurn,
        head_anchor: None,
        extraction_boundary: None,
        now: None,
        manifest: mnemo_compaction::testing::manifest(),
        faithfulness: None,
        chars_per_token: 4,
    })
    .unwrap();
    small.body = mnemo_core::CheckpointBody::Text {
        summary: GOOD.to_owned(),
        summary_format: mnemo_core::SummaryFormat::SectionsV1,
    };
    append_checkpoint(&mnemo, small);
    let error = mnemo.compaction().copy(&sid(), None, None).unwrap_err().to_string();
    assert!(error.contains("malformed_summary_too_small_for_fold"), "{error}");
}

/// A summarizer that answers only once its gate opens.
#[derive(Debug)]
struct Gated {
    text: String,
    gate: Arc<tokio::sync::Notify>,
}

impl Summarizer for Gated {
    fn identity(&self) -> SummarizerIdentity {
        SummarizerIdentity { name: "gated".to_owned(), prompt_version: "1".to_owned() }
    }
    fn summarize<'a>(
        &'a self,
        _: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<SummaryResponse, SummarizeError>> {
        Box::pin(async move {
            self.gate.notified().await;
            Ok(SummaryResponse { text: self.text.clone(), finish: FinishReason::Stop })
        })
    }
}

#[test]
fn a_write_superseded_while_summarizing_fails_open_as_write_failed_and_records_nothing() {
    // Two compactions of one session race: the second records first, so the first's candidate
    // (same coverage, not its successor) is refused by the replacement rule before persistence.
    let (_dir, mnemo) = store(10, "");
    let gate = Arc::new(tokio::sync::Notify::new());
    let slow = Arc::new(Gated { text: GOOD.to_owned(), gate: Arc::clone(&gate) });
    let slow_options = CompactOptions { summarizer: Some(slow), ..CompactOptions::default() };
    let fast = Scripted::text(&GOOD.replace("Continue with", "Carry on with"));
    let fast_options = CompactOptions { summarizer: Some(fast), ..CompactOptions::default() };
    let session = sid();
    let (slow_outcome, fast_outcome) = block_on(async {
        let slow = mnemo.compaction().compact(&session, &slow_options);
        let fast = async {
            let outcome = mnemo.compaction().compact(&session, &fast_options).await;
            gate.notify_one();
            outcome
        };
        tokio::join!(slow, fast)
    });
    let recorded = fast_outcome.unwrap().recorded.expect("the first to reach the ledger records");
    let slow_outcome = slow_outcome.unwrap();
    assert!(slow_outcome.recorded.is_none());
    let diagnostics = &slow_outcome.history.diagnostics;
    assert_eq!(diagnostics.decision, Decision::FailedOpen);
    assert_eq!(diagnostics.fail_open_reason.as_deref(), Some("write_failed"));
    assert_eq!(slow_outcome.history.notes[0].kind, "context_compaction_failed_open");
    let records = checkpoint_records(&mnemo);
    assert_eq!(records.len(), 1, "only the winner is in the log");
    assert_eq!(records[0].checkpoint, recorded.checkpoint.checkpoint);
    assert_eq!(context(&mnemo).boundary.unwrap().checkpoint, recorded.checkpoint.checkpoint);
}

#[test]
fn a_checkpoint_appended_by_the_host_is_what_the_next_write_is_checked_against() {
    let (_dir, mnemo) = store(10, "");
    compact(&mnemo).recorded.expect("the coordinator now caches this checkpoint");
    append_turns(&mnemo, 10, 3);
    // The same session in another store, compacted over the longer history: a valid checkpoint that
    // supersedes the first, appended here by the host itself rather than through the coordinator.
    let (_other_dir, other) = store(10, "");
    append_turns(&other, 10, 3);
    let further = compact(&other).recorded.expect("recorded").checkpoint;
    append_checkpoint(&mnemo, further.clone());
    let outcome = compact(&mnemo);
    assert!(outcome.recorded.is_none(), "nothing new to fold past the host's checkpoint");
    assert_eq!(outcome.history.diagnostics.skipped_reason_counts.get("already_compacted"), Some(&1));
    assert_eq!(checkpoint_records(&mnemo).len(), 2);
    assert_eq!(context(&mnemo).boundary.unwrap().checkpoint, further.checkpoint);
}

/// The current turn of a 30-turn store and its anchor.
fn current_turn(mnemo: &Mnemo) -> (TurnId, mnemo::records::EventId) {
    let current = TurnId::new("t029").unwrap();
    let anchor = session_events(mnemo).iter().find(|e| e.turn_id == current).unwrap().id.clone();
    (current, anchor)
}

#[test]
fn mid_turn_waits_for_the_step_to_be_durable_and_fails_open_when_it_never_is() {
    let (_dir, mnemo) = store(30, "");
    let (turn, anchor) = current_turn(&mnemo);
    let head = mnemo.stats().unwrap().head;
    let mut request = MidTurnOptions::new(turn, anchor, 100_000);
    request.durable_through = Some(Position(head.0 + 5));
    request.ledger_wait = std::time::Duration::from_millis(50);
    let outcome =
        block_on(mnemo.compaction().compact_mid_turn(&sid(), &request, &CompactOptions::default())).unwrap();
    assert_eq!(
        outcome,
        MidTurnOutcome::FailOpen {
            detail: "no_safe_completed_span",
            reason: "ledger_wait_aborted".to_owned()
        }
    );
    assert!(checkpoint_records(&mnemo).is_empty());
    request.durable_through = Some(head);
    let outcome =
        block_on(mnemo.compaction().compact_mid_turn(&sid(), &request, &CompactOptions::default())).unwrap();
    assert!(matches!(outcome, MidTurnOutcome::Replaced { .. }), "{outcome:?}");
    // An unknown session is the caller's error, not a failed ledger read.
    let unknown = SessionId::new("nobody").unwrap();
    assert!(
        block_on(mnemo.compaction().compact_mid_turn(&unknown, &request, &CompactOptions::default()))
            .is_err()
    );
}

fn overflow(request: MidTurnOptions, step: u64) -> ProviderOverflow {
    ProviderOverflow {
        context_length_error: true,
        produced_output: false,
        steps_remaining: true,
        step,
        historical_images: false,
        request,
    }
}

#[test]
fn overflow_recovery_retries_once_and_otherwise_surfaces_the_provider_error() {
    let (_dir, mnemo) = store(30, "");
    let (turn, anchor) = current_turn(&mnemo);
    let request = MidTurnOptions::new(turn, anchor.clone(), 100_000);
    let recover = |latch: &mut OverflowLatch, overflow: &ProviderOverflow, options: &CompactOptions| {
        block_on(mnemo.compaction().recover_from_overflow(&sid(), latch, overflow, options)).unwrap()
    };
    let defaults = CompactOptions::default();
    // Not a context-length error, or output already seen: no retry, nothing recorded.
    let mut latch = OverflowLatch::default();
    let other = ProviderOverflow { context_length_error: false, ..overflow(request.clone(), 1) };
    assert_eq!(recover(&mut latch, &other, &defaults), OverflowRecovery::SurfaceProviderError);
    let streamed = ProviderOverflow { produced_output: true, ..overflow(request.clone(), 1) };
    assert_eq!(recover(&mut latch, &streamed, &defaults), OverflowRecovery::SurfaceProviderError);
    // Historical images are dropped first, and that is the turn's one retry.
    let images = ProviderOverflow { historical_images: true, ..overflow(request.clone(), 1) };
    assert_eq!(recover(&mut latch, &images, &defaults), OverflowRecovery::RetryWithoutImages);
    assert_eq!(
        recover(&mut latch, &overflow(request.clone(), 1), &defaults),
        OverflowRecovery::SurfaceProviderError
    );
    assert!(checkpoint_records(&mnemo).is_empty());
    // A failed compaction surfaces the provider's error with the reason `overflow`, recording nothing.
    let mut latch = OverflowLatch::default();
    let failing = CompactOptions {
        summarizer: Some(Scripted::error(SummarizeError::Provider("down".to_owned()))),
        ..CompactOptions::default()
    };
    let OverflowRecovery::FailedOpen { reason, detail, diagnostic } =
        recover(&mut latch, &overflow(request.clone(), 1), &failing)
    else {
        panic!("a failed compaction fails open");
    };
    assert_eq!((reason, detail, diagnostic.as_str()), ("overflow", "summarizer_failed", "provider_error"));
    assert!(checkpoint_records(&mnemo).is_empty());
    // At step 0 the compaction folds prior history only; the anchor stays in the resent tail.
    let mut latch = OverflowLatch::default();
    let OverflowRecovery::Resend { checkpoint, items } =
        recover(&mut latch, &overflow(request.clone(), 0), &defaults)
    else {
        panic!("the compaction replaces history");
    };
    assert_eq!(checkpoint.checkpoint.phase, CheckpointPhase::PreTurn);
    assert!(items.iter().any(|item| matches!(item, HistoryItem::Event { event, .. } if event.id == anchor)));
    assert_eq!(checkpoint_records(&mnemo).len(), 1);
    assert_eq!(recover(&mut latch, &overflow(request, 0), &defaults), OverflowRecovery::SurfaceProviderError);
}

#[test]
fn compaction_only_appends_a_checkpoint_and_coverage_only_grows() {
    // §6.3 invariants 1 (source immutability) and 4 (monotonic coverage).
    let (_dir, mnemo) = store(10, "");
    let before = mnemo.log_entries(Position(1), usize::MAX).unwrap();
    let first = compact(&mnemo).recorded.unwrap();
    let after = mnemo.log_entries(Position(1), usize::MAX).unwrap();
    assert_eq!(after.len(), before.len() + 1, "one record appended");
    assert_eq!(&after[..before.len()], &before[..], "nothing before it changed");
    assert_eq!(after[before.len()].kind, "checkpoint_recorded");
    append_turns(&mnemo, 10, 3);
    let second = compact(&mnemo).recorded.unwrap();
    assert!(second.checkpoint.coverage.event_count > first.checkpoint.coverage.event_count);
    assert_eq!(second.checkpoint.previous.as_ref(), Some(&first.checkpoint.checkpoint), "a successor");
    let events: Vec<RuntimeEvent> = session_events(&mnemo);
    assert_eq!(events.len(), 13 * 4, "the events themselves are never rewritten or removed");
}

const CLAUDE_SESSION: &str = "7d3f9a12-5b8e-4c61-a0d4-2e9b8c7f1a35";

/// A store holding the Claude Code session that Claude Code compacted (its fixture).
fn claude_compacted_store() -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = spec(dir.path(), "");
    let mnemo =
        Mnemo::open(&dir.path().join("store"), Config { pipeline: Some(pipeline), ..Config::default() })
            .unwrap();
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/claude-code-2.0-compaction.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    mnemo
        .import(&bytes, "claude-code-2.0-compaction.jsonl", mnemo::transcript::ImportFormat::ClaudeCode)
        .unwrap();
    (dir, mnemo)
}

fn claude_context(mnemo: &Mnemo) -> AssembledHistory {
    let session = SessionId::new(CLAUDE_SESSION).unwrap();
    mnemo.compaction().context(&session, &ContextOptions::default()).unwrap()
}

fn text_of(event: &RuntimeEvent) -> &str {
    match &event.content {
        Some(mnemo::records::Content::Text(text)) => &text.text,
        _ => "",
    }
}

#[test]
fn a_claude_code_compaction_starts_the_context_at_the_hosts_summary() {
    let (_dir, mnemo) = claude_compacted_store();
    let all = session_events(&mnemo);
    let summary = all.iter().position(|e| text_of(e).starts_with("This session is being continued")).unwrap();
    let history = claude_context(&mnemo);
    let texts: Vec<&str> = history.events().map(text_of).collect();
    assert!(
        texts[0].starts_with("This session is being continued from a previous conversation"),
        "the host's summary is the first message: {texts:?}"
    );
    assert_eq!(
        texts[1..],
        ["Continuing: the state machine is in `parseCsvLine`, and `npm test -- csv` passes."],
        "then what follows it, and nothing from before it"
    );
    let start = history.diagnostics.host_compaction.clone().expect("the start is reported");
    assert_eq!(start.event, all[summary].id.to_string());
    let compactable_before = all[..summary].iter().filter(|e| mnemo_compaction::is_compactable(e)).count();
    assert_eq!(start.left_out_events, compactable_before as u64);
    assert!(start.left_out_events >= 10, "the whole earlier conversation: {start:?}");
    assert_eq!(history.notes.len(), 1, "{:?}", history.notes);
    assert_eq!(history.notes[0].kind, "context_host_compacted");
    assert!(history.notes[0].text.contains(&start.event), "{}", history.notes[0].text);
    // The log keeps every event: only the request leaves the earlier ones out.
    assert_eq!(session_events(&mnemo), all);
}

#[test]
fn a_checkpoint_before_the_hosts_compaction_gives_way_to_it() {
    let (_dir, mnemo) = claude_compacted_store();
    let compactable: Vec<RuntimeEvent> =
        session_events(&mnemo).into_iter().filter(mnemo_compaction::is_compactable).collect();
    let boundary = compactable.iter().position(|e| text_of(e).starts_with("Claude Code compacted")).unwrap();
    let checkpoint = build(&compactable[..boundary], GOOD);
    let appended = mnemo
        .append(
            &StreamId::session(&SessionId::new(CLAUDE_SESSION).unwrap()),
            ExpectedRevision::Any,
            &[Record::CheckpointRecorded(checkpoint)],
        )
        .unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();
    let history = claude_context(&mnemo);
    assert_eq!(
        history.diagnostics.skipped_reason_counts.get("host_compaction_later"),
        Some(&1),
        "{:?}",
        history.diagnostics
    );
    assert!(history.boundary.is_none(), "the checkpoint is not used");
    assert_eq!(history.diagnostics.decision, Decision::Unchanged);
    assert!(
        matches!(&history.items[0], HistoryItem::Event { event, .. } if text_of(event).starts_with("This session is being continued"))
    );
    let start = history.diagnostics.host_compaction.expect("the start is reported");
    assert_eq!(
        start.left_out_events,
        boundary as u64 + 1,
        "every event before the summary, the note included"
    );
}

#[test]
fn a_failed_compaction_after_the_hosts_compaction_falls_back_to_its_summary_not_the_whole_history() {
    let (_dir, mnemo) = claude_compacted_store();
    let session = SessionId::new(CLAUDE_SESSION).unwrap();
    let more = turns_jsonl(0, 6, false).replace(SESSION, CLAUDE_SESSION);
    let transcript = mnemo::transcript::parse_transcript(more.as_bytes(), "more").unwrap();
    let records: Vec<Record> = transcript.sessions[0].1.iter().map(|r| r.record.clone()).collect();
    let appended = mnemo.append(&StreamId::session(&session), ExpectedRevision::Any, &records).unwrap();
    mnemo.catch_up_to(appended.last_position).unwrap();

    let failing = Scripted::error(SummarizeError::Provider("boom".to_owned()));
    let options = CompactOptions { summarizer: Some(failing), ..CompactOptions::default() };
    let outcome = block_on(mnemo.compaction().compact(&session, &options)).unwrap();
    assert!(outcome.recorded.is_none());
    let history = &outcome.history;
    assert_eq!(history.diagnostics.decision, Decision::FailedOpen);
    assert_eq!(history.diagnostics.fail_open_reason.as_deref(), Some("provider_error"));
    let first = history.events().next().unwrap();
    assert!(
        text_of(first).starts_with("This session is being continued"),
        "the fallback starts at the host's summary, not at {:?}",
        text_of(first)
    );
    assert_eq!(history.events().count(), 2 + 6 * 4, "the summary, the reply after it, the six turns");
    assert_eq!(history.diagnostics.host_compaction.as_ref().map(|s| s.left_out_events), Some(14));
    let kinds: Vec<&str> = history.notes.iter().map(|n| n.kind.as_str()).collect();
    assert_eq!(kinds, ["context_compaction_failed_open", "context_host_compacted"]);
}
