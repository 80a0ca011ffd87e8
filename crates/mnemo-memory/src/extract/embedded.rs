//! Deterministic embedded model seams: a rule-based proposer that finds explicit requests to
//! remember, stated preferences and facts users state about themselves or their project, and
//! a canonicalizer that accepts every candidate as proposed. They answer in the same strict
//! JSON a model would, so everything runs offline and is checked the same way.

use std::sync::OnceLock;

use mnemo_core::ExtractionTrigger;
use regex::Regex;
use serde_json::{Value, json};

use crate::extract::seams::{
    BoxFuture, CanonicalizePrompt, Canonicalizer, EvidenceView, MemoryProposer, ModelError, ProposalPrompt,
};

/// Most items the embedded proposer proposes in each list.
const EMBEDDED_ITEMS_MAX: usize = 10;

struct Patterns {
    request: Regex,
    reference: Regex,
    statement: Regex,
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
                    r"(?i)^(?:I\s+(?:prefer|like|love|hate|dislike|always|never|use|want)|I'm\s+using|I\s+am\s+using|I\s+work|I\s+live|my\s+name\s+is|call\s+me|I\s+am\s+an?\s|I'm\s+an?\s|we\s+use|we\s+always|we\s+never|our\s+(?:project|team|repo|codebase)\s)",
                )
                .ok()?,
            })
        })
        .as_ref()
}

const STOPWORDS: &[&str] = &[
    "the", "and", "that", "this", "with", "from", "over", "into", "about", "when", "then", "than", "they",
    "them", "their", "there", "what", "your", "yours", "have", "been", "were", "will", "would", "should",
    "could", "always", "never", "our", "for", "not", "all", "any", "its", "are", "was", "you", "prefer",
    "prefers", "like", "likes", "love", "loves", "hate", "hates", "dislike", "dislikes", "uses", "using",
    "work", "works", "live", "lives", "want", "wants", "user", "name", "call", "project", "please",
];

/// Sentences of `text`, each a verbatim substring, trimmed.
fn sentences(text: &str) -> Vec<&str> {
    text.split_inclusive(['.', '!', '?', ';', '\n'])
        .map(|s| s.trim().trim_end_matches(['.', '!', '?', ';']).trim())
        .filter(|s| s.chars().count() >= 4)
        .collect()
}

fn conjugate(verb: &str) -> String {
    match verb.to_lowercase().as_str() {
        "have" => "has".to_owned(),
        "do" => "does".to_owned(),
        "don't" => "does not".to_owned(),
        "always" | "never" | "really" | "usually" => verb.to_owned(),
        lower if lower.ends_with('s') => verb.to_owned(),
        _ => format!("{verb}s"),
    }
}

/// A third-person statement of a first-person clause ("I prefer tabs" -> "User prefers tabs").
fn statement(clause: &str) -> String {
    let words: Vec<&str> = clause.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let rest = |from: usize| words.get(from..).map(|w| w.join(" ")).unwrap_or_default();
    let out = match lower.first().map(String::as_str) {
        Some("i'm") => format!("User is {}", rest(1)),
        Some("i") if lower.get(1).map(String::as_str) == Some("am") => format!("User is {}", rest(2)),
        Some("i")
            if lower.get(1).map(String::as_str) == Some("do")
                && lower.get(2).map(String::as_str) == Some("not") =>
        {
            format!("User does not {}", rest(3))
        }
        Some("i") if words.len() > 1 => {
            let verb = conjugate(words[1]);
            let next = if matches!(lower[1].as_str(), "always" | "never" | "really" | "usually")
                && words.len() > 2
            {
                format!("{} {}", verb, conjugate(words[2]))
            } else {
                verb
            };
            let skip = if next.contains(' ') && !next.starts_with("does") { 3 } else { 2 };
            format!("User {next} {}", rest(skip))
        }
        Some("my") => format!("User's {}", rest(1)),
        Some("call") if lower.get(1).map(String::as_str) == Some("me") => {
            format!("User wants to be called {}", rest(2))
        }
        Some("we") => format!("The team {}", conjugate_rest(&words[1..])),
        Some("our") => format!("The team's {}", rest(1)),
        _ => clause.to_owned(),
    };
    out.trim().to_owned()
}

fn conjugate_rest(words: &[&str]) -> String {
    match words.split_first() {
        Some((verb, rest)) => format!("{} {}", conjugate(verb), rest.join(" ")),
        None => String::new(),
    }
}

fn keys(clause: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let significant: Vec<String> = clause
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .map(|w| w.trim_matches('.').to_owned())
        .filter(|w| w.chars().count() >= 3 && !STOPWORDS.contains(&w.to_lowercase().as_str()))
        .filter(|w| !matches!(w.to_lowercase().as_str(), "i'm" | "am" | "is" | "are" | "use"))
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

fn kind_and_scope(clause: &str) -> (&'static str, &'static str) {
    let lower = clause.to_lowercase();
    let has = |needle: &str| lower.contains(needle);
    if has("my name") || has("call me") || has("i am a") || has("i'm a") || has("i live") {
        ("identity", "global")
    } else if has("prefer") || has("like") || has("love") || has("hate") || has("always") || has("never") {
        ("preference", "global")
    } else if has("project")
        || has("repo")
        || has("codebase")
        || has("we use")
        || has("team")
        || has("i work")
        || has("use")
    {
        ("context", "workspace")
    } else {
        ("note", "global")
    }
}

fn item(clause: &str, evidence: &EvidenceView) -> Value {
    let (kind, scope) = kind_and_scope(clause);
    json!({
        "content": statement(clause),
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

/// The rule-based proposer.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbeddedProposer;

impl EmbeddedProposer {
    fn localized(prompt: &ProposalPrompt, terms: &[String]) -> String {
        let mut requested = Vec::new();
        for evidence in &prompt.evidence {
            for sentence in sentences(&evidence.text) {
                let lower = sentence.to_lowercase();
                let request = patterns().is_some_and(|p| p.request.is_match(sentence));
                if !request
                    && terms.iter().any(|t| lower.contains(&t.to_lowercase()))
                    && requested.len() < EMBEDDED_ITEMS_MAX
                {
                    requested.push(item(sentence, evidence));
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
            for sentence in sentences(&evidence.text) {
                if let Some(clause) = patterns.request.captures(sentence).and_then(|c| c.get(1)) {
                    if !(remember && evidence.requested_turn) {
                        continue;
                    }
                    let clause = clause.as_str().trim();
                    if let Some(reference) = patterns.reference.captures(clause) {
                        let about = reference.get(1).map_or("", |m| m.as_str());
                        search_terms.extend(
                            about
                                .split_whitespace()
                                .filter(|w| w.chars().count() >= 3)
                                .map(str::to_lowercase),
                        );
                    } else if clause.chars().count() >= 4 && requested.len() < EMBEDDED_ITEMS_MAX {
                        requested.push(item(clause, evidence));
                    }
                } else if patterns.statement.is_match(sentence) && incidental.len() < EMBEDDED_ITEMS_MAX {
                    incidental.push(item(sentence, evidence));
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
        "embedded-rules-v1"
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

/// The canonicalizer that accepts every candidate as proposed.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbeddedCanonicalizer;

impl Canonicalizer for EmbeddedCanonicalizer {
    fn name(&self) -> &str {
        "embedded-accept-v1"
    }

    fn canonicalize<'a>(
        &'a self,
        prompt: &'a CanonicalizePrompt,
    ) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async move {
            let results: Vec<Value> = prompt
                .candidates
                .iter()
                .map(|c| json!({"candidateId": c.candidate_id, "status": "accepted", "item": c.item}))
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
        assert_eq!(statement("I prefer tabs over spaces"), "User prefers tabs over spaces");
        assert_eq!(statement("I'm a backend engineer"), "User is a backend engineer");
        assert_eq!(statement("my name is Ada"), "User's name is Ada");
        assert_eq!(statement("I never use semicolons"), "User never uses semicolons");
        assert_eq!(statement("we use Postgres 16"), "The team uses Postgres 16");
    }
}
