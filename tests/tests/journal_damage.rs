//! Damage to acknowledged bytes of the storage engine's journal: cuts at ten points and flipped
//! marker bytes (a batch's start or end tag, its trailer). The storage engine recovers a shorter log
//! from such a journal; Mnemo must notice from its high-water mark that acknowledged envelopes are
//! gone, refuse to open naming exactly the lost range, have `verify` report the same range, and
//! salvage every envelope before the damage into a new store, byte for byte. A flipped byte inside a
//! batch (it then fails its checksum, and the storage engine refuses the whole journal) is refused
//! as damage, and salvage still recovers every envelope of the batches before it. Salvage never
//! changes the damaged store.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};

use mnemo::log::{ExpectedRevision, LostRange};
use mnemo::records::{Position, StreamId};
use mnemo::{Config, Error, ErrorCategory, Mnemo};
use mnemo_acceptance::children::{self, copy_dir, journal_line};
use mnemo_acceptance::sim::{Rng, event_records, seed_from_env};
use mnemo_log::LogError;

/// Appends the child acknowledges before it exits without closing the store.
const ACKED_APPENDS: u64 = 48;
const CUTS: u64 = 10;
const FLIPS: u64 = 10;
/// Flips inside a batch's entries that must each be refused as a failed checksum. A flip can
/// also be harmless (it makes a batch of projection commits look torn), so flips go on until
/// this many were refused, up to `INSIDE_FLIPS_MAX`.
const INSIDE_CHECKSUM_REFUSALS: u64 = 3;
const INSIDE_FLIPS_MAX: u64 = 24;
/// The storage engine's journal trailer, written after each batch's end tag and checksum.
const TRAILER: &[u8] = b"FJL\x03";
const END_TAG: u8 = 3;
const CHECKSUM_BYTES: usize = 8;

struct Written {
    store: tempfile::TempDir,
    journal: PathBuf,
    end: u64,
    acknowledged: u64,
}

/// Runs the child on a fresh store: `ACKED_APPENDS` durable appends, then an exit without closing.
fn write_store(seed: u64) -> Written {
    let store = tempfile::tempdir().unwrap();
    let output = children::fault_writer(
        env!("CARGO_BIN_EXE_fault-writer"),
        store.path(),
        seed,
        "journal",
        ACKED_APPENDS,
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "child failed: {}", String::from_utf8_lossy(&output.stderr));
    let acknowledged = children::acks(stdout.lines()).into_iter().max().unwrap();
    let (journal, end) = journal_line(&stdout).unwrap();
    let journal = journal.strip_prefix(store.path()).unwrap().to_path_buf();
    Written { store, journal, end, acknowledged }
}

/// The journal's batch ends: the offset just past each batch's trailer.
fn batch_ends(journal: &[u8]) -> Vec<usize> {
    (CHECKSUM_BYTES + 1..journal.len().saturating_sub(TRAILER.len()))
        .filter(|&at| {
            &journal[at..at + TRAILER.len()] == TRAILER && journal[at - CHECKSUM_BYTES - 1] == END_TAG
        })
        .map(|at| at + TRAILER.len())
        .collect()
}

/// Every file of a store with its length and a hash of its bytes, by path: what salvage must leave
/// exactly as it found it.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, u64)> {
    use std::hash::{Hash, Hasher};
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut hasher);
                files.push((
                    path.strip_prefix(dir).unwrap().to_path_buf(),
                    bytes.len() as u64,
                    hasher.finish(),
                ));
            }
        }
    }
    files.sort();
    files
}

/// Salvages `store` into a new store beside it and checks that the damaged store is unchanged and
/// that no scratch copy is left behind.
fn salvage_untouched(store: &Path, context: &str) -> (tempfile::TempDir, PathBuf, mnemo::log::SalvageReport) {
    let before = snapshot(store);
    let target = tempfile::tempdir().unwrap();
    let salvaged = target.path().join("salvaged");
    let report = mnemo::log::salvage(store, &salvaged, &mut |_| {}).unwrap();
    assert_eq!(snapshot(store), before, "{context}: salvage changed the damaged store");
    let left: Vec<_> = std::fs::read_dir(target.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("salvaged")], "{context}: a scratch copy was left behind");
    (target, salvaged, report)
}

/// The envelopes' hashes of an undamaged copy, by position.
fn hashes(store: &Path) -> Vec<[u8; 32]> {
    let mnemo = Mnemo::open(store, Config::default()).unwrap();
    mnemo.log().scan(Position::FIRST).map(|e| e.unwrap().hash).collect()
}

/// Checks one damaged store; returns the number of acknowledged envelopes lost (0 when the damage
/// fell on bytes that held no acknowledged envelope).
fn check_damaged(store: &Path, acknowledged: u64, original: &[[u8; 32]], context: &str) -> u64 {
    let refused = match Mnemo::open(store, Config::default()) {
        Ok(mnemo) => {
            // An open that succeeds must still hold everything acknowledged.
            assert!(
                mnemo.log().head().0 >= acknowledged,
                "{context}: silent loss, head {}",
                mnemo.log().head()
            );
            return 0;
        }
        Err(error) => error,
    };
    assert_eq!(refused.category(), ErrorCategory::Integrity, "{context}: {refused}");
    let Error::Log(LogError::AcknowledgedLost { head, lost }) = &refused else {
        panic!("{context}: not a lost-range refusal: {refused}");
    };
    let expected = LostRange { first: head.next(), last: Position(acknowledged) };
    assert_eq!(*lost, expected, "{context}");
    assert!(refused.to_string().contains(&format!("positions {expected} were acknowledged")), "{refused}");
    // Refusing changed nothing: the next open refuses the same way.
    let again = Mnemo::open(store, Config::default()).unwrap_err();
    assert_eq!(again.to_string(), refused.to_string(), "{context}");

    let reader = Mnemo::open(store, Config { verify_tail_on_open: false, ..Config::default() }).unwrap();
    let verification = reader.verify(&mut |_| {}).unwrap();
    assert!(!verification.ok(), "{context}");
    assert_eq!(verification.lost, Some(expected.to_string()), "{context}");
    assert_eq!(verification.envelopes, head.0, "{context}");
    // Nothing can be appended while the loss stands.
    let stream = StreamId::new("session/after-damage").unwrap();
    let records = event_records(&mut Rng::new(3), "after-damage", 0, 1);
    assert!(reader.append(&stream, ExpectedRevision::Any, &records).is_err(), "{context}");
    drop(reader);

    let (_target, salvaged, report) = salvage_untouched(store, context);
    assert_eq!(report.recovered, head.0, "{context}: {report:?}");
    assert_eq!(report.lost, Some(expected.to_string()), "{context}");
    assert_eq!(report.lost_envelopes, expected.len(), "{context}");
    let copy = Mnemo::open(&salvaged, Config::default()).unwrap();
    let verification = copy.verify(&mut |_| {}).unwrap();
    assert!(verification.ok(), "{context}: {verification:?}");
    let copied: Vec<_> = copy.log().scan(Position::FIRST).map(|e| e.unwrap().hash).collect();
    assert_eq!(
        copied[..],
        original[..head.0 as usize],
        "{context}: salvage must copy the intact prefix exactly"
    );
    expected.len()
}

#[test]
fn journal_cuts_and_flipped_markers_are_refused_with_the_lost_range_and_salvaged() {
    let seed = seed_from_env();
    eprintln!("journal damage seed: MNEMO_SEED={seed}");
    let mut rng = Rng::new(seed);
    let written = write_store(seed);
    let pristine = tempfile::tempdir().unwrap();
    copy_dir(written.store.path(), pristine.path());
    let original = hashes(pristine.path());
    assert_eq!(original.len() as u64, written.acknowledged);
    let journal = std::fs::read(written.store.path().join(&written.journal)).unwrap();
    let ends = batch_ends(&journal[..written.end as usize]);
    assert!(ends.len() > 20, "only {} batches in the journal", ends.len());

    let (mut damaged, mut detected, mut lost_total) = (0, 0, 0);
    let mut damage = |name: String, change: &dyn Fn(&Path)| {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(written.store.path(), dir.path());
        change(&dir.path().join(&written.journal));
        let lost =
            check_damaged(dir.path(), written.acknowledged, &original, &format!("{name}, seed {seed}"));
        damaged += 1;
        detected += u64::from(lost > 0);
        lost_total += lost;
        eprintln!("{name}: {lost} acknowledged envelopes lost and reported");
    };
    for cut in 0..CUTS {
        // Ten cuts spread over the written bytes, each at a random point of its tenth.
        let tenth = written.end / CUTS;
        let offset = cut * tenth + rng.below(tenth.max(1));
        damage(format!("journal cut at byte {offset} of {}", written.end), &|path| {
            let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            file.set_len(offset).unwrap();
        });
    }
    for flip in 0..FLIPS {
        let end = ends[rng.below(ends.len() as u64 - 1) as usize];
        // The next batch's start tag, this batch's end tag, or a byte of its trailer.
        let at = match flip % 3 {
            0 => end,
            1 => end - TRAILER.len() - CHECKSUM_BYTES - 1,
            _ => end - 1 - rng.below(TRAILER.len() as u64) as usize,
        };
        damage(format!("journal marker byte {at} flipped"), &|path| {
            let mut bytes = std::fs::read(path).unwrap();
            bytes[at] ^= 0x5A;
            std::fs::write(path, bytes).unwrap();
        });
    }
    eprintln!(
        "{damaged} journal damages: {detected} lost acknowledged envelopes ({lost_total} in all), \
         each refused with its range, verified and salvaged; the others lost nothing acknowledged"
    );
    assert!(detected >= CUTS / 2, "only {detected} of {damaged} damages cut acknowledged envelopes");
}

#[test]
fn an_accepted_loss_opens_the_store_again_and_records_it() {
    let written = write_store(seed_from_env() ^ 0xACC);
    let journal = written.store.path().join(&written.journal);
    let file = std::fs::OpenOptions::new().write(true).open(&journal).unwrap();
    file.set_len(written.end / 2).unwrap();
    drop(file);
    let Err(Error::Log(LogError::AcknowledgedLost { head, lost })) =
        Mnemo::open(written.store.path(), Config::default())
    else {
        panic!("the cut must lose acknowledged envelopes");
    };
    let wrong = LostRange { first: lost.first, last: lost.last.next() };
    assert!(
        Mnemo::open(written.store.path(), Config { accept_loss: Some(wrong), ..Config::default() }).is_err()
    );
    let mnemo =
        Mnemo::open(written.store.path(), Config { accept_loss: Some(lost), ..Config::default() }).unwrap();
    assert_eq!(mnemo.accepted_loss(), Some(lost));
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
    let stream = StreamId::new("session/after-acceptance").unwrap();
    let records = event_records(&mut Rng::new(5), "after-acceptance", 0, 1);
    let appended = mnemo.append(&stream, ExpectedRevision::Any, &records).unwrap();
    assert_eq!(appended.first_position, head.next());
    drop(mnemo);
    let recorded =
        std::fs::read_to_string(written.store.path().join(mnemo_log::ACCEPTED_LOSS_FILE_NAME)).unwrap();
    assert!(recorded.contains(&format!("lost {lost} accepted")), "{recorded}");
    drop(Mnemo::open(written.store.path(), Config::default()).unwrap());
}

#[test]
fn an_accepted_loss_forgets_the_keys_of_the_envelopes_it_lost() {
    // A store closed cleanly twice: its key index, in a database of its own, holds the keys of
    // every envelope; the log's database is then put back as it was after the first close, as a
    // file system that lost the later writes of that folder would leave it.
    let store = tempfile::tempdir().unwrap();
    let earlier = tempfile::tempdir().unwrap();
    let stream = StreamId::new("session/keys").unwrap();
    let records = event_records(&mut Rng::new(7), "keys", 0, 200);
    let append_all = |records: &[mnemo::records::Record]| {
        let mnemo = Mnemo::open(store.path(), Config::default()).unwrap();
        for chunk in records.chunks(20) {
            mnemo.append(&stream, ExpectedRevision::Any, chunk).unwrap();
        }
    };
    append_all(&records[..100]);
    copy_dir(&store.path().join("db"), earlier.path());
    append_all(&records[100..]);
    std::fs::remove_dir_all(store.path().join("db")).unwrap();
    copy_dir(earlier.path(), &store.path().join("db"));
    let Err(Error::Log(LogError::AcknowledgedLost { head, lost })) =
        Mnemo::open(store.path(), Config::default())
    else {
        panic!("the log must have lost acknowledged envelopes");
    };
    assert_eq!(head, Position(100));
    // Before the loss is accepted, verify reports the loss itself, not the keys the index kept.
    let unchecked =
        Mnemo::open(store.path(), Config { verify_tail_on_open: false, ..Config::default() }).unwrap();
    let report = unchecked.verify(&mut |_| {}).unwrap();
    assert_eq!(report.lost, Some(lost.to_string()));
    drop(unchecked);

    let mnemo = Mnemo::open(store.path(), Config { accept_loss: Some(lost), ..Config::default() }).unwrap();
    let report = mnemo.verify(&mut |_| {}).unwrap();
    assert!(report.ok(), "the store verifies after the accepted loss: {report:?}");
    // The lost events sent again are new to the store, not retries of envelopes it no longer holds.
    let appended = mnemo.append(&stream, ExpectedRevision::Any, &records[100..]).unwrap();
    assert_eq!(
        (appended.first_position, appended.last_position, appended.retried),
        (Position(101), Position(200), 0)
    );
    assert!(mnemo.verify(&mut |_| {}).unwrap().ok());
}

/// The log head of a store opened without its tail check (it may have lost acknowledged envelopes).
fn head_of(store: &Path) -> u64 {
    let mnemo = Mnemo::open(store, Config { verify_tail_on_open: false, ..Config::default() }).unwrap();
    mnemo.log().head().0
}

#[test]
fn a_journal_batch_failing_its_checksum_is_refused_and_salvaged_up_to_the_batch_before_it() {
    let seed = seed_from_env() ^ 0xC5;
    eprintln!("journal checksum damage seed: MNEMO_SEED={seed}");
    let mut rng = Rng::new(seed);
    let written = write_store(seed);
    let pristine = tempfile::tempdir().unwrap();
    copy_dir(written.store.path(), pristine.path());
    let original = hashes(pristine.path());
    let journal = std::fs::read(written.store.path().join(&written.journal)).unwrap();
    let ends = batch_ends(&journal[..written.end as usize]);
    let (mut checksum_refusals, mut harmless, mut recovered_total) = (0, 0, 0);
    let mut round = 0;
    while checksum_refusals < INSIDE_CHECKSUM_REFUSALS && round < INSIDE_FLIPS_MAX {
        round += 1;
        // A byte in the middle of a batch's entries (after the previous batch's trailer, before this
        // one's end tag): an envelope's bytes, which the batch's checksum covers.
        let batch = 1 + rng.below(ends.len() as u64 - 1) as usize;
        let (start, end) = (ends[batch - 1], ends[batch] - TRAILER.len() - CHECKSUM_BYTES - 1);
        let at = start + (end - start) / 2;
        let context =
            format!("round {round}: byte {at} of batch {batch} ({start}..{end}) flipped, seed {seed}");

        // What every envelope before the damaged batch is: the journal cut just before it.
        let before = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), before.path());
        let cut = std::fs::OpenOptions::new().write(true).open(before.path().join(&written.journal)).unwrap();
        cut.set_len(start as u64).unwrap();
        drop(cut);
        let intact = head_of(before.path());

        let dir = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), dir.path());
        let path = dir.path().join(&written.journal);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at] ^= 0x5A;
        std::fs::write(&path, bytes).unwrap();

        let refused = match Mnemo::open(dir.path(), Config::default()) {
            // A flipped length can make the batch look torn: the storage engine then drops it and
            // what follows, which is harmless when they held only projection commits after the
            // last acknowledged envelope.
            Ok(mnemo) => {
                assert!(mnemo.log().head().0 >= written.acknowledged, "{context}: silent loss");
                harmless += 1;
                eprintln!("{context}: only unacknowledged bytes were lost");
                continue;
            }
            Err(refused) => refused,
        };
        assert_eq!(refused.category(), ErrorCategory::Integrity, "{context}: {refused}");
        match &refused {
            Error::Log(LogError::Damaged { .. }) => {
                checksum_refusals += 1;
                assert!(refused.to_string().contains("mnemo salvage --to DIR"), "{context}: {refused}");
                // `verify` opens without the tail check, and is refused the same way.
                let verify =
                    Mnemo::open(dir.path(), Config { verify_tail_on_open: false, ..Config::default() });
                assert_eq!(verify.unwrap_err().to_string(), refused.to_string(), "{context}");
            }
            // A flipped length or tag can make the batch look torn instead: a cut, named by range.
            Error::Log(LogError::AcknowledgedLost { head, .. }) => assert!(head.0 >= intact, "{context}"),
            other => panic!("{context}: refused as neither damage nor loss: {other}"),
        }

        let (_target, salvaged, report) = salvage_untouched(dir.path(), &context);
        assert!(report.recovered >= intact, "{context}: {report:?}, {intact} intact");
        if matches!(refused, Error::Log(LogError::Damaged { .. })) {
            assert_eq!(report.recovered, intact, "{context}: {report:?}");
            let cut =
                report.journal_cut.as_deref().unwrap_or_else(|| panic!("{context}: no cut: {report:?}"));
            assert!(cut.contains(&format!("after byte {start} ")), "{context}: {cut}");
        }
        // The batches after the damage may have held only projection writes: then every
        // acknowledged envelope is recovered and nothing is lost.
        let expected = (report.recovered < written.acknowledged)
            .then(|| format!("{}..={}", report.recovered + 1, written.acknowledged));
        assert_eq!(report.lost, expected, "{context}: {report:?}");
        assert_eq!(report.lost_envelopes, written.acknowledged - report.recovered, "{context}");
        let copy = Mnemo::open(&salvaged, Config::default()).unwrap();
        assert!(copy.verify(&mut |_| {}).unwrap().ok(), "{context}");
        let copied: Vec<_> = copy.log().scan(Position::FIRST).map(|e| e.unwrap().hash).collect();
        assert_eq!(copied[..], original[..report.recovered as usize], "{context}: not the intact prefix");
        recovered_total += report.recovered;
        eprintln!(
            "{context}: refused ({refused}); salvaged {} of {}",
            report.recovered, written.acknowledged
        );
    }
    eprintln!(
        "{round} flipped bytes inside batches: {checksum_refusals} refused as a failed checksum, \
         {harmless} harmless, {recovered_total} envelopes salvaged in all"
    );
    assert!(
        checksum_refusals >= INSIDE_CHECKSUM_REFUSALS,
        "only {checksum_refusals} of {round} flips failed a checksum"
    );
}
