//! Where the facade waits. Every wait of a call (a stage catching up with the log, a durable append,
//! the log reaching a position, a fold of the log into memory) runs through [`wait`], so an async
//! call awaited on a multi-thread tokio runtime hands its worker's other tasks to another thread
//! before it blocks, instead of stalling them.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which may block, without holding up the tasks of the runtime worker it is called on.
///
/// On a worker of a multi-thread runtime this is `tokio::task::block_in_place`: the worker's queued
/// tasks move to another thread first. Anywhere else (a plain thread, a blocking-pool thread, a
/// current-thread runtime, which has no other thread to hand its tasks to) `f` simply runs.
pub(crate) fn wait<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
