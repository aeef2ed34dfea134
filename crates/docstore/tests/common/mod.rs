//! Helpers of the API tests (`api.rs`, `queries.rs`): a small in-memory store and `db.c`'s
//! reads.

use bson::{Document, RawDocumentBuf};
use docstore::*;

pub fn store() -> Store {
    Store::open_in_memory(StoreOptions { engine: small_engine(), ..StoreOptions::default() }).unwrap()
}

pub fn raw(document: Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&document).unwrap()
}

pub fn find(store: &Store, request: FindRequest) -> Vec<Document> {
    store
        .collection(("db", "c"))
        .find(&request)
        .unwrap()
        .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
        .collect()
}

pub fn filter(filter: Document) -> FindRequest {
    FindRequest { filter, ..FindRequest::default() }
}

pub fn filter_delete(filter: Document) -> DeleteRequest {
    DeleteRequest { filter, just_one: true, ..DeleteRequest::default() }
}

pub fn ids(documents: &[Document]) -> Vec<i32> {
    documents.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

pub fn aggregate(store: &Store, pipeline: &[Document], allow_disk_use: bool) -> Result<Vec<Document>> {
    let options = AggregateOptions { allow_disk_use, ..AggregateOptions::default() };
    let cursor = store.collection(("db", "c")).aggregate(pipeline, &options)?;
    cursor.map(|d| d.map(|raw| Document::try_from(raw.as_ref()).unwrap())).collect()
}

/// Small nodes so that flushes and splits happen, but larger than a catalog entry (the engine
/// loops in `fix_root` when one value exceeds `Options::tiny()`'s 1 KiB nodes).
pub fn small_engine() -> storage::Options {
    storage::Options {
        node_size_bytes: 32 << 10,
        basement_size_bytes: 4 << 10,
        fanout: 8,
        flush_mode: storage::FlushMode::Inline,
        cache_size_bytes: 1 << 20,
        ..storage::Options::default()
    }
}

/// A new directory under the system's temporary directory.
pub fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("docstore-test-{}-{}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
