//! Where `sync` looks: the agents' own session folders, or the folders and files it is given,
//! and the session files under them.

use std::fmt;
use std::path::{Path, PathBuf};

use mnemo::Error;
use mnemo::transcript::ImportFormat;
use serde::Serialize;

/// Deepest folder below a root that `sync` walks into (Codex nests `YYYY/MM/DD`, Claude Code
/// `PROJECT/SESSION/subagents`).
pub(crate) const WALK_DEPTH_MAX: usize = 8;

/// Most session files one root may hold; a root with more is refused rather than half-synced.
pub(crate) const ROOT_FILES_MAX: usize = 1_000_000;

/// The extension of the session files of every agent `sync` knows.
pub(crate) const SESSION_FILE_EXTENSION: &str = "jsonl";

/// A folder (or one file) to sync.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    pub(crate) path: PathBuf,
    /// How its files are read: the agent's format for its own folder, `auto` for a given one.
    pub(crate) format: ImportFormat,
}

/// What a root held.
#[derive(Debug, Serialize)]
pub(crate) struct RootReport {
    path: String,
    format: ImportFormat,
    found: bool,
    files: usize,
    /// Folders below the root that could not be read, with why.
    pub(crate) unreadable: Vec<String>,
}

impl fmt::Display for RootReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.found {
            return write!(f, "{}: not found, skipped", self.path);
        }
        write!(f, "{}: {} session files ({})", self.path, self.files, self.format)?;
        for folder in &self.unreadable {
            write!(f, "\n  cannot read {folder}")?;
        }
        Ok(())
    }
}

/// The roots to sync: `given`, or the agents' own folders when none is given.
pub(crate) fn resolve(given: &[PathBuf]) -> Result<Vec<Root>, Error> {
    if given.is_empty() {
        return Ok(default_roots());
    }
    given
        .iter()
        .map(|path| {
            if path.exists() {
                Ok(Root { path: canonical(path), format: ImportFormat::Auto })
            } else {
                Err(Error::InvalidInput(format!("{}: no such folder or file to sync", path.display())))
            }
        })
        .collect()
}

/// Claude Code's `projects` folder and Codex's `sessions` folder, where each keeps its sessions.
fn default_roots() -> Vec<Root> {
    let home = crate::served::context::var_os("HOME").map(PathBuf::from);
    let dir = |variable: &str, under_home: &str| {
        crate::served::context::var_os(variable)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(under_home)))
    };
    let mut roots = Vec::new();
    if let Some(claude) = dir("CLAUDE_CONFIG_DIR", ".claude") {
        roots.push(Root { path: claude.join("projects"), format: ImportFormat::ClaudeCode });
    }
    if let Some(codex) = dir("CODEX_HOME", ".codex") {
        roots.push(Root { path: codex.join("sessions"), format: ImportFormat::Codex });
    }
    for root in &mut roots {
        root.path = canonical(&root.path);
    }
    roots
}

/// The path as the file system's notifications name it (absolute, links resolved), when it exists.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Root {
    /// The session files under the root, in path order, each with the format to read it in.
    pub(crate) fn walk(&self) -> Result<(RootReport, Vec<(PathBuf, ImportFormat)>), Error> {
        let mut report = RootReport {
            path: self.path.display().to_string(),
            format: self.format,
            found: self.path.exists(),
            files: 0,
            unreadable: Vec::new(),
        };
        let mut files = Vec::new();
        if self.path.is_file() {
            files.push(self.path.clone());
        } else if report.found {
            walk_dir(&self.path, 0, &mut files, &mut report.unreadable)?;
        }
        report.files = files.len();
        Ok((report, files.into_iter().map(|f| (f, self.format)).collect()))
    }
}

/// Collects the session files under `dir`. Symbolic links are not followed (a link can point
/// anywhere, or back up the tree); a folder that cannot be read is noted and passed over.
fn walk_dir(
    dir: &Path,
    depth: usize,
    files: &mut Vec<PathBuf>,
    unreadable: &mut Vec<String>,
) -> Result<(), Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            unreadable.push(format!("{}: {error}", dir.display()));
            return Ok(());
        }
    };
    let mut entries: Vec<(PathBuf, std::fs::FileType)> =
        entries.filter_map(Result::ok).filter_map(|e| Some((e.path(), e.file_type().ok()?))).collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, kind) in entries {
        if kind.is_dir() && depth < WALK_DEPTH_MAX {
            walk_dir(&path, depth + 1, files, unreadable)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == SESSION_FILE_EXTENSION) {
            if files.len() == ROOT_FILES_MAX {
                return Err(Error::InvalidInput(format!(
                    "{}: more than {ROOT_FILES_MAX} session files under one folder; sync its subfolders one by one",
                    dir.display()
                )));
            }
            files.push(path);
        }
    }
    Ok(())
}
