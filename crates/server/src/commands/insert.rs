//! `insert`: documents from the `documents` sequence (or body array), stored as the client's
//! bytes (the docstore checks each stored document's size and nesting); `ordered` (default)
//! stops at the first failure, unordered goes on. Reply `{n, writeErrors?}`.

use bson::{Document, RawDocumentBuf};
use docstore::WriteOptions;

use crate::command::Command;
use crate::commands::write_reply;
use crate::error::CommandError;
use crate::state::{Context, Counters};
use crate::store_error::{to_command_error, write_error};

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let ordered = command.optional_bool("ordered")?.unwrap_or(true);
    let documents = command.documents("documents")?;
    if documents.len() > crate::commands::hello::MAX_WRITE_BATCH_SIZE as usize {
        return Err(CommandError::new(
            wire::ErrorCode::InvalidLength,
            format!("Write batch sizes must be between 1 and 100000. Got {} operations.", documents.len()),
        ));
    }
    let store = &context.shared.store;
    let checkout = crate::sessions::checkout(context, command)?;
    // A retried insert skips the documents its first attempt inserted (by statement id, their
    // position in the batch) and counts them.
    let (mut documents, mut positions, mut already) = (documents, Vec::new(), 0);
    if let Some(checkout) = &checkout {
        let mut pending = Vec::new();
        for (position, document) in documents.into_iter().enumerate() {
            match checkout.executed(context, position as i32)? {
                Some(_) => already += 1,
                None => {
                    pending.push(document);
                    positions.push(position);
                }
            }
        }
        documents = pending;
    }
    let retry = checkout.as_ref().map(|c| c.retry(positions.iter().map(|p| *p as i32).collect(), true));
    let bypass_validation = command.optional_bool("bypassDocumentValidation")?.unwrap_or(false);
    let mut outcome = crate::transactions::with(context, |active| {
        let transaction = active.and_then(|active| active.txn());
        let options = WriteOptions { durability: command.durability(), retry, transaction, bypass_validation };
        store.collection((&command.database, &collection)).insert(documents, ordered, options)
    });
    if checkout.is_some() {
        for (index, _) in &mut outcome.errors {
            *index = positions.get(*index).copied().unwrap_or(*index);
        }
    }
    Counters::add(&context.shared.counters.insert, outcome.inserted as u64);
    context.shared.metrics.inserted(&command.database, &collection, outcome.inserted);
    if let Some(error) = outcome.durability_error {
        // Written but not synced as asked: the engine stopped; nothing here is acknowledged.
        return Err(to_command_error(error));
    }
    // The store reports failures in batch order, and stops at the first when ordered.
    let errors: Vec<Document> =
        outcome.errors.into_iter().map(|(index, error)| write_error(index, &to_command_error(error))).collect();
    write_reply((outcome.inserted + already) as i64, Document::new(), errors)
}
