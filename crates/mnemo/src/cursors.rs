//! Where captures of growing files left off, kept in the store handle's memory: a capture of a
//! file it read before reads only what the file holds beyond the bytes it read then, once it has
//! checked that those bytes are still the file's first (the file was not truncated or rewritten)
//! and that the sessions they fed hold nothing more in the log. Nothing of it is written anywhere:
//! a new handle (a restarted server) reads each file whole once more.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::import::ImportCursor;
use crate::mnemo::Mnemo;

/// Files whose capture cursor a store handle keeps at most; past it, the cursor used least
/// recently is dropped (its file is read whole at its next capture).
pub const CAPTURE_CURSORS_MAX: usize = 64;

/// Where a capture of one file left off.
#[derive(Debug)]
pub struct FileCursor {
    /// The file's device and inode when it was read: another file at the same path is read whole.
    pub file: (u64, u64),
    /// SHA-256 of the file's first [`ImportCursor::bytes`] bytes, as they were read.
    pub prefix: [u8; 32],
    /// The import's state at the end of those bytes.
    pub import: ImportCursor,
}

/// The cursors of a store handle, by file path.
#[derive(Default, Debug)]
pub(crate) struct FileCursors {
    inner: Mutex<CursorMap>,
}

#[derive(Default, Debug)]
struct CursorMap {
    by_path: HashMap<String, (u64, FileCursor)>,
    uses: u64,
}

impl Mnemo {
    /// The cursor a capture of `path` left, taken out (a capture puts back the one it ends with).
    pub fn take_file_cursor(&self, path: &str) -> Option<FileCursor> {
        let mut map = self.file_cursors.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.by_path.remove(path).map(|(_, cursor)| cursor)
    }

    /// Keeps where a capture of `path` left off, for the next capture of that file.
    pub fn keep_file_cursor(&self, path: String, cursor: FileCursor) {
        let mut map = self.file_cursors.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.uses += 1;
        let used = map.uses;
        if !map.by_path.contains_key(&path) && map.by_path.len() >= CAPTURE_CURSORS_MAX {
            let oldest = map.by_path.iter().min_by_key(|(_, (used, _))| *used).map(|(path, _)| path.clone());
            if let Some(oldest) = oldest {
                map.by_path.remove(&oldest);
            }
        }
        map.by_path.insert(path, (used, cursor));
    }
}
