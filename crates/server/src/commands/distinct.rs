//! `distinct`: the distinct values at `key` among documents matching `query`.

use bson::{Document, RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let Some(key) = command.optional_str("key")? else {
        return Err(CommandError::new(
            wire::ErrorCode::NoSuchKey,
            "BSON field 'distinct.key' is missing but a required field",
        ));
    };
    let filter = command.optional_document("query")?.cloned().unwrap_or_else(Document::new);
    let values = match crate::transactions::read_at(context) {
        Some(view) => context.shared.store.distinct_at(&command.database, &collection, key, filter, view)?,
        None => context.shared.store.distinct(&command.database, &collection, key, filter)?,
    };
    reply(doc! { "values": values })
}
