//! Goal: updates produce exactly MongoDB's documents and errors.
//! Method: table tests (update, document, expected document) per operator from the manual's
//! examples, then edge cases (missing fields, arrays, positional forms, type promotion) and
//! error rows (update, document, MongoDB code).

use bson::{Bson, Decimal128, Document, doc};
use query::filter::Filter;
use query::update::{ApplyOptions, Update, upsert_seed};

fn options(position: Option<usize>) -> ApplyOptions {
    ApplyOptions { position, now: bson::DateTime::from_millis(1_700_000_000_000) }
}

fn apply_with(
    update: &Document,
    filters: &[Document],
    document: &Document,
    position: Option<usize>,
) -> query::error::Result<Document> {
    Ok(Update::parse(update, filters)?.apply(document, &options(position))?.document)
}

fn check(rows: &[(Document, Document, Document)]) {
    for (update, document, expected) in rows {
        let got = apply_with(update, &[], document, None).unwrap_or_else(|e| panic!("{update} on {document}: {e}"));
        assert_eq!(&got, expected, "{update} on {document}");
    }
}

fn decimal(text: &str) -> Bson {
    Bson::Decimal128(text.parse::<Decimal128>().unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn field_operators() {
    check(&[
        (doc! {"$set": {"a": 2}}, doc! {"_id": 1, "a": 1}, doc! {"_id": 1, "a": 2}),
        (doc! {"$set": {"b.c": 2}}, doc! {"_id": 1}, doc! {"_id": 1, "b": {"c": 2}}),
        (doc! {"$set": {"a.2": 9}}, doc! {"_id": 1, "a": [1]}, doc! {"_id": 1, "a": [1, null, 9]}),
        (doc! {"$set": {"a.0": 9}}, doc! {"_id": 1, "a": {}}, doc! {"_id": 1, "a": {"0": 9}}),
        (doc! {"$set": {"z": 1, "b": 1, "m": 1}}, doc! {"_id": 1}, doc! {"_id": 1, "b": 1, "m": 1, "z": 1}),
        (doc! {"$set": {}}, doc! {"_id": 1}, doc! {"_id": 1}),
        (doc! {"$unset": {"a": ""}}, doc! {"_id": 1, "a": 1, "b": 2}, doc! {"_id": 1, "b": 2}),
        (doc! {"$unset": {"a.1": ""}}, doc! {"_id": 1, "a": [1, 2, 3]}, doc! {"_id": 1, "a": [1, null, 3]}),
        (doc! {"$unset": {"x.y": ""}}, doc! {"_id": 1}, doc! {"_id": 1}),
        (doc! {"$inc": {"a": 1}}, doc! {"_id": 1, "a": 1}, doc! {"_id": 1, "a": 2}),
        (doc! {"$inc": {"a": 1}}, doc! {"_id": 1}, doc! {"_id": 1, "a": 1}),
        (doc! {"$inc": {"a": 1.5}}, doc! {"_id": 1, "a": 1}, doc! {"_id": 1, "a": 2.5}),
        (
            doc! {"$inc": {"a": 1}},
            doc! {"_id": 1, "a": i32::MAX},
            doc! {"_id": 1, "a": Bson::Int64(i64::from(i32::MAX) + 1)},
        ),
        (doc! {"$inc": {"a": Bson::Int64(1)}}, doc! {"_id": 1, "a": 1}, doc! {"_id": 1, "a": Bson::Int64(2)}),
        (
            doc! {"$inc": {"a": decimal("0.1")}},
            doc! {"_id": 1, "a": decimal("0.2")},
            doc! {"_id": 1, "a": decimal("0.3")},
        ),
        (doc! {"$inc": {"a": 1}}, doc! {"_id": 1, "a": decimal("1.5")}, doc! {"_id": 1, "a": decimal("2.5")}),
        (doc! {"$inc": {"a.b": -2}}, doc! {"_id": 1, "a": {"b": 5}}, doc! {"_id": 1, "a": {"b": 3}}),
        (doc! {"$mul": {"a": 2}}, doc! {"_id": 1, "a": 3}, doc! {"_id": 1, "a": 6}),
        (doc! {"$mul": {"a": Bson::Int64(2)}}, doc! {"_id": 1}, doc! {"_id": 1, "a": Bson::Int64(0)}),
        (
            doc! {"$mul": {"a": decimal("1.5")}},
            doc! {"_id": 1, "a": decimal("2")},
            doc! {"_id": 1, "a": decimal("3.0")},
        ),
        (doc! {"$min": {"a": 1}}, doc! {"_id": 1, "a": 2}, doc! {"_id": 1, "a": 1}),
        (doc! {"$min": {"a": 3}}, doc! {"_id": 1, "a": 2}, doc! {"_id": 1, "a": 2}),
        (doc! {"$min": {"a": "x"}}, doc! {"_id": 1, "a": 2}, doc! {"_id": 1, "a": 2}),
        (doc! {"$min": {"a": null}}, doc! {"_id": 1, "a": 2}, doc! {"_id": 1, "a": null}),
        (doc! {"$max": {"a": 3}}, doc! {"_id": 1, "a": 2}, doc! {"_id": 1, "a": 3}),
        (doc! {"$max": {"a": 3}}, doc! {"_id": 1}, doc! {"_id": 1, "a": 3}),
        (doc! {"$rename": {"a": "b"}}, doc! {"_id": 1, "a": 1, "c": 2}, doc! {"_id": 1, "c": 2, "b": 1}),
        (doc! {"$rename": {"a.x": "y"}}, doc! {"_id": 1, "a": {"x": 1}}, doc! {"_id": 1, "a": {}, "y": 1}),
        (doc! {"$rename": {"nope": "b"}}, doc! {"_id": 1}, doc! {"_id": 1}),
        (doc! {"$setOnInsert": {"a": 1}}, doc! {"_id": 1}, doc! {"_id": 1}),
        (
            doc! {"$currentDate": {"d": true}},
            doc! {"_id": 1},
            doc! {"_id": 1, "d": bson::DateTime::from_millis(1_700_000_000_000)},
        ),
        (
            doc! {"$currentDate": {"t": {"$type": "timestamp"}}},
            doc! {"_id": 1},
            doc! {"_id": 1, "t": bson::Timestamp { time: 1_700_000_000, increment: 1 }},
        ),
        (doc! {"$bit": {"a": {"and": 10}}}, doc! {"_id": 1, "a": 13}, doc! {"_id": 1, "a": 8}),
        (doc! {"$bit": {"a": {"or": 5}}}, doc! {"_id": 1, "a": 3}, doc! {"_id": 1, "a": 7}),
        (doc! {"$bit": {"a": {"xor": Bson::Int64(5)}}}, doc! {"_id": 1, "a": 3}, doc! {"_id": 1, "a": Bson::Int64(6)}),
    ]);
}

#[test]
fn array_operators() {
    check(&[
        (doc! {"$push": {"a": 3}}, doc! {"_id": 1, "a": [1, 2]}, doc! {"_id": 1, "a": [1, 2, 3]}),
        (doc! {"$push": {"a": 3}}, doc! {"_id": 1}, doc! {"_id": 1, "a": [3]}),
        (doc! {"$push": {"a": [3]}}, doc! {"_id": 1, "a": []}, doc! {"_id": 1, "a": [[3]]}),
        (doc! {"$push": {"a": {"$each": [3, 4]}}}, doc! {"_id": 1, "a": [1]}, doc! {"_id": 1, "a": [1, 3, 4]}),
        (
            doc! {"$push": {"a": {"$each": [3], "$position": 0}}},
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"_id": 1, "a": [3, 1, 2]},
        ),
        (
            doc! {"$push": {"a": {"$each": [3], "$position": -1}}},
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"_id": 1, "a": [1, 3, 2]},
        ),
        (
            doc! {"$push": {"a": {"$each": [5, 1], "$sort": 1}}},
            doc! {"_id": 1, "a": [3]},
            doc! {"_id": 1, "a": [1, 3, 5]},
        ),
        (
            doc! {"$push": {"a": {"$each": [5, 1], "$sort": -1, "$slice": 2}}},
            doc! {"_id": 1, "a": [3]},
            doc! {"_id": 1, "a": [5, 3]},
        ),
        (
            doc! {"$push": {"a": {"$each": [4], "$slice": -2}}},
            doc! {"_id": 1, "a": [1, 2, 3]},
            doc! {"_id": 1, "a": [3, 4]},
        ),
        (doc! {"$push": {"a": {"$each": [], "$slice": 0}}}, doc! {"_id": 1, "a": [1]}, doc! {"_id": 1, "a": []}),
        (
            doc! {"$push": {"q": {"$each": [{"id": 3, "s": 8}, {"id": 4, "s": 7}], "$sort": {"s": 1}}}},
            doc! {"_id": 1, "q": [{"id": 1, "s": 9}]},
            doc! {"_id": 1, "q": [{"id": 4, "s": 7}, {"id": 3, "s": 8}, {"id": 1, "s": 9}]},
        ),
        (doc! {"$addToSet": {"a": 2}}, doc! {"_id": 1, "a": [1, 2]}, doc! {"_id": 1, "a": [1, 2]}),
        (doc! {"$addToSet": {"a": 2.0}}, doc! {"_id": 1, "a": [1, 2]}, doc! {"_id": 1, "a": [1, 2]}),
        (
            doc! {"$addToSet": {"a": {"$each": [2, 3, 3]}}},
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"_id": 1, "a": [1, 2, 3]},
        ),
        (doc! {"$addToSet": {"a": [1]}}, doc! {"_id": 1, "a": [1]}, doc! {"_id": 1, "a": [1, [1]]}),
        (doc! {"$pop": {"a": 1}}, doc! {"_id": 1, "a": [1, 2, 3]}, doc! {"_id": 1, "a": [1, 2]}),
        (doc! {"$pop": {"a": -1}}, doc! {"_id": 1, "a": [1, 2, 3]}, doc! {"_id": 1, "a": [2, 3]}),
        (doc! {"$pop": {"a": 1}}, doc! {"_id": 1}, doc! {"_id": 1}),
        (doc! {"$pull": {"a": 2}}, doc! {"_id": 1, "a": [1, 2, 3, 2]}, doc! {"_id": 1, "a": [1, 3]}),
        (doc! {"$pull": {"a": {"$gte": 6}}}, doc! {"_id": 1, "a": [3, 6, 9, 1]}, doc! {"_id": 1, "a": [3, 1]}),
        (doc! {"$pull": {"a": {"$in": ["x", "y"]}}}, doc! {"_id": 1, "a": ["x", "z"]}, doc! {"_id": 1, "a": ["z"]}),
        (
            doc! {"$pull": {"r": {"score": 8, "item": "B"}}},
            doc! {"_id": 1, "r": [{"item": "A", "score": 5}, {"item": "B", "score": 8, "c": 1}]},
            doc! {"_id": 1, "r": [{"item": "A", "score": 5}]},
        ),
        (doc! {"$pull": {"a": [1]}}, doc! {"_id": 1, "a": [[1], [2]]}, doc! {"_id": 1, "a": [[2]]}),
        (doc! {"$pullAll": {"a": [0, 5]}}, doc! {"_id": 1, "a": [0, 2, 5, 5, 1, 0]}, doc! {"_id": 1, "a": [2, 1]}),
    ]);
}

#[test]
fn positional_updates() {
    let grades = doc! {"_id": 1, "grades": [85, 80, 80]};
    let filter = Filter::parse(&doc! {"grades": 80}).unwrap_or_else(|e| panic!("{e}"));
    let position = filter.matches_with_position(&grades).unwrap_or_else(|e| panic!("{e}")).flatten();
    assert_eq!(position, Some(1));
    let got = apply_with(&doc! {"$set": {"grades.$": 82}}, &[], &grades, position).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, doc! {"_id": 1, "grades": [85, 82, 80]});

    let got = apply_with(&doc! {"$inc": {"grades.$[]": 10}}, &[], &grades, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, doc! {"_id": 1, "grades": [95, 90, 90]});

    let got = apply_with(&doc! {"$set": {"grades.$[e]": 100}}, &[doc! {"e": {"$gte": 85}}], &grades, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, doc! {"_id": 1, "grades": [100, 80, 80]});

    let students =
        doc! {"_id": 1, "g": [{"grade": 80, "mean": 75}, {"grade": 85, "mean": 90}, {"grade": 85, "mean": 85}]};
    let got = apply_with(&doc! {"$set": {"g.$[e].mean": 100}}, &[doc! {"e.grade": {"$gte": 85}}], &students, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got,
        doc! {"_id": 1, "g": [{"grade": 80, "mean": 75}, {"grade": 85, "mean": 100}, {"grade": 85, "mean": 100}]}
    );

    let nested = doc! {"_id": 1, "a": [{"b": [1, 2]}, {"b": [3]}]};
    let got = apply_with(&doc! {"$inc": {"a.$[].b.$[x]": 10}}, &[doc! {"x": {"$gt": 1}}], &nested, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, doc! {"_id": 1, "a": [{"b": [1, 12]}, {"b": [13]}]});
}

#[test]
fn replacement_and_modified() {
    let update = Update::parse(&doc! {"b": 2}, &[]).unwrap_or_else(|e| panic!("{e}"));
    let result = update.apply(&doc! {"_id": 7, "a": 1}, &options(None)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.document, doc! {"_id": 7, "b": 2});
    assert!(result.modified);
    let same = Update::parse(&doc! {"$set": {"a": 1}}, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(!same.apply(&doc! {"_id": 7, "a": 1}, &options(None)).unwrap_or_else(|e| panic!("{e}")).modified);
    let keep_id = Update::parse(&doc! {"_id": 7, "b": 2}, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(keep_id.apply(&doc! {"_id": 7}, &options(None)).is_ok());
}

#[test]
fn upserts() {
    assert_eq!(
        upsert_seed(&doc! {"a": 1, "b.c": "x", "d": {"$gt": 1}, "$and": [{"e": {"$eq": 2}}], "_id": 5})
            .unwrap_or_else(|e| panic!("{e}")),
        doc! {"_id": 5, "a": 1, "b": {"c": "x"}, "e": 2}
    );
    let update = Update::parse(&doc! {"$set": {"x": 1}, "$setOnInsert": {"y": 2}, "$inc": {"n": 1}}, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        update.apply_upsert(&doc! {"name": "n"}, &options(None)).unwrap_or_else(|e| panic!("{e}")),
        doc! {"name": "n", "n": 1, "x": 1, "y": 2}
    );
    let replacement = Update::parse(&doc! {"z": 1}, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        replacement.apply_upsert(&doc! {"_id": 3, "q": 1}, &options(None)).unwrap_or_else(|e| panic!("{e}")),
        doc! {"_id": 3, "z": 1}
    );
    assert_eq!(upsert_seed(&doc! {"a": 1, "a.b": 1}).err().map(|e| e.code()), Some(54));
    let change_id = Update::parse(&doc! {"$set": {"_id": 4}}, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(change_id.apply_upsert(&doc! {"_id": 3}, &options(None)).err().map(|e| e.code()), Some(66));
}

// Goal: `$rename` to a name with a NUL byte is refused when the update is parsed (BadValue, as
// mongod), not accepted and left for the store to fail encoding. Found by the `update` fuzz
// target: `fuzz/regressions/update/rename-to-a-null-byte` is `{$rename: {b: "bb", "d.e": "\0"}}`.
#[test]
fn rename_to_a_name_with_a_null_byte_is_refused() {
    for target in ["\0", "a\0b", "a.\0"] {
        let error = Update::parse(&doc! {"$rename": {"b": target}}, &[]).err();
        assert_eq!(error.map(|e| e.code()), Some(2), "$rename to {target:?}");
    }
}

// Goal: malformed updates and updates that do not fit the document fail with MongoDB's code.
#[test]
fn update_errors() {
    let rows: Vec<(Document, Vec<Document>, Document, i32)> = vec![
        (doc! {"$foo": {"a": 1}}, vec![], doc! {}, 9),
        (doc! {"$set": 5}, vec![], doc! {}, 9),
        (doc! {"$set": {"a": 1}, "b": 2}, vec![], doc! {}, 9),
        (doc! {"a": 1, "$set": {"b": 2}}, vec![], doc! {}, 52),
        (doc! {"$set": {"a": 1}, "$inc": {"a": 1}}, vec![], doc! {}, 40),
        (doc! {"$set": {"a": 1, "a.b": 1}}, vec![], doc! {}, 40),
        (doc! {"$set": {"a.b": 1}, "$unset": {"a": 1}}, vec![], doc! {}, 40),
        (doc! {"$rename": {"a": "b"}, "$set": {"b": 1}}, vec![], doc! {}, 40),
        (doc! {"$rename": {"a": "a"}}, vec![], doc! {}, 2),
        (doc! {"$rename": {"a": "a.b"}}, vec![], doc! {}, 2),
        (doc! {"$rename": {"a": 1}}, vec![], doc! {}, 2),
        (doc! {"$rename": {"a.$": "b"}}, vec![], doc! {}, 2),
        (doc! {"$set": {"": 1}}, vec![], doc! {}, 56),
        (doc! {"$set": {"a..b": 1}}, vec![], doc! {}, 56),
        (doc! {"$inc": {"a": "x"}}, vec![], doc! {}, 14),
        (doc! {"$mul": {"a": "x"}}, vec![], doc! {}, 14),
        (doc! {"$inc": {"a": 1}}, vec![], doc! {"_id": 1, "a": "s"}, 14),
        (doc! {"$set": {"_id": 2}}, vec![], doc! {"_id": 1}, 66),
        (doc! {"_id": 2, "a": 1}, vec![], doc! {"_id": 1}, 66),
        (doc! {"$unset": {"_id": 1}}, vec![], doc! {"_id": 1}, 66),
        (doc! {"$set": {"a.b": 1}}, vec![], doc! {"_id": 1, "a": 5}, 28),
        (doc! {"$set": {"a.b": 1}}, vec![], doc! {"_id": 1, "a": [1]}, 28),
        (doc! {"$push": {"a": 1}}, vec![], doc! {"_id": 1, "a": 5}, 2),
        (doc! {"$push": {"a": {"$each": 1}}}, vec![], doc! {}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$bogus": 1}}}, vec![], doc! {}, 2),
        (doc! {"$push": {"a": {"$each": [1], "$slice": "x"}}}, vec![], doc! {}, 2),
        (doc! {"$addToSet": {"a": {"$each": [1], "$sort": 1}}}, vec![], doc! {}, 2),
        (doc! {"$pop": {"a": 2}}, vec![], doc! {}, 9),
        (doc! {"$pop": {"a": 1}}, vec![], doc! {"_id": 1, "a": 1}, 14),
        (doc! {"$pullAll": {"a": 1}}, vec![], doc! {}, 2),
        (doc! {"$pull": {"a": 1}}, vec![], doc! {"_id": 1, "a": 1}, 2),
        (doc! {"$bit": {"a": {"and": 1.5}}}, vec![], doc! {}, 2),
        (doc! {"$bit": {"a": {"nand": 1}}}, vec![], doc! {}, 2),
        (doc! {"$bit": {"a": {"and": 1}}}, vec![], doc! {"_id": 1, "a": 1.0}, 2),
        (doc! {"$currentDate": {"a": {"$type": "year"}}}, vec![], doc! {}, 2),
        (doc! {"$set": {"a.$": 1}}, vec![], doc! {"_id": 1, "a": [1]}, 2),
        (doc! {"$set": {"a.$[]": 1}}, vec![], doc! {"_id": 1}, 2),
        (doc! {"$set": {"a.$[]": 1}}, vec![], doc! {"_id": 1, "a": 3}, 2),
        (doc! {"$set": {"a.$[x]": 1}}, vec![], doc! {"_id": 1, "a": [1]}, 2),
        (doc! {"$set": {"a": 1}}, vec![doc! {"x": 1}], doc! {"_id": 1}, 9),
        (doc! {"$set": {"a.$[x]": 1}}, vec![doc! {"x": 1}, doc! {"x": 2}], doc! {"_id": 1}, 9),
        (doc! {"$set": {"a.$[x]": 1}}, vec![doc! {"x": 1, "y": 2}], doc! {"_id": 1}, 9),
        (doc! {"$set": {"a.$[X]": 1}}, vec![doc! {"X": 1}], doc! {"_id": 1}, 2),
        (doc! {"a": 1}, vec![doc! {"x": 1}], doc! {"_id": 1}, 9),
    ];
    for (update, filters, document, code) in rows {
        match apply_with(&update, &filters, &document, None) {
            Ok(result) => panic!("{update} on {document} gave {result}"),
            Err(error) => assert_eq!(error.code(), code, "{update} on {document}: {error}"),
        }
    }
}
