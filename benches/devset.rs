//! The search development set: transcripts and questions that `mnemo eval search --devset` imports
//! and asks, in two splits — `dev` (what ranking choices were tuned on) and `heldout` (never tuned
//! on, reported apart to show whether a choice generalises).
//!
//! Three sources, each in both splits:
//! - a seeded generator of long multi-session personal conversations (one persona per workspace,
//!   a dozen and more sessions of chit-chat in which facts, dated events, facts spread across
//!   sessions and clues for inferences are stated once, in words other than the question's);
//! - conversations written by hand in the style of real ones (`eval/conversations/*.jsonl`, with
//!   their questions in `eval/conversations/*.qa.jsonl`);
//! - coding-agent sessions generated in the exact shape Claude Code writes (`type` user/assistant
//!   lines with `tool_use` inputs and `tool_result` blocks, `cwd` as the workspace): which command
//!   failed, when a command ran, where a path was touched, what was decided.
//!
//! Categories: `single` (one stated fact), `multi` (facts across sessions; every one is evidence),
//! `when` (a dated event), `inference` (a conclusion from a stated fact), and for coding sessions
//! `command`, `failed`, `path`, `decision`.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::search_eval::{Evidence, QaItem};

/// One file of a split: its name, contents and import format (`mnemo` or `claude-code`).
#[derive(Debug, Clone)]
pub struct DevFile {
    /// A name for reports and error messages.
    pub name: String,
    /// The transcript's bytes.
    pub text: String,
    /// `mnemo` or `claude-code`.
    pub format: &'static str,
}

/// One split: transcripts and the questions about them.
#[derive(Debug, Clone)]
pub struct Split {
    /// `dev` or `heldout`.
    pub name: &'static str,
    /// Transcripts to import.
    pub files: Vec<DevFile>,
    /// Questions.
    pub questions: Vec<QaItem>,
}

/// The seed the README's numbers come from.
pub const DEVSET_SEED_DEFAULT: u64 = 20;

/// Personas generated per split.
const PERSONAS_PER_SPLIT: u64 = 4;
/// Coding projects generated per split.
const PROJECTS_PER_SPLIT: u64 = 2;

/// Hand-written conversations and their questions, by split.
const HANDWRITTEN: [(&str, &str, &str, &str); 2] = [
    (
        "dev",
        "eval/conversations/lena.jsonl",
        include_str!("eval/conversations/lena.jsonl"),
        include_str!("eval/conversations/lena.qa.jsonl"),
    ),
    (
        "heldout",
        "eval/conversations/omar.jsonl",
        include_str!("eval/conversations/omar.jsonl"),
        include_str!("eval/conversations/omar.qa.jsonl"),
    ),
];

/// Both splits for `seed`. The held-out split draws its personas and projects from seeds the dev
/// split never uses.
pub fn devset(seed: u64) -> Result<Vec<Split>, crate::search_eval::EvalError> {
    let mut splits = Vec::new();
    for (split_index, name) in ["dev", "heldout"].into_iter().enumerate() {
        let mut split = Split { name, files: Vec::new(), questions: Vec::new() };
        for p in 0..PERSONAS_PER_SPLIT {
            let persona_seed = seed.wrapping_mul(1_000).wrapping_add(split_index as u64 * 100 + p);
            let (file, questions) = personal_conversation(persona_seed, &format!("{name}-p{p}"));
            split.files.push(file);
            split.questions.extend(questions);
        }
        for p in 0..PROJECTS_PER_SPLIT {
            let project_seed = seed.wrapping_mul(1_000).wrapping_add(split_index as u64 * 100 + 50 + p);
            let (files, questions) = coding_project(project_seed, &format!("{name}-c{p}"));
            split.files.extend(files);
            split.questions.extend(questions);
        }
        for (split_name, file, text, qa) in HANDWRITTEN {
            if split_name == name {
                split.files.push(DevFile { name: file.to_owned(), text: text.to_owned(), format: "mnemo" });
                split
                    .questions
                    .extend(crate::search_eval::parse_qa(qa, &file.replace(".jsonl", ".qa.jsonl"))?);
            }
        }
        splits.push(split);
    }
    Ok(splits)
}

/// SplitMix64: a small, seeded, portable generator (the same seed gives the same set anywhere).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn text(&mut self, items: &[&'static str]) -> &'static str {
        items[self.below(items.len())]
    }

    /// `n` distinct indexes below `len`.
    fn distinct(&mut self, n: usize, len: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..len).collect();
        for i in (1..all.len()).rev() {
            let j = self.below(i + 1);
            all.swap(i, j);
        }
        all.truncate(n);
        all
    }
}

/// Fills `{a}`, `{b}`, `{c}`, `{name}` and `{t}`.
fn fill(template: &str, values: &[&str], name: &str, when: &str) -> String {
    let mut out = template.replace("{name}", name).replace("{t}", when);
    for (slot, value) in ["{a}", "{b}", "{c}"].iter().zip(values) {
        out = out.replace(slot, value);
    }
    out
}

/// A fact stated once: what the user says, what the assistant answers, what is later asked.
struct FactKind {
    values: &'static [&'static [&'static str]],
    statements: &'static [&'static str],
    replies: &'static [&'static str],
    questions: &'static [&'static str],
}

const SINGLE_FACTS: &[FactKind] = &[
    FactKind {
        values: &[
            &["beagle", "Biscuit"],
            &["border collie", "Pepper"],
            &["tabby cat", "Miso"],
            &["corgi", "Waffles"],
            &["rescue greyhound", "Comet"],
            &["ginger cat", "Marmalade"],
        ],
        statements: &[
            "Sorry I was slow to reply, {b} (my {a}) dragged me around the park for an hour.",
            "{b} knocked my coffee off the desk this morning. Living with a {a} is chaos some days.",
        ],
        replies: &[
            "Ha, {b} sounds like a handful! How old is your {a}?",
            "Poor coffee. Is {b} always that mischievous?",
        ],
        questions: &["What is the name of {name}'s {a}?", "What is {name}'s pet called?"],
    },
    FactKind {
        values: &[
            &["nurse", "St. Mary's hospital"],
            &["data analyst", "a logistics company"],
            &["chemistry teacher", "Lincoln High"],
            &["carpenter", "my uncle's workshop"],
            &["UX designer", "a fintech startup"],
        ],
        statements: &[
            "Long shift today. Being a {a} at {b} is rewarding but I'm exhausted.",
            "I've worked as a {a} at {b} for six years now and it still surprises me.",
        ],
        replies: &[
            "Six years is a long time! What keeps it interesting?",
            "That sounds tiring. Do you get a break this week?",
        ],
        questions: &["What does {name} do for a living?", "Where does {name} work?"],
    },
    FactKind {
        values: &[&["Porto"], &["Duluth"], &["Galway"], &["Tucson"], &["Osaka"]],
        statements: &[
            "I grew up in {a}, so this weather is nothing to me.",
            "I miss {a} sometimes; that's where I was born and raised.",
        ],
        replies: &["Do you still have family back there?", "What do you miss most about it?"],
        questions: &["Where did {name} grow up?", "Which city is {name} originally from?"],
    },
    FactKind {
        values: &[&["peanuts"], &["shellfish"], &["penicillin"], &["bee stings"]],
        statements: &[
            "I have to carry an EpiPen everywhere because I'm allergic to {a}.",
            "Had to skip the office party food, my {a} allergy again.",
        ],
        replies: &["That must make eating out stressful.", "Good that you're careful about it."],
        questions: &["What is {name} allergic to?", "Does {name} have any allergies?"],
    },
    FactKind {
        values: &[
            &["sister", "Hannah", "Denver"],
            &["brother", "Tomas", "Glasgow"],
            &["sister", "Aiko", "Vancouver"],
            &["brother", "Luis", "Madrid"],
        ],
        statements: &[
            "My {a} {b} just moved to {c} for a new job, I'm going to miss her dinners.",
            "Called {b} tonight, my {a} in {c}. We talked for two hours.",
        ],
        replies: &["Will you visit {c} soon?", "It's lovely that you two stay close."],
        questions: &["Where does {name}'s {a} live?", "What is the name of {name}'s {a}?"],
    },
    FactKind {
        values: &[&["cello"], &["ukulele"], &["drums"], &["piano"]],
        statements: &[
            "I've been playing the {a} since I was nine, practised for two hours tonight.",
            "My fingers hurt from {a} practice, the recital piece is brutal.",
        ],
        replies: &["What piece are you working on?", "Recitals are nerve-wracking but worth it."],
        questions: &["Which instrument does {name} play?", "What musical instrument does {name} practise?"],
    },
    FactKind {
        values: &[&["Japanese"], &["Portuguese"], &["Korean"], &["German"]],
        statements: &[
            "I'm learning {a} on the app every morning, day 140 of my streak.",
            "My {a} tutor says my pronunciation is finally improving.",
        ],
        replies: &["140 days is impressive consistency!", "What made you pick {a}?"],
        questions: &["What language is {name} learning?", "Which language does {name} study?"],
    },
    FactKind {
        values: &[&["2009 Honda Civic"], &["old Volvo wagon"], &["red Mini Cooper"], &["Subaru Outback"]],
        statements: &[
            "My car, a {a}, broke down on the highway again. Alternator this time.",
            "Drove the {a} to the coast, it made a weird rattling noise the whole way.",
        ],
        replies: &[
            "Ugh, alternators always fail at the worst time.",
            "Maybe get that rattle checked before the next trip.",
        ],
        questions: &["What car does {name} drive?", "What kind of vehicle does {name} own?"],
    },
    FactKind {
        values: &[&["ramen"], &["pho"], &["lasagna"], &["tacos al pastor"]],
        statements: &[
            "Honestly {a} is my favourite food, I could eat it every day.",
            "Nothing beats a big bowl of {a} after a long week. Top of my list, always.",
        ],
        replies: &["Do you make it at home or go out for it?", "Any place you'd recommend?"],
        questions: &["What is {name}'s favorite food?", "Which dish does {name} love most?"],
    },
    FactKind {
        values: &[
            &["wife", "Sofia"],
            &["husband", "Daniel"],
            &["girlfriend", "Priya"],
            &["boyfriend", "Marcus"],
        ],
        statements: &[
            "{b} and I celebrate our anniversary next week, my {a} wants somewhere fancy.",
            "My {a} {b} surprised me with concert tickets tonight.",
        ],
        replies: &["How lovely! Any ideas for the anniversary?", "That's so thoughtful of {b}."],
        questions: &["What is the name of {name}'s {a}?", "Who is {name}'s partner?"],
    },
    FactKind {
        values: &[&["two daughters"], &["a son"], &["twin boys"], &["three kids"]],
        statements: &[
            "Between work and my {a}, I barely have time to sleep.",
            "The kids start school on Monday; with {a} mornings are a circus.",
        ],
        replies: &["Parenting plus work is a lot. Be gentle with yourself.", "Good luck with the first day!"],
        questions: &["How many children does {name} have?", "Does {name} have kids?"],
    },
    FactKind {
        values: &[&["vegetarian"], &["vegan"], &["pescatarian"]],
        statements: &[
            "I've been {a} for three years now, so barbecues are tricky.",
            "The new canteen finally has {a} options, took them long enough.",
        ],
        replies: &["Three years, nice. What do you bring to barbecues?", "Small wins!"],
        questions: &["Does {name} follow a special diet?", "What kind of diet does {name} keep?"],
    },
];

/// Short answers to the assistant's follow-up question: the fact sits in the reply, the topic in
/// the question before it.
struct ShortAnswer {
    opener: &'static str,
    follow_up: &'static str,
    answers: &'static [&'static str],
    question: &'static str,
}

const SHORT_ANSWERS: &[ShortAnswer] = &[
    ShortAnswer {
        opener: "We finally booked the venue for the wedding!",
        follow_up: "Congratulations! Where is the wedding going to be?",
        answers: &["Lake Como, in June.", "A barn outside Asheville.", "My aunt's vineyard in Sonoma."],
        question: "Where will {name}'s wedding be held?",
    },
    ShortAnswer {
        opener: "I think I'm finally going to get a tattoo.",
        follow_up: "Exciting! What design are you thinking of getting?",
        answers: &[
            "A small fox on my ankle.",
            "A compass, on my forearm.",
            "Probably a wave, behind the ear.",
        ],
        question: "What tattoo design does {name} want?",
    },
    ShortAnswer {
        opener: "Signed up for a night class at the community college.",
        follow_up: "Nice! Which class did you choose?",
        answers: &["Intro to astronomy.", "Spanish conversation.", "Woodworking for beginners."],
        question: "Which night class did {name} choose?",
    },
    ShortAnswer {
        opener: "My best friend is visiting next month, first time in years.",
        follow_up: "That's wonderful! What is your friend's name, and where are they coming from?",
        answers: &["Rosa, from Lisbon.", "Jamal, coming from Nairobi.", "Elin, all the way from Oslo."],
        question: "What is the name of {name}'s best friend who is visiting?",
    },
];

/// An event on a day: the user mentions it with a relative time.
struct Event {
    statement: &'static str,
    question: &'static str,
}

const EVENTS: &[Event] = &[
    Event {
        statement: "I ran my first half marathon {t}! Finished in 2:05 and my legs are jelly.",
        question: "When did {name} run a half marathon?",
    },
    Event {
        statement: "Went to a pottery workshop {t} and made a very lopsided bowl.",
        question: "When did {name} attend the pottery workshop?",
    },
    Event {
        statement: "We moved into the new apartment {t}, boxes everywhere.",
        question: "When did {name} move into the new apartment?",
    },
    Event {
        statement: "Big news: I got promoted to team lead {t}!",
        question: "When did {name} get promoted?",
    },
    Event {
        statement: "Visited my grandma in the hospital {t}, she's recovering slowly.",
        question: "When did {name} visit their grandmother in hospital?",
    },
    Event {
        statement: "I broke my wrist skateboarding {t}, so typing is slow.",
        question: "When did {name} break their wrist?",
    },
    Event {
        statement: "We went camping by the lake {t}, the stars were unreal.",
        question: "When did {name} go camping?",
    },
    Event {
        statement: "Passed my driving test {t} on the second attempt!",
        question: "When did {name} pass the driving test?",
    },
    Event {
        statement: "Started volunteering at the animal shelter {t}, mostly walking dogs.",
        question: "When did {name} start volunteering at the shelter?",
    },
    Event {
        statement: "Had the final job interview at the bank {t}, fingers crossed.",
        question: "When was {name}'s final interview at the bank?",
    },
    Event {
        statement: "Saw the northern lights {t} on the drive home, I cried a little.",
        question: "When did {name} see the northern lights?",
    },
];

const WHEN: &[&str] =
    &["yesterday", "last weekend", "on Saturday", "this morning", "last Tuesday", "two days ago"];

/// A set of things of one kind, each mentioned in a different session; all are evidence.
struct Spread {
    items: &'static [&'static str],
    statements: &'static [&'static str],
    question: &'static str,
}

const SPREADS: &[Spread] = &[
    Spread {
        items: &["Portugal", "Vietnam", "Iceland", "Morocco", "Peru", "Greece"],
        statements: &[
            "Just back from our trip to {a}, the food was incredible.",
            "Still dreaming about {a}. Best trip in years.",
        ],
        question: "Which countries did {name} visit on trips?",
    },
    Spread {
        items: &["volleyball", "tennis", "rock climbing", "swimming", "badminton"],
        statements: &[
            "Joined a {a} league at work, first game was fun.",
            "My {a} sessions on Thursdays are the highlight of my week.",
        ],
        question: "What sports does {name} play?",
    },
    Spread {
        items: &["sourdough bread", "pad thai", "beef bourguignon", "dumplings", "paella"],
        statements: &[
            "Tried cooking {a} tonight. Edible, barely.",
            "Attempt number two at {a} went way better.",
        ],
        question: "What dishes has {name} tried cooking?",
    },
    Spread {
        items: &["The Left Hand of Darkness", "Piranesi", "Beloved", "The Remains of the Day", "Small Gods"],
        statements: &[
            "Just finished reading {a}, still thinking about the ending.",
            "Halfway through {a} and I can't put it down.",
        ],
        question: "Which books has {name} been reading?",
    },
];

/// A stated fact and a question that needs a step of reasoning from it.
struct Inference {
    statement: &'static str,
    question: &'static str,
}

const INFERENCES: &[Inference] = &[
    Inference {
        statement: "I hiked the ridge trail again {t}, I love being up in the mountains.",
        question: "Would {name} enjoy a weekend hiking trip?",
    },
    Inference {
        statement: "I do my best work in the early morning, before anyone else is awake.",
        question: "Is {name} a morning person?",
    },
    Inference {
        statement: "I'm lactose intolerant, so no cheese or ice cream for me unfortunately.",
        question: "Would {name} be happy with a cheese platter as a gift?",
    },
    Inference {
        statement: "Spent the whole Sunday weeding the vegetable garden behind our house.",
        question: "Does {name} own a house with a garden?",
    },
    Inference {
        statement: "I rebuilt the gears on my bike myself, took all weekend but it shifts perfectly.",
        question: "Could {name} help fix a bike?",
    },
    Inference {
        statement: "Flying makes me panic, I took the train across the country instead.",
        question: "Is {name} afraid of flying?",
    },
    Inference {
        statement: "I turned down the Berlin offer, I can't leave my parents alone right now.",
        question: "Would {name} relocate abroad for a job offer?",
    },
];

/// Chit-chat that fills the sessions: the words of the questions occur here too, in other senses.
const FILLER_USER: &[&str] = &[
    "Can you recommend a podcast for my commute? Something about history maybe.",
    "What's a good name for a fantasy football team? Mine is terrible.",
    "My neighbour's dog barks all night, any advice on how to bring it up politely?",
    "Work was busy today, three meetings that could have been emails.",
    "What should I cook tonight? I have rice, eggs and some sad spinach.",
    "Any tips for sleeping better? I keep waking up at 3am.",
    "The weather here is awful, rain for the fifth day in a row.",
    "I need a gift idea for a coworker who is leaving, budget around 30 dollars.",
    "Can you explain how compound interest works, simply?",
    "I'm trying to drink more water, how much is actually enough?",
    "Watched a marathon of a cooking show last night instead of sleeping.",
    "Which city has the best museums in Europe, in your opinion?",
    "My favorite show got cancelled, I'm weirdly upset about it.",
    "How do I get red wine out of a carpet?",
    "What's the difference between a latte and a flat white?",
    "Help me write a polite email asking my landlord to fix the heating.",
    "Do you think it's worth learning to code at my age?",
    "My friend's car got towed downtown, parking here is a nightmare.",
    "Is it normal to feel tired after a long trip even if you slept?",
    "Give me a quick stretching routine for sitting all day.",
    "What are some board games for a group of six?",
    "Recommend a movie for tonight, nothing too sad please.",
    "I keep forgetting people's names right after they tell me. Tricks?",
    "How long should I boil an egg for a runny yolk?",
    "My team at work is switching to a new project tool and everyone hates it.",
    "Where do people usually live when they move to a new city, near work or near friends?",
    "My cousin plays in a band, their first gig is next month.",
    "Should I get a standing desk? My back has opinions.",
    "What's a good houseplant that's impossible to kill?",
    "I read that kids learn languages faster, is that true?",
    "The dog park near me is always full of people on their phones.",
    "Any ideas for a rainy Sunday at home?",
    "How do I politely say no to extra work without sounding lazy?",
    "Tell me a fun fact about octopuses.",
    "What's a healthy snack that isn't just carrots?",
    "My phone battery dies by lunch, is it time for a new one?",
];

const FILLER_ASSISTANT: &[&str] = &[
    "Good question! Here are a few ideas to try, and you can tell me which one fits your week best.",
    "That sounds frustrating. A short, friendly message usually works better than a long one.",
    "Happy to help. Start small, keep it consistent, and adjust after a week or two.",
    "Here's a simple way to think about it: focus on what you can control today.",
    "I'd suggest trying one change at a time so you can tell what actually helps.",
    "Totally understandable. Many people feel the same, especially after a long day at work.",
    "A few options: something light, something classic, and one wildcard you might not expect.",
    "You could write it like this, then tweak the tone so it sounds like you.",
    "That's a great instinct. Keep notes for a few days and patterns usually show up.",
    "Fun fact time! I love these, let me give you a couple.",
];

/// The turns of one session while it is built: user text, assistant text.
type Turn = (String, String);

/// A fact placed in a session: the turn texts and, once placed, where it landed.
struct Placement {
    session: usize,
    turns: Vec<Turn>,
    /// The index (within `turns`) of the turn that is evidence.
    evidence_turn: usize,
    question: QaPlan,
}

/// A question waiting for its evidence's final turn ids.
#[derive(Clone)]
struct QaPlan {
    key: String,
    question: String,
    category: &'static str,
}

/// Generates one persona's conversation history (mnemo transcript format) and its questions.
fn personal_conversation(seed: u64, label: &str) -> (DevFile, Vec<QaItem>) {
    let mut rng = Rng(seed);
    let names = ["Maya", "Jordan", "Priya", "Tom", "Ines", "Kenji", "Ruth", "Dev", "Alma", "Noah"];
    let name = *rng.pick(&names);
    let workspace = format!("personal/{label}");
    let sessions = 14 + rng.below(5);
    let mut placements: Vec<Placement> = Vec::new();
    let single = rng.distinct(8, SINGLE_FACTS.len());
    for (i, &kind) in single.iter().enumerate() {
        let fact = &SINGLE_FACTS[kind];
        let values = *rng.pick(fact.values);
        let statement = fill(rng.text(fact.statements), values, name, "");
        let reply = fill(rng.text(fact.replies), values, name, "");
        let question = fill(rng.text(fact.questions), values, name, "");
        placements.push(Placement {
            session: rng.below(sessions),
            turns: vec![(statement, reply)],
            evidence_turn: 0,
            question: plan(format!("single-{i}"), question, "single"),
        });
    }
    for (i, &kind) in rng.distinct(3, SHORT_ANSWERS.len()).iter().enumerate() {
        let short = &SHORT_ANSWERS[kind];
        let answer = (rng.text(short.answers)).to_owned();
        placements.push(Placement {
            session: rng.below(sessions),
            turns: vec![
                (short.opener.to_owned(), short.follow_up.to_owned()),
                (answer, "Love that. Keep me posted!".to_owned()),
            ],
            evidence_turn: 1,
            question: plan(format!("short-{i}"), fill(short.question, &[], name, ""), "single"),
        });
    }
    for (i, &kind) in rng.distinct(6, EVENTS.len()).iter().enumerate() {
        let event = &EVENTS[kind];
        let when = *rng.pick(WHEN);
        placements.push(Placement {
            session: rng.below(sessions),
            turns: vec![(
                fill(event.statement, &[], name, when),
                "Oh wow, tell me more about it!".to_owned(),
            )],
            evidence_turn: 0,
            question: plan(format!("when-{i}"), fill(event.question, &[], name, ""), "when"),
        });
    }
    for (i, &kind) in rng.distinct(3, SPREADS.len()).iter().enumerate() {
        let spread = &SPREADS[kind];
        let count = 2 + rng.below(2);
        let question = plan(format!("multi-{i}"), fill(spread.question, &[], name, ""), "multi");
        let chosen_sessions = rng.distinct(count, sessions);
        for (item, session) in rng.distinct(count, spread.items.len()).into_iter().zip(chosen_sessions) {
            let statement = fill(rng.text(spread.statements), &[spread.items[item]], name, "");
            placements.push(Placement {
                session,
                turns: vec![(statement, "That sounds great!".to_owned())],
                evidence_turn: 0,
                question: question.clone(),
            });
        }
    }
    for (i, &kind) in rng.distinct(4, INFERENCES.len()).iter().enumerate() {
        let inference = &INFERENCES[kind];
        let when = *rng.pick(WHEN);
        placements.push(Placement {
            session: rng.below(sessions),
            turns: vec![(fill(inference.statement, &[], name, when), "Thanks for sharing that.".to_owned())],
            evidence_turn: 0,
            question: plan(format!("inference-{i}"), fill(inference.question, &[], name, ""), "inference"),
        });
    }
    write_persona(&mut rng, label, name, &workspace, sessions, placements)
}

fn plan(key: String, question: String, category: &'static str) -> QaPlan {
    QaPlan { key, question, category }
}

/// Lays out the sessions: filler turns with the placed facts among them, then the questions with
/// the turn ids their evidence landed on.
fn write_persona(
    rng: &mut Rng,
    label: &str,
    name: &str,
    workspace: &str,
    sessions: usize,
    placements: Vec<Placement>,
) -> (DevFile, Vec<QaItem>) {
    // 2026-03-02T09:00:00Z.
    let start_ms: u64 = 1_772_442_000_000;
    let mut text = String::new();
    let mut evidence: std::collections::BTreeMap<String, (QaPlan, Vec<Evidence>)> = Default::default();
    let mut day = 0u64;
    for session in 0..sessions {
        day += 2 + rng.below(5) as u64;
        let id = format!("{label}-s{session:02}");
        let title = format!("Chat {}", session + 1);
        let _ = writeln!(
            text,
            "{}",
            json!({"kind": "session", "session": id, "workspace": workspace, "title": title})
        );
        // Blocks of turns that stay together: a filler turn, or a placed fact's turns.
        let mut blocks: Vec<Vec<(Turn, Option<QaPlan>)>> = Vec::new();
        for _ in 0..10 + rng.below(10) {
            blocks.push(vec![(
                (rng.pick(FILLER_USER).to_string(), rng.pick(FILLER_ASSISTANT).to_string()),
                None,
            )]);
        }
        for placement in placements.iter().filter(|p| p.session == session) {
            let block = placement
                .turns
                .iter()
                .enumerate()
                .map(|(offset, turn)| {
                    (turn.clone(), (offset == placement.evidence_turn).then(|| placement.question.clone()))
                })
                .collect();
            let at = rng.below(blocks.len() + 1);
            blocks.insert(at, block);
        }
        let turns: Vec<(Turn, Option<QaPlan>)> = blocks.into_iter().flatten().collect();
        let mut ts = start_ms + day * 86_400_000 + rng.below(8) as u64 * 3_600_000;
        for (number, ((user, assistant), mark)) in turns.into_iter().enumerate() {
            let turn = format!("t{:03}", number + 1);
            let user = user.replace("{name}", name);
            let _ = writeln!(text, "{}", message_line(&id, &turn, "user", ts, &user));
            ts += 20_000 + rng.below(40) as u64 * 1_000;
            let _ = writeln!(text, "{}", message_line(&id, &turn, "model", ts, &assistant));
            ts += 60_000 + rng.below(240) as u64 * 1_000;
            if let Some(question) = mark {
                let entry = evidence.entry(question.key.clone()).or_insert_with(|| (question, Vec::new()));
                entry.1.push(Evidence { session: id.clone(), turn });
            }
        }
    }
    let questions = evidence
        .into_values()
        .map(|(plan, evidence)| QaItem {
            id: format!("{label}-{}", plan.key),
            question: plan.question,
            workspace: Some(workspace.to_owned()),
            evidence,
            category: Some(plan.category.to_owned()),
        })
        .collect();
    (DevFile { name: format!("{label}.jsonl"), text, format: "mnemo" }, questions)
}

fn message_line(session: &str, turn: &str, role: &str, ts: u64, text: &str) -> Value {
    json!({"session": session, "turn": turn, "role": role, "ts": ts, "parts": [{"type": "text", "text": text}]})
}

/// A tool call in a coding turn: the tool, its input, its result and whether it failed.
struct Call {
    tool: &'static str,
    input: Value,
    result: String,
    is_error: bool,
}

/// One coding turn: the request, the assistant's opening and closing text, the calls between.
struct CodingTurn {
    request: String,
    opening: String,
    calls: Vec<Call>,
    closing: String,
    /// The questions this turn is evidence for: (category, question).
    asks: Vec<(&'static str, String)>,
}

/// A project's vocabulary: its language's commands, paths and failures.
struct Project {
    name: &'static str,
    build: &'static str,
    test: &'static str,
    lint: &'static str,
    paths: &'static [&'static str],
    /// Commands run once each, with their output: (command, output).
    one_off: &'static [(&'static str, &'static str)],
    /// Commands that fail, with their error output and the question's wording of the failure.
    failures: &'static [(&'static str, &'static str, &'static str)],
    /// Decisions: (the user's words, the question).
    decisions: &'static [(&'static str, &'static str)],
    urls: &'static [&'static str],
}

const PROJECTS: &[Project] = &[
    Project {
        name: "ledger-api",
        build: "cargo build --workspace",
        test: "cargo test -p ledger-core",
        lint: "cargo clippy --all-targets -- -D warnings",
        paths: &[
            "src/settle.rs",
            "src/http/routes.rs",
            "migrations/0004_add_settlement_index.sql",
            "crates/ledger-core/src/money.rs",
            "config/staging.toml",
            "src/jobs/reconcile.rs",
        ],
        one_off: &[
            (
                "git diff --stat",
                " src/settle.rs | 14 +++++++---\n 1 file changed, 9 insertions(+), 5 deletions(-)",
            ),
            ("git log --oneline -5", "a1b2c3d settle: round half-even\n9f8e7d6 http: health route"),
            (
                "rg -n \"fn settle_batch\" src/",
                "src/settle.rs:88:pub fn settle_batch(batch: &Batch) -> Result<Receipt> {",
            ),
            ("curl -s localhost:8080/health", "{\"status\":\"ok\",\"db\":\"up\"}"),
            ("sqlx migrate run", "Applied 4/migrate add settlement index (12.3ms)"),
            ("cargo tree -i openssl-sys", "openssl-sys v0.9.102\n└── native-tls v0.2.12"),
        ],
        failures: &[
            (
                "cargo test -p ledger-core money::tests::rounding",
                "thread 'money::tests::rounding' panicked at crates/ledger-core/src/money.rs:41:9:\nassertion `left == right` failed\n  left: 1005\n right: 1004",
                "the rounding test panicked",
            ),
            (
                "sqlx migrate run --database-url $STAGING_DB",
                "error: while executing migrations: error returned from database: relation \"settlements\" does not exist",
                "the settlements relation did not exist",
            ),
            (
                "cargo build --release --target x86_64-unknown-linux-musl",
                "error: failed to run custom build command for `openssl-sys v0.9.102`\nCould not find directory of OpenSSL installation",
                "the OpenSSL installation could not be found",
            ),
        ],
        decisions: &[
            (
                "Ok, decision: we round half-even everywhere in money math, no more truncation. Write that into the module docs.",
                "What did we decide about rounding?",
            ),
            (
                "Let's not add a cache in front of the settlement lookups for now; revisit after the load test.",
                "What did we decide about caching settlement lookups?",
            ),
            (
                "We'll keep the reconcile job on a 15 minute schedule, hourly is too slow for finance.",
                "How often should the reconcile job run, what did we settle on?",
            ),
        ],
        urls: &[
            "https://docs.rs/sqlx/latest/sqlx/macro.migrate.html",
            "https://rust-lang.github.io/rust-clippy/master/",
        ],
    },
    Project {
        name: "web-dashboard",
        build: "npm run build",
        test: "npm test -- --watch=false",
        lint: "npm run lint -- --fix",
        paths: &[
            "src/components/RevenueChart.tsx",
            "src/hooks/useFilters.ts",
            "src/api/client.ts",
            "vite.config.ts",
            "src/pages/Settings.tsx",
            "tests/e2e/login.spec.ts",
        ],
        one_off: &[
            ("git diff --stat", " src/hooks/useFilters.ts | 22 ++++++++++++++--------\n 1 file changed"),
            ("npx depcheck", "Unused dependencies\n* moment\n* lodash.debounce"),
            ("git stash list", "stash@{0}: WIP on main: 4c5d6e7 chart tooltips"),
            ("du -sh dist/assets", "1.9M\tdist/assets"),
            ("npx playwright test tests/e2e/login.spec.ts --headed", "1 passed (4.2s)"),
            ("curl -I https://staging.dashboard.internal/healthz", "HTTP/2 200\ncontent-type: text/plain"),
        ],
        failures: &[
            (
                "npx tsc --noEmit",
                "src/hooks/useFilters.ts(31,18): error TS2345: Argument of type 'string' is not assignable to parameter of type 'DateRange'.",
                "the TS2345 type error in the filters hook",
            ),
            (
                "npm run build -- --mode staging",
                "[vite]: Rollup failed to resolve import \"@/api/legacy\" from \"src/pages/Settings.tsx\".",
                "Rollup could not resolve an import",
            ),
            (
                "npm test -- --watch=false RevenueChart",
                "FAIL src/components/RevenueChart.test.tsx\n  ● renders empty state\n    TypeError: Cannot read properties of undefined (reading 'map')",
                "the empty state test threw reading map of undefined",
            ),
        ],
        decisions: &[
            (
                "Decision: drop moment entirely and use date-fns, it's half the bundle size. No new moment imports.",
                "What did we decide about the date library?",
            ),
            (
                "We agreed the chart keeps client-side filtering; server-side paging only once a tenant passes 10k rows.",
                "What did we decide about filtering on the client versus the server?",
            ),
            (
                "Let's keep dark mode behind a feature flag until design signs off on the palette.",
                "What did we decide about dark mode?",
            ),
        ],
        urls: &["https://vitejs.dev/config/build-options", "https://date-fns.org/docs/Getting-Started"],
    },
    Project {
        name: "etl-jobs",
        build: "python -m build",
        test: "pytest -q",
        lint: "ruff check etl/",
        paths: &[
            "etl/loaders/orders.py",
            "etl/transform/currency.py",
            "tests/test_orders_loader.py",
            "dags/nightly_orders.py",
            "pyproject.toml",
            "etl/sinks/warehouse.py",
        ],
        one_off: &[
            (
                "git diff --stat",
                " etl/loaders/orders.py | 31 +++++++++++++++++++------------\n 1 file changed",
            ),
            ("docker compose up -d postgres", "Container etl-postgres-1  Started"),
            ("python -m mypy etl/", "Success: no issues found in 24 source files"),
            ("pip install -r requirements-dev.txt", "Successfully installed pytest-8.3.2 ruff-0.6.4"),
            (
                "psql -h localhost -U etl -c \"select count(*) from staging.orders\"",
                " count\n-------\n 48213",
            ),
            ("wc -l data/samples/orders_2026_02.csv", "48214 data/samples/orders_2026_02.csv"),
        ],
        failures: &[
            (
                "pytest tests/test_orders_loader.py -x",
                "E   KeyError: 'currency_code'\ntests/test_orders_loader.py:57: KeyError",
                "a KeyError on currency_code",
            ),
            (
                "airflow dags test nightly_orders 2026-02-01",
                "airflow.exceptions.AirflowException: Task warehouse_sink failed: connection refused on port 5439",
                "the warehouse sink connection was refused",
            ),
            (
                "python -m etl.cli backfill --since 2025-01-01",
                "MemoryError: unable to allocate 2.31 GiB for an array with shape (310000000,)",
                "the backfill ran out of memory",
            ),
        ],
        decisions: &[
            (
                "Decided: currency conversion happens at load time using the daily ECB rate, never at query time.",
                "What did we decide about when currency conversion happens?",
            ),
            (
                "We'll backfill month by month instead of one giant run; each month is its own task.",
                "What did we decide about how to run the backfill?",
            ),
            (
                "Keep pandas for now, the polars migration waits until after the quarter closes.",
                "What did we decide about migrating to polars?",
            ),
        ],
        urls: &[
            "https://airflow.apache.org/docs/apache-airflow/stable/howto/operator/python.html",
            "https://docs.pola.rs/user-guide/migration/pandas/",
        ],
    },
];

/// Generates one coding project: a few Claude Code sessions in one working directory.
fn coding_project(seed: u64, label: &str) -> (Vec<DevFile>, Vec<QaItem>) {
    let mut rng = Rng(seed);
    let project = rng.pick(PROJECTS);
    let cwd = format!("/home/dev/{}-{label}", project.name);
    let mut turns = coding_turns(&mut rng, project);
    // Spread the turns over sessions of 3 to 5 turns.
    let mut files = Vec::new();
    let mut questions = Vec::new();
    let mut session_index = 0;
    // 2026-02-02T08:00:00Z.
    let mut ts: u64 = 1_770_019_200_000 + rng.below(10) as u64 * 86_400_000;
    while !turns.is_empty() {
        let take = (3 + rng.below(3)).min(turns.len());
        let chunk: Vec<CodingTurn> = turns.drain(..take).collect();
        let session = uuid(&mut rng);
        let mut writer = ClaudeWriter::new(&session, &cwd, ts);
        for turn in chunk {
            let turn_id = writer.turn(&mut rng, &turn);
            for (category, question) in &turn.asks {
                questions.push(QaItem {
                    id: format!("{label}-{}", questions.len()),
                    question: question.clone(),
                    workspace: Some(cwd.clone()),
                    evidence: vec![Evidence { session: session.clone(), turn: turn_id.clone() }],
                    category: Some((*category).to_owned()),
                });
            }
        }
        ts = writer.ts + 86_400_000;
        files.push(DevFile {
            name: format!("{label}-{session_index}.jsonl"),
            text: writer.text,
            format: "claude-code",
        });
        session_index += 1;
    }
    (files, questions)
}

/// The project's turns in a shuffled order: routine work, one-off commands, failures, decisions.
fn coding_turns(rng: &mut Rng, project: &Project) -> Vec<CodingTurn> {
    let mut turns = Vec::new();
    let routine = [
        "Run the tests and fix whatever is broken.",
        "Tidy up the lint warnings please.",
        "Build it and check nothing regressed.",
    ];
    for i in 0..6 {
        let path = project.paths[i % project.paths.len()];
        let command = [project.build, project.test, project.lint][i % 3];
        turns.push(CodingTurn {
            request: routine[i % routine.len()].to_owned(),
            opening: "I'll take a look.".to_owned(),
            calls: vec![
                read_call(path),
                bash_call(command, "ok: all checks passed", false),
                edit_call(path),
                bash_call(command, "ok: all checks passed", false),
            ],
            closing: "Done: the checks pass again after a small fix.".to_owned(),
            asks: Vec::new(),
        });
    }
    for &(command, output) in project.one_off {
        let path = rng.text(project.paths);
        turns.push(CodingTurn {
            request: "Can you check where things stand before we continue?".to_owned(),
            opening: "Let me look at the current state.".to_owned(),
            calls: vec![bash_call(command, output, false), read_call(path)],
            closing: "Looks as expected; nothing surprising.".to_owned(),
            asks: vec![("command", format!("when did we run {command}"))],
        });
    }
    for &(command, error, wording) in project.failures {
        turns.push(CodingTurn {
            request: "Something is off, please investigate and tell me what you find.".to_owned(),
            opening: "Running it to reproduce.".to_owned(),
            calls: vec![bash_call(command, error, true), read_call(rng.text(project.paths))],
            closing: "Found the cause; details above. I have not changed anything yet.".to_owned(),
            asks: vec![("failed", format!("which command failed when {wording}?"))],
        });
    }
    for (i, &path) in project.paths.iter().enumerate() {
        let url = project.urls[i % project.urls.len()];
        let mut calls = vec![read_call(path), edit_call(path)];
        if i < project.urls.len() {
            calls.insert(0, fetch_call(url));
        }
        let mut asks = vec![("path", format!("where did we edit {path}"))];
        if i < project.urls.len() {
            asks.push(("command", format!("when did we fetch {url}")));
        }
        turns.push(CodingTurn {
            request: "Make the change we discussed and keep it small.".to_owned(),
            opening: "On it.".to_owned(),
            calls,
            closing: "Changed; the diff is minimal.".to_owned(),
            asks,
        });
    }
    for &(words, question) in project.decisions {
        turns.push(CodingTurn {
            request: words.to_owned(),
            opening: "Understood, I'll follow that from here on.".to_owned(),
            calls: vec![bash_call(project.test, "ok: all checks passed", false)],
            closing: "Noted and applied.".to_owned(),
            asks: vec![("decision", question.to_owned())],
        });
    }
    let order = rng.distinct(turns.len(), turns.len());
    let mut slots: Vec<Option<CodingTurn>> = turns.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

fn bash_call(command: &str, output: &str, is_error: bool) -> Call {
    let description = if is_error { "Reproduce the failure" } else { "Run the command" };
    let result = if is_error { format!("Exit code 1\n{output}") } else { output.to_owned() };
    Call { tool: "Bash", input: json!({"command": command, "description": description}), result, is_error }
}

fn read_call(path: &str) -> Call {
    let result =
        format!("     1\t// {path}\n     2\tuse crate::prelude::*;\n     3\t\n     4\tpub fn run() {{}}");
    Call { tool: "Read", input: json!({"file_path": path}), result, is_error: false }
}

fn edit_call(path: &str) -> Call {
    Call {
        tool: "Edit",
        input: json!({"file_path": path, "old_string": "pub fn run() {}", "new_string": "pub fn run() { init(); }"}),
        result: format!("The file {path} has been updated."),
        is_error: false,
    }
}

fn fetch_call(url: &str) -> Call {
    Call {
        tool: "WebFetch",
        input: json!({"url": url, "prompt": "Summarise the relevant options"}),
        result: "The page describes the options and their defaults.".to_owned(),
        is_error: false,
    }
}

fn uuid(rng: &mut Rng) -> String {
    let (a, b) = (rng.next(), rng.next());
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// Writes Claude Code session lines.
struct ClaudeWriter {
    session: String,
    cwd: String,
    ts: u64,
    parent: Option<String>,
    text: String,
}

impl ClaudeWriter {
    fn new(session: &str, cwd: &str, ts: u64) -> Self {
        ClaudeWriter {
            session: session.to_owned(),
            cwd: cwd.to_owned(),
            ts,
            parent: None,
            text: String::new(),
        }
    }

    fn line(&mut self, rng: &mut Rng, kind: &str, message: Value) -> String {
        let uuid = uuid(rng);
        self.ts += 1_000 + rng.below(20_000) as u64;
        let line = json!({
            "parentUuid": self.parent,
            "isSidechain": false,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": "2.1.7",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": iso8601(self.ts),
        });
        let _ = writeln!(self.text, "{line}");
        self.parent = Some(uuid.clone());
        uuid
    }

    /// Writes a turn; returns its id (the request line's uuid).
    fn turn(&mut self, rng: &mut Rng, turn: &CodingTurn) -> String {
        let turn_id = self.line(rng, "user", json!({"role": "user", "content": turn.request}));
        self.assistant_text(rng, &turn.opening);
        for call in &turn.calls {
            let id = format!("toolu_01{}", &uuid(rng).replace('-', "")[..22]);
            let content = json!([{"type": "tool_use", "id": id, "name": call.tool, "input": call.input}]);
            self.line(rng, "assistant", assistant_message(content));
            let mut block = json!({"tool_use_id": id, "type": "tool_result", "content": call.result});
            if call.is_error {
                block["is_error"] = json!(true);
            }
            self.line(rng, "user", json!({"role": "user", "content": [block]}));
        }
        self.assistant_text(rng, &turn.closing);
        turn_id
    }

    fn assistant_text(&mut self, rng: &mut Rng, text: &str) {
        self.line(rng, "assistant", assistant_message(json!([{"type": "text", "text": text}])));
    }
}

fn assistant_message(content: Value) -> Value {
    json!({"model": "claude-sonnet-4-5-20250929", "type": "message", "role": "assistant", "content": content})
}

/// Milliseconds since the epoch as RFC 3339 with milliseconds, UTC.
fn iso8601(ms: u64) -> String {
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1_000 % 60, rest % 1_000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_772_442_000_123), "2026-03-02T09:00:00.123Z");
    }

    #[test]
    fn the_same_seed_gives_the_same_set_and_every_question_has_evidence_in_its_files() {
        let first = devset(DEVSET_SEED_DEFAULT).unwrap();
        let again = devset(DEVSET_SEED_DEFAULT).unwrap();
        for (a, b) in first.iter().zip(&again) {
            assert_eq!(a.questions, b.questions);
            assert!(a.files.iter().zip(&b.files).all(|(x, y)| x.text == y.text));
        }
        for split in &first {
            let text: String = split.files.iter().map(|f| f.text.as_str()).collect();
            for question in &split.questions {
                for evidence in &question.evidence {
                    assert!(text.contains(&evidence.session), "{}: {}", question.id, evidence.session);
                    assert!(text.contains(&evidence.turn), "{}: {}", question.id, evidence.turn);
                }
            }
            let categories: std::collections::BTreeSet<_> =
                split.questions.iter().filter_map(|q| q.category.as_deref()).collect();
            for category in ["single", "multi", "when", "inference", "command", "failed", "path", "decision"]
            {
                assert!(categories.contains(category), "{} lacks {category}", split.name);
            }
        }
    }
}
