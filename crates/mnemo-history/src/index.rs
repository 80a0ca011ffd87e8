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
//! (at most 200), however large the corpus; document frequencies and the corpus size and length
//! are global. A session's postings of one term are packed into blocks read with point lookups, not
//! range scans: an LSM tree answers a lookup from its bloom filters, while a scan must seek every
//! table that overlaps the range.
//!
//! Keys (`\0` separates; ids and terms never contain NUL):
//! - `s` -> statistics: documents, total terms, next document number, next session ordinal (u64 BE
//!   each), then BM25 `k1` and `b` in thousandths (u32 BE each);
//! - `o\0<session>` -> the session's ordinal and its next turn ordinal (u32 BE each);
//! - `u\0<session ordinal u32 BE><turn>` -> the turn's ordinal in its session (u32 BE, from 1);
//! - `q\0<session ordinal u32 BE><term>` -> how many posting blocks the pair has and how many
//!   postings the last holds (u32 BE each);
//! - `p\0<session ordinal u32 BE><term>\0<block u32 BE>` -> up to [`POSTING_BLOCK_ENTRIES_MAX`]
//!   postings in document order, each document number (LEB128 u64), term frequency, document length
//!   and turn ordinal (0 for a title) (LEB128 u32 each);
//! - `f\0<term>` -> how many documents hold the term (u64 BE);
//! - `d\0<document u64 BE>` -> [`IndexedDoc`] (canonical JSON);
//! - `k\0<session>\0<message id>` and `t\0<session>` -> the document of a message, of a title.

use std::collections::BTreeMap;

use mnemo_core::{Record, SessionId, TimestampMs, TurnId};
use mnemo_pipeline::{LoggedRecord, PipelineError, Projector, StateStore, StateTxn};
use serde::{Deserialize, Serialize};

use crate::codec::Codec;
use crate::messages::{self, MessageKind, VisibleMessage};
use crate::redaction::redact_secrets;
use crate::text::term_counts;

/// The stage's registered name.
pub const STAGE_NAME: &str = "history-search";

/// Bumped whenever what the stage writes changes; a new version rebuilds the stage.
// 2: redaction covers private key blocks, JWTs, URL passwords and more providers' keys.
const VERSION: u32 = 2;

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
const POSTING_META_TAG: &[u8] = b"q\0";

/// Most postings in one block of a (session, term) pair.
pub const POSTING_BLOCK_ENTRIES_MAX: u32 = 128;
const DF_TAG: &[u8] = b"f\0";
const DOC_TAG: &[u8] = b"d\0";
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
    /// The redacted searchable text.
    pub text: String,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexStats {
    /// Documents in the index.
    pub docs: u64,
    /// Terms over all documents.
    pub terms: u64,
    next_doc: u64,
    next_session: u64,
    /// The BM25 parameters queries use.
    pub bm25: Bm25,
}

const STATS_BYTES: usize = 4 * 8 + 2 * 4;

impl IndexStats {
    fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(STATS_BYTES);
        for value in [self.docs, self.terms, self.next_doc, self.next_session] {
            bytes.extend_from_slice(&value.to_be_bytes());
        }
        bytes.extend_from_slice(&self.bm25.k1_milli.to_be_bytes());
        bytes.extend_from_slice(&self.bm25.b_milli.to_be_bytes());
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
            bm25: Bm25 { k1_milli: u32_at(32), b_milli: u32_at(36) },
        })
    }

    /// Mean document length in terms (0 for an empty index).
    pub fn average_length(&self) -> f64 {
        if self.docs == 0 { 0.0 } else { self.terms as f64 / self.docs as f64 }
    }
}

/// Builds the stage from its configuration: optional `k1` (0..=3) and `b` (0..=1).
pub fn factory(config: &toml::Table) -> Result<Box<dyn Projector>, String> {
    let mut bm25 = Bm25::default();
    for (key, value) in config {
        let number = value
            .as_float()
            .or_else(|| value.as_integer().map(|i| i as f64))
            .ok_or_else(|| format!("{STAGE_NAME}: `{key}` must be a number"))?;
        let (slot, max) = match key.as_str() {
            "k1" => (&mut bm25.k1_milli, BM25_K1_MAX),
            "b" => (&mut bm25.b_milli, 1.0),
            other => return Err(format!("{STAGE_NAME}: unknown configuration key {other:?}; known: k1, b")),
        };
        if !(0.0..=max).contains(&number) {
            return Err(format!("{STAGE_NAME}: `{key}` = {number} is outside 0..={max}"));
        }
        *slot = (number * 1000.0).round() as u32;
    }
    Ok(Box::new(HistorySearchIndex { bm25 }))
}

/// The projector.
#[derive(Debug, Default)]
pub struct HistorySearchIndex {
    bm25: Bm25,
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
            Record::SessionOpened(opened) => opened.title.as_ref(),
            Record::SessionFlagsChanged(changed) => changed.title.as_ref(),
            Record::RuntimeEvent(event) => {
                if let Some(message) = messages::project(event, logged.position) {
                    let mut writer = Writer::open(state, self.bm25)?;
                    writer.index_message(&session, &message)?;
                    writer.finish();
                }
                return Ok(());
            }
            _ => None,
        };
        if let Some(title) = title {
            let mut writer = Writer::open(state, self.bm25)?;
            writer.index_title(&session, title)?;
            writer.finish();
        }
        Ok(())
    }
}

/// The index's state during one fold step.
struct Writer<'t, 's> {
    state: &'t mut StateTxn<'s>,
    stats: IndexStats,
    before: Option<IndexStats>,
}

impl<'t, 's> Writer<'t, 's> {
    fn open(state: &'t mut StateTxn<'s>, bm25: Bm25) -> Result<Self, PipelineError> {
        let before = state.get(STATS_KEY)?.map(|bytes| IndexStats::decode(&bytes)).transpose()?;
        let mut stats = before.unwrap_or_default();
        stats.bm25 = bm25;
        Ok(Writer { state, stats, before })
    }

    fn finish(self) {
        if self.before != Some(self.stats) {
            self.state.put(STATS_KEY.to_vec(), self.stats.encode());
        }
    }

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
        };
        self.replace(key, doc)
    }

    fn index_message(&mut self, session: &SessionId, message: &VisibleMessage) -> Result<(), PipelineError> {
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
            text: redact_secrets(message.searchable_text().unwrap_or_default()).into_owned(),
        };
        self.replace(key, doc)
    }

    /// Removes the document `key` points at, if any, then indexes `doc` there (if it has terms).
    fn replace(&mut self, key: Vec<u8>, doc: IndexedDoc) -> Result<(), PipelineError> {
        if let Some(old) = self.state.get(&key)? {
            self.remove(CODEC.decode_u64(&old)?)?;
            self.state.delete(key.clone());
        }
        let (counts, length) = term_counts(&doc.text);
        if counts.is_empty() {
            return Ok(());
        }
        let (ordinal, turn) = self.ordinals(&doc.session, doc.turn_id.as_ref())?;
        let number = self.stats.next_doc;
        self.stats.next_doc += 1;
        self.stats.docs += 1;
        self.stats.terms += u64::from(length);
        for (term, frequency) in &counts {
            let posting = Posting { doc: number, frequency: *frequency, length, turn };
            self.add_posting(ordinal, term, posting)?;
            self.add_df(term, 1)?;
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
        let (counts, length) = term_counts(&doc.text);
        let (ordinal, _) = self.ordinals(&doc.session, None)?;
        for term in counts.keys() {
            self.remove_posting(ordinal, term, number)?;
            self.add_df(term, -1)?;
        }
        self.stats.docs -= 1;
        self.stats.terms -= u64::from(length);
        self.state.delete(doc_key(number));
        Ok(())
    }

    /// Appends a posting to the pair's last block, starting a new block when it is full.
    fn add_posting(&mut self, ordinal: u32, term: &str, posting: Posting) -> Result<(), PipelineError> {
        let meta_key = posting_meta_key(ordinal, term);
        let (mut blocks, mut filled) = match self.state.get(&meta_key)? {
            Some(bytes) => decode_pair(&bytes)?,
            None => (0, 0),
        };
        let mut block = Vec::new();
        if blocks == 0 || filled == POSTING_BLOCK_ENTRIES_MAX {
            blocks += 1;
            filled = 0;
        } else {
            block = self.state.get(&posting_block_key(ordinal, term, blocks - 1))?.unwrap_or_default();
        }
        posting.encode(&mut block);
        filled += 1;
        self.state.put(posting_block_key(ordinal, term, blocks - 1), block);
        self.state.put(meta_key, [blocks.to_be_bytes(), filled.to_be_bytes()].concat());
        Ok(())
    }

    /// Removes a document's posting from the pair's blocks. A block may be left short (or empty),
    /// so block numbers never move.
    fn remove_posting(&mut self, ordinal: u32, term: &str, number: u64) -> Result<(), PipelineError> {
        let meta_key = posting_meta_key(ordinal, term);
        let (blocks, filled) = match self.state.get(&meta_key)? {
            Some(bytes) => decode_pair(&bytes)?,
            None => {
                return Err(CODEC.damaged(format!("no postings of {term:?} in session ordinal {ordinal}")));
            }
        };
        for block_number in 0..blocks {
            let key = posting_block_key(ordinal, term, block_number);
            let postings = decode_block(&self.state.get(&key)?.unwrap_or_default())?;
            if postings.iter().any(|p| p.doc == number) {
                let mut block = Vec::new();
                postings.iter().filter(|p| p.doc != number).for_each(|p| p.encode(&mut block));
                self.state.put(key, block);
                if block_number + 1 == blocks {
                    self.state.put(meta_key, [blocks.to_be_bytes(), (filled - 1).to_be_bytes()].concat());
                }
                return Ok(());
            }
        }
        Err(CODEC.damaged(format!("document {number} has no posting of {term:?}")))
    }

    fn add_df(&mut self, term: &str, delta: i64) -> Result<(), PipelineError> {
        let key = [DF_TAG, term.as_bytes()].concat();
        let current = self.state.get(&key)?.map(|b| CODEC.decode_u64(&b)).transpose()?.unwrap_or(0);
        let next = current
            .checked_add_signed(delta)
            .ok_or_else(|| CODEC.damaged(format!("df of {term:?} underflows")))?;
        if next == 0 {
            self.state.delete(key);
        } else {
            self.state.put(key, next.to_be_bytes().to_vec());
        }
        Ok(())
    }

    /// The session's ordinal and the turn's (0 without a turn), assigning new ones as needed.
    fn ordinals(&mut self, session: &SessionId, turn: Option<&TurnId>) -> Result<(u32, u32), PipelineError> {
        let key = [SESSION_TAG, session.as_str().as_bytes()].concat();
        let (ordinal, mut next_turn) = match self.state.get(&key)? {
            Some(bytes) => decode_pair(&bytes)?,
            None => {
                let ordinal = u32::try_from(self.stats.next_session)
                    .map_err(|_| CODEC.damaged("more than 2^32 sessions".to_owned()))?;
                self.stats.next_session += 1;
                (ordinal, 1)
            }
        };
        let mut turn_ordinal = 0;
        if let Some(turn) = turn {
            let turn_key = [TURN_TAG, &ordinal.to_be_bytes(), turn.as_str().as_bytes()].concat();
            turn_ordinal = match self.state.get(&turn_key)? {
                Some(bytes) => CODEC.decode_u32(&bytes)?,
                None => {
                    let assigned = next_turn;
                    next_turn += 1;
                    self.state.put(turn_key, assigned.to_be_bytes().to_vec());
                    assigned
                }
            };
        }
        self.state.put(key, [ordinal.to_be_bytes(), next_turn.to_be_bytes()].concat());
        Ok((ordinal, turn_ordinal))
    }
}

fn posting_meta_key(ordinal: u32, term: &str) -> Vec<u8> {
    [POSTING_META_TAG, &ordinal.to_be_bytes(), term.as_bytes()].concat()
}

fn posting_block_key(ordinal: u32, term: &str, block: u32) -> Vec<u8> {
    [POSTING_TAG, &ordinal.to_be_bytes(), term.as_bytes(), b"\0", &block.to_be_bytes()].concat()
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

fn decode_block(mut bytes: &[u8]) -> Result<Vec<Posting>, PipelineError> {
    let mut postings = Vec::new();
    while !bytes.is_empty() {
        let posting = Posting::decode(&mut bytes)
            .ok_or_else(|| CODEC.damaged("a posting block does not decode".to_owned()))?;
        postings.push(posting);
    }
    Ok(postings)
}

fn decode_pair(bytes: &[u8]) -> Result<(u32, u32), PipelineError> {
    if bytes.len() != 8 {
        return Err(CODEC.damaged(format!("expected 8 bytes, found {}", bytes.len())));
    }
    Ok((CODEC.decode_u32(&bytes[..4])?, CODEC.decode_u32(&bytes[4..])?))
}

/// One posting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    pub doc: u64,
    pub frequency: u32,
    pub length: u32,
    /// The turn's ordinal in its session; 0 for a title.
    pub turn: u32,
}

impl Posting {
    fn encode(&self, out: &mut Vec<u8>) {
        write_varint(out, self.doc);
        for n in [self.frequency, self.length, self.turn] {
            write_varint(out, u64::from(n));
        }
    }

    fn decode(bytes: &mut &[u8]) -> Option<Posting> {
        let doc = read_varint(bytes)?;
        let mut small = || read_varint(bytes).and_then(|n| u32::try_from(n).ok());
        Some(Posting { doc, frequency: small()?, length: small()?, turn: small()? })
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
        self.store.get(&key)?.map(|bytes| decode_pair(&bytes).map(|p| p.0)).transpose()
    }

    pub(crate) fn turn_ordinal(&self, session: u32, turn: &TurnId) -> Result<Option<u32>, PipelineError> {
        let key = [TURN_TAG, &session.to_be_bytes(), turn.as_str().as_bytes()].concat();
        self.store.get(&key)?.map(|bytes| CODEC.decode_u32(&bytes)).transpose()
    }

    pub(crate) fn document_frequency(&self, term: &str) -> Result<u64, PipelineError> {
        let key = [DF_TAG, term.as_bytes()].concat();
        Ok(self.store.get(&key)?.map(|b| CODEC.decode_u64(&b)).transpose()?.unwrap_or(0))
    }

    /// Every posting of `term` in one session, in document order.
    pub(crate) fn postings(&self, session: u32, term: &str) -> Result<Vec<Posting>, PipelineError> {
        let Some(meta) = self.store.get(&posting_meta_key(session, term))? else {
            return Ok(Vec::new());
        };
        let (blocks, _) = decode_pair(&meta)?;
        let mut postings = Vec::new();
        for block in 0..blocks {
            let bytes = self.store.get(&posting_block_key(session, term, block))?.unwrap_or_default();
            postings.extend(decode_block(&bytes)?);
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

/// Term frequencies of a text as the index would count them (for tests and diagnostics).
pub fn index_terms(text: &str) -> BTreeMap<String, u32> {
    term_counts(&redact_secrets(text)).0
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
        let posting = Posting { doc: 1 << 40, frequency: 3, length: 200, turn: 0 };
        let mut block = Vec::new();
        posting.encode(&mut block);
        posting.encode(&mut block);
        assert_eq!(decode_block(&block).unwrap(), [posting, posting]);
        assert!(decode_block(&[0xff]).is_err());
    }

    #[test]
    fn stats_round_trip() {
        let stats = IndexStats { docs: 3, terms: 40, next_doc: 7, next_session: 2, bm25: Bm25::default() };
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

    #[test]
    fn secrets_are_never_terms() {
        let terms = index_terms("use key sk-ant-abcdefgh1234 now");
        assert!(terms.keys().all(|t| !t.contains("abcdefgh")), "{terms:?}");
        assert!(terms.contains_key("redacted"));
    }
}
