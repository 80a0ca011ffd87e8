//! A fault campaign: `MNEMO_FAULTS` injected faults (a modest number by default; `just soak-faults`
//! runs a thousand), each on a fresh store written by a child process, of four kinds in turn:
//!
//! - **kill**: SIGKILL at a random moment while the child appends;
//! - **file-size limit**: `RLIMIT_FSIZE` lowered under a child that keeps appending (EFBIG);
//! - **disk full**: a child that appends until a small tmpfs is full (ENOSPC), where one can be
//!   mounted (root); otherwise the campaign says how many it could not inject;
//! - **journal damage**: acknowledged bytes of the journal cut or a marker byte flipped.
//!
//! It reports how many acknowledged envelopes each kind lost, which must be 0 for every fault that is
//! not storage damage, and checks that every storage damage that lost acknowledged envelopes is
//! detected: the open refuses naming exactly the lost range (or the damage), never answers from a
//! shorter log; and each damaged store is salvaged into a new one that verifies.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mnemo::records::Position;
use mnemo::{Config, Error, Mnemo};
use mnemo_acceptance::children::{self, crash_writer_killed, journal_line};
use mnemo_acceptance::sim::{Rng, seed_from_env};
use mnemo_log::LogError;

/// Faults the campaign injects when `MNEMO_FAULTS` does not say.
const FAULTS_DEFAULT: u64 = 8;
/// Size of the file system a disk-full fault fills.
const TMPFS_BYTES: u64 = 3 * 1024 * 1024;
/// Appends the journal-damage child acknowledges.
const DAMAGE_APPENDS: u64 = 24;

#[derive(Debug, Default)]
struct Tally {
    injected: u64,
    acknowledged: u64,
    lost: u64,
}

#[derive(Debug, Default)]
struct Campaign {
    kill: Tally,
    fsize: Tally,
    full: Tally,
    full_unavailable: u64,
    damage: Tally,
    damage_detected: u64,
    damage_harmless: u64,
    /// Damaged stores salvaged: each copy verifies and holds every envelope before the damage.
    damage_salvaged: u64,
}

fn faults_from_env() -> u64 {
    std::env::var("MNEMO_FAULTS").ok().and_then(|v| v.parse().ok()).unwrap_or(FAULTS_DEFAULT)
}

/// Runs the fault writer to its end; what it acknowledged and what it printed.
fn fault_writer(dir: &Path, seed: u64, mode: &str, amount: u64) -> (Vec<u64>, String) {
    let output = children::fault_writer(env!("CARGO_BIN_EXE_fault-writer"), dir, seed, mode, amount);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{mode} child failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    (children::acks(stdout.lines()), stdout)
}

/// Reopens after a fault that is not storage damage: how many acknowledged positions are missing.
fn lost_after(dir: &Path, acknowledged: &[u64], context: &str) -> u64 {
    let mnemo =
        Mnemo::open(dir, Config::default()).unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    let lost =
        acknowledged.iter().filter(|p| mnemo.log().read(Position(**p)).unwrap().is_none()).count() as u64;
    let verification = mnemo.verify(&mut |_| {}).unwrap_or_else(|e| panic!("{context}: verify failed: {e}"));
    assert!(verification.ok(), "{context}: {verification:?}");
    lost
}

fn kill(dir: &Path, seed: u64, rng: &mut Rng, tally: &mut Tally) {
    let run_for = Duration::from_millis(rng.below(150));
    let acks = crash_writer_killed(env!("CARGO_BIN_EXE_crash-writer"), dir, seed, run_for).acknowledged;
    tally.injected += 1;
    tally.acknowledged += acks.len() as u64;
    tally.lost += lost_after(dir, &acks, &format!("kill, seed {seed}"));
}

fn fsize(dir: &Path, seed: u64, rng: &mut Rng, tally: &mut Tally) {
    let limit = 192 * 1024 + rng.below(640 * 1024);
    let (acks, stdout) = fault_writer(dir, seed, "fsize", limit);
    assert!(stdout.contains("error "), "no append failed under a {limit}-byte limit");
    tally.injected += 1;
    tally.acknowledged += acks.len() as u64;
    tally.lost += lost_after(dir, &acks, &format!("file-size limit {limit}, seed {seed}"));
}

/// A small tmpfs mounted at a new directory, unmounted on drop; `None` where mounting is not allowed.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount() -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_BYTES}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Tmpfs(dir))
    }
}

impl Tmpfs {
    /// Gives the file system room again: what its owner does once the disk is full.
    fn grow(&self) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={}", 16 * TMPFS_BYTES)])
            .arg(self.0.path())
            .status()
            .unwrap();
        assert!(status.success(), "cannot grow the tmpfs");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

fn disk_full(seed: u64, campaign: &mut Campaign) {
    let Some(tmpfs) = Tmpfs::mount() else {
        campaign.full_unavailable += 1;
        return;
    };
    let dir = tmpfs.0.path().join("store");
    let (acks, stdout) = fault_writer(&dir, seed, "fill", 0);
    assert!(stdout.contains("error "), "the disk never filled\n{stdout}");
    let error = stdout.lines().find_map(|l| l.strip_prefix("error ")).unwrap();
    assert!(error.contains("disk is full"), "disk full must be named as such: {error}");
    campaign.full.injected += 1;
    campaign.full.acknowledged += acks.len() as u64;
    // Once there is room again, everything acknowledged is there and every stage catches up.
    tmpfs.grow();
    campaign.full.lost += lost_after(&dir, &acks, &format!("disk full, seed {seed}"));
}

fn journal_damage(dir: &Path, seed: u64, rng: &mut Rng, campaign: &mut Campaign) {
    let (acks, stdout) = fault_writer(dir, seed, "journal", DAMAGE_APPENDS);
    let (journal, end) = journal_line(&stdout).unwrap();
    let acknowledged = acks.iter().max().copied().unwrap();
    if rng.below(2) == 0 {
        let file = std::fs::OpenOptions::new().write(true).open(&journal).unwrap();
        file.set_len(rng.below(end)).unwrap();
    } else {
        let mut bytes = std::fs::read(&journal).unwrap();
        let at = rng.below(end) as usize;
        bytes[at] ^= 1 << rng.below(8);
        std::fs::write(&journal, bytes).unwrap();
    }
    campaign.damage.injected += 1;
    campaign.damage.acknowledged += acks.len() as u64;
    match Mnemo::open(dir, Config::default()) {
        Ok(mnemo) => {
            let head = mnemo.log().head().0;
            assert!(
                head >= acknowledged,
                "seed {seed}: silent loss: head {head}, acknowledged {acknowledged}"
            );
            campaign.damage_harmless += 1;
        }
        Err(Error::Log(LogError::AcknowledgedLost { head, lost })) => {
            assert_eq!((lost.first, lost.last), (head.next(), Position(acknowledged)), "seed {seed}");
            let context = format!("journal cut or marker, seed {seed}");
            assert_eq!(salvaged(dir, acknowledged, &context), lost.len(), "{context}");
            campaign.damage.lost += lost.len();
            campaign.damage_detected += 1;
            campaign.damage_salvaged += 1;
        }
        // A flipped byte inside a batch fails its checksum, or a flipped byte in an envelope fails
        // its hash: the open refuses, naming the damage; salvage recovers what comes before it.
        Err(error @ Error::Log(LogError::Damaged { .. } | LogError::Corrupt { .. })) => {
            let context = format!("{error}, seed {seed}");
            campaign.damage.lost += salvaged(dir, acknowledged, &context);
            campaign.damage_detected += 1;
            campaign.damage_salvaged += 1;
        }
        Err(error) => panic!("seed {seed}: journal damage reported as something else: {error}"),
    }
}

/// Salvages the damaged store in `dir` into a new store beside it: the copy verifies, holds a
/// prefix of the acknowledged envelopes, and the report names the rest as lost. Returns how many
/// acknowledged envelopes were lost.
fn salvaged(dir: &Path, acknowledged: u64, context: &str) -> u64 {
    let to = dir.with_file_name("salvaged");
    let report = mnemo::log::salvage(dir, &to, &mut |_| {})
        .unwrap_or_else(|e| panic!("{context}: salvage failed: {e}"));
    assert!(report.recovered <= acknowledged, "{context}: {report:?}");
    let lost =
        (report.recovered < acknowledged).then(|| format!("{}..={acknowledged}", report.recovered + 1));
    assert_eq!(report.lost, lost, "{context}: {report:?}");
    let copy = Mnemo::open(&to, Config::default()).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(copy.log().head().0, report.recovered, "{context}");
    let verification = copy.verify(&mut |_| {}).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert!(verification.ok(), "{context}: {verification:?}");
    acknowledged - report.recovered
}

#[test]
fn a_fault_campaign_loses_no_acknowledged_envelope_and_detects_every_damage() {
    let seed = seed_from_env();
    let faults = faults_from_env();
    eprintln!("fault campaign seed: MNEMO_SEED={seed}, MNEMO_FAULTS={faults}");
    let mut rng = Rng::new(seed);
    let mut campaign = Campaign::default();
    for fault in 0..faults {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let fault_seed = seed.wrapping_add(fault);
        match fault % 4 {
            0 => kill(&store, fault_seed, &mut rng, &mut campaign.kill),
            1 => fsize(&store, fault_seed, &mut rng, &mut campaign.fsize),
            2 => disk_full(fault_seed, &mut campaign),
            _ => journal_damage(&store, fault_seed, &mut rng, &mut campaign),
        }
    }
    eprintln!("{campaign:#?}");
    let injected =
        campaign.kill.injected + campaign.fsize.injected + campaign.full.injected + campaign.damage.injected;
    eprintln!(
        "{injected} faults injected ({} disk-full faults could not be: no tmpfs could be mounted); \
         acknowledged envelopes lost: kill {}, file-size limit {}, disk full {}; \
         journal damage: {} of {} detected ({} salvaged), {} harmless, {} acknowledged envelopes cut and reported",
        campaign.full_unavailable,
        campaign.kill.lost,
        campaign.fsize.lost,
        campaign.full.lost,
        campaign.damage_detected,
        campaign.damage.injected,
        campaign.damage_salvaged,
        campaign.damage_harmless,
        campaign.damage.lost,
    );
    assert_eq!(campaign.kill.lost + campaign.fsize.lost + campaign.full.lost, 0);
    assert_eq!(campaign.damage_detected + campaign.damage_harmless, campaign.damage.injected);
    assert_eq!(campaign.damage_salvaged, campaign.damage_detected);
}
