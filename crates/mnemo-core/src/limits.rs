//! Named limits. Every limit carries its unit in its name and is checked at the boundary.

/// Longest id (session, turn, run, event, tool call, ...) in UTF-8 bytes.
pub const ID_BYTES_MAX: usize = 256;
/// Longest stream id in UTF-8 bytes: a category prefix plus an id.
pub const STREAM_ID_BYTES_MAX: usize = 300;
/// Largest encoded record (the payload of one envelope) in bytes.
pub const RECORD_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most records in one atomic append.
pub const APPEND_RECORDS_MAX: usize = 1024;
/// Most bytes of records in one atomic append.
pub const APPEND_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Most records in the one atomic append of a conversation copy, which may exceed
/// [`APPEND_RECORDS_MAX`] by design so that a copy is whole or absent at any length (decision 0147).
pub const COPY_RECORDS_MAX: usize = 262_144;
/// Most bytes of records in the one atomic append of a conversation copy (decision 0147).
pub const COPY_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Largest integer a JSON reader written in JavaScript holds exactly (2^53 - 1). Counters and
/// offsets that the reference system stores as "safe integers" keep this bound.
pub const JSON_SAFE_INTEGER_MAX: u64 = (1 << 53) - 1;
/// Longest session title in UTF-8 bytes.
pub const TITLE_BYTES_MAX: usize = 512;
/// Longest session source (the format a session was imported from, `claude-code`, `codex`, ...)
/// in bytes; a source is ASCII lowercase letters, digits, `-`, `_` and `.` (decision 0166).
pub const SESSION_SOURCE_BYTES_MAX: usize = 64;

/// Most inline references on one text message.
pub const INLINE_REFERENCES_MAX: usize = 32;
/// Longest inline reference value in UTF-16 code units (the reference system's unit).
pub const INLINE_REFERENCE_VALUE_UTF16_MAX: usize = 4096;
/// Longest inline reference label in UTF-16 code units.
pub const INLINE_REFERENCE_LABEL_UTF16_MAX: usize = 200;
/// Longest permission or question request id in UTF-8 bytes.
pub const REQUEST_ID_BYTES_MAX: usize = 256;
/// Longest tool name in UTF-8 bytes: of a function call, a function response and a permission
/// decision. Checked when a record is appended, not when one is read (see
/// `Record::validate_for_append`).
pub const TOOL_NAME_BYTES_MAX: usize = 256;

/// Longest memory item content in code points, after normalization.
pub const MEMORY_CONTENT_CODE_POINTS_MAX: usize = 2000;
/// Most keys on one memory item.
pub const MEMORY_KEYS_MAX: usize = 32;
/// Longest memory key in code points.
pub const MEMORY_KEY_CODE_POINTS_MAX: usize = 256;
/// Most source pointers on one memory item.
pub const MEMORY_SOURCES_MAX: usize = 256;
/// Most mutations in one memory operation, and most items in one extraction commit.
pub const MEMORY_MUTATIONS_MAX: usize = 32;
