//! Transcripts in and out: the mnemo transcript format (JSON Lines) and its parser, the importers
//! of other agent runtimes' transcripts (format detection, a converter per source, streaming a
//! line at a time, where a reading left off), and the export of records back into the format.
//!
//! It is not:
//! - a writer of the log: it turns bytes into records and records into lines; the facade (`mnemo`)
//!   reads and appends them through its one append path;
//! - a reader of the store: what an import compares with the log ([`SessionCheck`], [`Taken`]) the
//!   facade reads for it;
//! - a file system walker: it reads the input it is handed (and, for a Claude Code session, the
//!   tool outputs the session file names beside it);
//! - a resolver of workspaces: a session's `cwd` is passed on as written, and
//!   [`Importer::workspace_is_directory`] tells the importing host to resolve it.
//!
//! # Shape
//!
//! [`parse_transcript`] reads the mnemo format whole; [`RecordStream`] reads any format a line at a
//! time, converted by its format's converter and parsed by the mnemo parser, so every format yields
//! the same records and passes the same checks. Each format has an [`Importer`] (what it is, how a
//! file in it is told apart, how it is converted), and [`importers`] is the one list of them that
//! detection, the stream and the CLI read. [`detect_format`] tells a file's format from its first
//! lines. [`SessionExport`] writes a session's records back as lines.

mod export;
mod format;
mod import;
mod json;

pub use export::{ExportReport, SessionExport};
pub use format::{
    IMPORT_EPOCH_MS, TIMESTAMP_MS_MAX, TRANSCRIPT_LINE_BYTES_MAX, Transcript, TranscriptError,
    TranscriptRecord, parse_transcript,
};
pub use import::{
    CAPTURE_CURSORS_MAX, CONVERT_HOLD_LINES_MAX, Conversion, DETECT_LINES_MAX, DOCUMENT_PROBE_BYTES_MAX,
    FileCursors, IMPORT_FILE_BYTES_MAX, IMPORT_READ_BUFFER_BYTES, Identities, ImportError, ImportFormat,
    ImportReport, ImportStatus, Importer, NO_CONVERSATION_LINES, ParsedImport, RecordStream,
    SOURCE_LINE_BYTES_MAX, SessionCheck, StreamState, Taken, detect_format, detect_from_lines, importer,
    importers, is_first_line, parse_import, whole_document,
};
