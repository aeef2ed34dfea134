//! The write path: a document and all its index entries change in one engine transaction.
//!
//! Every write holds the collection's write lock ([`crate::catalog::Catalog::lock`]) and reads the
//! newest descriptor under it, so it maintains every index, including one being built. A
//! [`DocumentWrite`] gathers the messages of one or more documents (the document under its
//! encoded `_id`, a put or delete per index entry, blind counter updates for the document count
//! and size) and, when an index first turns multikey, the new catalog entry; `commit` applies
//! them atomically. A failed `insert_if_absent` (a duplicate `_id` or unique key) drops the
//! whole transaction, so nothing of the document is left behind; it is reported as
//! [`Error::DuplicateKey`] with the index's key pattern and the key's values.

pub mod delete;
pub mod insert;
pub mod update;

use std::collections::HashSet;
use std::sync::Arc;

use bson::{Bson, Document, RawDocument};
use document::keycodec::EncodedKey;
use storage::{Durability, Engine, Transaction};

use crate::catalog::{Catalog, CollectionMeta, namespace_key};
use crate::collection::Collection;
use crate::error::{Error, Result};
use crate::index::{Index, id_key};
use crate::oplog::{Entry, diff};
use crate::retry::Retry;

/// A retryable statement to record with a write: its session, its id, and how its result
/// follows from the document written (the new version, or the inserted one).
pub type Recording<'a> = (&'a Retry, i32, &'a dyn Fn(&Document) -> Result<Document>);

/// Messages of a write not yet committed.
pub struct DocumentWrite<'s> {
    engine: &'s Engine,
    catalog: &'s Catalog,
    collection: Arc<Collection>,
    txn: Transaction<'s>,
    count_delta: i64,
    size_delta: i64,
    /// Indexes turned multikey by this write (the catalog entry changes with it).
    new_multikey: HashSet<String>,
    /// Change of each index's logical size (bytes of keys and values), by tree name.
    /// Logical bytes added to each index tree: a few entries, searched in order (a hash per
    /// document and index cost more than the search).
    index_bytes: Vec<(String, i64)>,
    /// The oplog entries of this write, when the store keeps an oplog for this database.
    entries: Option<Vec<Entry>>,
    /// Log updates as whole replacements (a replacement update) rather than diffs.
    replacement: bool,
}

impl<'s> DocumentWrite<'s> {
    pub fn new(engine: &'s Engine, catalog: &'s Catalog, collection: &Arc<Collection>) -> DocumentWrite<'s> {
        DocumentWrite {
            engine,
            catalog,
            collection: Arc::clone(collection),
            txn: engine.begin(),
            count_delta: 0,
            size_delta: 0,
            new_multikey: HashSet::new(),
            index_bytes: Vec::new(),
            entries: catalog.logs(&collection.meta.db).then(Vec::new),
            replacement: false,
        }
    }

    /// Records a retryable write's statement with this write (see [`crate::retry`]).
    pub fn record(&mut self, retry: &Retry, stmt_id: i32, result: Document) -> Result<()> {
        retry.record(&mut self.txn, self.catalog.sessions_tree(), stmt_id, &result)
    }

    /// Logs this write's updates as replacements (the update was a replacement document).
    pub fn log_as_replacement(&mut self) {
        self.replacement = true;
    }

    fn log(&mut self, entry: impl FnOnce(&str) -> Result<Entry>) -> Result<()> {
        if let Some(entries) = &mut self.entries {
            entries.push(entry(&self.collection.namespace())?);
        }
        Ok(())
    }

    /// Inserts a new document (the `_id` must be absent: checked at commit).
    pub fn insert(&mut self, id: &[u8], raw: &RawDocument) -> Result<()> {
        check_stored(raw, "object to insert")?;
        let collection = Arc::clone(&self.collection);
        let mut all_keys = Vec::with_capacity(collection.indexes.len());
        for index in &collection.indexes {
            let (keys, multikey) = index.keys(raw)?;
            self.note_multikey(index, multikey);
            all_keys.push(keys);
        }
        self.txn.insert_if_absent(self.collection.tree, id.to_vec(), raw.as_bytes().to_vec());
        for (index, keys) in self.collection.indexes.iter().zip(all_keys) {
            let bytes: i64 = keys.iter().map(|k| index.entry_bytes(k, id, raw)).sum();
            add_index_bytes(&mut self.index_bytes, &index.meta.tree, bytes);
            index.add(&mut self.txn, id, raw, keys);
        }
        self.count_delta += 1;
        self.size_delta += raw.as_bytes().len() as i64;
        if self.entries.is_some() {
            let id_value = document_id(raw)?.unwrap_or(Bson::Null);
            self.log(|ns| Entry::insert(ns, raw, &id_value))?;
        }
        Ok(())
    }

    /// Removes a stored document and its entries.
    pub fn remove(&mut self, id: &[u8], raw: &RawDocument) -> Result<()> {
        self.txn.delete(self.collection.tree, id.to_vec());
        for index in &self.collection.indexes {
            let (keys, _) = index.keys(raw)?;
            let refs: Vec<&EncodedKey> = keys.iter().collect();
            index.remove(&mut self.txn, id, &refs);
            let bytes: i64 = keys.iter().map(|k| index.entry_bytes(k, id, raw)).sum();
            add_index_bytes(&mut self.index_bytes, &index.meta.tree, -bytes);
        }
        self.count_delta -= 1;
        self.size_delta -= raw.as_bytes().len() as i64;
        if self.entries.is_some() {
            let id_value = document_id(raw)?.unwrap_or(Bson::Null);
            self.log(|ns| Entry::delete(ns, &id_value))?;
        }
        Ok(())
    }

    /// Replaces a stored document (same `_id`), changing only the index entries that differ.
    pub fn replace(&mut self, id: &[u8], old: &RawDocument, new: &RawDocument) -> Result<()> {
        check_stored(new, "resulting document after update")?;
        let collection = Arc::clone(&self.collection);
        let mut changes = Vec::with_capacity(collection.indexes.len());
        for index in &collection.indexes {
            let (old_keys, _) = index.keys(old)?;
            let (new_keys, multikey) = index.keys(new)?;
            self.note_multikey(index, multikey);
            changes.push((old_keys, new_keys));
        }
        self.txn.put(self.collection.tree, id.to_vec(), new.as_bytes().to_vec());
        for (index, (old_keys, new_keys)) in self.collection.indexes.iter().zip(&changes) {
            apply_key_diff(&mut self.txn, index, id, new, old_keys, new_keys);
            let old_bytes: i64 = old_keys.iter().map(|k| index.entry_bytes(k, id, old)).sum();
            let new_bytes: i64 = new_keys.iter().map(|k| index.entry_bytes(k, id, new)).sum();
            add_index_bytes(&mut self.index_bytes, &index.meta.tree, new_bytes - old_bytes);
        }
        self.size_delta += new.as_bytes().len() as i64 - old.as_bytes().len() as i64;
        if self.entries.is_some() {
            self.log_update(old, new)?;
        }
        Ok(())
    }

    fn log_update(&mut self, old: &RawDocument, new: &RawDocument) -> Result<()> {
        let decode = |raw: &RawDocument| Document::try_from(raw).map_err(|e| Error::corrupt(format!("document: {e}")));
        let (old, new) = (decode(old)?, decode(new)?);
        let change = match self.replacement {
            true => None,
            false => diff::diff(&old, &new).map(|diff| bson::doc! {"$v": 2, "diff": diff}),
        };
        let id_value = new.get("_id").cloned().unwrap_or(Bson::Null);
        self.log(|ns| Entry::update(ns, &id_value, change.as_ref().unwrap_or(&new)))
    }

    /// An index build's entries for one document (uniqueness already checked by the build,
    /// so entries are puts: the document may own them already).
    pub fn add_entries(&mut self, index: &Index, id: &[u8], raw: &RawDocument, keys: &[EncodedKey], multikey: bool) {
        self.note_multikey(index, multikey);
        let refs: Vec<&EncodedKey> = keys.iter().collect();
        index.overwrite(&mut self.txn, id, raw, &refs);
        let bytes: i64 = keys.iter().map(|k| index.entry_bytes(k, id, raw)).sum();
        add_index_bytes(&mut self.index_bytes, &index.meta.tree, bytes);
    }

    fn note_multikey(&mut self, index: &Index, multikey: bool) {
        if multikey && !index.meta.multikey {
            self.new_multikey.insert(index.name.clone());
        }
    }

    /// Commits atomically; a duplicate key comes back as [`Error::DuplicateKey`] (described
    /// from `documents`, the documents this write inserted or changed).
    pub fn commit(mut self, durability: Durability, documents: &[&RawDocument]) -> Result<Arc<Collection>> {
        let counts = self.catalog.counts_tree();
        if self.count_delta != 0 {
            self.txn.update(counts, self.collection.count_key.clone(), self.count_delta.to_le_bytes().to_vec());
        }
        if self.size_delta != 0 {
            self.txn.update(counts, self.collection.size_key.clone(), self.size_delta.to_le_bytes().to_vec());
        }
        for (tree, delta) in &self.index_bytes {
            if *delta != 0 {
                self.txn.update(counts, crate::catalog::size_key(tree), delta.to_le_bytes().to_vec());
            }
        }
        let new_meta = self.multikey_meta();
        if let Some(meta) = &new_meta {
            self.txn.put(self.catalog.tree(), namespace_key(&meta.db, &meta.name), meta.encode()?);
        }
        if self.collection.meta.db == crate::oplog::DB && self.collection.meta.name == crate::oplog::COLLECTION {
            return Err(Error::IllegalOperation("cannot write to 'local.oplog.rs' directly".into()));
        }
        let entries = self.entries.take().unwrap_or_default();
        match self.catalog.commit_logged(
            self.engine,
            self.txn,
            &self.collection.meta.db,
            entries,
            under_lock(durability),
        ) {
            Ok(_) => {}
            Err(storage::Error::KeyExists { tree, key }) => {
                return Err(duplicate_key(&self.collection, &tree, &key, documents));
            }
            Err(other) => return Err(other.into()),
        }
        match new_meta {
            Some(meta) => self.catalog.install(self.engine, &self.collection, meta),
            None => Ok(self.collection),
        }
    }

    fn multikey_meta(&self) -> Option<CollectionMeta> {
        if self.new_multikey.is_empty() {
            return None;
        }
        let mut meta = self.collection.meta.clone();
        for index in &mut meta.indexes {
            if self.new_multikey.contains(index.name()) {
                index.multikey = true;
            }
        }
        Some(meta)
    }
}

/// The rules every stored document keeps (`document::stored`: 16 MiB, 100 levels), checked here,
/// on the one path every insert, update, upsert, `$out` and `$merge` takes into a collection.
fn check_stored(raw: &RawDocument, what: &str) -> Result<()> {
    use document::stored::{self, Violation};
    match stored::check(raw) {
        Ok(()) => Ok(()),
        Err(Violation::TooLarge { bytes }) => Err(Error::DocumentTooLarge(format!(
            "{what} too large. size in bytes: {bytes}, max size: {}",
            stored::MAX_DOCUMENT_BYTES
        ))),
        Err(Violation::TooDeep) => {
            Err(Error::NestingTooDeep(format!("{what} exceeds the maximum nesting depth of {}", stored::MAX_DEPTH)))
        }
        Err(Violation::Malformed(message)) => Err(Error::bad_value(format!("invalid BSON document: {message}"))),
    }
}

/// The durability a document write commits with while its collection's lock is held: one that
/// must reach the disk is synced only after the lock is released (`Store`'s write methods call
/// `Inner::make_durable`), so concurrent `j:true` writers of one collection share log syncs
/// instead of queueing behind each other's. Not yet durable, such a write is already visible,
/// as any commit is between its publication and its sync.
fn under_lock(durability: Durability) -> Durability {
    match durability {
        Durability::Immediate => Durability::None,
        other => other,
    }
}

/// Deletes entries the new version lost, adds those it gained, and rewrites those whose stored
/// payload changed (type tags, or the whole document in a clustering index).
fn apply_key_diff(
    txn: &mut Transaction<'_>,
    index: &Index,
    id: &[u8],
    new: &RawDocument,
    old_keys: &[EncodedKey],
    new_keys: &[EncodedKey],
) {
    let old_orders: HashSet<&[u8]> = old_keys.iter().map(|k| k.order.as_slice()).collect();
    let new_orders: HashSet<&[u8]> = new_keys.iter().map(|k| k.order.as_slice()).collect();
    let removed: Vec<&EncodedKey> = old_keys.iter().filter(|k| !new_orders.contains(k.order.as_slice())).collect();
    index.remove(txn, id, &removed);
    let added: Vec<EncodedKey> =
        new_keys.iter().filter(|k| !old_orders.contains(k.order.as_slice())).cloned().collect();
    index.add(txn, id, new, added);
    let rewritten: Vec<&EncodedKey> = new_keys
        .iter()
        .filter(|k| old_orders.contains(k.order.as_slice()))
        .filter(|k| index.clustering || !old_keys.iter().any(|o| o.order == k.order && o.types == k.types))
        .collect();
    index.overwrite(txn, id, new, &rewritten);
}

/// Describes an engine `KeyExists` as MongoDB's duplicate key error.
fn duplicate_key(collection: &Collection, tree: &str, key: &[u8], documents: &[&RawDocument]) -> Error {
    let namespace = collection.namespace();
    if tree == collection.meta.tree {
        let id = documents
            .iter()
            .filter_map(|raw| document_id(raw).ok().flatten())
            .find(|id| id_key(id) == key)
            .unwrap_or(Bson::Null);
        let mut key_value = Document::new();
        key_value.insert("_id", id);
        return Error::DuplicateKey { namespace, index: "_id_".into(), key_pattern: bson::doc! {"_id": 1}, key_value };
    }
    let Some(index) = collection.indexes.iter().find(|index| index.meta.tree == tree) else {
        return Error::corrupt(format!("duplicate key in unknown tree {tree}"));
    };
    let encoded =
        documents.iter().filter_map(|raw| index.keys(raw).ok()).flat_map(|(keys, _)| keys).find(|k| k.order == key);
    let key_value = encoded.map(|k| index.key_document(&k)).unwrap_or_default();
    Error::DuplicateKey { namespace, index: index.name.clone(), key_pattern: index.key_pattern.clone(), key_value }
}

/// The document's `_id`, if it has one.
pub fn document_id(raw: &RawDocument) -> Result<Option<Bson>> {
    match raw.get("_id") {
        Ok(Some(value)) => Ok(Some(Bson::try_from(value).map_err(|e| Error::bad_value(format!("invalid BSON: {e}")))?)),
        Ok(None) => Ok(None),
        Err(e) => Err(Error::bad_value(format!("invalid BSON: {e}"))),
    }
}

/// MongoDB's rules for an `_id` value.
pub fn check_id(id: &Bson) -> Result<()> {
    match id {
        Bson::Array(_) => Err(Error::InvalidIdField("The '_id' value cannot be of type array".into())),
        Bson::RegularExpression(_) => Err(Error::InvalidIdField("can't use a regex for _id".into())),
        Bson::Undefined => Err(Error::InvalidIdField("can't use a undefined for _id".into())),
        _ => Ok(()),
    }
}

/// Adds to an index's size change; the tree name is copied once per write, not per document.
fn add_index_bytes(totals: &mut Vec<(String, i64)>, tree: &str, delta: i64) {
    match totals.iter_mut().find(|(name, _)| name == tree) {
        Some((_, total)) => *total += delta,
        None => totals.push((tree.to_string(), delta)),
    }
}
