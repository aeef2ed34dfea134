//! `ping`: `{ok: 1}`.

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    reply(doc! {})
}
