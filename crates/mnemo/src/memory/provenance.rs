//! Why an item exists, a fact's history, and undoing a consolidation, through the facade: the
//! memory crate decides ([`mnemo_memory::history`], [`mnemo_memory::unmerge`]); this module
//! resolves what the log holds behind its pointers (an event id's position, hash and text, the
//! extraction commit at a position).

use mnemo_core::{
    EventId, ItemId, MemoryCommit, MemoryItem, OperationId, Position, Record, Role, SessionId, TimestampMs,
};
use mnemo_log::Envelope;
use mnemo_memory::{ItemEvent, ItemHistory, MemoryError, MemoryLedger, MemoryView};
use serde::Serialize;

use super::{Memory, host_error};
use crate::error::Error;
use crate::mnemo::Mnemo;

/// Most characters of an event's text `why` shows.
pub const EVIDENCE_TEXT_CHARS_MAX: usize = 2_000;

/// An event that justifies an item, found in the log by its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// The session it was said in.
    pub session: SessionId,
    /// The event.
    pub event: EventId,
    /// Its log position; `None` when the log does not hold it (an id from elsewhere).
    pub position: Option<Position>,
    /// Its envelope's hash, hex.
    pub hash: Option<String>,
    /// When it was said.
    pub at: Option<TimestampMs>,
    /// Who said it: `user`, `model`, ...
    pub role: Option<String>,
    /// What was said, secrets redacted, at most [`EVIDENCE_TEXT_CHARS_MAX`] characters.
    pub text: Option<String>,
}

/// A record that touched an item, with its envelope's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedEvent {
    /// What the record did.
    #[serde(flatten)]
    pub event: ItemEvent,
    /// The record's envelope hash, hex.
    pub hash: Option<String>,
}

/// Why an item exists: the events it was learned from, and the records that made it what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemWhy {
    /// The item.
    pub item: MemoryItem,
    /// Its sources, resolved in the log, in source order.
    pub evidence: Vec<Evidence>,
    /// The records that created, merged, superseded or split it, in log order.
    pub records: Vec<RecordedEvent>,
}

fn envelope(mnemo: &Mnemo, position: Position) -> Result<Option<Envelope>, Error> {
    Ok(crate::blocking::wait(|| mnemo.log.read(position))?)
}

fn record_of(envelope: &Envelope) -> Result<Record, Error> {
    Ok(mnemo_pipeline::LoggedRecord::decode(envelope.clone())?.record)
}

fn role_name(role: Role) -> String {
    serde_json::to_value(role).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn evidence(mnemo: &Mnemo, session: &SessionId, event: &EventId) -> Result<Evidence, Error> {
    let mut found = Evidence {
        session: session.clone(),
        event: event.clone(),
        position: None,
        hash: None,
        at: None,
        role: None,
        text: None,
    };
    let Some(position) = mnemo.log.key_holder(&mnemo_core::event_key(event.as_str()))? else {
        return Ok(found);
    };
    let Some(envelope) = envelope(mnemo, position)? else { return Ok(found) };
    found.position = Some(position);
    found.hash = Some(envelope.hash_hex());
    if let Record::RuntimeEvent(runtime) = record_of(&envelope)? {
        found.at = Some(runtime.ts);
        found.role = Some(role_name(runtime.role));
        if let Some(mnemo_core::Content::Text(text)) = &runtime.content {
            let redacted = mnemo_core::redaction::redact_secrets(&text.text);
            found.text = Some(redacted.chars().take(EVIDENCE_TEXT_CHARS_MAX).collect());
        }
    }
    Ok(found)
}

impl Memory<'_> {
    /// Why `item` exists: every source event's position, hash and text, and every record that
    /// touched it. `None` when the store holds no such item.
    pub fn why(&self, item: &ItemId) -> crate::Result<Option<ItemWhy>> {
        let store = MemoryLedger::state(self.mnemo)?;
        let view = MemoryView::new(store.as_ref());
        let Some(held) = view.item(item)? else { return Ok(None) };
        let mut found = Vec::with_capacity(held.fields.sources.len());
        for source in &held.fields.sources {
            found.push(evidence(self.mnemo, &source.session, &source.event)?);
        }
        let mut records = Vec::new();
        for event in view.item_events(item)? {
            let hash = envelope(self.mnemo, Position(event.position))?.map(|e| e.hash_hex());
            records.push(RecordedEvent { event, hash });
        }
        Ok(Some(ItemWhy { item: held, evidence: found, records }))
    }

    /// Every value of the fact `item` states, oldest first by log position, with what each record
    /// did; the current one is marked. Empty when the store holds no such item.
    pub fn history(&self, item: &ItemId) -> crate::Result<Vec<ItemHistory>> {
        let store = MemoryLedger::state(self.mnemo)?;
        Ok(mnemo_memory::history(store.as_ref(), item)?)
    }

    /// Undoes the newest merge into `item` (the statement becomes its own item again, with its
    /// sources) or the newest supersession of or by it (the replaced item is restored), as one
    /// mutation record under `operation`.
    pub fn unmerge(
        &self,
        item: &ItemId,
        operation: OperationId,
    ) -> crate::Result<mnemo_memory::OperationResult> {
        let mnemo = self.mnemo;
        let commit_at = |position: u64| -> Result<Option<MemoryCommit>, MemoryError> {
            let found = envelope(mnemo, Position(position)).map_err(host_error)?;
            match found.map(|e| record_of(&e)).transpose().map_err(host_error)? {
                Some(Record::MemoryCommit(commit)) => Ok(Some(commit)),
                _ => Ok(None),
            }
        };
        Ok(mnemo_memory::unmerge(self.mnemo, item, &operation, &commit_at)?)
    }
}
