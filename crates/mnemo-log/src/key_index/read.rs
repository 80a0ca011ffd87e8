//! Reading the index: a key's entry, staged keys first (`staged.rs`), then the `keys` keyspace;
//! and the index's mark.

use mnemo_core::Position;

use super::layout::{Fingerprint, MARK_KEY, decode_position, fingerprint, framed_print};
use crate::backend::HeldKey;
use crate::error::LogError;
use crate::shared::Shared;

/// The index's value for the key of fingerprint `print`: staged by the writer and not yet handed
/// to the engine, or in the `keys` keyspace.
pub(super) fn read_value(shared: &Shared, print: Fingerprint) -> Result<Option<Vec<u8>>, LogError> {
    if let Some(value) = shared.staged_keys().get(print) {
        return Ok(Some(value.to_vec()));
    }
    Ok(shared.keys.get(framed_print(print))?.map(|value| value.to_vec()))
}

/// The committed index's entry for `key`: its holder and claimed value.
fn read_entry(shared: &Shared, key: &[u8]) -> Result<Option<(Position, Vec<u8>)>, LogError> {
    match read_value(shared, fingerprint(key))? {
        None => Ok(None),
        Some(value) => Ok(Some((decode_position(&value)?, value[8..].to_vec()))),
    }
}

/// The position of the record holding `key` in the committed index.
pub(super) fn holder(shared: &Shared, key: &[u8]) -> Result<Option<Position>, LogError> {
    Ok(read_entry(shared, key)?.map(|(position, _)| position))
}

/// The committed index's entry for `key`.
pub(crate) fn held_key(shared: &Shared, key: &[u8]) -> Result<Option<HeldKey>, LogError> {
    Ok(read_entry(shared, key)?.map(|(position, value)| HeldKey { position, value }))
}

/// Where the index is complete to (`Position::ZERO` for an index never written).
pub(super) fn mark(shared: &Shared) -> Result<Position, LogError> {
    match shared.keys.get(MARK_KEY)? {
        None => Ok(Position::ZERO),
        Some(value) => decode_position(&value),
    }
}
