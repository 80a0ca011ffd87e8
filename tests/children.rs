//! Running the child processes of the fault and crash tests (`fault-writer`, `crash-writer`) and
//! reading what they acknowledged. A test passes the child's binary (`env!("CARGO_BIN_EXE_…")`,
//! which only a test target knows).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a crash-writer may take to acknowledge its first append: it opens the store first,
/// which catches every stage up on the log a killed writer left (a debug build on a loaded machine).
pub const FIRST_ACK_WAIT: Duration = Duration::from_secs(60);

/// Runs `fault-writer` (`binary`) on the store in `dir` to its end, with SIGXFSZ ignored (an
/// ignored signal stays ignored across `exec`), so that a write past a file-size limit fails with
/// `EFBIG` instead of killing it.
pub fn fault_writer(binary: &str, dir: &Path, seed: u64, mode: &str, amount: u64) -> Output {
    let output = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; exec "$0" "$@""#)
        .arg(binary)
        .arg(dir)
        .arg(seed.to_string())
        .arg(mode)
        .arg(amount.to_string())
        .env_remove("RUST_LOG")
        .output();
    output.unwrap_or_else(|e| panic!("cannot run {binary}: {e}"))
}

/// The positions a child acknowledged (`ack N` lines).
pub fn acks<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<u64> {
    lines
        .into_iter()
        .filter_map(|line| line.strip_prefix("ack "))
        .map(|n| n.parse().unwrap_or_else(|_| panic!("bad ack line {n:?}")))
        .collect()
}

/// The journal a `fault-writer` in `torn` or `journal` mode named (`journal PATH END`): its path and
/// where its written bytes end.
pub fn journal_line(stdout: &str) -> Option<(std::path::PathBuf, u64)> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("journal "))?;
    let (path, end) = line.rsplit_once(' ')?;
    Some((path.into(), end.parse().ok()?))
}

/// What a killed crash writer acknowledged.
#[derive(Debug)]
pub struct Killed {
    /// Every position it acknowledged (lines read after the kill were acknowledged before it, too).
    pub acknowledged: Vec<u64>,
    /// How long its first acknowledgement took from its start (opening the store included).
    pub first_ack: Duration,
}

/// Starts `crash-writer` (`binary`) on the store in `dir`, waits for its first acknowledgement,
/// lets it run `run_for` longer and kills it with SIGKILL. Panics if it acknowledges nothing within
/// [`FIRST_ACK_WAIT`], with what it wrote on stderr.
pub fn crash_writer_killed(binary: &str, dir: &Path, seed: u64, run_for: Duration) -> Killed {
    let mut child = Command::new(binary)
        .arg(dir)
        .arg(seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
    let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        unreachable!("both were piped")
    };
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let started = Instant::now();
    let first = received.recv_timeout(FIRST_ACK_WAIT);
    let Ok(first) = first else {
        let _ = child.kill();
        let status = child.wait();
        let errors = errors.join().unwrap_or_default();
        panic!(
            "the crash writer acknowledged nothing in {:.1} s (seed {seed}, {status:?}): {errors}",
            started.elapsed().as_secs_f64()
        );
    };
    let first_ack = started.elapsed();
    let mut acknowledged = vec![first];
    let deadline = Instant::now() + run_for;
    while Instant::now() < deadline {
        if let Ok(line) = received.recv_timeout(Duration::from_millis(2)) {
            acknowledged.push(line);
        }
    }
    child.kill().unwrap_or_else(|e| panic!("cannot kill the crash writer: {e}")); // SIGKILL
    let _ = child.wait();
    let _ = reader.join();
    let _ = errors.join();
    acknowledged.extend(received.try_iter());
    let acknowledged =
        acknowledged.iter().map(|l| l.parse().unwrap_or_else(|_| panic!("bad line {l:?}"))).collect();
    Killed { acknowledged, first_ack }
}

/// Copies a directory tree of regular files and directories.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
        let target = to.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("cannot copy {}: {e}", entry.path().display()));
        }
    }
}
