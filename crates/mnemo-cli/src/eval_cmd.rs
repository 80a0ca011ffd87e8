//! `mnemo eval search`, and `mnemo eval facts` (a fact's current value, decision 0232): how well history search puts the evidence of questions near the top, beside
//! textbook BM25 over the same messages.
//!
//! `--qa FILE` asks the questions of a QA file against the store. `--devset` builds the project's
//! development set (`mnemo_benches::devset`) in fresh stores, one per split and ranking, and reports
//! the dev and held-out splits apart: `mnemo` (the current pipeline's ranking), `before` (the same
//! index with the ranking features of decision 0150 off, `pipelines/search-baseline.toml`) and
//! `bm25` (textbook BM25 computed by the harness), all from one run.
//!
//! `mnemo eval memory` runs the memory-quality evaluation (`mnemo_benches::memory_eval`): labelled
//! sessions extracted in fresh stores, recall and precision for its development and held-out halves.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use mnemo::{Config, Mnemo};
use mnemo_benches::devset::{self, DEVSET_SEED_DEFAULT, Split};
use mnemo_benches::fact_eval::{
    self, CURRENT_VALUE_PERCENT_MIN, FACT_SEED_DEFAULT, FACT_SEQUENCES_DEFAULT, FactReport,
};
use mnemo_benches::memory_eval::{self, MemoryEvalError};
use mnemo_benches::search_eval::{self, Bm25Ranker, EvalError, MnemoRanker, QaItem, Ranker, RankerReport};
use serde::Serialize;

use crate::term::say;
use crate::{Cli, open, output};

/// The ranking before decision 0150: the default pipeline with the history-search features off.
const BASELINE_PIPELINE: &str = include_str!("../../../pipelines/search-baseline.toml");

#[derive(Debug, Subcommand)]
pub(crate) enum EvalCommand {
    /// Rank the evidence of questions: hit@k, recall-all@k and MRR, overall and per category.
    Search(SearchEvalArgs),
    /// Recall for sessions: hit@k, recall-all@k and MRR of the items each should get.
    Recall(crate::recall_eval_cmd::RecallEvalArgs),
    /// Memory extraction on labelled sessions: recall and precision of the standing facts, for the
    /// development and held-out halves.
    Memory(MemoryEvalArgs),
    /// A fact's current value: generated sequences (a value set, changed, changed back, mentioned in
    /// passing) extracted with the embedded models in a fresh store; how often recall returns the
    /// newest value, and how often the history holds every value (decision 0232).
    Facts(FactEvalArgs),
}

#[derive(Debug, Args)]
pub(crate) struct MemoryEvalArgs {
    /// Where the sessions' stores go (default: a new temporary directory, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// List the labelled facts no item states and the items that state none.
    #[arg(long)]
    missed: bool,
}

#[derive(Debug, Args)]
pub(crate) struct FactEvalArgs {
    /// The sequences' seed.
    #[arg(long, default_value_t = FACT_SEED_DEFAULT)]
    seed: u64,
    /// How many sequences (1..=10000).
    #[arg(long, default_value_t = FACT_SEQUENCES_DEFAULT)]
    sequences: usize,
}

#[derive(Debug, Args)]
pub(crate) struct SearchEvalArgs {
    /// A QA file (JSON Lines of {id, question, workspace?, evidence: [{session, turn}], category?})
    /// asked against the store.
    #[arg(long, conflicts_with = "devset", required_unless_present = "devset")]
    qa: Option<PathBuf>,
    /// Build the project's development set in fresh stores and report its dev and held-out splits.
    #[arg(long)]
    devset: bool,
    /// The development set's seed.
    #[arg(long, default_value_t = DEVSET_SEED_DEFAULT, requires = "devset")]
    seed: u64,
    /// Where the development set's stores, transcripts and QA files go (default: a new temporary
    /// directory, removed after).
    #[arg(long, requires = "devset")]
    dir: Option<PathBuf>,
    /// The cut-offs k (comma-separated, 1..=100).
    #[arg(long, value_delimiter = ',', default_value = "1,5,10")]
    k: Vec<usize>,
    /// Rankers for `--qa`: `mnemo` (SearchHistory) and `bm25` (textbook BM25 over the transcripts).
    #[arg(long, value_delimiter = ',', default_value = "mnemo,bm25")]
    ranker: Vec<String>,
    /// List the ids of questions without a hit within the largest k.
    #[arg(long)]
    missed: bool,
}

/// Whether the evaluation reads the store (`--devset` builds stores of its own).
pub(crate) fn uses_the_store(command: &EvalCommand) -> bool {
    match command {
        EvalCommand::Search(args) => !args.devset,
        EvalCommand::Recall(_) => true,
        EvalCommand::Memory(_) => false,
        EvalCommand::Facts(_) => false,
    }
}

/// The paths the command line names.
pub(crate) fn paths_mut(command: &mut EvalCommand) -> Vec<&mut PathBuf> {
    match command {
        EvalCommand::Search(args) => args.qa.iter_mut().chain(args.dir.iter_mut()).collect(),
        EvalCommand::Recall(args) => vec![args.qa_mut()],
        EvalCommand::Memory(args) => args.dir.iter_mut().collect(),
        EvalCommand::Facts(_) => Vec::new(),
    }
}

/// A report of one set of questions.
#[derive(Debug, Serialize)]
struct SetReport {
    /// `dev`, `heldout`, or the QA file.
    name: String,
    questions: usize,
    rankers: Vec<RankerReport>,
}

pub(crate) fn run(cli: &Cli, command: &EvalCommand) -> anyhow::Result<ExitCode> {
    match command {
        EvalCommand::Search(args) => search(cli, args),
        EvalCommand::Recall(args) => crate::recall_eval_cmd::run(cli, args),
        EvalCommand::Memory(args) => memory(cli, args),
        EvalCommand::Facts(args) => facts(cli, args),
    }
}

/// Runs both halves of the memory-quality evaluation, each session in a fresh store.
fn memory(cli: &Cli, args: &MemoryEvalArgs) -> anyhow::Result<ExitCode> {
    let temporary;
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temporary = tempfile::Builder::new().prefix("mnemo-eval-").tempdir()?;
            temporary.path().to_path_buf()
        }
    };
    let mut reports = Vec::new();
    for (name, text) in [("dev", memory_eval::DEV), ("heldout", memory_eval::HELDOUT)] {
        let sessions = memory_eval::parse(text).map_err(memory_input)?;
        reports.push(memory_eval::evaluate(name, &sessions, &root).map_err(memory_input)?);
    }
    output(cli, &reports, || {
        say!(
            "  {:<8} {:>8} {:>6} {:>6} {:>8} {:>10}",
            "half",
            "sessions",
            "facts",
            "items",
            "recall",
            "precision"
        );
        for r in &reports {
            say!(
                "  {:<8} {:>8} {:>6} {:>6} {:>7.1}% {:>9.1}%",
                r.name,
                r.sessions,
                r.facts,
                r.items,
                100.0 * r.recall,
                100.0 * r.precision
            );
        }
        if args.missed {
            for r in &reports {
                r.missed.iter().for_each(|m| say!("  {} missed: {m}", r.name));
                r.wrong.iter().for_each(|w| say!("  {} wrong: {w}", r.name));
            }
        }
    });
    Ok(ExitCode::SUCCESS)
}

fn memory_input(error: MemoryEvalError) -> anyhow::Error {
    match error {
        MemoryEvalError::Store(error) => error.into(),
        other => anyhow::Error::new(other),
    }
}

/// `eval facts`: the current-value sequences in a fresh store, removed after. Exit 0 when the run
/// meets the bar ([`FactReport::passes`]), 1 when it does not.
fn facts(cli: &Cli, args: &FactEvalArgs) -> anyhow::Result<ExitCode> {
    let dir = tempfile::tempdir()?;
    let mnemo = Mnemo::open(&dir.path().join("store"), Config::default())?;
    let report = fact_eval::evaluate(&mnemo, args.seed, args.sequences)?;
    mnemo.close()?;
    output(cli, &report, || print_facts(&report));
    Ok(if report.passes() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn print_facts(report: &FactReport) {
    let percent = |n: usize| n as f64 * 100.0 / report.sequences.max(1) as f64;
    say!(
        "seed {}: {} sequences ({} passing mentions, {} changes back)\n\
         current value returned  {:>5}  {:5.1}%  (bar {CURRENT_VALUE_PERCENT_MIN}%)\n\
         history complete        {:>5}  {:5.1}%",
        report.seed,
        report.sequences,
        report.passing_mentions,
        report.changes_back,
        report.current_value,
        percent(report.current_value),
        report.history_complete,
        percent(report.history_complete)
    );
    for failure in &report.failures {
        say!("  {failure}");
    }
}

fn input(error: EvalError) -> anyhow::Error {
    match error {
        EvalError::Store(error) => error.into(),
        other => mnemo::Error::InvalidInput(other.to_string()).into(),
    }
}

fn search(cli: &Cli, args: &SearchEvalArgs) -> anyhow::Result<ExitCode> {
    let ks = search_eval::check_ks(&args.k).map_err(input)?;
    let reports = match &args.qa {
        Some(path) => vec![qa_file(cli, args, path, &ks)?],
        None => devset_run(cli, args, &ks)?,
    };
    output(cli, &reports, || {
        for report in &reports {
            print_report(report, &ks, args.missed);
        }
    });
    Ok(ExitCode::SUCCESS)
}

fn qa_file(cli: &Cli, args: &SearchEvalArgs, path: &Path, ks: &[usize]) -> anyhow::Result<SetReport> {
    let items = search_eval::read_qa(path).map_err(input)?;
    let mnemo = open(cli, true)?;
    let mut rankers = Vec::new();
    for name in &args.ranker {
        let report = match name.as_str() {
            "mnemo" => search_eval::evaluate(&mut MnemoRanker::new("mnemo", &mnemo), &items, ks),
            "bm25" => search_eval::evaluate(&mut Bm25Ranker::new(&mnemo), &items, ks),
            other => {
                return Err(mnemo::Error::InvalidInput(format!(
                    "unknown ranker {other:?}; known: mnemo, bm25"
                ))
                .into());
            }
        };
        rankers.push(report.map_err(input)?);
    }
    Ok(SetReport { name: path.display().to_string(), questions: items.len(), rankers })
}

fn devset_run(cli: &Cli, args: &SearchEvalArgs, ks: &[usize]) -> anyhow::Result<Vec<SetReport>> {
    let temporary;
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temporary = tempfile::Builder::new().prefix("mnemo-eval-").tempdir()?;
            temporary.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&root)?;
    let baseline = root.join("search-baseline.toml");
    std::fs::write(&baseline, BASELINE_PIPELINE)?;
    let mut reports = Vec::new();
    for split in devset::devset(args.seed).map_err(input)? {
        write_split(&root, &split)?;
        let after = import_split(&root.join(format!("{}-mnemo", split.name)), cli.pipeline.clone(), &split)?;
        let before =
            import_split(&root.join(format!("{}-before", split.name)), Some(baseline.clone()), &split)?;
        let rankers = vec![
            evaluate(&mut MnemoRanker::new("mnemo", &after), &split.questions, ks)?,
            evaluate(&mut MnemoRanker::new("before", &before), &split.questions, ks)?,
            evaluate(&mut Bm25Ranker::new(&after), &split.questions, ks)?,
        ];
        reports.push(SetReport { name: split.name.to_owned(), questions: split.questions.len(), rankers });
    }
    Ok(reports)
}

fn evaluate(ranker: &mut dyn Ranker, items: &[QaItem], ks: &[usize]) -> anyhow::Result<RankerReport> {
    search_eval::evaluate(ranker, items, ks).map_err(input)
}

/// Leaves the split's transcripts and questions beside its stores, to read or to evaluate again
/// with `--qa`: `<split>.qa.jsonl` and `<split>-transcripts/`.
fn write_split(root: &Path, split: &Split) -> anyhow::Result<()> {
    let transcripts = root.join(format!("{}-transcripts", split.name));
    std::fs::create_dir_all(&transcripts)?;
    for file in &split.files {
        let name = Path::new(&file.name).file_name().unwrap_or_default();
        std::fs::write(transcripts.join(name), &file.text)?;
    }
    let mut qa = String::new();
    for question in &split.questions {
        qa.push_str(&serde_json::to_string(question)?);
        qa.push('\n');
    }
    std::fs::write(root.join(format!("{}.qa.jsonl", split.name)), qa)?;
    Ok(())
}

/// A fresh store with the split's transcripts imported.
fn import_split(dir: &Path, pipeline: Option<PathBuf>, split: &Split) -> anyhow::Result<Mnemo> {
    if dir.exists() {
        return Err(mnemo::Error::InvalidInput(format!(
            "{} already exists; give an empty --dir",
            dir.display()
        ))
        .into());
    }
    let mnemo = Mnemo::open(dir, Config { pipeline, ..Config::default() })?;
    for file in &split.files {
        let format = match file.format {
            "claude-code" => mnemo::transcript::ImportFormat::ClaudeCode,
            _ => mnemo::transcript::ImportFormat::Mnemo,
        };
        mnemo.import(file.text.as_bytes(), &file.name, format)?;
    }
    Ok(mnemo)
}

fn print_report(report: &SetReport, ks: &[usize], missed: bool) {
    say!("{} — {} questions", report.name, report.questions);
    let largest = ks[ks.len() - 1];
    let mut header = format!("  {:<12} {:>4}", "category", "n");
    for ranker in &report.rankers {
        for k in ks {
            header.push_str(&format!(" {:>10}", format!("{}@{k}", ranker.ranker)));
        }
        header.push_str(&format!(" {:>10} {:>7}", format!("all@{largest}"), "MRR"));
    }
    say!("{header}");
    let Some(first) = report.rankers.first() else {
        return;
    };
    let mut rows = vec![("overall".to_owned(), first.overall.questions)];
    rows.extend(first.categories.iter().map(|(name, m)| (name.clone(), m.questions)));
    for (category, n) in rows {
        let mut line = format!("  {category:<12} {n:>4}");
        for ranker in &report.rankers {
            let metrics =
                if category == "overall" { Some(&ranker.overall) } else { ranker.categories.get(&category) };
            let Some(m) = metrics else { continue };
            for k in ks {
                line.push_str(&format!(" {:>9.1}%", 100.0 * m.hit.get(k).copied().unwrap_or(0.0)));
            }
            let all = m.recall_all.get(&largest).copied().unwrap_or(0.0);
            line.push_str(&format!(" {:>9.1}% {:>7.3}", 100.0 * all, m.mrr));
        }
        say!("{line}");
    }
    if missed {
        for ranker in &report.rankers {
            say!("  {} missed: {}", ranker.ranker, ranker.missed.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_baseline_pipeline_differs_from_the_default_only_in_history_search() {
        let baseline = super::BASELINE_PIPELINE;
        let settings = baseline.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
        let tables: Vec<&str> = settings.clone().filter(|l| l.starts_with('[')).collect();
        assert!(settings.clone().any(|l| l == "extends = \"default\""), "{baseline}");
        assert_eq!(tables, ["[config.history-search]"]);
    }
}
