//! `collMod`: change a collection's options: `validator`, `validationLevel`,
//! `validationAction`, `changeStreamPreAndPostImages` (`{enabled: bool}`), and `index`
//! (`{name | keyPattern, expireAfterSeconds?, hidden?}`: one index's TTL or visibility to the
//! planner, replied with the old and new values as MongoDB does). Any other option is refused
//! with InvalidOptions naming it.

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::IndexSelector;
use wire::ErrorCode;

use crate::command::{Command, GENERIC_ARGUMENTS, mismatch};
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let mut changes = Document::new();
    let mut index = None;
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
            // Checked by the store against the options they make together.
            ("validator" | "validationLevel" | "validationAction", _) => {
                changes.insert(key.clone(), value.clone());
            }
            ("index", Bson::Document(spec)) => index = Some(index_change(spec)?),
            ("index", other) => return Err(mismatch(key, "object", other)),
            (other, _) => {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    format!("collMod option '{other}' is not supported by Strata"),
                ));
            }
        }
    }
    let store = &context.shared.store;
    let mut reply_fields = Document::new();
    if let Some((selector, index_changes)) = index {
        reply_fields = store.collection((&command.database, &collection)).modify_index(&selector, &index_changes)?;
    }
    if !changes.is_empty() || reply_fields.is_empty() {
        store.collection((&command.database, &collection)).set_options(changes)?;
    }
    reply(reply_fields)
}

/// `index: {name | keyPattern, expireAfterSeconds?, hidden?}`.
fn index_change(spec: &Document) -> Result<(IndexSelector, Document), CommandError> {
    let selector = match (spec.get("name"), spec.get("keyPattern")) {
        (Some(Bson::String(name)), None) => IndexSelector::Name(name.clone()),
        (None, Some(Bson::Document(pattern))) => IndexSelector::KeyPattern(pattern.clone()),
        _ => {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "collMod's index needs exactly one of 'name' (a string) or 'keyPattern' (an object)",
            ));
        }
    };
    let changes: Document = spec
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "name" | "keyPattern"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if changes.is_empty() {
        return Err(CommandError::new(ErrorCode::InvalidOptions, "no collMod index options specified"));
    }
    Ok((selector, changes))
}
