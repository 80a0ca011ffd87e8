//! The harness the CLI's integration tests share: the `mnemo` binary run as a process on a store in a
//! temporary directory, the repository's fixtures, and readers of what a run printed. Each test file
//! includes it with `mod support;`.

// Each test file is a crate of its own that uses part of this module; what one of them leaves
// unused is used by another.
#![allow(dead_code, reason = "each test crate uses a different part of the shared harness")]
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The binary under test, as cargo built it for the integration tests.
pub const MNEMO: &str = env!("CARGO_BIN_EXE_mnemo");

/// The bundled sample transcript: one coding session.
pub const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/coding-session.jsonl");

/// `mnemo --store STORE`, with tracing quiet whatever `RUST_LOG` says, so that stderr holds only
/// what the command itself prints.
pub fn command(store: &Path) -> Command {
    let mut command = Command::new(MNEMO);
    command.arg("--store").arg(store).env_remove("RUST_LOG");
    command
}

/// Runs `mnemo --store STORE ARGS` to its end.
pub fn mnemo(store: &Path, args: &[&str]) -> Output {
    command(store).args(args).output().unwrap()
}

/// The exit code (a test binary is never killed by a signal it did not send).
pub fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output as one JSON document, whatever the exit code: in `--json` mode an error is a
/// document too.
pub fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(output), stderr(output)))
}

/// Standard output as one JSON document of a run that succeeded.
pub fn ok_json(output: &Output) -> Value {
    assert!(output.status.success(), "{}", stderr(output));
    json(output)
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's real Claude Code session files, read in place.
pub fn real_fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/real/claude-code")
}

/// A real Claude Code session file or folder, read in place.
pub fn real(path: &str) -> PathBuf {
    real_fixtures().join(path)
}

/// The import fixtures: files in the exact shape each tool writes.
pub fn import_fixtures() -> PathBuf {
    repo_root().join("crates/mnemo/tests/fixtures/import")
}

/// An import fixture, in the exact shape its tool writes.
pub fn written(name: &str) -> PathBuf {
    import_fixtures().join(name)
}
