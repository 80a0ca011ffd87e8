//! The one list of importers: detection, the record stream, the format names and the CLI's
//! `--format` choices all read it.

use serde_json::{Map, Value};

use super::ImportFormat;
use super::importer::Importer;

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
