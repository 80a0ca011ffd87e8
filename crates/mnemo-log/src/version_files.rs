//! The storage engine's version files checked before the engine opens them.
//!
//! Each keyspace directory (`db/keyspaces/<id>/`) holds `current` (the id of the keyspace's current
//! version file, the file's xxh3 128-bit checksum, and the checksum's type, 0 for xxh3) and that
//! version file, `v<id>`, which lists the keyspace's tables. The engine reads the version file
//! without comparing it with the checksum `current` records, and a damaged byte in some of its
//! fields ends the process instead of returning an error (it asserts, then panics again while
//! unwinding). So the store compares every version file with its recorded checksum first, and a
//! mismatch is reported as the damage it is. A `current` file that cannot be read this way is left
//! to the engine, which reports it.

use std::path::Path;

use crate::error::LogError;

/// Where the engine keeps its keyspaces, under the database directory.
const KEYSPACES_DIR_NAME: &str = "keyspaces";
/// A keyspace's pointer to its current version file.
const CURRENT_FILE_NAME: &str = "current";
/// `current`: the version id (u64), the checksum (u128), the checksum type (u8), little-endian.
const CURRENT_FILE_BYTES: usize = 8 + 16 + 1;
/// The checksum type the engine writes for xxh3.
const CHECKSUM_XXH3: u8 = 0;

/// Compares every keyspace's current version file with the checksum its `current` file records.
/// `store` names the store in the error; `database` is its database directory.
pub(crate) fn check(store: &Path, database: &Path) -> Result<(), LogError> {
    let Ok(entries) = std::fs::read_dir(database.join(KEYSPACES_DIR_NAME)) else {
        // A new store has none yet; an unreadable directory is the engine's to report.
        return Ok(());
    };
    let folder = database.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    for entry in entries.flatten() {
        let keyspace = entry.path();
        if let Some(what) = damaged_version_file(&keyspace, &folder) {
            return Err(LogError::Damaged { path: store.to_path_buf(), what });
        }
    }
    Ok(())
}

/// What is wrong with the keyspace's current version file, if its bytes differ from the checksum
/// recorded for them; `folder` names the database the keyspace is in.
fn damaged_version_file(keyspace: &Path, folder: &str) -> Option<String> {
    let current = std::fs::read(keyspace.join(CURRENT_FILE_NAME)).ok()?;
    if current.len() != CURRENT_FILE_BYTES || current[CURRENT_FILE_BYTES - 1] != CHECKSUM_XXH3 {
        return None;
    }
    let id = u64::from_le_bytes(current[..8].try_into().ok()?);
    let recorded = u128::from_le_bytes(current[8..24].try_into().ok()?);
    let name = format!("v{id}");
    let bytes = std::fs::read(keyspace.join(&name)).ok()?;
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    hasher.update(&bytes);
    (hasher.digest128() != recorded).then(|| {
        let keyspace = keyspace.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        format!("the version file {name} of keyspace {keyspace} of {folder}/ fails its checksum")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keyspace directory whose `current` records `bytes`' checksum for version file `v3`.
    fn keyspace_with(dir: &Path, recorded_for: &[u8], actual: &[u8]) {
        let keyspace = dir.join(KEYSPACES_DIR_NAME).join("7");
        std::fs::create_dir_all(&keyspace).expect("keyspace dir");
        let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
        hasher.update(recorded_for);
        let mut current = 3u64.to_le_bytes().to_vec();
        current.extend_from_slice(&hasher.digest128().to_le_bytes());
        current.push(CHECKSUM_XXH3);
        std::fs::write(keyspace.join(CURRENT_FILE_NAME), current).expect("current");
        std::fs::write(keyspace.join("v3"), actual).expect("version file");
    }

    #[test]
    fn a_version_file_that_matches_its_checksum_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        keyspace_with(dir.path(), b"tables", b"tables");
        assert!(check(Path::new("store"), dir.path()).is_ok());
    }

    #[test]
    fn a_version_file_with_a_flipped_bit_is_damage_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let database = dir.path().join("db");
        keyspace_with(&database, b"tables", b"tablfs");
        let error = check(Path::new("store"), &database).expect_err("a flipped bit passes");
        assert_eq!(
            error.to_string().split(';').next(),
            Some("store store is damaged: the version file v3 of keyspace 7 of db/ fails its checksum")
        );
    }
}
