//! The compactable projection (compaction.md §3.2) and its digest (§1.3.1).
//!
//! A checkpoint always covers a prefix of one session's compactable projection: its RuntimeEvents in
//! stream order that are not hidden from the model and have a positive size estimate. The projection
//! rule is versioned ([`SOURCE_POLICY_VERSION`]); a checkpoint stamped with another version never
//! matches.
//!
//! Sizes are counted in UTF-16 code units, the reference system's unit, so thresholds taken from it
//! hold exactly.

use mnemo_core::{Content, Digest, ModelVisibility, RuntimeEvent, TurnId};
use serde_json::Value;
use sha2::digest::generic_array::GenericArray;

/// The projection rule this build implements. Checkpoints name it in `source_policy_version`.
pub const SOURCE_POLICY_VERSION: &str = mnemo_core::SOURCE_POLICY_VERSION_V1;

/// Default characters per token of every estimate.
pub const CHARS_PER_TOKEN_DEFAULT: u64 = 4;

/// Length of `text` in UTF-16 code units.
pub fn utf16_len(text: &str) -> u64 {
    text.encode_utf16().count() as u64
}

/// `JSON.stringify(value).length`: the UTF-16 length of the value's compact JSON.
pub fn json_utf16_len(value: &Value) -> u64 {
    // NOTE: key order does not change the length, so serde_json's own order is good enough here.
    serde_json::to_string(value).map_or(0, |text| utf16_len(&text))
}

/// The size estimate of one event in UTF-16 units (§3.2): text and thinking count their text, a call
/// its name and JSON arguments, a response its name and JSON result (or provider output when the
/// provider executed it), an error its message, anything else nothing.
pub fn estimated_chars(event: &RuntimeEvent) -> u64 {
    match &event.content {
        Some(Content::Text(text)) => utf16_len(&text.text),
        Some(Content::Thinking(thinking)) => utf16_len(&thinking.text),
        Some(Content::FunctionCall(call)) => utf16_len(&call.name) + json_utf16_len(&call.args),
        Some(Content::FunctionResponse(response)) => {
            let output = match (&response.provider_executed, &response.provider_output) {
                (Some(true), Some(output)) => output,
                _ => &response.result,
            };
            utf16_len(&response.name) + json_utf16_len(output)
        }
        Some(Content::Error(error)) => utf16_len(&error.message),
        _ => 0,
    }
}

/// Whether an event belongs to the compactable projection: not partial, not hidden, and a positive
/// estimate. A partial (streaming) event is never history (decision 0145): it is left out whether
/// its final event has landed or not, as the reference system's immutable rows never hold one.
pub fn is_compactable(event: &RuntimeEvent) -> bool {
    !event.partial && event.model_visibility != Some(ModelVisibility::Hidden) && estimated_chars(event) > 0
}

/// `estimateTokens(chars, cpt)`: 0 for no characters, else at least 1, rounded up.
pub fn estimate_tokens(chars: u64, chars_per_token: u64) -> u64 {
    if chars == 0 { 0 } else { chars.div_ceil(chars_per_token.max(1)).max(1) }
}

/// The token estimate of a list of events: their characters summed, divided and rounded up once
/// (no per-event minimum, hidden events count nothing).
pub fn estimate_events_tokens<'a>(
    events: impl IntoIterator<Item = &'a RuntimeEvent>,
    chars_per_token: u64,
) -> u64 {
    let chars: u64 = events
        .into_iter()
        .filter(|e| e.model_visibility != Some(ModelVisibility::Hidden))
        .map(estimated_chars)
        .sum();
    chars.div_ceil(chars_per_token.max(1))
}

/// Consecutive runs of one turn, in order: `(turn, start index, end index exclusive)`.
pub fn turn_groups(events: &[RuntimeEvent]) -> Vec<(TurnId, usize, usize)> {
    let mut groups: Vec<(TurnId, usize, usize)> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match groups.last_mut() {
            Some(last) if last.0 == event.turn_id => last.2 = index + 1,
            _ => groups.push((event.turn_id.clone(), index, index + 1)),
        }
    }
    groups
}

/// `stableStringify` of a JSON value (§1.3.1): object keys sorted by UTF-16 code units, recursively;
/// arrays in order except under a key named `required` or `enum`, whose items are sorted by their
/// own stable form.
pub fn stable_json(value: &Value) -> String {
    let mut out = String::new();
    write_stable(value, false, &mut out);
    out
}

fn write_stable(value: &Value, sort_items: bool, out: &mut String) {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            out.push_str(&serde_json::to_string(value).unwrap_or_default());
        }
        Value::Array(items) => {
            let mut parts: Vec<String> = items.iter().map(stable_json).collect();
            if sort_items {
                parts.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            }
            out.push('[');
            out.push_str(&parts.join(","));
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).unwrap_or_default());
                out.push(':');
                write_stable(item, key == "required" || key == "enum", out);
            }
            out.push('}');
        }
    }
}

/// The stable form of a whole event envelope, as the source digest hashes it.
pub fn stable_event(event: &RuntimeEvent) -> String {
    stable_json(&serde_json::to_value(event).unwrap_or(Value::Null))
}

/// SHA-256 initial state.
const SHA256_INIT: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// The source digest as a resumable SHA-256: after each event its state can be saved, so the digest
/// of any prefix of a projection is one finalisation away. This is what lets assembly check a
/// checkpoint's digest without reading the events it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDigester {
    state: [u32; 8],
    buffer: Vec<u8>,
    length: u64,
}

impl Default for SourceDigester {
    fn default() -> Self {
        SourceDigester { state: SHA256_INIT, buffer: Vec::with_capacity(64), length: 0 }
    }
}

/// Bytes of a saved [`SourceDigester`]: state, length, then the partial block.
const DIGESTER_FIXED_BYTES: usize = 32 + 8;

impl SourceDigester {
    /// A digester over no events.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one event: the decimal UTF-8 byte length of its stable form, `:`, the form, `;`.
    pub fn feed_event(&mut self, event: &RuntimeEvent) {
        let text = stable_event(event);
        self.update(text.len().to_string().as_bytes());
        self.update(b":");
        self.update(text.as_bytes());
        self.update(b";");
    }

    fn update(&mut self, mut bytes: &[u8]) {
        self.length += bytes.len() as u64;
        if !self.buffer.is_empty() {
            let take = (64 - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buffer.len() < 64 {
                return;
            }
            sha2::compress256(&mut self.state, &[*GenericArray::from_slice(&self.buffer)]);
            self.buffer.clear();
        }
        let whole = bytes.len() / 64 * 64;
        let blocks: Vec<GenericArray<u8, _>> =
            bytes[..whole].chunks_exact(64).map(|c| *GenericArray::from_slice(c)).collect();
        if !blocks.is_empty() {
            sha2::compress256(&mut self.state, &blocks);
        }
        self.buffer.extend_from_slice(&bytes[whole..]);
    }

    /// The digest of everything fed so far (`sha256:<hex>`); the digester itself is unchanged.
    pub fn digest(&self) -> Digest {
        let mut state = self.state;
        let mut tail = self.buffer.clone();
        tail.push(0x80);
        while tail.len() % 64 != 56 {
            tail.push(0);
        }
        tail.extend_from_slice(&(self.length * 8).to_be_bytes());
        let blocks: Vec<GenericArray<u8, _>> =
            tail.chunks_exact(64).map(|c| *GenericArray::from_slice(c)).collect();
        sha2::compress256(&mut state, &blocks);
        let mut bytes = [0u8; 32];
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        Digest::from_bytes(bytes)
    }

    /// The saved form: 32 bytes of state, 8 of length (big endian), then the partial block.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DIGESTER_FIXED_BYTES + self.buffer.len());
        for word in self.state {
            out.extend_from_slice(&word.to_be_bytes());
        }
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.buffer);
        out
    }

    /// Restores a saved digester, or `None` if the bytes are not one.
    pub fn from_bytes(bytes: &[u8]) -> Option<SourceDigester> {
        if bytes.len() < DIGESTER_FIXED_BYTES || bytes.len() >= DIGESTER_FIXED_BYTES + 64 {
            return None;
        }
        let mut state = [0u32; 8];
        for (word, chunk) in state.iter_mut().zip(bytes[..32].chunks_exact(4)) {
            *word = u32::from_be_bytes(chunk.try_into().ok()?);
        }
        let length = u64::from_be_bytes(bytes[32..40].try_into().ok()?);
        let buffer = bytes[40..].to_vec();
        if (length % 64) as usize != buffer.len() {
            return None;
        }
        Some(SourceDigester { state, buffer, length })
    }
}

/// The source digest of a list of events (§1.3.1).
pub fn source_digest<'a>(events: impl IntoIterator<Item = &'a RuntimeEvent>) -> Digest {
    let mut digester = SourceDigester::new();
    for event in events {
        digester.feed_event(event);
    }
    digester.digest()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sha2::Digest as _;

    use super::*;
    use crate::testing::{call, result, text_event};

    #[test]
    fn the_resumable_digest_equals_a_plain_sha256_of_the_framed_events() {
        let events = vec![
            text_event("e1", "t1", "user", "hello"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "ls -la"})),
            result("e3", "t1", "c1", "shell", json!("x".repeat(300))),
        ];
        let mut framed = Vec::new();
        for event in &events {
            let text = stable_event(event);
            framed.extend_from_slice(format!("{}:{text};", text.len()).as_bytes());
        }
        let expected = Digest::from_bytes(sha2::Sha256::digest(&framed).into());
        assert_eq!(source_digest(&events), expected);
        let mut digester = SourceDigester::new();
        for event in &events {
            digester.feed_event(event);
            let restored = SourceDigester::from_bytes(&digester.to_bytes());
            assert_eq!(restored.as_ref(), Some(&digester));
        }
        assert_eq!(digester.digest(), expected);
        assert_eq!(source_digest(&[]), Digest::sha256(b""));
    }

    #[test]
    fn stable_json_sorts_keys_by_utf16_and_required_arrays() {
        let value =
            json!({"b": 1, "a": {"z": [3, 1], "required": ["y", "x"]}, "\u{e000}": 0, "\u{1f600}": 0});
        assert_eq!(
            stable_json(&value),
            "{\"a\":{\"required\":[\"x\",\"y\"],\"z\":[3,1]},\"b\":1,\"\u{1f600}\":0,\"\u{e000}\":0}"
        );
    }

    #[test]
    fn estimates_count_utf16_units_and_round_up() {
        assert_eq!(estimate_tokens(0, 4), 0);
        assert_eq!(estimate_tokens(1, 4), 1);
        assert_eq!(estimate_tokens(799, 4), 200);
        assert_eq!(estimate_tokens(801, 0), 801);
        let emoji = text_event("e1", "t1", "user", "\u{1f600}ab");
        assert_eq!(estimated_chars(&emoji), 4);
        let args = call("e2", "t1", "c1", "sh", json!({"a": 1}));
        assert_eq!(estimated_chars(&args), 2 + 7);
        assert!(!is_compactable(&text_event("e3", "t1", "user", "")));
        let mut hidden = text_event("e4", "t1", "user", "x");
        hidden.model_visibility = Some(ModelVisibility::Hidden);
        assert!(!is_compactable(&hidden));
        assert_eq!(estimate_events_tokens([&emoji, &args, &hidden], 4), 4);
    }

    #[test]
    fn turn_groups_are_consecutive_runs() {
        let events = vec![
            text_event("e1", "t1", "user", "a"),
            text_event("e2", "t1", "model", "b"),
            text_event("e3", "t2", "user", "c"),
        ];
        let groups = turn_groups(&events);
        assert_eq!(groups.len(), 2);
        assert_eq!((groups[1].1, groups[1].2), (2, 3));
    }
}
