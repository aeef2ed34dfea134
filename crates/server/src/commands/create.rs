//! `create`: create a collection with its options (`NamespaceExists` if it exists).

use bson::{Document, RawDocumentBuf, doc};

use crate::command::{Command, GENERIC_ARGUMENTS};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let mut options = Document::new();
    for (key, value) in command.body.iter().skip(1) {
        if !GENERIC_ARGUMENTS.contains(&key.as_str()) && key != "writeConcern" {
            options.insert(key.clone(), value.clone());
        }
    }
    context.shared.store.collection((&command.database, &collection)).create(options)?;
    reply(doc! {})
}
