//! `getMore`: the next batch of a parked cursor (`batchSize`, else as many as fit in 16 MiB).
//! The cursor is out of the table while the batch is read and goes back unless exhausted.

use bson::RawDocumentBuf;
use wire::ErrorCode;

use crate::auth;
use crate::command::Command;
use crate::cursors::{batch_size, cursor_id, cursor_reply};
use crate::error::CommandError;
use crate::state::{Context, Counters};

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let id = cursor_id(command.argument())?;
    let collection = match command.optional_str("collection")? {
        Some(name) => name.to_owned(),
        None => {
            return Err(CommandError::new(
                ErrorCode::NoSuchKey,
                "BSON field 'getMore.collection' is missing but a required field",
            ));
        }
    };
    let size = batch_size(command.optional_i64("batchSize")?, usize::MAX)?;
    let cursors = &context.shared.cursors;
    let Some(mut cursor) = cursors.take(id) else {
        return Err(CommandError::new(ErrorCode::CursorNotFound, format!("cursor id {id} not found")));
    };
    if !auth::owns(context, &cursor.owner) {
        cursors.put_back(id, cursor);
        return Err(auth::not_owner(id));
    }
    let namespace = command.namespace(&collection);
    if cursor.namespace != namespace {
        let message = format!(
            "Requested getMore on namespace '{namespace}', but cursor belongs to a different namespace {}",
            cursor.namespace
        );
        cursors.put_back(id, cursor);
        return Err(CommandError::new(ErrorCode::Unauthorized, message));
    }
    Counters::add(&context.shared.counters.getmore, 1);
    let batch = cursor.next_batch(size)?;
    let next_id = if cursor.is_exhausted() {
        0
    } else {
        cursors.put_back(id, cursor);
        id
    };
    cursor_reply("nextBatch", batch, next_id, &namespace)
}
