//! How to reach a JetStream cluster and which stream holds the store's log.

use std::sync::Arc;

use mnemo_log::{Clock, KeyRulesOf, SystemClock};

use crate::limits::{REPLICAS_MAX, STREAM_NAME_BYTES_MAX};

/// The JetStream stream a store uses when its configuration names none.
pub const DEFAULT_STREAM_NAME: &str = "MNEMO";

/// A log location that cannot be used, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The server list is empty or a server is not a `nats://host:port` address.
    #[error("invalid NATS server list {0:?}: expected nats://HOST:PORT[,nats://HOST:PORT...]")]
    Servers(String),
    /// The stream name is empty, too long, or holds a character other than `A-Z a-z 0-9 - _`.
    #[error("invalid JetStream stream name {0:?}: 1 to {STREAM_NAME_BYTES_MAX} of A-Z a-z 0-9 - _")]
    StreamName(String),
    /// The replica count is outside 1 to 5.
    #[error("invalid replica count {0}: JetStream allows 1 to {REPLICAS_MAX}")]
    Replicas(usize),
}

/// How to open a [`crate::NatsLog`].
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// The cluster's servers, each `nats://HOST:PORT`; the client fails over between them.
    pub servers: Vec<String>,
    /// The JetStream stream holding the store's log: one per store, shared by every host of it.
    pub stream: String,
    /// Replicas of the JetStream stream when this open creates it (an existing stream keeps its own).
    pub replicas: usize,
    /// Where append timestamps come from.
    pub clock: Arc<dyn Clock>,
    /// The key rules of an envelope (`mnemo-core` supplies them): the index folds every host's
    /// envelopes' keys with it, and an append's rules are checked against them. Without it, no
    /// key is indexed and no rule can hold.
    pub key_rules_of: Option<KeyRulesOf>,
}

impl NatsOptions {
    /// Options for `servers` (comma-separated `nats://HOST:PORT` addresses) and the stream `stream`,
    /// with three replicas when there are at least three servers, else one.
    pub fn new(servers: &str, stream: &str) -> Result<NatsOptions, OptionsError> {
        let servers = parse_servers(servers)?;
        check_stream_name(stream)?;
        let replicas = if servers.len() >= 3 { 3 } else { 1 };
        Ok(NatsOptions {
            servers,
            stream: stream.to_owned(),
            replicas,
            clock: Arc::new(SystemClock),
            key_rules_of: None,
        })
    }

    /// Checks every field: the servers, the stream name and the replica count.
    pub fn check(&self) -> Result<(), OptionsError> {
        if self.servers.is_empty() {
            return Err(OptionsError::Servers(String::new()));
        }
        parse_servers(&self.servers.join(","))?;
        check_stream_name(&self.stream)?;
        if !(1..=REPLICAS_MAX).contains(&self.replicas) {
            return Err(OptionsError::Replicas(self.replicas));
        }
        Ok(())
    }
}

fn parse_servers(text: &str) -> Result<Vec<String>, OptionsError> {
    let servers: Vec<String> =
        text.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    let valid = |server: &String| {
        server.strip_prefix("nats://").is_some_and(|rest| {
            let (host, port) = rest.rsplit_once(':').unwrap_or((rest, "4222"));
            !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok()
        })
    };
    if servers.is_empty() || !servers.iter().all(valid) {
        return Err(OptionsError::Servers(text.to_owned()));
    }
    Ok(servers)
}

fn check_stream_name(name: &str) -> Result<(), OptionsError> {
    let valid = !name.is_empty()
        && name.len() <= STREAM_NAME_BYTES_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid { Ok(()) } else { Err(OptionsError::StreamName(name.to_owned())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_lists_parse_and_bad_ones_are_named() {
        let options =
            NatsOptions::new("nats://127.0.0.1:4222, nats://127.0.0.1:4223,nats://h:1", "S").unwrap();
        assert_eq!(options.servers.len(), 3);
        assert_eq!(options.replicas, 3);
        assert_eq!(NatsOptions::new("nats://127.0.0.1:4222", "S").unwrap().replicas, 1);
        for bad in ["", "127.0.0.1:4222", "nats://:4222", "nats://h:port", "http://h:1"] {
            assert_eq!(
                NatsOptions::new(bad, "S").unwrap_err(),
                OptionsError::Servers(bad.to_owned()),
                "{bad}"
            );
        }
        for bad in ["", "a.b", "a b", "a*", &"x".repeat(65)] {
            assert!(matches!(NatsOptions::new("nats://h:1", bad), Err(OptionsError::StreamName(_))), "{bad}");
        }
    }
}
