//! Long-term memory as plain data: MemoryItem (spec: memory.md §1), and the payloads of the
//! memory records (extraction commit, mutation batch, extraction failure, policy denial;
//! memory.md §2.6–2.9).
//!
//! Records carry what was decided; what follows from it (versions after an update, `noop`
//! outcomes, receipts' item contents, the cursor) is derived by replaying them. Every record
//! names the memory scope whose stream it is appended to.
//!
//! Checks here are the ones a value can be checked against on its own. Text must already be in
//! its normalized form: content and keys are refused, not repaired, when they carry control or
//! zero-width characters or surrounding whitespace. Unicode NFC is not checked here (it needs
//! normalization tables); the memory crate normalizes before it builds these values.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::event::present;
use crate::ids::{
    CheckpointId, EventId, IdError, ItemId, OperationId, RunId, SessionId, StreamId, TimestampMs, TurnId,
    WorkspaceId,
};
use crate::limits::{
    MEMORY_CONTENT_CODE_POINTS_MAX, MEMORY_KEY_CODE_POINTS_MAX, MEMORY_KEYS_MAX, MEMORY_MUTATIONS_MAX,
    MEMORY_SOURCES_MAX,
};
use crate::validation::{ValidationError, code_points, fail, safe_integer};

/// What a memory item is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoryKind {
    /// How the user likes things done.
    Preference,
    /// Who the user is.
    Identity,
    /// Circumstances around the user's work.
    Context,
    /// A fact worth knowing.
    Knowledge,
    /// Something that went wrong and should not be repeated.
    Failure,
    /// Anything else.
    Note,
}

/// The modality of a memory statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StatementType {
    /// Something that is the case.
    Fact,
    /// Something intended.
    Plan,
    /// Something expected.
    Prediction,
}

/// How a memory item is placed in time; decides which event bounds it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TemporalType {
    /// No bounds.
    Undated,
    /// A start, and optionally a later end.
    Point,
    /// A start and a later end.
    Interval,
    /// A start and no end.
    OpenEnded,
}

/// Whether an item is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LifecycleState {
    /// Returned by default.
    Active,
    /// Kept but hidden unless asked for.
    Archived,
}

/// How an item's current content was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemoryOrigin {
    /// Extracted incidentally from the conversation.
    AgentExtracted,
    /// The user asked for it to be remembered.
    UserRequested,
}

/// What a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeyType {
    /// The exact subject.
    Exact,
    /// A named entity.
    Entity,
    /// A concept.
    Concept,
    /// Another name for the subject.
    Alias,
    /// A code identifier.
    Code,
}

/// Who produced a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeyOrigin {
    /// Derived by rule.
    Deterministic,
    /// Proposed by a model.
    Llm,
    /// Given by the user.
    User,
}

/// What set off an extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExtractionTrigger {
    /// An explicit request to remember something.
    Remember,
    /// An explicit request to extract.
    Extract,
    /// A compaction checkpoint.
    Compaction,
}

/// Why an extraction attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExtractionFailureClass {
    /// The model provider failed.
    Provider,
    /// The model's answer broke the schema.
    Schema,
    /// The evidence did not hold up.
    Evidence,
    /// Localization failed.
    Localization,
    /// A requested item was not admitted.
    RequestedAdmission,
}

/// The settlement of an extraction, as its receipt reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReceiptStatus {
    /// A remember request stored at least one requested item.
    Remembered,
    /// A remember request stored nothing it was asked for.
    NotApplicable,
    /// An extract or compaction extraction completed.
    Extracted,
    /// A failed range was given up on (see [`ExtractionFailure`]).
    Discarded,
    /// A compaction range was skipped by policy.
    Skipped,
}

impl ReceiptStatus {
    /// The one rule for the status a memory commit's receipt carries: `Skipped` when a compaction
    /// range was skipped by policy, `Extracted` for any extraction that was not a remember request,
    /// and for a remember request `Remembered` when it stored a requested item, else `NotApplicable`.
    /// (`Discarded` belongs to the receipt that gives up on a failed range, never to a commit.)
    pub fn of_commit(trigger: ExtractionTrigger, skipped: bool, stored_requested: bool) -> ReceiptStatus {
        if skipped {
            ReceiptStatus::Skipped
        } else if trigger != ExtractionTrigger::Remember {
            ReceiptStatus::Extracted
        } else if stored_requested {
            ReceiptStatus::Remembered
        } else {
            ReceiptStatus::NotApplicable
        }
    }
}

/// Why a remember request deliberately stored nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NoOpReason {
    /// The request held secrets.
    SensitiveInformation,
    /// What the request asked for holds only in a workspace, and its session belongs to none.
    NoWorkspace,
}

/// Why a compaction range was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// Memory was not allowed for the range.
    PolicyDenied,
    /// The range was compacted before the session had an extraction cursor: a session's first
    /// cursor starts after its latest checkpoint's covered prefix (memory.md §3.4 step 8).
    CompactedBeforeExtraction,
}

/// Where a memory item is visible, and which memory stream a memory record goes to.
///
/// JSON and stream form: `global`, or `workspace:<workspace id>`; the stream is
/// `memory/global` or `memory/workspace:<workspace id>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[non_exhaustive]
pub enum MemoryScope {
    /// Every session sees it.
    Global,
    /// Sessions of one workspace see it.
    Workspace(WorkspaceId),
}

impl MemoryScope {
    const GLOBAL: &'static str = "global";
    const WORKSPACE_PREFIX: &'static str = "workspace:";

    /// The scope's text form.
    pub fn as_text(&self) -> String {
        match self {
            MemoryScope::Global => Self::GLOBAL.to_owned(),
            MemoryScope::Workspace(id) => format!("{}{}", Self::WORKSPACE_PREFIX, id.as_str()),
        }
    }

    /// The stream this scope's memory records are appended to.
    pub fn stream(&self) -> StreamId {
        StreamId::memory_of_valid_scope(&self.as_text())
    }

    /// True when an item of scope `item` may be written by a record of this scope: global items
    /// may ride on any scope's records (an extraction commit is one atomic record even when it
    /// stores both global and workspace items); workspace items only on their own workspace's.
    pub fn admits(&self, item: &MemoryScope) -> bool {
        matches!(item, MemoryScope::Global) || item == self
    }
}

impl fmt::Display for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_text())
    }
}

/// Why a string was refused as a memory scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeParseError {
    /// Neither `global` nor `workspace:<id>`.
    #[error("memory scope {0:?} must be \"global\" or \"workspace:<id>\"")]
    Unknown(String),
    /// The workspace id was not a valid id.
    #[error("memory scope has a bad workspace id: {0}")]
    BadWorkspace(IdError),
}

impl TryFrom<String> for MemoryScope {
    type Error = ScopeParseError;
    fn try_from(text: String) -> Result<Self, ScopeParseError> {
        if text == Self::GLOBAL {
            return Ok(MemoryScope::Global);
        }
        match text.strip_prefix(Self::WORKSPACE_PREFIX) {
            Some(id) => {
                WorkspaceId::new(id).map(MemoryScope::Workspace).map_err(ScopeParseError::BadWorkspace)
            }
            None => Err(ScopeParseError::Unknown(text)),
        }
    }
}

impl From<MemoryScope> for String {
    fn from(scope: MemoryScope) -> String {
        scope.as_text()
    }
}

/// A lookup key of an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryKey {
    /// Display text, case preserved.
    pub key: String,
    /// The search form: see [`MemoryKey::normalize`].
    pub normalized_key: String,
    /// What the key names.
    pub key_type: KeyType,
    /// Who produced it.
    pub key_origin: KeyOrigin,
}

impl MemoryKey {
    /// A key whose normalized form is computed from `key`.
    pub fn new(key: impl Into<String>, key_type: KeyType, key_origin: KeyOrigin) -> Self {
        let key = key.into();
        Self { normalized_key: Self::normalize(&key), key, key_type, key_origin }
    }

    /// The search form of a key: every run of whitespace becomes one ASCII space, then the text
    /// is lowercased (locale-free Unicode lowercasing), as the reference store does.
    pub fn normalize(key: &str) -> String {
        let mut collapsed = String::with_capacity(key.len());
        let mut in_space = false;
        for c in key.chars() {
            if c.is_whitespace() {
                if !in_space {
                    collapsed.push(' ');
                }
                in_space = true;
            } else {
                collapsed.push(c);
                in_space = false;
            }
        }
        collapsed.to_lowercase()
    }
}

/// The conversation event a memory item was learned from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcePointer {
    /// The session.
    pub session: SessionId,
    /// The run.
    pub run: RunId,
    /// The turn.
    pub turn: TurnId,
    /// The event.
    pub event: EventId,
}

/// The fields a create or update writes (memory.md §1.2, minus what the store assigns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryItemFields {
    /// Normalized content: non-empty, at most 2000 code points.
    pub content: String,
    /// What the item is about.
    pub kind: MemoryKind,
    /// Its modality.
    pub statement_type: StatementType,
    /// How it is placed in time.
    pub temporal_type: TemporalType,
    /// Where it is visible.
    pub scope: MemoryScope,
    /// Start of the event the item describes (UTC ms), per `temporal_type`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub event_started_at: Option<TimestampMs>,
    /// End of that event, per `temporal_type`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub event_ended_at: Option<TimestampMs>,
    /// When the supporting events were observed (UTC ms).
    pub observed_at: TimestampMs,
    /// How the content was produced.
    pub origin: MemoryOrigin,
    /// 1 to 32 keys, strictly ascending by `normalized_key` (so without duplicates).
    pub keys: Vec<MemoryKey>,
    /// 1 to 256 sources, strictly ascending by event id (so without duplicates).
    pub sources: Vec<SourcePointer>,
}

impl MemoryItemFields {
    /// Checks content, temporal bounds, keys and sources (memory.md §1.2–1.7).
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_content(&self.content)?;
        self.validate_temporal()?;
        safe_integer("observed_at", self.observed_at.0)?;
        validate_keys(&self.keys)?;
        validate_sources(&self.sources)
    }

    fn validate_temporal(&self) -> Result<(), ValidationError> {
        let start = self.event_started_at.map(|t| t.0);
        let end = self.event_ended_at.map(|t| t.0);
        for (field, value) in [("event_started_at", start), ("event_ended_at", end)] {
            if let Some(value) = value {
                safe_integer(field, value)?;
            }
        }
        match (self.temporal_type, start, end) {
            (TemporalType::Undated, None, None) => Ok(()),
            (TemporalType::Undated, _, _) => {
                fail("event_started_at", "an undated item cannot carry event bounds")
            }
            (_, None, _) => fail("event_started_at", "is required unless the item is undated"),
            (TemporalType::Point, Some(s), Some(e)) if e <= s => {
                fail("event_ended_at", "a point's end must be later than its start")
            }
            (TemporalType::Interval, Some(_), None) => fail("event_ended_at", "an interval requires an end"),
            (TemporalType::Interval, Some(s), Some(e)) if e <= s => {
                fail("event_ended_at", "an interval requires an end after its start")
            }
            (TemporalType::OpenEnded, Some(_), Some(_)) => {
                fail("event_ended_at", "an open-ended item cannot carry an end")
            }
            _ => Ok(()),
        }
    }
}

fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{FEFF}')
}

fn validate_content(content: &str) -> Result<(), ValidationError> {
    if content.is_empty() {
        return fail("content", "must not be empty");
    }
    if content.chars().any(|c| c.is_control() || is_zero_width(c)) {
        return fail("content", "must not contain control or zero-width characters");
    }
    if content.trim() != content {
        return fail("content", "must not have surrounding whitespace");
    }
    let len = code_points(content);
    if len > MEMORY_CONTENT_CODE_POINTS_MAX {
        return fail(
            "content",
            format!("is {len} code points, the limit is {MEMORY_CONTENT_CODE_POINTS_MAX}"),
        );
    }
    Ok(())
}

fn validate_keys(keys: &[MemoryKey]) -> Result<(), ValidationError> {
    if keys.is_empty() || keys.len() > MEMORY_KEYS_MAX {
        return fail("keys", format!("must hold 1 to {MEMORY_KEYS_MAX} keys"));
    }
    for (index, key) in keys.iter().enumerate() {
        let field = |name: &str| format!("keys[{index}].{name}");
        let text = key.key.as_str();
        if text.is_empty() {
            return fail(field("key"), "must not be empty");
        }
        if text.chars().any(|c| c.is_control() || is_zero_width(c)) {
            return fail(field("key"), "must not contain control or zero-width characters");
        }
        if text.trim() != text {
            return fail(field("key"), "must not have surrounding whitespace");
        }
        if code_points(text) > MEMORY_KEY_CODE_POINTS_MAX {
            return fail(field("key"), format!("must be at most {MEMORY_KEY_CODE_POINTS_MAX} code points"));
        }
        if key.normalized_key != MemoryKey::normalize(text) {
            return fail(field("normalized_key"), "must be the normalized form of key");
        }
        if index > 0 && keys[index - 1].normalized_key >= key.normalized_key {
            return fail(field("normalized_key"), "keys must be strictly ascending by normalized_key");
        }
    }
    Ok(())
}

fn validate_sources(sources: &[SourcePointer]) -> Result<(), ValidationError> {
    if sources.is_empty() || sources.len() > MEMORY_SOURCES_MAX {
        return fail("sources", format!("must hold 1 to {MEMORY_SOURCES_MAX} sources"));
    }
    for index in 1..sources.len() {
        if sources[index - 1].event >= sources[index].event {
            return fail(format!("sources[{index}].event"), "sources must be strictly ascending by event");
        }
    }
    Ok(())
}

/// A memory item as the item store holds it (memory.md §1.2). Not a record: the store's state,
/// derived from records by replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryItem {
    /// The item's id.
    pub item: ItemId,
    /// 1 on create, +1 on every effective change. A concurrency counter, not a format version.
    pub version: u64,
    /// Active or archived.
    pub lifecycle: LifecycleState,
    /// SHA-256 of the content's UTF-8 bytes.
    pub content_hash: Digest,
    /// Commit time of the create.
    pub created_at: TimestampMs,
    /// Commit time of the last effective change; never decreases.
    pub updated_at: TimestampMs,
    /// The written fields.
    pub fields: MemoryItemFields,
    /// The item that replaced this one when a later statement contradicted it (set when it was
    /// archived by a [`Supersession`], cleared when it is restored).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub superseded_by: Option<ItemId>,
    /// The items this one replaced (the other side of their `superseded_by`), in the order they
    /// were superseded; kept when they are restored, as history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<ItemId>,
}

impl MemoryItem {
    /// The item a create committed at `committed_at` produces: version 1, active.
    pub fn created(item: ItemId, fields: MemoryItemFields, committed_at: TimestampMs) -> Self {
        Self {
            item,
            version: 1,
            lifecycle: LifecycleState::Active,
            content_hash: Digest::sha256(fields.content.as_bytes()),
            created_at: committed_at,
            updated_at: committed_at,
            fields,
            superseded_by: None,
            supersedes: Vec::new(),
        }
    }

    /// Checks the fields and the store's invariants: version at least 1, `created_at <=
    /// updated_at`, `observed_at <= updated_at`, and the content hash.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.fields.validate().map_err(|e| e.within("fields"))?;
        if self.version == 0 {
            return fail("version", "must be at least 1");
        }
        safe_integer("version", self.version)?;
        if self.created_at > self.updated_at {
            return fail("created_at", "must not be after updated_at");
        }
        if self.fields.observed_at > self.updated_at {
            return fail("fields.observed_at", "must not be after updated_at");
        }
        if self.content_hash != Digest::sha256(self.fields.content.as_bytes()) {
            return fail("content_hash", "must be the sha-256 of the content");
        }
        Ok(())
    }
}

/// A statement of an extraction commit that restates an item memory already holds: instead of
/// creating `items[statement]`, the commit merges that statement's sources and keys into `item`
/// (the same fact, stated again), which makes the item's next version unless nothing is new.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemMerge {
    /// The index into the commit's `items` of the statement merged.
    pub statement: u32,
    /// The item it restates: an item held before the commit, or one an earlier statement of the
    /// same commit creates.
    pub item: ItemId,
    /// The item's version the merge was decided against.
    pub expected_version: u64,
}

/// An item a statement of an extraction commit contradicts: it is archived, pointing at the
/// item that replaced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Supersession {
    /// The contradicted, active item.
    pub item: ItemId,
    /// Its version the supersession was decided against.
    pub expected_version: u64,
    /// The index into the commit's `items` of the statement that replaces it (a created item).
    pub by: u32,
}

/// An item an extraction commit creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewMemoryItem {
    /// The id assigned to it.
    pub item: ItemId,
    /// Its fields.
    pub fields: MemoryItemFields,
}

/// The extraction cursor's move: from `expected` (0 when there is no cursor yet) to `next`.
/// Ordinals are the session-wide positions of RuntimeEvents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CursorAdvance {
    /// The cursor the commit was computed against.
    pub expected: u64,
    /// The cursor after the commit; greater than `expected`.
    pub next: u64,
}

/// What an extraction commit reports (memory.md §2.7 step 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractionReceipt {
    /// The settlement.
    pub status: ReceiptStatus,
    /// Indexes into the commit's `items` of the items the user asked for, strictly ascending.
    pub requested_items: Vec<u32>,
    /// Why a remember request stored nothing.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub no_op_reason: Option<NoOpReason>,
    /// Why a compaction range was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub skip_reason: Option<SkipReason>,
}

/// An extraction commit: items, cursor advance and receipt as one atomic fact (memory.md §2.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryCommit {
    /// The idempotency key.
    pub operation: OperationId,
    /// The session whose events were evaluated.
    pub session: SessionId,
    /// The stream the commit is appended to; every item's scope must be global or this one.
    pub scope: MemoryScope,
    /// What set the extraction off.
    pub trigger: ExtractionTrigger,
    /// The compaction checkpoint; present exactly when the trigger is `compaction`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub checkpoint: Option<CheckpointId>,
    /// The cursor's move.
    pub cursor: CursorAdvance,
    /// Binds the commit to the exact set of covered events.
    pub coverage_hash: Digest,
    /// At most 32 statements; each creates its item unless a merge names it.
    pub items: Vec<NewMemoryItem>,
    /// Statements that restate an item memory holds (each fact once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merges: Vec<ItemMerge>,
    /// Items that statements of this commit contradict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersessions: Vec<Supersession>,
    /// The settlement.
    pub receipt: ExtractionReceipt,
    /// Commit time (from the writer's injected clock).
    pub committed_at: TimestampMs,
}

impl MemoryCommit {
    /// Checks the commit's rules (memory.md §2.7 validation steps 1–6 and receipt rules).
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_cursor("cursor.expected", "cursor.next", self.cursor.expected, self.cursor.next)?;
        validate_checkpoint_presence(self.trigger, self.checkpoint.as_ref())?;
        if self.items.len() > MEMORY_MUTATIONS_MAX {
            return fail(
                "items",
                format!("holds {} items, the limit is {MEMORY_MUTATIONS_MAX}", self.items.len()),
            );
        }
        let mut ids = BTreeSet::new();
        for (index, new) in self.items.iter().enumerate() {
            let at = format!("items[{index}]");
            check_written_fields(&self.scope, &new.fields, self.committed_at).map_err(|e| e.within(&at))?;
            if !ids.insert(&new.item) {
                return fail(format!("{at}.item"), "is created twice in one commit");
            }
        }
        self.validate_consolidation()?;
        self.validate_receipt().map_err(|e| e.within("receipt"))
    }

    /// Whether statement `index` is merged into a held item instead of creating its own.
    pub fn is_merged(&self, index: usize) -> bool {
        self.merges.iter().any(|m| m.statement as usize == index)
    }

    fn validate_consolidation(&self) -> Result<(), ValidationError> {
        let mut merged = BTreeSet::new();
        for (index, merge) in self.merges.iter().enumerate() {
            let at = format!("merges[{index}]");
            let Some(statement) = self.items.get(merge.statement as usize) else {
                return fail(format!("{at}.statement"), "must index a statement of the commit");
            };
            if !merged.insert(merge.statement) {
                return fail(format!("{at}.statement"), "is merged twice");
            }
            if merge.item == statement.item {
                return fail(format!("{at}.item"), "must not be the statement's own item");
            }
            check_expected_version(merge.expected_version).map_err(|e| e.within(&at))?;
        }
        let mut superseded = BTreeSet::new();
        for (index, supersession) in self.supersessions.iter().enumerate() {
            let at = format!("supersessions[{index}]");
            if supersession.by as usize >= self.items.len() || merged.contains(&supersession.by) {
                return fail(format!("{at}.by"), "must index a statement the commit creates");
            }
            if !superseded.insert(&supersession.item) {
                return fail(format!("{at}.item"), "is superseded twice");
            }
            if self.items[supersession.by as usize].item == supersession.item {
                return fail(format!("{at}.item"), "must not supersede itself");
            }
            check_expected_version(supersession.expected_version).map_err(|e| e.within(&at))?;
        }
        Ok(())
    }

    fn validate_receipt(&self) -> Result<(), ValidationError> {
        let receipt = &self.receipt;
        let requested = &receipt.requested_items;
        for (index, item) in requested.iter().enumerate() {
            if *item as usize >= self.items.len() {
                return fail(format!("requested_items[{index}]"), "must index an item of the commit");
            }
            if index > 0 && requested[index - 1] >= *item {
                return fail(format!("requested_items[{index}]"), "must be strictly ascending");
            }
        }
        let remember = self.trigger == ExtractionTrigger::Remember;
        if !requested.is_empty() && !remember {
            return fail("requested_items", "incidental extraction cannot expose requested items");
        }
        let empty = self.items.is_empty()
            && requested.is_empty()
            && self.merges.is_empty()
            && self.supersessions.is_empty();
        if receipt.no_op_reason.is_some() && !(remember && empty) {
            return fail("no_op_reason", "requires trigger remember and no items");
        }
        if receipt.skip_reason.is_some() && !(self.trigger == ExtractionTrigger::Compaction && empty) {
            return fail("skip_reason", "requires trigger compaction and no items");
        }
        let expected =
            ReceiptStatus::of_commit(self.trigger, receipt.skip_reason.is_some(), !requested.is_empty());
        if receipt.status != expected {
            return fail("status", format!("must be {} for this commit", status_name(expected)));
        }
        Ok(())
    }
}

fn status_name(status: ReceiptStatus) -> &'static str {
    match status {
        ReceiptStatus::Remembered => "remembered",
        ReceiptStatus::NotApplicable => "not_applicable",
        ReceiptStatus::Extracted => "extracted",
        ReceiptStatus::Discarded => "discarded",
        ReceiptStatus::Skipped => "skipped",
    }
}

fn validate_cursor(
    expected_field: &str,
    next_field: &str,
    expected: u64,
    next: u64,
) -> Result<(), ValidationError> {
    safe_integer(expected_field, expected)?;
    safe_integer(next_field, next)?;
    if next <= expected {
        return fail(next_field, format!("must advance beyond {expected_field}"));
    }
    Ok(())
}

fn validate_checkpoint_presence(
    trigger: ExtractionTrigger,
    checkpoint: Option<&CheckpointId>,
) -> Result<(), ValidationError> {
    match (trigger == ExtractionTrigger::Compaction, checkpoint.is_some()) {
        (true, false) => fail("checkpoint", "is required when the trigger is compaction"),
        (false, true) => fail("checkpoint", "is only allowed when the trigger is compaction"),
        _ => Ok(()),
    }
}

/// Fields written by a record of `scope` at `committed_at`: valid, in an admitted scope, and not
/// observed after the commit.
fn check_written_fields(
    scope: &MemoryScope,
    fields: &MemoryItemFields,
    committed_at: TimestampMs,
) -> Result<(), ValidationError> {
    fields.validate().map_err(|e| e.within("fields"))?;
    if !scope.admits(&fields.scope) {
        return fail("fields.scope", format!("must be global or {scope}, the record's scope"));
    }
    if fields.observed_at > committed_at {
        return fail("fields.observed_at", "must not be after the commit time");
    }
    Ok(())
}

/// One change in a mutation batch (memory.md §2.6), tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Mutation {
    /// A new item at version 1.
    Create {
        /// The id assigned to it.
        item: ItemId,
        /// Its fields.
        fields: MemoryItemFields,
    },
    /// Replace an item's fields (its lifecycle state is kept).
    Update {
        /// The item.
        item: ItemId,
        /// The version the change was computed against.
        expected_version: u64,
        /// The new fields.
        fields: MemoryItemFields,
    },
    /// Archive an active item.
    Archive {
        /// The item.
        item: ItemId,
        /// The version the change was computed against.
        expected_version: u64,
    },
    /// Restore an archived item.
    Restore {
        /// The item.
        item: ItemId,
        /// The version the change was computed against.
        expected_version: u64,
    },
}

/// A batch of item changes applied in order as one operation (memory.md §2.6). Outcomes
/// (`created`, `updated`, `noop`, ...) follow from replaying the batch against the item store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryMutation {
    /// The idempotency key.
    pub operation: OperationId,
    /// The stream the batch is appended to; written fields must be global or this scope.
    pub scope: MemoryScope,
    /// 1 to 32 changes, applied in order.
    pub mutations: Vec<Mutation>,
    /// Commit time (from the writer's injected clock).
    pub committed_at: TimestampMs,
    /// Set when the batch undoes a merge or a supersession (schema version 2).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub unmerge: Option<Unmerge>,
}

/// What an unmerge undoes: the consolidation that an extraction commit at `position` decided
/// about `item`. The batch it rides on holds exactly the changes that undo it: for a merge, the
/// update that takes the statement's sources and keys back out of `item` and the create of the
/// statement as an item of its own; for a supersession, the restore of the superseded `item`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unmerge {
    /// The log position of the extraction commit that merged or superseded.
    pub position: u64,
    /// The item the statement was merged into, or the item it superseded.
    pub item: ItemId,
    /// The index into that commit's `items` of the statement.
    pub statement: u32,
}

impl MemoryMutation {
    /// The payload's schema version: 2 when it carries an [`Unmerge`], else 1.
    pub fn schema_version(&self) -> u16 {
        if self.unmerge.is_some() { 2 } else { 1 }
    }

    fn validate_unmerge(&self) -> Result<(), ValidationError> {
        let Some(unmerge) = &self.unmerge else { return Ok(()) };
        if unmerge.position == 0 {
            return fail("unmerge.position", "must be a log position (from 1)");
        }
        safe_integer("unmerge.position", unmerge.position)?;
        let undoes = match self.mutations.as_slice() {
            [Mutation::Update { item, .. }, Mutation::Create { .. }] => item == &unmerge.item,
            [Mutation::Restore { item, .. }] => item == &unmerge.item,
            _ => false,
        };
        if !undoes {
            return fail(
                "unmerge",
                "must ride on an update of its item and a create, or on a restore of its item",
            );
        }
        Ok(())
    }
}

impl MemoryMutation {
    /// Checks the batch's size and each change.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.mutations.is_empty() || self.mutations.len() > MEMORY_MUTATIONS_MAX {
            return fail("mutations", format!("must hold 1 to {MEMORY_MUTATIONS_MAX} mutations"));
        }
        let mut created = BTreeSet::new();
        for (index, mutation) in self.mutations.iter().enumerate() {
            let at = format!("mutations[{index}]");
            match mutation {
                Mutation::Create { item, fields } => {
                    check_written_fields(&self.scope, fields, self.committed_at)
                        .map_err(|e| e.within(&at))?;
                    if !created.insert(item) {
                        return fail(format!("{at}.item"), "is created twice in one batch");
                    }
                }
                Mutation::Update { expected_version, fields, .. } => {
                    check_expected_version(*expected_version).map_err(|e| e.within(&at))?;
                    check_written_fields(&self.scope, fields, self.committed_at)
                        .map_err(|e| e.within(&at))?;
                }
                Mutation::Archive { expected_version, .. } | Mutation::Restore { expected_version, .. } => {
                    check_expected_version(*expected_version).map_err(|e| e.within(&at))?;
                }
            }
        }
        self.validate_unmerge()
    }
}

fn check_expected_version(version: u64) -> Result<(), ValidationError> {
    if version == 0 {
        return fail("expected_version", "must be at least 1");
    }
    safe_integer("expected_version", version)
}

/// What a settled extraction failure did (memory.md §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureOutcome {
    /// The first failure of a range: the range becomes the session's pending failure and the
    /// cursor stays put, so exactly one later attempt retries it.
    RetryLater,
    /// A failure of the pending range's retry: the range is discarded and the cursor advances
    /// past it.
    Discarded,
}

/// A settled extraction failure (memory.md §2.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractionFailure {
    /// The idempotency key of the failed attempt.
    pub operation: OperationId,
    /// The session whose events failed.
    pub session: SessionId,
    /// The memory stream the failure is recorded on.
    pub scope: MemoryScope,
    /// What set the failed extraction off.
    pub trigger: ExtractionTrigger,
    /// The compaction checkpoint; present exactly when the trigger is `compaction`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub checkpoint: Option<CheckpointId>,
    /// The cursor the attempt started from; the failed range begins right after it.
    pub expected_cursor: u64,
    /// The last ordinal of the failed range; greater than `expected_cursor`.
    pub failed_through: u64,
    /// Binds the failure to the exact set of covered events.
    pub coverage_hash: Digest,
    /// Why this attempt failed.
    pub failure_class: ExtractionFailureClass,
    /// Whether the range is retried later or discarded.
    pub outcome: FailureOutcome,
    /// When the failure was settled (from the writer's injected clock).
    pub failed_at: TimestampMs,
}

impl ExtractionFailure {
    /// The failed range of ordinals, inclusive.
    pub fn range(&self) -> (u64, u64) {
        (self.expected_cursor.saturating_add(1), self.failed_through)
    }

    /// Checks the range and the checkpoint rule.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_cursor("expected_cursor", "failed_through", self.expected_cursor, self.failed_through)?;
        validate_checkpoint_presence(self.trigger, self.checkpoint.as_ref())
    }
}

/// Why memory was denied for a compaction range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DenialReason {
    /// The session was incognito.
    Incognito,
    /// Memory was disabled for the session.
    MemoryDisabled,
    /// The session was archived or a subagent's, which never feed memory.
    Ineligible,
}

/// Memory extraction was denied by policy for what a compaction checkpoint covers
/// (memory.md §2.9). Keyed by (session, checkpoint); the first denial wins on replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyDenial {
    /// The session.
    pub session: SessionId,
    /// The memory stream the denial is recorded on.
    pub scope: MemoryScope,
    /// The checkpoint whose coverage is denied.
    pub checkpoint: CheckpointId,
    /// Why.
    pub reason: DenialReason,
    /// When (from the writer's injected clock).
    pub denied_at: TimestampMs,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn id<T: TryFrom<String>>(text: &str) -> T {
        match T::try_from(text.to_owned()) {
            Ok(value) => value,
            Err(_) => panic!("bad test id {text}"),
        }
    }

    pub(crate) fn fields() -> MemoryItemFields {
        MemoryItemFields {
            content: "Prefers answers in Chinese".to_owned(),
            kind: MemoryKind::Preference,
            statement_type: StatementType::Fact,
            temporal_type: TemporalType::Undated,
            scope: MemoryScope::Global,
            event_started_at: None,
            event_ended_at: None,
            observed_at: TimestampMs(1_767_225_600_000),
            origin: MemoryOrigin::UserRequested,
            keys: vec![
                MemoryKey::new("Chinese  answer", KeyType::Alias, KeyOrigin::Deterministic),
                MemoryKey::new("偏好", KeyType::Exact, KeyOrigin::User),
            ],
            sources: vec![SourcePointer {
                session: id("s1"),
                run: id("r1"),
                turn: id("t1"),
                event: id("e1"),
            }],
        }
    }

    fn check_invalid(fields: &MemoryItemFields, field: &str) {
        match fields.validate() {
            Err(error) => assert_eq!(error.field, field, "{error}"),
            Ok(()) => panic!("expected a validation error on {field}"),
        }
    }

    #[test]
    fn keys_normalize_whitespace_and_case() {
        assert_eq!(MemoryKey::normalize("Chinese \u{3000}\t Answer"), "chinese answer");
        assert_eq!(MemoryKey::normalize("ΟΔΟΣ"), "οδος");
        assert_eq!(fields().keys[0].normalized_key, "chinese answer");
        assert_eq!(fields().validate(), Ok(()));
    }

    #[test]
    fn content_rules() {
        let mut f = fields();
        f.content = String::new();
        check_invalid(&f, "content");
        f.content = " padded".to_owned();
        check_invalid(&f, "content");
        f.content = "tab\there".to_owned();
        check_invalid(&f, "content");
        f.content = "zero\u{200B}width".to_owned();
        check_invalid(&f, "content");
        f.content = "x".repeat(MEMORY_CONTENT_CODE_POINTS_MAX + 1);
        check_invalid(&f, "content");
        f.content = "é".repeat(MEMORY_CONTENT_CODE_POINTS_MAX);
        assert_eq!(f.validate(), Ok(()));
    }

    #[test]
    fn temporal_rules() {
        let mut f = fields();
        f.event_started_at = Some(TimestampMs(10));
        check_invalid(&f, "event_started_at");
        f.temporal_type = TemporalType::Point;
        assert_eq!(f.validate(), Ok(()));
        f.event_ended_at = Some(TimestampMs(10));
        check_invalid(&f, "event_ended_at");
        f.temporal_type = TemporalType::Interval;
        check_invalid(&f, "event_ended_at");
        f.event_ended_at = Some(TimestampMs(11));
        assert_eq!(f.validate(), Ok(()));
        f.temporal_type = TemporalType::OpenEnded;
        check_invalid(&f, "event_ended_at");
        f.event_started_at = None;
        f.event_ended_at = None;
        check_invalid(&f, "event_started_at");
    }

    #[test]
    fn key_and_source_rules() {
        let mut f = fields();
        f.keys.reverse();
        check_invalid(&f, "keys[1].normalized_key");
        let mut f = fields();
        f.keys[0].normalized_key = "Chinese answer".to_owned();
        check_invalid(&f, "keys[0].normalized_key");
        let mut f = fields();
        f.keys.clear();
        check_invalid(&f, "keys");
        let mut f = fields();
        f.keys[0] = MemoryKey::new(" padded", KeyType::Alias, KeyOrigin::Llm);
        check_invalid(&f, "keys[0].key");
        let mut f = fields();
        f.sources.push(f.sources[0].clone());
        check_invalid(&f, "sources[1].event");
        let mut f = fields();
        f.sources.clear();
        check_invalid(&f, "sources");
    }

    #[test]
    fn remaining_field_rules_name_their_field() {
        let mut f = fields();
        f.observed_at = TimestampMs(1 << 53);
        check_invalid(&f, "observed_at");
        let mut f = fields();
        f.temporal_type = TemporalType::Point;
        f.event_started_at = Some(TimestampMs(1 << 53));
        check_invalid(&f, "event_started_at");
        let mut f = fields();
        f.keys[0] = MemoryKey::new("a\u{7}b", KeyType::Alias, KeyOrigin::Llm);
        check_invalid(&f, "keys[0].key");
        let mut f = fields();
        f.keys[0] =
            MemoryKey::new("a".repeat(MEMORY_KEY_CODE_POINTS_MAX + 1), KeyType::Alias, KeyOrigin::Llm);
        check_invalid(&f, "keys[0].key");
        let mut f = fields();
        f.keys[0].key.clear();
        check_invalid(&f, "keys[0].key");
        let mut f = fields();
        f.keys = (0..=MEMORY_KEYS_MAX)
            .map(|i| MemoryKey::new(format!("k{i:02}"), KeyType::Concept, KeyOrigin::Llm))
            .collect();
        check_invalid(&f, "keys");
    }

    #[test]
    fn scope_text_and_stream_forms() {
        let scope = MemoryScope::Workspace(id("w:1"));
        assert_eq!(scope.as_text(), "workspace:w:1");
        assert_eq!(scope.stream().as_str(), "memory/workspace:w:1");
        assert_eq!(MemoryScope::Global.stream().as_str(), "memory/global");
        let back: Result<MemoryScope, _> = serde_json::from_str("\"workspace:w:1\"");
        assert_eq!(back.ok(), Some(scope.clone()));
        assert!(serde_json::from_str::<MemoryScope>("\"local\"").is_err());
        assert!(serde_json::from_str::<MemoryScope>("\"workspace:\"").is_err());
        assert!(scope.admits(&MemoryScope::Global));
        assert!(!MemoryScope::Global.admits(&scope));
        let long = MemoryScope::Workspace(id(&"w".repeat(crate::limits::ID_BYTES_MAX)));
        assert!(StreamId::new(long.stream().as_str()).is_ok());
    }

    #[test]
    fn created_items_hash_their_content() {
        let item = MemoryItem::created(id("m1"), fields(), TimestampMs(1_767_225_600_000));
        assert_eq!(item.validate(), Ok(()));
        let mut tampered = item.clone();
        tampered.fields.content = "other".to_owned();
        assert_eq!(tampered.validate().map_err(|e| e.field), Err("content_hash".to_owned()));
        let mut unversioned = item.clone();
        unversioned.version = 0;
        assert_eq!(unversioned.validate().map_err(|e| e.field), Err("version".to_owned()));
        let mut observed_late = item.clone();
        observed_late.fields.observed_at = TimestampMs(1_767_225_600_001);
        assert_eq!(observed_late.validate().map_err(|e| e.field), Err("fields.observed_at".to_owned()));
        let mut bad_fields = item.clone();
        bad_fields.fields.sources.clear();
        assert_eq!(bad_fields.validate().map_err(|e| e.field), Err("fields.sources".to_owned()));
        let mut early = item;
        early.updated_at = TimestampMs(0);
        assert_eq!(early.validate().map_err(|e| e.field), Err("created_at".to_owned()));
    }
}
