//! The projector stages: what `stats`, `rebuild` and `verify` report about them, how long a read
//! waits for them, and how they fail. Every stage this build knows is registered by the crate that
//! defines it; a pipeline spec picks from these.

pub use mnemo_pipeline::{PipelineError, StageStatus, StageStop};

use std::time::Duration;

use mnemo_core::Position;
use mnemo_pipeline::StageRegistry;

/// The registry `Mnemo::open` builds its pipeline from.
pub(crate) fn registry() -> StageRegistry {
    // The pipeline crate's own stage (session-catalog); each domain crate registers its own.
    let mut registry = StageRegistry::with_builtin();
    mnemo_compaction::register(&mut registry);
    mnemo_memory::register(&mut registry);
    mnemo_history::register(&mut registry);
    registry
}

/// How long a read waits for the projections to catch up with the log before giving up.
pub const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(600);

/// A stage's state as `rebuild` and `stats` report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StageReport {
    /// Stage name.
    pub name: String,
    /// Last position folded.
    pub watermark: Position,
    /// Projection digest at that watermark.
    pub digest: String,
    /// Why the stage no longer follows the log, if it stopped (its state stays at `watermark`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StageStop>,
}

/// What `stats` reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// The store directory.
    pub dir: String,
    /// Last position of the log.
    pub head: Position,
    /// Sessions in the catalog.
    pub sessions: u64,
    /// RuntimeEvents across sessions.
    pub events: u64,
    /// Turns across sessions.
    pub turns: u64,
    /// Bytes the store's databases (the log's and the key index's) take on disk.
    pub disk_bytes: u64,
    /// Every stage.
    pub stages: Vec<StageReport>,
}

/// What `verify` found for one stage.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StageVerification {
    /// Stage name.
    pub name: String,
    /// The position both digests are taken at.
    pub watermark: Position,
    /// The live projection's digest.
    pub live: String,
    /// A fresh in-memory rebuild's digest.
    pub rebuilt: String,
    /// Why the stage no longer follows the log, if it stopped: its digests are compared where it
    /// stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StageStop>,
}

impl StageVerification {
    /// Whether the live projection equals the rebuild.
    pub fn matches(&self) -> bool {
        self.live == self.rebuilt
    }
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verification {
    /// Envelopes whose hashes and links were checked.
    pub envelopes: u64,
    /// Acknowledged positions the log no longer holds (`FIRST..=LAST`), when it lost any; the stages
    /// are not compared then.
    pub lost: Option<String>,
    /// Each stage's comparison.
    pub stages: Vec<StageVerification>,
}

impl Verification {
    /// Whether nothing acknowledged is lost and every stage runs and matched (the chain is checked
    /// before this report exists).
    pub fn ok(&self) -> bool {
        self.lost.is_none() && self.stages.iter().all(|stage| stage.matches() && stage.stopped.is_none())
    }
}
