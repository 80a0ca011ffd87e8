//! The store directory: what marks a directory as a store, creating one atomically, and refusing a
//! directory that is not one.
//!
//! Architecture invariant: Mnemo changes nothing in a directory it did not create. A store is created
//! only where nothing is (a new path, or an empty directory), under a temporary name beside it that is
//! renamed into place once the store is complete; a non-empty directory without the store marker is
//! refused before anything in it is touched. Modes are set when a file or directory is created, never
//! afterwards, and never on anything already there.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::LogError;
use crate::store_lock::StoreLock;

/// The file whose presence makes a directory a store.
pub const STORE_MARKER_FILE_NAME: &str = "mnemo-store";

/// What the marker file holds: one line naming what the directory is.
const STORE_MARKER_CONTENTS: &[u8] = b"mnemo store: an append-only ledger; see docs/FORMAT.md\n";

/// The prefix of the temporary name a store is created under, beside where it will live.
const CREATING_PREFIX: &str = ".mnemo-creating-";

/// Most entries of a refused directory that its error names.
const REFUSED_ENTRIES_SHOWN_MAX: usize = 3;

/// Mode of every directory Mnemo creates.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of every file Mnemo creates.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// What fills a new store's temporary directory, under the store's lock (taken there before).
pub(crate) type CreateStore<'a> = &'a dyn Fn(&Path) -> Result<(), LogError>;

/// Makes sure `dir` holds a store, creating it when nothing is there: `create` fills the temporary
/// directory the store is built in (the database, before it is renamed into place) and takes the
/// store's lock there, which is returned still held when this call created the store. A store made
/// by an earlier version, before stores carried their marker, is recognised by the storage engine's
/// own files in its database directory, and gets its marker.
pub(crate) fn ensure_store(dir: &Path, create: CreateStore<'_>) -> Result<Option<StoreLock>, LogError> {
    match inspect(dir)? {
        Found::Store => Ok(None),
        Found::EarlierStore => write_marker(dir).map(|()| None),
        Found::Nothing | Found::EmptyDir => create_store(dir, create),
        Found::Other(entries) => Err(LogError::NotAStore { path: dir.to_path_buf(), entries }),
    }
}

/// Whether `dir` holds a store (one with its marker, or one made before stores carried it).
pub(crate) fn is_store(dir: &Path) -> bool {
    matches!(inspect(dir), Ok(Found::Store | Found::EarlierStore))
}

enum Found {
    Nothing,
    EmptyDir,
    Store,
    EarlierStore,
    /// A directory (or another kind of file) that is not a store; a few of its entries' names.
    Other(Vec<String>),
}

fn inspect(dir: &Path) -> Result<Found, LogError> {
    let io = |e| LogError::io(format!("cannot read store directory {}", dir.display()), e);
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(error) => return Err(io(error)),
    };
    if !metadata.is_dir() {
        return Ok(Found::Other(vec!["(it is a file, not a directory)".to_owned()]));
    }
    if is_regular_file(&dir.join(STORE_MARKER_FILE_NAME)) {
        return Ok(Found::Store);
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        names.push(entry.map_err(io)?.file_name().to_string_lossy().into_owned());
    }
    if names.is_empty() {
        return Ok(Found::EmptyDir);
    }
    if is_earlier_store(dir) {
        return Ok(Found::EarlierStore);
    }
    names.sort();
    names.truncate(REFUSED_ENTRIES_SHOWN_MAX);
    Ok(Found::Other(names))
}

/// A store made before stores carried a marker: its database directory holding the storage engine's
/// own version file and keyspaces directory, none of them a symbolic link. Nothing but a store has
/// a `db` directory of that shape.
fn is_earlier_store(dir: &Path) -> bool {
    let database = dir.join(crate::databases::DATABASE_DIR_NAME);
    is_dir(&database) && is_regular_file(&database.join("version")) && is_dir(&database.join("keyspaces"))
}

fn is_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

fn is_regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

fn write_marker(dir: &Path) -> Result<(), LogError> {
    let path = dir.join(STORE_MARKER_FILE_NAME);
    let io = |e| LogError::io(format!("cannot write the store marker {}", path.display()), e);
    let mut file = create_private_file(&path).map_err(io)?;
    file.write_all(STORE_MARKER_CONTENTS).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Creates a file that must not exist yet, readable and writable by its owner only from the start.
pub(crate) fn create_private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).mode(PRIVATE_FILE_MODE).open(path)
}

/// Builds the store under a temporary name beside `dir` and renames it into place, so that a crash
/// leaves either no store or a complete empty one. An empty directory at `dir` is replaced. Returns
/// the new store's lock, or `None` when another process created the store meanwhile.
fn create_store(dir: &Path, create: CreateStore<'_>) -> Result<Option<StoreLock>, LogError> {
    let (parent, name) = split(dir)?;
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(&parent)
        .map_err(|e| LogError::io(format!("cannot create {}", parent.display()), e))?;
    remove_abandoned(&parent, &name);
    let temporary = parent.join(format!("{CREATING_PREFIX}{name}.{}", std::process::id()));
    // NOTE: the lock moves with the directory: it is held on the file, whatever its path.
    let built = build(&temporary, create).and_then(|lock| {
        std::fs::rename(&temporary, dir).map_err(|e| {
            LogError::io(format!("cannot move the new store into place at {}", dir.display()), e)
        })?;
        Ok(lock)
    });
    let lock = match built {
        Ok(lock) => lock,
        Err(error) => {
            // The temporary directory is ours: it was created new above.
            let _ = std::fs::remove_dir_all(&temporary);
            // Another process may have created the store meanwhile; then it is simply there.
            return match inspect(dir)? {
                Found::Store => Ok(None),
                _ => Err(error),
            };
        }
    };
    sync_dir(&parent)?;
    Ok(Some(lock))
}

fn build(temporary: &Path, create: CreateStore<'_>) -> Result<StoreLock, LogError> {
    DirBuilder::new()
        .mode(PRIVATE_DIR_MODE)
        .create(temporary)
        .map_err(|e| LogError::io(format!("cannot create {}", temporary.display()), e))?;
    // The lock is taken before the marker is written: a directory of ours that holds the marker
    // then always has its lock held while its creator lives, so no other process takes it for
    // abandoned and removes it under the creator.
    let lock = StoreLock::acquire(temporary)?;
    write_marker(temporary)?;
    create(temporary)?;
    sync_dir(temporary)?;
    Ok(lock)
}

/// The directory a store path lives in, and its name there.
fn split(dir: &Path) -> Result<(PathBuf, String), LogError> {
    let absolute = std::path::absolute(dir)
        .map_err(|e| LogError::io(format!("cannot resolve store path {}", dir.display()), e))?;
    let name = absolute.file_name().map(|n| n.to_string_lossy().into_owned());
    match (absolute.parent(), name) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name)),
        _ => Err(LogError::io(
            format!("cannot create a store at {}", dir.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        )),
    }
}

/// Removes what a crash left of an earlier attempt to create this store: a temporary directory of
/// ours (it holds the store marker) whose creator no longer holds its lock.
fn remove_abandoned(parent: &Path, name: &str) {
    let prefix = format!("{CREATING_PREFIX}{name}.");
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_string_lossy().starts_with(&prefix)
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && is_regular_file(&path.join(STORE_MARKER_FILE_NAME));
        if ours && !creation_in_progress(&path) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Whether a process holds the lock of a store being created in `temporary`.
fn creation_in_progress(temporary: &Path) -> bool {
    let Ok(file) = OpenOptions::new().write(true).open(temporary.join(crate::store_lock::LOCK_FILE_NAME))
    else {
        // No lock file: the lock is taken before the marker is written, so this is not a directory
        // this version made; leave it.
        return true;
    };
    !matches!(file.try_lock(), Ok(()))
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io(format!("cannot sync directory {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Fills a new store with nothing.
    fn make_nothing(_: &Path) -> Result<(), LogError> {
        Ok(())
    }

    #[test]
    fn a_new_path_becomes_a_private_store_with_its_marker() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("a/b/store");
        ensure_store(&dir, &make_nothing).unwrap();
        assert_eq!(mode(&dir), PRIVATE_DIR_MODE);
        assert_eq!(mode(&dir.join(STORE_MARKER_FILE_NAME)), PRIVATE_FILE_MODE);
        // Nothing of the creation is left beside the store.
        let beside: Vec<_> = std::fs::read_dir(dir.parent().unwrap()).unwrap().flatten().collect();
        assert_eq!(beside.len(), 1, "{beside:?}");
        ensure_store(&dir, &make_nothing).unwrap();
    }

    /// Regression: the creation's lock was let go and taken again by the open that followed, and a
    /// process started meanwhile by another thread (holding a copy of the lock's descriptor until
    /// its exec) made that open fail with "store is locked by another process".
    #[test]
    fn a_new_store_is_handed_over_under_the_lock_its_creation_took() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("store");
        let lock = ensure_store(&dir, &make_nothing).unwrap().unwrap();
        assert!(matches!(StoreLock::acquire(&dir), Err(LogError::Locked { .. })));
        // A store that is already there is not created again, and its lock is left to the opener.
        assert!(ensure_store(&dir, &make_nothing).unwrap().is_none());
        drop(lock);
        StoreLock::acquire(&dir).unwrap();
    }

    #[test]
    fn a_directory_holding_other_files_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = ensure_store(dir.path(), &make_nothing).unwrap_err();
        assert!(matches!(&error, LogError::NotAStore { entries, .. } if entries == &["run.sh"]), "{error}");
        assert_eq!(mode(&script), 0o755);
        assert_eq!(mode(dir.path()), 0o755);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_creation_leaves_nothing() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("store");
        let failing = |_: &Path| -> Result<(), LogError> { Err(LogError::Closed) };
        assert!(matches!(ensure_store(&dir, &failing), Err(LogError::Closed)));
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_abandoned_creation_is_cleared_by_the_next() {
        let parent = tempfile::tempdir().unwrap();
        let abandoned = parent.path().join(format!("{CREATING_PREFIX}store.1"));
        std::fs::create_dir(&abandoned).unwrap();
        write_marker(&abandoned).unwrap();
        std::fs::write(abandoned.join(crate::store_lock::LOCK_FILE_NAME), b"").unwrap();
        ensure_store(&parent.path().join("store"), &make_nothing).unwrap();
        assert!(!abandoned.exists());
    }
}
