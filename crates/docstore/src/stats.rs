//! collStats and dbStats figures, from maintained counters (never a scan).
//!
//! Each collection has blind counters in `__counts` for its document count and the bytes of
//! its documents, and each index one for the logical bytes of its entries (keys and values);
//! every write updates them in its own transaction. Sizes are logical, before compression: the
//! engine does not account disk space per tree, so `storageSize` reports the same logical bytes
//! (an upper bound of what the compressed blocks take).

use bson::{Document, doc};

use crate::catalog::size_key;
use crate::error::{Error, Result};
use crate::store::Inner;

impl Inner {
    fn counter(&self, key: &[u8]) -> Result<i64> {
        match self.engine.snapshot().get(self.catalog.counts_tree(), key)? {
            Some(bytes) => Ok(i64::from_le_bytes(
                bytes.as_slice().try_into().map_err(|_| Error::corrupt("counter is not 8 bytes"))?,
            )),
            None => Ok(0),
        }
    }

    pub fn estimated_document_count(&self, db: &str, name: &str) -> Result<u64> {
        match self.catalog.collection(db, name) {
            Some(collection) => Ok(self.catalog.counters(&self.engine, &collection)?.0.max(0) as u64),
            None => Ok(0),
        }
    }

    pub fn coll_stats(&self, db: &str, name: &str, scale: u64) -> Result<Document> {
        let scale = scale.max(1) as i64;
        let collection = self.catalog.existing(db, name)?;
        let (count, size) = self.catalog.counters(&self.engine, &collection)?;
        let mut index_sizes = Document::new();
        let mut total_index = 0i64;
        let id_bytes = count * 16;
        index_sizes.insert("_id_", id_bytes / scale);
        total_index += id_bytes;
        for index in &collection.indexes {
            let bytes = self.counter(&size_key(&index.meta.tree))?.max(0);
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

    pub fn db_stats(&self, db: &str, scale: u64) -> Result<Document> {
        crate::catalog::validate_db_name(db)?;
        let scale_i = scale.max(1) as i64;
        let (mut objects, mut data, mut indexes, mut index_bytes) = (0i64, 0i64, 0i64, 0i64);
        let collections = self.catalog.list_collections(db);
        for info in &collections {
            let stats = self.coll_stats(db, &info.name, 1)?;
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
}
