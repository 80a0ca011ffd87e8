//! The reference system's RuntimeEvents as JSON Lines (events-and-history.md §1): each line one
//! event in its exact camelCase shape, kept whole (statuses, actions, refs, visibility, partial
//! flags and provider options included). A line without the event envelope's `invocationId` and
//! `turnId` is another ledger's row and is skipped, counted by its `type` or `kind`; a line that
//! has them but is not a valid event is an error.

use serde_json::{Map, Value, json};

use super::importer::{Conversion, Converter, Importer, Way};
use super::{Converted, ImportFormat, SourceLine, error};
use crate::format::{TRANSCRIPT_LINE_BYTES_MAX, TranscriptError};

/// The importer of the reference system's RuntimeEvent lines.
pub(crate) struct Maka;

impl Importer for Maka {
    fn format(&self) -> ImportFormat {
        ImportFormat::Maka
    }

    fn about(&self) -> &'static str {
        "The reference system's RuntimeEvent JSON Lines"
    }

    fn detects_line(&self, object: &Map<String, Value>) -> bool {
        object.contains_key("invocationId") && object.contains_key("turnId")
    }

    fn conversion(&self) -> Conversion {
        Conversion(Way::Lines {
            line_bytes_max: TRANSCRIPT_LINE_BYTES_MAX,
            ahead: 0,
            start: |_, _| Converter::Maka,
        })
    }
}

/// Converts one line.
pub(crate) fn line(
    source_line: &SourceLine,
    source: &str,
    out: &mut Converted,
) -> Result<(), TranscriptError> {
    let SourceLine { line, object } = source_line;
    if !(object.contains_key("invocationId") && object.contains_key("turnId")) {
        let kind =
            ["type", "kind"].iter().find_map(|k| object.get(*k).and_then(Value::as_str)).unwrap_or("unknown");
        out.skip(format!("non-event line ({kind})"));
        return Ok(());
    }
    if !object.get("sessionId").is_some_and(Value::is_string) {
        return Err(error(source, *line, Some("sessionId"), "must be a string"));
    }
    out.push(*line, json!({"kind": "runtime_event", "event": Value::Object(object.clone())}));
    Ok(())
}
