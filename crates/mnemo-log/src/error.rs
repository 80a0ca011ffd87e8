//! The log's errors, and the range of acknowledged envelopes a log lost that one of them names. A
//! revision conflict is not here: it is an outcome of an append (`AppendOutcome::Conflict`), not a
//! failure.
//!
//! This file names no other file of the crate: every other one reports its failures through it.

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
    /// The envelope at the last acknowledged position is not the one that was acknowledged.
    #[error("envelope differs from the one acknowledged at this position")]
    NotAcknowledgedEnvelope,
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
    /// The log ends before the last position it acknowledged (its high-water mark): envelopes that
    /// callers were told are durable are gone, cut from the storage engine's journal. Nothing is
    /// appended to the store until its owner decides: salvage what verifies into a new store, or
    /// accept the loss of exactly this range in place (`LogOptions::accept_loss`).
    #[error(
        "acknowledged envelopes are lost: the log ends at position {head} but positions {lost} were acknowledged; \
         nothing will be appended to this store until you decide: `mnemo salvage --to DIR` copies what \
         verifies into a new store, `mnemo accept-loss {lost}` accepts the loss here"
    )]
    AcknowledgedLost { head: Position, lost: LostRange },
    /// The store was written by a newer or unknown version of Mnemo.
    #[error("store format {found} is not supported (this build reads format {supported})")]
    UnsupportedStoreFormat { found: String, supported: u16 },
    /// The append was refused before anything was written because it breaks a limit or is empty.
    /// Fix the request; the log is unchanged.
    #[error("append refused: {0}")]
    InvalidAppend(String),
    /// A write failed to reach the disk (the reason names the cause: a full disk, a file-size limit,
    /// a read-only file system, ...), so the writer stopped accepting appends: the failed append and
    /// those after it did not happen. Nothing acknowledged was lost; fix the cause and reopen.
    #[error(
        "the log stopped taking appends after a write failed: {reason}; nothing acknowledged was lost; reopen the store once the cause is fixed"
    )]
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
    /// missing. Nothing was read from it. Salvage what was written before the damage into a new
    /// store (`mnemo salvage`, which reads the damaged store from a copy and changes nothing in it),
    /// or restore the store from a backup.
    #[error(
        "store {path} is damaged: {what}; `mnemo salvage --to DIR` copies every envelope written \
         before the damage into a new store, without changing this one, and names what was lost"
    )]
    Damaged { path: PathBuf, what: String },
    /// A storage-engine error (I/O, a full disk, damaged files). The write did not happen.
    /// Its message names the cause in one line (see [`describe`]), so the engine's error is not
    /// chained as a source to be printed again in the engine's own words.
    #[error("storage error: {}", describe(.0))]
    Storage(fjall::Error),
    /// A file-system error outside the storage engine (creating the directory, the lock file).
    /// Its message names the cause once (the system's error is not chained as a source to be printed
    /// a second time).
    #[error("{context}: {}", fault_cause(cause).map_or_else(|| cause.to_string(), str::to_owned))]
    Io { context: String, cause: std::io::Error },
    /// The store cannot be opened for lack of access: its file system is read-only, or this user may
    /// not read or write one of its files. Nothing was changed. Mnemo writes to a store even to read
    /// it (its lock file, the storage engine's journal).
    #[error("{}", access_message(path, what, *read_only))]
    StoreAccess {
        /// The store directory.
        path: PathBuf,
        /// What failed, naming its file.
        what: String,
        /// Whether the file system is read-only (otherwise: permission denied).
        read_only: bool,
    },
}

/// Positions the log acknowledged that it no longer holds: `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostRange {
    /// The first lost position (the one after the log's head).
    pub first: Position,
    /// The last lost position (the high-water mark).
    pub last: Position,
}

impl LostRange {
    /// How many acknowledged envelopes are lost.
    pub fn len(&self) -> u64 {
        self.last.0 + 1 - self.first.0
    }

    /// Always false: a lost range holds at least one position.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Parses `FIRST..=LAST` (or `FIRST..LAST`, meaning the same inclusive range, as it is typed).
    pub fn parse(text: &str) -> Option<LostRange> {
        let (first, last) = text.trim().split_once("..")?;
        let last = last.strip_prefix('=').unwrap_or(last);
        let (first, last) = (Position(first.parse().ok()?), Position(last.parse().ok()?));
        (first.0 >= 1 && first <= last).then_some(LostRange { first, last })
    }
}

impl std::fmt::Display for LostRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..={}", self.first.0, self.last.0)
    }
}

/// What an access refusal says: the store, what failed, and what to do about it.
fn access_message(path: &std::path::Path, what: &str, read_only: bool) -> String {
    let store = path.display();
    if read_only {
        return format!(
            "store {store} is on a read-only file system ({what}); Mnemo writes to its store even to read \
             it (the lock file, the storage engine's journal): remount the file system read-write, or \
             copy the store to a writable place with `mnemo --store {store} salvage --to NEW_DIR` and \
             use the copy"
        );
    }
    // A path this user cannot even look at counts as there: only a store that is not there is new.
    if matches!(path.try_exists(), Ok(false)) {
        return format!(
            "permission denied creating store {store} ({what}): name a store directory (--store or \
             MNEMO_STORE) in a place this user can write to"
        );
    }
    let owner = owner_note(path);
    format!(
        "permission denied for store {store} ({what}); Mnemo reads and writes every file of its store, \
         even to read it: run as the user that owns the store{owner}, or give this user read and write \
         access to the store directory and everything in it"
    )
}

/// Who owns the store and who this process runs as, when they differ.
fn owner_note(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = std::fs::metadata(path) else { return String::new() };
    let me = rustix::process::getuid().as_raw();
    if metadata.uid() == me {
        String::new()
    } else {
        format!(" (uid {}; this process runs as uid {me})", metadata.uid())
    }
}

impl From<fjall::Error> for LogError {
    fn from(error: fjall::Error) -> LogError {
        LogError::Storage(error)
    }
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

    pub(crate) fn io(context: impl Into<String>, cause: std::io::Error) -> LogError {
        LogError::Io { context: context.into(), cause }
    }

    /// An open of the store in `dir` that failed for lack of access (a read-only file system, a
    /// denied permission), as [`LogError::StoreAccess`]; any other error as it is.
    pub(crate) fn store_access(dir: &std::path::Path, error: LogError) -> LogError {
        let (what, cause) = match &error {
            LogError::Io { context, cause } => (context.clone(), cause),
            LogError::Storage(storage) => match io_error(storage) {
                Some(cause) => {
                    (format!("the storage engine cannot open {}", dir.join("db").display()), cause)
                }
                None => return error,
            },
            _ => return error,
        };
        let read_only = match cause.kind() {
            std::io::ErrorKind::ReadOnlyFilesystem => true,
            std::io::ErrorKind::PermissionDenied => false,
            _ => return error,
        };
        LogError::StoreAccess { path: dir.to_path_buf(), what, read_only }
    }
}

/// A storage-engine error in one line a user can act on: the cause when the system named one (a full
/// disk, a file-size limit, a read-only file system, a denied permission), the damage when a file is
/// damaged, and the engine's own words only for anything else.
pub fn describe(error: &fjall::Error) -> String {
    if let Some(cause) = io_error(error).and_then(fault_cause) {
        return cause.to_owned();
    }
    if let Some(what) = damage(error) {
        return what;
    }
    match error {
        fjall::Error::Poisoned => {
            "the storage engine stopped accepting writes after an earlier write failed".to_owned()
        }
        fjall::Error::Locked => "the database is locked by another process".to_owned(),
        _ => match io_error(error) {
            Some(io) => io.to_string(),
            None => format!("{error:?}"),
        },
    }
}

/// The named cause of a storage-engine error, when it carries one.
pub(crate) fn fault_cause_of(error: &fjall::Error) -> Option<&'static str> {
    io_error(error).and_then(fault_cause)
}

/// The cause of a failed system call that is outside Mnemo and that its user can fix, by name.
pub fn fault_cause(error: &std::io::Error) -> Option<&'static str> {
    use std::io::ErrorKind;
    Some(match error.kind() {
        ErrorKind::StorageFull => "the disk is full (no space left on device)",
        ErrorKind::FileTooLarge => "a file reached the process's file-size limit (RLIMIT_FSIZE)",
        ErrorKind::ReadOnlyFilesystem => "the file system is read-only",
        ErrorKind::PermissionDenied => "permission denied",
        ErrorKind::QuotaExceeded => "the disk quota is exceeded",
        _ => return None,
    })
}

/// Space below which a file system counts as full: the storage engine needs room for a table or a
/// journal's next block, not for a single byte.
const FREE_BYTES_FULL_MAX: u64 = 1024 * 1024;

/// Why writes to the store in `dir` fail, found by looking at the system rather than at an error:
/// the storage engine reports a write after its first failure only as "poisoned", and that first
/// failure may have been a background flush or a stage's commit. `None` when nothing explains it.
pub fn diagnose(dir: &std::path::Path) -> Option<String> {
    use rustix::fs::StatVfsMountFlags;
    if let Ok(stat) = rustix::fs::statvfs(dir) {
        if stat.f_flag.contains(StatVfsMountFlags::RDONLY) {
            return Some("the file system is read-only".to_owned());
        }
        if stat.f_bavail.saturating_mul(stat.f_frsize) < FREE_BYTES_FULL_MAX {
            return Some("the disk is full (no space left on device)".to_owned());
        }
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Fsize);
    limit
        .current
        .map(|bytes| format!("a file reached the process's file-size limit (RLIMIT_FSIZE is {bytes} bytes)"))
}

fn io_error(error: &fjall::Error) -> Option<&std::io::Error> {
    match error {
        fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => Some(io),
        _ => None,
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
