//! The fitting guarantee over every fixture and window: the real Claude Code sessions under
//! `tests/fixtures/real/` and generated long single-request sessions in Claude Code and Codex
//! format, each at 8k, 32k and 128k. The next request's history fits its budget or carries a typed
//! reason; it is never over budget silently. Fact retention is measured by `mnemo bench
//! --context-quality`; here the user's constraints and the changed files must survive at 32k.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;

use mnemo_benches::context_quality::{self, WINDOWS};

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real")
}

#[test]
fn every_fixture_and_window_fits_or_says_why() {
    let mut corpus = context_quality::real_corpus(&fixtures()).unwrap();
    corpus.extend(context_quality::generated_corpus(7));
    assert!(corpus.len() >= 9, "the real fixtures and the generated sessions");
    let dir = tempfile::tempdir().unwrap();
    // One thread per window: the run waits on the pipeline far more than it computes.
    std::thread::scope(|scope| {
        for window in WINDOWS {
            let (corpus, dir) = (&corpus, dir.path());
            scope.spawn(move || {
                for (index, session) in corpus.iter().enumerate() {
                    let store = dir.join(format!("{index}-{window}"));
                    let row = context_quality::evaluate(&store, session, window).unwrap();
                    let name = format!("{} at {window}", row.session);
                    assert!(
                        row.fits || row.unfit_reason.is_some(),
                        "{name}: over budget without a reason: {row:?}"
                    );
                    if row.fits {
                        assert!(row.tokens <= row.budget, "{name}: {row:?}");
                    }
                    if window == 32_768 {
                        let (found, listed) = row.constraints_and_files;
                        assert_eq!(
                            found, listed,
                            "{name}: constraints and changed files lost: {:?}",
                            row.missing
                        );
                    }
                    std::fs::remove_dir_all(&store).unwrap();
                }
            });
        }
    });
}
