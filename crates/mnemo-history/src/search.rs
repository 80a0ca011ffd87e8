//! SearchHistory (spec §3.2–3.5), ranked by BM25.
//!
//! Everything but the ranking follows the reference system: the argument limits, the check order
//! (arguments, abort, query length, secret-shaped query, cursor, privacy), the page of at most 200
//! logical sessions in recency order after the cursor, current-turn exclusion inside the current
//! session, redacted snippets of at most 240 code points, the 64 KiB payload cap, `truncated` and
//! the cursor rules. Where the reference returns matches in scan order (sessions by recency, title
//! before transcript, transcript in stored order), Mnemo ranks every match in the page by BM25 over
//! the query's terms (any term matches; ties: the newer document first) and returns the best.
//!
//! BM25: `score(d) = Σ idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avgdl))` over the query's
//! distinct terms, with `idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))`. `k1` = 1.2 and `b` = 0.75
//! unless the pipeline spec sets them.
//!
//! Workspaces: a store may hold many workspaces, where the reference system keeps one database per
//! workspace. A search from inside a session searches its workspace as if it were the whole store
//! ([`Scope`]): the page holds up to 200 logical sessions *of that workspace* (sessions without a
//! workspace form one group of their own), so candidates are chosen, ranked and cut to the limit
//! among them only, and `N`, `df` and `avgdl` are that workspace's. A search from no session (an
//! operator's) pages, ranks and counts over the whole store.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mnemo_pipeline::{PipelineError, StateStore};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use unicode_segmentation::UnicodeSegmentation;

use crate::analysis::{FREQUENCY_SCALE, Features, NEIGHBOUR_WEIGHT, TIME_MARKER};
use crate::index::{Corpus, IndexReader, IndexedDoc, MatchKind, Scope};
use crate::messages::{self, SessionCursor, SessionHeader};
use crate::text::{
    Folded, TERM_BYTES_MAX, cap_code_points, code_points, collapse_whitespace, fold, prefix_at_char_boundary,
    utf16_len,
};
use crate::tool::{
    HistoryContext, ToolFailure, check_integer, check_string, failure_reasons, integer_arg, strict_object,
    string_arg,
};
use mnemo_core::redaction::redact_secrets;

/// Longest query, after trimming, in code points (and in UTF-16 units, the schema's unit).
pub const SEARCH_QUERY_CHARS_MAX: usize = 500;
/// Rows returned when the caller gives no limit.
pub const SEARCH_LIMIT_DEFAULT: i64 = 5;
/// Most rows one call returns.
pub const SEARCH_LIMIT_MAX: i64 = 10;
/// Longest cursor in characters.
pub const SEARCH_CURSOR_CHARS_MAX: usize = 2048;
/// Most logical sessions one call searches.
pub const SEARCH_SESSIONS_MAX: usize = 200;
/// Most bytes of snippets one call returns.
pub const SEARCH_PAYLOAD_BYTES_MAX: usize = 64 * 1024;
/// Code points of context kept on each side of a match in a snippet.
pub const SNIPPET_CONTEXT_HALF_CHARS: usize = 80;
/// Longest snippet in code points (the last is `…` when cut).
pub const SNIPPET_CODE_POINTS_MAX: usize = 240;
/// Postings scored between two checks of the abort signal.
const ABORT_CHECK_POSTINGS: usize = 256;
/// The version of the cursors Mnemo issues (an offset into a page's ranked rows).
const CURSOR_VERSION: u64 = 2;
/// The reference system's cursor version, still accepted (the next page of sessions).
const REFERENCE_CURSOR_VERSION: u64 = 1;
/// The largest offset a cursor may carry: more rows than a page of sessions can rank is a
/// forged cursor.
const SEARCH_OFFSET_MAX: u64 = 1 << 32;

failure_reasons! {
    /// Why a search failed.
    SearchFailureReason {
        /// The call was aborted.
        Aborted => "aborted",
        /// The arguments break the tool's schema: not an object of `query`, `limit` and `cursor`,
        /// query empty or too long, limit out of range, cursor empty or too long (the reference
        /// system's tool runtime reports this as `InvalidArguments` before the tool runs, as for
        /// ReadHistory).
        InvalidArguments => "invalid_arguments",
        /// The arguments fit the schema but the query cannot run: a query that looks like a
        /// credential, a cursor that is malformed or belongs to another query.
        InvalidQuery => "invalid_query",
        /// Incognito is active (or the privacy state could not be verified): nothing is read.
        IncognitoActive => "incognito_active",
    }
}

/// A search's error: `{kind: "history_search_error", ok: false, reason, message}`.
pub type SearchFailure = ToolFailure<SearchFailureReason>;

/// What a search call returns: its output, or the tool's error.
pub type SearchOutcome = Result<HistorySearch, SearchFailure>;

fn failure(reason: SearchFailureReason, message: impl Into<String>) -> SearchFailure {
    ToolFailure::new("history_search_error", reason, message)
}

fn invalid(message: impl Into<String>) -> SearchFailure {
    failure(SearchFailureReason::InvalidQuery, message)
}

/// A break of the tool's argument schema: the same reason ReadHistory gives.
fn invalid_arguments(message: impl Into<String>) -> SearchFailure {
    failure(SearchFailureReason::InvalidArguments, message)
}

/// SearchHistory's arguments, raw: checking them is part of the call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistorySearchRequest {
    /// What to look for.
    pub query: String,
    /// At most this many rows (1..=10; default 5).
    pub limit: Option<i64>,
    /// A `next_cursor` from an earlier call with the same query.
    pub cursor: Option<String>,
}

impl HistorySearchRequest {
    /// A request for `query` with the default limit.
    pub fn new(query: impl Into<String>) -> Self {
        HistorySearchRequest { query: query.into(), limit: None, cursor: None }
    }

    /// Reads the tool's JSON arguments: an object with `query` and optional `limit` and `cursor`,
    /// nothing else.
    pub fn from_tool_args(args: &Value) -> Result<HistorySearchRequest, SearchFailure> {
        let map = strict_object(args, &["query", "limit", "cursor"]).map_err(invalid_arguments)?;
        let query = string_arg(map, "query")
            .map_err(invalid_arguments)?
            .ok_or_else(|| invalid_arguments("`query` is required"))?;
        Ok(HistorySearchRequest {
            query,
            limit: integer_arg(map, "limit").map_err(invalid_arguments)?,
            cursor: string_arg(map, "cursor").map_err(invalid_arguments)?,
        })
    }

    /// The schema's checks, in the schema's units.
    fn check(&self) -> Result<(), SearchFailure> {
        check_string("query", &self.query, true, SEARCH_QUERY_CHARS_MAX).map_err(invalid_arguments)?;
        check_integer("limit", self.limit, 1, SEARCH_LIMIT_MAX).map_err(invalid_arguments)?;
        if let Some(cursor) = &self.cursor {
            check_string("cursor", cursor, true, SEARCH_CURSOR_CHARS_MAX).map_err(invalid_arguments)?;
        }
        Ok(())
    }
}

/// SearchHistory's output: `{kind: "history_search", query, truncated, next_cursor?, rows}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistorySearch {
    kind: &'static str,
    /// The trimmed query.
    pub query: String,
    /// Whether more matched than was returned (or more sessions remain unsearched).
    pub truncated: bool,
    /// Where the next page of sessions starts, when this page was searched whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The matches, best first.
    pub rows: Vec<SearchRow>,
}

/// One match.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchRow {
    /// The session.
    pub session_id: String,
    /// The message's turn (absent for a title).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The message (absent for a title).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// What matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_kind: Option<MatchKind>,
    /// The message's time (absent for a title).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_timestamp: Option<u64>,
    /// Whether the session is the one the tool runs in.
    pub is_current_session: bool,
    /// The session's title, redacted ("" when it has none).
    pub title: String,
    /// A label: `session title`, `user message`, `assistant reply`, `tool call: NAME`,
    /// `tool result: ok|error`.
    pub summary: String,
    /// Redacted text around the match.
    pub snippet: String,
    /// The session's last message time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message_at: Option<u64>,
    /// `true` on the last row when the result is truncated; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// The cursor's JSON, before base64url: version 1 (the reference system's: the next page of
/// sessions starts after this one), or version 2, which Mnemo issues: where the page of sessions
/// starts (absent: at the most recent) and how many of its ranked rows were already returned.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CursorJson {
    version: u64,
    query: String,
    #[serde(rename = "lastMessageAt", default, skip_serializing_if = "Option::is_none")]
    last_message_at: Option<f64>,
    #[serde(rename = "sessionId", default, skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
}

/// Where a call continues: the page of sessions after `start` (from the most recent without
/// one), skipping the first `offset` ranked rows of that page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct PageCursor {
    start: Option<SessionCursor>,
    offset: u64,
}

/// The cursor for `at`; `None` when it would be longer than a cursor may be (a very long
/// non-ASCII query), so the caller is told the result is truncated but must refine the query.
fn encode_cursor(folded_query: &str, at: &PageCursor) -> Option<String> {
    let json = CursorJson {
        version: CURSOR_VERSION,
        query: folded_query.to_owned(),
        last_message_at: at.start.as_ref().map(|s| s.last_message_at as f64),
        session_id: at.start.as_ref().map(|s| s.session.clone()),
        offset: Some(at.offset),
    };
    // Serialising this struct cannot fail.
    let cursor = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json).unwrap_or_default());
    (cursor.len() <= SEARCH_CURSOR_CHARS_MAX).then_some(cursor)
}

/// Decodes a cursor: canonical unpadded base64url (re-encoding gives it back), no surrounding
/// whitespace, JSON of version 1 (a session, no offset) or 2 (an optional session and an offset)
/// bound to this very (folded) query.
fn decode_cursor(cursor: &str, folded_query: &str) -> Option<PageCursor> {
    if cursor.trim() != cursor || cursor.chars().count() > SEARCH_CURSOR_CHARS_MAX {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    if URL_SAFE_NO_PAD.encode(&bytes) != cursor {
        return None;
    }
    let json: CursorJson = serde_json::from_slice(&bytes).ok()?;
    if json.query != folded_query {
        return None;
    }
    let start = match (json.last_message_at, json.session_id) {
        (Some(time), Some(session_id)) => {
            let time_ok =
                time.is_finite() && time >= 0.0 && time.fract() == 0.0 && time <= 9.007_199_254_740_991e15;
            let id_ok = !session_id.is_empty() && utf16_len(&session_id) <= 256;
            (time_ok && id_ok)
                .then_some(Some(SessionCursor { last_message_at: time as u64, session: session_id }))?
        }
        (None, None) => None,
        _ => return None,
    };
    match (json.version, json.offset) {
        (REFERENCE_CURSOR_VERSION, None) if start.is_some() => Some(PageCursor { start, offset: 0 }),
        (CURSOR_VERSION, Some(offset)) if offset <= SEARCH_OFFSET_MAX => Some(PageCursor { start, offset }),
        _ => None,
    }
}

/// A scored document.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    score: f64,
    doc: u64,
    page_index: usize,
}

/// Runs SearchHistory against the two history stages' stores.
pub fn search_history(
    messages: &dyn StateStore,
    index: &dyn StateStore,
    request: &HistorySearchRequest,
    context: &HistoryContext<'_>,
) -> Result<SearchOutcome, PipelineError> {
    if let Err(refused) = request.check() {
        return Ok(Err(refused));
    }
    if context.aborted() {
        return Ok(Err(aborted()));
    }
    let query = request.query.trim();
    if code_points(query) > SEARCH_QUERY_CHARS_MAX {
        return Ok(Err(invalid(format!("`query` is longer than {SEARCH_QUERY_CHARS_MAX} characters"))));
    }
    let limit = usize::try_from(request.limit.unwrap_or(SEARCH_LIMIT_DEFAULT)).unwrap_or(1);
    if redact_secrets(query) != query {
        return Ok(Err(invalid("query contains credential material")));
    }
    let folded = fold(query);
    let cursor = match request.cursor.as_deref().map(|c| decode_cursor(c, &folded)) {
        Some(None) => return Ok(Err(invalid("cursor is invalid or belongs to another query"))),
        Some(cursor) => cursor,
        None => None,
    };
    let current = context.current_header(messages)?;
    if context.incognito(current.as_ref()) {
        return Ok(Err(failure(
            SearchFailureReason::IncognitoActive,
            "history search is unavailable while incognito is active",
        )));
    }
    let reader = IndexReader::open(index)?;
    let scope = reader.scope_of(context.current_session, context.workspace)?;
    let at = cursor.unwrap_or_default();
    let (page, more_sessions) = session_page(messages, &reader, scope, current.as_ref(), at.start.as_ref())?;
    let Some(candidates) = score_page(&reader, scope, &page, &folded, context)? else {
        return Ok(Err(aborted()));
    };
    let skip = usize::try_from(at.offset).unwrap_or(usize::MAX).min(candidates.len());
    let (mut rows, _) = build_rows(&reader, &page, &candidates[skip..], &folded, limit, context)?;
    if context.aborted() {
        return Ok(Err(aborted()));
    }
    // NOTE: a cursor is issued whenever more rows match than were returned: the rest of this page's
    // ranked rows first, then the next page of sessions.
    let returned = skip + rows.len();
    let next = if returned < candidates.len() {
        Some(PageCursor { start: at.start.clone(), offset: returned as u64 })
    } else if more_sessions {
        page.last().map(|last| PageCursor {
            start: Some(SessionCursor {
                last_message_at: last.last_message_at.map_or(0, |t| t.0),
                session: last.session.as_str().to_owned(),
            }),
            offset: 0,
        })
    } else {
        None
    };
    let truncated = next.is_some();
    if truncated && let Some(last) = rows.last_mut() {
        last.truncated = Some(true);
    }
    let next_cursor = next.and_then(|next| encode_cursor(&folded, &next));
    Ok(Ok(HistorySearch { kind: "history_search", query: query.to_owned(), truncated, next_cursor, rows }))
}

fn aborted() -> SearchFailure {
    failure(SearchFailureReason::Aborted, "history search was aborted")
}

/// Up to [`SEARCH_SESSIONS_MAX`] logical sessions of the scope after the cursor, and whether more
/// remain.
fn session_page(
    messages: &dyn StateStore,
    reader: &IndexReader<'_>,
    scope: Scope,
    current: Option<&SessionHeader>,
    cursor: Option<&SessionCursor>,
) -> Result<(Vec<SessionHeader>, bool), PipelineError> {
    let mut page = Vec::new();
    let mut more = false;
    let mut failure = None;
    messages::visit_logical_sessions(messages, current, cursor, &mut |header| {
        match reader.in_scope(scope, &header.session) {
            Ok(true) => {}
            Ok(false) => return true,
            Err(error) => {
                failure = Some(error);
                return false;
            }
        }
        if page.len() == SEARCH_SESSIONS_MAX {
            more = true;
            return false;
        }
        page.push(header);
        true
    })?;
    failure.map_or(Ok((page, more)), Err)
}

/// Every document of the page that holds a query term, scored and sorted best first (ties: newer
/// document first); `None` if the call was aborted meanwhile.
fn score_page(
    reader: &IndexReader<'_>,
    scope: Scope,
    page: &[SessionHeader],
    folded_query: &str,
    context: &HistoryContext<'_>,
) -> Result<Option<Vec<Candidate>>, PipelineError> {
    let corpus = reader.corpus(scope)?;
    let features = reader.stats.features;
    let mut weighted = Vec::new();
    for (term, weight) in features.query_terms(folded_query) {
        let df = reader.document_frequency(scope, &term)?;
        if df > 0 {
            weighted.push((term, weight * idf(&corpus, df)));
        }
    }
    let time_boost =
        features.asks_when(folded_query).then(|| 1.0 + f64::from(features.time_boost_milli) / 1000.0);
    let bm25 = reader.stats.bm25;
    let (k1, b, average) = (bm25.k1(), bm25.b(), corpus.average_length().max(1.0));
    let mut candidates = Vec::new();
    let mut scored = 0usize;
    for (page_index, header) in page.iter().enumerate() {
        let Some(ordinal) = reader.session_ordinal(&header.session)? else {
            continue;
        };
        let excluded_turn = match (context.current_session, context.current_turn) {
            (Some(current), Some(turn)) if *current == header.session => {
                reader.turn_ordinal(ordinal, turn)?
            }
            _ => None,
        };
        let mut scores: BTreeMap<u64, f64> = BTreeMap::new();
        for (term, idf) in &weighted {
            for posting in reader.postings(ordinal, term)? {
                if Some(posting.turn) == excluded_turn {
                    continue;
                }
                let saturated = |frequency: u32, length: u32| {
                    let tf = f64::from(frequency) / f64::from(FREQUENCY_SCALE);
                    tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * f64::from(length) / average))
                };
                let mut score = saturated(posting.frequency, posting.length);
                if let Some((frequency, length)) = posting.context {
                    score += NEIGHBOUR_WEIGHT * saturated(frequency, length);
                }
                *scores.entry(posting.doc).or_default() += idf * score;
                scored += 1;
                if scored.is_multiple_of(ABORT_CHECK_POSTINGS) && context.aborted() {
                    return Ok(None);
                }
            }
        }
        if let Some(boost) = time_boost {
            for posting in reader.postings(ordinal, TIME_MARKER)? {
                if let Some(score) = scores.get_mut(&posting.doc) {
                    *score *= boost;
                }
            }
        }
        candidates.extend(scores.into_iter().map(|(doc, score)| Candidate { score, doc, page_index }));
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.doc.cmp(&a.doc)));
    Ok(Some(candidates))
}

fn idf(corpus: &Corpus, df: u64) -> f64 {
    let (n, df) = (corpus.docs as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Rows for the best candidates, within the limit and the payload cap; and whether either cut
/// the result short.
fn build_rows(
    reader: &IndexReader<'_>,
    page: &[SessionHeader],
    candidates: &[Candidate],
    folded_query: &str,
    limit: usize,
    context: &HistoryContext<'_>,
) -> Result<(Vec<SearchRow>, bool), PipelineError> {
    let mut rows = Vec::new();
    let mut payload = 0usize;
    for candidate in candidates {
        if rows.len() == limit {
            return Ok((rows, true));
        }
        let header = &page[candidate.page_index];
        let doc = reader.document(candidate.doc)?;
        let snippet = snippet(&doc.text, folded_query, reader.stats.features);
        if payload + snippet.len() > SEARCH_PAYLOAD_BYTES_MAX {
            return Ok((rows, true));
        }
        payload += snippet.len();
        rows.push(row(header, doc, snippet, context));
    }
    Ok((rows, false))
}

fn row(header: &SessionHeader, doc: IndexedDoc, snippet: String, context: &HistoryContext<'_>) -> SearchRow {
    SearchRow {
        session_id: header.session.as_str().to_owned(),
        turn_id: doc.turn_id.as_ref().map(|t| t.as_str().to_owned()),
        message_timestamp: doc.timestamp.map(|t| t.0),
        is_current_session: context.current_session == Some(&header.session),
        title: redact_secrets(header.title.as_deref().unwrap_or_default()).into_owned(),
        summary: summary(&doc),
        snippet,
        last_message_at: header.last_message_at.map(|t| t.0),
        truncated: None,
        match_kind: Some(doc.kind),
        message_id: doc.message_id,
    }
}

/// The English label of a row.
fn summary(doc: &IndexedDoc) -> String {
    match doc.kind {
        MatchKind::SessionTitle => "session title".to_owned(),
        MatchKind::UserMessage => "user message".to_owned(),
        MatchKind::AssistantMessage => "assistant reply".to_owned(),
        MatchKind::ToolIntent => format!("tool call: {}", doc.tool_label.as_deref().unwrap_or("tool")),
        MatchKind::ToolResult => {
            format!("tool result: {}", if doc.is_error == Some(true) { "error" } else { "ok" })
        }
    }
}

/// The text around the match: the whole folded query where it occurs, else the first word that
/// equals the earliest query term the text holds. The window is [`SNIPPET_CONTEXT_HALF_CHARS`] code
/// points either side of the match start, `…` marks a clipped end, whitespace runs collapse, the
/// result is redacted again and capped at [`SNIPPET_CODE_POINTS_MAX`] code points.
pub(crate) fn snippet(text: &str, folded_query: &str, features: Features) -> String {
    let folded = Folded::new(text);
    let start =
        match_offset(&folded.folded, folded_query, features).map_or(0, |offset| folded.char_at(offset));
    let from = start.saturating_sub(SNIPPET_CONTEXT_HALF_CHARS);
    let to = (start + SNIPPET_CONTEXT_HALF_CHARS).min(folded.chars.len());
    let mut window = String::new();
    if from > 0 {
        window.push('…');
    }
    window.extend(&folded.chars[from..to]);
    if to < folded.chars.len() {
        window.push('…');
    }
    let collapsed = collapse_whitespace(&window);
    cap_code_points(&redact_secrets(&collapsed), SNIPPET_CODE_POINTS_MAX)
}

/// Byte offset of the match in the folded text: the whole query, else the first word whose term
/// is the earliest query term the text holds (terms as the index analyses them).
fn match_offset(folded_text: &str, folded_query: &str, features: Features) -> Option<usize> {
    if let Some(offset) = folded_text.find(folded_query) {
        return Some(offset);
    }
    let terms = features.query_terms(folded_query);
    let mut best: Option<(usize, usize)> = None;
    for (offset, word) in folded_text.unicode_word_indices() {
        let word = prefix_at_char_boundary(word, TERM_BYTES_MAX);
        let word = if features.stem { crate::analysis::stem(word) } else { word.to_owned() };
        if let Some(rank) = terms.iter().position(|(t, _)| *t == word)
            && best.is_none_or(|(best_rank, _)| rank < best_rank)
        {
            best = Some((rank, offset));
            if rank == 0 {
                break;
            }
        }
    }
    best.map(|(_, offset)| offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bind_to_their_query() {
        let start = SessionCursor { last_message_at: 42, session: "s1".to_owned() };
        for at in
            [PageCursor { start: Some(start.clone()), offset: 0 }, PageCursor { start: None, offset: 12 }]
        {
            let cursor = encode_cursor("deploy", &at).unwrap();
            assert_eq!(decode_cursor(&cursor, "deploy"), Some(at));
            assert_eq!(decode_cursor(&cursor, "other"), None);
            assert_eq!(decode_cursor(&format!(" {cursor}"), "deploy"), None);
            assert_eq!(decode_cursor(&format!("{cursor}="), "deploy"), None);
        }
        assert_eq!(decode_cursor("!!!", "deploy"), None);
        // The reference system's version 1 cursor: the next page of sessions.
        let v1 =
            URL_SAFE_NO_PAD.encode(r#"{"version":1,"query":"deploy","lastMessageAt":42,"sessionId":"s1"}"#);
        assert_eq!(decode_cursor(&v1, "deploy"), Some(PageCursor { start: Some(start), offset: 0 }));
        let forged = URL_SAFE_NO_PAD.encode(r#"{"version":1,"query":"deploy","offset":3}"#);
        assert_eq!(decode_cursor(&forged, "deploy"), None);
        assert_eq!(encode_cursor(&"🙂".repeat(500), &PageCursor::default()), None);
    }

    #[test]
    fn snippets_center_on_the_match_and_are_capped() {
        let text = format!("{} NEEDLE here {}", "a ".repeat(100), "b ".repeat(200));
        let cut = snippet(&text, "needle", Features::DEFAULT);
        assert!(cut.starts_with('…'), "{cut}");
        assert!(cut.contains("NEEDLE here"), "{cut}");
        assert!(cut.ends_with('…'));
        assert!(code_points(&cut) <= SNIPPET_CODE_POINTS_MAX);
        assert_eq!(snippet("short text", "absent", Features::DEFAULT), "short text");
    }

    #[test]
    fn snippets_prefer_the_whole_query_then_the_rarest_term() {
        let none = Features::NONE;
        assert_eq!(match_offset("alpha beta gamma", "beta gamma", none), Some(6));
        assert_eq!(match_offset("alpha beta gamma", "gamma alpha", none), Some(11));
        assert_eq!(match_offset("attest test", "test", none), Some(2));
        assert_eq!(match_offset("we went hiking", "hikes", Features::DEFAULT), Some(8));
    }
}
