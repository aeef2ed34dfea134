//! `delete`: each statement of `deletes` (`{q, limit: 0 | 1, hint}`) in order; `ordered`
//! (default) stops at the first failure; the command's `let` is seen by `$expr`. Reply `{n,
//! writeErrors?}`.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf};
use docstore::DeleteRequest;
use docstore::Variables;

use crate::command::{Command, as_i64, mismatch};
use crate::commands::{collation, hint, variables, write_reply};
use crate::error::CommandError;
use crate::state::{Context, Counters};
use crate::store_error::write_error;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let ordered = command.optional_bool("ordered")?.unwrap_or(true);
    let statements = command.documents("deletes")?;
    let durability = command.durability();
    let checkout = crate::sessions::checkout(context, command)?;
    let variables = Arc::new(variables(context, command)?);
    let mut n = 0u64;
    let mut errors = Vec::new();
    let mut first = true;
    for (index, raw) in statements.iter().enumerate() {
        if let Some(recorded) = checkout.as_ref().map(|c| c.executed(context, index as i32)).transpose()?.flatten() {
            n += recorded.get("n").and_then(as_i64).unwrap_or(0) as u64;
            continue;
        }
        let retry = checkout.as_ref().map(|c| c.retry(vec![index as i32], std::mem::take(&mut first)));
        let result = parse_statement(raw, &variables).and_then(|request| {
            crate::transactions::with(context, |active| {
                let transaction = active.and_then(|active| active.txn());
                let options = docstore::WriteOptions { durability, retry, transaction, bypass_validation: false };
                Ok(context.shared.store.collection((&command.database, &collection)).delete(&request, options)?)
            })
        });
        match result {
            Ok(deleted) => n += deleted,
            Err(error) => {
                errors.push(write_error(index, &error));
                if ordered {
                    break;
                }
            }
        }
    }
    Counters::add(&context.shared.counters.delete, statements.len() as u64);
    write_reply(n as i64, Document::new(), errors)
}

fn parse_statement(raw: &RawDocumentBuf, variables: &Arc<Variables>) -> Result<DeleteRequest, CommandError> {
    let statement = Document::try_from(raw.as_ref())?;
    let filter = match statement.get("q") {
        Some(Bson::Document(filter)) => filter.clone(),
        Some(other) => return Err(mismatch("q", "object", other)),
        None => {
            return Err(CommandError::new(
                wire::ErrorCode::NoSuchKey,
                "BSON field 'delete.deletes.q' is missing but a required field",
            ));
        }
    };
    let just_one = match statement.get("limit") {
        None => {
            return Err(CommandError::new(
                wire::ErrorCode::NoSuchKey,
                "BSON field 'delete.deletes.limit' is missing but a required field",
            ));
        }
        Some(value) => match as_i64(value) {
            Some(0) => false,
            Some(1) => true,
            _ => {
                return Err(CommandError::bad_value(format!(
                    "The limit field in delete objects must be 0 or 1. Got {value}"
                )));
            }
        },
    };
    Ok(DeleteRequest {
        filter,
        just_one,
        hint: hint(statement.get("hint"))?,
        variables: Arc::clone(variables),
        collation: collation(statement.get("collation"))?,
    })
}
