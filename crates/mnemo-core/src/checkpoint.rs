//! Compaction checkpoints as plain data (spec: compaction.md §1). Building, selecting, replacing
//! and replaying checkpoints is the compaction crate's work; this module only says what an
//! accepted checkpoint records and which of its own fields must agree.
//!
//! Differences from the reference system's checkpoint object:
//! - the version is the `body`'s tag: `text` is the V2 text checkpoint, `provider` the V3
//!   provider-native one ([`CheckpointRecord::version`] gives 2 or 3);
//! - the high-water name and sequence are not kept: the log position of the record is its
//!   high-water mark;
//! - the evidence spine (`source`) is reduced to what it adds over `coverage`: the source-policy
//!   version and the first covered event;
//! - a `manifest` names the summarizer, its prompt version and the digest of its input.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::event::present;
use crate::ids::{CheckpointId, EventId, RunId, SessionId, TimestampMs, TurnId};
use crate::validation::{ValidationError, fail, non_empty, safe_integer};

/// The source policy of the compactable projection the reference system uses; a checkpoint's
/// coverage is a prefix of the projection this names.
pub const SOURCE_POLICY_VERSION_V1: &str = "maka.compactable_runtime_event_projection.v1";

/// Whether the checkpoint was taken between turns or inside one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckpointPhase {
    /// Between turns.
    PreTurn,
    /// Inside the current turn; the checkpoint then has a head anchor.
    MidTurn,
}

/// A covered event's position in the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventPoint {
    /// The run.
    pub run: RunId,
    /// The turn.
    pub turn: TurnId,
    /// The event.
    pub event: EventId,
}

/// Which events a checkpoint folds: always a prefix of the session's compactable projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointCoverage {
    /// Number of covered events; at least 1.
    pub event_count: u64,
    /// Number of distinct turns among them; at least 1.
    pub turn_count: u64,
    /// The first covered event.
    pub first_event: EventId,
    /// The last covered event.
    pub through: EventPoint,
    /// Digest over the covered events (compaction.md §1.3.1).
    pub source_digest: Digest,
}

/// The user message a mid-turn checkpoint re-emits right after its summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadAnchor {
    /// The anchor event (covered, role user, author user).
    pub event: EventId,
    /// Its turn, which is the last covered event's turn.
    pub turn: TurnId,
}

/// Whether the covered range may feed memory extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BoundaryDisposition {
    /// Extraction may run over it.
    Eligible,
    /// Memory policy denied it.
    PolicyDenied,
}

/// The point through which automatic memory extraction was triggered by this checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractionBoundary {
    /// The run.
    pub run: RunId,
    /// The turn.
    pub turn: TurnId,
    /// The event.
    pub event: EventId,
    /// Whether extraction may use the range.
    pub disposition: BoundaryDisposition,
}

/// How a V2 summary is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SummaryFormat {
    /// The mandated sectioned format (compaction.md §2.1).
    SectionsV1,
    /// An unmarked summary kept as it was (for example by conversation copy).
    LegacyFreeform,
}

/// The kind of opaque provider state. A closed set: an unknown kind fails closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderStateKind {
    /// OpenAI Codex remote compaction, version 2.
    OpenaiCodexRemoteV2,
}

/// Opaque provider-native compaction state, bound to the connection and model that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderState {
    /// What the state is.
    pub kind: ProviderStateKind,
    /// The connection that produced it; replay requires the same one.
    pub connection: String,
    /// The model that produced it; replay requires the same one.
    pub model: String,
    /// The provider's item id.
    pub item: String,
    /// The encrypted blob, never interpreted.
    pub encrypted_content: String,
}

/// What the checkpoint replaces the covered events with, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum CheckpointBody {
    /// V2: a continuation summary.
    Text {
        /// The summary; not blank.
        summary: String,
        /// Its layout.
        summary_format: SummaryFormat,
    },
    /// V3: opaque provider state.
    Provider {
        /// The state.
        state: ProviderState,
    },
}

/// Who produced a checkpoint and from what, so a summary can be traced and reproduced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointManifest {
    /// The summarizer's identity (an embedded summarizer's name, or a provider and model).
    pub summarizer: String,
    /// The version of the prompt or algorithm it ran.
    pub prompt_version: String,
    /// Digest of the exact input it was given.
    pub input_digest: Digest,
}

/// What a faithfulness check found: the claims a summary states (paths, commands, identifiers,
/// numbers, quoted strings) that the covered events do not support. Mnemo goes beyond the
/// reference system here, which only proves a summary's presence, not its faithfulness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaithfulnessReport {
    /// How many distinct claims were looked up in the covered events.
    pub checked: u64,
    /// The claims not found there, in the order the summary states them.
    pub unsupported: Vec<String>,
}

/// An accepted compaction checkpoint (compaction.md §1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRecord {
    /// The checkpoint's id.
    pub checkpoint: CheckpointId,
    /// The owning session; every covered event belongs to it.
    pub session: SessionId,
    /// Creation time: at least every covered event's `ts`.
    pub created_at: TimestampMs,
    /// Between turns or inside one.
    pub phase: CheckpointPhase,
    /// The folded prefix.
    pub coverage: CheckpointCoverage,
    /// The rule that decides which events form the compactable projection.
    pub source_policy_version: String,
    /// Notes on what the checkpoint cannot stand in for; each non-empty.
    pub limitations: Vec<String>,
    /// Model-visible size estimate in tokens.
    pub estimated_tokens: u64,
    /// The checkpoint this one rolls forward from.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub previous: Option<CheckpointId>,
    /// Present exactly on mid-turn checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub head_anchor: Option<HeadAnchor>,
    /// Present when the checkpoint triggered memory extraction.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub extraction_boundary: Option<ExtractionBoundary>,
    /// The summary or provider state.
    pub body: CheckpointBody,
    /// Who produced it from what.
    pub manifest: CheckpointManifest,
    /// The faithfulness check of a text summary against the covered events.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub faithfulness: Option<FaithfulnessReport>,
}

impl CheckpointRecord {
    /// 2 for a text checkpoint, 3 for a provider-native one.
    pub fn version(&self) -> u8 {
        match self.body {
            CheckpointBody::Text { .. } => 2,
            CheckpointBody::Provider { .. } => 3,
        }
    }

    /// Checks the shape rules of compaction.md §1.10 that hold within one checkpoint.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.validate_coverage()?;
        non_empty("source_policy_version", &self.source_policy_version)?;
        for (index, note) in self.limitations.iter().enumerate() {
            non_empty(&format!("limitations[{index}]"), note)?;
        }
        safe_integer("estimated_tokens", self.estimated_tokens)?;
        safe_integer("created_at", self.created_at.0)?;
        if self.previous.as_ref() == Some(&self.checkpoint) {
            return fail("previous", "must not be the checkpoint itself");
        }
        self.validate_anchor()?;
        self.validate_body()?;
        non_empty("manifest.summarizer", &self.manifest.summarizer)?;
        non_empty("manifest.prompt_version", &self.manifest.prompt_version)?;
        if let Some(report) = &self.faithfulness {
            safe_integer("faithfulness.checked", report.checked)?;
            if report.unsupported.len() as u64 > report.checked {
                return fail("faithfulness.unsupported", "must not list more claims than were checked");
            }
        }
        Ok(())
    }

    fn validate_coverage(&self) -> Result<(), ValidationError> {
        let coverage = &self.coverage;
        if coverage.event_count == 0 {
            return fail("coverage.event_count", "must be at least 1");
        }
        safe_integer("coverage.event_count", coverage.event_count)?;
        if coverage.turn_count == 0 {
            return fail("coverage.turn_count", "must be at least 1");
        }
        if coverage.turn_count > coverage.event_count {
            return fail("coverage.turn_count", "must not exceed coverage.event_count");
        }
        if coverage.event_count == 1 && coverage.first_event != coverage.through.event {
            return fail("coverage.first_event", "must be coverage.through.event when one event is covered");
        }
        Ok(())
    }

    fn validate_anchor(&self) -> Result<(), ValidationError> {
        match (self.phase, &self.head_anchor) {
            (CheckpointPhase::PreTurn, Some(_)) => {
                fail("head_anchor", "is only allowed on a mid-turn checkpoint")
            }
            (CheckpointPhase::MidTurn, None) => fail("head_anchor", "is required on a mid-turn checkpoint"),
            (CheckpointPhase::MidTurn, Some(anchor)) if anchor.turn != self.coverage.through.turn => {
                fail("head_anchor.turn", "must be the last covered event's turn")
            }
            _ => Ok(()),
        }
    }

    fn validate_body(&self) -> Result<(), ValidationError> {
        match &self.body {
            CheckpointBody::Text { summary, .. } => {
                if summary.trim().is_empty() {
                    return fail("body.summary", "must not be blank");
                }
                Ok(())
            }
            CheckpointBody::Provider { state } => {
                non_empty("body.state.connection", &state.connection)?;
                non_empty("body.state.model", &state.model)?;
                non_empty("body.state.item", &state.item)?;
                non_empty("body.state.encrypted_content", &state.encrypted_content)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::memory::tests::id;

    pub(crate) fn checkpoint() -> CheckpointRecord {
        CheckpointRecord {
            checkpoint: id("hcheckpoint-1"),
            session: id("s1"),
            created_at: TimestampMs(1_767_225_600_000),
            phase: CheckpointPhase::PreTurn,
            coverage: CheckpointCoverage {
                event_count: 4,
                turn_count: 1,
                first_event: id("e1"),
                through: EventPoint { run: id("r1"), turn: id("t1"), event: id("e4") },
                source_digest: Digest::sha256(b"events"),
            },
            source_policy_version: SOURCE_POLICY_VERSION_V1.to_owned(),
            limitations: vec!["replay-time summary".to_owned()],
            estimated_tokens: 120,
            previous: None,
            head_anchor: None,
            extraction_boundary: None,
            body: CheckpointBody::Text {
                summary: "## Goal\nship it".to_owned(),
                summary_format: SummaryFormat::SectionsV1,
            },
            manifest: CheckpointManifest {
                summarizer: "extractive".to_owned(),
                prompt_version: "1".to_owned(),
                input_digest: Digest::sha256(b"input"),
            },
            faithfulness: None,
        }
    }

    fn check_invalid(record: &CheckpointRecord, field: &str) {
        match record.validate() {
            Err(error) => assert_eq!(error.field, field, "{error}"),
            Ok(()) => panic!("expected a validation error on {field}"),
        }
    }

    #[test]
    fn a_text_checkpoint_is_version_2_and_valid() {
        let record = checkpoint();
        assert_eq!(record.validate(), Ok(()));
        assert_eq!(record.version(), 2);
    }

    #[test]
    fn a_provider_checkpoint_is_version_3() {
        let mut record = checkpoint();
        record.body = CheckpointBody::Provider {
            state: ProviderState {
                kind: ProviderStateKind::OpenaiCodexRemoteV2,
                connection: "codex".to_owned(),
                model: "gpt".to_owned(),
                item: "it1".to_owned(),
                encrypted_content: "blob".to_owned(),
            },
        };
        assert_eq!(record.validate(), Ok(()));
        assert_eq!(record.version(), 3);
        if let CheckpointBody::Provider { state } = &mut record.body {
            state.model.clear();
        }
        check_invalid(&record, "body.state.model");
    }

    #[test]
    fn coverage_rules() {
        let mut record = checkpoint();
        record.coverage.event_count = 0;
        check_invalid(&record, "coverage.event_count");
        let mut record = checkpoint();
        record.coverage.turn_count = 0;
        check_invalid(&record, "coverage.turn_count");
        let mut record = checkpoint();
        record.coverage.turn_count = 5;
        check_invalid(&record, "coverage.turn_count");
        let mut record = checkpoint();
        record.coverage.event_count = 1;
        check_invalid(&record, "coverage.first_event");
    }

    #[test]
    fn anchor_summary_and_lineage_rules() {
        let mut record = checkpoint();
        record.phase = CheckpointPhase::MidTurn;
        check_invalid(&record, "head_anchor");
        record.head_anchor = Some(HeadAnchor { event: id("e3"), turn: id("t0") });
        check_invalid(&record, "head_anchor.turn");
        record.head_anchor = Some(HeadAnchor { event: id("e3"), turn: id("t1") });
        assert_eq!(record.validate(), Ok(()));
        record.phase = CheckpointPhase::PreTurn;
        check_invalid(&record, "head_anchor");

        let mut record = checkpoint();
        record.body =
            CheckpointBody::Text { summary: " \n".to_owned(), summary_format: SummaryFormat::SectionsV1 };
        check_invalid(&record, "body.summary");
        let mut record = checkpoint();
        record.previous = Some(record.checkpoint.clone());
        check_invalid(&record, "previous");
        let mut record = checkpoint();
        record.limitations.push(String::new());
        check_invalid(&record, "limitations[1]");
        let mut record = checkpoint();
        record.source_policy_version.clear();
        check_invalid(&record, "source_policy_version");
        let mut record = checkpoint();
        record.estimated_tokens = 1 << 53;
        check_invalid(&record, "estimated_tokens");
        let mut record = checkpoint();
        record.created_at = TimestampMs(1 << 53);
        check_invalid(&record, "created_at");
        let mut record = checkpoint();
        record.manifest.prompt_version.clear();
        check_invalid(&record, "manifest.prompt_version");
        let mut record = checkpoint();
        record.manifest.summarizer.clear();
        check_invalid(&record, "manifest.summarizer");
    }

    #[test]
    fn unknown_body_kinds_and_formats_fail_closed() {
        let mut value = serde_json::to_value(checkpoint()).unwrap_or_default();
        value["body"]["summary_format"] = serde_json::json!("sections_v2");
        assert!(serde_json::from_value::<CheckpointRecord>(value).is_err());
        let mut value = serde_json::to_value(checkpoint()).unwrap_or_default();
        value["body"]["extra"] = serde_json::json!(1);
        assert!(serde_json::from_value::<CheckpointRecord>(value).is_err());
    }
}
