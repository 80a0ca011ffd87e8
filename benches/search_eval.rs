//! `mnemo eval search`: how well a ranking puts the evidence of a question near the top.
//!
//! A QA file is JSON Lines, one question per line:
//! `{"id", "question", "workspace"?, "evidence": [{"session", "turn"}], "category"?}`. A question
//! is asked inside its workspace (the whole store without one); a returned row is a hit when its
//! (session, turn) is one of the evidence turns. For each ranker the report gives, overall and per
//! category: hit@k (an evidence turn among the first k rows), recall-all@k (every evidence turn
//! among them) and MRR (the mean of 1 / rank of the first hit, 0 without one, over the first
//! [`RANKED_ROWS_MAX`] rows).
//!
//! Rankers: `mnemo` asks SearchHistory through the facade, following `next_cursor` until it has
//! enough rows; `bm25` is textbook BM25 (`k1` 1.2, `b` 0.75, lowercase words of letters and digits,
//! no stemming, no stop words) over the same visible messages, built by this harness from the
//! sessions' transcripts, so the store's index plays no part in it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use mnemo::Mnemo;
use mnemo::history::{HistoryContext, HistorySearchRequest, SEARCH_LIMIT_MAX};
use mnemo::records::{SessionId, WorkspaceId};
use serde::{Deserialize, Serialize};

/// Most rows a ranker is asked for per question (the largest k, and MRR's cut).
pub const RANKED_ROWS_MAX: usize = 100;
/// Most questions one QA file may hold.
pub const QA_QUESTIONS_MAX: usize = 100_000;
/// Most evidence turns one question may name.
pub const QA_EVIDENCE_MAX: usize = 64;
/// Most pages of SearchHistory one question may read.
const SEARCH_PAGES_MAX: usize = 64;

/// One evidence turn.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// The session holding it.
    pub session: String,
    /// The turn.
    pub turn: String,
}

/// One question of a QA file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QaItem {
    /// The question's id (unique in its file).
    pub id: String,
    /// What is asked, as a search query.
    pub question: String,
    /// The workspace the question is asked in; the whole store when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The turns that answer it.
    pub evidence: Vec<Evidence>,
    /// A category for the per-category report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// What is wrong with a QA file or an evaluation's arguments.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A line of the QA file is not a valid question; fix the file.
    #[error("{file}:{line}: {message}")]
    Qa {
        /// The file.
        file: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An argument is out of range.
    #[error("{0}")]
    Arguments(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] mnemo::Error),
    /// Reading a file failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Parses a QA file's text: every line a question (blank lines skipped), ids unique.
pub fn parse_qa(text: &str, file: &str) -> Result<Vec<QaItem>, EvalError> {
    let mut items = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let bad = |message: String| EvalError::Qa { file: file.to_owned(), line: index + 1, message };
        if line.trim().is_empty() {
            continue;
        }
        let item: QaItem = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if item.question.trim().is_empty() {
            return Err(bad("`question` is empty".to_owned()));
        }
        if item.evidence.is_empty() || item.evidence.len() > QA_EVIDENCE_MAX {
            return Err(bad(format!("`evidence` must name 1 to {QA_EVIDENCE_MAX} turns")));
        }
        if let Some(workspace) = &item.workspace {
            WorkspaceId::new(workspace.clone()).map_err(|e| bad(format!("`workspace`: {e}")))?;
        }
        if !ids.insert(item.id.clone()) {
            return Err(bad(format!("id {:?} appears twice", item.id)));
        }
        items.push(item);
        if items.len() > QA_QUESTIONS_MAX {
            return Err(bad(format!("more than {QA_QUESTIONS_MAX} questions")));
        }
    }
    if items.is_empty() {
        return Err(EvalError::Qa { file: file.to_owned(), line: 0, message: "no questions".to_owned() });
    }
    Ok(items)
}

/// Reads and parses a QA file.
pub fn read_qa(path: &Path) -> Result<Vec<QaItem>, EvalError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| EvalError::Io { path: path.display().to_string(), source })?;
    parse_qa(&text, &path.display().to_string())
}

/// A row a ranker returned: its session and turn (none for a session title).
pub type RankedRow = (String, Option<String>);

/// Something that ranks rows for a question.
pub trait Ranker {
    /// The ranker's name in reports.
    fn name(&self) -> &str;
    /// Up to `rows` rows for the question, best first.
    fn rank(&mut self, item: &QaItem, rows: usize) -> Result<Vec<RankedRow>, EvalError>;
}

/// SearchHistory through the facade, following `next_cursor`.
#[derive(Debug)]
pub struct MnemoRanker<'a> {
    name: String,
    mnemo: &'a Mnemo,
}

impl<'a> MnemoRanker<'a> {
    /// A ranker named `name` over `mnemo`'s history search.
    pub fn new(name: impl Into<String>, mnemo: &'a Mnemo) -> Self {
        MnemoRanker { name: name.into(), mnemo }
    }
}

impl Ranker for MnemoRanker<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn rank(&mut self, item: &QaItem, rows: usize) -> Result<Vec<RankedRow>, EvalError> {
        let workspace = item.workspace.clone().map(WorkspaceId::new).transpose();
        let workspace = workspace.map_err(|e| EvalError::Arguments(format!("question {}: {e}", item.id)))?;
        let context = HistoryContext { workspace: workspace.as_ref(), ..HistoryContext::default() };
        let mut found = Vec::new();
        let mut cursor = None;
        for _ in 0..SEARCH_PAGES_MAX {
            let request =
                HistorySearchRequest { query: item.question.clone(), limit: Some(SEARCH_LIMIT_MAX), cursor };
            let page = match self.mnemo.history().search(&request, &context, None)? {
                Ok(page) => page,
                // A question the tool refuses (say, one that looks like a credential) finds nothing.
                Err(_) => break,
            };
            found.extend(page.rows.into_iter().map(|row| (row.session_id, row.turn_id)));
            cursor = page.next_cursor;
            if found.len() >= rows || cursor.is_none() {
                break;
            }
        }
        found.truncate(rows);
        Ok(found)
    }
}

/// Textbook BM25 over the visible messages of each workspace, built from the transcripts.
#[derive(Debug)]
pub struct Bm25Ranker<'a> {
    mnemo: &'a Mnemo,
    /// Built per workspace (`None`: the whole store) on first use.
    indexes: HashMap<Option<String>, Bm25Index>,
}

impl<'a> Bm25Ranker<'a> {
    /// A textbook BM25 ranker over `mnemo`'s transcripts.
    pub fn new(mnemo: &'a Mnemo) -> Self {
        Bm25Ranker { mnemo, indexes: HashMap::new() }
    }

    fn build(&self, workspace: Option<&str>) -> Result<Bm25Index, EvalError> {
        let mut index = Bm25Index::default();
        for summary in self.mnemo.history().sessions()? {
            if workspace.is_some_and(|w| summary.workspace.as_ref().map(WorkspaceId::as_str) != Some(w)) {
                continue;
            }
            let Some(transcript) = self.mnemo.history().transcript(&summary.session, None)? else {
                continue;
            };
            for message in transcript.messages {
                index.add(&summary.session, message.turn_id.as_str(), &message.text);
            }
        }
        Ok(index)
    }
}

impl Ranker for Bm25Ranker<'_> {
    fn name(&self) -> &str {
        "bm25"
    }

    fn rank(&mut self, item: &QaItem, rows: usize) -> Result<Vec<RankedRow>, EvalError> {
        if !self.indexes.contains_key(&item.workspace) {
            let built = self.build(item.workspace.as_deref())?;
            self.indexes.insert(item.workspace.clone(), built);
        }
        Ok(self
            .indexes
            .get(&item.workspace)
            .map(|index| index.rank(&item.question, rows))
            .unwrap_or_default())
    }
}

/// A textbook BM25 index: documents as term counts, document frequencies, lengths.
#[derive(Debug, Default)]
pub struct Bm25Index {
    docs: Vec<(RankedRow, u32)>,
    postings: HashMap<String, Vec<(usize, u32)>>,
    total_terms: u64,
}

/// The textbook's tokens: lowercase runs of letters and digits.
pub fn textbook_tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

impl Bm25Index {
    /// Adds a document.
    pub fn add(&mut self, session: &SessionId, turn: &str, text: &str) {
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for token in textbook_tokens(text) {
            *counts.entry(token).or_default() += 1;
        }
        let length: u32 = counts.values().sum();
        if length == 0 {
            return;
        }
        let doc = self.docs.len();
        self.docs.push(((session.as_str().to_owned(), Some(turn.to_owned())), length));
        self.total_terms += u64::from(length);
        for (term, count) in counts {
            self.postings.entry(term).or_default().push((doc, count));
        }
    }

    /// The best `rows` documents for `query` (any term matches; ties: the later document).
    pub fn rank(&self, query: &str, rows: usize) -> Vec<RankedRow> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let average = self.total_terms as f64 / n.max(1.0);
        let mut terms: Vec<String> = textbook_tokens(query).collect();
        terms.sort();
        terms.dedup();
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for term in &terms {
            let Some(postings) = self.postings.get(term) else { continue };
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in postings {
                let (tf, length) = (f64::from(tf), f64::from(self.docs[doc].1));
                *scores.entry(doc).or_default() +=
                    idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * length / average));
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        ranked.into_iter().take(rows).map(|(doc, _)| self.docs[doc].0.clone()).collect()
    }
}

/// Metrics of a set of questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Questions.
    pub questions: usize,
    /// Per k: the fraction with an evidence turn among the first k rows.
    pub hit: BTreeMap<usize, f64>,
    /// Per k: the fraction with every evidence turn among the first k rows.
    pub recall_all: BTreeMap<usize, f64>,
    /// Mean reciprocal rank of the first hit.
    pub mrr: f64,
}

/// One ranker's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankerReport {
    /// The ranker.
    pub ranker: String,
    /// Over all questions.
    pub overall: Metrics,
    /// Per category (questions without one count as `uncategorized`).
    pub categories: BTreeMap<String, Metrics>,
    /// The ids of the questions with no hit within the largest k.
    pub missed: Vec<String>,
}

/// Where one question's evidence landed.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    /// Rank (from 1) of each evidence turn's first row, `None` when not returned.
    ranks: Vec<Option<usize>>,
}

impl Outcome {
    fn of(item: &QaItem, rows: &[RankedRow]) -> Outcome {
        let ranks = item
            .evidence
            .iter()
            .map(|e| {
                rows.iter()
                    .position(|(session, turn)| *session == e.session && turn.as_deref() == Some(&e.turn))
            })
            .map(|found| found.map(|index| index + 1))
            .collect();
        Outcome { ranks }
    }

    fn first(&self) -> Option<usize> {
        self.ranks.iter().flatten().min().copied()
    }

    fn all_within(&self, k: usize) -> bool {
        self.ranks.iter().all(|rank| rank.is_some_and(|r| r <= k))
    }
}

fn metrics(outcomes: &[&Outcome], ks: &[usize]) -> Metrics {
    let n = outcomes.len().max(1) as f64;
    let share = |pass: &dyn Fn(&Outcome) -> bool| outcomes.iter().filter(|o| pass(o)).count() as f64 / n;
    Metrics {
        questions: outcomes.len(),
        hit: ks.iter().map(|&k| (k, share(&|o| o.first().is_some_and(|r| r <= k)))).collect(),
        recall_all: ks.iter().map(|&k| (k, share(&|o| o.all_within(k)))).collect(),
        mrr: outcomes.iter().map(|o| o.first().map_or(0.0, |r| 1.0 / r as f64)).sum::<f64>() / n,
    }
}

/// Checks the cut-offs: 1 to [`RANKED_ROWS_MAX`], sorted and distinct on return.
pub fn check_ks(ks: &[usize]) -> Result<Vec<usize>, EvalError> {
    let mut ks = ks.to_vec();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks.iter().any(|&k| k == 0 || k > RANKED_ROWS_MAX) {
        return Err(EvalError::Arguments(format!("each k must be from 1 to {RANKED_ROWS_MAX}")));
    }
    Ok(ks)
}

/// Runs one ranker over the questions.
pub fn evaluate(ranker: &mut dyn Ranker, items: &[QaItem], ks: &[usize]) -> Result<RankerReport, EvalError> {
    let ks = check_ks(ks)?;
    let depth = RANKED_ROWS_MAX.max(ks[ks.len() - 1]);
    let mut outcomes = Vec::with_capacity(items.len());
    for item in items {
        let rows = ranker.rank(item, depth)?;
        outcomes.push(Outcome::of(item, &rows));
    }
    let largest = ks[ks.len() - 1];
    let mut by_category: BTreeMap<String, Vec<&Outcome>> = BTreeMap::new();
    for (item, outcome) in items.iter().zip(&outcomes) {
        let category = item.category.clone().unwrap_or_else(|| "uncategorized".to_owned());
        by_category.entry(category).or_default().push(outcome);
    }
    Ok(RankerReport {
        ranker: ranker.name().to_owned(),
        overall: metrics(&outcomes.iter().collect::<Vec<_>>(), &ks),
        categories: by_category.into_iter().map(|(c, o)| (c, metrics(&o, &ks))).collect(),
        missed: items
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.first().is_none_or(|r| r > largest))
            .map(|(item, _)| item.id.clone())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(evidence: &[(&str, &str)]) -> QaItem {
        QaItem {
            id: "q".to_owned(),
            question: "q".to_owned(),
            workspace: None,
            evidence: evidence
                .iter()
                .map(|(s, t)| Evidence { session: (*s).into(), turn: (*t).into() })
                .collect(),
            category: None,
        }
    }

    fn row(session: &str, turn: &str) -> RankedRow {
        (session.to_owned(), Some(turn.to_owned()))
    }

    #[test]
    fn hits_recall_and_reciprocal_rank_count_evidence_turns() {
        let two = item(&[("s1", "t1"), ("s2", "t9")]);
        let rows = [row("s1", "t2"), row("s1", "t1"), row("s3", "t1"), row("s2", "t9")];
        let outcome = Outcome::of(&two, &rows);
        assert_eq!(outcome.ranks, [Some(2), Some(4)]);
        let m = metrics(&[&outcome], &[1, 2, 4]);
        assert_eq!(m.hit, BTreeMap::from([(1, 0.0), (2, 1.0), (4, 1.0)]));
        assert_eq!(m.recall_all, BTreeMap::from([(1, 0.0), (2, 0.0), (4, 1.0)]));
        assert_eq!(m.mrr, 0.5);
        let none = Outcome::of(&two, &[(String::from("s1"), None)]);
        let both = metrics(&[&outcome, &none], &[10]);
        assert_eq!((both.hit[&10], both.mrr), (0.5, 0.25));
    }

    #[test]
    fn qa_lines_are_checked_with_their_line_numbers() {
        let good =
            r#"{"id":"a","question":"when?","evidence":[{"session":"s","turn":"t"}],"category":"when"}"#;
        assert_eq!(parse_qa(&format!("{good}\n\n"), "f").unwrap().len(), 1);
        let cases = [
            (format!("{good}\n{good}"), "f:2: id \"a\" appears twice"),
            (r#"{"id":"a","question":"x","evidence":[]}"#.to_owned(), "f:1: `evidence` must name"),
            (
                r#"{"id":"a","question":" ","evidence":[{"session":"s","turn":"t"}]}"#.to_owned(),
                "f:1: `question`",
            ),
            (
                r#"{"id":"a","question":"x","evidence":[{"session":"s","turn":"t"}],"extra":1}"#.to_owned(),
                "f:1: unknown field",
            ),
            ("not json".to_owned(), "f:1: expected"),
            (String::new(), "f:0: no questions"),
        ];
        for (text, expected) in cases {
            let error = parse_qa(&text, "f").unwrap_err().to_string();
            assert!(error.starts_with(expected), "{error} does not start with {expected}");
        }
    }

    #[test]
    fn textbook_bm25_prefers_the_rarer_term_and_the_shorter_document() {
        let mut index = Bm25Index::default();
        let s = SessionId::new("s").unwrap();
        index.add(&s, "t1", "the cat sat on the mat");
        index.add(&s, "t2", "the dog chased the cat around the big yard today");
        index.add(&s, "t3", "the zebra");
        index.add(&s, "t4", "");
        assert_eq!(index.rank("zebra cat", 10), [row("s", "t3"), row("s", "t1"), row("s", "t2")]);
        assert_eq!(index.rank("Cat!", 1), [row("s", "t1")]);
        assert!(index.rank("absent", 10).is_empty());
    }

    #[test]
    fn cut_offs_are_checked() {
        assert_eq!(check_ks(&[10, 1, 5, 5]).unwrap(), [1, 5, 10]);
        assert!(check_ks(&[0]).is_err());
        assert!(check_ks(&[]).is_err());
        assert!(check_ks(&[RANKED_ROWS_MAX + 1]).is_err());
    }
}
