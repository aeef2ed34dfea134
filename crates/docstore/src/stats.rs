//! collStats and dbStats figures, from maintained counters (never a scan).
//!
//! Each collection has blind counters in `__counts` for its document count and the bytes of
//! its documents, and each index one for the logical bytes of its entries (keys and values);
//! every write updates them in its own transaction. Compressed sizes come from the engine: the
//! blocks of each tree's nodes (`Engine::tree_block_space`, which reads no leaf).

use bson::{Document, doc};
use storage::Engine;

use crate::catalog::{size_key, validate_db_name};
use crate::context::Context;
use crate::error::Result;

/// The maintained document counter: no scan.
pub(crate) fn estimated_document_count(cx: &Context, db: &str, name: &str) -> Result<u64> {
    match cx.catalog.collection(db, name) {
        Some(collection) => Ok(cx.catalog.counters(&cx.engine, &collection)?.0.max(0) as u64),
        None => Ok(0),
    }
}

/// collStats' figures (without `ok`). `size` is the documents' logical bytes (as BSON);
/// `storageSize` and `indexSizes` are what the collection's tree and each index's tree take in
/// the data file, compressed, in whole pages (as of each node's last write). Strata keeps the
/// documents in `_id` order in the collection's own tree, so the `_id_` index takes no space of
/// its own. The `strata` section has the logical index sizes and each tree's compression, so a
/// user can see what compression gives.
pub(crate) fn coll_stats(cx: &Context, db: &str, name: &str, scale: u64) -> Result<Document> {
    let scale = scale.max(1) as i64;
    let collection = cx.catalog.existing(db, name)?;
    let (count, size) = cx.catalog.counters(&cx.engine, &collection)?;
    let storage = space(&cx.engine, collection.tree)?;
    let mut index_sizes = doc! { "_id_": 0i64 };
    let mut logical_index_sizes = doc! { "_id_": 0i64 };
    let documents = requested(&collection.meta.options).or(cx.catalog.document_compression());
    let mut compression = doc! { "collection": compression_name(&cx.engine, documents) };
    let mut index_compression = Document::new();
    let mut total_index = 0i64;
    for index in &collection.indexes {
        let bytes = space(&cx.engine, index.tree)?;
        index_sizes.insert(index.name.clone(), bytes / scale);
        total_index += bytes;
        let logical = cx.catalog.counter(&cx.engine, &size_key(&index.meta.tree))?.max(0);
        logical_index_sizes.insert(index.name.clone(), logical / scale);
        index_compression.insert(index.name.clone(), compression_name(&cx.engine, requested(&index.meta.spec)));
    }
    compression.insert("indexes", index_compression);
    let mut stats = doc! {
        "ns": collection.namespace(),
        "count": count,
        "size": size / scale,
        "avgObjSize": if count > 0 { size / count } else { 0 },
        "storageSize": storage / scale,
        "nindexes": (1 + collection.indexes.len()) as i32,
        "totalIndexSize": total_index / scale,
        "totalSize": (storage + total_index) / scale,
        "indexSizes": index_sizes,
        "scaleFactor": scale,
        "strata": {
            "compression": compression,
            "logicalIndexSizes": logical_index_sizes,
            "idIndex": "the collection's own tree: documents are kept in _id order",
        },
        "capped": collection.capped.is_some(),
    };
    if let Some(capped) = collection.capped {
        stats.insert("maxSize", (capped.size / scale as u64) as i64);
        if let Some(max) = capped.max {
            stats.insert("max", max as i64);
        }
    }
    if let Some(oplog) = cx.oplog().filter(|oplog| oplog.collection().tree == collection.tree) {
        // The oplog is capped by size (its own trimming, not a capped collection's).
        stats.insert("capped", true);
        stats.insert("maxSize", (oplog.cap_bytes() / scale as u64) as i64);
    }
    Ok(stats)
}

/// dbStats' figures (without `ok`): the sums of its collections' (logical `dataSize`,
/// compressed `storageSize` and `indexSize`), and the data file every database shares.
pub(crate) fn db_stats(cx: &Context, db: &str, scale: u64) -> Result<Document> {
    validate_db_name(db)?;
    let scale_i = scale.max(1) as i64;
    let (mut objects, mut data, mut storage, mut indexes, mut index_bytes) = (0i64, 0i64, 0i64, 0i64, 0i64);
    let (views, collections): (Vec<_>, Vec<_>) =
        cx.catalog.list_collections(db).into_iter().partition(|info| info.view);
    for info in &collections {
        let stats = coll_stats(cx, db, &info.name, 1)?;
        objects += stats.get_i64("count").unwrap_or(0);
        data += stats.get_i64("size").unwrap_or(0);
        storage += stats.get_i64("storageSize").unwrap_or(0);
        indexes += i64::from(stats.get_i32("nindexes").unwrap_or(0));
        index_bytes += stats.get_i64("totalIndexSize").unwrap_or(0);
    }
    let file = cx.engine.stats();
    let bytes = |n: u64| i64::try_from(n).unwrap_or(i64::MAX) / scale_i;
    Ok(doc! {
        "db": db,
        "collections": collections.len() as i64,
        "views": views.len() as i64,
        "objects": objects,
        "avgObjSize": if objects > 0 { data as f64 / objects as f64 } else { 0.0 },
        "dataSize": data / scale_i,
        "storageSize": storage / scale_i,
        "indexes": indexes,
        "indexSize": index_bytes / scale_i,
        "totalSize": (storage + index_bytes) / scale_i,
        "scaleFactor": scale_i,
        "strata": {
            "dataFileBytes": bytes(file.data_file_bytes),
            "freeBytes": bytes(file.free_bytes),
            "logDiskBytes": bytes(file.log_disk_bytes),
            "sharedByAllDatabases": true,
        },
    })
}

/// What a tree takes in the data file, as collStats reports it.
fn space(engine: &Engine, tree: storage::TreeId) -> Result<i64> {
    Ok(i64::try_from(engine.tree_block_space(tree)?).unwrap_or(i64::MAX))
}

/// What a collection's options or an index spec ask for (validated when they were created).
fn requested(options: &Document) -> Option<storage::Compression> {
    crate::compression::requested(options).ok().flatten()
}

/// A tree's compression as collStats names it: the one chosen, or the server's default.
fn compression_name(engine: &Engine, chosen: Option<storage::Compression>) -> String {
    match chosen {
        Some(chosen) => chosen.to_string(),
        None => format!("{} (the server's default)", engine.options().compression),
    }
}
