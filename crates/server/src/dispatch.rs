//! Command dispatch: find a command's handler by name, run it, and turn every way it can end —
//! a reply, a `CommandError`, a panic — into a reply document.
//!
//! Handlers are synchronous and run on the thread that serves the connection's burst of
//! requests (see `connection`), which may block: a `j:true` commit waits for its log sync there
//! without holding up any other connection. A panic in a handler is caught here and becomes an
//! `InternalError` reply; the connection and the server go on.

use bson::RawDocumentBuf;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;
use tracing::{debug, error};
use wire::ErrorCode;

use crate::auth;
use crate::command::Command;
use crate::commands::{self, Spec};
use crate::error::CommandError;
use crate::state::{Context, Counters};

/// Find the handler for `command`, or a `CommandNotFound` error.
pub fn lookup(command: &Command) -> Result<&'static Spec, CommandError> {
    commands::find(&command.name)
        .ok_or_else(|| CommandError::new(ErrorCode::CommandNotFound, format!("no such command: '{}'", command.name)))
}

/// Run `command` on this thread and produce its reply body (an error reply if it failed or
/// panicked).
pub fn run(context: &Context, command: &Command) -> RawDocumentBuf {
    let spec = match lookup(command) {
        Ok(spec) => spec,
        Err(error) => {
            debug!(connection = context.connection.id, command = %command.name, "unknown command");
            return error_document(&error);
        }
    };
    Counters::add(&context.shared.counters.command, 1);
    let started = Instant::now();
    let admitted = auth::authorize(context, command)
        .and_then(|()| check_primary(context, command))
        .and_then(|()| crate::sessions::note(context, command).map(drop))
        .and_then(|()| crate::transactions::enter(context, command));
    let (mut reply, ok) = match admitted {
        Ok(()) => match fail_point(context, command) {
            Some(outcome) => outcome,
            None => {
                let outcome = run_handler(context, command, spec.handler);
                auth::after_command(context, command);
                outcome
            }
        },
        Err(error) => (error_document(&error), false),
    };
    crate::transactions::leave(context, command, &mut reply);
    if let Some(set) = &context.shared.replication {
        if command.body.contains_key("txnNumber") && !crate::transactions::is_transactional(command) {
            label_retryable(&mut reply);
        }
        crate::replication::gossip(set, &context.shared.store, &mut reply);
    }
    let name = spec.names.first().copied().unwrap_or_default();
    let elapsed = started.elapsed();
    context.shared.metrics.command(name, ok, elapsed);
    crate::slow::note(context, command, elapsed, ok);
    reply
}

/// A test fail point (`configureFailPoint: "failCommand"`) that fires for this command: its
/// reply, if it replaces the command's (a failure, a closed connection), or `None` to run the
/// command (after a block, with a write concern error added).
fn fail_point(context: &Context, command: &Command) -> Option<(RawDocumentBuf, bool)> {
    let shared = &context.shared;
    if !shared.config.test_commands || command.name == "configureFailPoint" {
        return None;
    }
    let triggered = shared.fail_points.check(&command.name, context.app_name().as_deref())?;
    if let Some(block) = triggered.block {
        std::thread::sleep(block);
    }
    if triggered.close_connection {
        context.close_after();
        return Some((RawDocumentBuf::new(), false));
    }
    if let Some(error) = &triggered.error {
        let reply = crate::fail_points::error_reply(error, &triggered);
        return Some((RawDocumentBuf::try_from(&reply).unwrap_or_else(|_| error_document(error)), false));
    }
    let (mut reply, ok) = run_handler(context, command, commands::find(&command.name)?.handler);
    crate::fail_points::decorate(&triggered, &mut reply);
    Some((reply, ok))
}

/// A failed retryable write whose error a retry may cure gets the `RetryableWriteError` label.
fn label_retryable(reply: &mut RawDocumentBuf) {
    let code = reply.get_i32("code").ok();
    let concern_code = reply.get_document("writeConcernError").ok().and_then(|error| error.get_i32("code").ok());
    let retryable = code.into_iter().chain(concern_code).any(crate::sessions::is_retryable_code);
    if retryable && reply.get("errorLabels").ok().flatten().is_none() {
        let mut labels = bson::RawArrayBuf::new();
        labels.push("RetryableWriteError");
        reply.append(bson::raw::cstr!("errorLabels"), labels);
    }
}

/// In replica-set mode, writes wait for the set to be initiated (this member primary).
fn check_primary(context: &Context, command: &Command) -> Result<(), CommandError> {
    match &context.shared.replication {
        Some(set) if crate::replication::is_write(&command.name) => set.check_writable(),
        _ => Ok(()),
    }
}

/// Run `handler`; a panic becomes an `InternalError` reply. Also says whether it succeeded.
fn run_handler(context: &Context, command: &Command, handler: commands::Handler) -> (RawDocumentBuf, bool) {
    let connection = context.connection.id;
    // The store keeps its own invariants across a panic (its locks are not poisoned and every
    // write is one engine transaction), so nothing the handler saw is left half-changed.
    match catch_unwind(AssertUnwindSafe(|| handler(context, command))) {
        Ok(Ok(reply)) => (reply, true),
        Ok(Err(error)) => {
            debug!(connection, command = %command.name, %error, "command failed");
            (error_document(&error), false)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            error!(connection, command = %command.name, panic = %what, "command handler panicked");
            (error_document(&CommandError::internal(format!("command {} failed unexpectedly", command.name))), false)
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
    use crate::state::{ConnectionInfo, Shared};
    use bson::doc;

    fn panicking(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
        panic!("handler bug")
    }

    /// Goal: a panic in a handler becomes an InternalError reply, not a dead server. Method:
    /// run a handler that panics through the same path real commands take.
    #[test]
    fn panic_becomes_error_reply() {
        let store = std::sync::Arc::new(docstore::Store::open_in_memory(docstore::StoreOptions::default()).unwrap());
        let shared = Shared::new(
            crate::ServerConfig::default(),
            "127.0.0.1:1".parse().unwrap(),
            store,
            None,
            crate::metrics::Metrics::new().unwrap(),
        )
        .unwrap();
        let connection = ConnectionInfo { id: 1, peer: "127.0.0.1:2".parse().unwrap() };
        let command = Command {
            name: "boom".into(),
            database: "admin".into(),
            body: doc! { "boom": 1 },
            sequences: Vec::new(),
            legacy: false,
        };
        let (reply, ok) = run_handler(&Context::new(shared, connection), &command, panicking);
        assert!(!ok);
        let reply = bson::Document::try_from(reply).unwrap();
        assert_eq!(reply.get_f64("ok").unwrap(), 0.0);
        assert_eq!(reply.get_str("codeName").unwrap(), "InternalError");
    }
}
