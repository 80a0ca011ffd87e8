//! Stages that this crate provides.

pub mod session_catalog;
