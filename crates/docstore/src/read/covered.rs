//! Covered reads: answering a find from index entries alone, without fetching documents.
//!
//! A find is covered when its plan scans one standard (not clustering) index, alone or in every
//! branch of an `$or`, that is not multikey in the cursor's snapshot, and everything the query reads is in the index key: every
//! path of the filter, every sort path unless the index yields the order, and a plain inclusion
//! projection of index fields that excludes `_id`. Each entry's key is decoded back to its values
//! (the key's type tags make that exact: `1`, `1.0` and `NumberLong(1)` come back as they went
//! in) and laid out as a document of the index's fields, in the index's order (as MongoDB's
//! covered projection does: it cannot know the stored document's order); filter, sort and
//! projection then run on it exactly as on a fetched document.
//!
//! Null: a missing field and a null one index alike, and a synthesized `{a: null}` would make
//! `{a: {$exists: false}}` fail and a projection invent the field; so an entry with a null (or
//! undefined) component in a field the query reads fetches its document instead, and is
//! counted as a document examined. Fields the query does not read are left out.
//!
//! Multikey: an index turns multikey in the same commit as the document that makes it so (the
//! catalog entry is rewritten in that transaction), so the flag is read from the cursor's own
//! snapshot of the catalog, never from a descriptor that may be older or newer than it.

use bson::{Bson, Document, RawDocumentBuf};
use document::keycodec::decode_key;
use query::filter::Filter;
use query::projection::Projection;
use query::sort::SortSpec;
use storage::Snapshot;

use crate::catalog::Descriptor;
use crate::catalog::{CollectionMeta, namespace_key};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::{Entry, Index};
use crate::read::planner::{Access, Plan};

/// How to turn an index's entries into documents.
#[derive(Debug, Clone)]
pub(crate) struct Covered {
    index: Index,
    /// Per index field: whether the query reads it (a null in a field it does not read is
    /// simply left out).
    read: Vec<bool>,
}

impl Covered {
    /// The covering index of a find, if it has one in `snapshot`.
    pub(crate) fn for_find(
        cx: &Context,
        snapshot: &Snapshot,
        collection: &Descriptor,
        plan: &Plan,
        filter: &Filter,
        sort: Option<&SortSpec>,
        projection: Option<&Projection>,
    ) -> Result<Option<Covered>> {
        let Some(index) = scanned_index(&plan.access).and_then(|name| collection.index(name)) else { return Ok(None) };
        let Some(read) = index_fields_read(index, plan, filter, sort, projection) else { return Ok(None) };
        // A collated index holds the collation's surrogates, not the strings.
        if index.clustering || index.collation.is_some() || multikey_in_snapshot(cx, snapshot, collection, &index.name)?
        {
            return Ok(None);
        }
        Ok(Some(Covered { index: index.clone(), read }))
    }

    /// The entry as a document of the index's fields, or `None` when the document must be
    /// fetched (a null or undefined component: see the module header).
    pub(crate) fn document(&self, entry: &Entry) -> Result<Option<RawDocumentBuf>> {
        let values = decode_key(&entry.order, &entry.payload, &self.index.directions())
            .map_err(|e| Error::corrupt(format!("index {}: {e}", self.index.name)))?;
        let mut document = Document::new();
        for (((path, _), value), read) in self.index.spec.fields().iter().zip(values).zip(&self.read) {
            match value {
                _ if !read => {}
                Bson::Null | Bson::Undefined | Bson::Array(_) => return Ok(None),
                value => insert_dotted(&mut document, path.parts(), value),
            }
        }
        RawDocumentBuf::try_from(&document).map(Some).map_err(|e| Error::corrupt(e.to_string()))
    }
}

/// The one standard index a plan scans: an index scan's, or the index every branch of an `$or`
/// scans (iibench's queries: ranges of one compound index's prefix). The union's entries come
/// from one index, so they decode alike; the scan deduplicates them by `_id`.
fn scanned_index(access: &Access) -> Option<&String> {
    match access {
        Access::IndexScan(scan) => scan.index.as_ref(),
        Access::Or(scans) => {
            let first = scans.first()?.index.as_ref()?;
            scans.iter().all(|scan| scan.index.as_ref() == Some(first)).then_some(first)
        }
        Access::CollectionScan { .. } => None,
    }
}

/// Per index field, whether the query reads it; `None` if the query reads anything else.
fn index_fields_read(
    index: &Index,
    plan: &Plan,
    filter: &Filter,
    sort: Option<&SortSpec>,
    projection: Option<&Projection>,
) -> Option<Vec<bool>> {
    let mut paths = projection.and_then(Projection::plain_inclusion_paths)?;
    paths.extend(filter.paths_read()?);
    if !plan.sorted {
        paths.extend(sort.into_iter().flat_map(|sort| sort.fields().iter().map(|(path, _)| path.as_str().to_owned())));
    }
    let fields = index.spec.fields();
    // A hashed field's key is the hash, not the value.
    let hashed = index.spec.hashed().and_then(|position| fields.get(position));
    if hashed.is_some_and(|(field, _)| paths.iter().any(|path| path == field.as_str())) {
        return None;
    }
    if !paths.iter().all(|path| fields.iter().any(|(field, _)| field.as_str() == path)) {
        return None;
    }
    Some(fields.iter().map(|(field, _)| paths.iter().any(|path| path == field.as_str())).collect())
}

/// Whether the collection's catalog entry, as of `snapshot`, marks the index multikey (or no
/// longer lists it: then nothing is assumed).
fn multikey_in_snapshot(cx: &Context, snapshot: &Snapshot, collection: &Descriptor, index: &str) -> Result<bool> {
    let key = namespace_key(&collection.meta.db, &collection.meta.name);
    let Some(bytes) = snapshot.get(cx.catalog.tree(), &key)? else { return Ok(true) };
    Ok(CollectionMeta::index_multikey(&bytes, index)?.unwrap_or(true))
}

/// Sets `value` at a dotted path, creating the documents on the way (a non-multikey index has
/// no arrays on its paths, so every step is a document).
fn insert_dotted(document: &mut Document, parts: &[String], value: Bson) {
    let Some((last, steps)) = parts.split_last() else { return };
    let mut at = document;
    for step in steps {
        if !matches!(at.get(step), Some(Bson::Document(_))) {
            at.insert(step.clone(), Document::new());
        }
        let Some(Bson::Document(next)) = at.get_mut(step) else { return };
        at = next;
    }
    at.insert(last.clone(), value);
}
