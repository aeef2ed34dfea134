//! `insert`: documents from the `documents` sequence (or body array), stored as the client's
//! bytes. Each is checked for size and nesting depth first; `ordered` (default) stops at the
//! first failure, unordered goes on. Reply `{n, writeErrors?}`.

use bson::{Document, RawDocumentBuf};
use wire::limits::{MAX_DOCUMENT_SIZE_BYTES, MAX_STORED_DOCUMENT_DEPTH};

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
    let mut write_errors: Vec<(usize, Document)> = Vec::new();
    let mut accepted = Vec::with_capacity(documents.len());
    let mut positions = Vec::with_capacity(documents.len());
    for (index, document) in documents.into_iter().enumerate() {
        match check_document(&document) {
            Ok(()) => {
                accepted.push(document);
                positions.push(index);
            }
            Err(error) => {
                write_errors.push((index, write_error(index, &error)));
                if ordered {
                    break;
                }
            }
        }
    }
    let store = &context.shared.store;
    let outcome = store.insert(&command.database, &collection, accepted, ordered, command.durability());
    Counters::add(&context.shared.counters.insert, outcome.inserted as u64);
    if let Some(error) = outcome.durability_error {
        // Written but not synced as asked: the engine stopped; nothing here is acknowledged.
        return Err(to_command_error(error));
    }
    for (position, error) in outcome.errors {
        let index = positions.get(position).copied().unwrap_or(position);
        write_errors.push((index, write_error(index, &to_command_error(error))));
    }
    write_errors.sort_by_key(|(index, _)| *index);
    if ordered {
        write_errors.truncate(1);
    }
    let errors: Vec<Document> = write_errors.into_iter().map(|(_, error)| error).collect();
    write_reply(outcome.inserted as i64, Document::new(), errors)
}

fn check_document(document: &RawDocumentBuf) -> Result<(), CommandError> {
    let size = document.as_bytes().len();
    if size > MAX_DOCUMENT_SIZE_BYTES {
        return Err(CommandError::new(
            wire::ErrorCode::BSONObjectTooLarge,
            format!("object to insert too large. size in bytes: {size}, max size: {MAX_DOCUMENT_SIZE_BYTES}"),
        ));
    }
    wire::validate::check_depth(document, MAX_STORED_DOCUMENT_DEPTH).map_err(|_| {
        CommandError::new(wire::ErrorCode::Overflow, "object to insert exceeds the maximum nesting depth of 100")
    })?;
    Ok(())
}
