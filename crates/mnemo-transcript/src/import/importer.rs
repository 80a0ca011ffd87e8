//! What an importer is: a format, how a file in it is told apart, and how it is converted (a
//! [`Conversion`], with the [`Converter`] a JSON Lines format streams through). The list of
//! importers is `list.rs`; each format's importer lives in its own module.

use std::fmt;

use serde_json::{Map, Value};

use super::claude::ClaudeFile;
use super::codex::Rollout;
use super::{Converted, ImportFormat, SourceLine};
use crate::format::TranscriptError;

/// A transcript format an import reads. Adding a format is a module that implements this, a place in
/// `list.rs`'s list and a variant of [`ImportFormat`].
pub trait Importer: Sync {
    /// The format it reads; its name is the format's ([`ImportFormat::name`]).
    fn format(&self) -> ImportFormat;

    /// What the format is, in one line (the CLI's help beside the format's name).
    fn about(&self) -> &'static str;

    /// Whether the start of a file (its first bytes, as text) says it is in this format before any
    /// of its lines is read.
    fn detects_start(&self, _text: &str) -> bool {
        false
    }

    /// Whether a line of a file, a JSON object, carries this format's markers. Markers are told apart
    /// by a line's own keys: a line carries at most one importer's, except the mnemo format's
    /// (a `session` string), the weakest, which detection tries last.
    fn detects_line(&self, _object: &Map<String, Value>) -> bool {
        false
    }

    /// Whether a file that is one JSON document, an object spread over lines, is in this format.
    fn detects_document(&self, _object: &Map<String, Value>) -> bool {
        false
    }

    /// How an input in this format becomes mnemo lines.
    fn conversion(&self) -> Conversion;

    /// Whether the workspace its session lines name is the directory the session ran in (a path
    /// on the machine that wrote the file, such as Claude Code's and Codex's `cwd`), which the
    /// importing host resolves to the workspace it records, rather than a workspace as recorded.
    fn workspace_is_directory(&self) -> bool {
        false
    }
}

impl fmt::Debug for dyn Importer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Importer").field("format", &self.format()).finish_non_exhaustive()
    }
}

/// How an importer's input becomes mnemo lines; made by the importers of this crate.
#[derive(Clone, Copy)]
pub struct Conversion(pub(crate) Way);

/// A [`Conversion`]'s kinds.
#[derive(Clone, Copy)]
pub(crate) enum Way {
    /// The input is mnemo lines, parsed as they are.
    Native,
    /// JSON Lines converted a line at a time, each line at most `line_bytes_max` bytes, by the
    /// converter `start` makes once the input's first `ahead` lines are read (which it is given,
    /// and converts after).
    Lines { line_bytes_max: usize, ahead: usize, start: for<'s> fn(&'s str, &[SourceLine]) -> Converter<'s> },
    /// One JSON document, read whole and converted before its first record comes out.
    Document(fn(&[u8], &str, &mut Converted) -> Result<(), TranscriptError>),
}

impl Conversion {
    /// Whether the input is one JSON document, read whole, rather than JSON Lines, read a line at a
    /// time.
    pub fn is_whole_document(self) -> bool {
        matches!(self.0, Way::Document(_))
    }
}

impl fmt::Debug for Conversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Way::Native => "Conversion::Native",
            Way::Lines { .. } => "Conversion::Lines",
            Way::Document(_) => "Conversion::Document",
        })
    }
}

/// The longest source line of a Claude Code session file or a Codex rollout, in bytes. Their lines
/// are the tools' own: a user line with pasted screenshots holds them as base64 and passes the
/// log's record limit, though what it converts to is small (the images are not kept). Every record
/// they convert to is still held to [`TRANSCRIPT_LINE_BYTES_MAX`] by the log.
pub const SOURCE_LINE_BYTES_MAX: usize = 32 * 1024 * 1024;

/// How a stream turns source lines into mnemo lines.
#[derive(Clone)]
pub(crate) enum Converter<'s> {
    /// Mnemo lines are parsed as they are.
    Mnemo,
    Claude(ClaudeFile<'s>),
    Codex(Rollout<'s>),
    Maka,
    /// A whole document, converted when the stream opened.
    Whole,
}
