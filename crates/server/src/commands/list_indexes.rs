//! `listIndexes`: the collection's index specs as a one-batch cursor.

use bson::RawDocumentBuf;

use crate::command::Command;
use crate::cursors::documents_cursor;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let indexes = context.shared.store.collection((&command.database, &collection)).list_indexes()?;
    documents_cursor(indexes, &command.namespace(&collection))
}
