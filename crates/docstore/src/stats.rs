//! collStats and dbStats figures, from maintained counters (never a scan).
//!
//! Each collection has blind counters in `__counts` for its document count and the bytes of
//! its documents, and each index one for the logical bytes of its entries (keys and values);
//! every write updates them in its own transaction. Sizes are logical, before compression: the
//! engine does not account disk space per tree, so `storageSize` reports the same logical bytes
//! (an upper bound of what the compressed blocks take).

use bson::{Document, doc};
use storage::Engine;

use crate::catalog::{Catalog, size_key, validate_db_name};
use crate::error::Result;

/// The maintained document counter: no scan.
pub fn estimated_document_count(engine: &Engine, catalog: &Catalog, db: &str, name: &str) -> Result<u64> {
    match catalog.collection(db, name) {
        Some(collection) => Ok(catalog.counters(engine, &collection)?.0.max(0) as u64),
        None => Ok(0),
    }
}

/// collStats' figures (without `ok`).
pub fn coll_stats(engine: &Engine, catalog: &Catalog, db: &str, name: &str, scale: u64) -> Result<Document> {
    let scale = scale.max(1) as i64;
    let collection = catalog.existing(db, name)?;
    let (count, size) = catalog.counters(engine, &collection)?;
    let mut index_sizes = Document::new();
    let mut total_index = 0i64;
    let id_bytes = count * 16;
    index_sizes.insert("_id_", id_bytes / scale);
    total_index += id_bytes;
    for index in &collection.indexes {
        let bytes = catalog.counter(engine, &size_key(&index.meta.tree))?.max(0);
        index_sizes.insert(index.name.clone(), bytes / scale);
        total_index += bytes;
    }
    Ok(doc! {
        "ns": collection.namespace(),
        "count": count,
        "size": size / scale,
        "avgObjSize": if count > 0 { size / count } else { 0 },
        "storageSize": size / scale,
        "nindexes": (1 + collection.indexes.len()) as i32,
        "totalIndexSize": total_index / scale,
        "totalSize": (size + total_index) / scale,
        "indexSizes": index_sizes,
        "scaleFactor": scale,
    })
}

/// dbStats' figures (without `ok`): the sums of its collections'.
pub fn db_stats(engine: &Engine, catalog: &Catalog, db: &str, scale: u64) -> Result<Document> {
    validate_db_name(db)?;
    let scale_i = scale.max(1) as i64;
    let (mut objects, mut data, mut indexes, mut index_bytes) = (0i64, 0i64, 0i64, 0i64);
    let collections = catalog.list_collections(db);
    for info in &collections {
        let stats = coll_stats(engine, catalog, db, &info.name, 1)?;
        objects += stats.get_i64("count").unwrap_or(0);
        data += stats.get_i64("size").unwrap_or(0);
        indexes += i64::from(stats.get_i32("nindexes").unwrap_or(0));
        index_bytes += stats.get_i64("totalIndexSize").unwrap_or(0);
    }
    Ok(doc! {
        "db": db,
        "collections": collections.len() as i64,
        "views": 0i64,
        "objects": objects,
        "avgObjSize": if objects > 0 { data as f64 / objects as f64 } else { 0.0 },
        "dataSize": data / scale_i,
        "storageSize": data / scale_i,
        "indexes": indexes,
        "indexSize": index_bytes / scale_i,
        "totalSize": (data + index_bytes) / scale_i,
        "scaleFactor": scale_i,
    })
}
