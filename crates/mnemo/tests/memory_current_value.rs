//! The current value of a changed fact, by the ledger's order (decision 0232): generated
//! sequences of statements about one subject (a value set, changed, changed back, mentioned in
//! passing), each said in a session of its own workspace and extracted through the real path
//! with the embedded models (no model call). After each sequence, recall must return the newest
//! stated value and no replaced one, and the fact's history must hold every stated value in
//! order, each with the position, session and time it was said. The sequences come from a fixed
//! seed (`MNEMO_FACT_SEED` replays another) over many phrasings and subjects.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::sync::Arc;

use mnemo::log::{ExpectedRevision, ManualClock};
use mnemo::memory::{ExtractionOutcome, RecallMemory};
use mnemo::records::{Record, SessionId, StreamId};
use mnemo::{Config, Mnemo};
use mnemo_core::{
    Author, Content, InvocationId, LifecycleState, MemoryMode, Role, RunId, RuntimeEvent, SessionOpened,
    TextContent, TimestampMs, TurnId, WorkspaceId,
};

/// Sequences generated; the acceptance bar is 200.
const SEQUENCES: usize = 220;
/// Share of sequences whose current value must be recalled, in percent.
const CURRENT_VALUE_PERCENT_MIN: usize = 95;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// A subject: whose it is, its attribute, and values it may take.
struct Subject {
    user: bool,
    attribute: &'static str,
    values: &'static [&'static str],
}

const SUBJECTS: &[Subject] = &[
    Subject {
        user: false,
        attribute: "staging database",
        values: &["stage-db-02", "stage-db-03", "stage-db-07", "pg-stage-11", "stage-db-12"],
    },
    Subject {
        user: false,
        attribute: "test command",
        values: &["cargo test", "cargo nextest run", "just test", "make check", "pnpm test"],
    },
    Subject {
        user: false,
        attribute: "release branch",
        values: &["release-3", "release-4", "main", "stable"],
    },
    Subject {
        user: false,
        attribute: "primary region",
        values: &["us-east-1", "eu-west-2", "ap-south-1", "eu-central-1"],
    },
    Subject { user: false, attribute: "database port", values: &["5432", "6543", "15432", "5433"] },
    Subject {
        user: false,
        attribute: "deploy target",
        values: &["fly.io", "Kubernetes", "Nomad", "Render", "bare metal"],
    },
    Subject { user: true, attribute: "editor", values: &["vim", "Helix", "VS Code", "Zed", "Emacs"] },
    Subject { user: true, attribute: "shell", values: &["zsh", "fish", "bash", "nushell"] },
    Subject { user: true, attribute: "terminal", values: &["kitty", "WezTerm", "Alacritty", "Ghostty"] },
];

/// How a value is first stated.
const SET: &[&str] = &[
    "Our {a} is {v}.",
    "FYI, the {a} is {v}.",
    "For the record, our {a} is {v}.",
    "The {a} is {v}, in case you need it.",
    "So, the {a} is {v}.",
];
/// How a value is changed.
const CHANGE: &[&str] = &[
    "We moved the {a}, it is now {v}.",
    "We switched our {a} to {v}.",
    "The {a} has moved to {v}.",
    "Update: our {a} is now {v}.",
    "We changed the {a} to {v} today.",
    "From now on, the {a} is {v}.",
    "Heads up: the {a} changed to {v}.",
];
/// How a value is changed back to an earlier one.
const BACK: &[&str] =
    &["The {a} is back to {v}.", "Our {a} is {v} again.", "We moved the {a} back, it is {v} again."];
/// Passing mentions of another value, which state nothing about the current one.
const PASSING: &[&str] = &[
    "Back when the {a} was {v}, deploys were slower.",
    "Is the {a} still {v}?",
    "Someone suggested {v} for the {a}, but nothing was decided.",
    "I wonder whether {v} would make a better {a}.",
    "If the {a} were {v}, the tests would pass.",
    "The old {a}, {v}, is gone.",
    "Do not confuse the {a} with {v}.",
];
/// The same templates for the user's own things.
const USER_SET: &[&str] = &["My {a} is {v}.", "FYI, my {a} is {v}.", "For the record, my {a} is {v}."];
const USER_CHANGE: &[&str] = &[
    "I switched my {a} to {v}.",
    "My {a} is now {v}.",
    "Update: my {a} is now {v}.",
    "From now on, my {a} is {v}.",
    "My {a} changed to {v}.",
];
const USER_BACK: &[&str] = &["My {a} is back to {v}.", "My {a} is {v} again."];
const USER_PASSING: &[&str] = &[
    "Back when my {a} was {v}, I was slower.",
    "Is {v} a good {a}?",
    "A friend suggested {v} as my {a}, but I am not sure.",
    "I wonder whether {v} would make a better {a}.",
];

/// One line of a sequence: what the user says, and the value it states (`None` for a passing
/// mention).
struct Line {
    text: String,
    states: Option<&'static str>,
}

fn fill(template: &str, attribute: &str, value: &str) -> String {
    template.replace("{a}", attribute).replace("{v}", value)
}

/// A sequence: a value set, then changes, changes back and passing mentions.
fn sequence(rng: &mut Rng, subject: &Subject) -> Vec<Line> {
    let (set, change, back, passing) = if subject.user {
        (USER_SET, USER_CHANGE, USER_BACK, USER_PASSING)
    } else {
        (SET, CHANGE, BACK, PASSING)
    };
    let first = rng.pick(subject.values);
    let mut said = vec![first];
    let mut lines = vec![Line { text: fill(rng.pick(set), subject.attribute, first), states: Some(first) }];
    for _ in 0..1 + rng.below(4) {
        let current = *said.last().unwrap();
        let others: Vec<&'static str> = subject.values.iter().copied().filter(|v| *v != current).collect();
        let earlier: Vec<&'static str> = said.iter().copied().filter(|v| *v != current).collect();
        match rng.below(3) {
            0 if !earlier.is_empty() => {
                let value = rng.pick(&earlier);
                lines
                    .push(Line { text: fill(rng.pick(back), subject.attribute, value), states: Some(value) });
                said.push(value);
            }
            1 => {
                let value = rng.pick(&others);
                lines.push(Line { text: fill(rng.pick(passing), subject.attribute, value), states: None });
            }
            _ => {
                let value = rng.pick(&others);
                lines.push(Line {
                    text: fill(rng.pick(change), subject.attribute, value),
                    states: Some(value),
                });
                said.push(value);
            }
        }
    }
    lines
}

fn open(dir: &std::path::Path) -> Mnemo {
    let config = Config { clock: Arc::new(ManualClock::new(1_767_225_600_000, 1)), ..Config::default() };
    Mnemo::open(dir, config).unwrap()
}

fn id<T: TryFrom<String>>(text: &str) -> T
where
    T::Error: std::fmt::Debug,
{
    T::try_from(text.to_owned()).unwrap()
}

/// Appends one user line (and the agent's answer) to a session, opening it first when asked.
fn say(mnemo: &Mnemo, session: &str, workspace: &str, turn: usize, text: &str, open_it: bool) {
    let sid: SessionId = id(session);
    let mut records = Vec::new();
    if open_it {
        records.push(Record::SessionOpened(SessionOpened {
            session: sid.clone(),
            workspace: Some(WorkspaceId::new(workspace).unwrap()),
            incognito: false,
            memory: MemoryMode::Enabled,
            subagent: false,
            title: None,
            source: None,
            parent: None,
        }));
    }
    for (n, (role, author, body)) in
        [(Role::User, Author::User, text), (Role::Model, Author::Agent, "Noted.")].into_iter().enumerate()
    {
        let mut event = RuntimeEvent::new(
            id(&format!("{session}-t{turn}-e{n}")),
            id::<InvocationId>(&format!("inv-{turn}")),
            id::<RunId>(&format!("run-{turn}")),
            sid.clone(),
            id::<TurnId>(&format!("t{turn}")),
            TimestampMs(1_767_225_000_000 + (turn * 2 + n) as u64),
            role,
            author,
        );
        event.content = Some(Content::Text(TextContent::new(body)));
        records.push(Record::RuntimeEvent(event));
    }
    mnemo.append(&StreamId::session(&sid), ExpectedRevision::Any, &records).unwrap();
}

fn extract(mnemo: &Mnemo, session: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = rt.block_on(mnemo.memory().extract(&id(session), None)).unwrap();
    assert!(matches!(report.outcome, ExtractionOutcome::Committed { .. }), "{report:?}");
}

fn seed() -> u64 {
    std::env::var("MNEMO_FACT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED_FAC7)
}

/// What one sequence gave: whether recall returned the current value, and whether the history
/// held every stated value in order with where and when it was said.
fn run_sequence(mnemo: &Mnemo, index: usize, lines: &[Line], subject: &Subject) -> (bool, bool, String) {
    let workspace = format!("w{index}");
    let sessions = [format!("s{index}a"), format!("s{index}b")];
    for (turn, line) in lines.iter().enumerate() {
        let session = &sessions[turn % 2];
        say(mnemo, session, &workspace, turn, &line.text, turn < 2);
        extract(mnemo, session);
    }
    let stated: Vec<&str> = lines.iter().filter_map(|l| l.states).collect();
    let current = *stated.last().unwrap();
    let owner = if subject.user { "user" } else { "team" };
    let expected_content = format!("The {owner}'s {} is {current}.", subject.attribute);
    let recalled = mnemo
        .memory()
        .recall(&id(&sessions[0]), &RecallMemory { query: subject.attribute.to_owned(), limit: Some(10) })
        .unwrap();
    let prefix = format!("The {owner}'s {} is ", subject.attribute);
    let facts: Vec<&str> =
        recalled.iter().map(|r| r.content.as_str()).filter(|c| c.starts_with(&prefix)).collect();
    let current_ok = facts == [expected_content.as_str()];

    let Some(item) = recalled.iter().find(|r| r.content == expected_content) else {
        return (current_ok, false, format!("recalled {facts:?}, expected {expected_content:?}"));
    };
    let history = mnemo.memory().history(&item.item).unwrap();
    let values: Vec<String> = history
        .iter()
        .map(|h| h.item.fields.content.trim_start_matches(&prefix).trim_end_matches('.').to_owned())
        .collect();
    let currents = history.iter().filter(|h| h.current).count();
    let located = history.iter().all(|h| {
        let created = h.events.first();
        created.is_some_and(|e| e.position > 0 && e.at.0 > 0)
            && h.item.fields.sources.iter().all(|s| sessions.iter().any(|x| x == s.session.as_str()))
            && (h.current || h.item.lifecycle == LifecycleState::Archived)
    });
    let ordered = history.windows(2).all(|w| w[0].said_at() < w[1].said_at());
    let history_ok = values == stated && currents == 1 && located && ordered;
    (current_ok, history_ok, format!("recalled {facts:?}; history {values:?}, stated {stated:?}"))
}

#[test]
fn the_newest_statement_by_log_position_is_the_current_value_and_history_holds_every_value() {
    let seed = seed();
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let mnemo = open(dir.path());
    let (mut current_ok, mut history_ok, mut passing, mut backs) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for index in 0..SEQUENCES {
        let subject = &SUBJECTS[rng.below(SUBJECTS.len())];
        let lines = sequence(&mut rng, subject);
        passing += lines.iter().filter(|l| l.states.is_none()).count();
        let stated: Vec<&str> = lines.iter().filter_map(|l| l.states).collect();
        backs += stated.iter().enumerate().filter(|(i, v)| stated[..*i].contains(v)).count();
        let (current, history, detail) = run_sequence(&mnemo, index, &lines, subject);
        current_ok += usize::from(current);
        history_ok += usize::from(history);
        if !(current && history) {
            let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
            failures.push(format!("#{index} {texts:?}: {detail}"));
        }
    }
    println!(
        "seed {seed:#x}: {SEQUENCES} sequences ({passing} passing mentions, {backs} changes back); \
         current value {current_ok}/{SEQUENCES}, history complete {history_ok}/{SEQUENCES}"
    );
    for failure in failures.iter().take(10) {
        println!("{failure}");
    }
    assert!(passing > 0 && backs > 0, "the generator must produce passing mentions and changes back");
    assert!(
        current_ok * 100 >= SEQUENCES * CURRENT_VALUE_PERCENT_MIN,
        "seed {seed:#x}: current value {current_ok}/{SEQUENCES}: {failures:#?}"
    );
    assert_eq!(history_ok, SEQUENCES, "seed {seed:#x}: every history complete: {failures:#?}");

    // The index is a projection of the log: rebuilt, it is the same byte for byte.
    let live = mnemo.stats().unwrap().stages.into_iter().find(|s| s.name == "memory-index").unwrap();
    let rebuilt = mnemo.rebuild(Some("memory-index")).unwrap();
    assert_eq!(rebuilt[0].digest, live.digest);
}
