//! `logRotate`: the log file is renamed with the time appended and a new one opened (as
//! SIGUSR1 does); logging to stderr has nothing to rotate.

use bson::{Document, RawDocumentBuf};
use tracing::info;
use wire::ErrorCode;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::logging;
use crate::state::Context;

pub fn run(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    match logging::rotate() {
        Ok(Some(rotated)) => info!(rotated = %rotated.display(), "log rotated"),
        Ok(None) => {}
        Err(error) => return Err(CommandError::new(ErrorCode::OperationFailed, error)),
    }
    reply(Document::new())
}
