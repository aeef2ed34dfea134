//! `currentOp` and `killOp` (and the documents of the `$currentOp` stage): the commands running
//! now, from the server's registry (`crate::operations`), and asking one to stop; `top`: where
//! the time went, per collection (`crate::top`).
//!
//! currentOp lists running commands only: idle connections, cursors and sessions (`$all`,
//! `idleConnections`, `idleCursors`, `idleSessions`) are not listed. Its other fields filter
//! the list with MongoDB's query language, as in mongod (`{currentOp: 1, op: "query"}`).

use bson::{Bson, Document, RawDocumentBuf, doc};

use crate::command::{Command, GENERIC_ARGUMENTS, as_i64, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

/// The options of currentOp that are not filter fields.
const OPTIONS: [&str; 3] = ["currentOp", "$all", "$ownOps"];

pub fn current_op(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    admin_only(command)?;
    let mut filter = Document::new();
    for (key, value) in command.body.iter() {
        if !OPTIONS.contains(&key.as_str()) && !GENERIC_ARGUMENTS.contains(&key.as_str()) {
            filter.insert(key.clone(), value.clone());
        }
    }
    let filter = docstore::EntryFilter::parse(&filter)?;
    let own_only = command.optional_bool("$ownOps")?.unwrap_or(false);
    let operations: Vec<Bson> =
        documents(context, own_only).into_iter().filter(|op| filter.matches(op)).map(Bson::Document).collect();
    reply(doc! {"inprog": operations})
}

/// The operation documents, `own_only`: of the commands this connection's users run.
pub fn documents(context: &Context, own_only: bool) -> Vec<Document> {
    let host = context.shared.local_addr.to_string();
    let users = crate::auth::owner(context);
    let shared = &context.shared;
    let mine = |active: &crate::operations::Active| !shared.security.enabled || active.users == users;
    shared
        .operations
        .list()
        .iter()
        .filter(|active| !own_only || mine(active))
        .map(|active| active.document(&host))
        .collect()
}

pub fn kill_op(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    admin_only(command)?;
    let op = match command.get("op") {
        Some(value) => as_i64(value).ok_or_else(|| mismatch("op", "number", value))?,
        None => return Err(CommandError::bad_value("Did not provide \"op\" field")),
    };
    let opid = u32::try_from(op).map_err(|_| CommandError::bad_value(format!("invalid op : {op}")))?;
    let killed = context.shared.operations.kill(opid);
    tracing::info!(target: "server::operations", opid, killed, "killOp");
    reply(doc! {"info": "attempting to kill op"})
}

/// `top`: time and count per collection, by kind of command (`crate::top`).
pub fn top(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    admin_only(command)?;
    let mut totals = doc! {"note": "all times in micros"};
    totals.extend(context.shared.top.totals());
    reply(doc! {"totals": totals})
}

fn admin_only(command: &Command) -> Result<(), CommandError> {
    if command.database != "admin" {
        return Err(CommandError::new(
            wire::ErrorCode::Unauthorized,
            format!("{} may only be run against the admin database.", command.name),
        ));
    }
    Ok(())
}
