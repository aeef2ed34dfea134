//! The one place store errors become MongoDB replies: a command error `{ok: 0, errmsg, code,
//! codeName}` or a write command's `writeErrors` entry (with `keyPattern`/`keyValue` for a
//! duplicate key). Codes come from `docstore::Error::code`, which already carries MongoDB's
//! numbers (the query crate's errors keep their own); the name is derived from the number
//! (`wire::Code`).

use bson::{Document, doc};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{error, warn};

use crate::error::CommandError;

pub fn to_command_error(error: docstore::Error) -> CommandError {
    match &error {
        docstore::Error::Corruption(_) | docstore::Error::Storage(_) => error!(%error, "storage failure"),
        docstore::Error::OutOfDiskSpace(_) => warn_disk_full(&error),
        _ => {}
    }
    let mut command_error = CommandError::new(wire::Code::new(error.code()), error.to_string());
    if let Some((key_pattern, key_value)) = error.duplicate_key() {
        command_error.extra = Box::new(doc! { "keyPattern": key_pattern.clone(), "keyValue": key_value.clone() });
    }
    if let docstore::Error::DocumentValidationFailure { info, .. } = &error {
        command_error.extra = Box::new(doc! { "errInfo": info.clone() });
    }
    command_error
}

/// A full disk refuses every write: logged at most once a minute, not once per command.
fn warn_disk_full(error: &docstore::Error) {
    static LAST_WARNED_SECS: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last = LAST_WARNED_SECS.load(Ordering::Relaxed);
    if now >= last + 60 && LAST_WARNED_SECS.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        warn!(%error, "writes refused: the disk is full (reads go on; writes resume once space is freed)");
    }
}

impl From<docstore::Error> for CommandError {
    fn from(error: docstore::Error) -> CommandError {
        to_command_error(error)
    }
}

/// One `writeErrors` entry for the operation at `index` of a batch.
pub fn write_error(index: usize, error: &CommandError) -> Document {
    let mut entry = doc! {
        "index": i32::try_from(index).unwrap_or(i32::MAX),
        "code": error.code.number(),
        "errmsg": error.message.clone(),
    };
    for (key, value) in error.extra.iter() {
        entry.insert(key.clone(), value.clone());
    }
    entry
}

/// mongod's message for a write conflict.
pub const WRITE_CONFLICT_MESSAGE: &str = "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.";
