//! `commitTransaction` and `abortTransaction` (see `crate::transactions`).

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;
use crate::transactions;

pub fn commit(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    transactions::commit(context, command)?;
    reply(doc! {})
}

pub fn abort(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    transactions::abort(context)?;
    reply(doc! {})
}
