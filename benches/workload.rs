//! The seeded, deterministic workload generator: realistic coding-agent sessions (user requests,
//! thinking, replies, tool calls with their results) as RuntimeEvent records.

use mnemo::records::Record;
use mnemo::records::{
    Author, Content, EventId, FunctionCall, FunctionResponse, InvocationId, Role, RunId, RuntimeEvent,
    SessionId, TextContent, ThinkingContent, TimestampMs, ToolCallId, TurnId,
};

/// SplitMix64: tiny, fast, and the same sequence for the same seed everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const VOCABULARY: &[&str] = &[
    "the",
    "test",
    "fails",
    "on",
    "ci",
    "please",
    "refactor",
    "parser",
    "module",
    "token",
    "expiry",
    "retry",
    "timeout",
    "deploy",
    "staging",
    "config",
    "cargo",
    "nextest",
    "src/lib.rs",
    "src/auth/token.rs:88",
    "error",
    "E0609",
    "field",
    "struct",
    "trait",
    "async",
    "tokio",
    "runtime",
    "checkpoint",
    "summary",
    "budget",
    "window",
    "latency",
    "p99",
    "index",
    "query",
    "search",
    "memory",
    "prefer",
    "tabs",
    "spaces",
    "british",
    "spelling",
    "release",
    "notes",
    "migration",
    "schema",
    "postgres",
    "sqlite",
    "wal",
    "fsync",
    "durable",
    "append",
    "log",
];

/// A sentence of up to `words` words from a coding-session vocabulary.
pub fn sentence(rng: &mut Rng, words: u64) -> String {
    let count = 3 + rng.below(words.max(1));
    let mut out = String::with_capacity(count as usize * 7);
    for i in 0..count {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(VOCABULARY[rng.below(VOCABULARY.len() as u64) as usize]);
    }
    out
}

fn valid<T, E: std::fmt::Display>(value: Result<T, E>) -> T {
    // Generated ids are short ASCII and always valid; a failure here is a bug in the generator.
    value.unwrap_or_else(|e| panic!("generated value is invalid: {e}"))
}

/// The name of generated session `index`.
pub fn session_name(index: u64) -> String {
    format!("bench-{index:06}")
}

/// Generates the events of one session, turn by turn: each turn is a user request, then model
/// thinking, a tool call and its result, and a reply (about five events a turn).
#[derive(Debug)]
pub struct SessionEvents {
    rng: Rng,
    session: SessionId,
    turn: u64,
    step: u64,
    emitted: u64,
    total: u64,
}

impl SessionEvents {
    /// `total` events of session `index`, from `seed`.
    pub fn new(seed: u64, index: u64, total: u64) -> Self {
        SessionEvents {
            rng: Rng::new(seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407)),
            session: valid(SessionId::new(session_name(index))),
            turn: 0,
            step: 0,
            emitted: 0,
            total,
        }
    }

    fn event(&mut self, role: Role, author: Author, content: Content) -> RuntimeEvent {
        let turn = valid(TurnId::new(format!("t{}", self.turn)));
        let run = format!("run-{}", self.turn);
        RuntimeEvent {
            id: valid(EventId::new(format!("{}:{}", self.session, self.emitted))),
            invocation_id: valid(InvocationId::new(run.clone())),
            run_id: valid(RunId::new(run)),
            session_id: self.session.clone(),
            turn_id: turn,
            ts: TimestampMs(1_767_225_600_000 + self.emitted * 1500),
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
        }
    }
}

impl Iterator for SessionEvents {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.emitted >= self.total {
            return None;
        }
        let call = || valid(ToolCallId::new(format!("call-{}", self.turn)));
        let event = match self.step {
            0 => {
                let text = sentence(&mut self.rng, 40);
                self.event(Role::User, Author::User, Content::Text(TextContent::new(text)))
            }
            1 => {
                let text = sentence(&mut self.rng, 30);
                self.event(Role::Model, Author::Agent, Content::Thinking(ThinkingContent::new(text)))
            }
            2 => {
                let args = serde_json::json!({ "cmd": sentence(&mut self.rng, 6) });
                self.event(
                    Role::Model,
                    Author::Agent,
                    Content::FunctionCall(FunctionCall::new(call(), "shell", args)),
                )
            }
            3 => {
                let result = serde_json::Value::String(sentence(&mut self.rng, 80));
                let response = FunctionResponse::new(call(), "shell", result);
                self.event(Role::Tool, Author::Tool, Content::FunctionResponse(response))
            }
            _ => {
                let text = sentence(&mut self.rng, 60);
                self.event(Role::Model, Author::Agent, Content::Text(TextContent::new(text)))
            }
        };
        self.emitted += 1;
        self.step += 1;
        if self.step == 5 {
            self.step = 0;
            self.turn += 1;
        }
        Some(Record::RuntimeEvent(event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_generates_the_same_events() {
        let first: Vec<_> = SessionEvents::new(7, 3, 12).map(|r| r.encode().unwrap()).collect();
        let second: Vec<_> = SessionEvents::new(7, 3, 12).map(|r| r.encode().unwrap()).collect();
        assert_eq!(first.len(), 12);
        assert_eq!(first, second);
        let other: Vec<_> = SessionEvents::new(8, 3, 12).map(|r| r.encode().unwrap()).collect();
        assert_ne!(first, other);
    }
}
