//! The store server: one process owns a store and answers many local clients over the store's Unix
//! socket, in JSON-RPC 2.0 with one JSON object per line (the host protocol, `docs/PROTOCOL.md`);
//! the Rust client that starts a server when it finds none; `mnemo mcp`'s Model Context
//! Protocol server, which forwards an agent's tool calls to the store server; and `mnemo ui`'s
//! read-only context inspector, a client of the store server that serves a web page.
//!
//! It is not:
//! - a network service: the store server listens only on a socket inside the store directory, mode
//!   0600, never on TCP; the inspector ([`ui`]) listens on loopback HTTP, behind a random token;
//! - a second way to write the store: every call goes through the `mnemo` facade, and appends meet
//!   in the log's one writer and its group commit, as in-process appends do;
//! - a place for domain rules: methods mirror the facade's calls and decide nothing it does not.
//!
//! # Shape
//!
//! - [`server::serve`] runs a server until a signal, a `shutdown` call or the idle period stops it.
//! - [`client::Client`] connects (and with [`client::StartCommand`], starts a server) and calls
//!   methods by their types: `client.call::<methods::SearchHistory>(&params)`.
//! - [`methods`] names every method with its parameter and result types; [`methods::schemas`] is
//!   their JSON Schema, from which clients in other languages are generated.
//! - [`protocol`] is the wire: frames, the protocol version, and the typed error whose
//!   `data.reason` ([`protocol::Reason`]) a client matches on.
//! - [`mcp::run_stdio`] is `mnemo mcp`: the MCP tools, forwarded to the store server.
//! - [`ui::Inspector`] is `mnemo ui`: HTTP on loopback, an embedded page, read-only endpoints.
//! - [`limits`] names every limit.

pub mod capture;
pub mod client;
mod dispatch;
pub mod limits;
pub mod load;
pub mod mcp;
pub mod methods;
pub mod protocol;
mod seams;
pub mod server;
pub mod socket;
pub mod ui;
