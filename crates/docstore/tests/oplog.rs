//! The oplog: every change appends MongoDB-shaped entries in commit order, in the same engine
//! transaction as the change; the oplog stays within its cap; users cannot write to it.

use bson::{Bson, Document, Timestamp, doc, rawdoc};
use docstore::*;
use storage::Durability;

fn store() -> Store {
    let store = Store::open_in_memory(StoreOptions::default()).unwrap();
    store.enable_oplog(64 << 20).unwrap();
    store
}

fn entries(store: &Store) -> Vec<Document> {
    store
        .oplog_after(Timestamp { time: 0, increment: 0 }, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(_, raw)| Document::try_from(raw.as_ref()).unwrap())
        .collect()
}

fn summary(entry: &Document) -> (String, String, Document) {
    (entry.get_str("op").unwrap().into(), entry.get_str("ns").unwrap().into(), entry.get_document("o").unwrap().clone())
}

/// Goal: each kind of change has its entry, in order, with MongoDB's fields. Method: one of
/// each change, then read the whole oplog.
#[test]
fn every_change_is_logged_in_order() {
    let store = store();
    store.collection(("db", "c")).create(doc! {}).unwrap();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1, "a": 1, "b": [1, 2]}], true, Durability::None);
    let set = UpdateRequest {
        filter: doc! {"_id": 1},
        update: UpdateModification::Document(doc! {"$set": {"a": 2}, "$pop": {"b": 1}}),
        multi: false,
        upsert: false,
        array_filters: Vec::new(),
        hint: None,
        variables: Default::default(),
        collation: None,
    };
    store.collection(("db", "c")).update(&set, Durability::None).unwrap();
    let replace = UpdateRequest { update: UpdateModification::Document(doc! {"z": 1}), ..set.clone() };
    store.collection(("db", "c")).update(&replace, Durability::None).unwrap();
    store.collection(("db", "c")).create_indexes(&[doc! {"key": {"z": 1}, "name": "z_1"}]).unwrap();
    store
        .collection(("db", "c"))
        .delete(&DeleteRequest { filter: doc! {"_id": 1}, ..DeleteRequest::default() }, Durability::None)
        .unwrap();
    store.collection(("db", "c")).drop_indexes(&IndexSelector::Names(vec!["z_1".into()])).unwrap();
    store.collection(("db", "c")).rename(("db", "d"), false).unwrap();
    store.collection(("db", "d")).drop().unwrap();

    let log = entries(&store);
    let got: Vec<(String, String, Document)> = log.iter().map(summary).collect();
    let expected = vec![
        ("c".into(), "db.$cmd".into(), doc! {"create": "c"}),
        ("i".into(), "db.c".into(), doc! {"_id": 1, "a": 1, "b": [1, 2]}),
        ("u".into(), "db.c".into(), doc! {"$v": 2, "diff": {"u": {"a": 2}, "sb": {"a": true, "l": 1_i64}}}),
        ("u".into(), "db.c".into(), doc! {"_id": 1, "z": 1}),
        ("c".into(), "db.$cmd".into(), doc! {"createIndexes": "c", "v": 2, "key": {"z": 1}, "name": "z_1"}),
        ("d".into(), "db.c".into(), doc! {"_id": 1}),
        ("c".into(), "db.$cmd".into(), doc! {"dropIndexes": "c", "index": "z_1"}),
        (
            "c".into(),
            "db.$cmd".into(),
            doc! {"renameCollection": "db.c", "to": "db.d", "stayTemp": false, "dropTarget": false},
        ),
        ("c".into(), "db.$cmd".into(), doc! {"drop": "d"}),
    ];
    assert_eq!(got, expected);
    let stamps: Vec<Timestamp> = log.iter().map(|e| e.get_timestamp("ts").unwrap()).collect();
    assert!(stamps.windows(2).all(|w| (w[0].time, w[0].increment) < (w[1].time, w[1].increment)), "{stamps:?}");
    assert_eq!(log[1].get_document("o2").unwrap(), &doc! {"_id": 1});
    assert!(matches!(log[1].get("wall"), Some(Bson::DateTime(_))));
    assert_eq!(log[1].get_i64("t").unwrap(), 1);
    assert_eq!(store.oplog().unwrap().last(), *stamps.last().unwrap());
    let uuid = log[0].get("ui").cloned();
    assert!(matches!(uuid, Some(Bson::Binary(_))), "the create names the new collection's UUID");
    for entry in &log {
        assert_eq!(entry.get("ui"), uuid.as_ref(), "every entry names the one collection, renamed or not: {entry}");
    }
}

/// Goal: a rename that replaces a collection names the one it dropped by its UUID
/// (`dropTarget`), as mongod's entry does; one that replaces none says `false`.
#[test]
fn a_rename_names_the_collection_it_replaced() {
    let store = store();
    store.collection(("db", "a")).create(doc! {}).unwrap();
    store.collection(("db", "b")).create(doc! {}).unwrap();
    let target = store.list_collections("db").into_iter().find(|info| info.name == "b").and_then(|info| info.uuid);
    store.collection(("db", "a")).rename(("db", "b"), true).unwrap();
    let renames: Vec<Document> = entries(&store)
        .iter()
        .filter_map(|entry| entry.get_document("o").ok().cloned())
        .filter(|o| o.contains_key("renameCollection"))
        .collect();
    assert_eq!(renames.len(), 1);
    assert_eq!(renames[0].get("dropTarget"), target.map(|uuid| Bson::Binary(bson::Binary::from_uuid(uuid))).as_ref());
    store.collection(("db", "b")).rename(("db", "c"), true).unwrap();
    let last = entries(&store).pop().and_then(|entry| entry.get_document("o").ok().cloned()).unwrap();
    assert_eq!(last.get("dropTarget"), Some(&Bson::Boolean(false)));
}

/// Goal: the oplog keeps within its cap, dropping its oldest entries first, and its counters
/// agree with what it holds. Method: a tiny cap, many inserts.
#[test]
fn the_oplog_is_capped_from_its_oldest_end() {
    let store = Store::open_in_memory(StoreOptions::default()).unwrap();
    store.enable_oplog(20_000).unwrap();
    for i in 0..2_000 {
        store.collection(("db", "c")).insert(vec![rawdoc! {"_id": i, "pad": "x".repeat(50)}], true, Durability::None);
    }
    let log = entries(&store);
    let bytes: usize = log.iter().map(|e| bson::RawDocumentBuf::try_from(e).unwrap().as_bytes().len()).sum();
    assert!(bytes <= 20_000, "{bytes} bytes kept");
    assert!(log.len() > 50);
    let last = log.last().unwrap().get_document("o").unwrap().get_i32("_id").unwrap();
    assert_eq!(last, 1_999, "the newest entry is kept");
    let ids: Vec<i32> = log.iter().map(|e| e.get_document("o").unwrap().get_i32("_id").unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "a contiguous suffix: {ids:?}");
    let (count, held) = store.oplog().unwrap().size();
    assert_eq!((count as usize, held as usize), (log.len(), bytes));
    assert_eq!(store.collection(("local", "oplog.rs")).estimated_document_count().unwrap() as usize, log.len());
    // Trimming and `first` start after the newest entry trimming deleted: they agree with a
    // read of the whole oplog.
    let first = log.first().unwrap().get_timestamp("ts").unwrap();
    assert_eq!(store.oplog_first().unwrap(), Some(first));
}

/// Users read the oplog with find but may not write to it; `local` changes are not logged.
#[test]
fn the_oplog_is_read_only_for_users() {
    let store = store();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1}], true, Durability::None);
    let outcome = store.collection(("local", "oplog.rs")).insert(vec![rawdoc! {"op": "i"}], true, Durability::None);
    assert_eq!(outcome.errors.len(), 1);
    store.collection(("local", "scratch")).insert(vec![rawdoc! {"_id": 1}], true, Durability::None);
    let found: Vec<_> = store.collection(("local", "oplog.rs")).find(&FindRequest::default()).unwrap().collect();
    assert_eq!(found.len(), 2, "the implicit create and the insert; local's own writes are not logged");
}

/// Without `enable_oplog` nothing is logged.
#[test]
fn a_standalone_store_keeps_no_oplog() {
    let store = Store::open_in_memory(StoreOptions::default()).unwrap();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1}], true, Durability::None);
    assert!(store.oplog().is_none());
    assert!(store.list_collections("local").is_empty());
}
