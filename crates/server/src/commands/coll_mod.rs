//! `collMod`: change a collection's options. Strata changes `changeStreamPreAndPostImages`
//! (`{enabled: bool}`: whether changes keep pre-images for change streams); any other option is
//! refused with InvalidOptions naming it.

use bson::{Bson, RawDocumentBuf, doc};
use wire::ErrorCode;

use crate::command::{Command, GENERIC_ARGUMENTS, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let mut changes = bson::Document::new();
    for (key, value) in command.body.iter().skip(1) {
        if GENERIC_ARGUMENTS.contains(&key.as_str()) || key == "writeConcern" {
            continue;
        }
        match (key.as_str(), value) {
            ("changeStreamPreAndPostImages", Bson::Document(option)) => match option.get("enabled") {
                Some(Bson::Boolean(enabled)) => {
                    changes.insert(key.clone(), doc! {"enabled": *enabled});
                }
                _ => return Err(CommandError::bad_value("changeStreamPreAndPostImages needs {enabled: <bool>}")),
            },
            ("changeStreamPreAndPostImages", other) => return Err(mismatch(key, "object", other)),
            (other, _) => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    format!(
                        "collMod option '{other}' is not supported by Strata (it changes changeStreamPreAndPostImages)"
                    ),
                ));
            }
        }
    }
    context.shared.store.set_collection_options(&command.database, &collection, changes)?;
    reply(doc! {})
}
