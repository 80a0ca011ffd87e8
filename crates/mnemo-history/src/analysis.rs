//! What the search index makes of text beyond folding and word segmentation (decision 0151): English
//! stems, stop words left out of queries, tool-call arguments, a short reply's neighbour, a marker
//! on text that says when something happened, and weights per field.
//!
//! Every choice here is measured by `mnemo eval search --devset`, and each can be switched off in
//! the `history-search` stage's configuration (`pipelines/search-baseline.toml` switches all off:
//! the ranking as it was before). Frequencies are kept in quarters ([`FREQUENCY_SCALE`]) so that a
//! field can weigh less than a whole occurrence.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use crate::text::{QUERY_TERMS_MAX, fold, prefix_at_char_boundary, terms};

/// Units of one occurrence in a posting's frequency: a field weighs a whole number of quarters.
pub const FREQUENCY_SCALE: u32 = 4;

/// Most bytes of a tool call's arguments that are indexed (a `Write` call's whole file is not).
pub const TOOL_ARGUMENTS_BYTES_MAX: usize = 2_048;

/// A user or assistant message with at most this many terms is short: it is also indexed with
/// the message before it, as a field of its own weighing [`NEIGHBOUR_WEIGHT`].
pub const SHORT_REPLY_TERMS_MAX: u32 = 12;

/// Most bytes of the message before a short reply that are indexed with it.
pub const NEIGHBOUR_BYTES_MAX: usize = 1_024;

/// How much a short reply's neighbour field counts beside its own text: its BM25 score (with its
/// own length) is multiplied by this.
pub const NEIGHBOUR_WEIGHT: f64 = 0.5;

/// A document's terms as the index counts them ([`Features::document_terms`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DocTerms {
    /// Per term: weighted frequency in the document's own text, and in its neighbour field.
    pub terms: BTreeMap<String, (u32, u32)>,
    /// The own text's length in terms.
    pub length: u32,
    /// The neighbour field's length in terms (0 without one).
    pub context_length: u32,
}

/// The term that marks a document stating when something happened. It starts with a control
/// character, which no word of a text or a query ever holds, so nothing can match it by accident.
pub const TIME_MARKER: &str = "\u{1}time";

/// Which analyses the index applies; stored with the index so queries analyse the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Words of letters are reduced to their English (Snowball) stems.
    pub stem: bool,
    /// How much an English stop word of a query weighs, in thousandths of its BM25 score (1000:
    /// like any word; 0: left out). A query of stop words only keeps them at full weight.
    pub stop_word_milli: u32,
    /// A tool call's document holds its arguments' strings (commands, paths, URLs).
    pub tool_arguments: bool,
    /// A short user or assistant message is also indexed with the message before it.
    pub neighbour_context: bool,
    /// Documents that say when something happened carry [`TIME_MARKER`]; "when" questions boost
    /// them by this much, in thousandths (0: off).
    pub time_boost_milli: u32,
    /// A tool result's occurrence weighs this many quarters (4: as much as any other text).
    pub tool_result_quarters: u32,
}

impl Features {
    /// Everything off: the index as it was before decision 0151.
    pub const NONE: Features = Features {
        stem: false,
        stop_word_milli: 1000,
        tool_arguments: false,
        neighbour_context: false,
        time_boost_milli: 0,
        tool_result_quarters: FREQUENCY_SCALE,
    };

    /// What a configuration that sets nothing gets: the choices that paid in decision 0151.
    pub const DEFAULT: Features = Features {
        stem: true,
        stop_word_milli: 250,
        tool_arguments: true,
        neighbour_context: true,
        time_boost_milli: 300,
        tool_result_quarters: 2,
    };

    pub(crate) fn encode(self) -> [u32; 4] {
        let flags = u32::from(self.stem)
            | u32::from(self.tool_arguments) << 1
            | u32::from(self.neighbour_context) << 2;
        [flags, self.stop_word_milli, self.time_boost_milli, self.tool_result_quarters]
    }

    pub(crate) fn decode(
        [flags, stop_word_milli, time_boost_milli, tool_result_quarters]: [u32; 4],
    ) -> Option<Features> {
        let valid = flags < 8 && stop_word_milli <= 1000 && tool_result_quarters <= FREQUENCY_SCALE;
        valid.then_some(Features {
            stem: flags & 1 != 0,
            stop_word_milli,
            tool_arguments: flags & 2 != 0,
            neighbour_context: flags & 4 != 0,
            time_boost_milli,
            tool_result_quarters,
        })
    }

    /// The index terms of folded text: its words, stemmed when [`Features::stem`] is set.
    pub fn words(self, folded: &str) -> impl Iterator<Item = String> + '_ {
        terms(folded).map(move |word| if self.stem { stem(word) } else { word.to_owned() })
    }

    /// A document's terms: for each, its weighted frequency in its own text (`quarters` per
    /// occurrence, in [`FREQUENCY_SCALE`] units) and, for terms the text lacks, in its neighbour
    /// (a field of its own, scored apart at [`NEIGHBOUR_WEIGHT`]); the time marker; and both
    /// fields' lengths in terms.
    pub(crate) fn document_terms(self, text: &str, quarters: u32, neighbour: Option<&str>) -> DocTerms {
        let folded = fold(text);
        let mut terms: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        let mut length: u32 = 0;
        for term in self.words(&folded) {
            terms.entry(term).or_default().0 += quarters;
            length = length.saturating_add(1);
        }
        let mut context_length: u32 = 0;
        if let Some(neighbour) = neighbour {
            // The neighbour supplies what the reply lacks: a term the reply holds itself gets
            // nothing more from it (else a reply repeating its neighbour's words would outrank it).
            for term in self.words(&fold(neighbour)) {
                context_length = context_length.saturating_add(1);
                let counts = terms.entry(term).or_default();
                if counts.0 == 0 {
                    counts.1 += FREQUENCY_SCALE;
                }
            }
        }
        if self.time_boost_milli > 0 && states_a_time(&folded) {
            terms.insert(TIME_MARKER.to_owned(), (FREQUENCY_SCALE, 0));
        }
        DocTerms { terms, length, context_length }
    }

    /// The distinct terms of a folded query in order of first appearance, at most
    /// [`QUERY_TERMS_MAX`], each with its weight: stop words weigh [`Features::stop_word_milli`]
    /// (and are left out at 0), unless the query has nothing else.
    pub(crate) fn query_terms(self, folded_query: &str) -> Vec<(String, f64)> {
        let words: Vec<&str> = terms(folded_query).collect();
        let all_stop = words.iter().all(|w| is_stop_word(w));
        let mut seen: Vec<(String, f64)> = Vec::new();
        for word in words {
            let weight =
                if all_stop || !is_stop_word(word) { 1.0 } else { f64::from(self.stop_word_milli) / 1000.0 };
            if weight == 0.0 {
                continue;
            }
            if seen.len() == QUERY_TERMS_MAX {
                break;
            }
            let term = if self.stem { stem(word) } else { word.to_owned() };
            if !seen.iter().any(|(t, _)| *t == term) {
                seen.push((term, weight));
            }
        }
        seen
    }

    /// Whether a folded query asks when something happened.
    pub(crate) fn asks_when(self, folded_query: &str) -> bool {
        if self.time_boost_milli == 0 {
            return false;
        }
        let words: Vec<&str> = terms(folded_query).collect();
        words.contains(&"when")
            || words.windows(2).any(|pair| {
                matches!(pair[0], "what" | "which")
                    && matches!(pair[1], "date" | "day" | "time" | "year" | "month")
                    || pair == ["how", "long"]
            })
    }
}

static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The English stem of a folded word made of letters (and apostrophes: `priya's` is `priya`);
/// other words (`lib.rs`, `ts2345`, `snake_case`, numbers) are kept whole. Before stemming, an
/// irregular verb form becomes its base form (`went` is `go`, `grew` is `grow`) and a British
/// spelling the American one (`favourite` is `favorite`), so that a question and the message that
/// answers it meet whatever form each uses.
pub fn stem(word: &str) -> String {
    let letters = word.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '’');
    if !letters {
        return word.to_owned();
    }
    // Words follow Zipf's law: a few thousand make up most of any text, and the stemmer was the
    // largest cost of indexing a message (a profile of a rebuild), so each thread keeps the stems
    // it has computed, up to a bound; the answer is the same with or without the cache.
    STEMS.with_borrow_mut(|stems| {
        if let Some(stemmed) = stems.get(word) {
            return stemmed.clone();
        }
        let stemmed = stem_uncached(word);
        if stems.len() >= STEM_CACHE_WORDS_MAX {
            stems.clear();
        }
        stems.insert(word.to_owned(), stemmed.clone());
        stemmed
    })
}

/// Most words whose stems one thread keeps (see [`stem`]); the cache starts over when it is full.
pub const STEM_CACHE_WORDS_MAX: usize = 16_384;

thread_local! {
    static STEMS: std::cell::RefCell<std::collections::HashMap<String, String>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

fn stem_uncached(word: &str) -> String {
    let word = word.replace('’', "'");
    let word = match IRREGULAR_VERBS.binary_search_by(|(form, _)| (*form).cmp(word.as_str())) {
        Ok(at) => IRREGULAR_VERBS[at].1.to_owned(),
        Err(_) => american_spelling(&word),
    };
    let stemmed = ENGLISH.stem(&word);
    let stemmed = stemmed.trim_matches('\'');
    if stemmed.is_empty() { word } else { stemmed.to_owned() }
}

/// Past tenses and participles of common irregular English verbs, with their base forms (sorted
/// by form). Forms that are more often other words (`left`, `lay`, `rose`, `saw`, `found`,
/// `ground`, `wound`) are left out.
const IRREGULAR_VERBS: &[(&str, &str)] = &[
    ("ate", "eat"),
    ("awoke", "awake"),
    ("awoken", "awake"),
    ("beaten", "beat"),
    ("became", "become"),
    ("began", "begin"),
    ("begun", "begin"),
    ("bent", "bend"),
    ("bit", "bite"),
    ("bitten", "bite"),
    ("bled", "bleed"),
    ("blew", "blow"),
    ("blown", "blow"),
    ("bought", "buy"),
    ("bred", "breed"),
    ("broke", "break"),
    ("broken", "break"),
    ("brought", "bring"),
    ("built", "build"),
    ("burnt", "burn"),
    ("came", "come"),
    ("caught", "catch"),
    ("chose", "choose"),
    ("chosen", "choose"),
    ("crept", "creep"),
    ("dealt", "deal"),
    ("did", "do"),
    ("done", "do"),
    ("drank", "drink"),
    ("drawn", "draw"),
    ("dreamt", "dream"),
    ("drew", "draw"),
    ("driven", "drive"),
    ("drove", "drive"),
    ("drunk", "drink"),
    ("dug", "dig"),
    ("eaten", "eat"),
    ("fallen", "fall"),
    ("fed", "feed"),
    ("fell", "fall"),
    ("felt", "feel"),
    ("fled", "flee"),
    ("flew", "fly"),
    ("flown", "fly"),
    ("forbade", "forbid"),
    ("forbidden", "forbid"),
    ("forgave", "forgive"),
    ("forgiven", "forgive"),
    ("forgot", "forget"),
    ("forgotten", "forget"),
    ("fought", "fight"),
    ("froze", "freeze"),
    ("frozen", "freeze"),
    ("gave", "give"),
    ("given", "give"),
    ("gone", "go"),
    ("got", "get"),
    ("gotten", "get"),
    ("grew", "grow"),
    ("grown", "grow"),
    ("had", "have"),
    ("heard", "hear"),
    ("held", "hold"),
    ("hid", "hide"),
    ("hidden", "hide"),
    ("hung", "hang"),
    ("kept", "keep"),
    ("knelt", "kneel"),
    ("knew", "know"),
    ("known", "know"),
    ("leapt", "leap"),
    ("learnt", "learn"),
    ("led", "lead"),
    ("lent", "lend"),
    ("lost", "lose"),
    ("made", "make"),
    ("meant", "mean"),
    ("met", "meet"),
    ("paid", "pay"),
    ("ran", "run"),
    ("rang", "ring"),
    ("ridden", "ride"),
    ("rode", "ride"),
    ("rung", "ring"),
    ("said", "say"),
    ("sang", "sing"),
    ("sank", "sink"),
    ("seen", "see"),
    ("sent", "send"),
    ("shaken", "shake"),
    ("shone", "shine"),
    ("shook", "shake"),
    ("shot", "shoot"),
    ("shrank", "shrink"),
    ("shrunk", "shrink"),
    ("slept", "sleep"),
    ("slid", "slide"),
    ("sold", "sell"),
    ("sought", "seek"),
    ("spent", "spend"),
    ("spoke", "speak"),
    ("spoken", "speak"),
    ("sprang", "spring"),
    ("sprung", "spring"),
    ("spun", "spin"),
    ("stole", "steal"),
    ("stolen", "steal"),
    ("stood", "stand"),
    ("struck", "strike"),
    ("stuck", "stick"),
    ("stung", "sting"),
    ("sung", "sing"),
    ("sunk", "sink"),
    ("swam", "swim"),
    ("swept", "sweep"),
    ("swore", "swear"),
    ("sworn", "swear"),
    ("swum", "swim"),
    ("swung", "swing"),
    ("taken", "take"),
    ("taught", "teach"),
    ("thought", "think"),
    ("threw", "throw"),
    ("thrown", "throw"),
    ("told", "tell"),
    ("took", "take"),
    ("tore", "tear"),
    ("torn", "tear"),
    ("understood", "understand"),
    ("was", "be"),
    ("went", "go"),
    ("wept", "weep"),
    ("were", "be"),
    ("woke", "wake"),
    ("woken", "wake"),
    ("won", "win"),
    ("wore", "wear"),
    ("worn", "wear"),
    ("written", "write"),
    ("wrote", "write"),
];

/// British spellings and the American ones they become, by word start (sorted): `favour` makes
/// `favourite` `favorite`, `centre` makes `centres` `centers`.
const AMERICAN_SPELLINGS: &[(&str, &str)] = &[
    ("analys", "analyz"),
    ("apologis", "apologiz"),
    ("armour", "armor"),
    ("behaviour", "behavior"),
    ("catalogue", "catalog"),
    ("centre", "center"),
    ("colour", "color"),
    ("defence", "defense"),
    ("favour", "favor"),
    ("fibre", "fiber"),
    ("flavour", "flavor"),
    ("harbour", "harbor"),
    ("honour", "honor"),
    ("humour", "humor"),
    ("labour", "labor"),
    ("licence", "license"),
    ("litre", "liter"),
    ("metre", "meter"),
    ("neighbour", "neighbor"),
    ("odour", "odor"),
    ("offence", "offense"),
    ("organis", "organiz"),
    ("practis", "practic"),
    ("programme", "program"),
    ("realis", "realiz"),
    ("recognis", "recogniz"),
    ("rumour", "rumor"),
    ("theatre", "theater"),
    ("travell", "travel"),
    ("tyre", "tire"),
];

fn american_spelling(word: &str) -> String {
    // The entry that could be a prefix of `word` sorts at or just before it.
    let at = AMERICAN_SPELLINGS.partition_point(|(british, _)| *british <= word);
    match at.checked_sub(1).map(|i| AMERICAN_SPELLINGS[i]) {
        Some((british, american)) if word.starts_with(british) => {
            format!("{american}{}", &word[british.len()..])
        }
        _ => word.to_owned(),
    }
}

/// English stop words: function words that say nothing about what a message is about. Questions
/// are full of them ("what is the name of …"), and BM25 rewards a short message that happens to
/// hold several.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "i'm",
    "if",
    "in",
    "into",
    "is",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "that's",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "what's",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether a folded word is an English stop word.
pub fn is_stop_word(word: &str) -> bool {
    let word = word.replace('’', "'");
    STOP_WORDS.binary_search(&word.as_str()).is_ok()
}

/// Words that place an event in time: relative days and periods, weekdays, months.
const TIME_WORDS: &[&str] = &[
    "ago",
    "april",
    "august",
    "december",
    "february",
    "friday",
    "january",
    "july",
    "june",
    "march",
    "may",
    "monday",
    "november",
    "october",
    "saturday",
    "september",
    "sunday",
    "thursday",
    "today",
    "tomorrow",
    "tonight",
    "tuesday",
    "wednesday",
    "weekend",
    "yesterday",
];

/// Whether folded text says when something happened: a time word, `last`/`next` before a period,
/// or a date such as `2026-03-01`.
pub(crate) fn states_a_time(folded: &str) -> bool {
    let words: Vec<&str> = terms(folded).collect();
    let period =
        |w: &str| matches!(w, "week" | "month" | "year" | "night" | "morning" | "evening" | "weekend");
    words.iter().any(|w| TIME_WORDS.binary_search(w).is_ok())
        || words.windows(2).any(|pair| matches!(pair[0], "last" | "next" | "this") && period(pair[1]))
        || holds_a_date(folded)
}

/// Whether the text holds `YYYY-MM-DD`.
fn holds_a_date(text: &str) -> bool {
    text.as_bytes().windows(10).any(|window| {
        window.iter().enumerate().all(|(i, b)| if i == 4 || i == 7 { *b == b'-' } else { b.is_ascii_digit() })
    })
}

/// The strings of a tool call's arguments, in key order, each on its own line, at most
/// [`TOOL_ARGUMENTS_BYTES_MAX`] bytes: the command a shell tool ran, the path a file tool
/// touched, the URL a fetch read.
pub fn tool_arguments_text(args: &Value) -> String {
    fn walk(value: &Value, out: &mut String) {
        if out.len() >= TOOL_ARGUMENTS_BYTES_MAX {
            return;
        }
        match value {
            Value::String(text) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(map) => map.values().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(args, &mut out);
    prefix_at_char_boundary(&out, TOOL_ARGUMENTS_BYTES_MAX).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_tables_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(IRREGULAR_VERBS.windows(2).all(|pair| pair[0].0 < pair[1].0));
        assert!(AMERICAN_SPELLINGS.windows(2).all(|pair| pair[0].0 < pair[1].0));
        assert!(TIME_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn cached_stems_are_the_stemmers_own_even_after_the_cache_starts_over() {
        let words = ["running", "went", "favourite", "priya's", "lib.rs", "hiking", "colour’s"];
        for round in 0..3 {
            for word in words {
                assert_eq!(stem(word), stem_uncached_or_whole(word), "{word} in round {round}");
            }
        }
        // More distinct words than the cache holds: it starts over and still answers the same.
        for n in 0..STEM_CACHE_WORDS_MAX + 10 {
            let word: String = format!("{n}").chars().map(|c| char::from(b'a' + (c as u8 - b'0'))).collect();
            assert_eq!(stem(&word), stem_uncached_or_whole(&word));
        }
        STEMS.with_borrow(|stems| assert!(stems.len() <= STEM_CACHE_WORDS_MAX));
        assert_eq!(stem("running"), "run");
    }

    fn stem_uncached_or_whole(word: &str) -> String {
        let letters = word.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '’');
        if letters { stem_uncached(word) } else { word.to_owned() }
    }

    #[test]
    fn words_of_letters_are_stemmed_and_code_is_kept_whole() {
        let words: Vec<String> =
            Features::DEFAULT.words("priya's hiking trips in lib.rs ts2345 hiked").collect();
        assert_eq!(words, ["priya", "hike", "trip", "in", "lib.rs", "ts2345", "hike"]);
        assert_eq!(stem("running"), "run");
        for (one, other) in [("went", "go"), ("grew", "growing"), ("drove", "driving"), ("ran", "runs")] {
            assert_eq!(stem(one), stem(other), "{one} {other}");
        }
        for (british, american) in
            [("favourite", "favorite"), ("practised", "practiced"), ("neighbours", "neighbors")]
        {
            assert_eq!(stem(british), stem(american), "{british} {american}");
        }
        assert_eq!(stem("organism"), stem("organizm"));
        assert_eq!(stem("snake_case"), "snake_case");
    }

    #[test]
    fn queries_weigh_stop_words_lightly_unless_nothing_else_is_left() {
        let names = |features: Features, query: &str| -> Vec<String> {
            features.query_terms(query).into_iter().map(|(term, _)| term).collect()
        };
        let dropped = Features { stop_word_milli: 0, ..Features::DEFAULT };
        assert_eq!(names(dropped, "what is the name of priya's husband?"), ["name", "priya", "husband"]);
        assert_eq!(names(dropped, "who is it"), ["who", "is", "it"]);
        let light = Features { stop_word_milli: 250, ..Features::DEFAULT };
        assert_eq!(light.query_terms("the cats"), [("the".to_owned(), 0.25), ("cat".to_owned(), 1.0)]);
        assert_eq!(light.query_terms("who is it")[0].1, 1.0);
        assert_eq!(names(Features::NONE, "the cats"), ["the", "cats"]);
        assert_eq!(names(Features::NONE, "deploy the deploy"), ["deploy", "the"]);
        let many = (0..40).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        assert_eq!(Features::DEFAULT.query_terms(&many).len(), QUERY_TERMS_MAX);
    }

    #[test]
    fn when_questions_and_times_are_recognised() {
        let features = Features::DEFAULT;
        assert!(features.asks_when("when did maya run a half marathon?"));
        assert!(features.asks_when("what day was the interview"));
        assert!(!features.asks_when("what did we decide about caching"));
        assert!(!Features::NONE.asks_when("when did it happen"));
        for text in ["i ran it yesterday", "back last week", "on 2026-03-01", "on saturday"] {
            assert!(states_a_time(text), "{text}");
        }
        for text in ["i ran it", "the last test", "2026-3-1"] {
            assert!(!states_a_time(text), "{text}");
        }
    }

    #[test]
    fn documents_weigh_fields_neighbours_and_times() {
        let features = Features::DEFAULT;
        let doc = features.document_terms("Lake Como, yesterday", 2, Some("Where is the wedding? Como?"));
        assert_eq!((doc.length, doc.context_length), (3, 5));
        assert_eq!(doc.terms["como"], (2, 0), "the reply's own term gets nothing from its neighbour");
        assert_eq!(doc.terms["lake"], (2, 0));
        assert_eq!(doc.terms["wed"], (0, FREQUENCY_SCALE));
        assert_eq!(doc.terms[TIME_MARKER], (FREQUENCY_SCALE, 0));
        let plain = Features::NONE.document_terms("Lake Como, yesterday", 4, None);
        assert!(!plain.terms.contains_key(TIME_MARKER));
        for features in [Features::NONE, Features::DEFAULT] {
            assert_eq!(Features::decode(features.encode()), Some(features));
        }
        assert_eq!(Features::decode([8, 0, 0, 4]), None);
        assert_eq!(Features::decode([0, 1001, 0, 4]), None);
    }

    #[test]
    fn tool_arguments_are_their_strings_capped() {
        let args = serde_json::json!({"description": "Show the diff", "command": "git diff --stat", "n": 3});
        assert_eq!(tool_arguments_text(&args), "git diff --stat\nShow the diff");
        let long = serde_json::json!({"content": "é".repeat(TOOL_ARGUMENTS_BYTES_MAX)});
        assert!(tool_arguments_text(&long).len() <= TOOL_ARGUMENTS_BYTES_MAX);
    }
}
