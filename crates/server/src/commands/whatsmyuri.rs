//! `whatsmyuri`: the client's address as the server sees it.

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    reply(doc! { "you": context.connection.peer.to_string() })
}
