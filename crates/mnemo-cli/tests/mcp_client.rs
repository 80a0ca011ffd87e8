//! `mnemo mcp` driven by the official MCP TypeScript SDK's client (`tests/mcp-client/`, run by
//! `node --test`): tools and their schemas, workspace-scoped search on real sessions, reading around
//! a hit, remember and recall, two MCP servers on one store, and two protocol versions.
//!
//! Needs `node` and `npm ci` in `tests/mcp-client` (`.ci/run` does both). Without them the test says
//! so and passes outside CI; under CI (`CI` set) their absence fails it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

mod support;

use std::process::Command;

use support::{MNEMO, repo_root};

#[test]
fn the_typescript_sdk_client_drives_mnemo_mcp_end_to_end() {
    let dir = repo_root().join("tests/mcp-client");
    let ready = dir.join("node_modules/@modelcontextprotocol/sdk").is_dir()
        && Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install node and run `npm ci` in tests/mcp-client before the tests"
        );
        eprintln!("skipped: node or tests/mcp-client/node_modules is missing (run `npm ci` there)");
        return;
    }
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec"])
        .current_dir(&dir)
        .env("MNEMO_BIN", MNEMO)
        .output()
        .unwrap();
    let report =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "node --test failed:\n{report}");
    assert!(report.contains("pass 4") && report.contains("fail 0"), "{report}");
}
