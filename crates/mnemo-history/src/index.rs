//! The `history-search` stage: an inverted index over the searchable text of every session's
//! titles and visible messages, with the statistics BM25 needs.
//!
//! A document is a session title or a message with searchable text (spec §3.3 step 6d; see
//! [`crate::messages::VisibleMessage::searchable_text`]), redacted *before* it is indexed, so a
//! secret is never a term. Terms are the Unicode words of the folded text ([`crate::text`]).
//! Documents are numbered in log order, so a higher number is a newer document. A message replaced
//! by a later event, or a title changed, has its old document's postings removed.
//!
//! Postings are grouped by session, so a query touches only the sessions of the page it searches
//! (at most 200), however large the corpus. Document frequencies and the corpus size and length
//! are kept twice: for the whole store, and for each workspace group (the sessions opened in one
//! workspace; sessions without a workspace form group 0), so that a search from a session ranks
//! with its own workspace's statistics ([`Scope`]). A session opened again in another workspace
//! moves its documents' counts to the new group. A session's postings of one term are packed into blocks read with point lookups, not
//! range scans: an LSM tree answers a lookup from its bloom filters, while a scan must seek every
//! table that overlaps the range.
//!
//! Keys (`\0` separates; ids and terms never contain NUL):
//! - `s` -> statistics: documents, total terms, next document number, next session ordinal,
//!   workspace groups assigned (u64 BE each), then BM25 `k1` and `b` in thousandths (u32 BE each);
//! - `W\0<workspace>` -> the workspace's group (u32 BE, from 1);
//! - `w\0<session>` -> the session's group (u32 BE), absent for group 0 (no workspace);
//! - `g\0<group u32 BE>` -> the group's documents and total terms (u64 BE each);
//! - `F\0<group u32 BE><term>` -> how many of the group's documents hold the term (u64 BE);
//! - `o\0<session>` -> the session's ordinal and its next turn ordinal (u32 BE each);
//! - `u\0<session ordinal u32 BE><turn>` -> the turn's ordinal in its session (u32 BE, from 1);
//! - `p\0<session ordinal u32 BE><term>\0<block u32 BE>` -> a flag byte (1: another block of the
//!   pair follows, 0: this is the last), then up to [`POSTING_BLOCK_ENTRIES_MAX`] postings in
//!   document order, each the gap from the block's previous document number (the number itself
//!   for the first; LEB128 u64), term frequency, document length and turn ordinal (0 for a title)
//!   (LEB128 u32 each). Blocks are numbered from 0; a query reads them in turn up to the last;
//! - `f\0<term>` -> how many documents hold the term (u64 BE);
//! - `d\0<document u64 BE>` -> [`IndexedDoc`] (canonical JSON);
//! - `k\0<session>\0<message id>` and `t\0<session>` -> the document of a message, of a title.

use std::collections::{BTreeMap, HashMap};

use mnemo_core::redaction::redact_secrets;
use mnemo_core::{Content, Record, RuntimeEvent, SessionId, TimestampMs, TurnId, WorkspaceId};
use mnemo_pipeline::{LoggedRecord, PipelineError, Projector, StateStore, StateTxn};
use serde::{Deserialize, Serialize};

use crate::analysis::{
    DocTerms, FREQUENCY_SCALE, Features, NEIGHBOUR_BYTES_MAX, SHORT_REPLY_TERMS_MAX, tool_arguments_text,
};
use crate::codec::Codec;
use crate::messages::{self, MessageKind, VisibleMessage};
use crate::text::prefix_at_char_boundary;

/// The stage's registered name.
pub const STAGE_NAME: &str = "history-search";

/// Bumped whenever what the stage writes changes; a new version rebuilds the stage.
// 2: redaction covers private key blocks, JWTs, URL passwords and more providers' keys.
// 3: postings lose their count key (a flag byte per block) and store document gaps.
// 4: redaction covers glued password variables, MySQL `-p`, sensitive long flags and stated passwords.
// 5: statistics and document frequencies per workspace group.
// 6: redaction finds a secret assignment inside another assignment's value (`Command: PGPASSWORD=x`).
// 7: a tool result whose result is null is no message (decision 0146).
// 8: analysis (decision 0151): stems, tool-call arguments, short replies with their neighbour, the
//    time marker, frequencies in quarters weighted per field, the features kept in the statistics.
// 9: a tool result is indexed as it reads, its strings unescaped (decision 0207).
// 10: without the system reminders the agent host appended to it (decision 0207).
const VERSION: u32 = 10;

const CODEC: Codec = Codec::new(STAGE_NAME);

/// BM25 term-frequency saturation `k1` when the pipeline spec sets none.
pub const BM25_K1_DEFAULT: f64 = 1.2;
/// BM25 length normalisation `b` when the pipeline spec sets none.
pub const BM25_B_DEFAULT: f64 = 0.75;
/// Largest `k1` a spec may set.
pub const BM25_K1_MAX: f64 = 3.0;

const STATS_KEY: &[u8] = b"s";
const SESSION_TAG: &[u8] = b"o\0";
const TURN_TAG: &[u8] = b"u\0";
const POSTING_TAG: &[u8] = b"p\0";

/// Most postings in one block of a (session, term) pair.
pub const POSTING_BLOCK_ENTRIES_MAX: u32 = 128;
const DF_TAG: &[u8] = b"f\0";
const DOC_TAG: &[u8] = b"d\0";
const WORKSPACE_TAG: &[u8] = b"W\0";
const SESSION_GROUP_TAG: &[u8] = b"w\0";
const GROUP_STATS_TAG: &[u8] = b"g\0";
const GROUP_DF_TAG: &[u8] = b"F\0";

/// The group of sessions without a workspace.
const NO_WORKSPACE_GROUP: u32 = 0;
const MESSAGE_DOC_TAG: &[u8] = b"k\0";
const TITLE_DOC_TAG: &[u8] = b"t\0";

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MatchKind {
    /// A session's title.
    SessionTitle,
    /// A user message.
    UserMessage,
    /// Model text.
    AssistantMessage,
    /// A tool call's intent.
    ToolIntent,
    /// A tool result.
    ToolResult,
}

/// One indexed document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexedDoc {
    /// Its session.
    pub session: SessionId,
    /// What it is.
    pub kind: MatchKind,
    /// The message (absent for a title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The message's turn (absent for a title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<TurnId>,
    /// The message's time (absent for a title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<TimestampMs>,
    /// Tool calls and results: the tool's display name, else its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_label: Option<String>,
    /// Tool results: whether the result is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The redacted searchable text (a tool call's holds its arguments when they are indexed).
    pub text: String,
    /// A short reply's neighbour: the redacted text of the message before it, indexed with it at
    /// a lower weight (decision 0151).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

impl IndexedDoc {
    /// The document's weighted term frequencies and lengths, as `features` index it.
    fn terms(&self, features: Features) -> DocTerms {
        let quarters = match self.kind {
            MatchKind::ToolResult => features.tool_result_quarters,
            _ => FREQUENCY_SCALE,
        };
        features.document_terms(&self.text, quarters, self.context.as_deref())
    }
}

/// BM25 parameters in thousandths, so that what is stored is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bm25 {
    /// `k1` × 1000.
    pub k1_milli: u32,
    /// `b` × 1000.
    pub b_milli: u32,
}

impl Bm25 {
    /// `k1`.
    pub fn k1(self) -> f64 {
        f64::from(self.k1_milli) / 1000.0
    }

    /// `b`.
    pub fn b(self) -> f64 {
        f64::from(self.b_milli) / 1000.0
    }
}

impl Default for Bm25 {
    fn default() -> Self {
        Bm25 { k1_milli: (BM25_K1_DEFAULT * 1000.0) as u32, b_milli: (BM25_B_DEFAULT * 1000.0) as u32 }
    }
}

/// Corpus statistics, kept with the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexStats {
    /// Documents in the index.
    pub docs: u64,
    /// Terms over all documents.
    pub terms: u64,
    next_doc: u64,
    next_session: u64,
    groups: u64,
    /// The BM25 parameters queries use.
    pub bm25: Bm25,
    /// How the index analyses text; queries analyse the same way.
    pub features: Features,
}

impl Default for IndexStats {
    fn default() -> Self {
        IndexStats {
            docs: 0,
            terms: 0,
            next_doc: 0,
            next_session: 0,
            groups: 0,
            bm25: Bm25::default(),
            features: Features::DEFAULT,
        }
    }
}

const STATS_BYTES: usize = 5 * 8 + 6 * 4;

impl IndexStats {
    fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(STATS_BYTES);
        for value in [self.docs, self.terms, self.next_doc, self.next_session, self.groups] {
            bytes.extend_from_slice(&value.to_be_bytes());
        }
        let features = self.features.encode();
        for value in
            [self.bm25.k1_milli, self.bm25.b_milli, features[0], features[1], features[2], features[3]]
        {
            bytes.extend_from_slice(&value.to_be_bytes());
        }
        bytes
    }

    fn decode(bytes: &[u8]) -> Result<IndexStats, PipelineError> {
        if bytes.len() != STATS_BYTES {
            return Err(CODEC.damaged(format!("statistics are {} bytes, not {STATS_BYTES}", bytes.len())));
        }
        let u64_at = |i: usize| u64::from_be_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap_or_default());
        Ok(IndexStats {
            docs: u64_at(0),
            terms: u64_at(1),
            next_doc: u64_at(2),
            next_session: u64_at(3),
            groups: u64_at(4),
            bm25: Bm25 { k1_milli: u32_at(40), b_milli: u32_at(44) },
            features: Features::decode([u32_at(48), u32_at(52), u32_at(56), u32_at(60)])
                .ok_or_else(|| CODEC.damaged("the analysis features do not decode".to_owned()))?,
        })
    }

    /// The whole store's corpus.
    pub fn corpus(&self) -> Corpus {
        Corpus { docs: self.docs, terms: self.terms }
    }
}

/// The size of a corpus, the whole store's or a workspace group's: what BM25 needs besides
/// document frequencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Corpus {
    /// Documents.
    pub docs: u64,
    /// Terms over all documents.
    pub terms: u64,
}

const CORPUS_BYTES: usize = 2 * 8;

impl Corpus {
    fn encode(&self) -> Vec<u8> {
        [self.docs.to_be_bytes(), self.terms.to_be_bytes()].concat()
    }

    fn decode(bytes: &[u8]) -> Result<Corpus, PipelineError> {
        if bytes.len() != CORPUS_BYTES {
            return Err(
                CODEC.damaged(format!("group statistics are {} bytes, not {CORPUS_BYTES}", bytes.len()))
            );
        }
        Ok(Corpus { docs: CODEC.decode_u64(&bytes[..8])?, terms: CODEC.decode_u64(&bytes[8..])? })
    }

    /// Mean document length in terms (0 for an empty corpus).
    pub fn average_length(&self) -> f64 {
        if self.docs == 0 { 0.0 } else { self.terms as f64 / self.docs as f64 }
    }

    /// Counts a document in (`sign` 1) or out (`sign` -1).
    fn count(&mut self, length: u32, sign: i64) -> Result<(), PipelineError> {
        let docs = self.docs.checked_add_signed(sign);
        let terms = self.terms.checked_add_signed(sign * i64::from(length));
        let (Some(docs), Some(terms)) = (docs, terms) else {
            return Err(CODEC.damaged("group statistics underflow".to_owned()));
        };
        *self = Corpus { docs, terms };
        Ok(())
    }
}

/// Which documents a search ranks against, and whose statistics it ranks with.
///
/// A search from inside a session sees only its workspace group (the sessions opened in the same
/// workspace, or the sessions without one) and ranks with that group's statistics, as if the group
/// were the whole store: another workspace's documents neither appear nor shift its scores. A
/// search from no session (an operator's) sees the whole store, with the whole store's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every session.
    Store,
    /// The sessions of one workspace group.
    Group(u32),
    /// No session: a workspace the index has never seen.
    Nothing,
}

/// Most a "when" question's boost may be, as a factor added to 1.
pub const TIME_BOOST_MAX: f64 = 2.0;

/// Builds the stage from its configuration: optional `k1` (0..=3) and `b` (0..=1), and the
/// analysis of decision 0151: `stem`, `tool_arguments`, `neighbour_context` (booleans),
/// `stop_word_weight` (0..=1), `time_boost` (0..=2, 0 is off) and `tool_result_weight` (0..=1, in
/// quarters).
/// Keys left out take [`Features::DEFAULT`].
pub fn factory(config: &toml::Table) -> Result<Box<dyn Projector>, String> {
    let mut bm25 = Bm25::default();
    let mut features = Features::DEFAULT;
    for (key, value) in config {
        let flag = match key.as_str() {
            "stem" => Some(&mut features.stem),
            "tool_arguments" => Some(&mut features.tool_arguments),
            "neighbour_context" => Some(&mut features.neighbour_context),
            _ => None,
        };
        if let Some(flag) = flag {
            *flag = value.as_bool().ok_or_else(|| format!("{STAGE_NAME}: `{key}` must be true or false"))?;
            continue;
        }
        let number = value
            .as_float()
            .or_else(|| value.as_integer().map(|i| i as f64))
            .ok_or_else(|| format!("{STAGE_NAME}: `{key}` must be a number"))?;
        let (slot, max, unit) = match key.as_str() {
            "k1" => (&mut bm25.k1_milli, BM25_K1_MAX, 1000.0),
            "b" => (&mut bm25.b_milli, 1.0, 1000.0),
            "time_boost" => (&mut features.time_boost_milli, TIME_BOOST_MAX, 1000.0),
            "stop_word_weight" => (&mut features.stop_word_milli, 1.0, 1000.0),
            "tool_result_weight" => (&mut features.tool_result_quarters, 1.0, f64::from(FREQUENCY_SCALE)),
            other => {
                return Err(format!(
                    "{STAGE_NAME}: unknown configuration key {other:?}; known: k1, b, stem, stop_word_weight, \
                     tool_arguments, neighbour_context, time_boost, tool_result_weight"
                ));
            }
        };
        if !(0.0..=max).contains(&number) {
            return Err(format!("{STAGE_NAME}: `{key}` = {number} is outside 0..={max}"));
        }
        *slot = (number * unit).round() as u32;
    }
    Ok(Box::new(HistorySearchIndex { bm25, features, cache: WriteCache::default() }))
}

/// The projector.
///
/// Between two commits it keeps the values it writes most decoded in memory (the statistics,
/// document frequencies, session ordinals, and the last posting block of each (session, term)
/// pair it touched) and writes each changed one once, in `before_commit`. A message touches a few
/// dozen of these values; reading, decoding, encoding and writing each of them again for every
/// message dominated a rebuild. What is written does not depend on where commits fall: the cache
/// only defers writes of final values.
#[derive(Debug)]
pub struct HistorySearchIndex {
    bm25: Bm25,
    features: Features,
    cache: WriteCache,
}

impl Default for HistorySearchIndex {
    fn default() -> Self {
        HistorySearchIndex {
            bm25: Bm25::default(),
            features: Features::DEFAULT,
            cache: WriteCache::default(),
        }
    }
}

impl Projector for HistorySearchIndex {
    fn name(&self) -> &str {
        STAGE_NAME
    }

    fn version(&self) -> u32 {
        VERSION
    }

    fn apply(&mut self, state: &mut StateTxn<'_>, logged: &LoggedRecord) -> Result<(), PipelineError> {
        let Some(session) = logged.stream.session_id() else {
            return Ok(());
        };
        let title = match &logged.record {
            Record::SessionOpened(opened) => {
                self.writer(state)?.set_workspace(&session, opened.workspace.as_ref())?;
                opened.title.as_ref()
            }
            Record::SessionFlagsChanged(changed) => changed.title.as_ref(),
            Record::RuntimeEvent(event) => {
                if let Some(message) = messages::project(event, logged.position) {
                    self.writer(state)?.index_message(&session, event, &message)?;
                }
                return Ok(());
            }
            _ => None,
        };
        if let Some(title) = title {
            self.writer(state)?.index_title(&session, title)?;
        }
        Ok(())
    }

    fn before_commit(&mut self, state: &mut StateTxn<'_>) -> Result<(), PipelineError> {
        std::mem::take(&mut self.cache).flush(state)
    }
}

impl HistorySearchIndex {
    fn writer<'t, 's>(&'t mut self, state: &'t mut StateTxn<'s>) -> Result<Writer<'t, 's>, PipelineError> {
        if self.cache.stats.is_none() {
            let before = state.get(STATS_KEY)?.map(|bytes| IndexStats::decode(&bytes)).transpose()?;
            let mut now = before.unwrap_or_default();
            now.bm25 = self.bm25;
            now.features = self.features;
            self.cache.stats = Some((before, now));
        }
        Ok(Writer { state, cache: &mut self.cache, features: self.features })
    }
}

/// What the stage has decoded since its last commit (see [`HistorySearchIndex`]).
#[derive(Debug, Default)]
struct WriteCache {
    /// The statistics as stored and as they are now; `None` until a record needs them.
    stats: Option<(Option<IndexStats>, IndexStats)>,
    /// Document frequencies as stored and as they are now.
    df: HashMap<String, (u64, u64)>,
    /// Workspace groups' document frequencies as stored and as they are now.
    group_df: HashMap<(u32, String), (u64, u64)>,
    /// Workspace groups' corpora as stored and as they are now.
    groups: HashMap<u32, (Corpus, Corpus)>,
    /// Sessions' workspace groups as stored and as they are now.
    session_groups: HashMap<SessionId, (u32, u32)>,
    sessions: HashMap<SessionId, SessionSlot>,
    tails: HashMap<(u32, String), Tail>,
}

/// A session's ordinals.
#[derive(Debug)]
struct SessionSlot {
    ordinal: u32,
    next_turn: u32,
    /// The document of the session's latest user or assistant message: a short reply's neighbour.
    last_text: Option<u64>,
    /// The turn of the session's last message and its ordinal: most messages continue a turn.
    last_turn: Option<(TurnId, u32)>,
    changed: bool,
}

/// The last posting block of a (session, term) pair.
#[derive(Debug, Default)]
struct Tail {
    block: u32,
    postings: u32,
    last_doc: u64,
    /// The encoded postings (without the block's leading flag).
    bytes: Vec<u8>,
    changed: bool,
}

impl WriteCache {
    fn stats(&mut self) -> Result<&mut IndexStats, PipelineError> {
        // `HistorySearchIndex::writer` loads the statistics before any writer exists.
        self.stats.as_mut().map(|(_, now)| now).ok_or_else(|| CODEC.damaged("statistics not loaded"))
    }

    /// Writes every changed value into `state`.
    fn flush(self, state: &mut StateTxn<'_>) -> Result<(), PipelineError> {
        if let Some((before, now)) = self.stats
            && before != Some(now)
        {
            state.put(STATS_KEY.to_vec(), now.encode());
        }
        for (term, (before, now)) in self.df {
            if before != now {
                let key = [DF_TAG, term.as_bytes()].concat();
                if now == 0 { state.delete(key) } else { state.put(key, now.to_be_bytes().to_vec()) }
            }
        }
        for ((group, term), (before, now)) in self.group_df {
            if before != now {
                let key = group_df_key(group, &term);
                if now == 0 { state.delete(key) } else { state.put(key, now.to_be_bytes().to_vec()) }
            }
        }
        for (group, (before, now)) in self.groups {
            // NOTE: an empty group leaves no key, like a zero frequency, so what is stored does not
            // depend on whether the group was ever committed non-empty.
            if before != now {
                let key = group_stats_key(group);
                if now == Corpus::default() { state.delete(key) } else { state.put(key, now.encode()) }
            }
        }
        for (session, (before, now)) in self.session_groups {
            if before != now {
                let key = [SESSION_GROUP_TAG, session.as_str().as_bytes()].concat();
                if now == NO_WORKSPACE_GROUP {
                    state.delete(key)
                } else {
                    state.put(key, now.to_be_bytes().to_vec())
                }
            }
        }
        for (session, slot) in self.sessions {
            if slot.changed {
                let key = [SESSION_TAG, session.as_str().as_bytes()].concat();
                let last_text = slot.last_text.map_or(0, |doc| doc + 1);
                state.put(
                    key,
                    [
                        &slot.ordinal.to_be_bytes()[..],
                        &slot.next_turn.to_be_bytes(),
                        &last_text.to_be_bytes(),
                    ]
                    .concat(),
                );
            }
        }
        for ((ordinal, term), tail) in self.tails {
            if tail.changed {
                state
                    .put(posting_block_key(ordinal, &term, tail.block), block_value(LAST_BLOCK, &tail.bytes));
            }
        }
        Ok(())
    }
}

/// The first byte of a posting block: whether another block of the pair follows. Readers stop at
/// the last block without a lookup that misses.
const MORE_BLOCKS: u8 = 1;
const LAST_BLOCK: u8 = 0;

fn block_value(flag: u8, postings: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(postings.len() + 1);
    value.push(flag);
    value.extend_from_slice(postings);
    value
}

/// The index's state during one fold step.
struct Writer<'t, 's> {
    state: &'t mut StateTxn<'s>,
    cache: &'t mut WriteCache,
    features: Features,
}

impl Writer<'_, '_> {
    fn index_title(&mut self, session: &SessionId, title: &str) -> Result<(), PipelineError> {
        let key = [TITLE_DOC_TAG, session.as_str().as_bytes()].concat();
        let doc = IndexedDoc {
            session: session.clone(),
            kind: MatchKind::SessionTitle,
            message_id: None,
            turn_id: None,
            timestamp: None,
            tool_label: None,
            is_error: None,
            text: redact_secrets(title).into_owned(),
            context: None,
        };
        self.replace(key, doc)
    }

    fn index_message(
        &mut self,
        session: &SessionId,
        event: &RuntimeEvent,
        message: &VisibleMessage,
    ) -> Result<(), PipelineError> {
        let key =
            [MESSAGE_DOC_TAG, session.as_str().as_bytes(), b"\0", message.message_id.as_bytes()].concat();
        let kind = match message.kind {
            MessageKind::User => MatchKind::UserMessage,
            MessageKind::Assistant => MatchKind::AssistantMessage,
            MessageKind::ToolCall => MatchKind::ToolIntent,
            MessageKind::ToolResult => MatchKind::ToolResult,
        };
        let doc = IndexedDoc {
            session: session.clone(),
            kind,
            message_id: Some(message.message_id.clone()),
            turn_id: Some(message.turn_id.clone()),
            timestamp: Some(message.timestamp),
            tool_label: message.display_name.clone().or_else(|| message.tool_name.clone()),
            is_error: message.is_error,
            text: redact_secrets(&self.searchable_text(event, message)).into_owned(),
            context: None,
        };
        self.replace(key, doc)
    }

    /// The message's searchable text, and a tool call's arguments when they are indexed.
    fn searchable_text(&self, event: &RuntimeEvent, message: &VisibleMessage) -> String {
        let own = message.searchable_text().unwrap_or_default();
        let arguments = match &event.content {
            Some(Content::FunctionCall(call)) if self.features.tool_arguments => {
                tool_arguments_text(&call.args)
            }
            _ => String::new(),
        };
        match (own.is_empty(), arguments.is_empty()) {
            (_, true) => own.to_owned(),
            (true, false) => arguments,
            (false, false) => format!("{own}\n{arguments}"),
        }
    }

    /// The neighbour a short user or assistant reply is indexed with: the session's previous
    /// user or assistant message, if it is still indexed.
    fn neighbour(&mut self, doc: &IndexedDoc, length: u32) -> Result<Option<String>, PipelineError> {
        let text_kind = matches!(doc.kind, MatchKind::UserMessage | MatchKind::AssistantMessage);
        if !self.features.neighbour_context || !text_kind || length > SHORT_REPLY_TERMS_MAX {
            return Ok(None);
        }
        let Some(previous) = self.cache.sessions.get(&doc.session).and_then(|slot| slot.last_text) else {
            return Ok(None);
        };
        let Some(bytes) = self.state.get(&doc_key(previous))? else {
            return Ok(None);
        };
        let previous: IndexedDoc = CODEC.decode(&bytes)?;
        Ok(Some(prefix_at_char_boundary(&previous.text, NEIGHBOUR_BYTES_MAX).to_owned()))
    }

    /// Removes the document `key` points at, if any, then indexes `doc` there (if it has terms).
    fn replace(&mut self, key: Vec<u8>, mut doc: IndexedDoc) -> Result<(), PipelineError> {
        if let Some(old) = self.state.get(&key)? {
            self.remove(CODEC.decode_u64(&old)?)?;
            self.state.delete(key.clone());
        }
        let own = doc.terms(self.features);
        if own.terms.is_empty() {
            return Ok(());
        }
        let (ordinal, turn) = self.ordinals(&doc.session, doc.turn_id.as_ref())?;
        doc.context = self.neighbour(&doc, own.length)?;
        let DocTerms { terms: counts, length, context_length } =
            if doc.context.is_some() { doc.terms(self.features) } else { own };
        let group = self.group_of(&doc.session)?;
        let stats = self.cache.stats()?;
        let number = stats.next_doc;
        stats.next_doc += 1;
        stats.docs += 1;
        stats.terms += u64::from(length);
        self.group_corpus(group)?.count(length, 1)?;
        for (term, (frequency, context)) in counts {
            let context = (context > 0).then_some((context, context_length));
            let posting = Posting { doc: number, frequency, length, turn, context };
            // NOTE: document frequencies count a document's own text only, so a neighbour field
            // never shifts another document's idf.
            if frequency > 0 {
                self.add_df(&term, 1)?;
                self.add_group_df(group, &term, 1)?;
            }
            self.add_posting(ordinal, term, posting)?;
        }
        if matches!(doc.kind, MatchKind::UserMessage | MatchKind::AssistantMessage)
            && let Some(slot) = self.cache.sessions.get_mut(&doc.session)
        {
            slot.last_text = Some(number);
            slot.changed = true;
        }
        self.state.put(doc_key(number), CODEC.encode(&doc)?);
        self.state.put(key, number.to_be_bytes().to_vec());
        Ok(())
    }

    fn remove(&mut self, number: u64) -> Result<(), PipelineError> {
        let Some(bytes) = self.state.get(&doc_key(number))? else {
            return Err(CODEC.damaged(format!("document {number} is referenced but missing")));
        };
        let doc: IndexedDoc = CODEC.decode(&bytes)?;
        let DocTerms { terms: counts, length, .. } = doc.terms(self.features);
        let (ordinal, _) = self.ordinals(&doc.session, None)?;
        let group = self.group_of(&doc.session)?;
        for (term, (frequency, _)) in &counts {
            self.remove_posting(ordinal, term, number)?;
            if *frequency > 0 {
                self.add_df(term, -1)?;
                self.add_group_df(group, term, -1)?;
            }
        }
        self.group_corpus(group)?.count(length, -1)?;
        let stats = self.cache.stats()?;
        stats.docs -= 1;
        stats.terms -= u64::from(length);
        self.state.delete(doc_key(number));
        Ok(())
    }

    /// The pair's last block, from the cache or else found by following the stored blocks.
    fn tail(&mut self, ordinal: u32, term: String) -> Result<&mut Tail, PipelineError> {
        use std::collections::hash_map::Entry;
        let entry = match self.cache.tails.entry((ordinal, term)) {
            Entry::Occupied(occupied) => return Ok(occupied.into_mut()),
            Entry::Vacant(vacant) => vacant,
        };
        let term = &entry.key().1;
        let mut tail = Tail::default();
        while let Some(value) = self.state.get(&posting_block_key(ordinal, term, tail.block))? {
            let (flag, postings) = decode_block(&value)?;
            if flag == MORE_BLOCKS {
                tail.block += 1;
                continue;
            }
            tail.postings = postings.len() as u32;
            tail.last_doc = postings.last().map_or(0, |p| p.doc);
            tail.bytes = value[1..].to_vec();
            break;
        }
        Ok(entry.insert(tail))
    }

    /// Appends a posting to the pair's last block, starting a new block when it is full.
    fn add_posting(&mut self, ordinal: u32, term: String, posting: Posting) -> Result<(), PipelineError> {
        let key_term = term.clone();
        let tail = self.tail(ordinal, term)?;
        if tail.postings == POSTING_BLOCK_ENTRIES_MAX {
            let full = block_value(MORE_BLOCKS, &tail.bytes);
            let block = tail.block;
            *tail = Tail { block: block + 1, ..Tail::default() };
            self.state.put(posting_block_key(ordinal, &key_term, block), full);
        }
        let tail = self.tail(ordinal, key_term)?;
        posting.encode(tail.last_doc, &mut tail.bytes);
        tail.last_doc = posting.doc;
        tail.postings += 1;
        tail.changed = true;
        Ok(())
    }

    /// Removes a document's posting from the pair's blocks. A block may be left short (or empty),
    /// so block numbers never move.
    fn remove_posting(&mut self, ordinal: u32, term: &str, number: u64) -> Result<(), PipelineError> {
        // The stored blocks are read below: the cached last block goes to the state first.
        if let Some(tail) = self.cache.tails.remove(&(ordinal, term.to_owned()))
            && tail.changed
        {
            self.state
                .put(posting_block_key(ordinal, term, tail.block), block_value(LAST_BLOCK, &tail.bytes));
        }
        let mut block_number = 0;
        while let Some(value) = self.state.get(&posting_block_key(ordinal, term, block_number))? {
            let (flag, postings) = decode_block(&value)?;
            if postings.iter().any(|p| p.doc == number) {
                let kept: Vec<Posting> = postings.into_iter().filter(|p| p.doc != number).collect();
                self.state.put(posting_block_key(ordinal, term, block_number), encode_block(flag, &kept));
                return Ok(());
            }
            if flag == LAST_BLOCK {
                break;
            }
            block_number += 1;
        }
        Err(CODEC
            .damaged(format!("document {number} has no posting of {term:?} in session ordinal {ordinal}")))
    }

    fn add_df(&mut self, term: &str, delta: i64) -> Result<(), PipelineError> {
        let slot = match self.cache.df.get_mut(term) {
            Some(slot) => slot,
            None => {
                let key = [DF_TAG, term.as_bytes()].concat();
                let stored = self.state.get(&key)?.map(|b| CODEC.decode_u64(&b)).transpose()?.unwrap_or(0);
                self.cache.df.entry(term.to_owned()).or_insert((stored, stored))
            }
        };
        slot.1 = slot
            .1
            .checked_add_signed(delta)
            .ok_or_else(|| CODEC.damaged(format!("df of {term:?} underflows")))?;
        Ok(())
    }

    fn add_group_df(&mut self, group: u32, term: &str, delta: i64) -> Result<(), PipelineError> {
        use std::collections::hash_map::Entry;
        let slot = match self.cache.group_df.entry((group, term.to_owned())) {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(vacant) => {
                let stored = self.state.get(&group_df_key(group, term))?;
                let stored = stored.map(|b| CODEC.decode_u64(&b)).transpose()?.unwrap_or(0);
                vacant.insert((stored, stored))
            }
        };
        slot.1 = slot
            .1
            .checked_add_signed(delta)
            .ok_or_else(|| CODEC.damaged(format!("df of {term:?} in group {group} underflows")))?;
        Ok(())
    }

    /// A workspace group's corpus, loaded into the cache.
    fn group_corpus(&mut self, group: u32) -> Result<&mut Corpus, PipelineError> {
        use std::collections::hash_map::Entry;
        let slot = match self.cache.groups.entry(group) {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(vacant) => {
                let stored = self.state.get(&group_stats_key(group))?;
                let stored = stored.map(|b| Corpus::decode(&b)).transpose()?.unwrap_or_default();
                vacant.insert((stored, stored))
            }
        };
        Ok(&mut slot.1)
    }

    /// The session's workspace group ([`NO_WORKSPACE_GROUP`] until it is opened in a workspace).
    fn group_of(&mut self, session: &SessionId) -> Result<u32, PipelineError> {
        if let Some((_, now)) = self.cache.session_groups.get(session) {
            return Ok(*now);
        }
        let key = [SESSION_GROUP_TAG, session.as_str().as_bytes()].concat();
        let stored = self.state.get(&key)?.map(|b| CODEC.decode_u32(&b)).transpose()?;
        let stored = stored.unwrap_or(NO_WORKSPACE_GROUP);
        self.cache.session_groups.insert(session.clone(), (stored, stored));
        Ok(stored)
    }

    /// The workspace's group, assigning the next one to a workspace seen for the first time.
    fn workspace_group(&mut self, workspace: &WorkspaceId) -> Result<u32, PipelineError> {
        let key = [WORKSPACE_TAG, workspace.as_str().as_bytes()].concat();
        if let Some(bytes) = self.state.get(&key)? {
            return CODEC.decode_u32(&bytes);
        }
        let stats = self.cache.stats()?;
        stats.groups += 1;
        let group =
            u32::try_from(stats.groups).map_err(|_| CODEC.damaged("more than 2^32 workspaces".to_owned()))?;
        self.state.put(key, group.to_be_bytes().to_vec());
        Ok(group)
    }

    /// Records the workspace a session was opened in; a session that changes workspace moves its
    /// documents' counts from its old group to the new one.
    fn set_workspace(
        &mut self,
        session: &SessionId,
        workspace: Option<&WorkspaceId>,
    ) -> Result<(), PipelineError> {
        let group = match workspace {
            Some(workspace) => self.workspace_group(workspace)?,
            None => NO_WORKSPACE_GROUP,
        };
        let old = self.group_of(session)?;
        if old == group {
            return Ok(());
        }
        for number in self.session_documents(session)? {
            let bytes = self.state.get(&doc_key(number))?;
            let bytes = bytes.ok_or_else(|| CODEC.damaged(format!("document {number} is missing")))?;
            let doc: IndexedDoc = CODEC.decode(&bytes)?;
            let DocTerms { terms: counts, length, .. } = doc.terms(self.features);
            for (term, _) in counts.iter().filter(|(_, (frequency, _))| *frequency > 0) {
                self.add_group_df(old, term, -1)?;
                self.add_group_df(group, term, 1)?;
            }
            self.group_corpus(old)?.count(length, -1)?;
            self.group_corpus(group)?.count(length, 1)?;
        }
        if let Some(slot) = self.cache.session_groups.get_mut(session) {
            slot.1 = group;
        }
        Ok(())
    }

    /// The numbers of a session's indexed documents: its title's and its messages'.
    fn session_documents(&mut self, session: &SessionId) -> Result<Vec<u64>, PipelineError> {
        let has_ordinal = self.cache.sessions.contains_key(session)
            || self.state.get(&[SESSION_TAG, session.as_str().as_bytes()].concat())?.is_some();
        if !has_ordinal {
            // A session gets its ordinal with its first document.
            return Ok(Vec::new());
        }
        let mut numbers = Vec::new();
        if let Some(bytes) = self.state.get(&[TITLE_DOC_TAG, session.as_str().as_bytes()].concat())? {
            numbers.push(CODEC.decode_u64(&bytes)?);
        }
        let prefix = [MESSAGE_DOC_TAG, session.as_str().as_bytes(), b"\0"].concat();
        for (_, value) in self.state.scan_prefix(&prefix)? {
            numbers.push(CODEC.decode_u64(&value)?);
        }
        Ok(numbers)
    }

    /// The session's ordinal and the turn's (0 without a turn), assigning new ones as needed.
    fn ordinals(&mut self, session: &SessionId, turn: Option<&TurnId>) -> Result<(u32, u32), PipelineError> {
        if !self.cache.sessions.contains_key(session) {
            let key = [SESSION_TAG, session.as_str().as_bytes()].concat();
            let slot = match self.state.get(&key)? {
                Some(bytes) => {
                    let (ordinal, next_turn, last_text) = decode_session(&bytes)?;
                    SessionSlot { ordinal, next_turn, last_text, last_turn: None, changed: false }
                }
                None => {
                    let stats = self.cache.stats()?;
                    let ordinal = u32::try_from(stats.next_session)
                        .map_err(|_| CODEC.damaged("more than 2^32 sessions".to_owned()))?;
                    stats.next_session += 1;
                    SessionSlot { ordinal, next_turn: 1, last_text: None, last_turn: None, changed: true }
                }
            };
            self.cache.sessions.insert(session.clone(), slot);
        }
        let Some(slot) = self.cache.sessions.get_mut(session) else {
            return Err(CODEC.damaged(format!("session {session} has no ordinal")));
        };
        let Some(turn) = turn else {
            return Ok((slot.ordinal, 0));
        };
        if let Some((last, ordinal)) = &slot.last_turn
            && last == turn
        {
            return Ok((slot.ordinal, *ordinal));
        }
        let turn_key = [TURN_TAG, &slot.ordinal.to_be_bytes(), turn.as_str().as_bytes()].concat();
        let turn_ordinal = match self.state.get(&turn_key)? {
            Some(bytes) => CODEC.decode_u32(&bytes)?,
            None => {
                let assigned = slot.next_turn;
                slot.next_turn += 1;
                slot.changed = true;
                self.state.put(turn_key, assigned.to_be_bytes().to_vec());
                assigned
            }
        };
        slot.last_turn = Some((turn.clone(), turn_ordinal));
        Ok((slot.ordinal, turn_ordinal))
    }
}

fn posting_block_key(ordinal: u32, term: &str, block: u32) -> Vec<u8> {
    [POSTING_TAG, &ordinal.to_be_bytes(), term.as_bytes(), b"\0", &block.to_be_bytes()].concat()
}

fn group_df_key(group: u32, term: &str) -> Vec<u8> {
    [GROUP_DF_TAG, &group.to_be_bytes(), term.as_bytes()].concat()
}

fn group_stats_key(group: u32) -> Vec<u8> {
    [GROUP_STATS_TAG, &group.to_be_bytes()].concat()
}

fn doc_key(number: u64) -> Vec<u8> {
    [DOC_TAG, &number.to_be_bytes()].concat()
}

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for shift in (0..70).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// A block's flag and postings.
fn decode_block(bytes: &[u8]) -> Result<(u8, Vec<Posting>), PipelineError> {
    let damaged = || CODEC.damaged("a posting block does not decode".to_owned());
    let (&flag, mut rest) = bytes.split_first().ok_or_else(damaged)?;
    if flag != MORE_BLOCKS && flag != LAST_BLOCK {
        return Err(damaged());
    }
    let mut postings = Vec::new();
    let mut previous = 0;
    while !rest.is_empty() {
        let posting = Posting::decode(previous, &mut rest).ok_or_else(damaged)?;
        previous = posting.doc;
        postings.push(posting);
    }
    Ok((flag, postings))
}

fn encode_block(flag: u8, postings: &[Posting]) -> Vec<u8> {
    let mut bytes = vec![flag];
    let mut previous = 0;
    for posting in postings {
        posting.encode(previous, &mut bytes);
        previous = posting.doc;
    }
    bytes
}

/// A session's ordinal, next turn ordinal and latest user or assistant document (stored plus one,
/// 0 for none).
fn decode_session(bytes: &[u8]) -> Result<(u32, u32, Option<u64>), PipelineError> {
    if bytes.len() != 16 {
        return Err(CODEC.damaged(format!("a session entry is {} bytes, not 16", bytes.len())));
    }
    let last = CODEC.decode_u64(&bytes[8..])?;
    Ok((CODEC.decode_u32(&bytes[..4])?, CODEC.decode_u32(&bytes[4..8])?, last.checked_sub(1)))
}

/// One posting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    pub doc: u64,
    pub frequency: u32,
    pub length: u32,
    /// The turn's ordinal in its session; 0 for a title.
    pub turn: u32,
    /// A short reply's neighbour field: the term's frequency there and the field's length.
    pub context: Option<(u32, u32)>,
}

impl Posting {
    /// Encodes the posting after one for document `previous` (0 for a block's first): documents
    /// in a block ascend, so the gap is small and its LEB128 short.
    /// The frequency's varint carries a flag in its lowest bit: whether the neighbour field's
    /// frequency and length follow (only short replies pay for them).
    fn encode(&self, previous: u64, out: &mut Vec<u8>) {
        write_varint(out, self.doc - previous);
        let flagged = u64::from(self.frequency) << 1 | u64::from(self.context.is_some());
        write_varint(out, flagged);
        for n in [self.length, self.turn] {
            write_varint(out, u64::from(n));
        }
        if let Some((frequency, length)) = self.context {
            write_varint(out, u64::from(frequency));
            write_varint(out, u64::from(length));
        }
    }

    fn decode(previous: u64, bytes: &mut &[u8]) -> Option<Posting> {
        let doc = previous.checked_add(read_varint(bytes)?)?;
        let flagged = read_varint(bytes)?;
        let frequency = u32::try_from(flagged >> 1).ok()?;
        let mut small = || read_varint(bytes).and_then(|n| u32::try_from(n).ok());
        let (length, turn) = (small()?, small()?);
        let context = if flagged & 1 == 1 { Some((small()?, small()?)) } else { None };
        Some(Posting { doc, frequency, length, turn, context })
    }
}

/// Read access to a committed (or folded) index.
#[derive(Debug)]
pub(crate) struct IndexReader<'a> {
    store: &'a dyn StateStore,
    pub stats: IndexStats,
}

impl<'a> IndexReader<'a> {
    pub(crate) fn open(store: &'a dyn StateStore) -> Result<Self, PipelineError> {
        let stats =
            store.get(STATS_KEY)?.map(|bytes| IndexStats::decode(&bytes)).transpose()?.unwrap_or_default();
        Ok(IndexReader { store, stats })
    }

    pub(crate) fn session_ordinal(&self, session: &SessionId) -> Result<Option<u32>, PipelineError> {
        let key = [SESSION_TAG, session.as_str().as_bytes()].concat();
        self.store.get(&key)?.map(|bytes| decode_session(&bytes).map(|p| p.0)).transpose()
    }

    pub(crate) fn turn_ordinal(&self, session: u32, turn: &TurnId) -> Result<Option<u32>, PipelineError> {
        let key = [TURN_TAG, &session.to_be_bytes(), turn.as_str().as_bytes()].concat();
        self.store.get(&key)?.map(|bytes| CODEC.decode_u32(&bytes)).transpose()
    }

    /// The workspace group of a session (group 0 for a session without a workspace, or unknown).
    pub(crate) fn session_group(&self, session: &SessionId) -> Result<u32, PipelineError> {
        let key = [SESSION_GROUP_TAG, session.as_str().as_bytes()].concat();
        Ok(self.store.get(&key)?.map(|b| CODEC.decode_u32(&b)).transpose()?.unwrap_or(NO_WORKSPACE_GROUP))
    }

    /// The scope a caller searches: a current session's workspace group; else the named
    /// workspace's group ([`Scope::Nothing`] for a workspace the index has never seen); else the
    /// whole store.
    pub(crate) fn scope_of(
        &self,
        session: Option<&SessionId>,
        workspace: Option<&WorkspaceId>,
    ) -> Result<Scope, PipelineError> {
        if let Some(session) = session {
            return self.session_group(session).map(Scope::Group);
        }
        let Some(workspace) = workspace else {
            return Ok(Scope::Store);
        };
        let key = [WORKSPACE_TAG, workspace.as_str().as_bytes()].concat();
        Ok(self
            .store
            .get(&key)?
            .map(|b| CODEC.decode_u32(&b))
            .transpose()?
            .map_or(Scope::Nothing, Scope::Group))
    }

    /// Whether a session's documents belong to `scope`.
    pub(crate) fn in_scope(&self, scope: Scope, session: &SessionId) -> Result<bool, PipelineError> {
        match scope {
            Scope::Store => Ok(true),
            Scope::Group(group) => Ok(self.session_group(session)? == group),
            Scope::Nothing => Ok(false),
        }
    }

    /// The corpus of a scope.
    pub(crate) fn corpus(&self, scope: Scope) -> Result<Corpus, PipelineError> {
        match scope {
            Scope::Store => Ok(self.stats.corpus()),
            Scope::Nothing => Ok(Corpus::default()),
            Scope::Group(group) => {
                let stored = self.store.get(&group_stats_key(group))?;
                Ok(stored.map(|b| Corpus::decode(&b)).transpose()?.unwrap_or_default())
            }
        }
    }

    /// How many documents of a scope hold `term`.
    pub(crate) fn document_frequency(&self, scope: Scope, term: &str) -> Result<u64, PipelineError> {
        let key = match scope {
            Scope::Store => [DF_TAG, term.as_bytes()].concat(),
            Scope::Group(group) => group_df_key(group, term),
            Scope::Nothing => return Ok(0),
        };
        Ok(self.store.get(&key)?.map(|b| CODEC.decode_u64(&b)).transpose()?.unwrap_or(0))
    }

    /// Every posting of `term` in one session, in document order: the pair's blocks from the
    /// first until the one flagged last.
    pub(crate) fn postings(&self, session: u32, term: &str) -> Result<Vec<Posting>, PipelineError> {
        let mut postings = Vec::new();
        let mut block = 0;
        while let Some(bytes) = self.store.get(&posting_block_key(session, term, block))? {
            let (flag, found) = decode_block(&bytes)?;
            postings.extend(found);
            if flag == LAST_BLOCK {
                break;
            }
            block += 1;
        }
        Ok(postings)
    }

    pub(crate) fn document(&self, number: u64) -> Result<IndexedDoc, PipelineError> {
        let bytes = self.store.get(&doc_key(number))?;
        let bytes =
            bytes.ok_or_else(|| CODEC.damaged(format!("document {number} is in a posting but missing")))?;
        CODEC.decode(&bytes)
    }
}

/// Term frequencies of a user message's text as the default index counts them, in
/// [`FREQUENCY_SCALE`] units (for tests and diagnostics).
pub fn index_terms(text: &str) -> BTreeMap<String, u32> {
    let doc = Features::DEFAULT.document_terms(&redact_secrets(text), FREQUENCY_SCALE, None);
    doc.terms.into_iter().map(|(term, (frequency, _))| (term, frequency)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for n in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            write_varint(&mut bytes, n);
            let mut slice = bytes.as_slice();
            assert_eq!(read_varint(&mut slice), Some(n));
            assert!(slice.is_empty());
        }
        assert_eq!(read_varint(&mut [0x80u8].as_slice()), None);
        let first = Posting { doc: 1 << 40, frequency: 3, length: 200, turn: 0, context: None };
        let second = Posting { doc: (1 << 40) + 5, frequency: 1, length: 7, turn: 2, context: Some((4, 9)) };
        let block = encode_block(MORE_BLOCKS, &[first, second]);
        // The second document is stored as its gap from the first: one byte.
        assert_eq!(block[1 + 6 + 1 + 2 + 1], 5);
        assert_eq!(decode_block(&block).unwrap(), (MORE_BLOCKS, vec![first, second]));
        assert_eq!(block.len(), 1 + (6 + 1 + 2 + 1) + (1 + 1 + 1 + 1 + 2));
        assert_eq!(decode_block(&[LAST_BLOCK]).unwrap(), (LAST_BLOCK, vec![]));
        assert!(decode_block(&[]).is_err());
        assert!(decode_block(&[7]).is_err());
        assert!(decode_block(&[LAST_BLOCK, 0xff]).is_err());
    }

    #[test]
    fn stats_round_trip() {
        let stats = IndexStats {
            docs: 3,
            terms: 40,
            next_doc: 7,
            next_session: 2,
            groups: 5,
            ..IndexStats::default()
        };
        assert_eq!(IndexStats::decode(&stats.encode()).unwrap(), stats);
        assert!(IndexStats::decode(&[0; 3]).is_err());
    }

    #[test]
    fn configuration_is_checked() {
        let table = |text: &str| -> toml::Table { text.parse().unwrap() };
        assert!(factory(&table("k1 = 1.5\nb = 0.5")).is_ok());
        assert!(factory(&table("k1 = 2")).is_ok());
        assert!(factory(&table("b = 1.5")).unwrap_err().contains("outside"));
        assert!(factory(&table("x = 1")).unwrap_err().contains("unknown"));
        assert!(factory(&table("k1 = \"high\"")).unwrap_err().contains("number"));
    }

    /// Folds session openings (each with a title, one document) into a store, committing after
    /// every record when `commit_each` is set and once at the end otherwise.
    fn fold_openings(
        openings: &[(&str, Option<&str>, &str)],
        commit_each: bool,
    ) -> mnemo_pipeline::MemoryStore {
        use mnemo_core::{MemoryMode, SessionOpened, StreamId, StreamRevision};
        use mnemo_pipeline::{Changes, StageMeta};
        let store = mnemo_pipeline::MemoryStore::new();
        let mut projector = HistorySearchIndex::default();
        let mut changes = Changes::new();
        let meta = StageMeta { watermark: mnemo_core::Position(1), version: VERSION, config_hash: [0; 32] };
        for (i, (session, workspace, title)) in openings.iter().enumerate() {
            let session = SessionId::new(*session).unwrap();
            let logged = LoggedRecord {
                position: mnemo_core::Position(i as u64 + 1),
                stream: StreamId::session(&session),
                revision: StreamRevision(0),
                timestamp: TimestampMs(0),
                record: Record::SessionOpened(SessionOpened {
                    session,
                    workspace: workspace.map(|w| WorkspaceId::new(w).unwrap()),
                    incognito: false,
                    memory: MemoryMode::Enabled,
                    subagent: false,
                    title: Some((*title).to_owned()),
                    source: None,
                    parent: None,
                }),
            };
            let mut txn = StateTxn::new(&store, &mut changes);
            projector.apply(&mut txn, &logged).unwrap();
            if commit_each || i + 1 == openings.len() {
                projector.before_commit(&mut StateTxn::new(&store, &mut changes)).unwrap();
                store.commit(&std::mem::take(&mut changes), &meta).unwrap();
            }
        }
        store
    }

    #[test]
    fn each_workspace_counts_its_own_documents_and_a_reopened_session_moves_them() {
        let openings = [
            ("s1", Some("acme"), "alpha beta"),
            ("s2", Some("globex"), "alpha"),
            ("s3", None, "gamma gamma"),
            ("s1", Some("globex"), "alpha beta"),
        ];
        for commit_each in [true, false] {
            let store = fold_openings(&openings[..3], commit_each);
            let reader = IndexReader::open(&store).unwrap();
            let group = |session: &str| reader.session_group(&SessionId::new(session).unwrap()).unwrap();
            let (acme, globex) = (Scope::Group(group("s1")), Scope::Group(group("s2")));
            assert_eq!((group("s1"), group("s2"), group("s3")), (1, 2, NO_WORKSPACE_GROUP));
            assert_eq!(reader.corpus(acme).unwrap(), Corpus { docs: 1, terms: 2 });
            assert_eq!(reader.corpus(Scope::Group(0)).unwrap(), Corpus { docs: 1, terms: 2 });
            assert_eq!(reader.corpus(Scope::Store).unwrap(), Corpus { docs: 3, terms: 5 });
            assert_eq!(reader.document_frequency(Scope::Store, "alpha").unwrap(), 2);
            assert_eq!(reader.document_frequency(acme, "alpha").unwrap(), 1);
            assert_eq!(reader.document_frequency(globex, "beta").unwrap(), 0);

            let moved = fold_openings(&openings, commit_each);
            let reader = IndexReader::open(&moved).unwrap();
            assert_eq!(reader.corpus(acme).unwrap(), Corpus::default());
            assert_eq!(reader.corpus(globex).unwrap(), Corpus { docs: 2, terms: 3 });
            assert_eq!(reader.document_frequency(globex, "alpha").unwrap(), 2);
            assert_eq!(reader.document_frequency(acme, "alpha").unwrap(), 0);
            assert!(reader.in_scope(globex, &SessionId::new("s1").unwrap()).unwrap());
            // A frequency that falls to zero leaves no key behind.
            let mut acme_keys = 0;
            moved
                .scan_prefix(&[GROUP_DF_TAG, &1u32.to_be_bytes()].concat(), &mut |_, _| {
                    acme_keys += 1;
                    true
                })
                .unwrap();
            assert_eq!(acme_keys, 0);
        }
        // Where commits fall does not change what is stored.
        let digest = |store: &mnemo_pipeline::MemoryStore| mnemo_pipeline::projection_digest(store).unwrap();
        assert_eq!(digest(&fold_openings(&openings, true)), digest(&fold_openings(&openings, false)));
    }

    #[test]
    fn secrets_are_never_terms() {
        let terms = index_terms("use key sk-ant-abcdefgh1234 now");
        assert!(terms.keys().all(|t| !t.contains("abcdefgh")), "{terms:?}");
        // The placeholder `[redacted]` is a word like any other (stemmed).
        assert!(terms.contains_key("redact"));
    }
}
