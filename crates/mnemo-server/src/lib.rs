//! The store server: one process owns a store and answers many local clients over the store's Unix
//! socket, in JSON-RPC 2.0 with one JSON object per line (the host protocol, `docs/PROTOCOL.md`).
//! Beside it, in modules of their own that are clients of it: the Rust client, `mnemo mcp`'s Model
//! Context Protocol server, `mnemo ui`'s read-only context inspector and the load run.
//!
//! It is not:
//! - a network service: the store server listens only on a socket inside the store directory, mode
//!   0600, never on TCP; the inspector ([`ui`]) listens on loopback HTTP, behind a random token;
//! - a second way to write the store: every call goes through the `mnemo` facade, and appends meet
//!   in the log's one writer and its group commit, as in-process appends do;
//! - a place for domain rules: methods mirror the facade's calls and decide nothing it does not.
//!
//! # The core: the JSON-RPC server
//!
//! - [`methods`] defines every method once, in one table: name, parameter and result types,
//!   repeatable, read-only, the clients' wrapper and the handler. The method list, the JSON Schema
//!   ([`methods::schemas`], from which the TypeScript and Python clients generate their types and
//!   methods), the routing and the inspector's read-only set are derived from it.
//! - [`server::serve`] runs a server until a signal, a `shutdown` call or the idle period stops it;
//!   `dispatch` holds the handlers the table routes to, `seams` the calls back to a client's models,
//!   `extraction` the background memory extraction a capture or an import sets off,
//!   [`command`] the command lines a `mnemo` client runs in the server when the server holds the store.
//! - [`protocol`] is the wire: frames, the protocol version, and the typed error whose
//!   `data.reason` ([`protocol::Reason`]) a client matches on. [`socket`] places the socket;
//!   [`limits`] names every limit.
//!
//! # The rooms beside it
//!
//! Each is a client of the core through the wire and the methods' types, uses nothing else of it,
//! and says in its own doc what it uses and what it is not. `tests/rooms.rs` checks the edges.
//!
//! - [`client`]: the blocking Rust client, which starts a server when it finds none
//!   (`client.call::<methods::SearchHistory>(&params)`).
//! - [`mcp`]: `mnemo mcp`, the MCP tools, forwarded to the store server ([`mcp::run_stdio`]).
//! - [`ui`]: `mnemo ui`, HTTP on loopback, an embedded page, read-only endpoints ([`ui::Inspector`]).
//! - [`load`]: the load run behind `mnemo bench --server`.
//! - [`capture`]: capturing a session file its agent may still be writing; used by the core's
//!   `capture` method and by `mnemo sync`, and using nothing of this crate.

// The core.
pub mod command;
mod dispatch;
mod extraction;
pub mod limits;
pub mod methods;
pub mod protocol;
mod seams;
pub mod server;
pub mod socket;

// The rooms beside it.
pub mod capture;
pub mod client;
pub mod load;
pub mod mcp;
pub mod ui;
