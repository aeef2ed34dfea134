//! `createBackup: 1, backupDir: "/path"` (as Percona Server for MongoDB names it): a hot backup
//! of the whole database into a new data directory, consistent as of the command, while
//! writes go on; the copy starts with `strata serve --dbpath /path`. Replies with what it
//! copied. The path is the server's, not the client's.

use bson::{RawDocumentBuf, doc};
use tracing::info;

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    if command.database != "admin" {
        return Err(CommandError::new(
            wire::ErrorCode::Unauthorized,
            "createBackup may only be run against the admin database.",
        ));
    }
    let Some(directory) = command.optional_str("backupDir")? else {
        return Err(CommandError::bad_value("createBackup needs backupDir, a directory on the server"));
    };
    let report = context.shared.store.backup(std::path::Path::new(directory))?;
    info!(directory, bytes = report.bytes, micros = report.micros, "backup written");
    reply(doc! {
        "backupDir": directory,
        "bytes": report.bytes as i64,
        "durationMillis": (report.micros / 1000) as i64,
    })
}
