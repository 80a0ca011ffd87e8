//! Process faults beyond SIGKILL: a file-size limit that makes writes fail mid-append, and a journal
//! torn at random offsets after the bytes of the first acknowledged appends. Each round runs the
//! `fault-writer` child on a fresh store, then reopens the store here without the fault and checks
//! that nothing acknowledged is lost silently: the file-size fault loses nothing; a torn journal that
//! cut later acknowledged appends is refused naming exactly those positions, and once the loss is
//! accepted the chain and every stage verify and appends work again.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;
use std::process::Output;

use mnemo::log::ExpectedRevision;
use mnemo::records::{Position, StreamId};
use mnemo::{Config, Mnemo};
use mnemo_acceptance::children;
use mnemo_acceptance::sim::{Rng, event_records, seed_from_env};

const FSIZE_ROUNDS: u64 = 3;
const TORN_ROUNDS: u64 = 6;
/// Appends the torn-journal child acknowledges before it notes where the journal's bytes end.
const TORN_ACKED_APPENDS: u64 = 16;
/// An `End` marker closes each journal batch with a little-endian checksum whose last bytes may be
/// zero, so the real end of the acknowledged bytes is at most this far past the last non-zero byte.
const JOURNAL_TRAILING_ZEROS_MAX: u64 = 9;

fn fault_writer(dir: &Path, seed: u64, mode: &str, amount: u64) -> Output {
    children::fault_writer(env!("CARGO_BIN_EXE_fault-writer"), dir, seed, mode, amount)
}

fn acks(lines: &[&str]) -> Vec<u64> {
    children::acks(lines.iter().copied())
}

/// Reopens without the fault: every acknowledged position is there, the chain and every stage verify,
/// and a new append lands right after the head. Returns the number of envelopes verified.
fn reopen_and_check(dir: &Path, acknowledged: &[u64], context: &str) -> u64 {
    let mnemo =
        Mnemo::open(dir, Config::default()).unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    let head = mnemo.log().head();
    for position in acknowledged {
        let envelope = mnemo.log().read(Position(*position)).unwrap();
        assert!(envelope.is_some(), "{context}: acknowledged position {position} is missing (head {head})");
    }
    let verification = mnemo.verify(&mut |_| {}).unwrap_or_else(|e| panic!("{context}: verify failed: {e}"));
    assert!(verification.ok(), "{context}: {verification:?}");
    assert_eq!(verification.envelopes, head.0, "{context}: the chain must cover the whole log");
    let stream = StreamId::new("session/after-fault").unwrap();
    let records = event_records(&mut Rng::new(7), "after-fault", 0, 2);
    let appended = mnemo.append(&stream, ExpectedRevision::Any, &records).unwrap();
    assert_eq!(appended.first_position, head.next(), "{context}");
    verification.envelopes
}

#[test]
fn a_file_size_limit_fails_the_append_names_the_limit_stops_the_writer_and_loses_nothing() {
    let seed = seed_from_env();
    eprintln!("file-size fault seed: MNEMO_SEED={seed}");
    let mut rng = Rng::new(seed);
    let (mut acknowledged_total, mut verified_total) = (0, 0);
    for round in 0..FSIZE_ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let limit = 192 * 1024 + rng.below(640 * 1024);
        let context = format!("round {round}, limit {limit} bytes, seed {seed}");
        let output = fault_writer(dir.path(), seed.wrapping_add(round), "fsize", limit);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{context}: the child failed: {:?}\n{stderr}", output.status);
        let lines: Vec<&str> = stdout.lines().collect();
        let error = lines
            .iter()
            .find_map(|l| l.strip_prefix("error "))
            .unwrap_or_else(|| panic!("{context}: no append failed under the limit\n{stdout}\n{stderr}"));
        let after = lines.iter().find_map(|l| l.strip_prefix("after ")).unwrap();
        // The limit stops the log writer or, when a stage's commit meets it first, that stage, and
        // appends are refused while a stage is stopped: either way appends stop at once, and the
        // message names the cause, never the storage engine's own dump.
        let stopped =
            |message: &str| message.contains("stopped taking appends") || message.contains("has stopped");
        assert!(stopped(error), "{context}: the failure should say the writer or a stage stopped: {error}");
        assert!(stopped(after), "{context}: the next append must fail fast: {after}");
        assert!(!error.contains("FjallError") && !after.contains("FjallError"), "{context}: {error}");
        if error.contains("stopped taking appends") {
            assert!(
                error.contains("file-size limit"),
                "{context}: the failure should name its cause: {error}"
            );
        }
        let acknowledged = acks(&lines);
        assert!(acknowledged.len() as u64 >= 24, "{context}: too few appends before the fault");
        verified_total += reopen_and_check(dir.path(), &acknowledged, &context);
        acknowledged_total += acknowledged.len();
        eprintln!("{context}: {} acknowledged, failure: {error}", acknowledged.len());
    }
    eprintln!(
        "{FSIZE_ROUNDS} file-size faults survived: {acknowledged_total} acknowledged appends kept, \
         {verified_total} envelopes verified"
    );
}

/// The last non-zero byte of a journal, plus one.
fn written_end(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i as u64 + 1)
}

#[test]
fn a_journal_torn_after_the_first_acknowledged_bytes_is_refused_naming_exactly_the_later_loss() {
    let seed = seed_from_env();
    eprintln!("torn journal seed: MNEMO_SEED={seed}");
    let mut rng = Rng::new(seed);
    let (mut acknowledged_total, mut verified_total) = (0, 0);
    for round in 0..TORN_ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let output = fault_writer(dir.path(), seed.wrapping_add(round), "torn", TORN_ACKED_APPENDS);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "round {round}: the child failed: {:?}\n{stderr}", output.status);
        let lines: Vec<&str> = stdout.lines().collect();
        let marker = lines.iter().position(|l| l.starts_with("journal ")).unwrap();
        let mut fields = lines[marker].rsplitn(2, ' ');
        let acked_end: u64 = fields.next().unwrap().parse().unwrap();
        let journal = Path::new(fields.next().unwrap().strip_prefix("journal ").unwrap()).to_path_buf();
        // Only the appends acknowledged before the marker are known to lie before the tear.
        let acknowledged = acks(&lines[..marker]);
        assert!(!acknowledged.is_empty());

        let end = written_end(&journal);
        let from = acked_end + JOURNAL_TRAILING_ZEROS_MAX;
        assert!(end > from, "round {round}: the child wrote nothing after the acknowledged bytes");
        let offset = from + rng.below(end - from + 1);
        let file = std::fs::OpenOptions::new().write(true).open(&journal).unwrap();
        file.set_len(offset).unwrap();
        file.sync_all().unwrap();
        drop(file);

        let context = format!("round {round}, journal torn at {offset} of {end} bytes, seed {seed}");
        let later = acks(&lines[marker..]);
        let last_acknowledged = acknowledged.iter().chain(&later).max().copied().unwrap();
        match Mnemo::open(dir.path(), Config::default()) {
            Ok(mnemo) => assert!(mnemo.log().head().0 >= last_acknowledged, "{context}: silent loss"),
            Err(mnemo::Error::Log(mnemo_log::LogError::AcknowledgedLost { head, lost })) => {
                assert_eq!(lost.last.0, last_acknowledged, "{context}");
                assert_eq!(lost.first, head.next(), "{context}");
                assert!(acknowledged.iter().all(|p| *p <= head.0), "{context}: the tear was after them");
                let config = Config { accept_loss: Some(lost), ..Config::default() };
                drop(Mnemo::open(dir.path(), config).unwrap_or_else(|e| panic!("{context}: {e}")));
            }
            Err(error) => panic!("{context}: {error}"),
        }
        let verified = reopen_and_check(dir.path(), &acknowledged, &context);
        // What survived of the appends after the marker is a dense prefix: positions with no gaps.
        let kept = later.iter().filter(|p| **p <= verified).count();
        eprintln!(
            "{context}: {} of {} later appends kept, the rest refused until accepted, {verified} envelopes verified",
            kept,
            later.len()
        );
        acknowledged_total += acknowledged.len();
        verified_total += verified;
    }
    eprintln!(
        "{TORN_ROUNDS} torn journals survived: {acknowledged_total} acknowledged appends kept, \
         {verified_total} envelopes verified"
    );
}
