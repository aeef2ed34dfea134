//! `killSessions`: sessions hold no server state yet, so there is nothing to kill.

use bson::{Bson, RawDocumentBuf, doc};

use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(_context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    match command.argument() {
        Some(Bson::Array(_)) => reply(doc! {}),
        Some(other) => Err(mismatch(&command.name, "array", other)),
        None => Err(CommandError::bad_value("missing session list")),
    }
}
