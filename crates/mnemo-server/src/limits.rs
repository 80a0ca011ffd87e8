//! Every limit of the store server and its client, named, with its unit. `docs/PROTOCOL.md` lists
//! them; `initialize` reports the ones a client must respect.

use std::time::Duration;

/// Largest frame (one JSON-RPC message, the newline excluded) either side accepts, in bytes. A larger
/// request is answered with `frame_too_large` and skipped up to its newline; the connection stays.
pub const FRAME_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Most arguments a `command/run` command line may have.
pub const COMMAND_ARGS_MAX: usize = 4096;

/// Most bytes of a running command's output collected before it is sent as one `command/output`
/// notification; less is sent once [`COMMAND_OUTPUT_DELAY_MAX`] has passed since the last one.
pub const COMMAND_OUTPUT_CHUNK_BYTES: usize = 64 * 1024;

/// Longest a running command's written output waits before it is sent.
pub const COMMAND_OUTPUT_DELAY_MAX: Duration = Duration::from_millis(100);

/// Most connections the server holds at once. One more is answered `overloaded` and closed.
pub const CONNECTIONS_MAX: usize = 256;

/// Most calls the server runs against the store at once (its worker threads).
pub const CALLS_RUNNING_MAX: usize = 64;

/// Most calls admitted (running plus waiting for a worker) across all connections. A call beyond it is
/// answered `overloaded` at once, without touching the store.
pub const CALLS_ADMITTED_MAX: usize = 1024;

/// Most calls one connection may have running at once (pipelined requests); as many more are read
/// ahead and wait for a slot, and a request beyond both is answered `overloaded`. (The server keeps
/// reading so that a client's answers to its seam requests reach the calls waiting on them.)
pub const CONNECTION_CALLS_MAX: usize = 32;

/// Most answers waiting to be written to one connection.
pub const CONNECTION_REPLIES_QUEUED_MAX: usize = 64;

/// How long the server keeps running with no connection, unless told otherwise (`--idle-exit`).
pub const IDLE_EXIT_DEFAULT: Duration = Duration::from_secs(15 * 60);

/// How often the server checks whether it has been idle long enough to exit.
pub const IDLE_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// How long a graceful shutdown waits for running calls to finish before it closes the store anyway.
/// Appends are never cut short: a running append finishes (its commit is durable or it failed) before
/// the store closes, whatever this says; the wait bounds only reads.
pub const SHUTDOWN_CALLS_WAIT: Duration = Duration::from_secs(30);

/// When the server stops, requests a client had already sent but the connection had not read yet
/// are read and answered `shutting_down` while they keep arriving at most this far apart...
pub const SHUTDOWN_DRAIN_IDLE: Duration = Duration::from_millis(50);

/// ...and for at most this long in all, so a client that keeps sending cannot hold the server.
pub const SHUTDOWN_DRAIN_MAX: Duration = Duration::from_millis(500);

/// Longest socket path the kernel accepts (`sun_path` holds 108 bytes with its terminating NUL).
pub const SOCKET_PATH_BYTES_MAX: usize = 107;

/// How long a client waits for a server it started to answer before it gives up.
pub const START_WAIT_DEFAULT: Duration = Duration::from_secs(20);

/// How long a client waits between two attempts to connect while a server starts.
pub const CONNECT_RETRY_INTERVAL: Duration = Duration::from_millis(25);

/// How long a client waits for one answer unless told otherwise.
pub const CALL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);

/// Most bytes of a starting server's error output a client keeps to report why it did not start.
pub const START_STDERR_BYTES_MAX: usize = 16 * 1024;

/// How long the server waits for a client's answer to one seam call (`seam/summarize`, ...), at
/// most and by default; a client registers a shorter one with `seams/register`.
pub const SEAM_TIMEOUT_MAX: Duration = Duration::from_secs(120);

/// Most overflow latches (one per session and turn) a connection keeps; past it they are
/// forgotten, oldest turns with the rest.
pub const OVERFLOW_LATCHES_MAX: usize = 1024;

/// Most tail subscriptions one connection holds.
pub const SUBSCRIPTIONS_MAX: usize = 8;

/// Most envelopes one `log/appended` notification carries.
pub const TAIL_ENTRIES_MAX: usize = 256;

/// How often a tail subscription looks for new envelopes.
pub const TAIL_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Largest `export` text, in bytes: the answer must fit one frame.
pub const EXPORT_INLINE_BYTES_MAX: usize = FRAME_BYTES_MAX - 64 * 1024;
