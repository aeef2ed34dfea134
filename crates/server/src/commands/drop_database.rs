//! `dropDatabase`: drop every collection of the command's database.

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    context.shared.store.drop_database(&command.database)?;
    reply(doc! { "dropped": command.database.clone() })
}
