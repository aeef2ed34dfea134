//! `listCollections`: the database's collections as a one-batch cursor, filtered by `filter`
//! (on `name`, `type`, `options...`), with `nameOnly`. With `authorizedCollections: true` and
//! `nameOnly: true`, a user without `listCollections` on the database sees only the
//! collections its roles reach.

use bson::{Document, RawDocumentBuf, doc};

use crate::auth::{self, privileges::Action, privileges::Target};
use crate::command::Command;
use crate::cursors::documents_cursor;
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name_only = command.optional_bool("nameOnly")?.unwrap_or(false);
    let filter = match command.optional_document("filter")? {
        Some(filter) if !filter.is_empty() => Some(docstore::EntryFilter::parse(filter)?),
        _ => None,
    };
    let database = Target::Database(command.database.clone());
    let authorized_only = !auth::may(context, &database, Action::ListCollections);
    let mut entries = Vec::new();
    for info in context.shared.store.list_collections(&command.database) {
        if authorized_only && !auth::may_see_collection(context, &command.database, &info.name) {
            continue;
        }
        let kind = match (info.view, info.options.contains_key("timeseries")) {
            (true, _) => "view",
            (false, true) => "timeseries",
            (false, false) => "collection",
        };
        let mut full = doc! {
            "name": info.name.clone(),
            "type": kind,
            "options": info.options.clone(),
            "info": collection_info(&info),
        };
        // A clustered collection's `_id` index is its clustered index, reported in its options.
        if kind == "collection" && !info.options.contains_key("clusteredIndex") {
            full.insert("idIndex", doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" });
        }
        if filter.as_ref().is_some_and(|filter| !filter.matches(&full)) {
            continue;
        }
        entries.push(if name_only {
            doc! { "name": info.name, "type": kind }
        } else {
            full
        });
    }
    entries.sort_by(|a: &Document, b: &Document| a.get_str("name").ok().cmp(&b.get_str("name").ok()));
    documents_cursor(entries, &command.namespace("$cmd.listCollections"))
}

/// `info`: whether it is a view, and a collection's UUID.
fn collection_info(info: &docstore::CollectionInfo) -> Document {
    let mut document = doc! { "readOnly": info.view };
    if let Some(uuid) = info.uuid {
        document.insert("uuid", bson::Binary::from_uuid(uuid));
    }
    document
}
