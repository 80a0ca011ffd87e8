//! Building, identifying, validating, rendering and matching checkpoints (compaction.md §1, §4.2,
//! §4.5, §5.1, §5.3).
//!
//! Everything here is deterministic: a model produces only the summary text or the opaque provider
//! state, and every decision about coverage, digest, identity and replacement is made by this code.

use mnemo_core::{
    Author, CheckpointBody, CheckpointCoverage, CheckpointId, CheckpointManifest, CheckpointPhase,
    CheckpointRecord, Digest, EventId, EventPoint, ExtractionBoundary, FaithfulnessReport, HeadAnchor,
    ProviderState, Role, RuntimeEvent, SessionId, SummaryFormat, TimestampMs, TurnId,
};
use serde_json::{Value, json};

use crate::projection::{
    SOURCE_POLICY_VERSION, estimate_events_tokens, estimate_tokens, stable_json, utf16_len,
};
use crate::summary::{SummaryChecks, SummaryDefect, find_summary_defect};

/// The prefix of every checkpoint id.
pub const CHECKPOINT_ID_PREFIX: &str = "hcheckpoint-";
/// The prefix of the synthetic event a V2 checkpoint replays as; such events are never real history.
pub const SYNTHETIC_EVENT_PREFIX: &str = "history-compact:";
/// The provider type whose connections can replay and produce V3 state.
pub const CODEX_PROVIDER_TYPE: &str = "openai-codex";
/// The custom part kind V3 state is materialised as.
pub const PROVIDER_PART_KIND: &str = "openai.compaction";

/// The notes a V2 checkpoint carries.
pub const TEXT_LIMITATIONS: [&str; 2] = [
    "This is a replay-time summary of the covered RuntimeEvent prefix, not the original events.",
    "The RuntimeEvent ledger remains the source of truth when exact wording matters.",
];
/// The notes a V3 checkpoint carries.
pub const PROVIDER_LIMITATIONS: [&str; 2] = [
    "This is provider-native replay state for the covered RuntimeEvent prefix.",
    "The RuntimeEvent ledger remains the source of truth when exact wording matters.",
];

/// What a checkpoint stands in for the covered events with, before it is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyInput {
    /// A text summary. `legacy` keeps an unmarked summary unmarked (conversation copy only); only
    /// the builder may mint the sectioned marker, after the summary passes every rule.
    Text {
        /// The summary.
        summary: String,
        /// Keep it as an unmarked legacy summary.
        legacy: bool,
    },
    /// Opaque provider state (V3).
    Provider(ProviderState),
}

/// Everything the builder needs.
#[derive(Debug, Clone)]
pub struct CheckpointInput<'a> {
    /// The owning session.
    pub session: &'a SessionId,
    /// The covered events: a prefix of the session's compactable projection.
    pub covered: &'a [RuntimeEvent],
    /// The summary or provider state.
    pub body: BodyInput,
    /// The checkpoint this one rolls forward from.
    pub previous: Option<CheckpointId>,
    /// Between turns or inside one.
    pub phase: CheckpointPhase,
    /// The covered user event a mid-turn checkpoint re-emits.
    pub head_anchor: Option<EventId>,
    /// The automatic-memory decision, frozen into the id.
    pub extraction_boundary: Option<ExtractionBoundary>,
    /// The caller's clock, if any; `created_at` is at least every covered event's time.
    pub now: Option<TimestampMs>,
    /// Who produced the body from what.
    pub manifest: CheckpointManifest,
    /// The faithfulness check of a text body.
    pub faithfulness: Option<FaithfulnessReport>,
    /// Characters per token of the estimates.
    pub chars_per_token: u64,
}

/// Why a checkpoint could not be built. Every variant means nothing may be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No events to cover.
    #[error("a checkpoint must cover at least one event")]
    NoEvents,
    /// A covered event belongs to another session.
    #[error("covered event {event} belongs to session {session}, not the checkpoint's")]
    CrossSession {
        /// The event.
        event: EventId,
        /// Its session.
        session: SessionId,
    },
    /// A covered event is a partial streaming snapshot, which a later event replaces.
    #[error("covered event {0} is partial")]
    Partial(EventId),
    /// The text summary is blank.
    #[error("the summary is empty")]
    EmptySummary,
    /// The provider state has an empty field.
    #[error("invalid provider state: {0}")]
    InvalidProviderState(String),
    /// The summary breaks a rule of §2.3.
    #[error("summary defect {}", .0.code())]
    Defect(SummaryDefect),
    /// The mid-turn head anchor breaks a rule of §1.6.
    #[error("head anchor: {0}")]
    HeadAnchor(String),
}

impl BuildError {
    /// The fail-open reason code a writer reports for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            BuildError::EmptySummary => "empty_summary",
            BuildError::InvalidProviderState(_) => "invalid_provider_state",
            BuildError::Defect(defect) => defect.code(),
            _ => "write_failed",
        }
    }
}

/// Builds a checkpoint over `input.covered`, enforcing every precondition of §1.9.
pub fn build_checkpoint(input: CheckpointInput<'_>) -> Result<CheckpointRecord, BuildError> {
    let (first, last) = match (input.covered.first(), input.covered.last()) {
        (Some(first), Some(last)) => (first, last),
        _ => return Err(BuildError::NoEvents),
    };
    for event in input.covered {
        if &event.session_id != input.session {
            return Err(BuildError::CrossSession {
                event: event.id.clone(),
                session: event.session_id.clone(),
            });
        }
        if event.partial {
            return Err(BuildError::Partial(event.id.clone()));
        }
    }
    let body = build_body(&input)?;
    let head_anchor = check_anchor(&input, last)?;
    let mut turns: Vec<&TurnId> = input.covered.iter().map(|e| &e.turn_id).collect();
    turns.sort();
    turns.dedup();
    let coverage = CheckpointCoverage {
        event_count: input.covered.len() as u64,
        turn_count: turns.len() as u64,
        first_event: first.id.clone(),
        through: EventPoint { run: last.run_id.clone(), turn: last.turn_id.clone(), event: last.id.clone() },
        source_digest: crate::projection::source_digest(input.covered),
    };
    let newest = input.covered.iter().map(|e| e.ts.0).max().unwrap_or(1);
    let created_at = TimestampMs(input.now.map_or(1, |n| n.0).max(newest));
    let limitations = match body {
        CheckpointBody::Provider { .. } => PROVIDER_LIMITATIONS,
        _ => TEXT_LIMITATIONS,
    };
    let mut record = CheckpointRecord {
        checkpoint: CheckpointId::new(format!("{CHECKPOINT_ID_PREFIX}pending"))
            .map_err(|e| BuildError::HeadAnchor(e.to_string()))?,
        session: input.session.clone(),
        created_at,
        phase: input.phase,
        coverage,
        source_policy_version: SOURCE_POLICY_VERSION.to_owned(),
        limitations: limitations.iter().map(|s| (*s).to_owned()).collect(),
        estimated_tokens: 0,
        previous: input.previous.clone(),
        head_anchor,
        extraction_boundary: input.extraction_boundary.clone(),
        body,
        manifest: input.manifest.clone(),
        faithfulness: input.faithfulness.clone(),
    };
    record.checkpoint = checkpoint_id(&record);
    record.estimated_tokens = stored_token_estimate(&record, input.chars_per_token);
    debug_assert_eq!(validate_shape(&record, Some(input.session)), Ok(()));
    Ok(record)
}

fn build_body(input: &CheckpointInput<'_>) -> Result<CheckpointBody, BuildError> {
    match &input.body {
        BodyInput::Text { summary, legacy } => {
            let summary = summary.trim();
            if summary.is_empty() {
                return Err(BuildError::EmptySummary);
            }
            if !legacy {
                let span = estimate_events_tokens(input.covered, input.chars_per_token);
                if let Some(defect) =
                    find_summary_defect(summary, SummaryChecks::full(span, input.chars_per_token))
                {
                    return Err(BuildError::Defect(defect));
                }
            }
            let summary_format =
                if *legacy { SummaryFormat::LegacyFreeform } else { SummaryFormat::SectionsV1 };
            Ok(CheckpointBody::Text { summary: summary.to_owned(), summary_format })
        }
        BodyInput::Provider(state) => {
            validate_provider_state(state).map_err(BuildError::InvalidProviderState)?;
            Ok(CheckpointBody::Provider { state: state.clone() })
        }
    }
}

/// Checks that every field of provider state is non-empty.
pub fn validate_provider_state(state: &ProviderState) -> Result<(), String> {
    for (field, value) in [
        ("connection", &state.connection),
        ("model", &state.model),
        ("item", &state.item),
        ("encrypted_content", &state.encrypted_content),
    ] {
        if value.is_empty() {
            return Err(format!("{field} is empty"));
        }
    }
    Ok(())
}

fn check_anchor(input: &CheckpointInput<'_>, last: &RuntimeEvent) -> Result<Option<HeadAnchor>, BuildError> {
    if input.phase != CheckpointPhase::MidTurn {
        return Ok(None);
    }
    let anchor_id = input
        .head_anchor
        .as_ref()
        .ok_or_else(|| BuildError::HeadAnchor("a mid-turn checkpoint needs a head anchor".to_owned()))?;
    let anchor = input
        .covered
        .iter()
        .find(|e| &e.id == anchor_id)
        .ok_or_else(|| BuildError::HeadAnchor(format!("anchor {anchor_id} is not a covered event")))?;
    if anchor.turn_id != last.turn_id {
        return Err(BuildError::HeadAnchor("the anchor must be in the last covered event's turn".to_owned()));
    }
    if anchor.role != Role::User || anchor.author != Author::User {
        return Err(BuildError::HeadAnchor(
            "the anchor must be a user event authored by the user".to_owned(),
        ));
    }
    Ok(Some(HeadAnchor { event: anchor.id.clone(), turn: anchor.turn_id.clone() }))
}

/// The content-addressed id (§1.4): `hcheckpoint-` and the first 32 hex digits of the SHA-256 of
/// the stable form of the identifying fields. Creation time, limitations, the token estimate, the
/// summary format, the manifest and the faithfulness report are not identifying.
pub fn checkpoint_id(record: &CheckpointRecord) -> CheckpointId {
    let mut identity = serde_json::Map::new();
    identity.insert("version".to_owned(), json!(record.version()));
    identity.insert("sessionId".to_owned(), json!(record.session.as_str()));
    identity.insert("sourcePolicyVersion".to_owned(), json!(record.source_policy_version));
    identity.insert("coverage".to_owned(), serde_json::to_value(&record.coverage).unwrap_or(Value::Null));
    match &record.body {
        CheckpointBody::Text { summary, .. } => {
            identity.insert("summary".to_owned(), json!(summary));
        }
        CheckpointBody::Provider { state } => {
            identity.insert("providerState".to_owned(), serde_json::to_value(state).unwrap_or(Value::Null));
        }
        other => {
            identity.insert("body".to_owned(), serde_json::to_value(other).unwrap_or(Value::Null));
        }
    }
    let previous =
        record.previous.as_ref().map_or_else(|| "[undefined]".to_owned(), |p| p.as_str().to_owned());
    identity.insert("previousCheckpointId".to_owned(), json!(previous));
    if record.phase == CheckpointPhase::MidTurn {
        identity.insert("phase".to_owned(), json!("mid_turn"));
        identity.insert(
            "headAnchor".to_owned(),
            serde_json::to_value(&record.head_anchor).unwrap_or(Value::Null),
        );
    }
    if let Some(boundary) = &record.extraction_boundary {
        identity.insert(
            "memoryExtractionBoundary".to_owned(),
            serde_json::to_value(boundary).unwrap_or(Value::Null),
        );
    }
    let digest = Digest::sha256(stable_json(&Value::Object(identity)).as_bytes());
    let text = format!("{CHECKPOINT_ID_PREFIX}{}", &digest.to_hex()[..32]);
    // An id of this shape is always valid: short, non-empty, no control characters.
    CheckpointId::new(text).unwrap_or_else(|_| unreachable_id())
}

#[expect(clippy::expect_used, reason = "the literal is a valid id; this only satisfies the type")]
fn unreachable_id() -> CheckpointId {
    CheckpointId::new("hcheckpoint-invalid").expect("a literal id is valid")
}

/// Escapes an attribute value of the rendered block.
fn escape_attribute(value: &str) -> String {
    value.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The text a V2 checkpoint replays as (§5.1), or `None` for a V3 checkpoint, which is never
/// rendered as text. Mnemo keeps no high-water name or sequence (the record's log position is its
/// high water), so the opening tag carries only the id and the version.
pub fn render_block(record: &CheckpointRecord) -> Option<String> {
    let CheckpointBody::Text { summary, .. } = &record.body else {
        return None;
    };
    let coverage = &record.coverage;
    Some(
        [
            format!(
                "<maka_history_compact_checkpoint id=\"{}\" version=\"2\">",
                escape_attribute(record.checkpoint.as_str())
            ),
            format!("summary: {summary}"),
            format!("coverage: {} runtime events across {} turns", coverage.event_count, coverage.turn_count),
            format!("source: {} 0-{}", record.source_policy_version, coverage.event_count.saturating_sub(1)),
            format!("limitations: {}", record.limitations.join("; ")),
            "</maka_history_compact_checkpoint>".to_owned(),
        ]
        .join("\n"),
    )
}

/// The synthetic event a V2 checkpoint replays as: a user-lane, system-authored text event whose
/// ids all start with [`SYNTHETIC_EVENT_PREFIX`].
pub fn synthetic_event(record: &CheckpointRecord) -> Option<RuntimeEvent> {
    let text = render_block(record)?;
    let synthetic = format!("{SYNTHETIC_EVENT_PREFIX}{}", record.checkpoint);
    let mut event = RuntimeEvent::new(
        EventId::new(synthetic.clone()).ok()?,
        mnemo_core::InvocationId::new(synthetic.clone()).ok()?,
        mnemo_core::RunId::new(synthetic.clone()).ok()?,
        record.session.clone(),
        TurnId::new(synthetic).ok()?,
        record.created_at,
        Role::User,
        Author::System,
    );
    event.content = Some(mnemo_core::Content::Text(mnemo_core::TextContent::new(text)));
    Some(event)
}

/// Whether an event is a synthetic checkpoint event rather than real history.
pub fn is_synthetic(event: &RuntimeEvent) -> bool {
    event.id.as_str().starts_with(SYNTHETIC_EVENT_PREFIX)
}

/// The assistant message V3 state is materialised as (§5.3): one custom part, never text.
pub fn provider_message(state: &ProviderState) -> Value {
    json!({
        "role": "assistant",
        "content": [{
            "type": "custom",
            "kind": PROVIDER_PART_KIND,
            "providerOptions": {"openai": {"itemId": state.item, "encryptedContent": state.encrypted_content}},
        }],
    })
}

/// The estimate stored on a checkpoint (§1.7): V2 from its rendered block, V3 from its custom message.
pub fn stored_token_estimate(record: &CheckpointRecord, chars_per_token: u64) -> u64 {
    match &record.body {
        CheckpointBody::Text { .. } => {
            estimate_tokens(render_block(record).map_or(0, |b| utf16_len(&b)), chars_per_token)
        }
        CheckpointBody::Provider { state } => {
            let message = serde_json::to_string(&provider_message(state)).unwrap_or_default();
            estimate_tokens(utf16_len(&message), chars_per_token)
        }
        _ => record.estimated_tokens,
    }
}

/// The estimate replay uses (§1.7): V2 is recomputed at the current characters per token, V3 keeps
/// the stored value.
pub fn replay_token_estimate(record: &CheckpointRecord, chars_per_token: u64) -> u64 {
    match &record.body {
        CheckpointBody::Text { .. } => stored_token_estimate(record, chars_per_token),
        _ => record.estimated_tokens,
    }
}

/// Shape validation (§1.10): the record's own rules, the owning session, and a source policy this
/// build implements (an unknown one fails closed).
pub fn validate_shape(record: &CheckpointRecord, session: Option<&SessionId>) -> Result<(), String> {
    record.validate().map_err(|e| e.to_string())?;
    if session.is_some_and(|s| s != &record.session) {
        return Err(format!("checkpoint belongs to session {}", record.session));
    }
    if record.source_policy_version != SOURCE_POLICY_VERSION {
        return Err(format!("unknown source policy version {:?}", record.source_policy_version));
    }
    if !record.checkpoint.as_str().starts_with(CHECKPOINT_ID_PREFIX) {
        return Err(format!("checkpoint id {} lacks the {CHECKPOINT_ID_PREFIX} prefix", record.checkpoint));
    }
    if let CheckpointBody::Provider { state } = &record.body {
        validate_provider_state(state)?;
    }
    Ok(())
}

/// Whether a checkpoint may be loaded (§4.4): a valid shape and a loadable summary (sectioned:
/// structure and truncation; legacy: truncation; V3: always).
pub fn validate_loadable(record: &CheckpointRecord, session: Option<&SessionId>) -> Result<(), String> {
    validate_shape(record, session)?;
    if let CheckpointBody::Text { summary, summary_format } = &record.body {
        let checks = match summary_format {
            SummaryFormat::LegacyFreeform => SummaryChecks::load_legacy(),
            _ => SummaryChecks::load_sectioned(),
        };
        if let Some(defect) = find_summary_defect(summary, checks) {
            return Err(format!("summary defect {}", defect.code()));
        }
    }
    Ok(())
}

/// The provider connection and model a request goes to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Connection {
    /// The provider type (`openai-codex` can replay V3 state).
    pub provider_type: String,
    /// The connection's slug.
    pub slug: String,
    /// The model.
    pub model: String,
}

/// Whether `record` can be replayed to `connection` (§1.11): V2 always, V3 only to the Codex
/// connection and model that produced it.
pub fn can_replay(record: &CheckpointRecord, connection: &Connection) -> bool {
    match &record.body {
        CheckpointBody::Provider { state } => {
            connection.provider_type == CODEX_PROVIDER_TYPE
                && connection.slug == state.connection
                && connection.model == state.model
        }
        _ => true,
    }
}

/// Whether the compactor for `connection` may roll forward from `record` (§1.11): V2 only off
/// Codex (the Codex compactor re-compresses the full prefix), V3 exactly when it can replay.
pub fn can_continue(record: &CheckpointRecord, connection: &Connection) -> bool {
    match &record.body {
        CheckpointBody::Provider { .. } => can_replay(record, connection),
        _ => connection.provider_type != CODEX_PROVIDER_TYPE,
    }
}

/// The replacement rule (§4.2): forward progress always replaces; equal coverage replaces only as
/// the explicit successor of the current checkpoint over the very same prefix; anything else is
/// refused.
pub fn can_replace(current: Option<&CheckpointRecord>, candidate: &CheckpointRecord) -> bool {
    let Some(current) = current else {
        return true;
    };
    if current.source_policy_version != candidate.source_policy_version
        || current.session != candidate.session
    {
        return false;
    }
    let (cur, cand) = (&current.coverage, &candidate.coverage);
    if cand.event_count > cur.event_count {
        return true;
    }
    cand.event_count == cur.event_count
        && candidate.previous.as_ref() == Some(&current.checkpoint)
        && cand.turn_count == cur.turn_count
        && cand.source_digest == cur.source_digest
        && cand.through == cur.through
        && cand.first_event == cur.first_event
}

/// Why a checkpoint does not match a projection (§4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MatchMiss {
    /// The checkpoint fails shape validation.
    InvalidCheckpoint,
    /// The covered events are not the projection's prefix (count, ids, anchor).
    CoverageMiss,
    /// The prefix is the same events but their digest differs.
    SourceHashMismatch,
}

impl MatchMiss {
    /// The reason code.
    pub fn code(self) -> &'static str {
        match self {
            MatchMiss::InvalidCheckpoint => "invalid_checkpoint",
            MatchMiss::CoverageMiss => "coverage_miss",
            MatchMiss::SourceHashMismatch => "source_hash_mismatch",
        }
    }
}

/// What prefix matching needs to know of one projected event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFacts {
    /// The event.
    pub event: EventId,
    /// Its session.
    pub session: SessionId,
    /// Its run.
    pub run: mnemo_core::RunId,
    /// Its turn.
    pub turn: TurnId,
    /// Its role.
    pub role: Role,
    /// Its author.
    pub author: Author,
}

impl EntryFacts {
    /// The facts of an event.
    pub fn of(event: &RuntimeEvent) -> Self {
        EntryFacts {
            event: event.id.clone(),
            session: event.session_id.clone(),
            run: event.run_id.clone(),
            turn: event.turn_id.clone(),
            role: event.role,
            author: event.author,
        }
    }
}

/// A compactable projection a checkpoint can be matched against: a list of events, or the
/// latest-checkpoint stage's index of one session (which answers without reading the events).
pub trait ProjectionView {
    /// Events in the projection.
    fn len(&self) -> u64;
    /// Whether the projection is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The facts of the event at `index`.
    fn facts(&self, index: u64) -> Option<EntryFacts>;
    /// The index of the event with this id among the first `within` events.
    fn index_of(&self, event: &EventId, within: u64) -> Option<u64>;
    /// The source digest of the first `count` events.
    fn prefix_digest(&self, count: u64) -> Option<Digest>;
    /// Whether any of the first `count` events belongs to another session than `session`.
    fn foreign_session_within(&self, count: u64, session: &SessionId) -> bool;
}

impl ProjectionView for [RuntimeEvent] {
    fn len(&self) -> u64 {
        <[RuntimeEvent]>::len(self) as u64
    }

    fn facts(&self, index: u64) -> Option<EntryFacts> {
        self.get(usize::try_from(index).ok()?).map(EntryFacts::of)
    }

    fn index_of(&self, event: &EventId, within: u64) -> Option<u64> {
        let within = usize::try_from(within).unwrap_or(usize::MAX);
        self.iter().take(within).position(|e| &e.id == event).map(|i| i as u64)
    }

    fn prefix_digest(&self, count: u64) -> Option<Digest> {
        let count = usize::try_from(count).ok()?;
        (count <= <[RuntimeEvent]>::len(self)).then(|| crate::projection::source_digest(&self[..count]))
    }

    fn foreign_session_within(&self, count: u64, session: &SessionId) -> bool {
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        self.iter().take(count).any(|e| &e.session_id != session)
    }
}

/// Matches a checkpoint against a projection (§4.5), checking in order: shape, count and the last
/// covered event, the first covered event, the mid-turn anchor, and finally the digest. On success
/// returns how many events it covers; the rest are its successors.
pub fn match_prefix<P: ProjectionView + ?Sized>(
    record: &CheckpointRecord,
    projection: &P,
) -> Result<u64, MatchMiss> {
    if validate_shape(record, None).is_err() {
        return Err(MatchMiss::InvalidCheckpoint);
    }
    let coverage = &record.coverage;
    let count = coverage.event_count;
    if projection.len() < count || projection.foreign_session_within(count, &record.session) {
        return Err(MatchMiss::CoverageMiss);
    }
    let last = projection.facts(count - 1).ok_or(MatchMiss::CoverageMiss)?;
    if last.run != coverage.through.run
        || last.turn != coverage.through.turn
        || last.event != coverage.through.event
    {
        return Err(MatchMiss::CoverageMiss);
    }
    let first = projection.facts(0).ok_or(MatchMiss::CoverageMiss)?;
    if first.event != coverage.first_event {
        return Err(MatchMiss::CoverageMiss);
    }
    if record.phase == CheckpointPhase::MidTurn {
        let anchor = record.head_anchor.as_ref().ok_or(MatchMiss::CoverageMiss)?;
        let index = projection.index_of(&anchor.event, count).ok_or(MatchMiss::CoverageMiss)?;
        let facts = projection.facts(index).ok_or(MatchMiss::CoverageMiss)?;
        let is_user = facts.role == Role::User && facts.author == Author::User;
        if !is_user || facts.turn != anchor.turn || facts.turn != coverage.through.turn {
            return Err(MatchMiss::CoverageMiss);
        }
    }
    if projection.prefix_digest(count) != Some(coverage.source_digest) {
        return Err(MatchMiss::SourceHashMismatch);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{GOOD_SUMMARY, build_text, call, manifest, provider_state, result, sid, text_event};

    fn events() -> Vec<RuntimeEvent> {
        vec![
            text_event("e1", "t1", "user", "fix the build"),
            call("e2", "t1", "c1", "shell", json!({"cmd": "cargo build"})),
            result("e3", "t1", "c1", "shell", json!("error[E0308]: mismatched types")),
            text_event("e4", "t1", "model", "fixed src/lib.rs"),
            text_event("e5", "t2", "user", "now ship it"),
        ]
    }

    #[test]
    fn a_text_checkpoint_has_every_field_and_a_content_addressed_id() {
        let events = events();
        let record = build_text(&events[..4], GOOD_SUMMARY, None);
        assert_eq!(record.version(), 2);
        assert!(record.checkpoint.as_str().starts_with("hcheckpoint-"));
        assert_eq!(record.checkpoint.as_str().len(), "hcheckpoint-".len() + 32);
        assert_eq!(record.coverage.event_count, 4);
        assert_eq!(record.coverage.turn_count, 1);
        assert_eq!(record.coverage.first_event.as_str(), "e1");
        assert_eq!(record.coverage.through.event.as_str(), "e4");
        assert_eq!(record.coverage.source_digest, crate::projection::source_digest(&events[..4]));
        assert_eq!(record.limitations.len(), 2);
        let block = render_block(&record).unwrap_or_default();
        assert_eq!(record.estimated_tokens, estimate_tokens(utf16_len(&block), 4));
        assert!(block.starts_with(&format!("<maka_history_compact_checkpoint id=\"{}\"", record.checkpoint)));
        assert!(block.contains("coverage: 4 runtime events across 1 turns"));
        assert!(block.contains("source: maka.compactable_runtime_event_projection.v1 0-3"));
        assert_eq!(validate_loadable(&record, Some(&sid())), Ok(()));
        // The id ignores the clock, the estimate and the manifest, but not the predecessor.
        let mut later = record.clone();
        later.created_at = TimestampMs(later.created_at.0 + 5);
        later.manifest.summarizer = "other".to_owned();
        assert_eq!(checkpoint_id(&later), record.checkpoint);
        later.previous = Some(record.checkpoint.clone());
        assert_ne!(checkpoint_id(&later), record.checkpoint);
    }

    fn try_build(covered: &[RuntimeEvent], body: BodyInput) -> Result<CheckpointRecord, BuildError> {
        let session = sid();
        build_checkpoint(CheckpointInput {
            session: &session,
            covered,
            body,
            previous: None,
            phase: CheckpointPhase::PreTurn,
            head_anchor: None,
            extraction_boundary: None,
            now: None,
            manifest: manifest(),
            faithfulness: None,
            chars_per_token: 4,
        })
    }

    #[test]
    fn builder_preconditions() {
        let events = events();
        let text = |s: &str| BodyInput::Text { summary: s.to_owned(), legacy: false };
        assert_eq!(try_build(&[], text(GOOD_SUMMARY)).err(), Some(BuildError::NoEvents));
        assert_eq!(try_build(&events, text("  ")).err(), Some(BuildError::EmptySummary));
        assert_eq!(
            try_build(&events, text("just prose")).err(),
            Some(BuildError::Defect(SummaryDefect::MissingSection))
        );
        let legacy = BodyInput::Text { summary: "just prose".to_owned(), legacy: true };
        assert!(matches!(
            try_build(&events, legacy).map(|r| r.body),
            Ok(CheckpointBody::Text { summary_format: SummaryFormat::LegacyFreeform, .. })
        ));
        let mut partial = events.clone();
        partial[1].partial = true;
        assert!(matches!(try_build(&partial, text(GOOD_SUMMARY)), Err(BuildError::Partial(_))));
        let mut foreign = events.clone();
        foreign[2].session_id = crate::testing::id("s2");
        assert!(matches!(try_build(&foreign, text(GOOD_SUMMARY)), Err(BuildError::CrossSession { .. })));
        let mut bad_state = provider_state();
        bad_state.encrypted_content.clear();
        assert!(matches!(
            try_build(&events, BodyInput::Provider(bad_state)),
            Err(BuildError::InvalidProviderState(_))
        ));
    }

    #[test]
    fn the_size_floor_is_applied_by_the_builder() {
        let big: Vec<RuntimeEvent> =
            (0..5).map(|i| text_event(&format!("e{i}"), "t1", "user", &"x".repeat(9_000))).collect();
        let outcome = try_build(&big, BodyInput::Text { summary: GOOD_SUMMARY.to_owned(), legacy: false });
        assert_eq!(outcome.err(), Some(BuildError::Defect(SummaryDefect::TooSmallForFold)));
    }

    #[test]
    fn mid_turn_anchor_rules_and_ids() {
        let events = events();
        let session = sid();
        let build = |anchor: Option<&str>, covered: &[RuntimeEvent], phase| {
            build_checkpoint(CheckpointInput {
                session: &session,
                covered,
                body: BodyInput::Text { summary: GOOD_SUMMARY.to_owned(), legacy: false },
                previous: None,
                phase,
                head_anchor: anchor.map(|a| EventId::new(a).unwrap_or_else(|_| events[0].id.clone())),
                extraction_boundary: None,
                now: None,
                manifest: manifest(),
                faithfulness: None,
                chars_per_token: 4,
            })
        };
        let mid = build(Some("e1"), &events[..4], CheckpointPhase::MidTurn);
        let pre = build(None, &events[..4], CheckpointPhase::PreTurn);
        assert!(mid.is_ok());
        assert_ne!(mid.map(|r| r.checkpoint).ok(), pre.map(|r| r.checkpoint).ok());
        assert!(matches!(
            build(None, &events[..4], CheckpointPhase::MidTurn),
            Err(BuildError::HeadAnchor(_))
        ));
        assert!(matches!(
            build(Some("e9"), &events[..4], CheckpointPhase::MidTurn),
            Err(BuildError::HeadAnchor(_))
        ));
        assert!(matches!(
            build(Some("e4"), &events[..4], CheckpointPhase::MidTurn),
            Err(BuildError::HeadAnchor(_))
        ));
        assert!(matches!(
            build(Some("e1"), &events[..5], CheckpointPhase::MidTurn),
            Err(BuildError::HeadAnchor(_))
        ));
    }

    #[test]
    fn prefix_match_reasons_in_order() {
        let events = events();
        let record = build_text(&events[..3], GOOD_SUMMARY, None);
        assert_eq!(match_prefix(&record, events.as_slice()), Ok(3));
        let mut changed = events.clone();
        changed[1].ts = TimestampMs(changed[1].ts.0 + 1);
        assert_eq!(match_prefix(&record, changed.as_slice()), Err(MatchMiss::SourceHashMismatch));
        let mut reordered = events.clone();
        reordered.swap(0, 1);
        assert_eq!(match_prefix(&record, reordered.as_slice()), Err(MatchMiss::CoverageMiss));
        assert_eq!(match_prefix(&record, &events[..2]), Err(MatchMiss::CoverageMiss));
        let mut invalid = record.clone();
        invalid.source_policy_version = "maka.compactable_runtime_event_projection.v0".to_owned();
        assert_eq!(match_prefix(&invalid, events.as_slice()), Err(MatchMiss::InvalidCheckpoint));
    }

    #[test]
    fn replacement_rule() {
        let events = events();
        let first = build_text(&events[..3], GOOD_SUMMARY, None);
        let further = build_text(&events[..4], GOOD_SUMMARY, None);
        assert!(can_replace(None, &first));
        assert!(can_replace(Some(&first), &further));
        assert!(!can_replace(Some(&further), &first));
        let other = build_text(&events[..3], &GOOD_SUMMARY.replace("build", "tests"), None);
        assert!(!can_replace(Some(&first), &other), "equal coverage without lineage");
        let successor = build_text(&events[..3], &GOOD_SUMMARY.replace("build", "tests"), Some(&first));
        assert!(can_replace(Some(&first), &successor));
        let stale = build_text(&events[..3], &GOOD_SUMMARY.replace("build", "docs"), Some(&further));
        assert!(!can_replace(Some(&first), &stale), "wrong predecessor");
    }

    #[test]
    fn provider_binding_and_materialisation() {
        let events = events();
        let record = try_build(&events[..4], BodyInput::Provider(provider_state()));
        let Ok(record) = record else { panic!("a valid V3 checkpoint builds") };
        assert_eq!(record.version(), 3);
        assert_eq!(render_block(&record), None);
        let codex = Connection {
            provider_type: CODEX_PROVIDER_TYPE.to_owned(),
            slug: "codex".to_owned(),
            model: "gpt-5".to_owned(),
        };
        assert!(can_replay(&record, &codex));
        assert!(can_continue(&record, &codex));
        let other_model = Connection { model: "gpt-4".to_owned(), ..codex.clone() };
        assert!(!can_replay(&record, &other_model));
        let text = build_text(&events[..4], GOOD_SUMMARY, None);
        assert!(can_replay(&text, &codex));
        assert!(!can_continue(&text, &codex));
        assert!(can_continue(&text, &Connection::default()));
        let message = provider_message(&provider_state());
        assert_eq!(message["content"][0]["kind"], json!("openai.compaction"));
        assert_eq!(message["content"][0]["providerOptions"]["openai"]["encryptedContent"], json!("blob"));
    }
}
