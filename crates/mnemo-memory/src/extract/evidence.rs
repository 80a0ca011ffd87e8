//! The evidence admission domain (memory.md §3.7), the interpretation context (§3.6) and the
//! `search_required` localization (§3.9 stage 1b).

use mnemo_core::{Author, Content, Digest, Role, RuntimeEvent, SessionId, SourcePointer, TurnId};
use serde::Serialize;

use crate::error::MemoryError;
use crate::extract::seams::{ContextLine, EvidenceView};
use crate::text::{code_points, normalize_evidence, normalize_evidence_with_breaks, take_code_points};

/// Longest evidence text shown for one record, in code points.
pub const EVIDENCE_TEXT_CODE_POINTS_MAX: usize = 4000;
/// Shortest cap evidence texts are shrunk to when fitting the budget, in code points.
pub const EVIDENCE_TEXT_CODE_POINTS_MIN: usize = 64;
/// Largest rendered evidence JSON, in characters.
pub const EVIDENCE_JSON_CHARS_MAX: usize = 12_000;
/// Most turns a localization search returns.
pub const LOCALIZED_TURNS_MAX: usize = 7;
/// Longest context line text, in code points.
pub const CONTEXT_LINE_CODE_POINTS_MAX: usize = 2000;
/// Largest interpretation context, in code points.
pub const CONTEXT_CODE_POINTS_MAX: usize = 12_000;
/// Shortest quote admitted, in code points.
pub const QUOTE_CODE_POINTS_MIN: usize = 4;

const MINUTE_MS: u64 = 60_000;

/// A RuntimeEvent with its session-wide ordinal (1 for the session's first RuntimeEvent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEvent {
    /// 1-based position among the session's RuntimeEvents.
    pub ordinal: u64,
    /// The event.
    pub event: RuntimeEvent,
}

pub(crate) fn floor_minute(ms: u64) -> u64 {
    ms - ms % MINUTE_MS
}

fn text_of(event: &RuntimeEvent) -> Option<&str> {
    match &event.content {
        Some(Content::Text(text)) if !event.partial && !text.text.is_empty() => Some(text.text.as_str()),
        _ => None,
    }
}

/// User-authored user text: the only evidence there is. A text that is wholly one markup element
/// (`<tag>…</tag>`) is what the user's tools put beside the request, never what the user typed: an
/// IDE's `<ide_opened_file>` or `<ide_selection>` (the selected code with it), a
/// `<system-reminder>`. Claude Code writes those as text blocks of the user's own line.
pub(crate) fn user_text(event: &RuntimeEvent) -> Option<&str> {
    (event.role == Role::User && event.author == Author::User)
        .then(|| text_of(event))
        .flatten()
        .filter(|text| !is_one_element(text))
}

/// Whether `text`, trimmed, is `<name>…</name>` for one tag name of letters, digits, `_` and `-`.
fn is_one_element(text: &str) -> bool {
    let text = text.trim();
    let Some(rest) = text.strip_prefix('<') else { return false };
    let Some(end) = rest.find('>') else { return false };
    let name = &rest[..end];
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && text.ends_with(&format!("</{name}>"))
}

/// Text that may enter the interpretation context or a localization search, with its role.
pub(crate) fn context_text(event: &RuntimeEvent) -> Option<(&'static str, &str)> {
    if event.role == Role::User && event.author == Author::User {
        return text_of(event).map(|t| ("user", t));
    }
    if event.role == Role::Model && event.author == Author::Agent {
        return text_of(event).map(|t| ("assistant", t));
    }
    None
}

/// The coverage hash: SHA-256 of the JSON array of `[ordinal, eventId]` pairs.
pub(crate) fn coverage_hash(entries: &[&SessionEvent]) -> Result<Digest, MemoryError> {
    let pairs: Vec<(u64, &str)> = entries.iter().map(|e| (e.ordinal, e.event.id.as_str())).collect();
    let bytes = mnemo_core::canonical_json(&pairs)?;
    Ok(Digest::sha256(&bytes))
}

/// One evidence record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Evidence {
    pub source_ref: String,
    pub full: String,
    pub text: String,
    pub ordinal: u64,
    pub source: SourcePointer,
    pub observed_at: u64,
    pub requested_turn: bool,
    first_hit: Option<usize>,
    /// Char offsets in `full` of the spaces that stand for a line break.
    breaks: Vec<usize>,
    /// The char offset in `full` where `text` starts.
    start: usize,
}

impl Evidence {
    fn view(&self) -> EvidenceView {
        // `text` is the chars of `full` from `start` on: the breaks inside it, as byte offsets.
        let line_breaks = self
            .text
            .char_indices()
            .enumerate()
            .filter(|(i, _)| self.breaks.binary_search(&(self.start + i)).is_ok())
            .map(|(_, (byte, _))| byte)
            .collect();
        EvidenceView {
            source_ref: self.source_ref.clone(),
            kind: "user_message",
            observed_at: self.observed_at,
            text: self.text.clone(),
            requested_turn: self.requested_turn,
            line_breaks,
        }
    }

    /// Bounds the text to `cap` code points: a window starting about a third of the cap before
    /// the first search-term hit, or the head.
    fn bound(&mut self, cap: usize) {
        let len = code_points(&self.full);
        if len <= cap {
            self.text = self.full.clone();
            self.start = 0;
            return;
        }
        let start = self.first_hit.map_or(0, |hit| hit.saturating_sub(cap / 3).min(len - cap));
        self.text = self.full.chars().skip(start).take(cap).collect();
        self.start = start;
    }
}

/// The evidence of `entries`: user-authored user text, normalized; `terms` centre long texts.
pub(crate) fn collect(
    entries: &[&SessionEvent],
    requested_turn: Option<&TurnId>,
    terms: Option<&[String]>,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    for entry in entries {
        let Some(text) = user_text(&entry.event) else { continue };
        let (full, breaks) = normalize_evidence_with_breaks(text);
        if full.is_empty() {
            continue;
        }
        let lower = full.to_lowercase();
        let first_hit = terms.and_then(|terms| {
            terms
                .iter()
                .filter_map(|t| lower.find(&t.to_lowercase()))
                .min()
                .map(|byte| lower[..byte].chars().count())
        });
        let event = &entry.event;
        let mut evidence = Evidence {
            source_ref: format!("event:{}", event.id),
            text: String::new(),
            full,
            ordinal: entry.ordinal,
            source: SourcePointer {
                session: event.session_id.clone(),
                run: event.run_id.clone(),
                turn: event.turn_id.clone(),
                event: event.id.clone(),
            },
            observed_at: floor_minute(event.ts.0),
            requested_turn: requested_turn == Some(&event.turn_id),
            first_hit,
            breaks,
            start: 0,
        };
        evidence.bound(EVIDENCE_TEXT_CODE_POINTS_MAX);
        out.push(evidence);
    }
    out
}

fn rendered_chars(views: &[EvidenceView]) -> usize {
    serde_json::to_string(views).map_or(usize::MAX, |s| s.chars().count())
}

fn fits(evidence: &mut [Evidence], priority_cap: usize, other_cap: Option<usize>) -> bool {
    let mut views = Vec::new();
    for record in evidence.iter_mut() {
        match (record.requested_turn, other_cap) {
            (true, _) => record.bound(priority_cap),
            (false, Some(cap)) => record.bound(cap),
            (false, None) => continue,
        }
        views.push(record.view());
    }
    rendered_chars(&views) <= EVIDENCE_JSON_CHARS_MAX
}

/// The largest cap in `[min, max]` for which `check` holds, if any (binary search).
fn largest_cap(mut check: impl FnMut(usize) -> bool) -> Option<usize> {
    let (mut low, mut high) = (EVIDENCE_TEXT_CODE_POINTS_MIN, EVIDENCE_TEXT_CODE_POINTS_MAX);
    if !check(low) {
        return None;
    }
    while low < high {
        let mid = (low + high).div_ceil(2);
        if check(mid) { low = mid } else { high = mid - 1 }
    }
    Some(low)
}

/// Fits the evidence into the JSON budget: requested-turn records first, then every other
/// record alongside by shrinking only their cap. False when some record cannot be represented
/// (the cursor must not advance over user text the model never saw).
pub(crate) fn fit(evidence: &mut [Evidence]) -> bool {
    let Some(priority) = largest_cap(|cap| fits(evidence, cap, None)) else {
        return false;
    };
    let Some(other) = largest_cap(|cap| fits(evidence, priority, Some(cap))) else {
        return false;
    };
    fits(evidence, priority, Some(other))
}

pub(crate) fn views(evidence: &[Evidence]) -> Vec<EvidenceView> {
    evidence.iter().map(Evidence::view).collect()
}

/// The interpretation context of `entries`: user and assistant text lines, each at most 2000
/// code points, at most 12,000 code points in all (later lines are dropped first... the head
/// and tail are kept, with a marker between).
pub(crate) fn context(entries: &[&SessionEvent]) -> Vec<ContextLine> {
    let lines: Vec<ContextLine> = entries
        .iter()
        .filter_map(|e| {
            context_text(&e.event).map(|(role, text)| ContextLine {
                role,
                source_ref: format!("event:{}", e.event.id),
                text: take_code_points(&normalize_evidence(text), CONTEXT_LINE_CODE_POINTS_MAX),
            })
        })
        .collect();
    let total: usize = lines.iter().map(|l| code_points(&l.text)).sum();
    if total <= CONTEXT_CODE_POINTS_MAX {
        return lines;
    }
    let (mut head, mut tail, mut used) = (Vec::new(), Vec::new(), 0);
    let (mut front, mut back) = (0, lines.len());
    while front < back {
        let take_front = head.len() <= tail.len();
        let line = if take_front { &lines[front] } else { &lines[back - 1] };
        used += code_points(&line.text);
        if used > CONTEXT_CODE_POINTS_MAX {
            break;
        }
        if take_front {
            head.push(line.clone());
            front += 1;
        } else {
            tail.push(line.clone());
            back -= 1;
        }
    }
    head.push(ContextLine {
        role: "user",
        source_ref: String::new(),
        text: "[localized context truncated]".to_owned(),
    });
    tail.reverse();
    head.extend(tail);
    head
}

/// A localization search (memory.md §3.9 stage 1b).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalizationQuery {
    /// Terms, lower-cased.
    pub terms: Vec<String>,
    /// Search user messages.
    pub user: bool,
    /// Search assistant messages.
    pub assistant: bool,
    /// Exclusive lower bound: the latest policy-denied checkpoint boundary (never the cursor).
    pub after_ordinal: u64,
    /// Inclusive upper bound: the range's boundary.
    pub through_ordinal: u64,
}

/// Finds the turns a `search_required` answer points at. The default scans the session's
/// events; a host may answer from a history search index instead.
pub trait LocalizationSearch: Send + Sync + std::fmt::Debug {
    /// Ordinals of the events of at most 7 localized turns, chronological; empty when no turn
    /// matches.
    fn localize(
        &self,
        session: &SessionId,
        events: &[SessionEvent],
        query: &LocalizationQuery,
    ) -> Result<Vec<u64>, MemoryError>;
}

/// The reference localization: a turn's score is the number of terms contained
/// (case-insensitively) in its eligible events of an allowed role; hits by score, then most
/// recent; each hit brings its neighbours, up to 7 turns.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScanLocalization;

impl LocalizationSearch for ScanLocalization {
    fn localize(
        &self,
        _session: &SessionId,
        events: &[SessionEvent],
        query: &LocalizationQuery,
    ) -> Result<Vec<u64>, MemoryError> {
        let mut turns: Vec<(Vec<u64>, std::collections::BTreeSet<usize>)> = Vec::new();
        let mut last_key = None;
        for entry in events {
            if entry.ordinal <= query.after_ordinal || entry.ordinal > query.through_ordinal {
                continue;
            }
            let Some((role, text)) = context_text(&entry.event) else { continue };
            let key = (entry.event.run_id.clone(), entry.event.turn_id.clone());
            if last_key.as_ref() != Some(&key) {
                turns.push((Vec::new(), std::collections::BTreeSet::new()));
                last_key = Some(key);
            }
            let allowed = (role == "user" && query.user) || (role == "assistant" && query.assistant);
            let lower = text.to_lowercase();
            if let Some(turn) = turns.last_mut() {
                turn.0.push(entry.ordinal);
                if allowed {
                    turn.1
                        .extend((0..query.terms.len()).filter(|i| lower.contains(query.terms[*i].as_str())));
                }
            }
        }
        let mut hits: Vec<usize> = (0..turns.len()).filter(|i| !turns[*i].1.is_empty()).collect();
        hits.sort_by(|a, b| turns[*b].1.len().cmp(&turns[*a].1.len()).then(b.cmp(a)));
        let mut chosen = std::collections::BTreeSet::new();
        'hits: for hit in hits {
            for index in [Some(hit), hit.checked_sub(1), Some(hit + 1)].into_iter().flatten() {
                if chosen.len() >= LOCALIZED_TURNS_MAX {
                    break 'hits;
                }
                if index < turns.len() {
                    chosen.insert(index);
                }
            }
        }
        Ok(chosen.into_iter().flat_map(|i| turns[i].0.clone()).collect())
    }
}
