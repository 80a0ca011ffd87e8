//! Workspace-level acceptance tests live in this crate's `tests/` folder.
