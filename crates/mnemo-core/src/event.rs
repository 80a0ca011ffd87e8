//! RuntimeEvent: the conversation fact an agent runtime appends (spec: events-and-history.md §1).
//!
//! The JSON shape matches the reference system's exactly: camelCase keys, `content` tagged by
//! `kind`, and unknown keys refused at the envelope, content, actions and refs levels. An
//! optional key is either absent or holds a value of its type; an explicit `null` is refused,
//! because the reference system's exact-shape check refuses it and because a `null` would
//! re-encode as an absent key and break byte-for-byte round trips.
//!
//! Deliberate differences from the reference system:
//! - `ts` is an integer count of milliseconds ([`TimestampMs`]). The reference system accepts any
//!   finite number; fractional timestamps only occur in its tests, and integers keep the log's
//!   encoding exact.
//! - ids (`id`, `invocationId`, `runId`, `sessionId`, `turnId`, a tool call's `id`) are validated
//!   newtypes: non-empty, at most 256 bytes, no control characters.
//! - `tokenUsage.input` / `output` and attachment `bytes` are unsigned integers.
//! - Numbers inside opaque payloads (`args`, `result`, `stateDelta`, ...) are `serde_json`
//!   numbers, which cannot be NaN or infinite, so every event is finite by construction.
//! - Payloads the reference system validates against schemas Mnemo does not interpret
//!   (`permissionRequest`, `userQuestionRequest`, `toolDispatch`, `toolRecovery`,
//!   `runtimeProtocol`, `continuationStart`, `workspaceFact`) are kept as opaque JSON objects.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::digest::Digest;
use crate::ids::{EventId, InvocationId, RunId, SessionId, TimestampMs, ToolCallId, TurnId};
use crate::limits::{
    INLINE_REFERENCE_LABEL_UTF16_MAX, INLINE_REFERENCE_VALUE_UTF16_MAX, INLINE_REFERENCES_MAX,
    REQUEST_ID_BYTES_MAX, TOOL_NAME_BYTES_MAX,
};
use crate::validation::{ValidationError, bounded_bytes, fail, non_empty, safe_integer, utf16_len};

/// Deserializes a present optional key. With `#[serde(default)]` an absent key is `None`, and a
/// `null` value is refused by the inner type instead of silently becoming `None`.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// The model-history lane an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// A user message (or a host-authored message in the user lane).
    User,
    /// Model output: text, thinking, tool calls.
    Model,
    /// A tool result.
    Tool,
    /// Runtime or system facts.
    System,
}

/// The subsystem that produced an event; orthogonal to [`Role`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Author {
    /// The human user.
    User,
    /// The embedding host (injected or automated input).
    Host,
    /// The model and the agent's flow orchestration.
    Agent,
    /// Tool execution.
    Tool,
    /// The runner, gates and recovery.
    System,
}

/// The execution surface that produced an event; absent on legacy ledgers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExecutionOrigin {
    /// A provider model call.
    Provider,
    /// Code mode execution.
    CodeMode,
}

/// Whether an event may enter provider history. Absent means visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelVisibility {
    /// May be replayed to the model.
    Visible,
    /// Never replayed to the model.
    Hidden,
}

/// The lifecycle an event asserts about its invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventStatus {
    /// Still running; not terminal.
    Streaming,
    /// Terminal: finished normally.
    Completed,
    /// Terminal: failed.
    Failed,
    /// Terminal: aborted.
    Aborted,
    /// Terminal: cancelled.
    Cancelled,
}

impl EventStatus {
    /// True for the four terminal statuses.
    pub fn is_terminal(self) -> bool {
        !matches!(self, EventStatus::Streaming)
    }
}

/// The `kind` of an event's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ContentKind {
    /// [`Content::Text`].
    Text,
    /// [`Content::Thinking`].
    Thinking,
    /// [`Content::FunctionCall`].
    FunctionCall,
    /// [`Content::FunctionResponse`].
    FunctionResponse,
    /// [`Content::Error`].
    Error,
}

impl ContentKind {
    /// The `kind` tag as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentKind::Text => "text",
            ContentKind::Thinking => "thinking",
            ContentKind::FunctionCall => "function_call",
            ContentKind::FunctionResponse => "function_response",
            ContentKind::Error => "error",
        }
    }
}

/// One runtime fact: a message, a tool exchange, a lifecycle assertion or an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeEvent {
    /// The event's identity; the dedup key on retry.
    pub id: EventId,
    /// The execution spine; one invocation is one run.
    pub invocation_id: InvocationId,
    /// The operational run.
    pub run_id: RunId,
    /// The owning conversation.
    pub session_id: SessionId,
    /// The user turn the event belongs to.
    pub turn_id: TurnId,
    /// Unix milliseconds. JSON integers only.
    pub ts: TimestampMs,
    /// A transient streaming chunk that a later event supersedes.
    pub partial: bool,
    /// Free-text lane for multi-agent trees.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub branch: Option<String>,
    /// The model-history lane.
    pub role: Role,
    /// The producing subsystem.
    pub author: Author,
    /// The execution surface.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub origin: Option<ExecutionOrigin>,
    /// Provider-history policy; absent means visible.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub model_visibility: Option<ModelVisibility>,
    /// Lifecycle assertion; absent on ordinary content events.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub status: Option<EventStatus>,
    /// The model-facing payload.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub content: Option<Content>,
    /// Control and side-effect intent.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub actions: Option<Actions>,
    /// Audit pointers to other ledgers.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub refs: Option<Refs>,
}

/// The model-facing payload of an event, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// User or model text.
    Text(TextContent),
    /// Model reasoning.
    Thinking(ThinkingContent),
    /// A tool call the model made.
    FunctionCall(FunctionCall),
    /// A tool's result.
    FunctionResponse(FunctionResponse),
    /// An error report; never model-visible.
    Error(ErrorContent),
}

impl Content {
    /// The content's `kind`.
    pub fn kind(&self) -> ContentKind {
        match self {
            Content::Text(_) => ContentKind::Text,
            Content::Thinking(_) => ContentKind::Thinking,
            Content::FunctionCall(_) => ContentKind::FunctionCall,
            Content::FunctionResponse(_) => ContentKind::FunctionResponse,
            Content::Error(_) => ContentKind::Error,
        }
    }
}

/// Text content. `text` may be empty (an empty text is simply not model-visible).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TextContent {
    /// The authoritative model-facing text.
    pub text: String,
    /// Human-facing text when it differs from `text`; omitted when equal.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub display_text: Option<String>,
    /// File references, in order; omitted when empty.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub attachments: Option<Vec<Attachment>>,
    /// Inline quoted excerpts, in order; omitted when empty.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub quotes: Option<Vec<Quote>>,
    /// Tokens embedded in the visible text. An empty list is meaningful (it marks a
    /// current-format plain message) and is kept.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub inline_references: Option<Vec<InlineReference>>,
    /// Provenance of a host-authored user turn.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub origin: Option<TurnOrigin>,
    /// A user message steered into a running turn. Only `true` is allowed when present.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub steering: Option<bool>,
    /// Provider-owned metadata (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_options: Option<Value>,
}

impl TextContent {
    /// Plain text with nothing else set.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            display_text: None,
            attachments: None,
            quotes: None,
            inline_references: None,
            origin: None,
            steering: None,
            provider_options: None,
        }
    }
}

/// A file reference on a user message. The bytes never travel in the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attachment {
    /// What sort of file.
    pub kind: AttachmentKind,
    /// Display name.
    pub name: String,
    /// MIME type.
    pub mime_type: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Where the file lives.
    #[serde(rename = "ref")]
    pub location: StorageRef,
}

/// The sort of an attached file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttachmentKind {
    /// An image.
    Image,
    /// A PDF document.
    Pdf,
    /// Another document.
    Doc,
    /// Source code.
    Code,
    /// Anything else.
    Other,
}

/// Where an attached file is stored, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", rename_all_fields = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub enum StorageRef {
    /// A file stored with a session.
    SessionFile {
        /// The session that stores the file.
        session_id: String,
        /// Path relative to the session's file area.
        relative_path: String,
    },
    /// A file in the workspace.
    WorkspaceFile {
        /// Path relative to the workspace root.
        relative_path: String,
    },
    /// A file outside any managed area.
    ExternalFile {
        /// Absolute path.
        absolute_path: String,
    },
}

/// An inline quoted excerpt on a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quote {
    /// The quoted text.
    pub text: String,
    /// Optional chip label.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub label: Option<String>,
    /// The turn the excerpt came from.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source_turn_id: Option<String>,
}

/// A token embedded in a message's visible text (a skill or a workspace file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InlineReference {
    /// What the token refers to.
    pub kind: InlineReferenceKind,
    /// The exact token text present in `displayText ?? text`.
    pub value: String,
    /// Display label captured when the message was accepted.
    pub label: String,
    /// UTF-16 offset of this occurrence in `displayText ?? text` (the reference system's unit).
    pub start: u64,
}

/// What an inline reference points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InlineReferenceKind {
    /// A `/skill:<name>` token.
    Skill,
    /// An `@<relative path>` token.
    WorkspaceFile,
}

/// Provenance of a host-authored user turn, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", rename_all_fields = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub enum TurnOrigin {
    /// A scheduled task fired.
    ScheduledTask {
        /// The task.
        scheduled_task_id: String,
    },
    /// A legacy automation fired. The old tag `automation` is accepted and re-encoded as
    /// `legacy_automation`.
    #[serde(alias = "automation")]
    LegacyAutomation {
        /// The automation.
        automation_id: String,
    },
    /// A goal drove the turn.
    Goal {
        /// The goal.
        goal_id: String,
    },
    /// An agent graph woke the session.
    AgentGraph {
        /// The graph.
        graph_id: String,
        /// Idempotency key of the wake.
        wake_id: String,
        /// The delivery attempt.
        attempt_id: String,
    },
}

/// Model reasoning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThinkingContent {
    /// The reasoning text (may be empty, e.g. for redacted thinking).
    pub text: String,
    /// A provider signature that must be re-sent on replay.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub signature: Option<String>,
    /// Provider-owned replay metadata (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_options: Option<Value>,
}

impl ThinkingContent {
    /// Unsigned thinking text.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), signature: None, provider_options: None }
    }
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionCall {
    /// The provider's tool-call id, shared with the response.
    pub id: ToolCallId,
    /// The tool's name.
    pub name: String,
    /// The arguments; any JSON, but the key must be present.
    pub args: Value,
    /// Provider-owned opaque call metadata (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_options: Option<Value>,
    /// Whether the provider executed the tool itself.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_executed: Option<bool>,
}

impl FunctionCall {
    /// A call with the given arguments and nothing else set.
    pub fn new(id: ToolCallId, name: impl Into<String>, args: Value) -> Self {
        Self { id, name: name.into(), args, provider_options: None, provider_executed: None }
    }
}

/// A tool's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionResponse {
    /// The tool-call id this answers.
    pub id: ToolCallId,
    /// The tool's name.
    pub name: String,
    /// The result; any JSON, but the key must be present.
    pub result: Value,
    /// Whether the result is an error.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub is_error: Option<bool>,
    /// Whether the provider executed the tool itself.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_executed: Option<bool>,
    /// The raw provider result, kept only for provider-native replay and never rendered.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_output: Option<Value>,
}

impl FunctionResponse {
    /// A response with the given result and nothing else set.
    pub fn new(id: ToolCallId, name: impl Into<String>, result: Value) -> Self {
        Self { id, name: name.into(), result, is_error: None, provider_executed: None, provider_output: None }
    }
}

/// An error report. Adapters must scrub secrets from `details` before recording it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorContent {
    /// What went wrong.
    pub message: String,
    /// A machine-readable code.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub code: Option<String>,
    /// A stable routing reason.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub reason: Option<String>,
    /// Marks `message` as an already redacted, bounded provider summary.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub bounded_provider_message: Option<bool>,
    /// A list of strings or a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub details: Option<Value>,
}

impl ErrorContent {
    /// An error with a message and nothing else set.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            reason: None,
            bounded_provider_message: None,
            details: None,
        }
    }
}

/// Control and side-effect intent carried alongside content (spec §1.3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Actions {
    /// Patch applied to invocation-scoped runtime state.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub state_delta: Option<BTreeMap<String, Value>>,
    /// Artifact key to a string, number or boolean.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub artifact_delta: Option<BTreeMap<String, Value>>,
    /// A permission prompt (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub permission_request: Option<Value>,
    /// A resolved permission decision.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub permission_decision: Option<PermissionDecision>,
    /// Audit fact that a permission answer was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub permission_answer_accepted: Option<AcceptedRequest>,
    /// Audit fact that an unanswered permission request was closed. Must be the only action.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub permission_closure_accepted: Option<PermissionClosure>,
    /// A question raised by a tool call (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub user_question_request: Option<Value>,
    /// Audit fact that a question's answer was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub user_question_answer_accepted: Option<AcceptedRequest>,
    /// Hand the invocation to another agent.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub transfer_to_agent: Option<String>,
    /// Marks the event that closes the invocation.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub end_invocation: Option<bool>,
    /// Token accounting for the model call this event summarizes.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub token_usage: Option<TokenUsage>,
    /// Reserved tool-dispatch fact (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub tool_dispatch: Option<Value>,
    /// Reserved tool-recovery fact (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub tool_recovery: Option<Value>,
    /// Protocols active from the first event of the run (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub runtime_protocol: Option<Value>,
    /// Reserved continuation-start fact (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub continuation_start: Option<Value>,
    /// Reserved workspace authority fact (opaque object).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub workspace_fact: Option<Value>,
}

impl Actions {
    /// The camelCase names of the actions that are set, in declaration order.
    pub fn present_keys(&self) -> Vec<&'static str> {
        let slots: [(&'static str, bool); 16] = [
            ("stateDelta", self.state_delta.is_some()),
            ("artifactDelta", self.artifact_delta.is_some()),
            ("permissionRequest", self.permission_request.is_some()),
            ("permissionDecision", self.permission_decision.is_some()),
            ("permissionAnswerAccepted", self.permission_answer_accepted.is_some()),
            ("permissionClosureAccepted", self.permission_closure_accepted.is_some()),
            ("userQuestionRequest", self.user_question_request.is_some()),
            ("userQuestionAnswerAccepted", self.user_question_answer_accepted.is_some()),
            ("transferToAgent", self.transfer_to_agent.is_some()),
            ("endInvocation", self.end_invocation.is_some()),
            ("tokenUsage", self.token_usage.is_some()),
            ("toolDispatch", self.tool_dispatch.is_some()),
            ("toolRecovery", self.tool_recovery.is_some()),
            ("runtimeProtocol", self.runtime_protocol.is_some()),
            ("continuationStart", self.continuation_start.is_some()),
            ("workspaceFact", self.workspace_fact.is_some()),
        ];
        slots.into_iter().filter_map(|(name, set)| set.then_some(name)).collect()
    }
}

/// A resolved permission decision. Fields whose schema Mnemo does not interpret are opaque JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionDecision {
    /// The request this decides.
    pub request_id: String,
    /// The decision (for example allow or deny).
    pub decision: String,
    /// Whether the decision holds for the rest of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub remember_for_turn: Option<bool>,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub reviewer: Option<Value>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub rationale: Option<Value>,
    /// Assessed risk.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub risk_level: Option<Value>,
    /// The tool the request was for; non-empty, at most 256 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub tool_name: Option<String>,
}

/// Names an accepted interaction request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceptedRequest {
    /// The request; 1 to 256 bytes.
    pub request_id: String,
}

/// An unanswered permission request that was closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionClosure {
    /// The request; 1 to 256 bytes.
    pub request_id: String,
    /// Why it was closed.
    pub reason: PermissionClosureReason,
}

/// Why a permission request was closed without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PermissionClosureReason {
    /// Nobody answered in time.
    TimedOut,
}

/// The optional diagnostics `tokenUsage` may carry besides `input` and `output`.
pub const TOKEN_USAGE_EXTRA_KEYS: [&str; 20] = [
    "cacheHitInput",
    "cacheMissInput",
    "cacheWriteInput",
    "cacheMissInputSource",
    "reasoning",
    "total",
    "rawFinishReason",
    "runtimeSteps",
    "cacheRead",
    "cacheCreation",
    "costUsd",
    "systemPromptHash",
    "contextRemaining",
    "prefixHash",
    "prefixChangeReason",
    "requestShapeHash",
    "requestShapeChangeReason",
    "promptSegments",
    "contextBudget",
    "providerRequestTraceId",
];

/// Token accounting. The diagnostics are kept verbatim in `extra`; their keys must be among
/// [`TOKEN_USAGE_EXTRA_KEYS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// The optional diagnostics, by camelCase key.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Audit pointers to other ledgers (spec §1.4). A missing ref never changes behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Refs {
    /// The projected message id.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub stored_message_id: Option<String>,
    /// A trace row.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub trace_event_id: Option<String>,
    /// Call/response match key when provider ids differ.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub tool_call_id: Option<String>,
    /// The provider's event id (streams and steering identity).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_event_id: Option<String>,
    /// Digest of a user submission before host preparation: `sha256:<64 lowercase hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source_message_digest: Option<String>,
    /// Links aggregate usage to physical provider attempts.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub provider_request_trace_id: Option<String>,
    /// An artifact.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub artifact_id: Option<String>,
    /// A tool side-effect boundary.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub operation_id: Option<String>,
    /// The enclosing exec operation's provider tool-call id.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub parent_tool_call_id: Option<String>,
    /// The enclosing exec operation.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub parent_operation_id: Option<String>,
    /// The assistant step pairing a step's thinking and text with its calls.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub step_id: Option<String>,
    /// Continuation source invocation.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source_invocation_id: Option<String>,
    /// Continuation source run.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source_run_id: Option<String>,
    /// Continuation source turn.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source_turn_id: Option<String>,
    /// Continuation source high water; a safe integer.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub source_runtime_event_high_water: Option<u64>,
}

/// The tool-ledger lane of an event (spec §1.8 item 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolLane {
    Call,
    Response,
    Dispatch,
    Recovery,
}

impl RuntimeEvent {
    /// An event with the required fields set, `partial: false`, and nothing optional.
    #[expect(
        clippy::too_many_arguments,
        reason = "these are the envelope's required fields, each a distinct type"
    )]
    pub fn new(
        id: EventId,
        invocation_id: InvocationId,
        run_id: RunId,
        session_id: SessionId,
        turn_id: TurnId,
        ts: TimestampMs,
        role: Role,
        author: Author,
    ) -> Self {
        Self {
            id,
            invocation_id,
            run_id,
            session_id,
            turn_id,
            ts,
            partial: false,
            branch: None,
            role,
            author,
            origin: None,
            model_visibility: None,
            status: None,
            content: None,
            actions: None,
            refs: None,
        }
    }

    /// The content's kind, if the event has content.
    pub fn content_kind(&self) -> Option<ContentKind> {
        self.content.as_ref().map(Content::kind)
    }

    /// True when the event ends its invocation: a terminal status or `endInvocation: true`.
    pub fn is_terminal(&self) -> bool {
        self.status.is_some_and(EventStatus::is_terminal)
            || self.actions.as_ref().is_some_and(|a| a.end_invocation == Some(true))
    }

    /// True when the content may enter provider history: not hidden, and text that is not empty,
    /// thinking, a call or a response (errors never). This is a content check only: callers
    /// must still exclude partial events, as the reference system's helper leaves that to them.
    pub fn is_model_visible(&self) -> bool {
        if self.model_visibility == Some(ModelVisibility::Hidden) {
            return false;
        }
        match &self.content {
            None => false,
            Some(Content::Text(text)) => !text.text.is_empty(),
            Some(Content::Thinking(_))
            | Some(Content::FunctionCall(_))
            | Some(Content::FunctionResponse(_)) => true,
            Some(Content::Error(_)) => false,
        }
    }

    /// Applies the reference decoder's normalization of text content: a `displayText` equal to
    /// `text` and empty `attachments` / `quotes` lists are dropped. [`RuntimeEvent::validate`]
    /// refuses the unnormalized forms so that every event has one encoding; importers call this
    /// first.
    pub fn normalize(&mut self) {
        if let Some(Content::Text(text)) = &mut self.content {
            if text.display_text.as_deref() == Some(text.text.as_str()) {
                text.display_text = None;
            }
            if text.attachments.as_ref().is_some_and(Vec::is_empty) {
                text.attachments = None;
            }
            if text.quotes.as_ref().is_some_and(Vec::is_empty) {
                text.quotes = None;
            }
        }
    }

    /// Why the reference system's generic append path refuses this event, if it does: it
    /// carries a fact only a dedicated writer may record (spec §1.8 item 1). Such events are
    /// well formed, so [`RuntimeEvent::validate`] accepts them; an append path that has no
    /// dedicated writer for them should refuse them with this reason.
    pub fn reserved_fact_reason(&self) -> Option<&'static str> {
        if self.session_id.as_str() == "maka_workspace_authority" {
            return Some("the workspace authority session is reserved");
        }
        if let Some(actions) = &self.actions {
            if actions.workspace_fact.is_some() {
                return Some("workspace facts are reserved");
            }
            if actions.continuation_start.is_some() {
                return Some("continuation starts are reserved");
            }
            if actions.tool_recovery.is_some() {
                return Some("tool recovery facts are reserved");
            }
            if actions.tool_dispatch.is_some() {
                return Some("tool dispatch facts are reserved");
            }
        }
        let response_with_operation = matches!(self.content, Some(Content::FunctionResponse(_)))
            && self.refs.as_ref().is_some_and(|r| r.operation_id.is_some());
        if response_with_operation {
            return Some("a function response carrying refs.operationId is a reserved tool outcome");
        }
        None
    }

    /// Checks every rule of spec §1.1–1.4 that a single event can be checked against, plus the
    /// single-event tool-lane rules of §1.8 item 1 and steering's role rule.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(content) = &self.content {
            validate_content(content).map_err(|e| e.within("content"))?;
        }
        if let Some(actions) = &self.actions {
            validate_actions(actions).map_err(|e| e.within("actions"))?;
        }
        if let Some(refs) = &self.refs {
            validate_refs(refs).map_err(|e| e.within("refs"))?;
        }
        if let Some(Content::Text(text)) = &self.content
            && text.steering.is_some()
            && self.role != Role::User
        {
            return fail("content.steering", "is only allowed on role user text");
        }
        self.validate_tool_lane()
    }

    /// The limits an event is held to when it is appended, beyond [`RuntimeEvent::validate`]: a
    /// function call's or response's tool name is at most [`TOOL_NAME_BYTES_MAX`] bytes. They are
    /// not checked on read, so events stored before a limit existed stay readable.
    pub fn validate_limits(&self) -> Result<(), ValidationError> {
        let name = match &self.content {
            Some(Content::FunctionCall(call)) => &call.name,
            Some(Content::FunctionResponse(response)) => &response.name,
            _ => return Ok(()),
        };
        bounded_bytes("content.name", name, TOOL_NAME_BYTES_MAX)
    }

    fn tool_lanes(&self) -> Vec<ToolLane> {
        let mut lanes = Vec::new();
        match self.content {
            Some(Content::FunctionCall(_)) => lanes.push(ToolLane::Call),
            Some(Content::FunctionResponse(_)) => lanes.push(ToolLane::Response),
            _ => {}
        }
        if let Some(actions) = &self.actions {
            if actions.tool_dispatch.is_some() {
                lanes.push(ToolLane::Dispatch);
            }
            if actions.tool_recovery.is_some() {
                lanes.push(ToolLane::Recovery);
            }
        }
        lanes
    }

    fn validate_tool_lane(&self) -> Result<(), ValidationError> {
        let lanes = self.tool_lanes();
        let lane = match lanes.as_slice() {
            [] => return Ok(()),
            [lane] => *lane,
            _ => {
                return fail(
                    "content",
                    "an event may be only one of function call, function response, tool dispatch and tool recovery",
                );
            }
        };
        if self.partial {
            return fail("partial", "must be false on a tool-lane event");
        }
        if self.status.is_some() {
            return fail("status", "must be absent on a tool-lane event");
        }
        if self.branch.is_some() {
            return fail("branch", "must be absent on a tool-lane event");
        }
        let (role, author, what) = match lane {
            ToolLane::Call => (Role::Model, Author::Agent, "function call"),
            ToolLane::Response => (Role::Tool, Author::Tool, "function response"),
            ToolLane::Dispatch => (Role::System, Author::System, "tool dispatch"),
            ToolLane::Recovery => (Role::System, Author::System, "tool recovery"),
        };
        if self.role != role {
            return fail("role", format!("must be {} on a {what}", role_name(role)));
        }
        if self.author != author {
            return fail("author", format!("must be {} on a {what}", author_name(author)));
        }
        let actions = self.actions.as_ref();
        match lane {
            ToolLane::Call => actions.map_or(Ok(()), validate_call_actions),
            ToolLane::Response => actions.map_or(Ok(()), validate_response_actions),
            ToolLane::Dispatch | ToolLane::Recovery => {
                if self.content.is_some() {
                    return fail("content", format!("must be absent on a {what}"));
                }
                let keys = actions.map(Actions::present_keys).unwrap_or_default();
                match keys.as_slice() {
                    [_] => Ok(()),
                    _ => fail("actions", format!("a {what} must carry no other action")),
                }
            }
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Model => "model",
        Role::Tool => "tool",
        Role::System => "system",
    }
}

fn author_name(author: Author) -> &'static str {
    match author {
        Author::User => "user",
        Author::Host => "host",
        Author::Agent => "agent",
        Author::Tool => "tool",
        Author::System => "system",
    }
}

/// A function call may carry only a non-empty `stateDelta` of string `activityKind`,
/// `displayName` and `intent`.
fn validate_call_actions(actions: &Actions) -> Result<(), ValidationError> {
    only_state_delta(actions, "function call")?;
    let Some(delta) = &actions.state_delta else {
        return Ok(());
    };
    if delta.is_empty() {
        return fail("actions.stateDelta", "must not be empty on a function call");
    }
    for (key, value) in delta {
        let field = format!("actions.stateDelta.{key}");
        if !matches!(key.as_str(), "activityKind" | "displayName" | "intent") {
            return fail(field, "is not allowed on a function call");
        }
        if !value.is_string() {
            return fail(field, "must be a string");
        }
    }
    Ok(())
}

/// A function response may carry only `stateDelta: {durationMs: <number>}`.
fn validate_response_actions(actions: &Actions) -> Result<(), ValidationError> {
    only_state_delta(actions, "function response")?;
    let Some(delta) = &actions.state_delta else {
        return Ok(());
    };
    for key in delta.keys() {
        if key != "durationMs" {
            return fail(format!("actions.stateDelta.{key}"), "is not allowed on a function response");
        }
    }
    match delta.get("durationMs") {
        Some(Value::Number(_)) => Ok(()),
        Some(_) => fail("actions.stateDelta.durationMs", "must be a number"),
        None => fail("actions.stateDelta", "must hold durationMs on a function response"),
    }
}

fn only_state_delta(actions: &Actions, what: &str) -> Result<(), ValidationError> {
    match actions.present_keys().into_iter().find(|key| *key != "stateDelta") {
        Some(key) => fail(format!("actions.{key}"), format!("is not allowed on a {what}")),
        None if actions.state_delta.is_none() => {
            fail("actions", format!("must hold a stateDelta on a {what} when present"))
        }
        None => Ok(()),
    }
}

fn require_object(field: &str, value: Option<&Value>) -> Result<(), ValidationError> {
    match value {
        Some(v) if !v.is_object() => fail(field, "must be an object"),
        _ => Ok(()),
    }
}

fn validate_content(content: &Content) -> Result<(), ValidationError> {
    match content {
        Content::Text(text) => validate_text(text),
        Content::Thinking(thinking) => require_object("providerOptions", thinking.provider_options.as_ref()),
        Content::FunctionCall(call) => {
            non_empty("name", &call.name)?;
            require_object("providerOptions", call.provider_options.as_ref())
        }
        Content::FunctionResponse(response) => non_empty("name", &response.name),
        Content::Error(error) => {
            non_empty("message", &error.message)?;
            match &error.details {
                None | Some(Value::Object(_)) => Ok(()),
                Some(Value::Array(items)) if items.iter().all(Value::is_string) => Ok(()),
                Some(_) => fail("details", "must be a list of strings or an object"),
            }
        }
    }
}

fn validate_text(text: &TextContent) -> Result<(), ValidationError> {
    if text.display_text.as_deref() == Some(text.text.as_str()) {
        return fail("displayText", "must differ from text; omit it when equal");
    }
    if text.steering == Some(false) {
        return fail("steering", "must be true when present");
    }
    require_object("providerOptions", text.provider_options.as_ref())?;
    if let Some(attachments) = &text.attachments {
        if attachments.is_empty() {
            return fail("attachments", "must not be empty; omit it instead");
        }
        for (index, attachment) in attachments.iter().enumerate() {
            validate_attachment(attachment).map_err(|e| e.within(&format!("attachments[{index}]")))?;
        }
    }
    if let Some(quotes) = &text.quotes
        && quotes.is_empty()
    {
        return fail("quotes", "must not be empty; omit it instead");
    }
    if let Some(references) = &text.inline_references {
        let visible = text.display_text.as_deref().unwrap_or(&text.text);
        validate_inline_references(references, visible)?;
    }
    Ok(())
}

fn validate_attachment(attachment: &Attachment) -> Result<(), ValidationError> {
    non_empty("name", &attachment.name)?;
    non_empty("mimeType", &attachment.mime_type)?;
    safe_integer("bytes", attachment.bytes)?;
    match &attachment.location {
        StorageRef::SessionFile { session_id, relative_path } => {
            non_empty("ref.sessionId", session_id)?;
            check_relative_path("ref.relativePath", relative_path)
        }
        StorageRef::WorkspaceFile { relative_path } => check_relative_path("ref.relativePath", relative_path),
        StorageRef::ExternalFile { absolute_path } => {
            non_empty("ref.absolutePath", absolute_path)?;
            if absolute_path.contains('\0') {
                return fail("ref.absolutePath", "must not contain NUL");
            }
            Ok(())
        }
    }
}

/// A canonical relative path: non-empty, `/`-separated, no empty, `.` or `..` segment, no
/// backslash, NUL, leading slash or drive letter.
fn is_canonical_relative_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    !path.is_empty()
        && !path.contains('\0')
        && !path.contains('\\')
        && !path.starts_with('/')
        && !drive
        && path.split('/').all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

fn check_relative_path(field: &str, path: &str) -> Result<(), ValidationError> {
    if is_canonical_relative_path(path) { Ok(()) } else { fail(field, "must be a canonical relative path") }
}

fn validate_inline_references(references: &[InlineReference], visible: &str) -> Result<(), ValidationError> {
    if references.len() > INLINE_REFERENCES_MAX {
        return fail(
            "inlineReferences",
            format!("holds {} items, the limit is {INLINE_REFERENCES_MAX}", references.len()),
        );
    }
    // NOTE: offsets are UTF-16 code units, as the reference system measures them.
    let units: Vec<u16> = visible.encode_utf16().collect();
    let mut previous_end: u64 = 0;
    for (index, reference) in references.iter().enumerate() {
        let at = |name: &str| format!("inlineReferences[{index}].{name}");
        let value_len = utf16_len(&reference.value);
        if value_len == 0 || value_len > INLINE_REFERENCE_VALUE_UTF16_MAX {
            return fail(
                at("value"),
                format!("must be 1 to {INLINE_REFERENCE_VALUE_UTF16_MAX} utf-16 units"),
            );
        }
        let label_len = utf16_len(&reference.label);
        if label_len == 0 || label_len > INLINE_REFERENCE_LABEL_UTF16_MAX {
            return fail(
                at("label"),
                format!("must be 1 to {INLINE_REFERENCE_LABEL_UTF16_MAX} utf-16 units"),
            );
        }
        let well_formed = match reference.kind {
            InlineReferenceKind::Skill => is_skill_token(&reference.value),
            InlineReferenceKind::WorkspaceFile => {
                reference.value.strip_prefix('@').is_some_and(is_canonical_relative_path)
            }
        };
        if !well_formed {
            return fail(at("value"), "is not a well-formed token for its kind");
        }
        let start = reference.start;
        if start < previous_end {
            return fail(at("start"), "must not overlap or precede the previous reference");
        }
        let matches = usize::try_from(start).ok().is_some_and(|start| {
            let end = start.saturating_add(value_len);
            units
                .get(start..end)
                .is_some_and(|slice| slice.iter().copied().eq(reference.value.encode_utf16()))
        });
        if !matches {
            return fail(at("start"), "must point at the value in the visible text");
        }
        previous_end = start.saturating_add(value_len as u64);
    }
    Ok(())
}

/// `/skill:` followed by one or more of `A-Z a-z 0-9 . _ -`.
fn is_skill_token(value: &str) -> bool {
    value.strip_prefix("/skill:").is_some_and(|name| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

fn validate_actions(actions: &Actions) -> Result<(), ValidationError> {
    if actions.permission_closure_accepted.is_some() && actions.present_keys().len() > 1 {
        return fail("permissionClosureAccepted", "must be the only action on its event");
    }
    if let Some(delta) = &actions.artifact_delta {
        for (key, value) in delta {
            if !matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
                return fail(format!("artifactDelta.{key}"), "must be a string, a number or a boolean");
            }
        }
    }
    if let Some(decision) = &actions.permission_decision {
        bounded_bytes("permissionDecision.requestId", &decision.request_id, REQUEST_ID_BYTES_MAX)?;
        non_empty("permissionDecision.decision", &decision.decision)?;
        if let Some(tool) = &decision.tool_name {
            bounded_bytes("permissionDecision.toolName", tool, TOOL_NAME_BYTES_MAX)?;
        }
    }
    let accepted = [
        ("permissionAnswerAccepted.requestId", actions.permission_answer_accepted.as_ref()),
        ("userQuestionAnswerAccepted.requestId", actions.user_question_answer_accepted.as_ref()),
    ];
    for (field, request) in accepted {
        if let Some(request) = request {
            bounded_bytes(field, &request.request_id, REQUEST_ID_BYTES_MAX)?;
        }
    }
    if let Some(closure) = &actions.permission_closure_accepted {
        bounded_bytes("permissionClosureAccepted.requestId", &closure.request_id, REQUEST_ID_BYTES_MAX)?;
    }
    if let Some(usage) = &actions.token_usage {
        for key in usage.extra.keys() {
            if !TOKEN_USAGE_EXTRA_KEYS.contains(&key.as_str()) {
                return fail(format!("tokenUsage.{key}"), "is not a known token usage field");
            }
        }
    }
    let opaque = [
        ("permissionRequest", actions.permission_request.as_ref()),
        ("userQuestionRequest", actions.user_question_request.as_ref()),
        ("toolDispatch", actions.tool_dispatch.as_ref()),
        ("toolRecovery", actions.tool_recovery.as_ref()),
        ("runtimeProtocol", actions.runtime_protocol.as_ref()),
        ("continuationStart", actions.continuation_start.as_ref()),
        ("workspaceFact", actions.workspace_fact.as_ref()),
    ];
    for (field, value) in opaque {
        require_object(field, value)?;
    }
    Ok(())
}

fn validate_refs(refs: &Refs) -> Result<(), ValidationError> {
    if let Some(digest) = &refs.source_message_digest
        && digest.parse::<Digest>().is_err()
    {
        return fail("sourceMessageDigest", "must be sha256: followed by 64 lowercase hex characters");
    }
    if let Some(high_water) = refs.source_runtime_event_high_water {
        safe_integer("sourceRuntimeEventHighWater", high_water)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<RuntimeEvent, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    fn base(role: &str, author: &str) -> Value {
        json!({
            "id": "e1",
            "invocationId": "i1",
            "runId": "r1",
            "sessionId": "s1",
            "turnId": "t1",
            "ts": 1767225600000u64,
            "partial": false,
            "role": role,
            "author": author,
        })
    }

    fn with(mut event: Value, key: &str, value: Value) -> Value {
        if let Some(map) = event.as_object_mut() {
            map.insert(key.to_owned(), value);
        }
        event
    }

    fn event(value: Value) -> RuntimeEvent {
        match parse(value) {
            Ok(event) => event,
            Err(error) => panic!("event should parse: {error}"),
        }
    }

    /// Asserts that the event parses but fails validation on `field`.
    fn check_invalid(value: Value, field: &str) {
        let result = event(value).validate();
        match result {
            Err(error) => assert_eq!(error.field, field, "{error}"),
            Ok(()) => panic!("expected a validation error on {field}"),
        }
    }

    fn check_valid(value: Value) -> RuntimeEvent {
        let parsed = event(value);
        assert_eq!(parsed.validate(), Ok(()));
        parsed
    }

    #[test]
    fn full_event_round_trips_through_json() {
        let value = with(
            with(
                with(
                    with(
                        base("model", "agent"),
                        "content",
                        json!({"kind": "text", "text": "hi", "providerOptions": {"a": 1}}),
                    ),
                    "actions",
                    json!({"endInvocation": true, "tokenUsage": {"input": 10, "output": 3, "costUsd": 0.25}, "stateDelta": {"k": [1, 2]}}),
                ),
                "refs",
                json!({"storedMessageId": "m1", "sourceRuntimeEventHighWater": 0}),
            ),
            "status",
            json!("completed"),
        );
        let parsed = check_valid(value.clone());
        let back = serde_json::to_value(&parsed).unwrap_or(Value::Null);
        assert_eq!(back, value);
        assert!(parsed.is_terminal());
        assert!(parsed.is_model_visible());
        assert_eq!(parsed.content_kind(), Some(ContentKind::Text));
    }

    #[test]
    fn unknown_keys_are_refused_at_every_level() {
        let envelope = with(base("user", "user"), "extra", json!(1));
        assert!(parse(envelope).is_err_and(|e| e.contains("unknown field")));
        let content = with(base("user", "user"), "content", json!({"kind": "text", "text": "x", "bogus": 1}));
        assert!(parse(content).is_err_and(|e| e.contains("unknown field")));
        let refs = with(base("user", "user"), "refs", json!({"bogus": "x"}));
        assert!(parse(refs).is_err_and(|e| e.contains("unknown field")));
        let actions = with(base("user", "user"), "actions", json!({"bogus": true}));
        assert!(parse(actions).is_err_and(|e| e.contains("unknown field")));
        let kind = with(base("user", "user"), "content", json!({"kind": "image"}));
        assert!(parse(kind).is_err());
    }

    #[test]
    fn wrong_shapes_are_refused_when_decoding() {
        let missing_args = with(
            base("model", "agent"),
            "content",
            json!({"kind": "function_call", "id": "c1", "name": "shell"}),
        );
        assert!(parse(missing_args).is_err_and(|e| e.contains("args")));
        let null_args = with(
            base("model", "agent"),
            "content",
            json!({"kind": "function_call", "id": "c1", "name": "shell", "args": null}),
        );
        assert!(parse(null_args).is_ok());
        let fractional_ts = with(base("user", "user"), "ts", json!(1.5));
        assert!(parse(fractional_ts).is_err());
        let null_branch = with(base("user", "user"), "branch", Value::Null);
        assert!(parse(null_branch).is_err());
        let missing_partial = {
            let mut value = base("user", "user");
            if let Some(map) = value.as_object_mut() {
                map.remove("partial");
            }
            value
        };
        assert!(parse(missing_partial).is_err_and(|e| e.contains("partial")));
        let bad_role = base("assistant", "agent");
        assert!(parse(bad_role).is_err());
        let empty_id = with(base("user", "user"), "id", json!(""));
        assert!(parse(empty_id).is_err());
    }

    #[test]
    fn legacy_automation_origin_is_accepted_and_re_encoded() {
        let value = with(
            base("user", "host"),
            "content",
            json!({"kind": "text", "text": "run", "origin": {"kind": "automation", "automationId": "a1"}}),
        );
        let parsed = check_valid(value);
        let back = serde_json::to_value(&parsed).unwrap_or(Value::Null);
        assert_eq!(back["content"]["origin"]["kind"], json!("legacy_automation"));
    }

    #[test]
    fn model_visibility_follows_the_spec() {
        let text = |t: &str| with(base("user", "user"), "content", json!({"kind": "text", "text": t}));
        assert!(check_valid(text("hi")).is_model_visible());
        assert!(!check_valid(text("")).is_model_visible());
        assert!(!check_valid(with(text("hi"), "modelVisibility", json!("hidden"))).is_model_visible());
        assert!(!check_valid(base("system", "system")).is_model_visible());
        let error = with(base("system", "system"), "content", json!({"kind": "error", "message": "boom"}));
        assert!(!check_valid(error).is_model_visible());
        let thinking = with(base("model", "agent"), "content", json!({"kind": "thinking", "text": ""}));
        assert!(check_valid(thinking).is_model_visible());
    }

    #[test]
    fn terminal_by_status_or_end_invocation() {
        assert!(!check_valid(with(base("system", "system"), "status", json!("streaming"))).is_terminal());
        assert!(check_valid(with(base("system", "system"), "status", json!("cancelled"))).is_terminal());
        assert!(
            check_valid(with(base("system", "system"), "actions", json!({"endInvocation": true})))
                .is_terminal()
        );
        assert!(
            !check_valid(with(base("system", "system"), "actions", json!({"endInvocation": false})))
                .is_terminal()
        );
    }

    #[test]
    fn text_content_rules_name_their_field() {
        let text = |content: Value| with(base("user", "user"), "content", content);
        check_invalid(text(json!({"kind": "text", "text": "a", "displayText": "a"})), "content.displayText");
        check_invalid(text(json!({"kind": "text", "text": "a", "steering": false})), "content.steering");
        check_invalid(text(json!({"kind": "text", "text": "a", "attachments": []})), "content.attachments");
        check_invalid(text(json!({"kind": "text", "text": "a", "quotes": []})), "content.quotes");
        check_invalid(
            text(json!({"kind": "text", "text": "a", "providerOptions": [1]})),
            "content.providerOptions",
        );
        check_invalid(
            text(
                json!({"kind": "text", "text": "a", "attachments": [{"kind": "image", "name": "", "mimeType": "image/png", "bytes": 1, "ref": {"kind": "workspace_file", "relativePath": "a.png"}}]}),
            ),
            "content.attachments[0].name",
        );
        check_invalid(
            text(
                json!({"kind": "text", "text": "a", "attachments": [{"kind": "image", "name": "a", "mimeType": "image/png", "bytes": 1, "ref": {"kind": "workspace_file", "relativePath": "../a.png"}}]}),
            ),
            "content.attachments[0].ref.relativePath",
        );
        check_valid(text(json!({"kind": "text", "text": "a", "inlineReferences": []})));
    }

    #[test]
    fn steering_needs_role_user() {
        let steer = json!({"kind": "text", "text": "stop", "steering": true});
        check_valid(with(base("user", "user"), "content", steer.clone()));
        check_invalid(with(base("system", "system"), "content", steer), "content.steering");
    }

    #[test]
    fn inline_references_must_point_at_their_text() {
        let text = |refs: Value| {
            with(
                base("user", "user"),
                "content",
                json!({"kind": "text", "text": "😀 use /skill:lint on @src/a.rs", "inlineReferences": refs}),
            )
        };
        // "😀" is two UTF-16 units, so "/skill:lint" starts at unit 7.
        check_valid(text(json!([
            {"kind": "skill", "value": "/skill:lint", "label": "lint", "start": 7},
            {"kind": "workspace_file", "value": "@src/a.rs", "label": "a.rs", "start": 22}
        ])));
        check_invalid(
            text(json!([{"kind": "skill", "value": "/skill:lint", "label": "lint", "start": 6}])),
            "content.inlineReferences[0].start",
        );
        check_invalid(
            text(json!([
                {"kind": "workspace_file", "value": "@src/a.rs", "label": "a.rs", "start": 22},
                {"kind": "skill", "value": "/skill:lint", "label": "lint", "start": 7}
            ])),
            "content.inlineReferences[1].start",
        );
        check_invalid(
            text(json!([{"kind": "skill", "value": "/skill:lint", "label": "", "start": 7}])),
            "content.inlineReferences[0].label",
        );
        check_invalid(
            text(json!([{"kind": "skill", "value": "@src/a.rs", "label": "a", "start": 22}])),
            "content.inlineReferences[0].value",
        );
        let many: Vec<Value> = (0..33)
            .map(|_| json!({"kind": "skill", "value": "/skill:a", "label": "a", "start": 0}))
            .collect();
        check_invalid(text(Value::Array(many)), "content.inlineReferences");
    }

    #[test]
    fn call_response_and_error_rules() {
        let call = json!({"kind": "function_call", "id": "c1", "name": "shell", "args": {"cmd": "ls"}});
        check_valid(with(base("model", "agent"), "content", call.clone()));
        let nameless = json!({"kind": "function_call", "id": "c1", "name": "", "args": {}});
        check_invalid(with(base("model", "agent"), "content", nameless), "content.name");
        let response = json!({"kind": "function_response", "id": "c1", "name": "", "result": "ok"});
        check_invalid(with(base("tool", "tool"), "content", response), "content.name");
        let error = json!({"kind": "error", "message": ""});
        check_invalid(with(base("system", "system"), "content", error), "content.message");
        let details = json!({"kind": "error", "message": "x", "details": [1]});
        check_invalid(with(base("system", "system"), "content", details), "content.details");
        let details_ok = json!({"kind": "error", "message": "x", "details": ["a"]});
        check_valid(with(base("system", "system"), "content", details_ok));
    }

    #[test]
    fn tool_lane_shape_rules() {
        let call = json!({"kind": "function_call", "id": "c1", "name": "shell", "args": {}});
        let response = json!({"kind": "function_response", "id": "c1", "name": "shell", "result": "ok"});
        check_invalid(with(base("user", "agent"), "content", call.clone()), "role");
        check_invalid(with(base("model", "system"), "content", call.clone()), "author");
        check_invalid(with(base("model", "tool"), "content", response.clone()), "role");
        check_invalid(with(base("tool", "agent"), "content", response.clone()), "author");
        let partial = with(with(base("model", "agent"), "content", call.clone()), "partial", json!(true));
        check_invalid(partial, "partial");
        let status =
            with(with(base("model", "agent"), "content", call.clone()), "status", json!("completed"));
        check_invalid(status, "status");
        let branch = with(with(base("model", "agent"), "content", call.clone()), "branch", json!("b"));
        check_invalid(branch, "branch");
        let call_delta = |delta: Value| {
            with(
                with(base("model", "agent"), "content", call.clone()),
                "actions",
                json!({"stateDelta": delta}),
            )
        };
        check_valid(call_delta(json!({"activityKind": "command", "intent": "list"})));
        check_invalid(call_delta(json!({"activityKind": 1})), "actions.stateDelta.activityKind");
        check_invalid(call_delta(json!({"other": "x"})), "actions.stateDelta.other");
        check_invalid(call_delta(json!({})), "actions.stateDelta");
        let call_end = with(
            with(base("model", "agent"), "content", call.clone()),
            "actions",
            json!({"endInvocation": true}),
        );
        check_invalid(call_end, "actions.endInvocation");
        let response_delta = |delta: Value| {
            with(
                with(base("tool", "tool"), "content", response.clone()),
                "actions",
                json!({"stateDelta": delta}),
            )
        };
        check_valid(response_delta(json!({"durationMs": 12.5})));
        check_invalid(response_delta(json!({"durationMs": "12"})), "actions.stateDelta.durationMs");
        check_invalid(response_delta(json!({"durationMs": 1, "x": 1})), "actions.stateDelta.x");
        let both =
            with(with(base("model", "agent"), "content", call), "actions", json!({"toolDispatch": {}}));
        check_invalid(both, "content");
        let dispatch = with(
            base("system", "system"),
            "actions",
            json!({"toolDispatch": {"protocol": "t1_after_preflight_v1"}}),
        );
        let dispatch_event = check_valid(dispatch);
        assert!(dispatch_event.reserved_fact_reason().is_some());
    }

    #[test]
    fn action_rules_name_their_field() {
        let actions = |a: Value| with(base("system", "system"), "actions", a);
        check_invalid(
            actions(
                json!({"permissionClosureAccepted": {"requestId": "q", "reason": "timed_out"}, "endInvocation": true}),
            ),
            "actions.permissionClosureAccepted",
        );
        check_valid(actions(json!({"permissionClosureAccepted": {"requestId": "q", "reason": "timed_out"}})));
        check_invalid(actions(json!({"artifactDelta": {"a": null}})), "actions.artifactDelta.a");
        check_invalid(
            actions(json!({"permissionDecision": {"requestId": "", "decision": "allow"}})),
            "actions.permissionDecision.requestId",
        );
        check_invalid(
            actions(
                json!({"permissionDecision": {"requestId": "q", "decision": "allow", "toolName": "x".repeat(257)}}),
            ),
            "actions.permissionDecision.toolName",
        );
        check_invalid(
            actions(json!({"userQuestionAnswerAccepted": {"requestId": ""}})),
            "actions.userQuestionAnswerAccepted.requestId",
        );
        check_invalid(
            actions(json!({"tokenUsage": {"input": 1, "output": 2, "bogus": 3}})),
            "actions.tokenUsage.bogus",
        );
        check_invalid(actions(json!({"workspaceFact": "x"})), "actions.workspaceFact");
    }

    #[test]
    fn refs_rules_name_their_field() {
        let refs = |r: Value| with(base("user", "user"), "refs", r);
        let digest = format!("sha256:{}", "a".repeat(64));
        check_valid(refs(json!({"sourceMessageDigest": digest})));
        check_invalid(
            refs(json!({"sourceMessageDigest": format!("sha256:{}", "A".repeat(64))})),
            "refs.sourceMessageDigest",
        );
        check_invalid(
            refs(json!({"sourceRuntimeEventHighWater": 9007199254740992u64})),
            "refs.sourceRuntimeEventHighWater",
        );
    }

    #[test]
    fn remaining_content_rules_name_their_field() {
        let user = |content: Value| with(base("user", "user"), "content", content);
        let attachment = |name: &str, mime: &str, bytes: u64, location: Value| {
            user(json!({"kind": "text", "text": "a", "attachments": [
                {"kind": "doc", "name": name, "mimeType": mime, "bytes": bytes, "ref": location}
            ]}))
        };
        let workspace = json!({"kind": "workspace_file", "relativePath": "docs/a.md"});
        check_valid(attachment("a", "text/plain", 3, workspace.clone()));
        check_invalid(attachment("a", "", 3, workspace.clone()), "content.attachments[0].mimeType");
        check_invalid(attachment("a", "text/plain", 1 << 53, workspace), "content.attachments[0].bytes");
        let session = json!({"kind": "session_file", "sessionId": "", "relativePath": "a"});
        check_invalid(attachment("a", "text/plain", 3, session), "content.attachments[0].ref.sessionId");
        let external = json!({"kind": "external_file", "absolutePath": ""});
        check_invalid(attachment("a", "text/plain", 3, external), "content.attachments[0].ref.absolutePath");
        let long_value = format!("/skill:{}", "a".repeat(INLINE_REFERENCE_VALUE_UTF16_MAX));
        check_invalid(
            user(json!({"kind": "text", "text": long_value.clone(), "inlineReferences": [
                {"kind": "skill", "value": long_value, "label": "a", "start": 0}
            ]})),
            "content.inlineReferences[0].value",
        );
        let model = |content: Value| with(base("model", "agent"), "content", content);
        check_invalid(
            model(json!({"kind": "thinking", "text": "", "providerOptions": "x"})),
            "content.providerOptions",
        );
        check_invalid(
            model(json!({"kind": "function_call", "id": "c", "name": "n", "args": 1, "providerOptions": 2})),
            "content.providerOptions",
        );
    }

    #[test]
    fn remaining_lane_and_action_rules_name_their_field() {
        let system = |extra: Vec<(&str, Value)>| {
            extra.into_iter().fold(base("system", "system"), |event, (key, value)| with(event, key, value))
        };
        let dispatch = json!({"toolDispatch": {}});
        check_invalid(
            system(vec![
                ("actions", dispatch.clone()),
                ("content", json!({"kind": "error", "message": "x"})),
            ]),
            "content",
        );
        check_invalid(
            system(vec![("actions", json!({"toolRecovery": {}, "endInvocation": true}))]),
            "actions",
        );
        check_invalid(with(base("user", "system"), "actions", dispatch), "role");
        let response = json!({"kind": "function_response", "id": "c1", "name": "shell", "result": "ok"});
        check_invalid(
            with(
                with(base("tool", "tool"), "content", response.clone()),
                "actions",
                json!({"stateDelta": {}}),
            ),
            "actions.stateDelta",
        );
        check_invalid(with(with(base("tool", "tool"), "content", response), "actions", json!({})), "actions");
        let actions = |a: Value| with(base("system", "system"), "actions", a);
        check_invalid(
            actions(json!({"permissionDecision": {"requestId": "q", "decision": ""}})),
            "actions.permissionDecision.decision",
        );
        check_invalid(
            actions(json!({"permissionAnswerAccepted": {"requestId": "x".repeat(REQUEST_ID_BYTES_MAX + 1)}})),
            "actions.permissionAnswerAccepted.requestId",
        );
        check_invalid(
            actions(json!({"permissionClosureAccepted": {"requestId": "", "reason": "timed_out"}})),
            "actions.permissionClosureAccepted.requestId",
        );
        assert!(
            parse(actions(json!({"permissionClosureAccepted": {"requestId": "q", "reason": "other"}})))
                .is_err()
        );
    }

    #[test]
    fn normalize_produces_the_canonical_text_form() {
        let value = with(
            base("user", "user"),
            "content",
            json!({"kind": "text", "text": "a", "displayText": "a", "attachments": [], "quotes": []}),
        );
        let mut parsed = event(value);
        assert!(parsed.validate().is_err());
        parsed.normalize();
        assert_eq!(parsed.validate(), Ok(()));
        assert_eq!(parsed.content, Some(Content::Text(TextContent::new("a"))));
    }

    #[test]
    fn reserved_facts_are_named() {
        let response = json!({"kind": "function_response", "id": "c1", "name": "shell", "result": "ok"});
        let with_op =
            with(with(base("tool", "tool"), "content", response), "refs", json!({"operationId": "op1"}));
        assert!(check_valid(with_op).reserved_fact_reason().is_some());
        assert_eq!(check_valid(base("user", "user")).reserved_fact_reason(), None);
    }
}
