//! Reading an import's input one line at a time, so an import holds one line and a read buffer,
//! never the whole file, whatever the file's size.

use std::io::BufRead;

use sha2::{Digest as _, Sha256};

use crate::format::TRANSCRIPT_LINE_BYTES_MAX;

/// One line of the input: its 1-based number and its bytes (without the newline), or its length
/// when it is longer than the reader's limit ([`TRANSCRIPT_LINE_BYTES_MAX`] unless set; its bytes
/// are then skipped, not held).
#[derive(Debug)]
pub enum RawLine<'a> {
    Line(usize, &'a [u8]),
    TooLong(usize, u64),
}

/// The lines of an input split at `\n` exactly as `bytes.split(|b| *b == b'\n')` splits a whole
/// file: a file that ends with a newline has an empty last piece, and an empty file one empty line.
/// It counts and hashes what it reads, so a second reading can tell it read the same bytes.
pub struct LineReader<R> {
    reader: R,
    buffer: Vec<u8>,
    line: usize,
    bytes: u64,
    newlines: u64,
    digest: Sha256,
    done: bool,
    last_was_newline: bool,
    /// The longest line held, in bytes.
    limit: usize,
}

impl<R> std::fmt::Debug for LineReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineReader")
            .field("line", &self.line)
            .field("bytes", &self.bytes)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<R: BufRead> LineReader<R> {
    pub fn new(reader: R) -> Self {
        LineReader {
            reader,
            buffer: Vec::new(),
            line: 0,
            bytes: 0,
            newlines: 0,
            digest: Sha256::new(),
            done: false,
            last_was_newline: false,
            limit: TRANSCRIPT_LINE_BYTES_MAX,
        }
    }

    /// The same reader holding lines of up to `limit` bytes.
    pub fn limited(self, limit: usize) -> Self {
        LineReader { limit, ..self }
    }

    /// The longest line it holds, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A reader of what follows the first `lines` lines of an input, `bytes` long and ending in
    /// a newline: it numbers, counts and hashes what it reads as if it had read them first (the
    /// hash covers only what it reads itself).
    pub fn resume(reader: R, lines: usize, bytes: u64) -> Self {
        LineReader {
            line: lines,
            bytes,
            newlines: lines as u64,
            last_was_newline: true,
            ..LineReader::new(reader)
        }
    }

    /// The next line, or `None` after the last.
    pub fn next_line(&mut self) -> std::io::Result<Option<RawLine<'_>>> {
        if self.done {
            return Ok(None);
        }
        self.buffer.clear();
        self.line += 1;
        let mut length: u64 = 0;
        let mut ended = false;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            if available.is_empty() {
                break;
            }
            let (piece, found) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            let consumed = piece.len() + usize::from(found);
            self.digest.update(&available[..consumed]);
            length += piece.len() as u64;
            // A line over the limit is counted, not kept: its length goes in the error.
            if self.buffer.len() + piece.len() <= self.limit {
                self.buffer.extend_from_slice(piece);
            }
            self.reader.consume(consumed);
            self.bytes += consumed as u64;
            self.last_was_newline = found;
            if found {
                self.newlines += 1;
                ended = true;
                break;
            }
        }
        if !ended {
            self.done = true;
        }
        if length > self.limit as u64 {
            return Ok(Some(RawLine::TooLong(self.line, length)));
        }
        Ok(Some(RawLine::Line(self.line, &self.buffer)))
    }

    /// Lines the input holds, counted as an import reports them: blank lines included, the empty
    /// piece after a final newline not.
    pub fn lines(&self) -> usize {
        let newlines = usize::try_from(self.newlines).unwrap_or(usize::MAX);
        newlines + usize::from(!self.last_was_newline)
    }

    /// Whether what was read so far is one or more lines, each ended by its newline.
    pub fn ends_at_a_line_end(&self) -> bool {
        self.bytes > 0 && self.last_was_newline
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// SHA-256 of the bytes read so far.
    pub fn digest(&self) -> [u8; 32] {
        self.digest.clone().finalize().into()
    }
}

/// Whether `line` is the first line of `reader`'s input that is not blank (a line that cannot be
/// read is not).
pub fn is_first_line<R: BufRead>(reader: R, line: usize) -> bool {
    let mut reader = LineReader::new(reader);
    while let Ok(Some(raw)) = reader.next_line() {
        match raw {
            RawLine::Line(at, bytes) if bytes.iter().all(u8::is_ascii_whitespace) && at < line => {}
            RawLine::Line(at, _) | RawLine::TooLong(at, _) => return at == line,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(bytes: &[u8]) -> (Vec<(usize, Vec<u8>)>, usize) {
        let mut reader = LineReader::new(bytes);
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            match line {
                RawLine::Line(n, bytes) => lines.push((n, bytes.to_vec())),
                RawLine::TooLong(n, length) => lines.push((n, format!("too long {length}").into_bytes())),
            }
        }
        assert_eq!(reader.bytes(), bytes.len() as u64);
        assert_eq!(reader.digest(), <[u8; 32]>::from(Sha256::digest(bytes)));
        (lines, reader.lines())
    }

    #[test]
    fn lines_are_the_pieces_a_whole_file_split_gives() {
        for text in ["", "a", "a\n", "a\nb", "a\n\nb\n", "\n", "\n\n", "{}\r\n{}"] {
            let bytes = text.as_bytes();
            let (lines, count) = split(bytes);
            let expected: Vec<(usize, Vec<u8>)> =
                bytes.split(|b| *b == b'\n').enumerate().map(|(i, l)| (i + 1, l.to_vec())).collect();
            assert_eq!(lines, expected, "{text:?}");
            let whole = bytes.split(|b| *b == b'\n').count() - usize::from(bytes.ends_with(b"\n"));
            assert_eq!(count, whole, "{text:?}");
        }
    }

    #[test]
    fn a_line_over_the_limit_is_measured_not_held() {
        let mut bytes = vec![b'x'; TRANSCRIPT_LINE_BYTES_MAX + 10];
        bytes.extend_from_slice(b"\nok");
        let (lines, count) = split(&bytes);
        assert_eq!(lines[0], (1, format!("too long {}", TRANSCRIPT_LINE_BYTES_MAX + 10).into_bytes()));
        assert_eq!(lines[1], (2, b"ok".to_vec()));
        assert_eq!(count, 2);
    }
}
