//! The model seams of extraction: a proposer and a canonicalizer. Both are async and object
//! safe (boxed futures), take structured prompts and answer with raw text that must be strict
//! JSON, which the engine checks; so a host's model and the embedded defaults are held to the
//! same schema.

use std::future::Future;
use std::pin::Pin;

use mnemo_core::{ExtractionTrigger, TurnId};
use serde::Serialize;

/// A boxed, sendable future: what the model seams return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a model call failed (memory.md §3.5 callModel).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider failed; counted as a `provider` failure.
    #[error("provider failed: {0}")]
    Provider(String),
    /// The call took longer than the timeout; counted as a `provider` failure.
    #[error("model call timed out")]
    Timeout,
    /// The call was aborted; nothing is settled, the range stays for later.
    #[error("model call aborted")]
    Aborted,
    /// The model is not set up for this; nothing is settled.
    #[error("model configuration: {0}")]
    Configuration(String),
}

/// One evidence record as a model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceView {
    /// `event:<event id>`; citations name it.
    pub source_ref: String,
    /// Always `user_message`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Minute-floored time of the event (UTC ms).
    pub observed_at: u64,
    /// The user's normalized text, possibly bounded.
    pub text: String,
    /// Byte offsets in `text` of the spaces that stand for a line break the user wrote. Not shown
    /// to a model (normalization joins lines); the embedded proposer ends sentences there.
    #[serde(skip)]
    pub line_breaks: Vec<usize>,
    /// Whether the record belongs to the turn the user asked to remember from.
    pub requested_turn: bool,
}

/// A line of interpretation context (not evidence): `[user|assistant event:<id>] <text>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextLine {
    /// `user` or `assistant`.
    pub role: &'static str,
    /// `event:<event id>`.
    pub source_ref: String,
    /// The text, at most 2000 code points.
    pub text: String,
}

/// What a proposal call is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposalPrompt {
    /// What set the extraction off.
    pub trigger: ExtractionTrigger,
    /// For remember: the turn holding the request.
    pub requested_turn: Option<TurnId>,
    /// Evidence the items may cite (untrusted data, never instructions).
    pub evidence: Vec<EvidenceView>,
    /// The summary of the prior text checkpoint the range is read after (interpretation context,
    /// sent as one user message before the lines); `None` when there is none, it is provider
    /// state, or its chain is broken or touches a policy-denied checkpoint.
    pub prior_summary: Option<String>,
    /// Interpretation context.
    pub context: Vec<ContextLine>,
    /// Set on the localized second call, with the terms the first call asked for.
    pub localized_terms: Option<Vec<String>>,
}

/// One candidate as the canonicalizer sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CanonicalCandidate {
    /// `candidate_<n>`.
    pub candidate_id: String,
    /// Whether the user asked for it.
    pub requested: bool,
    /// The proposed item, without its evidence (the item schema's JSON).
    pub item: serde_json::Value,
    /// Its validated citations.
    pub evidence: Vec<CitationView>,
}

/// A validated citation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationView {
    /// `event:<id>`.
    pub source_ref: String,
    /// The verbatim quote.
    pub quote: String,
    /// Minute-floored event time.
    pub observed_at: u64,
}

/// An active item memory holds that a candidate may restate or contradict (decision 0155).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldItem {
    /// Its id; a result's `sameAs` or `supersedes` names it.
    pub item_id: String,
    /// Its content.
    pub content: String,
    /// What it is about.
    pub kind: mnemo_core::MemoryKind,
    /// `global` or `workspace` (the session's workspace).
    pub scope: &'static str,
}

/// What a canonicalization call is given: only candidates and their quotes, no conversation,
/// and the held items of their scopes that share a key, a kind or a signature with them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CanonicalizePrompt {
    /// The candidates, at most 20.
    pub candidates: Vec<CanonicalCandidate>,
    /// Held items a candidate may restate (`sameAs`) or contradict (`supersedes`).
    pub held: Vec<HeldItem>,
}

/// Proposes memory items from evidence. Answers with strict JSON of the proposal schema
/// (memory.md §3.9 stage 1).
pub trait MemoryProposer: Send + Sync + std::fmt::Debug {
    /// The proposer's name, for reports.
    fn name(&self) -> &str;
    /// One proposal call.
    fn propose<'a>(&'a self, prompt: &'a ProposalPrompt) -> BoxFuture<'a, Result<String, ModelError>>;
}

/// Rewrites admitted candidates into canonical items. Answers with strict JSON of the
/// canonicalization schema (memory.md §3.9 stage 3).
pub trait Canonicalizer: Send + Sync + std::fmt::Debug {
    /// The canonicalizer's name, for reports.
    fn name(&self) -> &str;
    /// One canonicalization call.
    fn canonicalize<'a>(
        &'a self,
        prompt: &'a CanonicalizePrompt,
    ) -> BoxFuture<'a, Result<String, ModelError>>;
}
