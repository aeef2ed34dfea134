//! `convertToCapped`: `{convertToCapped: <collection>, size: <bytes>}` replaces a collection by a
//! capped one holding its documents (the oldest go if they do not fit; secondary indexes are
//! not kept, as in MongoDB).

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let Some(size) = command.optional_i64("size")? else {
        return Err(CommandError::new(
            wire::ErrorCode::NoSuchKey,
            "BSON field 'convertToCapped.size' is missing but a required field",
        ));
    };
    context.shared.store.collection((&command.database, &collection)).convert_to_capped(size)?;
    reply(doc! {})
}
