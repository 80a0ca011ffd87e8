//! The Rust client of the store server: blocking, one call at a time, and able to start the server
//! it does not find.
//!
//! ```no_run
//! use mnemo_server::client::{Client, ConnectOptions, StartCommand};
//! use mnemo_server::methods::{SearchHistory, SearchHistoryParams, ToolContext};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = std::path::Path::new("/home/me/.mnemo");
//! // Start `mnemo serve` (this very binary) when no server answers on the store's socket.
//! let options = ConnectOptions::new("my-hook").start_with(StartCommand::current_exe(store)?);
//! let mut client = Client::connect(store, &options)?;
//! let params = SearchHistoryParams {
//!     query: "deploy".to_owned(), limit: Some(3), cursor: None,
//!     context: ToolContext::default(), as_of: None,
//! };
//! let found = client.call::<SearchHistory>(&params)?;
//! println!("{} rows", found.rows.len());
//! # Ok(())
//! # }
//! ```
//!
//! One server per store, under a race: every client that finds no socket may start a server, but
//! only the one that takes the store's lock binds the socket; the others' servers exit at once
//! ("store is locked") and their clients connect to the winner's socket when it appears.
//!
//! It uses: the wire ([`crate::protocol`]), the methods' types ([`crate::methods`]: a call is typed
//! by its method, `client.call::<M>(&params)`), the socket's path rule ([`crate::socket`]) and the
//! limits.
//!
//! It is not:
//! - asynchronous or pipelined: one call at a time on one connection (the TypeScript and Python
//!   clients pipeline; the inspector keeps a few of these side by side);
//! - a server: it never opens the store, and nothing of the server's core is used here
//!   (`tests/rooms.rs` checks it).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::limits::{
    CALL_TIMEOUT_DEFAULT, CONNECT_RETRY_INTERVAL, FRAME_BYTES_MAX, START_STDERR_BYTES_MAX, START_WAIT_DEFAULT,
};
use crate::methods::{
    CommandOutput, CommandOutputParams, Initialize, InitializeParams, InitializeResult, Method, OutputStream,
    RunCommand, RunCommandParams, RunCommandResult, ServerMessage as _,
};
use crate::protocol::{JSONRPC_VERSION, PROTOCOL_VERSION, Reason, Request, RequestId, Response, RpcError};
use crate::socket::{SocketError, socket_path};

/// How long a client waits before starting another server after one it started exited (it lost the
/// race for the store's lock, or the previous owner was still closing the store).
pub const RESTART_INTERVAL: Duration = Duration::from_millis(200);

/// The command that starts a server for a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl StartCommand {
    /// `PROGRAM --store STORE serve`: the `mnemo` binary at `program`.
    pub fn mnemo(program: impl Into<PathBuf>, store: &Path) -> StartCommand {
        StartCommand {
            program: program.into(),
            args: vec!["--store".into(), store.as_os_str().to_owned(), "serve".into()],
        }
    }

    /// [`StartCommand::mnemo`] with the running executable: for code inside the `mnemo` binary.
    pub fn current_exe(store: &Path) -> std::io::Result<StartCommand> {
        Ok(StartCommand::mnemo(std::env::current_exe()?, store))
    }

    /// The same command with more arguments after it (`--idle-exit 60`).
    pub fn arg(mut self, arg: impl Into<OsString>) -> StartCommand {
        self.args.push(arg.into());
        self
    }
}

/// How a client connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// Who the client is (the server logs it).
    pub client_name: String,
    /// How long one call may take before the client gives up on it.
    pub call_timeout: Duration,
    /// Start a server with this command when none answers; `None`: fail with `NoServer`.
    pub start: Option<StartCommand>,
    /// How long to wait for a started server to answer.
    pub start_wait: Duration,
}

impl ConnectOptions {
    /// Options that never start a server, with the default timeouts.
    pub fn new(client_name: impl Into<String>) -> ConnectOptions {
        ConnectOptions {
            client_name: client_name.into(),
            call_timeout: CALL_TIMEOUT_DEFAULT,
            start: None,
            start_wait: START_WAIT_DEFAULT,
        }
    }

    /// The same options, starting a server with `command` when none answers.
    pub fn start_with(mut self, command: StartCommand) -> ConnectOptions {
        self.start = Some(command);
        self
    }

    /// The same options with another call timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> ConnectOptions {
        self.call_timeout = timeout;
        self
    }

    /// The same options with another wait for a started server.
    pub fn start_wait(mut self, wait: Duration) -> ConnectOptions {
        self.start_wait = wait;
        self
    }
}

/// Why a call or a connection failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The store's socket path cannot be used.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// No server answers and the options say not to start one.
    #[error("no server answers on {socket}")]
    NoServer { socket: String },
    /// A started server did not come up in time; its error output says why, when it said anything.
    #[error("the server for {store} did not start within {waited:?}{}", describe_stderr(.stderr))]
    StartFailed { store: String, waited: Duration, stderr: String },
    /// The server answered with an error: match on [`RpcError::reason`].
    #[error(transparent)]
    Rpc(Box<RpcError>),
    /// The connection broke after a call that is not repeatable was sent: it may or may not have
    /// run. Read the store to find out before sending it again.
    #[error("the connection broke during {method}; it may or may not have run")]
    Interrupted { method: &'static str },
    /// No answer came within the call timeout; the call may still run.
    #[error("no answer to {method} within {after:?}")]
    TimedOut { method: &'static str, after: Duration },
    /// The server's answer is not a valid answer to the call.
    #[error("invalid answer to {method}: {detail}")]
    Protocol { method: &'static str, detail: String },
    /// Connecting, reading or writing failed.
    #[error("store server i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl From<RpcError> for ClientError {
    fn from(error: RpcError) -> Self {
        ClientError::Rpc(Box::new(error))
    }
}

fn describe_stderr(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() { String::new() } else { format!(": {stderr}") }
}

/// A connection to a store's server.
#[derive(Debug)]
pub struct Client {
    store: PathBuf,
    options: ConnectOptions,
    connection: Connection,
    next_id: i64,
}

#[derive(Debug)]
struct Connection {
    write: UnixStream,
    read: BufReader<UnixStream>,
    server: InitializeResult,
}

impl Client {
    /// Connects to the server of the store at `store`, starting one if none answers and the options
    /// say how, and initializes the connection.
    pub fn connect(store: &Path, options: &ConnectOptions) -> Result<Client, ClientError> {
        let connection = connect(store, options)?;
        Ok(Client { store: store.to_path_buf(), options: options.clone(), connection, next_id: 1 })
    }

    /// What the server said about itself in `initialize`.
    pub fn server(&self) -> &InitializeResult {
        &self.connection.server
    }

    /// Calls `M`. When the connection turns out to be gone (the server idled out or restarted), the
    /// call is sent once more on a new connection — starting a server if the options say how — if
    /// nothing of it can have run: the request could not be written, the server refused it as
    /// `shutting_down`, or the method is repeatable.
    pub fn call<M: Method>(&mut self, params: &M::Params) -> Result<M::Result, ClientError> {
        let params = serde_json::to_value(params)
            .map_err(|e| ClientError::Protocol { method: M::NAME, detail: format!("params: {e}") })?;
        let value = match self.call_value(M::NAME, &params) {
            Ok(value) => value,
            Err(Attempt::Unsent(_)) => self.reconnect_and_call(M::NAME, &params)?,
            Err(Attempt::Failed(ClientError::Rpc(error))) if error.reason() == Reason::ShuttingDown => {
                self.reconnect_and_call(M::NAME, &params)?
            }
            Err(Attempt::Lost) if M::REPEATABLE => self.reconnect_and_call(M::NAME, &params)?,
            Err(Attempt::Lost) => return Err(ClientError::Interrupted { method: M::NAME }),
            Err(Attempt::Failed(error)) => return Err(error),
        };
        serde_json::from_value(value)
            .map_err(|e| ClientError::Protocol { method: M::NAME, detail: e.to_string() })
    }

    /// Runs a command line in the server (`command/run`), handing each piece of its output to
    /// `output` as it arrives, and returns its exit code. No call timeout applies: the command runs
    /// as long as it needs to (`sync --watch` until it is stopped). Dropping the client (ending
    /// the process) stops it. Never sent twice: a broken connection is
    /// [`ClientError::Interrupted`].
    pub fn run_command(
        &mut self,
        params: &RunCommandParams,
        mut output: impl FnMut(OutputStream, &str),
    ) -> Result<u8, ClientError> {
        let method = RunCommand::NAME;
        let id = self.next_id;
        self.next_id += 1;
        let params = serde_json::to_value(params)
            .map_err(|e| ClientError::Protocol { method, detail: format!("params: {e}") })?;
        let request = Request {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id: Some(RequestId::Number(id)),
            method: method.to_owned(),
            params: Some(params),
        };
        send(&mut self.connection.write, &request)?;
        self.connection.read.get_ref().set_read_timeout(None)?;
        let mut deliver = |frame: &Value| {
            if frame.get("method").and_then(Value::as_str) == Some(CommandOutput::NAME)
                && let Some(Ok(chunk)) = frame
                    .get("params")
                    .map(|params| serde_json::from_value::<CommandOutputParams>(params.clone()))
            {
                output(chunk.stream, &chunk.text);
            }
        };
        let received = receive_delivering(&mut self.connection.read, method, &mut deliver);
        self.connection.read.get_ref().set_read_timeout(Some(self.options.call_timeout))?;
        let response = match received {
            Ok(response) => response,
            Err(ClientError::Io(_)) => return Err(ClientError::Interrupted { method }),
            Err(other) => return Err(other),
        };
        if response.id != Some(RequestId::Number(id)) {
            let detail = format!("answer to id {:?}, not {id}", response.id);
            return Err(ClientError::Protocol { method, detail });
        }
        if let Some(error) = response.error {
            return Err(error.into());
        }
        let result: RunCommandResult = response
            .result
            .and_then(|result| serde_json::from_value(result).ok())
            .ok_or_else(|| ClientError::Protocol { method, detail: "no exit code".to_owned() })?;
        Ok(result.exit_code)
    }

    fn reconnect_and_call(&mut self, method: &'static str, params: &Value) -> Result<Value, ClientError> {
        self.connection = connect(&self.store, &self.options)?;
        self.call_value(method, params).map_err(|attempt| match attempt {
            Attempt::Unsent(error) => error,
            Attempt::Lost => ClientError::Interrupted { method },
            Attempt::Failed(error) => error,
        })
    }

    fn call_value(&mut self, method: &'static str, params: &Value) -> Result<Value, Attempt> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id: Some(RequestId::Number(id)),
            method: method.to_owned(),
            params: Some(params.clone()),
        };
        match send(&mut self.connection.write, &request) {
            Ok(()) => {}
            Err(ClientError::Io(e)) => return Err(Attempt::Unsent(ClientError::Io(e))),
            Err(other) => return Err(Attempt::Failed(other)),
        }
        let response = match receive(&mut self.connection.read, method) {
            Ok(response) => response,
            Err(ClientError::Io(e)) if timed_out(&e) => {
                return Err(Attempt::Failed(ClientError::TimedOut {
                    method,
                    after: self.options.call_timeout,
                }));
            }
            Err(ClientError::Io(_)) => return Err(Attempt::Lost),
            Err(other) => return Err(Attempt::Failed(other)),
        };
        if response.id != Some(RequestId::Number(id)) {
            let detail = format!("answer to id {:?}, not {id}", response.id);
            return Err(Attempt::Failed(ClientError::Protocol { method, detail }));
        }
        match (response.result, response.error) {
            (_, Some(error)) => Err(Attempt::Failed(error.into())),
            (Some(result), None) => Ok(result),
            (None, None) => Err(Attempt::Failed(ClientError::Protocol {
                method,
                detail: "neither result nor error".to_owned(),
            })),
        }
    }
}

/// How one attempt at a call went wrong.
enum Attempt {
    /// The request could not be written: nothing of it ran.
    Unsent(ClientError),
    /// The connection broke after the request was written.
    Lost,
    /// Anything else, final.
    Failed(ClientError),
}

fn timed_out(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

fn send(write: &mut UnixStream, request: &Request) -> Result<(), ClientError> {
    let mut line =
        serde_json::to_vec(request).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if line.len() > FRAME_BYTES_MAX {
        let error = RpcError::new(
            Reason::FrameTooLarge,
            format!("{}: the request is {} bytes, more than {FRAME_BYTES_MAX}", request.method, line.len()),
        )
        .with_limit(FRAME_BYTES_MAX as u64);
        return Err(error.into());
    }
    line.push(b'\n');
    write.write_all(&line)?;
    Ok(())
}

/// Reads the next answer. Frames the server sends on its own are skipped: this client registers no
/// seams, so none is a request to it, and it does not deliver `log/appended` notifications (a
/// client that follows the log uses a client that does).
fn receive(read: &mut BufReader<UnixStream>, method: &'static str) -> Result<Response, ClientError> {
    receive_delivering(read, method, &mut |_| {})
}

/// Reads the next answer, handing every frame the server sends on its own to `deliver`.
fn receive_delivering(
    read: &mut BufReader<UnixStream>,
    method: &'static str,
    deliver: &mut dyn FnMut(&Value),
) -> Result<Response, ClientError> {
    loop {
        let mut line = Vec::new();
        let limit = FRAME_BYTES_MAX as u64 + 1;
        let read_bytes = read.by_ref().take(limit).read_until(b'\n', &mut line)?;
        if read_bytes == 0 {
            return Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        if line.last() != Some(&b'\n') {
            return Err(ClientError::Protocol {
                method,
                detail: format!("an answer longer than {FRAME_BYTES_MAX} bytes"),
            });
        }
        let frame: Value = serde_json::from_slice(&line)
            .map_err(|e| ClientError::Protocol { method, detail: e.to_string() })?;
        if frame.get("method").is_some() {
            deliver(&frame);
            continue;
        }
        return serde_json::from_value(frame)
            .map_err(|e| ClientError::Protocol { method, detail: e.to_string() });
    }
}

/// Connects (starting a server when told how) and initializes.
fn connect(store: &Path, options: &ConnectOptions) -> Result<Connection, ClientError> {
    let socket = socket_path(store)?;
    let stream = match UnixStream::connect(&socket) {
        Ok(stream) => stream,
        Err(e) if no_server(&e) => match &options.start {
            Some(command) => start_and_connect(store, &socket, command, options.start_wait)?,
            None => return Err(ClientError::NoServer { socket: socket.display().to_string() }),
        },
        Err(e) => return Err(e.into()),
    };
    initialize(stream, options)
}

fn no_server(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
}

fn initialize(stream: UnixStream, options: &ConnectOptions) -> Result<Connection, ClientError> {
    stream.set_read_timeout(Some(options.call_timeout))?;
    let mut write = stream;
    let mut read = BufReader::new(write.try_clone()?);
    let params = InitializeParams {
        protocol_version: PROTOCOL_VERSION,
        client_name: Some(options.client_name.clone()),
    };
    let request = Request {
        jsonrpc: JSONRPC_VERSION.to_owned(),
        id: Some(RequestId::Number(0)),
        method: Initialize::NAME.to_owned(),
        params: Some(serde_json::to_value(params).map_err(|e| std::io::Error::other(e.to_string()))?),
    };
    send(&mut write, &request)?;
    let response = receive(&mut read, Initialize::NAME)?;
    if let Some(error) = response.error {
        return Err(error.into());
    }
    let result = response
        .result
        .ok_or_else(|| ClientError::Protocol { method: Initialize::NAME, detail: "no result".to_owned() })?;
    let server = serde_json::from_value(result)
        .map_err(|e| ClientError::Protocol { method: Initialize::NAME, detail: e.to_string() })?;
    Ok(Connection { write, read, server })
}

/// A server process this client started: its exit and its error output arrive on `exited`.
struct Started {
    exited: mpsc::Receiver<(ExitStatus, String)>,
}

/// Starts `command` detached (its own process group, no terminal, no stdin or stdout), and drains
/// and reaps it on a thread so that it never blocks on a full pipe or lingers as a zombie.
fn start(command: &StartCommand) -> std::io::Result<Started> {
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let stderr = child.stderr.take();
    let (done, exited) = mpsc::channel();
    std::thread::Builder::new().name("mnemo-server-child".to_owned()).spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut stderr) = stderr {
            let mut chunk = [0_u8; 4096];
            while let Ok(read) = stderr.read(&mut chunk) {
                if read == 0 {
                    break;
                }
                let room = START_STDERR_BYTES_MAX.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..read.min(room)]);
            }
        }
        if let Ok(status) = child.wait() {
            let _ = done.send((status, String::from_utf8_lossy(&kept).into_owned()));
        }
    })?;
    Ok(Started { exited })
}

/// Starts a server and connects to whichever server binds the socket first (its own, or another
/// client's that won the race for the store's lock).
fn start_and_connect(
    store: &Path,
    socket: &Path,
    command: &StartCommand,
    wait: Duration,
) -> Result<UnixStream, ClientError> {
    let began = Instant::now();
    let mut started = Some(start(command)?);
    let mut last_stderr = String::new();
    let mut restart_at = None;
    loop {
        match UnixStream::connect(socket) {
            Ok(stream) => return Ok(stream),
            Err(e) if no_server(&e) => {}
            Err(e) => return Err(e.into()),
        }
        if let Some(Ok((status, stderr))) = started.as_ref().map(|child| child.exited.try_recv()) {
            tracing::debug!(%status, stderr = %stderr.trim(), "a started server exited");
            last_stderr = stderr;
            started = None;
            restart_at = Some(Instant::now() + RESTART_INTERVAL);
        }
        if restart_at.is_some_and(|at| Instant::now() >= at) {
            restart_at = None;
            started = Some(start(command)?);
        }
        if began.elapsed() >= wait {
            return Err(ClientError::StartFailed {
                store: store.display().to_string(),
                waited: wait,
                stderr: last_stderr,
            });
        }
        std::thread::sleep(CONNECT_RETRY_INTERVAL);
    }
}
