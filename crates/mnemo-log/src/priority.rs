//! Background threads (the log's key ingestion and filter scan, the pipeline's stages, the storage
//! engine's flushes and compactions) run at a lower scheduling priority than the host's, so that on
//! a busy machine they take the time the host's own threads (the writer, the callers) leave.

use std::time::Duration;

/// The name the storage engine gives the threads of its pool (flushes, compactions, memtable
/// rotations).
const ENGINE_THREAD_NAME: &str = "fjall:worker";

/// Raises the calling thread's nice value by `increment` over what it has. On Linux the nice value
/// belongs to the thread, not the process, so the host's own threads keep theirs. Where the system
/// refuses, the thread runs at the host's priority: the same work, done sooner. An unprivileged
/// thread cannot raise its priority again.
pub fn lower_this_thread(increment: i32, thread_name: &str) {
    #[cfg(target_os = "linux")]
    {
        let thread = Some(rustix::thread::gettid());
        let lowered = rustix::process::getpriority_process(thread)
            .and_then(|nice| rustix::process::setpriority_process(thread, nice + increment));
        if let Err(error) = lowered {
            tracing::debug!(%error, thread = thread_name, "cannot lower a background thread's priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (increment, thread_name);
}

/// How long a store's open waits for the storage engine's new threads to take their name, so that
/// they can be found and lowered (`lower_engine_threads`). A thread names itself as it starts, most
/// within microseconds of the open; one not named by then keeps the host's priority.
const ENGINE_THREADS_NAMED_WAIT: Duration = Duration::from_secs(1);

/// Lowers the storage engine's pool threads of this process to the calling thread's nice value plus
/// `increment`, as [`lower_this_thread`] lowers the log's own background threads. The engine starts
/// its threads when a database opens and offers no hook to run code on them, so they are found by
/// name among the process's threads just after the open: `started` of them, the threads the open
/// started. A thread already that low is left alone, so a process that opens several stores lowers
/// each thread once.
///
/// NOTE: a thread takes its name only once it runs, and just after the open some had not yet: one
/// open in about thirty left threads at the host's priority. So the threads are looked for again
/// until `started` have been seen, for at most `ENGINE_THREADS_NAMED_WAIT`.
pub(crate) fn lower_engine_threads(increment: i32, started: usize) {
    #[cfg(target_os = "linux")]
    {
        let target = match rustix::process::getpriority_process(Some(rustix::thread::gettid())) {
            Ok(nice) => nice + increment,
            Err(error) => {
                tracing::debug!(%error, "cannot read this thread's priority; the engine's threads keep theirs");
                return;
            }
        };
        let deadline = std::time::Instant::now() + ENGINE_THREADS_NAMED_WAIT;
        let mut seen = 0;
        loop {
            seen += engine_threads().into_iter().filter(|&thread| lower_to(thread, target)).count();
            if seen >= started || std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if seen < started {
            tracing::debug!(
                seen,
                started,
                "some storage engine threads were not found; they keep the host's priority"
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (increment, started);
}

/// Sets `thread`'s nice value to `target` if it is below it; whether it was below (a thread not
/// lowered yet), whether or not the system then let it be lowered. A thread whose priority cannot
/// be read (it has ended) is left alone.
#[cfg(target_os = "linux")]
fn lower_to(thread: rustix::process::Pid, target: i32) -> bool {
    let thread = Some(thread);
    if !rustix::process::getpriority_process(thread).is_ok_and(|nice| nice < target) {
        return false;
    }
    if let Err(error) = rustix::process::setpriority_process(thread, target) {
        tracing::debug!(%error, "cannot lower a storage engine thread's priority");
    }
    true
}

/// The ids of this process's threads the storage engine named as its own (`/proc/self/task`).
#[cfg(target_os = "linux")]
fn engine_threads() -> Vec<rustix::process::Pid> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim_end() == ENGINE_THREAD_NAME)
        })
        .filter_map(|task| task.file_name().to_str()?.parse().ok())
        .filter_map(rustix::process::Pid::from_raw)
        .collect()
}
