//! Key formats: how a collection's trees encode their keys (`document::keycodec`), and the
//! rebuild that brings a collection written in an older format to the current one.
//!
//! - Format 1 (until 2026-11-27): numbers as their decimal expansions.
//! - Format 2: numbers as their binary values (a double's key shrank from up to 32 bytes to 12).
//!
//! Every tree of a collection is keyed by encoded values: its documents by `_id`, its indexes
//! by their fields then `_id`, a capped collection's order entries by `_id`. The server encodes
//! only the current format, so [`Catalog::upgrade_key_formats`] runs at open, before any read,
//! on each collection whose catalog entry names an older one (`keyFormat`, absent: 1):
//!
//! 1. its documents are copied, value bytes unchanged, into a new tree keyed by their `_id`s in
//!    the current encoding (and a capped collection's insertion order into a new order tree);
//! 2. one transaction points its catalog entry at the new trees, with new empty trees for its
//!    indexes marked unbuilt, moves its document count and size to the new tree's counters,
//!    and records the current format;
//! 3. the old trees are dropped, and the open's usual pass over unbuilt indexes builds each
//!    index from the documents.
//!
//! A crash in (1) leaves new trees that no entry names: the next open drops them as garbage
//! and starts the collection again. A crash after (2) leaves old trees that no entry names
//! (dropped the same way) and unbuilt indexes (built at the next open). No step rewrites a
//! tree in place, so no state mixes two encodings.

use std::sync::Arc;

use storage::{Durability, Engine, TreeId};

use super::{COLLECTION_TREE_PREFIX, CollectionMeta, INDEX_TREE_PREFIX, count_key, entry, size_key};
use crate::catalog::{Descriptor, tree_id};
use crate::context::Context;
use crate::error::{Error, Result};

pub(crate) use super::entry::KEY_FORMAT;

/// Documents copied per engine transaction.
const COPY_BATCH: usize = 1_000;

/// Rebuilds each collection whose trees use an older key format; returns their
/// namespaces. The oplog is keyed by time, not by encoded values, and is left as it is.
pub(crate) fn upgrade_key_formats(cx: &Context) -> Result<Vec<String>> {
    let mut upgraded = Vec::new();
    for collection in cx.catalog.collections() {
        let meta = &collection.meta;
        if meta.key_format >= KEY_FORMAT
            || (meta.db.as_str(), meta.name.as_str()) == (crate::oplog::DB, crate::oplog::COLLECTION)
        {
            continue;
        }
        rekey(cx, &collection)?;
        upgraded.push(collection.namespace());
    }
    Ok(upgraded)
}

fn rekey(cx: &Context, collection: &Arc<Descriptor>) -> Result<()> {
    let old = &collection.meta;
    let tree = super::ddl::new_tree(cx, COLLECTION_TREE_PREFIX)?;
    let documents = tree_id(&cx.engine, &tree)?;
    // As `Descriptor::open` will: blocks the copy writes out are compressed as they will be.
    let compression = crate::compression::requested(&old.options).unwrap_or(None).or(cx.catalog.document_compression);
    cx.engine.set_tree_compression(documents, compression)?;
    copy_documents(&cx.engine, collection.tree, documents)?;
    let natural = match &collection.natural {
        Some(order) => {
            let name = super::ddl::new_tree(cx, entry::NATURAL_TREE_PREFIX)?;
            order.copy_rekeyed(&cx.engine, collection.tree, tree_id(&cx.engine, &name)?, new_id_key)?;
            Some(name)
        }
        None => None,
    };
    let mut indexes = old.indexes.clone();
    for index in &mut indexes {
        index.tree = super::ddl::new_tree(cx, INDEX_TREE_PREFIX)?;
        index.ready = false;
        index.multikey = false;
    }
    let meta = CollectionMeta { tree, natural, indexes, key_format: KEY_FORMAT, ..old.clone() };
    let (count, size) = cx.catalog.counters(&cx.engine, collection)?;
    let mut txn = cx.engine.begin();
    cx.catalog.put_meta(&mut txn, &meta)?;
    txn.update(cx.catalog.counts_tree, count_key(&meta.tree), count.to_le_bytes().to_vec());
    txn.update(cx.catalog.counts_tree, size_key(&meta.tree), size.to_le_bytes().to_vec());
    for old_tree in old.trees() {
        txn.delete(cx.catalog.counts_tree, count_key(old_tree));
        txn.delete(cx.catalog.counts_tree, size_key(old_tree));
    }
    txn.commit(Durability::Immediate)?;
    cx.catalog.install(&cx.engine, collection, meta)?;
    for old_tree in old.trees() {
        cx.engine.drop_tree(old_tree)?;
    }
    Ok(())
}

/// Copies every document of `from` into `to`, keyed by its `_id` in the current encoding.
fn copy_documents(engine: &Engine, from: TreeId, to: TreeId) -> Result<()> {
    let snapshot = engine.snapshot();
    let mut txn = engine.begin();
    let mut pending = 0;
    for entry in snapshot.iter(from) {
        let (_, value) = entry?;
        txn.put(to, new_id_key(&value)?, value);
        pending += 1;
        if pending == COPY_BATCH {
            std::mem::replace(&mut txn, engine.begin()).commit(Durability::None)?;
            pending = 0;
        }
    }
    txn.commit(Durability::None)?;
    Ok(())
}

/// A stored document's key in the current encoding.
pub(crate) fn new_id_key(stored: &[u8]) -> Result<Vec<u8>> {
    let document =
        bson::RawDocument::from_bytes(stored).map_err(|e| Error::corrupt(format!("stored document: {e}")))?;
    let id = crate::write::document_id(document)?.ok_or_else(|| Error::corrupt("a stored document has no _id"))?;
    Ok(crate::index::id_key(&id))
}
