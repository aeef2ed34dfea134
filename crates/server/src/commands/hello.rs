//! `hello` / `isMaster` / `ismaster`: the handshake. Reports a standalone, writable server and
//! the limits drivers size their batches by; negotiates compression from the client's offer;
//! logs the client's metadata (driver, application) once, on the handshake that carries it.
//!
//! For authentication it answers `saslSupportedMechs` (the mechanisms a named user has) and
//! `speculativeAuthenticate` (the first SCRAM step, or the whole MONGODB-X509 authentication, in
//! the handshake, saving a round trip).
//!
//! Every reply carries a `topologyVersion` (this process's id and a counter), so drivers monitor
//! with awaitable `hello`s: one that repeats the current version with `maxAwaitTimeMS` parks
//! until the topology changes or the time is up (`Context::park`; the connection's task waits,
//! no thread). A standalone's topology never changes (counter 0): its awaitable `hello`s answer
//! at their deadline. In replica-set mode the reply reports the set
//! (`replication::Replication::hello_fields`), whose counter moves with every change of role, term, primary or configuration.

use bson::{Bson, DateTime, RawDocumentBuf, doc};
use tracing::info;

use crate::auth;
use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::replication::Replication;
use crate::state::{Context, WakeOn};

/// MongoDB 7.0's wire version; `buildInfo` reports the matching version.
pub const MAX_WIRE_VERSION: i32 = 21;
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
pub const LOGICAL_SESSION_TIMEOUT_MINUTES: i32 = 30;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    if parked(context, command)? {
        return reply(doc! {});
    }
    if let Some(Bson::Document(client)) = command.get("client") {
        if let Ok(name) = client.get_document("application").and_then(|a| a.get_str("name")) {
            *context.app_name.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(name.to_owned());
        }
        info!(
            connection = context.connection.id,
            peer = %context.connection.peer,
            client = %client,
            "client metadata"
        );
    }
    let primary_field = if command.name == "hello" { "isWritablePrimary" } else { "ismaster" };
    let replication = context.shared.replication.as_ref();
    let writable = replication.is_none_or(Replication::is_writable);
    let mut fields = doc! {
        "helloOk": true,
        primary_field: writable,
        "maxBsonObjectSize": wire::limits::MAX_DOCUMENT_SIZE_BYTES as i32,
        "maxMessageSizeBytes": wire::limits::MAX_MESSAGE_SIZE_BYTES as i32,
        "maxWriteBatchSize": MAX_WRITE_BATCH_SIZE,
        "localTime": DateTime::now(),
        "logicalSessionTimeoutMinutes": LOGICAL_SESSION_TIMEOUT_MINUTES,
        "connectionId": context.connection.id,
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "readOnly": false,
    };
    if let Some(set) = replication {
        fields.extend(set.hello_fields());
    } else {
        fields.insert("topologyVersion", standalone_topology(context));
    }
    let compression = negotiated(command)?;
    if !compression.is_empty() {
        fields.insert("compression", compression);
    }
    if let Some(mechanisms) = supported_mechanisms(context, command)? {
        fields.insert("saslSupportedMechs", mechanisms);
    }
    if let Some(Bson::Document(first)) = command.get("speculativeAuthenticate") {
        // A failed speculative start is left out of the reply: the driver then authenticates
        // the ordinary way, and gets the ordinary error.
        let db = first.get_str("db").unwrap_or(command.database.as_str());
        let answer = if first.contains_key("authenticate") {
            auth::authenticate_x509(context, db, first)
        } else {
            auth::sasl_start(context, db, first)
        };
        if let Ok(answer) = answer {
            fields.insert("speculativeAuthenticate", answer);
        }
    }
    reply(fields)
}

/// An awaitable `hello` whose `topologyVersion` is current waits (up to `maxAwaitTimeMS`) for
/// the topology to change: true if it parked.
fn parked(context: &Context, command: &Command) -> Result<bool, CommandError> {
    let Some(Bson::Document(asked)) = command.get("topologyVersion") else {
        return Ok(false);
    };
    let Some(max_await) = command.optional_i64("maxAwaitTimeMS")? else { return Ok(false) };
    if max_await < 0 {
        return Err(CommandError::bad_value("maxAwaitTimeMS must be a non-negative integer"));
    }
    let seen = context.shared.wakeup_generation(WakeOn::Topology);
    let current = match &context.shared.replication {
        Some(set) => set.is_current(asked),
        None => *asked == standalone_topology(context),
    };
    if !current {
        return Ok(false);
    }
    let deadline = context.wait_deadline(std::time::Duration::from_millis(max_await as u64));
    if std::time::Instant::now() >= deadline {
        return Ok(false);
    }
    context.park(WakeOn::Topology, seen, deadline);
    Ok(true)
}

/// A standalone's `topologyVersion`: this process's id, and a counter that never moves.
fn standalone_topology(context: &Context) -> bson::Document {
    doc! {"processId": context.shared.process_id, "counter": 0i64}
}

/// `saslSupportedMechs: "db.user"`: the mechanisms that user has credentials for.
fn supported_mechanisms(context: &Context, command: &Command) -> Result<Option<Vec<&'static str>>, CommandError> {
    let Some(asked) = command.optional_str("saslSupportedMechs")? else { return Ok(None) };
    let Some((db, user)) = asked.split_once('.') else { return Ok(None) };
    let stored = auth::users::Directory::new(&context.shared.store).user(&auth::users::UserName::new(user, db))?;
    Ok(stored.map(|user| user.mechanisms()))
}

/// The compressors both sides support, in the client's order.
fn negotiated(command: &Command) -> Result<Vec<String>, CommandError> {
    let offer: Vec<&str> = match command.get("compression") {
        None => return Ok(Vec::new()),
        Some(Bson::Array(items)) => items.iter().filter_map(Bson::as_str).collect(),
        Some(other) => return Err(crate::command::mismatch("compression", "array", other)),
    };
    let chosen = wire::negotiate(offer, &wire::SUPPORTED_COMPRESSORS);
    Ok(chosen.into_iter().map(|c| c.name().to_owned()).collect())
}
