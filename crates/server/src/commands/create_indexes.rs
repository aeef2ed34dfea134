//! `createIndexes`: build the `indexes` specs (creating the collection if needed). Reply
//! `{numIndexesBefore, numIndexesAfter, createdCollectionAutomatically, note?}`.

use bson::{Bson, RawDocumentBuf, doc};

use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let specs = match command.get("indexes") {
        Some(Bson::Array(specs)) if !specs.is_empty() => specs
            .iter()
            .map(|spec| match spec {
                Bson::Document(spec) => Ok(spec.clone()),
                other => Err(mismatch("indexes", "object", other)),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(Bson::Array(_)) => return Err(CommandError::bad_value("Must specify at least one index.")),
        Some(other) => return Err(mismatch("indexes", "array", other)),
        None => {
            return Err(CommandError::new(
                wire::ErrorCode::NoSuchKey,
                "BSON field 'createIndexes.indexes' is missing but a required field",
            ));
        }
    };
    let outcome = context.shared.store.collection((&command.database, &collection)).create_indexes(&specs)?;
    let mut fields = doc! {
        "numIndexesBefore": outcome.num_indexes_before as i32,
        "numIndexesAfter": outcome.num_indexes_after as i32,
        "createdCollectionAutomatically": outcome.created_collection_automatically,
    };
    if let Some(note) = outcome.note {
        fields.insert("note", note);
    }
    reply(fields)
}
