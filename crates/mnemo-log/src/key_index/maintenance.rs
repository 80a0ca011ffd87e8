//! Work on the whole index, when the store opens, is verified or is salvaged: catching it up with
//! the log, forgetting the keys of lost envelopes, checking it, and building it again.

use std::collections::HashSet;

use mnemo_core::{KeyRules, Position, RuleRef};

use super::layout::{Fingerprint, MARK_KEY, decode_position, encode_value, fingerprint, framed};
use super::read::{holder, mark};
use crate::databases::KEYS_KEYSPACE;
use crate::error::{CorruptionKind, LogError};
use crate::shared::Shared;

/// Keys the index catch-up writes per batch.
const CATCH_UP_BATCH_KEYS: usize = 4096;

/// How the log learns the rules of an envelope it did not append itself: an index built for a store
/// written before the index existed, or a salvaged store's. `mnemo-core` supplies it.
pub type KeyRulesOf = fn(kind: u16, kind_schema: u16, bytes: &[u8]) -> KeyRules;

/// Brings the index up to the log's `head` when it is behind (a store written before the index
/// existed, or a salvaged one), from the envelopes' own rules. Returns whether the index is
/// complete, which it cannot be without `rules_of`; the writer then leaves the mark alone.
pub(crate) fn catch_up(
    shared: &Shared,
    head: Position,
    rules_of: Option<KeyRulesOf>,
) -> Result<bool, LogError> {
    let from = mark(shared)?;
    if from >= head {
        return Ok(true);
    }
    let Some(rules_of) = rules_of else { return Ok(false) };
    let _span = tracing::info_span!("key_index_catch_up", from = from.0, head = head.0).entered();
    let mut batch = shared.keys_db.batch();
    let mut written: HashSet<Fingerprint> = HashSet::new();
    let mut position = from.next();
    while position <= head {
        let envelope = shared.read(position)?.ok_or(LogError::Corrupt {
            position,
            kind: CorruptionKind::MissingPosition { before: Position(position.0 - 1), after: head },
        })?;
        for rule in &rules_of(envelope.kind, envelope.kind_schema, &envelope.record) {
            let value = match rule {
                RuleRef::Identity(_) | RuleRef::Unique(_) => &[][..],
                RuleRef::Claim { value, .. } => value,
                _ => continue,
            };
            // The first holder keeps a key: a store written before the index may hold a retry
            // twice, and the original is the one every later retry is answered with.
            let key = rule.key();
            if !written.contains(&fingerprint(key)) && holder(shared, key)?.is_none() {
                batch.insert(&shared.keys, framed(key), encode_value(position, value));
                written.insert(fingerprint(key));
            }
        }
        if written.len() >= CATCH_UP_BATCH_KEYS || position == head {
            batch.insert(&shared.keys, MARK_KEY, position.to_key());
            batch.commit()?;
            batch = shared.keys_db.batch();
            written.clear();
        }
        position = position.next();
    }
    Ok(true)
}

/// Removes the index's entries for envelopes past `head` and lowers its mark to it, durably; returns
/// how many entries it removed. A log that lost acknowledged envelopes (an accepted loss) may
/// have an index that kept their keys: the lost events sent again would be answered as retries of
/// envelopes that are gone, or refused as conflicts with them, and `verify` would report the index
/// as damaged. A key is written only where it was absent, so an entry past the head is the key of a
/// lost envelope, which no envelope the log still holds had claimed before it.
pub(crate) fn forget_past(shared: &Shared, head: Position) -> Result<u64, LogError> {
    let mut batch = shared.keys_db.batch();
    let mut forgotten = 0;
    for guard in shared.keys.iter() {
        let (key, value) = guard.into_inner()?;
        if key.as_ref() == MARK_KEY || decode_position(&value)? <= head {
            continue;
        }
        batch.remove(&shared.keys, key);
        forgotten += 1;
    }
    if mark(shared)? > head {
        batch.insert(&shared.keys, MARK_KEY, head.to_key());
    }
    if !batch.is_empty() {
        batch.commit()?;
        shared.keys_db.persist(fjall::PersistMode::SyncAll)?;
    }
    Ok(forgotten)
}

/// Checks the index beside a verified log whose head is `head`: every entry reads (so a damaged
/// table is found) and points at or before `reach` (the head, or the end of the range of envelopes
/// the log is known to have lost), and every envelope up to the index's mark holds its keys at or
/// before its own position (a key's first holder keeps it). Returns the first damage found.
pub(crate) fn verify(
    shared: &Shared,
    head: Position,
    reach: Position,
    rules_of: Option<KeyRulesOf>,
) -> Result<(), LogError> {
    let damaged = |position: Position, what: String| LogError::Corrupt {
        position,
        kind: CorruptionKind::StreamIndex(format!("key index: {what}")),
    };
    for guard in shared.keys.iter() {
        let (key, value) = guard.into_inner()?;
        let position = decode_position(&value)?;
        if position > reach {
            let key: String = key.iter().map(|byte| format!("{byte:02x}")).collect();
            return Err(damaged(position, format!("the entry {key} points beyond the log's head {head}")));
        }
    }
    let Some(rules_of) = rules_of else { return Ok(()) };
    let mark = mark(shared)?.min(head);
    let mut position = Position::FIRST;
    while position <= mark {
        let envelope = shared.read(position)?.ok_or(LogError::Corrupt {
            position,
            kind: CorruptionKind::MissingPosition { before: Position(position.0 - 1), after: mark },
        })?;
        for rule in &rules_of(envelope.kind, envelope.kind_schema, &envelope.record) {
            if !matches!(rule, RuleRef::Identity(_) | RuleRef::Claim { .. } | RuleRef::Unique(_)) {
                continue;
            }
            let held = holder(shared, rule.key())?;
            if held.is_none_or(|held| held > position) {
                let key = String::from_utf8_lossy(rule.key()).into_owned();
                return Err(damaged(position, format!("{key:?} is held at {held:?}")));
            }
        }
        position = position.next();
    }
    Ok(())
}

/// Drops an index kept in the log's own database, where stores kept it before it had a database
/// of its own: the index's database then starts empty, below every envelope, and the open builds
/// it from the log (`catch_up`), as for a store written before the index existed. Only when the
/// store opens for writing.
pub(crate) fn drop_from_log_database(db: &fjall::Database) -> Result<(), LogError> {
    if !db.keyspace_exists(KEYS_KEYSPACE) {
        return Ok(());
    }
    tracing::info!("the key index is kept in the log's database; it is built again from the log in its own");
    let earlier = db.keyspace(KEYS_KEYSPACE, crate::databases::keys_keyspace_options)?;
    db.delete_keyspace(earlier)?;
    Ok(())
}

/// Drops the whole index and builds it again from the log, for a store filled by copying envelopes
/// verbatim (salvage), whose retries were copied as they are. Nothing may append meanwhile.
pub(crate) fn rebuild(shared: &Shared, head: Position, rules_of: KeyRulesOf) -> Result<(), LogError> {
    let rebuilt = drop_and_catch_up(shared, head, rules_of);
    // The writer's key filter knows only the keys the writer wrote: it is built anew, whether or
    // not the rebuild finished.
    shared.keys_rewritten.fetch_add(1, std::sync::atomic::Ordering::Release);
    rebuilt
}

fn drop_and_catch_up(shared: &Shared, head: Position, rules_of: KeyRulesOf) -> Result<(), LogError> {
    drop_all(shared)?;
    catch_up(shared, head, Some(rules_of)).map(|_| ())
}

/// Removes every entry of the index, its mark with them, and the keys staged for it.
fn drop_all(shared: &Shared) -> Result<(), LogError> {
    // NOTE: an ingestion under way ends first; one that starts after finds its table gone.
    let _ingesting = shared.key_ingestion();
    shared.staged_keys_mut().clear();
    let mut batch = shared.keys_db.batch();
    for guard in shared.keys.iter() {
        let key = guard.key()?;
        batch.remove(&shared.keys, key);
    }
    batch.commit()?;
    Ok(())
}
