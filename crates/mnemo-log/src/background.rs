//! Threads of the log's own background work: what only makes later appends cheaper runs at a
//! lowered priority, so that on a busy machine it takes the time appends leave.

/// Raises the calling thread's nice value by `increment` over the host's. On Linux the nice value
/// belongs to the thread, so the host's own threads keep theirs. Where the system refuses, the
/// thread runs at the host's priority: the same work, sooner. `what` names the thread's work in
/// the message saying so.
pub(crate) fn lower_this_threads_priority(increment: i32, what: &str) {
    #[cfg(target_os = "linux")]
    {
        let thread = Some(rustix::thread::gettid());
        let lowered = rustix::process::getpriority_process(thread)
            .and_then(|nice| rustix::process::setpriority_process(thread, nice + increment));
        if let Err(error) = lowered {
            tracing::debug!(%error, "cannot lower the priority of the {what}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (increment, what);
}
