//! `getCmdLineOpts`: the arguments the server was started with and the options they parsed
//! to, in mongod.conf's shape.

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let config = &context.shared.config;
    reply(doc! { "argv": config.argv.clone(), "parsed": config.parsed_options.clone() })
}
