//! Newtype identifiers and positions.
//!
//! Every id is validated at construction, so a value of one of these types is always well formed.
//! Positions and revisions are `u64` on disk, never `usize`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::limits::ID_BYTES_MAX;
use crate::limits::STREAM_ID_BYTES_MAX;

/// Why a string was refused as an identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The id was empty. Callers should supply a non-empty id.
    #[error("{kind} is empty")]
    Empty {
        /// Which id.
        kind: &'static str,
    },
    /// The id was longer than its limit in UTF-8 bytes.
    #[error("{kind} is {len} bytes, the limit is {max} bytes")]
    TooLong {
        /// Which id.
        kind: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The id contained a control character (including NUL), which would break keys and output.
    #[error("{kind} contains a control character at byte {at}")]
    ControlCharacter {
        /// Which id.
        kind: &'static str,
        /// Byte offset of the character.
        at: usize,
    },
    /// A stream id did not start with a known category prefix.
    #[error("stream id {id:?} must start with \"session/\" or \"memory/\"")]
    UnknownStreamCategory {
        /// The refused text.
        id: String,
    },
}

fn check_id_text(kind: &'static str, text: &str, max: usize) -> Result<(), IdError> {
    if text.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if text.len() > max {
        return Err(IdError::TooLong { kind, len: text.len(), max });
    }
    if let Some((at, _)) = text.char_indices().find(|(_, c)| c.is_control()) {
        return Err(IdError::ControlCharacter { kind, at });
    }
    Ok(())
}

/// Declares a validated string id newtype. Serde goes through `try_from` so that decoding
/// can never produce an invalid id.
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps `text`: non-empty, at most [`ID_BYTES_MAX`] bytes, no control characters.
            pub fn new(text: impl Into<String>) -> Result<Self, IdError> {
                let text = text.into();
                check_id_text($kind, &text, ID_BYTES_MAX)?;
                Ok(Self(text))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(text: String) -> Result<Self, IdError> {
                Self::new(text)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_id!(
    /// A conversation (session) id.
    SessionId, "session id"
);
string_id!(
    /// The user turn an event belongs to.
    TurnId, "turn id"
);
string_id!(
    /// An operational run (one invocation of the agent).
    RunId, "run id"
);
string_id!(
    /// An invocation: the execution spine of one run.
    InvocationId, "invocation id"
);
string_id!(
    /// A RuntimeEvent's identity, the dedup key on retry.
    EventId, "event id"
);
string_id!(
    /// A provider tool-call id, pairing a call with its response.
    ToolCallId, "tool call id"
);
string_id!(
    /// A workspace: the scope a session belongs to and memory may be scoped to.
    WorkspaceId, "workspace id"
);
string_id!(
    /// A compaction checkpoint's id.
    CheckpointId, "checkpoint id"
);
string_id!(
    /// A long-term memory item's id.
    ItemId, "memory item id"
);
string_id!(
    /// An idempotency key for a memory operation.
    OperationId, "operation id"
);

/// A stream of the log: `session/<session id>` or `memory/<scope>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct StreamId(String);

impl StreamId {
    /// The prefix of a session's stream.
    pub const SESSION_PREFIX: &'static str = "session/";
    /// The prefix of a memory scope's stream.
    pub const MEMORY_PREFIX: &'static str = "memory/";

    /// Validates a stream id: one of the two categories, at most [`STREAM_ID_BYTES_MAX`] bytes, no control characters.
    pub fn new(text: impl Into<String>) -> Result<Self, IdError> {
        let text = text.into();
        check_id_text("stream id", &text, STREAM_ID_BYTES_MAX)?;
        let rest = text.strip_prefix(Self::SESSION_PREFIX).or_else(|| text.strip_prefix(Self::MEMORY_PREFIX));
        match rest {
            Some(rest) if !rest.is_empty() => Ok(Self(text)),
            _ => Err(IdError::UnknownStreamCategory { id: text }),
        }
    }

    /// The stream that carries a session's events, lifecycle and checkpoints.
    pub fn session(session: &SessionId) -> Self {
        Self(format!("{}{}", Self::SESSION_PREFIX, session.as_str()))
    }

    /// The stream that carries memory commits and mutations for one scope (`global` or a workspace).
    pub fn memory(scope: &str) -> Result<Self, IdError> {
        Self::new(format!("{}{}", Self::MEMORY_PREFIX, scope))
    }

    /// The memory stream of a scope whose text is already known to be a valid id suffix: a
    /// scope built from a validated [`WorkspaceId`] is at most 256 + 10 bytes with no control
    /// characters, so with the prefix it stays under [`STREAM_ID_BYTES_MAX`].
    pub(crate) fn memory_of_valid_scope(scope: &str) -> Self {
        debug_assert!(Self::MEMORY_PREFIX.len() + scope.len() <= STREAM_ID_BYTES_MAX);
        Self(format!("{}{}", Self::MEMORY_PREFIX, scope))
    }

    /// The session this stream belongs to, if it is a session stream.
    pub fn session_id(&self) -> Option<SessionId> {
        self.0.strip_prefix(Self::SESSION_PREFIX).and_then(|id| SessionId::new(id).ok())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for StreamId {
    type Error = IdError;
    fn try_from(text: String) -> Result<Self, IdError> {
        Self::new(text)
    }
}

impl From<StreamId> for String {
    fn from(id: StreamId) -> String {
        id.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A global position in the log. The first envelope is at position 1; position 0 means
/// "before the first envelope" and is what an empty projection's watermark holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Position(pub u64);

impl Position {
    /// Before the first envelope.
    pub const ZERO: Position = Position(0);
    /// The first envelope's position.
    pub const FIRST: Position = Position(1);

    /// The next position.
    pub fn next(self) -> Position {
        Position(self.0 + 1)
    }

    /// The position as a big-endian key, so that byte order equals numeric order.
    pub fn to_key(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// The inverse of [`Position::to_key`]; `None` unless `key` is exactly 8 bytes.
    pub fn from_key(key: &[u8]) -> Option<Position> {
        let bytes: [u8; 8] = key.try_into().ok()?;
        Some(Position(u64::from_be_bytes(bytes)))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The revision of an envelope within its stream: the first envelope of a stream has revision 0.
/// This is the optimistic-concurrency counter of a stream, never a format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StreamRevision(pub u64);

impl StreamRevision {
    /// The first revision of a stream.
    pub const FIRST: StreamRevision = StreamRevision(0);

    /// The next revision.
    pub fn next(self) -> StreamRevision {
        StreamRevision(self.0 + 1)
    }
}

impl fmt::Display for StreamRevision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Milliseconds since the Unix epoch, as assigned by the log writer's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TimestampMs(pub u64);

impl fmt::Display for TimestampMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_refuse_empty_long_and_control_text() {
        assert_eq!(SessionId::new(""), Err(IdError::Empty { kind: "session id" }));
        let long = "x".repeat(ID_BYTES_MAX + 1);
        assert!(matches!(SessionId::new(long), Err(IdError::TooLong { len: 257, .. })));
        assert_eq!(TurnId::new("a\u{0}b"), Err(IdError::ControlCharacter { kind: "turn id", at: 1 }));
        let real = "sess:2026/11#a1b2c3d4-0000-4000-8000-123456789abc";
        assert_eq!(SessionId::new(real).map(|id| id.to_string()), Ok(real.to_owned()));
    }

    #[test]
    fn stream_ids_need_a_category() {
        assert!(StreamId::new("session/s1").is_ok());
        assert!(StreamId::new("memory/global").is_ok());
        assert!(matches!(StreamId::new("other/x"), Err(IdError::UnknownStreamCategory { .. })));
        assert!(matches!(StreamId::new("session/"), Err(IdError::UnknownStreamCategory { .. })));
        let session = SessionId::new("s1").ok();
        assert_eq!(StreamId::new("session/s1").ok().and_then(|s| s.session_id()), session);
    }

    #[test]
    fn position_keys_sort_numerically() {
        assert!(Position(255).to_key() < Position(256).to_key());
        assert_eq!(Position::from_key(&Position(42).to_key()), Some(Position(42)));
        assert_eq!(Position::from_key(&[1, 2]), None);
    }

    #[test]
    fn ids_decode_through_validation() {
        let bad: Result<SessionId, _> = serde_json::from_str("\"\"");
        assert!(bad.is_err());
        let good: Result<SessionId, _> = serde_json::from_str("\"s1\"");
        assert_eq!(good.ok().map(String::from), Some("s1".to_owned()));
    }
}
