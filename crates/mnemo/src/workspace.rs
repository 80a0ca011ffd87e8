//! The workspace of a session: the one rule that turns the directory a session runs in (a
//! transcript's `cwd`, a hook's `cwd`, an MCP client's root, the working directory) into the
//! workspace it is recorded in and answers inside.
//!
//! A session's workspace is the root of the git repository its directory is in: the nearest
//! folder, from the directory up, holding a `.git` directory or a `.git` file. A `.git` file is a
//! linked working tree's (`gitdir: <main>/.git/worktrees/<name>`): its workspace is the main
//! repository's root, found through the `commondir` file of that git directory, so every working
//! tree of a repository shares one workspace. A `.git` file without a `commondir` (a submodule's)
//! makes its folder a repository of its own. Outside any repository the workspace is the
//! directory itself. Either way the path is the real one: absolute, symlinks resolved, without
//! `.`, `..` or a trailing slash. So a sub-folder, a trailing slash, a symlinked path and a
//! second working tree all name the same workspace.
//!
//! A directory that does not exist here (a transcript written on another machine) is normalised
//! lexically: `.` and `..` and repeated or trailing separators go, and nothing is read. A relative
//! directory is relative to the working directory of the process that resolves it (the hosts
//! name absolute ones). As with git, a folder with no repository of its own inside a home
//! directory kept in git resolves to the home directory.
//!
//! The workspace is resolved once, when a session is recorded (an import, a capture) or a host
//! asks for its directory's memory; the log holds the result, so replaying it reads no file
//! system, and a session keeps the workspace it was recorded with.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use mnemo_core::{IdError, WorkspaceId};

/// Largest `.git` file or `commondir` file read, in bytes: each holds one path.
const GIT_LINK_FILE_BYTES_MAX: u64 = 4096;

/// The workspace of a session that runs in `directory` (see the module documentation); an error
/// when the path it resolves to is not a valid workspace id (empty, longer than the id limit, or
/// holding a control character).
pub fn workspace_of(directory: &str) -> Result<WorkspaceId, IdError> {
    WorkspaceId::new(workspace_path(directory))
}

/// The path of `directory`'s workspace, as text.
fn workspace_path(directory: &str) -> String {
    if directory.is_empty() {
        return String::new();
    }
    let real = match std::fs::canonicalize(directory) {
        Ok(real) => real,
        Err(_) => return lexical(directory),
    };
    let root = repository_root(&real).unwrap_or(real);
    match root.to_str() {
        Some(text) => text.to_owned(),
        // A path that is not UTF-8 cannot be an id as it is: its text as given, normalised.
        None => lexical(directory),
    }
}

/// The root of the repository `directory` (a real path) is in, if it is in one.
fn repository_root(directory: &Path) -> Option<PathBuf> {
    directory.ancestors().find_map(|folder| {
        let dot_git = folder.join(".git");
        let metadata = std::fs::metadata(&dot_git).ok()?;
        if metadata.is_dir() {
            Some(folder.to_owned())
        } else if metadata.is_file() {
            Some(main_root(folder, &dot_git).unwrap_or_else(|| folder.to_owned()))
        } else {
            None
        }
    })
}

/// The main repository's root of the linked working tree at `folder`, whose `.git` file names its
/// git directory; `None` when that git directory has no `commondir` (a submodule's) or shares one
/// that is not a repository's `.git` folder (a bare repository's).
fn main_root(folder: &Path, dot_git: &Path) -> Option<PathBuf> {
    let link = read_small(dot_git)?;
    let git_dir = folder.join(link.strip_prefix("gitdir:")?.trim());
    let common = git_dir.join(read_small(&git_dir.join("commondir"))?.trim());
    let common = std::fs::canonicalize(common).ok()?;
    if common.file_name()? != ".git" {
        return None;
    }
    common.parent().map(Path::to_path_buf)
}

/// A small text file's contents; `None` when it cannot be read, is larger than
/// [`GIT_LINK_FILE_BYTES_MAX`] or is not UTF-8.
fn read_small(path: &Path) -> Option<String> {
    let mut text = String::new();
    let file = std::fs::File::open(path).ok()?;
    file.take(GIT_LINK_FILE_BYTES_MAX + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= GIT_LINK_FILE_BYTES_MAX).then_some(text)
}

/// `path` without `.`, `..` (above the root it stays at the root; at the start of a relative path
/// it stays), repeated separators and a trailing separator; nothing is read. A Windows path (a
/// drive letter, then a separator) is normalised with either separator and written with `\`.
fn lexical(path: &str) -> String {
    let windows = path.len() >= 3
        && path.as_bytes()[0].is_ascii_alphabetic()
        && path.as_bytes()[1] == b':'
        && matches!(path.as_bytes()[2], b'\\' | b'/');
    let (root, rest, separator) = if windows {
        (&path[..3], &path[3..], '\\')
    } else if let Some(rest) = path.strip_prefix('/') {
        ("/", rest, '/')
    } else {
        ("", path, '/')
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split(|c| c == '/' || (windows && c == '\\')) {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            ".." if !root.is_empty() => {}
            part => parts.push(part),
        }
    }
    let joined = parts.join(&separator.to_string());
    if windows {
        return format!("{}\\{joined}", &path[..2]);
    }
    match (root, joined.is_empty()) {
        ("", true) => ".".to_owned(),
        _ => format!("{root}{joined}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

    use super::*;

    #[test]
    fn lexical_normalisation_drops_dots_and_trailing_separators() {
        let cases = [
            ("/home/ana/repo/", "/home/ana/repo"),
            ("/home/ana/repo//src/./..", "/home/ana/repo"),
            ("/..", "/"),
            ("/", "/"),
            ("acme/api", "acme/api"),
            ("acme/api/", "acme/api"),
            ("../x/./y/..", "../x"),
            ("./", "."),
            (r"C:\Users\ana\repo\", r"C:\Users\ana\repo"),
            (r"C:\Users\ana\repo\src\..", r"C:\Users\ana\repo"),
            ("C:/Users/ana/", r"C:\Users\ana"),
            (r"C:\", r"C:\"),
        ];
        for (path, expected) in cases {
            assert_eq!(lexical(path), expected, "{path}");
        }
    }
}
