//! Background threads (the log's key ingestion and filter scan, the pipeline's stages) run at a
//! lower scheduling priority than the host's, so that on a busy machine they take the time the
//! host's own threads (the writer, the callers) leave.

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
