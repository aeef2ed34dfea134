//! `update`: each statement of `updates` (`{q, u, c, multi, upsert, arrayFilters, hint}`)
//! through the store in order; `ordered` (default) stops at the first failure. The command's
//! `let` and a statement's `c` are variables its `$expr` and pipeline see. Reply `{n, nModified,
//! upserted?, writeErrors?}` where `n` counts matched plus upserted documents, as in MongoDB.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf, doc};
use docstore::Variables;
use docstore::{UpdateModification, UpdateRequest};

use crate::command::{Command, mismatch, truthy};
use crate::commands::{collation, hint, int, variables, write_reply};
use crate::error::CommandError;
use crate::state::{Context, Counters};
use crate::store_error::write_error;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let ordered = command.optional_bool("ordered")?.unwrap_or(true);
    let statements = command.documents("updates")?;
    // As in mongod, where the command's parser refuses it: an unknown field fails the whole
    // command before any statement runs.
    for raw in &statements {
        if let Some(unknown) =
            raw.iter().flatten().map(|(key, _)| key.as_str()).find(|key| !STATEMENT_FIELDS.contains(key))
        {
            return Err(CommandError::new(
                wire::ErrorCode::IDLUnknownField,
                format!("BSON field 'update.updates.{unknown}' is an unknown field."),
            ));
        }
    }
    let durability = command.durability();
    let checkout = crate::sessions::checkout(context, command)?;
    let variables = variables(context, command)?;
    let bypass_validation = command.optional_bool("bypassDocumentValidation")?.unwrap_or(false);
    let (mut n, mut modified) = (0u64, 0u64);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    let mut first = true;
    for (index, raw) in statements.iter().enumerate() {
        if let Some(recorded) = checkout.as_ref().map(|c| c.executed(context, index as i32)).transpose()?.flatten() {
            let outcome = recorded_outcome(&recorded);
            n += outcome.matched + u64::from(outcome.upserted_id.is_some());
            modified += outcome.modified;
            if let Some(id) = outcome.upserted_id {
                upserted.push(doc! { "index": index as i32, "_id": id });
            }
            continue;
        }
        let retry = checkout.as_ref().map(|c| c.retry(vec![index as i32], std::mem::take(&mut first)));
        let result = parse_statement(raw, &variables).and_then(|request| {
            crate::transactions::with(context, |active| {
                let transaction = active.and_then(|active| active.txn());
                let options = docstore::WriteOptions { durability, retry, transaction, bypass_validation };
                Ok(context.shared.store.collection((&command.database, &collection)).update(&request, options)?)
            })
        });
        match result {
            Ok(outcome) => {
                n += outcome.matched;
                modified += outcome.modified;
                if let Some(id) = outcome.upserted_id {
                    n += 1;
                    upserted.push(doc! { "index": index as i32, "_id": id });
                }
            }
            Err(error) => {
                errors.push(write_error(index, &error));
                if ordered {
                    break;
                }
            }
        }
    }
    Counters::add(&context.shared.counters.update, statements.len() as u64);
    let mut extra = doc! { "nModified": int(modified) };
    if !upserted.is_empty() {
        extra.insert("upserted", upserted);
    }
    write_reply(n as i64, extra, errors)
}

/// The outcome a retryable update statement recorded (`{n, nModified, upserted?}`; `n` counts
/// the matched documents, or the upserted one).
fn recorded_outcome(recorded: &Document) -> docstore::UpdateOutcome {
    let number = |key: &str| recorded.get(key).and_then(crate::command::as_i64).unwrap_or(0) as u64;
    let upserted_id = recorded.get("upserted").cloned();
    let matched = if upserted_id.is_some() { 0 } else { number("n") };
    docstore::UpdateOutcome { matched, modified: number("nModified"), upserted_id }
}

/// The fields an update statement may have (MongoDB 7's; `sort` came in 8.0).
const STATEMENT_FIELDS: &[&str] =
    &["q", "u", "c", "multi", "upsert", "upsertSupplied", "arrayFilters", "hint", "collation", "sampleId"];

fn parse_statement(raw: &RawDocumentBuf, variables: &Variables) -> Result<UpdateRequest, CommandError> {
    let statement = Document::try_from(raw.as_ref())?;
    let variables = match statement.get("c") {
        None => variables.clone(),
        Some(Bson::Document(constants)) => variables.clone().with_let(constants).map_err(docstore::Error::from)?,
        Some(other) => return Err(mismatch("c", "object", other)),
    };
    let filter = match statement.get("q") {
        Some(Bson::Document(filter)) => filter.clone(),
        Some(other) => return Err(mismatch("q", "object", other)),
        None => {
            return Err(CommandError::new(
                wire::ErrorCode::NoSuchKey,
                "BSON field 'update.updates.q' is missing but a required field",
            ));
        }
    };
    let update = modification(statement.get("u"))?.ok_or_else(|| {
        CommandError::new(wire::ErrorCode::NoSuchKey, "BSON field 'update.updates.u' is missing but a required field")
    })?;
    Ok(UpdateRequest {
        filter,
        update,
        multi: flag(&statement, "multi")?,
        upsert: flag(&statement, "upsert")?,
        array_filters: array_filters(&statement)?,
        hint: hint(statement.get("hint"))?,
        variables: Arc::new(variables),
        collation: collation(statement.get("collation"))?,
    })
}

/// `u` (or findAndModify's `update`): an update document or a pipeline.
pub fn modification(value: Option<&Bson>) -> Result<Option<UpdateModification>, CommandError> {
    match value {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(update)) => Ok(Some(UpdateModification::Document(update.clone()))),
        Some(Bson::Array(stages)) => {
            let stages = stages
                .iter()
                .map(|stage| match stage {
                    Bson::Document(stage) => Ok(stage.clone()),
                    other => Err(mismatch("u", "object", other)),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(UpdateModification::Pipeline(stages)))
        }
        Some(other) => Err(mismatch("u", "object", other)),
    }
}

pub fn flag(statement: &Document, key: &str) -> Result<bool, CommandError> {
    match statement.get(key) {
        None | Some(Bson::Null) => Ok(false),
        Some(value) => truthy(value).ok_or_else(|| mismatch(key, "bool", value)),
    }
}

pub fn array_filters(statement: &Document) -> Result<Vec<Document>, CommandError> {
    match statement.get("arrayFilters") {
        None | Some(Bson::Null) => Ok(Vec::new()),
        Some(Bson::Array(filters)) => filters
            .iter()
            .map(|filter| match filter {
                Bson::Document(filter) => Ok(filter.clone()),
                other => Err(mismatch("arrayFilters", "object", other)),
            })
            .collect(),
        Some(other) => Err(mismatch("arrayFilters", "array", other)),
    }
}
