//! A record's key rules as the log carries them: every rule of one record end to end in one
//! buffer, so that an event's five or six rules cost one allocation where a list of [`KeyRule`]s
//! costs ten (a key and a value each), made on the caller's thread and freed on the writer's, an
//! event at a time (decision 0142, last addendum).
//!
//! Each rule is encoded as its tag byte, the key's length (u32 LE) and bytes, and for a claim the
//! value's length (u32 LE) and bytes. The buffer is only ever written by [`KeyRules`]' own methods,
//! so it always decodes.

use crate::record_keys::KeyRule;

const IDENTITY: u8 = 1;
const CLAIM: u8 = 2;
const UNIQUE: u8 = 3;
const REQUIRES: u8 = 4;
const FORBIDS: u8 = 5;

/// One rule of a [`KeyRules`], borrowed from its buffer. It means what the [`KeyRule`] of the same
/// name means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleRef<'a> {
    /// [`KeyRule::Identity`].
    Identity(&'a [u8]),
    /// [`KeyRule::Claim`].
    Claim {
        /// The key claimed.
        key: &'a [u8],
        /// What the record claims it for.
        value: &'a [u8],
    },
    /// [`KeyRule::Unique`].
    Unique(&'a [u8]),
    /// [`KeyRule::Requires`].
    Requires(&'a [u8]),
    /// [`KeyRule::Forbids`].
    Forbids(&'a [u8]),
}

impl<'a> RuleRef<'a> {
    /// The key the rule is about.
    #[inline]
    pub fn key(self) -> &'a [u8] {
        match self {
            RuleRef::Identity(key)
            | RuleRef::Claim { key, .. }
            | RuleRef::Unique(key)
            | RuleRef::Requires(key)
            | RuleRef::Forbids(key) => key,
        }
    }

    /// The rule as an owned [`KeyRule`] (to report a refusal).
    pub fn to_rule(self) -> KeyRule {
        match self {
            RuleRef::Identity(key) => KeyRule::Identity(key.to_vec()),
            RuleRef::Claim { key, value } => KeyRule::Claim { key: key.to_vec(), value: value.to_vec() },
            RuleRef::Unique(key) => KeyRule::Unique(key.to_vec()),
            RuleRef::Requires(key) => KeyRule::Requires(key.to_vec()),
            RuleRef::Forbids(key) => KeyRule::Forbids(key.to_vec()),
        }
    }
}

impl<'a> From<&'a KeyRule> for RuleRef<'a> {
    fn from(rule: &'a KeyRule) -> RuleRef<'a> {
        match rule {
            KeyRule::Identity(key) => RuleRef::Identity(key),
            KeyRule::Claim { key, value } => RuleRef::Claim { key, value },
            KeyRule::Unique(key) => RuleRef::Unique(key),
            KeyRule::Requires(key) => RuleRef::Requires(key),
            KeyRule::Forbids(key) => RuleRef::Forbids(key),
        }
    }
}

/// A rule with a key and no value, for [`KeyRules::push_joined`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum JoinedRule {
    Identity,
    Unique,
    Requires,
    Forbids,
}

/// The rules one record puts on the log's key index, in order (see [`KeyRule`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyRules {
    bytes: Vec<u8>,
}

impl std::fmt::Debug for KeyRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl KeyRules {
    /// No rules.
    pub fn new() -> KeyRules {
        KeyRules::default()
    }

    /// No rules yet, with room for `bytes` bytes of them.
    pub fn with_capacity(bytes: usize) -> KeyRules {
        KeyRules { bytes: Vec::with_capacity(bytes) }
    }

    /// Whether the buffer is exactly as large as the rules it holds (it was sized right and never
    /// grew).
    #[cfg(test)]
    pub(crate) fn fits_exactly(&self) -> bool {
        self.bytes.len() == self.bytes.capacity()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The rules as encoded (see the module's documentation).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The rules in order.
    #[inline]
    pub fn iter(&self) -> RulesIter<'_> {
        RulesIter { rest: &self.bytes }
    }

    /// Adds a rule at the end.
    pub fn push(&mut self, rule: RuleRef<'_>) {
        let tag = match rule {
            RuleRef::Identity(_) => IDENTITY,
            RuleRef::Claim { .. } => CLAIM,
            RuleRef::Unique(_) => UNIQUE,
            RuleRef::Requires(_) => REQUIRES,
            RuleRef::Forbids(_) => FORBIDS,
        };
        self.bytes.push(tag);
        self.push_part(rule.key());
        if let RuleRef::Claim { value, .. } = rule {
            self.push_part(value);
        }
    }

    /// Adds a rule of `kind` whose key is `tag` and then `parts` joined by `0x00`, without
    /// building the key apart first (as [`crate::record_keys`] makes its keys).
    pub(crate) fn push_joined(&mut self, kind: JoinedRule, tag: u8, parts: &[&str]) {
        self.bytes.push(match kind {
            JoinedRule::Identity => IDENTITY,
            JoinedRule::Unique => UNIQUE,
            JoinedRule::Requires => REQUIRES,
            JoinedRule::Forbids => FORBIDS,
        });
        self.push_joined_part(tag, parts);
    }

    /// Adds a claim whose key is `tag` and `key_parts`, and whose value is `value_parts` (after
    /// a `0x00` byte, as [`crate::record_keys`] writes claimed values), each joined by `0x00`.
    pub(crate) fn push_claim_joined(&mut self, tag: u8, key_parts: &[&str], value_parts: &[&str]) {
        self.bytes.push(CLAIM);
        self.push_joined_part(tag, key_parts);
        self.push_joined_part(0, value_parts);
    }

    fn push_part(&mut self, part: &[u8]) {
        self.bytes.extend_from_slice(&part_length(part.len()).to_le_bytes());
        self.bytes.extend_from_slice(part);
    }

    fn push_joined_part(&mut self, tag: u8, parts: &[&str]) {
        let length = 1 + parts.iter().map(|p| p.len()).sum::<usize>() + parts.len().saturating_sub(1);
        self.bytes.extend_from_slice(&part_length(length).to_le_bytes());
        self.bytes.push(tag);
        for (index, part) in parts.iter().enumerate() {
            if index > 0 {
                self.bytes.push(0);
            }
            self.bytes.extend_from_slice(part.as_bytes());
        }
    }
}

fn part_length(length: usize) -> u32 {
    // NOTE: a key is made of ids, each bounded far below 4 GiB by the record's own limits.
    u32::try_from(length).unwrap_or_else(|_| panic!("a key rule's part of {length} bytes"))
}

impl From<Vec<KeyRule>> for KeyRules {
    fn from(rules: Vec<KeyRule>) -> KeyRules {
        KeyRules::from(rules.as_slice())
    }
}

impl From<&[KeyRule]> for KeyRules {
    fn from(rules: &[KeyRule]) -> KeyRules {
        let mut all = KeyRules::new();
        for rule in rules {
            all.push(rule.into());
        }
        all
    }
}

impl<'a> IntoIterator for &'a KeyRules {
    type Item = RuleRef<'a>;
    type IntoIter = RulesIter<'a>;

    fn into_iter(self) -> RulesIter<'a> {
        self.iter()
    }
}

/// The rules of a [`KeyRules`], in order.
#[derive(Debug, Clone)]
pub struct RulesIter<'a> {
    rest: &'a [u8],
}

// NOTE: `#[inline]` on the readers: the log's writer walks every record's rules three times, and
// called across crates each rule came back through memory, where the writer waited to read it
// (`perf annotate`: 70% of its decisions' time at the first read after the call).
impl<'a> RulesIter<'a> {
    #[inline]
    fn part(&mut self) -> &'a [u8] {
        let (length, rest) = self.rest.split_at(4);
        let length = u32::from_le_bytes([length[0], length[1], length[2], length[3]]) as usize;
        let (part, rest) = rest.split_at(length);
        self.rest = rest;
        part
    }
}

impl<'a> Iterator for RulesIter<'a> {
    type Item = RuleRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<RuleRef<'a>> {
        // NOTE: only `KeyRules`' own methods write the buffer, so every rule is whole.
        let (&tag, rest) = self.rest.split_first()?;
        self.rest = rest;
        let key = self.part();
        Some(match tag {
            IDENTITY => RuleRef::Identity(key),
            CLAIM => RuleRef::Claim { key, value: self.part() },
            UNIQUE => RuleRef::Unique(key),
            REQUIRES => RuleRef::Requires(key),
            _ => RuleRef::Forbids(key),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_back_in_order_as_they_were_given() {
        let rules = vec![
            KeyRule::Identity(b"e1".to_vec()),
            KeyRule::Claim { key: b"i\0s\0x".to_vec(), value: Vec::new() },
            KeyRule::Claim { key: b"r".to_vec(), value: b"\0run\0turn".to_vec() },
            KeyRule::Unique(Vec::new()),
            KeyRule::Requires(b"c".to_vec()),
            KeyRule::Forbids(b"s".to_vec()),
        ];
        let compact = KeyRules::from(rules.clone());
        let back: Vec<KeyRule> = compact.iter().map(RuleRef::to_rule).collect();
        assert_eq!(back, rules);
        assert!(KeyRules::new().iter().next().is_none());
    }

    #[test]
    fn joined_keys_are_the_keys_the_parts_make() {
        let mut rules = KeyRules::new();
        rules.push_joined(JoinedRule::Unique, b'c', &["session", "inv", "call"]);
        rules.push_claim_joined(b'i', &["session", "inv"], &["run", "turn"]);
        rules.push_joined(JoinedRule::Forbids, b's', &[]);
        let back: Vec<KeyRule> = rules.iter().map(RuleRef::to_rule).collect();
        assert_eq!(
            back,
            vec![
                KeyRule::Unique(b"csession\0inv\0call".to_vec()),
                KeyRule::Claim { key: b"isession\0inv".to_vec(), value: b"\0run\0turn".to_vec() },
                KeyRule::Forbids(b"s".to_vec()),
            ]
        );
    }
}
