//! The strict JSON shapes models answer with (memory.md §3.9 stages 1 and 3).

use mnemo_core::{ExtractionTrigger, KeyType, MemoryKind, StatementType, TemporalType};
use serde::{Deserialize, Serialize};

use crate::text::code_points;

/// Most requested items in one proposal.
pub const REQUESTED_ITEMS_MAX: usize = 10;
/// Most incidental items in one proposal.
pub const INCIDENTAL_ITEMS_MAX: usize = 10;
/// Most search terms a proposal may ask for.
pub const SEARCH_TERMS_PROPOSED_MAX: usize = 8;
/// Longest proposed search term in code points.
pub const SEARCH_TERM_CODE_POINTS_MAX: usize = 128;
/// Most results of one canonicalization call.
pub const CANONICAL_RESULTS_MAX: usize = 20;

/// Where a proposed item should be visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProposedScope {
    /// Everywhere.
    Global,
    /// The session's workspace.
    Workspace,
}

/// A proposed key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposedKey {
    /// Text, 1 to 256 characters.
    pub key: String,
    /// What it names.
    #[serde(rename = "type")]
    pub key_type: KeyType,
}

/// A citation of evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Citation {
    /// `event:<id>`, 1 to 160 characters.
    pub source_ref: String,
    /// A verbatim quote, 1 to 1000 characters.
    pub quote: String,
}

/// An item as a model proposes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProposedItem {
    /// 1 to 2000 characters.
    pub content: String,
    /// What it is about.
    pub kind: MemoryKind,
    /// Its modality.
    pub statement_type: StatementType,
    /// How it is placed in time.
    pub temporal_type: TemporalType,
    /// Event start, UTC ms.
    pub event_started_at: Option<u64>,
    /// Event end, UTC ms.
    pub event_ended_at: Option<u64>,
    /// Global or workspace.
    pub scope: ProposedScope,
    /// 1 to 16 keys.
    pub keys: Vec<ProposedKey>,
    /// 1 to 8 citations (absent in canonicalized items, which keep the original citations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Citation>,
}

/// A localization request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchAsk {
    /// 1 to 8 terms of 1 to 128 characters.
    pub terms: Vec<String>,
    /// `user` and/or `assistant`.
    #[serde(default)]
    pub roles: Option<Vec<SearchRole>>,
}

/// Whose messages a localization search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SearchRole {
    /// User messages.
    User,
    /// Model messages.
    Assistant,
}

/// The proposal's overall status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProposalStatus {
    /// Done.
    Complete,
    /// The request refers to something outside the evidence; search for it.
    SearchRequired,
    /// The request cannot be resolved.
    CannotResolve,
}

/// The requested part's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequestedStatus {
    /// Requested items found.
    Resolved,
    /// Nothing was requested.
    NotApplicable,
    /// Not found yet.
    Unresolved,
}

/// A proposal (memory.md §3.9 stage 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Proposal {
    /// Always `processed`.
    pub coverage_status: String,
    /// Overall status.
    pub status: ProposalStatus,
    /// Requested part's status.
    pub requested_status: RequestedStatus,
    /// Items the user asked for.
    pub requested_items: Vec<ProposedItem>,
    /// Items found incidentally.
    pub incidental_items: Vec<ProposedItem>,
    /// Present exactly when `status` is `search_required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchAsk>,
}

/// One canonicalization result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CanonicalResult {
    /// The candidate, 1 to 64 characters.
    pub candidate_id: String,
    /// `accepted` or `rejected`.
    pub status: CanonicalStatus,
    /// The canonical item, when accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<ProposedItem>,
    /// The held item an accepted candidate restates (its id, from the prompt's `held`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
    /// The held item an accepted candidate contradicts and replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// A canonicalization verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CanonicalStatus {
    /// Keep, as rewritten.
    Accepted,
    /// Drop.
    Rejected,
}

/// The canonicalization answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Canonicalization {
    /// At most 20 results, one per candidate.
    pub results: Vec<CanonicalResult>,
}

fn strict_object(text: &str) -> Result<&str, String> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') && trimmed.ends_with('}')) {
        return Err("the answer must be one JSON object, without fences or prose".to_owned());
    }
    Ok(trimmed)
}

fn check_item(item: &ProposedItem, canonical: bool) -> Result<(), String> {
    let len = code_points(&item.content);
    if len == 0 || len > 2000 {
        return Err("item content must be 1 to 2000 characters".to_owned());
    }
    if item.keys.is_empty() || item.keys.len() > 16 {
        return Err("an item needs 1 to 16 keys".to_owned());
    }
    if item.keys.iter().any(|k| k.key.is_empty() || code_points(&k.key) > 256) {
        return Err("keys must be 1 to 256 characters".to_owned());
    }
    if canonical {
        return if item.evidence.is_empty() {
            Ok(())
        } else {
            Err("canonical items carry no evidence".to_owned())
        };
    }
    if item.evidence.is_empty() || item.evidence.len() > 8 {
        return Err("an item needs 1 to 8 citations".to_owned());
    }
    let bad = |c: &Citation| {
        c.source_ref.is_empty()
            || code_points(&c.source_ref) > 160
            || c.quote.is_empty()
            || code_points(&c.quote) > 1000
    };
    if item.evidence.iter().any(bad) {
        return Err("citations need a sourceRef of 1 to 160 and a quote of 1 to 1000 characters".to_owned());
    }
    Ok(())
}

fn check_search(search: Option<&SearchAsk>, required: bool) -> Result<(), String> {
    match (search, required) {
        (None, false) => Ok(()),
        (Some(_), false) => Err("search is only allowed with status search_required".to_owned()),
        (None, true) => Err("search_required needs a search".to_owned()),
        (Some(ask), true) => {
            let terms_ok = !ask.terms.is_empty()
                && ask.terms.len() <= SEARCH_TERMS_PROPOSED_MAX
                && ask.terms.iter().all(|t| !t.is_empty() && code_points(t) <= SEARCH_TERM_CODE_POINTS_MAX);
            let roles_ok = ask.roles.as_ref().is_none_or(|r| !r.is_empty() && r.len() <= 2);
            if terms_ok && roles_ok {
                Ok(())
            } else {
                Err("search needs 1 to 8 terms and 1 to 2 roles".to_owned())
            }
        }
    }
}

/// Parses and checks a proposal for `trigger`. Any error is a `schema` failure.
pub fn parse_proposal(text: &str, trigger: ExtractionTrigger) -> Result<Proposal, String> {
    let proposal: Proposal = serde_json::from_str(strict_object(text)?).map_err(|e| e.to_string())?;
    if proposal.coverage_status != "processed" {
        return Err("coverageStatus must be processed".to_owned());
    }
    let requested = proposal.requested_items.len();
    if proposal.incidental_items.len() > INCIDENTAL_ITEMS_MAX {
        return Err(format!("at most {INCIDENTAL_ITEMS_MAX} incidental items"));
    }
    let shape_ok = match (proposal.status, proposal.requested_status) {
        (ProposalStatus::Complete, RequestedStatus::Resolved) => {
            (1..=REQUESTED_ITEMS_MAX).contains(&requested)
        }
        (ProposalStatus::Complete, RequestedStatus::NotApplicable) => requested == 0,
        (ProposalStatus::SearchRequired | ProposalStatus::CannotResolve, RequestedStatus::Unresolved) => {
            requested == 0
        }
        _ => false,
    };
    if !shape_ok {
        return Err("status, requestedStatus and requestedItems do not form an accepted shape".to_owned());
    }
    check_search(proposal.search.as_ref(), proposal.status == ProposalStatus::SearchRequired)?;
    for item in proposal.requested_items.iter().chain(&proposal.incidental_items) {
        check_item(item, false)?;
    }
    let incidental_only = trigger != ExtractionTrigger::Remember;
    let complete_not_na = proposal.status == ProposalStatus::Complete
        && proposal.requested_status != RequestedStatus::NotApplicable;
    if incidental_only && (requested > 0 || complete_not_na) {
        return Err("an incidental trigger cannot resolve requested items".to_owned());
    }
    Ok(proposal)
}

/// Parses and checks a canonicalization answer against the candidate ids it was asked about:
/// exactly one result per candidate, no missing, duplicate or extra ids.
pub fn parse_canonicalization(text: &str, candidate_ids: &[String]) -> Result<Canonicalization, String> {
    let answer: Canonicalization = serde_json::from_str(strict_object(text)?).map_err(|e| e.to_string())?;
    if answer.results.len() > CANONICAL_RESULTS_MAX {
        return Err(format!("at most {CANONICAL_RESULTS_MAX} results"));
    }
    let mut seen: Vec<&str> = answer.results.iter().map(|r| r.candidate_id.as_str()).collect();
    seen.sort_unstable();
    let mut wanted: Vec<&str> = candidate_ids.iter().map(String::as_str).collect();
    wanted.sort_unstable();
    if seen != wanted {
        return Err("results must name each candidate exactly once".to_owned());
    }
    for result in &answer.results {
        match (result.status, &result.item) {
            (CanonicalStatus::Accepted, Some(item)) => check_item(item, true)?,
            (CanonicalStatus::Rejected, None) => {}
            _ => return Err("accepted results carry an item, rejected ones none".to_owned()),
        }
        let linked = result.same_as.is_some() || result.supersedes.is_some();
        if linked && result.status != CanonicalStatus::Accepted {
            return Err("only an accepted result may name a held item".to_owned());
        }
        if result.same_as.is_some() && result.supersedes.is_some() {
            return Err("a result restates a held item or supersedes one, not both".to_owned());
        }
    }
    Ok(answer)
}
