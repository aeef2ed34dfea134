//! `validate`: cross-check a collection's documents, index entries and counters.

use bson::{Bson, Document, RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::{int, reply};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let report = context.shared.store.collection((&command.database, &collection)).validate()?;
    let mut keys = Document::new();
    for (name, count) in &report.index_entries {
        keys.insert(name.clone(), i64::try_from(*count).unwrap_or(i64::MAX));
    }
    reply(doc! {
        "ns": command.namespace(&collection),
        "nrecords": int(report.documents),
        "nIndexes": keys.len() as i32,
        "keysPerIndex": keys,
        "valid": report.is_valid(),
        "errors": report.errors.iter().cloned().map(Bson::String).collect::<Vec<_>>(),
        "warnings": Bson::Array(Vec::new()),
    })
}
