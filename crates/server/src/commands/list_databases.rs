//! `listDatabases`: every database with its size, `nameOnly` and `filter` (on `name`...).
//! A user without the `listDatabases` privilege (or one asking `authorizedDatabases: true`)
//! sees only the databases its roles reach.

use bson::{Bson, RawDocumentBuf, doc};

use crate::auth::{self, privileges::Action, privileges::Target};
use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name_only = command.optional_bool("nameOnly")?.unwrap_or(false);
    let filter = match command.optional_document("filter")? {
        Some(filter) if !filter.is_empty() => Some(docstore::EntryFilter::parse(filter)?),
        _ => None,
    };
    let authorized_only = authorized_only(context, command)?;
    let mut databases = Vec::new();
    let mut total: i64 = 0;
    for info in context.shared.store.list_databases()? {
        if authorized_only && !auth::may_see_database(context, &info.name) {
            continue;
        }
        let size = i64::try_from(info.size_on_disk).unwrap_or(i64::MAX);
        let entry = if name_only {
            doc! { "name": info.name }
        } else {
            doc! { "name": info.name, "sizeOnDisk": size, "empty": info.empty }
        };
        if filter.as_ref().is_some_and(|filter| !filter.matches(&entry)) {
            continue;
        }
        total = total.saturating_add(size);
        databases.push(Bson::Document(entry));
    }
    let mut fields = doc! { "databases": databases };
    if !name_only {
        fields.insert("totalSize", total);
        fields.insert("totalSizeMb", total / (1024 * 1024));
    }
    reply(fields)
}

/// True if the list must be cut to the databases the user may reach.
fn authorized_only(context: &Context, command: &Command) -> Result<bool, CommandError> {
    let asked = command.optional_bool("authorizedDatabases")?;
    if auth::may(context, &Target::Cluster, Action::ListDatabases) {
        return Ok(asked == Some(true));
    }
    if asked == Some(false) {
        return Err(CommandError::new(
            wire::ErrorCode::Unauthorized,
            "not authorized on admin to execute command listDatabases with authorizedDatabases: false",
        ));
    }
    Ok(true)
}
