//! The one-shot channel that carries an append's outcome from the writer back to its caller, and
//! the spent request with it, so that the caller frees what it allocated.
//!
//! A caller blocks on a condition variable at once. A general-purpose channel spins and yields
//! before it sleeps, and with many concurrent appenders on few cores those spinning callers took
//! the processor the writer needed to finish their appends.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::backend::{AppendOutcome, AppendRequest};
use crate::error::LogError;

type Outcome = Result<AppendOutcome, LogError>;

/// What the writer hands back: the outcome, and the request once the writer is done with it.
type Answer = (Outcome, Option<AppendRequest>);

#[derive(Debug, Default)]
struct Slot {
    answer: Mutex<Option<Answer>>,
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
            fulfil(&slot, (outcome, None));
        }
    }

    /// Sends the outcome with the spent request, which the caller then frees.
    ///
    /// NOTE: a request's records and key rules are an allocation or two each, made on the
    /// caller's thread. Freed on the writer's, each free went on a list the caller's allocator
    /// had to collect before it could use the memory again, and meanwhile the caller took fresh
    /// pages, which the kernel zeroed (decision 0142). Freed by the caller, the memory is used
    /// again at once, still in the caller's cache.
    pub(crate) fn send_returning(mut self, outcome: Outcome, request: AppendRequest) {
        if let Some(slot) = self.slot.take() {
            fulfil(&slot, (outcome, Some(request)));
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            fulfil(&slot, (Err(LogError::Closed), None));
        }
    }
}

fn fulfil(slot: &Slot, answer: Answer) {
    *slot.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
    slot.ready.notify_one();
}

/// An append queued for the writer: [`PendingAppend::wait`] blocks until it is durable (or refused).
#[derive(Debug)]
pub struct PendingAppend {
    slot: Arc<Slot>,
}

impl PendingAppend {
    /// Blocks until the writer answers; frees the spent request, if the writer handed it back.
    pub fn wait(self) -> Outcome {
        let mut guard = self.slot.answer.lock().unwrap_or_else(PoisonError::into_inner);
        let (outcome, spent) = loop {
            if let Some(answer) = guard.take() {
                break answer;
            }
            guard = self.slot.ready.wait(guard).unwrap_or_else(PoisonError::into_inner);
        };
        drop(guard);
        drop(spent);
        outcome
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
    fn an_outcome_sent_with_its_spent_request_is_received_alone() {
        use crate::backend::{ExpectedRevision, NewRecord};
        let (reply, pending) = reply_pair();
        let stream = mnemo_core::StreamId::new("session/s").expect("a valid stream");
        let request =
            AppendRequest::new(stream, ExpectedRevision::Any, vec![NewRecord::new(1, 1, vec![7; 64])]);
        let sender = std::thread::spawn(move || reply.send_returning(Err(LogError::Closed), request));
        assert!(matches!(pending.wait(), Err(LogError::Closed)));
        assert!(sender.join().is_ok());
    }

    #[test]
    fn a_reply_dropped_unsent_answers_closed() {
        let (reply, pending) = reply_pair();
        drop(reply);
        assert!(matches!(pending.wait(), Err(LogError::Closed)));
    }
}
