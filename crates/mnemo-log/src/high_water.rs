//! The high-water mark: the last position the log acknowledged at a durable level, and its hash,
//! kept in a small file beside the database so that Mnemo knows how far its log reached without
//! trusting the storage engine's journal to tell it.
//!
//! Architecture invariant: the mark is written only after the batch it names is durable, so it is
//! never ahead of a log that is intact; a log found shorter than its mark lost acknowledged envelopes.
//!
//! The file holds two slots of [`SLOT_BYTES`], written in turn, each with its own checksum: a write
//! torn by a crash spoils at most the slot it was writing, and the other still holds the mark before.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use mnemo_core::Position;
use sha2::{Digest, Sha256};

use crate::envelope::HASH_BYTES;
use crate::error::LogError;
use crate::store_dir::create_private_file;

/// The file beside the database that holds the high-water mark.
pub const HIGH_WATER_FILE_NAME: &str = "acknowledged";

/// Longest time a written mark waits before the writer syncs it to the disk (decision 0100).
pub const MARK_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// Bytes of one slot: magic, write sequence, position, hash, checksum.
const SLOT_BYTES: usize = 64;
const SLOT_MAGIC: &[u8; 8] = b"MNEMOACK";
const CHECKSUM_BYTES: usize = 8;
const SLOT_BODY_BYTES: usize = SLOT_MAGIC.len() + 8 + 8 + HASH_BYTES;

/// The last position acknowledged at a durable level and its envelope's hash (position 0 and the
/// genesis hash for an empty log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HighWater {
    /// The last acknowledged position.
    pub position: Position,
    /// Its envelope's hash.
    pub hash: [u8; HASH_BYTES],
}

/// The open mark file, the sequence number of its next write (which also picks the slot), and when
/// it last waited for the disk.
#[derive(Debug)]
pub(crate) struct HighWaterFile {
    file: File,
    next_slot: u64,
    synced_at: Instant,
    unsynced: bool,
}

impl HighWaterFile {
    /// Opens the store's mark file, creating it with `initial` when it does not exist (a new store,
    /// or one made before the mark existed: its log as it is now is all that can be known of it).
    /// Returns the file and the mark it holds.
    pub(crate) fn open(dir: &Path, initial: HighWater) -> Result<(HighWaterFile, HighWater), LogError> {
        let path = dir.join(HIGH_WATER_FILE_NAME);
        let io = |e| LogError::io(format!("cannot open the high-water file {}", path.display()), e);
        match std::fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => {
                let (mark, newest_sequence) =
                    read_mark(&file).map_err(io)?.ok_or_else(|| LogError::Damaged {
                        path: path.clone(),
                        what: "the high-water file (the last acknowledged position) has no valid slot"
                            .to_owned(),
                    })?;
                Ok((HighWaterFile::new(file, newest_sequence + 1), mark))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let file = create_private_file(&path).map_err(io)?;
                let mut created = HighWaterFile::new(file, 0);
                // Both slots are written at once, so that later writes only overwrite bytes the
                // file already has and never need new space on a full disk.
                created.write(initial, false)?;
                created.write(initial, true)?;
                Ok((created, initial))
            }
            Err(error) => Err(io(error)),
        }
    }

    fn new(file: File, next_slot: u64) -> HighWaterFile {
        HighWaterFile { file, next_slot, synced_at: Instant::now(), unsynced: false }
    }

    /// Records `mark`. It waits for the disk when `sync` is set, and otherwise at most every
    /// [`MARK_SYNC_INTERVAL`] (decision 0100): a mark that has not reached the disk when the power
    /// fails is only older than it should be, never ahead of the log.
    pub(crate) fn write(&mut self, mark: HighWater, sync: bool) -> Result<(), LogError> {
        let slot = encode_slot(mark, self.next_slot);
        let offset = (self.next_slot % 2) * SLOT_BYTES as u64;
        let io = |e| LogError::io("cannot write the high-water file", e);
        self.file.write_all_at(&slot, offset).map_err(io)?;
        self.next_slot += 1;
        self.unsynced = true;
        if sync || self.synced_at.elapsed() >= MARK_SYNC_INTERVAL {
            self.sync()?;
        }
        Ok(())
    }

    /// Waits for the disk to hold the last mark written.
    pub(crate) fn sync(&mut self) -> Result<(), LogError> {
        if self.unsynced {
            self.file.sync_data().map_err(|e| LogError::io("cannot write the high-water file", e))?;
            self.unsynced = false;
            self.synced_at = Instant::now();
        }
        Ok(())
    }
}

fn encode_slot(mark: HighWater, sequence: u64) -> [u8; SLOT_BYTES] {
    let mut slot = [0; SLOT_BYTES];
    slot[..8].copy_from_slice(SLOT_MAGIC);
    slot[8..16].copy_from_slice(&sequence.to_be_bytes());
    slot[16..24].copy_from_slice(&mark.position.0.to_be_bytes());
    slot[24..SLOT_BODY_BYTES].copy_from_slice(&mark.hash);
    let checksum = Sha256::digest(&slot[..SLOT_BODY_BYTES]);
    slot[SLOT_BODY_BYTES..SLOT_BODY_BYTES + CHECKSUM_BYTES].copy_from_slice(&checksum[..CHECKSUM_BYTES]);
    slot
}

fn decode_slot(slot: &[u8]) -> Option<(HighWater, u64)> {
    let body = slot.get(..SLOT_BODY_BYTES)?;
    let checksum = slot.get(SLOT_BODY_BYTES..SLOT_BODY_BYTES + CHECKSUM_BYTES)?;
    if &body[..8] != SLOT_MAGIC || Sha256::digest(body)[..CHECKSUM_BYTES] != *checksum {
        return None;
    }
    let sequence = u64::from_be_bytes(body[8..16].try_into().ok()?);
    let position = Position(u64::from_be_bytes(body[16..24].try_into().ok()?));
    let hash = body[24..].try_into().ok()?;
    Some((HighWater { position, hash }, sequence))
}

/// The newer of the file's valid slots (by write sequence: a mark may go down, when a loss is
/// accepted), with its sequence, or `None` when neither is valid.
fn read_mark(file: &File) -> std::io::Result<Option<(HighWater, u64)>> {
    let mut bytes = [0; 2 * SLOT_BYTES];
    let mut read = 0;
    while read < bytes.len() {
        match file.read_at(&mut bytes[read..], read as u64)? {
            0 => break,
            n => read += n,
        }
    }
    let slots = [decode_slot(&bytes[..SLOT_BYTES]), decode_slot(&bytes[SLOT_BYTES..])];
    Ok(slots.into_iter().flatten().max_by_key(|(_, sequence)| *sequence))
}

/// Reads the mark of the store in `dir` without opening it for writing; `None` when it has no file.
pub fn read_high_water(dir: &Path) -> Result<Option<HighWater>, LogError> {
    let path = dir.join(HIGH_WATER_FILE_NAME);
    match File::open(&path) {
        Ok(file) => Ok(read_mark(&file)
            .map_err(|e| LogError::io(format!("cannot read {}", path.display()), e))?
            .map(|(mark, _)| mark)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(LogError::io(format!("cannot read {}", path.display()), error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(position: u64) -> HighWater {
        HighWater { position: Position(position), hash: [position as u8; HASH_BYTES] }
    }

    #[test]
    fn the_newest_mark_survives_a_torn_write_of_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let (mut file, first) = HighWaterFile::open(dir.path(), mark(0)).unwrap();
        assert_eq!(first, mark(0));
        for position in 1..=5 {
            file.write(mark(position), true).unwrap();
        }
        drop(file);
        assert_eq!(read_high_water(dir.path()).unwrap(), Some(mark(5)));
        let (mut file, reopened) = HighWaterFile::open(dir.path(), mark(0)).unwrap();
        assert_eq!(reopened, mark(5));
        file.write(mark(6), true).unwrap();
        // Tear the slot just written: the mark before it is still there.
        let raw =
            std::fs::OpenOptions::new().write(true).open(dir.path().join(HIGH_WATER_FILE_NAME)).unwrap();
        let torn_offset = ((file.next_slot - 1) % 2) * SLOT_BYTES as u64 + 20;
        raw.write_all_at(&[0xFF; 4], torn_offset).unwrap();
        assert_eq!(read_high_water(dir.path()).unwrap(), Some(mark(5)));
    }

    #[test]
    fn a_lowered_mark_is_the_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let (mut file, _) = HighWaterFile::open(dir.path(), mark(0)).unwrap();
        file.write(mark(9), true).unwrap();
        file.write(mark(4), true).unwrap();
        assert_eq!(read_high_water(dir.path()).unwrap(), Some(mark(4)));
    }

    #[test]
    fn a_file_with_no_valid_slot_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(HIGH_WATER_FILE_NAME), [7; 2 * SLOT_BYTES]).unwrap();
        assert!(matches!(HighWaterFile::open(dir.path(), mark(0)), Err(LogError::Damaged { .. })));
    }
}
