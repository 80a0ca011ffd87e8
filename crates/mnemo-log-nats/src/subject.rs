//! Subjects: one JetStream subject per Mnemo stream, under the store's prefix.
//!
//! A stream id may hold any printable character (`session/a:b#1`), and NATS subjects may not hold
//! `.`, `*`, `>` or whitespace; the id is therefore written as unpadded URL-safe base64, whose
//! alphabet (`A-Z a-z 0-9 - _`) is valid in a subject token.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mnemo_core::StreamId;

/// The subject prefix of a store: every subject of the JetStream stream `name` starts with it.
pub(crate) fn prefix(name: &str) -> String {
    format!("mnemo.{name}")
}

/// The subject filter of a store's JetStream stream.
pub(crate) fn wildcard(name: &str) -> String {
    format!("{}.*", prefix(name))
}

/// The subject that carries `stream` in the store whose JetStream stream is `name`.
pub fn subject_for(name: &str, stream: &StreamId) -> String {
    format!("{}.{}", prefix(name), URL_SAFE_NO_PAD.encode(stream.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_single_valid_tokens() {
        let stream = StreamId::new("session/a.b c*>#:1").unwrap();
        let subject = subject_for("MNEMO", &stream);
        let token = subject.strip_prefix("mnemo.MNEMO.").unwrap();
        assert!(token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{subject}");
        assert_ne!(subject_for("MNEMO", &StreamId::new("session/a").unwrap()), subject);
    }
}
