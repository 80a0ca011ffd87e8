//! Projector trait, the state-store abstraction, the runner that fans the log out to stages over
//! crossbeam channels, watermarks, rebuild, projection digests, pipeline spec loading.
//!
//! It is not:
//! - the log: it reads envelopes through `mnemo_log::LogBackend` and never appends;
//! - the domain: history, compaction and memory stages live in their own crates and register here.

mod error;
mod projector;
mod runner;
mod spec;
pub mod stages;
mod store;
mod txn;

pub use error::{PipelineError, StageStop};
pub use projector::{COMMIT_ENVELOPES_MAX, LoggedRecord, Projector};
pub use runner::{
    LIVE_COMMIT_DELAY, PIPELINE_NICE_INCREMENT, Pipeline, STAGE_QUEUE_DEPTH_MAX, Stage, StageStatus, fold_to,
};
pub use spec::{
    DEFAULT_SPEC_TOML, LogSpec, PIPELINE_SPEC_BYTES_MAX, PipelineSpec, STAGE_NAME_BYTES_MAX, StageFactory,
    StageRegistry, StageSpec,
};
pub use store::{
    Changes, FjallStore, MemoryStore, Pair, STAGE_META_KEYSPACE, StageMeta, StateStore, projection_digest,
};
pub use txn::StateTxn;
