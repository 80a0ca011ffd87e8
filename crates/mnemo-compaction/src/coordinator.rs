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
        Coordinator { recorder, slots: Mutex::new(BTreeMap::new()), busy: Mutex::new(BTreeSet::new()) }
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
        if let Some(cached) = &slot.cached {
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
