//! `findAndModify`: update or remove one document (the first by `sort`) and return it, before
//! or after (`new`). Reply `{lastErrorObject: {n, updatedExisting, upserted?}, value}`.

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::{FindAndModifyOutcome, FindAndModifyRequest};

use crate::command::Command;
use crate::commands::update::{array_filters, modification};
use crate::commands::{collation, hint, reply, variables};
use crate::error::CommandError;
use crate::state::{Context, Counters};

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let request = request(context, command)?;
    let store = &context.shared.store;
    let checkout = crate::sessions::checkout(context, command)?;
    let bypass_validation = command.optional_bool("bypassDocumentValidation")?.unwrap_or(false);
    let recorded = checkout.as_ref().map(|c| c.executed(context, 0)).transpose()?.flatten();
    let outcome = match recorded {
        Some(recorded) => docstore::FindAndModifyOutcome::from_document(&recorded),
        None => {
            let retry = checkout.as_ref().map(|c| c.retry(vec![0], true));
            crate::transactions::with(context, |active| {
                let transaction = active.and_then(|active| active.txn());
                let options =
                    docstore::WriteOptions { durability: command.durability(), retry, transaction, bypass_validation };
                store.collection((&command.database, &collection)).find_and_modify(&request, options)
            })?
        }
    };
    let counter = if request.remove { &context.shared.counters.delete } else { &context.shared.counters.update };
    Counters::add(counter, 1);
    reply(outcome_document(&outcome, request.remove))
}

pub fn request(context: &Context, command: &Command) -> Result<FindAndModifyRequest, CommandError> {
    let remove = command.optional_bool("remove")?.unwrap_or(false);
    let update = modification(command.get("update"))?;
    if remove == update.is_some() {
        return Err(CommandError::new(
            wire::ErrorCode::FailedToParse,
            "Either an update or remove=true must be specified",
        ));
    }
    let upsert = command.optional_bool("upsert")?.unwrap_or(false);
    if remove && (upsert || command.optional_bool("new")?.unwrap_or(false)) {
        return Err(CommandError::new(
            wire::ErrorCode::FailedToParse,
            "Cannot specify both an upsert or new=true with remove=true",
        ));
    }
    Ok(FindAndModifyRequest {
        query: command.optional_document("query")?.cloned().unwrap_or_else(Document::new),
        sort: command.optional_document("sort")?.cloned().filter(|sort| !sort.is_empty()),
        remove,
        update,
        return_new: command.optional_bool("new")?.unwrap_or(false),
        fields: command.optional_document("fields")?.cloned(),
        upsert,
        array_filters: array_filters(&command.body)?,
        hint: hint(command.get("hint"))?,
        variables: std::sync::Arc::new(variables(context, command)?),
        collation: collation(command.get("collation"))?,
    })
}

fn outcome_document(outcome: &FindAndModifyOutcome, remove: bool) -> Document {
    let mut last_error = doc! { "n": outcome.n as i32 };
    if !remove {
        last_error.insert("updatedExisting", outcome.updated_existing);
    }
    if let Some(id) = &outcome.upserted_id {
        last_error.insert("upserted", id.clone());
    }
    let value = outcome.value.clone().map_or(Bson::Null, Bson::Document);
    doc! { "lastErrorObject": last_error, "value": value }
}
