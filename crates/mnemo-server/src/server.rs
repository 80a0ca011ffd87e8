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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mnemo::{Config, Mnemo};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::dispatch;
use crate::limits::{
    CALLS_ADMITTED_MAX, CALLS_RUNNING_MAX, CONNECTION_CALLS_MAX, CONNECTION_REPLIES_QUEUED_MAX,
    CONNECTIONS_MAX, FRAME_BYTES_MAX, IDLE_CHECK_INTERVAL,
};
use crate::methods::{self as m, Method};
use crate::protocol::{JSONRPC_VERSION, PROTOCOL_VERSIONS, Reason, Request, RequestId, Response, RpcError};
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
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            config: Config::default(),
            idle_exit: Some(crate::limits::IDLE_EXIT_DEFAULT),
            runtime_threads: 2,
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
    mnemo: Mnemo,
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
}

impl Shared {
    fn request_stop(&self, cause: StopCause) {
        self.stop.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(cause);
                return true;
            }
            false
        });
    }

    fn stopping(&self) -> bool {
        self.stop.borrow().is_some()
    }

    fn idle_long_enough(&self) -> bool {
        let Some(idle) = self.idle_exit else { return false };
        self.connections.load(Ordering::Acquire) == 0
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
    let (stop, _) = watch::channel(None);
    let shared = Arc::new(Shared {
        mnemo,
        store: std::path::absolute(store).unwrap_or_else(|_| store.to_path_buf()).display().to_string(),
        idle_exit: options.idle_exit,
        admission: Admission::new(CALLS_ADMITTED_MAX),
        workers: Arc::new(Semaphore::new(CALLS_RUNNING_MAX)),
        connections: AtomicUsize::new(0),
        accepted: AtomicU64::new(0),
        calls: AtomicU64::new(0),
        idle_since: std::sync::Mutex::new(Instant::now()),
        stop,
    });
    let result = runtime.block_on(run(Arc::clone(&shared), listener, &socket_path));
    socket::remove(&socket_path);
    let cause = result?;
    let report = ServeReport {
        socket: socket_path,
        calls: shared.calls.load(Ordering::Acquire),
        connections: shared.accepted.load(Ordering::Acquire),
        stopped_by: cause,
    };
    // Every call has answered and every connection task has ended, so this is the last handle.
    let shared = Arc::try_unwrap(shared)
        .map_err(|_| std::io::Error::other("a call still holds the store after every call was answered"))?;
    drop(runtime);
    shared.mnemo.close()?;
    tracing::info!(calls = report.calls, "stopped");
    Ok(report)
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
                        tasks.spawn(connection(Arc::clone(&shared), stream));
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

/// One client: reads frames until it closes or the server stops, answers each.
async fn connection(shared: Arc<Shared>, stream: UnixStream) {
    let (read, write) = stream.into_split();
    let (replies, queued) = mpsc::channel(CONNECTION_REPLIES_QUEUED_MAX);
    let writer = tokio::spawn(write_replies(write, queued));
    let in_flight = Arc::new(Semaphore::new(CONNECTION_CALLS_MAX));
    let mut frames = FrameReader::new(read);
    let mut stop = shared.stop.subscribe();
    let mut initialized = false;
    loop {
        if shared.stopping() {
            break;
        }
        let permit = tokio::select! {
            permit = Arc::clone(&in_flight).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stop.changed() => break,
        };
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = stop.changed() => break,
        };
        match frame {
            Ok(Frame::Line(line)) => {
                handle_frame(&shared, &line, &mut initialized, &replies, permit).await;
            }
            Ok(Frame::TooLarge) => {
                let error = RpcError::new(
                    Reason::FrameTooLarge,
                    format!("a request longer than {FRAME_BYTES_MAX} bytes was skipped"),
                )
                .with_limit(FRAME_BYTES_MAX as u64);
                let _ = replies.send(Response::failure(None, error)).await;
            }
            Ok(Frame::End) => break,
            Err(error) => {
                tracing::debug!(%error, "connection read failed");
                break;
            }
        }
    }
    // Calls still running hold their own sender; the writer ends after their answers.
    drop(replies);
    let _ = writer.await;
    connection_closed(&shared);
}

async fn write_replies(mut write: OwnedWriteHalf, mut queued: mpsc::Receiver<Response>) {
    while let Some(response) = queued.recv().await {
        let mut line = match serde_json::to_vec(&response) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "an answer does not serialize");
                continue;
            }
        };
        line.push(b'\n');
        if write.write_all(&line).await.is_err() {
            // The client went away; answers still coming are dropped with the receiver.
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// Reads one request frame and answers it: `initialize` and `shutdown` here, every other method on
/// a worker thread.
async fn handle_frame(
    shared: &Arc<Shared>,
    line: &[u8],
    initialized: &mut bool,
    replies: &mpsc::Sender<Response>,
    permit: OwnedSemaphorePermit,
) {
    let request = match parse_request(line) {
        Ok(request) => request,
        Err((id, error)) => {
            let _ = replies.send(Response::failure(id, error)).await;
            return;
        }
    };
    let id = request.id.clone();
    let params = request.params.unwrap_or(Value::Null);
    let answer = |result: Result<Value, RpcError>| match result {
        Ok(value) => Response::success(id.clone(), value),
        Err(error) => Response::failure(id.clone(), error),
    };
    if request.method == m::Initialize::NAME {
        let result = initialize(shared, params, initialized);
        if id.is_some() {
            let _ = replies.send(answer(result)).await;
        }
        return;
    }
    if !*initialized {
        let error = RpcError::new(
            Reason::NotInitialized,
            format!("{}: call `initialize` first, stating the protocol version", request.method),
        );
        let _ = replies.send(Response::failure(id, error)).await;
        return;
    }
    if request.method == m::Shutdown::NAME {
        shared.request_stop(StopCause::Request);
        if id.is_some() {
            let _ = replies.send(answer(Ok(serde_json::json!({})))).await;
        }
        return;
    }
    if let Err(error) = admit(shared) {
        let _ = replies.send(Response::failure(id, error)).await;
        return;
    }
    let shared = Arc::clone(shared);
    let replies = replies.clone();
    tokio::spawn(async move {
        let result = run_call(&shared, request.method, params).await;
        shared.calls.fetch_add(1, Ordering::AcqRel);
        if id.is_some() {
            let response = match result {
                Ok(value) => Response::success(id, value),
                Err(error) => Response::failure(id, error),
            };
            let _ = replies.send(response).await;
        }
        drop(permit);
        shared.admission.leave();
    });
}

/// Counts a call in, or refuses it when the server is stopping or full.
fn admit(shared: &Shared) -> Result<(), RpcError> {
    if shared.stopping() {
        return Err(RpcError::new(Reason::ShuttingDown, "the server is shutting down; reconnect"));
    }
    shared.admission.enter()
}

async fn run_call(shared: &Arc<Shared>, method: String, params: Value) -> Result<Value, RpcError> {
    let _worker = Arc::clone(&shared.workers)
        .acquire_owned()
        .await
        .map_err(|_| RpcError::new(Reason::ShuttingDown, "the server is shutting down; reconnect"))?;
    let shared = Arc::clone(shared);
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || dispatch::call(&shared.mnemo, &runtime, &method, params))
        .await
        .unwrap_or_else(|error| Err(RpcError::new(Reason::Internal, format!("the call failed: {error}"))))
}

fn parse_request(line: &[u8]) -> Result<Request, (Option<RequestId>, RpcError)> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| (None, RpcError::new(Reason::ParseError, format!("the frame is not JSON: {e}"))))?;
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
struct FrameReader {
    read: BufReader<OwnedReadHalf>,
}

impl FrameReader {
    fn new(read: OwnedReadHalf) -> FrameReader {
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
