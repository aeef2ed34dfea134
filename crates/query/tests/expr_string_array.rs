//! Goal: string, array, object and accumulator-as-expression operators match the manual's
//! examples and MongoDB's null/missing and error behaviour. Method: table tests evaluated
//! against one document.

use bson::{Bson, Document, doc};
use query::expr::{Expr, Variables, evaluate};

fn eval(expr: Bson) -> Result<Bson, i32> {
    let document = doc! {"name": "café", "tags": ["a", "b", "c"], "n": Bson::Null, "nums": [3, 1, 2], "doc": {"k": 1}};
    let parsed = Expr::parse(&expr).map_err(|e| e.code())?;
    evaluate(&parsed, &document, &Variables::new()).map_err(|e| e.code())
}

fn check(cases: Vec<(Bson, Result<Bson, i32>)>) {
    for (expr, expected) in cases {
        assert_eq!(eval(expr.clone()), expected, "expression {expr}");
    }
}

fn s(text: &str) -> Bson {
    Bson::String(text.to_string())
}

#[test]
fn concat_substr_case() {
    check(vec![
        (bson::bson!({"$concat": ["a", "-", "b"]}), Ok(s("a-b"))),
        (bson::bson!({"$concat": ["a", "$missing"]}), Ok(Bson::Null)),
        (bson::bson!({"$concat": ["a", 1]}), Err(16702)),
        (bson::bson!({"$substrCP": ["$name", 2, 2]}), Ok(s("fé"))),
        (bson::bson!({"$substrCP": ["$name", 0, 100]}), Ok(s("café"))),
        (bson::bson!({"$substrCP": ["$name", -1, 2]}), Err(34455)),
        (bson::bson!({"$substrCP": ["$name", 1.5, 2]}), Err(34451)),
        (bson::bson!({"$substrBytes": ["$name", 0, 3]}), Ok(s("caf"))),
        (bson::bson!({"$substrBytes": ["$name", 0, 4]}), Err(28657)),
        (bson::bson!({"$substrBytes": ["$name", 4, 1]}), Err(28656)),
        (bson::bson!({"$substrBytes": ["abc", 1, -1]}), Ok(s("bc"))),
        (bson::bson!({"$substrBytes": [null, 0, 1]}), Ok(s(""))),
        (bson::bson!({"$toUpper": "$name"}), Ok(s("CAFé"))),
        (bson::bson!({"$toLower": "ABC"}), Ok(s("abc"))),
        (bson::bson!({"$toUpper": null}), Ok(s(""))),
        (bson::bson!({"$toUpper": 12}), Ok(s("12"))),
        (bson::bson!({"$strcasecmp": ["Hello", "hello"]}), Ok(Bson::Int32(0))),
        (bson::bson!({"$strcasecmp": ["a", "B"]}), Ok(Bson::Int32(-1))),
    ]);
}

#[test]
fn split_trim_lengths_index() {
    check(vec![
        (bson::bson!({"$split": ["June-15-2013", "-"]}), Ok(bson::bson!(["June", "15", "2013"]))),
        (bson::bson!({"$split": ["abc", "x"]}), Ok(bson::bson!(["abc"]))),
        (bson::bson!({"$split": ["abc", ""]}), Err(40087)),
        (bson::bson!({"$split": [1, "-"]}), Err(40085)),
        (bson::bson!({"$split": [null, "-"]}), Ok(Bson::Null)),
        (bson::bson!({"$trim": {"input": "  hi \n"}}), Ok(s("hi"))),
        (bson::bson!({"$ltrim": {"input": "xxhixx", "chars": "x"}}), Ok(s("hixx"))),
        (bson::bson!({"$rtrim": {"input": "xxhixx", "chars": "x"}}), Ok(s("xxhi"))),
        (bson::bson!({"$trim": {"input": 5}}), Err(50699)),
        (bson::bson!({"$trim": {"chars": "x"}}), Err(50695)),
        (bson::bson!({"$trim": {"input": "a", "bad": 1}}), Err(50694)),
        (bson::bson!({"$strLenCP": "$name"}), Ok(Bson::Int32(4))),
        (bson::bson!({"$strLenBytes": "$name"}), Ok(Bson::Int32(5))),
        (bson::bson!({"$strLenCP": "$missing"}), Err(34471)),
        (bson::bson!({"$indexOfCP": ["cafétéria", "té"]}), Ok(Bson::Int32(4))),
        (bson::bson!({"$indexOfBytes": ["cafétéria", "té"]}), Ok(Bson::Int32(5))),
        (bson::bson!({"$indexOfCP": ["abcabc", "b", 2]}), Ok(Bson::Int32(4))),
        (bson::bson!({"$indexOfCP": ["abcabc", "b", 2, 4]}), Ok(Bson::Int32(-1))),
        (bson::bson!({"$indexOfCP": ["abc", "z"]}), Ok(Bson::Int32(-1))),
        (bson::bson!({"$indexOfCP": [null, "z"]}), Ok(Bson::Null)),
        (bson::bson!({"$indexOfCP": ["abc", "b", -1]}), Err(40097)),
        (bson::bson!({"$replaceAll": {"input": "a.b.c", "find": ".", "replacement": "-"}}), Ok(s("a-b-c"))),
        (bson::bson!({"$replaceOne": {"input": "a.b.c", "find": ".", "replacement": "-"}}), Ok(s("a-b.c"))),
        (bson::bson!({"$replaceAll": {"input": null, "find": ".", "replacement": "-"}}), Ok(Bson::Null)),
    ]);
}

#[test]
fn regex_operators() {
    check(vec![
        (bson::bson!({"$regexMatch": {"input": "Hello", "regex": "^h", "options": "i"}}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$regexMatch": {"input": "$missing", "regex": "x"}}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$regexMatch": {"input": 5, "regex": "x"}}), Err(51104)),
        (bson::bson!({"$regexMatch": {"input": "x", "regex": "("}}), Err(51111)),
        (
            bson::bson!({"$regexFind": {"input": "abc123def45", "regex": "([0-9])([0-9])"}}),
            Ok(bson::bson!({"match": "12", "idx": 3, "captures": ["1", "2"]})),
        ),
        (bson::bson!({"$regexFind": {"input": "abc", "regex": "z"}}), Ok(Bson::Null)),
        (
            bson::bson!({"$regexFindAll": {"input": "a1b22", "regex": "[0-9]+"}}),
            Ok(bson::bson!([{"match": "1", "idx": 1, "captures": []}, {"match": "22", "idx": 3, "captures": []}])),
        ),
        (
            bson::bson!({"$regexMatch": {"input": "ABC", "regex": Bson::RegularExpression(bson::Regex { pattern: "b".try_into().unwrap_or_else(|_| unreachable!()), options: "i".try_into().unwrap_or_else(|_| unreachable!()) })}}),
            Ok(Bson::Boolean(true)),
        ),
    ]);
}

#[test]
fn array_operators() {
    check(vec![
        (bson::bson!({"$size": "$tags"}), Ok(Bson::Int32(3))),
        (bson::bson!({"$size": "$missing"}), Err(17124)),
        (bson::bson!({"$arrayElemAt": ["$tags", 0]}), Ok(s("a"))),
        (bson::bson!({"$arrayElemAt": ["$tags", -1]}), Ok(s("c"))),
        (bson::bson!({"$arrayElemAt": ["$tags", 15]}), Ok(Bson::Null)),
        (bson::bson!({"$arrayElemAt": ["$name", 0]}), Err(28689)),
        (bson::bson!({"$arrayElemAt": ["$tags", 0.5]}), Err(28691)),
        (bson::bson!({"$arrayElemAt": ["$tags", "x"]}), Err(28690)),
        (bson::bson!({"$first": "$tags"}), Ok(s("a"))),
        (bson::bson!({"$last": "$tags"}), Ok(s("c"))),
        (bson::bson!({"$first": "$missing"}), Ok(Bson::Null)),
        (bson::bson!({"$in": [2, "$nums"]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$in": [2.0, "$nums"]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$in": ["x", "$missing"]}), Err(40081)),
        (bson::bson!({"$slice": [[1, 2, 3, 4], 2]}), Ok(bson::bson!([1, 2]))),
        (bson::bson!({"$slice": [[1, 2, 3, 4], -2]}), Ok(bson::bson!([3, 4]))),
        (bson::bson!({"$slice": [[1, 2, 3, 4], 1, 2]}), Ok(bson::bson!([2, 3]))),
        (bson::bson!({"$slice": [[1, 2, 3, 4], -3, 2]}), Ok(bson::bson!([2, 3]))),
        (bson::bson!({"$slice": [[1, 2, 3, 4], 1, 0]}), Err(28729)),
        (bson::bson!({"$slice": [null, 1]}), Ok(Bson::Null)),
        (bson::bson!({"$concatArrays": [[1], [2, [3]]]}), Ok(bson::bson!([1, 2, [3]]))),
        (bson::bson!({"$concatArrays": [[1], null]}), Ok(Bson::Null)),
        (bson::bson!({"$concatArrays": [[1], 2]}), Err(28664)),
        (bson::bson!({"$range": [0, 10, 3]}), Ok(bson::bson!([0, 3, 6, 9]))),
        (bson::bson!({"$range": [5, 0, -2]}), Ok(bson::bson!([5, 3, 1]))),
        (bson::bson!({"$range": [0, 5, -1]}), Ok(bson::bson!([]))),
        (bson::bson!({"$range": [0, 5, 0]}), Err(34449)),
        (bson::bson!({"$reverseArray": [[1, 2, 3]]}), Ok(bson::bson!([3, 2, 1]))),
        (bson::bson!({"$reverseArray": "$missing"}), Ok(Bson::Null)),
        (bson::bson!({"$isArray": ["$tags"]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$isArray": "$name"}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$indexOfArray": [["a", "b", "a"], "a", 1]}), Ok(Bson::Int32(2))),
        (bson::bson!({"$indexOfArray": [["a"], "z"]}), Ok(Bson::Int32(-1))),
        (bson::bson!({"$indexOfArray": ["x", "z"]}), Err(40090)),
        (bson::bson!({"$zip": {"inputs": [[1, 2, 3], ["a", "b"]]}}), Ok(bson::bson!([[1, "a"], [2, "b"]]))),
        (
            bson::bson!({"$zip": {"inputs": [[1, 2, 3], ["a"]], "useLongestLength": true, "defaults": [0, "z"]}}),
            Ok(bson::bson!([[1, "a"], [2, "z"], [3, "z"]])),
        ),
        (bson::bson!({"$zip": {"inputs": [[1], "$missing"]}}), Ok(Bson::Null)),
        (bson::bson!({"$zip": {"inputs": [[1]], "defaults": [0]}}), Err(34466)),
    ]);
}

#[test]
fn higher_order_array_operators() {
    check(vec![
        (
            bson::bson!({"$filter": {"input": "$nums", "as": "x", "cond": {"$gte": ["$$x", 2]}}}),
            Ok(bson::bson!([3, 2])),
        ),
        (
            bson::bson!({"$filter": {"input": "$nums", "cond": {"$gte": ["$$this", 2]}, "limit": 1}}),
            Ok(bson::bson!([3])),
        ),
        (bson::bson!({"$filter": {"input": "$missing", "cond": true}}), Ok(Bson::Null)),
        (bson::bson!({"$filter": {"input": "x", "cond": true}}), Err(28651)),
        (
            bson::bson!({"$map": {"input": "$nums", "as": "n", "in": {"$multiply": ["$$n", 10]}}}),
            Ok(bson::bson!([30, 10, 20])),
        ),
        (bson::bson!({"$map": {"input": [1], "in": "$$this"}}), Ok(bson::bson!([1]))),
        (bson::bson!({"$map": {"input": 5, "in": "$$this"}}), Err(16883)),
        (
            bson::bson!({"$reduce": {"input": ["a", "b", "c"], "initialValue": "", "in": {"$concat": ["$$value", "$$this"]}}}),
            Ok(s("abc")),
        ),
        (
            bson::bson!({"$reduce": {"input": [1, 2, 3, 4], "initialValue": {"sum": 5, "product": 2}, "in": {"sum": {"$add": ["$$value.sum", "$$this"]}, "product": {"$multiply": ["$$value.product", "$$this"]}}}}),
            Ok(bson::bson!({"sum": 15, "product": 48})),
        ),
        (bson::bson!({"$reduce": {"input": "x", "initialValue": 0, "in": 1}}), Err(40080)),
    ]);
}

#[test]
fn objects_and_accumulator_expressions() {
    check(vec![
        (bson::bson!({"$mergeObjects": [{"a": 1, "b": 1}, null, {"b": 2}]}), Ok(bson::bson!({"a": 1, "b": 2}))),
        (bson::bson!({"$mergeObjects": [{"a": 1}, 5]}), Err(40400)),
        (bson::bson!({"$objectToArray": "$doc"}), Ok(bson::bson!([{"k": "k", "v": 1}]))),
        (bson::bson!({"$objectToArray": 1}), Err(40390)),
        (bson::bson!({"$arrayToObject": [[["a", 1], ["b", 2]]]}), Ok(bson::bson!({"a": 1, "b": 2}))),
        (bson::bson!({"$arrayToObject": [[{"k": "a", "v": 1}]]}), Ok(bson::bson!({"a": 1}))),
        (bson::bson!({"$arrayToObject": [[["a", 1, 2]]]}), Err(40397)),
        (bson::bson!({"$arrayToObject": [[{"k": 1, "v": 1}]]}), Err(40394)),
        (bson::bson!({"$getField": "name"}), Ok(s("café"))),
        (bson::bson!({"$getField": {"field": "a.b", "input": {"$literal": {"a.b": 7}}}}), Ok(Bson::Int32(7))),
        (bson::bson!({"$getField": {"field": "$x", "input": {"$x": 1}}}), Err(5654602)),
        (
            bson::bson!({"$getField": {"field": {"$literal": "$x"}, "input": {"$literal": {"$x": 1}}}}),
            Ok(Bson::Int32(1)),
        ),
        (bson::bson!({"$setField": {"field": "b", "input": {"a": 1}, "value": 2}}), Ok(bson::bson!({"a": 1, "b": 2}))),
        (bson::bson!({"$sum": "$nums"}), Ok(Bson::Int32(6))),
        (bson::bson!({"$sum": [1, 2.5, "x"]}), Ok(Bson::Double(3.5))),
        (bson::bson!({"$sum": "$missing"}), Ok(Bson::Int32(0))),
        (bson::bson!({"$avg": "$nums"}), Ok(Bson::Double(2.0))),
        (bson::bson!({"$avg": []}), Ok(Bson::Null)),
        (bson::bson!({"$max": "$nums"}), Ok(Bson::Int32(3))),
        (bson::bson!({"$min": [5, null, 2]}), Ok(Bson::Int32(2))),
        (bson::bson!({"$stdDevPop": [[1, 2, 3, 4]]}), Ok(Bson::Double(1.118033988749895))),
        (bson::bson!({"$stdDevSamp": [[1]]}), Ok(Bson::Null)),
    ]);
}

#[test]
fn document_with_no_fields_still_evaluates() {
    let parsed = Expr::parse(&bson::bson!({"$size": [[1, 2]]})).map_err(|e| e.code());
    let value = parsed.and_then(|e| evaluate(&e, &Document::new(), &Variables::new()).map_err(|e| e.code()));
    assert_eq!(value, Ok(Bson::Int32(2)));
}
