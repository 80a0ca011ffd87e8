//! A seeded generator for simulation tests: a small deterministic RNG and realistic records.

use mnemo_core::{
    Author, Content, EventId, FunctionCall, FunctionResponse, InvocationId, Record, Role, RunId,
    RuntimeEvent, SessionId, TextContent, ThinkingContent, TimestampMs, ToolCallId, TurnId,
};

/// The workload generator's seeded RNG, shared with the benchmark harness.
pub use mnemo_benches::workload::Rng;

/// The seed for a simulation: `MNEMO_SEED` if set (to replay a failure), else one from the clock.
pub fn seed_from_env() -> u64 {
    match std::env::var("MNEMO_SEED") {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("MNEMO_SEED={text} is not a u64")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

const WORDS: &[&str] = &[
    "refactor",
    "the",
    "parser",
    "cargo",
    "test",
    "fails",
    "on",
    "src/lib.rs:42",
    "token",
    "expiry",
    "please",
    "deploy",
    "staging",
    "timeout",
    "retry",
    "prefer",
    "tabs",
    "über",
    "naïve",
    "日本語",
    "🙂",
];

fn sentence(rng: &mut Rng, words: u64) -> String {
    (0..1 + rng.below(words))
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

fn id<T>(make: impl Fn(String) -> Result<T, mnemo_core::IdError>, text: String) -> T {
    make(text).unwrap_or_else(|e| panic!("generated id is invalid: {e}"))
}

/// `count` RuntimeEvent records of one turn of `session`: a mix of user text, thinking, model text
/// and tool call/result pairs. `turn` makes ids unique across calls.
pub fn event_records(rng: &mut Rng, session: &str, turn: u64, count: usize) -> Vec<Record> {
    let session_id = id(SessionId::new, session.to_owned());
    let turn_id = id(TurnId::new, format!("t{turn}"));
    let run = id(RunId::new, format!("run-{turn}"));
    let mut records = Vec::with_capacity(count);
    let mut n = 0;
    while records.len() < count {
        let event = |role: Role, author: Author, content: Content, n: usize| RuntimeEvent {
            id: id(EventId::new, format!("{session}:{turn}:{n}")),
            invocation_id: id(InvocationId::new, run.as_str().to_owned()),
            run_id: run.clone(),
            session_id: session_id.clone(),
            turn_id: turn_id.clone(),
            ts: TimestampMs(1_767_225_600_000 + turn * 1000 + n as u64),
            partial: false,
            branch: None,
            role,
            author,
            origin: None,
            model_visibility: None,
            status: None,
            content: Some(content),
            actions: None,
            refs: None,
        };
        match rng.below(4) {
            0 => records.push(event(
                Role::User,
                Author::User,
                Content::Text(TextContent::new(sentence(rng, 30))),
                n,
            )),
            1 => records.push(event(
                Role::Model,
                Author::Agent,
                Content::Thinking(ThinkingContent::new(sentence(rng, 20))),
                n,
            )),
            2 => records.push(event(
                Role::Model,
                Author::Agent,
                Content::Text(TextContent::new(sentence(rng, 60))),
                n,
            )),
            _ => {
                let call = id(ToolCallId::new, format!("call-{turn}-{n}"));
                let args = serde_json::json!({ "cmd": sentence(rng, 5) });
                records.push(event(
                    Role::Model,
                    Author::Agent,
                    Content::FunctionCall(FunctionCall::new(call.clone(), "shell", args)),
                    n,
                ));
                n += 1;
                let result = serde_json::Value::String(sentence(rng, 40));
                records.push(event(
                    Role::Tool,
                    Author::Tool,
                    Content::FunctionResponse(FunctionResponse::new(call, "shell", result)),
                    n,
                ));
            }
        }
        n += 1;
    }
    records.truncate(count);
    records.into_iter().map(Record::RuntimeEvent).collect()
}
