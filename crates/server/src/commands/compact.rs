//! `compact: <collection>`: gives the data file's free space back to the operating system
//! while the server keeps serving. Strata keeps every collection in one file, so compacting
//! any collection compacts the file: blocks move from its end into free space nearer its start
//! and the file is cut after its last block. The reply has MongoDB's `bytesFreed` and the
//! file's size before and after; the same goes to the log.

use bson::{RawDocumentBuf, doc};
use tracing::info;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let collection = command.collection()?;
    let report = context.shared.store.collection((&command.database, &collection)).compact()?;
    let freed = report.file_bytes_before.saturating_sub(report.file_bytes_after);
    info!(
        ns = %command.namespace(&collection),
        file_bytes_before = report.file_bytes_before,
        file_bytes_after = report.file_bytes_after,
        blocks_moved = report.blocks_moved,
        micros = report.micros,
        "compacted the data file"
    );
    let n = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    reply(doc! {
        "bytesFreed": n(freed),
        "fileBytesBefore": n(report.file_bytes_before),
        "fileBytesAfter": n(report.file_bytes_after),
        "blocksMoved": n(report.blocks_moved),
        "bytesMoved": n(report.bytes_moved),
        "durationMillis": n(report.micros / 1000),
    })
}
