//! The inspector's way into the store: the store server's read methods, and nothing else.
//!
//! Architecture invariant: the inspector never writes. [`Reads::call`] takes only methods marked
//! [`ReadMethod`]; `append`, `import`, `memory/remember` and `shutdown` are not, so a call to them
//! does not compile.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::client::{Client, ClientError, ConnectOptions};
use crate::methods::{self as m, LOG_ENTRIES_MAX, LogParams, Method};

/// A method that only reads the store.
pub(crate) trait ReadMethod: Method {}

impl ReadMethod for m::Sessions {}
impl ReadMethod for m::Transcript {}
impl ReadMethod for m::SearchHistory {}
impl ReadMethod for m::ReadHistory {}
impl ReadMethod for m::Recall {}
impl ReadMethod for m::MemoryGet {}
impl ReadMethod for m::Context {}
impl ReadMethod for m::Stats {}
impl ReadMethod for m::Verify {}
impl ReadMethod for m::Log {}

/// One connection to the store server, shared by the inspector's request threads (one call at a
/// time), opened again after it breaks.
#[derive(Debug)]
pub(crate) struct Reads {
    store: PathBuf,
    connect: ConnectOptions,
    client: Mutex<Option<Client>>,
    index: Mutex<LogIndex>,
}

impl Reads {
    pub(crate) fn new(store: PathBuf, connect: ConnectOptions) -> Reads {
        Reads { store, connect, client: Mutex::new(None), index: Mutex::new(LogIndex::default()) }
    }

    /// Connects now (starting the store server if the options say so), so that a store that cannot
    /// be served is reported before the inspector's address is printed.
    pub(crate) fn connect(&self) -> Result<(), ClientError> {
        let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if client.is_none() {
            *client = Some(Client::connect(&self.store, &self.connect)?);
        }
        Ok(())
    }

    /// Calls a read method; a broken connection is opened again once (every read method is
    /// repeatable).
    pub(crate) fn call<M: ReadMethod>(&self, params: &M::Params) -> Result<M::Result, ClientError> {
        let mut slot = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = slot.as_mut() {
            match client.call::<M>(params) {
                Err(ClientError::Rpc(error)) => return Err(ClientError::Rpc(error)),
                Err(_) => *slot = None,
                Ok(result) => return Ok(result),
            }
        }
        let mut client = Client::connect(&self.store, &self.connect)?;
        let result = client.call::<M>(params);
        *slot = Some(client);
        result
    }

    /// Envelopes at `positions` (ascending), fetched in runs of consecutive positions.
    pub(crate) fn envelopes(&self, positions: &[u64]) -> Result<Vec<Value>, ClientError> {
        let mut out = Vec::with_capacity(positions.len());
        let mut at = 0;
        while at < positions.len() {
            let start = positions[at];
            let mut run = 1;
            while at + run < positions.len()
                && positions[at + run] == start + run as u64
                && (run as u64) < LOG_ENTRIES_MAX
            {
                run += 1;
            }
            let page = self.call::<m::Log>(&LogParams { from: Some(start), limit: Some(run as u64) })?;
            out.extend(page.into_iter().map(Value::Object));
            at += run;
        }
        Ok(out)
    }

    /// Runs `body` on the log index brought up to the log's head.
    pub(crate) fn with_index<T>(&self, body: impl FnOnce(&LogIndex) -> T) -> Result<T, ClientError> {
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        index.catch_up(self)?;
        Ok(body(&index))
    }
}

/// Which positions each stream holds, read once from the log and extended as it grows; the
/// envelopes of the small, often-read streams (`memory/...`) are kept whole.
#[derive(Debug, Default)]
pub(crate) struct LogIndex {
    /// The last position read.
    through: u64,
    streams: BTreeMap<String, Vec<u64>>,
    memory: Vec<Value>,
}

impl LogIndex {
    fn catch_up(&mut self, reads: &Reads) -> Result<(), ClientError> {
        loop {
            let page = reads
                .call::<m::Log>(&LogParams { from: Some(self.through + 1), limit: Some(LOG_ENTRIES_MAX) })?;
            let count = page.len() as u64;
            for entry in page {
                let Some(position) = entry.get("position").and_then(Value::as_u64) else { continue };
                let stream = entry.get("stream").and_then(Value::as_str).unwrap_or_default().to_owned();
                if stream.starts_with("memory/") {
                    self.memory.push(Value::Object(entry.clone()));
                }
                self.streams.entry(stream).or_default().push(position);
                self.through = self.through.max(position);
            }
            if count < LOG_ENTRIES_MAX {
                return Ok(());
            }
        }
    }

    /// The positions of `stream`, ascending.
    pub(crate) fn positions(&self, stream: &str) -> &[u64] {
        self.streams.get(stream).map_or(&[], Vec::as_slice)
    }

    /// Every envelope of the `memory/...` streams, in log order.
    pub(crate) fn memory(&self) -> &[Value] {
        &self.memory
    }

    /// The last position read.
    pub(crate) fn head(&self) -> u64 {
        self.through
    }
}
