//! Deterministic admission of proposed items (memory.md §3.9 stage 2 and stage 4), with the
//! faithfulness check that goes beyond the reference system.

use std::collections::BTreeSet;

use mnemo_core::{KeyOrigin, MemoryItemFields, MemoryOrigin, MemoryScope, TemporalType, ValidationError};
use serde::Serialize;

use crate::extract::evidence::{Evidence, QUOTE_CODE_POINTS_MIN, floor_minute};
use crate::extract::proposal::{ProposedItem, ProposedScope};
use crate::scope::{holds_everywhere, item_scope};
use crate::secrets::is_sensitive;
use crate::text::{code_points, normalize_evidence};
use crate::write::{ItemInput, KeyInput};

/// Why a proposed item was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rejection {
    /// Content, a key or a quote holds a secret.
    Sensitive,
    /// Content, temporal bounds or keys break the item rules.
    Admission(String),
    /// A citation does not hold: unknown source, short quote, or quote not in the evidence.
    Evidence(String),
    /// The statement contradicts its quotes: negation added or dropped, or a number changed.
    Unfaithful(String),
    /// An incidental item cites an event outside the covered range.
    OutsideRange,
    /// The canonicalizer rejected it.
    CanonicalizerRejected,
    /// It holds only in a project, and the session belongs to no workspace ([`crate::item_scope`]).
    NoWorkspace,
}

/// An item that passed admission, with the evidence records it cites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Admitted {
    pub item: ProposedItem,
    pub cited: Vec<usize>,
    pub quotes: Vec<String>,
    /// Per quote, the minute-floored time of the event it cites.
    pub observed: Vec<u64>,
}

fn is_negation(word: &str) -> bool {
    matches!(
        word,
        "not"
            | "no"
            | "never"
            | "cannot"
            | "none"
            | "nobody"
            | "nothing"
            | "neither"
            | "nor"
            | "nowhere"
            | "without"
    ) || word.ends_with("n't")
        || word.ends_with("n’t")
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every run of digits (so dates and versions split into their numbers).
fn numbers(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .map(|n| n.trim_start_matches('0').to_owned())
        .collect()
}

/// The faithfulness check: the statement keeps its quotes' polarity (a negation is neither
/// added nor dropped) and states no number or date part its quotes do not.
pub fn check_faithful(content: &str, quotes: &[String]) -> Result<(), String> {
    let negated = |text: &str| words(text).iter().filter(|w| is_negation(w)).count() % 2 == 1;
    let joined = quotes.join(" ");
    let (statement, source) = (negated(content), negated(&joined));
    if statement != source {
        let change = if statement { "adds a negation" } else { "drops the negation" };
        return Err(format!("the statement {change} its quote does not have"));
    }
    let quoted = numbers(&joined);
    if let Some(number) = numbers(content).into_iter().find(|n| !quoted.contains(n)) {
        return Err(format!("the statement states the number {number:?}, which its quotes do not"));
    }
    Ok(())
}

/// Whether a proposal carries a secret in its content, a key or a quote (§3.8 per proposal).
pub(crate) fn carries_secret(item: &ProposedItem) -> bool {
    is_sensitive(&item.content)
        || item.keys.iter().any(|k| is_sensitive(&k.key))
        || item.evidence.iter().any(|c| is_sensitive(&c.quote))
}

fn check_temporal(item: &ProposedItem) -> Result<(), Rejection> {
    let start = item.event_started_at.map(floor_minute);
    let end = item.event_ended_at.map(floor_minute);
    let ok = match item.temporal_type {
        TemporalType::Undated => start.is_none() && end.is_none(),
        TemporalType::Point => start.is_some() && end.is_none_or(|e| Some(e) > start),
        TemporalType::Interval => start.is_some() && end.is_some_and(|e| Some(e) > start),
        TemporalType::OpenEnded => start.is_some() && end.is_none(),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Rejection::Admission("temporal bounds do not fit the temporal type".to_owned()))
    }
}

/// Admits one proposed item against the allowed evidence (§3.9 stage 2): secrets, content,
/// temporal bounds, citations (quotes of at least 4 code points found verbatim, case-sensitive,
/// in the evidence text shown), keys, then faithfulness. `covered` limits the ordinals an
/// incidental item may cite.
pub(crate) fn admit(
    item: &ProposedItem,
    allowed: &[Evidence],
    citations: &[crate::extract::proposal::Citation],
    covered: Option<(u64, u64)>,
) -> Result<Admitted, Rejection> {
    if carries_secret(item) || citations.iter().any(|c| is_sensitive(&c.quote)) {
        return Err(Rejection::Sensitive);
    }
    let content = normalize_evidence(&item.content);
    if content.is_empty() {
        return Err(Rejection::Admission("content is empty".to_owned()));
    }
    check_temporal(item)?;
    let mut cited = BTreeSet::new();
    let mut quotes = Vec::new();
    let mut observed = Vec::new();
    for citation in citations {
        let Some(index) = allowed.iter().position(|e| e.source_ref == citation.source_ref) else {
            return Err(Rejection::Evidence(format!("{} is not an evidence record", citation.source_ref)));
        };
        let quote = normalize_evidence(&citation.quote);
        if code_points(&quote) < QUOTE_CODE_POINTS_MIN {
            return Err(Rejection::Evidence(format!(
                "quote {quote:?} is shorter than {QUOTE_CODE_POINTS_MIN} code points"
            )));
        }
        if !allowed[index].text.contains(&quote) {
            return Err(Rejection::Evidence(format!(
                "quote {quote:?} does not occur in {}",
                citation.source_ref
            )));
        }
        if let Some((from, through)) = covered {
            let ordinal = allowed[index].ordinal;
            if ordinal < from || ordinal > through {
                return Err(Rejection::OutsideRange);
            }
        }
        cited.insert(index);
        quotes.push(quote);
        observed.push(allowed[index].observed_at);
    }
    if cited.is_empty() {
        return Err(Rejection::Evidence("an item must cite at least one evidence record".to_owned()));
    }
    if item.keys.iter().all(|k| k.key.trim().is_empty()) {
        return Err(Rejection::Admission("no key is left".to_owned()));
    }
    check_faithful(&content, &quotes).map_err(Rejection::Unfaithful)?;
    let mut admitted = item.clone();
    admitted.content = content;
    admitted.evidence = citations.to_vec();
    // Global is earned by the user's words whoever proposed it (crate::scope).
    if admitted.scope == ProposedScope::Global && !quotes.iter().any(|q| holds_everywhere(q)) {
        admitted.scope = ProposedScope::Workspace;
    }
    Ok(Admitted { item: admitted, cited: cited.into_iter().collect(), quotes, observed })
}

/// The write an admitted item becomes (memory.md §1.2 derivations): observed at the
/// minute-floored latest cited event, requested items `user_requested` with user keys,
/// incidental ones `agent_extracted` with model keys, sources from the cited events, in the scope
/// [`item_scope`] gives it in the session's `workspace`. [`Rejection::NoWorkspace`] when it holds
/// only in a workspace and the session has none.
pub(crate) fn to_fields(
    admitted: &Admitted,
    evidence: &[Evidence],
    requested: bool,
    workspace: &MemoryScope,
) -> Result<MemoryItemFields, Rejection> {
    let item = &admitted.item;
    let cited: Vec<&Evidence> = admitted.cited.iter().filter_map(|i| evidence.get(*i)).collect();
    let observed_at = cited.iter().map(|e| e.observed_at).max().unwrap_or(0);
    let key_origin = if requested { KeyOrigin::User } else { KeyOrigin::Llm };
    let keys: Vec<KeyInput> = item
        .keys
        .iter()
        .map(|k| KeyInput { key: k.key.trim().to_owned(), key_type: k.key_type, key_origin })
        .filter(|k| !k.key.is_empty())
        .collect();
    let global = item.scope == ProposedScope::Global;
    let scope = item_scope(global, &admitted.quotes, workspace).ok_or(Rejection::NoWorkspace)?;
    ItemInput {
        content: item.content.clone(),
        kind: item.kind,
        statement_type: item.statement_type,
        temporal_type: item.temporal_type,
        scope,
        event_started_at: item.event_started_at.map(floor_minute),
        event_ended_at: item.event_ended_at.map(floor_minute),
        observed_at,
        origin: if requested { MemoryOrigin::UserRequested } else { MemoryOrigin::AgentExtracted },
        keys,
        sources: cited.iter().map(|e| e.source.clone()).collect(),
    }
    .normalize()
    .map_err(|e: ValidationError| Rejection::Admission(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faithfulness_catches_polarity_and_numbers() {
        let quote = vec!["I don't use tabs in the 2024 repo".to_owned()];
        assert!(check_faithful("User does not use tabs in the 2024 repo", &quote).is_ok());
        assert!(check_faithful("User uses tabs in the 2024 repo", &quote).is_err());
        assert!(check_faithful("User does not use tabs in the 2025 repo", &quote).is_err());
        assert!(check_faithful("User never uses tabs", &["I use tabs".to_owned()]).is_err());
        assert!(check_faithful("Meeting on 2026-03-04", &["meet on 2026-03-04".to_owned()]).is_ok());
        assert!(check_faithful("Meeting on 2026-03-05", &["meet on 2026-03-04".to_owned()]).is_err());
    }
}
