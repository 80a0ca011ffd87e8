//! Damage confined to one stage's keyspace (a projection, derived from the log) is repaired by
//! `rebuild` without salvage: `verify` names the damaged stage and exits 1, `rebuild --stage` of that
//! stage makes `verify` pass again, and the log is untouched throughout (the same envelopes and
//! hashes before the damage, after it and after the rebuild).
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::path::Path;

use mnemo::{Config, Mnemo};

use support::{SAMPLE, mnemo};

const STAGE: &str = "history-messages";

fn log_json(store: &Path) -> String {
    let output = mnemo(store, &["log", "--limit", "100000", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Changes one value of the stage's own keyspace, and nothing else, with the storage engine itself
/// (a bit of projection data gone bad).
fn damage_stage(store: &Path, stage: &str) {
    let db = fjall::Database::builder(store.join("db")).open().unwrap();
    let keyspace = db.keyspace(&format!("stage.{stage}"), fjall::KeyspaceCreateOptions::default).unwrap();
    let (key, value) = keyspace.iter().next().unwrap().into_inner().unwrap();
    let mut changed = value.to_vec();
    let last = changed.len() - 1;
    changed[last] ^= 0x01;
    keyspace.insert(key, changed).unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
}

#[test]
fn projection_only_damage_is_named_by_verify_and_repaired_by_rebuild_with_the_log_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let mnemo = Mnemo::open(&store, Config::default()).unwrap();
        mnemo.import_transcript(&std::fs::read(SAMPLE).unwrap(), SAMPLE).unwrap();
        mnemo.catch_up().unwrap();
        mnemo.close().unwrap();
    }
    let before = log_json(&store);
    assert_eq!(mnemo(&store, &["verify"]).status.code(), Some(0));

    damage_stage(&store, STAGE);
    let verify = mnemo(&store, &["verify"]);
    let said =
        format!("{}{}", String::from_utf8_lossy(&verify.stdout), String::from_utf8_lossy(&verify.stderr));
    assert_eq!(verify.status.code(), Some(1), "verify must fail on the damaged stage:\n{said}");
    assert!(said.contains(STAGE), "verify must name the damaged stage:\n{said}");
    assert_eq!(log_json(&store), before, "projection damage changed the log");

    let rebuild = mnemo(&store, &["rebuild", "--stage", STAGE]);
    assert_eq!(rebuild.status.code(), Some(0), "{}", String::from_utf8_lossy(&rebuild.stderr));
    let verify = mnemo(&store, &["verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stdout));
    assert_eq!(log_json(&store), before, "the rebuild changed the log");
}
