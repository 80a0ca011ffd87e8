//! The store's lock file: one process at a time writes a store.
//!
//! The lock is an advisory lock on the open file description of `mnemo.lock`. Closing our descriptor
//! releases it only when no other descriptor refers to that description, and a process started by
//! any thread of ours (fork, then exec) holds a copy of every descriptor between its fork and its
//! exec, close-on-exec ones included. A lock that was merely closed could therefore stay held for a
//! moment by a child that has nothing to do with the store, and an open right after it (a store
//! closed and opened again, or created and then opened) was refused as "locked by another process".
//! So a [`StoreLock`] unlocks explicitly when dropped, which releases the description whoever else
//! holds a copy of it, and a store just created is opened under the lock its creation took (see
//! [`crate::store_dir::ensure_store`]) rather than by letting it go and taking it again.

use std::fs::{File, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::LogError;
use crate::store_dir::PRIVATE_FILE_MODE;

/// The lock file that keeps a second process out of a store.
pub const LOCK_FILE_NAME: &str = "mnemo.lock";

/// The store's lock, held until dropped.
#[derive(Debug)]
pub(crate) struct StoreLock {
    file: File,
}

impl StoreLock {
    /// Takes the lock of the store (or the store being created) in `dir`, creating its lock file,
    /// or refuses with [`LogError::Locked`] when another holder has it.
    pub(crate) fn acquire(dir: &Path) -> Result<StoreLock, LogError> {
        let path = dir.join(LOCK_FILE_NAME);
        // Opened close-on-exec (as every file the standard library opens): a process we start does
        // not keep the lock past its exec.
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(PRIVATE_FILE_MODE)
            .open(&path)
            .map_err(|e| LogError::io(format!("cannot open lock file {}", path.display()), e))?;
        match file.try_lock() {
            Ok(()) => Ok(StoreLock { file }),
            Err(TryLockError::WouldBlock) => Err(LogError::Locked { path: dir.to_path_buf() }),
            Err(TryLockError::Error(e)) => Err(LogError::io(format!("cannot lock {}", path.display()), e)),
        }
    }

    /// Takes the lock of the store in `dir` shared, from a read-only handle: a writer holds it
    /// exclusively, so a store in use is refused, and nothing in the store is created or changed.
    /// A store without a lock file has never been opened by a process that could still hold it: `None`.
    pub(crate) fn acquire_shared(dir: &Path) -> Result<Option<StoreLock>, LogError> {
        let path = dir.join(LOCK_FILE_NAME);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(LogError::io(format!("cannot open lock file {}", path.display()), error));
            }
        };
        match file.try_lock_shared() {
            Ok(()) => Ok(Some(StoreLock { file })),
            Err(TryLockError::WouldBlock) => Err(LogError::Locked { path: dir.to_path_buf() }),
            Err(TryLockError::Error(e)) => Err(LogError::io(format!("cannot lock {}", path.display()), e)),
        }
    }
}

#[cfg(test)]
impl StoreLock {
    /// Starts a process that holds a copy of this lock's descriptor (as its standard input), as a
    /// process started by another thread holds every descriptor between its fork and its exec.
    pub(crate) fn child_holding_a_copy(&self) -> std::process::Child {
        let copy = self.file.try_clone().unwrap_or_else(|e| panic!("cannot copy the lock descriptor: {e}"));
        std::process::Command::new("sleep")
            .arg("60")
            .stdin(copy)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start sleep: {e}"))
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // NOTE: unlock before the descriptor closes: see the module documentation. An unlock that
        // fails leaves the release to the close, as before.
        if let Err(error) = self.file.unlock() {
            tracing::warn!(%error, "cannot unlock the store lock; closing it releases it");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

    use super::*;
    #[test]
    fn a_dropped_lock_is_free_while_a_child_process_holds_a_copy_of_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let lock = StoreLock::acquire(dir.path()).unwrap();
        let mut child = lock.child_holding_a_copy();
        assert!(matches!(StoreLock::acquire(dir.path()), Err(LogError::Locked { .. })));
        drop(lock);
        let again = StoreLock::acquire(dir.path());
        child.kill().unwrap();
        child.wait().unwrap();
        again.unwrap();
    }
}
