//! The server's background extraction: after a `capture` appended a session's records (a hook's
//! or any host's), memory extraction runs over the store's extraction backlog on a thread
//! of its own, so the call answers without waiting for it (decision 0231).
//!
//! The backlog and the extraction are the facade's (`Memory::extract_backlog`: every session past
//! its extraction cursor, from the cursor on, so nothing is read twice); this decides only when it
//! runs and that it never holds up a call. Wakes that arrive while a pass runs fold into one more
//! pass after it.
//!
//! It is not:
//! - a queue of work items: a wake is a flag, and the pass reads the backlog from the store;
//! - durable: a pass cut short by a stop leaves its sessions past their cursors, and the next
//!   capture (in this server or the next) extracts them.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use mnemo::Mnemo;

#[derive(Debug, Default)]
struct Flags {
    /// A call appended records since the last pass began.
    due: bool,
    /// The server is stopping: no pass starts any more.
    stop: bool,
    /// A pass is running.
    running: bool,
}

/// The background extraction thread and how to wake and stop it.
#[derive(Debug)]
pub(crate) struct BackgroundExtraction {
    flags: Arc<(Mutex<Flags>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl BackgroundExtraction {
    /// Starts the thread, idle until the first [`wake`](Self::wake).
    pub(crate) fn start(mnemo: Arc<Mnemo>) -> std::io::Result<BackgroundExtraction> {
        let flags = Arc::new((Mutex::new(Flags::default()), Condvar::new()));
        let theirs = Arc::clone(&flags);
        let thread = std::thread::Builder::new()
            .name("mnemo-extraction".to_owned())
            .spawn(move || run(&mnemo, &theirs))?;
        Ok(BackgroundExtraction { flags, thread: Mutex::new(Some(thread)) })
    }

    /// Asks for a pass over the backlog; returns at once.
    pub(crate) fn wake(&self) {
        let (lock, ready) = &*self.flags;
        lock.lock().unwrap_or_else(PoisonError::into_inner).due = true;
        ready.notify_one();
    }

    /// Whether a pass is running or due: the server is not idle then, so its idle period does not
    /// cut the pass short.
    pub(crate) fn busy(&self) -> bool {
        let flags = self.flags.0.lock().unwrap_or_else(PoisonError::into_inner);
        flags.due || flags.running
    }

    /// Stops the thread and waits for it: a pass running ends at its next gate (the caller began
    /// the store's drain, which closes every session's gate), and its store handle is released.
    pub(crate) fn stop(&self) {
        let (lock, ready) = &*self.flags;
        lock.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        ready.notify_one();
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the background extraction thread panicked");
        }
    }
}

/// The thread's body: a pass whenever one is due, until stopped.
fn run(mnemo: &Mnemo, flags: &(Mutex<Flags>, Condvar)) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "background extraction cannot start its runtime");
            return;
        }
    };
    let (lock, ready) = flags;
    loop {
        {
            let mut flags = lock.lock().unwrap_or_else(PoisonError::into_inner);
            while !flags.due && !flags.stop {
                flags = ready.wait(flags).unwrap_or_else(PoisonError::into_inner);
            }
            if flags.stop {
                return;
            }
            flags.due = false;
            flags.running = true;
        }
        match runtime.block_on(mnemo.memory().extract_backlog()) {
            Ok(runs) => {
                let stored: u64 = runs.iter().map(|(_, report)| report.stored).sum();
                tracing::info!(sessions = runs.len(), stored, "background extraction pass");
            }
            Err(error) => tracing::warn!(%error, "background extraction pass failed"),
        }
        lock.lock().unwrap_or_else(PoisonError::into_inner).running = false;
    }
}
