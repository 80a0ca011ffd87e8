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

/// Bytes the storage engine's journals (`*.jnl` files) in a directory tree occupy on disk: the part
/// of a store that holds recent writes uncompressed until the engine rotates the journal.
pub fn journal_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        if metadata.is_dir() {
            total += journal_bytes(&entry.path())?;
        } else if entry.path().extension().is_some_and(|extension| extension == "jnl") {
            total += metadata.blocks() * 512;
        }
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

/// Processor time (user + system) each of this process's threads has used so far, in seconds,
/// by thread id, with the thread's name (Linux keeps its first 15 bytes). Empty where `/proc` is not.
pub fn thread_cpu() -> std::collections::BTreeMap<u64, (String, f64)> {
    // The unit of stat(5)'s time fields: USER_HZ, 100 on every Linux architecture.
    const TICKS_PER_SECOND: f64 = 100.0;
    let mut threads = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return threads;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|name| name.parse::<u64>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        // The name sits in parentheses and may hold spaces: the fields after it split cleanly.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // utime and stime, fields 14 and 15 of stat(5), are the 12th and 13th after the name.
        let ticks = |index: usize| fields.get(index).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        threads.insert(tid, (stat[open + 1..close].to_owned(), (ticks(11) + ticks(12)) / TICKS_PER_SECOND));
    }
    threads
}

/// Processor seconds each thread name has used since `before` (a [`thread_cpu`] snapshot), over
/// the threads alive now: a thread that ended in between is not counted.
pub fn thread_cpu_since(before: &std::collections::BTreeMap<u64, (String, f64)>) -> Vec<(String, f64)> {
    let mut by_name = std::collections::BTreeMap::<String, f64>::new();
    for (tid, (name, seconds)) in thread_cpu() {
        let earlier = before.get(&tid).map_or(0.0, |(_, s)| *s);
        *by_name.entry(name).or_insert(0.0) += (seconds - earlier).max(0.0);
    }
    let mut rows: Vec<(String, f64)> = by_name.into_iter().filter(|(_, s)| *s > 0.0).collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    rows
}
