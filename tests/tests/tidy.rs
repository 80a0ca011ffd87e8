//! Tidy checks over the workspace's own files: the crate dependency direction of DESIGN.md, no
//! module cycle longer than three files inside a crate, and the opening docs every library crate
//! must have.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace crates each crate may depend on (directly listed, plus theirs, transitively).
const DIRECT: &[(&str, &[&str])] = &[
    ("mnemo-core", &[]),
    ("mnemo-transcript", &["mnemo-core"]),
    ("mnemo-log", &["mnemo-core"]),
    ("mnemo-log-nats", &["mnemo-log"]),
    ("mnemo-pipeline", &["mnemo-log"]),
    ("mnemo-history", &["mnemo-pipeline"]),
    ("mnemo-compaction", &["mnemo-pipeline"]),
    ("mnemo-memory", &["mnemo-history"]),
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

/// The longest module cycle a crate may have, in files.
const MODULE_CYCLE_FILES_MAX: usize = 3;

#[test]
fn the_module_cycle_finder_finds_a_cycle_and_only_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write("lib.rs", "mod a; mod b; mod c; mod d;\npub use a::A;\n");
    write("a.rs", "use crate::b::B;\npub struct A;\n");
    write("b.rs", "use crate::{c::C, d::{self, e::E}};\npub struct B;\n");
    write("c.rs", "pub struct C; fn f() -> crate::A { crate::A }\n");
    write("d/mod.rs", "pub mod e;\nuse self::e::E;\n");
    write("d/e.rs", "use super::super::c;\npub struct E;\n");
    let cycles = module_cycles(&src);
    // a -> b -> c -> (crate::A is a's) a; b -> d, d -> e, e -> c: all five files in one cycle.
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0], vec!["a.rs", "b.rs", "c.rs", "d/e.rs", "d/mod.rs"]);
    let edges = cycle_edges(&dependencies(&src), &cycles[0]);
    assert!(edges.contains(&"  a.rs -> b.rs (crate::b::B)".to_owned()), "{edges:?}");
    assert!(edges.contains(&"  c.rs -> a.rs (crate::A)".to_owned()), "{edges:?}");
    write("c.rs", "pub struct C;\n");
    assert!(module_cycles(&src).is_empty(), "{:?}", module_cycles(&src));
}

#[test]
fn no_crate_has_a_module_cycle_longer_than_three_files() {
    let mut problems = Vec::new();
    for (name, dir, _) in member_manifests() {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let dependencies = dependencies(&src);
        for cycle in cycles(&dependencies) {
            if cycle.len() > MODULE_CYCLE_FILES_MAX {
                problems.push(format!("{name}: {} files: {}", cycle.len(), cycle.join(", ")));
                problems.extend(cycle_edges(&dependencies, &cycle));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "module cycles longer than {MODULE_CYCLE_FILES_MAX} files:\n{}",
        problems.join("\n")
    );
}

/// A module: its path from the crate root and its file (relative to `src`).
type ModulePath = Vec<String>;

/// What each file under `src` depends on: for each file (relative to `src`), the files it depends
/// on, each with the paths that name it.
///
/// File A depends on file B when A names B's module, or an item B defines or re-exports, through a
/// `crate::`, `super::` or `self::` path, in a `use` or inline. A `mod b;` declaration alone is
/// not a dependency: a parent that contains a child does not use it.
type Dependencies = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn dependencies(src: &Path) -> Dependencies {
    let files = source_files(src);
    let modules: BTreeMap<ModulePath, String> =
        files.iter().map(|file| (module_path(file), file.clone())).collect();
    let texts: BTreeMap<String, String> = files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            (file.clone(), strip_test_modules(&strip_comments(&text)))
        })
        .collect();
    let mut dependencies = Dependencies::new();
    for file in &files {
        let targets = dependencies.entry(file.clone()).or_default();
        for path in referenced_paths(&texts[file]) {
            let Some(absolute) = absolute(&module_path(file), &path) else { continue };
            if let Some(target) = resolve(&absolute, &modules, &texts, 0)
                && target != *file
            {
                targets.entry(target).or_default().insert(path.join("::"));
            }
        }
    }
    dependencies
}

/// The cycles (strongly connected components of two files or more) among the files under `src`,
/// each as its files' paths relative to `src`, sorted.
fn module_cycles(src: &Path) -> Vec<Vec<String>> {
    cycles(&dependencies(src))
}

fn cycles(dependencies: &Dependencies) -> Vec<Vec<String>> {
    strongly_connected(dependencies).into_iter().filter(|component| component.len() > 1).collect()
}

/// The dependencies among `cycle`'s files, as `a.rs -> b.rs (path)` lines: where a cycle can be cut.
fn cycle_edges(dependencies: &Dependencies, cycle: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    for file in cycle {
        for (target, paths) in &dependencies[file] {
            if cycle.contains(target) {
                lines.extend(paths.iter().map(|path| format!("  {file} -> {target} ({path})")));
            }
        }
    }
    lines
}

fn source_files(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path.strip_prefix(src).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    files
}

/// `lib.rs` is the root; `a/mod.rs` and `a.rs` are `a`; `a/b.rs` is `a::b`.
fn module_path(file: &str) -> ModulePath {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|last| last == "mod" || last == "lib" || last == "main") {
        parts.pop();
    }
    parts
}

/// The text without comments (so doc links and prose name nothing) and without string literals.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '"' && !escaped {
                        break;
                    }
                    escaped = c == '\\' && !escaped;
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

/// The text without its `#[cfg(test)]` inline modules: a unit test's `use super::*` is the file
/// testing itself, not a dependency.
fn strip_test_modules(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_module = trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ");
        match (is_module, trimmed.find(['{', ';'])) {
            (true, Some(open)) if trimmed.as_bytes()[open] == b'{' => {
                let mut depth = 0usize;
                let mut end = trimmed.len();
                for (index, c) in trimmed.char_indices().skip(open) {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = index + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &trimmed[end..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// Every `crate::`, `super::` and `self::` path the text names, `use` trees expanded.
fn referenced_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < text.len() {
        let rest = &text[index..];
        let starts_word =
            index == 0 || !(bytes[index - 1].is_ascii_alphanumeric() || bytes[index - 1] == b'_');
        if starts_word && rest.starts_with("use ") {
            let end = rest.find(';').unwrap_or(rest.len());
            expand_use_tree(&rest[4..end], &mut Vec::new(), &mut paths);
            index += end.max(1);
            continue;
        }
        if starts_word
            && let Some(root) = ["crate::", "super::", "self::"].iter().find(|root| rest.starts_with(**root))
        {
            let len =
                rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            let path: Vec<String> =
                rest[..len].split("::").filter(|part| !part.is_empty()).map(str::to_owned).collect();
            paths.push(path);
            index += len.max(root.len());
            continue;
        }
        index += rest.chars().next().map_or(1, char::len_utf8);
    }
    paths
}

/// Expands `a::{b, c::{d as e, self}}` into its paths, each prefixed by `prefix`.
fn expand_use_tree(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let (head, group) = match tree.find('{') {
        Some(open) => (&tree[..open], Some(&tree[open + 1..tree.rfind('}').unwrap_or(tree.len())])),
        None => (tree, None),
    };
    let depth = prefix.len();
    for part in head.split("::").map(str::trim).filter(|part| !part.is_empty()) {
        let name = part.split(" as ").next().unwrap_or(part).trim();
        // `a::{self}` is `a` itself; a leading `self::` is a path of its own; `*` names nothing.
        let names_something = match name {
            "*" => false,
            "self" => prefix.is_empty(),
            _ => true,
        };
        if names_something {
            prefix.push(name.to_owned());
        }
    }
    match group {
        Some(group) => {
            for item in split_top_level(group) {
                expand_use_tree(item, prefix, out);
            }
        }
        None => out.push(prefix.clone()),
    }
    prefix.truncate(depth);
}

fn split_top_level(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (index, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// The path from the crate root that `path`, named in the module `here`, means; `None` for a path
/// that does not start at `crate`, `self` or `super`.
fn absolute(here: &ModulePath, path: &[String]) -> Option<ModulePath> {
    let mut base = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        // `self` of `a/b.rs` is `a::b` and its `super` is `a`; `a.rs` is `a`, as `a/mod.rs` is.
        Some("self" | "super") => here.clone(),
        _ => return None,
    };
    let skip = usize::from(path.first().is_some_and(|first| first == "crate"));
    for part in &path[skip..] {
        match part.as_str() {
            "self" => {}
            "super" => {
                base.pop()?;
            }
            name => base.push(name.to_owned()),
        }
    }
    Some(base)
}

/// The file that defines what `path` names: the longest module prefix that is a file, followed
/// through that file's inline modules and its re-exports (`pub use`) when the next name is one of
/// them. `None` when the name is another crate's item re-exported: that is no dependency on the
/// file that re-exports it.
fn resolve(
    path: &ModulePath,
    modules: &BTreeMap<ModulePath, String>,
    texts: &BTreeMap<String, String>,
    depth: usize,
) -> Option<String> {
    let prefix_len = (0..=path.len()).rev().find(|len| modules.contains_key(&path[..*len]))?;
    let module = &path[..prefix_len];
    let file = &modules[module];
    let text = &texts[file];
    let mut at = prefix_len;
    while path.get(at).is_some_and(|name| defines_inline_module(text, name)) {
        at += 1;
    }
    let Some(name) = path.get(at) else { return Some(file.clone()) };
    match reexport(text, &module.to_vec(), name, modules) {
        Reexport::None => Some(file.clone()),
        Reexport::OtherCrate => None,
        Reexport::Internal(mut target) if depth < 8 => {
            target.extend(path[at + 1..].iter().cloned());
            resolve(&target, modules, texts, depth + 1)
        }
        Reexport::Internal(_) => Some(file.clone()),
    }
}

fn defines_inline_module(text: &str, name: &str) -> bool {
    text.match_indices(&format!("mod {name} {{")).next().is_some()
}

enum Reexport {
    /// The file defines the name itself (or it is not found).
    None,
    /// Another crate's item.
    OtherCrate,
    /// Another module of this crate's item, by its path from the crate root.
    Internal(ModulePath),
}

/// Where the module `module` (whose text is `text`) takes `name` from when a `use` of it imports
/// that name.
fn reexport(text: &str, module: &ModulePath, name: &str, modules: &BTreeMap<ModulePath, String>) -> Reexport {
    for path in use_paths(text) {
        if path.last().map(String::as_str) != Some(name) || path.len() < 2 {
            continue;
        }
        let target = match path[0].as_str() {
            "crate" | "self" | "super" => match absolute(module, &path) {
                Some(target) => target,
                None => continue,
            },
            first => {
                let child: ModulePath = module.iter().cloned().chain([first.to_owned()]).collect();
                if !modules.contains_key(&child) {
                    return Reexport::OtherCrate;
                }
                module.iter().cloned().chain(path.iter().cloned()).collect()
            }
        };
        return Reexport::Internal(target);
    }
    Reexport::None
}

/// The paths of the `use` declarations of a text (relative paths kept as written).
fn use_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
            expand_use_tree(&after[..end], &mut Vec::new(), &mut paths);
        }
        rest = &after[end..];
    }
    paths
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected(edges: &Dependencies) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a Dependencies,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        let edges = state.edges;
        for target in edges.get(node).into_iter().flat_map(BTreeMap::keys) {
            let target = target.as_str();
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            component.sort();
            state.components.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for file in edges.keys() {
        if !state.index.contains_key(file.as_str()) {
            visit(&mut state, file);
        }
    }
    state.components
}

/// The pages a newcomer reads first, and the most lines each may have.
const GUIDES: &[(&str, usize)] =
    &[("README.md", 250), ("docs/ARCHITECTURE.md", 250), ("docs/BENCHMARKS.md", 250)];

/// The most lines a decision record may have: a decision and its measurements, a page or two.
const DECISION_LINES_MAX: usize = 300;

/// The repository paths a page names in backticks (`crates/...`, `docs/...`, ...), with any
/// `:line` suffix dropped.
fn named_paths(text: &str) -> Vec<String> {
    const ROOTS: [&str; 9] =
        ["crates/", "docs/", "benches/", "tests/", "clients/", "pipelines/", "fuzz/", ".ci/", "examples/"];
    let mut paths = Vec::new();
    for (index, quoted) in text.split('`').enumerate() {
        let is_code = index % 2 == 1;
        let plain = quoted.chars().all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | ':'));
        if is_code && plain && ROOTS.iter().any(|root| quoted.starts_with(root)) {
            let path = quoted.split(':').next().unwrap_or(quoted).trim_end_matches('.');
            paths.push(path.to_owned());
        }
    }
    paths
}

#[test]
fn the_guides_are_short_and_every_path_they_name_exists() {
    let root = workspace_root();
    let mut problems = Vec::new();
    for (page, lines_max) in GUIDES {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let lines = text.lines().count();
        if lines > *lines_max {
            problems.push(format!("{page} has {lines} lines, more than {lines_max}"));
        }
        for path in named_paths(&text) {
            if !root.join(&path).exists() {
                problems.push(format!("{page} names {path}, which does not exist"));
            }
        }
    }
    for entry in std::fs::read_dir(root.join("docs/decisions")).unwrap() {
        let path = entry.unwrap().path();
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        if lines > DECISION_LINES_MAX {
            problems.push(format!("{} has {lines} lines, more than {DECISION_LINES_MAX}", path.display()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn named_paths_are_the_repository_paths_in_backticks() {
    let text = "See `crates/mnemo/src/lib.rs:12`, `docs/FORMAT.md`. Not `mnemo serve`, not `crates/*.rs`.";
    assert_eq!(named_paths(text), ["crates/mnemo/src/lib.rs", "docs/FORMAT.md"]);
}
