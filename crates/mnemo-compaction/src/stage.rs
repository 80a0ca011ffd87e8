//! The `latest-checkpoint` stage: each session's latest valid checkpoint, and an index of its
//! compactable projection that lets assembly check a checkpoint without reading what it covers.
//!
//! Keys (`{s}` is the session id; ids hold no NUL):
//! - `v\0{s}` -> the view: `empty` once the session's first record is folded, or the selected
//!   checkpoint with its log position and time. A missing key is *uninitialised* (the stage has
//!   not seen the session), which readers treat differently from *empty* (compaction.md §4.6).
//! - `c\0{s}\0{position}` -> a valid checkpoint at the furthest coverage seen, a candidate of the
//!   recovery selection (§4.4); candidates behind the furthest coverage are dropped.
//! - `q\0{s}\0{position}` -> why a recorded checkpoint was quarantined (invalid shape or summary).
//! - `h\0{s}` -> the projection head: events indexed, characters, and the resumable digest
//!   (binary, see `Head::encode`).
//! - `e\0{s}\0{index}` -> one compactable event (binary, see `ProjectedEntry::encode`): identity,
//!   stream revision, size, running characters and the digest state after it.
//! - `i\0{s}\0{event id}` -> the index of the first compactable event with that id.
//!
//! Architecture invariant: the view is the recovery selection of §4.4 over the candidates folded so
//! far, so folding live, rebuilding after the keyspaces are deleted, and recovering from a scan of
//! the log all select the same checkpoint.

use mnemo_core::{
    Author, CheckpointRecord, EventId, Position, Record, Role, RunId, RuntimeEvent, SessionId,
    StreamRevision, TimestampMs, TurnId,
};
use mnemo_pipeline::{LoggedRecord, PipelineError, Projector, StateStore, StateTxn};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{EntryFacts, ProjectionView, can_replace, validate_loadable};
use crate::policy::CompactionPolicy;
use crate::projection::{SourceDigester, estimated_chars, is_compactable};

/// The stage's registered name.
pub const STAGE_NAME: &str = "latest-checkpoint";
/// Bumped whenever what the stage writes changes; a new version rebuilds the stage.
const VERSION: u32 = 3;

const VIEW: &[u8] = b"v\0";
const CANDIDATE: &[u8] = b"c\0";
const QUARANTINE: &[u8] = b"q\0";
const HEAD: &[u8] = b"h\0";
const ENTRY: &[u8] = b"e\0";
const INDEX: &[u8] = b"i\0";

/// A checkpoint as the log recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedCheckpoint {
    /// Its log position: the checkpoint's high-water mark.
    pub position: Position,
    /// When it was appended.
    pub timestamp: TimestampMs,
    /// The checkpoint.
    pub checkpoint: CheckpointRecord,
}

/// The stage's view of one session (§4.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LatestView {
    /// The stage has not seen the session: recover by scanning the log.
    Uninitialised,
    /// The session has no valid checkpoint.
    Empty,
    /// The selected checkpoint.
    Checkpoint(Box<LoggedCheckpoint>),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum StoredView {
    Empty,
    Checkpoint(Box<LoggedCheckpoint>),
}

/// The projection head of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Head {
    count: u64,
    chars: u64,
    /// The saved source digester after the last event ([`SourceDigester::to_bytes`]).
    digester: Vec<u8>,
}

impl Head {
    /// Count and characters (LEB128 each), then the saved digester.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.digester.len());
        write_varint(&mut out, self.count);
        write_varint(&mut out, self.chars);
        out.extend_from_slice(&self.digester);
        out
    }

    fn decode(mut bytes: &[u8]) -> Result<Head, PipelineError> {
        let bytes = &mut bytes;
        let count = read_varint(bytes)?;
        let chars = read_varint(bytes)?;
        Ok(Head { count, chars, digester: bytes.to_vec() })
    }
}

/// One indexed compactable event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedEntry {
    /// The event.
    pub event: EventId,
    /// Its run.
    pub run: RunId,
    /// Its turn.
    pub turn: TurnId,
    /// Its role.
    pub role: Role,
    /// Its author.
    pub author: Author,
    /// Whether it is a partial snapshot. Always false since partial events left the compactable
    /// projection (decision 0145); the byte stays so the entry's layout is unchanged.
    pub partial: bool,
    /// Its revision in the session stream.
    pub revision: StreamRevision,
    /// Its log position.
    pub position: Position,
    /// Its size estimate in UTF-16 units.
    pub chars: u64,
    /// The sizes of every event up to and including this one.
    pub running_chars: u64,
    /// The saved source digester after this event.
    digester: Vec<u8>,
}

impl ProjectedEntry {
    /// A compact binary form, a few times smaller than JSON (an entry is stored per event): the
    /// event, run and turn ids, role and author names (each LEB128 length and UTF-8), the partial
    /// flag (one byte), revision, position, characters and running characters (LEB128 each), then
    /// the saved digester.
    fn encode(&self) -> Result<Vec<u8>, PipelineError> {
        let mut out = Vec::with_capacity(96 + self.digester.len());
        let role = serde_json::to_value(self.role).map_err(damaged)?;
        let author = serde_json::to_value(self.author).map_err(damaged)?;
        for text in [
            self.event.as_str(),
            self.run.as_str(),
            self.turn.as_str(),
            role.as_str().unwrap_or_default(),
            author.as_str().unwrap_or_default(),
        ] {
            write_varint(&mut out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
        out.push(u8::from(self.partial));
        for n in [self.revision.0, self.position.0, self.chars, self.running_chars] {
            write_varint(&mut out, n);
        }
        out.extend_from_slice(&self.digester);
        Ok(out)
    }

    fn decode(mut bytes: &[u8]) -> Result<ProjectedEntry, PipelineError> {
        let bytes = &mut bytes;
        let event = EventId::new(read_text(bytes)?).map_err(damaged)?;
        let run = RunId::new(read_text(bytes)?).map_err(damaged)?;
        let turn = TurnId::new(read_text(bytes)?).map_err(damaged)?;
        let role = serde_json::from_value(serde_json::Value::String(read_text(bytes)?)).map_err(damaged)?;
        let author = serde_json::from_value(serde_json::Value::String(read_text(bytes)?)).map_err(damaged)?;
        let (&partial, rest) = bytes.split_first().ok_or_else(|| damaged("an entry is cut short"))?;
        *bytes = rest;
        let revision = StreamRevision(read_varint(bytes)?);
        let position = Position(read_varint(bytes)?);
        let chars = read_varint(bytes)?;
        let running_chars = read_varint(bytes)?;
        Ok(ProjectedEntry {
            event,
            run,
            turn,
            role,
            author,
            partial: partial != 0,
            revision,
            position,
            chars,
            running_chars,
            digester: bytes.to_vec(),
        })
    }
}

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(bytes: &mut &[u8]) -> Result<u64, PipelineError> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first().ok_or_else(|| damaged("a number is cut short"))?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(damaged("a number is longer than 64 bits"))
}

fn read_text(bytes: &mut &[u8]) -> Result<String, PipelineError> {
    let length = usize::try_from(read_varint(bytes)?).map_err(damaged)?;
    if length > bytes.len() {
        return Err(damaged("a text is cut short"));
    }
    let (text, rest) = bytes.split_at(length);
    *bytes = rest;
    String::from_utf8(text.to_vec()).map_err(damaged)
}

/// Builds the stage from its configuration: the compaction policy, checked here so a bad spec
/// fails at open.
pub fn factory(config: &toml::Table) -> Result<Box<dyn Projector>, String> {
    CompactionPolicy::from_table(config)?;
    Ok(Box::new(LatestCheckpointStage))
}

/// The projector.
#[derive(Debug, Default, Clone, Copy)]
pub struct LatestCheckpointStage;

/// Where the view of `session` is stored (tests damage it on purpose).
#[cfg(test)]
pub(crate) fn view_key(session: &SessionId) -> Vec<u8> {
    key(VIEW, session)
}

fn key(tag: &[u8], session: &SessionId) -> Vec<u8> {
    [tag, session.as_str().as_bytes()].concat()
}

fn sub_key(tag: &[u8], session: &SessionId, rest: &[u8]) -> Vec<u8> {
    [tag, session.as_str().as_bytes(), b"\0", rest].concat()
}

fn damaged(reason: impl std::fmt::Display) -> PipelineError {
    PipelineError::DamagedState { stage: STAGE_NAME.to_owned(), reason: reason.to_string() }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, PipelineError> {
    serde_json::to_vec(value).map_err(damaged)
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, PipelineError> {
    serde_json::from_slice(bytes).map_err(damaged)
}

impl Projector for LatestCheckpointStage {
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
        let view_key = key(VIEW, &session);
        if state.get(&view_key)?.is_none() {
            state.put(view_key, encode(&StoredView::Empty)?);
        }
        match &logged.record {
            Record::RuntimeEvent(event) if is_compactable(event) => {
                index_event(state, &session, event, logged)
            }
            Record::CheckpointRecorded(checkpoint) => fold_checkpoint(state, &session, checkpoint, logged),
            _ => Ok(()),
        }
    }
}

fn index_event(
    state: &mut StateTxn<'_>,
    session: &SessionId,
    event: &RuntimeEvent,
    logged: &LoggedRecord,
) -> Result<(), PipelineError> {
    let head_key = key(HEAD, session);
    let mut head = match state.get(&head_key)? {
        Some(bytes) => Head::decode(&bytes)?,
        None => Head::default(),
    };
    let mut digester = if head.count == 0 { SourceDigester::new() } else { restore(&head.digester)? };
    digester.feed_event(event);
    let chars = estimated_chars(event);
    head.chars += chars;
    head.digester = digester.to_bytes();
    let entry = ProjectedEntry {
        event: event.id.clone(),
        run: event.run_id.clone(),
        turn: event.turn_id.clone(),
        role: event.role,
        author: event.author,
        partial: event.partial,
        revision: logged.revision,
        position: logged.position,
        chars,
        running_chars: head.chars,
        digester: head.digester.clone(),
    };
    let index_key = sub_key(INDEX, session, event.id.as_str().as_bytes());
    if state.get(&index_key)?.is_none() {
        state.put(index_key, head.count.to_be_bytes().to_vec());
    }
    state.put(sub_key(ENTRY, session, &head.count.to_be_bytes()), entry.encode()?);
    head.count += 1;
    state.put(head_key, head.encode());
    Ok(())
}

fn restore(bytes: &[u8]) -> Result<SourceDigester, PipelineError> {
    SourceDigester::from_bytes(bytes).ok_or_else(|| damaged("a saved digest state does not decode"))
}

fn fold_checkpoint(
    state: &mut StateTxn<'_>,
    session: &SessionId,
    checkpoint: &CheckpointRecord,
    logged: &LoggedRecord,
) -> Result<(), PipelineError> {
    let position_key = logged.position.0.to_be_bytes();
    if let Err(reason) = validate_loadable(checkpoint, Some(session)) {
        state.put(sub_key(QUARANTINE, session, &position_key), reason.into_bytes());
        return Ok(());
    }
    let candidate_prefix = sub_key(CANDIDATE, session, b"");
    let mut candidates: Vec<LoggedCheckpoint> =
        state.scan_prefix(&candidate_prefix)?.iter().map(|(_, v)| decode(v)).collect::<Result<_, _>>()?;
    let furthest = candidates.iter().map(|c| c.checkpoint.coverage.event_count).max().unwrap_or(0);
    let count = checkpoint.coverage.event_count;
    if count < furthest {
        return Ok(());
    }
    if count > furthest {
        for (key, _) in state.scan_prefix(&candidate_prefix)? {
            state.delete(key);
        }
        candidates.clear();
    }
    let logged_checkpoint = LoggedCheckpoint {
        position: logged.position,
        timestamp: logged.timestamp,
        checkpoint: checkpoint.clone(),
    };
    state.put(sub_key(CANDIDATE, session, &position_key), encode(&logged_checkpoint)?);
    candidates.push(logged_checkpoint);
    let selected = select(&candidates).cloned();
    let view = match selected {
        Some(selected) => StoredView::Checkpoint(Box::new(selected)),
        None => StoredView::Empty,
    };
    state.put(key(VIEW, session), encode(&view)?);
    Ok(())
}

/// The recovery selection of §4.4 over valid candidates: the furthest coverage; among those the
/// tips of successor chains (a candidate another one validly succeeds is not a tip), or all of them
/// if none is; then the latest append time, then the latest log position (Mnemo's records have no
/// event id, and the position orders them the same way).
pub fn select(candidates: &[LoggedCheckpoint]) -> Option<&LoggedCheckpoint> {
    let furthest = candidates.iter().map(|c| c.checkpoint.coverage.event_count).max()?;
    let at_furthest: Vec<&LoggedCheckpoint> =
        candidates.iter().filter(|c| c.checkpoint.coverage.event_count == furthest).collect();
    let has_successor = |candidate: &LoggedCheckpoint| {
        at_furthest.iter().any(|other| {
            other.checkpoint.previous.as_ref() == Some(&candidate.checkpoint.checkpoint)
                && can_replace(Some(&candidate.checkpoint), &other.checkpoint)
        })
    };
    let tips: Vec<&LoggedCheckpoint> = at_furthest.iter().copied().filter(|c| !has_successor(c)).collect();
    let pool = if tips.is_empty() { at_furthest } else { tips };
    pool.into_iter().max_by_key(|c| (c.timestamp, c.position))
}

/// The stage's view of `session`.
pub fn view(store: &dyn StateStore, session: &SessionId) -> Result<LatestView, PipelineError> {
    match store.get(&key(VIEW, session))? {
        None => Ok(LatestView::Uninitialised),
        Some(bytes) => Ok(match decode::<StoredView>(&bytes)? {
            StoredView::Empty => LatestView::Empty,
            StoredView::Checkpoint(checkpoint) => LatestView::Checkpoint(checkpoint),
        }),
    }
}

/// Every quarantined checkpoint record of `session`: its position and why.
pub fn quarantined(
    store: &dyn StateStore,
    session: &SessionId,
) -> Result<Vec<(Position, String)>, PipelineError> {
    let prefix = sub_key(QUARANTINE, session, b"");
    let mut out = Vec::new();
    store.scan_prefix(&prefix, &mut |key, value| {
        let mut position = [0u8; 8];
        if key.len() == prefix.len() + 8 {
            position.copy_from_slice(&key[prefix.len()..]);
        }
        out.push((Position(u64::from_be_bytes(position)), String::from_utf8_lossy(value).into_owned()));
        true
    })?;
    Ok(out)
}

/// One session's indexed compactable projection, read from the stage's store.
#[derive(Debug)]
pub struct IndexedProjection<'a> {
    store: &'a dyn StateStore,
    session: SessionId,
    count: u64,
}

impl<'a> IndexedProjection<'a> {
    /// The index of `session` as the store holds it now.
    pub fn open(store: &'a dyn StateStore, session: &SessionId) -> Result<Self, PipelineError> {
        let count = match store.get(&key(HEAD, session))? {
            Some(bytes) => Head::decode(&bytes)?.count,
            None => 0,
        };
        Ok(IndexedProjection { store, session: session.clone(), count })
    }

    /// The same index cut at `count` events (a view as of an earlier point).
    pub fn truncated(mut self, count: u64) -> Self {
        self.count = self.count.min(count);
        self
    }

    /// The entry at `index`.
    pub fn entry(&self, index: u64) -> Option<ProjectedEntry> {
        if index >= self.count {
            return None;
        }
        let bytes = self.store.get(&sub_key(ENTRY, &self.session, &index.to_be_bytes())).ok()??;
        ProjectedEntry::decode(&bytes).ok()
    }

    /// The characters of the first `count` events.
    pub fn chars_through(&self, count: u64) -> u64 {
        if count == 0 { 0 } else { self.entry(count - 1).map_or(0, |e| e.running_chars) }
    }
}

impl ProjectionView for IndexedProjection<'_> {
    fn len(&self) -> u64 {
        self.count
    }

    fn facts(&self, index: u64) -> Option<EntryFacts> {
        let entry = self.entry(index)?;
        Some(EntryFacts {
            event: entry.event,
            session: self.session.clone(),
            run: entry.run,
            turn: entry.turn,
            role: entry.role,
            author: entry.author,
        })
    }

    fn index_of(&self, event: &EventId, within: u64) -> Option<u64> {
        let bytes = self.store.get(&sub_key(INDEX, &self.session, event.as_str().as_bytes())).ok()??;
        let index = u64::from_be_bytes(bytes.as_slice().try_into().ok()?);
        (index < within.min(self.count)).then_some(index)
    }

    fn prefix_digest(&self, count: u64) -> Option<mnemo_core::Digest> {
        if count == 0 {
            return Some(SourceDigester::new().digest());
        }
        let entry = self.entry(count - 1)?;
        Some(restore(&entry.digester).ok()?.digest())
    }

    fn foreign_session_within(&self, _count: u64, _session: &SessionId) -> bool {
        // The index is kept per session stream: every entry belongs to this session.
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mnemo_core::StreamId;
    use mnemo_pipeline::{Changes, MemoryStore, StageMeta};

    use super::*;
    use crate::checkpoint::match_prefix;
    use crate::testing::{GOOD_SUMMARY, T0, build_text, sid, text_event};

    /// Folds records through the stage into a memory store, as the runner would.
    pub(crate) fn fold(records: &[Record]) -> Arc<MemoryStore> {
        let store = Arc::new(MemoryStore::new());
        let mut stage = LatestCheckpointStage;
        let mut changes = Changes::new();
        for (index, record) in records.iter().enumerate() {
            let logged = LoggedRecord {
                position: Position(index as u64 + 1),
                stream: StreamId::session(&sid()),
                revision: StreamRevision(index as u64),
                timestamp: TimestampMs(T0 + index as u64),
                record: record.clone(),
            };
            let mut txn = mnemo_pipeline::StateTxn::new(store.as_ref(), &mut changes);
            stage.apply(&mut txn, &logged).unwrap_or_else(|e| panic!("{e}"));
        }
        let meta =
            StageMeta { watermark: Position(records.len() as u64), version: VERSION, config_hash: [0; 32] };
        store.commit(&changes, &meta).unwrap_or_else(|e| panic!("{e}"));
        store
    }

    #[test]
    fn indexes_the_projection_and_selects_the_furthest_then_the_chain_tip() {
        let events: Vec<RuntimeEvent> = (1..=6u64)
            .map(|i| text_event(&format!("e{i}"), &format!("t{}", i.div_ceil(2)), "user", "hello"))
            .collect();
        let first = build_text(&events[..2], GOOD_SUMMARY, None);
        let further = build_text(&events[..4], GOOD_SUMMARY, Some(&first));
        let successor = build_text(&events[..4], &GOOD_SUMMARY.replace("build", "docs"), Some(&further));
        let mut records: Vec<Record> = events.iter().cloned().map(Record::RuntimeEvent).collect();
        records.push(Record::CheckpointRecorded(successor.clone()));
        records.push(Record::CheckpointRecorded(further.clone()));
        records.push(Record::CheckpointRecorded(first.clone()));
        let store = fold(&records);
        let LatestView::Checkpoint(selected) = view(store.as_ref(), &sid()).unwrap_or(LatestView::Empty)
        else {
            panic!("a checkpoint is selected");
        };
        assert_eq!(
            selected.checkpoint.checkpoint, successor.checkpoint,
            "the chain tip wins whatever the order"
        );
        let projection = IndexedProjection::open(store.as_ref(), &sid()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(projection.len(), 6);
        assert_eq!(match_prefix(&successor, &projection), Ok(4));
        assert_eq!(projection.prefix_digest(4), Some(crate::projection::source_digest(&events[..4])));
        assert_eq!(projection.chars_through(3), 15);
        assert_eq!(view(store.as_ref(), &crate::testing::id("s9")).ok(), Some(LatestView::Uninitialised));
    }

    #[test]
    fn entries_and_heads_round_trip_their_binary_form() {
        let mut digester = SourceDigester::new();
        digester.feed_event(&text_event("e1", "t1", "user", "hello"));
        let entry = ProjectedEntry {
            event: EventId::new("ev:1/ü").unwrap_or_else(|e| panic!("{e}")),
            run: RunId::new("run-1").unwrap_or_else(|e| panic!("{e}")),
            turn: TurnId::new("t1").unwrap_or_else(|e| panic!("{e}")),
            role: Role::Tool,
            author: Author::Host,
            partial: true,
            revision: StreamRevision(300),
            position: Position(1 << 40),
            chars: 0,
            running_chars: u64::MAX,
            digester: digester.to_bytes(),
        };
        let bytes = entry.encode().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ProjectedEntry::decode(&bytes).ok(), Some(entry));
        assert!(ProjectedEntry::decode(&bytes[..3]).is_err(), "a cut entry is damaged state");
        let head = Head { count: 129, chars: 5, digester: digester.to_bytes() };
        assert_eq!(Head::decode(&head.encode()).ok(), Some(head));
        assert!(Head::decode(&[0x80]).is_err());
    }

    #[test]
    fn an_invalid_checkpoint_is_quarantined_and_never_selected() {
        let events: Vec<RuntimeEvent> =
            (1..=2).map(|i| text_event(&format!("e{i}"), "t1", "user", "hi")).collect();
        let mut bad = build_text(&events, GOOD_SUMMARY, None);
        bad.body = mnemo_core::CheckpointBody::Text {
            summary: "## Goal\nx".to_owned(),
            summary_format: mnemo_core::SummaryFormat::SectionsV1,
        };
        let mut records: Vec<Record> = events.iter().cloned().map(Record::RuntimeEvent).collect();
        records.push(Record::CheckpointRecorded(bad));
        let store = fold(&records);
        assert_eq!(view(store.as_ref(), &sid()).ok(), Some(LatestView::Empty));
        let reasons = quarantined(store.as_ref(), &sid()).unwrap_or_default();
        assert_eq!(reasons.len(), 1);
        assert!(reasons[0].1.contains("malformed_summary_missing_section"), "{reasons:?}");
    }
}
