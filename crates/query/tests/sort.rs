//! Goal: sort orders documents as MongoDB does, arrays by their min (ascending) or max
//! (descending), missing as null, [] before null; skip and limit parse and apply.
//! Method: table tests; each sorts documents tagged by `_id` and compares the id order.

use bson::{Bson, Document, doc};
use query::sort::{SkipLimit, SortSpec};

fn order(spec: Document, documents: Vec<Document>) -> Vec<i32> {
    let spec = SortSpec::parse(&spec).unwrap_or_else(|e| panic!("{e}"));
    let mut documents = documents;
    spec.sort(&mut documents);
    documents.iter().map(|d| d.get_i32("_id").unwrap_or_else(|e| panic!("{e}"))).collect()
}

#[test]
fn sort_table() {
    let documents = vec![
        doc! {"_id": 1, "a": 5},
        doc! {"_id": 2, "a": [1, 9]},
        doc! {"_id": 3},
        doc! {"_id": 4, "a": "x"},
        doc! {"_id": 5, "a": 3.5},
        doc! {"_id": 6, "a": []},
        doc! {"_id": 7, "a": null},
    ];
    assert_eq!(order(doc! {"a": 1}, documents.clone()), vec![6, 3, 7, 2, 5, 1, 4]);
    assert_eq!(order(doc! {"a": -1}, documents), vec![4, 2, 1, 5, 3, 7, 6]);

    let compound = vec![
        doc! {"_id": 1, "a": 1, "b": 2},
        doc! {"_id": 2, "a": 1, "b": 1},
        doc! {"_id": 3, "a": 0, "b": 3},
        doc! {"_id": 4, "a": Bson::Int64(1), "b": 1.5},
    ];
    assert_eq!(order(doc! {"a": 1, "b": -1}, compound.clone()), vec![3, 1, 4, 2]);
    assert_eq!(order(doc! {"a": -1, "b": 1}, compound), vec![2, 4, 1, 3]);

    let nested = vec![
        doc! {"_id": 1, "a": [{"b": 5}, {"b": 1}]},
        doc! {"_id": 2, "a": {"b": 3}},
        doc! {"_id": 3, "a": [{"c": 1}]},
    ];
    assert_eq!(order(doc! {"a.b": 1}, nested.clone()), vec![3, 1, 2]);
    assert_eq!(order(doc! {"a.b": -1}, nested), vec![1, 2, 3]);
}

#[test]
fn bad_specs_and_skip_limit() {
    assert_eq!(SortSpec::parse(&doc! {"a": 2}).err().map(|e| e.code()), Some(15975));
    assert_eq!(SortSpec::parse(&doc! {"a": "up"}).err().map(|e| e.code()), Some(15975));
    assert!(SortSpec::parse(&doc! {}).unwrap_or_else(|e| panic!("{e}")).is_empty());

    let paging = SkipLimit::parse(Some(&Bson::Int32(2)), Some(&Bson::Int64(-3))).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(paging.apply(0..10).collect::<Vec<_>>(), vec![2, 3, 4]);
    let unlimited = SkipLimit::parse(None, Some(&Bson::Int32(0))).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(unlimited.apply(0..3).count(), 3);
    assert_eq!(SkipLimit::parse(Some(&Bson::Int32(-1)), None).err().map(|e| e.code()), Some(2));
}
