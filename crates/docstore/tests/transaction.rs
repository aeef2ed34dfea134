//! Multi-document transactions: snapshot isolation, reads of their own writes, write conflicts,
//! atomic commit with one applyOps entry, non-transactional writers waiting for holders, and a
//! model test of concurrent random transactions that never loses an update.

use std::sync::Arc;
use std::thread;

use bson::{Bson, Document, Timestamp, doc, rawdoc};
use docstore::*;
use storage::Durability;

fn store() -> Arc<Store> {
    let store = Store::open_in_memory(StoreOptions::default()).unwrap();
    store.enable_oplog(64 << 20).unwrap();
    Arc::new(store)
}

fn in_txn(txn: &mut DocumentTransaction) -> WriteOptions<'_> {
    WriteOptions { durability: Durability::None, retry: None, transaction: Some(txn), bypass_validation: false }
}

fn set(filter: Document, update: Document) -> UpdateRequest {
    UpdateRequest {
        filter,
        update: UpdateModification::Document(update),
        multi: false,
        upsert: false,
        array_filters: Vec::new(),
        hint: None,
        variables: Default::default(),
        collation: None,
    }
}

fn all(store: &Store, read_at: Option<ReadAt>) -> Vec<Document> {
    let request = FindRequest { read_at, sort: Some(doc! {"_id": 1}), ..FindRequest::default() };
    store
        .collection(("db", "c"))
        .find(&request)
        .unwrap()
        .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
        .collect()
}

/// Goal: a transaction reads its own writes on top of its snapshot, nobody else sees them until
/// commit, then everyone does; an abort leaves nothing.
#[test]
fn isolation_and_reading_own_writes() {
    let store = store();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1, "n": 0}], true, Durability::None);
    let mut txn = store.begin_transaction();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 2, "n": 0}], true, in_txn(&mut txn));
    store.collection(("db", "c")).update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 5}}), in_txn(&mut txn)).unwrap();
    assert_eq!(all(&store, Some(txn.read_at())), vec![doc! {"_id": 1, "n": 5}, doc! {"_id": 2, "n": 0}]);
    assert_eq!(all(&store, None), vec![doc! {"_id": 1, "n": 0}], "uncommitted writes are invisible");
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 3}], true, Durability::None);
    assert_eq!(all(&store, Some(txn.read_at())).len(), 2, "a commit after the snapshot is invisible to it");
    store.commit_transaction(txn, Durability::None, None).unwrap();
    assert_eq!(all(&store, None).len(), 3);
    assert_eq!(all(&store, None)[0], doc! {"_id": 1, "n": 5});

    let mut aborted = store.begin_transaction();
    store
        .collection(("db", "c"))
        .delete(&DeleteRequest { filter: doc! {}, just_one: false, ..DeleteRequest::default() }, in_txn(&mut aborted))
        .unwrap();
    assert!(all(&store, Some(aborted.read_at())).is_empty());
    drop(aborted);
    assert_eq!(all(&store, None).len(), 3, "an abort leaves nothing");
    store.collection(("db", "c")).validate().unwrap();
}

/// Goal: conflicting writes fail at once with WriteConflict: a document another open
/// transaction wrote, and a document a commit changed after the transaction began.
#[test]
fn write_conflicts_are_found_at_once() {
    let store = store();
    store.collection(("db", "c")).insert(
        vec![rawdoc! {"_id": 1, "n": 0}, rawdoc! {"_id": 2, "n": 0}],
        true,
        Durability::None,
    );
    let mut first = store.begin_transaction();
    let mut second = store.begin_transaction();
    store.collection(("db", "c")).update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 1}}), in_txn(&mut first)).unwrap();
    let conflict =
        store.collection(("db", "c")).update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 1}}), in_txn(&mut second));
    assert!(matches!(conflict, Err(Error::WriteConflict(_))), "{conflict:?}");
    assert_eq!(conflict.unwrap_err().code(), 112);
    store.commit_transaction(first, Durability::None, None).unwrap();

    let mut late = store.begin_transaction();
    store.collection(("db", "c")).update(&set(doc! {"_id": 2}, doc! {"$set": {"n": 7}}), Durability::None).unwrap();
    let stale = store.collection(("db", "c")).update(&set(doc! {"_id": 2}, doc! {"$inc": {"n": 1}}), in_txn(&mut late));
    assert!(matches!(stale, Err(Error::WriteConflict(_))), "changed after the snapshot: {stale:?}");
    drop(late);

    let mut duplicate = store.begin_transaction();
    let outcome = store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1}], true, in_txn(&mut duplicate));
    assert!(matches!(outcome.errors.first(), Some((0, Error::DuplicateKey { .. }))), "{:?}", outcome.errors);
    assert_eq!(all(&store, None), vec![doc! {"_id": 1, "n": 1}, doc! {"_id": 2, "n": 7}]);
}

/// Goal: a commit is one applyOps entry holding every operation, with the session's fields.
#[test]
fn a_commit_is_one_apply_ops_entry() {
    let store = store();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1}], true, Durability::None);
    let before = store.oplog().unwrap().last();
    let mut txn = store.begin_transaction();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 2}, rawdoc! {"_id": 3}], true, in_txn(&mut txn));
    store
        .collection(("db", "c"))
        .delete(
            &DeleteRequest { filter: doc! {"_id": 1}, just_one: true, ..DeleteRequest::default() },
            in_txn(&mut txn),
        )
        .unwrap();
    let lsid = doc! {"id": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![1; 16] })};
    store.commit_transaction(txn, Durability::Immediate, Some((&lsid, 4))).unwrap();
    let entries = store.oplog_after(before, 10).unwrap();
    assert_eq!(entries.len(), 1);
    let entry = Document::try_from(entries[0].1.as_ref()).unwrap();
    assert_eq!(entry.get_str("op").unwrap(), "c");
    assert_eq!(entry.get_i64("txnNumber").unwrap(), 4);
    let operations = entry.get_document("o").unwrap().get_array("applyOps").unwrap();
    let ops: Vec<&str> = operations.iter().map(|o| o.as_document().unwrap().get_str("op").unwrap()).collect();
    assert_eq!(ops, ["i", "i", "d"]);
    let _: Timestamp = entry.get_timestamp("ts").unwrap();
}

/// Goal: a plain write to a document a transaction holds waits for it, then applies to the
/// committed version (no lost update).
#[test]
fn a_plain_write_waits_for_the_holder() {
    let store = store();
    store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1, "n": 0}], true, Durability::None);
    let mut txn = store.begin_transaction();
    store.collection(("db", "c")).update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 10}}), in_txn(&mut txn)).unwrap();
    let other = Arc::clone(&store);
    let writer = thread::spawn(move || {
        other.collection(("db", "c")).update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 1}}), Durability::None).unwrap()
    });
    thread::sleep(std::time::Duration::from_millis(200));
    assert!(!writer.is_finished(), "the plain write waits for the transaction");
    store.commit_transaction(txn, Durability::None, None).unwrap();
    let outcome = writer.join().unwrap();
    assert_eq!((outcome.matched, outcome.modified), (1, 1));
    assert_eq!(all(&store, None), vec![doc! {"_id": 1, "n": 11}]);
}

/// Goal (model test): concurrent random transactions, each adding to some counters it reads
/// (retried on WriteConflict), end with every counter equal to the sum of the committed
/// transactions' additions — some serial order, no lost update. Seeded; the seed is printed.
#[test]
fn concurrent_random_transactions_lose_no_update() {
    let seed: u64 = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("seed {seed} (STRATA_SEED={seed} replays it)");
    let store = store();
    let counters: i32 = 8;
    let docs: Vec<bson::RawDocumentBuf> = (0..counters).map(|i| rawdoc! {"_id": i, "n": 0_i64}).collect();
    store.collection(("db", "c")).insert(docs, true, Durability::None);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                use rand::{Rng, SeedableRng};
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(t));
                let mut added = vec![0i64; counters as usize];
                let mut conflicts = 0;
                for _ in 0..150 {
                    let picks: Vec<i32> = (0..rng.gen_range(1..4)).map(|_| rng.gen_range(0..counters)).collect();
                    let amount: i64 = rng.gen_range(1..5);
                    loop {
                        let mut txn = store.begin_transaction();
                        let mut failed = false;
                        for pick in &picks {
                            let request = set(doc! {"_id": pick}, doc! {"$inc": {"n": amount}});
                            if store.collection(("db", "c")).update(&request, in_txn(&mut txn)).is_err() {
                                failed = true;
                                break;
                            }
                        }
                        if !failed && store.commit_transaction(txn, Durability::None, None).is_ok() {
                            for pick in &picks {
                                added[*pick as usize] += amount;
                            }
                            break;
                        }
                        conflicts += 1;
                    }
                }
                (added, conflicts)
            })
        })
        .collect();
    let mut expected = vec![0i64; counters as usize];
    let mut conflicts = 0;
    for thread in threads {
        let (added, seen) = thread.join().unwrap();
        conflicts += seen;
        for (total, add) in expected.iter_mut().zip(added) {
            *total += add;
        }
    }
    let found: Vec<i64> = all(&store, None).iter().map(|d| d.get_i64("n").unwrap()).collect();
    assert_eq!(found, expected, "seed {seed}");
    println!("{conflicts} write conflicts retried");
    store.collection(("db", "c")).validate().unwrap();
    store.verify_engine().unwrap();
}

/// Every entry of `primary`'s oplog after `after`, applied to `secondary` as a replica set's
/// secondary applies them.
fn replicate(primary: &Store, secondary: &Store, after: bson::Timestamp) {
    for (_, entry) in primary.oplog_after(after, usize::MAX).unwrap() {
        secondary.apply_replicated(&entry).unwrap();
    }
}

/// Goal: a secondary applies a committed transaction's `applyOps` entry: the same documents
/// and the same oplog as the primary, including a document the transaction inserted and then
/// changed (read back through the transaction being applied), and the session's record that
/// the transaction committed. Method: a transaction of an
/// insert, an update of it, an update of an older document and a delete, replicated entry by
/// entry to a second store.
#[test]
fn a_secondary_applies_a_transaction() {
    let (primary, secondary) = (store(), store());
    let start = bson::Timestamp { time: 0, increment: 0 };
    primary.collection(("db", "c")).insert(
        vec![rawdoc! {"_id": 1, "n": 0}, rawdoc! {"_id": 9}],
        true,
        Durability::None,
    );
    let mut txn = primary.begin_transaction();
    primary.collection(("db", "c")).insert(vec![rawdoc! {"_id": 2, "v": [1]}], true, in_txn(&mut txn));
    primary.collection(("db", "c")).update(&set(doc! {"_id": 2}, doc! {"$push": {"v": 2}}), in_txn(&mut txn)).unwrap();
    primary.collection(("db", "c")).update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 5}}), in_txn(&mut txn)).unwrap();
    let delete = DeleteRequest { filter: doc! {"_id": 9}, just_one: true, ..DeleteRequest::default() };
    primary.collection(("db", "c")).delete(&delete, in_txn(&mut txn)).unwrap();
    let lsid = doc! {"id": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![7; 16] })};
    primary.commit_transaction(txn, Durability::None, Some((&lsid, 3))).unwrap();
    replicate(&primary, &secondary, start);
    for store in [&primary, &secondary] {
        assert!(store.transaction_committed(&[7; 16], 3).unwrap(), "a retried commit finds the record");
        assert!(!store.transaction_committed(&[7; 16], 4).unwrap());
    }
    let expected = vec![doc! {"_id": 1, "n": 5}, doc! {"_id": 2, "v": [1, 2]}];
    assert_eq!(all(&primary, None), expected);
    assert_eq!(all(&secondary, None), expected);
    let oplog = |store: &Store| store.oplog_after(start, usize::MAX).unwrap();
    assert_eq!(oplog(&secondary), oplog(&primary), "the secondary's oplog is the primary's");
}

/// Goal: a transaction's entry is applied all or nothing, as the primary committed it. Method:
/// an `applyOps` entry whose second operation cannot be applied: the first one's insert is not
/// there afterwards, and neither is the entry; the next good entry applies.
#[test]
fn a_transaction_is_applied_all_or_nothing() {
    let secondary = store();
    secondary.collection(("db", "c")).create(doc! {}).unwrap();
    let ts = |increment| bson::Timestamp { time: 2_000_000_000, increment };
    let entry = |increment, second_op: &str| {
        rawdoc! {
            "op": "c", "ns": "admin.$cmd", "ts": ts(increment), "t": 1_i64, "v": 2, "wall": bson::DateTime::now(),
            "o": {"applyOps": [
                {"op": "i", "ns": "db.c", "o": {"_id": 1}, "o2": {"_id": 1}},
                {"op": second_op, "ns": "db.c", "o": {"_id": 2}, "o2": {"_id": 2}},
            ]},
        }
    };
    assert!(secondary.apply_replicated(&entry(1, "bogus")).is_err());
    assert_eq!(all(&secondary, None), Vec::<Document>::new(), "none of a failed transaction's operations stay");
    assert!(secondary.oplog_after(ts(0), 10).unwrap().iter().all(|(at, _)| *at != ts(1)));
    secondary.apply_replicated(&entry(2, "i")).unwrap();
    assert_eq!(all(&secondary, None), vec![doc! {"_id": 1}, doc! {"_id": 2}]);
}

/// Goal: a transaction too large for one oplog entry fails with TransactionTooLarge and leaves
/// nothing (it would commit here and never replicate: members send an entry in one message);
/// one just under the limit commits. Method: 17 documents of 1 MiB, then 15.
#[test]
fn a_transaction_larger_than_an_oplog_entry_is_refused() {
    let store = store();
    let big = "x".repeat(1 << 20);
    let mut txn = store.begin_transaction();
    for id in 0..17 {
        let outcome =
            store.collection(("db", "c")).insert(vec![rawdoc! {"_id": id, "s": big.as_str()}], true, in_txn(&mut txn));
        assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    }
    let refused = store.commit_transaction(txn, Durability::None, None).unwrap_err();
    assert!(matches!(refused, Error::TransactionTooLarge(_)), "{refused:?}");
    assert!(all(&store, None).is_empty(), "nothing of the refused transaction is visible");
    let last = store.oplog().unwrap().last();
    let mut txn = store.begin_transaction();
    for id in 0..15 {
        store.collection(("db", "c")).insert(vec![rawdoc! {"_id": id, "s": big.as_str()}], true, in_txn(&mut txn));
    }
    store.commit_transaction(txn, Durability::None, None).unwrap();
    assert_eq!(all(&store, None).len(), 15);
    assert!(store.oplog().unwrap().last() > last);
}

/// Every document of `db.name`, by `_id`.
fn documents(store: &Store, name: &str) -> Vec<Document> {
    let request = FindRequest { sort: Some(doc! {"_id": 1}), ..FindRequest::default() };
    store
        .collection(("db", name))
        .find(&request)
        .unwrap()
        .map(|d| Document::try_from(d.unwrap().as_ref()).unwrap())
        .collect()
}

/// Goal: a secondary applying a batch of the primary's entries at once (runs of document
/// writes as one engine transaction each) ends exactly where applying them one by one ends:
/// same documents, same oplog, valid indexes and counts. Method: a history with what a run
/// must get right: a document inserted then updated twice, a unique key freed by a delete and
/// taken by a later insert, an index build and an implicit collection creation between runs,
/// and a capped collection (whose writes stay out of runs); then one secondary applies the
/// entries one by one and another in one batch.
#[test]
fn a_batch_of_entries_is_applied_as_one_by_one() {
    let (primary, one_by_one, batched) = (store(), store(), store());
    let start = bson::Timestamp { time: 0, increment: 0 };
    let c = primary.collection(("db", "c"));
    let docs = (1..=20).map(|i| rawdoc! {"_id": i, "u": i, "n": 0}).collect();
    c.insert(docs, true, Durability::None);
    c.update(&set(doc! {"_id": 3}, doc! {"$inc": {"n": 1}}), Durability::None).unwrap();
    c.update(&set(doc! {"_id": 3}, doc! {"$set": {"s": "x"}}), Durability::None).unwrap();
    c.create_indexes(&[doc! {"key": {"u": 1}, "name": "u_1", "unique": true}]).unwrap();
    c.delete(&DeleteRequest { filter: doc! {"_id": 5}, just_one: true, ..DeleteRequest::default() }, Durability::None)
        .unwrap();
    c.insert(vec![rawdoc! {"_id": 21, "u": 5}], true, Durability::None);
    c.update(&set(doc! {"_id": 21}, doc! {"$inc": {"n": 2}}), Durability::None).unwrap();
    primary.collection(("db", "cap")).create(doc! {"capped": true, "size": 4096}).unwrap();
    for i in 0..10 {
        let pad = "p".repeat(1000);
        primary.collection(("db", "cap")).insert(vec![rawdoc! {"_id": i, "pad": pad}], true, Durability::None);
        c.update(&set(doc! {"_id": 1}, doc! {"$inc": {"n": 1}}), Durability::None).unwrap();
    }
    primary.collection(("db", "other")).insert(vec![rawdoc! {"_id": "a"}], true, Durability::None);
    c.delete(&DeleteRequest { filter: doc! {"_id": 2}, just_one: true, ..DeleteRequest::default() }, Durability::None)
        .unwrap();

    replicate(&primary, &one_by_one, start);
    let entries: Vec<_> = primary.oplog_after(start, usize::MAX).unwrap().into_iter().map(|(_, e)| e).collect();
    let refs: Vec<&bson::RawDocument> = entries.iter().map(|e| e.as_ref()).collect();
    batched.apply_replicated_batch(&refs).unwrap();

    let oplog = |store: &Store| store.oplog_after(start, usize::MAX).unwrap();
    for name in ["c", "cap", "other"] {
        assert_eq!(documents(&batched, name), documents(&primary, name), "{name}");
        assert_eq!(documents(&one_by_one, name), documents(&primary, name), "{name}");
        batched.collection(("db", name)).validate().unwrap();
    }
    assert_eq!(oplog(&batched), oplog(&primary), "the batched secondary's oplog is the primary's");
    assert_eq!(oplog(&one_by_one), oplog(&primary));
    let count = |store: &Store| store.collection(("db", "c")).estimated_document_count().unwrap();
    assert_eq!(count(&batched), count(&primary), "the collection's count moved by the runs' sums");
    let size = |store: &Store| store.collection(("db", "c")).stats(1).unwrap().get("size").cloned();
    assert_eq!(size(&batched), size(&primary));
    batched.verify_engine().unwrap();
}
