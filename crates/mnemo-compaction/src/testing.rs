//! Small builders for tests of this crate and of the crates above it. Not part of the product's
//! behaviour; hidden from the docs.

#![allow(clippy::expect_used, reason = "test builders take literal, valid ids")]

use mnemo_core::{
    Author, CheckpointId, CheckpointManifest, CheckpointPhase, CheckpointRecord, Content, Digest,
    FunctionCall, FunctionResponse, ProviderState, ProviderStateKind, Role, RuntimeEvent, SessionId,
    TextContent, TimestampMs,
};
use serde_json::Value;

use crate::checkpoint::{BodyInput, CheckpointInput, build_checkpoint};

/// A summary that passes every rule for a small span.
pub const GOOD_SUMMARY: &str = "## Goal\nFix the build of the workspace.\n\n## Progress\n### Done\n- Ran `cargo build` and read the error.\n\n## Next Steps\n1. Run the tests again.\n\n## Critical Context\n- src/lib.rs";

/// The first timestamp test events carry.
pub const T0: u64 = 1_767_225_600_000;

/// An id of any validated kind from a literal.
pub fn id<T: TryFrom<String>>(text: &str) -> T {
    T::try_from(text.to_owned()).ok().expect("a valid literal id")
}

/// Session `s1`.
pub fn sid() -> SessionId {
    id("s1")
}

fn base(event_id: &str, turn: &str, role: Role, author: Author) -> RuntimeEvent {
    let seq: u64 = event_id.bytes().filter(u8::is_ascii_digit).fold(0, |n, b| n * 10 + u64::from(b - b'0'));
    RuntimeEvent::new(id(event_id), id(turn), id(turn), sid(), id(turn), TimestampMs(T0 + seq), role, author)
}

/// A text event; `who` is `user`, `model` or `steer` (a steering user message).
pub fn text_event(event_id: &str, turn: &str, who: &str, text: &str) -> RuntimeEvent {
    let (role, author) = match who {
        "model" => (Role::Model, Author::Agent),
        _ => (Role::User, Author::User),
    };
    let mut event = base(event_id, turn, role, author);
    let mut content = TextContent::new(text);
    if who == "steer" {
        content.steering = Some(true);
    }
    event.content = Some(Content::Text(content));
    event
}

/// A tool call.
pub fn call(event_id: &str, turn: &str, call_id: &str, name: &str, args: Value) -> RuntimeEvent {
    let mut event = base(event_id, turn, Role::Model, Author::Agent);
    event.content = Some(Content::FunctionCall(FunctionCall::new(id(call_id), name, args)));
    event
}

/// A tool result.
pub fn result(event_id: &str, turn: &str, call_id: &str, name: &str, value: Value) -> RuntimeEvent {
    let mut event = base(event_id, turn, Role::Tool, Author::Tool);
    event.content = Some(Content::FunctionResponse(FunctionResponse::new(id(call_id), name, value)));
    event
}

/// A manifest for tests.
pub fn manifest() -> CheckpointManifest {
    CheckpointManifest {
        summarizer: "test".to_owned(),
        prompt_version: "1".to_owned(),
        input_digest: Digest::sha256(b"input"),
    }
}

/// Codex state bound to `codex` / `gpt-5`.
pub fn provider_state() -> ProviderState {
    ProviderState {
        kind: ProviderStateKind::OpenaiCodexRemoteV2,
        connection: "codex".to_owned(),
        model: "gpt-5".to_owned(),
        item: "item-1".to_owned(),
        encrypted_content: "blob".to_owned(),
    }
}

/// A pre-turn text checkpoint over `covered` of session `s1`.
pub fn build_text(
    covered: &[RuntimeEvent],
    summary: &str,
    previous: Option<&CheckpointRecord>,
) -> CheckpointRecord {
    let session = covered.first().map_or_else(sid, |e| e.session_id.clone());
    build_checkpoint(CheckpointInput {
        session: &session,
        covered,
        body: BodyInput::Text { summary: summary.to_owned(), legacy: false },
        previous: previous.map(|p| p.checkpoint.clone()),
        phase: CheckpointPhase::PreTurn,
        head_anchor: None,
        extraction_boundary: None,
        now: None,
        manifest: manifest(),
        faithfulness: None,
        chars_per_token: 4,
    })
    .expect("a valid test checkpoint")
}

/// A checkpoint id from a literal.
pub fn checkpoint_id(text: &str) -> CheckpointId {
    id(text)
}
