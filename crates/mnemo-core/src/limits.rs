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
