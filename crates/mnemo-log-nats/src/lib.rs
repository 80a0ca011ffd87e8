//! The replicated log on NATS JetStream: the same `LogBackend` as the embedded fjall log, shared by
//! several hosts, each of which derives its projections locally from it.
//!
//! It is not:
//! - a projection store: projections stay in the host's local fjall store (`mnemo` wires that);
//! - a server: it is a client of a JetStream cluster that something else runs;
//! - a second envelope format: messages carry the envelopes of `mnemo-log` unchanged, and every host
//!   checks their hash chain as it folds them.

mod append;
mod batch;
mod follower;
mod index;
pub mod limits;
mod nats_log;
mod options;
mod subject;

pub use batch::BATCH_FORMAT_VERSION;
pub use nats_log::NatsLog;
pub use options::{DEFAULT_STREAM_NAME, NatsOptions, OptionsError};
pub use subject::subject_for;
