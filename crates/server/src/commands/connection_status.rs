//! `connectionStatus`: who this connection is authenticated as, with its roles (and, with
//! `showPrivileges`, what they grant).

use bson::{RawDocumentBuf, doc};

use crate::auth;
use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let show_privileges = command.optional_bool("showPrivileges")?.unwrap_or(false);
    reply(doc! { "authInfo": auth::status(context, show_privileges) })
}
