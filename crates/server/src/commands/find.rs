//! `find`: filter, projection, sort, skip, limit, hint, allowDiskUse, let, returnKey and
//! showRecordId through the store; the
//! first batch (101 documents by default, `batchSize`, 16 MiB) in the reply and the rest parked
//! as a server-side cursor. A negative `limit` or `singleBatch` closes the cursor after one batch.

use bson::{Document, RawDocumentBuf};
use docstore::FindRequest;

use crate::auth;
use crate::command::Command;
use crate::commands::{collation, hint, variables};
use crate::cursors::{DEFAULT_FIRST_BATCH, ServerCursor, batch_size, first_batch};
use crate::error::CommandError;
use crate::state::{Context, Counters};

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let (mut request, single_batch) = find_request(command)?;
    let (read_at, at_cluster_time) = crate::read_concern::read_view(context, command)?;
    request.read_at = read_at;
    request.variables = std::sync::Arc::new(variables(context, command)?);
    let mut batch = batch_size(command.optional_i64("batchSize")?, DEFAULT_FIRST_BATCH)?;
    if let Some(limit) = request.limit {
        batch = batch.min(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    Counters::add(&context.shared.counters.query, 1);
    if command.optional_bool("tailable")?.unwrap_or(false) {
        return tailable(context, command, &collection, &request, batch);
    }
    let cursor = context.shared.store.collection((&command.database, &collection)).find(&request)?;
    let mut cursor = ServerCursor::new(cursor, command.namespace(&collection), auth::owner(context));
    cursor.at_cluster_time = at_cluster_time;
    cursor.no_timeout = command.optional_bool("noCursorTimeout")?.unwrap_or(false);
    first_batch(&context.shared.cursors, cursor, batch, single_batch)
}

/// A tailable cursor on the oplog or a capped collection. It stays open when it has no more
/// documents yet; with `awaitData` an empty getMore waits for them.
fn tailable(
    context: &Context,
    command: &Command,
    collection: &str,
    request: &FindRequest,
    batch: usize,
) -> Result<RawDocumentBuf, CommandError> {
    if request.sort.is_some() || request.skip > 0 {
        return Err(CommandError::bad_value("tailable cursors read in natural order, without sort or skip"));
    }
    let await_data = command.optional_bool("awaitData")?.unwrap_or(false);
    let store = &context.shared.store;
    let tail = match (command.database.as_str(), collection) {
        ("local", "oplog.rs") => store.tail_oplog(&request.filter)?,
        (db, name) => store.collection((db, name)).tail(&request.filter)?,
    };
    let cursor = ServerCursor::tail(tail, await_data, command.namespace(collection), auth::owner(context));
    first_batch(&context.shared.cursors, cursor, batch, false)
}

/// The store request a find (or explain of a find) describes, and whether it wants one batch.
pub fn find_request(command: &Command) -> Result<(FindRequest, bool), CommandError> {
    let skip = command.optional_i64("skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(CommandError::bad_value("skip value must be non-negative"));
    }
    let limit = command.optional_i64("limit")?.unwrap_or(0);
    let single_batch = command.optional_bool("singleBatch")?.unwrap_or(false) || limit < 0;
    let request = FindRequest {
        filter: command.optional_document("filter")?.cloned().unwrap_or_else(Document::new),
        projection: command.optional_document("projection")?.cloned(),
        sort: command.optional_document("sort")?.cloned().filter(|sort| !sort.is_empty()),
        skip: skip as u64,
        limit: (limit != 0).then_some(limit.unsigned_abs()),
        hint: hint(command.get("hint"))?,
        allow_disk_use: command.optional_bool("allowDiskUse")?.unwrap_or(false),
        read_at: None,
        variables: Default::default(),
        collation: collation(command.get("collation"))?,
        return_key: command.optional_bool("returnKey")?.unwrap_or(false),
        min: command.optional_document("min")?.cloned(),
        max: command.optional_document("max")?.cloned(),
        show_record_id: command.optional_bool("showRecordId")?.unwrap_or(false),
    };
    Ok((request, single_batch))
}
