//! The NATS backend's named limits.

use std::time::Duration;

/// How long one JetStream request (a publish's acknowledgement, a message fetch) may take before
/// it is retried.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an append keeps retrying through leader elections and lost acknowledgements before it
/// reports the log unavailable.
pub const APPEND_RETRY_BUDGET: Duration = Duration::from_secs(60);

/// The first pause between two attempts of an append; it doubles up to [`RETRY_PAUSE_MAX`].
pub const RETRY_PAUSE_MIN: Duration = Duration::from_millis(50);

/// The longest pause between two attempts of an append.
pub const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How long opening waits for the cluster and for the local index to catch up with the stream.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the server remembers a message id to drop a retried duplicate. An append's retries
/// stay well inside it ([`APPEND_RETRY_BUDGET`]).
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Envelopes kept in memory behind the head, so that live followers read new appends without a
/// round trip to the server.
pub const RECENT_ENVELOPES_MAX: usize = 8192;

/// Message ids remembered behind the head, so that an append whose acknowledgement was lost can
/// find where it landed.
pub const RECENT_MESSAGE_IDS_MAX: usize = 65_536;

/// Depth of the channel between a replay's consumer and the iterator reading it.
pub const REPLAY_CHANNEL_DEPTH_MAX: usize = 1024;

/// Longest JetStream stream name this backend accepts (the server's own limit is larger).
pub const STREAM_NAME_BYTES_MAX: usize = 64;

/// Most replicas of a stream (JetStream's own limit).
pub const REPLICAS_MAX: usize = 5;

/// How long one pull of a follower's ordered consumer waits on the server. Its idle heartbeat is
/// half of it, and two missed heartbeats make the consumer start again on another server: this
/// bounds how long a follower stays on a server that died.
pub const FOLLOW_PULL_EXPIRY: Duration = Duration::from_secs(2);

/// How long an append waits for the follower to fold its acknowledged message before it asks the
/// follower to start its consumer again (the consumer may sit on a server that just died).
pub const FOLD_STALL: Duration = Duration::from_millis(1500);

/// Most queued appends of one host that one group commit pipelines (each its own message, published
/// without waiting for the one before).
pub const APPEND_GROUP_MAX: usize = 256;
