//! Per-session serialization lanes (memory.md §4.3): process-local mutual exclusion per session
//! id, foreground jobs ahead of queued background ones, never preempting a running job.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use mnemo_core::SessionId;
use tokio::sync::Notify;

/// A job's priority in its session lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Priority {
    /// Explicit user intent (`remember`): runs ahead of queued background work.
    Foreground,
    /// Agent-requested or compaction-triggered extraction.
    Background,
}

#[derive(Debug)]
struct Job {
    id: u64,
    sessions: Vec<SessionId>,
    priority: Priority,
}

#[derive(Debug, Default)]
struct LaneState {
    held: BTreeSet<SessionId>,
    queue: Vec<Job>,
    next_id: u64,
}

impl LaneState {
    fn shares(a: &[SessionId], b: &[SessionId]) -> bool {
        a.iter().any(|s| b.contains(s))
    }

    /// A queued job runs when none of its sessions is held and no queued job sharing one is
    /// ahead of it: an earlier foreground job blocks everything; any queued foreground job
    /// blocks a background one; an earlier background job blocks only background jobs.
    fn runnable(&self, index: usize) -> bool {
        let job = &self.queue[index];
        if job.sessions.iter().any(|s| self.held.contains(s)) {
            return false;
        }
        self.queue.iter().enumerate().all(|(other_index, other)| {
            if other_index == index || !Self::shares(&job.sessions, &other.sessions) {
                return true;
            }
            let earlier = other_index < index;
            match (job.priority, other.priority) {
                (_, Priority::Foreground) if earlier => false,
                (Priority::Background, Priority::Foreground) => false,
                (Priority::Background, Priority::Background) => !earlier,
                _ => true,
            }
        })
    }
}

/// The lanes of one process.
#[derive(Debug, Default)]
pub struct SessionLanes {
    state: Mutex<LaneState>,
    notify: Notify,
}

/// Holds a job's sessions until dropped.
#[derive(Debug)]
pub struct LaneGuard<'a> {
    lanes: &'a SessionLanes,
    sessions: Vec<SessionId>,
}

impl Drop for LaneGuard<'_> {
    fn drop(&mut self) {
        let mut state = self.lanes.state.lock().unwrap_or_else(PoisonError::into_inner);
        for session in &self.sessions {
            state.held.remove(session);
        }
        drop(state);
        self.lanes.notify.notify_waiters();
    }
}

/// Removes a queued job if its waiting future is dropped before it runs.
struct Waiting<'a> {
    lanes: &'a SessionLanes,
    id: u64,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut state = self.lanes.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.queue.retain(|job| job.id != self.id);
            drop(state);
            self.lanes.notify.notify_waiters();
        }
    }
}

impl SessionLanes {
    /// Empty lanes.
    pub fn new() -> Self {
        SessionLanes::default()
    }

    /// Waits until the job may run on `sessions` (sorted and de-duplicated here), then holds them.
    pub async fn acquire(&self, sessions: &[SessionId], priority: Priority) -> LaneGuard<'_> {
        let mut sessions = sessions.to_vec();
        sessions.sort();
        sessions.dedup();
        let id = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.next_id += 1;
            let id = state.next_id;
            state.queue.push(Job { id, sessions: sessions.clone(), priority });
            id
        };
        let mut waiting = Waiting { lanes: self, id, done: false };
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                let index = state.queue.iter().position(|job| job.id == id);
                if let Some(index) = index.filter(|i| state.runnable(*i)) {
                    state.queue.remove(index);
                    for session in &sessions {
                        state.held.insert(session.clone());
                    }
                    waiting.done = true;
                    return LaneGuard { lanes: self, sessions };
                }
            }
            notified.await;
        }
    }

    /// Jobs waiting.
    pub fn queued(&self) -> usize {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).queue.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]
    use std::sync::Arc;

    use super::*;

    fn s(id: &str) -> SessionId {
        SessionId::new(id).unwrap()
    }

    #[tokio::test]
    async fn foreground_overtakes_queued_background_but_never_preempts() {
        let lanes = Arc::new(SessionLanes::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let running = lanes.acquire(&[s("a")], Priority::Background).await;
        let spawn = |name: &'static str, priority| {
            let (lanes, order) = (Arc::clone(&lanes), Arc::clone(&order));
            tokio::spawn(async move {
                let _guard = lanes.acquire(&[s("a")], priority).await;
                order.lock().unwrap().push(name);
            })
        };
        let background = spawn("background", Priority::Background);
        while lanes.queued() < 1 {
            tokio::task::yield_now().await;
        }
        let foreground = spawn("foreground", Priority::Foreground);
        while lanes.queued() < 2 {
            tokio::task::yield_now().await;
        }
        assert!(order.lock().unwrap().is_empty(), "nothing runs while the lane is held");
        drop(running);
        background.await.unwrap();
        foreground.await.unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["foreground", "background"]);
    }

    #[tokio::test]
    async fn other_sessions_run_in_parallel_and_cancelled_waiters_leave_the_queue() {
        let lanes = SessionLanes::new();
        let _a = lanes.acquire(&[s("a")], Priority::Background).await;
        let _b = lanes.acquire(&[s("b")], Priority::Foreground).await;
        {
            let ids = [s("a")];
            let waiting = lanes.acquire(&ids, Priority::Foreground);
            let timed = tokio::time::timeout(std::time::Duration::from_millis(10), waiting).await;
            assert!(timed.is_err());
        }
        assert_eq!(lanes.queued(), 0);
    }
}
