//! `mnemo::workspace_of`: the workspace a session's directory resolves to, on repositories laid
//! out by hand as git lays them out (a `.git` folder; a linked working tree's `.git` file and its
//! git directory's `commondir`; a submodule's `.git` file), so no git is needed to run them; and
//! the workspace an import records for a Claude Code session or a Codex rollout, whose `cwd` is a
//! directory (real files with their `cwd` moved into a temporary repository).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use std::path::{Path, PathBuf};

use mnemo::transcript::{ImportFormat, ImportStatus};
use mnemo::{Config, Mnemo, workspace_of};

/// The `cwd` every line of the real Claude Code session names.
const CLAUDE_CWD: &str = "/Users/User/repo/codemie-ai/codemie-code";
/// The `cwd` of the Codex rollout fixture.
const CODEX_CWD: &str = "/home/dana/src/ledger-sync";

/// A temporary folder by its real path (the temporary folder may itself be behind a symlink).
fn real_temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    (dir, real)
}

/// A repository at `root` as `git init` lays it out (what resolution looks at: `.git/`).
fn repository(root: &Path) {
    std::fs::create_dir_all(root.join(".git/objects")).unwrap();
    std::fs::create_dir_all(root.join(".git/refs/heads")).unwrap();
    std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(root.join("src/module")).unwrap();
}

/// A linked working tree of the repository at `main`, at `tree`, as `git worktree add` lays it
/// out: `tree/.git` names `main/.git/worktrees/<name>`, whose `commondir` is `../..`.
fn worktree(main: &Path, tree: &Path, name: &str) {
    let git_dir = main.join(".git/worktrees").join(name);
    std::fs::create_dir_all(&git_dir).unwrap();
    std::fs::write(git_dir.join("commondir"), "../..\n").unwrap();
    std::fs::write(git_dir.join("gitdir"), format!("{}\n", tree.join(".git").display())).unwrap();
    std::fs::write(git_dir.join("HEAD"), format!("ref: refs/heads/{name}\n")).unwrap();
    std::fs::create_dir_all(tree.join("src")).unwrap();
    std::fs::write(tree.join(".git"), format!("gitdir: {}\n", git_dir.display())).unwrap();
}

fn of(path: impl AsRef<Path>) -> String {
    workspace_of(path.as_ref().to_str().unwrap()).unwrap().as_str().to_owned()
}

fn text(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_repositorys_root_sub_folders_trailing_slashes_and_symlinks_are_one_workspace() {
    let (_dir, temp) = real_temp();
    let root = temp.join("repo");
    repository(&root);
    std::os::unix::fs::symlink(root.join("src"), temp.join("link")).unwrap();
    let expected = text(&root);
    for path in [
        text(&root),
        format!("{}/", root.display()),
        text(&root.join("src")),
        format!("{}/src/module/", root.display()),
        format!("{}/src/./module/..", root.display()),
        text(&temp.join("link")),
        format!("{}/link/module/", temp.display()),
    ] {
        assert_eq!(of(&path), expected, "{path}");
    }
}

#[test]
fn every_working_tree_of_a_repository_is_the_main_repositorys_workspace() {
    let (_dir, temp) = real_temp();
    let main = temp.join("repo");
    repository(&main);
    worktree(&main, &temp.join("repo-feature"), "repo-feature");
    // A git directory named relative to the working tree, as `git worktree add --relative-paths`
    // writes it.
    let relative = temp.join("elsewhere/fix");
    worktree(&main, &relative, "fix");
    std::fs::write(relative.join(".git"), "gitdir: ../../repo/.git/worktrees/fix\n").unwrap();
    let expected = text(&main);
    for path in [temp.join("repo-feature"), temp.join("repo-feature/src"), relative.join("src")] {
        assert_eq!(of(&path), expected, "{}", path.display());
    }
}

#[test]
fn a_submodule_and_a_folder_outside_any_repository_are_workspaces_of_their_own() {
    let (_dir, temp) = real_temp();
    let outer = temp.join("repo");
    repository(&outer);
    // A submodule: its `.git` file names a git directory with no `commondir`.
    let modules = outer.join(".git/modules/vendor");
    std::fs::create_dir_all(&modules).unwrap();
    std::fs::write(modules.join("HEAD"), "0123456789abcdef0123456789abcdef01234567\n").unwrap();
    let submodule = outer.join("vendor");
    std::fs::create_dir_all(submodule.join("lib")).unwrap();
    std::fs::write(submodule.join(".git"), "gitdir: ../.git/modules/vendor\n").unwrap();
    assert_eq!(of(submodule.join("lib")), text(&submodule));

    let plain = temp.join("notes");
    std::fs::create_dir_all(plain.join("drafts")).unwrap();
    std::os::unix::fs::symlink(&plain, temp.join("notes-link")).unwrap();
    assert_eq!(of(format!("{}/", plain.display())), text(&plain));
    assert_eq!(of(temp.join("notes-link")), text(&plain));
    assert_eq!(of(plain.join("drafts")), text(&plain.join("drafts")));
}

#[test]
fn a_directory_that_does_not_exist_here_is_normalised_without_the_file_system() {
    let (_dir, temp) = real_temp();
    let gone = temp.join("gone/src");
    assert_eq!(of(format!("{}/./", gone.display())), text(&gone));
    assert_eq!(of("/Users/ana/repo/src/../"), "/Users/ana/repo");
    assert_eq!(of(r"C:\Users\ana\repo\"), r"C:\Users\ana\repo");
    assert_eq!(of("acme/api"), "acme/api");
    assert!(workspace_of("").is_err());
}

fn real_claude(name: &str) -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real/claude-code").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn codex_fixture() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/codex-rollout.jsonl");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each session's workspace as the store lists it.
fn workspaces(mnemo: &Mnemo) -> Vec<Option<String>> {
    let sessions = mnemo.history().session_list().unwrap();
    sessions.iter().map(|s| s.summary.workspace.as_ref().map(|w| w.as_str().to_owned())).collect()
}

#[test]
fn an_import_records_the_repositorys_root_for_a_session_started_in_a_sub_folder() {
    let (_dir, temp) = real_temp();
    let root = temp.join("repo");
    repository(&root);
    let claude = real_claude("incremental-simple/turn-1.jsonl")
        .replace(CLAUDE_CWD, &format!("{}/src/module/", root.display()));
    let codex = codex_fixture().replace(CODEX_CWD, &format!("{}/src", root.display()));
    let mnemo = Mnemo::open(&temp.join("store"), Config::default()).unwrap();
    mnemo.import(claude.as_bytes(), "claude.jsonl", ImportFormat::ClaudeCode).unwrap();
    mnemo.import(codex.as_bytes(), "rollout.jsonl", ImportFormat::Codex).unwrap();
    assert_eq!(workspaces(&mnemo), [Some(text(&root)), Some(text(&root))]);

    // The log holds the workspace: with the repository gone, a rebuild folds the same one.
    std::fs::remove_dir_all(&root).unwrap();
    mnemo.rebuild(None).unwrap();
    assert_eq!(workspaces(&mnemo), [Some(text(&root)), Some(text(&root))]);
    mnemo.close().unwrap();
}

#[test]
fn a_mnemo_transcripts_workspace_is_recorded_as_written() {
    let (_dir, temp) = real_temp();
    let root = temp.join("repo");
    repository(&root);
    let line = format!(r#"{{"kind":"session","session":"s1","workspace":"{}/src/"}}"#, root.display());
    let mnemo = Mnemo::open(&temp.join("store"), Config::default()).unwrap();
    mnemo.import(format!("{line}\n").as_bytes(), "native.jsonl", ImportFormat::Mnemo).unwrap();
    assert_eq!(workspaces(&mnemo), [Some(format!("{}/src/", root.display()))]);
    mnemo.close().unwrap();
}

/// A session recorded with its directory as it was (by a build that recorded the `cwd` itself, or
/// before a repository was made above it) keeps that workspace: its grown file imports the new
/// lines, and the session is not split or refused.
#[test]
fn a_session_keeps_the_workspace_it_was_recorded_with_when_its_directory_resolves_anew() {
    let (_dir, temp) = real_temp();
    let root = temp.join("repo");
    std::fs::create_dir_all(root.join("src")).unwrap();
    let cwd = format!("{}/src", root.display());
    let mnemo = Mnemo::open(&temp.join("store"), Config::default()).unwrap();
    let first = real_claude("incremental-simple/turn-1.jsonl").replace(CLAUDE_CWD, &cwd);
    let imported = mnemo.import(first.as_bytes(), "claude.jsonl", ImportFormat::ClaudeCode).unwrap();
    assert_eq!(imported.status, ImportStatus::Imported);
    assert_eq!(workspaces(&mnemo), [Some(cwd.clone())]);

    repository(&root);
    let again = mnemo.import(first.as_bytes(), "claude.jsonl", ImportFormat::ClaudeCode).unwrap();
    assert_eq!(again.status, ImportStatus::AlreadyComplete);
    let grown = real_claude("incremental-simple/turn-2.jsonl").replace(CLAUDE_CWD, &cwd);
    let resumed = mnemo.import(grown.as_bytes(), "claude.jsonl", ImportFormat::ClaudeCode).unwrap();
    assert_eq!(resumed.status, ImportStatus::Resumed);
    assert!(resumed.records > 0, "{resumed:?}");
    assert_eq!(workspaces(&mnemo), [Some(cwd)]);
    mnemo.close().unwrap();
}
