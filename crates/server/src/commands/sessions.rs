//! The session commands: `endSessions`, `killSessions`, `killAllSessions`, `refreshSessions`
//! (see `crate::sessions`). Ending or killing a session forgets its retryable-write records.

use bson::{Bson, Document, RawDocumentBuf, doc};

use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::sessions;
use crate::state::Context;

/// The command's list of `lsid` documents.
fn lsids(command: &Command) -> Result<Vec<Document>, CommandError> {
    match command.argument() {
        Some(Bson::Array(items)) => items
            .iter()
            .map(|item| match item {
                Bson::Document(lsid) => Ok(lsid.clone()),
                other => Err(mismatch(&command.name, "object", other)),
            })
            .collect(),
        Some(other) => Err(mismatch(&command.name, "array", other)),
        None => Err(CommandError::bad_value("missing session list")),
    }
}

fn end(context: &Context, ids: Vec<sessions::SessionId>) -> Result<RawDocumentBuf, CommandError> {
    for id in &ids {
        sessions::forget(context, id);
    }
    reply(doc! {})
}

pub fn end_sessions(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let ids = context.shared.sessions.end(&lsids(command)?);
    end(context, ids)
}

/// `killSessions: []` kills every session, as mongod does for an empty list.
pub fn kill_sessions(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let lsids = lsids(command)?;
    let ids = if lsids.is_empty() { context.shared.sessions.end_all() } else { context.shared.sessions.end(&lsids) };
    end(context, ids)
}

/// `killAllSessions: [{user, db}...]`: Strata kills every session whatever the users named.
pub fn kill_all_sessions(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    match command.argument() {
        Some(Bson::Array(_)) => end(context, context.shared.sessions.end_all()),
        Some(other) => Err(mismatch(&command.name, "array", other)),
        None => Err(CommandError::bad_value("missing user list")),
    }
}

pub fn refresh_sessions(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    context.shared.sessions.refresh(&lsids(command)?)?;
    reply(doc! {})
}
