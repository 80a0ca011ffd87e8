//! The one-shot channel that carries an append's outcome from the writer back to its caller.
//!
//! A caller blocks on a condition variable at once. A general-purpose channel spins and yields
//! before it sleeps, and with many concurrent appenders on few cores those spinning callers took
//! the processor the writer needed to finish their appends.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::backend::AppendOutcome;
use crate::error::LogError;

type Outcome = Result<AppendOutcome, LogError>;

#[derive(Debug, Default)]
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

/// The writer's end: sends the outcome once. Dropped unsent, it answers [`LogError::Closed`], so a
/// caller never waits for a writer that has gone.
#[derive(Debug)]
pub(crate) struct Reply {
    slot: Option<Arc<Slot>>,
}

impl Reply {
    pub(crate) fn send(mut self, outcome: Outcome) {
        if let Some(slot) = self.slot.take() {
            fulfil(&slot, outcome);
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            fulfil(&slot, Err(LogError::Closed));
        }
    }
}

fn fulfil(slot: &Slot, outcome: Outcome) {
    *slot.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
    slot.ready.notify_one();
}

/// An append queued for the writer: [`PendingAppend::wait`] blocks until it is durable (or refused).
#[derive(Debug)]
pub struct PendingAppend {
    slot: Arc<Slot>,
}

impl PendingAppend {
    /// Blocks until the writer answers.
    pub fn wait(self) -> Outcome {
        let mut outcome = self.slot.outcome.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(outcome) = outcome.take() {
                return outcome;
            }
            outcome = self.slot.ready.wait(outcome).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A connected pair: the writer keeps the [`Reply`], the caller the [`PendingAppend`].
pub(crate) fn reply_pair() -> (Reply, PendingAppend) {
    let slot = Arc::new(Slot::default());
    (Reply { slot: Some(Arc::clone(&slot)) }, PendingAppend { slot })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Appended;
    use mnemo_core::{Position, StreamRevision};

    #[test]
    fn the_outcome_sent_is_the_outcome_received_across_threads() {
        let (reply, pending) = reply_pair();
        let appended = Appended {
            first_position: Position(3),
            last_position: Position(4),
            last_revision: StreamRevision(1),
            retried: 0,
        };
        let sender = std::thread::spawn(move || reply.send(Ok(AppendOutcome::Appended(appended))));
        assert!(matches!(pending.wait(), Ok(AppendOutcome::Appended(got)) if got == appended));
        assert!(sender.join().is_ok());
    }

    #[test]
    fn a_reply_dropped_unsent_answers_closed() {
        let (reply, pending) = reply_pair();
        drop(reply);
        assert!(matches!(pending.wait(), Err(LogError::Closed)));
    }
}
