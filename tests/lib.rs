//! Workspace-level acceptance tests: replay properties, process crashes and tidy checks. The tests
//! live in `tests/`; this library holds what they share.
//!
//! It is not:
//! - part of the product: nothing here ships;
//! - a place for unit tests, which stay beside the code they test.

pub mod children;
pub mod nats_cluster;
pub mod sim;
