//! The sync state: each captured file's size, modification time and inode at its last capture,
//! kept in the store directory so that the next run reads only files that changed.
//!
//! It is a cache, never the record of what was taken (the log is: capture compares each line's
//! identity with what the session's stream holds). A missing, unreadable or damaged state file
//! only makes the next run read every file again, which appends nothing twice.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::term::say_err;

/// The state file's name inside the store directory.
pub(crate) const SYNC_STATE_FILE_NAME: &str = "sync-state.json";

/// Largest state file read, in bytes (about a million files' marks); a larger one is ignored.
const SYNC_STATE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// What a file looked like when it was last captured. A file that an agent appends to changes
/// size and time; one replaced by another file changes inode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileMark {
    len: u64,
    modified_s: i64,
    modified_ns: i64,
    inode: u64,
}

impl FileMark {
    pub(crate) fn of(path: &Path) -> std::io::Result<FileMark> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = std::fs::metadata(path)?;
        Ok(FileMark {
            len: metadata.len(),
            modified_s: metadata.mtime(),
            modified_ns: metadata.mtime_nsec(),
            inode: metadata.ino(),
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct SyncState {
    /// Marks by the file's canonical path.
    files: BTreeMap<String, FileMark>,
}

fn key(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

impl SyncState {
    /// The state saved in `store`, or an empty one when there is none or it cannot be read.
    pub(crate) fn load(store: &Path) -> SyncState {
        let path = store.join(SYNC_STATE_FILE_NAME);
        let read = || -> anyhow::Result<Option<SyncState>> {
            let Ok(metadata) = std::fs::metadata(&path) else { return Ok(None) };
            anyhow::ensure!(
                metadata.len() <= SYNC_STATE_BYTES_MAX,
                "it is {} bytes, more than {SYNC_STATE_BYTES_MAX}",
                metadata.len()
            );
            Ok(Some(serde_json::from_slice(&std::fs::read(&path)?)?))
        };
        match read() {
            Ok(state) => state.unwrap_or_default(),
            Err(error) => {
                say_err!(
                    "warning: ignoring the sync state {} ({error:#}); every file is read again",
                    path.display()
                );
                SyncState::default()
            }
        }
    }

    /// Writes the state to `store`, whole or not at all (a new file renamed over the old one).
    pub(crate) fn save(&self, store: &Path) -> anyhow::Result<()> {
        let path = store.join(SYNC_STATE_FILE_NAME);
        let partial = store.join(format!("{SYNC_STATE_FILE_NAME}.partial"));
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::File::create(&partial)?;
            file.write_all(&serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
            file.sync_data()?;
            std::fs::rename(&partial, &path)
        };
        write().with_context(|| format!("cannot save the sync state {}", path.display()))
    }

    pub(crate) fn is_unchanged(&self, path: &Path, mark: &FileMark) -> bool {
        self.files.get(&key(path)) == Some(mark)
    }

    pub(crate) fn mark(&mut self, path: &Path, mark: FileMark) {
        self.files.insert(key(path), mark);
    }

    pub(crate) fn forget(&mut self, path: &Path) {
        self.files.remove(&key(path));
    }
}
