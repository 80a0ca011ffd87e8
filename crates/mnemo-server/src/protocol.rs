//! The wire: JSON-RPC 2.0 frames (one JSON object per line), the protocol version, and the typed
//! error every failure is answered with.
//!
//! An error's `code` is the JSON-RPC class; its `data.reason` is the one thing a client matches on
//! (a closed set, [`Reason`]), and the other `data` fields carry what that reason needs (the expected
//! and actual revision of a conflict, the limit that was exceeded, the versions the server speaks).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of this protocol a client states in `initialize`. A change that an existing client
/// could misread raises it; a server answers only the versions in [`PROTOCOL_VERSIONS`].
pub const PROTOCOL_VERSION: u32 = 1;

/// Every protocol version this server speaks.
pub const PROTOCOL_VERSIONS: &[u32] = &[PROTOCOL_VERSION];

/// The `jsonrpc` member of every frame.
pub const JSONRPC_VERSION: &str = "2.0";

/// A request's id: a number or a string, echoed in its answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    /// A numeric id.
    Number(i64),
    /// A string id.
    Text(String),
}

/// A request as a client writes it. Without an `id` it is a notification: it runs and is not answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The id the answer echoes; absent for a notification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    /// The method's name.
    pub method: String,
    /// The method's parameters: an object (absent means `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// An answer: exactly one of `result` and `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// The request's id; `null` when the request could not be read far enough to know it.
    pub id: Option<RequestId>,
    /// The method's result, on success (`null` is a result: `history/transcript` of an unknown
    /// session answers it).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub result: Option<Value>,
    /// What went wrong, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

/// A member that is present, `null` included: absent is `None` (by `default`), `null` is
/// `Some(Value::Null)`.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Response {
    /// A successful answer.
    pub fn success(id: Option<RequestId>, result: Value) -> Response {
        Response { jsonrpc: JSONRPC_VERSION.to_owned(), id, result: Some(result), error: None }
    }

    /// A failed answer.
    pub fn failure(id: Option<RequestId>, error: RpcError) -> Response {
        Response { jsonrpc: JSONRPC_VERSION.to_owned(), id, result: None, error: Some(error) }
    }
}

/// A JSON-RPC error object with Mnemo's typed `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{message} ({reason}, code {code})", reason = data.reason.name())]
pub struct RpcError {
    /// The JSON-RPC error class ([`ErrorCode`]).
    pub code: i64,
    /// A one-line description for people: what was wrong and where.
    pub message: String,
    /// The typed details a program acts on (boxed: errors travel in `Result`s, and most are never
    /// looked into).
    pub data: Box<ErrorData>,
}

/// The details of an error: `reason` always, the rest when the reason has them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ErrorData {
    /// What kind of failure this is; a client matches on this, never on `message`.
    pub reason: Reason,
    /// For `tool_refused`: the history tool's own reason (`invalid_arguments`, `incognito_active`,
    /// `session_not_found`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_reason: Option<String>,
    /// For `conflict`: what the request expected (a stream revision, `no_stream`, or an item version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// For `conflict`: what the store holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    /// For `frame_too_large` and `overloaded`: the limit that was reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// For `unsupported_protocol_version`: the versions this server speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported: Option<Vec<u32>>,
}

/// Every reason an answer can fail for. Stable names (snake_case on the wire); new ones may be added
/// in a later protocol version, so a client treats an unknown reason as `internal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// The frame is not JSON. Fix the client.
    ParseError,
    /// The frame is JSON but not a request (no `method`, a wrong `jsonrpc`, unknown members, a
    /// batch). Fix the client.
    InvalidRequest,
    /// The frame is longer than `FRAME_BYTES_MAX`; it was skipped. Send less per call.
    FrameTooLarge,
    /// A method other than `initialize` came before `initialize`. Initialize first.
    NotInitialized,
    /// `initialize` came twice on one connection.
    AlreadyInitialized,
    /// The client's protocol version is not one this server speaks (`supported` lists them).
    UnsupportedProtocolVersion,
    /// No such method.
    MethodNotFound,
    /// The parameters do not fit the method's schema, or an id in them is not valid.
    InvalidParams,
    /// The server has `CALLS_ADMITTED_MAX` calls (or `CONNECTIONS_MAX` connections) already;
    /// nothing was done. Retry after a pause.
    Overloaded,
    /// The server is shutting down; nothing was done. Reconnect (a client starts a new server).
    ShuttingDown,
    /// A stream revision or item version was not the expected one; nothing was appended. Re-read
    /// and retry.
    Conflict,
    /// A history tool refused the call (`tool_reason` says why), in the tool's own terms.
    ToolRefused,
    /// What was asked for does not exist (a session, an item).
    NotFound,
    /// The store refused the input (a bad transcript line, an invalid record); nothing was stored.
    InvalidInput,
    /// The store failed verification: the log or a projection is damaged.
    Integrity,
    /// The store failed (I/O, a stopped stage). The message says what.
    StoreFailure,
    /// A fault inside the server.
    #[default]
    Internal,
}

impl Reason {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Reason::ParseError => "parse_error",
            Reason::InvalidRequest => "invalid_request",
            Reason::FrameTooLarge => "frame_too_large",
            Reason::NotInitialized => "not_initialized",
            Reason::AlreadyInitialized => "already_initialized",
            Reason::UnsupportedProtocolVersion => "unsupported_protocol_version",
            Reason::MethodNotFound => "method_not_found",
            Reason::InvalidParams => "invalid_params",
            Reason::Overloaded => "overloaded",
            Reason::ShuttingDown => "shutting_down",
            Reason::Conflict => "conflict",
            Reason::ToolRefused => "tool_refused",
            Reason::NotFound => "not_found",
            Reason::InvalidInput => "invalid_input",
            Reason::Integrity => "integrity",
            Reason::StoreFailure => "store_failure",
            Reason::Internal => "internal",
        }
    }

    /// The JSON-RPC code this reason is answered with.
    pub fn code(self) -> ErrorCode {
        match self {
            Reason::ParseError => ErrorCode::ParseError,
            Reason::InvalidRequest
            | Reason::FrameTooLarge
            | Reason::NotInitialized
            | Reason::AlreadyInitialized => ErrorCode::InvalidRequest,
            Reason::MethodNotFound => ErrorCode::MethodNotFound,
            Reason::InvalidParams => ErrorCode::InvalidParams,
            Reason::Internal => ErrorCode::Internal,
            Reason::UnsupportedProtocolVersion => ErrorCode::UnsupportedProtocolVersion,
            Reason::Overloaded => ErrorCode::Overloaded,
            Reason::ShuttingDown => ErrorCode::ShuttingDown,
            Reason::Conflict => ErrorCode::Conflict,
            Reason::ToolRefused => ErrorCode::ToolRefused,
            Reason::NotFound | Reason::InvalidInput | Reason::Integrity | Reason::StoreFailure => {
                ErrorCode::Store
            }
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The JSON-RPC error codes this protocol uses: the standard five and Mnemo's, in the range
/// JSON-RPC reserves for servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// -32700: not JSON.
    ParseError,
    /// -32600: not a request.
    InvalidRequest,
    /// -32601: no such method.
    MethodNotFound,
    /// -32602: bad parameters.
    InvalidParams,
    /// -32603: a fault inside the server.
    Internal,
    /// -32000: the store failed or refused (see the reason).
    Store,
    /// -32001: too many calls or connections.
    Overloaded,
    /// -32002: a revision or version conflict.
    Conflict,
    /// -32003: a history tool refused the call.
    ToolRefused,
    /// -32004: a protocol version the server does not speak.
    UnsupportedProtocolVersion,
    /// -32005: the server is shutting down.
    ShuttingDown,
}

impl ErrorCode {
    /// The number on the wire.
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::Internal => -32603,
            ErrorCode::Store => -32000,
            ErrorCode::Overloaded => -32001,
            ErrorCode::Conflict => -32002,
            ErrorCode::ToolRefused => -32003,
            ErrorCode::UnsupportedProtocolVersion => -32004,
            ErrorCode::ShuttingDown => -32005,
        }
    }
}

impl RpcError {
    /// An error of `reason` with a message and no further data.
    pub fn new(reason: Reason, message: impl Into<String>) -> RpcError {
        RpcError {
            code: reason.code().code(),
            message: message.into(),
            data: Box::new(ErrorData { reason, ..ErrorData::default() }),
        }
    }

    /// The same error with `limit` set.
    pub fn with_limit(mut self, limit: u64) -> RpcError {
        self.data.limit = Some(limit);
        self
    }

    /// The error's reason.
    pub fn reason(&self) -> Reason {
        self.data.reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_the_code_and_wire_name_the_protocol_document_lists() {
        let document = include_str!("../../../docs/PROTOCOL.md");
        for reason in ALL_REASONS {
            let wire = serde_json::to_value(reason).unwrap();
            assert_eq!(wire, Value::String(reason.name().to_owned()));
            let row = format!("| `{}` | {} |", reason.name(), reason.code().code());
            assert!(document.contains(&row), "PROTOCOL.md lacks the row {row}");
        }
    }

    const ALL_REASONS: [Reason; 17] = [
        Reason::ParseError,
        Reason::InvalidRequest,
        Reason::FrameTooLarge,
        Reason::NotInitialized,
        Reason::AlreadyInitialized,
        Reason::UnsupportedProtocolVersion,
        Reason::MethodNotFound,
        Reason::InvalidParams,
        Reason::Overloaded,
        Reason::ShuttingDown,
        Reason::Conflict,
        Reason::ToolRefused,
        Reason::NotFound,
        Reason::InvalidInput,
        Reason::Integrity,
        Reason::StoreFailure,
        Reason::Internal,
    ];
}
