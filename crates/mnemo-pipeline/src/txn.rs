//! A projector's view while it folds envelopes: pending changes over the committed state.

use crate::error::PipelineError;
use crate::store::{Changes, Pair, StateStore};

/// Reads see the changes made so far in this commit, then the committed state.
#[derive(Debug)]
pub struct StateTxn<'a> {
    base: &'a dyn StateStore,
    changes: &'a mut Changes,
}

impl<'a> StateTxn<'a> {
    /// A transaction over `base` that collects its writes into `changes`. The runner makes these;
    /// domain crates use it to test a projector on a [`crate::MemoryStore`] outside a pipeline.
    pub fn new(base: &'a dyn StateStore, changes: &'a mut Changes) -> Self {
        StateTxn { base, changes }
    }

    /// The value at `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, PipelineError> {
        match self.changes.get(key) {
            Some(change) => Ok(change.clone()),
            None => self.base.get(key),
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.changes.insert(key, Some(value));
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.changes.insert(key, None);
    }

    /// Every pair whose key starts with `prefix`, in key order, with this commit's changes applied.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<Pair>, PipelineError> {
        let mut merged = std::collections::BTreeMap::new();
        self.base.scan_prefix(prefix, &mut |key, value| {
            merged.insert(key.to_vec(), value.to_vec());
            true
        })?;
        for (key, change) in self.changes.range(prefix.to_vec()..) {
            if !key.starts_with(prefix) {
                break;
            }
            match change {
                Some(value) => merged.insert(key.clone(), value.clone()),
                None => merged.remove(key),
            };
        }
        Ok(merged.into_iter().collect())
    }
}
