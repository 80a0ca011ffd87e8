//! `mnemo eval recall`: how well recall brings the items a session should get, over a store.
//!
//! The QA file is JSON Lines of `{"id", "session", "query"?, "expected": [TEXT, ...], "category"?}`:
//! without a query, the session's push block is asked (what the next request would carry); with
//! one, the pull tool. An expected text is found at the rank of the first recalled item whose
//! content contains it (case-insensitive). Reported per question set, overall and per category:
//! hit@k (some expected item in the first k), recall-all@k (every expected item in the first k) and
//! MRR (the reciprocal rank of the first expected item).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use mnemo::memory::RecallMemory;
use mnemo::records::SessionId;
use serde::{Deserialize, Serialize};

use crate::term::say;
use crate::{Cli, open, output};

/// Most questions one QA file may hold.
const RECALL_QA_QUESTIONS_MAX: usize = 10_000;
/// Largest cut-off k.
const RECALL_EVAL_K_MAX: usize = 50;

#[derive(Debug, Args)]
pub(crate) struct RecallEvalArgs {
    /// A QA file: JSON Lines of {id, session, query?, expected: [text], category?}.
    #[arg(long)]
    qa: PathBuf,
    /// The cut-offs k (comma-separated, 1..=50).
    #[arg(long, value_delimiter = ',', default_value = "1,5,10")]
    k: Vec<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Question {
    id: String,
    session: String,
    #[serde(default)]
    query: Option<String>,
    expected: Vec<String>,
    #[serde(default)]
    category: Option<String>,
}

#[derive(Debug, Default, Serialize)]
struct Metrics {
    questions: usize,
    hit: BTreeMap<usize, f64>,
    recall_all: BTreeMap<usize, f64>,
    mrr: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    qa: String,
    overall: Metrics,
    categories: BTreeMap<String, Metrics>,
    missed: Vec<String>,
}

fn input(message: String) -> anyhow::Error {
    mnemo::Error::InvalidInput(message).into()
}

fn read_qa(path: &Path) -> anyhow::Result<Vec<Question>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| input(format!("cannot read QA file {}: {e}", path.display())))?;
    let mut questions = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = format!("{} line {}", path.display(), index + 1);
        let question: Question = serde_json::from_str(line).map_err(|e| input(format!("{at}: {e}")))?;
        if question.expected.is_empty() || question.expected.iter().any(|e| e.trim().is_empty()) {
            return Err(input(format!("{at}: expected must hold at least one non-empty text")));
        }
        questions.push(question);
        if questions.len() > RECALL_QA_QUESTIONS_MAX {
            return Err(input(format!("{at}: more than {RECALL_QA_QUESTIONS_MAX} questions")));
        }
    }
    if questions.is_empty() {
        return Err(input(format!("{} holds no question", path.display())));
    }
    Ok(questions)
}

/// The 1-based rank of each expected text among `contents`, `None` when not recalled.
fn ranks(contents: &[String], expected: &[String]) -> Vec<Option<usize>> {
    expected
        .iter()
        .map(|e| {
            let needle = e.to_lowercase();
            contents.iter().position(|c| c.to_lowercase().contains(&needle)).map(|p| p + 1)
        })
        .collect()
}

fn add(metrics: &mut Metrics, ranks: &[Option<usize>], ks: &[usize]) {
    metrics.questions += 1;
    let first = ranks.iter().flatten().min().copied();
    for k in ks {
        let hit = first.is_some_and(|r| r <= *k);
        let all = ranks.iter().all(|r| r.is_some_and(|r| r <= *k));
        *metrics.hit.entry(*k).or_default() += f64::from(u8::from(hit));
        *metrics.recall_all.entry(*k).or_default() += f64::from(u8::from(all));
    }
    metrics.mrr += first.map_or(0.0, |r| 1.0 / r as f64);
}

fn finish(metrics: &mut Metrics) {
    let n = metrics.questions.max(1) as f64;
    metrics.hit.values_mut().chain(metrics.recall_all.values_mut()).for_each(|v| *v /= n);
    metrics.mrr /= n;
}

impl RecallEvalArgs {
    /// The QA file's path.
    pub(crate) fn qa_mut(&mut self) -> &mut PathBuf {
        &mut self.qa
    }
}

pub(crate) fn run(cli: &Cli, args: &RecallEvalArgs) -> anyhow::Result<ExitCode> {
    let mut ks = args.k.clone();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks.iter().any(|k| *k == 0 || *k > RECALL_EVAL_K_MAX) {
        return Err(input(format!("--k takes cut-offs from 1 to {RECALL_EVAL_K_MAX}")));
    }
    let questions = read_qa(&args.qa)?;
    let mnemo = open(cli, true)?;
    let mut report = Report {
        qa: args.qa.display().to_string(),
        overall: Metrics::default(),
        categories: BTreeMap::new(),
        missed: Vec::new(),
    };
    let largest = ks[ks.len() - 1];
    for question in &questions {
        let session = SessionId::new(question.session.as_str())
            .map_err(|e| input(format!("question {}: session: {e}", question.id)))?;
        let contents: Vec<String> = match &question.query {
            Some(query) => {
                let request = RecallMemory { query: query.clone(), limit: Some(largest as u64) };
                mnemo.memory().recall(&session, &request)?.into_iter().map(|i| i.content).collect()
            }
            None => {
                mnemo.memory().recall_block(&session, None)?.items.into_iter().map(|i| i.content).collect()
            }
        };
        let ranks = ranks(&contents, &question.expected);
        if !ranks.iter().flatten().any(|r| *r <= largest) {
            report.missed.push(question.id.clone());
        }
        add(&mut report.overall, &ranks, &ks);
        let category = question.category.clone().unwrap_or_else(|| "uncategorized".to_owned());
        add(report.categories.entry(category).or_default(), &ranks, &ks);
    }
    finish(&mut report.overall);
    report.categories.values_mut().for_each(finish);
    output(cli, &report, || print(&report, &ks));
    Ok(ExitCode::SUCCESS)
}

fn print(report: &Report, ks: &[usize]) {
    let largest = ks[ks.len() - 1];
    say!("{} — {} questions", report.qa, report.overall.questions);
    let mut header = format!("  {:<16} {:>4}", "category", "n");
    for k in ks {
        header.push_str(&format!(" {:>8}", format!("hit@{k}")));
    }
    header.push_str(&format!(" {:>8} {:>7}", format!("all@{largest}"), "MRR"));
    say!("{header}");
    let rows = std::iter::once(("overall", &report.overall))
        .chain(report.categories.iter().map(|(name, m)| (name.as_str(), m)));
    for (name, m) in rows {
        let mut line = format!("  {name:<16} {:>4}", m.questions);
        for k in ks {
            line.push_str(&format!(" {:>7.1}%", 100.0 * m.hit.get(k).copied().unwrap_or(0.0)));
        }
        let all = m.recall_all.get(&largest).copied().unwrap_or(0.0);
        line.push_str(&format!(" {:>7.1}% {:>7.3}", 100.0 * all, m.mrr));
        say!("{line}");
    }
    if !report.missed.is_empty() {
        say!("  missed: {}", report.missed.join(", "));
    }
}
