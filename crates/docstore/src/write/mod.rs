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

pub(crate) mod delete;
pub(crate) mod insert;
pub(crate) mod update;

use std::collections::HashSet;
use std::sync::Arc;

use bson::{Bson, Document, RawDocument};
use document::keycodec::EncodedKey;
use storage::{Durability, Transaction, Writes};

use crate::catalog::CollectionMeta;
use crate::catalog::Descriptor;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::{Index, id_key};
use crate::oplog::{Entry, diff};
use crate::retry::Retry;
use crate::transaction::{DocumentTransaction, write_conflict};

/// How a write runs: its durability; for a retryable write, what to record; inside a
/// multi-document transaction, the transaction (durability then applies at its commit).
pub struct WriteOptions<'a> {
    pub durability: Durability,
    pub retry: Option<Retry>,
    pub transaction: Option<&'a mut DocumentTransaction>,
    /// `bypassDocumentValidation`: the collection's validator is not checked.
    pub bypass_validation: bool,
}

impl From<Durability> for WriteOptions<'static> {
    fn from(durability: Durability) -> WriteOptions<'static> {
        WriteOptions { durability, retry: None, transaction: None, bypass_validation: false }
    }
}

impl WriteOptions<'_> {
    /// The writer for one store call, and whether the call's writes are synced after it (not
    /// a transaction's: its commit is).
    pub(crate) fn writer(&mut self) -> (Writer<'_>, bool) {
        let durable_now = self.transaction.is_none();
        let mut writer = Writer::new(self.durability, self.retry.as_ref(), self.transaction.as_deref_mut());
        writer.bypass_validation = self.bypass_validation;
        (writer, durable_now)
    }
}

/// How a statement's writes are committed: with the durability asked, with a retryable
/// write's records, or into an open multi-document transaction (whose reads see them).
pub(crate) struct Writer<'a> {
    pub durability: Durability,
    pub retry: Option<&'a Retry>,
    pub txn: Option<&'a mut DocumentTransaction>,
    /// `bypassDocumentValidation`: writes skip the collection's validator.
    pub bypass_validation: bool,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(
        durability: Durability,
        retry: Option<&'a Retry>,
        txn: Option<&'a mut DocumentTransaction>,
    ) -> Writer<'a> {
        Writer { durability, retry, txn, bypass_validation: false }
    }

    /// A plain writer (internal writes: TTL deletes, `$out`, `$merge`).
    pub(crate) fn plain(durability: Durability) -> Writer<'static> {
        Writer { durability, retry: None, txn: None, bypass_validation: false }
    }

    /// A document write for `collection`, into the transaction if there is one.
    pub(crate) fn write<'s>(&'s mut self, cx: &'s Context, collection: &Arc<Descriptor>) -> DocumentWrite<'s> {
        let mut write = DocumentWrite::within(cx, collection, self.txn.as_deref_mut());
        write.validate = !self.bypass_validation;
        write
    }

    pub(crate) fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// The transaction's view, for the statement's reads.
    pub(crate) fn read_at(&self) -> Option<crate::transaction::ReadAt> {
        self.txn.as_ref().map(|txn| txn.read_at())
    }
}

/// A retryable statement to record with a write: its session, its id, and how its result
/// follows from the document written (the new version, or the inserted one).
pub(crate) type Recording<'a> = (&'a Retry, i32, &'a dyn Fn(&Document) -> Result<Document>);

/// Where a write's messages go: an engine transaction committed with the write, or a
/// multi-document transaction's pending writes.
enum Sink<'s> {
    Engine(Transaction<'s>),
    Transaction { txn: &'s mut DocumentTransaction },
}

impl Sink<'_> {
    fn writes(&mut self) -> &mut dyn Writes {
        match self {
            Sink::Engine(txn) => txn,
            Sink::Transaction { txn, .. } => txn.writes(),
        }
    }
}

/// Messages of a write not yet committed.
pub(crate) struct DocumentWrite<'s> {
    cx: &'s Context,
    collection: Arc<Descriptor>,
    sink: Sink<'s>,
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
    /// Check the collection's validator (off: `bypassDocumentValidation`, internal writes).
    validate: bool,
}

impl<'s> DocumentWrite<'s> {
    pub(crate) fn new(cx: &'s Context, collection: &Arc<Descriptor>) -> DocumentWrite<'s> {
        DocumentWrite {
            cx,
            collection: Arc::clone(collection),
            sink: Sink::Engine(cx.engine.begin()),
            count_delta: 0,
            size_delta: 0,
            new_multikey: HashSet::new(),
            index_bytes: Vec::new(),
            entries: cx.logs(&collection.meta.db).then(Vec::new),
            replacement: false,
            validate: false,
        }
    }

    /// A write into a multi-document transaction (see [`crate::transaction`]).
    pub(crate) fn in_transaction(
        cx: &'s Context,
        collection: &Arc<Descriptor>,
        txn: &'s mut DocumentTransaction,
    ) -> DocumentWrite<'s> {
        let mut write = DocumentWrite::new(cx, collection);
        if txn.replicating {
            // The primary's entries are written as they are: none to build.
            write.entries = None;
        }
        write.sink = Sink::Transaction { txn };
        write
    }

    /// A write into `txn` if there is one, else its own engine transaction.
    pub(crate) fn within(
        cx: &'s Context,
        collection: &Arc<Descriptor>,
        txn: Option<&'s mut DocumentTransaction>,
    ) -> DocumentWrite<'s> {
        match txn {
            Some(txn) => DocumentWrite::in_transaction(cx, collection, txn),
            None => DocumentWrite::new(cx, collection),
        }
    }

    /// Records a retryable write's statement with this write (see [`crate::retry`]); a
    /// transaction's statements are retried by retrying its commit instead.
    pub(crate) fn record(&mut self, retry: &Retry, stmt_id: i32, result: Document) -> Result<()> {
        match &mut self.sink {
            Sink::Engine(txn) => {
                retry.record(txn, self.cx.sessions_tree, stmt_id, &result)?;
                if let Some(entries) = &mut self.entries {
                    entries.push(crate::retry::record_entry(&retry.lsid, retry.txn_number, stmt_id, &result)?);
                }
                Ok(())
            }
            Sink::Transaction { .. } => Ok(()),
        }
    }

    /// Records a run of consecutive statements sharing one result (an insert group's documents).
    pub(crate) fn record_run(&mut self, retry: &Retry, first: i32, last: i32, result: Document) -> Result<()> {
        self.record(retry, first, crate::retry::run_value(first, last, &result))
    }

    /// MongoDB refuses writes to capped collections inside multi-document transactions.
    fn refuse_capped_in_transaction(&self) -> Result<()> {
        match (&self.sink, self.collection.capped) {
            (Sink::Transaction { .. }, Some(_)) => Err(Error::NotSupportedInTransaction(format!(
                "Collection '{}' is a capped collection. Writes in transactions are not allowed on capped collections.",
                self.collection.namespace()
            ))),
            _ => Ok(()),
        }
    }

    /// Before a document is written: in a transaction, hold it (or fail with WriteConflict);
    /// outside one, a document an open transaction holds may not be written (the statement
    /// waited for it before, under the same lock).
    fn claim(&mut self, id: &[u8]) -> Result<()> {
        let key = (self.collection.tree, id.to_vec());
        match &mut self.sink {
            Sink::Engine(_) => match &self.cx.holds.holder(&key) {
                Some(_) => Err(write_conflict()),
                None => Ok(()),
            },
            Sink::Transaction { txn } => txn.hold(key, &self.cx.engine),
        }
    }

    /// In a transaction, a duplicate `_id` or unique key fails the statement now (outside one,
    /// the engine checks at commit).
    fn check_unique_now(&self, id: &[u8], raw: &RawDocument, all_keys: &[Vec<EncodedKey>]) -> Result<()> {
        let Sink::Transaction { txn, .. } = &self.sink else { return Ok(()) };
        if txn.replicating {
            return Ok(());
        }
        let view = txn.read_at().0;
        let taken = |tree: &str, key: &[u8]| -> Result<bool> {
            let id_tree = if tree == self.collection.meta.tree { self.collection.tree } else { self.index_tree(tree) };
            Ok(view.get(id_tree, key)?.is_some())
        };
        if taken(&self.collection.meta.tree, id)? {
            return Err(duplicate_key(&self.collection, &self.collection.meta.tree, id, &[raw]));
        }
        for (index, keys) in self.collection.indexes.iter().zip(all_keys) {
            if !index.is_unique() {
                continue;
            }
            for key in keys {
                if taken(&index.meta.tree, &key.order)? {
                    return Err(duplicate_key(&self.collection, &index.meta.tree, &key.order, &[raw]));
                }
            }
        }
        Ok(())
    }

    fn index_tree(&self, name: &str) -> storage::TreeId {
        self.collection.indexes.iter().find(|i| i.meta.tree == name).map_or(self.collection.tree, |i| i.tree)
    }

    /// Logs this write's updates as replacements (the update was a replacement document).
    pub(crate) fn log_as_replacement(&mut self) {
        self.replacement = true;
    }

    fn log(&mut self, entry: impl FnOnce(&str) -> Result<Entry>) -> Result<()> {
        if let Some(entries) = &mut self.entries {
            entries.push(entry(&self.collection.namespace())?.with_collection_uuid(self.collection.meta.uuid));
        }
        Ok(())
    }

    /// Inserts a new document (the `_id` must be absent: checked at commit).
    pub(crate) fn insert(&mut self, id: &[u8], raw: &RawDocument) -> Result<()> {
        check_stored(raw, "object to insert")?;
        if let Some(timeseries) = &self.collection.timeseries {
            timeseries.check(raw)?;
        }
        if let Some(validator) = self.collection.validator.as_ref().filter(|_| self.validate) {
            validator.check_insert(raw, &self.collection.namespace())?;
        }
        let collection = Arc::clone(&self.collection);
        let mut all_keys = Vec::with_capacity(collection.indexes.len());
        for index in &collection.indexes {
            let (keys, multikey) = index.keys(raw)?;
            self.note_multikey(index, multikey);
            all_keys.push(keys);
        }
        self.claim(id)?;
        self.check_unique_now(id, raw, &all_keys)?;
        self.refuse_capped_in_transaction()?;
        self.sink.writes().insert_if_absent(self.collection.tree, id.to_vec(), raw.as_bytes().to_vec());
        if let Some(natural) = &self.collection.natural {
            natural.append(self.sink.writes(), id);
        }
        for (index, keys) in self.collection.indexes.iter().zip(all_keys) {
            let bytes: i64 = keys.iter().map(|k| index.entry_bytes(k, id, raw)).sum();
            add_index_bytes(&mut self.index_bytes, &index.meta.tree, bytes);
            index.add(self.sink.writes(), id, raw, keys);
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
    pub(crate) fn remove(&mut self, id: &[u8], raw: &RawDocument) -> Result<()> {
        self.claim(id)?;
        self.refuse_capped_in_transaction()?;
        self.sink.writes().delete(self.collection.tree, id.to_vec());
        if let Some(natural) = &self.collection.natural {
            natural.forget(self.sink.writes(), &self.cx.engine.snapshot(), id)?;
        }
        for index in &self.collection.indexes {
            let (keys, _) = index.keys(raw)?;
            let refs: Vec<&EncodedKey> = keys.iter().collect();
            index.remove(self.sink.writes(), id, &refs);
            let bytes: i64 = keys.iter().map(|k| index.entry_bytes(k, id, raw)).sum();
            add_index_bytes(&mut self.index_bytes, &index.meta.tree, -bytes);
        }
        self.count_delta -= 1;
        self.size_delta -= raw.as_bytes().len() as i64;
        if self.entries.is_some() {
            let id_value = document_id(raw)?.unwrap_or(Bson::Null);
            let keep = self.collection.keeps_images();
            self.log(|ns| Ok(pre_image(Entry::delete(ns, &id_value)?, keep, raw)))?;
        }
        Ok(())
    }

    /// Replaces a stored document (same `_id`), changing only the index entries that differ.
    pub(crate) fn replace(&mut self, id: &[u8], old: &RawDocument, new: &RawDocument) -> Result<()> {
        check_stored(new, "resulting document after update")?;
        if let Some(timeseries) = &self.collection.timeseries {
            timeseries.check(new)?;
        }
        if let Some(validator) = self.collection.validator.as_ref().filter(|_| self.validate) {
            validator.check_update(old, new, &self.collection.namespace())?;
        }
        self.refuse_capped_in_transaction()?;
        let collection = Arc::clone(&self.collection);
        let mut changes = Vec::with_capacity(collection.indexes.len());
        for index in &collection.indexes {
            let (old_keys, _) = index.keys(old)?;
            let (new_keys, multikey) = index.keys(new)?;
            self.note_multikey(index, multikey);
            changes.push((old_keys, new_keys));
        }
        self.claim(id)?;
        self.sink.writes().put(self.collection.tree, id.to_vec(), new.as_bytes().to_vec());
        for (index, (old_keys, new_keys)) in self.collection.indexes.iter().zip(&changes) {
            apply_key_diff(self.sink.writes(), index, id, new, old_keys, new_keys);
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

    fn log_update(&mut self, old_raw: &RawDocument, new: &RawDocument) -> Result<()> {
        let decode = |raw: &RawDocument| Document::try_from(raw).map_err(|e| Error::corrupt(format!("document: {e}")));
        let (old, new) = (decode(old_raw)?, decode(new)?);
        let keep = self.collection.keeps_images();
        let change = match self.replacement {
            true => None,
            false => diff::diff(&old, &new).map(|diff| bson::doc! {"$v": 2, "diff": diff}),
        };
        let id_value = new.get("_id").cloned().unwrap_or(Bson::Null);
        self.log(|ns| Ok(pre_image(Entry::update(ns, &id_value, change.as_ref().unwrap_or(&new))?, keep, old_raw)))
    }

    /// An index build's entries for one document (uniqueness already checked by the build,
    /// so entries are puts: the document may own them already).
    pub(crate) fn add_entries(
        &mut self,
        index: &Index,
        id: &[u8],
        raw: &RawDocument,
        keys: &[EncodedKey],
        multikey: bool,
    ) {
        self.note_multikey(index, multikey);
        let refs: Vec<&EncodedKey> = keys.iter().collect();
        index.overwrite(self.sink.writes(), id, raw, &refs);
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
    pub(crate) fn commit(mut self, durability: Durability, documents: &[&RawDocument]) -> Result<Arc<Descriptor>> {
        if self.collection.meta.db == crate::oplog::DB && self.collection.meta.name == crate::oplog::COLLECTION {
            return Err(Error::IllegalOperation("cannot write to 'local.oplog.rs' directly".into()));
        }
        let counts = self.cx.catalog.counts_tree();
        let mut updates = Vec::new();
        if self.count_delta != 0 {
            updates.push((self.collection.count_key.clone(), self.count_delta));
        }
        if self.size_delta != 0 {
            updates.push((self.collection.size_key.clone(), self.size_delta));
        }
        for (tree, delta) in &self.index_bytes {
            if *delta != 0 {
                updates.push((crate::catalog::size_key(tree), *delta));
            }
        }
        for (key, delta) in updates {
            match &mut self.sink {
                Sink::Transaction { txn, .. } => txn.add_to_counter(counts, key, delta),
                Sink::Engine(txn) => {
                    txn.update(counts, key, delta.to_le_bytes().to_vec());
                }
            }
        }
        let new_meta = self.multikey_meta();
        let entries = self.entries.take().unwrap_or_default();
        let txn = match self.sink {
            Sink::Engine(txn) => txn,
            Sink::Transaction { txn, .. } => {
                // The statement is done: its operations wait for the transaction's commit; an
                // index turned multikey is recorded at once (harmless if the transaction aborts).
                for mut entry in entries {
                    let index = txn.operations.len() as u32;
                    txn.images.extend(entry.take_images().into_iter().map(|(_, image)| (index, image)));
                    txn.operations.push(entry.into_operation());
                }
                return match new_meta {
                    Some(meta) => crate::catalog::ddl::replace_meta(self.cx, &self.collection, meta),
                    None => Ok(self.collection),
                };
            }
        };
        let mut txn = txn;
        if let Some(meta) = &new_meta {
            self.cx.catalog.put_meta(&mut txn, meta)?;
        }
        let db = self.collection.meta.db.clone();
        match self.cx.commit_logged(txn, &db, entries, under_lock(durability)) {
            Ok(_) => {}
            Err(storage::Error::KeyExists { tree, key }) => {
                return Err(duplicate_key(&self.collection, &tree, &key, documents));
            }
            Err(other) => return Err(other.into()),
        }
        match new_meta {
            Some(meta) => self.cx.catalog.install(&self.cx.engine, &self.collection, meta),
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

/// The entry with the document's version before the change, if its collection keeps them.
fn pre_image(entry: Entry, keep: bool, before: &RawDocument) -> Entry {
    if keep { entry.with_pre_image(before) } else { entry }
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
/// `Context::make_durable`), so concurrent `j:true` writers of one collection share log syncs
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
    txn: &mut dyn Writes,
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
fn duplicate_key(collection: &Descriptor, tree: &str, key: &[u8], documents: &[&RawDocument]) -> Error {
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
pub(crate) fn document_id(raw: &RawDocument) -> Result<Option<Bson>> {
    match raw.get("_id") {
        Ok(Some(value)) => Ok(Some(Bson::try_from(value).map_err(|e| Error::bad_value(format!("invalid BSON: {e}")))?)),
        Ok(None) => Ok(None),
        Err(e) => Err(Error::bad_value(format!("invalid BSON: {e}"))),
    }
}

/// MongoDB's rules for an `_id` value.
pub(crate) fn check_id(id: &Bson) -> Result<()> {
    match id {
        Bson::Array(_) => Err(Error::InvalidIdField("The '_id' value cannot be of type array".into())),
        Bson::RegularExpression(_) => Err(Error::InvalidIdField("can't use a regex for _id".into())),
        Bson::Undefined => Err(Error::InvalidIdField("can't use a undefined for _id".into())),
        Bson::Document(fields) => check_id_names(fields),
        _ => Ok(()),
    }
}

/// MongoDB 5+ stores `$`-prefixed names anywhere but in `_id` (at any depth), where they would
/// read as operators in every query by `_id`.
fn check_id_names(fields: &bson::Document) -> Result<()> {
    for (name, value) in fields {
        if name.starts_with('$') {
            return Err(Error::DollarPrefixedFieldName(format!(
                "_id fields may not contain '$'-prefixed fields: {name} is not valid for storage."
            )));
        }
        if let Bson::Document(inner) = value {
            check_id_names(inner)?;
        }
    }
    Ok(())
}

/// Adds to an index's size change; the tree name is copied once per write, not per document.
fn add_index_bytes(totals: &mut Vec<(String, i64)>, tree: &str, delta: i64) {
    match totals.iter_mut().find(|(name, _)| name == tree) {
        Some((_, total)) => *total += delta,
        None => totals.push((tree.to_string(), delta)),
    }
}

/// How long a write waits for a transaction holding its document: past the transactions'
/// lifetime limit (60 s), after which the holder has been aborted.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(65);

impl crate::context::Context {
    /// Outside a transaction, before writing document `id`: if an open transaction holds it,
    /// releases the collection's lock, waits for the holder to end, and takes the lock again
    /// (with the collection's newest descriptor). True if it waited: the caller reads the
    /// document's new version.
    pub(crate) fn await_unheld(&self, locked: &mut crate::catalog::Locked, id: &[u8]) -> Result<bool> {
        let holds = &self.holds;
        let key = (locked.collection.tree, id.to_vec());
        if holds.holder(&key).is_none() {
            return Ok(false);
        }
        parking_lot::ArcMutexGuard::unlocked(&mut locked._guard, || holds.wait_released(&key, HOLD_WAIT));
        let (db, name) = (&locked.collection.meta.db, &locked.collection.meta.name);
        locked.collection = self.catalog.existing(db, name)?;
        Ok(true)
    }

    /// A document's latest committed version.
    pub(crate) fn latest_document(&self, collection: &Descriptor, id: &[u8]) -> Result<Option<bson::RawDocumentBuf>> {
        match self.engine.snapshot().get(collection.tree, id)? {
            Some(bytes) => Ok(Some(crate::read::scan::raw(bytes)?)),
            None => Ok(None),
        }
    }

    /// After waiting for a transaction: the document's new version if it still matches.
    pub(crate) fn still_matching(
        &self,
        collection: &Descriptor,
        id: &[u8],
        filter: &query::filter::Filter,
    ) -> Result<Option<bson::RawDocumentBuf>> {
        match self.latest_document(collection, id)? {
            Some(current) if filter.matches_raw(&current)? => Ok(Some(current)),
            _ => Ok(None),
        }
    }
}
