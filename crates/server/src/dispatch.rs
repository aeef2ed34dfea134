//! Command dispatch: find a command's handler by name, run it, and turn every way it can end —
//! a reply, a `CommandError`, a panic — into a reply document.
//!
//! Handlers are synchronous and run on the thread that serves the connection's burst of
//! requests (see `connection`), which may block: a `j:true` commit waits for its log sync there
//! without holding up any other connection. A panic in a handler is caught here and becomes an
//! `InternalError` reply; the connection and the server go on.

use bson::{Bson, RawDocumentBuf};
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
    // Registered for currentOp/killOp; the store's reads on this thread answer to it.
    let running = context.shared.operations.begin(context, command);
    let mut replaced = false;
    let admitted = crate::api_version::check(command)
        .and_then(|()| auth::authorize(context, command))
        .and_then(|()| check_primary(context, command))
        .and_then(|()| crate::sessions::note(context, command).map(drop))
        .and_then(|()| crate::read_concern::check_supported(command));
    let admitted_ok = admitted.is_ok();
    let (mut reply, mut ok) = match admitted {
        Ok(()) => {
            // Fail points are evaluated before the session is checked out (as mongod does), so
            // a failed statement leaves its transaction as it was.
            let triggered = fail_point(context, command);
            match triggered.as_ref().and_then(|t| replaced_reply(context, t)) {
                Some(outcome) => {
                    replaced = triggered.as_ref().is_some_and(|t| t.from_fail_command);
                    outcome
                }
                None => in_transaction(context, command, spec.handler, triggered.as_ref()),
            }
        }
        Err(error) => (error_document(&error), false),
    };
    if crate::transactions::is_transactional(command) {
        crate::transactions::label(command, &mut reply);
    }
    if let Some(set) = &context.shared.replication {
        if command.body.contains_key("txnNumber") && !crate::transactions::is_transactional(command) {
            label_retryable(&mut reply);
        }
        if !replaced {
            label_change_stream_errors(command, &mut reply);
        }
        if admitted_ok {
            crate::replication::write_concern::await_replication(set, command, &mut reply);
        }
        if admitted_ok
            && ok
            && crate::read_concern::is_linearizable(command)
            && let Err(error) = set.confirm_read_committed()
        {
            (reply, ok) = (error_document(&error), false);
        }
        crate::replication::gossip(set, &context.shared.store, &mut reply);
    }
    let name = spec.names.first().copied().unwrap_or_default();
    let elapsed = started.elapsed();
    context.shared.metrics.command(name, ok, elapsed);
    crate::slow::note(context, command, elapsed, ok);
    let ran = crate::profiler::Ran { command, active: &running.active, reply: &reply, elapsed, ok };
    crate::profiler::note(context, &ran);
    if let Some(collection) = crate::top::collection_of(&command.name, &command.body) {
        context.shared.top.record(&command.database, collection, name, elapsed);
    }
    reply
}

/// Runs the handler inside the command's transaction, if it has one (entered here, after the
/// fail points, and left after the handler: a failure aborts it).
fn in_transaction(
    context: &Context,
    command: &Command,
    handler: commands::Handler,
    triggered: Option<&crate::fail_points::Triggered>,
) -> (RawDocumentBuf, bool) {
    if let Err(error) = crate::transactions::enter(context, command) {
        return (error_document(&error), false);
    }
    let (mut reply, ok) = run_handler(context, command, handler);
    auth::after_command(context, command);
    if let Some(triggered) = triggered {
        crate::fail_points::decorate(triggered, &mut reply);
        if triggered.close_after_running && triggered.close_connection {
            context.close_after();
        }
    }
    if crate::transactions::is_transactional(command) {
        crate::transactions::leave(context, &reply);
    }
    (reply, ok)
}

/// A test fail point that fires for this command (after its block, if it blocks).
fn fail_point(context: &Context, command: &Command) -> Option<crate::fail_points::Triggered> {
    use crate::fail_points::Point;
    let shared = &context.shared;
    if !shared.config.test_commands || command.name == "configureFailPoint" {
        return None;
    }
    let app = context.app_name();
    let retryable_write = command.body.contains_key("txnNumber") && !crate::transactions::is_transactional(command);
    let triggered = shared.fail_points.check(Point::FailCommand, &command.name, app.as_deref()).or_else(|| {
        let point = match command.name.as_str() {
            "getMore" => Point::FailGetMoreAfterCursorCheckout,
            // As in mongod, it fires in the write itself: not for a retry whose statements
            // already ran (answered from their records).
            _ if retryable_write && !already_executed(context, command) => Point::OnPrimaryTransactionalWrite,
            _ => return None,
        };
        shared.fail_points.check_statements(point, &command.name, app.as_deref(), statements(command))
    })?;
    if let Some(block) = triggered.block {
        std::thread::sleep(block);
    }
    Some(triggered)
}

/// How many statements a write command holds (documents, updates, deletes; one otherwise).
fn statements(command: &Command) -> i64 {
    let key = match command.name.as_str() {
        "insert" => "documents",
        "update" => "updates",
        "delete" => "deletes",
        _ => return 1,
    };
    let in_body = command.body.get_array(key).map_or(0, |items| items.len());
    let in_sequence = command.sequences.iter().find(|(id, _)| id == key).map_or(0, |(_, documents)| documents.len());
    (in_body + in_sequence).max(1) as i64
}

/// Whether a retryable write's first statement already ran (this is a retry).
fn already_executed(context: &Context, command: &Command) -> bool {
    let (Some(Bson::Document(lsid)), Ok(Some(txn_number))) = (command.get("lsid"), command.optional_i64("txnNumber"))
    else {
        return false;
    };
    let Ok(id) = crate::sessions::session_id(lsid) else { return false };
    matches!(context.shared.store.executed(&id, txn_number, 0), Ok(Some(_)))
}

/// The reply of a fail point that replaces the command's (a failure, a closed connection).
fn replaced_reply(context: &Context, triggered: &crate::fail_points::Triggered) -> Option<(RawDocumentBuf, bool)> {
    if triggered.close_connection && !triggered.close_after_running {
        context.close_after();
        return Some((RawDocumentBuf::new(), false));
    }
    let error = triggered.error.as_ref()?;
    let reply = crate::fail_points::error_reply(error, triggered);
    Some((RawDocumentBuf::try_from(&reply).unwrap_or_else(|_| error_document(error)), false))
}

/// Errors a change stream may resume after get `ResumableChangeStreamError` on `getMore`;
/// a fatal one gets `NonResumableChangeStreamError` (`wire::categories`).
fn label_change_stream_errors(command: &Command, reply: &mut RawDocumentBuf) {
    use wire::categories::{ChangeStreamCommand, change_stream_label};
    let Ok(code) = reply.get_i32("code") else { return };
    let change_stream_command = match command.name.as_str() {
        "getMore" => ChangeStreamCommand::GetMore,
        _ => ChangeStreamCommand::Other,
    };
    let Some(label) = change_stream_label(change_stream_command, code) else { return };
    if reply.get("errorLabels").ok().flatten().is_none() {
        let mut labels = bson::RawArrayBuf::new();
        labels.push(label.name());
        reply.append(bson::raw::cstr!("errorLabels"), labels);
    }
}

/// A failed retryable write whose error a retry may cure gets the `RetryableWriteError` label.
fn label_retryable(reply: &mut RawDocumentBuf) {
    let code = reply.get_i32("code").ok();
    let concern_code = reply.get_document("writeConcernError").ok().and_then(|error| error.get_i32("code").ok());
    let retryable = code.into_iter().chain(concern_code).any(crate::sessions::is_retryable_code);
    if retryable && reply.get("errorLabels").ok().flatten().is_none() {
        let mut labels = bson::RawArrayBuf::new();
        labels.push(wire::Label::RetryableWriteError.name());
        reply.append(bson::raw::cstr!("errorLabels"), labels);
    }
}

/// In replica-set mode, writes go to the primary only, and reads elsewhere need `secondaryOk`.
fn check_primary(context: &Context, command: &Command) -> Result<(), CommandError> {
    match &context.shared.replication {
        Some(set)
            if crate::replication::is_write(&command.name) || crate::replication::writes_through_pipeline(command) =>
        {
            set.check_writable()
        }
        Some(set) if crate::read_concern::is_linearizable(command) => set.confirm_linearizable(),
        Some(set) if !command.legacy => set.check_readable(command),
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
        Ok(Err(mut error)) => {
            debug!(connection, command = %command.name, %error, "command failed");
            name_damaged_collection(command, &mut error);
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

/// Damage found while a command read a collection is reported with the collection's name, so
/// that the operator knows what to `validate` and repair.
fn name_damaged_collection(command: &Command, error: &mut CommandError) {
    if error.code != wire::ErrorCode::DataCorruptionDetected {
        return;
    }
    // getMore names its collection in `collection`; the others in their first field.
    let collection = match command.get("collection") {
        Some(bson::Bson::String(name)) if command.name == "getMore" => Some(name.clone()),
        _ => command.collection().ok(),
    };
    if let Some(collection) = collection {
        error.message = format!("{} (collection {})", error.message, command.namespace(&collection));
    }
}

/// The reply document for `error`.
pub fn error_document(error: &CommandError) -> RawDocumentBuf {
    match RawDocumentBuf::try_from(&error.to_document()) {
        Ok(document) => document,
        Err(_) => {
            bson::rawdoc! { "ok": 0.0, "errmsg": "unencodable error", "code": ErrorCode::InternalError.code(), "codeName": ErrorCode::InternalError.name() }
        }
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
            body: std::sync::Arc::new(doc! { "boom": 1 }),
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
