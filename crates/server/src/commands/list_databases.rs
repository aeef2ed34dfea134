//! `listDatabases`: every database with its size, `nameOnly` and `filter` (on `name`...).

use bson::{Bson, RawDocumentBuf, doc};

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
    let mut databases = Vec::new();
    let mut total: i64 = 0;
    for info in context.shared.store.list_databases()? {
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
