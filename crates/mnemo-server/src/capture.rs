//! Capturing one session file that its agent may still be writing: the complete lines are
//! imported (the importer appends only what the store does not hold yet, by each line's
//! identity), and a last line still being written is left for the next capture.
//!
//! `mnemo sync` captures every file of the agents' session folders this way; the `capture` method
//! of the store server captures the one transcript a host's hook names.

use std::path::Path;

use mnemo::transcript::{ImportFormat, ImportReport, TranscriptError};
use mnemo::{Error, Mnemo};
use serde::Serialize;

/// What capturing one file did.
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Captured {
    /// The file's complete lines were imported (all, some or none of them new).
    Imported {
        report: ImportReport,
        /// Bytes after the last complete line, left for the next capture.
        partial_tail_bytes: usize,
    },
    /// The file holds no complete line yet.
    NothingYet,
    /// The file's complete lines hold no conversation yet (only metadata lines, such as a
    /// session file that so far holds only its title or a file snapshot).
    NoConversation { format: ImportFormat },
}

/// Reads `path` and imports its complete lines in `format`.
pub fn capture_file(mnemo: &Mnemo, path: &Path, format: ImportFormat) -> Result<Captured, Error> {
    let name = path.display().to_string();
    let mut bytes = Mnemo::read_import_file(&name)?;
    let complete = complete_len(&bytes);
    let partial_tail_bytes = bytes.len() - complete;
    bytes.truncate(complete);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Captured::NothingYet);
    }
    match mnemo.import(&bytes, &name, format) {
        Ok(report) => Ok(Captured::Imported { report, partial_tail_bytes }),
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
