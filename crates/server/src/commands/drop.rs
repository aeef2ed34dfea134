//! `drop`: drop a collection and its indexes. As in MongoDB 7, dropping a collection that does
//! not exist succeeds.

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let store = &context.shared.store;
    let indexes = store.collection((&command.database, &collection)).list_indexes().map(|list| list.len()).unwrap_or(0);
    let existed = store.collection((&command.database, &collection)).drop()?;
    let mut fields = doc! { "ns": command.namespace(&collection) };
    if existed {
        fields.insert("nIndexesWas", indexes as i32);
    }
    reply(fields)
}
