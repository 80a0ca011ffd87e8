//! Runs `examples/host.rs` end to end and checks what it saw.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

#[expect(dead_code, reason = "the example's `main` is not called here; its `tour` is")]
#[path = "../examples/host.rs"]
mod host;

#[test]
fn the_host_example_runs_its_whole_tour() {
    let dir = tempfile::tempdir().unwrap();
    let tour = host::tour(dir.path()).unwrap();
    assert_eq!(tour.remembered, ["the release branch must never use the cache"]);
    assert!(tour.compacted, "{tour:?}");
    assert!(tour.overflow_resent, "{tour:?}");
    assert!(tour.second_overflow_surfaced, "{tour:?}");
    assert!(tour.search_rows > 0, "{tour:?}");
    assert_eq!(tour.recalled, 1);
    assert!(tour.verified);
}
