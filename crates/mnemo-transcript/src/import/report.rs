//! What an import reports, and the limits of its reading.

use mnemo_core::Position;

use super::ImportFormat;

/// How an import ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ImportStatus {
    /// Nothing the file yields was in the store: all of it was appended.
    Imported,
    /// Part of what the file yields was in the store already (an import that was interrupted, or a
    /// session file that has grown since): the rest was appended.
    Resumed,
    /// Everything the file yields is in the store already: nothing was appended.
    AlreadyComplete,
}

impl ImportStatus {
    /// The status as the CLI prints it.
    pub fn name(self) -> &'static str {
        match self {
            ImportStatus::Imported => "imported",
            ImportStatus::Resumed => "resumed",
            ImportStatus::AlreadyComplete => "already complete",
        }
    }
}

/// What an import appended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportReport {
    /// The file imported.
    pub source: String,
    /// How the import ended.
    pub status: ImportStatus,
    /// Lines read.
    pub lines: usize,
    /// Sessions created.
    pub sessions: usize,
    /// Sessions the file holds records for (created or added to).
    pub sessions_in_file: usize,
    /// Records appended.
    pub records: usize,
    /// Records the file yields that the store held already (taken by an earlier import).
    pub already: usize,
    /// Records the store holds beyond the end of this file: it is an earlier snapshot of a
    /// session file imported since (nothing is appended then).
    pub store_ahead: usize,
    /// First and last position appended (none when nothing was).
    pub positions: Option<(Position, Position)>,
    /// The format the file was read as (what `auto` chose, when it chose).
    pub format: ImportFormat,
    /// Lines (or content blocks) of types the importer does not import, counted by type.
    pub skipped: std::collections::BTreeMap<String, u64>,
}

/// Largest read buffer of an import, in bytes: with one line and the converter's open turn, what an
/// import of a file holds whatever the file's size.
pub const IMPORT_READ_BUFFER_BYTES: usize = 256 * 1024;

/// Largest file whose first line's failure is checked against the file read as one JSON document
/// (to name a pretty-printed document read as JSON Lines), in bytes.
pub const DOCUMENT_PROBE_BYTES_MAX: u64 = 64 * 1024 * 1024;
