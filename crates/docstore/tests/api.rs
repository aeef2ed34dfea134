//! API tests: each public operation on small, hand-written cases with MongoDB's answers.

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use docstore::*;
use storage::Durability;

fn store() -> Store {
    Store::open_in_memory(StoreOptions { engine: small_engine(), ..StoreOptions::default() }).unwrap()
}

fn raw(document: Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&document).unwrap()
}

fn find(store: &Store, request: FindRequest) -> Vec<Document> {
    store.find("db", "c", &request).unwrap().map(|d| Document::try_from(d.unwrap().as_ref()).unwrap()).collect()
}

fn filter(filter: Document) -> FindRequest {
    FindRequest { filter, ..FindRequest::default() }
}

/// Goal: inserts create the collection, generate `_id`s first, keep the client's bytes, and
/// report duplicates by position with keyPattern/keyValue; ordered stops, unordered goes on.
#[test]
fn insert_generates_ids_and_reports_duplicates() {
    let store = store();
    let sent = rawdoc! {"a": 1, "b": "x"};
    let outcome = store.insert("db", "c", vec![sent.clone(), rawdoc! {"_id": 7, "a": 2}], true, Durability::None);
    assert_eq!((outcome.inserted, outcome.errors.len()), (2, 0));
    let all = find(&store, FindRequest::default());
    assert_eq!(all.len(), 2);
    let generated = all.iter().find(|d| d.get_i32("a").ok() == Some(1)).unwrap();
    assert!(matches!(generated.get("_id"), Some(Bson::ObjectId(_))));
    assert_eq!(generated.keys().next().map(String::as_str), Some("_id"));
    let stored = store.find("db", "c", &filter(doc! {"a": 1})).unwrap().next().unwrap().unwrap();
    assert!(stored.as_bytes().ends_with(&sent.as_bytes()[4..]), "the client's bytes follow the generated _id");

    let outcome = store.insert("db", "c", vec![raw(doc! {"_id": 8}), raw(doc! {"_id": 7}), raw(doc! {"_id": 9})], true, Durability::None);
    assert_eq!(outcome.inserted, 1);
    let (position, error) = &outcome.errors[0];
    assert_eq!(*position, 1);
    assert_eq!(error.code(), 11000);
    match error {
        Error::DuplicateKey { key_pattern, key_value, index, .. } => {
            assert_eq!((key_pattern, key_value, index.as_str()), (&doc! {"_id": 1}, &doc! {"_id": 7}, "_id_"));
        }
        other => panic!("{other:?}"),
    }
    let outcome = store.insert("db", "c", vec![raw(doc! {"_id": 7}), raw(doc! {"_id": 10}), raw(doc! {"_id": [1]})], false, Durability::None);
    assert_eq!(outcome.inserted, 1);
    assert_eq!(outcome.errors.iter().map(|(p, e)| (*p, e.code())).collect::<Vec<_>>(), vec![(0, 11000), (2, 53)]);
    assert_eq!(store.estimated_document_count("db", "c").unwrap(), 4);
    assert!(store.validate("db", "c").unwrap().is_valid());
}

/// Goal: catalog operations and name rules; everything survives a reopen.
#[test]
fn catalog_operations_survive_restart() {
    let dir = tempdir();
    {
        let store = Store::open(&dir, StoreOptions::default()).unwrap();
        store.create_collection("db", "a", doc! {"capped": false}).unwrap();
        assert_eq!(store.create_collection("db", "a", doc! {}).unwrap_err().code(), 48);
        assert_eq!(store.create_collection("db", "bad$name", doc! {}).unwrap_err().code(), 73);
        assert_eq!(store.create_collection("d.b", "x", doc! {}).unwrap_err().code(), 73);
        store.insert("db", "b", vec![rawdoc! {"_id": 1, "x": 1}], true, Durability::Immediate);
        store.create_indexes("db", "b", &[doc! {"key": {"x": 1}, "unique": true}]).unwrap();
        store.rename_collection(("db", "b"), ("other", "renamed"), false).unwrap();
        store.insert("gone", "g", vec![rawdoc! {"_id": 1}], true, Durability::Immediate);
        store.drop_database("gone").unwrap();
        assert!(!store.drop_collection("db", "nothing").unwrap());
        store.close().unwrap();
    }
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    let mut names: Vec<String> = store.list_databases().unwrap().into_iter().map(|d| d.name).collect();
    names.sort();
    assert_eq!(names, vec!["db", "other"]);
    assert_eq!(store.list_collections("db"), vec![CollectionInfo { name: "a".into(), options: doc! {"capped": false} }]);
    assert_eq!(store.list_indexes("other", "renamed").unwrap().len(), 2);
    let outcome = store.insert("other", "renamed", vec![rawdoc! {"_id": 2, "x": 1}], true, Durability::Immediate);
    assert_eq!(outcome.errors[0].1.code(), 11000);
    assert_eq!(store.estimated_document_count("other", "renamed").unwrap(), 1);
    assert!(store.validate("other", "renamed").unwrap().is_valid());
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

pub fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("docstore-test-{}-{}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Small nodes so that flushes and splits happen, but larger than a catalog entry (the engine
/// loops in `fix_root` when one value exceeds `Options::tiny()`'s 1 KiB nodes).
fn small_engine() -> storage::Options {
    storage::Options {
        node_size_bytes: 32 << 10,
        basement_size_bytes: 4 << 10,
        fanout: 8,
        flush_mode: storage::FlushMode::Inline,
        cache_size_bytes: 1 << 20,
        ..storage::Options::default()
    }
}
