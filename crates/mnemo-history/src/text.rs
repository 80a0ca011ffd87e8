//! Text folding, word segmentation, and cutting text to the units the history tools count in.
//!
//! Units (spec §6 asks for them to be decided explicitly): query and snippet caps count code points;
//! byte budgets (tool-result scan cap, read budgets, payload cap) count UTF-8 bytes; the tool
//! schema's string lengths count UTF-16 units, as the reference system's schema does.

use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// Longest indexed term in UTF-8 bytes. A longer word (a hash, a base64 blob) is cut at a
/// character boundary, in documents and queries alike, so it still matches itself.
pub const TERM_BYTES_MAX: usize = 64;

/// Most distinct terms of one query that are scored; the rest are ignored.
pub const QUERY_TERMS_MAX: usize = 32;

/// Folds text for matching: NFC, then each character lowercased on its own (locale independent),
/// with final sigma `ς` folded to `σ` so that a word matches whatever its position.
pub fn fold(text: &str) -> String {
    // ASCII is already NFC and lowercases byte by byte: most text takes this path, and NFC
    // composition was a tenth of what indexing a message cost.
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    fold_unicode(text)
}

fn fold_unicode(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    for c in text.nfc() {
        push_folded(&mut folded, c);
    }
    folded
}

fn push_folded(folded: &mut String, c: char) {
    if c.is_ascii() {
        folded.push(c.to_ascii_lowercase());
    } else if c == 'ς' {
        folded.push('σ');
    } else {
        folded.extend(c.to_lowercase());
    }
}

/// Text in NFC with its folded form, and where each NFC character's folding starts in the folded
/// text: enough to turn a match in the folded text back into a place in the shown text.
#[derive(Debug)]
pub(crate) struct Folded {
    /// The text in NFC, by character.
    pub chars: Vec<char>,
    /// The folded text (equal to [`fold`] of the input).
    pub folded: String,
    /// `starts[i]`: byte offset in `folded` where character `i` of `chars` begins.
    starts: Vec<usize>,
}

impl Folded {
    pub(crate) fn new(text: &str) -> Folded {
        let chars: Vec<char> = text.nfc().collect();
        let mut folded = String::with_capacity(text.len());
        let mut starts = Vec::with_capacity(chars.len());
        for &c in &chars {
            starts.push(folded.len());
            push_folded(&mut folded, c);
        }
        Folded { chars, folded, starts }
    }

    /// The index in `chars` of the character whose folding covers folded byte `offset`.
    pub(crate) fn char_at(&self, offset: usize) -> usize {
        self.starts.partition_point(|start| *start <= offset).saturating_sub(1)
    }
}

/// The words of folded text (Unicode word boundaries, UAX #29), each cut to [`TERM_BYTES_MAX`].
/// Runs of punctuation and whitespace are not words; CJK ideographs are one word each.
pub fn terms(folded: &str) -> impl Iterator<Item = &str> {
    folded.unicode_words().map(|word| prefix_at_char_boundary(word, TERM_BYTES_MAX))
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a character boundary.
pub(crate) fn prefix_at_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first `max_bytes` bytes of `text` decoded lossily: a character cut in half becomes U+FFFD,
/// as a byte slice decoded by the reference system does.
pub(crate) fn byte_prefix_lossy(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    String::from_utf8_lossy(&text.as_bytes()[..max_bytes]).into_owned()
}

/// Length in UTF-16 code units (the unit of the reference system's schema limits).
pub(crate) fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Length in code points.
pub(crate) fn code_points(text: &str) -> usize {
    text.chars().count()
}

/// Collapses every run of whitespace to one space and trims the ends.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Caps text at `max` code points: longer text keeps `max - 1` and gets `…`.
pub(crate) fn cap_code_points(text: &str, max: usize) -> String {
    if code_points(text) <= max {
        return text.to_owned();
    }
    let mut capped: String = text.chars().take(max.saturating_sub(1)).collect();
    capped.push('…');
    capped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_is_nfc_and_lowercase() {
        // "e" + combining acute composes to "é" before lowercasing.
        assert_eq!(fold("Cafe\u{301} ÜBER"), "café über");
        assert_eq!(fold("ΟΔΟΣ οδος"), "οδοσ οδοσ");
        assert_eq!(fold("İ"), "i\u{307}");
    }

    #[test]
    fn the_ascii_path_folds_as_the_unicode_path_does() {
        for text in ["", "Deploy STAGING: retry 3x", "src/Lib.rs:42 {\"ok\":true}\n\tTAB", "\u{7f}~!@#"] {
            assert_eq!(fold(text), fold_unicode(text), "{text:?}");
        }
    }

    #[test]
    fn words_follow_unicode_boundaries() {
        let folded = fold("Cargo test fails on src/lib.rs:42 — 日本語, naïve!");
        let words: Vec<&str> = terms(&folded).collect();
        assert_eq!(words, ["cargo", "test", "fails", "on", "src", "lib.rs", "42", "日", "本", "語", "naïve"]);
    }

    #[test]
    fn long_words_are_cut_at_a_character_boundary() {
        let word = "é".repeat(40);
        let folded = fold(&word);
        let cut: Vec<&str> = terms(&folded).collect();
        assert_eq!(cut, ["é".repeat(32)]);
    }

    #[test]
    fn folded_offsets_map_back_to_characters() {
        let folded = Folded::new("Aİb");
        assert_eq!(folded.folded, "ai\u{307}b");
        let b = folded.folded.find('b').unwrap();
        assert_eq!(folded.char_at(b), 2);
        assert_eq!(folded.char_at(0), 0);
    }

    #[test]
    fn byte_prefixes() {
        assert_eq!(byte_prefix_lossy("aé", 2), "a\u{fffd}");
        assert_eq!(prefix_at_char_boundary("aé", 2), "a");
        assert_eq!(cap_code_points("abcdef", 4), "abc…");
        assert_eq!(collapse_whitespace("  a \n\t b  "), "a b");
        assert_eq!(utf16_len("🙂a"), 3);
    }
}
