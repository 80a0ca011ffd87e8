//! The projector stages: what `stats`, `rebuild` and `verify` report about them, how long a read
//! waits for them, and how they fail. Every stage this build knows is registered here by name; a
//! pipeline spec picks from these.

pub use crate::mnemo::{CATCH_UP_TIMEOUT, StageReport, StageVerification, Stats, Verification};
pub use mnemo_pipeline::{PipelineError, StageStatus, StageStop};

use mnemo_pipeline::StageRegistry;

/// The registry `Mnemo::open` builds its pipeline from.
pub(crate) fn registry() -> StageRegistry {
    // The pipeline crate's own stages (session-catalog); domain crates add theirs below.
    let mut registry = StageRegistry::with_builtin();
    registry.register(mnemo_compaction::LATEST_CHECKPOINT_STAGE, mnemo_compaction::latest_checkpoint_factory);
    registry.register(mnemo_memory::STAGE_NAME, mnemo_memory::factory);
    // history-messages and history-search.
    mnemo_history::register(&mut registry);
    registry
}
