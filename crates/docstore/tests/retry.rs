//! Retryable writes' records: each statement's result is committed with its write, found again
//! by (lsid, txnNumber, stmtId), kept across a reopen, and forgotten when the session moves on.

use bson::{Document, doc, rawdoc};
use docstore::*;
use storage::Durability;

const LSID: [u8; 16] = [7; 16];

fn retry(txn_number: i64, stmt_ids: Vec<i32>, newer: bool) -> WriteOptions<'static> {
    WriteOptions {
        durability: Durability::Immediate,
        retry: Some(Retry::new(LSID, doc! {"id": "session"}, txn_number, stmt_ids, newer)),
        transaction: None,
        bypass_validation: false,
    }
}

fn update(filter: Document, update: Document, upsert: bool) -> UpdateRequest {
    UpdateRequest {
        filter,
        update: UpdateModification::Document(update),
        multi: false,
        upsert,
        array_filters: Vec::new(),
        hint: None,
        variables: Default::default(),
        collation: None,
    }
}

/// Goal: every kind of retryable statement records the result a retry must get. Method: run
/// each with a Retry and read the records back.
#[test]
fn statements_record_their_results() {
    let store = Store::open_in_memory(StoreOptions::default()).unwrap();
    let outcome = store.collection(("db", "c")).insert(
        vec![rawdoc! {"_id": 1}, rawdoc! {"_id": 2}],
        true,
        retry(1, vec![10, 11], true),
    );
    assert_eq!(outcome.inserted, 2);
    assert_eq!(store.executed(&LSID, 1, 10).unwrap(), Some(doc! {"n": 1}));
    assert_eq!(store.executed(&LSID, 1, 11).unwrap(), Some(doc! {"n": 1}));
    assert_eq!(store.executed(&LSID, 1, 12).unwrap(), None);

    store
        .collection(("db", "c"))
        .update(&update(doc! {"_id": 1}, doc! {"$set": {"a": 1}}, false), retry(2, vec![0], true))
        .unwrap();
    assert_eq!(store.executed(&LSID, 2, 0).unwrap(), Some(doc! {"n": 1, "nModified": 1}));
    assert_eq!(store.executed(&LSID, 1, 10).unwrap(), None, "a newer txnNumber forgets the older records");
    store
        .collection(("db", "c"))
        .update(&update(doc! {"_id": 9}, doc! {"$set": {"a": 1}}, false), retry(2, vec![1], false))
        .unwrap();
    assert_eq!(
        store.executed(&LSID, 2, 1).unwrap(),
        Some(doc! {"n": 0_i64, "nModified": 0}),
        "no match is recorded too"
    );
    store
        .collection(("db", "c"))
        .update(&update(doc! {"_id": 5}, doc! {"$set": {"a": 1}}, true), retry(2, vec![2], false))
        .unwrap();
    assert_eq!(store.executed(&LSID, 2, 2).unwrap(), Some(doc! {"n": 1, "nModified": 0, "upserted": 5}));

    let remove = DeleteRequest { filter: doc! {"_id": 2}, just_one: true, ..DeleteRequest::default() };
    assert_eq!(store.collection(("db", "c")).delete(&remove, retry(2, vec![3], false)).unwrap(), 1);
    assert_eq!(store.executed(&LSID, 2, 3).unwrap(), Some(doc! {"n": 1_i64}));

    let request = FindAndModifyRequest {
        query: doc! {"_id": 1},
        update: Some(UpdateModification::Document(doc! {"$inc": {"a": 1}})),
        return_new: true,
        ..FindAndModifyRequest::default()
    };
    let first = store.collection(("db", "c")).find_and_modify(&request, retry(2, vec![4], false)).unwrap();
    let recorded = store.executed(&LSID, 2, 4).unwrap().unwrap();
    assert_eq!(FindAndModifyOutcome::from_document(&recorded), first);
    assert_eq!(first.value, Some(doc! {"_id": 1, "a": 2}));
    assert_eq!(store.last_txn_number(&LSID).unwrap(), Some(2));
    store.forget_session(&LSID).unwrap();
    assert_eq!(store.last_txn_number(&LSID).unwrap(), None);
}

/// Goal: a record is durable with its write: after a reopen the retry still finds it.
#[test]
fn records_survive_a_reopen() {
    let dir = std::env::temp_dir().join(format!("strata-retry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let store = Store::open(&dir, StoreOptions::default()).unwrap();
        store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1}], true, retry(5, vec![0], true));
        store.close().unwrap();
    }
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    assert_eq!(store.executed(&LSID, 5, 0).unwrap(), Some(doc! {"n": 1}));
    assert_eq!(store.last_txn_number(&LSID).unwrap(), Some(5));
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Goal: a batch's consecutive statements share one record, and a lookup tells each statement
/// in a run from a gap between runs.
#[test]
fn runs_of_statements_are_one_record_each() {
    let store = Store::open_in_memory(StoreOptions::default()).unwrap();
    let documents = (0..5).map(|i| rawdoc! {"_id": i}).collect();
    let outcome = store.collection(("db", "c")).insert(documents, true, retry(3, vec![10, 11, 12, 14, 15], true));
    assert_eq!(outcome.inserted, 5);
    for stmt in [10, 11, 12, 14, 15] {
        assert_eq!(store.executed(&LSID, 3, stmt).unwrap(), Some(doc! {"n": 1}), "statement {stmt}");
    }
    for stmt in [9, 13, 16] {
        assert_eq!(store.executed(&LSID, 3, stmt).unwrap(), None, "statement {stmt}");
    }
    assert_eq!(store.executed(&LSID, 2, 11).unwrap(), None, "another txnNumber");
}
