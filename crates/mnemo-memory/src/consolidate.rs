//! Each fact once (decision 0155): how a new statement relates to the items memory holds in its
//! scope, and what an extraction commit does about it.
//!
//! - A statement whose comparison form ([`signature`]) equals an active item's of the same scope,
//!   or that the canonicalizer says restates one ([`Link::SameAs`]), is merged into it: the item
//!   keeps its content and gains the statement's sources and keys ([`merge_fields`]), a new
//!   version when anything is new.
//! - A statement the canonicalizer says contradicts an active item ([`Link::Supersedes`]) creates
//!   its own item and archives the older one, which points at it.
//!
//! The exact-restatement rule is the writer's own, so a fact stated again is never a second item
//! whichever model canonicalized it; the meaning rules ([`relation`]) are what the embedded
//! canonicalizer answers with, and a host's model may answer better.

use std::collections::BTreeMap;

use mnemo_core::limits::{MEMORY_KEYS_MAX, MEMORY_SOURCES_MAX};
use mnemo_core::{
    Digest, ItemId, ItemMerge, LifecycleState, MemoryItem, MemoryItemFields, MemoryKind, MemoryOrigin,
    MemoryScope, NewMemoryItem, Supersession,
};
use serde::{Deserialize, Serialize};

use crate::facts::{self, Fact};
use crate::state::{self, FACT_TAG, KEY_TAG, KeyEntry, Kv, SCOPE_TAG, SIGNATURE_TAG, key};
use crate::write::key_priority;

/// What the canonicalizer says of a statement and a held item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Link {
    /// The statement restates the item: merge it.
    SameAs(ItemId),
    /// The statement contradicts the item: the statement's item replaces it.
    Supersedes(ItemId),
}

/// How a new statement relates to a held one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The same fact.
    Same,
    /// The new statement says the opposite, or another value for the same attribute.
    Contradicts,
    /// Neither.
    Unrelated,
}

/// Words that carry no meaning of their own in a statement about the user.
const FILLER: &[&str] =
    &["a", "an", "the", "do", "does", "did", "is", "are", "am", "be", "to", "that", "please", "really"];

fn is_negation(word: &str) -> bool {
    matches!(word, "not" | "no" | "never" | "cannot" | "without") || word.ends_with("n't")
}

/// A word in its comparison form: lowercase, possessive dropped, a plural or third-person `s`
/// dropped (`prefers` and `prefer`, `spaces` and `space` compare equal).
fn stem(word: &str) -> String {
    let word = word.trim_end_matches("'s");
    let keep = word.len() <= 3 || word.ends_with("ss") || word.ends_with("us") || word.ends_with("is");
    match word.strip_suffix('s') {
        Some(stem) if !keep => stem.to_owned(),
        _ => word.to_owned(),
    }
}

/// The statement's meaning words (stemmed, filler dropped) and whether it is negated.
fn meaning(content: &str) -> (Vec<String>, bool) {
    let lowered = content.to_lowercase().replace('’', "'");
    let mut words = Vec::new();
    let mut negations = 0usize;
    for raw in lowered.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-' || c == '.')) {
        let word = raw.trim_matches(|c: char| c == '.' || c == '\'' || c == '-');
        if word.is_empty() || FILLER.contains(&word) {
            continue;
        }
        if is_negation(word) {
            negations += 1;
            continue;
        }
        words.push(stem(word));
    }
    (words, negations % 2 == 1)
}

/// The comparison form of a statement: its meaning words in order, `not` first when it is
/// negated. Two statements with the same signature state the same fact.
pub fn signature(content: &str) -> String {
    let (words, negated) = meaning(content);
    let mut out = if negated { "not ".to_owned() } else { String::new() };
    out.push_str(&words.join(" "));
    out
}

/// The digest a signature is indexed by.
pub(crate) fn signature_digest(content: &str) -> String {
    Digest::sha256(signature(content).as_bytes()).to_hex()[..32].to_owned()
}

/// `(subject, attribute, value)` of "The user's name is Ada".
fn attribute(content: &str) -> Option<(String, String, String)> {
    let lowered = content.to_lowercase().replace('’', "'");
    let lowered = lowered.trim().trim_end_matches('.');
    let rest = lowered.strip_prefix("the ").unwrap_or(lowered);
    let (subject, rest) = rest.split_once("'s ")?;
    if !matches!(subject, "user" | "team" | "project") {
        return None;
    }
    let (name, value) = rest.split_once(" is ").or_else(|| rest.split_once(" are "))?;
    if name.split_whitespace().count() > 4 || value.trim().is_empty() {
        return None;
    }
    Some((subject.to_owned(), name.trim().to_owned(), signature(value)))
}

/// `(chosen, over)` of "The user prefers tabs over spaces".
fn preference(content: &str) -> Option<(String, String)> {
    let lowered = content.to_lowercase();
    let at = lowered.find("prefer")?;
    let rest = lowered[at..].split_once(' ')?.1;
    let (chosen, over) = rest.split_once(" over ").or_else(|| rest.split_once(" to "))?;
    Some((signature(chosen), signature(over)))
}

/// How `new` relates to `held` by the embedded rules: the same meaning words with the same
/// polarity are the same fact; the same words with the opposite polarity, another value for the
/// same attribute ("the user's name is …") or a preference turned around contradict it.
pub fn relation(held: &str, new: &str) -> Relation {
    if let (Some(a), Some(b)) = (preference(held), preference(new))
        && a.0 == b.1
        && a.1 == b.0
        && a.0 != a.1
    {
        return Relation::Contradicts;
    }
    let ((mut held_words, held_negated), (mut new_words, new_negated)) = (meaning(held), meaning(new));
    held_words.sort();
    held_words.dedup();
    new_words.sort();
    new_words.dedup();
    if held_words == new_words && !held_words.is_empty() {
        return if held_negated == new_negated { Relation::Same } else { Relation::Contradicts };
    }
    if let (Some(a), Some(b)) = (attribute(held), attribute(new))
        && a.0 == b.0
        && a.1 == b.1
    {
        return if a.2 == b.2 { Relation::Same } else { Relation::Contradicts };
    }
    Relation::Unrelated
}

/// The held item's fields with a restatement merged in: its content, kind and scope kept, the
/// statement's sources and keys added (up to the limits; the held ones come first), the later
/// observation time, and `user_requested` once the user asked for it.
pub fn merge_fields(held: &MemoryItemFields, statement: &MemoryItemFields) -> MemoryItemFields {
    let mut merged = held.clone();
    for source in &statement.sources {
        if merged.sources.len() >= MEMORY_SOURCES_MAX {
            break;
        }
        if !merged.sources.iter().any(|s| s.event == source.event) {
            merged.sources.push(source.clone());
        }
    }
    merged.sources.sort_by(|a, b| a.event.as_str().cmp(b.event.as_str()));
    let mut keys: BTreeMap<String, mnemo_core::MemoryKey> =
        held.keys.iter().map(|k| (k.normalized_key.clone(), k.clone())).collect();
    for key in &statement.keys {
        match keys.get(&key.normalized_key) {
            Some(held) if key_priority(held) >= key_priority(key) => {}
            Some(_) => {
                keys.insert(key.normalized_key.clone(), key.clone());
            }
            None if keys.len() < MEMORY_KEYS_MAX => {
                keys.insert(key.normalized_key.clone(), key.clone());
            }
            None => {}
        }
    }
    merged.keys = keys.into_values().collect();
    merged.keys.sort_by(|a, b| a.normalized_key.encode_utf16().cmp(b.normalized_key.encode_utf16()));
    merged.observed_at = held.observed_at.max(statement.observed_at);
    if statement.origin == MemoryOrigin::UserRequested {
        merged.origin = MemoryOrigin::UserRequested;
    }
    merged
}

/// An item as the plan sees it: its fields and version after the steps planned so far.
struct Planned {
    fields: MemoryItemFields,
    version: u64,
    active: bool,
}

/// The active item of `scope` whose content has `digest` as signature digest, if any (the
/// first by id).
fn held_with_signature(
    kv: &(impl Kv + ?Sized),
    scope: &str,
    digest: &str,
) -> Result<Option<ItemId>, mnemo_pipeline::PipelineError> {
    let prefix = [key(SIGNATURE_TAG, &[scope, digest]), vec![0]].concat();
    let mut found = None;
    kv.scan_bytes(&prefix, &mut |k, _| {
        found = std::str::from_utf8(&k[prefix.len()..]).ok().and_then(|id| ItemId::new(id).ok());
        false
    })?;
    Ok(found)
}

/// The active items of `scope` that state a fact about the same subject as `fact`: those the
/// fact index holds and those an earlier statement of the plan created, each once, oldest first.
fn fact_holders(
    kv: &(impl Kv + ?Sized),
    planned: &mut BTreeMap<ItemId, Planned>,
    created: &[(String, String, ItemId)],
    scope: &MemoryScope,
    fact: &Fact,
) -> Result<Vec<(ItemId, String)>, mnemo_pipeline::PipelineError> {
    let scope_text = scope.as_text();
    let mut ids: Vec<ItemId> = Vec::new();
    let Some(first) = fact.subject.attribute.first() else { return Ok(Vec::new()) };
    let prefix = [key(FACT_TAG, &[&scope_text, fact.subject.owner, first]), vec![0]].concat();
    kv.scan_bytes(&prefix, &mut |k, _| {
        if let Some(id) = std::str::from_utf8(&k[prefix.len()..]).ok().and_then(|id| ItemId::new(id).ok()) {
            ids.push(id);
        }
        ids.len() < HELD_ITEMS_MAX
    })?;
    ids.extend(created.iter().filter(|(s, _, _)| *s == scope_text).map(|c| c.2.clone()));
    let mut out: Vec<(ItemId, String)> = Vec::new();
    for id in ids {
        if out.iter().any(|(held, _)| *held == id) {
            continue;
        }
        let Some(current) = load(kv, planned, &id)? else { continue };
        if !current.active || current.fields.scope != *scope {
            continue;
        }
        if let Some(held) = facts::fact(&current.fields.content)
            && held.subject.same_as(&fact.subject)
        {
            out.push((id, held.value));
        }
    }
    Ok(out)
}

/// Decides, against the caught-up state, which statements of a commit restate an item (merges)
/// and which items they replace (supersessions). A statement of a fact ([`facts::fact`]) is
/// decided by the ledger's order alone: it restates the active item of its subject holding the
/// same value, and supersedes every one holding another, whatever the canonicalizer said.
/// Otherwise `links` holds the canonicalizer's verdict per statement (empty when there is none);
/// a link to an item that is not active in the statement's scope is ignored.
pub(crate) fn plan(
    kv: &(impl Kv + ?Sized),
    items: &[NewMemoryItem],
    links: &[Option<Link>],
) -> Result<(Vec<ItemMerge>, Vec<Supersession>), mnemo_pipeline::PipelineError> {
    let mut planned: BTreeMap<ItemId, Planned> = BTreeMap::new();
    let mut created: Vec<(String, String, ItemId)> = Vec::new();
    let (mut merges, mut supersessions) = (Vec::new(), Vec::new());
    for (index, new) in items.iter().enumerate() {
        let scope = new.fields.scope.as_text();
        let digest = signature_digest(&new.fields.content);
        let fact = facts::fact(&new.fields.content);
        let holders = match &fact {
            Some(fact) => fact_holders(kv, &mut planned, &created, &new.fields.scope, fact)?,
            None => Vec::new(),
        };
        let link =
            if fact.is_some() && !holders.is_empty() { None } else { links.get(index).cloned().flatten() };
        let mut target = created.iter().find(|(s, d, _)| *s == scope && *d == digest).map(|c| c.2.clone());
        if target.is_none()
            && let Some(fact) = &fact
        {
            target = holders.iter().find(|(_, value)| *value == fact.value).map(|h| h.0.clone());
        }
        if target.is_none()
            && let Some(Link::SameAs(id)) = &link
        {
            target = Some(id.clone());
        }
        if target.is_none() {
            target = held_with_signature(kv, &scope, &digest)?;
        }
        if let Some(id) = target
            && let Some(current) = load(kv, &mut planned, &id)?
            && current.active
            && current.fields.scope == new.fields.scope
        {
            merges.push(ItemMerge {
                statement: index as u32,
                item: id.clone(),
                expected_version: current.version,
            });
            let fields = merge_fields(&current.fields, &new.fields);
            if fields != current.fields {
                current.fields = fields;
                current.version += 1;
            }
            continue;
        }
        planned.insert(new.item.clone(), Planned { fields: new.fields.clone(), version: 1, active: true });
        created.push((scope, digest, new.item.clone()));
        let mut replaced: Vec<ItemId> = holders.into_iter().map(|(id, _)| id).collect();
        if let Some(Link::Supersedes(id)) = link {
            replaced.push(id);
        }
        for id in replaced {
            if let Some(current) = load(kv, &mut planned, &id)?
                && current.active
                && current.fields.scope == new.fields.scope
            {
                supersessions.push(Supersession {
                    item: id,
                    expected_version: current.version,
                    by: index as u32,
                });
                current.active = false;
                current.version += 1;
            }
        }
    }
    Ok((merges, supersessions))
}

fn load<'p>(
    kv: &(impl Kv + ?Sized),
    planned: &'p mut BTreeMap<ItemId, Planned>,
    id: &ItemId,
) -> Result<Option<&'p mut Planned>, mnemo_pipeline::PipelineError> {
    if !planned.contains_key(id) {
        let Some(item) = state::item(kv, id)? else { return Ok(None) };
        planned.insert(
            id.clone(),
            Planned {
                fields: item.fields,
                version: item.version,
                active: item.lifecycle == LifecycleState::Active,
            },
        );
    }
    Ok(planned.get_mut(id))
}

/// Most held items one canonicalization prompt shows.
pub const HELD_ITEMS_MAX: usize = 64;
/// Most items of a scope read to find held items of a candidate's kind.
pub const HELD_SCAN_ITEMS_MAX: usize = 256;

/// A statement as [`held_items`] looks for what it may restate.
pub(crate) struct Probe {
    pub scope: MemoryScope,
    pub kind: MemoryKind,
    pub content: String,
    /// Normalized keys.
    pub keys: Vec<String>,
}

/// The active items of `scope` a statement may restate or contradict: those sharing one of
/// its normalized keys or its signature, and those of its kind (identity, preference: where a
/// contradiction rarely shares a word), at most [`HELD_ITEMS_MAX`] in all across `statements`.
pub(crate) fn held_items(
    store: &dyn mnemo_pipeline::StateStore,
    statements: &[Probe],
) -> Result<Vec<MemoryItem>, mnemo_pipeline::PipelineError> {
    let mut ids: std::collections::BTreeSet<ItemId> = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for fields in statements {
        let scope = &fields.scope;
        let scope_text = scope.as_text();
        let mut found: Vec<ItemId> = Vec::new();
        if let Some(id) = held_with_signature(store, &scope_text, &signature_digest(&fields.content))? {
            found.push(id);
        }
        for k in &fields.keys {
            let prefix = [KEY_TAG, k.as_bytes(), b"\0"].concat();
            store.scan_prefix(&prefix, &mut |key, value| {
                if let Ok(entry) = state::decode::<KeyEntry>(value)
                    && entry.scope == scope_text
                    && entry.lifecycle == LifecycleState::Active
                    && let Some(id) =
                        std::str::from_utf8(&key[prefix.len()..]).ok().and_then(|i| ItemId::new(i).ok())
                {
                    found.push(id);
                }
                found.len() < HELD_ITEMS_MAX
            })?;
        }
        if matches!(fields.kind, MemoryKind::Identity | MemoryKind::Preference) {
            let prefix = [SCOPE_TAG, scope_text.as_bytes(), b"\0"].concat();
            let mut seen = 0;
            let mut active = Vec::new();
            store.scan_prefix(&prefix, &mut |key, value| {
                seen += 1;
                if value == b"active"
                    && let Some(id) =
                        std::str::from_utf8(&key[prefix.len()..]).ok().and_then(|i| ItemId::new(i).ok())
                {
                    active.push(id);
                }
                seen < HELD_SCAN_ITEMS_MAX
            })?;
            for id in active {
                if let Some(item) = state::item(store, &id)?
                    && item.fields.kind == fields.kind
                {
                    found.push(id);
                }
            }
        }
        for id in found {
            if out.len() >= HELD_ITEMS_MAX {
                return Ok(out);
            }
            if ids.insert(id.clone())
                && let Some(item) = state::item(store, &id)?
                && item.lifecycle == LifecycleState::Active
            {
                out.push(item);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_ignore_case_articles_and_inflection() {
        assert_eq!(signature("The user prefers tabs over spaces."), signature("user prefer tab over space"));
        assert_ne!(signature("The user prefers tabs"), signature("The user does not prefer tabs"));
        assert_eq!(signature("The user doesn't use unwrap"), signature("The user does not use unwrap"));
    }

    #[test]
    fn relations_by_the_embedded_rules() {
        let check = |held: &str, new: &str, expected: Relation| {
            assert_eq!(relation(held, new), expected, "{held:?} vs {new:?}");
        };
        check("The user prefers tabs over spaces", "The user prefers tabs over spaces.", Relation::Same);
        check("The user's name is Ada", "The user's name is Grace", Relation::Contradicts);
        check("The user's name is Ada", "The user's name is Ada.", Relation::Same);
        check(
            "The user prefers tabs over spaces",
            "The user prefers spaces over tabs",
            Relation::Contradicts,
        );
        check("The user uses vim", "The user does not use vim", Relation::Contradicts);
        check("The user's name is Ada", "The user's editor is vim", Relation::Unrelated);
        check(
            "The user prefers tabs over spaces",
            "The user maintains the storage layer",
            Relation::Unrelated,
        );
    }
}
