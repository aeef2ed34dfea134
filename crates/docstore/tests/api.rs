//! API tests: writes, the catalog and cursors, each on small, hand-written cases with
//! MongoDB's answers (reads, plans and aggregation are in `queries.rs`).

use bson::{Bson, Document, doc, rawdoc};
use docstore::*;
use storage::Durability;

#[allow(dead_code, reason = "each test file uses some of the helpers")]
mod common;
use common::*;

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
