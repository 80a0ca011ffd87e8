//! The thread that hands the writer's staged keys to the storage engine (`staged.rs`).
//!
//! Handing a table on means persisting the log it indexes, sorting some 65,536 keys and writing
//! them as a table: tens of milliseconds, which on the writer's thread were added to whatever
//! append came next. Here the writer hands a table on and goes on appending; the table stays
//! readable among the staged keys until the engine holds it (`ingest_handed`, below). One
//! table is under way at a time; the writer stages on meanwhile, and waits only once it holds
//! `KEYS_STAGED_HELD_MAX` keys.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use mnemo_core::Position;
use tracing::warn;

use super::layout::{MARK_KEY, framed_print};
use super::staged::StagedTable;
use crate::limits::{KEYS_INGEST_MIN, KEYS_INGEST_NICE_INCREMENT};
use crate::shared::Shared;

/// A table handed on, and the index's mark it carries.
struct Job {
    table: Arc<StagedTable>,
    mark: Option<Position>,
    /// Whether the log the table indexes is already on disk (see `ingest_handed`).
    log_synced: bool,
}

/// Why a table did not reach the engine.
pub(super) enum IngestFailure {
    Engine(fjall::Error),
    /// The thread ended (it panicked) without saying how its table ended.
    ThreadLost,
}

/// How the table handed on at `head` (the log's head then) ended, and the table back, so that its
/// memory is used again for the next.
pub(super) struct Ingested {
    pub head: Position,
    pub result: Result<(), IngestFailure>,
    pub table: Option<Arc<StagedTable>>,
}

/// What an ingestion sends back: the engine's answer and the table.
type Outcome = (Result<(), fjall::Error>, Arc<StagedTable>);

/// The writer's handle on the ingestion thread.
pub(super) struct KeyIngester {
    shared: Arc<Shared>,
    jobs: Option<Sender<Job>>,
    done: Receiver<Outcome>,
    /// The log's head when the table under way was handed on.
    under_way: Option<Position>,
    /// The outcome of an ingestion run on the writer's own thread (no thread could be started).
    ran_here: Option<Outcome>,
    thread: Option<JoinHandle<()>>,
}

impl KeyIngester {
    /// Starts the thread; without one, tables are ingested on the writer's thread as they are
    /// handed on.
    pub(super) fn start(shared: Arc<Shared>) -> KeyIngester {
        let (jobs, queue) = crossbeam_channel::bounded::<Job>(1);
        let (finished, done) = crossbeam_channel::bounded(1);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("mnemo-key-ingest".to_owned()).spawn(move || {
            crate::priority::lower_this_thread(KEYS_INGEST_NICE_INCREMENT, "mnemo-key-ingest");
            for job in queue {
                let result = ingest_handed(&thread_shared, &job.table, job.mark, job.log_synced);
                if finished.send((result, job.table)).is_err() {
                    return;
                }
            }
        });
        let (jobs, thread) = match thread {
            Ok(thread) => (Some(jobs), Some(thread)),
            Err(error) => {
                warn!(%error, "cannot start the key ingestion thread; the writer ingests the staged keys itself");
                (None, None)
            }
        };
        KeyIngester { shared, jobs, done, under_way: None, ran_here: None, thread }
    }

    /// Whether a table is under way.
    pub(super) fn is_busy(&self) -> bool {
        self.under_way.is_some()
    }

    /// Hands `table` on to be ingested with the index's `mark`; `head` is the log's head now, and
    /// `log_synced` says whether the log is on disk up to it. Only when no table is under way.
    pub(super) fn hand_on(
        &mut self,
        table: Arc<StagedTable>,
        mark: Option<Position>,
        head: Position,
        log_synced: bool,
    ) {
        debug_assert!(self.under_way.is_none(), "a table is handed on while another is under way");
        self.under_way = Some(head);
        let job = Job { table, mark, log_synced };
        let job = match &self.jobs {
            Some(jobs) => match jobs.send(job) {
                Ok(()) => return,
                Err(unsent) => unsent.into_inner(),
            },
            None => job,
        };
        let result = ingest_handed(&self.shared, &job.table, job.mark, job.log_synced);
        self.ran_here = Some((result, job.table));
    }

    /// How the table under way ended, if it has.
    pub(super) fn finished(&mut self) -> Option<Ingested> {
        let head = self.under_way?;
        let outcome = match self.ran_here.take() {
            Some(outcome) => Some(outcome),
            None => match self.done.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(crossbeam_channel::TryRecvError::Empty) => return None,
                Err(crossbeam_channel::TryRecvError::Disconnected) => None,
            },
        };
        self.under_way = None;
        Some(ingested(head, outcome))
    }

    /// Waits for the table under way, if there is one, and says how it ended.
    pub(super) fn wait(&mut self) -> Option<Ingested> {
        let head = self.under_way.take()?;
        let outcome = self.ran_here.take().or_else(|| self.done.recv().ok());
        Some(ingested(head, outcome))
    }

    /// Waits for the table under way and stops the thread (the store is closing).
    pub(super) fn stop(&mut self) -> Option<Ingested> {
        let ingested = self.wait();
        self.jobs = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            warn!("the key ingestion thread panicked");
        }
        ingested
    }
}

/// How the table handed on at `head` ended; no outcome: the thread ended (it panicked) without
/// saying.
fn ingested(head: Position, outcome: Option<Outcome>) -> Ingested {
    match outcome {
        Some((result, table)) => {
            Ingested { head, result: result.map_err(IngestFailure::Engine), table: Some(table) }
        }
        None => Ingested { head, result: Err(IngestFailure::ThreadLost), table: None },
    }
}

/// Writes the table handed on for ingestion to the engine, with the index's mark at `mark` when
/// the index is complete, and then takes it out of the staged keys: as one sorted table, or, when
/// it has fewer than `KEYS_INGEST_MIN` keys, in one batch through the journal. A table the staged
/// keys no longer hold (the index was dropped meanwhile, for a rebuild) is not written.
/// `log_synced`: the log is on disk up to the last envelope the table indexes.
pub(super) fn ingest_handed(
    shared: &Shared,
    table: &Arc<StagedTable>,
    mark: Option<Position>,
    log_synced: bool,
) -> Result<(), fjall::Error> {
    // NOTE: held until the engine holds the table, so that dropping the index waits for it.
    let _ingesting = shared.key_ingestion();
    if !shared.staged_keys().is_handed(table) {
        return Ok(());
    }
    if table.len() < KEYS_INGEST_MIN {
        // NOTE: a few keys (what a short-lived process stages before it closes) would make a
        // table of their own each; in the journal they follow the envelopes they index, so a
        // crash cannot keep them without those.
        // NOTE: the index's database has a journal of its own, so the log it indexes is persisted
        // first (unless its appends already were): a crash must not keep these keys without the
        // envelopes holding them.
        if !log_synced {
            shared.db.persist(fjall::PersistMode::SyncData)?;
        }
        let mut batch = shared.keys_db.batch();
        table.for_each_in_key_order(|print, value| {
            batch.insert(&shared.keys, framed_print(print), value);
            Ok::<(), fjall::Error>(())
        })?;
        if let Some(mark) = mark {
            batch.insert(&shared.keys, MARK_KEY, mark.to_key());
        }
        if !batch.is_empty() {
            batch.commit()?;
        }
    } else {
        // NOTE: an ingested table is durable apart from the journal: the log it indexes is
        // persisted first (unless its appends already were), so that the index never holds a key
        // of an envelope a crash could still take back. A sync of its own here took the journal
        // from the writer while the disk flushed, once per table.
        if !log_synced {
            shared.db.persist(fjall::PersistMode::SyncData)?;
        }
        let mut ingestion = shared.keys.start_ingestion()?;
        table.for_each_in_key_order(|print, value| ingestion.write(framed_print(print), value))?;
        // NOTE: the mark's key sorts after every fingerprint's (`m` > `h`), so it ends the table.
        if let Some(mark) = mark {
            ingestion.write(MARK_KEY, &mark.to_key()[..])?;
        }
        ingestion.finish()?;
    }
    shared.staged_keys_mut().ingested();
    Ok(())
}
