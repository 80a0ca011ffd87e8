//! The keys a record holds in the log's key index, and the rules an append of it must meet there.
//!
//! The log keeps an index of keys beside its envelopes, written in the same atomic batch, and
//! checks every rule of an append against it before anything is written (`mnemo-log`'s writer, and
//! the shared log's appender against its folded index). The log gives keys no meaning; this module
//! does: which keys a record claims and what each one means when an append is refused on it.
//!
//! Key layout: one tag byte, then the key's ids separated by `0x00` (ids never hold control
//! characters, so the separator cannot occur inside one). `docs/FORMAT.md` lists the tags.

use crate::event::RuntimeEvent;
use crate::record::Record;

/// Tag of an event's identity key: `e` + event id.
const EVENT_TAG: u8 = b'e';

/// One rule an append puts on the log's key index. Rules are checked in order, record by record,
/// against the index as the records before them in the same append leave it; a refused rule
/// appends nothing of the whole append.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyRule {
    /// The record's identity. Absent: written, pointing at the record. Present and the record
    /// there has the same kind, schema and bytes: the record is a retry of that one, is not
    /// appended again and is answered with the original's position (its other rules are not
    /// checked). Present otherwise: an identity conflict.
    Identity(Vec<u8>),
    /// A claim of `key` with `value`. Absent: written with the value. Present with the same value:
    /// met. Present with another value: refused.
    Claim {
        /// The key claimed.
        key: Vec<u8>,
        /// What the record claims it for.
        value: Vec<u8>,
    },
    /// A key only one record may hold. Absent: written. Present: refused.
    Unique(Vec<u8>),
    /// A key an earlier record (or an earlier record of the same append) must hold. Absent: refused.
    Requires(Vec<u8>),
    /// A key no record may hold yet. Present: refused.
    Forbids(Vec<u8>),
}

impl KeyRule {
    /// The key the rule is about.
    pub fn key(&self) -> &[u8] {
        match self {
            KeyRule::Identity(key)
            | KeyRule::Claim { key, .. }
            | KeyRule::Unique(key)
            | KeyRule::Requires(key)
            | KeyRule::Forbids(key) => key,
        }
    }
}

/// What a key of the index stands for, to name it in an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyMeaning {
    /// An event's identity.
    Event {
        /// The event id.
        id: String,
    },
}

impl std::fmt::Display for KeyMeaning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyMeaning::Event { id } => write!(f, "event {id}"),
        }
    }
}

/// Why an append path refuses an append: a rule of the events it carries (spec §1.8), as a typed
/// reason. Nothing of a refused append is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AppendRefusal {
    /// The event id is stored already with another payload (an exact retry would be a no-op).
    /// React: give the new event a new id, or send the original event unchanged.
    #[error("event id {event} is already stored with another payload")]
    IdentityConflict {
        /// The event id.
        event: String,
    },
    /// A rule on a key this build does not know was broken.
    #[error("key {key:?} refused the append")]
    Unknown {
        /// The key, as text.
        key: String,
    },
}

impl AppendRefusal {
    /// Whether the refusal is a conflict with what is stored (re-read and decide again), rather than
    /// input that can never be appended.
    pub fn is_conflict(&self) -> bool {
        matches!(self, AppendRefusal::IdentityConflict { .. })
    }

    /// The typed reason for a broken rule.
    pub fn of_rule(rule: &KeyRule) -> AppendRefusal {
        match (rule, key_meaning(rule.key())) {
            (KeyRule::Identity(_), Some(KeyMeaning::Event { id })) => {
                AppendRefusal::IdentityConflict { event: id }
            }
            _ => AppendRefusal::Unknown { key: String::from_utf8_lossy(rule.key()).into_owned() },
        }
    }
}

/// What `key` stands for, if it is a key this module makes.
pub fn key_meaning(key: &[u8]) -> Option<KeyMeaning> {
    let (tag, rest) = key.split_first()?;
    let text = std::str::from_utf8(rest).ok()?;
    match *tag {
        EVENT_TAG => Some(KeyMeaning::Event { id: text.to_owned() }),
        _ => None,
    }
}

fn key(tag: u8, parts: &[&str]) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + parts.iter().map(|p| p.len() + 1).sum::<usize>());
    key.push(tag);
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            key.push(0);
        }
        key.extend_from_slice(part.as_bytes());
    }
    key
}

/// The identity key of the event with this id.
pub fn event_key(id: &str) -> Vec<u8> {
    key(EVENT_TAG, &[id])
}

impl Record {
    /// The rules an append of this record puts on the log's key index: a RuntimeEvent is known by
    /// its id (spec §1.8 item 8: an exact retry is a no-op, the same id with another payload a
    /// conflict). Other records have no key.
    pub fn key_rules(&self) -> Vec<KeyRule> {
        match self {
            Record::RuntimeEvent(event) => event_rules(event),
            _ => Vec::new(),
        }
    }
}

fn event_rules(event: &RuntimeEvent) -> Vec<KeyRule> {
    vec![KeyRule::Identity(event_key(event.id.as_str()))]
}

/// The rules of an encoded record, for a log that indexes envelopes it did not append itself (an
/// index built for a store written before it existed, a salvaged store, the envelopes other hosts
/// append to a shared log). A record that does not decode has none: it claims nothing.
pub fn key_rules_of_encoded(kind: u16, kind_schema: u16, bytes: &[u8]) -> Vec<KeyRule> {
    if kind != crate::record::RecordKind::RuntimeEvent.code() {
        return Vec::new();
    }
    Record::decode(kind, kind_schema, bytes).map(|record| record.key_rules()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_what_they_stand_for() {
        assert_eq!(event_key("e1"), b"ee1".to_vec());
        assert_eq!(key_meaning(&event_key("a:b/c")), Some(KeyMeaning::Event { id: "a:b/c".to_owned() }));
        assert_eq!(key_meaning(b""), None);
        assert_eq!(key_meaning(b"?x"), None);
    }
}
