//! Runs `examples/host.rs` end to end and checks what it saw.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

#[expect(dead_code, reason = "the example's `main` is not called here; its `tour` is")]
#[path = "../examples/host.rs"]
mod host;

#[test]
fn the_host_example_runs_its_whole_tour() {
    let dir = tempfile::tempdir().unwrap();
    let tour = host::tour(dir.path()).unwrap();
    // Remember answers everything it stored: the request, and the preference an earlier turn stated.
    assert_eq!(
        tour.remembered,
        [
            "The release branch must never use the cache.",
            "The user prefers GitHub Actions caches over self-hosted runners."
        ]
    );
    assert!(tour.compacted, "{tour:?}");
    assert!(tour.overflow_resent, "{tour:?}");
    assert!(tour.second_overflow_surfaced, "{tour:?}");
    assert!(tour.search_rows > 0, "{tour:?}");
    // The recall tool's "release cache" finds both items: recall compares stemmed terms, so the
    // preference for GitHub Actions caches matches "cache" too.
    assert_eq!(tour.recalled, 2);
    assert!(tour.verified);
}

#[test]
fn the_host_example_overflows_in_a_new_turn_not_one_that_already_ended() {
    let dir = tempfile::tempdir().unwrap();
    let tour = host::tour(dir.path()).unwrap();
    let mnemo = mnemo::Mnemo::open(dir.path(), mnemo::Config::default()).unwrap();
    let entries = mnemo.log_entries(mnemo::records::Position(1), usize::MAX).unwrap();
    let turn_of = |entry: &mnemo::log::LogEntry| {
        let record = &entry.record;
        record.get("turnId").or_else(|| record.get("turn")).and_then(|t| t.as_str()).map(str::to_owned)
    };
    let ended: Vec<String> = entries.iter().filter(|e| e.kind == "turn_ended").filter_map(turn_of).collect();
    assert!(ended.len() >= 6, "the tour ends its first turns: {ended:?}");
    assert!(!ended.contains(&tour.overflow_turn), "turn {} had already ended: {ended:?}", tour.overflow_turn);
    let events: Vec<&mnemo::log::LogEntry> =
        entries.iter().filter(|e| turn_of(e).as_deref() == Some(tour.overflow_turn.as_str())).collect();
    assert!(!events.is_empty(), "no record of turn {}", tour.overflow_turn);
    mnemo.close().unwrap();
}
