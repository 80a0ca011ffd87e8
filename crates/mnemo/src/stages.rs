//! The projector stages: what `stats`, `rebuild` and `verify` report about them, how long a read
//! waits for them, and how they fail. Every stage this build knows is registered by the crate that
//! defines it; a pipeline spec picks from these.

pub use crate::mnemo::{CATCH_UP_TIMEOUT, StageReport, StageVerification, Stats, Verification};
pub use mnemo_pipeline::{PipelineError, StageStatus, StageStop};

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
