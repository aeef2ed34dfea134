//! `count`: matches of `query` (with skip, limit, hint); without a query, the maintained
//! document counter (no scan), as MongoDB's fast count.

use bson::{Document, RawDocumentBuf, doc};
use docstore::FindRequest;

use crate::command::Command;
use crate::commands::{collation, hint, int, reply};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let request = count_request(command)?;
    let store = &context.shared.store;
    let simple = request.filter.is_empty() && request.skip == 0 && request.limit.is_none() && request.hint.is_none();
    // (a collation changes no count of every document)
    let n = if simple {
        store.collection((&command.database, &collection)).estimated_document_count()?
    } else {
        store.collection((&command.database, &collection)).count(&request)?
    };
    reply(doc! { "n": int(n) })
}

pub fn count_request(command: &Command) -> Result<FindRequest, CommandError> {
    let skip = command.optional_i64("skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(CommandError::bad_value("skip value is negative in count query"));
    }
    let limit = command.optional_i64("limit")?.unwrap_or(0);
    Ok(FindRequest {
        filter: command.optional_document("query")?.cloned().unwrap_or_else(Document::new),
        skip: skip as u64,
        limit: (limit != 0).then_some(limit.unsigned_abs()),
        hint: hint(command.get("hint"))?,
        collation: collation(command.get("collation"))?,
        ..FindRequest::default()
    })
}
