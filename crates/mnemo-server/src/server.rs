//! The store server: one process opens the store and answers many local clients on the store's Unix
//! socket.
//!
//! Each connection has a reader (frames in, at most [`CONNECTION_CALLS_MAX`] calls admitted at once)
//! and a writer (answers out, in the order they finish). A call runs on a worker thread
//! ([`CALLS_RUNNING_MAX`] at once) because the facade blocks; appends from many calls meet in the
//! log's one writer thread, which commits them in groups. Calls beyond [`CALLS_ADMITTED_MAX`] are
//! answered `overloaded` without touching the store.
//!
//! Shutdown (SIGTERM, SIGINT, the `shutdown` method, or no connection for the idle period): the
//! socket goes away first, so new clients start a new server; every admitted call then finishes and
//! is answered; then the store closes. An append is acknowledged only after its durable commit, so
//! every acknowledged append is durable whenever the process ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mnemo::{Config, Mnemo};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::PoisonError;

use mnemo::memory::MemoryModels;

use crate::extraction::BackgroundExtraction;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::command::{self, CommandRunner};
use crate::dispatch;
use crate::limits::{
    CALLS_ADMITTED_MAX, CALLS_RUNNING_MAX, COMMAND_ARGS_MAX, CONNECTION_CALLS_MAX,
    CONNECTION_REPLIES_QUEUED_MAX, CONNECTIONS_MAX, FRAME_BYTES_MAX, IDLE_CHECK_INTERVAL, SEAM_TIMEOUT_MAX,
    SHUTDOWN_DRAIN_IDLE, SHUTDOWN_DRAIN_MAX, SUBSCRIPTIONS_MAX, TAIL_ENTRIES_MAX, TAIL_POLL_INTERVAL,
};
use crate::methods::{self as m, Method, ServerMessage};
use crate::protocol::{JSONRPC_VERSION, PROTOCOL_VERSIONS, Reason, Request, RequestId, Response, RpcError};
use crate::seams::{ClientProposer, ConnectionSeams, Outgoing, Peer, Registered};
use crate::socket::{self, SocketError};

/// How a server runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The store's configuration (pipeline, log location).
    pub config: Config,
    /// Exit after this long without a connection; `None`: never.
    pub idle_exit: Option<Duration>,
    /// Worker threads of the server's runtime (the facade's calls run on its blocking pool).
    pub runtime_threads: usize,
    /// What runs `command/run` command lines; `None`: the method is not served.
    pub commands: Option<Arc<dyn CommandRunner>>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            config: Config::default(),
            idle_exit: Some(crate::limits::IDLE_EXIT_DEFAULT),
            runtime_threads: 2,
            commands: None,
        }
    }
}

impl ServeOptions {
    /// Options with this store configuration and the defaults otherwise.
    pub fn new(config: Config) -> ServeOptions {
        ServeOptions { config, ..ServeOptions::default() }
    }
}

/// Why the server stopped, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeReport {
    /// The socket it listened on.
    pub socket: PathBuf,
    /// Calls answered (every method but `initialize`).
    pub calls: u64,
    /// Connections accepted.
    pub connections: u64,
    /// What stopped it.
    pub stopped_by: StopCause,
}

/// What stopped a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopCause {
    /// SIGTERM or SIGINT.
    Signal,
    /// A client's `shutdown` call.
    Request,
    /// No connection for the idle period.
    Idle,
    /// Standard input ended (`mnemo serve --stdio`): the client that spawned the server is done.
    InputClosed,
}

/// Why a server could not start or stopped with a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The socket could not be placed.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// The store could not be opened or closed (a locked store is
    /// `mnemo::log::LogError::Locked`: another process, perhaps a server, owns it).
    #[error(transparent)]
    Store(#[from] mnemo::Error),
    /// The runtime or the listener failed.
    #[error("server i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// What every connection shares.
struct Shared {
    mnemo: Arc<Mnemo>,
    commands: Option<Arc<dyn CommandRunner>>,
    store: String,
    idle_exit: Option<Duration>,
    /// Calls admitted and not yet answered, across connections.
    admission: Admission,
    workers: Arc<Semaphore>,
    connections: AtomicUsize,
    accepted: AtomicU64,
    calls: AtomicU64,
    /// When the last connection closed (or the server started).
    idle_since: std::sync::Mutex<Instant>,
    stop: watch::Sender<Option<StopCause>>,
    next_connection: AtomicU64,
    /// The connection whose registered `MemoryProposer` the store's memory models use.
    proposer_owner: std::sync::Mutex<Option<u64>>,
    /// Memory extraction after a capture or an import, on a thread of its own.
    extraction: BackgroundExtraction,
}

impl Shared {
    fn new(
        mnemo: Mnemo,
        store: &Path,
        options: &ServeOptions,
        idle_exit: Option<Duration>,
    ) -> std::io::Result<Shared> {
        let (stop, _) = watch::channel(None);
        let mnemo = Arc::new(mnemo);
        let extraction = BackgroundExtraction::start(Arc::clone(&mnemo))?;
        Ok(Shared {
            mnemo,
            commands: options.commands.clone(),
            store: std::path::absolute(store).unwrap_or_else(|_| store.to_path_buf()).display().to_string(),
            idle_exit,
            admission: Admission::new(CALLS_ADMITTED_MAX),
            workers: Arc::new(Semaphore::new(CALLS_RUNNING_MAX)),
            connections: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            idle_since: std::sync::Mutex::new(Instant::now()),
            stop,
            next_connection: AtomicU64::new(1),
            proposer_owner: std::sync::Mutex::new(None),
            extraction,
        })
    }

    fn request_stop(&self, cause: StopCause) {
        self.stop.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(cause);
                return true;
            }
            false
        });
    }

    /// The store's memory models use `proposer` (a connection's), until that connection closes or
    /// another registers one.
    fn claim_proposer(&self, connection: u64, proposer: ClientProposer) {
        let mut owner = self.proposer_owner.lock().unwrap_or_else(PoisonError::into_inner);
        self.mnemo
            .memory()
            .set_models(MemoryModels { proposer: Arc::new(proposer), ..MemoryModels::default() });
        *owner = Some(connection);
    }

    /// The embedded models again, if `connection`'s proposer is the one in use.
    fn release_proposer(&self, connection: u64) {
        let mut owner = self.proposer_owner.lock().unwrap_or_else(PoisonError::into_inner);
        if *owner == Some(connection) {
            self.mnemo.memory().set_models(MemoryModels::default());
            *owner = None;
        }
    }

    fn stopping(&self) -> bool {
        self.stop.borrow().is_some()
    }

    fn idle_long_enough(&self) -> bool {
        let Some(idle) = self.idle_exit else { return false };
        // A background extraction pass keeps the server up: it would otherwise stop at its next
        // gate and leave its sessions for the next capture.
        !self.extraction.busy()
            && self.connections.load(Ordering::Acquire) == 0
            && self.idle_since.lock().map(|since| since.elapsed() >= idle).unwrap_or(false)
    }
}

/// Serves the store at `store` until a signal, a `shutdown` call or the idle period stops it; then
/// closes the store. Blocks the calling thread. Refuses to start when another process owns the store.
pub fn serve(store: &Path, options: ServeOptions) -> Result<ServeReport, ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.runtime_threads.max(1))
        .max_blocking_threads(CALLS_RUNNING_MAX + 8)
        .thread_name("mnemo-server")
        .enable_all()
        .build()?;
    let socket_path = socket::socket_path(store)?;
    let mnemo = Mnemo::open(store, options.config.clone())?;
    // NOTE: the socket is placed only once the store is ours: the store's lock is what makes one
    // server per store, and a socket at the path is then a dead server's.
    let listener = socket::bind(&socket_path)?;
    tracing::info!(socket = %socket_path.display(), "serving");
    let shared = Arc::new(Shared::new(mnemo, store, &options, options.idle_exit)?);
    let result = runtime.block_on(run(Arc::clone(&shared), listener, &socket_path));
    socket::remove(&socket_path);
    let cause = result?;
    let report = ServeReport {
        socket: socket_path,
        calls: shared.calls.load(Ordering::Acquire),
        connections: shared.accepted.load(Ordering::Acquire),
        stopped_by: cause,
    };
    close(shared, runtime)?;
    tracing::info!(calls = report.calls, "stopped");
    Ok(report)
}

/// How long closing waits for the runtime's threads (every call has answered by then; only a
/// pending read of standard input may still hold one).
const RUNTIME_SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// Closes the store once every call has answered and every connection task has ended.
fn close(shared: Arc<Shared>, runtime: tokio::runtime::Runtime) -> Result<(), ServeError> {
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| std::io::Error::other("a call still holds the store after every call was answered"))?;
    // NOTE: a bounded wait: a read of standard input blocks a thread of the runtime's pool that
    // only the client's next line or its end would free.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_WAIT);
    // NOTE: the drain comes first: it closes every session's extraction gate, so a pass that is
    // running ends at its next check, and the thread lets go of the store.
    shared.mnemo.memory().begin_drain();
    shared.extraction.stop();
    let mnemo = Arc::try_unwrap(shared.mnemo).map_err(|_| {
        std::io::Error::other("a command still holds the store after every call was answered")
    })?;
    mnemo.close()?;
    Ok(())
}

/// Serves the store at `store` to one client on this process's standard input and output (`mnemo
/// serve --stdio`): the process that spawned it owns the store for its lifetime. No socket is
/// placed. Stops when standard input ends (the client closed it or exited), on SIGTERM or SIGINT,
/// or on a `shutdown` call; then every admitted call is answered and the store closes, as [`serve`]
/// does. The idle period does not apply.
pub fn serve_stdio(store: &Path, options: ServeOptions) -> Result<ServeReport, ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.runtime_threads.max(1))
        .max_blocking_threads(CALLS_RUNNING_MAX + 8)
        .thread_name("mnemo-server")
        .enable_all()
        .build()?;
    let mnemo = Mnemo::open(store, options.config.clone())?;
    tracing::info!("serving on standard input and output");
    let shared = Arc::new(Shared::new(mnemo, store, &options, None)?);
    let cause = runtime.block_on(run_stdio(Arc::clone(&shared)))?;
    let report = ServeReport {
        socket: PathBuf::new(),
        calls: shared.calls.load(Ordering::Acquire),
        connections: shared.accepted.load(Ordering::Acquire),
        stopped_by: cause,
    };
    close(shared, runtime)?;
    tracing::info!(calls = report.calls, "stopped");
    Ok(report)
}

async fn run_stdio(shared: Arc<Shared>) -> Result<StopCause, ServeError> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    shared.accepted.fetch_add(1, Ordering::AcqRel);
    shared.connections.fetch_add(1, Ordering::AcqRel);
    let mut client = tokio::spawn(connection(Arc::clone(&shared), tokio::io::stdin(), tokio::io::stdout()));
    let mut ended = false;
    tokio::select! {
        _ = &mut client => {
            ended = true;
            shared.request_stop(StopCause::InputClosed);
        }
        _ = terminate.recv() => shared.request_stop(StopCause::Signal),
        _ = interrupt.recv() => shared.request_stop(StopCause::Signal),
    }
    drain_calls(&shared).await;
    if !ended {
        let _ = client.await;
    }
    while Arc::strong_count(&shared) > 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cause = *shared.stop.borrow();
    Ok(cause.unwrap_or(StopCause::InputClosed))
}

async fn run(
    shared: Arc<Shared>,
    listener: std::os::unix::net::UnixListener,
    socket_path: &Path,
) -> Result<StopCause, ServeError> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut stop = shared.stop.subscribe();
    let mut idle_tick = tokio::time::interval(IDLE_CHECK_INTERVAL);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    shared.accepted.fetch_add(1, Ordering::AcqRel);
                    if shared.connections.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
                        tasks.spawn(refuse_connection(Arc::clone(&shared), stream));
                    } else {
                        let (read, write) = stream.into_split();
                        tasks.spawn(connection(Arc::clone(&shared), read, write));
                    }
                }
                Err(error) => tracing::warn!(%error, "accept failed"),
            },
            _ = terminate.recv() => shared.request_stop(StopCause::Signal),
            _ = interrupt.recv() => shared.request_stop(StopCause::Signal),
            _ = idle_tick.tick() => {
                if shared.idle_long_enough() {
                    shared.request_stop(StopCause::Idle);
                }
            }
            _ = stop.changed() => {}
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
        if shared.stopping() {
            break;
        }
    }
    // New clients must find no socket (and start a new server) rather than queue on a closing one.
    drop(listener);
    socket::remove(socket_path);
    drain_calls(&shared).await;
    while tasks.join_next().await.is_some() {}
    // A call's task drops its handle on the store just after it counts itself out. Two handles
    // remain: this one and `serve`'s.
    while Arc::strong_count(&shared) > 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cause = *shared.stop.borrow();
    Ok(cause.unwrap_or(StopCause::Request))
}

/// Waits until every admitted call has been answered.
async fn drain_calls(shared: &Shared) {
    shared.admission.drained().await;
}

/// The count of calls admitted and not yet answered, bounded by `max`.
struct Admission {
    admitted: AtomicUsize,
    max: usize,
    /// Woken when `admitted` drops to zero.
    drained: Notify,
}

impl Admission {
    fn new(max: usize) -> Admission {
        Admission { admitted: AtomicUsize::new(0), max, drained: Notify::new() }
    }

    /// Counts a call in, or refuses it (`overloaded`, nothing counted) when `max` are admitted.
    fn enter(&self) -> Result<(), RpcError> {
        if self.admitted.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.leave();
            return Err(RpcError::new(
                Reason::Overloaded,
                format!("the server has {} calls waiting or running, its limit; retry later", self.max),
            )
            .with_limit(self.max as u64));
        }
        Ok(())
    }

    /// Counts an answered call out.
    fn leave(&self) {
        if self.admitted.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.drained.notify_waiters();
        }
    }

    async fn drained(&self) {
        loop {
            let notified = self.drained.notified();
            if self.admitted.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// A connection over [`CONNECTIONS_MAX`]: one `overloaded` answer, then closed.
async fn refuse_connection(shared: Arc<Shared>, mut stream: UnixStream) {
    let error = RpcError::new(
        Reason::Overloaded,
        format!("the server holds {CONNECTIONS_MAX} connections, its limit; retry later"),
    )
    .with_limit(CONNECTIONS_MAX as u64);
    if let Ok(mut line) = serde_json::to_vec(&Response::failure(None, error)) {
        line.push(b'\n');
        let _ = stream.write_all(&line).await;
    }
    let _ = stream.shutdown().await;
    connection_closed(&shared);
}

fn connection_closed(shared: &Shared) {
    if shared.connections.fetch_sub(1, Ordering::AcqRel) == 1
        && let Ok(mut since) = shared.idle_since.lock()
    {
        *since = Instant::now();
    }
}

/// One client: reads frames until it closes or the server stops, answers each, and carries the
/// server's own requests (the client's seams) and notifications (its tail subscriptions).
///
/// A reader task reads frames ahead, so that a client's answers to seam calls are read while its
/// own calls wait for them: requests wait in a queue of at most [`CONNECTION_CALLS_MAX`] for one of
/// the connection's [`CONNECTION_CALLS_MAX`] call slots; a request beyond both is answered
/// `overloaded`.
async fn connection<R, W>(shared: Arc<Shared>, read: R, write: W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outgoing, queued) = mpsc::channel(CONNECTION_REPLIES_QUEUED_MAX);
    let writer = tokio::spawn(write_frames(write, queued));
    let id = shared.next_connection.fetch_add(1, Ordering::AcqRel);
    let conn = Arc::new(Connection {
        id,
        seams: ConnectionSeams::new(Arc::new(Peer::new(outgoing.clone()))),
        outgoing,
        tails: std::sync::Mutex::new(std::collections::HashMap::new()),
        next_tail: AtomicU64::new(1),
        commands_cancelled: Arc::new(AtomicBool::new(false)),
    });
    let (frames_in, mut frames) = mpsc::channel::<std::io::Result<Frame>>(1);
    let reader = tokio::spawn(async move {
        let mut reader = FrameReader::new(read);
        loop {
            let frame = reader.next().await;
            let more = matches!(frame, Ok(Frame::Line(_) | Frame::TooLarge));
            if frames_in.send(frame).await.is_err() || !more {
                return;
            }
        }
    });
    let in_flight = Arc::new(Semaphore::new(CONNECTION_CALLS_MAX));
    let mut waiting: VecDeque<Request> = VecDeque::new();
    let mut reading = true;
    let mut stop = shared.stop.subscribe();
    let mut initialized = false;
    while !shared.stopping() && (reading || !waiting.is_empty()) {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            permit = Arc::clone(&in_flight).acquire_owned(), if !waiting.is_empty() => {
                let (Ok(permit), Some(request)) = (permit, waiting.pop_front()) else { break };
                handle_request(&shared, &conn, request, &mut initialized, permit).await;
            }
            frame = frames.recv(), if reading => match frame {
                Some(Ok(Frame::Line(line))) => match parse_frame(&line) {
                    Incoming::Request(request) if waiting.len() >= CONNECTION_CALLS_MAX => {
                        let error = RpcError::new(
                            Reason::Overloaded,
                            format!(
                                "{CONNECTION_CALLS_MAX} calls of this connection are running and as many wait; \
                                 wait for an answer before sending more"
                            ),
                        )
                        .with_limit(CONNECTION_CALLS_MAX as u64);
                        if request.id.is_some() {
                            conn.reply(Response::failure(request.id, error)).await;
                        }
                    }
                    Incoming::Request(request) => waiting.push_back(request),
                    Incoming::Answer(id, result) => {
                        if !conn.seams.peer.answer(&id, result) {
                            tracing::debug!(?id, "an answer to no waiting seam call was dropped");
                        }
                    }
                    Incoming::Invalid(id, error) => conn.reply(Response::failure(id, error)).await,
                },
                Some(Ok(Frame::TooLarge)) => {
                    let error = RpcError::new(
                        Reason::FrameTooLarge,
                        format!("a request longer than {FRAME_BYTES_MAX} bytes was skipped"),
                    )
                    .with_limit(FRAME_BYTES_MAX as u64);
                    conn.reply(Response::failure(None, error)).await;
                }
                Some(Ok(Frame::End)) | None => reading = false,
                Some(Err(error)) => {
                    tracing::debug!(%error, "connection read failed");
                    reading = false;
                }
            },
        }
    }
    // Requests read but not admitted when the server began to stop did nothing: say so, and as
    // much of those the client had sent but the connection had not read yet.
    for request in waiting {
        refuse_for_shutdown(&conn, request).await;
    }
    if reading && shared.stopping() {
        refuse_unread_requests(&conn, &mut frames).await;
    }
    reader.abort();
    // The client is gone (or the server stops): seam calls waiting for it fail now, its tails end,
    // and memory stops calling it.
    conn.seams.peer.close();
    conn.commands_cancelled.store(true, Ordering::Release);
    conn.end_tails().await;
    shared.release_proposer(conn.id);
    // Calls still running hold the connection (and its sender); the writer ends after their
    // answers.
    drop(conn);
    let _ = writer.await;
    connection_closed(&shared);
}

/// One connection's state, shared with its running calls and tails.
struct Connection {
    id: u64,
    seams: ConnectionSeams,
    outgoing: mpsc::Sender<Outgoing>,
    tails: std::sync::Mutex<std::collections::HashMap<u64, tokio::task::JoinHandle<()>>>,
    next_tail: AtomicU64,
    /// Set when the connection ends: its running commands (`command/run`) stop.
    commands_cancelled: Arc<AtomicBool>,
}

async fn refuse_for_shutdown(conn: &Connection, request: Request) {
    if request.id.is_some() {
        let error = RpcError::new(Reason::ShuttingDown, "the server is shutting down; reconnect");
        conn.reply(Response::failure(request.id, error)).await;
    }
}

/// Reads the requests a stopping connection still receives, while they arrive at most
/// [`SHUTDOWN_DRAIN_IDLE`] apart and for at most [`SHUTDOWN_DRAIN_MAX`], and answers each
/// `shutting_down`: a client never has to guess whether a request it sent before the stop ran.
async fn refuse_unread_requests(conn: &Connection, frames: &mut mpsc::Receiver<std::io::Result<Frame>>) {
    let deadline = tokio::time::Instant::now() + SHUTDOWN_DRAIN_MAX;
    loop {
        let quiet = (tokio::time::Instant::now() + SHUTDOWN_DRAIN_IDLE).min(deadline);
        match tokio::time::timeout_at(quiet, frames.recv()).await {
            Ok(Some(Ok(Frame::Line(line)))) => {
                if let Incoming::Request(request) = parse_frame(&line) {
                    refuse_for_shutdown(conn, request).await;
                }
            }
            Ok(Some(Ok(Frame::TooLarge))) => {}
            _ => return,
        }
    }
}

impl Connection {
    async fn reply(&self, response: Response) {
        let _ = self.outgoing.send(Outgoing::Response(response)).await;
    }

    async fn end_tails(&self) {
        let tails: Vec<_> = self.tails.lock().unwrap_or_else(PoisonError::into_inner).drain().collect();
        for (_, tail) in tails {
            tail.abort();
            let _ = tail.await;
        }
    }
}

async fn write_frames<W: AsyncWrite + Unpin>(mut write: W, mut queued: mpsc::Receiver<Outgoing>) {
    while let Some(frame) = queued.recv().await {
        let mut line = match serde_json::to_vec(&frame) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "a frame does not serialize");
                continue;
            }
        };
        line.push(b'\n');
        if write.write_all(&line).await.is_err() || write.flush().await.is_err() {
            // The client went away; frames still coming are dropped with the receiver.
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// Answers one request: `initialize`, `shutdown`, the subscriptions and the seam registration
/// here, every other method on a worker thread.
async fn handle_request(
    shared: &Arc<Shared>,
    conn: &Arc<Connection>,
    request: Request,
    initialized: &mut bool,
    permit: OwnedSemaphorePermit,
) {
    let id = request.id.clone();
    let params = request.params.unwrap_or(Value::Null);
    let answer = |result: Result<Value, RpcError>| match result {
        Ok(value) => Response::success(id.clone(), value),
        Err(error) => Response::failure(id.clone(), error),
    };
    if request.method == m::Initialize::NAME {
        let result = initialize(shared, params, initialized);
        if id.is_some() {
            conn.reply(answer(result)).await;
        }
        return;
    }
    if !*initialized {
        let error = RpcError::new(
            Reason::NotInitialized,
            format!("{}: call `initialize` first, stating the protocol version", request.method),
        );
        conn.reply(Response::failure(id, error)).await;
        return;
    }
    if request.method == m::RunCommand::NAME {
        run_command(shared, conn, id, params, permit);
        return;
    }
    let by_connection =
        m::MethodInfo::named(&request.method).is_some_and(m::MethodInfo::answered_by_connection);
    if by_connection {
        // A new tail starts sending only once its subscription's answer is queued, so a client
        // sees the subscription's id before any of its notifications.
        let (answered, tail_gate) = tokio::sync::oneshot::channel();
        let result = match request.method.as_str() {
            m::Subscribe::NAME => subscribe(shared, conn, params, tail_gate),
            m::Unsubscribe::NAME => unsubscribe(conn, params).await,
            m::RegisterSeams::NAME => register_seams(shared, conn, params),
            m::Shutdown::NAME => {
                shared.request_stop(StopCause::Request);
                Ok(serde_json::json!({}))
            }
            other => Err(RpcError::new(
                Reason::Internal,
                format!(
                    "{other}: the methods' table routes it to the connection, which has no answer for it"
                ),
            )),
        };
        if request.method != m::Shutdown::NAME {
            shared.calls.fetch_add(1, Ordering::AcqRel);
        }
        if id.is_some() {
            conn.reply(answer(result)).await;
        }
        let _ = answered.send(());
        return;
    }
    if let Err(error) = admit(shared) {
        conn.reply(Response::failure(id, error)).await;
        return;
    }
    let shared = Arc::clone(shared);
    let conn = Arc::clone(conn);
    tokio::spawn(async move {
        let result = run_call(&shared, &conn, request.method, params).await;
        shared.calls.fetch_add(1, Ordering::AcqRel);
        if id.is_some() {
            let response = match result {
                Ok(value) => Response::success(id, value),
                Err(error) => Response::failure(id, error),
            };
            conn.reply(response).await;
        }
        drop(conn);
        drop(permit);
        shared.admission.leave();
    });
}

/// `command/run`: admitted as a call is, and answered once the command has ended and all of its
/// output has been sent. It runs on a thread of its own, not a worker's: it may last as long as
/// its client stays.
fn run_command(
    shared: &Arc<Shared>,
    conn: &Arc<Connection>,
    id: Option<RequestId>,
    params: Value,
    permit: OwnedSemaphorePermit,
) {
    let shared = Arc::clone(shared);
    let conn = Arc::clone(conn);
    tokio::spawn(async move {
        let result = match (admit(&shared), shared.commands.clone()) {
            (Err(error), _) => Err(error),
            (Ok(()), runner) => {
                let result = match runner {
                    None => Err(RpcError::new(
                        Reason::MethodNotFound,
                        format!(
                            "{}: this server runs no command lines; stop it to run the command in \
                             your own process",
                            m::RunCommand::NAME
                        ),
                    )),
                    Some(runner) => start_command(&shared, &conn, runner, params).await,
                };
                shared.admission.leave();
                result
            }
        };
        shared.calls.fetch_add(1, Ordering::AcqRel);
        if id.is_some() {
            let response = match result {
                Ok(value) => Response::success(id, value),
                Err(error) => Response::failure(id, error),
            };
            conn.reply(response).await;
        }
        drop(permit);
    });
}

async fn start_command(
    shared: &Arc<Shared>,
    conn: &Arc<Connection>,
    runner: Arc<dyn CommandRunner>,
    params: Value,
) -> Result<Value, RpcError> {
    let params: m::RunCommandParams = dispatch::parse_params(m::RunCommand::NAME, params)?;
    if params.argv.len() > COMMAND_ARGS_MAX {
        return Err(RpcError::new(
            Reason::InvalidParams,
            format!("{}: {} arguments, more than {COMMAND_ARGS_MAX}", m::RunCommand::NAME, params.argv.len()),
        )
        .with_limit(COMMAND_ARGS_MAX as u64));
    }
    // The command stops when its connection ends or when the server begins to stop.
    let cancelled = Arc::clone(&conn.commands_cancelled);
    let mut stop = shared.stop.subscribe();
    let on_stop = Arc::clone(&cancelled);
    let watcher = tokio::spawn(async move {
        if stop.wait_for(Option::is_some).await.is_ok() {
            on_stop.store(true, Ordering::Release);
        }
    });
    let peer = Arc::clone(&conn.seams.peer);
    let ran = command::run(runner, Arc::clone(&shared.mnemo), params, peer, cancelled).await;
    watcher.abort();
    let exit_code = ran.map_err(|message| RpcError::new(Reason::Internal, message))?;
    serde_json::to_value(m::RunCommandResult { exit_code })
        .map_err(|e| RpcError::new(Reason::Internal, e.to_string()))
}

/// Counts a call in, or refuses it when the server is stopping or full.
fn admit(shared: &Shared) -> Result<(), RpcError> {
    if shared.stopping() {
        return Err(RpcError::new(Reason::ShuttingDown, "the server is shutting down; reconnect"));
    }
    shared.admission.enter()
}

async fn run_call(
    shared: &Arc<Shared>,
    conn: &Arc<Connection>,
    method: String,
    params: Value,
) -> Result<Value, RpcError> {
    let _worker = Arc::clone(&shared.workers)
        .acquire_owned()
        .await
        .map_err(|_| RpcError::new(Reason::ShuttingDown, "the server is shutting down; reconnect"))?;
    let shared = Arc::clone(shared);
    let conn = Arc::clone(conn);
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let call = dispatch::Call {
            mnemo: &shared.mnemo,
            runtime: &runtime,
            seams: &conn.seams,
            extraction: &shared.extraction,
        };
        dispatch::call(&call, &method, params)
    })
    .await
    .unwrap_or_else(|error| Err(RpcError::new(Reason::Internal, format!("the call failed: {error}"))))
}

/// `seams/register`: what this connection answers from now on.
fn register_seams(shared: &Arc<Shared>, conn: &Arc<Connection>, params: Value) -> Result<Value, RpcError> {
    let params: m::RegisterSeamsParams = dispatch::parse_params(m::RegisterSeams::NAME, params)?;
    let max = SEAM_TIMEOUT_MAX.as_millis() as u64;
    let timeout_ms = params.timeout_ms.unwrap_or(max);
    if !(1..=max).contains(&timeout_ms) {
        return Err(RpcError::new(
            Reason::InvalidParams,
            format!("{}: timeout_ms {timeout_ms} is not in 1..={max}", m::RegisterSeams::NAME),
        )
        .with_limit(max));
    }
    let timeout = Duration::from_millis(timeout_ms);
    let mut registered = Vec::new();
    if params.summarizer.is_some() {
        registered.push(m::SummarizeSeam::NAME.to_owned());
    }
    if params.provider_compactor.is_some() {
        registered.push(m::ProviderCompactSeam::NAME.to_owned());
    }
    match &params.memory_proposer {
        Some(spec) => {
            registered.push(m::ProposeSeam::NAME.to_owned());
            let proposer = ClientProposer { peer: Arc::clone(&conn.seams.peer), spec: spec.clone(), timeout };
            shared.claim_proposer(conn.id, proposer);
        }
        None => shared.release_proposer(conn.id),
    }
    conn.seams.register(Registered {
        summarizer: params.summarizer,
        provider_compactor: params.provider_compactor,
        timeout,
    });
    serde_json::to_value(m::RegisterSeamsResult { registered, timeout_ms })
        .map_err(|e| RpcError::new(Reason::Internal, e.to_string()))
}

/// `log/subscribe`: a task that sends every envelope from `from` on as `log/appended`.
fn subscribe(
    shared: &Arc<Shared>,
    conn: &Arc<Connection>,
    params: Value,
    answered: tokio::sync::oneshot::Receiver<()>,
) -> Result<Value, RpcError> {
    let params: m::SubscribeParams = dispatch::parse_params(m::Subscribe::NAME, params)?;
    let mut tails = conn.tails.lock().unwrap_or_else(PoisonError::into_inner);
    tails.retain(|_, tail| !tail.is_finished());
    if tails.len() >= SUBSCRIPTIONS_MAX {
        return Err(RpcError::new(
            Reason::Overloaded,
            format!(
                "this connection holds {SUBSCRIPTIONS_MAX} subscriptions, its limit; unsubscribe one first"
            ),
        )
        .with_limit(SUBSCRIPTIONS_MAX as u64));
    }
    let head = shared.mnemo.log().head().0;
    let from = params.from.unwrap_or(head + 1).max(1);
    let subscription = conn.next_tail.fetch_add(1, Ordering::AcqRel);
    let tail = tokio::spawn(follow(Arc::clone(shared), Arc::clone(conn), subscription, from, answered));
    tails.insert(subscription, tail);
    serde_json::to_value(m::SubscribeResult { subscription, from })
        .map_err(|e| RpcError::new(Reason::Internal, e.to_string()))
}

async fn unsubscribe(conn: &Arc<Connection>, params: Value) -> Result<Value, RpcError> {
    let params: m::UnsubscribeParams = dispatch::parse_params(m::Unsubscribe::NAME, params)?;
    let tail = conn.tails.lock().unwrap_or_else(PoisonError::into_inner).remove(&params.subscription);
    let Some(tail) = tail else {
        return Err(RpcError::new(
            Reason::NotFound,
            format!("{}: no subscription {} on this connection", m::Unsubscribe::NAME, params.subscription),
        ));
    };
    tail.abort();
    let _ = tail.await;
    Ok(serde_json::json!({}))
}

/// A tail: polls the log's head, reads what is new in pages, and sends each page as one
/// notification (waiting while the connection's queue is full, so a slow client slows only its
/// own tail). Ends when the connection closes or the server stops.
async fn follow(
    shared: Arc<Shared>,
    conn: Arc<Connection>,
    subscription: u64,
    mut next: u64,
    answered: tokio::sync::oneshot::Receiver<()>,
) {
    let mut stop = shared.stop.subscribe();
    if answered.await.is_err() {
        return;
    }
    loop {
        if shared.stopping() {
            return;
        }
        if shared.mnemo.log().head().0 < next {
            tokio::select! {
                _ = tokio::time::sleep(TAIL_POLL_INTERVAL) => continue,
                _ = stop.changed() => return,
            }
        }
        let reader = Arc::clone(&shared);
        let read = tokio::task::spawn_blocking(move || {
            reader.mnemo.log_entries(mnemo::records::Position(next), TAIL_ENTRIES_MAX)
        })
        .await;
        let entries = match read {
            Ok(Ok(entries)) => entries,
            Ok(Err(error)) => {
                tracing::warn!(%error, subscription, "a tail could not read the log; it ends");
                return;
            }
            Err(_) => return,
        };
        let Some(last) = entries.last().map(|entry| entry.position.0) else {
            tokio::time::sleep(TAIL_POLL_INTERVAL).await;
            continue;
        };
        let entries: Vec<m::Object> = entries
            .iter()
            .filter_map(|entry| match serde_json::to_value(entry) {
                Ok(Value::Object(object)) => Some(object),
                _ => None,
            })
            .collect();
        if !conn.seams.peer.notify::<m::Appended>(&m::AppendedParams { subscription, entries }).await {
            return;
        }
        next = last + 1;
    }
}

/// A frame read from a client: a request (or notification) of its own, its answer to a seam call
/// of the server's, or neither.
enum Incoming {
    Request(Request),
    Answer(RequestId, Result<Value, RpcError>),
    Invalid(Option<RequestId>, RpcError),
}

fn parse_frame(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Incoming::Invalid(
                None,
                RpcError::new(Reason::ParseError, format!("the frame is not JSON: {e}")),
            );
        }
    };
    if let Some(object) = value.as_object()
        && !object.contains_key("method")
        && (object.contains_key("result") || object.contains_key("error"))
    {
        return match serde_json::from_value::<Response>(value) {
            Ok(Response { id: Some(id), result: Some(result), error: None, .. }) => {
                Incoming::Answer(id, Ok(result))
            }
            Ok(Response { id: Some(id), result: None, error: Some(error), .. }) => {
                Incoming::Answer(id, Err(error))
            }
            Ok(_) => Incoming::Invalid(
                None,
                RpcError::new(
                    Reason::InvalidRequest,
                    "an answer must have an id and exactly one of result and error",
                ),
            ),
            Err(e) => {
                Incoming::Invalid(None, RpcError::new(Reason::InvalidRequest, format!("not an answer: {e}")))
            }
        };
    }
    match request_of(value) {
        Ok(request) => Incoming::Request(request),
        Err((id, error)) => Incoming::Invalid(id, error),
    }
}

#[cfg(test)]
fn parse_request(line: &[u8]) -> Result<Request, (Option<RequestId>, RpcError)> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| (None, RpcError::new(Reason::ParseError, format!("the frame is not JSON: {e}"))))?;
    request_of(value)
}

fn request_of(value: Value) -> Result<Request, (Option<RequestId>, RpcError)> {
    if value.is_array() {
        return Err((
            None,
            RpcError::new(Reason::InvalidRequest, "batches are not supported: send one request per line"),
        ));
    }
    let id = value.get("id").cloned().and_then(|id| serde_json::from_value::<RequestId>(id).ok());
    let request: Request = serde_json::from_value(value)
        .map_err(|e| (id.clone(), RpcError::new(Reason::InvalidRequest, format!("not a request: {e}"))))?;
    if request.jsonrpc != JSONRPC_VERSION {
        let message = format!("jsonrpc must be \"{JSONRPC_VERSION}\", not {:?}", request.jsonrpc);
        return Err((id, RpcError::new(Reason::InvalidRequest, message)));
    }
    Ok(request)
}

fn initialize(shared: &Shared, params: Value, initialized: &mut bool) -> Result<Value, RpcError> {
    if *initialized {
        return Err(RpcError::new(
            Reason::AlreadyInitialized,
            "initialize: this connection is already initialized",
        ));
    }
    let params: m::InitializeParams = dispatch::parse_params(m::Initialize::NAME, params)?;
    if !PROTOCOL_VERSIONS.contains(&params.protocol_version) {
        let mut error = RpcError::new(
            Reason::UnsupportedProtocolVersion,
            format!("initialize: protocol version {} is not one this server speaks", params.protocol_version),
        );
        error.data.supported = Some(PROTOCOL_VERSIONS.to_vec());
        return Err(error);
    }
    if let Some(name) = &params.client_name {
        tracing::debug!(client = %name.chars().take(256).collect::<String>(), "client initialized");
    }
    *initialized = true;
    let result = m::InitializeResult {
        protocol_version: params.protocol_version,
        server_name: "mnemo".to_owned(),
        server_version: env!("CARGO_PKG_VERSION").to_owned(),
        store: shared.store.clone(),
        pid: std::process::id(),
        methods: m::METHOD_NAMES.iter().map(|name| (*name).to_owned()).collect(),
        limits: m::Limits {
            frame_bytes_max: FRAME_BYTES_MAX as u64,
            connection_calls_max: CONNECTION_CALLS_MAX as u64,
            calls_admitted_max: CALLS_ADMITTED_MAX as u64,
            connections_max: CONNECTIONS_MAX as u64,
            idle_exit_secs: shared.idle_exit.map_or(0, |d| d.as_secs()),
        },
    };
    serde_json::to_value(result).map_err(|e| RpcError::new(Reason::Internal, e.to_string()))
}

/// One frame read from a connection.
enum Frame {
    /// A line, without its newline.
    Line(Vec<u8>),
    /// A line longer than [`FRAME_BYTES_MAX`], skipped through its newline.
    TooLarge,
    /// The client closed its side.
    End,
}

/// Splits a byte stream into lines of at most [`FRAME_BYTES_MAX`] bytes, never holding more.
struct FrameReader<R> {
    read: BufReader<R>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    fn new(read: R) -> FrameReader<R> {
        FrameReader { read: BufReader::new(read) }
    }

    async fn next(&mut self) -> std::io::Result<Frame> {
        loop {
            let frame = read_frame(&mut self.read, FRAME_BYTES_MAX).await?;
            // Blank lines between frames are allowed and skipped.
            if let Frame::Line(line) = &frame
                && line.iter().all(u8::is_ascii_whitespace)
            {
                continue;
            }
            return Ok(frame);
        }
    }
}

/// Reads one newline-terminated frame of at most `max` bytes from `read`. A longer one is consumed
/// through its newline and reported as [`Frame::TooLarge`]; a last line without a newline counts.
async fn read_frame<R: tokio::io::AsyncBufRead + Unpin>(read: &mut R, max: usize) -> std::io::Result<Frame> {
    let mut line = Vec::new();
    let mut too_large = false;
    loop {
        let buffer = read.fill_buf().await?;
        if buffer.is_empty() {
            if too_large {
                return Ok(Frame::TooLarge);
            }
            return Ok(if line.is_empty() { Frame::End } else { Frame::Line(line) });
        }
        let (taken, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(newline) => (newline, true),
            None => (buffer.len(), false),
        };
        if !too_large {
            if line.len() + taken > max {
                too_large = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&buffer[..taken]);
            }
        }
        read.consume(if done { taken + 1 } else { taken });
        if done {
            return Ok(if too_large { Frame::TooLarge } else { Frame::Line(line) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut read = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            match read_frame(&mut read, max).await.unwrap() {
                Frame::Line(line) => out.push(String::from_utf8(line).unwrap()),
                Frame::TooLarge => out.push("<too large>".to_owned()),
                Frame::End => return out,
            }
        }
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_skipped_through_its_newline_and_the_next_one_reads() {
        let got = frames(b"{\"a\":1}\n0123456789abcdef\n{\"b\":2}\nlast", 10).await;
        assert_eq!(got, ["{\"a\":1}", "<too large>", "{\"b\":2}", "last"]);
        // Exactly at the limit is allowed.
        assert_eq!(frames(b"0123456789\n", 10).await, ["0123456789"]);
        assert_eq!(frames(b"0123456789a\n", 10).await, ["<too large>"]);
    }

    #[tokio::test]
    async fn a_call_over_the_admission_limit_is_overloaded_and_counts_nothing() {
        let admission = Admission::new(CALLS_ADMITTED_MAX);
        for _ in 0..CALLS_ADMITTED_MAX {
            admission.enter().unwrap();
        }
        let refused = admission.enter().unwrap_err();
        assert_eq!(refused.reason(), Reason::Overloaded);
        assert_eq!(refused.code, -32001);
        assert_eq!(refused.data.limit, Some(CALLS_ADMITTED_MAX as u64));
        admission.leave();
        admission.enter().unwrap();
        for _ in 0..CALLS_ADMITTED_MAX {
            admission.leave();
        }
        // Drained: every admitted call has left.
        tokio::time::timeout(Duration::from_secs(5), admission.drained()).await.unwrap();
    }

    #[test]
    fn a_batch_and_a_wrong_version_are_invalid_requests_that_keep_their_id() {
        let (_, error) = parse_request(b"[]").unwrap_err();
        assert_eq!(error.reason(), Reason::InvalidRequest);
        let (id, error) = parse_request(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#).unwrap_err();
        assert_eq!((id, error.reason()), (Some(RequestId::Number(7)), Reason::InvalidRequest));
        let (id, error) = parse_request(b"{nope").unwrap_err();
        assert_eq!((id, error.reason()), (None, Reason::ParseError));
    }
}
