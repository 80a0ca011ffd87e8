//! The memory-quality evaluation's held-out half meets its targets: recall and precision of at
//! least 90% with the embedded proposer. The development half is run and reported beside it.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use mnemo_benches::memory_eval::{DEV, HELDOUT, HalfReport, evaluate, parse};

/// The held-out targets.
const RECALL_MIN: f64 = 0.9;
const PRECISION_MIN: f64 = 0.9;

/// Runs one half and prints its numbers; the misses and wrong items only of the development half,
/// the one the rules are tuned on.
fn run(name: &str, text: &str, details: bool) -> HalfReport {
    let dir = tempfile::tempdir().unwrap();
    let report = evaluate(name, &parse(text).unwrap(), dir.path()).unwrap();
    eprintln!(
        "{name}: recall {}/{} = {:.3}, precision {}/{} = {:.3}",
        report.found, report.facts, report.recall, report.correct, report.items, report.precision,
    );
    if details {
        eprintln!("  missed: {:#?}\n  wrong: {:#?}", report.missed, report.wrong);
    }
    report
}

#[test]
fn the_held_out_half_meets_recall_and_precision_targets() {
    let dev = run("dev", DEV, true);
    assert!(dev.facts > 0 && dev.items > 0, "the development half extracted nothing");
    let heldout = run("heldout", HELDOUT, false);
    assert!(heldout.recall >= RECALL_MIN, "held-out recall {:.3}", heldout.recall);
    assert!(heldout.precision >= PRECISION_MIN, "held-out precision {:.3}", heldout.precision);
}
