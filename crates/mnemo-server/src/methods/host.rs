//! The parameter and result types of the host methods beyond reading (their entries are in the
//! table of [`super`]): preparing the next request's history and compacting (with the client's own
//! model seams), overflow recovery, conversation copy, memory's item operations and extraction,
//! rebuild and export, the tail subscription, and the seams a client registers.
//!
//! Also the server's own requests to a client (`seam/*`: the model seams called back over the
//! connection) and its notifications (`log/appended`), which have a name and types like methods.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Empty, Object};

/// The server's requests to a client (the registered model seams) and its notifications: a name and
/// types, like a method, sent the other way.
pub trait ServerMessage {
    /// The `method` member of the frame.
    const NAME: &'static str;
    /// What `params` holds.
    type Params: Serialize + serde::de::DeserializeOwned + JsonSchema;
    /// What the client answers (`Empty` for a notification, which is never answered).
    type Result: Serialize + serde::de::DeserializeOwned + JsonSchema;
}

macro_rules! server_message {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $params:ty => $result:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;
        impl ServerMessage for $ty {
            const NAME: &'static str = $name;
            type Params = $params;
            type Result = $result;
        }
    };
}

server_message!(
    /// The registered `Summarizer`: summarize a conversation for a text checkpoint.
    SummarizeSeam, "seam/summarize", SummarizeParams => SummarizeResult);
server_message!(
    /// The registered `ProviderCompactor`: compact a conversation into provider state.
    ProviderCompactSeam, "seam/provider_compact", ProviderCompactParams => ProviderCompactResult);
server_message!(
    /// The registered `MemoryProposer`: propose memory items (strict JSON of the proposal schema).
    ProposeSeam, "seam/propose", ProposeParams => ProposeResult);
server_message!(
    /// A tail notification: envelopes appended since the last one (never answered).
    Appended, "log/appended", AppendedParams => Empty);
server_message!(
    /// Output of a `command/run` command line, in the order it was written (never answered).
    CommandOutput, "command/output", CommandOutputParams => Empty);

/// Every server request name (the seams), in the order `docs/PROTOCOL.md` lists them.
pub const SERVER_REQUEST_NAMES: &[&str] =
    &[SummarizeSeam::NAME, ProviderCompactSeam::NAME, ProposeSeam::NAME];

/// Every notification name.
pub const NOTIFICATION_NAMES: &[&str] = &[Appended::NAME, CommandOutput::NAME];

/// The provider connection and model a request goes to (V3 checkpoints replay only to their own).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderConnection {
    /// The provider type (`openai-codex` can replay provider state).
    pub provider_type: String,
    /// The connection's slug.
    pub slug: String,
    /// The model.
    pub model: String,
}

/// `compaction/prepare` and `compaction/compact` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactParams {
    /// The session.
    pub session: String,
    /// Override the policy's context window, in tokens.
    #[serde(default)]
    pub window: Option<u64>,
    /// The turn being answered, never part of prior history.
    #[serde(default)]
    pub current_turn: Option<String>,
    /// The provider connection the request goes to.
    #[serde(default)]
    pub connection: Option<ProviderConnection>,
    /// The new request's text, for the policy's context-budget history search.
    #[serde(default)]
    pub search_text: Option<String>,
    /// Turns to keep raw; the policy's value when absent.
    #[serde(default)]
    pub min_recent_turns: Option<u64>,
    /// Use the seams this connection registered (default true); false: the embedded summarizer.
    #[serde(default = "default_true")]
    pub client_seams: bool,
}

fn default_true() -> bool {
    true
}

/// What a compaction or prepare did, and how the client's seams answered during it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompactResult {
    /// The history the next request receives (`items`, `boundary`, `diagnostics`, ...).
    pub history: Object,
    /// The checkpoint recorded, if one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Object>,
    /// Seam calls to this client that failed (it answered an error, did not answer in time, or
    /// went away); compaction failed open on them and the history says so.
    pub seam_failures: Vec<SeamFailure>,
}

/// A seam call to the client that did not give an answer the server could use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SeamFailure {
    /// The server request: `seam/summarize`, `seam/provider_compact` or `seam/propose`.
    pub seam: String,
    /// `timeout` (no answer within the registered timeout), `client_error` (the client answered
    /// an error), `invalid_answer` (the answer does not fit the seam's result), or `disconnected`.
    pub reason: SeamFailureReason,
    /// What happened, for people.
    pub message: String,
}

/// Why a seam call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SeamFailureReason {
    /// The client did not answer within the registered timeout.
    Timeout,
    /// The client answered with an error.
    ClientError,
    /// The client's answer does not fit the seam's result type.
    InvalidAnswer,
    /// The connection closed before the client answered.
    Disconnected,
}

/// `compaction/recover_overflow` parameters: what the host saw when the provider rejected a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverflowParams {
    /// The session.
    pub session: String,
    /// The turn being answered.
    pub turn: String,
    /// The turn's user event, already appended.
    pub anchor: String,
    /// The rejected request's size in tokens; the replacement must be strictly smaller.
    pub reference_tokens: u64,
    /// The step that failed (0 = the turn's first request).
    pub step: u64,
    /// The provider's error classifies as a context-length error.
    pub context_length_error: bool,
    /// The failed attempt produced output before failing.
    pub produced_output: bool,
    /// The turn has steps left to resend in.
    pub steps_remaining: bool,
    /// The rejected request carried historical image tool results that can be dropped.
    #[serde(default)]
    pub historical_images: bool,
    /// The log position of the step's last append; the ledger is read once the log holds it.
    #[serde(default)]
    pub durable_through: Option<u64>,
    /// Override the policy's context window, in tokens.
    #[serde(default)]
    pub window: Option<u64>,
    /// The provider connection.
    #[serde(default)]
    pub connection: Option<ProviderConnection>,
    /// Use the seams this connection registered (default true).
    #[serde(default = "default_true")]
    pub client_seams: bool,
}

/// What to do after a provider overflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverflowResult {
    /// `retry_without_images`, `resend` (with `checkpoint` and `items`), `surface_provider_error`,
    /// or `failed_open` (with `reason`, `detail`, `diagnostic`).
    pub action: String,
    /// For `resend`: the recorded checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Object>,
    /// For `resend`: the items to send in place of the folded history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<Value>>,
    /// For `failed_open`: always `overflow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `failed_open`: the mid-turn detail (`no_safe_completed_span`, `summarizer_failed`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For `failed_open`: the typed reason of the failed compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
    /// Seam calls to this client that failed during the recovery.
    pub seam_failures: Vec<SeamFailure>,
}

/// Where a conversation copy stops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CopyBoundary {
    /// Up to and including this turn (a branch).
    ThroughTurn(String),
    /// Strictly before this turn (a revision).
    BeforeTurn(String),
    /// Up to and including this event.
    ThroughEvent(String),
}

/// `compaction/copy` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyParams {
    /// The session to copy.
    pub session: String,
    /// Where the copy stops; the whole session when absent.
    #[serde(default)]
    pub up_to: Option<CopyBoundary>,
    /// The new session's id. When absent it is derived from the source and the log's position,
    /// so each call makes a new copy; give it to retry a copy safely.
    #[serde(default)]
    pub target: Option<String>,
}

/// `memory/extract` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractParams {
    /// The session.
    pub session: String,
    /// Extract through this event; the session's last event when absent.
    #[serde(default)]
    pub terminal_event: Option<String>,
}

/// `compaction/claims` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimsParams {
    /// The session.
    pub session: String,
    /// The checkpoint, one the session stream records.
    pub checkpoint: String,
}

/// `compaction/claims` result: a checkpoint's summary checked claim by claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimsResult {
    /// The checkpoint.
    pub checkpoint: String,
    /// The log position it was recorded at.
    pub position: u64,
    /// The covered events found on the session stream (the checkpoint's `coverage.event_count`
    /// when the stream holds them all).
    pub covered_events: u64,
    /// Every claim of its summary, in order; empty for a provider-state checkpoint.
    pub claims: Vec<LinkedClaim>,
    /// The faithfulness report recorded with the checkpoint, when it has one.
    pub recorded: Option<FaithfulnessReport>,
    /// Whether checking again found exactly the unsupported claims the recorded report lists
    /// (`null` when there is no recorded report).
    pub matches_recorded: Option<bool>,
}

/// One claim of a checkpoint's summary and the covered events that support it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LinkedClaim {
    /// The claim as the summary states it.
    pub claim: String,
    /// `path`, `code`, `identifier`, `number` or `quoted`.
    pub kind: String,
    /// Whether the covered events support it (the faithfulness check's rule).
    pub supported: bool,
    /// The first 20 covered events whose own text supports it, in log order. A supported claim
    /// may have none: found only across two events' texts.
    pub events: Vec<ClaimEvent>,
    /// How many covered events support it on their own.
    pub event_count: u64,
}

/// A covered event supporting a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimEvent {
    /// Its log position.
    pub position: u64,
    /// Its id.
    pub event: String,
}

/// A checkpoint's faithfulness report, as recorded with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FaithfulnessReport {
    /// How many distinct claims were looked up in the covered events.
    pub checked: u64,
    /// The claims not found there, in the order the summary states them.
    pub unsupported: Vec<String>,
}

/// `memory/recall_block` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBlockParams {
    /// The session whose recent turns (or `query`) select the items.
    pub session: String,
    /// What to look for instead of the recent turns.
    #[serde(default)]
    pub query: Option<String>,
    /// The block as it would have been built at this log position (the memory items as they stood
    /// then, the session's turns up to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<u64>,
}

/// `memory/list` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryListParams {
    /// Global items and this workspace's; every scope when absent.
    #[serde(default)]
    pub workspace: Option<String>,
    /// Only items of this kind (`preference`, `project_fact`, ...).
    #[serde(default)]
    pub kind: Option<String>,
    /// Also archived items.
    #[serde(default)]
    pub include_archived: bool,
    /// 1 to 1000; 200 when absent.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// How a key search matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// A key equals the term.
    #[default]
    Exact,
    /// A key starts with the term.
    Prefix,
}

/// `memory/search` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchParams {
    /// 1 to 32 terms, normalized like keys.
    pub terms: Vec<String>,
    /// `exact` (default) or `prefix`.
    #[serde(default)]
    pub match_mode: MatchMode,
    /// Also this workspace's items (global items are always candidates).
    #[serde(default)]
    pub workspace: Option<String>,
    /// Also archived items.
    #[serde(default)]
    pub include_archived: bool,
    /// 1 to 100; 20 when absent.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `memory/apply` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryApplyParams {
    /// The operation's idempotency key.
    pub operation: String,
    /// 1 to 32 mutations, all or nothing: `{"type": "create", "item": ITEM}`, `{"type": "update",
    /// "item_id", "expected_version", "item": ITEM}`, `{"type": "archive" | "restore", "item_id",
    /// "expected_version"}`; ITEM is an item's fields as `docs/FORMAT.md` gives them.
    pub mutations: Vec<Object>,
}

/// Parameters naming one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    /// The session.
    pub session: String,
}

/// `memory/cursor` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CursorResult {
    /// The highest event ordinal extraction has evaluated; 0 when none.
    pub cursor: u64,
}

/// `rebuild` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RebuildParams {
    /// The stage to rebuild; every stage when absent.
    #[serde(default)]
    pub stage: Option<String>,
}

/// `export` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExportResult {
    /// The Mnemo transcript lines (`docs/FORMAT.md`), newline-terminated.
    pub text: String,
    /// What was written and what was skipped.
    pub report: Object,
}

/// `log/subscribe` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscribeParams {
    /// The first position to send; the next one appended when absent (the log's head + 1).
    #[serde(default)]
    pub from: Option<u64>,
}

/// `log/subscribe` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SubscribeResult {
    /// The subscription's id, which its notifications carry.
    pub subscription: u64,
    /// The first position its notifications will carry.
    pub from: u64,
}

/// `log/unsubscribe` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnsubscribeParams {
    /// The subscription.
    pub subscription: u64,
}

/// `log/appended` notification parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppendedParams {
    /// The subscription.
    pub subscription: u64,
    /// Consecutive envelopes (as `log` returns them), in position order, with no gap since the
    /// previous notification.
    pub entries: Vec<Object>,
}

/// `command/run` parameters: a command line as the `mnemo` binary was given it, and what it needs
/// of the caller's process.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandParams {
    /// The arguments, the program's name first (at most [`crate::limits::COMMAND_ARGS_MAX`]).
    pub argv: Vec<String>,
    /// The caller's working directory (absolute): relative paths in `argv` are resolved in it.
    pub cwd: String,
    /// The caller's environment variables that the command reads (`HOME`, `CODEX_HOME`, ...).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Inputs the caller read for the command (standard input, a pipe), each spooled to a file
    /// in the store directory: the name `argv` gives it and the spooled file's absolute path.
    #[serde(default)]
    pub inputs: Vec<SpooledInput>,
}

/// An input of a `command/run` command line, spooled by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpooledInput {
    /// The name the command line gives it (`-`, `/dev/fd/63`).
    pub name: String,
    /// The spooled file (absolute, in the store directory); the server removes it once read.
    pub path: String,
}

/// `command/run` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunCommandResult {
    /// The command's exit code, as it would have exited in the caller's process.
    pub exit_code: u8,
}

/// Which of the command's streams a `command/output` chunk was written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// `command/output` parameters: a chunk of a running command's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandOutputParams {
    /// The stream it was written to.
    pub stream: OutputStream,
    /// The text, as written (chunks of one stream concatenate to its output).
    pub text: String,
}

/// A summarizer the client implements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizerSeam {
    /// Its name (a provider and model), recorded in each checkpoint's manifest.
    pub name: String,
    /// The version of its prompt, recorded likewise.
    pub prompt_version: String,
    /// Whether its input must fit the history budget (default true: a model's context is bounded).
    #[serde(default = "default_true")]
    pub limits_input: bool,
}

/// A provider compactor the client implements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderCompactorSeam {
    /// Its name.
    pub name: String,
    /// The version of its prompt.
    pub prompt_version: String,
    /// The connection and model its state is bound to.
    pub connection: ProviderConnection,
}

/// A memory proposer the client implements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryProposerSeam {
    /// Its name, for extraction reports.
    pub name: String,
}

/// `seams/register` parameters: the seams this connection answers. Each call replaces the
/// connection's earlier registration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterSeamsParams {
    /// Answer `seam/summarize`.
    #[serde(default)]
    pub summarizer: Option<SummarizerSeam>,
    /// Answer `seam/provider_compact`.
    #[serde(default)]
    pub provider_compactor: Option<ProviderCompactorSeam>,
    /// Answer `seam/propose`. The store has one set of memory models: the latest registration of
    /// any connection is used by every extraction until that connection closes.
    #[serde(default)]
    pub memory_proposer: Option<MemoryProposerSeam>,
    /// How long the server waits for each seam answer, in milliseconds (default and most:
    /// `SEAM_TIMEOUT_MAX`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `seams/register` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RegisterSeamsResult {
    /// The server requests this connection will receive.
    pub registered: Vec<String>,
    /// The timeout of each, in milliseconds.
    pub timeout_ms: u64,
}

/// `seam/summarize` parameters: what a text summarizer is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummarizeParams {
    /// The system instructions (the summary format the server checks the answer against).
    pub instructions: String,
    /// The conversation as provider messages (`{"role", "content": [parts]}`), fitted to the budget.
    pub messages: Vec<Value>,
    /// The previous summary when rolling forward (it is also the first message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_summary: Option<String>,
    /// The token estimate of the span the summary replaces.
    pub span_tokens: u64,
    /// The input's digest (hex), recorded in the checkpoint's manifest.
    pub input_digest: String,
}

/// Why the summarizing model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished.
    Stop,
    /// It hit its output limit (the summary is not used).
    Length,
}

/// `seam/summarize` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizeResult {
    /// The summary, in the format the instructions give.
    pub text: String,
    /// Why the model stopped (default `stop`).
    #[serde(default = "finish_stop")]
    pub finish: FinishReason,
}

fn finish_stop() -> FinishReason {
    FinishReason::Stop
}

/// `seam/provider_compact` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProviderCompactParams {
    /// The conversation, led by the previous compaction item when rolling forward.
    pub messages: Vec<Value>,
    /// The input's digest (hex).
    pub input_digest: String,
}

/// `seam/provider_compact` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderCompactResult {
    /// The output parts of the provider's response (exactly one compaction item is kept).
    pub output: Vec<Value>,
}

/// `seam/propose` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProposeParams {
    /// The proposal prompt: `trigger`, `requested_turn`, `evidence`, `prior_summary`, `context`,
    /// `localized_terms` (memory.md §3.9).
    pub prompt: Object,
}

/// `seam/propose` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposeResult {
    /// Strict JSON of the proposal schema, as text; the server checks it as it checks the embedded
    /// proposer's.
    pub text: String,
}
