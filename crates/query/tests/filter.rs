//! Goal: filters match exactly the documents MongoDB's would, and reject malformed filters
//! with MongoDB's error codes.
//! Method: table tests per operator, from the manual's examples and the edge cases: empty and
//! nested arrays, missing fields, mixed numeric types, NaN, decimal, dotted paths into arrays
//! of documents. Each row is (filter, document, expected).

use bson::{Bson, Decimal128, Document, doc};
use query::filter::Filter;

fn check(rows: &[(Document, Document, bool)]) {
    for (filter, document, expected) in rows {
        let parsed = Filter::parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
        let got = parsed.matches(document).unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(got, *expected, "filter {filter} on {document}");
        let raw = bson::RawDocumentBuf::try_from(document).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            parsed.matches_raw(&raw).unwrap_or_else(|e| panic!("{e}")),
            *expected,
            "raw: filter {filter} on {document}"
        );
    }
}

fn decimal(text: &str) -> Bson {
    Bson::Decimal128(text.parse::<Decimal128>().unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn equality() {
    check(&[
        (doc! {"a": 1}, doc! {"a": 1}, true),
        (doc! {"a": 1}, doc! {"a": 1.0}, true),
        (doc! {"a": 1}, doc! {"a": Bson::Int64(1)}, true),
        (doc! {"a": 1}, doc! {"a": decimal("1.00")}, true),
        (doc! {"a": 1}, doc! {"a": "1"}, false),
        (doc! {"a": 1}, doc! {"a": [2, 1]}, true),
        (doc! {"a": [2, 1]}, doc! {"a": [2, 1]}, true),
        (doc! {"a": [2, 1]}, doc! {"a": [1, 2]}, false),
        (doc! {"a": [2, 1]}, doc! {"a": [[2, 1], 3]}, true),
        (doc! {"a": []}, doc! {"a": []}, true),
        (doc! {"a": []}, doc! {"a": [[]]}, true),
        (doc! {"a": []}, doc! {"a": [1]}, false),
        (doc! {"a": null}, doc! {}, true),
        (doc! {"a": null}, doc! {"a": null}, true),
        (doc! {"a": null}, doc! {"a": 0}, false),
        (doc! {"a": null}, doc! {"a": [1, null]}, true),
        (doc! {"a.b": null}, doc! {"a": [{"b": 1}, {"c": 1}]}, true),
        (doc! {"a.b": null}, doc! {"a": [{"b": 1}]}, false),
        (doc! {"a.b": null}, doc! {"a": 5}, true),
        (doc! {"a.b": null}, doc! {"a": [1, 2]}, false),
        (doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": [2, 3]}]}, true),
        (doc! {"a.b.c": 2}, doc! {"a": [{"b": [{"c": 1}, {"c": 2}]}]}, true),
        (doc! {"a.1": 5}, doc! {"a": [4, 5]}, true),
        (doc! {"a.0": 5}, doc! {"a": [4, 5]}, false),
        (doc! {"a.0.b": 1}, doc! {"a": [{"b": 1}, {"b": 2}]}, true),
        (doc! {"a.1.b": 1}, doc! {"a": [{"b": 1}, {"b": 2}]}, false),
        (doc! {"a": {"b": 1}}, doc! {"a": {"b": 1}}, true),
        (doc! {"a": {"b": 1}}, doc! {"a": {"b": 1, "c": 2}}, false),
        (doc! {"a": {"b": 1, "c": 2}}, doc! {"a": {"c": 2, "b": 1}}, false),
        (doc! {"a": {"$eq": 1}}, doc! {"a": [1]}, true),
        (doc! {"a": f64::NAN}, doc! {"a": f64::NAN}, true),
        (doc! {"a": f64::NAN}, doc! {"a": decimal("NaN")}, true),
        (doc! {"a": -0.0}, doc! {"a": 0}, true),
        (doc! {"a": Bson::Int64(9007199254740993)}, doc! {"a": 9007199254740992.0}, false),
        (doc! {"a": decimal("0.1")}, doc! {"a": 0.1}, false),
        (doc! {"a": Bson::MinKey}, doc! {"a": Bson::MinKey}, true),
        (doc! {"a": Bson::Undefined}, doc! {"a": Bson::Null}, false),
    ]);
}

#[test]
fn comparisons() {
    check(&[
        (doc! {"a": {"$gt": 1}}, doc! {"a": 2}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": 1.5}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gte": 1}}, doc! {"a": decimal("1.0")}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": "2"}, false),
        (doc! {"a": {"$lt": "b"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$lt": "b"}}, doc! {"a": "a"}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": [0, 5]}, true),
        (doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": [0, 5]}, true),
        (doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}, doc! {"a": [0, 5]}, false),
        (doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}, doc! {"a": [0, 2]}, true),
        (doc! {"a": {"$lt": 1}}, doc! {}, false),
        (doc! {"a": {"$gte": null}}, doc! {}, true),
        (doc! {"a": {"$lte": null}}, doc! {"a": null}, true),
        (doc! {"a": {"$gt": null}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$lt": Bson::MaxKey}}, doc! {"a": {"b": 1}}, true),
        (doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 1}, false),
        (doc! {"a": {"$lt": f64::NAN}}, doc! {"a": 1}, false),
        (doc! {"a": {"$lt": 1}}, doc! {"a": f64::NAN}, false),
        (doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}, true),
        (doc! {"a": {"$gt": [1]}}, doc! {"a": [2]}, true),
        (doc! {"a": {"$gt": [1]}}, doc! {"a": [[2]]}, true),
        (doc! {"a": {"$gt": Bson::Int64(i64::MAX)}}, doc! {"a": 9223372036854775808.0}, true),
        (doc! {"a": {"$lt": bson::DateTime::from_millis(10)}}, doc! {"a": bson::DateTime::from_millis(-10)}, true),
        (doc! {"a": {"$lt": bson::DateTime::from_millis(10)}}, doc! {"a": 5}, false),
        (doc! {"a.b": {"$gt": 2}}, doc! {"a": [{"b": 1}, {"b": 3}]}, true),
    ]);
}

#[test]
fn negations() {
    check(&[
        (doc! {"a": {"$ne": 1}}, doc! {"a": 2}, true),
        (doc! {"a": {"$ne": 1}}, doc! {"a": [1, 2]}, false),
        (doc! {"a": {"$ne": 1}}, doc! {}, true),
        (doc! {"a": {"$ne": null}}, doc! {}, false),
        (doc! {"a": {"$ne": null}}, doc! {"a": 1}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {"a": 3}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [3, 2]}, false),
        (doc! {"a": {"$nin": []}}, doc! {"a": 3}, true),
        (doc! {"a": {"$not": {"$gt": 1}}}, doc! {"a": 1}, true),
        (doc! {"a": {"$not": {"$gt": 1}}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$not": {"$gt": 1}}}, doc! {}, true),
        (doc! {"a": {"$not": {"$gt": 1}}}, doc! {"a": [0, 2]}, false),
        (
            doc! {"a": {"$not": bson::Regex { pattern: "^x".try_into().unwrap_or_else(|e| panic!("{e}")), options: "".try_into().unwrap_or_else(|e| panic!("{e}")) }}},
            doc! {"a": "xy"},
            false,
        ),
        (doc! {"$nor": [{"a": 1}, {"b": 2}]}, doc! {"a": 2, "b": 3}, true),
        (doc! {"$nor": [{"a": 1}, {"b": 2}]}, doc! {"a": 2, "b": 2}, false),
    ]);
}

#[test]
fn logical() {
    check(&[
        (doc! {"$and": [{"a": 1}, {"b": 2}]}, doc! {"a": 1, "b": 2}, true),
        (doc! {"$and": [{"a": 1}, {"b": 2}]}, doc! {"a": 1, "b": 3}, false),
        (doc! {"$or": [{"a": 1}, {"b": 2}]}, doc! {"a": 0, "b": 2}, true),
        (doc! {"$or": [{"a": 1}, {"b": 2}]}, doc! {"a": 0}, false),
        (doc! {"$or": [{"a": 1}], "b": 2}, doc! {"a": 1, "b": 2}, true),
        (doc! {}, doc! {"a": 1}, true),
        (doc! {"$comment": "x", "a": 1}, doc! {"a": 1}, true),
        (doc! {"$alwaysFalse": 1}, doc! {"a": 1}, false),
    ]);
}

#[test]
fn in_exists_type() {
    check(&[
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": 2.0}, true),
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": [5, 1]}, true),
        (doc! {"a": {"$in": []}}, doc! {"a": 1}, false),
        (doc! {"a": {"$in": [null]}}, doc! {}, true),
        (doc! {"a": {"$in": [[1, 2]]}}, doc! {"a": [1, 2]}, true),
        (
            doc! {"a": {"$in": [bson::Regex { pattern: "^ab".try_into().unwrap_or_else(|e| panic!("{e}")), options: "i".try_into().unwrap_or_else(|e| panic!("{e}")) }]}},
            doc! {"a": "ABc"},
            true,
        ),
        (doc! {"a": {"$exists": true}}, doc! {"a": null}, true),
        (doc! {"a": {"$exists": true}}, doc! {}, false),
        (doc! {"a": {"$exists": false}}, doc! {}, true),
        (doc! {"a": {"$exists": 0}}, doc! {"a": 1}, false),
        // A decimal zero is false too, as every number type's zero (mongod's trueValue).
        (doc! {"a": {"$exists": decimal("0")}}, doc! {"a": 1}, false),
        (doc! {"a": {"$exists": decimal("0.5")}}, doc! {"a": 1}, true),
        (doc! {"a.b": {"$exists": true}}, doc! {"a": [{"b": null}]}, true),
        (doc! {"a.b": {"$exists": true}}, doc! {"a": [{"c": 1}]}, false),
        (doc! {"a.b": {"$exists": false}}, doc! {"a": [1, 2]}, true),
        (doc! {"a": {"$type": "string"}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$type": 2}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$type": "number"}}, doc! {"a": Bson::Int64(1)}, true),
        (doc! {"a": {"$type": "number"}}, doc! {"a": decimal("1")}, true),
        (doc! {"a": {"$type": ["int", "long"]}}, doc! {"a": 1.0}, false),
        (doc! {"a": {"$type": "double"}}, doc! {"a": 1.0}, true),
        (doc! {"a": {"$type": "array"}}, doc! {"a": []}, true),
        (doc! {"a": {"$type": "array"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$type": "int"}}, doc! {"a": [1, "x"]}, true),
        (doc! {"a": {"$type": "null"}}, doc! {}, false),
        (doc! {"a": {"$type": "minKey"}}, doc! {"a": Bson::MinKey}, true),
        (doc! {"a": {"$type": -1}}, doc! {"a": Bson::MinKey}, true),
    ]);
}

#[test]
fn regex_mod_size_all() {
    check(&[
        (doc! {"a": {"$regex": "^ab"}}, doc! {"a": "abc"}, true),
        (doc! {"a": {"$regex": "^ab", "$options": "i"}}, doc! {"a": "ABc"}, true),
        (doc! {"a": {"$regex": "^b", "$options": "m"}}, doc! {"a": "a\nb"}, true),
        (doc! {"a": {"$regex": "^b"}}, doc! {"a": "a\nb"}, false),
        (doc! {"a": {"$regex": "a.b", "$options": "s"}}, doc! {"a": "a\nb"}, true),
        (doc! {"a": {"$regex": "a.b"}}, doc! {"a": "a\nb"}, false),
        (doc! {"a": {"$regex": "a b # comment", "$options": "x"}}, doc! {"a": "ab"}, true),
        (doc! {"a": {"$regex": "1"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$regex": "^x"}}, doc! {"a": ["y", "xz"]}, true),
        (doc! {"a": {"$mod": [4, 0]}}, doc! {"a": 8}, true),
        (doc! {"a": {"$mod": [4, 0]}}, doc! {"a": 8.9}, true),
        (doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 8}, false),
        (doc! {"a": {"$mod": [4, -1]}}, doc! {"a": -5}, true),
        (doc! {"a": {"$mod": [4.5, 0]}}, doc! {"a": 8}, true),
        (doc! {"a": {"$mod": [4, 0]}}, doc! {"a": "8"}, false),
        (doc! {"a": {"$mod": [4, 0]}}, doc! {"a": f64::NAN}, false),
        (doc! {"a": {"$size": 2}}, doc! {"a": [1, 2]}, true),
        (doc! {"a": {"$size": 0}}, doc! {"a": []}, true),
        (doc! {"a": {"$size": 1}}, doc! {"a": [[1, 2]]}, true),
        (doc! {"a": {"$size": 2}}, doc! {"a": [[1, 2]]}, false),
        (doc! {"a": {"$size": 0}}, doc! {}, false),
        (doc! {"a.b": {"$size": 2}}, doc! {"a": [{"b": [1, 2]}]}, true),
        (doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3, 1]}, true),
        (doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3]}, false),
        (doc! {"a": {"$all": []}}, doc! {"a": []}, false),
        (doc! {"a": {"$all": [1]}}, doc! {"a": 1}, true),
        (doc! {"a": {"$all": [[1, 2]]}}, doc! {"a": [1, 2]}, true),
        (
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
            doc! {"a": [{"b": 1}, {"c": 2}]},
            true,
        ),
        (
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 3}}]}},
            doc! {"a": [{"b": 1}, {"c": 2}]},
            false,
        ),
    ]);
}

#[test]
fn elem_match() {
    check(&[
        (doc! {"a": {"$elemMatch": {"b": 1, "c": 2}}}, doc! {"a": [{"b": 1, "c": 2}]}, true),
        (doc! {"a": {"$elemMatch": {"b": 1, "c": 2}}}, doc! {"a": [{"b": 1}, {"c": 2}]}, false),
        (doc! {"a.b": 1, "a.c": 2}, doc! {"a": [{"b": 1}, {"c": 2}]}, true),
        (doc! {"a": {"$elemMatch": {"b": 1}}}, doc! {"a": {"b": 1}}, false),
        (doc! {"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, doc! {"a": [82, 90]}, true),
        (doc! {"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, doc! {"a": [79, 90]}, false),
        (doc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"b": 2}]}}}, doc! {"a": [{"b": 2}]}, true),
        (doc! {"a": {"$elemMatch": {"0": 1}}}, doc! {"a": [[1, 2]]}, true),
        (doc! {"a": {"$elemMatch": {"b": {"$elemMatch": {"$gt": 3}}}}}, doc! {"a": [{"b": [1, 5]}]}, true),
        (doc! {"a": {"$elemMatch": {"$ne": 1}}}, doc! {"a": [1, 1]}, false),
        (doc! {"a": {"$elemMatch": {"$ne": 1}}}, doc! {"a": [1, 2]}, true),
    ]);
}

#[test]
fn json_schema() {
    let schema = doc! {"$jsonSchema": {
        "bsonType": "object",
        "required": ["name", "year"],
        "properties": {
            "name": {"bsonType": "string", "minLength": 2},
            "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017},
            "gpa": {"bsonType": ["double"], "minimum": 0, "exclusiveMinimum": true},
            "tags": {"bsonType": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        },
    }};
    check(&[
        (schema.clone(), doc! {"name": "Al", "year": 2020}, true),
        (schema.clone(), doc! {"name": "A", "year": 2020}, false),
        (schema.clone(), doc! {"name": "Al"}, false),
        (schema.clone(), doc! {"name": "Al", "year": 2016}, false),
        (schema.clone(), doc! {"name": "Al", "year": 2020.0}, false),
        (schema.clone(), doc! {"name": "Al", "year": 2020, "gpa": 0.0}, false),
        (schema.clone(), doc! {"name": "Al", "year": 2020, "gpa": 3.5}, true),
        (schema.clone(), doc! {"name": "Al", "year": 2020, "tags": ["a"]}, true),
        (schema.clone(), doc! {"name": "Al", "year": 2020, "tags": ["c"]}, false),
        (schema, doc! {"name": "Al", "year": 2020, "tags": ["a", "b", "a"]}, false),
    ]);
}

// Goal: malformed filters fail at parse time with MongoDB's code.
#[test]
fn malformed_filters() {
    let rows: Vec<(Document, i32)> = vec![
        (doc! {"$foo": 1}, 2),
        (doc! {"a": {"$foo": 1}}, 2),
        (doc! {"$and": []}, 2),
        (doc! {"$or": {"a": 1}}, 2),
        (doc! {"$or": [1]}, 2),
        (doc! {"a": {"$in": 1}}, 2),
        (doc! {"a": {"$nin": "x"}}, 2),
        (doc! {"a": {"$all": 1}}, 2),
        (doc! {"a": {"$size": "x"}}, 2),
        (doc! {"a": {"$size": -1}}, 2),
        (doc! {"a": {"$size": 1.5}}, 2),
        (doc! {"a": {"$mod": [1]}}, 2),
        (doc! {"a": {"$mod": [0, 1]}}, 2),
        (doc! {"a": {"$mod": [1, 2, 3]}}, 2),
        (doc! {"a": {"$regex": 1}}, 2),
        (doc! {"a": {"$regex": "(?<=a)b"}}, 2),
        (doc! {"a": {"$options": "i"}}, 2),
        (doc! {"a": {"$regex": "a", "$options": "q"}}, 51108),
        (doc! {"a": {"$type": "nope"}}, 2),
        (doc! {"a": {"$type": 99}}, 2),
        (doc! {"a": {"$elemMatch": 1}}, 2),
        (doc! {"a": {"$not": {}}}, 2),
        (doc! {"a": {"$not": 1}}, 2),
        (
            doc! {"a": {"$ne": bson::Regex { pattern: "x".try_into().unwrap_or_else(|e| panic!("{e}")), options: "".try_into().unwrap_or_else(|e| panic!("{e}")) }}},
            2,
        ),
        (doc! {"a..b": 1}, 2),
        (doc! {"$jsonSchema": {"bogus": 1}}, 9),
    ];
    for (filter, code) in rows {
        match Filter::parse(&filter) {
            Ok(_) => panic!("{filter} parsed"),
            Err(error) => assert_eq!(error.code(), code, "{filter}: {error}"),
        }
    }
}

// Goal: the raw path decodes only the fields a filter reads.
#[test]
fn fields_read() {
    let filter = Filter::parse(&doc! {"a.b": 1, "$or": [{"c": 1}, {"a": 2}]}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(filter.fields_read(), Some(&["a".to_string(), "c".to_string()][..]));
    let schema = Filter::parse(&doc! {"$jsonSchema": {"required": ["x"]}}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(schema.fields_read(), None);
}

// Goal: the positional match reports the element of the first array the match went through.
#[test]
fn positions() {
    let position = |filter: Document, document: Document| {
        Filter::parse(&filter)
            .unwrap_or_else(|e| panic!("{e}"))
            .matches_with_position(&document)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(position(doc! {"a": 3}, doc! {"a": [1, 2, 3]}), Some(Some(2)));
    assert_eq!(position(doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}), Some(Some(1)));
    assert_eq!(position(doc! {"a": {"$elemMatch": {"b": 2}}}, doc! {"a": [{"b": 1}, {"b": 2}]}), Some(Some(1)));
    assert_eq!(position(doc! {"x": 1}, doc! {"x": 1}), Some(None));
    assert_eq!(position(doc! {"x": 2}, doc! {"x": 1}), None);
}

// Goal: $expr evaluates aggregation expressions against the document, alone and combined,
// and is refused below the top level.
#[test]
fn expr() {
    check(&[
        (doc! {"$expr": {"$gt": ["$spent", "$budget"]}}, doc! {"spent": 450, "budget": 400}, true),
        (doc! {"$expr": {"$gt": ["$spent", "$budget"]}}, doc! {"spent": 100, "budget": 400}, false),
        (doc! {"a": 1, "$expr": {"$eq": ["$b", 2]}}, doc! {"a": 1, "b": 2}, true),
        (doc! {"$or": [{"$expr": {"$lt": ["$a", 0]}}, {"a": 5}]}, doc! {"a": -1}, true),
        (doc! {"$expr": "$flag"}, doc! {"flag": 0}, false),
    ]);
    let nested = Filter::parse(&doc! {"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}});
    assert_eq!(nested.err().map(|e| e.code()), Some(2));
    assert!(Filter::parse(&doc! {"$expr": {"$nope": 1}}).is_err());
}

#[test]
fn sample_rate_matches_about_its_share() {
    let document = doc! {"a": 1};
    let share = |rate: f64| {
        let filter = Filter::parse(&doc! {"$sampleRate": rate}).unwrap_or_else(|e| panic!("{e}"));
        (0..4000).filter(|_| filter.matches(&document).unwrap_or_else(|e| panic!("{e}"))).count()
    };
    assert_eq!(share(0.0), 0);
    assert_eq!(share(1.0), 4000);
    // 4,000 draws at 0.25: 1,000 expected, standard deviation 27; 8 deviations either side.
    let quarter = share(0.25);
    assert!((780..=1220).contains(&quarter), "{quarter}");
    for bad in [Bson::Double(1.5), Bson::Int32(-1), Bson::String("x".into())] {
        let error = Filter::parse(&doc! {"$sampleRate": bad.clone()}).err().map(|e| e.code());
        assert_eq!(error, Some(2), "{bad}");
    }
}
