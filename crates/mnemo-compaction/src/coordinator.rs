//! The per-session checkpoint coordinator (compaction.md §4.3): it serializes each session's
//! checkpoint writes, de-duplicates loads, applies the replacement rule against the durable
//! checkpoint, and changes its cache only after the durable append has succeeded.
//!
//! Architecture invariant: no durability, no replacement. A checkpoint enters the cache (and so a
//! request) only after the recorder's append resolved; a failed append leaves cache and log as
//! they were.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use mnemo_core::{CheckpointRecord, SessionId};

use crate::checkpoint::can_replace;
use crate::error::CompactionError;
use crate::stage::LoggedCheckpoint;
use crate::summarizer::BoxFuture;

/// Where checkpoints are durably recorded and read back: the facade implements it over the log.
pub trait CheckpointRecorder: Send + Sync + std::fmt::Debug {
    /// The latest durable checkpoint of `session` (§4.4), or none.
    fn load<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> BoxFuture<'a, Result<Option<LoggedCheckpoint>, CompactionError>>;
    /// Appends the checkpoint durably to its session stream and returns it as logged.
    fn append<'a>(
        &'a self,
        checkpoint: &'a CheckpointRecord,
    ) -> BoxFuture<'a, Result<LoggedCheckpoint, CompactionError>>;
}

#[derive(Debug, Default)]
struct Slot {
    /// `None`: not loaded yet; `Some(None)`: known to have no checkpoint.
    cached: Option<Option<LoggedCheckpoint>>,
}

/// The coordinator: one per open store, keyed by session.
#[derive(Debug)]
pub struct Coordinator {
    recorder: Arc<dyn CheckpointRecorder>,
    slots: Mutex<BTreeMap<SessionId, Arc<tokio::sync::Mutex<Slot>>>>,
    busy: Mutex<BTreeSet<SessionId>>,
    /// Sessions whose log gained a checkpoint the coordinator did not write: their cache is
    /// reloaded before it is next used, under the session's lock.
    stale: Mutex<BTreeSet<SessionId>>,
}

/// A running turn on a session; manual compaction is refused while one is held.
#[derive(Debug)]
pub struct TurnGuard<'a> {
    coordinator: &'a Coordinator,
    session: SessionId,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.coordinator.busy.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.session);
    }
}

impl Coordinator {
    /// A coordinator over `recorder`.
    pub fn new(recorder: Arc<dyn CheckpointRecorder>) -> Self {
        Coordinator {
            recorder,
            slots: Mutex::new(BTreeMap::new()),
            busy: Mutex::new(BTreeSet::new()),
            stale: Mutex::new(BTreeSet::new()),
        }
    }

    fn slot(&self, session: &SessionId) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(slots.entry(session.clone()).or_default())
    }

    /// The durable checkpoint of `session`: from the cache, or loaded once however many callers
    /// ask at the same time (they wait on the same session lock and find the cache filled).
    pub async fn load(&self, session: &SessionId) -> Result<Option<LoggedCheckpoint>, CompactionError> {
        let slot = self.slot(session);
        let mut slot = slot.lock().await;
        self.load_locked(&mut slot, session).await
    }

    async fn load_locked(
        &self,
        slot: &mut Slot,
        session: &SessionId,
    ) -> Result<Option<LoggedCheckpoint>, CompactionError> {
        let stale = self.stale.lock().unwrap_or_else(PoisonError::into_inner).remove(session);
        if let Some(cached) = &slot.cached
            && !stale
        {
            return Ok(cached.clone());
        }
        let loaded = self.recorder.load(session).await?;
        slot.cached = Some(loaded.clone());
        Ok(loaded)
    }

    /// Records `checkpoint` after every earlier write of its session (whether that one failed or
    /// not): the durable checkpoint is loaded, the replacement rule applied ("superseded before
    /// persistence" otherwise), the append awaited, and only then the cache replaced.
    pub async fn record(&self, checkpoint: &CheckpointRecord) -> Result<LoggedCheckpoint, CompactionError> {
        let slot = self.slot(&checkpoint.session);
        let mut slot = slot.lock().await;
        let durable = self.load_locked(&mut slot, &checkpoint.session).await?;
        if !can_replace(durable.as_ref().map(|d| &d.checkpoint), checkpoint) {
            return Err(CompactionError::Superseded(checkpoint.checkpoint.to_string()));
        }
        // NOTE: the cache changes only after the append resolved; a failure returns here with the
        // cache untouched.
        let logged = self.recorder.append(checkpoint).await?;
        slot.cached = Some(Some(logged.clone()));
        Ok(logged)
    }

    /// Forgets what is cached for `session` (the next load reads the ledger again).
    pub async fn clear(&self, session: &SessionId) {
        let slot = self.slot(session);
        slot.lock().await.cached = None;
    }

    /// Marks the cache of `session` stale without waiting: a checkpoint record reached its stream
    /// by another path than this coordinator (a host appending records itself, an import), so the
    /// replacement rule must be applied against the log again, not against what was cached.
    pub fn invalidate(&self, session: &SessionId) {
        self.stale.lock().unwrap_or_else(PoisonError::into_inner).insert(session.clone());
    }

    /// Marks a turn as running on `session` until the guard drops; `None` if one already runs.
    pub fn begin_turn(&self, session: &SessionId) -> Option<TurnGuard<'_>> {
        let inserted = self.busy.lock().unwrap_or_else(PoisonError::into_inner).insert(session.clone());
        inserted.then(|| TurnGuard { coordinator: self, session: session.clone() })
    }

    /// Whether a turn runs on `session`.
    pub fn is_busy(&self, session: &SessionId) -> bool {
        self.busy.lock().unwrap_or_else(PoisonError::into_inner).contains(session)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use mnemo_core::{Position, TimestampMs};

    use super::*;
    use crate::testing::{GOOD_SUMMARY, build_text, sid, text_event};

    /// A recorder over a vector, whose appends can be made to fail and whose loads are counted.
    #[derive(Debug, Default)]
    struct Fake {
        log: Mutex<Vec<LoggedCheckpoint>>,
        fail: AtomicBool,
        loads: AtomicUsize,
    }

    impl CheckpointRecorder for Fake {
        fn load<'a>(
            &'a self,
            _: &'a SessionId,
        ) -> BoxFuture<'a, Result<Option<LoggedCheckpoint>, CompactionError>> {
            self.loads.fetch_add(1, Ordering::SeqCst);
            let candidates = self.log.lock().unwrap_or_else(PoisonError::into_inner).clone();
            Box::pin(async move {
                tokio::task::yield_now().await;
                Ok(crate::stage::select(&candidates).cloned())
            })
        }

        fn append<'a>(
            &'a self,
            checkpoint: &'a CheckpointRecord,
        ) -> BoxFuture<'a, Result<LoggedCheckpoint, CompactionError>> {
            Box::pin(async move {
                tokio::task::yield_now().await;
                if self.fail.load(Ordering::SeqCst) {
                    return Err(CompactionError::record(std::io::Error::other("store unavailable")));
                }
                let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
                let logged = LoggedCheckpoint {
                    position: Position(log.len() as u64 + 1),
                    timestamp: TimestampMs(log.len() as u64),
                    checkpoint: checkpoint.clone(),
                };
                log.push(logged.clone());
                Ok(logged)
            })
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().build().unwrap_or_else(|e| panic!("{e}"))
    }

    fn events(n: usize) -> Vec<mnemo_core::RuntimeEvent> {
        (1..=n).map(|i| text_event(&format!("e{i}"), &format!("t{i}"), "user", "hello")).collect()
    }

    #[test]
    fn a_failed_append_leaves_the_cache_and_the_log_unchanged_and_does_not_block_later_writes() {
        let fake = Arc::new(Fake::default());
        let coordinator = Coordinator::new(fake.clone());
        let events = events(4);
        let first = build_text(&events[..2], GOOD_SUMMARY, None);
        runtime().block_on(async {
            fake.fail.store(true, Ordering::SeqCst);
            match coordinator.record(&first).await {
                Err(CompactionError::Record(error)) => {
                    assert!(
                        error.downcast_ref::<std::io::Error>().is_some(),
                        "the recorder's own error: {error}"
                    );
                }
                other => panic!("expected a record failure, got {other:?}"),
            }
            assert_eq!(coordinator.load(&sid()).await.ok(), Some(None), "the cache is unchanged");
            fake.fail.store(false, Ordering::SeqCst);
            assert!(coordinator.record(&first).await.is_ok(), "a failed write does not block the next");
        });
        assert_eq!(fake.log.lock().map(|l| l.len()).unwrap_or_default(), 1);
    }

    #[test]
    fn a_stale_candidate_is_superseded_before_persistence() {
        let fake = Arc::new(Fake::default());
        let coordinator = Coordinator::new(fake.clone());
        let events = events(4);
        let further = build_text(&events[..3], GOOD_SUMMARY, None);
        let stale = build_text(&events[..2], GOOD_SUMMARY, None);
        let sibling = build_text(&events[..3], &GOOD_SUMMARY.replace("build", "docs"), None);
        let successor = build_text(&events[..3], &GOOD_SUMMARY.replace("build", "docs"), Some(&further));
        runtime().block_on(async {
            assert!(coordinator.record(&further).await.is_ok());
            assert!(matches!(coordinator.record(&stale).await, Err(CompactionError::Superseded(_))));
            assert!(matches!(coordinator.record(&sibling).await, Err(CompactionError::Superseded(_))));
            assert!(coordinator.record(&successor).await.is_ok(), "an explicit equal-coverage successor");
            let durable = coordinator.load(&sid()).await.ok().flatten().map(|l| l.checkpoint.checkpoint);
            assert_eq!(durable, Some(successor.checkpoint.clone()));
        });
        assert_eq!(fake.log.lock().map(|l| l.len()).unwrap_or_default(), 2);
    }

    #[test]
    fn concurrent_writes_are_serialized_and_loads_deduplicated() {
        let fake = Arc::new(Fake::default());
        let coordinator = Arc::new(Coordinator::new(fake.clone()));
        let events = events(6);
        let candidates: Vec<_> = (1..=6).map(|n| build_text(&events[..n], GOOD_SUMMARY, None)).collect();
        let (loaded, written) = runtime().block_on(async {
            let mut loads = Vec::new();
            for _ in 0..5 {
                let coordinator = Arc::clone(&coordinator);
                loads.push(tokio::spawn(async move { coordinator.load(&sid()).await.is_ok() }));
            }
            let mut writes = Vec::new();
            for candidate in candidates.into_iter().rev() {
                let coordinator = Arc::clone(&coordinator);
                writes.push(tokio::spawn(async move { coordinator.record(&candidate).await.is_ok() }));
            }
            let mut loaded = Vec::new();
            for load in loads {
                loaded.push(load.await.unwrap_or(false));
            }
            let mut written = Vec::new();
            for write in writes {
                written.push(write.await.unwrap_or(false));
            }
            (loaded, written)
        });
        assert!(loaded.iter().all(|ok| *ok));
        // Serialized in arrival order, newest coverage first: it wins and every smaller one is superseded.
        assert_eq!(written.iter().filter(|ok| **ok).count(), 1);
        assert_eq!(fake.loads.load(Ordering::SeqCst), 1, "one load for every caller");
        let log = fake.log.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].checkpoint.coverage.event_count, 6);
    }

    #[test]
    fn a_running_turn_blocks_manual_compaction() {
        let coordinator = Coordinator::new(Arc::new(Fake::default()));
        let guard = coordinator.begin_turn(&sid());
        assert!(guard.is_some() && coordinator.is_busy(&sid()));
        assert!(coordinator.begin_turn(&sid()).is_none());
        drop(guard);
        assert!(!coordinator.is_busy(&sid()));
    }
}
