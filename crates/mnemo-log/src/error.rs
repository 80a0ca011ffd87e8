//! The log's errors. A revision conflict is not here: it is an outcome of an append
//! ([`crate::AppendOutcome::Conflict`]), not a failure.

use std::path::PathBuf;

use mnemo_core::Position;

/// What is wrong with a stored envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// The bytes do not decode as an envelope.
    #[error("envelope does not decode: {0}")]
    Undecodable(String),
    /// The envelope decodes but bytes remain after it.
    #[error("{extra} bytes follow the envelope")]
    TrailingBytes { extra: usize },
    /// The envelope names a format version this build does not know.
    #[error("unknown envelope format version {0}")]
    UnknownFormatVersion(u16),
    /// The envelope's stored hash does not match its bytes: they were changed after it was written.
    #[error("envelope hash does not match its bytes")]
    HashMismatch,
    /// The envelope's stream id is not valid.
    #[error("invalid stream id: {0}")]
    InvalidStream(String),
    /// The envelope's previous-hash field does not equal the hash of the envelope before it.
    #[error("previous hash does not match the hash of position {previous}")]
    BrokenLink { previous: Position },
    /// The envelope is stored under a key that is not its own position.
    #[error("stored under position {key} but says position {inner}")]
    MisplacedEnvelope { key: Position, inner: Position },
    /// A position is missing between two stored positions.
    #[error("position is missing; the log jumps from {before} to {after}")]
    MissingPosition { before: Position, after: Position },
    /// The stream index disagrees with the envelope.
    #[error("stream index disagrees with the log: {0}")]
    StreamIndex(String),
}

/// Errors of the log. Each variant says how a caller should react.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Another process holds the store. Close it there, or open another directory.
    #[error("store is locked by another process: {path}")]
    Locked { path: PathBuf },
    /// The directory is not a store and is not empty, so Mnemo will not create one there; nothing in
    /// it was changed. Name a new or empty directory, or the directory of an existing store.
    #[error(
        "{} is not a Mnemo store and is not empty (it holds {}); nothing was changed: name a new or empty directory for a store",
        path.display(), entries.join(", ")
    )]
    NotAStore { path: PathBuf, entries: Vec<String> },
    /// The stored hash chain is broken or an envelope is damaged. The store must not be written to;
    /// restore it from a copy or export what verifies.
    #[error("log is damaged at position {position}: {kind}")]
    Corrupt { position: Position, kind: CorruptionKind },
    /// The store was written by a newer or unknown version of Mnemo.
    #[error("store format {found} is not supported (this build reads format {supported})")]
    UnsupportedStoreFormat { found: String, supported: u16 },
    /// The append was refused before anything was written because it breaks a limit or is empty.
    /// Fix the request; the log is unchanged.
    #[error("append refused: {0}")]
    InvalidAppend(String),
    /// An earlier write failed to reach the disk, so the writer stopped accepting appends. Nothing
    /// acknowledged was lost; reopen the store to recover.
    #[error("log writer is poisoned by an earlier failed write: {reason}; reopen the store")]
    Poisoned { reason: String },
    /// The log was closed while the request waited.
    #[error("log is closed")]
    Closed,
    /// A replicated log could not be reached or did not answer within its retry budget, or refused a
    /// request for a reason other than a revision conflict. For an append it is unknown whether it
    /// landed: read the stream's head before appending it again (or retry with the same expected
    /// revision, which turns a landed append into a conflict, never into a duplicate).
    #[error("replicated log unavailable: {0}")]
    Unavailable(String),
    /// A file of the store's database is damaged: it fails its checksum, does not decode, or is
    /// missing. Nothing was read from it. Restore the store from a copy; `mnemo verify` reports what
    /// still verifies.
    #[error("store {path} is damaged: {what}; restore it from a copy")]
    Damaged { path: PathBuf, what: String },
    /// A storage-engine error (I/O, a full disk, damaged files). The write did not happen.
    #[error("storage error: {0}")]
    Storage(#[from] fjall::Error),
    /// A file-system error outside the storage engine (creating the directory, the lock file).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl LogError {
    /// A storage-engine error of the store in `dir`, as [`LogError::Damaged`] when it says a file is
    /// damaged, so that the message names the store and the kind of damage.
    pub(crate) fn storage(dir: &std::path::Path, error: fjall::Error) -> LogError {
        match damage(&error) {
            Some(what) => LogError::Damaged { path: dir.to_path_buf(), what },
            None => LogError::Storage(error),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> LogError {
        LogError::Io { context: context.into(), source }
    }
}

/// What a storage-engine error says is damaged, if it says so.
pub fn damage(error: &fjall::Error) -> Option<String> {
    use fjall::LsmError;
    Some(match error {
        fjall::Error::JournalRecovery(inner) => {
            format!("the journal (the write-ahead file of recent writes) does not recover: {inner:?}")
        }
        fjall::Error::InvalidVersion(_) => "the database version file is damaged".to_owned(),
        fjall::Error::InvalidTag(_) | fjall::Error::InvalidTrailer => {
            "the journal holds an entry that does not decode".to_owned()
        }
        fjall::Error::Unrecoverable => "the database cannot be recovered from its files".to_owned(),
        fjall::Error::Storage(LsmError::ChecksumMismatch { .. }) => {
            "a table or version file fails its checksum".to_owned()
        }
        fjall::Error::Storage(LsmError::Unrecoverable) => {
            "a keyspace's version file or one of its tables cannot be read".to_owned()
        }
        fjall::Error::Storage(LsmError::InvalidVersion(_)) => {
            "a table has an unknown format version".to_owned()
        }
        fjall::Error::Storage(
            LsmError::InvalidTag(_)
            | LsmError::InvalidTrailer
            | LsmError::InvalidHeader(_)
            | LsmError::Utf8(_),
        ) => "a table or version file does not decode".to_owned(),
        fjall::Error::Storage(LsmError::Io(io)) if io.kind() == std::io::ErrorKind::NotFound => {
            format!("a file the database lists is missing ({io})")
        }
        fjall::Error::Storage(LsmError::Io(io)) | fjall::Error::Io(io)
            if io.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            "a table or version file ends before its contents do".to_owned()
        }
        fjall::Error::Storage(LsmError::Decompress(_)) | fjall::Error::Decompress(_) => {
            "a block does not decompress".to_owned()
        }
        _ => return None,
    })
}
