//! A store this user cannot write to: on a read-only file system, or with files this user may not
//! open, or a new store in a directory this user may not write to. Each command fails with exit 4
//! and one line that names the store, what failed and what to do, and changes nothing; `salvage`
//! copies a store on a read-only file system to a writable place.
//!
//! The read-only file system is the store bind-mounted read-only over itself in a mount namespace
//! of its own (`unshare`); permission is denied by running as another user (`setpriv`, as root: CI
//! runs as root) or, for a user who is not root, by taking the store's permissions away.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{MNEMO, SAMPLE, mnemo, stderr};

/// The user a root test runs the binary as.
const NOBODY: &str = "65534";

fn is_root() -> bool {
    let output = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

/// A store with the sample imported, in a directory of its own.
fn sample_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let import = mnemo(&store, &["import", SAMPLE]);
    assert_eq!(import.status.code(), Some(0), "{}", stderr(&import));
    (dir, store)
}

/// Every file under `dir` with its bytes, by path.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push((path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// Runs the binary with `args` while `store` is mounted read-only over itself, in a mount
/// namespace of the command's own (the test's view of the store stays writable).
fn read_only(store: &Path, args: &[&str]) -> Output {
    let namespace: &[&str] = if is_root() { &["--mount"] } else { &["--mount", "--map-root-user"] };
    Command::new("unshare")
        .args(namespace)
        .arg("sh")
        .arg("-c")
        .arg(r#"mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@""#)
        .arg("sh")
        .arg(store)
        .arg(MNEMO)
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// One line on stderr, exit 4.
fn one_line_failure(output: &Output, context: &str) -> String {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(4), "{context}: {message}");
    assert_eq!(message.trim_end().lines().count(), 1, "{context}: {message}");
    assert!(!message.contains("os error"), "{context}: the system's words repeated: {message}");
    message
}

#[test]
fn a_store_on_a_read_only_file_system_is_named_as_such_changed_by_nothing_and_salvaged_elsewhere() {
    let (dir, store) = sample_store();
    let before = snapshot(&store);
    for args in [&["stats"][..], &["sessions"], &["verify"], &["import", SAMPLE]] {
        let context = format!("mnemo {}", args.join(" "));
        let message = one_line_failure(&read_only(&store, args), &context);
        let expected = format!("store {} is on a read-only file system", store.display());
        assert!(message.contains(&expected), "{context}: {message}");
        assert!(message.contains("mnemo.lock"), "{context}: the file that failed is named: {message}");
        assert!(message.contains("remount the file system read-write"), "{context}: {message}");
        assert!(message.contains("salvage --to NEW_DIR"), "{context}: {message}");
    }
    assert_eq!(snapshot(&store), before, "a refused command changed the store");

    // Salvage reads a store it cannot write to: the copy it makes is the store, verified.
    let copy = dir.path().join("copy");
    let salvage = read_only(&store, &["salvage", "--to", copy.to_str().unwrap(), "--json"]);
    assert_eq!(salvage.status.code(), Some(0), "{}", stderr(&salvage));
    let report: serde_json::Value = serde_json::from_slice(&salvage.stdout).unwrap();
    assert_eq!(report["recovered"], 23, "{report}");
    assert_eq!(report["lost"], serde_json::Value::Null, "{report}");
    assert_eq!(snapshot(&store), before, "salvage changed the store");
    assert_eq!(mnemo(&copy, &["verify"]).status.code(), Some(0));
    let stats: serde_json::Value =
        serde_json::from_slice(&mnemo(&copy, &["stats", "--json"]).stdout).unwrap();
    assert_eq!(stats["head"], 23);
}

/// The binary, where another user may run it, and a directory that user may enter.
struct OtherUser {
    // Kept for its drop: the directory goes with the test.
    _dir: tempfile::TempDir,
    binary: PathBuf,
}

impl OtherUser {
    fn new() -> OtherUser {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = dir.path().join("mnemo");
        std::fs::copy(MNEMO, &binary).unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        OtherUser { _dir: dir, binary }
    }

    fn run(&self, store: &Path, args: &[&str]) -> Output {
        Command::new("setpriv")
            .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups"])
            .arg(&self.binary)
            .arg("--store")
            .arg(store)
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    }
}

#[test]
fn a_store_this_user_may_not_open_is_named_with_what_to_do_and_changed_by_nothing() {
    let (dir, store) = sample_store();
    let before = snapshot(&store);
    let refused = |args: &[&str]| -> String {
        let context = format!("mnemo {}", args.join(" "));
        let output = if is_root() {
            // The store stays root's, private; its parent may be entered by anyone.
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let other = OtherUser::new();
            other.run(&store, args)
        } else {
            std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o000)).unwrap();
            let output = mnemo(&store, args);
            std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
            output
        };
        let message = one_line_failure(&output, &context);
        let expected = format!("permission denied for store {}", store.display());
        assert!(message.contains(&expected), "{context}: {message}");
        assert!(message.contains("run as the user that owns the store"), "{context}: {message}");
        if is_root() {
            assert!(
                message.contains(&format!("uid 0; this process runs as uid {NOBODY}")),
                "{context}: {message}"
            );
        }
        message
    };
    for args in [&["stats"][..], &["show", "sess-2026-01-05-auth"], &["import", SAMPLE]] {
        refused(args);
    }
    assert_eq!(snapshot(&store), before, "a refused command changed the store");
}

#[test]
fn a_new_store_where_this_user_may_not_write_is_refused_naming_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent");
    std::fs::create_dir(&parent).unwrap();
    let store = parent.join("store");
    let output = if is_root() {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        OtherUser::new().run(&store, &["import", SAMPLE])
    } else {
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o555)).unwrap();
        mnemo(&store, &["import", SAMPLE])
    };
    let message = one_line_failure(&output, "a new store in a directory this user may not write");
    assert!(message.contains(&format!("permission denied creating store {}", store.display())), "{message}");
    assert!(message.contains("in a place this user can write to"), "{message}");
    assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 0, "something was left in {}", parent.display());
}

/// A command that only reads, on a path that holds no store, says so, exits 2 and creates nothing.
#[test]
fn a_read_of_a_missing_store_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("no-store-here");
    for args in [&["sessions"][..], &["search", "deploy"], &["stats"], &["memory", "list"], &["verify"]] {
        let output = support::mnemo(&store, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let message = String::from_utf8_lossy(&output.stderr);
        assert!(
            message.contains("there is no store at") && message.contains("mnemo import"),
            "{args:?}: {message}"
        );
        assert!(!store.exists(), "{args:?} created {}", store.display());
    }
    // A command that writes creates the store it is given, as before.
    assert!(support::mnemo(&store, &["import", support::SAMPLE]).status.success());
    assert!(support::mnemo(&store, &["sessions"]).status.success());
}
