//! The importers: one per format, each saying what its format is, how a file in it is told apart and
//! how it is converted. [`importers`] is the one list of them: detection, the record stream, the
//! format names and the CLI's `--format` choices all read it.

use std::fmt;

use serde_json::{Map, Value};

use super::stream::Converter;
use super::{Converted, ImportFormat, SourceLine};
use crate::format::TranscriptError;

/// A transcript format an import reads. Adding a format is a module that implements this, a place in
/// [`importers`] and a variant of [`ImportFormat`].
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

/// Every importer, in the order the CLI lists them (after `auto`).
static IMPORTERS: [&dyn Importer; 6] = [
    &super::native::Native,
    &super::chat::Chat,
    &super::codex::Codex,
    &super::claude::ClaudeCode,
    &super::maka::Maka,
    &super::swe_agent::SweAgent,
];

/// Every importer, in the order the CLI lists them (after `auto`).
pub fn importers() -> &'static [&'static dyn Importer] {
    &IMPORTERS
}

/// The importer of `format`; `None` for `auto`, which is not a format but the choice of one.
pub fn importer(format: ImportFormat) -> Option<&'static dyn Importer> {
    IMPORTERS.iter().copied().find(|importer| importer.format() == format)
}

/// The importer whose markers a line carries (see [`Importer::detects_line`]).
pub(crate) fn detect_line(object: &Map<String, Value>) -> Option<ImportFormat> {
    let native = |importer: &&&dyn Importer| importer.format() == ImportFormat::Mnemo;
    let foreign = IMPORTERS.iter().filter(|importer| !native(importer));
    foreign.chain(IMPORTERS.iter().filter(native)).find(|i| i.detects_line(object)).map(|i| i.format())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

    use super::*;

    #[test]
    fn the_formats_are_auto_then_the_importers_in_their_order() {
        let listed: Vec<ImportFormat> =
            std::iter::once(ImportFormat::Auto).chain(importers().iter().map(|i| i.format())).collect();
        assert_eq!(listed, ImportFormat::ALL);
        for format in ImportFormat::ALL {
            assert_eq!(format.name().parse::<ImportFormat>().unwrap(), format);
            assert!(!format.about().is_empty(), "{format}");
        }
    }

    /// Each format's typical first line carries its own importer's markers and no other foreign
    /// importer's, so the order detection tries them in does not decide.
    #[test]
    fn a_line_carries_one_importer_s_markers() {
        let lines = [
            (ImportFormat::Mnemo, r#"{"kind":"session","session":"s1"}"#),
            (ImportFormat::OpenaiChat, r#"{"messages":[{"role":"user","content":"hi"}]}"#),
            (ImportFormat::Codex, r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}"#),
            (ImportFormat::Codex, r#"{"id":"x","timestamp":"t","instructions":null}"#),
            (ImportFormat::ClaudeCode, r#"{"type":"user","sessionId":"s","uuid":"u","message":{}}"#),
            (ImportFormat::Maka, r#"{"id":"e","invocationId":"i","turnId":"t","sessionId":"s"}"#),
        ];
        for (format, line) in lines {
            let Value::Object(object) = serde_json::from_str::<Value>(line).unwrap() else {
                panic!("{line}")
            };
            let foreign: Vec<ImportFormat> = importers()
                .iter()
                .filter(|i| i.format() != ImportFormat::Mnemo && i.detects_line(&object))
                .map(|i| i.format())
                .collect();
            let expected = if format == ImportFormat::Mnemo { vec![] } else { vec![format] };
            assert_eq!(foreign, expected, "{line}");
            assert_eq!(detect_line(&object), Some(format), "{line}");
        }
    }
}
