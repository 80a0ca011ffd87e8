//! Context-budget history search (events-and-history.md §3.10, decision 0148): off by default,
//! switched on by the pipeline spec; earlier events of the session that the ranked search index
//! finds for the new request come back into the history once compaction folded them, under the
//! policy's limits, in log order, without breaking the history budget.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use std::path::Path;

use mnemo::compaction::{AssembledHistory, CompactOptions, ContextOptions, HistoryItem};
use mnemo::records::SessionId;
use mnemo::{Config, Mnemo};

const SESSION: &str = "s-search";

fn sid() -> SessionId {
    SessionId::new(SESSION).unwrap()
}

/// `turns` turns of a request, a call, its result and a reply; turn 3 is about a rare subject.
fn turns_jsonl(turns: usize, last_request: &str) -> String {
    let mut out = format!("{{\"kind\":\"session\",\"session\":\"{SESSION}\",\"title\":\"long\"}}\n");
    for i in 0..turns {
        let t = format!("t{i:03}");
        let request = if i + 1 == turns {
            last_request.to_owned()
        } else if i == 3 {
            "Turn 3: move the zanzibar ledger export to the quarterly schedule".to_owned()
        } else {
            format!("Turn {i}: update src/module_{i}.rs and run the tests")
        };
        let padding = "the module keeps its state in a map and the tests cover every branch ".repeat(4);
        let result = if i == 3 {
            format!("zanzibar export moved; {padding}")
        } else {
            format!("ok: {i} passed; {padding}")
        };
        out.push_str(&format!(
            "{{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"{request}\"}}]}}\n\
             {{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"tool_call\",\"id\":\"c{i}\",\"name\":\"shell\",\"args\":{{\"cmd\":\"cargo test -p crate_{i}\"}}}}]}}\n\
             {{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"tool\",\"parts\":[{{\"type\":\"tool_result\",\"id\":\"c{i}\",\"name\":\"shell\",\"result\":\"{result}\"}}]}}\n\
             {{\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"role\":\"model\",\"parts\":[{{\"type\":\"text\",\"text\":\"Done with turn {i}.\"}}]}}\n\
             {{\"kind\":\"turn_end\",\"session\":\"{SESSION}\",\"turn\":\"{t}\",\"status\":\"completed\"}}\n"
        ));
    }
    out
}

/// A store under the default pipeline with `config` added to the `latest-checkpoint` stage.
fn store(config: &str) -> (tempfile::TempDir, Mnemo) {
    let dir = tempfile::tempdir().unwrap();
    let default =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/default.toml"))
            .unwrap();
    let spec = default.replacen(
        "mid_turn_reserve_tail_events = 1\n",
        &format!("mid_turn_reserve_tail_events = 1\n{config}\n"),
        1,
    );
    assert_ne!(spec, default, "the default pipeline still has the line the test extends");
    let path = dir.path().join("pipeline.toml");
    std::fs::write(&path, spec).unwrap();
    let mnemo =
        Mnemo::open(&dir.path().join("store"), Config { pipeline: Some(path), ..Config::default() }).unwrap();
    let transcript = turns_jsonl(30, "Where did the zanzibar ledger export go?");
    mnemo.import_transcript(transcript.as_bytes(), "gen").unwrap();
    let options = CompactOptions::default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let outcome = runtime.block_on(mnemo.compaction().compact(&sid(), &options)).unwrap();
    assert!(outcome.recorded.is_some(), "turn 3 is folded into a checkpoint");
    (dir, mnemo)
}

fn retrieved(history: &AssembledHistory) -> Vec<(Vec<u64>, String)> {
    history
        .items
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Retrieved { positions, text } => {
                Some((positions.iter().map(|p| p.0).collect(), text.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn history_search_is_off_by_default() {
    let (_dir, mnemo) = store("max_history_tokens = 2000");
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    assert!(retrieved(&history).is_empty());
    assert_eq!(history.diagnostics.history_search, None);
}

#[test]
fn a_folded_turn_that_matches_the_request_comes_back_in_log_order_within_the_budget() {
    let (_dir, mnemo) = store("max_history_tokens = 2000\nhistory_search = true");
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    let report =
        history.diagnostics.history_search.clone().expect("no history search report: it did not run");
    assert_eq!(report.query.as_deref(), Some("where did the zanzibar ledger export go"));
    let found = retrieved(&history);
    assert_eq!(found.len(), 1, "{:?}", history.items);
    let (positions, text) = &found[0];
    assert!(text.contains("zanzibar ledger export to the quarterly schedule"), "{text}");
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "log order: {positions:?}");
    assert_eq!(report.events, positions.len() as u64);
    assert!(report.hits_taken >= 1 && report.hits_taken <= 5, "{report:?}");
    // It sits between the checkpoint and the raw tail, and the history still fits.
    assert!(matches!(history.items[0], HistoryItem::Checkpoint { .. }));
    assert!(matches!(history.items[1], HistoryItem::Retrieved { .. }));
    assert!(history.diagnostics.tokens_after <= history.diagnostics.max_history_tokens);
    // The latest request itself is in the tail, never retrieved again.
    let tail: Vec<u64> = history
        .items
        .iter()
        .filter_map(|i| match i {
            HistoryItem::Event { position, .. } => Some(position.0),
            _ => None,
        })
        .collect();
    assert!(positions.iter().all(|p| !tail.contains(p)));
}

#[test]
fn the_limits_bound_hits_neighbours_and_tokens() {
    let (_dir, mnemo) = store(
        "max_history_tokens = 2000\nhistory_search = true\nhistory_search_max_results = 1\nhistory_search_around = 0",
    );
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    let report =
        history.diagnostics.history_search.clone().expect("no history search report: it did not run");
    assert_eq!((report.hits_taken, report.events), (1, 1), "{report:?}");

    let (_dir, mnemo) =
        store("max_history_tokens = 2000\nhistory_search = true\nhistory_search_max_tokens = 60");
    let history = mnemo.compaction().context(&sid(), &ContextOptions::default()).unwrap();
    let report =
        history.diagnostics.history_search.clone().expect("no history search report: it did not run");
    assert!(report.skipped_events > 0, "an event over the budget is skipped and counted: {report:?}");
    assert!(report.tokens <= 60, "{report:?}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[stage]]\nname = \"latest-checkpoint\"\n[stage.config]\nhistory_search_max_results = 11\n",
    )
    .unwrap();
    let error = Mnemo::open(&dir.path().join("store"), Config { pipeline: Some(path), ..Config::default() })
        .unwrap_err();
    assert!(error.to_string().contains("history_search_max_results must be 1 to 10"), "{error}");
}

#[test]
fn the_history_search_pipeline_switches_it_on_with_the_spec_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/history-search.toml");
    let mnemo =
        Mnemo::open(&dir.path().join("store"), Config { pipeline: Some(path), ..Config::default() }).unwrap();
    let policy = mnemo.compaction().policy().unwrap();
    assert!(policy.history_search);
    assert_eq!(
        (policy.history_search_max_results, policy.history_search_around, policy.history_search_max_tokens),
        (5, 1, 4096)
    );
    let default = Mnemo::open(&dir.path().join("plain"), Config::default()).unwrap();
    assert!(!default.compaction().policy().unwrap().history_search);
}
