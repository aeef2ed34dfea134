//! Goal: each pipeline stage reproduces the manual's examples and MongoDB's parse errors.
//! Method: run small pipelines over literal documents through an in-memory source and compare
//! whole outputs (order-insensitive only where MongoDB leaves order unspecified).

use bson::{Bson, Document, doc};
use query::pipeline::{Context, InMemorySource, Namespace, Pipeline, apply_pipeline_update};

fn run_with(stages: Vec<Document>, input: Vec<Document>, source: &InMemorySource) -> Result<Vec<Document>, i32> {
    let stages: Vec<Bson> = stages.into_iter().map(Bson::Document).collect();
    let pipeline = Pipeline::parse(&stages).map_err(|e| e.code())?;
    let context = Context::new("test", source).with_seed(7);
    pipeline.run(input, &context).map_err(|e| e.code())
}

fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>, i32> {
    run_with(stages, input, &InMemorySource::new())
}

fn sales() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "abc", "price": 10, "quantity": 2, "tags": ["x", "y"]},
        doc! {"_id": 2, "item": "jkl", "price": 20, "quantity": 1, "tags": []},
        doc! {"_id": 3, "item": "xyz", "price": 5, "quantity": 10, "tags": Bson::Null},
        doc! {"_id": 4, "item": "xyz", "price": 5, "quantity": 20},
        doc! {"_id": 5, "item": "abc", "price": 10, "quantity": 10, "tags": "z"},
    ]
}

#[test]
fn match_project_limit_skip() {
    let out = run(
        vec![
            doc! {"$match": {"price": {"$gte": 10}}},
            doc! {"$project": {"item": 1, "total": {"$multiply": ["$price", "$quantity"]}}},
            doc! {"$skip": 1},
            doc! {"$limit": 1},
        ],
        sales(),
    );
    assert_eq!(out, Ok(vec![doc! {"_id": 2, "item": "jkl", "total": 20}]));
    let with_expr =
        run(vec![doc! {"$match": {"$expr": {"$gt": ["$quantity", "$price"]}}}, doc! {"$project": {"_id": 1}}], sales());
    assert_eq!(with_expr, Ok(vec![doc! {"_id": 3}, doc! {"_id": 4}]));
}

#[test]
fn project_modes_and_errors() {
    let input = vec![doc! {"_id": 1, "a": {"b": 1, "c": 2}, "d": [{"b": 1, "c": 2}, 5], "e": 3}];
    assert_eq!(
        run(vec![doc! {"$project": {"a.b": 1, "d.c": 1}}], input.clone()),
        Ok(vec![doc! {"_id": 1, "a": {"b": 1}, "d": [{"c": 2}]}])
    );
    assert_eq!(
        run(vec![doc! {"$project": {"a.b": 0, "_id": 0, "e": 0}}], input.clone()),
        Ok(vec![doc! {"a": {"c": 2}, "d": [{"b": 1, "c": 2}, 5]}])
    );
    assert_eq!(
        run(vec![doc! {"$project": {"_id": 0, "x": "$a.c", "lit": {"$literal": 1}}}], input.clone()),
        Ok(vec![doc! {"x": 2, "lit": 1}])
    );
    assert_eq!(
        run(vec![doc! {"$project": {"new": {"deep": "$e"}}}], input.clone()),
        Ok(vec![doc! {"_id": 1, "new": {"deep": 3}}])
    );
    assert_eq!(run(vec![doc! {"$project": {"a": 1, "e": 0}}], input.clone()), Err(31254));
    assert_eq!(run(vec![doc! {"$project": {"a": 1, "a.b": 1}}], input.clone()), Err(31250));
    assert_eq!(run(vec![doc! {"$project": {}}], input.clone()), Err(51272));
    assert_eq!(run(vec![doc! {"$unset": ["a", "d"]}], input.clone()), Ok(vec![doc! {"_id": 1, "e": 3}]));
    assert_eq!(run(vec![doc! {"$unset": 5}], input), Err(31002));
}

#[test]
fn add_fields_replaces_in_place_and_merges_subdocuments() {
    let input = vec![doc! {"_id": 1, "a": {"b": 1}, "c": 2, "arr": [{"x": 1}, {"x": 2}]}];
    let out = run(
        vec![doc! {"$addFields": {"c": "new", "a": {"z": "$c"}, "total": {"$sum": "$arr.x"}, "arr.y": 0}}],
        input.clone(),
    );
    assert_eq!(
        out,
        Ok(vec![
            doc! {"_id": 1, "a": {"b": 1, "z": 2}, "c": "new", "arr": [{"x": 1, "y": 0}, {"x": 2, "y": 0}], "total": 3}
        ])
    );
    assert_eq!(
        run(vec![doc! {"$set": {"c": "$$REMOVE"}}], input),
        Ok(vec![doc! {"_id": 1, "a": {"b": 1}, "arr": [{"x": 1}, {"x": 2}]}])
    );
}

#[test]
fn group_with_accumulators() {
    let out = run(
        vec![
            doc! {"$group": {
                "_id": "$item",
                "total": {"$sum": {"$multiply": ["$price", "$quantity"]}},
                "avgQty": {"$avg": "$quantity"},
                "maxQty": {"$max": "$quantity"},
                "minQty": {"$min": "$quantity"},
                "first": {"$first": "$_id"},
                "last": {"$last": "$_id"},
                "ids": {"$push": "$_id"},
                "prices": {"$addToSet": "$price"},
                "n": {"$count": {}},
                "sd": {"$stdDevPop": "$quantity"},
                "merged": {"$mergeObjects": {"q": "$quantity"}},
            }},
            doc! {"$sort": {"_id": 1}},
        ],
        sales(),
    );
    let expected = vec![
        doc! {"_id": "abc", "total": 120, "avgQty": 6.0, "maxQty": 10, "minQty": 2, "first": 1, "last": 5, "ids": [1, 5], "prices": [10], "n": 2, "sd": 4.0, "merged": {"q": 10}},
        doc! {"_id": "jkl", "total": 20, "avgQty": 1.0, "maxQty": 1, "minQty": 1, "first": 2, "last": 2, "ids": [2], "prices": [20], "n": 1, "sd": 0.0, "merged": {"q": 1}},
        doc! {"_id": "xyz", "total": 150, "avgQty": 15.0, "maxQty": 20, "minQty": 10, "first": 3, "last": 4, "ids": [3, 4], "prices": [5], "n": 2, "sd": 5.0, "merged": {"q": 20}},
    ];
    assert_eq!(out, Ok(expected));
}

#[test]
fn group_keys_use_value_equality_and_null_for_missing() {
    let input = vec![doc! {"k": 1}, doc! {"k": 1.0}, doc! {"k": 1_i64}, doc! {"k": Bson::Null}, doc! {}];
    let out = run(vec![doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}}, doc! {"$sort": {"_id": 1}}], input.clone());
    assert_eq!(out, Ok(vec![doc! {"_id": Bson::Null, "n": 2}, doc! {"_id": 1, "n": 3}]));
    let all = run(vec![doc! {"$group": {"_id": null, "n": {"$sum": 1}}}], input.clone());
    assert_eq!(all, Ok(vec![doc! {"_id": Bson::Null, "n": 5}]));
    assert_eq!(run(vec![doc! {"$group": {"n": {"$sum": 1}}}], input.clone()), Err(15955));
    assert_eq!(run(vec![doc! {"$group": {"_id": 1, "n": {"$bogus": 1}}}], input.clone()), Err(15952));
    assert_eq!(run(vec![doc! {"$group": {"_id": 1, "n": 1}}], input.clone()), Err(40234));
    assert_eq!(run(vec![doc! {"$group": {"_id": 1, "a.b": {"$sum": 1}}}], input), Err(40235));
}

#[test]
fn sort_count_and_sort_by_count() {
    let out = run(vec![doc! {"$sort": {"price": -1, "quantity": 1}}, doc! {"$project": {"_id": 1}}], sales());
    assert_eq!(out, Ok(vec![doc! {"_id": 2}, doc! {"_id": 1}, doc! {"_id": 5}, doc! {"_id": 3}, doc! {"_id": 4}]));
    assert_eq!(run(vec![doc! {"$count": "n"}], sales()), Ok(vec![doc! {"n": 5}]));
    assert_eq!(run(vec![doc! {"$match": {"price": 999}}, doc! {"$count": "n"}], sales()), Ok(vec![]));
    assert_eq!(run(vec![doc! {"$count": "$n"}], sales()), Err(40158));
    let by_count = run(vec![doc! {"$sortByCount": "$item"}, doc! {"$limit": 2}], sales());
    let counts: Vec<Bson> =
        by_count.unwrap_or_default().iter().map(|d| d.get("count").cloned().unwrap_or(Bson::Null)).collect();
    assert_eq!(counts, vec![Bson::Int32(2), Bson::Int32(2)]);
    assert_eq!(run(vec![doc! {"$sort": {"a": 2}}], sales()), Err(15975));
    assert_eq!(run(vec![doc! {"$sort": {}}], sales()), Err(15976));
    let arrays = vec![doc! {"_id": 1, "a": [3, 1]}, doc! {"_id": 2, "a": 2}, doc! {"_id": 3, "a": []}, doc! {"_id": 4}];
    let ascending = run(vec![doc! {"$sort": {"a": 1}}, doc! {"$project": {"_id": 1}}], arrays.clone());
    assert_eq!(ascending, Ok(vec![doc! {"_id": 3}, doc! {"_id": 4}, doc! {"_id": 1}, doc! {"_id": 2}]));
    let descending = run(vec![doc! {"$sort": {"a": -1}}, doc! {"$project": {"_id": 1}}], arrays);
    assert_eq!(descending, Ok(vec![doc! {"_id": 1}, doc! {"_id": 2}, doc! {"_id": 4}, doc! {"_id": 3}]));
}

#[test]
fn unwind_options() {
    let out = run(vec![doc! {"$unwind": "$tags"}, doc! {"$project": {"tags": 1}}], sales());
    assert_eq!(out, Ok(vec![doc! {"_id": 1, "tags": "x"}, doc! {"_id": 1, "tags": "y"}, doc! {"_id": 5, "tags": "z"}]));
    let preserved = run(
        vec![
            doc! {"$unwind": {"path": "$tags", "includeArrayIndex": "idx", "preserveNullAndEmptyArrays": true}},
            doc! {"$project": {"tags": 1, "idx": 1}},
        ],
        sales(),
    );
    assert_eq!(
        preserved,
        Ok(vec![
            doc! {"_id": 1, "tags": "x", "idx": 0_i64},
            doc! {"_id": 1, "tags": "y", "idx": 1_i64},
            doc! {"_id": 2, "idx": Bson::Null},
            doc! {"_id": 3, "tags": Bson::Null, "idx": Bson::Null},
            doc! {"_id": 4, "idx": Bson::Null},
            doc! {"_id": 5, "tags": "z", "idx": Bson::Null},
        ])
    );
    assert_eq!(run(vec![doc! {"$unwind": "tags"}], sales()), Err(28818));
    assert_eq!(run(vec![doc! {"$unwind": {"path": "$tags", "bogus": 1}}], sales()), Err(28811));
    assert_eq!(run(vec![doc! {"$unwind": {"includeArrayIndex": "i"}}], sales()), Err(28812));
    assert_eq!(run(vec![doc! {"$unwind": 5}], sales()), Err(15981));
}

#[test]
fn replace_root_redact_facet_sample() {
    let input = vec![doc! {"_id": 1, "inner": {"a": 1}}, doc! {"_id": 2}];
    assert_eq!(run(vec![doc! {"$replaceRoot": {"newRoot": "$inner"}}], input[..1].to_vec()), Ok(vec![doc! {"a": 1}]));
    assert_eq!(run(vec![doc! {"$replaceRoot": {"newRoot": "$inner"}}], input.clone()), Err(40228));
    assert_eq!(
        run(vec![doc! {"$replaceWith": {"$mergeObjects": [{"inner": 0}, "$$ROOT"]}}], input.clone()),
        Ok(vec![doc! {"inner": {"a": 1}, "_id": 1}, doc! {"inner": 0, "_id": 2}])
    );
    let secret =
        vec![doc! {"_id": 1, "level": 1, "sub": {"level": 5, "x": 1}, "list": [{"level": 5}, {"level": 1, "y": 2}]}];
    let redacted =
        run(vec![doc! {"$redact": {"$cond": [{"$gt": ["$level", 3]}, "$$PRUNE", "$$DESCEND"]}}], secret.clone());
    assert_eq!(redacted, Ok(vec![doc! {"_id": 1, "level": 1, "list": [{"level": 1, "y": 2}]}]));
    assert_eq!(run(vec![doc! {"$redact": "nope"}], secret), Err(17053));
    let faceted = run(
        vec![
            doc! {"$facet": {"cheap": [{"$match": {"price": {"$lt": 10}}}, {"$count": "n"}], "items": [{"$group": {"_id": null, "ids": {"$push": "$_id"}}}]}},
        ],
        sales(),
    );
    assert_eq!(faceted, Ok(vec![doc! {"cheap": [{"n": 2}], "items": [{"_id": Bson::Null, "ids": [1, 2, 3, 4, 5]}]}]));
    assert_eq!(run(vec![doc! {"$facet": {"x": [{"$out": "c"}]}}], sales()), Err(40600));
    let sampled = run(vec![doc! {"$sample": {"size": 3}}], sales()).unwrap_or_default();
    assert_eq!(sampled.len(), 3);
    let again = run(vec![doc! {"$sample": {"size": 3}}], sales()).unwrap_or_default();
    assert_eq!(sampled, again, "a seeded context samples repeatably");
    assert_eq!(run(vec![doc! {"$sample": {"size": 10}}], sales()).map(|d| d.len()), Ok(5));
    assert_eq!(run(vec![doc! {"$sample": {"size": -1}}], sales()), Err(28747));
}

#[test]
fn bucket_and_bucket_auto() {
    let artwork = vec![
        doc! {"_id": 1, "price": 199.99, "year": 1926},
        doc! {"_id": 2, "price": 280.0, "year": 1902},
        doc! {"_id": 3, "price": 76.04, "year": 1925},
        doc! {"_id": 4, "price": 167.30, "year": 1939},
        doc! {"_id": 5, "price": 483.0, "year": 1924},
        doc! {"_id": 6, "price": 385.0, "year": 1891},
        doc! {"_id": 7, "price": 159.0, "year": 1919},
        doc! {"_id": 8, "year": 1920},
    ];
    let buckets = run(
        vec![
            doc! {"$bucket": {"groupBy": "$price", "boundaries": [0, 200, 400], "default": "Other", "output": {"count": {"$sum": 1}, "ids": {"$push": "$_id"}}}},
        ],
        artwork.clone(),
    );
    assert_eq!(
        buckets,
        Ok(vec![
            doc! {"_id": 0, "count": 4, "ids": [1, 3, 4, 7]},
            doc! {"_id": 200, "count": 2, "ids": [2, 6]},
            doc! {"_id": "Other", "count": 2, "ids": [5, 8]},
        ])
    );
    assert_eq!(run(vec![doc! {"$bucket": {"groupBy": "$price", "boundaries": [0, 200]}}], artwork.clone()), Err(40066));
    assert_eq!(run(vec![doc! {"$bucket": {"groupBy": "$price", "boundaries": [200, 0]}}], artwork.clone()), Err(40194));
    assert_eq!(run(vec![doc! {"$bucket": {"groupBy": "$price", "boundaries": [0]}}], artwork.clone()), Err(40192));
    assert_eq!(
        run(vec![doc! {"$bucket": {"groupBy": "$price", "boundaries": [0, 10], "default": 5}}], artwork.clone()),
        Err(40199)
    );
    let auto = run(
        vec![doc! {"$match": {"price": {"$exists": true}}}, doc! {"$bucketAuto": {"groupBy": "$price", "buckets": 3}}],
        artwork.clone(),
    );
    assert_eq!(
        auto,
        Ok(vec![
            doc! {"_id": {"min": 76.04, "max": 167.30}, "count": 2},
            doc! {"_id": {"min": 167.30, "max": 280.0}, "count": 2},
            doc! {"_id": {"min": 280.0, "max": 483.0}, "count": 3},
        ])
    );
    assert_eq!(run(vec![doc! {"$bucketAuto": {"groupBy": "$price", "buckets": 0}}], artwork), Err(40243));
}

#[test]
fn pipeline_level_errors() {
    assert_eq!(run(vec![doc! {"$bogus": {}}], vec![]), Err(40324));
    assert_eq!(run(vec![doc! {"$match": {}, "$limit": 1}], vec![]), Err(40323));
    assert_eq!(run(vec![doc! {"$limit": 0}], vec![]), Err(15958));
    assert_eq!(run(vec![doc! {"$limit": "x"}], vec![]), Err(15957));
    assert_eq!(run(vec![doc! {"$skip": -1}], vec![]), Err(15956));
    assert_eq!(run(vec![doc! {"$out": "x"}, doc! {"$limit": 1}], vec![]), Err(40601));
}

#[test]
fn pipeline_update_applies_reshaping_stages() {
    let document = doc! {"_id": 1, "a": 1, "b": 2};
    let stages =
        vec![Bson::Document(doc! {"$set": {"c": {"$add": ["$a", "$b"]}}}), Bson::Document(doc! {"$unset": "a"})];
    assert_eq!(apply_pipeline_update(&document, &stages).map_err(|e| e.code()), Ok(doc! {"_id": 1, "b": 2, "c": 3}));
    let replace = vec![Bson::Document(doc! {"$replaceWith": {"_id": "$_id", "sum": {"$add": ["$a", "$b"]}}})];
    assert_eq!(apply_pipeline_update(&document, &replace).map_err(|e| e.code()), Ok(doc! {"_id": 1, "sum": 3}));
    let bad = vec![Bson::Document(doc! {"$group": {"_id": null}})];
    assert_eq!(apply_pipeline_update(&document, &bad).map_err(|e| e.code()), Err(72));
}

#[test]
fn limit_stops_pulling_input() {
    // Atomic, not a Cell: a pipeline's stream is Send (a docstore cursor carries it).
    let pulled = std::sync::atomic::AtomicUsize::new(0);
    let input = (0..1000).map(|i| {
        pulled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(doc! {"i": i})
    });
    let stages = vec![Bson::Document(doc! {"$match": {"i": {"$gte": 10}}}), Bson::Document(doc! {"$limit": 2})];
    let pipeline = Pipeline::parse(&stages).unwrap_or_default();
    let source = InMemorySource::new();
    let context = Context::new("test", &source);
    let out: Vec<_> = pipeline.stream(Box::new(input), &context).collect();
    assert_eq!(out.len(), 2);
    assert_eq!(pulled.load(std::sync::atomic::Ordering::Relaxed), 12);
    let _ = Namespace::new("test", "unused");
}

/// Goal: the n-element accumulators in `$group` as the manual shows them: `$firstN $lastN
/// $maxN $minN` over an input, `$top $bottom $topN $bottomN` by a sort, ties in arrival order,
/// nulls kept except by `$maxN`/`$minN`, and their parse errors.
#[test]
fn n_element_group_accumulators() {
    let games = vec![
        doc! {"game": "G1", "player": "p1", "score": 31},
        doc! {"game": "G1", "player": "p2", "score": 33},
        doc! {"game": "G1", "player": "p3", "score": 99},
        doc! {"game": "G1", "player": "p4", "score": 1},
        doc! {"game": "G1", "player": "p5", "score": Bson::Null},
        doc! {"game": "G2", "player": "p1", "score": 10},
        doc! {"game": "G2", "player": "p2", "score": 10},
    ];
    let group = doc! {"$group": {
        "_id": "$game",
        "first2": {"$firstN": {"n": 2, "input": "$player"}},
        "last2": {"$lastN": {"n": 2, "input": "$score"}},
        "max2": {"$maxN": {"n": 2, "input": "$score"}},
        "min2": {"$minN": {"n": 2, "input": "$score"}},
        "best": {"$top": {"sortBy": {"score": -1}, "output": ["$player", "$score"]}},
        "worst": {"$bottom": {"sortBy": {"score": -1}, "output": "$player"}},
        "top2": {"$topN": {"n": 2, "sortBy": {"score": -1, "player": 1}, "output": "$player"}},
        "bottom2": {"$bottomN": {"n": 2, "sortBy": {"score": -1}, "output": "$player"}},
    }};
    let out = run(vec![group, doc! {"$sort": {"_id": 1}}], games);
    assert_eq!(
        out,
        Ok(vec![
            doc! {"_id": "G1", "first2": ["p1", "p2"], "last2": [1, Bson::Null], "max2": [99, 33], "min2": [1, 31],
            "best": ["p3", 99], "worst": "p5", "top2": ["p3", "p2"], "bottom2": ["p4", "p5"]},
            doc! {"_id": "G2", "first2": ["p1", "p2"], "last2": [10, 10], "max2": [10, 10], "min2": [10, 10],
            "best": ["p1", 10], "worst": "p2", "top2": ["p1", "p2"], "bottom2": ["p1", "p2"]},
        ])
    );
    let errors = [
        (doc! {"$group": {"_id": null, "x": {"$firstN": {"input": "$a"}}}}, 5787906),
        (doc! {"$group": {"_id": null, "x": {"$firstN": {"n": 1}}}}, 5787907),
        (doc! {"$group": {"_id": null, "x": {"$firstN": {"n": 1, "input": "$a", "y": 1}}}}, 5787901),
        (doc! {"$group": {"_id": null, "x": {"$top": {"n": 1, "sortBy": {"a": 1}, "output": "$a"}}}}, 5788002),
        (doc! {"$group": {"_id": null, "x": {"$topN": {"n": 1, "output": "$a"}}}}, 5788005),
        (doc! {"$group": {"_id": null, "x": {"$top": "$a"}}}, 5788001),
    ];
    for (stage, code) in errors {
        assert_eq!(run(vec![stage.clone()], vec![doc! {"a": 1}]), Err(code), "{stage}");
    }
    let zero = doc! {"$group": {"_id": null, "x": {"$maxN": {"n": 0, "input": "$a"}}}};
    assert_eq!(run(vec![zero], vec![doc! {"a": 1}]), Err(5787908));
}
