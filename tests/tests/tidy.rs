//! Tidy checks over the workspace's own files: the crate dependency direction of DESIGN.md, and the
//! opening docs every library crate must have.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace crates each crate may depend on (directly listed, plus theirs, transitively).
const DIRECT: &[(&str, &[&str])] = &[
    ("mnemo-core", &[]),
    ("mnemo-log", &["mnemo-core"]),
    ("mnemo-log-nats", &["mnemo-log"]),
    ("mnemo-pipeline", &["mnemo-log"]),
    ("mnemo-history", &["mnemo-pipeline"]),
    ("mnemo-compaction", &["mnemo-pipeline"]),
    ("mnemo-memory", &["mnemo-history"]),
    ("mnemo", &["mnemo-compaction", "mnemo-memory", "mnemo-log-nats"]),
    ("mnemo-cli", &["mnemo"]),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let direct: BTreeMap<_, _> = DIRECT.iter().copied().collect();
    let mut allowed = BTreeMap::new();
    for (name, _) in DIRECT {
        let mut reach = BTreeSet::new();
        let mut todo: Vec<&str> = direct[name].to_vec();
        while let Some(next) = todo.pop() {
            if reach.insert(next) {
                todo.extend(direct[next].iter().copied());
            }
        }
        allowed.insert(*name, reach);
    }
    // The CLI is a thin client of the facade: it may use nothing else of the workspace, except the
    // benchmark harness behind `mnemo bench`, which itself uses only the facade and core types.
    allowed.insert("mnemo-cli", BTreeSet::from(["mnemo", "mnemo-benches"]));
    allowed
}

fn workspace_deps(manifest: &toml::Table, section: &str, crates: &BTreeSet<String>) -> Vec<String> {
    manifest
        .get(section)
        .and_then(|d| d.as_table())
        .map_or_else(Vec::new, |deps| deps.keys().filter(|name| crates.contains(*name)).cloned().collect())
}

fn crate_manifests() -> Vec<(String, PathBuf, toml::Table)> {
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let path = dir.join("Cargo.toml");
        let manifest: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_owned();
        manifests.push((name, dir, manifest));
    }
    manifests.sort_by(|a, b| a.0.cmp(&b.0));
    manifests
}

/// Every violation of the dependency direction in a set of manifests.
fn direction_violations(manifests: &[(String, PathBuf, toml::Table)]) -> Vec<String> {
    let allowed = allowed();
    let mut crates: BTreeSet<String> = allowed.keys().map(|k| k.to_string()).collect();
    crates.insert("mnemo-benches".to_owned());
    let mut violations = Vec::new();
    for (name, _, manifest) in manifests {
        let Some(permitted) = allowed.get(name.as_str()) else {
            violations.push(format!("crate {name} is not in DESIGN.md's crate table"));
            continue;
        };
        for section in ["dependencies", "build-dependencies"] {
            for dep in workspace_deps(manifest, section, &crates) {
                if !permitted.contains(dep.as_str()) {
                    violations
                        .push(format!("{name} depends on {dep} ({section}), which DESIGN.md does not allow"));
                }
            }
        }
    }
    violations
}

#[test]
fn crate_dependencies_follow_the_design() {
    let violations = direction_violations(&crate_manifests());
    assert!(violations.is_empty(), "dependency direction broken:\n{}", violations.join("\n"));
}

#[test]
fn the_direction_check_catches_a_backwards_dependency() {
    let manifest: toml::Table =
        "[package]\nname = \"mnemo-log\"\n[dependencies]\nmnemo-pipeline = { path = \"x\" }\n"
            .parse()
            .unwrap();
    let violations = direction_violations(&[("mnemo-log".to_owned(), PathBuf::new(), manifest)]);
    assert_eq!(
        violations,
        vec!["mnemo-log depends on mnemo-pipeline (dependencies), which DESIGN.md does not allow"]
    );
    let manifest: toml::Table =
        "[package]\nname = \"mnemo-cli\"\n[dependencies]\nmnemo-log = \"1\"\n".parse().unwrap();
    assert_eq!(direction_violations(&[("mnemo-cli".to_owned(), PathBuf::new(), manifest)]).len(), 1);
}

#[test]
fn every_library_crate_opens_with_its_purpose_and_what_it_is_not() {
    for (name, dir, _) in crate_manifests() {
        let lib = dir.join("src/lib.rs");
        if !lib.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&lib).unwrap();
        assert!(text.starts_with("//! "), "{name}: lib.rs must open with a sentence of purpose");
        assert!(text.contains("//! It is not:"), "{name}: lib.rs must say what the crate is not");
    }
}
