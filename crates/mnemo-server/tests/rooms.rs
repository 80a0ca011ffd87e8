//! The crate's rooms keep to their edges: the core (the JSON-RPC server) uses none of the rooms
//! beside it but `capture`, and each room uses only the parts of the crate its doc names (the wire,
//! the methods' types and the Rust client). Read from the sources, as `use crate::...` paths, so a
//! new edge fails here until the room's doc and this table say it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly on the first unexpected error"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The core's modules, and the rooms of theirs they may use.
const CORE: &[&str] =
    &["command", "dispatch", "extraction", "limits", "methods", "protocol", "seams", "server", "socket"];
const CORE_MAY_USE_ROOMS: &[&str] = &["capture"];

/// Each room and the modules of this crate it may use.
const ROOMS: &[(&str, &[&str])] = &[
    ("capture", &[]),
    ("client", &["limits", "methods", "protocol", "socket"]),
    ("load", &["client", "methods", "protocol"]),
    ("mcp", &["client", "methods", "protocol"]),
    ("ui", &["client", "methods", "protocol"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module's files: `name.rs` and everything under `name/`.
fn files(module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = src().join(format!("{module}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![src().join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    assert!(!out.is_empty(), "no source for module {module}");
    out
}

/// The top-level modules of this crate a source text names through `crate::`.
fn used(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap().split(',').collect(),
            None => vec![rest],
        };
        for name in names {
            let name: String =
                name.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && name != "self" {
                out.insert(name);
            }
        }
    }
    out
}

fn uses_of(module: &str) -> BTreeSet<String> {
    files(module).iter().flat_map(|file| used(&std::fs::read_to_string(file).unwrap())).collect()
}

#[test]
fn every_module_of_the_crate_is_the_core_or_a_room() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod ").or_else(|| line.trim().strip_prefix("mod ")))
        .map(|rest| rest.trim_end_matches(';'))
        .collect();
    let known: BTreeSet<&str> = CORE.iter().copied().chain(ROOMS.iter().map(|(room, _)| *room)).collect();
    assert_eq!(declared, known, "lib.rs's modules and this test's table differ");
}

#[test]
fn the_core_uses_no_room_but_capture() {
    let rooms: BTreeSet<&str> = ROOMS.iter().map(|(room, _)| *room).collect();
    for module in CORE {
        for name in uses_of(module) {
            let allowed = !rooms.contains(name.as_str()) || CORE_MAY_USE_ROOMS.contains(&name.as_str());
            assert!(allowed, "the core's {module} uses the room {name}");
        }
    }
}

#[test]
fn each_room_uses_only_what_its_doc_names() {
    for (room, allowed) in ROOMS {
        for name in uses_of(room) {
            assert!(
                name == *room || allowed.contains(&name.as_str()),
                "{room} uses crate::{name}, which is not among its edges {allowed:?}"
            );
        }
    }
}

#[test]
fn each_room_says_what_it_uses_and_what_it_is_not() {
    for (room, _) in ROOMS {
        let file = [src().join(format!("{room}.rs")), src().join(room).join("mod.rs")]
            .into_iter()
            .find(|path| path.is_file())
            .unwrap();
        let doc: String = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .take_while(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(doc.contains("It uses:"), "{} does not say what it uses", file.display());
        assert!(doc.contains("It is not:"), "{} does not say what it is not", file.display());
    }
}

#[test]
fn a_use_of_the_crate_is_read_in_each_form() {
    let text =
        "use crate::client::{Client};\nuse crate::{methods::Log, protocol};\nlet x = crate::limits::A;";
    let names: Vec<String> = used(text).into_iter().collect();
    assert_eq!(names, ["client", "limits", "methods", "protocol"]);
}
