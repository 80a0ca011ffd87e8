//! `NatsLog`: the handle, opening (connecting, creating or checking the JetStream stream, catching
//! the index up), and the reads of [`LogBackend`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use futures_util::StreamExt as _;
use mnemo_core::{Position, StreamId, StreamRevision};
use mnemo_log::limits::READ_ENVELOPES_MAX;
use mnemo_log::{
    AppendOutcome, AppendRequest, Clock, CorruptionKind, Envelope, EnvelopeIter, LogBackend, LogError,
    StreamHead,
};
use tracing::{info, warn};

use crate::append::FOLD_WAIT;
use crate::batch;
use crate::follower;
use crate::index::{SharedIndex, Span};
use crate::limits::{DUPLICATE_WINDOW, FOLD_STALL, OPEN_TIMEOUT, REPLAY_CHANNEL_DEPTH_MAX, REQUEST_TIMEOUT};
use crate::options::NatsOptions;
use crate::subject;

/// What the handle and its tasks share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub jetstream: jetstream::Context,
    pub stream: stream::Stream,
    /// The JetStream stream's name.
    pub name: String,
    pub index: Arc<SharedIndex>,
    pub clock: Arc<dyn Clock>,
    /// The server's largest message, in bytes.
    pub max_payload: usize,
    /// A prefix unique to this handle for the message ids of its appends.
    instance: String,
    appends: AtomicU64,
    pub append_turn: tokio::sync::Mutex<()>,
    /// Appends waiting for the turn: its holder commits them as one group.
    pub queue: std::sync::Mutex<std::collections::VecDeque<crate::append::Queued>>,
    /// Tells the follower to start its consumer again.
    restart_follower: Arc<tokio::sync::Notify>,
}

impl Inner {
    pub(crate) fn next_message_id(&self) -> String {
        format!("{}-{}", self.instance, self.appends.fetch_add(1, Ordering::Relaxed))
    }

    /// Waits until the index has folded everything the server holds now.
    pub(crate) async fn catch_up_with_server(&self) -> Result<(), LogError> {
        let last = last_sequence(&self.stream).await?;
        self.wait_for_sequence_at_least(last).await
    }

    pub(crate) async fn wait_for_sequence_at_least(&self, sequence: u64) -> Result<(), LogError> {
        let deadline = Instant::now() + FOLD_WAIT;
        let mut folded = self.wait_slice(sequence).await?;
        while folded < sequence && Instant::now() < deadline {
            // The server has the message but the follower has not delivered it: its consumer may be
            // on a server that died and not have noticed yet.
            self.restart_follower.notify_one();
            folded = self.wait_slice(sequence).await?;
        }
        if folded < sequence {
            return Err(LogError::Unavailable(format!(
                "the follower reached JetStream sequence {folded}, not {sequence}, within {FOLD_WAIT:?}"
            )));
        }
        Ok(())
    }

    /// Waits up to [`FOLD_STALL`] for the index to reach `sequence`; returns where it is.
    async fn wait_slice(&self, sequence: u64) -> Result<u64, LogError> {
        let index = Arc::clone(&self.index);
        tokio::task::spawn_blocking(move || {
            let index = index.wait_until(FOLD_STALL, |i| i.sequence >= sequence);
            index.failure.clone().map_or(Ok(index.sequence), Err)
        })
        .await
        .map_err(|e| LogError::Unavailable(format!("the index wait stopped: {e}")))?
        .map_err(|failure| LogError::Unavailable(format!("the shared log cannot be followed: {failure}")))
    }

    /// Waits until the follower has folded `sequence` and returns its span.
    pub(crate) async fn wait_for_sequence(&self, sequence: u64) -> Result<Span, LogError> {
        self.wait_for_sequence_at_least(sequence).await?;
        self.index.lock().span_of_sequence(sequence).ok_or_else(|| LogError::Corrupt {
            position: Position::ZERO,
            kind: CorruptionKind::Undecodable(format!("JetStream message {sequence} is not in the index")),
        })
    }

    /// Fetches and decodes the message at `sequence`.
    async fn fetch(&self, sequence: u64) -> Result<Vec<Envelope>, LogError> {
        let message =
            self.stream.get_raw_message(sequence).await.map_err(|e| {
                LogError::Unavailable(format!("cannot fetch JetStream message {sequence}: {e}"))
            })?;
        batch::decode(&message.payload, sequence)
    }
}

async fn last_sequence(stream: &stream::Stream) -> Result<u64, LogError> {
    let mut stream = stream.clone();
    let info = stream
        .info()
        .await
        .map_err(|e| LogError::Unavailable(format!("cannot read the stream's state: {e}")))?;
    Ok(info.state.last_sequence)
}

/// The log of one store, kept in a JetStream stream that several hosts share.
///
/// Each host folds the stream into a local index (positions, stream heads, recent envelopes) with
/// an ordered consumer, checking the hash chain as it goes; `head` is what this host has folded.
/// Dropping the handle stops its tasks.
#[derive(Debug)]
pub struct NatsLog {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl NatsLog {
    /// Connects to the cluster, creates the JetStream stream if it does not exist (or checks that the
    /// existing one is a Mnemo log), and folds it up to its current end.
    pub fn open(options: NatsOptions) -> Result<NatsLog, LogError> {
        options.check().map_err(|e| LogError::Unavailable(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("mnemo-log-nats")
            .enable_all()
            .build()
            .map_err(|cause| LogError::Io {
                context: "cannot start the NATS client's runtime".to_owned(),
                cause,
            })?;
        let inner = run_on(runtime.handle(), connect(options))??;
        let log = NatsLog { inner: Arc::new(inner), runtime: Some(runtime) };
        let index = Arc::clone(&log.inner.index);
        let restart = Arc::clone(&log.inner.restart_follower);
        log.handle().spawn(follower::follow(log.inner.stream.clone(), index, restart));
        let inner = Arc::clone(&log.inner);
        log.block_on(async move { inner.catch_up_with_server().await })??;
        info!(stream = %log.inner.name, head = log.head().0, "shared log opened");
        Ok(log)
    }

    /// The JetStream stream's name.
    pub fn stream_name(&self) -> &str {
        &self.inner.name
    }

    /// The server that leads the JetStream stream now (`None` while an election runs).
    pub fn stream_leader(&self) -> Result<Option<String>, LogError> {
        let stream = self.inner.stream.clone();
        self.block_on(async move {
            let mut stream = stream;
            let info = stream
                .info()
                .await
                .map_err(|e| LogError::Unavailable(format!("cannot read the stream's state: {e}")))?;
            Ok(info.cluster.as_ref().and_then(|c| c.leader.clone()))
        })?
    }

    /// Appends with a given message id, as a retry of an earlier append would.
    #[cfg(test)]
    pub(crate) fn append_with_message_id(
        &self,
        request: AppendRequest,
        message_id: &str,
    ) -> Result<AppendOutcome, LogError> {
        let inner = Arc::clone(&self.inner);
        let message_id = message_id.to_owned();
        self.block_on(async move { crate::append::append_as(inner, request, message_id).await })?
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        match &self.runtime {
            Some(runtime) => runtime.handle(),
            // The runtime is taken only in `drop`.
            None => unreachable_runtime(),
        }
    }

    fn block_on<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, LogError> {
        run_on(self.handle(), future)
    }

    fn failure(&self) -> Option<LogError> {
        self.inner
            .index
            .lock()
            .failure
            .clone()
            .map(|failure| LogError::Unavailable(format!("the shared log cannot be followed: {failure}")))
    }

    fn fetch(&self, sequence: u64) -> Result<Vec<Envelope>, LogError> {
        let inner = Arc::clone(&self.inner);
        self.block_on(async move { inner.fetch(sequence).await })?
    }

    fn replay(&self, from: Position, head: Position) -> EnvelopeIter {
        let Some(start) = self.inner.index.lock().span_of_position(from) else {
            return Box::new(std::iter::empty());
        };
        let (sender, receiver) = crossbeam_channel::bounded(REPLAY_CHANNEL_DEPTH_MAX);
        let stream = self.inner.stream.clone();
        self.handle().spawn(replay(stream, start.sequence, from, head, sender));
        Box::new(receiver.into_iter())
    }
}

#[cold]
fn unreachable_runtime() -> ! {
    // NOTE: a `NatsLog` without its runtime exists only inside `drop`, which calls nothing here.
    panic!("the NATS log's runtime is gone")
}

/// Runs `future` on `handle` and waits for it from this thread, which may itself be inside another
/// runtime (the facade's): the work runs on the log's own threads, never on the caller's.
fn run_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    future: impl Future<Output = T> + Send + 'static,
) -> Result<T, LogError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = sender.send(future.await);
    });
    receiver.recv().map_err(|_| LogError::Closed)
}

async fn connect(options: NatsOptions) -> Result<Inner, LogError> {
    let servers = options
        .servers
        .iter()
        .map(|s| s.parse::<async_nats::ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LogError::Unavailable(format!("invalid server address: {e}")))?;
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(REQUEST_TIMEOUT)
        .request_timeout(Some(REQUEST_TIMEOUT))
        .connect(servers)
        .await
        .map_err(|e| {
            LogError::Unavailable(format!("cannot connect to {}: {e}", options.servers.join(",")))
        })?;
    let mut jetstream = jetstream::new(client.clone());
    jetstream.set_timeout(REQUEST_TIMEOUT);
    let stream = open_stream(&jetstream, &options).await?;
    let instance = client.new_inbox().rsplit('.').next().unwrap_or_default().to_owned();
    let max_payload = client.server_info().max_payload;
    let index = SharedIndex::default();
    index.lock().key_rules_of = options.key_rules_of;
    Ok(Inner {
        jetstream,
        stream,
        name: options.stream.clone(),
        index: Arc::new(index),
        clock: options.clock,
        max_payload,
        instance,
        appends: AtomicU64::new(0),
        append_turn: tokio::sync::Mutex::new(()),
        queue: std::sync::Mutex::new(std::collections::VecDeque::new()),
        restart_follower: Arc::default(),
    })
}

/// Gets or creates the stream, retrying while a fresh cluster elects its meta leader.
async fn open_stream(
    jetstream: &jetstream::Context,
    options: &NatsOptions,
) -> Result<stream::Stream, LogError> {
    let wanted = stream::Config {
        name: options.stream.clone(),
        subjects: vec![subject::wildcard(&options.stream)],
        storage: stream::StorageType::File,
        num_replicas: options.replicas,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    };
    let deadline = Instant::now() + OPEN_TIMEOUT;
    loop {
        match jetstream.get_or_create_stream(wanted.clone()).await {
            Ok(mut stream) => {
                let info = stream.info().await.map_err(|e| LogError::Unavailable(e.to_string()))?;
                if info.config.subjects != wanted.subjects {
                    return Err(LogError::Unavailable(format!(
                        "JetStream stream {} takes subjects {:?}, not {:?}: it is not this store's Mnemo log",
                        options.stream, info.config.subjects, wanted.subjects
                    )));
                }
                return Ok(stream);
            }
            Err(error) if Instant::now() < deadline => {
                warn!(%error, "JetStream is not ready; retrying");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(error) => {
                return Err(LogError::Unavailable(format!(
                    "cannot open JetStream stream {}: {error}",
                    options.stream
                )));
            }
        }
    }
}

/// Streams the envelopes from `from` to `head` out of an ordered consumer started at `sequence`.
async fn replay(
    stream: stream::Stream,
    sequence: u64,
    from: Position,
    head: Position,
    sender: crossbeam_channel::Sender<Result<Envelope, LogError>>,
) {
    // A full channel blocks this task's thread, not the runtime: the reader sets the pace.
    let send = |item| tokio::task::block_in_place(|| sender.send(item).is_ok());
    let mut messages = match follower::ordered_messages(&stream, sequence).await {
        Ok(messages) => messages,
        Err(reason) => {
            send(Err(LogError::Unavailable(reason)));
            return;
        }
    };
    let mut next = from;
    while let Some(message) = messages.next().await {
        let decoded = message
            .map_err(|e| LogError::Unavailable(format!("replay consumer failed: {e}")))
            .and_then(|m| {
                let sequence = m.info().map_err(|e| LogError::Unavailable(e.to_string()))?.stream_sequence;
                batch::decode(&m.payload, sequence)
            });
        let envelopes = match decoded {
            Ok(envelopes) => envelopes,
            Err(error) => {
                send(Err(error));
                return;
            }
        };
        for envelope in envelopes.into_iter().filter(|e| e.position >= from) {
            if envelope.position > head {
                return;
            }
            let item = if envelope.position == next {
                next = next.next();
                Ok(envelope)
            } else {
                Err(LogError::Corrupt {
                    position: next,
                    kind: CorruptionKind::MissingPosition {
                        before: Position(next.0 - 1),
                        after: envelope.position,
                    },
                })
            };
            let stop = item.is_err();
            if !send(item) || stop || next > head {
                return;
            }
        }
    }
}

impl LogBackend for NatsLog {
    fn append(&self, request: AppendRequest) -> Result<AppendOutcome, LogError> {
        let inner = Arc::clone(&self.inner);
        self.block_on(crate::append::append(inner, request))?
    }

    fn head(&self) -> Position {
        self.inner.index.lock().head()
    }

    fn read(&self, position: Position) -> Result<Option<Envelope>, LogError> {
        if let Some(failure) = self.failure() {
            return Err(failure);
        }
        let span = {
            let index = self.inner.index.lock();
            if let Some(envelope) = index.recent_at(position) {
                return Ok(Some(envelope));
            }
            match index.span_of_position(position) {
                Some(span) => span,
                None => return Ok(None),
            }
        };
        Ok(self.fetch(span.sequence)?.into_iter().find(|e| e.position == position))
    }

    fn scan(&self, from: Position) -> EnvelopeIter {
        if let Some(failure) = self.failure() {
            return Box::new(std::iter::once(Err(failure)));
        }
        let from = from.max(Position::FIRST);
        let (head, recent) = {
            let index = self.inner.index.lock();
            (index.head(), index.recent_from(from))
        };
        if from > head {
            return Box::new(std::iter::empty());
        }
        match recent {
            Some(envelopes) => Box::new(envelopes.into_iter().map(Ok)),
            None => self.replay(from, head),
        }
    }

    fn read_stream(
        &self,
        stream: &StreamId,
        from: StreamRevision,
        limit: usize,
    ) -> Result<Vec<Envelope>, LogError> {
        if let Some(failure) = self.failure() {
            return Err(failure);
        }
        let limit = limit.min(READ_ENVELOPES_MAX);
        let spans: Vec<Span> = {
            let index = self.inner.index.lock();
            let Some(spans) = index.streams.get(stream) else { return Ok(Vec::new()) };
            let at = spans.spans.partition_point(|span| span.last_revision < from);
            spans.spans[at..].to_vec()
        };
        let mut envelopes = Vec::new();
        for span in spans {
            if envelopes.len() >= limit {
                break;
            }
            let recent: Option<Vec<Envelope>> = {
                let index = self.inner.index.lock();
                (span.first.0..=span.last.0).map(|p| index.recent_at(Position(p))).collect()
            };
            let batch = match recent {
                Some(batch) => batch,
                None => self.fetch(span.sequence)?,
            };
            envelopes.extend(batch.into_iter().filter(|e| e.revision >= from));
        }
        envelopes.truncate(limit);
        Ok(envelopes)
    }

    fn stream_head(&self, stream: &StreamId) -> Result<Option<StreamHead>, LogError> {
        if let Some(failure) = self.failure() {
            return Err(failure);
        }
        Ok(self.inner.index.lock().streams.get(stream).and_then(|s| s.head()).map(|(head, _)| head))
    }

    fn held_key(&self, key: &[u8]) -> Result<Option<mnemo_log::HeldKey>, LogError> {
        if let Some(failure) = self.failure() {
            return Err(failure);
        }
        let index = self.inner.index.lock();
        Ok(index
            .keys
            .get(key)
            .map(|held| mnemo_log::HeldKey { position: held.position, value: held.value.clone() }))
    }

    fn wait_for(&self, position: Position, timeout: Duration) -> Position {
        self.inner.index.wait_until(timeout, |index| index.head() >= position).head()
    }
}

impl Drop for NatsLog {
    fn drop(&mut self) {
        // Shutting down in the background is allowed even from inside another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use mnemo_log::{ExpectedRevision, NewRecord};

    use super::*;

    #[test]
    fn a_retried_append_is_stored_once() {
        let Ok(urls) = std::env::var("MNEMO_TEST_NATS_URLS") else {
            eprintln!("skipped: MNEMO_TEST_NATS_URLS is unset");
            return;
        };
        let name = format!(
            "T_dedup_{}_{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        );
        let log = NatsLog::open(NatsOptions::new(&urls, &name).unwrap()).unwrap();
        let request = || {
            let record = NewRecord::new(4, 1, b"once".to_vec());
            AppendRequest::new(StreamId::new("session/d").unwrap(), ExpectedRevision::Any, vec![record])
        };
        let first = log.append_with_message_id(request(), "retry-1").unwrap();
        let again = log.append_with_message_id(request(), "retry-1").unwrap();
        assert_eq!(first, again, "the retry reports where the first attempt landed");
        assert_eq!(log.head(), Position(1));
        let other = log.append_with_message_id(request(), "retry-2").unwrap();
        assert!(matches!(other, AppendOutcome::Appended(a) if a.first_position == Position(2)));
    }
}
