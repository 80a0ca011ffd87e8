//! Facts with a current value (decision 0232): "our staging database is stage-db-02", then "we
//! moved the staging database, it is now stage-db-03". A fact is a subject (whose, and which
//! attribute) with one value at a time; the newest statement by log position holds it.
//!
//! Two readings, one form. [`spoken`] reads a user's sentence and writes it in the one content
//! form `The <owner>'s <attribute> is <value>.`; [`fact`] reads that form back from an item's
//! content, so the writer decides by the content it stores, whichever proposer wrote it. Two
//! facts are about the same subject when their owners are the same and one attribute's words
//! begin the other's ("staging" and "staging database"); the writer then supersedes the held one
//! when the values differ and merges when they are the same (`consolidate::plan`).
//!
//! A passing mention is no statement of the value: questions never reach here (the proposer
//! drops them), and a sentence is read only when it opens with its subject or with a change of
//! it ("we moved …"), so "back when the staging database was stage-db-01 …", "someone suggested
//! stage-db-05 for the staging database" and "the staging database is down" state nothing.

use std::sync::OnceLock;

use regex::Regex;

use crate::consolidate::signature;

/// Most words an attribute has ("test command", "staging database host").
pub const FACT_ATTRIBUTE_WORDS_MAX: usize = 4;
/// Most words a value has ("cargo nextest run --workspace").
pub const FACT_VALUE_WORDS_MAX: usize = 8;

/// The subject of a fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    /// `user` or `team` (the project's facts are the team's).
    pub owner: &'static str,
    /// The attribute's words in comparison form (lowercase, stemmed).
    pub attribute: Vec<String>,
}

impl Subject {
    /// Whether two subjects name the same fact: the same owner, and one attribute's words
    /// begin the other's.
    pub fn same_as(&self, other: &Subject) -> bool {
        let (short, long) = if self.attribute.len() <= other.attribute.len() {
            (&self.attribute, &other.attribute)
        } else {
            (&other.attribute, &self.attribute)
        };
        self.owner == other.owner && !short.is_empty() && long.starts_with(short)
    }
}

/// A fact read from an item's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fact {
    /// What it is about.
    pub subject: Subject,
    /// The value's comparison form ([`signature`]).
    pub value: String,
}

fn attribute_words(text: &str) -> Vec<String> {
    signature(text).split_whitespace().map(str::to_owned).collect()
}

/// The fact an item's content states, when it is in the form `The <owner>'s <attribute> is
/// <value>.` (owner `user`, `team` or `project`).
pub(crate) fn fact(content: &str) -> Option<Fact> {
    let lowered = content.replace('’', "'");
    let rest = lowered.strip_prefix("The ")?;
    let (owner, rest) = rest.split_once("'s ")?;
    let owner = match owner {
        "user" => "user",
        "team" | "project" => "team",
        _ => return None,
    };
    let (attribute, value) = rest.split_once(" is ").or_else(|| rest.split_once(" are "))?;
    // An attribute is a plain noun phrase; "The user's instruction: TODO is not acceptable" is a
    // rule, not a setting with a value.
    if !attribute.chars().all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_')) {
        return None;
    }
    let attribute = attribute_words(attribute);
    let value = signature(value.trim_end_matches('.'));
    if attribute.is_empty() || attribute.len() > FACT_ATTRIBUTE_WORDS_MAX || value.is_empty() {
        return None;
    }
    Some(Fact { subject: Subject { owner, attribute }, value })
}

struct Patterns {
    /// "our staging database is now stage-db-03", "my editor changed to helix".
    stated: Regex,
    /// "we moved the staging database to stage-db-03", "we moved staging, it is now stage-db-03".
    changed: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static PATTERNS: OnceLock<Option<Patterns>> = OnceLock::new();
    const OPENER: &str = r"(?:(?:update|fyi|heads[- ]up|correction|note|btw|ok|okay|so|for\s+the\s+record)[:,]?\s+)?(?:(?:from\s+now\s+on|going\s+forward|as\s+of\s+today)[:,]?\s+)?";
    const ATTRIBUTE: &str = r"(?P<attribute>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,3}?)";
    const VALUE: &str = r"(?:now\s+|back\s+to\s+|still\s+)?(?P<value>\S.*)";
    PATTERNS
        .get_or_init(|| {
            let stated = format!(
                r"(?i)^{OPENER}(?P<owner>our|my|the)\s+{ATTRIBUTE}\s+(?:is|has\s+(?:moved|changed|switched)\s+to|(?:changed|moved|switched)\s+to)\s+{VALUE}$"
            );
            let changed = format!(
                r"(?i)^{OPENER}(?P<who>we|i)(?:\s+have|'ve)?\s+(?:moved|switched|changed|migrated|updated)\s+(?P<owner>our|my|the)?\s*{ATTRIBUTE}(?:\s+to\s+|\s*[,;:]\s*(?:it|that)(?:\s+is|'s)\s+){VALUE}$"
            );
            Some(Patterns { stated: Regex::new(&stated).ok()?, changed: Regex::new(&changed).ok()? })
        })
        .as_ref()
}

/// Single words that say how a thing is, not what it is: "the staging database is down".
const STATES: &[&str] = &[
    "down",
    "up",
    "broken",
    "slow",
    "fast",
    "fine",
    "ok",
    "okay",
    "failing",
    "flaky",
    "empty",
    "full",
    "gone",
    "ready",
    "done",
    "busy",
    "offline",
    "online",
    "unavailable",
    "available",
    "stale",
    "wrong",
    "right",
    "correct",
    "important",
    "great",
    "bad",
    "good",
    "better",
    "worse",
    "huge",
    "small",
    "big",
    "large",
    "weird",
    "annoying",
    "red",
    "green",
    "missing",
    "dead",
    "live",
    "new",
    "old",
    "fixed",
];

/// Words that open a value which is a judgement or a state, not a value.
const NOT_VALUES: &[&str] = &[
    "not", "no", "never", "a", "an", "very", "really", "too", "so", "quite", "still", "being", "getting",
    "probably", "maybe", "perhaps", "kind", "sort", "about", "where", "what", "why", "how", "in", "on", "at",
    "under", "over", "from", "of", "for", "with", "without", "like", "the", "that", "this", "it", "there",
];

/// Words that end an attribute phrase's claim to be a setting ("the test is failing").
const NOT_ATTRIBUTES: &[&str] = &[
    "it", "this", "that", "thing", "problem", "issue", "bug", "error", "idea", "plan", "point", "question",
    "answer", "code", "test", "tests", "build", "output", "result", "change", "fix", "task", "goal",
    "reason",
];

/// The value of a spoken fact, without what only places it in time ("now", "again").
fn value_of(raw: &str) -> Option<String> {
    // What follows a comma is an aside ("stage-db-02, in case you need it"), unless it negates
    // ("append-only, never an UPDATE"): then it is part of what is said, and no plain value.
    let (raw, aside) = raw.split_once(", ").unwrap_or((raw, ""));
    let negates = aside.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'').to_lowercase();
        matches!(word.as_str(), "never" | "not" | "no" | "nor" | "don't" | "doesn't" | "isn't")
    });
    if negates {
        return None;
    }
    let mut value = raw.trim().trim_end_matches(['.', '!', ';', ',']).trim().to_owned();
    for tail in
        [" from now on", " these days", " for now", " today", " now", " again", " instead", " going forward"]
    {
        if value.to_lowercase().ends_with(tail) {
            value.truncate(value.len() - tail.len());
        }
    }
    let value = value.trim().trim_end_matches([',', ';']).trim().to_owned();
    let words: Vec<&str> = value.split_whitespace().collect();
    let first = words.first()?.to_lowercase();
    // A lowercase participle or adverb ("deprecated", "migrating", "temporarily") says how the
    // thing is; a name ("Zed") or a short word ("bed") is no such form.
    let participle = words[0].chars().all(|c| c.is_lowercase())
        && first.chars().count() >= 5
        && (first.ends_with("ing") || first.ends_with("ed") || first.ends_with("ly"));
    let single_state = words.len() == 1 && (STATES.contains(&first.as_str()) || participle);
    let clause = words.iter().any(|w| {
        matches!(w.to_lowercase().as_str(), "was" | "were" | "but" | "because" | "if" | "when" | "which")
    });
    if words.len() > FACT_VALUE_WORDS_MAX || NOT_VALUES.contains(&first.as_str()) || single_state || clause {
        return None;
    }
    Some(value)
}

/// The content a user's sentence states as a fact, in the form [`fact`] reads: "Our staging
/// database is stage-db-02" gives "The team's staging database is stage-db-02.", "we moved the
/// staging database, it is now stage-db-03" gives "The team's staging database is stage-db-03.".
pub(crate) fn spoken(sentence: &str) -> Option<String> {
    let patterns = patterns()?;
    let sentence = sentence.trim().trim_end_matches(['.', '!']);
    let captures = patterns.stated.captures(sentence).or_else(|| patterns.changed.captures(sentence))?;
    let owner_word = captures.name("owner").map_or("", |m| m.as_str()).to_lowercase();
    let who = captures.name("who").map_or("", |m| m.as_str()).to_lowercase();
    let owner = if owner_word == "my" || (owner_word.is_empty() && who == "i") { "user" } else { "team" };
    let attribute = captures.name("attribute")?.as_str().to_lowercase();
    // "we moved the staging database back, it is stage-db-02 again"
    let attribute = attribute.split_whitespace().collect::<Vec<_>>().join(" ");
    let attribute = attribute.strip_suffix(" back").unwrap_or(&attribute).to_owned();
    let last = attribute.split_whitespace().last()?;
    if NOT_ATTRIBUTES.contains(&last)
        || attribute.split_whitespace().any(|w| matches!(w, "is" | "was" | "are"))
    {
        return None;
    }
    let value = value_of(captures.name("value")?.as_str())?;
    Some(format!("The {owner}'s {attribute} is {value}."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spoken_facts_in_their_phrasings() {
        let check = |said: &str, expected: Option<&str>| {
            assert_eq!(spoken(said).as_deref(), expected, "{said:?}");
        };
        let db = |v: &str| format!("The team's staging database is {v}.");
        check("Our staging database is stage-db-02.", Some(&db("stage-db-02")));
        // A negating aside is part of what is said: dropping it would state something else.
        check("the entries table is append-only, never an UPDATE", None);
        check("The entries table is append-only: corrections are new reversal rows, never an UPDATE.", None);
        check("we moved the staging database, it is now stage-db-03", Some(&db("stage-db-03")));
        check("We switched our staging database to stage-db-04", Some(&db("stage-db-04")));
        check("the staging database is back to stage-db-02 again", Some(&db("stage-db-02")));
        check("Update: the staging database has moved to db-9.internal", Some(&db("db-9.internal")));
        check("From now on, my editor is Helix", Some("The user's editor is Helix."));
        check("we moved staging, it's now stage-db-03", Some("The team's staging is stage-db-03."));
        check("the test command is cargo nextest run", Some("The team's test command is cargo nextest run."));
        check("the staging database is down", None);
        check("the staging database is not stage-db-02", None);
        check("back when the staging database was stage-db-01 deploys were slow", None);
        check("someone suggested stage-db-05 for the staging database", None);
        check("the test is failing", None);
        check("the staging database is deprecated", None);
        check("FYI, my editor is Zed.", Some("The user's editor is Zed."));
        check("our staging database is stage-db-02 but it was stage-db-01 before", None);
    }

    #[test]
    fn facts_read_back_from_content_and_compare_by_subject() {
        let a = fact("The team's staging database is stage-db-02.").unwrap();
        let b = fact("The team's staging database is stage-db-03.").unwrap();
        let c = fact("The team's staging is stage-db-03.").unwrap();
        let d = fact("The user's staging database is stage-db-03.").unwrap();
        let e = fact("The team's test command is cargo test.").unwrap();
        assert!(a.subject.same_as(&b.subject) && a.value != b.value);
        assert!(a.subject.same_as(&c.subject) && c.subject.same_as(&a.subject));
        assert!(!a.subject.same_as(&d.subject) && !a.subject.same_as(&e.subject));
        assert_eq!(fact("The user prefers tabs over spaces."), None);
        assert_eq!(fact("The user's instruction: TODO is not acceptable."), None);
    }
}
