//! Criterion benchmarks for Mnemo; see `benches/`.
