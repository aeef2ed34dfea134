//! `dbStats`: the store's figures for one database, divided by `scale`.

use bson::RawDocumentBuf;

use crate::command::Command;
use crate::commands::{reply, scale};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let stats = context.shared.store.db_stats(&command.database, scale(command)?)?;
    reply(stats)
}
