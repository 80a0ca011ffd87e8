//! Memory's process-local state in a store handle: the single memory writer, the session lanes, the
//! model seams and whether the store is draining. Nothing of it is written to the log.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};

use mnemo_core::{SessionId, TimestampMs, TurnId};
use mnemo_log::Clock;
use mnemo_memory::{
    Canonicalizer, EmbeddedCanonicalizer, EmbeddedProposer, ExtractionOutcome, LocalizationSearch,
    MemoryProposer, ScanLocalization, SessionLanes,
};
use serde::Serialize;

/// Most sessions whose last backlog extraction a store handle keeps (the oldest is forgotten).
pub(crate) const LAST_EXTRACTIONS_MAX: usize = 256;

/// What the last backlog extraction of a session did, as this store handle ran it (kept in
/// memory only: a store opened afresh has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastExtraction {
    /// The session.
    pub session: SessionId,
    /// When it ended, by the store's clock.
    pub at: TimestampMs,
    /// How its last range ended.
    pub outcome: ExtractionOutcome,
    /// Items it stored.
    pub stored: u64,
    /// Model calls it made.
    pub model_calls: u32,
}

/// The model seams memory extraction uses.
#[derive(Debug, Clone)]
pub struct MemoryModels {
    /// Proposal calls.
    pub proposer: Arc<dyn MemoryProposer>,
    /// Canonicalization calls.
    pub canonicalizer: Arc<dyn Canonicalizer>,
    /// Localization searches.
    pub localization: Arc<dyn LocalizationSearch>,
}

impl Default for MemoryModels {
    fn default() -> Self {
        MemoryModels {
            proposer: Arc::new(EmbeddedProposer),
            canonicalizer: Arc::new(EmbeddedCanonicalizer),
            localization: Arc::new(ScanLocalization),
        }
    }
}

/// Memory's process-local state: the single memory writer, the session lanes, the models, and
/// whether the store is draining.
#[derive(Debug)]
pub(crate) struct MemoryRuntime {
    pub(crate) writer: Mutex<()>,
    pub(crate) lanes: SessionLanes,
    pub(crate) models: RwLock<MemoryModels>,
    pub(crate) draining: AtomicBool,
    pub(crate) clock: Arc<dyn Clock>,
    /// Turns whose `memory_extract` tool call was accepted: extraction runs when they complete.
    /// Process-local like the reference's flag; a turn flagged before a crash is not extracted
    /// on its account (the next compaction or request covers it).
    pub(crate) flagged_turns: Mutex<BTreeSet<(SessionId, TurnId)>>,
    /// The last backlog extraction of each session, at most [`LAST_EXTRACTIONS_MAX`].
    pub(crate) last_extractions: Mutex<BTreeMap<SessionId, LastExtraction>>,
}

impl MemoryRuntime {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryRuntime {
            writer: Mutex::new(()),
            lanes: SessionLanes::new(),
            models: RwLock::new(MemoryModels::default()),
            draining: AtomicBool::new(false),
            clock,
            flagged_turns: Mutex::new(BTreeSet::new()),
            last_extractions: Mutex::new(BTreeMap::new()),
        }
    }
}
