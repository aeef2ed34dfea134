//! Strata's server: the tokio listener, one task per connection, command dispatch, server-side
//! cursors, and the one module that maps store errors onto MongoDB's error replies.
//!
//! A connection waits for bytes as a tokio task; when they come, a thread of the blocking pool
//! serves its burst of requests: it reads, cuts frames with `wire::decode_frame`, parses each
//! into a `wire::Request`, turns it into a `Command`, runs the command's handler right there
//! (a panic becomes an error reply; a slow `j:true` commit blocks only this connection), and
//! writes the reply framed as the request asks, until the client goes quiet. Nothing here
//! trusts a byte the client sent: malformed input closes that one connection, with a log line.
//! The runtime's blocking pool must allow a thread per active connection
//! (`max_blocking_threads` at least `max_connections`).
//!
//! Modules: `config` (what the binary passes in), `listener` (accept loop, connection limit,
//! graceful shutdown), `connection` (one client), `command` (a parsed command and typed field
//! access), `dispatch` (name → handler, panic capture), `commands/` (one command per file),
//! `error` (`CommandError`), `store_error` (store errors → replies, the only such mapping),
//! `cursors` (parked cursors and batching), `state` (what every connection shares),
//! `in_process` (the command path without a socket, for the fuzz target), `tls` (rustls
//! configuration and modes), `auth/` (authentication and the one place commands are authorized).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

mod admission;
mod api_version;
mod auth;
pub mod command;
mod commands;
pub mod config;
mod connection;
mod cursors;
mod dispatch;
pub mod error;
mod fail_points;
/// Fuzz entry points (`fuzz/`, and the corpus replay test): not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod in_process;
mod listener;
pub mod logging;
pub mod metrics;
mod operations;
mod profiler;
mod read_buffer;
mod read_concern;
mod replication;
mod sessions;
mod slow;
mod state;
mod store_error;
pub mod tls;
mod top;
mod transactions;

pub use config::ServerConfig;
pub use error::CommandError;
pub use in_process::InProcess;
pub use listener::Server;
pub use replication::member_auth::ClusterAuthMode;
