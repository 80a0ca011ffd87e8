//! `command/run`: a `mnemo` command line run inside the server, against the store it holds, for a
//! command-line client that found the store held by it (`docs/ARCHITECTURE.md`, "One store, many
//! processes").
//!
//! The server knows nothing of the command line: the process that serves (the `mnemo` binary)
//! registers a [`CommandRunner`] in [`crate::server::ServeOptions`], and a server without one
//! answers `method_not_found`. A command runs on a thread of its own, since it may last as long as
//! its client stays (`sync --watch`); what it writes reaches the client as `command/output`
//! notifications, in order and before the answer; and it is told to stop ([`CommandIo::cancelled`])
//! once its client's connection closes or the server stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mnemo::Mnemo;
use tokio::sync::mpsc;

use crate::limits::{COMMAND_OUTPUT_CHUNK_BYTES, COMMAND_OUTPUT_DELAY_MAX};
use crate::methods::{self as m, OutputStream, RunCommandParams};
use crate::seams::Peer;

/// Runs the command lines that clients send with `command/run`.
pub trait CommandRunner: Send + Sync + std::fmt::Debug {
    /// Runs `command` against `store`, writing everything it prints to `io`; returns the exit code
    /// it would have exited with in the caller's process.
    fn run(&self, store: Arc<Mnemo>, command: RunCommandParams, io: CommandIo) -> u8;
}

/// Where a served command writes, and how it learns that nobody waits for it any more.
#[derive(Debug, Clone)]
pub struct CommandIo {
    pieces: mpsc::Sender<(OutputStream, String)>,
    cancelled: Arc<AtomicBool>,
}

impl CommandIo {
    /// Writes `text` to the client's `stream`. Blocks while the client reads slower than the
    /// command writes; false once the client is gone (the command should then stop).
    pub fn write(&self, stream: OutputStream, text: &str) -> bool {
        if text.is_empty() {
            return !self.cancelled();
        }
        let sent = self.pieces.blocking_send((stream, text.to_owned())).is_ok();
        if !sent {
            self.cancelled.store(true, Ordering::Release);
        }
        sent
    }

    /// Whether the command should stop: its client's connection closed, or the server is stopping.
    pub fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// The flag [`CommandIo::cancelled`] reads, for a loop that polls a flag of its own.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancelled)
    }
}

/// Most pieces of output waiting between the command's thread and the connection.
const PIECES_QUEUED_MAX: usize = 256;

/// Runs `command` on a thread of its own and forwards its output to `peer` as `command/output`
/// notifications; returns its exit code once every piece of its output has been sent.
pub(crate) async fn run(
    runner: Arc<dyn CommandRunner>,
    store: Arc<Mnemo>,
    command: RunCommandParams,
    peer: Arc<Peer>,
    cancelled: Arc<AtomicBool>,
) -> Result<u8, String> {
    let (pieces, received) = mpsc::channel(PIECES_QUEUED_MAX);
    let io = CommandIo { pieces, cancelled: Arc::clone(&cancelled) };
    let (done, exit_code) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("mnemo-command".to_owned())
        .spawn(move || {
            let code = runner.run(store, command, io);
            let _ = done.send(code);
        })
        .map_err(|error| format!("cannot start the command's thread: {error}"))?;
    forward(received, &peer, &cancelled).await;
    exit_code.await.map_err(|_| "the command ended without an exit code (it panicked)".to_owned())
}

/// Sends the command's pieces of output as they come, at most [`COMMAND_OUTPUT_DELAY_MAX`] after
/// they were written, in chunks of at most about [`COMMAND_OUTPUT_CHUNK_BYTES`]; returns once the
/// command has dropped its writer.
async fn forward(mut received: mpsc::Receiver<(OutputStream, String)>, peer: &Peer, cancelled: &AtomicBool) {
    while let Some(first) = received.recv().await {
        let mut chunks = vec![first];
        let mut bytes = chunks[0].1.len();
        let deadline = tokio::time::Instant::now() + COMMAND_OUTPUT_DELAY_MAX;
        while bytes < COMMAND_OUTPUT_CHUNK_BYTES {
            match tokio::time::timeout_at(deadline, received.recv()).await {
                Ok(Some((stream, text))) => {
                    bytes += text.len();
                    match chunks.last_mut() {
                        Some(last) if last.0 == stream => last.1.push_str(&text),
                        _ => chunks.push((stream, text)),
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        for (stream, text) in chunks {
            let params = m::CommandOutputParams { stream, text };
            if !peer.notify::<m::CommandOutput>(&params).await {
                // The client is gone: the command stops at its next look, and what it still writes
                // is drained below so that it never blocks on a full queue.
                cancelled.store(true, Ordering::Release);
            }
        }
    }
}
