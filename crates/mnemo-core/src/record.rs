//! Every fact the log carries, one [`Record`] variant per kind, and the payload encoding.
//!
//! A record is encoded as the canonical JSON of its payload alone (see [`crate::canonical_json`]);
//! its kind and the kind's schema version travel in the log envelope beside it. Mnemo's own
//! payloads use snake_case keys; a RuntimeEvent keeps the reference system's camelCase shape.
//! Encoding validates first, so nothing that would fail to decode is ever written; decoding
//! validates again, so nothing invalid is ever handed out.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointRecord;
use crate::digest::{EncodeError, canonical_json};
use crate::event::{RuntimeEvent, present};
use crate::ids::{EventId, RunId, SessionId, StreamId, TurnId, WorkspaceId};
use crate::limits::{RECORD_BYTES_MAX, SESSION_SOURCE_BYTES_MAX, TITLE_BYTES_MAX};
use crate::memory::{ExtractionFailure, MemoryCommit, MemoryMutation, PolicyDenial};
use crate::validation::{ValidationError, bounded_bytes, fail};

/// Whether long-term memory may be used in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoryMode {
    /// Memory may be extracted and recalled.
    Enabled,
    /// No memory work happens for the session.
    Disabled,
}

/// A session began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionOpened {
    /// The session.
    pub session: SessionId,
    /// The workspace it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub workspace: Option<WorkspaceId>,
    /// Nothing from an incognito session is remembered.
    pub incognito: bool,
    /// Whether memory is on.
    pub memory: MemoryMode,
    /// A subagent's session.
    pub subagent: bool,
    /// A display title; non-empty, at most 512 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub title: Option<String>,
    /// The transcript format the session was imported from (`claude-code`, `codex`, ...), or the
    /// name a host gives its runtime; absent when not recorded. Schema version 2 (decision 0166).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source: Option<String>,
    /// The session this one came from: for a subagent's session the session that started it,
    /// for any other session the one it was forked from; absent when unknown or none. Schema
    /// version 2 (decisions 0166, 0168).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub parent: Option<SessionId>,
}

impl SessionOpened {
    /// The lowest schema version that holds the record: 1 without a source or a parent, so a
    /// session that names neither is the bytes and the version older builds wrote and read.
    pub fn schema_version(&self) -> u16 {
        if self.source.is_none() && self.parent.is_none() { 1 } else { 2 }
    }
}

/// Some of a session's flags changed. Absent fields are unchanged; at least one is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionFlagsChanged {
    /// The session.
    pub session: SessionId,
    /// The new incognito flag.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub incognito: Option<bool>,
    /// The new memory mode.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub memory: Option<MemoryMode>,
    /// The new title; non-empty, at most 512 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub title: Option<String>,
}

/// A session was archived or unarchived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionArchived {
    /// The session.
    pub session: SessionId,
    /// Archived after this record.
    pub archived: bool,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnStatus {
    /// Finished normally.
    Completed,
    /// Failed.
    Failed,
    /// Aborted.
    Aborted,
    /// Cancelled.
    Cancelled,
}

/// A turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnEnded {
    /// The session.
    pub session: SessionId,
    /// The turn.
    pub turn: TurnId,
    /// The run that ended it, if known.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub run: Option<RunId>,
    /// How it ended.
    pub status: TurnStatus,
}

/// Where a conversation copy stops (events-and-history.md §4.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum CopyBoundary {
    /// Up to and including this turn (a branch).
    ThroughTurn(TurnId),
    /// Strictly before this turn (a revision).
    BeforeTurn(TurnId),
    /// Up to and including this event.
    ThroughEvent(EventId),
}

/// A session was created as a copy of another one's prefix. Recorded on the new session's
/// stream; the copied events follow it there under their new ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationCopied {
    /// The session copied from.
    pub source: SessionId,
    /// The new session.
    pub session: SessionId,
    /// Where the copy stops.
    pub up_to: CopyBoundary,
    /// Each copied event as `[source event id, new event id]`, in copy order; each side unique.
    pub events: Vec<(EventId, EventId)>,
}

/// Every kind of record, with its stable code. Codes are part of the on-disk format: a code is
/// never reused or renumbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RecordKind {
    /// [`SessionOpened`], code 1.
    SessionOpened,
    /// [`SessionFlagsChanged`], code 2.
    SessionFlagsChanged,
    /// [`SessionArchived`], code 3.
    SessionArchived,
    /// [`RuntimeEvent`], code 4.
    RuntimeEvent,
    /// [`TurnEnded`], code 5.
    TurnEnded,
    /// [`CheckpointRecord`], code 6.
    CheckpointRecorded,
    /// [`MemoryCommit`], code 7.
    MemoryCommit,
    /// [`MemoryMutation`], code 8.
    MemoryMutation,
    /// [`ExtractionFailure`], code 9.
    ExtractionFailure,
    /// [`PolicyDenial`], code 10.
    PolicyDenial,
    /// [`ConversationCopied`], code 11.
    ConversationCopied,
}

impl RecordKind {
    /// Every kind, in code order.
    pub const ALL: [RecordKind; 11] = [
        RecordKind::SessionOpened,
        RecordKind::SessionFlagsChanged,
        RecordKind::SessionArchived,
        RecordKind::RuntimeEvent,
        RecordKind::TurnEnded,
        RecordKind::CheckpointRecorded,
        RecordKind::MemoryCommit,
        RecordKind::MemoryMutation,
        RecordKind::ExtractionFailure,
        RecordKind::PolicyDenial,
        RecordKind::ConversationCopied,
    ];

    /// The kind's stable code in the log envelope.
    pub fn code(self) -> u16 {
        match self {
            RecordKind::SessionOpened => 1,
            RecordKind::SessionFlagsChanged => 2,
            RecordKind::SessionArchived => 3,
            RecordKind::RuntimeEvent => 4,
            RecordKind::TurnEnded => 5,
            RecordKind::CheckpointRecorded => 6,
            RecordKind::MemoryCommit => 7,
            RecordKind::MemoryMutation => 8,
            RecordKind::ExtractionFailure => 9,
            RecordKind::PolicyDenial => 10,
            RecordKind::ConversationCopied => 11,
        }
    }

    /// The kind with this code, if there is one.
    pub fn from_code(code: u16) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The kind's snake_case name, as shown in exports and errors.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::SessionOpened => "session_opened",
            RecordKind::SessionFlagsChanged => "session_flags_changed",
            RecordKind::SessionArchived => "session_archived",
            RecordKind::RuntimeEvent => "runtime_event",
            RecordKind::TurnEnded => "turn_ended",
            RecordKind::CheckpointRecorded => "checkpoint_recorded",
            RecordKind::MemoryCommit => "memory_commit",
            RecordKind::MemoryMutation => "memory_mutation",
            RecordKind::ExtractionFailure => "extraction_failure",
            RecordKind::PolicyDenial => "policy_denial",
            RecordKind::ConversationCopied => "conversation_copied",
        }
    }

    /// The newest version of this kind's payload schema, which this code reads with every
    /// older one. It changes when the payload's shape changes; older versions stay readable by
    /// keeping a decoder. A record is written at [`Record::schema_version`].
    pub fn schema_version(self) -> u16 {
        match self {
            // Version 2 added `source` and `parent` (decision 0166).
            RecordKind::SessionOpened => 2,
            // Version 2 added `unmerge` (decision 0232).
            RecordKind::MemoryMutation => 2,
            _ => 1,
        }
    }
}

/// One fact of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[expect(
    clippy::large_enum_variant,
    reason = "records are decoded and handled one at a time; boxing would only add allocations"
)]
pub enum Record {
    /// A session began.
    SessionOpened(SessionOpened),
    /// A session's flags changed.
    SessionFlagsChanged(SessionFlagsChanged),
    /// A session was archived or unarchived.
    SessionArchived(SessionArchived),
    /// A conversation event.
    RuntimeEvent(RuntimeEvent),
    /// A turn ended.
    TurnEnded(TurnEnded),
    /// A compaction checkpoint was accepted.
    CheckpointRecorded(CheckpointRecord),
    /// An extraction committed items, cursor and receipt.
    MemoryCommit(MemoryCommit),
    /// A batch of item changes.
    MemoryMutation(MemoryMutation),
    /// An extraction failure was settled.
    ExtractionFailure(ExtractionFailure),
    /// Memory was denied by policy for a checkpoint's coverage.
    PolicyDenial(PolicyDenial),
    /// A session was created as a copy of another.
    ConversationCopied(ConversationCopied),
}

/// Why bytes could not be decoded into a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The kind code is not one this code knows: the log was written by a newer Mnemo. Upgrade.
    #[error("unknown record kind code {code}")]
    UnknownKind {
        /// The code found.
        code: u16,
    },
    /// The payload schema version is not the one this code reads. A newer version means the
    /// log was written by a newer Mnemo: upgrade.
    #[error("{kind} record has schema version {found}, this build reads version {supported}")]
    UnsupportedSchemaVersion {
        /// The kind's name.
        kind: &'static str,
        /// The version found.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The payload is larger than any record this code writes: the bytes are damaged.
    #[error("{kind} record is {len} bytes, the limit is {max} bytes")]
    TooLarge {
        /// The kind's name.
        kind: &'static str,
        /// The payload length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The payload is not JSON of the kind's shape (wrong type, missing or unknown key): the
    /// bytes are damaged or were not written by Mnemo.
    #[error("malformed {kind} record: {message}")]
    Malformed {
        /// The kind's name.
        kind: &'static str,
        /// What the JSON reader found wrong.
        message: String,
    },
    /// The payload has the right shape but breaks a rule of its kind.
    #[error("invalid {kind} record: {error}")]
    Invalid {
        /// The kind's name.
        kind: &'static str,
        /// The broken rule.
        error: ValidationError,
    },
}

impl Record {
    /// The record's kind.
    pub fn kind(&self) -> RecordKind {
        match self {
            Record::SessionOpened(_) => RecordKind::SessionOpened,
            Record::SessionFlagsChanged(_) => RecordKind::SessionFlagsChanged,
            Record::SessionArchived(_) => RecordKind::SessionArchived,
            Record::RuntimeEvent(_) => RecordKind::RuntimeEvent,
            Record::TurnEnded(_) => RecordKind::TurnEnded,
            Record::CheckpointRecorded(_) => RecordKind::CheckpointRecorded,
            Record::MemoryCommit(_) => RecordKind::MemoryCommit,
            Record::MemoryMutation(_) => RecordKind::MemoryMutation,
            Record::ExtractionFailure(_) => RecordKind::ExtractionFailure,
            Record::PolicyDenial(_) => RecordKind::PolicyDenial,
            Record::ConversationCopied(_) => RecordKind::ConversationCopied,
        }
    }

    /// The stream the record belongs to: a session's records go to `session/<id>` (a copy to the
    /// new session's stream), memory records to their scope's `memory/global` or
    /// `memory/workspace:<id>`.
    pub fn stream(&self) -> StreamId {
        match self {
            Record::SessionOpened(r) => StreamId::session(&r.session),
            Record::SessionFlagsChanged(r) => StreamId::session(&r.session),
            Record::SessionArchived(r) => StreamId::session(&r.session),
            Record::RuntimeEvent(r) => StreamId::session(&r.session_id),
            Record::TurnEnded(r) => StreamId::session(&r.session),
            Record::CheckpointRecorded(r) => StreamId::session(&r.session),
            Record::ConversationCopied(r) => StreamId::session(&r.session),
            Record::MemoryCommit(r) => r.scope.stream(),
            Record::MemoryMutation(r) => r.scope.stream(),
            Record::ExtractionFailure(r) => r.scope.stream(),
            Record::PolicyDenial(r) => r.scope.stream(),
        }
    }

    /// The session the record concerns, if any (memory mutations concern none).
    pub fn session(&self) -> Option<&SessionId> {
        match self {
            Record::SessionOpened(r) => Some(&r.session),
            Record::SessionFlagsChanged(r) => Some(&r.session),
            Record::SessionArchived(r) => Some(&r.session),
            Record::RuntimeEvent(r) => Some(&r.session_id),
            Record::TurnEnded(r) => Some(&r.session),
            Record::CheckpointRecorded(r) => Some(&r.session),
            Record::MemoryCommit(r) => Some(&r.session),
            Record::MemoryMutation(_) => None,
            Record::ExtractionFailure(r) => Some(&r.session),
            Record::PolicyDenial(r) => Some(&r.session),
            Record::ConversationCopied(r) => Some(&r.session),
        }
    }

    /// The schema version the record is written at: its kind's newest, except that a record a
    /// former version holds whole is written at that version (see [`SessionOpened::schema_version`]).
    pub fn schema_version(&self) -> u16 {
        match self {
            Record::SessionOpened(r) => r.schema_version(),
            Record::MemoryMutation(r) => r.schema_version(),
            other => other.kind().schema_version(),
        }
    }

    /// Checks a record about to be appended: every rule of its kind ([`Record::validate`]) and the
    /// limits added since records were first written ([`RuntimeEvent::validate_limits`]), which
    /// decoding does not apply so that a store written before them stays readable.
    pub fn validate_for_append(&self) -> Result<(), ValidationError> {
        self.validate()?;
        match self {
            Record::RuntimeEvent(r) => r.validate_limits(),
            _ => Ok(()),
        }
    }

    /// Checks every rule of the record's kind.
    pub fn validate(&self) -> Result<(), ValidationError> {
        match self {
            Record::SessionOpened(r) => validate_opened(r),
            Record::SessionFlagsChanged(r) => {
                if r.incognito.is_none() && r.memory.is_none() && r.title.is_none() {
                    return fail("session", "a flags change must change at least one flag");
                }
                validate_title(r.title.as_deref())
            }
            Record::SessionArchived(_) | Record::TurnEnded(_) | Record::PolicyDenial(_) => Ok(()),
            Record::RuntimeEvent(r) => r.validate(),
            Record::CheckpointRecorded(r) => r.validate(),
            Record::MemoryCommit(r) => r.validate(),
            Record::MemoryMutation(r) => r.validate(),
            Record::ExtractionFailure(r) => r.validate(),
            Record::ConversationCopied(r) => validate_copy(r),
        }
    }

    /// The canonical JSON of the payload, after validation, within
    /// [`RECORD_BYTES_MAX`](crate::limits::RECORD_BYTES_MAX).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        self.validate_for_append().map_err(EncodeError::Invalid)?;
        let bytes = match self {
            Record::SessionOpened(r) => canonical_json(r),
            Record::SessionFlagsChanged(r) => canonical_json(r),
            Record::SessionArchived(r) => canonical_json(r),
            Record::RuntimeEvent(r) => canonical_json(r),
            Record::TurnEnded(r) => canonical_json(r),
            Record::CheckpointRecorded(r) => canonical_json(r),
            Record::MemoryCommit(r) => canonical_json(r),
            Record::MemoryMutation(r) => canonical_json(r),
            Record::ExtractionFailure(r) => canonical_json(r),
            Record::PolicyDenial(r) => canonical_json(r),
            Record::ConversationCopied(r) => canonical_json(r),
        }?;
        if bytes.len() > RECORD_BYTES_MAX {
            return Err(EncodeError::TooLarge { len: bytes.len(), max: RECORD_BYTES_MAX });
        }
        Ok(bytes)
    }

    /// Decodes a payload of the given kind code and schema version, and validates it.
    pub fn decode(kind_code: u16, schema_version: u16, bytes: &[u8]) -> Result<Record, DecodeError> {
        let record = Record::parse(kind_code, schema_version, bytes)?;
        record.validate().map_err(|error| DecodeError::Invalid { kind: record.kind().name(), error })?;
        Ok(record)
    }

    /// [`Record::decode`] without the record's validation: the kind, the schema version, the size
    /// and the shape are checked, the rules are not. For a record that arrives on the generic append
    /// path, whose preparation (text normalised, spec §1.2) comes before validation, and which the
    /// append validates when it encodes the record.
    pub fn parse(kind_code: u16, schema_version: u16, bytes: &[u8]) -> Result<Record, DecodeError> {
        let kind = RecordKind::from_code(kind_code).ok_or(DecodeError::UnknownKind { code: kind_code })?;
        if schema_version == 0 || schema_version > kind.schema_version() {
            return Err(DecodeError::UnsupportedSchemaVersion {
                kind: kind.name(),
                found: schema_version,
                supported: kind.schema_version(),
            });
        }
        if bytes.len() > RECORD_BYTES_MAX {
            return Err(DecodeError::TooLarge { kind: kind.name(), len: bytes.len(), max: RECORD_BYTES_MAX });
        }
        let record = match kind {
            RecordKind::SessionOpened => Record::SessionOpened(parse(kind, bytes)?),
            RecordKind::SessionFlagsChanged => Record::SessionFlagsChanged(parse(kind, bytes)?),
            RecordKind::SessionArchived => Record::SessionArchived(parse(kind, bytes)?),
            RecordKind::RuntimeEvent => Record::RuntimeEvent(parse(kind, bytes)?),
            RecordKind::TurnEnded => Record::TurnEnded(parse(kind, bytes)?),
            RecordKind::CheckpointRecorded => Record::CheckpointRecorded(parse(kind, bytes)?),
            RecordKind::MemoryCommit => Record::MemoryCommit(parse(kind, bytes)?),
            RecordKind::MemoryMutation => Record::MemoryMutation(parse(kind, bytes)?),
            RecordKind::ExtractionFailure => Record::ExtractionFailure(parse(kind, bytes)?),
            RecordKind::PolicyDenial => Record::PolicyDenial(parse(kind, bytes)?),
            RecordKind::ConversationCopied => Record::ConversationCopied(parse(kind, bytes)?),
        };
        if record.schema_version() > schema_version {
            // A field the envelope's version does not have: not written by Mnemo.
            return Err(DecodeError::Malformed {
                kind: kind.name(),
                message: format!(
                    "schema version {schema_version} lacks a field this record carries; version {} has it",
                    record.schema_version()
                ),
            });
        }
        Ok(record)
    }
}

/// `From<payload> for Record`, so a payload can be appended as `record.into()`.
macro_rules! record_from {
    ($($variant:ident($payload:ty)),* $(,)?) => {
        $(
            impl From<$payload> for Record {
                fn from(payload: $payload) -> Record {
                    Record::$variant(payload)
                }
            }
        )*
    };
}

record_from!(
    SessionOpened(SessionOpened),
    SessionFlagsChanged(SessionFlagsChanged),
    SessionArchived(SessionArchived),
    RuntimeEvent(RuntimeEvent),
    TurnEnded(TurnEnded),
    CheckpointRecorded(CheckpointRecord),
    MemoryCommit(MemoryCommit),
    MemoryMutation(MemoryMutation),
    ExtractionFailure(ExtractionFailure),
    PolicyDenial(PolicyDenial),
    ConversationCopied(ConversationCopied),
);

fn parse<T: DeserializeOwned>(kind: RecordKind, bytes: &[u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(bytes)
        .map_err(|e| DecodeError::Malformed { kind: kind.name(), message: e.to_string() })
}

fn validate_title(title: Option<&str>) -> Result<(), ValidationError> {
    match title {
        Some(title) => bounded_bytes("title", title, TITLE_BYTES_MAX),
        None => Ok(()),
    }
}

fn validate_opened(opened: &SessionOpened) -> Result<(), ValidationError> {
    validate_title(opened.title.as_deref())?;
    if let Some(source) = &opened.source {
        validate_source(source)?;
    }
    if opened.parent.as_ref() == Some(&opened.session) {
        return fail("parent", "a session cannot be its own parent");
    }
    Ok(())
}

/// A session source: 1 to [`SESSION_SOURCE_BYTES_MAX`] bytes of ASCII lowercase letters, digits,
/// `-`, `_` and `.`.
fn validate_source(source: &str) -> Result<(), ValidationError> {
    if source.is_empty() || source.len() > SESSION_SOURCE_BYTES_MAX {
        return fail("source", format!("must be 1 to {SESSION_SOURCE_BYTES_MAX} bytes"));
    }
    if let Some(bad) = source
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.')))
    {
        return fail("source", format!("holds {bad:?}; only a-z, 0-9, '-', '_' and '.' are allowed"));
    }
    Ok(())
}

fn validate_copy(copy: &ConversationCopied) -> Result<(), ValidationError> {
    if copy.source == copy.session {
        return fail("session", "must differ from source");
    }
    let mut sources = std::collections::BTreeSet::new();
    let mut copies = std::collections::BTreeSet::new();
    for (index, (from, to)) in copy.events.iter().enumerate() {
        if !sources.insert(from) {
            return fail(format!("events[{index}][0]"), "copies a source event twice");
        }
        if from == to {
            return fail(format!("events[{index}][1]"), "must be a new id, not the source event's");
        }
        if !copies.insert(to) {
            return fail(format!("events[{index}][1]"), "reuses a new event id");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::checkpoint::tests::checkpoint;
    use crate::digest::Digest;
    use crate::event::{Author, Content, FunctionCall, FunctionResponse, Role, TextContent};
    use crate::ids::TimestampMs;
    use crate::limits::TOOL_NAME_BYTES_MAX;
    use crate::memory::tests::{fields, id};
    use crate::memory::{
        CursorAdvance, DenialReason, ExtractionFailureClass, ExtractionReceipt, ExtractionTrigger,
        FailureOutcome, MemoryScope, Mutation, NewMemoryItem, NoOpReason, ReceiptStatus, SkipReason,
    };

    fn opened() -> SessionOpened {
        SessionOpened {
            session: id("s1"),
            workspace: Some(id("w1")),
            incognito: false,
            memory: MemoryMode::Enabled,
            subagent: false,
            title: Some("Fix the build".to_owned()),
            source: None,
            parent: None,
        }
    }

    fn event() -> RuntimeEvent {
        let mut event = RuntimeEvent::new(
            id("e1"),
            id("i1"),
            id("r1"),
            id("s1"),
            id("t1"),
            TimestampMs(1_767_225_600_000),
            Role::User,
            Author::User,
        );
        event.content = Some(Content::Text(TextContent::new("héllo \"world\"\n")));
        event
    }

    #[test]
    fn a_tool_name_over_the_limit_is_refused_on_append_and_still_read() {
        let mut event = event();
        event.role = Role::Model;
        event.author = Author::Agent;
        let name = "t".repeat(TOOL_NAME_BYTES_MAX + 1);
        event.content = Some(Content::FunctionCall(FunctionCall::new(id("c1"), name, json!({}))));
        let record = Record::RuntimeEvent(event.clone());
        let error = record.encode().unwrap_err().to_string();
        assert!(
            error.contains("content.name") && error.contains("is 257 bytes, the limit is 256 bytes"),
            "{error}"
        );
        // A record written before the limit existed decodes.
        let bytes = canonical_json(&event).unwrap();
        let kind = RecordKind::RuntimeEvent;
        assert_eq!(Record::decode(kind.code(), kind.schema_version(), &bytes).unwrap(), record);
        let mut response = event;
        response.role = Role::Tool;
        response.author = Author::Tool;
        response.content = Some(Content::FunctionResponse(FunctionResponse::new(
            id("c1"),
            "r".repeat(TOOL_NAME_BYTES_MAX + 1),
            json!("ok"),
        )));
        assert!(Record::RuntimeEvent(response.clone()).validate_for_append().is_err());
        if let Some(Content::FunctionResponse(r)) = &mut response.content {
            r.name = "r".repeat(TOOL_NAME_BYTES_MAX);
        }
        assert_eq!(Record::RuntimeEvent(response).validate_for_append(), Ok(()));
    }

    fn commit() -> MemoryCommit {
        MemoryCommit {
            operation: id("op1"),
            session: id("s1"),
            scope: MemoryScope::Workspace(id("w1")),
            trigger: ExtractionTrigger::Remember,
            checkpoint: None,
            cursor: CursorAdvance { expected: 0, next: 4 },
            coverage_hash: Digest::sha256(b"coverage"),
            items: vec![NewMemoryItem { item: id("m1"), fields: fields() }],
            merges: Vec::new(),
            supersessions: Vec::new(),
            receipt: ExtractionReceipt {
                status: ReceiptStatus::Remembered,
                requested_items: vec![0],
                no_op_reason: None,
                skip_reason: None,
            },
            committed_at: TimestampMs(1_767_225_660_000),
        }
    }

    fn failure() -> ExtractionFailure {
        ExtractionFailure {
            operation: id("op2"),
            session: id("s1"),
            scope: MemoryScope::Global,
            trigger: ExtractionTrigger::Compaction,
            checkpoint: Some(id("hcheckpoint-1")),
            expected_cursor: 4,
            failed_through: 9,
            coverage_hash: Digest::sha256(b"range"),
            failure_class: ExtractionFailureClass::Provider,
            outcome: FailureOutcome::RetryLater,
            failed_at: TimestampMs(1_767_225_700_000),
        }
    }

    /// One valid record of every kind, in code order.
    fn samples() -> Vec<Record> {
        vec![
            Record::SessionOpened(opened()),
            Record::SessionFlagsChanged(SessionFlagsChanged {
                session: id("s1"),
                incognito: Some(true),
                memory: None,
                title: None,
            }),
            Record::SessionArchived(SessionArchived { session: id("s1"), archived: true }),
            Record::RuntimeEvent(event()),
            Record::TurnEnded(TurnEnded {
                session: id("s1"),
                turn: id("t1"),
                run: Some(id("r1")),
                status: TurnStatus::Completed,
            }),
            Record::CheckpointRecorded(checkpoint()),
            Record::MemoryCommit(commit()),
            Record::MemoryMutation(MemoryMutation {
                operation: id("op3"),
                scope: MemoryScope::Global,
                mutations: vec![
                    Mutation::Create { item: id("m2"), fields: fields() },
                    Mutation::Update { item: id("m2"), expected_version: 1, fields: fields() },
                    Mutation::Archive { item: id("m2"), expected_version: 2 },
                    Mutation::Restore { item: id("m2"), expected_version: 3 },
                ],
                committed_at: TimestampMs(1_767_225_800_000),
                unmerge: None,
            }),
            Record::ExtractionFailure(failure()),
            Record::PolicyDenial(PolicyDenial {
                session: id("s1"),
                scope: MemoryScope::Global,
                checkpoint: id("hcheckpoint-1"),
                reason: DenialReason::Incognito,
                denied_at: TimestampMs(1_767_225_900_000),
            }),
            Record::ConversationCopied(ConversationCopied {
                source: id("s1"),
                session: id("s2"),
                up_to: CopyBoundary::ThroughTurn(id("t1")),
                events: vec![(id("e1"), id("e1-copy"))],
            }),
        ]
    }

    fn round_trip(record: &Record) -> Result<Record, String> {
        let bytes = record.encode().map_err(|e| e.to_string())?;
        let kind = record.kind();
        let back = Record::decode(kind.code(), record.schema_version(), &bytes).map_err(|e| e.to_string())?;
        let again = back.encode().map_err(|e| e.to_string())?;
        if again != bytes {
            return Err(format!("re-encoding changed the bytes of {}", kind.name()));
        }
        Ok(back)
    }

    fn invalid_field(record: Record) -> String {
        match record.validate() {
            Err(error) => error.field,
            Ok(()) => String::from("<valid>"),
        }
    }

    #[test]
    fn every_kind_round_trips_byte_for_byte() {
        let samples = samples();
        let kinds: Vec<RecordKind> = samples.iter().map(Record::kind).collect();
        assert_eq!(kinds, RecordKind::ALL.to_vec());
        for record in samples {
            assert_eq!(round_trip(&record).as_ref(), Ok(&record));
        }
    }

    #[test]
    fn kind_codes_and_names_are_stable() {
        let table: Vec<(u16, &str)> = RecordKind::ALL.iter().map(|k| (k.code(), k.name())).collect();
        assert_eq!(
            table,
            vec![
                (1, "session_opened"),
                (2, "session_flags_changed"),
                (3, "session_archived"),
                (4, "runtime_event"),
                (5, "turn_ended"),
                (6, "checkpoint_recorded"),
                (7, "memory_commit"),
                (8, "memory_mutation"),
                (9, "extraction_failure"),
                (10, "policy_denial"),
                (11, "conversation_copied"),
            ]
        );
        for kind in RecordKind::ALL {
            assert_eq!(RecordKind::from_code(kind.code()), Some(kind));
            let newest =
                if matches!(kind, RecordKind::SessionOpened | RecordKind::MemoryMutation) { 2 } else { 1 };
            assert_eq!(kind.schema_version(), newest, "{}", kind.name());
        }
        assert_eq!(RecordKind::from_code(0), None);
        assert_eq!(RecordKind::from_code(12), None);
    }

    #[test]
    fn canonical_bytes_are_fixed() {
        let bytes = Record::from(opened()).encode().unwrap_or_default();
        assert_eq!(
            String::from_utf8(bytes).unwrap_or_default(),
            r#"{"incognito":false,"memory":"enabled","session":"s1","subagent":false,"title":"Fix the build","workspace":"w1"}"#
        );
        let bytes = Record::RuntimeEvent(event()).encode().unwrap_or_default();
        assert_eq!(
            String::from_utf8(bytes).unwrap_or_default(),
            r#"{"author":"user","content":{"kind":"text","text":"héllo \"world\"\n"},"id":"e1","invocationId":"i1","partial":false,"role":"user","runId":"r1","sessionId":"s1","ts":1767225600000,"turnId":"t1"}"#
        );
    }

    #[test]
    fn streams_follow_the_record() {
        let streams: Vec<String> = samples().iter().map(|r| r.stream().to_string()).collect();
        assert_eq!(
            streams,
            vec![
                "session/s1",
                "session/s1",
                "session/s1",
                "session/s1",
                "session/s1",
                "session/s1",
                "memory/workspace:w1",
                "memory/global",
                "memory/global",
                "memory/global",
                "session/s2",
            ]
        );
    }

    #[test]
    fn decode_refuses_unknown_kinds_and_schema_versions() {
        let bytes = Record::SessionOpened(opened()).encode().unwrap_or_default();
        assert_eq!(Record::decode(99, 1, &bytes), Err(DecodeError::UnknownKind { code: 99 }));
        assert_eq!(
            Record::decode(1, 3, &bytes),
            Err(DecodeError::UnsupportedSchemaVersion { kind: "session_opened", found: 3, supported: 2 })
        );
        assert!(matches!(Record::decode(1, 0, &bytes), Err(DecodeError::UnsupportedSchemaVersion { .. })));
        assert!(matches!(Record::decode(5, 2, &bytes), Err(DecodeError::UnsupportedSchemaVersion { .. })));
        let message = Record::decode(1, 3, &bytes).map_err(|e| e.to_string()).err();
        assert_eq!(
            message.as_deref(),
            Some("session_opened record has schema version 3, this build reads version 2")
        );
    }

    #[test]
    fn a_session_without_source_or_parent_is_written_and_read_at_version_1_as_before() {
        let record = Record::SessionOpened(opened());
        assert_eq!(record.schema_version(), 1);
        let bytes = record.encode().unwrap_or_default();
        // The bytes older builds wrote: a store written before version 2 reads the same.
        assert!(!String::from_utf8_lossy(&bytes).contains("source"));
        assert_eq!(Record::decode(1, 1, &bytes), Ok(record.clone()));
        assert_eq!(Record::decode(1, 2, &bytes), Ok(record));
    }

    #[test]
    fn a_session_source_and_parent_are_version_2_and_refused_under_version_1() {
        let opened =
            SessionOpened { source: Some("claude-code".to_owned()), parent: Some(id("s0")), ..opened() };
        let record = Record::SessionOpened(opened);
        assert_eq!(record.schema_version(), 2);
        let bytes = record.encode().unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            r#"{"incognito":false,"memory":"enabled","parent":"s0","session":"s1","source":"claude-code","subagent":false,"title":"Fix the build","workspace":"w1"}"#
        );
        assert_eq!(Record::decode(1, 2, &bytes), Ok(record));
        assert!(matches!(Record::decode(1, 1, &bytes), Err(DecodeError::Malformed { .. })));
    }

    #[test]
    fn a_session_source_is_a_bounded_lowercase_name_and_no_session_is_its_own_parent() {
        let with = |source: &str| {
            invalid_field(Record::SessionOpened(SessionOpened {
                source: Some(source.to_owned()),
                ..opened()
            }))
        };
        assert_eq!(with("codex"), "<valid>");
        assert_eq!(with("runtime-events_2.1"), "<valid>");
        assert_eq!(with(""), "source");
        assert_eq!(with("Claude Code"), "source");
        assert_eq!(with(&"a".repeat(SESSION_SOURCE_BYTES_MAX)), "<valid>");
        assert_eq!(with(&"a".repeat(SESSION_SOURCE_BYTES_MAX + 1)), "source");
        let own = SessionOpened { parent: Some(id("s1")), ..opened() };
        assert_eq!(invalid_field(Record::SessionOpened(own)), "parent");
    }

    #[test]
    fn decode_refuses_malformed_and_invalid_payloads() {
        let unknown_key = br#"{"archived":true,"session":"s1","x":1}"#;
        assert!(matches!(
            Record::decode(3, 1, unknown_key),
            Err(DecodeError::Malformed { kind: "session_archived", .. })
        ));
        let wrong_kind = br#"{"archived":true,"session":"s1"}"#;
        assert!(matches!(Record::decode(1, 1, wrong_kind), Err(DecodeError::Malformed { .. })));
        assert!(matches!(Record::decode(3, 1, b"not json"), Err(DecodeError::Malformed { .. })));
        let empty_title =
            br#"{"incognito":false,"memory":"enabled","session":"s1","subagent":false,"title":""}"#;
        match Record::decode(1, 1, empty_title) {
            Err(DecodeError::Invalid { kind, error }) => {
                assert_eq!(kind, "session_opened");
                assert_eq!(error.to_string(), "field `title`: must not be empty");
            }
            other => panic!("expected an invalid record, got {other:?}"),
        }
        let too_big = vec![b' '; RECORD_BYTES_MAX + 1];
        assert!(matches!(Record::decode(3, 1, &too_big), Err(DecodeError::TooLarge { .. })));
    }

    #[test]
    fn encode_refuses_invalid_and_oversized_records() {
        let mut bad = opened();
        bad.title = Some("x".repeat(TITLE_BYTES_MAX + 1));
        assert!(
            matches!(Record::SessionOpened(bad).encode(), Err(EncodeError::Invalid(e)) if e.field == "title")
        );
        let mut big = event();
        big.content = Some(Content::Text(TextContent::new("x".repeat(RECORD_BYTES_MAX))));
        assert!(matches!(Record::RuntimeEvent(big).encode(), Err(EncodeError::TooLarge { .. })));
    }

    #[test]
    fn session_record_rules() {
        let nothing = SessionFlagsChanged { session: id("s1"), incognito: None, memory: None, title: None };
        assert_eq!(invalid_field(Record::SessionFlagsChanged(nothing)), "session");
        let title = SessionFlagsChanged {
            session: id("s1"),
            incognito: None,
            memory: None,
            title: Some(String::new()),
        };
        assert_eq!(invalid_field(Record::SessionFlagsChanged(title)), "title");
        let mut copy = ConversationCopied {
            source: id("s1"),
            session: id("s1"),
            up_to: CopyBoundary::BeforeTurn(id("t2")),
            events: vec![],
        };
        assert_eq!(invalid_field(Record::ConversationCopied(copy.clone())), "session");
        copy.session = id("s2");
        copy.events = vec![(id("e1"), id("c1")), (id("e1"), id("c2"))];
        assert_eq!(invalid_field(Record::ConversationCopied(copy.clone())), "events[1][0]");
        copy.events = vec![(id("e1"), id("c1")), (id("e2"), id("c1"))];
        assert_eq!(invalid_field(Record::ConversationCopied(copy.clone())), "events[1][1]");
        copy.events = vec![(id("e1"), id("e1"))];
        assert_eq!(invalid_field(Record::ConversationCopied(copy)), "events[0][1]");
    }

    #[test]
    fn copy_boundary_json_shape() {
        let value = serde_json::to_value(CopyBoundary::ThroughEvent(id("e9"))).unwrap_or_default();
        assert_eq!(value, json!({"through_event": "e9"}));
    }

    #[test]
    fn memory_commit_rules() {
        let check = |edit: &dyn Fn(&mut MemoryCommit)| {
            let mut record = commit();
            edit(&mut record);
            invalid_field(Record::MemoryCommit(record))
        };
        assert_eq!(check(&|_| {}), "<valid>");
        assert_eq!(check(&|c| c.cursor.next = 0), "cursor.next");
        assert_eq!(check(&|c| c.checkpoint = Some(id("cp"))), "checkpoint");
        assert_eq!(check(&|c| c.trigger = ExtractionTrigger::Compaction), "checkpoint");
        assert_eq!(check(&|c| c.items[0].fields.content.clear()), "items[0].fields.content");
        assert_eq!(
            check(&|c| c.items[0].fields.observed_at = TimestampMs(u64::MAX / 4096)),
            "items[0].fields.observed_at"
        );
        assert_eq!(
            check(&|c| {
                c.scope = MemoryScope::Global;
                c.items[0].fields.scope = MemoryScope::Workspace(id("w1"));
            }),
            "items[0].fields.scope"
        );
        assert_eq!(check(&|c| c.items.push(c.items[0].clone())), "items[1].item");
        assert_eq!(check(&|c| c.receipt.requested_items = vec![1]), "receipt.requested_items[0]");
        assert_eq!(check(&|c| c.receipt.status = ReceiptStatus::Extracted), "receipt.status");
        assert_eq!(
            check(&|c| {
                c.trigger = ExtractionTrigger::Extract;
                c.receipt.status = ReceiptStatus::Extracted;
            }),
            "receipt.requested_items"
        );
        assert_eq!(
            check(&|c| c.receipt.no_op_reason = Some(NoOpReason::SensitiveInformation)),
            "receipt.no_op_reason"
        );
        assert_eq!(check(&|c| c.receipt.skip_reason = Some(SkipReason::PolicyDenied)), "receipt.skip_reason");
        let skip = |c: &mut MemoryCommit| {
            c.trigger = ExtractionTrigger::Compaction;
            c.checkpoint = Some(id("cp"));
            c.items.clear();
            c.receipt = ExtractionReceipt {
                status: ReceiptStatus::Skipped,
                requested_items: vec![],
                no_op_reason: None,
                skip_reason: Some(SkipReason::PolicyDenied),
            };
        };
        assert_eq!(check(&skip), "<valid>");
        let no_op = |c: &mut MemoryCommit| {
            c.items.clear();
            c.receipt = ExtractionReceipt {
                status: ReceiptStatus::NotApplicable,
                requested_items: vec![],
                no_op_reason: Some(NoOpReason::SensitiveInformation),
                skip_reason: None,
            };
        };
        assert_eq!(check(&no_op), "<valid>");
    }

    #[test]
    fn mutation_failure_and_denial_rules() {
        let mutation = |mutations: Vec<Mutation>| {
            invalid_field(Record::MemoryMutation(MemoryMutation {
                operation: id("op"),
                scope: MemoryScope::Global,
                mutations,
                committed_at: TimestampMs(1_767_225_800_000),
                unmerge: None,
            }))
        };
        assert_eq!(mutation(vec![]), "mutations");
        assert_eq!(
            mutation(vec![Mutation::Archive { item: id("m"), expected_version: 0 }]),
            "mutations[0].expected_version"
        );
        let mut bad = fields();
        bad.keys.clear();
        assert_eq!(
            mutation(vec![Mutation::Update { item: id("m"), expected_version: 1, fields: bad }]),
            "mutations[0].fields.keys"
        );
        assert_eq!(
            mutation(vec![
                Mutation::Create { item: id("m"), fields: fields() },
                Mutation::Create { item: id("m"), fields: fields() },
            ]),
            "mutations[1].item"
        );
        let many = (0..33).map(|_| Mutation::Restore { item: id("m"), expected_version: 1 }).collect();
        assert_eq!(mutation(many), "mutations");

        let mut f = failure();
        f.failed_through = 4;
        assert_eq!(invalid_field(Record::ExtractionFailure(f)), "failed_through");
        let mut f = failure();
        f.checkpoint = None;
        assert_eq!(invalid_field(Record::ExtractionFailure(f)), "checkpoint");
        assert_eq!(failure().range(), (5, 9));
    }

    #[test]
    fn an_unmerge_rides_on_the_changes_that_undo_it_and_is_version_2() {
        let undo = |mutations: Vec<Mutation>, item: &str, position: u64| MemoryMutation {
            operation: id("op-u"),
            scope: MemoryScope::Global,
            mutations,
            committed_at: TimestampMs(1_767_225_800_000),
            unmerge: Some(crate::memory::Unmerge { position, item: id(item), statement: 0 }),
        };
        let split = || {
            vec![
                Mutation::Update { item: id("m1"), expected_version: 2, fields: fields() },
                Mutation::Create { item: id("m2"), fields: fields() },
            ]
        };
        let merge = undo(split(), "m1", 7);
        assert_eq!(merge.validate(), Ok(()));
        assert_eq!(Record::MemoryMutation(merge.clone()).schema_version(), 2);
        let restore = undo(vec![Mutation::Restore { item: id("m1"), expected_version: 2 }], "m1", 7);
        assert_eq!(restore.validate(), Ok(()));
        assert_eq!(invalid_field(Record::MemoryMutation(undo(split(), "m9", 7))), "unmerge");
        assert_eq!(invalid_field(Record::MemoryMutation(undo(split(), "m1", 0))), "unmerge.position");
        let archive = vec![Mutation::Archive { item: id("m1"), expected_version: 2 }];
        assert_eq!(invalid_field(Record::MemoryMutation(undo(archive, "m1", 7))), "unmerge");
        // Version 1 has no unmerge: a record claiming version 1 while carrying one is refused, and
        // a mutation without one stays version 1, the bytes earlier builds wrote.
        let bytes = Record::MemoryMutation(merge).encode().unwrap();
        let code = RecordKind::MemoryMutation.code();
        assert!(matches!(Record::decode(code, 1, &bytes), Err(DecodeError::Malformed { .. })));
        assert!(Record::decode(code, 2, &bytes).is_ok());
        let mut plain = undo(split(), "m1", 7);
        plain.unmerge = None;
        assert_eq!(Record::MemoryMutation(plain).schema_version(), 1);
    }

    fn ident() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9:/#_-]{1,40}"
    }

    proptest! {
        #[test]
        fn runtime_events_round_trip(
            ids in proptest::collection::vec(ident(), 5),
            ts in 0u64..=crate::limits::JSON_SAFE_INTEGER_MAX,
            text in any::<String>(),
            partial in any::<bool>(),
            number in any::<f64>().prop_filter("finite", |f| f.is_finite()),
        ) {
            let mut event = RuntimeEvent::new(
                id(&ids[0]), id(&ids[1]), id(&ids[2]), id(&ids[3]), id(&ids[4]),
                TimestampMs(ts), Role::Model, Author::Agent,
            );
            event.partial = partial;
            let mut content = TextContent::new(text.clone());
            content.provider_options = Some(json!({"n": number, "t": text, "list": [number, null, true]}));
            event.content = Some(Content::Text(content));
            let record = Record::RuntimeEvent(event);
            prop_assert_eq!(round_trip(&record), Ok(record));
        }
    }
}
