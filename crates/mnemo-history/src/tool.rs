//! What SearchHistory and ReadHistory share: the caller's context, and argument checks in the
//! units of the reference system's tool schema.

use std::sync::atomic::{AtomicBool, Ordering};

use mnemo_core::{SessionId, TurnId, WorkspaceId};
use mnemo_pipeline::{PipelineError, StateStore};
use serde::Serialize;
use serde_json::Value;

use crate::messages::{self, SessionHeader};
use crate::text::utf16_len;

/// Where a history tool runs: the session and turn executing it, the runtime's privacy state and an
/// abort signal.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryContext<'a> {
    /// The session the tool runs in. Its own current turn is never shown, its revision family is
    /// represented by it, and rows from it say `is_current_session`.
    pub current_session: Option<&'a SessionId>,
    /// The turn executing the tool; its messages are excluded inside the current session.
    pub current_turn: Option<&'a TurnId>,
    /// The runtime's privacy state: while incognito is active the tools refuse to read history.
    /// (The current session's own incognito flag counts too; see [`HistoryContext::incognito`].)
    pub incognito_active: bool,
    /// Set to abort a running call; it is checked before, during and after the work.
    pub abort: Option<&'a AtomicBool>,
    /// With no current session: answer inside this workspace only, as a call from one of its
    /// sessions would (an operator or an evaluation asking about one workspace's history). A
    /// current session's own workspace always wins.
    pub workspace: Option<&'a WorkspaceId>,
}

impl HistoryContext<'_> {
    pub(crate) fn aborted(&self) -> bool {
        self.abort.is_some_and(|flag| flag.load(Ordering::Acquire))
    }

    /// Whether the privacy gate is closed: the runtime says incognito is active, or the current
    /// session is incognito.
    pub(crate) fn incognito(&self, current: Option<&SessionHeader>) -> bool {
        self.incognito_active || current.is_some_and(|h| h.incognito)
    }

    /// The current session's header, if there is a current session with one.
    pub(crate) fn current_header(
        &self,
        store: &dyn StateStore,
    ) -> Result<Option<SessionHeader>, PipelineError> {
        self.current_session.map(|s| messages::header(store, s)).transpose().map(Option::flatten)
    }
}

/// A string argument's length check in UTF-16 units (the schema's unit), on the trimmed text when
/// `trim` is set.
pub(crate) fn check_string(name: &str, text: &str, trim: bool, max: usize) -> Result<(), String> {
    let checked = if trim { text.trim() } else { text };
    let length = utf16_len(checked);
    if length == 0 {
        return Err(format!("`{name}` must not be empty"));
    }
    if length > max {
        return Err(format!("`{name}` is {length} characters; at most {max} are allowed"));
    }
    Ok(())
}

/// An integer argument within `min..=max`; JSON numbers with no fraction count as integers.
pub(crate) fn check_integer(name: &str, value: Option<i64>, min: i64, max: i64) -> Result<(), String> {
    match value {
        Some(n) if !(min..=max).contains(&n) => {
            Err(format!("`{name}` must be an integer from {min} to {max}, not {n}"))
        }
        _ => Ok(()),
    }
}

/// Reads an optional integer from tool arguments: absent, or a number with no fraction.
pub(crate) fn integer_arg(args: &serde_json::Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match args.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
            _ => Err(format!("`{name}` must be an integer")),
        },
        Some(_) => Err(format!("`{name}` must be an integer")),
    }
}

/// Reads an optional string from tool arguments.
pub(crate) fn string_arg(
    args: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<Option<String>, String> {
    match args.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{name}` must be a string")),
    }
}

/// The arguments as an object whose keys are all among `known`.
pub(crate) fn strict_object<'v>(
    args: &'v Value,
    known: &[&str],
) -> Result<&'v serde_json::Map<String, Value>, String> {
    let Value::Object(map) = args else {
        return Err("arguments must be a JSON object".to_owned());
    };
    if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("unknown argument `{unknown}`; allowed: {}", known.join(", ")));
    }
    Ok(map)
}

/// A tool's error as the reference system shapes it: `{kind, ok: false, reason, message}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure<R> {
    kind: &'static str,
    /// Why the call failed.
    pub reason: R,
    /// A human-readable explanation.
    pub message: String,
}

impl<R> ToolFailure<R> {
    pub(crate) fn new(kind: &'static str, reason: R, message: impl Into<String>) -> Self {
        ToolFailure { kind, reason, message: message.into() }
    }
}

impl<R: Serialize> Serialize for ToolFailure<R> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut fields = serializer.serialize_struct("ToolFailure", 4)?;
        fields.serialize_field("kind", self.kind)?;
        fields.serialize_field("ok", &false)?;
        fields.serialize_field("reason", &self.reason)?;
        fields.serialize_field("message", &self.message)?;
        fields.end()
    }
}

impl<R: std::fmt::Display> std::fmt::Display for ToolFailure<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// Declares a failure-reason enum: snake_case in JSON and in `Display`.
macro_rules! failure_reasons {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        #[serde(rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The reason as the tool reports it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use failure_reasons;
