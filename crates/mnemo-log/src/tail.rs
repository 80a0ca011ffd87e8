//! The tail notification: followers wait here for the head to move.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mnemo_core::Position;

/// The last acknowledged position, with a condition variable to wait on it.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    head: Mutex<Position>,
    moved: Condvar,
}

impl Tail {
    pub(crate) fn head(&self) -> Position {
        *self.head.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn advance(&self, head: Position) {
        let mut current = self.head.lock().unwrap_or_else(PoisonError::into_inner);
        debug_assert!(head >= *current, "the head never moves back");
        *current = head;
        self.moved.notify_all();
    }

    pub(crate) fn wait_for(&self, position: Position, timeout: Duration) -> Position {
        let deadline = Instant::now() + timeout;
        let mut head = self.head.lock().unwrap_or_else(PoisonError::into_inner);
        while *head < position {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            head = self.moved.wait_timeout(head, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        *head
    }
}
