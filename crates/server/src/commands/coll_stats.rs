//! `collStats`: the store's figures for one collection, divided by `scale`.

use bson::RawDocumentBuf;

use crate::command::Command;
use crate::commands::{reply, scale};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let stats = context.shared.store.collection((&command.database, &collection)).stats(scale(command)?)?;
    reply(stats)
}
