//! Goal: the set, `$sortArray`, n-element, trigonometric, bitwise, size and timestamp
//! operators give MongoDB's answers, its null results and its errors. Method: table tests
//! evaluated against one document.

use bson::{Binary, Bson, Timestamp, bson, doc, spec::BinarySubtype};
use query::expr::{Expr, Variables, evaluate};

fn eval(expr: Bson) -> Result<Bson, i32> {
    let document = doc! {
        "a": [1, 2, 3], "b": [2.0, 3, 4, 4],
        "people": [{"name": "b", "age": 30}, {"name": "a", "age": 25}, {"name": "c", "age": 30}],
        "ts": Timestamp { time: 1_700_000_000, increment: 7 },
    };
    let parsed = Expr::parse(&expr).map_err(|e| e.code())?;
    evaluate(&parsed, &document, &Variables::new()).map_err(|e| e.code())
}

fn check(cases: Vec<(Bson, Result<Bson, i32>)>) {
    for (expr, expected) in cases {
        assert_eq!(eval(expr.clone()), expected, "expression {expr}");
    }
}

#[test]
fn set_operators() {
    check(vec![
        (bson!({"$setUnion": ["$a", "$b"]}), Ok(bson!([1, 2, 3, 4]))),
        (bson!({"$setUnion": []}), Ok(bson!([]))),
        (bson!({"$setUnion": ["$a", "$missing"]}), Ok(Bson::Null)),
        (bson!({"$setUnion": ["$a", 1]}), Err(17043)),
        (bson!({"$setIntersection": ["$a", "$b"]}), Ok(bson!([2, 3]))),
        (bson!({"$setIntersection": []}), Ok(bson!([]))),
        (bson!({"$setIntersection": ["$a", "x"]}), Err(17047)),
        (bson!({"$setDifference": ["$b", "$a"]}), Ok(bson!([4]))),
        (bson!({"$setDifference": [null, "$a"]}), Ok(Bson::Null)),
        (bson!({"$setDifference": ["$a", 1]}), Err(17049)),
        (bson!({"$setEquals": [[1, 2, 2], [2.0, 1]]}), Ok(Bson::Boolean(true))),
        (bson!({"$setEquals": ["$a", "$b"]}), Ok(Bson::Boolean(false))),
        (bson!({"$setEquals": ["$a"]}), Err(17045)),
        (bson!({"$setEquals": ["$a", null]}), Err(17044)),
        (bson!({"$setIsSubset": [[2, 3], "$a"]}), Ok(Bson::Boolean(true))),
        (bson!({"$setIsSubset": ["$b", "$a"]}), Ok(Bson::Boolean(false))),
        (bson!({"$setIsSubset": ["$missing", "$a"]}), Err(17046)),
        (bson!({"$anyElementTrue": [[0, false, 1]]}), Ok(Bson::Boolean(true))),
        (bson!({"$allElementsTrue": [[1, [], null]]}), Ok(Bson::Boolean(false))),
        (bson!({"$allElementsTrue": [[]]}), Ok(Bson::Boolean(true))),
        (bson!({"$anyElementTrue": "x"}), Err(17041)),
    ]);
}

#[test]
fn sort_array_and_n_elements() {
    check(vec![
        (bson!({"$sortArray": {"input": [3, "x", 1, null, 2.5], "sortBy": 1}}), Ok(bson!([null, 1, 2.5, 3, "x"]))),
        (bson!({"$sortArray": {"input": "$a", "sortBy": -1}}), Ok(bson!([3, 2, 1]))),
        (
            bson!({"$sortArray": {"input": "$people", "sortBy": {"age": -1}}}),
            Ok(bson!([{"name": "b", "age": 30}, {"name": "c", "age": 30}, {"name": "a", "age": 25}])),
        ),
        (bson!({"$sortArray": {"input": "$missing", "sortBy": 1}}), Ok(Bson::Null)),
        (bson!({"$sortArray": {"input": 5, "sortBy": 1}}), Err(2942504)),
        (bson!({"$sortArray": {"input": "$a"}}), Err(2942503)),
        (bson!({"$sortArray": {"sortBy": 1}}), Err(2942502)),
        (bson!({"$sortArray": {"input": "$a", "sortBy": 2}}), Err(2942505)),
        (bson!({"$sortArray": {"input": "$a", "sortBy": 1, "x": 1}}), Err(2942501)),
        (bson!({"$sortArray": [1]}), Err(2942500)),
        (bson!({"$firstN": {"n": 2, "input": "$b"}}), Ok(bson!([2.0, 3]))),
        (bson!({"$lastN": {"n": 2, "input": "$b"}}), Ok(bson!([4, 4]))),
        (bson!({"$lastN": {"n": 10, "input": "$a"}}), Ok(bson!([1, 2, 3]))),
        (bson!({"$maxN": {"n": 2, "input": [1, null, 5, 3]}}), Ok(bson!([5, 3]))),
        (bson!({"$minN": {"n": 3, "input": [4, null, 2, 3, 1]}}), Ok(bson!([1, 2, 3]))),
        (bson!({"$firstN": {"n": 0, "input": "$a"}}), Err(5787908)),
        (bson!({"$firstN": {"n": 1.5, "input": "$a"}}), Err(5787902)),
        (bson!({"$firstN": {"n": 1, "input": "x"}}), Err(5788200)),
        (bson!({"$firstN": {"n": 1}}), Err(5787907)),
        (bson!({"$firstN": {"input": "$a"}}), Err(5787906)),
    ]);
}

#[test]
fn trigonometry() {
    let close = |expr: Bson, expected: f64| match eval(expr.clone()) {
        Ok(Bson::Double(got)) => assert!((got - expected).abs() < 1e-12, "{expr}: {got} != {expected}"),
        other => panic!("{expr}: {other:?}"),
    };
    close(bson!({"$sin": std::f64::consts::FRAC_PI_2}), 1.0);
    close(bson!({"$cos": 0}), 1.0);
    close(bson!({"$atan2": [1, 1]}), std::f64::consts::FRAC_PI_4);
    close(bson!({"$degreesToRadians": 180}), std::f64::consts::PI);
    close(bson!({"$radiansToDegrees": std::f64::consts::PI}), 180.0);
    close(bson!({"$acosh": 1}), 0.0);
    check(vec![
        (bson!({"$sin": null}), Ok(Bson::Null)),
        (bson!({"$sin": "x"}), Err(28765)),
        (bson!({"$asin": 2}), Err(50989)),
        (bson!({"$acosh": 0.5}), Err(50989)),
        (bson!({"$tan": f64::INFINITY}), Err(50989)),
        (bson!({"$atan2": [1, "$missing"]}), Ok(Bson::Null)),
        (bson!({"$atan2": [1, "x"]}), Err(51044)),
    ]);
    assert!(matches!(eval(bson!({"$sin": Bson::Decimal128("0".parse().unwrap())})), Ok(Bson::Decimal128(_))));
}

#[test]
fn bitwise_sizes_and_timestamps() {
    check(vec![
        (bson!({"$bitAnd": [12, 10]}), Ok(Bson::Int32(8))),
        (bson!({"$bitOr": [12, Bson::Int64(3)]}), Ok(Bson::Int64(15))),
        (bson!({"$bitXor": [12, 10]}), Ok(Bson::Int32(6))),
        (bson!({"$bitNot": 0}), Ok(Bson::Int32(-1))),
        (bson!({"$bitAnd": []}), Ok(Bson::Int32(-1))),
        (bson!({"$bitOr": [1, null]}), Ok(Bson::Null)),
        (bson!({"$bitAnd": [1, 2.0]}), Err(14)),
        (bson!({"$bsonSize": {"$literal": {"a": 1}}}), Ok(Bson::Int32(12))),
        (bson!({"$bsonSize": "$missing"}), Ok(Bson::Null)),
        (bson!({"$bsonSize": "x"}), Err(31393)),
        (bson!({"$binarySize": "café"}), Ok(Bson::Int32(5))),
        (bson!({"$binarySize": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] }}), Ok(Bson::Int32(3))),
        (bson!({"$binarySize": 1}), Err(51276)),
        (bson!({"$tsSecond": "$ts"}), Ok(Bson::Int64(1_700_000_000))),
        (bson!({"$tsIncrement": "$ts"}), Ok(Bson::Int64(7))),
        (bson!({"$tsSecond": 1}), Err(5687301)),
        (bson!({"$unsetField": {"field": "b", "input": {"$literal": {"a": 1, "b": 2}}}}), Ok(bson!({"a": 1}))),
        (bson!({"$unsetField": {"field": "b", "input": "$missing"}}), Ok(Bson::Null)),
        (bson!({"$unsetField": {"field": "b", "input": {}, "value": 1}}), Err(4161101)),
    ]);
}

/// Goal: under a collation, operators that return their arguments choose and order them by it
/// and return the originals, not their collation keys.
#[test]
fn operators_returning_arguments_compare_under_a_collation() {
    let collation =
        query::collation::Collation::parse_optional(Some(&bson!({"locale": "en", "strength": 2}))).unwrap().unwrap();
    let collated = Variables::new().with_collation(Some(collation));
    let eval_with = |vars: &Variables, expr: Bson| evaluate(&Expr::parse(&expr).unwrap(), &doc! {}, vars).unwrap();
    let cases = [
        (bson!({"$max": ["a", "B"]}), bson!("B"), bson!("a")),
        (bson!({"$min": [["b", "A", "c"]]}), bson!("A"), bson!("A")),
        (bson!({"$setUnion": [["a", "A", "b"]]}), bson!(["a", "b"]), bson!(["a", "A", "b"])),
        (bson!({"$setIntersection": [["a", "B"], ["b"]]}), bson!(["B"]), bson!([])),
        (bson!({"$setDifference": [["a", "B"], ["b"]]}), bson!(["a"]), bson!(["a", "B"])),
        (
            bson!({"$sortArray": {"input": ["b", "A", "a", "C"], "sortBy": 1}}),
            bson!(["A", "a", "b", "C"]),
            bson!(["A", "C", "a", "b"]),
        ),
        (bson!({"$maxN": {"n": 2, "input": ["b", "A", "C"]}}), bson!(["C", "b"]), bson!(["b", "C"])),
        (bson!({"$setEquals": [["a"], ["A"]]}), bson!(true), bson!(false)),
    ];
    for (expr, under_collation, simple) in cases {
        assert_eq!(eval_with(&collated, expr.clone()), under_collation, "{expr} under the collation");
        assert_eq!(eval_with(&Variables::new(), expr.clone()), simple, "{expr} simple");
    }
}
