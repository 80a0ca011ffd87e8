//! The codex importer on arbitrary bytes: a transcript or an error naming a line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mnemo::{ImportFormat, parse_import};

fuzz_target!(|bytes: &[u8]| {
    if let Err(error) = parse_import(bytes, "fuzz", ImportFormat::Codex) {
        assert!(error.line >= 1 && !error.reason.is_empty());
    }
});
