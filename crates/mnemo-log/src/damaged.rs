//! Reading a damaged store without changing it: a private copy of the store is opened instead of the
//! store, and when the storage engine refuses the copy's journal (a batch that fails its checksum or
//! does not decode), the copy's journal is cut before the first batch it refuses, so that everything
//! written before the damage can be read.
//!
//! Architecture invariant: salvage never opens the damaged store itself. The storage engine repairs
//! what it opens (it cuts a journal after its last whole batch and preallocates the active journal),
//! which would change the only evidence of what was written; the store is only read, under its lock
//! taken shared, so that no writer changes it during the copy.
//!
//! The cut is searched, not computed: the offsets just past each journal batch's trailer are the
//! candidates (the storage engine's batch format, below), and a binary search finds the last one at
//! which the copy opens (a cut keeps a prefix of the journal, and a prefix that holds a refused batch
//! is refused at any longer length). Each try opens a fresh copy, so a store of `S` bytes whose journal
//! holds `B` batches costs about `S × log2(B)` bytes of copying; salvage is rare and this keeps the
//! engine's own recovery the judge of what is readable.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use tracing::{debug, info};

use crate::databases::{DATABASE_DIR_NAME, KEYS_DATABASE_DIR_NAME};
use crate::error::LogError;
use crate::fjall_log::{FjallLog, LogOptions};
use crate::store_dir::{self, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE};
use crate::store_lock::{LOCK_FILE_NAME, StoreLock};

/// What closes each batch of the storage engine's journal: the end tag, an 8-byte checksum of the
/// batch, then this trailer.
const JOURNAL_BATCH_TRAILER: &[u8] = b"FJL\x03";
const JOURNAL_END_TAG: u8 = 3;
const JOURNAL_CHECKSUM_BYTES: usize = 8;
/// The bytes that end a batch: end tag, checksum, trailer.
const JOURNAL_BATCH_END_BYTES: usize = 1 + JOURNAL_CHECKSUM_BYTES + JOURNAL_BATCH_TRAILER.len();
/// The extension of the storage engine's journal files (named by their number).
const JOURNAL_EXTENSION: &str = "jnl";
/// How much of a journal is read at a time while looking for its batch ends.
const JOURNAL_SCAN_CHUNK_BYTES: usize = 64 * 1024;
/// The name of the copy inside the scratch directory.
const COPY_DIR_NAME: &str = "store";

/// Where the copy of a damaged store was cut so that the storage engine would open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalCut {
    /// The journal file that holds the first refused batch (its name in the database directory).
    pub journal: String,
    /// The copy keeps this journal's bytes before this offset (and no later journal).
    pub offset: u64,
    /// The journal's length in the damaged store.
    pub length: u64,
    /// Why the storage engine refused the journal as it was.
    pub refused: String,
}

impl std::fmt::Display for JournalCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the journal {} is refused after byte {} of {} ({}); it was read up to there",
            self.journal, self.offset, self.length, self.refused
        )
    }
}

/// A damaged store's log, opened from a private copy for reading. The copy is deleted when this is
/// dropped.
#[derive(Debug)]
pub struct DamagedCopy {
    log: Option<FjallLog>,
    scratch: PathBuf,
    cut: Option<JournalCut>,
}

impl DamagedCopy {
    /// Copies the store in `from` into `scratch` (a new directory: it must not exist; its parent
    /// must) and opens the copy's log with `options`, cutting the copy's journal before the first
    /// batch the storage engine refuses. The store in `from` is only read.
    pub fn open(from: &Path, scratch: &Path, options: &LogOptions) -> Result<DamagedCopy, LogError> {
        if !store_dir::is_store(from) {
            return Err(LogError::io(
                format!("cannot salvage {}", from.display()),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "it is not a Mnemo store (it has no store marker file)",
                ),
            ));
        }
        let _lock = StoreLock::acquire_shared(from)?;
        DirBuilder::new().mode(PRIVATE_DIR_MODE).create(scratch).map_err(|e| {
            LogError::io(format!("cannot create the scratch directory {}", scratch.display()), e)
        })?;
        let mut copy = DamagedCopy { log: None, scratch: scratch.to_path_buf(), cut: None };
        let (log, cut) = open_copy(from, &copy.scratch.join(COPY_DIR_NAME), options)?;
        copy.log = Some(log);
        copy.cut = cut;
        Ok(copy)
    }

    /// The copy's log.
    pub fn log(&self) -> &FjallLog {
        // NOTE: set by `open` before the copy is returned; taken only by `drop`.
        self.log.as_ref().unwrap_or_else(|| unreachable!("the copy's log is open until it is dropped"))
    }

    /// Where the copy's journal was cut, if the storage engine refused it whole.
    pub fn journal_cut(&self) -> Option<&JournalCut> {
        self.cut.as_ref()
    }
}

impl Drop for DamagedCopy {
    fn drop(&mut self) {
        drop(self.log.take());
        if let Err(error) = std::fs::remove_dir_all(&self.scratch) {
            tracing::warn!(scratch = %self.scratch.display(), %error, "cannot remove the salvage scratch copy");
        }
    }
}

/// A journal of the damaged store: its number, path and length.
struct Journal {
    number: u64,
    path: PathBuf,
    length: u64,
}

/// A cut to try: keep journals before `journal` whole, this one up to `offset`, none after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cut {
    journal: usize,
    offset: u64,
}

fn open_copy(
    from: &Path,
    copy: &Path,
    options: &LogOptions,
) -> Result<(FjallLog, Option<JournalCut>), LogError> {
    let refused = match try_open(from, copy, None, &[], options)? {
        Ok(log) => return Ok((log, None)),
        Err(refused) => refused,
    };
    let journals = journals(&from.join(DATABASE_DIR_NAME))?;
    let mut cuts = Vec::new();
    for (index, journal) in journals.iter().enumerate() {
        cuts.push(Cut { journal: index, offset: 0 });
        cuts.extend(batch_ends(&journal.path)?.into_iter().map(|offset| Cut { journal: index, offset }));
    }
    info!(from = %from.display(), candidates = cuts.len(), "the journal is refused; searching for the last cut that opens");
    // The last cut known to open (None: not even an empty journal opens: the damage is elsewhere),
    // and the first known not to.
    let (mut opens, mut refuses) = (None, cuts.len());
    let mut open_log = None;
    if let Some(first) = cuts.first()
        && let Ok(log) = try_open(from, copy, Some(*first), &journals, options)?
    {
        opens = Some(0);
        open_log = Some(log);
    }
    let Some(mut low) = opens else {
        return Err(LogError::storage(from, refused));
    };
    while low + 1 < refuses {
        let middle = low + (refuses - low) / 2;
        drop(open_log.take());
        match try_open(from, copy, Some(cuts[middle]), &journals, options)? {
            Ok(log) => {
                low = middle;
                open_log = Some(log);
            }
            Err(_) => refuses = middle,
        }
    }
    let best = cuts[low];
    let log = match open_log {
        Some(log) => log,
        None => {
            try_open(from, copy, Some(best), &journals, options)?.map_err(|e| LogError::storage(from, e))?
        }
    };
    let journal = &journals[best.journal];
    let cut = JournalCut {
        journal: journal.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        offset: best.offset,
        length: journal.length,
        refused: crate::error::describe(&refused),
    };
    info!(cut = %cut, "the copy of the damaged store opens");
    Ok((log, Some(cut)))
}

/// Makes a fresh copy of the store (with its journals cut as `cut` says) and opens its log. The
/// outer error is a failure to copy or a refusal that no cut can help; the inner one the storage
/// engine's refusal of the copy.
fn try_open(
    from: &Path,
    copy: &Path,
    cut: Option<Cut>,
    journals: &[Journal],
    options: &LogOptions,
) -> Result<Result<FjallLog, fjall::Error>, LogError> {
    if copy.exists() {
        std::fs::remove_dir_all(copy)
            .map_err(|e| LogError::io(format!("cannot clear the scratch copy {}", copy.display()), e))?;
    }
    copy_dir(from, copy, true)?;
    // NOTE: the copy's key index is dropped: the salvage builds it again from the copy's log, and a
    // damaged index must not make the copy refuse to open.
    let copied_index = copy.join(KEYS_DATABASE_DIR_NAME);
    if copied_index.exists() {
        std::fs::remove_dir_all(&copied_index).map_err(|e| {
            LogError::io(format!("cannot clear the scratch copy's key index {}", copied_index.display()), e)
        })?;
    }
    if let Some(cut) = cut {
        let database = copy.join(DATABASE_DIR_NAME);
        for (index, journal) in journals.iter().enumerate() {
            let name = journal.path.file_name().unwrap_or_default();
            let copied = database.join(name);
            if index > cut.journal {
                std::fs::remove_file(&copied).map_err(|e| {
                    LogError::io(format!("cannot cut the copy's journal {}", copied.display()), e)
                })?;
            } else if index == cut.journal {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&copied)
                    .and_then(|file| file.set_len(cut.offset).map(|()| file));
                file.map_err(|e| {
                    LogError::io(format!("cannot cut the copy's journal {}", copied.display()), e)
                })?;
            }
        }
        debug!(journal = journals.get(cut.journal).map(|j| j.number), offset = cut.offset, "trying a cut");
    }
    match FjallLog::open_inner(copy, options.clone()) {
        Ok(log) => Ok(Ok(log)),
        Err(LogError::Storage(error)) if crate::error::damage(&error).is_some() => Ok(Err(error)),
        Err(LogError::Storage(error)) => Err(LogError::storage(from, error)),
        Err(other) => Err(other),
    }
}

/// The journals in a database directory, oldest first.
fn journals(database: &Path) -> Result<Vec<Journal>, LogError> {
    let io = |e| LogError::io(format!("cannot read {}", database.display()), e);
    let mut journals = Vec::new();
    for entry in std::fs::read_dir(database).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        if path.extension().is_none_or(|e| e != JOURNAL_EXTENSION) {
            continue;
        }
        let Some(number) = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()) else {
            continue;
        };
        let length = entry.metadata().map_err(io)?.len();
        journals.push(Journal { number, path, length });
    }
    journals.sort_by_key(|j| j.number);
    Ok(journals)
}

/// The offsets just past each batch's trailer in a journal, in order, read in chunks.
fn batch_ends(journal: &Path) -> Result<Vec<u64>, LogError> {
    let io = |e| LogError::io(format!("cannot read the journal {}", journal.display()), e);
    let mut reader = BufReader::new(File::open(journal).map_err(io)?);
    let mut ends = Vec::new();
    // The last bytes of the previous chunk, so that a batch end across two chunks is found.
    let mut window: Vec<u8> = Vec::with_capacity(JOURNAL_SCAN_CHUNK_BYTES + JOURNAL_BATCH_END_BYTES);
    let mut window_start = 0u64;
    let mut chunk = vec![0u8; JOURNAL_SCAN_CHUNK_BYTES];
    loop {
        let read = reader.read(&mut chunk).map_err(io)?;
        if read == 0 {
            break;
        }
        window.extend_from_slice(&chunk[..read]);
        let last_start = window.len().saturating_sub(JOURNAL_BATCH_END_BYTES - 1);
        for at in 0..last_start {
            let trailer = at + 1 + JOURNAL_CHECKSUM_BYTES;
            if window[at] == JOURNAL_END_TAG
                && &window[trailer..trailer + JOURNAL_BATCH_TRAILER.len()] == JOURNAL_BATCH_TRAILER
            {
                ends.push(window_start + (at + JOURNAL_BATCH_END_BYTES) as u64);
            }
        }
        let kept = window.len() - last_start;
        window.drain(..last_start);
        window_start += last_start as u64;
        debug_assert_eq!(window.len(), kept);
    }
    Ok(ends)
}

/// Copies a directory tree of regular files and directories, each created owner-only. `top` skips
/// the store's lock file (the copy gets its own). Anything else (a symbolic link, a device) is
/// refused: a store holds none.
fn copy_dir(from: &Path, to: &Path, top: bool) -> Result<(), LogError> {
    DirBuilder::new()
        .mode(PRIVATE_DIR_MODE)
        .create(to)
        .map_err(|e| LogError::io(format!("cannot create {}", to.display()), e))?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e| LogError::io(format!("cannot copy {}", path.display()), e)
    };
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let source = entry.path();
        if top && entry.file_name() == LOCK_FILE_NAME {
            continue;
        }
        let kind = entry.file_type().map_err(io(&source))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&source, &target, false)?;
        } else if kind.is_file() {
            let mut input = File::open(&source).map_err(io(&source))?;
            let mut output = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(PRIVATE_FILE_MODE)
                .open(&target)
                .map_err(io(&target))?;
            std::io::copy(&mut input, &mut output).map_err(io(&source))?;
            output.flush().map_err(io(&target))?;
        } else {
            return Err(LogError::io(
                format!("cannot copy {}", source.display()),
                std::io::Error::other(
                    "a store holds only regular files and directories, and this is neither",
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_ends_are_found_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.jnl");
        let mut bytes = vec![7u8; JOURNAL_SCAN_CHUNK_BYTES - 5];
        let end_of = |bytes: &mut Vec<u8>| {
            bytes.push(JOURNAL_END_TAG);
            bytes.extend_from_slice(&[9; JOURNAL_CHECKSUM_BYTES]);
            bytes.extend_from_slice(JOURNAL_BATCH_TRAILER);
            bytes.len() as u64
        };
        let first = end_of(&mut bytes);
        bytes.extend_from_slice(&[1; 100]);
        let second = end_of(&mut bytes);
        bytes.extend_from_slice(&[0; 1000]);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(batch_ends(&path).unwrap(), vec![first, second]);
    }
}
