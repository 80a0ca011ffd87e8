//! `mnemo recall` as a user reads it: a block that is empty, or that leaves items out, says so,
//! on a real Claude Code session (`tests/fixtures/real/`, read in place) and on one in the
//! exact shape Claude Code writes.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use serde_json::Value;

use support::{mnemo, repo_root, stdout};

#[test]
fn recall_of_a_session_whose_scope_holds_no_item_says_so() {
    // Before: nothing at all on stdout (exit 1), as if the command had not run.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let file = repo_root().join(
        "tests/fixtures/real/claude-code/small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
    );
    assert!(mnemo(&store, &["import", file.to_str().unwrap()]).status.success());
    let session = "4c2ddfdc-b619-4525-8d03-1950fb1b0257";
    assert!(mnemo(&store, &["memory", "extract", session]).status.success());
    let recalled = mnemo(&store, &["recall", session]);
    assert_eq!(recalled.status.code(), Some(1));
    assert_eq!(
        stdout(&recalled),
        "no memory item recalled for this session; no active item is global or of workspace /tmp/private \
         (`mnemo memory extract SESSION` finds them)\n"
    );
    let pulled = mnemo(&store, &["recall", session, "--query", "hello.py"]);
    assert_eq!(pulled.status.code(), Some(1));
    assert_eq!(
        stdout(&pulled),
        "no memory item matches \"hello.py\"; no active item is global or of workspace /tmp/private \
         (`mnemo memory extract SESSION` finds them)\n"
    );
}

#[test]
fn a_recall_block_that_leaves_items_out_says_how_many() {
    // Five items are in the session's scope; a block of 80 tokens holds one, and the line saying
    // what it left out. Before: the one and
    // nothing else, as if it were all there is.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let pipeline = dir.path().join("pipeline.toml");
    let default = std::fs::read_to_string(repo_root().join("pipelines/default.toml")).unwrap();
    assert!(default.contains("recall_budget_tokens = 512"));
    std::fs::write(&pipeline, default.replace("recall_budget_tokens = 512", "recall_budget_tokens = 80"))
        .unwrap();
    let pipeline = pipeline.to_str().unwrap();
    let file = repo_root().join("crates/mnemo/tests/fixtures/memory/claude-code-multiline-requests.jsonl");
    let session = "c1b2c3d4-1111-4222-8333-944455556666";
    assert!(mnemo(&store, &["--pipeline", pipeline, "import", file.to_str().unwrap()]).status.success());
    assert!(mnemo(&store, &["--pipeline", pipeline, "memory", "extract", session]).status.success());

    let block: Value =
        serde_json::from_slice(&mnemo(&store, &["--pipeline", pipeline, "--json", "recall", session]).stdout)
            .unwrap();
    let given = block["items"].as_array().unwrap().len();
    assert_eq!(given, 1, "{block}");
    // The block itself, which is what the model reads, says what it left out.
    assert_eq!(block["left_out"], 4, "{block}");
    assert!(
        block["text"]
            .as_str()
            .unwrap()
            .ends_with("(4 more relevant item(s) left out to fit; a recall query finds them)\n"),
        "{block}"
    );
    assert!(block["tokens"].as_u64().unwrap() <= 80, "{block}");
    let text = stdout(&mnemo(&store, &["--pipeline", pipeline, "recall", session]));
    assert_eq!(
        text.lines().last().unwrap(),
        format!(
            "(4 more active item(s) of its scope left out: past the block's budget or unrelated to the \
             session's recent turns; `mnemo recall {session} --query WORDS` searches them)"
        )
    );
    assert!(text.starts_with(block["text"].as_str().unwrap()), "{text}");
}
