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
    store
        .collection(("db", "c"))
        .find(&request)
        .unwrap()
        .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
        .collect()
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
    let outcome =
        store.collection(("db", "c")).insert(vec![sent.clone(), rawdoc! {"_id": 7, "a": 2}], true, Durability::None);
    assert_eq!((outcome.inserted, outcome.errors.len()), (2, 0));
    let all = find(&store, FindRequest::default());
    assert_eq!(all.len(), 2);
    let generated = all.iter().find(|d| d.get_i32("a").ok() == Some(1)).unwrap();
    assert!(matches!(generated.get("_id"), Some(Bson::ObjectId(_))));
    assert_eq!(generated.keys().next().map(String::as_str), Some("_id"));
    let stored = store.collection(("db", "c")).find(&filter(doc! {"a": 1})).unwrap().next().unwrap().unwrap();
    assert!(stored.as_bytes().ends_with(&sent.as_bytes()[4..]), "the client's bytes follow the generated _id");

    let outcome = store.collection(("db", "c")).insert(
        vec![raw(doc! {"_id": 8}), raw(doc! {"_id": 7}), raw(doc! {"_id": 9})],
        true,
        Durability::None,
    );
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
    let outcome = store.collection(("db", "c")).insert(
        vec![raw(doc! {"_id": 7}), raw(doc! {"_id": 10}), raw(doc! {"_id": [1]})],
        false,
        Durability::None,
    );
    assert_eq!(outcome.inserted, 1);
    assert_eq!(outcome.errors.iter().map(|(p, e)| (*p, e.code())).collect::<Vec<_>>(), vec![(0, 11000), (2, 53)]);
    assert_eq!(store.collection(("db", "c")).estimated_document_count().unwrap(), 4);
    assert!(store.collection(("db", "c")).validate().unwrap().is_valid());
}

/// Goal: views read through their chain of pipelines, refuse writes, and their definitions
/// survive a reopen; a view's definitions are checked (cycles, depth, writing stages).
#[test]
fn views_read_through_their_definitions_and_survive_restart() {
    let dir = tempdir();
    let ids = |store: &Store, name: &str, request: FindRequest| -> Vec<Bson> {
        let cursor = store.collection(("db", name)).find(&request).unwrap();
        cursor.map(|d| Document::try_from(d.unwrap().as_ref()).unwrap().get("_id").cloned().unwrap()).collect()
    };
    {
        let store = Store::open(&dir, StoreOptions::default()).unwrap();
        let documents = (1..=6).map(|i| raw(doc! {"_id": i, "k": i % 2})).collect();
        store.collection(("db", "base")).insert(documents, true, Durability::Immediate);
        store.collection(("db", "odd")).create(doc! {"viewOn": "base", "pipeline": [{"$match": {"k": 1}}]}).unwrap();
        store
            .collection(("db", "big_odd"))
            .create(doc! {"viewOn": "odd", "pipeline": [{"$match": {"_id": {"$gt": 1}}}]})
            .unwrap();
        assert_eq!(ids(&store, "big_odd", FindRequest::default()), vec![Bson::Int32(3), Bson::Int32(5)]);
        let refused = store.collection(("db", "odd")).update(
            &UpdateRequest {
                filter: doc! {},
                update: UpdateModification::Document(doc! {"$set": {"x": 1}}),
                multi: true,
                upsert: false,
                array_filters: Vec::new(),
                hint: None,
                variables: Default::default(),
                collation: None,
            },
            Durability::None,
        );
        assert_eq!(refused.unwrap_err().code(), 166);
        assert_eq!(
            store.collection(("db", "odd")).insert(vec![rawdoc! {"a": 1}], true, Durability::None).errors[0].1.code(),
            166
        );
        let cycle = store.collection(("db", "odd2")).create(doc! {"viewOn": "odd2"});
        assert_eq!(cycle.unwrap_err().code(), 5);
        for depth in 0..18 {
            let on = if depth == 0 { "big_odd".to_string() } else { format!("deep{}", depth - 1) };
            store.collection(("db", &format!("deep{depth}"))).create(doc! {"viewOn": on}).unwrap();
        }
        let too_deep = store.collection(("db", "deep18")).create(doc! {"viewOn": "deep17"});
        assert_eq!(too_deep.unwrap_err().code(), 165);
        store.close().unwrap();
    }
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    let request = FindRequest { sort: Some(doc! {"_id": -1}), limit: Some(1), ..FindRequest::default() };
    assert_eq!(ids(&store, "deep17", request), vec![Bson::Int32(5)]);
    assert_eq!(store.collection(("db", "odd")).count(&FindRequest::default()).unwrap(), 3);
    let views: Vec<String> = store.list_collections("db").into_iter().filter(|c| c.view).map(|c| c.name).collect();
    assert_eq!(views.len(), 20);
    assert!(store.collection(("db", "odd")).drop().unwrap());
    assert!(ids(&store, "big_odd", FindRequest::default()).is_empty(), "a view over a missing source is empty");
}

/// Goal: a capped collection reads in insertion order, keeps within `max` and `size` by
/// dropping its oldest documents, counts on after a reopen, refuses writes in transactions,
/// and its natural-order tree goes with a drop; `verify` holds throughout.
#[test]
fn capped_collections_keep_insertion_order_and_their_limits() {
    let dir = tempdir();
    let ids = |store: &Store| -> Vec<Bson> {
        let cursor = store.collection(("db", "cap")).find(&FindRequest::default()).unwrap();
        cursor.map(|d| Document::try_from(d.unwrap().as_ref()).unwrap().get("_id").cloned().unwrap()).collect()
    };
    {
        let store = Store::open(&dir, StoreOptions::default()).unwrap();
        store.collection(("db", "cap")).create(doc! {"capped": true, "size": 1 << 20, "max": 4}).unwrap();
        for id in [50, 10, 40, 20, 30, 60] {
            store.collection(("db", "cap")).insert(vec![raw(doc! {"_id": id})], true, Durability::Immediate);
        }
        assert_eq!(ids(&store), [40, 20, 30, 60].map(Bson::Int32).to_vec());
        assert_eq!(
            store.collection(("db", "cap")).delete(&filter_delete(doc! {"_id": 30}), Durability::None).unwrap(),
            1
        );
        let mut txn = store.begin_transaction();
        let options = WriteOptions {
            durability: Durability::None,
            retry: None,
            transaction: Some(&mut txn),
            bypass_validation: false,
        };
        let refused = store.collection(("db", "cap")).insert(vec![raw(doc! {"_id": 99})], true, options);
        assert_eq!(refused.errors[0].1.code(), 263);
        store.verify_engine().unwrap();
        store.close().unwrap();
    }
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    store.collection(("db", "cap")).insert(
        vec![raw(doc! {"_id": 1}), raw(doc! {"_id": 2})],
        true,
        Durability::Immediate,
    );
    assert_eq!(ids(&store), [20, 60, 1, 2].map(Bson::Int32).to_vec(), "numbering goes on after a reopen");
    let backward = FindRequest { sort: Some(doc! {"$natural": -1}), ..FindRequest::default() };
    let cursor = store.collection(("db", "cap")).find(&backward).unwrap();
    let reversed: Vec<Bson> =
        cursor.map(|d| Document::try_from(d.unwrap().as_ref()).unwrap().get("_id").cloned().unwrap()).collect();
    assert_eq!(reversed, [2, 1, 60, 20].map(Bson::Int32).to_vec());
    assert!(store.collection(("db", "cap")).drop().unwrap());
    store.verify_engine().unwrap();
    drop(store);
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    assert!(store.list_collections("db").is_empty());
}

fn filter_delete(filter: Document) -> DeleteRequest {
    DeleteRequest { filter, just_one: true, ..DeleteRequest::default() }
}

/// Goal: catalog operations and name rules; everything survives a reopen.
#[test]
fn catalog_operations_survive_restart() {
    let dir = tempdir();
    let uuids;
    {
        let store = Store::open(&dir, StoreOptions::default()).unwrap();
        store.collection(("db", "a")).create(doc! {"capped": false}).unwrap();
        assert_eq!(store.collection(("db", "a")).create(doc! {}).unwrap_err().code(), 48);
        assert_eq!(store.collection(("db", "bad$name")).create(doc! {}).unwrap_err().code(), 73);
        assert_eq!(store.collection(("d.b", "x")).create(doc! {}).unwrap_err().code(), 73);
        store.collection(("db", "b")).insert(vec![rawdoc! {"_id": 1, "x": 1}], true, Durability::Immediate);
        store.collection(("db", "b")).create_indexes(&[doc! {"key": {"x": 1}, "unique": true}]).unwrap();
        let uuid_of = |db: &str, name: &str| {
            let infos = store.list_collections(db);
            infos.iter().find(|info| info.name == name).and_then(|info| info.uuid).expect("a collection has a UUID")
        };
        let b = uuid_of("db", "b");
        assert_ne!(uuid_of("db", "a"), b, "each collection its own UUID");
        store.collection(("db", "b")).rename(("db", "b2"), false).unwrap();
        assert_eq!(uuid_of("db", "b2"), b, "a rename within a database keeps the UUID");
        store.collection(("db", "b2")).rename(("other", "renamed"), false).unwrap();
        assert_ne!(uuid_of("other", "renamed"), b, "a collection moved to another database is new there");
        uuids = (Some(uuid_of("db", "a")), Some(uuid_of("other", "renamed")));
        store.collection(("gone", "g")).insert(vec![rawdoc! {"_id": 1}], true, Durability::Immediate);
        store.drop_database("gone").unwrap();
        assert!(!store.collection(("db", "nothing")).drop().unwrap());
        store.close().unwrap();
    }
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    let mut names: Vec<String> = store.list_databases().unwrap().into_iter().map(|d| d.name).collect();
    names.sort();
    assert_eq!(names, vec!["db", "other"]);
    assert_eq!(
        store.list_collections("db"),
        vec![CollectionInfo { name: "a".into(), options: doc! {"capped": false}, view: false, uuid: uuids.0 }]
    );
    assert_eq!(store.list_collections("other")[0].uuid, uuids.1, "a collection keeps its UUID over a restart");
    assert_eq!(store.collection(("other", "renamed")).list_indexes().unwrap().len(), 2);
    let outcome =
        store.collection(("other", "renamed")).insert(vec![rawdoc! {"_id": 2, "x": 1}], true, Durability::Immediate);
    assert_eq!(outcome.errors[0].1.code(), 11000);
    assert_eq!(store.collection(("other", "renamed")).estimated_document_count().unwrap(), 1);
    assert!(store.collection(("other", "renamed")).validate().unwrap().is_valid());
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Goal: one store at a time has a directory open; a second `Store::open` (here in the same
/// process) is refused with `Error::DirectoryLocked` (MongoDB's DBPathInUse) and changes nothing.
#[test]
fn a_directory_is_open_in_one_store_at_a_time() {
    let dir = tempdir();
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1}], true, Durability::Immediate);
    let error = Store::open(&dir, StoreOptions::default()).err().expect("a second store opened a locked directory");
    assert!(matches!(error, Error::DirectoryLocked(_)), "{error:?}");
    assert_eq!((error.code(), error.code_name()), (98, "DBPathInUse"));
    assert!(error.to_string().contains(&dir.display().to_string()), "{error}");
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 2}], true, Durability::Immediate);
    store.close().unwrap();
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    assert_eq!(store.collection(("db", "c")).estimated_document_count().unwrap(), 2);
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Goal: the rules on stored documents (16 MiB, 100 levels) hold for every kind of write, not
/// only inserts: an update, an upsert and an insert past either limit are refused with
/// MongoDB's codes, and nothing of them is stored.
#[test]
fn stored_document_rules_hold_for_every_write() {
    let store = store();
    let nested = |levels: usize| {
        let mut value = Bson::Int32(1);
        for _ in 0..levels {
            value = Bson::Document(doc! { "a": value });
        }
        value
    };
    // The top level is 1: a field holding 99 nested documents makes 100 levels.
    store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 1, "deep": nested(99)})], true, Durability::None);
    let too_deep =
        store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 2, "deep": nested(100)})], true, Durability::None);
    assert_eq!(too_deep.errors.first().map(|(_, e)| (e.code(), e.code_name())), Some((15, "Overflow")));
    let set = |filter: Document, update: Document, upsert: bool| UpdateRequest {
        filter,
        update: UpdateModification::Document(update),
        multi: false,
        upsert,
        array_filters: Vec::new(),
        hint: None,
        variables: Default::default(),
        collation: None,
    };
    let error = store
        .collection(("db", "c"))
        .update(&set(doc! {"_id": 1}, doc! {"$set": {"more": nested(100)}}, false), Durability::None)
        .unwrap_err();
    assert_eq!(error.code(), 15, "{error}");
    let error = store
        .collection(("db", "c"))
        .update(&set(doc! {"_id": 3}, doc! {"$set": {"more": nested(100)}}, true), Durability::None)
        .unwrap_err();
    assert_eq!(error.code(), 15, "{error}");
    let big = "x".repeat(9 << 20);
    store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 4, "s": big.clone()})], true, Durability::None);
    let error = store
        .collection(("db", "c"))
        .update(&set(doc! {"_id": 4}, doc! {"$set": {"t": big}}, false), Durability::None)
        .unwrap_err();
    assert_eq!((error.code(), error.code_name()), (10334, "BSONObjectTooLarge"), "{error}");
    assert_eq!(store.collection(("db", "c")).estimated_document_count().unwrap(), 2);
    let stored = find(&store, filter(doc! {"_id": 4}));
    assert!(!stored[0].contains_key("t"));
    assert!(store.collection(("db", "c")).validate().unwrap().is_valid());
}

fn ids(documents: &[Document]) -> Vec<i32> {
    documents.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

/// Goal: a unique index refuses a duplicate with MongoDB's error data and leaves nothing
/// behind; building a unique index over duplicates fails and removes the index.
#[test]
fn unique_index_duplicates() {
    let store = store();
    store.collection(("db", "c")).create_indexes(&[doc! {"key": {"email": 1}, "unique": true}]).unwrap();
    store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 1, "email": "a@x"})], true, Durability::None);
    let outcome =
        store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 2, "email": "a@x"})], true, Durability::None);
    match &outcome.errors[0].1 {
        Error::DuplicateKey { key_pattern, key_value, index, .. } => {
            assert_eq!(
                (key_pattern, key_value, index.as_str()),
                (&doc! {"email": 1}, &doc! {"email": "a@x"}, "email_1")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        outcome.errors[0].1.to_string(),
        // MongoDB's own notation, as clients see it (the docstore's message is the reply's).
        "E11000 duplicate key error collection: db.c index: email_1 dup key: { email: \"a@x\" }"
    );
    assert_eq!(find(&store, filter(doc! {"_id": 2})).len(), 0);
    assert!(store.collection(("db", "c")).validate().unwrap().is_valid());
    store.collection(("db", "d")).insert(
        vec![raw(doc! {"_id": 1, "k": 1}), raw(doc! {"_id": 2, "k": 1})],
        true,
        Durability::None,
    );
    assert_eq!(
        store.collection(("db", "d")).create_indexes(&[doc! {"key": {"k": 1}, "unique": true}]).unwrap_err().code(),
        11000
    );
    assert_eq!(store.collection(("db", "d")).list_indexes().unwrap().len(), 1);
    // An update that would duplicate a unique key fails and changes nothing.
    store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 3, "email": "b@x"})], true, Durability::None);
    let update = UpdateRequest {
        filter: doc! {"_id": 3},
        update: UpdateModification::Document(doc! {"$set": {"email": "a@x"}}),
        multi: false,
        upsert: false,
        array_filters: vec![],
        hint: None,
        variables: Default::default(),
        collation: None,
    };
    assert_eq!(store.collection(("db", "c")).update(&update, Durability::None).unwrap_err().code(), 11000);
    assert_eq!(find(&store, filter(doc! {"email": "b@x"})).len(), 1);
    assert!(store.collection(("db", "c")).validate().unwrap().is_valid());
}

/// Goal: createIndexes' no-op and conflict rules, dropIndexes and listIndexes shapes.
#[test]
fn index_catalog_rules() {
    let store = store();
    let created = store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": 1}}]).unwrap();
    assert!(created.created_collection_automatically);
    assert_eq!((created.num_indexes_before, created.num_indexes_after), (1, 2));
    let again = store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": 1}}]).unwrap();
    assert_eq!(again.note.as_deref(), Some("all indexes already exist"));
    assert_eq!(
        store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": 1}, "unique": true}]).unwrap_err().code(),
        85
    );
    assert_eq!(
        store.collection(("db", "c")).create_indexes(&[doc! {"key": {"b": 1}, "name": "a_1"}]).unwrap_err().code(),
        86
    );
    assert_eq!(
        store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": "geoHaystack"}}]).unwrap_err().code(),
        67
    );
    assert_eq!(
        store.collection(("db", "c")).list_indexes().unwrap(),
        vec![doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}, doc! {"v": 2, "key": {"a": 1}, "name": "a_1"}]
    );
    assert_eq!(store.collection(("db", "c")).drop_indexes(&IndexSelector::Name("_id_".into())).unwrap_err().code(), 72);
    assert_eq!(store.collection(("db", "c")).drop_indexes(&IndexSelector::Name("nope".into())).unwrap_err().code(), 27);
    assert_eq!(store.collection(("db", "c")).drop_indexes(&IndexSelector::All).unwrap(), 2);
    assert_eq!(store.collection(("db", "c")).list_indexes().unwrap().len(), 1);
}

/// Goal: explain's shape: IXSCAN with bounds under FETCH for an indexed equality, COLLSCAN
/// without, SORT when no index gives the order; executionStats counts; hint honoured.
#[test]
fn explain_shapes() {
    let store = store();
    let documents = (0..20).map(|i| raw(doc! {"_id": i, "a": i % 5, "b": i})).collect();
    store.collection(("db", "c")).insert(documents, true, Durability::None);
    store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": 1, "b": -1}}]).unwrap();
    let explain = store
        .collection(("db", "c"))
        .explain(
            &FindRequest { filter: doc! {"a": 2, "b": {"$gt": 5}}, ..FindRequest::default() },
            Verbosity::ExecutionStats,
        )
        .unwrap();
    let plan = explain.get_document("queryPlanner").unwrap().get_document("winningPlan").unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "FETCH");
    let scan = plan.get_document("inputStage").unwrap();
    assert_eq!(scan.get_str("stage").unwrap(), "IXSCAN");
    assert_eq!(scan.get_str("indexName").unwrap(), "a_1_b_-1");
    assert_eq!(scan.get_document("indexBounds").unwrap(), &doc! {"a": ["[2, 2]"], "b": ["(\"\", 5)"]});
    let stats = explain.get_document("executionStats").unwrap();
    assert_eq!(stats.get_i64("nReturned").unwrap(), 3);
    assert_eq!(stats.get_i64("totalKeysExamined").unwrap(), 3);
    assert_eq!(stats.get_i64("totalDocsExamined").unwrap(), 3);
    let explain = store
        .collection(("db", "c"))
        .explain(
            &FindRequest { filter: doc! {"b": 3}, sort: Some(doc! {"b": 1}), ..FindRequest::default() },
            Verbosity::ExecutionStats,
        )
        .unwrap();
    let plan = explain.get_document("queryPlanner").unwrap().get_document("winningPlan").unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "SORT");
    assert_eq!(plan.get_document("inputStage").unwrap().get_str("stage").unwrap(), "COLLSCAN");
    assert_eq!(explain.get_document("executionStats").unwrap().get_i64("totalDocsExamined").unwrap(), 20);
    let hinted =
        FindRequest { filter: doc! {"b": 3}, hint: Some(Hint::Name("a_1_b_-1".into())), ..FindRequest::default() };
    let explain = store.collection(("db", "c")).explain(&hinted, Verbosity::QueryPlanner).unwrap();
    let plan = explain.get_document("queryPlanner").unwrap().get_document("winningPlan").unwrap();
    assert_eq!(plan.get_document("inputStage").unwrap().get_str("stage").unwrap(), "IXSCAN");
    assert_eq!(ids(&find(&store, hinted)), vec![3]);
    let sorted = FindRequest { filter: doc! {"a": 1}, sort: Some(doc! {"b": 1}), ..FindRequest::default() };
    let explain = store.collection(("db", "c")).explain(&sorted, Verbosity::QueryPlanner).unwrap();
    let plan = explain.get_document("queryPlanner").unwrap().get_document("winningPlan").unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "FETCH", "the index gives b's order after a's equality");
    assert_eq!(plan.get_document("inputStage").unwrap().get_str("direction").unwrap(), "backward");
    assert_eq!(ids(&find(&store, sorted)), vec![1, 6, 11, 16]);
    let or = FindRequest { filter: doc! {"$or": [{"a": 1}, {"_id": 2}]}, ..FindRequest::default() };
    let explain = store.collection(("db", "c")).explain(&or, Verbosity::QueryPlanner).unwrap();
    let plan = explain.get_document("queryPlanner").unwrap().get_document("winningPlan").unwrap();
    assert_eq!(plan.get_document("inputStage").unwrap().get_str("stage").unwrap(), "OR");
    let mut got = ids(&find(&store, or));
    got.sort();
    assert_eq!(got, vec![1, 2, 6, 11, 16]);
    assert_eq!(
        store
            .collection(("db", "c"))
            .find(&FindRequest { hint: Some(Hint::Name("nope".into())), ..FindRequest::default() })
            .err()
            .unwrap()
            .code(),
        2
    );
}

/// Goal: a blocking sort past the memory limit fails with 292, and with allowDiskUse spills
/// to a temporary tree and returns the right order.
#[test]
fn sort_memory_limit_and_spill() {
    let store =
        Store::open_in_memory(StoreOptions { sort_memory_limit_bytes: 4096, ..StoreOptions::default() }).unwrap();
    let documents = (0..500).map(|i| raw(doc! {"_id": i, "k": (i * 7919) % 500, "pad": "x".repeat(20)})).collect();
    store.collection(("db", "c")).insert(documents, true, Durability::None);
    let request = FindRequest { sort: Some(doc! {"k": -1}), ..FindRequest::default() };
    assert_eq!(store.collection(("db", "c")).find(&request).err().unwrap().code(), 292);
    let spilled = FindRequest { allow_disk_use: true, limit: Some(3), ..request };
    let keys: Vec<i32> = find(&store, spilled).iter().map(|d| d.get_i32("k").unwrap()).collect();
    assert_eq!(keys, vec![499, 498, 497]);
    assert!(store.engine_stats().commits > 0);
}

fn aggregate(store: &Store, pipeline: &[Document], allow_disk_use: bool) -> Result<Vec<Document>> {
    let options = AggregateOptions { allow_disk_use, ..AggregateOptions::default() };
    let cursor = store.collection(("db", "c")).aggregate(pipeline, &options)?;
    cursor.map(|d| d.map(|raw| Document::try_from(raw.as_ref()).unwrap())).collect()
}

/// Goal: aggregation's blocking stages hold only their state, up to the configured limits:
/// count_documents and a few groups pass a tiny group limit, a group per document or a
/// $sort over the collection fails with 292, and with allowDiskUse they spill to engine trees
/// and give the in-memory answer. Method: 2,000 documents, 16 KiB limits, the default store
/// for the in-memory answers; engine commits show the spill.
#[test]
fn aggregation_memory_limits_and_spill() {
    let tiny = StoreOptions {
        group_memory_limit_bytes: 16 * 1024,
        sort_memory_limit_bytes: 16 * 1024,
        ..StoreOptions::default()
    };
    let (store, unlimited) = (Store::open_in_memory(tiny).unwrap(), store());
    for target in [&store, &unlimited] {
        let documents = (0..2000)
            .map(|i| raw(doc! {"_id": i, "k": (i * 7919) % 2000, "g": i % 10, "pad": "x".repeat(20)}))
            .collect();
        target.collection(("db", "c")).insert(documents, true, Durability::None);
    }
    let count_documents = [doc! {"$match": {}}, doc! {"$group": {"_id": 1, "n": {"$sum": 1}}}];
    assert_eq!(aggregate(&store, &count_documents, false).unwrap(), vec![doc! {"_id": 1, "n": 2000}]);
    let by_g = [doc! {"$group": {"_id": "$g", "n": {"$sum": 1}}}];
    assert_eq!(
        aggregate(&store, &by_g, false).unwrap(),
        (0..10).map(|g| doc! {"_id": g, "n": 200}).collect::<Vec<_>>()
    );
    assert_eq!(aggregate(&store, &[doc! {"$count": "n"}], false).unwrap(), vec![doc! {"n": 2000}]);

    let by_k = [doc! {"$group": {"_id": "$k", "ids": {"$push": "$_id"}}}];
    let sorted = [doc! {"$sort": {"k": -1}}, doc! {"$project": {"k": 1}}];
    for pipeline in [&by_k[..], &sorted[..]] {
        let error = aggregate(&store, pipeline, false).unwrap_err();
        assert_eq!(
            (error.code(), error.code_name()),
            (292, "QueryExceededMemoryLimitNoDiskUseAllowed"),
            "{pipeline:?}"
        );
        let commits = store.engine_stats().commits;
        let spilled = aggregate(&store, pipeline, true).unwrap();
        assert!(store.engine_stats().commits > commits, "{pipeline:?} spilled to the engine");
        assert_eq!(spilled.len(), 2000);
        assert_eq!(spilled, aggregate(&unlimited, pipeline, false).unwrap(), "{pipeline:?}");
    }
    store.verify_engine().unwrap();
}

/// Goal: an aggregate cursor computes its results as they are pulled, while the blocking
/// stages' errors still come from the aggregate call. Method: a streaming pipeline that fails
/// on the 501st document returns a cursor and 500 results before the error; the same failure
/// inside a $group fails the call.
#[test]
fn aggregate_cursor_is_lazy() {
    let store = store();
    store.collection(("db", "c")).insert(
        (0..1000).map(|i| raw(doc! {"_id": i, "d": if i == 500 { 0 } else { 1 }})).collect(),
        true,
        Durability::None,
    );
    let divide = doc! {"$divide": [1, "$d"]};
    let options = AggregateOptions::default();
    let mut cursor =
        store.collection(("db", "c")).aggregate(&[doc! {"$project": {"x": divide.clone()}}], &options).unwrap();
    assert_eq!(cursor.next_batch(300, usize::MAX).unwrap().len(), 300);
    assert_eq!(cursor.next_batch(300, usize::MAX).unwrap().len(), 200, "the batch stops before the error");
    assert_eq!(cursor.next_batch(300, usize::MAX).unwrap_err().code(), 2);
    let grouped = [doc! {"$group": {"_id": null, "x": {"$sum": divide}}}];
    assert_eq!(store.collection(("db", "c")).aggregate(&grouped, &options).err().map(|e| e.code()), Some(2));
}

/// Goal: updates report matched/modified/upserted as MongoDB does; findAndModify with sort,
/// new, remove, upsert and fields.
#[test]
fn updates_and_find_and_modify() {
    let store = store();
    store.collection(("db", "c")).insert(
        (0..5).map(|i| raw(doc! {"_id": i, "g": i % 2, "n": 0})).collect(),
        true,
        Durability::None,
    );
    store.collection(("db", "c")).create_indexes(&[doc! {"key": {"n": 1}}]).unwrap();
    let update = |filter: Document, update: Document, multi: bool, upsert: bool| UpdateRequest {
        filter,
        update: UpdateModification::Document(update),
        multi,
        upsert,
        array_filters: vec![],
        hint: None,
        variables: Default::default(),
        collation: None,
    };
    let outcome = store
        .collection(("db", "c"))
        .update(&update(doc! {"g": 0}, doc! {"$inc": {"n": 1}}, true, false), Durability::None)
        .unwrap();
    assert_eq!((outcome.matched, outcome.modified, outcome.upserted_id), (3, 3, None));
    let outcome = store
        .collection(("db", "c"))
        .update(&update(doc! {"g": 0}, doc! {"$set": {"n": 1}}, true, false), Durability::None)
        .unwrap();
    assert_eq!((outcome.matched, outcome.modified), (3, 0));
    let outcome = store
        .collection(("db", "c"))
        .update(&update(doc! {"_id": 9}, doc! {"$set": {"n": 5}}, false, true), Durability::None)
        .unwrap();
    assert_eq!((outcome.matched, outcome.modified, outcome.upserted_id), (0, 0, Some(Bson::Int32(9))));
    let outcome = store
        .collection(("db", "c"))
        .update(&update(doc! {"g": 7}, doc! {"$set": {"n": 6}}, false, true), Durability::None)
        .unwrap();
    assert!(matches!(outcome.upserted_id, Some(Bson::ObjectId(_))));
    assert_eq!(find(&store, filter(doc! {"g": 7, "n": 6})).len(), 1);
    assert_eq!(
        store
            .collection(("db", "c"))
            .update(&update(doc! {}, doc! {"x": 1}, true, false), Durability::None)
            .unwrap_err()
            .code(),
        9
    );
    let pipeline = UpdateRequest {
        filter: doc! {"_id": 1},
        update: UpdateModification::Pipeline(vec![doc! {"$set": {"n": {"$add": ["$n", 10]}}}]),
        multi: false,
        upsert: false,
        array_filters: vec![],
        hint: None,
        variables: Default::default(),
        collation: None,
    };
    assert_eq!(store.collection(("db", "c")).update(&pipeline, Durability::None).unwrap().modified, 1);
    assert_eq!(find(&store, filter(doc! {"n": 10})).len(), 1);

    let fam = FindAndModifyRequest {
        query: doc! {"g": 0},
        sort: Some(doc! {"_id": -1}),
        update: Some(UpdateModification::Document(doc! {"$set": {"n": 100}})),
        return_new: true,
        fields: Some(doc! {"n": 1}),
        ..FindAndModifyRequest::default()
    };
    let outcome = store.collection(("db", "c")).find_and_modify(&fam, Durability::None).unwrap();
    assert_eq!(outcome.value, Some(doc! {"_id": 4, "n": 100}));
    assert!(outcome.updated_existing);
    let remove = FindAndModifyRequest { query: doc! {"n": 100}, remove: true, ..FindAndModifyRequest::default() };
    assert_eq!(
        store
            .collection(("db", "c"))
            .find_and_modify(&remove, Durability::None)
            .unwrap()
            .value
            .unwrap()
            .get_i32("_id")
            .unwrap(),
        4
    );
    let upsert = FindAndModifyRequest {
        query: doc! {"_id": 50},
        update: Some(UpdateModification::Document(doc! {"$set": {"n": 1}})),
        upsert: true,
        return_new: true,
        ..FindAndModifyRequest::default()
    };
    let outcome = store.collection(("db", "c")).find_and_modify(&upsert, Durability::None).unwrap();
    assert_eq!((outcome.value, outcome.upserted_id), (Some(doc! {"_id": 50, "n": 1}), Some(Bson::Int32(50))));
    assert_eq!(
        store
            .collection(("db", "c"))
            .delete(
                &DeleteRequest { filter: doc! {"g": 1}, just_one: true, ..DeleteRequest::default() },
                Durability::None
            )
            .unwrap(),
        1
    );
    assert!(store.collection(("db", "c")).validate().unwrap().is_valid());
}

/// Goal: sparse, partial, multikey, clustering and TTL indexes give the right answers and
/// entries.
#[test]
fn index_kinds() {
    let store = store();
    store
        .collection(("db", "c"))
        .create_indexes(&[
            doc! {"key": {"s": 1}, "sparse": true},
            doc! {"key": {"p": 1}, "partialFilterExpression": {"keep": true}},
            doc! {"key": {"tags": 1}},
            doc! {"key": {"c": 1}, "name": "c_clustering", "clustering": true},
            doc! {"key": {"at": 1}, "expireAfterSeconds": 60},
        ])
        .unwrap();
    let old = bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 3_600_000);
    store.collection(("db", "c")).insert(
        vec![
            raw(doc! {"_id": 1, "s": 1, "p": 1, "keep": true, "tags": ["a", "b"], "c": 1, "at": old}),
            raw(doc! {"_id": 2, "p": 1, "tags": ["b"], "c": 2, "at": bson::DateTime::now()}),
            raw(doc! {"_id": 3, "s": null, "tags": [], "c": 1}),
        ],
        true,
        Durability::None,
    );
    let report = store.collection(("db", "c")).validate().unwrap();
    assert!(report.is_valid(), "{:?}", report.errors);
    assert_eq!(report.index_entries["s_1"], 2);
    assert_eq!(report.index_entries["p_1"], 1);
    assert_eq!(report.index_entries["tags_1"], 4);
    assert_eq!(ids(&find(&store, filter(doc! {"tags": "b"}))), vec![1, 2]);
    assert_eq!(ids(&find(&store, filter(doc! {"p": 1, "keep": true}))), vec![1]);
    assert_eq!(ids(&find(&store, filter(doc! {"s": 1}))), vec![1]);
    let mut cs = ids(&find(&store, filter(doc! {"c": 1})));
    cs.sort();
    assert_eq!(cs, vec![1, 3]);
    let explain = store.collection(("db", "c")).explain(&filter(doc! {"tags": "a"}), Verbosity::QueryPlanner).unwrap();
    let plan = explain.get_document("queryPlanner").unwrap().get_document("winningPlan").unwrap();
    assert!(plan.get_document("inputStage").unwrap().get_bool("isMultiKey").unwrap());
    assert_eq!(store.expire_now().unwrap(), 1);
    assert_eq!(ids(&find(&store, FindRequest::default())), vec![2, 3]);
    assert!(store.collection(("db", "c")).validate().unwrap().is_valid());
    let stats = store.collection(("db", "c")).stats(1).unwrap();
    assert_eq!(stats.get_i64("count").unwrap(), 2);
    assert_eq!(stats.get_i32("nindexes").unwrap(), 6);
    assert!(stats.get_document("indexSizes").unwrap().get_i64("c_clustering").unwrap() > 0);
    assert_eq!(store.db_stats("db", 1).unwrap().get_i64("objects").unwrap(), 2);
    assert_eq!(
        store.collection(("db", "c")).distinct("tags", &FindRequest::default()).unwrap(),
        vec![Bson::String("b".into())]
    );
}

/// Goal: cursors keep their snapshot across later writes and return batches.
#[test]
fn cursors_keep_their_snapshot() {
    let store = store();
    store.collection(("db", "c")).insert((0..10).map(|i| raw(doc! {"_id": i})).collect(), true, Durability::None);
    let mut cursor = store.collection(("db", "c")).find(&FindRequest::default()).unwrap();
    assert_eq!(cursor.next_batch(4, usize::MAX).unwrap().len(), 4);
    store
        .collection(("db", "c"))
        .delete(&DeleteRequest { filter: doc! {}, just_one: false, ..DeleteRequest::default() }, Durability::None)
        .unwrap();
    assert_eq!(cursor.next_batch(100, usize::MAX).unwrap().len(), 6);
    assert!(cursor.is_exhausted());
    assert_eq!(store.collection(("db", "c")).count(&FindRequest::default()).unwrap(), 0);
}

/// Goal: aggregation reaches other collections: $lookup, $unionWith, $out (keeping the
/// target's indexes), $merge.
#[test]
fn aggregation_over_collections() {
    let store = store();
    store.collection(("db", "orders")).insert(
        vec![raw(doc! {"_id": 1, "item": "a", "q": 2}), raw(doc! {"_id": 2, "item": "b", "q": 5})],
        true,
        Durability::None,
    );
    store.collection(("db", "items")).insert(
        vec![raw(doc! {"_id": "a", "price": 3}), raw(doc! {"_id": "b", "price": 4})],
        true,
        Durability::None,
    );
    let pipeline = [
        doc! {"$match": {"q": {"$gt": 1}}},
        doc! {"$lookup": {"from": "items", "localField": "item", "foreignField": "_id", "as": "i"}},
        doc! {"$unwind": "$i"},
        doc! {"$project": {"total": {"$multiply": ["$q", "$i.price"]}}},
    ];
    let out: Vec<Document> = store
        .collection(("db", "orders"))
        .aggregate(&pipeline, &AggregateOptions::default())
        .unwrap()
        .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
        .collect();
    assert_eq!(out, vec![doc! {"_id": 1, "total": 6}, doc! {"_id": 2, "total": 20}]);
    let union = [doc! {"$unionWith": "items"}, doc! {"$count": "n"}];
    let n: Vec<Document> = store
        .collection(("db", "orders"))
        .aggregate(&union, &AggregateOptions::default())
        .unwrap()
        .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
        .collect();
    assert_eq!(n, vec![doc! {"n": 4}]);
    store.collection(("db", "report")).create_indexes(&[doc! {"key": {"q": 1}}]).unwrap();
    store
        .collection(("db", "orders"))
        .aggregate(&[doc! {"$out": "report"}], &AggregateOptions::default())
        .unwrap()
        .count();
    assert_eq!(store.collection(("db", "report")).estimated_document_count().unwrap(), 2);
    assert_eq!(store.collection(("db", "report")).list_indexes().unwrap().len(), 2);
    store
        .collection(("db", "items"))
        .aggregate(&[doc! {"$merge": {"into": "report"}}], &AggregateOptions::default())
        .unwrap()
        .count();
    assert_eq!(store.collection(("db", "report")).estimated_document_count().unwrap(), 4);
    assert!(store.collection(("db", "report")).validate().unwrap().is_valid());
}

/// Goal: an index built over a populated collection holds every document's entries and is
/// used afterwards; writes during the build are not lost (builds run in batches).
#[test]
fn index_build_on_populated_collection() {
    let store = std::sync::Arc::new(store());
    store.collection(("db", "c")).insert(
        (0..5000).map(|i| raw(doc! {"_id": i, "k": i % 97})).collect(),
        true,
        Durability::None,
    );
    let writer = {
        let store = std::sync::Arc::clone(&store);
        std::thread::spawn(move || {
            for i in 5000..5500 {
                store.collection(("db", "c")).insert(vec![raw(doc! {"_id": i, "k": i % 97})], true, Durability::None);
            }
        })
    };
    store.collection(("db", "c")).create_indexes(&[doc! {"key": {"k": 1}}]).unwrap();
    writer.join().unwrap();
    let report = store.collection(("db", "c")).validate().unwrap();
    assert!(report.is_valid(), "{:?}", report.errors);
    assert_eq!(report.index_entries["k_1"], 5500);
    assert_eq!(store.collection(("db", "c")).count(&filter(doc! {"k": 5})).unwrap(), 57);
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

/// Goal: an `$or` whose branches one index serves as well as each branch's best scans that one
/// index in every branch (a shorter index that ties a branch does not split the union), so a
/// projection of its fields is covered; answers equal a collection scan's.
#[test]
fn an_or_served_by_one_index_is_covered() {
    let store = store();
    let documents = (0..40).map(|i| raw(doc! {"_id": i, "a": i % 10, "b": i, "c": i % 3})).collect();
    store.collection(("db", "c")).insert(documents, true, Durability::None);
    store
        .collection(("db", "c"))
        .create_indexes(&[doc! {"key": {"a": 1}, "name": "a"}, doc! {"key": {"a": 1, "b": 1}, "name": "a_b"}])
        .unwrap();
    let filter = doc! {"$or": [{"a": 3, "b": {"$gte": 20}}, {"a": {"$gt": 7}}]};
    let request = FindRequest {
        filter: filter.clone(),
        projection: Some(doc! {"a": 1, "b": 1, "_id": 0}),
        ..FindRequest::default()
    };
    let explain = store.collection(("db", "c")).explain(&request, Verbosity::ExecutionStats).unwrap();
    let text = explain.to_string();
    assert!(text.contains("PROJECTION_COVERED") && !text.contains("FETCH"), "{explain}");
    assert!(text.contains("\"indexName\": \"a_b\"") && !text.contains("\"indexName\": \"a\""), "{explain}");
    let mut covered = find(&store, request.clone());
    let mut scanned = find(&store, FindRequest { hint: Some(Hint::Natural { backward: false }), ..request });
    covered.sort_by_key(|d| d.to_string());
    scanned.sort_by_key(|d| d.to_string());
    assert_eq!(covered, scanned);
    assert_eq!(covered.len(), 10);
}

/// Goal: a find that reads only index fields is answered from the index (PROJECTION_COVERED
/// over a bare IXSCAN, no document examined) with exactly the answers of a collection scan —
/// number types, nested paths, descending fields included — while a null or missing field
/// fetches its document, and a multikey index is never used to cover.
#[test]
fn covered_finds_answer_from_the_index() {
    let store = store();
    let documents = vec![
        doc! {"_id": 1, "a": 1, "b": {"c": "x"}, "z": 0},
        doc! {"_id": 2, "a": 2.5, "b": {"c": "y"}, "z": 0},
        doc! {"_id": 3, "a": 3_i64, "b": {"c": "x"}, "z": 0},
        doc! {"_id": 4, "a": 4, "z": 0},
        doc! {"_id": 5, "a": Bson::Null, "b": {"c": "w"}, "z": 0},
        doc! {"_id": 6, "b": {"c": "v"}, "z": 0},
        doc! {"_id": 7, "a": {"d": 1}, "b": {"c": "u"}, "z": 0},
    ];
    store.collection(("db", "c")).insert(documents.into_iter().map(raw).collect(), true, Durability::None);
    store.collection(("db", "c")).create_indexes(&[doc! {"key": {"a": 1, "b.c": -1}, "name": "a_bc"}]).unwrap();
    let queries = [
        (doc! {"a": {"$gte": 1}}, doc! {"a": 1, "b.c": 1, "_id": 0}, None),
        (doc! {"a": {"$gte": 1}, "b.c": "x"}, doc! {"b.c": 1, "_id": 0}, Some(doc! {"a": -1})),
        (doc! {"a": {"$lt": 10}}, doc! {"a": 1, "_id": 0}, Some(doc! {"b.c": 1})),
        (doc! {"a": {"$in": [1, 2.5, Bson::Null]}}, doc! {"a": 1, "b.c": 1, "_id": 0}, None),
        (doc! {"a": {"$gte": 1}, "b.c": {"$exists": true}}, doc! {"a": 1, "_id": 0}, None),
        (doc! {"a": {"$type": "object", "$gte": {}}}, doc! {"a": 1, "b.c": 1, "_id": 0}, None),
        // An $or whose branches all scan a_bc (iibench's query shape), overlapping ranges too.
        (
            doc! {"$or": [{"a": 1, "b.c": {"$gte": "x"}}, {"a": {"$gt": 1}}, {"a": {"$gte": 3}}]},
            doc! {"a": 1, "b.c": 1, "_id": 0},
            None,
        ),
    ];
    for (query, projection, sort) in queries {
        let request = FindRequest {
            filter: query.clone(),
            projection: Some(projection.clone()),
            sort: sort.clone(),
            ..FindRequest::default()
        };
        let natural = FindRequest { hint: Some(Hint::Natural { backward: false }), ..request.clone() };
        let mut covered = find(&store, request.clone());
        let mut scanned = find(&store, natural);
        if sort.is_none() {
            covered.sort_by_key(|d| d.to_string());
            scanned.sort_by_key(|d| d.to_string());
        }
        assert_eq!(covered, scanned, "{query} {projection}");
        let explain = store.collection(("db", "c")).explain(&request, Verbosity::ExecutionStats).unwrap();
        let text = explain.to_string();
        assert!(text.contains("PROJECTION_COVERED") && !text.contains("FETCH"), "{query}: {explain}");
    }
    // Without nulls in range, nothing is fetched; a query reaching the null entries fetches them.
    let request = FindRequest {
        filter: doc! {"a": {"$gte": 1}},
        projection: Some(doc! {"a": 1, "_id": 0}),
        ..FindRequest::default()
    };
    let stats = store.collection(("db", "c")).explain(&request, Verbosity::ExecutionStats).unwrap();
    assert_eq!(stats.get_document("executionStats").unwrap().get_i64("totalDocsExamined").unwrap(), 0);
    let request = FindRequest {
        filter: doc! {"a": Bson::Null},
        projection: Some(doc! {"a": 1, "_id": 0}),
        ..FindRequest::default()
    };
    assert_eq!(find(&store, request.clone()), vec![doc! {"a": Bson::Null}, doc! {}]);
    let stats = store.collection(("db", "c")).explain(&request, Verbosity::ExecutionStats).unwrap();
    assert_eq!(stats.get_document("executionStats").unwrap().get_i64("totalDocsExamined").unwrap(), 2);
    // An $or covered by one index examines no document, and returns each match once.
    let request = FindRequest {
        filter: doc! {"$or": [{"a": {"$gte": 2}}, {"a": {"$gte": 3}}]},
        projection: Some(doc! {"a": 1, "_id": 0}),
        ..FindRequest::default()
    };
    let stats = store.collection(("db", "c")).explain(&request, Verbosity::ExecutionStats).unwrap();
    let stats = stats.get_document("executionStats").unwrap();
    assert_eq!((stats.get_i64("totalDocsExamined").unwrap(), stats.get_i64("nReturned").unwrap()), (0, 3), "{stats}");
    // Not covered: the projection keeps _id, reads a field outside the index, or the index is multikey.
    for projection in [doc! {"a": 1}, doc! {"a": 1, "z": 1, "_id": 0}] {
        let request =
            FindRequest { filter: doc! {"a": {"$gte": 1}}, projection: Some(projection), ..FindRequest::default() };
        assert!(
            store
                .collection(("db", "c"))
                .explain(&request, Verbosity::QueryPlanner)
                .unwrap()
                .to_string()
                .contains("FETCH")
        );
    }
    store.collection(("db", "c")).insert(
        vec![raw(doc! {"_id": 8, "a": [5, 6], "b": {"c": "t"}})],
        true,
        Durability::None,
    );
    let request = FindRequest {
        filter: doc! {"a": {"$gte": 5}},
        projection: Some(doc! {"a": 1, "_id": 0}),
        ..FindRequest::default()
    };
    assert_eq!(find(&store, request.clone()), vec![doc! {"a": [5, 6]}]);
    assert!(
        store.collection(("db", "c")).explain(&request, Verbosity::QueryPlanner).unwrap().to_string().contains("FETCH")
    );
}

/// Goal: a time-series collection checks and reports its options as MongoDB does, refuses a
/// measurement without its time, gets the default `{meta: 1, time: 1}` index, and expires old
/// measurements by their time field.
#[test]
fn time_series_collections_check_times_and_expire_by_them() {
    let store = store();
    let options =
        doc! {"timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes"}, "expireAfterSeconds": 3600};
    store.collection(("db", "c")).create(options).unwrap();
    let info = store.list_collections("db").into_iter().find(|c| c.name == "c").unwrap();
    assert_eq!(
        info.options.get_document("timeseries").unwrap(),
        &doc! {"timeField": "t", "metaField": "m", "granularity": "minutes", "bucketMaxSpanSeconds": 86_400}
    );
    let indexes = store.collection(("db", "c")).list_indexes().unwrap();
    assert!(indexes.iter().any(|i| i.get_str("name").ok() == Some("m_1_t_1")), "{indexes:?}");
    let now = bson::DateTime::now().timestamp_millis();
    let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(ms));
    let measurements = vec![
        raw(doc! {"_id": 1, "t": at(now - 7_200_000), "m": "a", "v": 1}),
        raw(doc! {"_id": 2, "t": at(now), "m": "a", "v": 2}),
    ];
    let outcome = store.collection(("db", "c")).insert(measurements, true, Durability::None);
    assert_eq!((outcome.inserted, outcome.errors.len()), (2, 0));
    let outcome =
        store.collection(("db", "c")).insert(vec![raw(doc! {"_id": 3, "t": "yesterday"})], true, Durability::None);
    assert_eq!(outcome.errors.first().map(|(_, e)| e.code()), Some(2));
    assert_eq!(store.expire_now().unwrap(), 1);
    assert_eq!(ids(&find(&store, FindRequest::default())), vec![2]);
    for (bad, code) in [
        (doc! {"timeseries": {"metaField": "m"}}, 40414),
        (doc! {"timeseries": {"timeField": "t", "metaField": "t"}}, 72),
        (doc! {"timeseries": {"timeField": "t", "granularity": "days"}}, 2),
        (doc! {"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60}}, 72),
        (doc! {"expireAfterSeconds": 10}, 72),
    ] {
        assert_eq!(store.collection(("db", "bad")).create(bad.clone()).map_err(|e| e.code()), Err(code), "{bad}");
    }
}
