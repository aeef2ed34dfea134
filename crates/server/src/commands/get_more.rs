//! `getMore`: the next batch of a parked cursor (`batchSize`, else as many as fit in 16 MiB).
//! The cursor is out of the table while the batch is read and goes back unless exhausted.

use bson::RawDocumentBuf;
use wire::ErrorCode;

use crate::auth;
use crate::command::Command;
use crate::cursors::{batch_size, cursor_id, cursor_reply_with};
use crate::error::CommandError;
use crate::state::{Context, Counters, WakeOn};

/// How long a change stream's (or an awaitData cursor's) `getMore` waits for data when the
/// client does not say, as mongod. Drivers send the application's `maxAwaitTimeMS` as the getMore's `maxTimeMS`, which
/// for an awaitData cursor is how long to wait for data.
const DEFAULT_AWAIT_MS: i64 = 1000;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let id = cursor_id(command.argument())?;
    let collection = match command.optional_str("collection")? {
        Some(name) => name.to_owned(),
        None => {
            return Err(CommandError::new(
                ErrorCode::NoSuchKey,
                "BSON field 'getMore.collection' is missing but a required field",
            ));
        }
    };
    let size = batch_size(command.optional_i64("batchSize")?, usize::MAX)?;
    let cursors = &context.shared.cursors;
    let Some(mut cursor) = cursors.take(id) else {
        return Err(CommandError::new(ErrorCode::CursorNotFound, format!("cursor id {id} not found")));
    };
    if !auth::owns(context, &cursor.owner) {
        cursors.put_back(id, cursor);
        return Err(auth::not_owner(id));
    }
    let namespace = command.namespace(&collection);
    if cursor.namespace != namespace {
        let message = format!(
            "Requested getMore on namespace '{namespace}', but cursor belongs to a different namespace {}",
            cursor.namespace
        );
        cursors.put_back(id, cursor);
        return Err(CommandError::new(ErrorCode::Unauthorized, message));
    }
    // Read the wakeup generation before the oplog: an entry committed after it wakes a park.
    let seen = context.shared.wakeup_generation(WakeOn::Oplog);
    if let Some(left) = cursor.time_left {
        let deadline = std::time::Instant::now() + left;
        docstore::operation::limit(deadline);
        docstore::operation::check_now()?;
    }
    let batch = cursor.next_batch(size)?;
    if cursor.time_left.is_some() {
        cursor.time_left =
            docstore::operation::deadline().map(|at| at.saturating_duration_since(std::time::Instant::now()));
    }
    if cursor.awaits_data() && batch.is_empty() && !cursor.is_exhausted() {
        let max_await = match command.optional_i64("maxTimeMS")? {
            Some(ms) => ms,
            None => command.optional_i64("maxAwaitTimeMS")?.unwrap_or(DEFAULT_AWAIT_MS),
        }
        .max(0);
        let deadline = context.wait_deadline(std::time::Duration::from_millis(max_await as u64));
        if std::time::Instant::now() < deadline {
            cursors.put_back(id, cursor);
            context.park(WakeOn::Oplog, seen, deadline);
            return Ok(RawDocumentBuf::new());
        }
    }
    Counters::add(&context.shared.counters.getmore, 1);
    let token = cursor.post_batch_resume_token().cloned();
    let next_id = if cursor.is_exhausted() {
        0
    } else {
        cursors.put_back(id, cursor);
        id
    };
    cursor_reply_with("nextBatch", batch, next_id, &namespace, token.as_ref())
}
