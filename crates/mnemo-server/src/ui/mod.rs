//! `mnemo ui`, the context inspector: a small HTTP server that serves an embedded web page and
//! JSON endpoints showing what the log holds — sessions, timelines, the context a request would
//! have received at any position, checkpoints, memory items, the store's health.
//!
//! It is not:
//! - a second owner of the store: every read goes to the store server over its socket, as any
//!   client's does (the store server is started when none runs);
//! - a writer: it calls only the store server's read methods (`methods::ReadMethod`), answers GET only,
//!   and `verify` rebuilds into scratch space, never into the store;
//! - a network service: it binds the loopback interface unless told otherwise, and answers only
//!   requests that carry the random token printed with its address at start;
//! - part of the store server: it uses nothing of the server's core (`tests/rooms.rs` checks it).
//!
//! It uses: the Rust client ([`crate::client`]), through `store::Reads`, whose calls are bounded at
//! compile time to the methods the methods' table marks read-only ([`crate::methods::ReadMethod`]);
//! the methods' types and the wire's errors; its own small HTTP server (`http`) and embedded page
//! (`assets`).

mod api;
mod assets;
mod http;
mod store;

use std::io::{self, Read as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::client::{ClientError, ConnectOptions};

use self::http::{Request, RequestError, Response};
use self::store::Reads;

/// Most requests answered at once (one thread each); one more is answered 503.
pub const UI_CONNECTIONS_MAX: usize = 32;

/// Bytes of randomness in the access token (printed as twice as many hex digits).
pub const TOKEN_BYTES: usize = 16;

/// How the inspector listens and reaches the store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UiOptions {
    /// The address to bind: loopback unless `allow_remote`.
    pub address: SocketAddr,
    /// Bind an address that is not loopback (the token still guards every request).
    pub allow_remote: bool,
    /// How to reach the store server (and whether to start one).
    pub connect: ConnectOptions,
}

impl UiOptions {
    /// Loopback, port `port` (0: any free port), reaching the store server with `connect`.
    pub fn new(port: u16, connect: ConnectOptions) -> UiOptions {
        UiOptions {
            address: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            allow_remote: false,
            connect,
        }
    }
}

/// Why the inspector did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UiError {
    /// The address is not loopback and `allow_remote` was not given: choose a loopback address or
    /// say that the inspector may be reached from other machines.
    #[error(
        "refusing to listen on {address}: it is not a loopback address; the inspector shows everything \
         in the store, so it listens on 127.0.0.1 or ::1 unless told otherwise (--allow-remote)"
    )]
    NotLoopback { address: SocketAddr },
    /// The address could not be bound (in use, not permitted).
    #[error("cannot listen on {address}: {source}")]
    Bind { address: SocketAddr, source: io::Error },
    /// No randomness for the token.
    #[error("cannot make an access token from /dev/urandom: {0}")]
    Token(io::Error),
    /// The store server could not be reached or started.
    #[error(transparent)]
    Store(#[from] ClientError),
    /// Accepting connections failed.
    #[error("the inspector's listener failed: {0}")]
    Accept(io::Error),
}

/// A bound inspector, ready to [`Inspector::run`].
#[derive(Debug)]
pub struct Inspector {
    listener: TcpListener,
    token: String,
    reads: Arc<Reads>,
}

impl Inspector {
    /// Binds `options.address` (refusing one that is not loopback unless allowed), makes the token
    /// and connects to the store server of `store`.
    pub fn bind(store: &Path, options: UiOptions) -> Result<Inspector, UiError> {
        if !options.address.ip().is_loopback() && !options.allow_remote {
            return Err(UiError::NotLoopback { address: options.address });
        }
        let token = new_token().map_err(UiError::Token)?;
        let reads = Arc::new(Reads::new(PathBuf::from(store), options.connect));
        reads.connect()?;
        let listener = TcpListener::bind(options.address)
            .map_err(|source| UiError::Bind { address: options.address, source })?;
        Ok(Inspector { listener, token, reads })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The address to open, with the token: `http://127.0.0.1:PORT/?token=...`.
    pub fn url(&self) -> io::Result<String> {
        Ok(format!("http://{}/?token={}", self.local_addr()?, self.token))
    }

    /// Answers requests until the process ends.
    pub fn run(self) -> Result<(), UiError> {
        let busy = Arc::new(AtomicUsize::new(0));
        let token: Arc<str> = Arc::from(self.token.as_str());
        let port = self.local_addr().map_err(UiError::Accept)?.port();
        for stream in self.listener.incoming() {
            let mut stream = match stream {
                Ok(stream) => stream,
                // A connection reset before it was accepted is that client's business.
                Err(error) if error.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(error) => return Err(UiError::Accept(error)),
            };
            if busy.fetch_add(1, Ordering::SeqCst) >= UI_CONNECTIONS_MAX {
                busy.fetch_sub(1, Ordering::SeqCst);
                let _ = http::write_response(&mut stream, &Response::error(503, "too many requests at once"));
                continue;
            }
            let (running, token, reads) = (Arc::clone(&busy), Arc::clone(&token), Arc::clone(&self.reads));
            let spawned = std::thread::Builder::new().name("mnemo-ui".into()).spawn(move || {
                handle(&mut stream, &token, port, &reads);
                running.fetch_sub(1, Ordering::SeqCst);
            });
            if spawned.is_err() {
                // The thread (and its decrement) never ran; the connection is dropped unanswered.
                busy.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

/// A token of [`TOKEN_BYTES`] random bytes, in hex.
fn new_token() -> io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Compares in time independent of where the texts differ.
fn same_token(given: &str, token: &str) -> bool {
    given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn handle(stream: &mut TcpStream, token: &str, port: u16, reads: &Reads) {
    let response = match http::read_request(stream) {
        Ok(request) => route(&request, token, port, reads),
        Err(RequestError::TooLarge) => Response::error(431, RequestError::TooLarge.to_string()),
        Err(error @ RequestError::Malformed(_)) => Response::error(400, error.to_string()),
        Err(RequestError::Closed | RequestError::Io(_)) => return,
    };
    // The client may have gone; nothing else is waiting for this answer.
    let _ = http::write_response(stream, &response);
}

/// The cookie that carries the token for the page's own scripts and styles, named after the port
/// so that two inspectors on one machine keep theirs apart.
fn cookie_name(port: u16) -> String {
    format!("mnemo_ui_{port}")
}

/// Whether `request` carries the token: its `token` query parameter, its `X-Mnemo-Token` header, or
/// the cookie the page was given when it was opened with the token.
fn authorised(request: &Request, token: &str, port: u16) -> bool {
    let cookie = cookie_name(port);
    [request.param("token"), request.header("x-mnemo-token"), request.cookie(&cookie)]
        .into_iter()
        .flatten()
        .any(|given| same_token(given, token))
}

fn route(request: &Request, token: &str, port: u16, reads: &Reads) -> Response {
    if !authorised(request, token, port) {
        return Response::error(401, "missing or wrong token: open the address `mnemo ui` printed");
    }
    if request.method != "GET" {
        return Response::error(405, format!("{} is not allowed: the inspector only reads", request.method));
    }
    if request.path.starts_with("/api/") {
        return api::answer(reads, request);
    }
    match assets::find(&request.path) {
        Some(asset) => Response {
            status: 200,
            content_type: asset.content_type,
            body: asset.bytes.to_vec(),
            // The page's scripts and styles load without the token in their addresses.
            cookie: Some(format!("{}={token}; HttpOnly; SameSite=Strict; Path=/", cookie_name(port))),
        },
        None => Response::error(404, format!("no page {}", request.path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex_of_the_named_length() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), TOKEN_BYTES * 2);
        assert!(a.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn token_comparison_needs_the_whole_token() {
        assert!(same_token("abcd", "abcd"));
        assert!(!same_token("abce", "abcd"));
        assert!(!same_token("abc", "abcd"));
        assert!(!same_token("", "abcd"));
    }

    #[test]
    fn non_loopback_addresses_are_refused_before_anything_starts() {
        let mut options = UiOptions::new(0, ConnectOptions::new("test"));
        options.address = "0.0.0.0:0".parse().unwrap();
        let refused = Inspector::bind(Path::new("/nonexistent-store"), options).unwrap_err();
        assert!(matches!(refused, UiError::NotLoopback { .. }), "{refused}");
        assert!(refused.to_string().contains("--allow-remote"));
    }
}
