//! `renameCollection`: `{renameCollection: "db.from", to: "db.to", dropTarget}` on admin.

use bson::{RawDocumentBuf, doc};
use wire::ErrorCode;

use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let from = match command.argument() {
        Some(bson::Bson::String(namespace)) => split(namespace)?,
        Some(other) => return Err(mismatch("renameCollection", "string", other)),
        None => return Err(CommandError::bad_value("missing source namespace")),
    };
    let Some(to) = command.optional_str("to")? else {
        return Err(CommandError::new(
            ErrorCode::NoSuchKey,
            "BSON field 'renameCollection.to' is missing but a required field",
        ));
    };
    let to = split(to)?;
    let drop_target = command.optional_bool("dropTarget")?.unwrap_or(false);
    context.shared.store.collection(from).rename(to, drop_target)?;
    reply(doc! {})
}

fn split(namespace: &str) -> Result<(&str, &str), CommandError> {
    match namespace.split_once('.') {
        Some((db, collection)) if !db.is_empty() && !collection.is_empty() => Ok((db, collection)),
        _ => Err(CommandError::new(ErrorCode::InvalidNamespace, format!("Invalid namespace specified '{namespace}'"))),
    }
}
