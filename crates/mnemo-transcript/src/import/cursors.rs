//! Where captures of growing files left off, kept in memory by file path: a capture of a file read
//! before reads only what the file holds beyond the bytes it read then. At most
//! [`CAPTURE_CURSORS_MAX`] files are kept; past it, the cursor used least recently is dropped (its
//! file is read whole at its next capture). Nothing of it is written anywhere.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Files whose capture cursor a store handle keeps at most; past it, the cursor used least
/// recently is dropped (its file is read whole at its next capture).
pub const CAPTURE_CURSORS_MAX: usize = 64;

/// The cursors `C` of captured files, by file path.
#[derive(Debug)]
pub struct FileCursors<C> {
    inner: Mutex<CursorMap<C>>,
}

#[derive(Debug)]
struct CursorMap<C> {
    by_path: HashMap<String, (u64, C)>,
    uses: u64,
}

impl<C> Default for FileCursors<C> {
    fn default() -> Self {
        FileCursors { inner: Mutex::new(CursorMap { by_path: HashMap::new(), uses: 0 }) }
    }
}

impl<C> FileCursors<C> {
    /// The cursor a capture of `path` left, taken out (a capture puts back the one it ends with).
    pub fn take(&self, path: &str) -> Option<C> {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.by_path.remove(path).map(|(_, cursor)| cursor)
    }

    /// Keeps where a capture of `path` left off, for the next capture of that file.
    pub fn keep(&self, path: String, cursor: C) {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.uses += 1;
        let used = map.uses;
        if !map.by_path.contains_key(&path) && map.by_path.len() >= CAPTURE_CURSORS_MAX {
            let oldest = map.by_path.iter().min_by_key(|(_, (used, _))| *used).map(|(path, _)| path.clone());
            if let Some(oldest) = oldest {
                map.by_path.remove(&oldest);
            }
        }
        map.by_path.insert(path, (used, cursor));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_limit_the_cursor_used_least_recently_is_dropped() {
        let cursors = FileCursors::default();
        for n in 0..CAPTURE_CURSORS_MAX {
            cursors.keep(format!("f{n}"), n);
        }
        // f0 is put back, so f1 is now the least recently used.
        let first = cursors.take("f0");
        assert_eq!(first, Some(0));
        cursors.keep("f0".to_owned(), 0);
        cursors.keep("new".to_owned(), CAPTURE_CURSORS_MAX);
        assert_eq!(cursors.take("f1"), None);
        assert_eq!(cursors.take("f0"), Some(0));
        assert_eq!(cursors.take("new"), Some(CAPTURE_CURSORS_MAX));
        assert_eq!(cursors.take("new"), None, "a cursor is taken out");
    }
}
