//! Golden fixtures of the on-disk format, checked in: a whole store written by format version 1,
//! and the raw envelope bytes with their expected fields. Run with `MNEMO_BLESS=1` to write them
//! anew — only when the format version changes.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mnemo_core::{Position, StreamId, StreamRevision};
use mnemo_log::{
    AppendOutcome, AppendRequest, Envelope, ExpectedRevision, FjallLog, GENESIS_HASH, LogBackend, LogOptions,
    ManualClock, NewRecord,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The fixed content of the golden log: (stream, kind, schema, record bytes).
fn golden_records() -> Vec<(&'static str, u16, u16, &'static [u8])> {
    vec![
        ("session/golden-1", 1, 1, br#"{"incognito":false,"memory":"enabled","session":"golden-1","subagent":false}"#),
        ("session/golden-1", 4, 1, br#"{"author":"user","content":{"kind":"text","text":"hello"},"id":"e1","invocationId":"r1","partial":false,"role":"user","runId":"r1","sessionId":"golden-1","ts":1767225600000,"turnId":"t1"}"#),
        ("session/golden-2", 1, 1, br#"{"incognito":true,"memory":"disabled","session":"golden-2","subagent":false}"#),
        ("session/golden-1", 5, 1, br#"{"session":"golden-1","status":"completed","turn":"t1"}"#),
    ]
}

fn write_golden_store(dir: &Path) {
    let options =
        LogOptions { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1000)), ..LogOptions::default() };
    let log = FjallLog::open(dir, options).unwrap();
    for (stream, kind, kind_schema, bytes) in golden_records() {
        let record = NewRecord::new(kind, kind_schema, bytes.to_vec());
        let request = AppendRequest::new(StreamId::new(stream).unwrap(), ExpectedRevision::Any, vec![record]);
        assert!(matches!(log.append(request).unwrap(), AppendOutcome::Appended(_)));
    }
}

fn encode_envelopes(envelopes: &[Envelope]) -> Vec<u8> {
    let mut out = Vec::new();
    for envelope in envelopes {
        let bytes = envelope.encode();
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

fn decode_envelopes(mut bytes: &[u8]) -> Vec<Envelope> {
    let mut envelopes = Vec::new();
    while !bytes.is_empty() {
        let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        envelopes.push(Envelope::decode(&bytes[4..4 + len]).unwrap());
        bytes = &bytes[4 + len..];
    }
    envelopes
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn golden_fixtures_decode() {
    let store = fixtures().join("store-v1");
    let raw = fixtures().join("envelopes-v1.bin");
    if std::env::var_os("MNEMO_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&store);
        write_golden_store(&store);
        let log = FjallLog::open(&store, LogOptions::default()).unwrap();
        let envelopes: Vec<_> = log.scan(Position::FIRST).map(Result::unwrap).collect();
        std::fs::write(&raw, encode_envelopes(&envelopes)).unwrap();
        drop(log);
        let _ = std::fs::remove_file(store.join(mnemo_log::LOCK_FILE_NAME));
    }

    // The raw envelopes: every field as written, a chain from the genesis hash, identical re-encoding.
    let bytes = std::fs::read(&raw).unwrap();
    let envelopes = decode_envelopes(&bytes);
    assert_eq!(encode_envelopes(&envelopes), bytes);
    let expected = golden_records();
    assert_eq!(envelopes.len(), expected.len());
    let mut previous = GENESIS_HASH;
    for (index, (envelope, (stream, kind, schema, record))) in envelopes.iter().zip(&expected).enumerate() {
        assert_eq!(envelope.position, Position(index as u64 + 1));
        assert_eq!(envelope.stream.as_str(), *stream);
        assert_eq!((envelope.kind, envelope.kind_schema), (*kind, *schema));
        assert_eq!(envelope.record, record.to_vec());
        assert_eq!(envelope.timestamp.0, 1_767_225_600_000 + 1000 * index as u64);
        assert_eq!(envelope.previous_hash, previous);
        previous = envelope.hash;
    }
    assert_eq!(envelopes[3].revision, StreamRevision(2));
    assert_eq!(envelopes[2].revision, StreamRevision(0));

    // The whole store: this build opens it, verifies it and reads the same envelopes.
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&store, copy.path());
    assert!(!copy.path().join(mnemo_log::STORE_MARKER_FILE_NAME).exists());
    let log = FjallLog::open(copy.path(), LogOptions::default()).unwrap();
    // A store made before stores carried a marker is recognised by the storage engine's own files.
    assert!(copy.path().join(mnemo_log::STORE_MARKER_FILE_NAME).is_file());
    assert_eq!(log.verify_chain(&mut |_| {}).unwrap(), 4);
    let read: Vec<_> = log.scan(Position::FIRST).map(Result::unwrap).collect();
    assert_eq!(read, envelopes);
    let stream = log.read_stream(&StreamId::new("session/golden-1").unwrap(), StreamRevision(0), 10).unwrap();
    assert_eq!(stream.iter().map(|e| e.position.0).collect::<Vec<_>>(), vec![1, 2, 4]);
}
