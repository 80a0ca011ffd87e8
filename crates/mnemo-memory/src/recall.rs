//! Recall (beyond the reference system, which stores items nothing reads): a pull search for
//! the model (`RecallMemory {query, limit}`) and a push block for the next request, both over
//! the items a session may see: global ones and its own workspace's, never archived, never
//! another workspace's.

use std::collections::BTreeSet;

use mnemo_core::{
    Content, ItemId, LifecycleState, MemoryItem, MemoryKind, MemoryScope, SessionId, SourcePointer,
    TimestampMs, WorkspaceId,
};
use mnemo_pipeline::StateStore;
use mnemo_pipeline::stages::session_catalog::SessionSummary;
use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, invalid};
use crate::extract::SessionEvent;
use crate::state::{self, KEY_TAG, KeyEntry, SCOPE_TAG, STANDING_TAG};
use crate::terms::{is_stop_word, terms};

/// Results of a recall when no limit is given.
pub const RECALL_RESULTS_DEFAULT: u64 = 10;
/// Most results of one recall.
pub const RECALL_RESULTS_MAX: u64 = 50;
/// Most items of one scope read for content matching; past it only key matches are found.
pub const RECALL_SCAN_ITEMS_MAX: usize = 10_000;
/// Longest recall query, in code points.
pub const RECALL_QUERY_CODE_POINTS_MAX: usize = 4000;
/// Push-block budget when the pipeline config names none, in tokens.
pub const RECALL_BUDGET_TOKENS_DEFAULT: u64 = 512;

/// Largest budget a session-start block may ask for, in tokens.
pub const START_BLOCK_TOKENS_MAX: u64 = 16_000;

/// The session whose recent turns a session-start block is matched against when the host gives no
/// query and the store does not hold the starting session: the first of `sessions` (most recently
/// active first) in `workspace` that is neither a subagent's nor incognito.
pub fn start_block_session<'a>(
    workspace: &WorkspaceId,
    sessions: impl IntoIterator<Item = &'a SessionSummary>,
) -> Option<SessionId> {
    sessions
        .into_iter()
        .find(|summary| {
            summary.workspace.as_ref() == Some(workspace) && !summary.subagent && !summary.incognito
        })
        .map(|summary| summary.session.clone())
}
/// The `memory-index` stage's configuration key for the push-block budget (a positive integer).
pub const RECALL_BUDGET_CONFIG_KEY: &str = "recall_budget_tokens";
/// Recent text events a push recall without a query matches against.
pub const RECALL_RECENT_EVENTS_MAX: usize = 8;
/// Characters per token in the budget estimate.
const CHARS_PER_TOKEN: usize = 4;
/// Most standing facts of one scope a push block reads.
pub const RECALL_STANDING_ITEMS_MAX: usize = 256;
/// The share of a push block's budget standing facts may fill, in percent; the rest is kept for
/// the items relevant to the recent turns (and standing facts past it are left out).
pub const RECALL_STANDING_BUDGET_PERCENT: u64 = 60;

/// Whether items of `kind` are standing facts (decision 0156): who the user is and how they want
/// work done (identity, preferences and standing instructions), which hold whatever the session
/// is about.
pub(crate) fn is_standing(kind: MemoryKind) -> bool {
    matches!(kind, MemoryKind::Identity | MemoryKind::Preference)
}

/// The pull tool's arguments: `RecallMemory {query, limit}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallMemory {
    /// What to look for.
    pub query: String,
    /// 1 to 50; 10 when absent.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// A recalled item with its source pointers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecalledItem {
    /// The item.
    pub item: ItemId,
    /// Its version.
    pub version: u64,
    /// Its content.
    pub content: String,
    /// What it is about.
    pub kind: MemoryKind,
    /// Where it is visible.
    pub scope: MemoryScope,
    /// Its keys' display texts.
    pub keys: Vec<String>,
    /// Where it was learned.
    pub sources: Vec<SourcePointer>,
    /// The match score (key matches weigh 3, content words 1).
    pub score: u64,
    /// Whether a push block included it as a standing fact (identity or preference), whatever
    /// its score.
    pub standing: bool,
}

/// A block of recalled items for the next request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecallBlock {
    /// The items included, best first.
    pub items: Vec<RecalledItem>,
    /// The rendered block (empty when no item is included).
    pub text: String,
    /// Its estimated size in tokens.
    pub tokens: u64,
    /// Relevant items (standing facts, items matching the recent turns) left out to fit the
    /// budget; the block's text ends by saying how many when there are any.
    pub left_out: u64,
}

/// The words of a query as the key index holds them (lowercased, whole): where key matches are
/// looked up.
fn words(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| w.chars().count() >= 3 && !is_stop_word(w))
        .map(str::to_owned)
        .collect()
}

fn visible(scope: &str, workspace: Option<&str>) -> bool {
    scope == "global" || workspace.is_some_and(|w| w == scope)
}

/// Key matches weigh 3, content terms 1. Both compare terms ([`terms`]): stemmed, with one name
/// for the coding terms that have several, so a paraphrase of the item's words finds it.
fn score(item: &MemoryItem, query: &BTreeSet<String>) -> u64 {
    let keys = item
        .fields
        .keys
        .iter()
        .filter(|k| {
            let key = terms(&k.normalized_key);
            !key.is_empty() && key.is_subset(query)
        })
        .count() as u64;
    let content = terms(&item.fields.content).intersection(query).count() as u64;
    keys * 3 + content
}

/// The ids of visible, active items whose keys match a query token, plus (up to
/// [`RECALL_SCAN_ITEMS_MAX`] per scope) every visible active item, for content matching.
fn candidates(
    store: &dyn StateStore,
    workspace: Option<&str>,
    query: &BTreeSet<String>,
) -> Result<BTreeSet<String>, MemoryError> {
    let mut ids = BTreeSet::new();
    let mut failure = None;
    for token in query {
        let prefix = [KEY_TAG, token.as_bytes(), b"\0"].concat();
        store.scan_prefix(&prefix, &mut |key, value| {
            match state::decode::<KeyEntry>(value) {
                Ok(entry)
                    if entry.lifecycle == LifecycleState::Active && visible(&entry.scope, workspace) =>
                {
                    if let Ok(id) = std::str::from_utf8(&key[prefix.len()..]) {
                        ids.insert(id.to_owned());
                    }
                }
                Ok(_) => {}
                Err(e) => failure = Some(e),
            }
            failure.is_none()
        })?;
    }
    let scopes = std::iter::once("global").chain(workspace);
    for scope in scopes {
        let prefix = [SCOPE_TAG, scope.as_bytes(), b"\0"].concat();
        let mut seen = 0;
        store.scan_prefix(&prefix, &mut |key, value| {
            seen += 1;
            if value == b"active"
                && let Ok(id) = std::str::from_utf8(&key[prefix.len()..])
            {
                ids.insert(id.to_owned());
            }
            seen < RECALL_SCAN_ITEMS_MAX
        })?;
    }
    failure.map_or(Ok(ids), |e| Err(e.into()))
}

fn ranked(
    store: &dyn StateStore,
    workspace: Option<&WorkspaceId>,
    query_text: &str,
) -> Result<Vec<(u64, TimestampMs, MemoryItem)>, MemoryError> {
    let workspace_scope = workspace.map(|w| MemoryScope::Workspace(w.clone()).as_text());
    let query = terms(query_text);
    let mut out = Vec::new();
    for id in candidates(store, workspace_scope.as_deref(), &words(query_text))? {
        let id = ItemId::new(id).map_err(|e| MemoryError::State(state::damaged(e.to_string())))?;
        let Some(item) = state::item(store, &id)? else { continue };
        // NOTE: the indexes already filter by scope; the item itself is checked again so that a
        // damaged index can never leak another workspace's item.
        if item.lifecycle != LifecycleState::Active
            || !visible(&item.fields.scope.as_text(), workspace_scope.as_deref())
        {
            continue;
        }
        let score = score(&item, &query);
        if score > 0 {
            out.push((score, item.updated_at, item));
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.item.cmp(&b.2.item)));
    Ok(out)
}

fn recalled(score: u64, item: MemoryItem) -> RecalledItem {
    RecalledItem {
        standing: false,
        item: item.item,
        version: item.version,
        content: item.fields.content,
        kind: item.fields.kind,
        scope: item.fields.scope,
        keys: item.fields.keys.into_iter().map(|k| k.key).collect(),
        sources: item.fields.sources,
        score,
    }
}

/// The pull route: items matching `request.query` that a session of `workspace` may see.
pub fn recall(
    store: &dyn StateStore,
    workspace: Option<&WorkspaceId>,
    request: &RecallMemory,
) -> Result<Vec<RecalledItem>, MemoryError> {
    if request.query.trim().is_empty() || request.query.chars().count() > RECALL_QUERY_CODE_POINTS_MAX {
        return invalid("query", format!("must be 1 to {RECALL_QUERY_CODE_POINTS_MAX} code points"));
    }
    let limit = request.limit.unwrap_or(RECALL_RESULTS_DEFAULT);
    if limit == 0 || limit > RECALL_RESULTS_MAX {
        return invalid("limit", format!("must be 1 to {RECALL_RESULTS_MAX}"));
    }
    Ok(ranked(store, workspace, &request.query)?
        .into_iter()
        .take(limit as usize)
        .map(|(score, _, item)| recalled(score, item))
        .collect())
}

/// The push-block budget a pipeline configures: the `memory-index` stage's
/// [`RECALL_BUDGET_CONFIG_KEY`] (its factory refuses anything but a positive integer), else
/// [`RECALL_BUDGET_TOKENS_DEFAULT`], also when the pipeline runs no `memory-index` stage.
pub fn recall_budget_tokens(memory_index_config: Option<&toml::Table>) -> u64 {
    memory_index_config
        .and_then(|config| config.get(RECALL_BUDGET_CONFIG_KEY))
        .and_then(toml::Value::as_integer)
        .and_then(|tokens| u64::try_from(tokens).ok())
        .filter(|tokens| *tokens > 0)
        .unwrap_or(RECALL_BUDGET_TOKENS_DEFAULT)
}

/// The text a push recall matches items against: the caller's `query` when it gives one, else the
/// session's recent turns, the text of its last [`RECALL_RECENT_EVENTS_MAX`] final, model-visible
/// text events, newest first, one per line. `session_events` is read only when there is no query.
pub fn recall_text(
    query: Option<&str>,
    session_events: impl FnOnce() -> Result<Vec<SessionEvent>, MemoryError>,
) -> Result<String, MemoryError> {
    if let Some(query) = query {
        return Ok(query.to_owned());
    }
    let events = session_events()?;
    let texts: Vec<&str> = events
        .iter()
        .rev()
        .filter(|e| e.event.is_model_visible() && !e.event.partial)
        .filter_map(|e| match &e.event.content {
            Some(Content::Text(text)) => Some(text.text.as_str()),
            _ => None,
        })
        .take(RECALL_RECENT_EVENTS_MAX)
        .collect();
    Ok(texts.join("\n"))
}

/// The standing facts a session of `workspace` sees (decision 0156): identity first, then
/// preferences and standing instructions; within each, the workspace's before global ones, then
/// the most recently updated, then by id.
fn standing(store: &dyn StateStore, workspace: Option<&WorkspaceId>) -> Result<Vec<MemoryItem>, MemoryError> {
    let workspace_scope = workspace.map(|w| MemoryScope::Workspace(w.clone()).as_text());
    let mut out = Vec::new();
    for scope in std::iter::once("global").chain(workspace_scope.as_deref()) {
        let prefix = [STANDING_TAG, scope.as_bytes(), b"\0"].concat();
        let mut ids = Vec::new();
        store.scan_prefix(&prefix, &mut |key, _| {
            if let Ok(id) = std::str::from_utf8(&key[prefix.len()..]) {
                ids.push(id.to_owned());
            }
            ids.len() < RECALL_STANDING_ITEMS_MAX
        })?;
        for id in ids {
            let id = ItemId::new(id).map_err(|e| MemoryError::State(state::damaged(e.to_string())))?;
            let Some(item) = state::item(store, &id)? else { continue };
            // NOTE: checked again on the item, so a damaged index never leaks another workspace's item.
            if item.lifecycle == LifecycleState::Active
                && is_standing(item.fields.kind)
                && visible(&item.fields.scope.as_text(), workspace_scope.as_deref())
            {
                out.push(item);
            }
        }
    }
    out.sort_by(|a, b| {
        let rank =
            |i: &MemoryItem| (i.fields.kind != MemoryKind::Identity, i.fields.scope == MemoryScope::Global);
        rank(a).cmp(&rank(b)).then(b.updated_at.cmp(&a.updated_at)).then(a.item.cmp(&b.item))
    });
    Ok(out)
}

/// The push route: the standing facts first (within [`RECALL_STANDING_BUDGET_PERCENT`] of the
/// budget), then the best items for `recent_text` (the session's recent turns), everything that
/// fits in `budget_tokens`, rendered as a block.
pub fn recall_block(
    store: &dyn StateStore,
    workspace: Option<&WorkspaceId>,
    recent_text: &str,
    budget_tokens: u64,
) -> Result<RecallBlock, MemoryError> {
    let query = terms(recent_text);
    let standing_budget = budget_tokens * RECALL_STANDING_BUDGET_PERCENT / 100;
    let mut block = BlockLines::new();
    for item in standing(store, workspace)? {
        let score = score(&item, &query);
        block.add(item, score, true, standing_budget);
    }
    for (score, _, item) in ranked(store, workspace, recent_text)? {
        block.add(item, score, false, budget_tokens);
    }
    Ok(block.finish(budget_tokens))
}

/// A push block as it is filled: each item with its line, and the relevant items that did not fit.
struct BlockLines {
    items: Vec<(RecalledItem, String)>,
    /// Characters of the header and the lines so far, so that a size check does not render the block.
    chars: usize,
    /// A standing fact past the standing share may still come in as a relevant item: a set, so
    /// that it is not counted as left out then.
    left_out: BTreeSet<ItemId>,
}

impl BlockLines {
    const HEADER: &str =
        "Long-term memory (items recalled for this session; verify before relying on them):\n";

    fn new() -> BlockLines {
        BlockLines { items: Vec::new(), chars: Self::HEADER.chars().count(), left_out: BTreeSet::new() }
    }

    /// The block's size in tokens with `extra` (a line or the closing note) after its lines.
    fn tokens_with(&self, extra: &str) -> u64 {
        (self.chars + extra.chars().count()).div_ceil(CHARS_PER_TOKEN) as u64
    }

    fn text(&self, note: &str) -> String {
        let mut text = String::from(Self::HEADER);
        self.items.iter().for_each(|(_, line)| text.push_str(line));
        text.push_str(note);
        text
    }

    /// Adds the item if the block with it stays within `budget` tokens; else counts it as left out.
    fn add(&mut self, item: MemoryItem, score: u64, is_standing: bool, budget: u64) {
        if self.items.iter().any(|(given, _)| given.item == item.item) {
            return;
        }
        let line =
            format!("- [{}] {} (memory {})\n", kind_name(item.fields.kind), item.fields.content, item.item);
        if self.tokens_with(&line) > budget {
            self.left_out.insert(item.item);
            return;
        }
        self.left_out.remove(&item.item);
        let mut entry = recalled(score, item);
        entry.standing = is_standing;
        self.chars += line.chars().count();
        self.items.push((entry, line));
    }

    /// The block, ending with a line that says how many relevant items were left out, if any: the
    /// last items given make room for that line when the budget is full.
    fn finish(mut self, budget_tokens: u64) -> RecallBlock {
        let note = |left_out: u64| match left_out {
            0 => String::new(),
            n => format!("({n} more relevant item(s) left out to fit; a recall query finds them)\n"),
        };
        let left_out = |block: &BlockLines| block.left_out.len() as u64;
        while left_out(&self) > 0
            && self.tokens_with(&note(left_out(&self))) > budget_tokens
            && let Some((last, line)) = self.items.pop()
        {
            self.chars -= line.chars().count();
            self.left_out.insert(last.item);
        }
        let left_out = left_out(&self);
        if self.items.is_empty() {
            return RecallBlock { items: Vec::new(), text: String::new(), tokens: 0, left_out };
        }
        let text = self.text(&note(left_out));
        let tokens = estimate_tokens(&text);
        RecallBlock { items: self.items.into_iter().map(|(item, _)| item).collect(), text, tokens, left_out }
    }
}

fn estimate_tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(CHARS_PER_TOKEN) as u64
}

fn kind_name(kind: MemoryKind) -> &'static str {
    match kind {
        MemoryKind::Preference => "preference",
        MemoryKind::Identity => "identity",
        MemoryKind::Context => "context",
        MemoryKind::Knowledge => "knowledge",
        MemoryKind::Failure => "failure",
        _ => "note",
    }
}

#[cfg(test)]
mod choice_tests {
    use super::*;
    use mnemo_core::{
        Author, EventId, InvocationId, ModelVisibility, Role, RunId, RuntimeEvent, SessionId, TextContent,
        TimestampMs, TurnId,
    };

    fn event(n: u64, text: &str, edit: impl FnOnce(&mut RuntimeEvent)) -> SessionEvent {
        let mut event = RuntimeEvent::new(
            EventId::new(format!("e{n}")).unwrap(),
            InvocationId::new("i").unwrap(),
            RunId::new("r").unwrap(),
            SessionId::new("s1").unwrap(),
            TurnId::new("t1").unwrap(),
            TimestampMs(n),
            Role::User,
            Author::User,
        );
        event.content = Some(Content::Text(TextContent::new(text)));
        edit(&mut event);
        SessionEvent { ordinal: n, event }
    }

    #[test]
    fn a_query_wins_and_the_session_is_not_read() {
        let text = recall_text(Some("deploy plan"), || panic!("the events were read")).unwrap();
        assert_eq!(text, "deploy plan");
    }

    #[test]
    fn without_a_query_the_last_final_visible_texts_match_newest_first() {
        let mut events: Vec<SessionEvent> =
            (1..=10).map(|n| event(n, &format!("text {n}"), |_| {})).collect();
        events.push(event(11, "streaming", |e| e.partial = true));
        events.push(event(12, "hidden", |e| e.model_visibility = Some(ModelVisibility::Hidden)));
        let text = recall_text(None, || Ok(events)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), RECALL_RECENT_EVENTS_MAX);
        assert_eq!(lines[..3], ["text 10", "text 9", "text 8"]);
        assert_eq!(lines.last(), Some(&"text 3"));
    }

    #[test]
    fn the_budget_comes_from_the_memory_index_config() {
        let table = |text: &str| -> toml::Table { text.parse().unwrap() };
        assert_eq!(recall_budget_tokens(Some(&table("recall_budget_tokens = 64"))), 64);
        assert_eq!(recall_budget_tokens(Some(&table(""))), RECALL_BUDGET_TOKENS_DEFAULT);
        assert_eq!(recall_budget_tokens(None), RECALL_BUDGET_TOKENS_DEFAULT);
        assert!(crate::index::factory(&table("recall_budget_tokens = 0")).is_err());
    }
}
