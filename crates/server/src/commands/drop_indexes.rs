//! `dropIndexes`: drop indexes by `"*"`, name, names or key pattern. Reply `{nIndexesWas}`.

use bson::{Bson, RawDocumentBuf, doc};
use docstore::IndexSelector;

use crate::command::{Command, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let selector = match command.get("index") {
        Some(Bson::String(star)) if star == "*" => IndexSelector::All,
        Some(Bson::String(name)) => IndexSelector::Name(name.clone()),
        Some(Bson::Document(pattern)) => IndexSelector::KeyPattern(pattern.clone()),
        Some(Bson::Array(names)) => IndexSelector::Names(
            names
                .iter()
                .map(|name| name.as_str().map(str::to_owned).ok_or_else(|| mismatch("index", "string", name)))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => return Err(mismatch("index", "string or object", other)),
        None => {
            return Err(CommandError::new(
                wire::ErrorCode::NoSuchKey,
                "BSON field 'dropIndexes.index' is missing but a required field",
            ));
        }
    };
    let was = context.shared.store.collection((&command.database, &collection)).drop_indexes(&selector)?;
    reply(doc! { "nIndexesWas": was as i32 })
}
