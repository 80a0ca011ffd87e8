//! The import-memory workload (`mnemo bench --import-memory MB`): a Claude Code session file of
//! the given size, written on the fly in the exact shape Claude Code writes (user and assistant lines
//! with `uuid`, `parentUuid`, `sessionId`, `cwd`, `timestamp` and API `message` blocks: text, thinking,
//! `tool_use` with its input and `tool_result` with a file's worth of output), imported into a fresh
//! store through `Mnemo::import_file`, with the process's peak resident set size over the import.
//! The target is that the peak does not grow with the file: at most
//! [`IMPORT_PEAK_RSS_TARGET_MIB`] for a 500 MB file.

use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};
use serde::Serialize;

use crate::harness::{BenchError, io};
use crate::probe;

/// The peak resident set size an import may reach, in MiB, whatever the file's size.
pub const IMPORT_PEAK_RSS_TARGET_MIB: f64 = 256.0;

/// Bytes of tool output in one generated tool result (a file read, about a hundred lines).
const TOOL_OUTPUT_BYTES: usize = 6 * 1024;

/// What the workload measured.
#[derive(Debug, Clone, Serialize)]
pub struct ImportMemoryReport {
    /// Size of the generated file.
    pub file_bytes: u64,
    /// Its lines.
    pub lines: usize,
    /// Records the import appended.
    pub records: usize,
    /// Seconds the import took.
    pub seconds: f64,
    /// Peak resident set size during the import, MiB.
    pub peak_rss_mib: f64,
    /// Whether the peak was reset before the import (else it covers the whole process).
    pub peak_reset: bool,
    /// The target, MiB.
    pub target_mib: f64,
    /// Whether the peak is within the target.
    pub met: bool,
}

/// Writes a Claude Code session of at least `bytes` bytes to `path`; returns its lines.
pub fn write_claude_session(path: &Path, bytes: u64) -> Result<usize, BenchError> {
    let file = std::fs::File::create(path).map_err(io(format!("create {}", path.display())))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let session = "5b0c3f6e-8a51-4f3e-9d8e-2d1a7c9e4b10";
    let output_line = "    let value = compute(&input, &options).map_err(|e| Error::new(e, \"compute\"))?;\n";
    let tool_output: String = output_line.repeat(TOOL_OUTPUT_BYTES / output_line.len() + 1);
    let (mut written, mut lines, mut turn) = (0u64, 0usize, 0u64);
    let mut parent = serde_json::Value::Null;
    let mut ms = 1_767_225_600_000u64;
    while written < bytes {
        let call = format!("toolu_{turn:012}");
        let blocks = [
            (
                "user",
                serde_json::json!(format!(
                    "Turn {turn}: read src/module_{turn}.rs and tell me what compute does"
                )),
            ),
            (
                "assistant",
                serde_json::json!([
                    {"type": "thinking", "thinking": format!("The user wants module {turn}; read it first."), "signature": "c2ln"},
                    {"type": "text", "text": format!("I'll read src/module_{turn}.rs.")},
                    {"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": format!("/repo/src/module_{turn}.rs")}},
                ]),
            ),
            (
                "user",
                serde_json::json!([{"type": "tool_result", "tool_use_id": call, "content": tool_output, "is_error": false}]),
            ),
            (
                "assistant",
                serde_json::json!([{"type": "text", "text": format!("compute in module {turn} maps the input through the options and names its errors.")}]),
            ),
        ];
        for (index, (kind, content)) in blocks.into_iter().enumerate() {
            let uuid = format!("{:08x}-0000-4000-8000-{:012x}", turn, index);
            ms += 1_000;
            let seconds = ms / 1000;
            let line = serde_json::json!({
                "parentUuid": parent,
                "isSidechain": false,
                "userType": "external",
                "cwd": "/repo",
                "sessionId": session,
                "version": "2.0.14",
                "gitBranch": "main",
                "type": kind,
                "message": {"role": kind, "content": content},
                "uuid": uuid,
                "timestamp": rfc3339(seconds, ms % 1000),
            });
            let text = serde_json::to_string(&line).map_err(|e| io("encode a line")(e.into()))?;
            writeln!(out, "{text}").map_err(io(format!("write {}", path.display())))?;
            written += text.len() as u64 + 1;
            lines += 1;
            parent = serde_json::Value::String(uuid);
        }
        turn += 1;
    }
    out.flush().map_err(io(format!("write {}", path.display())))?;
    Ok(lines)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix seconds in 2026 and later (days counted from 2026-01-01).
fn rfc3339(unix_seconds: u64, millis: u64) -> String {
    const JAN_1_2026: u64 = 1_767_225_600;
    let since = unix_seconds.saturating_sub(JAN_1_2026);
    let (days, rest) = (since / 86_400, since % 86_400);
    // Days of the months of 2026, then 2027 onwards as if each year were 2026 (a generator's clock).
    const MONTHS: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (year, mut day) = (2026 + days / 365, days % 365);
    let mut month = 0;
    while day >= MONTHS[month] {
        day -= MONTHS[month];
        month += 1;
    }
    format!(
        "{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        month + 1,
        day + 1,
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Writes a `megabytes` MB session under `out`, imports it into a fresh store there and measures
/// the import's peak resident set size; the file and the store are removed afterwards.
pub fn run(out: &Path, megabytes: u64) -> Result<ImportMemoryReport, BenchError> {
    std::fs::create_dir_all(out).map_err(io(format!("create {}", out.display())))?;
    let file: PathBuf = out.join("import-memory.jsonl");
    let store = out.join("import-memory-store");
    if store.exists() {
        std::fs::remove_dir_all(&store).map_err(io(format!("remove {}", store.display())))?;
    }
    let lines = write_claude_session(&file, megabytes * 1_000_000)?;
    let file_bytes = std::fs::metadata(&file).map_err(io(format!("stat {}", file.display())))?.len();
    let result = (|| {
        let mnemo = Mnemo::open(&store, Config::default())?;
        let peak_reset = probe::reset_peak_rss();
        let started = Instant::now();
        let report = mnemo.import_file(&file.display().to_string(), ImportFormat::ClaudeCode)?;
        let seconds = started.elapsed().as_secs_f64();
        let peak_rss_mib = probe::peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);
        mnemo.close()?;
        Ok::<_, BenchError>(ImportMemoryReport {
            file_bytes,
            lines,
            records: report.records,
            seconds,
            peak_rss_mib,
            peak_reset,
            target_mib: IMPORT_PEAK_RSS_TARGET_MIB,
            met: peak_rss_mib <= IMPORT_PEAK_RSS_TARGET_MIB,
        })
    })();
    // The run's files are large: they go whatever the outcome.
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&store);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_session_is_read_as_claude_code_and_imports() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("s.jsonl");
        let lines = write_claude_session(&file, 100_000).unwrap_or_else(|e| panic!("{e}"));
        let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mnemo::transcript::detect_format(&bytes), Some(ImportFormat::ClaudeCode));
        let parsed = mnemo::transcript::parse_import(&bytes, "s", ImportFormat::ClaudeCode)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.transcript.lines, lines);
        assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
        let report = run(dir.path(), 1).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.file_bytes >= 1_000_000 && report.records > 0, "{report:?}");
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(1_767_225_600, 5), "2026-01-01T00:00:00.005Z");
        assert_eq!(rfc3339(1_767_225_600 + 31 * 86_400 + 3_661, 0), "2026-02-01T01:01:01.000Z");
    }
}
