//! Where captures of growing files left off, kept in the store handle's memory (the transcript
//! crate's [`FileCursors`](mnemo_transcript::FileCursors)): a capture of a
//! file it read before reads only what the file holds beyond the bytes it read then, once it has
//! checked that those bytes are still the file's first (the file was not truncated or rewritten)
//! and that the sessions they fed hold nothing more in the log. Nothing of it is written anywhere:
//! a new handle (a restarted server) reads each file whole once more.

use crate::import::FileCursor;
use crate::mnemo::Mnemo;

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
