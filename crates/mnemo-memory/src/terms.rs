//! Words for matching, not for display: what recall compares between a query and an item, and
//! what keys leave out. A word is lowercased, dropped when it says nothing (a stop word), cut to
//! its stem ("committing" and "commits" are "commit") and mapped to one name for the common
//! coding terms that have several ("tests", "specs", "testing" are "test"; "docs", "documents",
//! "documentation" are "doc"), so that "commit tests" finds "don't commit test files".

use std::collections::BTreeSet;

/// Words that carry no subject of their own: function words, the persons an item is reported in,
/// and the verbs and adverbs of every instruction.
const STOP_WORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "that",
    "this",
    "with",
    "from",
    "what",
    "which",
    "when",
    "where",
    "how",
    "you",
    "your",
    "are",
    "was",
    "were",
    "have",
    "has",
    "had",
    "but",
    "not",
    "can",
    "use",
    "uses",
    "used",
    "using",
    "user",
    "user's",
    "about",
    "into",
    "our",
    "out",
    "they",
    "them",
    "their",
    "theirs",
    "team",
    "team's",
    "assistant",
    "assistant's",
    "instruction",
    "its",
    "it's",
    "there",
    "these",
    "those",
    "then",
    "than",
    "also",
    "just",
    "only",
    "here",
    "very",
    "really",
    "some",
    "any",
    "all",
    "every",
    "each",
    "more",
    "most",
    "much",
    "should",
    "would",
    "could",
    "will",
    "must",
    "does",
    "don't",
    "doesn't",
    "did",
    "been",
    "being",
    "yet",
    "still",
    "even",
    "please",
    "let's",
    "i'm",
    "i'll",
    "i've",
    "i'd",
    "we're",
    "that's",
    "make",
    "sure",
    "want",
    "wants",
    "need",
    "needs",
    "keep",
    "always",
    "never",
    "before",
    "after",
    "until",
    "unless",
    "instead",
    "rather",
    "like",
    "thing",
    "things",
    "anything",
    "something",
    "everything",
    "nothing",
    "over",
    "under",
    "again",
    "now",
    "one",
    "fyi",
    "okay",
    "yes",
    "who",
    "why",
    "get",
    "gets",
    "got",
    "may",
    "might",
    "own",
    "same",
    "such",
    "too",
    "via",
    "per",
];

/// One name for the coding terms that have several, by word or by stem.
const SYNONYMS: &[(&str, &str)] = &[
    ("spec", "test"),
    ("unittest", "test"),
    ("docs", "doc"),
    ("document", "doc"),
    ("documentation", "doc"),
    ("repository", "repo"),
    ("repositories", "repo"),
    ("codebase", "repo"),
    ("db", "database"),
    ("deps", "dependency"),
    ("dep", "dependency"),
    ("dependencies", "dependency"),
    ("packag", "dependency"),
    ("crat", "dependency"),
    ("library", "dependency"),
    ("libraries", "dependency"),
    ("lib", "dependency"),
    ("config", "configuration"),
    ("setting", "configuration"),
    ("linter", "lint"),
    ("formatter", "format"),
    ("fmt", "format"),
    ("func", "function"),
    ("fn", "function"),
    ("method", "function"),
    ("pr", "pull-request"),
    ("mr", "pull-request"),
    ("env", "environment"),
    ("deployment", "deploy"),
    ("exception", "error"),
    ("err", "error"),
    ("logger", "log"),
    ("folder", "directory"),
    ("dir", "directory"),
    ("prod", "production"),
    ("msg", "message"),
];

/// Shortest word kept, in characters: shorter ones are stems of nothing ("a", "to", "is").
const WORD_CHARS_MIN: usize = 2;

/// Whether a lowercased word is a stop word.
pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word) || word.chars().count() < WORD_CHARS_MIN
}

/// The stem of a lowercased word: plural, `-ing` and `-ed` endings and a final `e` off, a doubled
/// final consonant left by them undone ("committing" -> "commit", "tests" -> "test", "merged" and
/// "merge" -> "merg"). Short words and words that only look inflected ("class", "status") stay.
fn stem(word: &str) -> &str {
    let cut = |word: &'_ str, suffix: &str| -> Option<usize> {
        word.strip_suffix(suffix).filter(|rest| rest.chars().count() >= 3).map(str::len)
    };
    let plural = !(word.ends_with("ss") || word.ends_with("us") || word.ends_with("is"));
    let end = cut(word, "ing")
        .or_else(|| cut(word, "ed"))
        .or_else(|| if plural { cut(word, "es").or_else(|| cut(word, "s")) } else { None });
    let mut base = &word[..end.unwrap_or(word.len())];
    let bytes = base.as_bytes();
    let doubled = end.is_some()
        && bytes.len() >= 4
        && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
        && !matches!(bytes[bytes.len() - 1], b'l' | b's' | b'z' | b'e' | b'o');
    if doubled {
        base = &base[..base.len() - 1];
    }
    if base.len() >= 4 && base.ends_with('e') {
        base = &base[..base.len() - 1];
    }
    base
}

/// The term a word is matched by: the stem of its one name when it has several, else its stem.
fn term(word: &str) -> String {
    let named = |w: &str| SYNONYMS.iter().find(|(from, _)| *from == w).map(|(_, to)| *to);
    let name = named(word).or_else(|| named(stem(word))).unwrap_or(word);
    stem(name).to_owned()
}

/// The terms of a text: its words, lowercased, without stop words, stemmed and named.
pub(crate) fn terms(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .replace('’', "'")
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !is_stop_word(w))
        .map(term)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn inflections_and_synonyms_meet() {
        assert_eq!(terms("commit tests"), set(&["commit", "test"]));
        assert_eq!(
            terms("The user's instruction: don't commit the test files"),
            set(&["commit", "fil", "test"])
        );
        assert_eq!(terms("merged"), terms("merge"));
        assert_eq!(terms("committing specs"), set(&["commit", "test"]));
        assert_eq!(terms("separate documents"), terms("separate docs"));
        assert_eq!(terms("new dependencies"), terms("a new crate"));
        assert_eq!(terms("the staging DB"), terms("staging database"));
    }

    #[test]
    fn words_that_only_look_inflected_stay() {
        assert_eq!(terms("class status pass bus"), set(&["bus", "class", "pass", "status"]));
        assert_eq!(terms("running"), set(&["run"]));
    }
}
