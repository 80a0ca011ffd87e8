//! Context-budget history search (events-and-history.md §3.10, decision 0148): earlier events of the
//! session that match the new request are brought back into the history, after compaction folded
//! them into a checkpoint or the budget dropped them.
//!
//! Off unless the policy's `history_search` is on. The query is the request's text, tokenised as the
//! reference does ([`history_search_query`]: lowercase, split on anything outside `[a-z0-9_./:-]`,
//! terms of at least 2 characters, deduplicated, the first 16). The caller ranks the session's
//! messages with the ranked search index (SearchHistory) and hands the hits over best first;
//! [`add_retrieved`] applies the spec's limits and order: the first `history_search_max_results`
//! hits not already in the history, each with `history_search_around` neighbouring events on each
//! side, accumulated in log order under `history_search_max_tokens` (and never past the history
//! budget), an event that would overflow skipped and counted rather than ending the walk.

use std::collections::{BTreeSet, HashSet};

use mnemo_core::{Content, EventId, Position, Role, RuntimeEvent, StreamRevision, TurnId};
use serde::Serialize;

use crate::error::CompactionError;
use crate::history::{AssembledHistory, HistoryItem};
use crate::ledger::{LoggedEvent, SessionLedger};
use crate::policy::CompactionPolicy;
use crate::projection::{estimate_tokens, utf16_len};

/// Most query terms taken from the request (the reference's tokeniser keeps the first 16).
pub const HISTORY_SEARCH_TERMS_MAX: usize = 16;
/// Shortest query term, in characters.
pub const HISTORY_SEARCH_TERM_CHARS_MIN: usize = 2;
/// Longest query handed to the search, in characters (SearchHistory's `SEARCH_QUERY_CHARS_MAX`).
pub const HISTORY_SEARCH_QUERY_CHARS_MAX: usize = 500;

const OPEN: &str = "<history_search_results>\nEarlier events of this conversation that match the request \
(found by history search; [log position, turn, role]):";
const CLOSE: &str = "</history_search_results>";

/// What the search did for one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistorySearchReport {
    /// The query sent to the ranked index (the request's first terms), if there was one.
    pub query: Option<String>,
    /// Why nothing was retrieved, when nothing could be searched (`no_query`, `search_refused:…`).
    pub skipped: Option<String>,
    /// Hits in this session the ranked index returned.
    pub hits: u64,
    /// Hits taken: not already in the history, at most `history_search_max_results`.
    pub hits_taken: u64,
    /// Events added (hits and their neighbours), in log order.
    pub events: u64,
    /// Their tokens, wrapper included.
    pub tokens: u64,
    /// Events that would have overflowed the budget and were left out (`historyAroundSkippedEvents`).
    pub skipped_events: u64,
}

impl HistorySearchReport {
    /// A search that did not run, and why.
    pub fn skipped(query: Option<String>, reason: impl Into<String>) -> Self {
        HistorySearchReport {
            query,
            skipped: Some(reason.into()),
            hits: 0,
            hits_taken: 0,
            events: 0,
            tokens: 0,
            skipped_events: 0,
        }
    }
}

/// The ranked history search retrieval asks (the facade implements it over the history crate's
/// search index and messages, at the position the history is assembled at).
pub trait HistorySearch {
    /// What a failure of the store behind it is.
    type Error: From<CompactionError>;

    /// The index's hits for `query`, best first, each as the session it is in and the message it
    /// names; `Err(reason)` when the search could not run (`no_search_index:<stage>`,
    /// `search_refused:<code>`), which the report records.
    fn search(&self, query: &str) -> Result<Result<Vec<SearchHit>, String>, Self::Error>;

    /// The event of message `message` of the session searched for, if the store holds it.
    fn message_event(&self, message: &str) -> Result<Option<EventId>, Self::Error>;
}

/// One hit of the ranked search: the session it is in and the message it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// The session the hit is in.
    pub session: String,
    /// The message it names (none for a hit that is not a message).
    pub message: Option<String>,
}

/// The context-budget history search for the history of `ledger`'s session, when the policy
/// switches it on: the query is the host's `search_text`, else the latest user text (of
/// `current_turn`, when given); the search's hits in this session are added by [`add_retrieved`]
/// from the session's compactable events outside `current_turn`, and the report records it.
pub fn retrieve<S: HistorySearch + ?Sized>(
    ledger: &SessionLedger<'_>,
    history: &mut AssembledHistory,
    search_text: Option<&str>,
    current_turn: Option<&TurnId>,
    policy: &CompactionPolicy,
    search: &S,
) -> Result<(), S::Error> {
    if !(policy.enabled && policy.history_search) {
        return Ok(());
    }
    let session = ledger.session();
    let all = ledger.compactable_from(StreamRevision(0), None)?;
    let text = search_text.map(str::to_owned).or_else(|| latest_request(&all, current_turn));
    let Some(query) = text.as_deref().and_then(history_search_query) else {
        history.diagnostics.history_search = Some(HistorySearchReport::skipped(None, "no_query"));
        return Ok(());
    };
    let rows = match search.search(&query)? {
        Ok(rows) => rows,
        Err(reason) => {
            history.diagnostics.history_search = Some(HistorySearchReport::skipped(Some(query), reason));
            return Ok(());
        }
    };
    let mut hits = Vec::new();
    for row in rows.iter().filter(|row| row.session == session.as_str()) {
        if let Some(message) = &row.message
            && let Some(event) = search.message_event(message)?
        {
            hits.push(event);
        }
    }
    let prior: Vec<_> = all.into_iter().filter(|e| current_turn != Some(&e.event.turn_id)).collect();
    add_retrieved(history, &prior, &hits, query, policy);
    Ok(())
}

/// The request a history search looks for when the host names none: the latest user text (of
/// `turn`, when given).
fn latest_request(events: &[LoggedEvent], turn: Option<&TurnId>) -> Option<String> {
    events.iter().rev().find_map(|e| match &e.event.content {
        Some(Content::Text(text))
            if e.event.role == Role::User && turn.is_none_or(|t| *t == e.event.turn_id) =>
        {
            Some(text.text.clone())
        }
        _ => None,
    })
}

/// The reference's tokenisation of the request text into a query: `None` when no term is left.
pub fn history_search_query(text: &str) -> Option<String> {
    let lowered = text.to_lowercase();
    let mut seen = HashSet::new();
    let mut terms: Vec<&str> = Vec::new();
    for term in
        lowered.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "_./:-".contains(c)))
    {
        if term.chars().count() >= HISTORY_SEARCH_TERM_CHARS_MIN && seen.insert(term) {
            terms.push(term);
            if terms.len() == HISTORY_SEARCH_TERMS_MAX {
                break;
            }
        }
    }
    let mut query = String::new();
    for term in terms {
        if query.chars().count() + 1 + term.chars().count() > HISTORY_SEARCH_QUERY_CHARS_MAX {
            break;
        }
        if !query.is_empty() {
            query.push(' ');
        }
        query.push_str(term);
    }
    (!query.is_empty()).then_some(query)
}

/// Adds the retrieved events to `history` (see the module docs) and records the report.
/// `events` are the session's compactable events in log order; `hits` the ranked index's hits in
/// this session, best first.
pub fn add_retrieved(
    history: &mut AssembledHistory,
    events: &[LoggedEvent],
    hits: &[EventId],
    query: String,
    policy: &CompactionPolicy,
) {
    let present: BTreeSet<Position> = history
        .items
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Event { position, .. } => Some(*position),
            _ => None,
        })
        .collect();
    let index_of = |id: &EventId| events.iter().position(|e| &e.event.id == id);
    let taken: Vec<usize> = hits
        .iter()
        .filter_map(index_of)
        .filter(|&i| !present.contains(&events[i].position))
        .take(usize::try_from(policy.history_search_max_results).unwrap_or(usize::MAX))
        .collect();
    let around = usize::try_from(policy.history_search_around).unwrap_or(0);
    let mut chosen = BTreeSet::new();
    for &hit in &taken {
        let start = hit.saturating_sub(around);
        let end = (hit + around).min(events.len().saturating_sub(1));
        let window = events.iter().enumerate().skip(start).take(end + 1 - start);
        chosen.extend(window.filter(|(_, e)| !present.contains(&e.position)).map(|(i, _)| i));
    }
    let cpt = policy.chars_per_token;
    let left = policy.max_history().saturating_sub(history.diagnostics.tokens_after);
    let budget = policy.history_search_max_tokens.min(left);
    let mut tokens = estimate_tokens(utf16_len(OPEN) + utf16_len(CLOSE) + 2, cpt);
    let mut lines = Vec::new();
    let mut positions = Vec::new();
    let mut skipped_events = 0;
    for i in chosen {
        let logged = &events[i];
        let line = render(logged.position, &logged.event);
        let cost = estimate_tokens(utf16_len(&line) + 1, cpt);
        if tokens + cost > budget {
            skipped_events += 1;
            continue;
        }
        tokens += cost;
        lines.push(line);
        positions.push(logged.position);
    }
    let mut report = HistorySearchReport {
        query: Some(query),
        skipped: None,
        hits: hits.len() as u64,
        hits_taken: taken.len() as u64,
        events: positions.len() as u64,
        tokens: 0,
        skipped_events,
    };
    if !positions.is_empty() {
        let text = format!("{OPEN}\n{}\n{CLOSE}", lines.join("\n"));
        report.tokens = estimate_tokens(utf16_len(&text), cpt);
        history.diagnostics.tokens_after += report.tokens;
        let at = history.items.iter().position(|i| matches!(i, HistoryItem::Event { .. }));
        let item = HistoryItem::Retrieved { positions, text };
        match at {
            Some(at) => history.items.insert(at, item),
            None => history.items.push(item),
        }
    }
    history.diagnostics.history_search = Some(report);
}

/// One retrieved event as a line: `[position, turn, role] content`.
fn render(position: Position, event: &RuntimeEvent) -> String {
    let role =
        serde_json::to_value(event.role).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let head = format!("[{position}, {}, {role}]", event.turn_id);
    let body = match &event.content {
        Some(Content::Text(text)) => text.text.clone(),
        Some(Content::Thinking(thinking)) => format!("(thinking) {}", thinking.text),
        Some(Content::FunctionCall(call)) => format!("call {} {}", call.name, compact(&call.args)),
        Some(Content::FunctionResponse(response)) => {
            format!("result of {}: {}", response.name, compact(&response.result))
        }
        Some(Content::Error(error)) => format!("error: {}", error.message),
        _ => String::new(),
    };
    format!("{head} {body}")
}

fn compact(value: &serde_json::Value) -> String {
    // A string result reads as itself, not as a quoted JSON string.
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_the_reference_tokenisation() {
        assert_eq!(
            history_search_query("Fix src/Parser.rs: the token_refresh test FAILS, fails again 東京 a")
                .as_deref(),
            Some("fix src/parser.rs: the token_refresh test fails again")
        );
        assert_eq!(history_search_query("a ! 東京"), None);
        let many: String = (0..40).map(|i| format!("term{i} ")).collect();
        assert_eq!(history_search_query(&many).unwrap().split(' ').count(), HISTORY_SEARCH_TERMS_MAX);
    }
}
