//! SearchHistory's query and cursor on arbitrary text, against a store holding a session: an answer
//! within the limit or a refusal in the tool's shape, never a panic.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use mnemo::{Config, HistoryContext, HistorySearchRequest, Mnemo};

const SAMPLE: &[u8] = include_bytes!("../../crates/mnemo-cli/samples/coding-session.jsonl");

static STORE: LazyLock<(tempfile::TempDir, Mnemo)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap_or_else(|e| panic!("{e}"));
    mnemo.import_transcript(SAMPLE, "sample").unwrap_or_else(|e| panic!("{e}"));
    (dir, mnemo)
});

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let (query, cursor) = match text.split_once('\u{0}') {
        Some((query, cursor)) => (query.to_owned(), Some(cursor.to_owned())),
        None => (text.into_owned(), None),
    };
    let limit = bytes.first().map(|b| i64::from(*b) - 4);
    let request = HistorySearchRequest { query, limit, cursor };
    let (_, mnemo) = &*STORE;
    let outcome = mnemo.search_history(&request, &HistoryContext::default(), None);
    if let Ok(Ok(found)) = outcome {
        assert!(found.rows.len() <= 10);
    }
});
