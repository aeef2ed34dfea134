//! Change events from oplog entries, in MongoDB's shapes.
//!
//! | entry | event |
//! |---|---|
//! | `i` | `insert` with `fullDocument` |
//! | `u` with a `$v: 2` diff | `update` with `updateDescription` (`updatedFields`, `removedFields`, `truncatedArrays`) |
//! | `u` with a whole document | `replace` with `fullDocument` |
//! | `d` | `delete` |
//! | `c` `drop` / `renameCollection` / `dropDatabase` | `drop`, `rename` (with `to`), `dropDatabase` |
//! | `c` `create` / `createIndexes` / `dropIndexes` / `collMod` | `create`, `createIndexes`, `dropIndexes`, `modify` (only with `showExpandedEvents`) |
//! | `c` `applyOps` (a transaction) | each of its operations, with `lsid` and `txnNumber` |
//!
//! With `showExpandedEvents`, an event on a collection carries its entry's `ui` as
//! `collectionUUID`, and a `rename` an `operationDescription` (`to`, and `dropTarget`: the
//! UUID of the collection it replaced, if any).
//!
//! A collection's stream is invalidated by the collection's drop or rename, a database's by its
//! drop; the `invalidate` event ends the stream.

use bson::{Bson, Document, doc};

use super::Scope;
use crate::oplog::diff;

/// One change, before its `_id` (resume token) and `fullDocument` lookups are added.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    /// The operation's place in its entry (0 but in `applyOps`).
    pub index: u32,
    pub event: Document,
    /// The collection and `_id` of an update, for `fullDocument: updateLookup`.
    pub lookup: Option<(String, String, Bson)>,
    /// An update's `$v: 2` diff, which turns its pre-image into its post-image.
    pub diff: Option<Document>,
    /// The stream must end after this event.
    pub invalidates: bool,
}

/// The changes an oplog entry makes visible to a stream of `scope`.
pub(crate) fn changes(entry: &Document, scope: &Scope, expanded: bool) -> Vec<Change> {
    let op = entry.get_str("op").unwrap_or("");
    if op == "c"
        && let Ok(Bson::Array(operations)) =
            entry.get_document("o").map(|o| o.get("applyOps").cloned().unwrap_or(Bson::Null))
    {
        let mut changes = Vec::new();
        for (index, operation) in operations.iter().enumerate() {
            let Bson::Document(operation) = operation else { continue };
            if let Some(mut change) = change(operation, scope, expanded) {
                change.index = index as u32;
                for field in ["lsid", "txnNumber"] {
                    if let Some(value) = entry.get(field) {
                        change.event.insert(field, value.clone());
                    }
                }
                changes.push(change);
            }
        }
        return changes;
    }
    change(entry, scope, expanded).into_iter().collect()
}

/// The change of one operation (`None`: not in scope, or not an event).
fn change(entry: &Document, scope: &Scope, expanded: bool) -> Option<Change> {
    // (`expanded`: `showExpandedEvents`, which adds `disambiguatedPaths` to updates.)
    let op = entry.get_str("op").ok()?;
    let ns = entry.get_str("ns").ok()?;
    let (db, collection) = ns.split_once('.')?;
    let o = entry.get_document("o").ok()?;
    let mut change = if op == "c" {
        command_change(db, o, scope, expanded)?
    } else {
        data_change(op, db, collection, o, entry, scope, expanded)?
    };
    // mongod's `collectionUUID` is its entry's `ui` (a collection's, not a database's or a
    // view's), shown only with `showExpandedEvents`.
    if expanded && let Some(ui) = entry.get("ui") {
        change.event.insert("collectionUUID", ui.clone());
    }
    Some(change)
}

/// An insert, update, replace or delete.
fn data_change(
    op: &str,
    db: &str,
    collection: &str,
    o: &Document,
    entry: &Document,
    scope: &Scope,
    expanded: bool,
) -> Option<Change> {
    if !scope.covers(db, collection) {
        return None;
    }
    let key = match op {
        "i" => entry.get_document("o2").ok().cloned().or_else(|| o.get("_id").map(|id| doc! {"_id": id.clone()})),
        "u" => entry.get_document("o2").ok().cloned(),
        "d" => Some(o.clone()),
        _ => None,
    }?;
    let mut event = doc! {"operationType": "", "ns": {"db": db, "coll": collection}, "documentKey": key.clone()};
    let mut lookup = None;
    let mut update_diff = None;
    match op {
        "i" => {
            event.insert("operationType", "insert");
            event.insert("fullDocument", o.clone());
        }
        "u" if o.get_i32("$v").ok() == Some(2) || o.get_i64("$v").ok() == Some(2) => {
            event.insert("operationType", "update");
            let description = diff::describe(o.get_document("diff").ok()?);
            let truncated: Vec<Bson> = description
                .truncated_arrays
                .into_iter()
                .map(|(field, size)| Bson::Document(doc! {"field": field, "newSize": size as i32}))
                .collect();
            let mut update_description = doc! {
                "updatedFields": description.updated_fields,
                "removedFields": description.removed_fields,
                "truncatedArrays": truncated,
            };
            if expanded {
                update_description.insert("disambiguatedPaths", description.disambiguated);
            }
            event.insert("updateDescription", update_description);
            lookup = Some((db.to_owned(), collection.to_owned(), key.get("_id").cloned().unwrap_or(Bson::Null)));
            update_diff = o.get_document("diff").ok().cloned();
        }
        "u" => {
            event.insert("operationType", "replace");
            event.insert("fullDocument", o.clone());
        }
        _ => {
            event.insert("operationType", "delete");
        }
    }
    Some(Change { index: 0, event, lookup, diff: update_diff, invalidates: false })
}

fn command_change(db: &str, o: &Document, scope: &Scope, expanded: bool) -> Option<Change> {
    let (name, argument) = o.iter().next()?;
    let target = argument.as_str().unwrap_or("");
    let simple = |kind: &str, invalidates: bool| Change {
        index: 0,
        event: doc! {"operationType": kind, "ns": {"db": db, "coll": target}},
        lookup: None,
        diff: None,
        invalidates,
    };
    match name.as_str() {
        "drop" if scope.covers(db, target) => Some(simple("drop", matches!(scope, Scope::Collection(..)))),
        "dropDatabase" if scope.covers_database(db) => Some(Change {
            index: 0,
            event: doc! {"operationType": "dropDatabase", "ns": {"db": db}},
            lookup: None,
            diff: None,
            invalidates: matches!(scope, Scope::Database(_)),
        }),
        "renameCollection" => {
            let (from_db, from) = target.split_once('.')?;
            let (to_db, to) = o.get_str("to").ok()?.split_once('.')?;
            if !scope.covers(from_db, from) {
                return None;
            }
            let mut event =
                doc! {"operationType": "rename", "ns": {"db": from_db, "coll": from}, "to": {"db": to_db, "coll": to}};
            if expanded {
                let mut description = doc! {"to": {"db": to_db, "coll": to}};
                if let Some(uuid @ Bson::Binary(_)) = o.get("dropTarget") {
                    description.insert("dropTarget", uuid.clone());
                }
                event.insert("operationDescription", description);
            }
            Some(Change {
                index: 0,
                event,
                lookup: None,
                diff: None,
                invalidates: matches!(scope, Scope::Collection(..)),
            })
        }
        "create" | "createIndexes" | "dropIndexes" | "collMod" if expanded && scope.covers(db, target) => {
            let kind = if name == "collMod" { "modify" } else { name.as_str() };
            let mut change = simple(kind, false);
            let description: Document = o.iter().skip(1).map(|(k, v)| (k.clone(), v.clone())).collect();
            change.event.insert("operationDescription", description);
            Some(change)
        }
        _ => None,
    }
}
