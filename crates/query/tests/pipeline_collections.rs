//! Goal: the stages that touch other collections (`$lookup` both forms, `$unionWith`, `$out`,
//! `$merge` with each whenMatched/whenNotMatched) behave as the manual describes, through the
//! `CollectionSource` interface. Method: an `InMemorySource` holding the manual's example
//! collections; assert on the pipeline output and on the target collection afterwards.

use bson::{Bson, Document, doc};
use query::pipeline::{Context, InMemorySource, Namespace, Pipeline};

fn ns(collection: &str) -> Namespace {
    Namespace::new("test", collection)
}

fn run(stages: Vec<Document>, input: Vec<Document>, source: &InMemorySource) -> Result<Vec<Document>, i32> {
    let stages: Vec<Bson> = stages.into_iter().map(Bson::Document).collect();
    let pipeline = Pipeline::parse(&stages).map_err(|e| e.code())?;
    let context = Context::new("test", source);
    pipeline.run(input, &context).map_err(|e| e.code())
}

fn inventory() -> InMemorySource {
    InMemorySource::new().with_collection(
        ns("inventory"),
        vec![
            doc! {"_id": 1, "sku": "almonds", "instock": 120},
            doc! {"_id": 2, "sku": "bread", "instock": 80},
            doc! {"_id": 3, "sku": "cashews", "instock": 60},
            doc! {"_id": 4, "sku": "pecans", "instock": 70},
            doc! {"_id": 5, "sku": Bson::Null, "instock": 0},
            doc! {"_id": 6},
        ],
    )
}

#[test]
fn lookup_equality_matches_arrays_and_null() {
    let orders =
        vec![doc! {"_id": 1, "item": "almonds"}, doc! {"_id": 2, "item": ["pecans", "bread"]}, doc! {"_id": 3}];
    let out = run(
        vec![
            doc! {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "docs"}},
            doc! {"$project": {"ids": "$docs._id"}},
        ],
        orders,
        &inventory(),
    );
    assert_eq!(
        out,
        Ok(vec![doc! {"_id": 1, "ids": [1]}, doc! {"_id": 2, "ids": [2, 4]}, doc! {"_id": 3, "ids": [5, 6]}])
    );
}

#[test]
fn lookup_pipeline_with_let() {
    let orders =
        vec![doc! {"_id": 1, "item": "almonds", "ordered": 100}, doc! {"_id": 2, "item": "bread", "ordered": 90}];
    let out = run(
        vec![doc! {"$lookup": {
            "from": "inventory",
            "let": {"order_item": "$item", "order_qty": "$ordered"},
            "pipeline": [
                {"$match": {"$expr": {"$and": [{"$eq": ["$sku", "$$order_item"]}, {"$gte": ["$instock", "$$order_qty"]}]}}},
                {"$project": {"sku": 1, "_id": 0}},
            ],
            "as": "stock",
        }}],
        orders,
        &inventory(),
    );
    assert_eq!(
        out,
        Ok(vec![
            doc! {"_id": 1, "item": "almonds", "ordered": 100, "stock": [{"sku": "almonds"}]},
            doc! {"_id": 2, "item": "bread", "ordered": 90, "stock": []},
        ])
    );
    assert_eq!(run(vec![doc! {"$lookup": {"from": "inventory", "as": "x"}}], vec![], &inventory()), Err(9));
    assert_eq!(
        run(
            vec![doc! {"$lookup": {"from": "inventory", "pipeline": [{"$out": "y"}], "as": "x"}}],
            vec![],
            &inventory()
        ),
        Err(51047)
    );
}

#[test]
fn union_with_appends_another_collection() {
    let source = inventory()
        .with_collection(ns("extra"), vec![doc! {"_id": 10, "sku": "figs"}, doc! {"_id": 11, "sku": "dates"}]);
    let out = run(
        vec![
            doc! {"$unionWith": {"coll": "extra", "pipeline": [{"$match": {"sku": "figs"}}]}},
            doc! {"$project": {"_id": 1}},
        ],
        vec![doc! {"_id": 0}],
        &source,
    );
    assert_eq!(out, Ok(vec![doc! {"_id": 0}, doc! {"_id": 10}]));
    let plain = run(vec![doc! {"$unionWith": "extra"}, doc! {"$count": "n"}], vec![], &source);
    assert_eq!(plain, Ok(vec![doc! {"n": 2}]));
}

#[test]
fn out_replaces_target_contents() {
    let source = inventory().with_collection(ns("report"), vec![doc! {"_id": "old"}]);
    let out = run(
        vec![doc! {"$match": {"instock": {"$gt": 75}}}, doc! {"$project": {"sku": 1}}, doc! {"$out": "report"}],
        source.contents(&ns("inventory")),
        &source,
    );
    assert_eq!(out, Ok(vec![]));
    assert_eq!(
        source.contents(&ns("report")),
        vec![doc! {"_id": 1, "sku": "almonds"}, doc! {"_id": 2, "sku": "bread"}]
    );
    let duplicate = run(
        vec![doc! {"$project": {"_id": {"$literal": 1}}}, doc! {"$out": "report"}],
        source.contents(&ns("inventory")),
        &source,
    );
    assert_eq!(duplicate, Err(11000));
    assert_eq!(source.contents(&ns("report")).len(), 2, "a failed $out leaves the old contents");
}

#[test]
fn merge_when_matched_and_not_matched() {
    let source = InMemorySource::new().with_collection(ns("totals"), vec![doc! {"_id": "a", "total": 1, "keep": true}]);
    let input = vec![doc! {"_id": "a", "total": 5}, doc! {"_id": "b", "total": 7}];
    assert_eq!(run(vec![doc! {"$merge": {"into": "totals"}}], input.clone(), &source), Ok(vec![]));
    assert_eq!(
        source.contents(&ns("totals")),
        vec![doc! {"_id": "a", "total": 5, "keep": true}, doc! {"_id": "b", "total": 7}]
    );

    let replace = run(
        vec![doc! {"$merge": {"into": "totals", "whenMatched": "replace", "whenNotMatched": "discard"}}],
        vec![doc! {"_id": "a", "total": 9}, doc! {"_id": "z", "total": 0}],
        &source,
    );
    assert_eq!(replace, Ok(vec![]));
    assert_eq!(source.contents(&ns("totals")), vec![doc! {"_id": "a", "total": 9}, doc! {"_id": "b", "total": 7}]);

    let keep = run(
        vec![doc! {"$merge": {"into": "totals", "whenMatched": "keepExisting"}}],
        vec![doc! {"_id": "b", "total": 100}],
        &source,
    );
    assert_eq!(keep, Ok(vec![]));
    assert_eq!(source.contents(&ns("totals")).get(1), Some(&doc! {"_id": "b", "total": 7}));

    let pipeline = run(
        vec![
            doc! {"$merge": {"into": "totals", "whenMatched": [{"$set": {"total": {"$add": ["$total", "$$new.total"]}}}]}},
        ],
        vec![doc! {"_id": "b", "total": 3}],
        &source,
    );
    assert_eq!(pipeline, Ok(vec![]));
    assert_eq!(source.contents(&ns("totals")).get(1), Some(&doc! {"_id": "b", "total": 10}));

    let fail_matched =
        run(vec![doc! {"$merge": {"into": "totals", "whenMatched": "fail"}}], vec![doc! {"_id": "a"}], &source);
    assert_eq!(fail_matched, Err(11000));
    let fail_missing =
        run(vec![doc! {"$merge": {"into": "totals", "whenNotMatched": "fail"}}], vec![doc! {"_id": "new"}], &source);
    assert_eq!(fail_missing, Err(13113));
    let by_field = run(
        vec![doc! {"$merge": {"into": "totals", "on": "total", "whenMatched": "merge"}}],
        vec![doc! {"total": 10, "tag": "x"}],
        &source,
    );
    assert_eq!(by_field, Ok(vec![]));
    assert_eq!(source.contents(&ns("totals")).get(1), Some(&doc! {"_id": "b", "total": 10, "tag": "x"}));
    let missing_on = run(vec![doc! {"$merge": {"into": "totals", "on": "nope"}}], vec![doc! {"_id": 1}], &source);
    assert_eq!(missing_on, Err(51132));
    assert_eq!(run(vec![doc! {"$merge": {"into": "totals", "whenMatched": "sideways"}}], vec![], &source), Err(2));
}
