//! `connectionStatus`: nobody is authenticated (authentication is not implemented yet).

use bson::{Bson, RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(_context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let mut auth_info = doc! {
        "authenticatedUsers": Bson::Array(Vec::new()),
        "authenticatedUserRoles": Bson::Array(Vec::new()),
    };
    if command.optional_bool("showPrivileges")?.unwrap_or(false) {
        auth_info.insert("authenticatedUserPrivileges", Bson::Array(Vec::new()));
    }
    reply(doc! { "authInfo": auth_info })
}
