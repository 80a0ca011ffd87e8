//! Capturing one session file that its agent may still be writing (`mnemo_server::capture`, which
//! the store server's `capture` method uses too).

pub(crate) use mnemo_server::capture::{Captured, capture_file};
