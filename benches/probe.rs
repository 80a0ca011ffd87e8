//! Measurements of the machine itself: the fsync probe, disk usage and peak resident memory.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes written before each `fdatasync` in the probe.
pub const FSYNC_PROBE_BYTES: usize = 4096;

/// Median latency of writing 4 KiB and `fdatasync`ing it, `rounds` times, in a file under `dir`:
/// the ceiling for one writer making one durable append at a time.
pub fn fsync_probe(dir: &Path, rounds: usize) -> std::io::Result<Duration> {
    let path = dir.join("fsync-probe.bin");
    let mut file = File::create(&path)?;
    let block = vec![0x5a; FSYNC_PROBE_BYTES];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        samples.push(started.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path)?;
    samples.sort();
    Ok(samples[samples.len() / 2])
}

/// Bytes a directory tree really occupies on disk (allocated blocks, so sparse preallocated
/// files count for what they hold, not their length).
pub fn disk_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() { disk_bytes(&entry.path())? } else { metadata.blocks() * 512 };
    }
    Ok(total)
}

/// Resets the process's peak resident set size (Linux `clear_refs` 5), so that a later
/// [`peak_rss_bytes`] measures only what runs in between. Returns false where the kernel refuses.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set size (`VmHWM`), if the kernel reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
