//! An in-memory [`MemoryLedger`] for tests and examples: records in a vector, folded at once
//! into a [`MemoryStore`] by the real projector.

use std::sync::{Arc, Mutex, PoisonError};

use mnemo_core::{Position, Record, StreamRevision, TimestampMs};
use mnemo_pipeline::{Changes, LoggedRecord, MemoryStore, Projector, StageMeta, StateStore, StateTxn};

use crate::error::MemoryError;
use crate::index::MemoryIndex;
use crate::ops::MemoryLedger;

#[derive(Debug, Default)]
struct Inner {
    records: Vec<Record>,
    now: u64,
}

/// A ledger whose log is a vector and whose clock advances 1 ms per write.
#[derive(Debug)]
pub struct VecLedger {
    inner: Mutex<Inner>,
    store: Arc<MemoryStore>,
}

impl VecLedger {
    /// An empty ledger whose clock starts at `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        VecLedger {
            inner: Mutex::new(Inner { records: Vec::new(), now: start_ms }),
            store: Arc::new(MemoryStore::new()),
        }
    }

    /// Every record appended so far.
    pub fn records(&self) -> Vec<Record> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).records.clone()
    }

    /// Folds `records` into a fresh store with the real projector (a rebuild).
    pub fn fold(records: &[Record]) -> Result<MemoryStore, MemoryError> {
        let store = MemoryStore::new();
        for (index, record) in records.iter().enumerate() {
            apply(&store, index as u64 + 1, record)?;
        }
        Ok(store)
    }

    /// Appends a record without a decision (as another writer or a replayed log would).
    pub fn append_raw(&self, record: Record) -> Result<(), MemoryError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.records.push(record.clone());
        apply(self.store.as_ref(), inner.records.len() as u64, &record)
    }
}

fn apply(store: &MemoryStore, position: u64, record: &Record) -> Result<(), MemoryError> {
    record.encode()?;
    let logged = LoggedRecord {
        position: Position(position),
        stream: record.stream(),
        revision: StreamRevision(0),
        timestamp: TimestampMs(0),
        record: record.clone(),
    };
    let mut changes = Changes::new();
    let mut txn = StateTxn::new(store, &mut changes);
    MemoryIndex.apply(&mut txn, &logged)?;
    let meta =
        StageMeta { watermark: Position(position), version: MemoryIndex.version(), config_hash: [0; 32] };
    store.commit(&changes, &meta)?;
    Ok(())
}

impl MemoryLedger for VecLedger {
    fn state(&self) -> Result<Arc<dyn StateStore>, MemoryError> {
        Ok(Arc::clone(&self.store) as Arc<dyn StateStore>)
    }

    fn write(&self, decide: &mut crate::ops::Decide<'_>) -> Result<(), MemoryError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.now += 1;
        let now = TimestampMs(inner.now);
        if let Some(record) = decide(self.store.as_ref(), now)? {
            inner.records.push(record.clone());
            apply(self.store.as_ref(), inner.records.len() as u64, &record)?;
        }
        Ok(())
    }
}
