//! Text rules of memory.md §1.4–1.6 and the evidence normalization of §3.7.

use mnemo_core::ValidationError;
use mnemo_core::limits::{MEMORY_CONTENT_CODE_POINTS_MAX, MEMORY_KEY_CODE_POINTS_MAX};
use unicode_normalization::UnicodeNormalization;

/// Longest identifier (operation, item, session, workspace, source fields) in code points.
pub const IDENTIFIER_CODE_POINTS_MAX: usize = 512;

fn fail<T>(field: &str, reason: impl Into<String>) -> Result<T, ValidationError> {
    Err(ValidationError::new(field, reason))
}

pub(crate) fn code_points(text: &str) -> usize {
    text.chars().count()
}

fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{FEFF}')
}

fn nfc(text: &str) -> String {
    text.nfc().collect()
}

/// Normalizes item content (§1.4): NFC, each control character becomes one space, zero-width
/// characters are deleted, surrounding whitespace is trimmed; then non-empty and at most 2000
/// code points. NFC is applied again after the deletions so that the result is always a fixed
/// point (the reference order can leave a non-NFC string, which its own read check then refuses).
pub fn normalize_content(input: &str) -> Result<String, ValidationError> {
    let replaced: String = nfc(input)
        .chars()
        .filter(|c| !is_zero_width(*c))
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let normalized = nfc(replaced.trim()).trim().to_owned();
    if normalized.is_empty() {
        return fail("content", "must not be empty after normalization");
    }
    let len = code_points(&normalized);
    if len > MEMORY_CONTENT_CODE_POINTS_MAX {
        return fail(
            "content",
            format!("is {len} code points, the limit is {MEMORY_CONTENT_CODE_POINTS_MAX}"),
        );
    }
    Ok(normalized)
}

/// Validates visible text used as a key or search term (§1.5 step 2): NFC, trimmed, non-empty,
/// no control or zero-width characters (refused, not stripped), at most 256 code points.
pub fn visible_key(field: &str, input: &str) -> Result<String, ValidationError> {
    let text = nfc(input).trim().to_owned();
    if text.is_empty() {
        return fail(field, "must not be empty");
    }
    if text.chars().any(|c| c.is_control() || is_zero_width(c)) {
        return fail(field, "cannot contain control or zero-width characters");
    }
    if code_points(&text) > MEMORY_KEY_CODE_POINTS_MAX {
        return fail(field, format!("must be at most {MEMORY_KEY_CODE_POINTS_MAX} code points"));
    }
    Ok(text)
}

/// Checks an identifier (§1.6): already NFC without surrounding whitespace (refused, not fixed),
/// non-empty, no control or zero-width characters, at most 512 code points.
pub fn check_identifier(field: &str, text: &str) -> Result<(), ValidationError> {
    if text.is_empty() {
        return fail(field, "must not be empty");
    }
    if nfc(text) != text || text.trim() != text {
        return fail(field, "must already be NFC-normalized without surrounding whitespace");
    }
    if text.chars().any(|c| c.is_control() || is_zero_width(c)) {
        return fail(field, "cannot contain control or zero-width characters");
    }
    if code_points(text) > IDENTIFIER_CODE_POINTS_MAX {
        return fail(field, format!("must be at most {IDENTIFIER_CODE_POINTS_MAX} code points"));
    }
    Ok(())
}

/// Evidence and quote normalization (§3.7, §3.9 stage 2): NFC, every whitespace run becomes one
/// space, trimmed.
pub fn normalize_evidence(text: &str) -> String {
    normalize_evidence_with_breaks(text).0
}

/// [`normalize_evidence`], and the char offsets in its result of the spaces that stand for a
/// whitespace run holding a line break: where a line the user wrote ended.
pub(crate) fn normalize_evidence_with_breaks(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut breaks = Vec::new();
    let mut written = 0;
    let (mut in_space, mut line_break) = (false, false);
    for c in nfc(text).chars() {
        if c.is_whitespace() {
            in_space = true;
            line_break |= matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}');
        } else {
            if in_space && !out.is_empty() {
                if line_break {
                    breaks.push(written);
                }
                out.push(' ');
                written += 1;
            }
            (in_space, line_break) = (false, false);
            out.push(c);
            written += 1;
        }
    }
    (out, breaks)
}

/// The first `max` code points of `text`.
pub(crate) fn take_code_points(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_normalized_to_a_fixed_point() {
        assert_eq!(normalize_content("  a\tb\nc\u{200B}d  ").ok(), Some("a b cd".to_owned()));
        assert_eq!(normalize_content("e\u{301}").ok(), Some("é".to_owned()));
        assert!(normalize_content(" \u{200B}\n ").is_err());
        assert!(normalize_content(&"x".repeat(2001)).is_err());
        assert!(normalize_content(&"x".repeat(2000)).is_ok());
        let once = normalize_content("e\u{200B}\u{301} x").unwrap_or_default();
        assert_eq!(normalize_content(&once).ok(), Some(once.clone()));
    }

    #[test]
    fn keys_are_refused_not_stripped() {
        assert_eq!(visible_key("k", " 偏好 ").ok(), Some("偏好".to_owned()));
        assert!(visible_key("k", "a\u{200B}b").is_err());
        assert!(visible_key("k", "a\u{7}b").is_err());
        assert!(visible_key("k", "   ").is_err());
        assert!(visible_key("k", &"k".repeat(257)).is_err());
    }

    #[test]
    fn identifiers_must_already_be_normal() {
        assert!(check_identifier("op", "e\u{301}").is_err());
        assert!(check_identifier("op", " op").is_err());
        assert!(check_identifier("op", "op-1").is_ok());
        assert!(check_identifier("op", &"o".repeat(513)).is_err());
    }

    #[test]
    fn evidence_collapses_whitespace() {
        assert_eq!(normalize_evidence("  I  prefer\n\ttabs "), "I prefer tabs");
        assert_eq!(
            normalize_evidence_with_breaks("\nfix it\r\n  always lint\n"),
            ("fix it always lint".to_owned(), vec![6])
        );
    }
}
