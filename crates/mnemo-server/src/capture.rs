//! Capturing one session file that its agent may still be writing: the complete lines are
//! imported (the importer appends only what the store does not hold yet, by each line's
//! identity), and a last line still being written is left for the next capture.
//!
//! `mnemo sync` captures every file of the agents' session folders this way; the `capture` method
//! of the store server captures the one transcript a host's hook names.
//!
//! It uses: the facade's importer and its file cursor (`mnemo::transcript`), nothing else of this
//! crate.
//!
//! It is not:
//! - a watcher: which files to capture, and when, is the caller's (`mnemo sync` walks the agents'
//!   folders; a hook names one file);
//! - an importer: converting a session format into records is the transcript code's; this decides
//!   only how much of a growing file is complete.

use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use mnemo::transcript::{FileCursor, IMPORT_FILE_BYTES_MAX, ImportFormat, ImportReport, TranscriptError};
use mnemo::{Error, Mnemo};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// What capturing one file did.
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Captured {
    /// The file's complete lines were imported (all, some or none of them new).
    Imported {
        report: ImportReport,
        /// Bytes after the last complete line, left for the next capture.
        partial_tail_bytes: usize,
        /// Where in the file reading and converting began: 0 when it was read whole, else the
        /// bytes an earlier capture of the same file read, whose records the store holds.
        read_from_byte: u64,
    },
    /// The file holds no complete line yet.
    NothingYet,
    /// The file's complete lines hold no conversation yet (only metadata lines, such as a
    /// session file that so far holds only its title or a file snapshot).
    NoConversation { format: ImportFormat },
}

/// Reads `path` and imports its complete lines in `format`.
///
/// The store handle keeps where the last capture of each file left off (in memory,
/// [`mnemo::transcript::CAPTURE_CURSORS_MAX`] files): when the file is the same file (device and
/// inode), no shorter than the bytes read then, and those bytes hash as they did, and the
/// sessions they fed hold nothing more in the log, only what follows them is read and converted.
/// Anything else (a truncated or rewritten file, another writer's records, a restarted server)
/// reads the file whole, as the first capture did.
pub fn capture_file(mnemo: &Mnemo, path: &Path, format: ImportFormat) -> Result<Captured, Error> {
    let name = path.display().to_string();
    if let Some(cursor) = mnemo.take_file_cursor(&name)
        && let Some(captured) = capture_rest(mnemo, path, &name, format, cursor)?
    {
        return Ok(captured);
    }
    let read_error = |source| Error::Read { path: name.clone(), source };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    if metadata.is_file() && metadata.len() > IMPORT_FILE_BYTES_MAX {
        return Err(Error::InvalidInput(format!(
            "{name}: the file is {} bytes, larger than {IMPORT_FILE_BYTES_MAX}, the limit for one import",
            metadata.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(IMPORT_FILE_BYTES_MAX + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() as u64 > IMPORT_FILE_BYTES_MAX {
        return Err(Error::InvalidInput(format!(
            "{name}: the file is larger than {IMPORT_FILE_BYTES_MAX} bytes, the limit for one import"
        )));
    }
    let complete = complete_len(&bytes);
    let partial_tail_bytes = bytes.len() - complete;
    bytes.truncate(complete);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Captured::NothingYet);
    }
    match mnemo.import_resumable(&bytes, &name, format) {
        Ok((report, cursor)) => {
            if let Some(import) = cursor.filter(|c| c.bytes() == bytes.len() as u64) {
                let prefix = Sha256::digest(&bytes).into();
                let file = (metadata.dev(), metadata.ino());
                mnemo.keep_file_cursor(name, FileCursor { file, prefix, import });
            }
            Ok(Captured::Imported { report, partial_tail_bytes, read_from_byte: 0 })
        }
        Err(Error::Transcript(error)) if has_no_conversation(&error) => {
            let format = if format == ImportFormat::Auto {
                mnemo::transcript::detect_format(&bytes).unwrap_or(ImportFormat::Auto)
            } else {
                format
            };
            Ok(Captured::NoConversation { format })
        }
        Err(error) => Err(error),
    }
}

/// A capture of what `path` holds beyond the bytes `cursor` read, or `None` when the file must be
/// read whole (see [`capture_file`]).
fn capture_rest(
    mnemo: &Mnemo,
    path: &Path,
    name: &str,
    format: ImportFormat,
    cursor: FileCursor,
) -> Result<Option<Captured>, Error> {
    if format != ImportFormat::Auto && format != cursor.import.format() {
        return Ok(None);
    }
    let read_error = |source| Error::Read { path: name.to_owned(), source };
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    let offset = cursor.import.bytes();
    if (metadata.dev(), metadata.ino()) != cursor.file || metadata.len() < offset {
        return Ok(None);
    }
    if metadata.len() > IMPORT_FILE_BYTES_MAX {
        return Ok(None);
    }
    // The bytes read before are hashed, not converted: a file rewritten in place, or with a line
    // added before its end, hashes differently and is read whole.
    let mut hasher = Sha256::new();
    let mut prefix = std::io::BufReader::with_capacity(PREFIX_READ_BUFFER_BYTES, (&mut file).take(offset));
    let hashed = std::io::copy(&mut prefix, &mut HashWriter(&mut hasher)).map_err(read_error)?;
    if hashed != offset || <[u8; 32]>::from(hasher.clone().finalize()) != cursor.prefix {
        return Ok(None);
    }
    if !mnemo.import_cursor_is_current(&cursor.import)? {
        return Ok(None);
    }
    let mut rest = Vec::new();
    file.take(IMPORT_FILE_BYTES_MAX - offset + 1).read_to_end(&mut rest).map_err(read_error)?;
    let complete = complete_len(&rest);
    let partial_tail_bytes = rest.len() - complete;
    rest.truncate(complete);
    hasher.update(&rest);
    let (report, next) = mnemo.import_resumed(&rest, name, cursor.import)?;
    if let Some(import) = next.filter(|c| c.bytes() == offset + rest.len() as u64) {
        let file = (metadata.dev(), metadata.ino());
        mnemo
            .keep_file_cursor(name.to_owned(), FileCursor { file, prefix: hasher.finalize().into(), import });
    }
    Ok(Some(Captured::Imported { report, partial_tail_bytes, read_from_byte: offset }))
}

/// Read buffer for hashing the bytes a capture read before, in bytes.
const PREFIX_READ_BUFFER_BYTES: usize = 256 * 1024;

/// Feeds what is written to it to a hash.
struct HashWriter<'h>(&'h mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether an import failed only because the file holds no conversation line of its format.
fn has_no_conversation(error: &TranscriptError) -> bool {
    error.line == 1 && error.reason.starts_with(mnemo::transcript::NO_CONVERSATION_LINES)
}

/// The length of the part of `bytes` that is complete lines. An agent appends a line and then
/// its newline, so bytes after the last newline are either a last line written without one
/// (complete when it parses as JSON) or a line still being written (left for next time).
pub fn complete_len(bytes: &[u8]) -> usize {
    let after_newline = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let tail = &bytes[after_newline..];
    if tail.iter().all(u8::is_ascii_whitespace) || serde_json::from_slice::<serde_json::Value>(tail).is_ok() {
        bytes.len()
    } else {
        after_newline
    }
}

#[cfg(test)]
mod tests {
    use super::complete_len;

    #[test]
    fn a_half_written_last_line_is_cut_and_a_complete_one_kept() {
        let check = |bytes: &str, expect: &str| {
            assert_eq!(&bytes[..complete_len(bytes.as_bytes())], expect, "{bytes:?}");
        };
        check("", "");
        check("{\"a\":1}\n", "{\"a\":1}\n");
        check("{\"a\":1}\n{\"b\":", "{\"a\":1}\n");
        check("{\"a\":1}\n{\"b\":2}", "{\"a\":1}\n{\"b\":2}");
        check("{\"a\":1}\n  \n", "{\"a\":1}\n  \n");
        check("{\"b\":", "");
        check("{\"a\":1}\n{\"b\":\"multi-byte \u{e9}", "{\"a\":1}\n");
    }
}
