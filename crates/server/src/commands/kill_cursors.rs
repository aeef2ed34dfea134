//! `killCursors`: drop parked cursors (and their snapshots) by id.

use bson::{Bson, RawDocumentBuf, doc};

use crate::auth::{self, not_owner};
use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::cursors::cursor_id;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    command.collection()?;
    let ids = match command.get("cursors") {
        Some(Bson::Array(ids)) => ids.iter().map(|id| cursor_id(Some(id))).collect::<Result<Vec<_>, _>>()?,
        Some(other) => return Err(mismatch("cursors", "array", other)),
        None => {
            return Err(CommandError::new(
                wire::ErrorCode::NoSuchKey,
                "BSON field 'killCursors.cursors' is missing but a required field",
            ));
        }
    };
    let (mut killed, mut not_found) = (Vec::new(), Vec::new());
    for id in ids {
        match context.shared.cursors.kill(id, |cursor| auth::owns(context, &cursor.owner)) {
            Some(true) => killed.push(id),
            Some(false) => return Err(not_owner(id)),
            None => not_found.push(id),
        }
    }
    reply(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": not_found,
        "cursorsAlive": Bson::Array(Vec::new()),
        "cursorsUnknown": Bson::Array(Vec::new()),
    })
}
