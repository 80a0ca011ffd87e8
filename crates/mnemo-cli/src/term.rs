//! Terminal safety: human text output never carries a control sequence out of stored text.
//!
//! Transcripts hold whatever a model, a tool or a user wrote, and that includes terminal control
//! sequences: `ESC ] 52 ; c ; … BEL` writes the clipboard, `ESC ] 0 ; … BEL` sets the window
//! title, `ESC [ 2 J` clears the screen. Printed raw, they act on the reader's terminal. Every line
//! of human output therefore goes through [`escape_controls`], by way of the [`say!`], [`say_inline!`]
//! and [`say_err!`] macros, which every printing site in this crate uses (a test below fails on a
//! `println!` anywhere else). `--json` output needs nothing: JSON escapes every control character
//! in a string already, and it stays byte for byte what it was.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Text with every control character that can act on a terminal written out as a visible escape.
///
/// Newline and tab pass through (output is made of lines, and tool output is tabulated). Escaped:
/// - C0 controls other than newline and tab, and DEL, as `\xHH` (ESC is `\x1b`; a carriage return
///   could overwrite what was printed before it on the line);
/// - C1 controls (U+0080..=U+009F) as `\u{HH}`: U+009B is a one-character CSI and U+009D an OSC on
///   terminals that honour 8-bit controls;
/// - the bidirectional embeddings, overrides and isolates (U+202A..=U+202E, U+2066..=U+2069) as
///   `\u{HHHH}`: they reorder what the reader sees ("Trojan Source"). The left-to-right and
///   right-to-left marks stay, as ordinary right-to-left text needs them and they reorder nothing.
///
/// A backslash is not escaped, so the output is for reading, not for parsing back: `--json` is.
pub(crate) fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs_escape(c) {
            escaped.push(c);
        } else if u32::from(c) < 0x80 {
            // Writing to a String cannot fail.
            let _ = write!(escaped, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(escaped, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(escaped)
}

fn needs_escape(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        // `char::is_control` is exactly the C0 controls, DEL and the C1 controls.
        _ => c.is_control(),
    }
}

/// `println!` for human output, with control characters escaped (see [`escape_controls`]).
macro_rules! say {
    () => {
        $crate::term::print_out("\n")
    };
    ($($arg:tt)*) => {{
        let mut line = $crate::term::escape_controls(&::std::format!($($arg)*)).into_owned();
        line.push('\n');
        $crate::term::print_out(&line)
    }};
}

/// `print!` for human output, with control characters escaped (see [`escape_controls`]).
macro_rules! say_inline {
    ($($arg:tt)*) => {
        $crate::term::print_out(&$crate::term::escape_controls(&::std::format!($($arg)*)))
    };
}

/// `eprintln!` for messages to the user, with control characters escaped (see
/// [`escape_controls`]); a closed stderr is ignored rather than turned into a panic.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        let mut line = $crate::term::escape_controls(&::std::format!($($arg)*)).into_owned();
        line.push('\n');
        $crate::term::print_err(&line)
    }};
}

/// Writes to standard output: the caller's, when this thread runs a command for a caller of the
/// store server (`served`). In this process, a closed standard output panics as `print!` does,
/// which `main` turns into a quiet exit.
pub(crate) fn print_out(text: &str) {
    if !crate::served::context::write(mnemo_server::methods::OutputStream::Stdout, text) {
        ::std::print!("{text}");
    }
}

/// Writes to standard error (the caller's, as [`print_out`]); a closed one is ignored.
pub(crate) fn print_err(text: &str) {
    use std::io::Write as _;
    if !crate::served::context::write(mnemo_server::methods::OutputStream::Stderr, text) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// Standard output as a writer, for output written in pieces (`export`): the caller's when this
/// thread runs a command for one.
pub(crate) fn stdout_writer() -> Box<dyn std::io::Write> {
    if crate::served::context::active() {
        Box::new(ServedStdout { pending: Vec::new() })
    } else {
        Box::new(std::io::stdout().lock())
    }
}

/// A served command's standard output as a writer: bytes are sent as text, so a character cut at a
/// write's end waits for its rest.
struct ServedStdout {
    pending: Vec<u8>,
}

impl std::io::Write for ServedStdout {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        let complete = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // An incomplete character at the end waits; an invalid one is sent as U+FFFD.
            Err(error) if error.error_len().is_none() => error.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let text: Vec<u8> = self.pending.drain(..complete).collect();
        print_out(&String::from_utf8_lossy(&text));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let text = std::mem::take(&mut self.pending);
            print_out(&String::from_utf8_lossy(&text));
        }
        Ok(())
    }
}

impl Drop for ServedStdout {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

pub(crate) use {say, say_err, say_inline};

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(escape_controls(input), expected, "input: {input:?}");
    }

    #[test]
    fn terminal_sequences_are_escaped() {
        check("\u{1b}]52;c;aGk=\u{7}", "\\x1b]52;c;aGk=\\x07");
        check("\u{1b}]0;owned\u{1b}\\", "\\x1b]0;owned\\x1b\\");
        check("\u{1b}[2J\u{1b}[H", "\\x1b[2J\\x1b[H");
        check("over\rwrite", "over\\x0dwrite");
        check("nul\0del\u{7f}", "nul\\x00del\\x7f");
        check("csi\u{9b}31m osc\u{9d}", "csi\\u{9b}31m osc\\u{9d}");
        check("a\u{202e}b\u{2066}c\u{2069}", "a\\u{202e}b\\u{2066}c\\u{2069}");
    }

    #[test]
    fn ordinary_text_is_left_alone_and_borrowed() {
        for text in
            ["line one\nline two\tcolumn", "naïve — ✓ 日本語", "שלום\u{200f} rtl mark", "a\\x1b literal"]
        {
            assert!(matches!(escape_controls(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }

    /// Every printing site goes through the escaping macros: a raw `println!` (or `print!`,
    /// `eprintln!`, `eprint!`) elsewhere in this crate's sources fails here, naming where it is.
    #[test]
    fn no_raw_print_outside_the_escaping_macros() {
        let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
        let mut raw = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("src/term.rs") {
                    raw.extend(raw_prints(&path));
                }
            }
        }
        assert!(raw.is_empty(), "print through term::say!/say_inline!/say_err! instead:\n{}", raw.join("\n"));
    }

    fn raw_prints(path: &std::path::Path) -> Vec<String> {
        let mut raw = Vec::new();
        let text = std::fs::read_to_string(path).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if ["println!", "print!", "eprintln!", "eprint!"].iter().any(|m| code.contains(m)) {
                raw.push(format!("{}:{}: {}", path.display(), number + 1, line.trim()));
            }
        }
        raw
    }
}
