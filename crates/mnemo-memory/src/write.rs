//! Item writes as callers give them, and their normalization into the stored fields
//! (memory.md §1.2–1.7).

use std::collections::BTreeMap;

use mnemo_core::limits::{JSON_SAFE_INTEGER_MAX, MEMORY_KEYS_MAX, MEMORY_SOURCES_MAX};
use mnemo_core::{
    KeyOrigin, KeyType, MemoryItemFields, MemoryKey, MemoryKind, MemoryOrigin, MemoryScope, SourcePointer,
    StatementType, TemporalType, TimestampMs, ValidationError,
};
use serde::{Deserialize, Serialize};

use crate::text::{check_identifier, normalize_content, visible_key};

/// A key as a caller gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyInput {
    /// Display text; normalized on write.
    pub key: String,
    /// What it names.
    pub key_type: KeyType,
    /// Who produced it.
    pub key_origin: KeyOrigin,
}

/// An item's fields as a caller gives them (`MemoryItemWrite`): normalized and checked on write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemInput {
    /// The statement.
    pub content: String,
    /// What it is about.
    pub kind: MemoryKind,
    /// Its modality.
    pub statement_type: StatementType,
    /// How it is placed in time.
    pub temporal_type: TemporalType,
    /// Where it is visible.
    pub scope: MemoryScope,
    /// Event start (UTC ms).
    #[serde(default)]
    pub event_started_at: Option<u64>,
    /// Event end (UTC ms).
    #[serde(default)]
    pub event_ended_at: Option<u64>,
    /// When the supporting events were observed (UTC ms).
    pub observed_at: u64,
    /// How the content was produced.
    pub origin: MemoryOrigin,
    /// 1 to 32 keys before de-duplication.
    pub keys: Vec<KeyInput>,
    /// 1 to 256 sources before de-duplication.
    pub sources: Vec<SourcePointer>,
}

fn fail<T>(field: impl Into<String>, reason: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError::new(field, reason))
}

fn origin_weight(origin: KeyOrigin) -> u32 {
    match origin {
        KeyOrigin::User => 3,
        KeyOrigin::Deterministic => 2,
        _ => 1,
    }
}

fn type_weight(key_type: KeyType) -> u32 {
    match key_type {
        KeyType::Code => 5,
        KeyType::Exact => 4,
        KeyType::Entity => 3,
        KeyType::Concept => 2,
        _ => 1,
    }
}

/// The de-duplication priority of a key (§1.5 step 5).
pub fn key_priority(key: &MemoryKey) -> u32 {
    origin_weight(key.key_origin) * 10 + type_weight(key.key_type)
}

/// Validates, normalizes and de-duplicates keys (§1.5): at most 32 before de-duplication, the
/// highest priority wins a normalized key (ties: the display text that sorts first in UTF-16
/// code-unit order), ordered by normalized key.
pub fn normalize_keys(keys: &[KeyInput]) -> Result<Vec<MemoryKey>, ValidationError> {
    if keys.is_empty() || keys.len() > MEMORY_KEYS_MAX {
        return fail("keys", format!("must hold 1 to {MEMORY_KEYS_MAX} keys"));
    }
    let mut winners: BTreeMap<String, MemoryKey> = BTreeMap::new();
    for (index, input) in keys.iter().enumerate() {
        let text = visible_key(&format!("keys[{index}].key"), &input.key)?;
        let key = MemoryKey::new(text, input.key_type, input.key_origin);
        let replace = match winners.get(&key.normalized_key) {
            None => true,
            Some(held) => {
                let (a, b) = (key_priority(&key), key_priority(held));
                a > b || (a == b && key.key.encode_utf16().lt(held.key.encode_utf16()))
            }
        };
        if replace {
            winners.insert(key.normalized_key.clone(), key);
        }
    }
    // NOTE: BTreeMap orders by UTF-8 bytes; UTF-16 code-unit order differs only above U+FFFF
    // versus U+E000..U+FFFF, so the final order is taken in code units explicitly.
    let mut out: Vec<MemoryKey> = winners.into_values().collect();
    out.sort_by(|a, b| a.normalized_key.encode_utf16().cmp(b.normalized_key.encode_utf16()));
    Ok(out)
}

/// Validates and de-duplicates sources by event (§1.7): two entries for one event must agree on
/// session, run and turn ("conflicting provenance").
pub fn normalize_sources(sources: &[SourcePointer]) -> Result<Vec<SourcePointer>, ValidationError> {
    if sources.is_empty() || sources.len() > MEMORY_SOURCES_MAX {
        return fail("sources", format!("must hold 1 to {MEMORY_SOURCES_MAX} sources"));
    }
    let mut by_event: BTreeMap<String, SourcePointer> = BTreeMap::new();
    for (index, source) in sources.iter().enumerate() {
        let at = |f: &str| format!("sources[{index}].{f}");
        check_identifier(&at("session"), source.session.as_str())?;
        check_identifier(&at("run"), source.run.as_str())?;
        check_identifier(&at("turn"), source.turn.as_str())?;
        check_identifier(&at("event"), source.event.as_str())?;
        match by_event.get(source.event.as_str()) {
            Some(held) if held != source => {
                return fail(at("event"), "conflicting provenance for one event");
            }
            Some(_) => {}
            None => {
                by_event.insert(source.event.as_str().to_owned(), source.clone());
            }
        }
    }
    Ok(by_event.into_values().collect())
}

fn timestamp(field: &str, value: Option<u64>) -> Result<Option<TimestampMs>, ValidationError> {
    match value {
        Some(v) if v > JSON_SAFE_INTEGER_MAX => fail(field, "must be a non-negative safe integer"),
        other => Ok(other.map(TimestampMs)),
    }
}

impl ItemInput {
    /// The stored form: content normalized, keys and sources de-duplicated and ordered, every
    /// rule of §1.2–1.7 checked.
    pub fn normalize(&self) -> Result<MemoryItemFields, ValidationError> {
        if let MemoryScope::Workspace(workspace) = &self.scope {
            check_identifier("scope", workspace.as_str())?;
        }
        let fields = MemoryItemFields {
            content: normalize_content(&self.content)?,
            kind: self.kind,
            statement_type: self.statement_type,
            temporal_type: self.temporal_type,
            scope: self.scope.clone(),
            event_started_at: timestamp("event_started_at", self.event_started_at)?,
            event_ended_at: timestamp("event_ended_at", self.event_ended_at)?,
            observed_at: timestamp("observed_at", Some(self.observed_at))?.unwrap_or(TimestampMs(0)),
            origin: self.origin,
            keys: normalize_keys(&self.keys)?,
            sources: normalize_sources(&self.sources)?,
        };
        fields.validate()?;
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str, key_type: KeyType, key_origin: KeyOrigin) -> KeyInput {
        KeyInput { key: text.to_owned(), key_type, key_origin }
    }

    #[test]
    fn keys_dedupe_by_priority_worked_example() {
        let keys = normalize_keys(&[
            key(" 偏好 ", KeyType::Concept, KeyOrigin::Llm),
            key("偏好", KeyType::Exact, KeyOrigin::User),
            key("Chinese answer", KeyType::Alias, KeyOrigin::Deterministic),
        ])
        .unwrap_or_default();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].key, "Chinese answer");
        assert_eq!(keys[0].normalized_key, "chinese answer");
        assert_eq!(
            (keys[1].key.as_str(), keys[1].key_type, keys[1].key_origin),
            ("偏好", KeyType::Exact, KeyOrigin::User)
        );
    }

    #[test]
    fn key_ties_go_to_the_first_display_text() {
        let keys = normalize_keys(&[
            key("Tabs", KeyType::Concept, KeyOrigin::Llm),
            key("TABS", KeyType::Concept, KeyOrigin::Llm),
        ])
        .unwrap_or_default();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].key, "TABS");
    }

    #[test]
    fn too_many_keys_before_dedupe_are_refused() {
        let many: Vec<KeyInput> = (0..33).map(|_| key("same", KeyType::Concept, KeyOrigin::Llm)).collect();
        assert!(normalize_keys(&many).is_err());
    }
}
