//! `InProcess`: the server's command path without a socket — a parsed request, or a command
//! document, in; the reply document out — over an in-memory store. The `command` fuzz target
//! drives every handler through it.
//!
//! Commands are authorized as on the network path (with `auth: true` in the configuration, a
//! command needs its privileges). Unlike the network path, a panic in a handler is not caught here: the fuzzer is there to
//! find them (over TCP, `dispatch` turns one into an `InternalError` reply).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bson::{Document, RawDocumentBuf};
use docstore::{Store, StoreOptions};
use wire::Request;

use crate::auth;
use crate::command::Command;
use crate::config::ServerConfig;
use crate::dispatch;
use crate::error::CommandError;
use crate::metrics::Metrics;
use crate::state::{ConnectionInfo, Context, Shared};

/// Why an in-process server could not start.
pub type OpenError = Box<dyn std::error::Error + Send + Sync>;

pub struct InProcess {
    context: Context,
}

impl InProcess {
    /// A server over a fresh in-memory store with the default configuration.
    pub fn open_in_memory() -> Result<InProcess, OpenError> {
        InProcess::open_in_memory_with(ServerConfig::default())
    }

    /// A server over a fresh in-memory store with `config` (e.g. `auth: true`); its one
    /// connection comes from the loopback interface.
    pub fn open_in_memory_with(config: ServerConfig) -> Result<InProcess, OpenError> {
        let store = Arc::new(Store::open_in_memory(StoreOptions::default())?);
        let local_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let shared = Shared::new(config, local_addr, store, None, Metrics::new()?)?;
        let connection = ConnectionInfo { id: 1, peer: local_addr };
        Ok(InProcess { context: Context::new(shared, connection) })
    }

    /// Runs the command a request carries, as a connection would.
    pub fn run_request(&self, request: &Request) -> RawDocumentBuf {
        match Command::from_request(request) {
            Ok(command) => self.run(&command),
            Err(error) => dispatch::error_document(&error),
        }
    }

    /// Runs `body` as a command against `database`.
    pub fn run_document(&self, database: &str, body: Document) -> RawDocumentBuf {
        match Command::from_document(body, database.to_owned()) {
            Ok(command) => self.run(&command),
            Err(error) => dispatch::error_document(&error),
        }
    }

    fn run(&self, command: &Command) -> RawDocumentBuf {
        let result: Result<RawDocumentBuf, CommandError> = dispatch::lookup(command).and_then(|spec| {
            auth::authorize(&self.context, command)?;
            let reply = (spec.handler)(&self.context, command);
            auth::after_command(&self.context, command);
            reply
        });
        result.unwrap_or_else(|error| dispatch::error_document(&error))
    }
}
