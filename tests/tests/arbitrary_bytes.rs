//! Arbitrary bytes into every entry point that parses untrusted input: the envelope decoder, each
//! transcript importer and the search tool's arguments. None may panic; a decoder must refuse or
//! return exactly what was encoded, and the search tool must answer or refuse in its own shape.
//! The same entry points have cargo-fuzz targets in `fuzz/` (`just fuzz`) for longer runs.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::LazyLock;

use mnemo::history::{HistoryContext, HistorySearchRequest};
use mnemo::records::SessionId;
use mnemo::transcript::{ImportFormat, parse_import};
use mnemo::{Config, Mnemo};
use mnemo_log::{Envelope, FjallLog, LogBackend, LogOptions};
use proptest::prelude::*;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/mnemo-cli/samples/coding-session.jsonl");

/// Real envelopes, to mutate: a few appended to a throwaway log.
static ENVELOPES: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import_transcript(&std::fs::read(SAMPLE).unwrap(), "sample").unwrap();
    drop(mnemo);
    let log = FjallLog::open(dir.path(), LogOptions::default()).unwrap();
    log.scan(mnemo::records::Position(1)).map(|e| e.unwrap().encode()).collect()
});

/// A store with the sample imported, shared by the search cases.
static STORE: LazyLock<(tempfile::TempDir, Mnemo)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let mnemo = Mnemo::open(dir.path(), Config::default()).unwrap();
    mnemo.import_transcript(&std::fs::read(SAMPLE).unwrap(), "sample").unwrap();
    (dir, mnemo)
});

/// Lines that look like each format, so that mutations reach deep into the parsers.
const SEEDS: &[&str] = &[
    r#"{"kind":"session","session":"s1"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"hi"}]}"#,
    r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]"#,
    r#"{"type":"session_meta","payload":{"id":"x","timestamp":"2026-01-01T00:00:00Z"}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
    r#"{"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}
{"type":"assistant","sessionId":"s","uuid":"u2","parentUuid":"u1","timestamp":"2026-01-01T00:00:01Z","message":{"role":"assistant","content":[{"type":"text","text":"yo"}]}}"#,
];

fn mutate(seed: &[u8], edits: &[(usize, u8)]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for (at, byte) in edits {
        if bytes.is_empty() {
            bytes.push(*byte);
        } else {
            let at = at % bytes.len();
            if byte % 3 == 0 { bytes.insert(at, *byte) } else { bytes[at] = *byte }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_decode_as_an_envelope_by_accident(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        // A hash over the fields guards every envelope, so random bytes must be refused.
        prop_assert!(Envelope::decode(&bytes).is_err());
    }

    #[test]
    fn a_mutated_envelope_is_refused_or_unchanged(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
    ) {
        let original = &ENVELOPES[which.index(ENVELOPES.len())];
        let mutated = mutate(original, &edits);
        if let Ok(envelope) = Envelope::decode(&mutated) {
            prop_assert_eq!(envelope.encode(), original.clone());
        }
    }

    #[test]
    fn every_importer_refuses_or_parses_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        format in prop::sample::select(ImportFormat::ALL.to_vec()),
    ) {
        let _ = parse_import(&bytes, "arbitrary", format);
    }

    #[test]
    fn every_importer_refuses_or_parses_mutated_transcripts(
        seed in prop::sample::select(SEEDS.to_vec()),
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        format in prop::sample::select(ImportFormat::ALL.to_vec()),
    ) {
        let bytes = mutate(seed.as_bytes(), &edits);
        if let Err(error) = parse_import(&bytes, "mutated", format) {
            prop_assert!(error.line >= 1 && !error.reason.is_empty(), "{error:?}");
        }
    }

    #[test]
    fn the_search_tool_answers_or_refuses_any_arguments(
        query in ".{0,300}",
        limit in prop::option::of(any::<i64>()),
        cursor in prop::option::of(".{0,80}"),
        in_session in any::<bool>(),
    ) {
        let (_, mnemo) = &*STORE;
        let session = SessionId::new("sess-2026-01-05-auth").unwrap();
        let context = HistoryContext {
            current_session: in_session.then_some(&session),
            ..HistoryContext::default()
        };
        let request = HistorySearchRequest { query, limit, cursor };
        let outcome = mnemo.history().search(&request, &context, None).unwrap();
        if let Ok(found) = outcome {
            prop_assert!(found.rows.len() <= 10);
        }
    }
}
