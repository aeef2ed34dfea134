//! `configureFailPoint` (test command): see `crate::fail_points`. Without
//! `--setParameter enableTestCommands=1` it does not exist, as in mongod.

use bson::{RawDocumentBuf, doc};
use wire::ErrorCode;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    if !context.shared.config.test_commands {
        return Err(CommandError::new(ErrorCode::CommandNotFound, "no such command: 'configureFailPoint'"));
    }
    context.shared.fail_points.configure(command)?;
    reply(doc! {})
}
