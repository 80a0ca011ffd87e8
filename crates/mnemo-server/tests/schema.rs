//! The checked-in schema document (`crates/mnemo-server/schema/protocol.json`) is the one generated
//! from the protocol's Rust types: clients in other languages are built from that file, so a change
//! to a type that is not regenerated into it fails here.

use std::path::Path;

use mnemo_server::methods::{SCHEMA_PATH, SCHEMA_REGENERATE_COMMAND, schema_document};

fn checked_in() -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = repo.join(SCHEMA_PATH);
    std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!("cannot read {}: {error}; regenerate it with: {SCHEMA_REGENERATE_COMMAND}", path.display())
    })
}

/// The first line where two texts differ, for a failure message a person can act on.
fn first_difference(checked_in: &str, generated: &str) -> String {
    let mut checked = checked_in.lines();
    let mut fresh = generated.lines();
    for number in 1.. {
        match (checked.next(), fresh.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => return "the texts differ only in line endings".to_owned(),
            (a, b) => {
                return format!(
                    "line {number}: checked in {:?}, generated {:?}",
                    a.unwrap_or("<end of file>"),
                    b.unwrap_or("<end of file>")
                );
            }
        }
    }
    unreachable!("the loop returns")
}

#[test]
fn checked_in_schema_matches_the_protocol_types() {
    let checked_in = checked_in();
    let generated = schema_document();
    assert!(
        checked_in == generated,
        "{SCHEMA_PATH} is not the schema generated from the protocol types ({}); regenerate it with: \
         {SCHEMA_REGENERATE_COMMAND}",
        first_difference(&checked_in, &generated)
    );
}

#[test]
fn a_stale_schema_is_reported_with_the_line_that_differs() {
    let generated = schema_document();
    let stale = generated.replacen("\"protocol_version\"", "\"protocol_versions\"", 1);
    assert_ne!(stale, generated);
    let difference = first_difference(&stale, &generated);
    assert!(difference.starts_with("line "), "{difference}");
    assert!(difference.contains("protocol_versions"), "{difference}");
    let shorter: String = generated.lines().take(10).map(|line| format!("{line}\n")).collect();
    let truncated = first_difference(&shorter, &generated);
    assert!(truncated.starts_with("line 11: checked in \"<end of file>\""), "{truncated}");
}

#[test]
fn the_schema_document_is_a_draft_2020_12_schema_per_method_and_frame() {
    let document: serde_json::Value = serde_json::from_str(&schema_document()).unwrap();
    let methods = document["methods"].as_object().unwrap();
    assert!(!methods.is_empty());
    for (name, method) in methods {
        for part in ["params", "result"] {
            let schema = &method[part]["$schema"];
            assert_eq!(
                schema, "https://json-schema.org/draft/2020-12/schema",
                "{name} {part} is not a standalone JSON Schema"
            );
        }
        assert!(method["repeatable"].is_boolean(), "{name}");
    }
    for frame in ["request", "response", "error"] {
        assert_eq!(document[frame]["$schema"], "https://json-schema.org/draft/2020-12/schema", "{frame}");
    }
}
