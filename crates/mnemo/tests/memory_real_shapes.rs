//! Extraction on a session in the exact shape Claude Code writes when it runs beside an IDE: the
//! open file and the selected code come as text blocks of the user's own line
//! (`<ide_opened_file>…</ide_opened_file>`, `<ide_selection>…</ide_selection>`), before what the
//! user typed. Held to what a user would accept as their memory: what they said, whole, scoped
//! where it holds, each pointing at the block they typed.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};

use mnemo::memory::ListRequest;
use mnemo::transcript::ImportFormat;
use mnemo::{Config, Mnemo};

const SESSION: &str = "a1b2c3d4-1111-4222-8333-944455556666";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory/claude-code-ide-blocks.jsonl")
}

/// `kind/scope: content @ event` of every active item after importing and extracting the fixture.
fn extracted(dir: &Path) -> Vec<String> {
    let mnemo = Mnemo::open(dir, Config::default()).unwrap();
    let bytes = std::fs::read(fixture()).unwrap();
    mnemo.import(&bytes, "claude-code-ide-blocks.jsonl", ImportFormat::ClaudeCode).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let session = mnemo.history().sessions().unwrap().into_iter().next().unwrap().session;
    assert_eq!(session.as_str(), SESSION);
    rt.block_on(mnemo.memory().extract(&session, None)).unwrap();
    let mut items: Vec<String> = mnemo
        .memory()
        .list(&ListRequest::default())
        .unwrap()
        .iter()
        .map(|i| {
            let scope = i.fields.scope.as_text();
            let events: Vec<&str> = i.fields.sources.iter().map(|s| s.event.as_str()).collect();
            format!("{:?}/{scope}: {} @ {}", i.fields.kind, i.fields.content, events.join(","))
        })
        .collect();
    items.sort();
    items
}

#[test]
fn an_ide_selection_beside_the_request_is_no_instruction_and_a_dotted_name_stays_whole() {
    // Before: the selected code's comment "connect() must be called before init()" became
    // "The user's instruction: ts: // connect() must be called before init() export function
    // init() {} This may or may not be related to the current task.", "we deploy with fly.io"
    // became "The team deploys with fly." (cut at the dot) as a global preference, and "never run
    // migrations by hand in production" was lost inside it.
    let dir = tempfile::tempdir().unwrap();
    let items = extracted(dir.path());
    let first_request = "a1b2c3d4-0000-0000-0000-000000000001#1";
    let pnpm = "a1b2c3d4-0000-0000-0000-000000000007";
    let expected = [
        format!("Context/workspace:/home/dev/shop: The team deploys with fly.io. @ {first_request}"),
        format!("Preference/global: The user prefers pnpm over npm. @ {pnpm}"),
        format!(
            "Preference/workspace:/home/dev/shop: The user's instruction: never run migrations by hand in production. @ {first_request}"
        ),
    ];
    assert_eq!(items, expected, "extracted: {items:#?}");
}
