//! Deterministic embedded model seams: a rule-based proposer that finds explicit requests to
//! remember, stated preferences and facts users state about themselves or their project, and
//! a canonicalizer that accepts every candidate as proposed. They answer in the same strict
//! JSON a model would, so everything runs offline and is checked the same way.

use std::sync::OnceLock;

use mnemo_core::ExtractionTrigger;
use regex::Regex;
use serde_json::{Value, json};

use crate::consolidate::{Relation, relation};
use crate::extract::seams::{
    BoxFuture, CanonicalizePrompt, Canonicalizer, EvidenceView, HeldItem, MemoryProposer, ModelError,
    ProposalPrompt,
};
use crate::facts;
use crate::scope::holds_everywhere;
use crate::terms::is_stop_word;

/// Most items the embedded proposer proposes in each list.
const EMBEDDED_ITEMS_MAX: usize = 10;

struct Patterns {
    request: Regex,
    reference: Regex,
    statement: Regex,
    instruction: Regex,
    project: Regex,
    correction: Regex,
    one_off: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static PATTERNS: OnceLock<Option<Patterns>> = OnceLock::new();
    PATTERNS
        .get_or_init(|| {
            Some(Patterns {
                request: Regex::new(
                    r"(?i)^(?:please\s+)?(?:remember|note|keep in mind|don't forget|do not forget)(?:\s+that)?[\s,:]+(.+)$",
                )
                .ok()?,
                reference: Regex::new(
                    r"(?i)^(?:(?:what|the thing|everything)\s+(?:I|we)\s+(?:said|told you|mentioned|wrote)\s+(?:about|regarding|on)\s+(.+)|this|that|it)$",
                )
                .ok()?,
                statement: Regex::new(
                    r"(?i)^(?:I\s+(?:prefer|like|love|hate|dislike|always|never|usually|use|want|work|live|maintain|own|lead|do\s+not|don't)\b|I'm\s+(?:using|an?)\s|I\s+am\s+(?:using|an?)\s|my\s+name\s+is\s|call\s+me\s|we\s+(?:use|always|never|prefer|deploy|target|run|deny|follow|require|avoid|ship|release|store|keep|build|test|write|host|pin|squash|rebase|don't|do\s+not)\b|our\s+(?:project|team|repo|codebase|stack|product)\s)",
                )
                .ok()?,
                // Standing instructions: imperatives that hold beyond the turn (`never`, `always`,
                // `don't … until`, `from now on`), and constraints (`must`, `is crucial`, `is not
                // acceptable`). A task for this turn ("create hello.py") carries none of them.
                instruction: Regex::new(concat!(
                    r"(?i)^(?:(?:please\s+)?(?:always|never)\s+\w|(?:please\s+)?(?:don't|do\s+not)\s+\w+(?:\s+\S+){0,8}\s+(?:until|unless|before|without)\s",
                    r"|(?:from\s+now\s+on|going\s+forward|in\s+this\s+(?:project|repo|codebase))\b)",
                    r"|\b(?:must(?:\s+not)?|mustn't|is\s+(?:crucial|critical|essential|mandatory|a\s+must)|are\s+(?:crucial|critical|essential|mandatory)",
                    r"|(?:is|are)\s+not\s+(?:acceptable|allowed|ok|okay)|(?:isn't|aren't)\s+(?:acceptable|allowed))\b",
                    // "Design first, no code yet", "no unsafe code, only safe Rust".
                    r"|\bno\s+\w+(?:\s+\w+)?\s+yet\b|^no\s+[\w\s'-]+,\s+only\s+\w",
                    // "before you push, run clippy": an order of steps that holds every time.
                    r"|^(?:please\s+)?(?:before|after|whenever)\s+(?:you|we)\s+\w+",
                    // "keep explanations short", "keep it simple".
                    r"|^(?:please\s+)?keep\s+\S+(?:\s+\S+){0,3}\s+(?:short|simple|small|minimal|brief|concise|lean|focused)\b",
                    // "Every new component needs a story", "every table gets soft delete".
                    r"|^(?:every|each|all)\s+(?:\S+\s+){0,4}(?:needs?|gets?|has\s+to|have\s+to|should|requires?)\s",
                    // "Coordinates are always stored as WGS84", "the endpoint is internal only, never expose it".
                    r"|\b(?:is|are|gets?|stays?)\s+(?:always|never)\s+\w|,\s+(?:never|always|don't|do\s+not)\s+\w",
                    r"|\b(?:only|always|never)\b.*\bin\s+this\s+(?:project|repo|repository|codebase)\b",
                ))
                .ok()?,
                project: Regex::new(
                    concat!(
                        r"(?i)^(?:the|this|our)\s+(?:[\w-]+\s+)?(?:project|repo|repository|codebase|app|service|api|cli|backend|frontend)\s+(?:uses|is\s+(?:written|built|deployed)|runs\s+on|targets|depends\s+on|lives\s+in)\s",
                        // "our staging database is stage-db-02", "our MSRV is 1.75".
                        r"|^our\s+(?:[\w-]+\s+){0,3}(?:is|are)\s+\S",
                    ),
                )
                .ok()?,
                // A reply about the step at hand: choosing or rejecting one of the agent's options,
                // a fragment that goes on about "the issue". It holds for this turn, not after.
                one_off: Regex::new(concat!(
                    r"(?i)\b(?:option|approach|idea|proposal|plan|suggestion|solution|split|version|variant)\s*(?:\d+|[a-d]\b)?\s*(?:is|are|isn't|aren't|was)\s+(?:not\s+)?(?:acceptable|accepable|allowed|ok|okay|fine|good|wrong|bad)",
                    r"|\b(?:option|choice)\s+(?:\d+|[a-d])\b|\b(?:the\s+)?(?:first|second|third|last|other|previous)\s+(?:one|option|approach|idea|file)\b",
                    r"|^(?:that|this|it)(?:'s|\s+is)?\s+(?:not\s+)?(?:acceptable|ok|okay|fine|what)\b|^not\s+(?:acceptable|that|like\s+that)\b",
                    r"|^(?:more\s+)?context\s*:",
                ))
                .ok()?,
                correction: Regex::new(
                    r"(?i)^(?:(?:no|actually|wrong)[,:;]?\s+)?(?:use|prefer|it's|it\s+is|that's|that\s+is)\s+\S+(?:\s+\S+){0,5}\s+(?:instead\s+of|rather\s+than|not)\s+\S",
                )
                .ok()?,
            })
        })
        .as_ref()
}

const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "that",
    "this",
    "with",
    "from",
    "over",
    "into",
    "about",
    "when",
    "then",
    "than",
    "they",
    "them",
    "their",
    "there",
    "what",
    "your",
    "yours",
    "have",
    "been",
    "were",
    "will",
    "would",
    "should",
    "could",
    "always",
    "never",
    "our",
    "for",
    "not",
    "all",
    "any",
    "its",
    "are",
    "was",
    "you",
    "prefer",
    "prefers",
    "like",
    "likes",
    "love",
    "loves",
    "hate",
    "hates",
    "dislike",
    "dislikes",
    "uses",
    "using",
    "work",
    "works",
    "live",
    "lives",
    "want",
    "wants",
    "user",
    "call",
    "project",
    "please",
    "must",
    "don't",
    "does",
    "until",
    "unless",
    "before",
    "is",
    "isn't",
    "crucial",
    "critical",
    "essential",
    "acceptable",
    "instead",
    "rather",
    "maintain",
    "maintains",
];

/// Most words a sentence may have to be taken as a statement; longer ones are task descriptions,
/// pasted text or explanations, where a rule-based reading is more often wrong than right.
const STATEMENT_WORDS_MAX: usize = 40;

/// Sentences of `text`, each a verbatim substring, trimmed. A sentence ends at a line break (a
/// `\n`, or a space at one of `line_breaks`, byte offsets where normalization joined two lines),
/// or at `.`, `!`, `?` or `;` followed by whitespace or the end: a full stop inside a word is part
/// of a name (`fly.io`, `Next.js`, `package.json`, `v1.2`), and cutting there made "we deploy with
/// fly.io" the fact "The team deploys with fly". Joined lines made a pasted log and the guess
/// after it ("it must be the database") one instruction, and lost "always run jest with
/// --runInBand" written on a line of its own after the task.
fn sentences<'t>(text: &'t str, line_breaks: &[usize]) -> Vec<&'t str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next_is_space = chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        let line_end = c == '\n' || (c == ' ' && line_breaks.binary_search(&at).is_ok());
        if line_end || (matches!(c, '.' | '!' | '?' | ';') && next_is_space) {
            out.push(&text[start..at + c.len_utf8()]);
            start = at + c.len_utf8();
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .filter(|s| !s.trim_end().ends_with('?'))
        .map(|s| s.trim().trim_end_matches(['.', '!', ';']).trim())
        .filter(|s| s.chars().count() >= 4)
        .collect()
}

/// Whether a sentence reads as prose a person wrote, not markup, code or a pasted log.
fn is_prose(sentence: &str) -> bool {
    let words = sentence.split_whitespace().count();
    let symbols =
        sentence.chars().filter(|c| matches!(c, '{' | '}' | '<' | '>' | '=' | '|' | '`' | '$')).count();
    (2..=STATEMENT_WORDS_MAX).contains(&words)
        && symbols <= 2
        && !sentence.starts_with("Caveat:")
        && !sentence.contains("<command-")
        && !sentence.contains("<system-reminder")
}

/// The parts of a sentence read one by one: its clauses, or the whole sentence when it states a
/// fact that no clause states alone ("we moved the staging database, it is now stage-db-03").
fn parts_of(sentence: &str) -> Vec<&str> {
    let parts = clauses(sentence);
    if parts.len() > 1
        && facts::spoken(sentence).is_some()
        && parts.iter().all(|p| facts::spoken(p).is_none())
    {
        return vec![sentence];
    }
    parts
}

/// Clauses of a sentence that each state one thing: "My name is Ada and I maintain the storage
/// layer" is two statements. Each clause is a verbatim substring of the sentence.
fn clauses(sentence: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = sentence;
    // A standing rule after a comma is a clause of its own: "we deploy with fly.io, never run
    // migrations by hand" is a fact and an instruction.
    let joins = [
        ", and I ",
        " and I ",
        ", and my ",
        " and my ",
        ", but I ",
        " but I ",
        "; ",
        ", never ",
        ", always ",
        ", don't ",
        ", do not ",
    ];
    loop {
        let next = joins
            .iter()
            .filter_map(|j| rest.find(j).map(|at| (at, j.len())))
            .filter(|(at, len)| {
                !is_contrast(&rest[*at..*at + len]) || contrast_stands_alone(&rest[at + len..])
            })
            .min_by_key(|(at, _)| *at);
        match next {
            Some((at, len)) => {
                out.push(rest[..at].trim());
                // Keep the pronoun that opens the next clause.
                let joined = &rest[at..at + len];
                let keep = joined.trim_start_matches([',', ';']).trim_start();
                let keep = keep.strip_prefix("and ").or_else(|| keep.strip_prefix("but ")).unwrap_or(keep);
                rest = &rest[at + len - keep.len()..];
            }
            None => {
                out.push(rest.trim());
                return out.into_iter().map(without_lead).filter(|c| c.chars().count() >= 4).collect();
            }
        }
    }
}

/// Words a rule after ", never" or ", always" needs beyond the adverb to be a clause of its own:
/// "always uses pnpm, never npm" contrasts one word with the clause before it and is one statement.
const CONTRAST_CLAUSE_WORDS_MIN: usize = 2;

fn is_contrast(join: &str) -> bool {
    matches!(join, ", never " | ", always " | ", don't " | ", do not ")
}

/// Whether what follows a contrast join, up to the next comma or semicolon, says enough to stand as
/// a rule of its own: a verb and more ("never run migrations by hand"), not a noun phrase that
/// contrasts with the clause before ("never the builder"), nor a rule about what the clause before
/// names ("never expose it publicly"), which says nothing without it.
fn contrast_stands_alone(after: &str) -> bool {
    let clause = after.split([',', ';']).next().unwrap_or_default();
    let words: Vec<String> = clause.split_whitespace().map(str::to_lowercase).collect();
    let determiner =
        words.first().is_some_and(|w| matches!(w.as_str(), "the" | "a" | "an" | "any" | "this" | "that"));
    let refers_back =
        words.iter().any(|w| matches!(w.trim_end_matches(['.', '!']), "it" | "them" | "there" | "that"));
    words.len() >= CONTRAST_CLAUSE_WORDS_MIN && !determiner && !refers_back
}

/// A clause without the filler that opens it ("fyi", "also", "and"): the rest is what holds.
fn without_lead(clause: &str) -> &str {
    let mut rest = clause;
    loop {
        let lower = rest.to_lowercase();
        let lead = ["fyi", "btw", "also", "and", "ps", "oh", "note"]
            .iter()
            .find(|l| lower.starts_with(**l) && lower[l.len()..].starts_with([',', ':', ' ']));
        match lead {
            Some(l) => rest = rest[l.len()..].trim_start_matches([',', ':', ' ']),
            None => return rest,
        }
    }
}

fn conjugate(verb: &str) -> String {
    match verb.to_lowercase().as_str() {
        "have" => "has".to_owned(),
        "do" => "does".to_owned(),
        "am" | "'m" => "is".to_owned(),
        "was" | "can" | "will" | "would" | "should" | "could" | "might" | "must" | "may" => verb.to_owned(),
        "always" | "never" | "really" | "usually" | "also" | "often" | "only" => verb.to_owned(),
        lower
            if lower.ends_with("ss")
                || lower.ends_with("sh")
                || lower.ends_with("ch")
                || lower.ends_with('x') =>
        {
            format!("{verb}es")
        }
        lower if lower.ends_with('s') => verb.to_owned(),
        lower
            if lower.ends_with('y')
                && !lower.ends_with("ay")
                && !lower.ends_with("ey")
                && !lower.ends_with("oy") =>
        {
            format!("{}ies", &verb[..verb.len() - 1])
        }
        _ => format!("{verb}s"),
    }
}

/// The other persons of a clause in the third person: the user's own words (`my`, `me`, `I`)
/// become `their`, `them`, `they`; the assistant addressed (`you`, `your`) becomes `the
/// assistant`; the team (`we`, `our`, `us`) becomes `the team`.
fn third_person_rest(words: &[&str]) -> String {
    let mut out = Vec::with_capacity(words.len());
    let mut conjugate_next = false;
    for word in words {
        let core = word.trim_end_matches([',', ':', ')']);
        let tail = &word[core.len()..];
        let lower = core.to_lowercase().replace('’', "'");
        if conjugate_next {
            if matches!(
                lower.as_str(),
                "always" | "never" | "also" | "usually" | "really" | "often" | "only" | "all"
            ) {
                out.push((*word).to_owned());
                continue;
            }
            conjugate_next = false;
            if core.chars().all(|c| c.is_ascii_lowercase()) && !core.is_empty() {
                out.push(format!("{}{tail}", conjugate(core)));
                continue;
            }
        }
        let replaced = match lower.as_str() {
            "my" => "their",
            "mine" => "theirs",
            "me" => "them",
            "myself" => "themselves",
            "i" => "they",
            "i'm" => "they are",
            "i've" => "they have",
            "i'd" => "they would",
            "i'll" => "they will",
            "you" => "the assistant",
            "your" => "the assistant's",
            "we" => {
                conjugate_next = true;
                "the team"
            }
            "we're" => "the team is",
            "we've" => "the team has",
            "our" => "the team's",
            "us" => "the team",
            _ => {
                out.push((*word).to_owned());
                continue;
            }
        };
        out.push(format!("{replaced}{tail}"));
    }
    out.join(" ")
}

/// A clause in the third person with its first letter capitalized.
fn reported(clause: &str) -> String {
    let words: Vec<&str> = clause.split_whitespace().collect();
    let text = third_person_rest(&words);
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().collect::<String>() + chars.as_str()).unwrap_or_default()
}

/// A third-person statement of a first-person clause, in the present tense as the user stated
/// it ("I prefer tabs" -> "The user prefers tabs", "My name is Ada" -> "The user's name is Ada").
fn statement(clause: &str) -> String {
    let words: Vec<&str> = clause.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase().replace('’', "'")).collect();
    let word = |i: usize| lower.get(i).map_or("", String::as_str);
    let rest = |from: usize| third_person_rest(words.get(from..).unwrap_or_default());
    let out = match word(0) {
        "i'm" => format!("The user is {}", rest(1)),
        "i've" => format!("The user has {}", rest(1)),
        "i'd" => format!("The user would {}", rest(1)),
        "i" if word(1) == "am" => format!("The user is {}", rest(2)),
        "i" if word(1) == "do" && word(2) == "not" => format!("The user does not {}", rest(3)),
        "i" if word(1) == "don't" => format!("The user does not {}", rest(2)),
        "i" if matches!(word(1), "always" | "never" | "really" | "usually" | "also" | "often" | "only") => {
            let adverb = words[1].to_lowercase();
            match words.get(2) {
                Some(verb) => format!("The user {adverb} {} {}", conjugate(verb), rest(3)),
                None => format!("The user {adverb}"),
            }
        }
        "i" if words.len() > 1 => format!("The user {} {}", conjugate(words[1]), rest(2)),
        "my" => format!("The user's {}", rest(1)),
        "call" if word(1) == "me" => format!("The user wants to be called {}", rest(2)),
        "we" if matches!(word(1), "always" | "never" | "really" | "usually" | "also" | "often" | "only") => {
            let adverb = words[1].to_lowercase();
            match words.get(2) {
                Some(verb) => format!("The team {adverb} {} {}", conjugate(verb), rest(3)),
                None => format!("The team {adverb}"),
            }
        }
        "we" if words.len() > 1 => format!("The team {} {}", conjugate(words[1]), rest(2)),
        "our" => format!("The team's {}", rest(1)),
        _ => return reported(clause),
    };
    out.trim().to_owned()
}

/// A standing instruction in the user's words, persons rewritten: "The user's instruction:
/// don't commit until the final step".
fn instruction(clause: &str) -> String {
    let words: Vec<&str> = clause.split_whitespace().collect();
    let mut text = third_person_rest(&words);
    // "Never push" reads "never push" after the colon; "TODO" and "CI" keep their capitals.
    let acronym = text.chars().nth(1).is_some_and(char::is_uppercase);
    if let Some(first) = text.get(..1).filter(|_| !acronym) {
        text = format!("{}{}", first.to_lowercase(), &text[1..]);
    }
    format!("The user's instruction: {text}")
}

fn keys(clause: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let significant: Vec<String> = clause
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.' || c == '\''))
        .map(|w| w.trim_matches(['.', '\'']).to_owned())
        .filter(|w| {
            let lower = w.to_lowercase();
            w.chars().count() >= 3 && !STOPWORDS.contains(&lower.as_str()) && !is_stop_word(&lower)
        })
        .filter(|w| !matches!(w.to_lowercase().as_str(), "i'm" | "am" | "use" | "don't"))
        .collect();
    if let Some(phrase) = significant.get(..significant.len().min(3)).filter(|p| !p.is_empty()) {
        out.push(json!({"key": phrase.join(" "), "type": "exact"}));
    }
    for word in significant.iter().take(4) {
        let is_entity = word.chars().next().is_some_and(char::is_uppercase);
        out.push(json!({"key": word, "type": if is_entity { "entity" } else { "concept" }}));
    }
    if out.is_empty() {
        out.push(json!({"key": clause.split_whitespace().take(3).collect::<Vec<_>>().join(" "), "type": "concept"}));
    }
    out
}

/// What a clause is about and where it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// A first-person statement (identity, preference, the user's work).
    Statement,
    /// A standing instruction or constraint.
    Instruction,
    /// A fact about the project.
    Project,
    /// A correction of the assistant ("use X instead of Y").
    Correction,
    /// A fact with one current value ("our staging database is stage-db-02"), written in the
    /// form the writer compares values by (`crate::facts`).
    Fact,
    /// Something the user asked to remember that is none of the above ("the release branch must
    /// never use the cache"): reported as said, persons rewritten.
    Reported,
}

fn reading(clause: &str, patterns: &Patterns) -> Option<Reading> {
    if !is_prose(clause) || patterns.one_off.is_match(clause) || is_task(clause) {
        return None;
    }
    if patterns.statement.is_match(clause) {
        return Some(Reading::Statement);
    }
    // A fact's value is read first: "our staging database is stage-db-03 again" states the value
    // stage-db-03, which a newer statement of the same fact supersedes.
    if facts::spoken(clause).is_some() {
        return Some(Reading::Fact);
    }
    if patterns.project.is_match(clause) {
        return Some(Reading::Project);
    }
    if patterns.correction.is_match(clause) {
        return Some(Reading::Correction);
    }
    // A constraint on a bare pronoun ("it must be the cache") is a guess about the present
    // state, not an instruction.
    let lower = clause.to_lowercase();
    let guess = ["it ", "this ", "that ", "there ", "which "].iter().any(|p| lower.starts_with(p));
    let standing = patterns.instruction.is_match(clause) || is_prohibition(clause);
    (standing && !guess).then_some(Reading::Instruction)
}

/// Verbs that, before a bare pronoun, make a prohibition about the thing at hand ("don't do
/// that", "don't touch it"): a reply to this turn, not a rule.
const AT_HAND_VERBS: &[&str] = &[
    "do", "change", "touch", "use", "remove", "delete", "revert", "add", "run", "move", "rename", "worry",
    "mind", "bother", "forget", "push", "commit", "merge", "break", "fix",
];

/// A prohibition that holds beyond the turn: "don't create separate documents", "Don't release on
/// Fridays", "do not overcomplicate the API" — `don't` or `do not`, a verb and what it is about,
/// other than a bare pronoun after a verb of the moment ("don't do that").
fn is_prohibition(clause: &str) -> bool {
    let lower = clause.to_lowercase().replace('’', "'");
    let lower = lower.strip_prefix("please ").unwrap_or(&lower);
    let rest = lower.strip_prefix("don't ").or_else(|| lower.strip_prefix("do not "));
    let Some(rest) = rest else { return false };
    let words: Vec<&str> = rest.split_whitespace().collect();
    let pronoun = |w: &str| {
        matches!(w.trim_end_matches([',', '.']), "it" | "that" | "this" | "them" | "those" | "these")
    };
    match words.as_slice() {
        [] | [_] => false,
        [verb, object, ..] if pronoun(object) => !AT_HAND_VERBS.contains(verb),
        _ => true,
    }
}

/// A request for the task at hand in the first person ("I want to add pagination", "I need you
/// to fix the build", "let's refactor the parser"): what the user wants done now, not what holds.
fn is_task(clause: &str) -> bool {
    let lower = clause.to_lowercase().replace('’', "'");
    ["i want to ", "i'd like to ", "i would like to ", "i need to ", "i need you to ", "i want you to fix"]
        .iter()
        .any(|p| lower.starts_with(p))
}

/// What a clause is about, and where it holds by the one rule of [`holds_everywhere`].
fn kind_and_scope(clause: &str, reading: Reading) -> (&'static str, &'static str) {
    let scope = if holds_everywhere(clause) { "global" } else { "workspace" };
    (kind(clause, reading), scope)
}

fn kind(clause: &str, reading: Reading) -> &'static str {
    match reading {
        Reading::Instruction => return "preference",
        Reading::Project | Reading::Correction => return "context",
        Reading::Fact => {
            let user = facts::spoken(clause).is_some_and(|c| c.starts_with("The user's"));
            return if user { "preference" } else { "context" };
        }
        Reading::Reported => {
            let instruction = patterns().is_some_and(|p| p.instruction.is_match(clause));
            return if instruction || holds_everywhere(clause) { "preference" } else { "context" };
        }
        Reading::Statement => {}
    }
    let lower = clause.to_lowercase();
    let has = |needle: &str| lower.contains(needle);
    let role =
        ["i maintain", "i own", "i lead", "i work as", "i work on"].iter().any(|p| lower.starts_with(p));
    let team = lower.starts_with("we ") || lower.starts_with("our ");
    let rule = ["always", "never", "prefer", "don't", "do not"].iter().any(|w| has(w));
    if role || has("my name") || has("call me") || has("i am a") || has("i'm a") || has("i live") {
        "identity"
    } else if team {
        if rule { "preference" } else { "context" }
    } else if rule || ["like", "love", "hate", "want"].iter().any(|w| has(w)) {
        "preference"
    } else {
        "context"
    }
}

fn content(clause: &str, reading: Reading) -> String {
    let text = match reading {
        Reading::Statement => statement(clause),
        // "Our project uses fjall" -> "The team's project uses fjall"; "The project …" stays.
        Reading::Project | Reading::Reported => reported(clause),
        Reading::Instruction | Reading::Correction => instruction(clause),
        Reading::Fact => facts::spoken(clause).unwrap_or_else(|| reported(clause)),
    };
    let text = text.trim_end_matches(['.', ',', ';', ':']).to_owned();
    format!("{text}.")
}

/// A correction without the rebuttal that opens it ("no, use X instead of Y" -> "use X instead
/// of Y"): the rebuttal is about the assistant's last answer, not part of what holds, and its
/// "no" would read as a negation of the statement.
fn without_opener(clause: &str) -> &str {
    let lower = clause.to_lowercase();
    let opener = ["no", "actually", "wrong"]
        .iter()
        .find(|o| lower.starts_with(**o) && lower[o.len()..].starts_with([',', ':', ';', ' ']))
        .map_or(0, |o| o.len());
    clause[opener..].trim_start_matches([',', ':', ';', ' '])
}

fn item(clause: &str, reading: Reading, evidence: &EvidenceView) -> Value {
    let clause = if reading == Reading::Correction { without_opener(clause) } else { clause };
    let (kind, scope) = kind_and_scope(clause, reading);
    json!({
        "content": content(clause, reading),
        "kind": kind,
        "statementType": "fact",
        "temporalType": "undated",
        "eventStartedAt": null,
        "eventEndedAt": null,
        "scope": scope,
        "keys": keys(clause),
        "evidence": [{"sourceRef": evidence.source_ref, "quote": clause}],
    })
}

fn answer(
    status: &str,
    requested_status: &str,
    requested: Vec<Value>,
    incidental: Vec<Value>,
    search: Option<Value>,
) -> String {
    let mut out = json!({
        "coverageStatus": "processed",
        "status": status,
        "requestedStatus": requested_status,
        "requestedItems": requested,
        "incidentalItems": incidental,
    });
    if let (Some(search), Some(map)) = (search, out.as_object_mut()) {
        map.insert("search".to_owned(), search);
    }
    out.to_string()
}

/// Adds a clause the user asked to remember, reported as said unless it reads as a statement, a
/// project fact or a correction.
fn push_requested(requested: &mut Vec<Value>, part: &str, read: Option<Reading>, evidence: &EvidenceView) {
    if requested.len() < EMBEDDED_ITEMS_MAX {
        let reading = match read {
            Some(Reading::Instruction) | None => Reading::Reported,
            Some(other) => other,
        };
        requested.push(item(part, reading, evidence));
    }
}

/// The rule-based proposer.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbeddedProposer;

impl EmbeddedProposer {
    fn localized(prompt: &ProposalPrompt, terms: &[String]) -> String {
        let mut requested = Vec::new();
        for evidence in &prompt.evidence {
            for sentence in sentences(&evidence.text, &evidence.line_breaks) {
                let lower = sentence.to_lowercase();
                let request = patterns().is_some_and(|p| p.request.is_match(sentence));
                if !request
                    && terms.iter().any(|t| lower.contains(&t.to_lowercase()))
                    && requested.len() < EMBEDDED_ITEMS_MAX
                {
                    let reading = if patterns().is_some_and(|p| p.statement.is_match(sentence)) {
                        Reading::Statement
                    } else {
                        Reading::Reported
                    };
                    requested.push(item(sentence, reading, evidence));
                }
            }
        }
        if requested.is_empty() {
            return answer("cannot_resolve", "unresolved", Vec::new(), Vec::new(), None);
        }
        answer("complete", "resolved", requested, Vec::new(), None)
    }

    fn first_pass(prompt: &ProposalPrompt, patterns: &Patterns) -> String {
        let remember = prompt.trigger == ExtractionTrigger::Remember;
        let (mut requested, mut incidental, mut search_terms) = (Vec::new(), Vec::new(), Vec::new());
        for evidence in &prompt.evidence {
            let asking = remember && evidence.requested_turn;
            // A request runs on through the sentences after it that state something to keep
            // ("Remember: never force-push to main; always open a PR"): they were asked for too,
            // and each is reported. The first sentence that states nothing ends it.
            let mut in_request = false;
            for sentence in sentences(&evidence.text, &evidence.line_breaks) {
                let parts = parts_of(sentence);
                if let Some(clause) = patterns.request.captures(sentence).and_then(|c| c.get(1)) {
                    let clause = clause.as_str().trim();
                    in_request = false;
                    if !asking {
                        continue;
                    }
                    if let Some(reference) = patterns.reference.captures(clause) {
                        let about = reference.get(1).map_or("", |m| m.as_str());
                        search_terms.extend(
                            about
                                .split_whitespace()
                                .filter(|w| w.chars().count() >= 3)
                                .map(str::to_lowercase),
                        );
                    } else if clause.chars().count() >= 4 {
                        in_request = true;
                        for part in parts_of(clause) {
                            push_requested(&mut requested, part, reading(part, patterns), evidence);
                        }
                    }
                } else if in_request && parts.iter().any(|part| reading(part, patterns).is_some()) {
                    for part in parts {
                        if let Some(read) = reading(part, patterns) {
                            push_requested(&mut requested, part, Some(read), evidence);
                        }
                    }
                } else {
                    in_request = false;
                    for part in parts {
                        if let Some(reading) = reading(part, patterns)
                            && incidental.len() < EMBEDDED_ITEMS_MAX
                        {
                            incidental.push(item(part, reading, evidence));
                        }
                    }
                }
            }
        }
        if !requested.is_empty() {
            return answer("complete", "resolved", requested, incidental, None);
        }
        if remember && !search_terms.is_empty() {
            search_terms.truncate(8);
            let search = json!({"terms": search_terms, "roles": ["user"]});
            return answer("search_required", "unresolved", Vec::new(), incidental, Some(search));
        }
        answer("complete", "not_applicable", Vec::new(), incidental, None)
    }
}

impl MemoryProposer for EmbeddedProposer {
    fn name(&self) -> &str {
        "embedded-rules-v2"
    }

    fn propose<'a>(&'a self, prompt: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            let Some(patterns) = patterns() else {
                return Err(ModelError::Configuration("embedded patterns do not compile".to_owned()));
            };
            Ok(match &prompt.localized_terms {
                Some(terms) => Self::localized(prompt, terms),
                None => Self::first_pass(prompt, patterns),
            })
        })
    }
}

/// The canonicalizer that accepts every candidate as proposed and links it to the held item it
/// restates or contradicts by the embedded rules ([`crate::relation`]): a restatement is
/// `sameAs` the first held item of its scope stating the same fact, otherwise a contradiction
/// `supersedes` the first held item of its scope it contradicts.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbeddedCanonicalizer;

fn link(candidate: &Value, held: &[HeldItem]) -> Option<(&'static str, String)> {
    let content = candidate.get("content")?.as_str()?;
    let scope = candidate.get("scope")?.as_str()?;
    let of_scope = || held.iter().filter(move |h| h.scope == scope);
    if let Some(same) = of_scope().find(|h| relation(&h.content, content) == Relation::Same) {
        return Some(("sameAs", same.item_id.clone()));
    }
    of_scope()
        .find(|h| relation(&h.content, content) == Relation::Contradicts)
        .map(|h| ("supersedes", h.item_id.clone()))
}

impl Canonicalizer for EmbeddedCanonicalizer {
    fn name(&self) -> &str {
        "embedded-consolidate-v1"
    }

    fn canonicalize<'a>(
        &'a self,
        prompt: &'a CanonicalizePrompt,
    ) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            let results: Vec<Value> = prompt
                .candidates
                .iter()
                .map(|c| {
                    let mut result =
                        json!({"candidateId": c.candidate_id, "status": "accepted", "item": c.item});
                    if let (Some((field, id)), Some(map)) =
                        (link(&c.item, &prompt.held), result.as_object_mut())
                    {
                        map.insert(field.to_owned(), Value::String(id));
                    }
                    result
                })
                .collect();
            Ok(json!({ "results": results }).to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_third_person() {
        assert_eq!(statement("I prefer tabs over spaces"), "The user prefers tabs over spaces");
        assert_eq!(statement("I'm a backend engineer"), "The user is a backend engineer");
        assert_eq!(statement("my name is Ada"), "The user's name is Ada");
        assert_eq!(statement("I never use semicolons"), "The user never uses semicolons");
        assert_eq!(statement("we use Postgres 16"), "The team uses Postgres 16");
        assert_eq!(statement("we always use tRPC in this repo"), "The team always uses tRPC in this repo");
        assert_eq!(statement("we never push on Fridays"), "The team never pushes on Fridays");
        assert_eq!(statement("I maintain the storage layer"), "The user maintains the storage layer");
        assert_eq!(statement("I don't want my tests mocked"), "The user does not want their tests mocked");
        assert_eq!(
            statement("I always want you to run tests"),
            "The user always wants the assistant to run tests"
        );
        assert_eq!(
            statement("For the database we use Postgres 16 with pgvector"),
            "For the database the team uses Postgres 16 with pgvector"
        );
    }

    #[test]
    fn a_full_stop_inside_a_name_does_not_end_the_sentence() {
        assert_eq!(
            sentences("we deploy with fly.io. The app is built with Next.js and v1.2 of zod! ok", &[]),
            ["we deploy with fly.io", "The app is built with Next.js and v1.2 of zod"]
        );
        assert_eq!(sentences("see package.json; keep it", &[]), ["see package.json", "keep it"]);
        // Normalization joined "fix api.test.ts\nalways run jest" with a space at byte 15.
        assert_eq!(
            sentences("fix api.test.ts always run jest", &[15]),
            ["fix api.test.ts", "always run jest"]
        );
    }

    #[test]
    fn a_rule_after_a_comma_is_a_clause_of_its_own() {
        assert_eq!(
            clauses("we deploy with fly.io, never run migrations by hand"),
            ["we deploy with fly.io", "never run migrations by hand"]
        );
    }

    #[test]
    fn a_contrast_of_one_word_after_a_comma_stays_with_its_clause() {
        // Split, it gave an item "Never npm." that says nothing on its own.
        assert_eq!(
            clauses("this project always uses pnpm, never npm"),
            ["this project always uses pnpm, never npm"]
        );
        assert_eq!(clauses("use tabs, always spaces in YAML"), ["use tabs", "always spaces in YAML"]);
    }

    #[test]
    fn what_the_team_does_holds_in_the_workspace() {
        assert_eq!(kind_and_scope("we never squash merges", Reading::Statement), ("preference", "workspace"));
        assert_eq!(kind_and_scope("we deploy with fly.io", Reading::Statement), ("context", "workspace"));
        // A habit stated without saying it holds everywhere is this workspace's too.
        assert_eq!(kind_and_scope("I never use semicolons", Reading::Statement), ("preference", "workspace"));
    }

    /// `(requested, content, kind, scope)` of each item the first pass proposes for one user message,
    /// the turn a remember request was made in.
    fn proposed(text: &str) -> Vec<(bool, String, String, String)> {
        let prompt = ProposalPrompt {
            trigger: ExtractionTrigger::Remember,
            requested_turn: None,
            evidence: vec![EvidenceView {
                source_ref: "event:e1".to_owned(),
                kind: "user_message",
                observed_at: 0,
                text: text.to_owned(),
                line_breaks: Vec::new(),
                requested_turn: true,
            }],
            prior_summary: None,
            context: Vec::new(),
            localized_terms: None,
        };
        let answer: Value =
            serde_json::from_str(&EmbeddedProposer::first_pass(&prompt, patterns().unwrap())).unwrap();
        let list = |name: &str, requested: bool| {
            answer[name].as_array().unwrap().iter().map(move |item| {
                let field = |f: &str| item[f].as_str().unwrap().to_owned();
                (requested, field("content"), field("kind"), field("scope"))
            })
        };
        list("requestedItems", true).chain(list("incidentalItems", false)).collect()
    }

    fn row(requested: bool, content: &str, kind: &str, scope: &str) -> (bool, String, String, String) {
        (requested, content.to_owned(), kind.to_owned(), scope.to_owned())
    }

    #[test]
    fn a_passing_remark_is_no_global_preference() {
        // Before: "The user likes turtles." was proposed global, so every session in every project
        // received it.
        assert_eq!(
            proposed("I like turtles"),
            [row(false, "The user likes turtles.", "preference", "workspace")]
        );
        assert_eq!(
            proposed("Remember that I prefer British spelling in everything I write"),
            [row(
                true,
                "The user prefers British spelling in everything they write.",
                "preference",
                "global"
            )]
        );
        assert_eq!(
            proposed("Remember: always answer in French"),
            [row(true, "Always answer in French.", "preference", "global")]
        );
    }

    #[test]
    fn each_instruction_of_a_request_is_requested_and_its_own_item() {
        // Before: "always open a PR" was an incidental item the answer did not name.
        assert_eq!(
            proposed("Remember: never force-push to main; always open a PR"),
            [
                row(true, "Never force-push to main.", "preference", "workspace"),
                row(true, "Always open a PR.", "preference", "workspace"),
            ]
        );
        assert_eq!(
            proposed("Remember: never force-push to main. Always open a PR. Now fix the build"),
            [
                row(true, "Never force-push to main.", "preference", "workspace"),
                row(true, "Always open a PR.", "preference", "workspace"),
            ],
            "the task after the rules ends the request"
        );
        assert_eq!(
            proposed("Remember that we deploy on Fridays. Create hello.py. Always run the linter"),
            [
                row(true, "The team deploys on Fridays.", "context", "workspace"),
                row(false, "The user's instruction: always run the linter.", "preference", "workspace"),
            ],
            "a rule after a task is not part of the request"
        );
    }

    #[test]
    fn imperatives_that_hold_are_read_and_replies_to_the_step_are_not() {
        // Before: the first four were missed on real sessions, and the rejections of an option
        // were stored and pushed into every later session start.
        let patterns = patterns().unwrap();
        for kept in [
            "don't create separate documents",
            "Design first, no code yet",
            "don't overcomplicate the API",
            "Don't release on Fridays",
            "no unsafe code, only safe Rust",
            "before you optimize anything, run the benchmarks",
            "keep explanations short",
            "Every new component needs a Storybook story",
            "Coordinates are always stored as WGS84",
            "our staging redis is stage-redis-1",
            "we deny clippy warnings in this repo",
        ] {
            assert!(reading(kept, patterns).is_some(), "{kept:?} holds beyond the turn");
        }
        for once in [
            "Option 1 is not acceptable",
            "the second approach is not acceptable",
            "more context: the issue must be address, option 2 is not accepable",
            "not acceptable, try a different name",
            "don't do that",
            "I want to add pagination to the endpoint",
            "let's go with the first one",
        ] {
            assert_eq!(reading(once, patterns), None, "{once:?} is a reply about the step at hand");
        }
    }

    #[test]
    fn a_rule_that_refers_back_or_a_contrast_of_a_noun_stays_with_its_clause() {
        assert_eq!(
            clauses("the metrics endpoint is internal only, never expose it publicly"),
            ["the metrics endpoint is internal only, never expose it publicly"]
        );
        assert_eq!(
            clauses("We always use clap's derive API, never the builder"),
            ["We always use clap's derive API, never the builder"]
        );
        assert_eq!(
            clauses("Keep it simple, don't overcomplicate the API"),
            ["Keep it simple", "don't overcomplicate the API"]
        );
        assert_eq!(
            clauses("fyi our staging database is stage-db-02"),
            ["our staging database is stage-db-02"]
        );
    }

    #[test]
    fn keys_are_the_words_that_say_what_an_item_is_about() {
        // Before: "don't commit until the final step" had the keys "don't commit until", "don't".
        let key_texts = |clause: &str| -> Vec<String> {
            keys(clause).iter().map(|k| k["key"].as_str().unwrap_or_default().to_owned()).collect()
        };
        assert_eq!(
            key_texts("don't commit anything until the final step"),
            ["commit final step", "commit", "final", "step"]
        );
        assert_eq!(
            key_texts("Please make sure you never add new dependencies"),
            ["add new dependencies", "add", "new", "dependencies"]
        );
    }

    #[test]
    fn a_sentence_of_two_statements_is_two_clauses() {
        assert_eq!(
            clauses("My name is Ada and I maintain the storage layer"),
            ["My name is Ada", "I maintain the storage layer"]
        );
        assert_eq!(clauses("I prefer tabs"), ["I prefer tabs"]);
    }

    #[test]
    fn standing_instructions_are_read_and_tasks_are_not() {
        let patterns = patterns().unwrap();
        for kept in [
            "TODO is not acceptable, implementation must be full",
            "performance is crucial",
            "don't commit until the final step",
            "Never push to main without a review",
            "always run cargo fmt before committing",
            "from now on answer in English",
            "use pnpm instead of npm",
        ] {
            assert!(reading(kept, patterns).is_some(), "{kept:?} is a standing instruction");
        }
        for task in [
            "create hello.py, md and js",
            "update py with one liner comment",
            "tell me more about agent module",
            "it must be the cache",
            "follow best practices in CLI to add valuable commands",
            "hi",
        ] {
            assert_eq!(reading(task, patterns), None, "{task:?} is no standing fact");
        }
        assert_eq!(
            content("don't commit until the final step", Reading::Instruction),
            "The user's instruction: don't commit until the final step."
        );
    }
}
