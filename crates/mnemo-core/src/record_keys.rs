//! The keys a record holds in the log's key index, and the rules an append of it must meet there.
//!
//! The log keeps an index of keys beside its envelopes, written in the same atomic batch, and
//! checks every rule of an append against it before anything is written (`mnemo-log`'s writer, and
//! the shared log's appender against its folded index). The log gives keys no meaning; this module
//! does: which keys a record claims and what each one means when an append is refused on it.
//!
//! Key layout: one tag byte, then the key's ids separated by `0x00` (ids never hold control
//! characters, so the separator cannot occur inside one). `docs/FORMAT.md` lists the tags.

use crate::event::{Content, RuntimeEvent};
use crate::key_rules::{JoinedRule, KeyRules};
use crate::record::Record;

/// Tag of an event's identity key: `e` + event id.
const EVENT_TAG: u8 = b'e';
/// Tag of an invocation's claim: `i` + session + invocation id, claimed with run and turn. The
/// reference store keys invocations store-wide; the ids Mnemo's importers derive (an invocation
/// per turn, named after it) are unique only within their session, so the claim is per session.
const INVOCATION_TAG: u8 = b'i';
/// Tag of a run's claim: `r` + session + run, claimed with invocation and turn.
const RUN_TAG: u8 = b'r';
/// Tag of a run's seal, written by its terminal event: `s` + session + run.
const SEAL_TAG: u8 = b's';
/// Tag of a tool call: `c` + session + invocation + call id.
const CALL_TAG: u8 = b'c';
/// Tag of a tool call's result: `t` + session + invocation + call id.
const RESULT_TAG: u8 = b't';

/// One rule an append puts on the log's key index. Rules are checked in order, record by record,
/// against the index as the records before them in the same append leave it; a refused rule
/// appends nothing of the whole append.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyRule {
    /// The record's identity. Absent: written, pointing at the record. Present and the record
    /// there has the same kind, schema and bytes: the record is a retry of that one, is not
    /// appended again and is answered with the original's position (its other rules are not
    /// checked). Present otherwise: an identity conflict.
    Identity(Vec<u8>),
    /// A claim of `key` with `value`. Absent: written with the value. Present with the same value:
    /// met. Present with another value: refused.
    Claim {
        /// The key claimed.
        key: Vec<u8>,
        /// What the record claims it for.
        value: Vec<u8>,
    },
    /// A key only one record may hold. Absent: written. Present: refused.
    Unique(Vec<u8>),
    /// A key an earlier record (or an earlier record of the same append) must hold. Absent: refused.
    Requires(Vec<u8>),
    /// A key no record may hold yet. Present: refused.
    Forbids(Vec<u8>),
}

impl KeyRule {
    /// The key the rule is about.
    pub fn key(&self) -> &[u8] {
        crate::RuleRef::from(self).key()
    }
}

/// What a key of the index stands for, to name it in an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyMeaning {
    /// An event's identity.
    Event {
        /// The event id.
        id: String,
    },
    /// An invocation's run and turn.
    Invocation {
        /// The session.
        session: String,
        /// The invocation id.
        invocation: String,
    },
    /// A run's invocation and turn.
    Run {
        /// The session.
        session: String,
        /// The run id.
        run: String,
    },
    /// A run's seal (its terminal event is stored).
    Seal {
        /// The session.
        session: String,
        /// The run id.
        run: String,
    },
    /// A tool call of an invocation.
    ToolCall {
        /// The session.
        session: String,
        /// The invocation id.
        invocation: String,
        /// The provider's call id.
        call: String,
    },
    /// The result of a tool call of an invocation.
    ToolResult {
        /// The session.
        session: String,
        /// The invocation id.
        invocation: String,
        /// The provider's call id.
        call: String,
    },
}

impl std::fmt::Display for KeyMeaning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyMeaning::Event { id } => write!(f, "event {id}"),
            KeyMeaning::Invocation { session, invocation } => {
                write!(f, "invocation {invocation} of session {session}")
            }
            KeyMeaning::Run { session, run } | KeyMeaning::Seal { session, run } => {
                write!(f, "run {run} of session {session}")
            }
            KeyMeaning::ToolCall { session, invocation, call }
            | KeyMeaning::ToolResult { session, invocation, call } => {
                write!(f, "tool call {call} of invocation {invocation} of session {session}")
            }
        }
    }
}

/// Why an append path refuses an append: a rule of the events it carries (spec §1.8), as a typed
/// reason. Nothing of a refused append is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AppendRefusal {
    /// The event id is stored already with another payload (an exact retry would be a no-op).
    /// React: give the new event a new id, or send the original event unchanged.
    #[error("event id {event} is already stored with another payload")]
    IdentityConflict {
        /// The event id.
        event: String,
    },
    /// The invocation is stored with another session, run or turn (spec §1.8 item 3: one invocation
    /// is one run of one turn). React: the host's invocation bookkeeping is wrong; use a new
    /// invocation id for a new run.
    #[error("invocation {invocation} of session {session} already belongs to another run or turn")]
    InvocationConflict {
        /// The session.
        session: String,
        /// The invocation id.
        invocation: String,
    },
    /// The run is stored with another invocation or turn (spec §1.8 item 3).
    #[error("run {run} of session {session} already belongs to another invocation or turn")]
    RunConflict {
        /// The session.
        session: String,
        /// The run id.
        run: String,
    },
    /// The run's terminal event is stored: the run is sealed and takes no new event (spec §1.6
    /// `RunSealedError`; an exact retry of a stored event is still answered). React: start a new run.
    #[error("run {run} of session {session} is sealed: its terminal event is stored")]
    RunSealed {
        /// The session.
        session: String,
        /// The run id.
        run: String,
    },
    /// A function call reuses a call id its invocation already used (spec §1.8 item 6).
    #[error("tool call {call} is already made in invocation {invocation}")]
    DuplicateToolCall {
        /// The invocation id.
        invocation: String,
        /// The call id.
        call: String,
    },
    /// A function response answers a call its invocation never made (spec §1.8 item 6).
    #[error("tool result for {call}, which invocation {invocation} never called")]
    ToolResultWithoutCall {
        /// The invocation id.
        invocation: String,
        /// The call id.
        call: String,
    },
    /// A function response answers a call that already has its response (spec §1.8 item 6).
    #[error("tool call {call} of invocation {invocation} already has its result")]
    DuplicateToolResult {
        /// The invocation id.
        invocation: String,
        /// The call id.
        call: String,
    },
    /// The event carries a fact only a dedicated writer may record (spec §1.8 item 1,
    /// [`RuntimeEvent::reserved_fact_reason`]); the generic append path refuses it.
    #[error("event {event}: {reason}")]
    ReservedFact {
        /// The event id.
        event: String,
        /// Which fact.
        reason: &'static str,
    },
    /// A rule on a key this build does not know was broken.
    #[error("key {key:?} refused the append")]
    Unknown {
        /// The key, as text.
        key: String,
    },
}

impl AppendRefusal {
    /// Whether the refusal is a conflict with what is stored (re-read and decide again), rather than
    /// input that can never be appended.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            AppendRefusal::IdentityConflict { .. }
                | AppendRefusal::InvocationConflict { .. }
                | AppendRefusal::RunConflict { .. }
                | AppendRefusal::RunSealed { .. }
                | AppendRefusal::DuplicateToolCall { .. }
                | AppendRefusal::DuplicateToolResult { .. }
        )
    }

    /// The typed reason for a broken rule.
    pub fn of_rule(rule: &KeyRule) -> AppendRefusal {
        use KeyMeaning as M;
        match (rule, key_meaning(rule.key())) {
            (KeyRule::Identity(_), Some(M::Event { id })) => AppendRefusal::IdentityConflict { event: id },
            (KeyRule::Claim { .. }, Some(M::Invocation { session, invocation })) => {
                AppendRefusal::InvocationConflict { session, invocation }
            }
            (KeyRule::Claim { .. }, Some(M::Run { session, run })) => {
                AppendRefusal::RunConflict { session, run }
            }
            (KeyRule::Forbids(_) | KeyRule::Unique(_), Some(M::Seal { session, run })) => {
                AppendRefusal::RunSealed { session, run }
            }
            (KeyRule::Unique(_), Some(M::ToolCall { invocation, call, .. })) => {
                AppendRefusal::DuplicateToolCall { invocation, call }
            }
            (KeyRule::Requires(_), Some(M::ToolCall { invocation, call, .. })) => {
                AppendRefusal::ToolResultWithoutCall { invocation, call }
            }
            (KeyRule::Unique(_), Some(M::ToolResult { invocation, call, .. })) => {
                AppendRefusal::DuplicateToolResult { invocation, call }
            }
            _ => AppendRefusal::Unknown { key: String::from_utf8_lossy(rule.key()).into_owned() },
        }
    }
}

/// What `key` stands for, if it is a key this module makes.
pub fn key_meaning(key: &[u8]) -> Option<KeyMeaning> {
    let (tag, rest) = key.split_first()?;
    let text = std::str::from_utf8(rest).ok()?;
    let pair = || text.split_once('\0').map(|(a, b)| (a.to_owned(), b.to_owned()));
    let triple = || {
        let (a, rest) = text.split_once('\0')?;
        let (b, c) = rest.split_once('\0')?;
        Some((a.to_owned(), b.to_owned(), c.to_owned()))
    };
    match *tag {
        EVENT_TAG => Some(KeyMeaning::Event { id: text.to_owned() }),
        INVOCATION_TAG => pair().map(|(session, invocation)| KeyMeaning::Invocation { session, invocation }),
        RUN_TAG => pair().map(|(session, run)| KeyMeaning::Run { session, run }),
        SEAL_TAG => pair().map(|(session, run)| KeyMeaning::Seal { session, run }),
        CALL_TAG => {
            triple().map(|(session, invocation, call)| KeyMeaning::ToolCall { session, invocation, call })
        }
        RESULT_TAG => {
            triple().map(|(session, invocation, call)| KeyMeaning::ToolResult { session, invocation, call })
        }
        _ => None,
    }
}

fn key(tag: u8, parts: &[&str]) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + parts.iter().map(|p| p.len() + 1).sum::<usize>());
    key.push(tag);
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            key.push(0);
        }
        key.extend_from_slice(part.as_bytes());
    }
    key
}

/// The identity key of the event with this id.
pub fn event_key(id: &str) -> Vec<u8> {
    key(EVENT_TAG, &[id])
}

impl Record {
    /// The rules an append of this record puts on the log's key index: a RuntimeEvent is known by
    /// its id (spec §1.8 item 8: an exact retry is a no-op, the same id with another payload a
    /// conflict). Other records have no key.
    pub fn key_rules(&self) -> KeyRules {
        match self {
            Record::RuntimeEvent(event) => event_rules(event),
            _ => KeyRules::new(),
        }
    }
}

impl Record {
    /// Prepares a record that arrives on the generic append path (a host's append, an imported
    /// event line): a RuntimeEvent's text is normalised as the reference decoder does (spec §1.2),
    /// then a reserved fact, which only a dedicated writer may record, is refused (§1.8 item 1).
    pub fn prepare_generic_append(&mut self) -> Result<(), AppendRefusal> {
        match self {
            Record::RuntimeEvent(event) => prepare_generic_event(event),
            _ => Ok(()),
        }
    }
}

impl Record {
    /// Whether [`Record::prepare_generic_append`] would change the record: a RuntimeEvent whose
    /// text is not in its normalised form. (Read-only, so that the common case copies nothing.)
    pub fn needs_generic_preparation(&self) -> bool {
        let Record::RuntimeEvent(event) = self else { return false };
        match &event.content {
            Some(Content::Text(text)) => {
                text.display_text.as_deref() == Some(text.text.as_str())
                    || text.attachments.as_ref().is_some_and(Vec::is_empty)
                    || text.quotes.as_ref().is_some_and(Vec::is_empty)
            }
            _ => false,
        }
    }

    /// The refusal of [`Record::prepare_generic_append`] for a record already normalised.
    pub fn generic_append_refusal(&self) -> Option<AppendRefusal> {
        let Record::RuntimeEvent(event) = self else { return None };
        event
            .reserved_fact_reason()
            .map(|reason| AppendRefusal::ReservedFact { event: event.id.to_string(), reason })
    }
}

/// [`Record::prepare_generic_append`] of one event.
pub fn prepare_generic_event(event: &mut RuntimeEvent) -> Result<(), AppendRefusal> {
    event.normalize();
    match event.reserved_fact_reason() {
        Some(reason) => Err(AppendRefusal::ReservedFact { event: event.id.to_string(), reason }),
        None => Ok(()),
    }
}

/// An event's rules, in the order the reference store checks them (spec §1.8): its identity (an
/// exact retry stops here), invocation and run identity (item 3), the run's seal (item 5; a
/// terminal event seals it), then the tool ledger of its invocation (item 6).
fn event_rules(event: &RuntimeEvent) -> KeyRules {
    let (session, run, turn) = (event.session_id.as_str(), event.run_id.as_str(), event.turn_id.as_str());
    let (id, invocation) = (event.id.as_str(), event.invocation_id.as_str());
    // NOTE: sized for every rule below (a rule is a tag byte and 4-byte lengths around keys
    // made of a tag byte and ids joined by 0x00), so that an event's rules allocate once.
    let call_key = |call: &str| 5 + 3 + session.len() + invocation.len() + call.len();
    let extra = match &event.content {
        Some(Content::FunctionCall(call)) => call_key(call.id.as_str()),
        Some(Content::FunctionResponse(response)) => 2 * call_key(response.id.as_str()),
        _ => 0,
    } + if event.is_terminal() { 5 + 2 + session.len() + run.len() } else { 0 };
    let ids = id.len() + 3 * session.len() + 3 * run.len() + 2 * (invocation.len() + turn.len());
    let mut rules = KeyRules::with_capacity(39 + ids + extra);
    rules.push_joined(JoinedRule::Identity, EVENT_TAG, &[id]);
    rules.push_claim_joined(INVOCATION_TAG, &[session, invocation], &[run, turn]);
    rules.push_claim_joined(RUN_TAG, &[session, run], &[invocation, turn]);
    rules.push_joined(JoinedRule::Forbids, SEAL_TAG, &[session, run]);
    if event.is_terminal() {
        rules.push_joined(JoinedRule::Unique, SEAL_TAG, &[session, run]);
    }
    match &event.content {
        Some(Content::FunctionCall(call)) => {
            rules.push_joined(JoinedRule::Unique, CALL_TAG, &[session, invocation, call.id.as_str()]);
        }
        Some(Content::FunctionResponse(response)) => {
            let call = response.id.as_str();
            rules.push_joined(JoinedRule::Requires, CALL_TAG, &[session, invocation, call]);
            rules.push_joined(JoinedRule::Unique, RESULT_TAG, &[session, invocation, call]);
        }
        _ => {}
    }
    rules
}

/// The rules of an encoded record, for a log that indexes envelopes it did not append itself (an
/// index built for a store written before it existed, a salvaged store, the envelopes other hosts
/// append to a shared log). A record that does not decode has none: it claims nothing.
pub fn key_rules_of_encoded(kind: u16, kind_schema: u16, bytes: &[u8]) -> KeyRules {
    if kind != crate::record::RecordKind::RuntimeEvent.code() {
        return KeyRules::new();
    }
    Record::decode(kind, kind_schema, bytes).map(|record| record.key_rules()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_what_they_stand_for() {
        assert_eq!(event_key("e1"), b"ee1".to_vec());
        assert_eq!(key_meaning(&event_key("a:b/c")), Some(KeyMeaning::Event { id: "a:b/c".to_owned() }));
        assert_eq!(key_meaning(b""), None);
        assert_eq!(key_meaning(b"?x"), None);
    }
}

#[cfg(test)]
mod rules_tests {
    use super::*;
    use crate::event::{Author, EventStatus, FunctionCall, FunctionResponse, Role, TextContent};
    use crate::ids::TimestampMs;
    use crate::memory::tests::id;
    use crate::{KeyRule, RuleRef};

    fn event(content: Content) -> RuntimeEvent {
        let mut event = RuntimeEvent::new(
            id("event-1"),
            id("invocation-22"),
            id("run-333"),
            id("session-4444"),
            id("turn-55555"),
            TimestampMs(1_767_225_600_000),
            Role::Model,
            Author::Agent,
        );
        event.content = Some(content);
        event
    }

    #[test]
    fn an_events_rules_are_sized_once_and_read_back_as_its_keys() {
        let call = || Content::FunctionCall(FunctionCall::new(id("call-7"), "grep", serde_json::json!({})));
        let result = || {
            Content::FunctionResponse(FunctionResponse::new(id("call-7"), "grep", serde_json::json!("ok")))
        };
        let mut terminal = event(Content::Text(TextContent::new("done")));
        terminal.status = Some(EventStatus::Completed);
        let events = [event(Content::Text(TextContent::new("hi"))), event(call()), event(result()), terminal];
        for event in &events {
            let rules = event_rules(event);
            assert!(rules.fits_exactly(), "{rules:?}");
            let keys: Vec<KeyRule> = rules.iter().map(RuleRef::to_rule).collect();
            assert_eq!(keys[0], KeyRule::Identity(event_key("event-1")));
            assert_eq!(
                keys[1],
                KeyRule::Claim {
                    key: key(INVOCATION_TAG, &["session-4444", "invocation-22"]),
                    value: key(0, &["run-333", "turn-55555"]),
                }
            );
            assert_eq!(keys[3], KeyRule::Forbids(key(SEAL_TAG, &["session-4444", "run-333"])));
        }
        let result_rules: Vec<KeyRule> = event_rules(&events[2]).iter().map(RuleRef::to_rule).collect();
        assert_eq!(
            result_rules[4..],
            [
                KeyRule::Requires(key(CALL_TAG, &["session-4444", "invocation-22", "call-7"])),
                KeyRule::Unique(key(RESULT_TAG, &["session-4444", "invocation-22", "call-7"])),
            ]
        );
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn every_rule_of_an_event_names_its_reason() {
        let s = |v: &str| v.to_owned();
        let cases = [
            (KeyRule::Identity(event_key("e1")), AppendRefusal::IdentityConflict { event: s("e1") }),
            (
                KeyRule::Claim { key: key(INVOCATION_TAG, &["s", "i1"]), value: vec![1] },
                AppendRefusal::InvocationConflict { session: s("s"), invocation: s("i1") },
            ),
            (
                KeyRule::Claim { key: key(RUN_TAG, &["s", "r1"]), value: vec![1] },
                AppendRefusal::RunConflict { session: s("s"), run: s("r1") },
            ),
            (
                KeyRule::Forbids(key(SEAL_TAG, &["s", "r1"])),
                AppendRefusal::RunSealed { session: s("s"), run: s("r1") },
            ),
            (
                KeyRule::Unique(key(CALL_TAG, &["s", "i1", "c1"])),
                AppendRefusal::DuplicateToolCall { invocation: s("i1"), call: s("c1") },
            ),
            (
                KeyRule::Requires(key(CALL_TAG, &["s", "i1", "c1"])),
                AppendRefusal::ToolResultWithoutCall { invocation: s("i1"), call: s("c1") },
            ),
            (
                KeyRule::Unique(key(RESULT_TAG, &["s", "i1", "c1"])),
                AppendRefusal::DuplicateToolResult { invocation: s("i1"), call: s("c1") },
            ),
        ];
        for (rule, reason) in cases {
            assert_eq!(AppendRefusal::of_rule(&rule), reason, "{rule:?}");
        }
        assert!(matches!(
            AppendRefusal::of_rule(&KeyRule::Unique(b"?".to_vec())),
            AppendRefusal::Unknown { .. }
        ));
    }
}
