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
    ("mnemo-transcript", &["mnemo-core"]),
    ("mnemo", &["mnemo-compaction", "mnemo-memory", "mnemo-log-nats", "mnemo-transcript"]),
    ("mnemo-server", &["mnemo"]),
    ("mnemo-cli", &["mnemo", "mnemo-server"]),
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
    allowed.insert("mnemo-cli", BTreeSet::from(["mnemo", "mnemo-server", "mnemo-benches"]));
    // The store server reaches the store only through the facade, as every host does.
    allowed.insert("mnemo-server", BTreeSet::from(["mnemo"]));
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

/// A workspace member: its name, its directory and its parsed manifest.
fn member_manifests() -> Vec<(String, PathBuf, toml::Table)> {
    let root = workspace_root();
    let workspace: toml::Table = std::fs::read_to_string(root.join("Cargo.toml")).unwrap().parse().unwrap();
    let mut manifests = Vec::new();
    for member in workspace["workspace"]["members"].as_array().unwrap() {
        let dir = root.join(member.as_str().unwrap());
        let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap().parse().unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_owned();
        manifests.push((name, dir, manifest));
    }
    manifests
}

/// Every `.rs` file under `dir` (skipping build output), as (path relative to `dir`, text).
fn rust_sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut sources = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "target") {
                    todo.push(path);
                }
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                sources.push((path.strip_prefix(dir).unwrap().to_path_buf(), text));
            }
        }
    }
    sources
}

/// Whether `text` names the crate `ident` as a path (`ident::...`) or in a `use`/`extern crate`.
fn names_crate(text: &str, ident: &str) -> bool {
    let is_ident_char = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(ident).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = &text[at + ident.len()..];
        let starts_word = before.is_none_or(|c| !is_ident_char(c) && c != ':');
        starts_word
            && (after.starts_with("::")
                || text[..at].ends_with("use ") && after.starts_with([';', ' '])
                || text[..at].ends_with("extern crate "))
    })
}

/// Whether a source file (relative to its package) is a test, bench or example target: only
/// dev-dependencies are expected there.
fn is_dev_source(relative: &Path) -> bool {
    matches!(
        relative.components().next().and_then(|c| c.as_os_str().to_str()),
        Some("tests" | "benches" | "examples")
    )
}

/// Every dependency table of a manifest with whether it is dev-only: `[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]` and their `[target.'cfg(..)'.*]` forms.
fn dependency_tables(manifest: &toml::Table) -> Vec<(&toml::Table, bool)> {
    fn collect<'a>(table: &'a toml::Table, tables: &mut Vec<(&'a toml::Table, bool)>) {
        for (section, dev) in
            [("dependencies", false), ("build-dependencies", false), ("dev-dependencies", true)]
        {
            if let Some(deps) = table.get(section).and_then(|d| d.as_table()) {
                tables.push((deps, dev));
            }
        }
    }
    let mut tables = Vec::new();
    collect(manifest, &mut tables);
    for target in manifest.get("target").and_then(|t| t.as_table()).into_iter().flat_map(|t| t.values()) {
        if let Some(target) = target.as_table() {
            collect(target, &mut tables);
        }
    }
    tables
}

/// Every declared dependency of a package that its sources never name. The name in source is the
/// dependency's key (a `package = ...` rename keeps the key), dashes as underscores. A normal or
/// build dependency must be named outside `tests/`, `benches/` and `examples/` (else it belongs in
/// `[dev-dependencies]`); a dev-dependency may be named anywhere in the package, or only add features
/// to a normal dependency of the same name.
fn unused_dependencies(name: &str, manifest: &toml::Table, sources: &[(PathBuf, String)]) -> Vec<String> {
    let named = |ident: &str, dev: bool| {
        sources.iter().any(|(path, text)| (dev || !is_dev_source(path)) && names_crate(text, ident))
    };
    let tables = dependency_tables(manifest);
    let normal: BTreeSet<&str> =
        tables.iter().filter(|(_, dev)| !dev).flat_map(|(deps, _)| deps.keys()).map(String::as_str).collect();
    let mut unused = BTreeSet::new();
    for (deps, dev) in &tables {
        for key in deps.keys() {
            let ident = key.replace('-', "_");
            let used = if *dev {
                normal.contains(key.as_str()) || named(&ident, true)
            } else {
                named(&ident, false)
            };
            if !used {
                let section = if *dev { "dev-dependencies" } else { "dependencies" };
                unused
                    .insert(format!("{name} declares {key} ({section}) but its sources never name {ident}"));
            }
        }
    }
    unused.into_iter().collect()
}

#[test]
fn every_declared_dependency_is_used() {
    let mut unused = Vec::new();
    for (name, dir, manifest) in member_manifests() {
        unused.extend(unused_dependencies(&name, &manifest, &rust_sources(&dir)));
    }
    assert!(
        unused.is_empty(),
        "unused dependencies (remove them, or move them to dev-dependencies):\n{}",
        unused.join("\n")
    );
}

#[test]
fn the_unused_dependency_check_catches_an_unused_or_misplaced_dependency() {
    let manifest: toml::Table = r#"
        [package]
        name = "example"
        [dependencies]
        serde-json = "1"
        hex = "0.4"
        used-in-tests-only = "1"
        renamed = { package = "other-name", version = "1" }
        [dev-dependencies]
        tempfile = "3"
        proptest = "1"
        hex = "0.4"
        [target.'cfg(unix)'.dependencies]
        rustix = "1"
    "#
    .parse()
    .unwrap();
    let sources = vec![
        (
            PathBuf::from("src/lib.rs"),
            "use serde_json::Value;\n// hex digits, a hexagon: no hex path\nfn f() { renamed::go() }\n"
                .to_owned(),
        ),
        (
            PathBuf::from("tests/t.rs"),
            "use used_in_tests_only::X;\nfn t() { tempfile::tempdir(); }\n".to_owned(),
        ),
    ];
    assert_eq!(
        unused_dependencies("example", &manifest, &sources),
        vec![
            "example declares hex (dependencies) but its sources never name hex",
            "example declares proptest (dev-dependencies) but its sources never name proptest",
            "example declares rustix (dependencies) but its sources never name rustix",
            "example declares used-in-tests-only (dependencies) but its sources never name used_in_tests_only",
        ]
    );
}

#[test]
fn every_workspace_dependency_is_inherited_by_a_member() {
    let root = workspace_root();
    let workspace: toml::Table = std::fs::read_to_string(root.join("Cargo.toml")).unwrap().parse().unwrap();
    let members = member_manifests();
    let inherited: BTreeSet<&str> = members
        .iter()
        .flat_map(|(_, _, manifest)| dependency_tables(manifest))
        .flat_map(|(deps, _)| deps.keys())
        .map(String::as_str)
        .collect();
    let declared = workspace["workspace"]["dependencies"].as_table().unwrap();
    let orphans: Vec<&str> =
        declared.keys().map(String::as_str).filter(|key| !inherited.contains(key)).collect();
    assert!(orphans.is_empty(), "[workspace.dependencies] no member uses: {orphans:?}");
}
