//! The inspector's way into the store: the store server's read methods, and nothing else.
//!
//! Architecture invariant: the inspector never writes. [`Reads::call`] takes only a
//! [`ReadMethod`], which the methods' table implements for the methods it marks `read_only` and for
//! no other; `append`, `import`, `memory/remember` and `shutdown` are not, so a call to them does
//! not compile.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::client::{Client, ClientError, ConnectOptions};
use crate::methods::{self as m, LOG_ENTRIES_MAX, LogParams, ReadMethod};

/// Connections to the store server, shared by the inspector's request threads: one per call in
/// flight (at most [`READ_CONNECTIONS_MAX`] kept idle), each opened again after it breaks. Calls on
/// separate connections run side by side, so a page's timeline and context load together.
#[derive(Debug)]
pub(crate) struct Reads {
    store: PathBuf,
    connect: ConnectOptions,
    idle: Mutex<Vec<Client>>,
}

/// Most idle connections to the store server kept for the next calls.
pub(crate) const READ_CONNECTIONS_MAX: usize = 4;

impl Reads {
    pub(crate) fn new(store: PathBuf, connect: ConnectOptions) -> Reads {
        Reads { store, connect, idle: Mutex::new(Vec::new()) }
    }

    /// Connects now (starting the store server if the options say so), so that a store that cannot
    /// be served is reported before the inspector's address is printed.
    pub(crate) fn connect(&self) -> Result<(), ClientError> {
        let client = Client::connect(&self.store, &self.connect)?;
        self.put_back(client);
        Ok(())
    }

    fn put_back(&self, client: Client) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < READ_CONNECTIONS_MAX {
            idle.push(client);
        }
    }

    /// Calls a read method; a broken connection is opened again once (every read method is
    /// repeatable).
    pub(crate) fn call<M: ReadMethod>(&self, params: &M::Params) -> Result<M::Result, ClientError> {
        let taken = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        if let Some(mut client) = taken {
            match client.call::<M>(params) {
                Err(ClientError::Rpc(error)) => {
                    self.put_back(client);
                    return Err(ClientError::Rpc(error));
                }
                // A broken connection is dropped; a fresh one answers below.
                Err(_) => {}
                Ok(result) => {
                    self.put_back(client);
                    return Ok(result);
                }
            }
        }
        let mut client = Client::connect(&self.store, &self.connect)?;
        let result = client.call::<M>(params);
        let healthy = matches!(result, Ok(_) | Err(ClientError::Rpc(_)));
        if healthy {
            self.put_back(client);
        }
        result
    }

    /// Every envelope of `stream`, in order: read by stream, however long the log.
    pub(crate) fn stream(&self, stream: &str) -> Result<Vec<Value>, ClientError> {
        let mut out = Vec::new();
        loop {
            let params = LogParams {
                from: Some(out.len() as u64),
                limit: Some(LOG_ENTRIES_MAX),
                stream: Some(stream.to_owned()),
                last: false,
            };
            let page = self.call::<m::Log>(&params)?;
            let full = page.len() as u64 == LOG_ENTRIES_MAX;
            out.extend(page.into_iter().map(Value::Object));
            if !full {
                return Ok(out);
            }
        }
    }

    /// The first `count` envelopes of `stream` and its last one (`None` when the stream is empty).
    pub(crate) fn stream_ends(
        &self,
        stream: &str,
        count: u64,
    ) -> Result<(Vec<Value>, Option<Value>), ClientError> {
        let first =
            LogParams { from: Some(0), limit: Some(count), stream: Some(stream.to_owned()), last: false };
        let head = self.call::<m::Log>(&first)?.into_iter().map(Value::Object).collect();
        let last = LogParams { from: None, limit: Some(1), stream: Some(stream.to_owned()), last: true };
        let tail = self.call::<m::Log>(&last)?.into_iter().next().map(Value::Object);
        Ok((head, tail))
    }

    /// The envelopes of the memory streams of `scopes` (`global`, `workspace:<id>`), in log order.
    pub(crate) fn memory(&self, scopes: &BTreeSet<String>) -> Result<Vec<Value>, ClientError> {
        let mut out = Vec::new();
        for scope in scopes {
            out.extend(self.stream(&format!("memory/{scope}"))?);
        }
        out.sort_by_key(|entry| entry.get("position").and_then(Value::as_u64).unwrap_or_default());
        Ok(out)
    }
}
