//! Command dispatch: find a command's handler by name, run it on a blocking thread, and turn
//! every way it can end — a reply, a `CommandError`, a panic — into a reply document.
//!
//! Handlers are synchronous: the store's calls block (a `j:true` commit waits for a sync), so
//! they run under `spawn_blocking`, off the reactor. A panic in a handler unwinds to the
//! `JoinError` and becomes an `InternalError` reply; the connection and server go on.

use std::sync::Arc;

use bson::RawDocumentBuf;
use tracing::{debug, error};
use wire::ErrorCode;

use crate::command::Command;
use crate::commands::{self, Spec};
use crate::error::CommandError;
use crate::state::{ConnectionInfo, Context, Counters, Shared};

/// Find the handler for `command`, or a `CommandNotFound` error.
pub fn lookup(command: &Command) -> Result<&'static Spec, CommandError> {
    commands::find(&command.name).ok_or_else(|| {
        CommandError::new(
            ErrorCode::CommandNotFound,
            format!("no such command: '{}'", command.name),
        )
    })
}

/// Run `command` and produce its reply body (an error reply if it failed or panicked).
pub async fn run(shared: Arc<Shared>, connection: ConnectionInfo, command: Command) -> RawDocumentBuf {
    let spec = match lookup(&command) {
        Ok(spec) => spec,
        Err(error) => {
            debug!(connection = connection.id, command = %command.name, "unknown command");
            return error_document(&error);
        }
    };
    Counters::add(&shared.counters.command, 1);
    run_handler(shared, connection, command, spec.handler).await
}

/// Run `handler` on a blocking thread; a panic becomes an `InternalError` reply.
async fn run_handler(
    shared: Arc<Shared>,
    connection: ConnectionInfo,
    command: Command,
    handler: commands::Handler,
) -> RawDocumentBuf {
    let name = command.name.clone();
    let connection_id = connection.id;
    let task = tokio::task::spawn_blocking(move || {
        let context = Context { shared, connection };
        handler(&context, &command)
    });
    match task.await {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => {
            debug!(connection = connection_id, command = %name, %error, "command failed");
            error_document(&error)
        }
        Err(join_error) => {
            error!(connection = connection_id, command = %name, error = %join_error, "command handler panicked");
            error_document(&CommandError::internal(format!("command {name} failed unexpectedly")))
        }
    }
}

/// The reply document for `error`.
pub fn error_document(error: &CommandError) -> RawDocumentBuf {
    match RawDocumentBuf::try_from(&error.to_document()) {
        Ok(document) => document,
        Err(_) => bson::rawdoc! { "ok": 0.0, "errmsg": "unencodable error", "code": 1, "codeName": "InternalError" },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn panicking(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
        panic!("handler bug")
    }

    /// Goal: a panic in a handler becomes an InternalError reply, not a dead server. Method:
    /// run a handler that panics through the same path real commands take.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn panic_becomes_error_reply() {
        let store = std::sync::Arc::new(docstore::Store::open_in_memory(docstore::StoreOptions::default()).unwrap());
        let shared = Shared::new(crate::ServerConfig::default(), "127.0.0.1:1".parse().unwrap(), store);
        let connection = ConnectionInfo { id: 1, peer: "127.0.0.1:2".parse().unwrap() };
        let command = Command {
            name: "boom".into(),
            database: "admin".into(),
            body: doc! { "boom": 1 },
            sequences: Vec::new(),
            legacy: false,
        };
        let reply = run_handler(shared, connection, command, panicking).await;
        let reply = bson::Document::try_from(reply).unwrap();
        assert_eq!(reply.get_f64("ok").unwrap(), 0.0);
        assert_eq!(reply.get_str("codeName").unwrap(), "InternalError");
    }
}
