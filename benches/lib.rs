//! The benchmark harness behind `mnemo bench`: seeded workloads run on Mnemo and on a SQLite baseline
//! that stores events the way the reference runtime does, side by side in one run, with a JSON report
//! and SVG charts. Criterion micro-benchmarks live in `benches/`.
//!
//! It is not:
//! - part of the library hosts embed: only the CLI and the benches use it;
//! - in the shipped `mnemo` binary, except for the search and memory evaluations: the workloads, the baseline and
//!   the charts are the feature `workloads`, which the CLI enables only in its `bench` build;
//! - a pass/fail gate for speed: timing targets are reported, never asserted in tests (the
//!   memory-quality evaluation's held-out recall and precision, which no machine changes, are).

pub mod devset;
pub mod fact_eval;
pub mod memory_eval;
pub mod probe;
pub mod search_eval;
pub mod workload;

// The workloads of `mnemo bench` and what they run beside (feature `workloads`, on by default): the
// shipped `mnemo` binary builds without them, so that it links neither SQLite nor plotters.
#[cfg(feature = "workloads")]
mod assembly_workload;
#[cfg(feature = "workloads")]
pub mod baseline;
#[cfg(feature = "workloads")]
pub mod context_quality;
#[cfg(feature = "workloads")]
pub mod harness;
#[cfg(feature = "workloads")]
pub mod import_memory;
#[cfg(feature = "workloads")]
pub mod key_check;
#[cfg(feature = "workloads")]
pub mod memory_workload;
#[cfg(feature = "workloads")]
pub mod nats_workload;
#[cfg(feature = "workloads")]
pub mod report;
#[cfg(feature = "workloads")]
pub mod scale_workload;
#[cfg(feature = "workloads")]
pub mod search_workload;
