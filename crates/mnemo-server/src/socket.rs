//! Where a store's server listens, and how the socket is put there: inside the store directory
//! (owner-only, 0700), created under a temporary name with mode 0600 and renamed into place, so a
//! client never sees a socket that is not yet listening or not yet private.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::limits::SOCKET_PATH_BYTES_MAX;

/// The socket's file name inside the store directory.
pub const SOCKET_FILE_NAME: &str = "server.sock";

/// The socket's mode: its owner may connect, nobody else.
pub const SOCKET_MODE: u32 = 0o600;

/// Why a socket path cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocketError {
    /// The store's path makes the socket path longer than the kernel accepts.
    #[error(
        "socket path {path} is {bytes} bytes, longer than {SOCKET_PATH_BYTES_MAX}, the most a Unix socket \
         path may have; use a store directory with a shorter path"
    )]
    PathTooLong { path: String, bytes: usize },
    /// The current directory, needed to make a relative store path absolute, cannot be read.
    #[error("cannot resolve the store path {path}: {source}")]
    Resolve {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Something that is not a socket sits where the socket goes; it is left alone.
    #[error("{path} exists and is not a socket; it was left untouched")]
    NotASocket { path: String },
    /// Binding, setting the mode or renaming failed.
    #[error("cannot create the socket {path}: {source}")]
    Create {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The socket path of the store at `store` (made absolute).
pub fn socket_path(store: &Path) -> Result<PathBuf, SocketError> {
    let absolute = std::path::absolute(store)
        .map_err(|source| SocketError::Resolve { path: store.display().to_string(), source })?;
    let path = absolute.join(SOCKET_FILE_NAME);
    let bytes = path.as_os_str().len();
    if bytes > SOCKET_PATH_BYTES_MAX {
        return Err(SocketError::PathTooLong { path: path.display().to_string(), bytes });
    }
    Ok(path)
}

/// Whether `path` is a socket (a leftover of a server that stopped without removing it, or a live one).
fn is_socket(path: &Path) -> std::io::Result<Option<bool>> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) => Ok(Some(metadata.file_type().is_socket())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Binds a listening socket at `path`, private from the start: bound under a temporary name in the
/// same directory, given [`SOCKET_MODE`], then renamed over `path`. The caller holds the store's
/// lock, so a socket already at `path` is a dead server's and is replaced; anything else there is
/// refused untouched.
///
/// NOTE: the rename is what makes the server reachable; it must come after the mode is set.
pub(crate) fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener, SocketError> {
    let create = |source| SocketError::Create { path: path.display().to_string(), source };
    if is_socket(path).map_err(create)? == Some(false) {
        return Err(SocketError::NotASocket { path: path.display().to_string() });
    }
    let temporary = path.with_file_name(format!("{SOCKET_FILE_NAME}.{}.tmp", std::process::id()));
    match is_socket(&temporary).map_err(create)? {
        Some(true) => std::fs::remove_file(&temporary).map_err(create)?,
        Some(false) => return Err(SocketError::NotASocket { path: temporary.display().to_string() }),
        None => {}
    }
    let listener = std::os::unix::net::UnixListener::bind(&temporary).map_err(create)?;
    let placed = std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(SOCKET_MODE))
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(error) = placed {
        let _ = std::fs::remove_file(&temporary);
        return Err(create(error));
    }
    Ok(listener)
}

/// Removes the socket at `path` if it is still a socket (the server's own, as it holds the lock).
pub(crate) fn remove(path: &Path) {
    if let Ok(Some(true)) = is_socket(path)
        && let Err(error) = std::fs::remove_file(path)
    {
        tracing::warn!(path = %path.display(), %error, "cannot remove the socket");
    }
}
