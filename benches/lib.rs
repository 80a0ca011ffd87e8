//! The benchmark harness behind `mnemo bench`: seeded workloads run on Mnemo and on a SQLite baseline
//! that stores events the way the reference runtime does, side by side in one run, with a JSON report
//! and SVG charts. Criterion micro-benchmarks live in `benches/`.
//!
//! It is not:
//! - part of the library hosts embed: only the CLI and the benches use it;
//! - a pass/fail gate: targets are reported, never asserted in tests.

mod assembly_workload;
pub mod baseline;
pub mod context_quality;
pub mod devset;
pub mod harness;
pub mod import_memory;
pub mod key_check;
pub mod memory_workload;
pub mod nats_workload;
pub mod probe;
pub mod report;
pub mod scale_workload;
pub mod search_eval;
pub mod search_workload;
pub mod workload;
