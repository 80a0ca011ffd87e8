//! An import killed part-way is completed by a rerun: a child process imports a large transcript
//! (many appends), the parent kills it with SIGKILL at a random moment of its appends (once the
//! log's head, which the child reports, passes a random position), a second child imports the same
//! file again, and the store must then equal one an uninterrupted import made — the same head, the
//! same last envelope hash (the chain covers every envelope before it) and the same projection
//! digests. `MNEMO_IMPORT_KILL_LINES` sets the transcript's size: 2,000 lines by default (CI);
//! `just soak-import` runs 200,000 in a release build.

#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use mnemo::{Config, Mnemo, Position};
use mnemo_acceptance::sim::{Rng, seed_from_env};

const KILLS: u64 = 20;
const DEFAULT_LINES: usize = 2_000;
/// Event lines per turn (a turn end closes an append, so a file of N lines makes about N/50 appends).
const TURN_EVENTS: usize = 50;

fn lines_from_env() -> usize {
    std::env::var("MNEMO_IMPORT_KILL_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_LINES)
}

/// A transcript of about `lines` lines over four sessions, events carrying ids of their own.
fn transcript(lines: usize) -> String {
    let mut text = String::with_capacity(lines * 160);
    let sessions = 4;
    let per_session = lines / sessions;
    for s in 0..sessions {
        writeln!(text, r#"{{"kind":"session","session":"big-{s}","title":"large import {s}"}}"#).unwrap();
        let mut written = 1;
        let mut turn = 0;
        while written < per_session {
            for e in 0..TURN_EVENTS {
                let (role, what) = if e == 0 { ("user", "question") } else { ("model", "answer") };
                writeln!(
                    text,
                    r#"{{"session":"big-{s}","turn":"t{turn}","role":"{role}","id":"big-{s}-{turn}-{e}","ts":{},"parts":[{{"type":"text","text":"{what} {turn}.{e}: the quick brown fox jumps over the lazy dog"}}]}}"#,
                    1_767_225_600_000u64 + (turn * TURN_EVENTS + e) as u64
                )
                .unwrap();
            }
            writeln!(
                text,
                r#"{{"kind":"turn_end","session":"big-{s}","turn":"t{turn}","status":"completed"}}"#
            )
            .unwrap();
            written += TURN_EVENTS + 1;
            turn += 1;
        }
    }
    text
}

/// What must be equal after an uninterrupted and a resumed import.
#[derive(Debug, PartialEq)]
struct Outcome {
    head: Position,
    last_hash: String,
    digests: Vec<(String, String)>,
}

fn outcome(store: &Path) -> Outcome {
    let mnemo = Mnemo::open(store, Config::default()).unwrap();
    mnemo.catch_up().unwrap();
    let head = mnemo.log().head();
    let last_hash = mnemo.log().read(head).unwrap().unwrap().hash_hex();
    let digests = mnemo.stats().unwrap().stages.into_iter().map(|s| (s.name, s.digest)).collect();
    mnemo.close().unwrap();
    Outcome { head, last_hash, digests }
}

/// Runs the import child to its end; returns its report.
fn import(store: &Path, file: &Path) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_import-child")).arg(store).arg(file).output().unwrap();
    assert!(output.status.success(), "import failed: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// Starts the import child and kills it once the log's head reaches `target`; whether it had
/// finished its import by then.
fn import_killed(store: &Path, file: &Path, target: u64) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_import-child"))
        .arg(store)
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut finished = false;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(head) = line.strip_prefix("head ") {
            if head.parse::<u64>().unwrap() >= target {
                break;
            }
        } else if line.starts_with('{') {
            finished = true;
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    finished
}

#[test]
fn an_import_killed_at_random_moments_is_completed_by_a_rerun_equal_to_an_uninterrupted_one() {
    let seed = seed_from_env();
    let lines = lines_from_env();
    eprintln!("import kill test: MNEMO_SEED={seed} MNEMO_IMPORT_KILL_LINES={lines}");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("large.jsonl");
    std::fs::write(&file, transcript(lines)).unwrap();

    let reference_store = dir.path().join("reference");
    let started = Instant::now();
    let report = import(&reference_store, &file);
    let full = started.elapsed();
    assert_eq!(report["status"], "imported");
    let reference = outcome(&reference_store);
    let appends = report["records"].as_u64().unwrap() / (TURN_EVENTS as u64 + 1);
    eprintln!(
        "uninterrupted: {} records in about {appends} appends, {:.1} s",
        report["records"],
        full.as_secs_f64()
    );

    let (mut interrupted, mut resumed_records) = (0, 0);
    for round in 0..KILLS {
        let store = dir.path().join(format!("killed-{round}"));
        let target = 1 + rng.below(reference.head.0);
        let finished = import_killed(&store, &file, target);
        let report = import(&store, &file);
        let status = report["status"].as_str().unwrap().to_owned();
        // One session per append stream, every record of the file: what the rerun found taken is
        // what the killed import had appended.
        let kept = Position(report["already"].as_u64().unwrap());
        if finished || kept == reference.head {
            assert_eq!(status, "already_complete", "round {round}");
        } else if kept == Position::ZERO {
            assert_eq!(status, "imported", "round {round}");
        } else {
            assert_eq!(status, "resumed", "round {round}: killed at head {kept} (target {target})");
            interrupted += 1;
            resumed_records += report["records"].as_u64().unwrap();
        }
        assert_eq!(outcome(&store), reference, "round {round}: killed at head {kept} (target {target})");
        std::fs::remove_dir_all(&store).unwrap();
    }
    eprintln!(
        "{KILLS} kills: {interrupted} left a partial import, each completed by a rerun \
         ({resumed_records} records appended by the reruns); every store equals the uninterrupted one"
    );
    assert!(interrupted > 0, "no kill landed during the appends; the test proved nothing");
}
