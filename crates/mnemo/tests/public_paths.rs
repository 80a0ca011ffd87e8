//! A host written against `mnemo::` paths only. It names the types of the facade's signatures that
//! once lived only in the crates behind it (a clock, the append result, the log backend and its
//! envelopes, the inner error types), so the facade cannot stop exporting one unnoticed; a second
//! test checks that neither this host nor `examples/host.rs` names a crate behind the facade.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::compaction::{CompactionError, ContextOptions};
use mnemo::log::{
    Appended, Clock, Durability, Envelope, ExpectedRevision, LogBackend, LogError, RevisionConflict,
};
use mnemo::memory::MemoryError;
use mnemo::records::{
    Author, Content, EncodeError, EventId, InvocationId, Record, RecordKind, Role, RunId, RuntimeEvent,
    SessionId, StreamId, StreamRevision, TextContent, TimestampMs, TurnId,
};
use mnemo::stages::{PipelineError, StageReport, StageStatus, Stats};
use mnemo::transcript::{ImportFormat, TranscriptError};
use mnemo::{Config, Error, ErrorCategory, Mnemo};

const NOW_MS: u64 = 1_767_225_600_000;

/// A host's own clock: every append is stamped with the same time.
#[derive(Debug)]
struct FixedClock(TimestampMs);

impl Clock for FixedClock {
    fn now(&self) -> TimestampMs {
        self.0
    }
}

fn said(session: &SessionId, id: &str, text: &str) -> Record {
    let mut event = RuntimeEvent::new(
        EventId::new(id).unwrap(),
        InvocationId::new("run-1").unwrap(),
        RunId::new("run-1").unwrap(),
        session.clone(),
        TurnId::new("t1").unwrap(),
        TimestampMs(NOW_MS),
        Role::User,
        Author::User,
    );
    event.content = Some(Content::Text(TextContent::new(text)));
    Record::RuntimeEvent(event)
}

/// Which part of the store failed, told apart by the inner error's own type.
fn failed_part(error: &Error) -> &'static str {
    match error {
        Error::Log(inner) => {
            let _: &LogError = inner;
            "log"
        }
        Error::Pipeline(inner) => {
            let _: &PipelineError = inner;
            "stages"
        }
        Error::Compaction(inner) => {
            let _: &CompactionError = inner;
            "compaction"
        }
        Error::Memory(inner) => {
            let _: &MemoryError = inner;
            "memory"
        }
        Error::Encode(inner) => {
            let _: &EncodeError = inner;
            "encoding"
        }
        Error::Transcript(inner) => {
            let _: &TranscriptError = inner;
            "transcript"
        }
        Error::Conflict { conflict, .. } => {
            let _: &RevisionConflict = conflict;
            "conflict"
        }
        _ => "other",
    }
}

#[test]
fn a_host_names_every_type_it_meets_through_mnemo_paths() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(FixedClock(TimestampMs(NOW_MS + 5)));
    let config = Config { clock, durability: Durability::SyncData, ..Config::default() };
    let mnemo = Mnemo::open(dir.path(), config).unwrap();
    let session = SessionId::new("s1").unwrap();
    let stream = StreamId::session(&session);

    let appended: Appended =
        mnemo.append(&stream, ExpectedRevision::NoStream, &[said(&session, "e1", "hello")]).unwrap();
    let log: &dyn LogBackend = mnemo.log();
    let envelope: Envelope = log.read(appended.last_position).unwrap().unwrap();
    assert_eq!(envelope.timestamp, TimestampMs(NOW_MS + 5), "the host's clock stamps appends");
    assert_eq!(RecordKind::from_code(envelope.kind), Some(RecordKind::RuntimeEvent));

    let conflict = mnemo.append(&stream, ExpectedRevision::NoStream, &[said(&session, "e2", "again")]);
    let conflict = conflict.unwrap_err();
    assert_eq!(failed_part(&conflict), "conflict");
    assert!(
        matches!(&conflict, Error::Conflict { conflict, .. } if conflict.actual == Some(StreamRevision(0))),
        "{conflict}"
    );
    assert_eq!(conflict.category(), ErrorCategory::Conflict);

    let unknown = SessionId::new("nobody").unwrap();
    let missing = mnemo.compaction().context(&unknown, &ContextOptions::default()).unwrap_err();
    assert_eq!(failed_part(&missing), "compaction", "{missing}");
    assert_eq!(missing.category(), ErrorCategory::Input);

    let bad = mnemo.import(b"{\"kind\":\"nonsense\"}\n", "bad.jsonl", ImportFormat::Mnemo).unwrap_err();
    assert_eq!(failed_part(&bad), "transcript", "{bad}");

    mnemo.catch_up().unwrap();
    let stats: Stats = mnemo.stats().unwrap();
    let reports: &[StageReport] = &stats.stages;
    assert!(reports.iter().all(|stage| stage.watermark == appended.last_position), "{reports:?}");
    let status: Vec<StageStatus> = mnemo.stage_status();
    assert_eq!(status.len(), reports.len());
    mnemo.close().unwrap();
}

#[test]
fn the_hosts_name_no_crate_behind_the_facade() {
    let root = env!("CARGO_MANIFEST_DIR");
    let internal: Vec<String> = ["core", "log", "pipeline", "history", "compaction", "memory", "transcript"]
        .iter()
        .map(|name| format!("mnemo_{name}"))
        .collect();
    for host in ["tests/public_paths.rs", "examples/host.rs"] {
        let source = std::fs::read_to_string(format!("{root}/{host}")).unwrap();
        for name in &internal {
            assert!(!source.contains(name.as_str()), "{host} names {name}; a host names only mnemo::");
        }
    }
}
