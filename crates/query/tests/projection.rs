//! Goal: find projections shape results as MongoDB's do, and reject what MongoDB rejects.
//! Method: table tests (projection, document, expected) from the manual's examples.

use bson::{Document, doc};
use query::filter::Filter;
use query::projection::Projection;

fn project(spec: Document, document: Document) -> Document {
    let projection = Projection::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    projection.apply(&document, None).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

#[test]
fn inclusion_and_exclusion() {
    let item = doc! {"_id": 1, "item": "abc", "size": {"h": 14, "w": 21, "uom": "cm"}, "qty": 5};
    let rows: Vec<(Document, Document)> = vec![
        (doc! {}, item.clone()),
        (doc! {"item": 1}, doc! {"_id": 1, "item": "abc"}),
        (doc! {"item": 1, "_id": 0}, doc! {"item": "abc"}),
        (doc! {"qty": 1, "item": true}, doc! {"_id": 1, "item": "abc", "qty": 5}),
        (doc! {"size.h": 1}, doc! {"_id": 1, "size": {"h": 14}}),
        (doc! {"size": {"h": 1}}, doc! {"_id": 1, "size": {"h": 14}}),
        (doc! {"item": 0, "size.uom": 0}, doc! {"_id": 1, "size": {"h": 14, "w": 21}, "qty": 5}),
        (doc! {"_id": 0}, doc! {"item": "abc", "size": {"h": 14, "w": 21, "uom": "cm"}, "qty": 5}),
        (doc! {"_id": 1}, doc! {"_id": 1}),
        (doc! {"missing": 1}, doc! {"_id": 1}),
        (doc! {"item.x": 1}, doc! {"_id": 1}),
        (doc! {"size.x": 1}, doc! {"_id": 1, "size": {}}),
    ];
    for (spec, expected) in rows {
        assert_eq!(project(spec.clone(), item.clone()), expected, "{spec}");
    }
    let arrays = doc! {"_id": 1, "a": [{"b": 1, "c": 2}, 3, [{"b": 4}]]};
    assert_eq!(project(doc! {"a.b": 1}, arrays.clone()), doc! {"_id": 1, "a": [{"b": 1}, [{"b": 4}]]});
    assert_eq!(project(doc! {"a.b": 0}, arrays), doc! {"_id": 1, "a": [{"c": 2}, 3, [{}]]});
}

#[test]
fn slice_elem_match_positional() {
    let post = doc! {"_id": 1, "title": "t", "comments": [1, 2, 3, 4, 5]};
    let rows: Vec<(Document, Document)> = vec![
        (doc! {"comments": {"$slice": 2}}, doc! {"_id": 1, "title": "t", "comments": [1, 2]}),
        (doc! {"comments": {"$slice": -2}}, doc! {"_id": 1, "title": "t", "comments": [4, 5]}),
        (doc! {"comments": {"$slice": [1, 2]}}, doc! {"_id": 1, "title": "t", "comments": [2, 3]}),
        (doc! {"comments": {"$slice": [-2, 5]}}, doc! {"_id": 1, "title": "t", "comments": [4, 5]}),
        (doc! {"comments": {"$slice": [9, 1]}}, doc! {"_id": 1, "title": "t", "comments": []}),
        (doc! {"comments": {"$slice": -9}}, post.clone()),
        (doc! {"title": {"$slice": 1}}, post.clone()),
        (doc! {"title": 1, "comments": {"$slice": 1}}, doc! {"_id": 1, "title": "t", "comments": [1]}),
    ];
    for (spec, expected) in rows {
        assert_eq!(project(spec.clone(), post.clone()), expected, "{spec}");
    }
    let school = doc! {"_id": 1, "zipcode": "63109", "students": [
        {"name": "john", "school": 102, "age": 10},
        {"name": "jess", "school": 102, "age": 11},
        {"name": "jeff", "school": 108, "age": 15},
    ]};
    assert_eq!(
        project(doc! {"students": {"$elemMatch": {"school": 102}}}, school.clone()),
        doc! {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]}
    );
    assert_eq!(
        project(doc! {"students": {"$elemMatch": {"school": 102, "age": {"$gt": 10}}}}, school.clone()),
        doc! {"_id": 1, "students": [{"name": "jess", "school": 102, "age": 11}]}
    );
    assert_eq!(project(doc! {"students": {"$elemMatch": {"school": 1}}}, school.clone()), doc! {"_id": 1});

    let grades = doc! {"_id": 1, "semester": 1, "grades": [70, 87, 90]};
    let filter = Filter::parse(&doc! {"semester": 1, "grades": {"$gte": 85}}).unwrap_or_else(|e| panic!("{e}"));
    let position = filter.matches_with_position(&grades).unwrap_or_else(|e| panic!("{e}")).flatten();
    let projection = Projection::parse(&doc! {"grades.$": 1}).unwrap_or_else(|e| panic!("{e}"));
    assert!(projection.needs_position());
    assert_eq!(projection.apply(&grades, position).unwrap_or_else(|e| panic!("{e}")), doc! {"_id": 1, "grades": [87]});
    assert!(projection.apply(&grades, None).is_err());
}

#[test]
fn projection_errors() {
    let rows: Vec<(Document, i32)> = vec![
        (doc! {"a": 1, "b": 0}, 31254),
        (doc! {"a": 0, "b": 1}, 31254),
        (doc! {"a": 1, "a.b": 1}, 31250),
        (doc! {"a.b": 1, "a": 1}, 31250),
        (doc! {"a": {"$slice": [1, 0]}}, 28724),
        (doc! {"a": {"$slice": "x"}}, 2),
        (doc! {"a.b": {"$elemMatch": {"x": 1}}}, 2),
        (doc! {"$a": 1}, 2),
    ];
    for (spec, code) in rows {
        match Projection::parse(&spec) {
            Ok(_) => panic!("{spec} parsed"),
            Err(error) => assert_eq!(error.code(), code, "{spec}: {error}"),
        }
    }
}

// Goal: expression projections compute fields from the whole document, after the included
// fields, in inclusion mode.
#[test]
fn expression_projections() {
    let document = doc! {"_id": 1, "a": 2, "b": 3, "s": {"x": 1}};
    let rows: Vec<(Document, Document)> = vec![
        (doc! {"sum": {"$add": ["$a", "$b"]}}, doc! {"_id": 1, "sum": 5}),
        (doc! {"a": 1, "copy": "$b", "_id": 0}, doc! {"a": 2, "copy": 3}),
        (doc! {"label": "text"}, doc! {"_id": 1, "label": "text"}),
        (doc! {"lit": {"$literal": 1}}, doc! {"_id": 1, "lit": 1}),
        (doc! {"gone": "$missing"}, doc! {"_id": 1}),
        (doc! {"s.y": {"$multiply": ["$a", 10]}}, doc! {"_id": 1, "s": {"y": 20}}),
        (doc! {"s.x": 1, "s.y": "$b"}, doc! {"_id": 1, "s": {"x": 1, "y": 3}}),
        (doc! {"n.m": "$a"}, doc! {"_id": 1, "n": {"m": 2}}),
    ];
    for (spec, expected) in rows {
        assert_eq!(project(spec.clone(), document.clone()), expected, "{spec}");
    }
    assert_eq!(Projection::parse(&doc! {"a": 0, "c": "$b"}).err().map(|e| e.code()), Some(31254));
    assert!(Projection::parse(&doc! {"c": {"$nope": 1}}).is_err());
}
