//! Where captures of growing files left off, kept in the store handle's memory (the transcript
//! crate's [`FileCursors`](mnemo_transcript::FileCursors)): a capture of a
//! file it read before reads only what the file holds beyond the bytes it read then, once it has
//! checked that those bytes are still the file's first (the file was not truncated or rewritten)
//! and that the sessions they fed hold nothing more in the log. Nothing of it is written anywhere:
//! a new handle (a restarted server) reads each file whole once more.

use crate::import::ImportCursor;
use crate::mnemo::Mnemo;

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

impl Mnemo {
    /// The cursor a capture of `path` left, taken out (a capture puts back the one it ends with).
    pub fn take_file_cursor(&self, path: &str) -> Option<FileCursor> {
        self.file_cursors.take(path)
    }

    /// Keeps where a capture of `path` left off, for the next capture of that file.
    pub fn keep_file_cursor(&self, path: String, cursor: FileCursor) {
        self.file_cursors.keep(path, cursor);
    }
}
