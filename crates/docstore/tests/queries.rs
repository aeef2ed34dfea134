//! API tests of reads: plans and explain, covered finds, index kinds, sorts and aggregation
//! within their memory limits, each on small, hand-written cases with MongoDB's answers.

use bson::{Bson, Document, doc};
use docstore::*;
use storage::Durability;

#[allow(dead_code, reason = "each test file uses some of the helpers")]
mod common;
use common::*;

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
