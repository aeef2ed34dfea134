//! Goal: arithmetic, comparison, boolean and conditional expressions give MongoDB's values,
//! types and error codes. Method: table tests from the manual's examples plus edge cases
//! (null/missing, mixed numeric types, overflow, NaN, decimal), each evaluated against a
//! small document.

use std::str::FromStr;

use bson::{Bson, Decimal128, Document, doc};
use query::expr::{Expr, Variables, evaluate, evaluate_value};

fn eval_in(expr: Bson, document: &Document) -> Result<Bson, i32> {
    let parsed = Expr::parse(&expr).map_err(|e| e.code())?;
    evaluate(&parsed, document, &Variables::new()).map_err(|e| e.code())
}

fn eval(expr: Bson) -> Result<Bson, i32> {
    eval_in(expr, &doc! {"a": 5, "b": 2.5, "s": "text", "n": Bson::Null, "arr": [1, 2, 3], "sub": {"x": 1}})
}

fn dec(text: &str) -> Bson {
    Bson::Decimal128(Decimal128::from_str(text).unwrap_or_else(|e| panic!("bad decimal {text}: {e}")))
}

fn check(cases: Vec<(Bson, Result<Bson, i32>)>) {
    for (expr, expected) in cases {
        let got = eval(expr.clone());
        assert_eq!(got, expected, "expression {expr}");
    }
}

#[test]
fn add_promotes_types_and_handles_null() {
    check(vec![
        (bson::bson!({"$add": [1, 2]}), Ok(Bson::Int32(3))),
        (bson::bson!({"$add": [1, 2.5]}), Ok(Bson::Double(3.5))),
        (bson::bson!({"$add": [2147483647, 1]}), Ok(Bson::Int64(2147483648))),
        (bson::bson!({"$add": [i64::MAX, 1]}), Ok(Bson::Double(9.223_372_036_854_776e18))),
        (bson::bson!({"$add": ["$a", "$b"]}), Ok(Bson::Double(7.5))),
        (bson::bson!({"$add": ["$a", "$missing"]}), Ok(Bson::Null)),
        (bson::bson!({"$add": ["$a", null]}), Ok(Bson::Null)),
        (bson::bson!({"$add": []}), Ok(Bson::Int32(0))),
        (bson::bson!({"$add": ["$a", "$s"]}), Err(16554)),
        (bson::bson!({"$add": [1, dec("2.5")]}), Ok(dec("3.5"))),
        (
            bson::bson!({"$add": [bson::DateTime::from_millis(1000), 500]}),
            Ok(Bson::DateTime(bson::DateTime::from_millis(1500))),
        ),
        (bson::bson!({"$add": [bson::DateTime::from_millis(0), bson::DateTime::from_millis(0)]}), Err(16612)),
    ]);
}

#[test]
fn subtract_multiply_divide_mod() {
    check(vec![
        (bson::bson!({"$subtract": [5, 3]}), Ok(Bson::Int32(2))),
        (
            bson::bson!({"$subtract": [bson::DateTime::from_millis(5000), bson::DateTime::from_millis(2000)]}),
            Ok(Bson::Int64(3000)),
        ),
        (
            bson::bson!({"$subtract": [bson::DateTime::from_millis(5000), 1000]}),
            Ok(Bson::DateTime(bson::DateTime::from_millis(4000))),
        ),
        (bson::bson!({"$subtract": [1000, bson::DateTime::from_millis(5000)]}), Err(16556)),
        (bson::bson!({"$subtract": [1]}), Err(16020)),
        (bson::bson!({"$multiply": [2, 3, 4]}), Ok(Bson::Int32(24))),
        (bson::bson!({"$multiply": [65536, 65536]}), Ok(Bson::Int64(4294967296))),
        (bson::bson!({"$multiply": ["$a", "s"]}), Err(16555)),
        (bson::bson!({"$divide": [9, 2]}), Ok(Bson::Double(4.5))),
        (bson::bson!({"$divide": [8, 2]}), Ok(Bson::Double(4.0))),
        (bson::bson!({"$divide": [1, 0]}), Err(2)),
        (bson::bson!({"$divide": [1, 0.0]}), Err(2)),
        (bson::bson!({"$divide": ["$missing", 0]}), Ok(Bson::Null)),
        (bson::bson!({"$divide": [dec("1"), 4]}), Ok(dec("0.25"))),
        (bson::bson!({"$mod": [10, 3]}), Ok(Bson::Int32(1))),
        (bson::bson!({"$mod": [-10, 3]}), Ok(Bson::Int32(-1))),
        (bson::bson!({"$mod": [10.5, 3]}), Ok(Bson::Double(1.5))),
        (bson::bson!({"$mod": [10_i64, 3]}), Ok(Bson::Int64(1))),
        (bson::bson!({"$mod": [10, 0]}), Err(16610)),
        (bson::bson!({"$mod": ["x", 2]}), Err(16611)),
    ]);
}

#[test]
fn unary_math() {
    check(vec![
        (bson::bson!({"$abs": -1}), Ok(Bson::Int32(1))),
        (bson::bson!({"$abs": i32::MIN}), Ok(Bson::Int64(2147483648))),
        (bson::bson!({"$abs": i64::MIN}), Err(28680)),
        (bson::bson!({"$abs": null}), Ok(Bson::Null)),
        (bson::bson!({"$abs": "x"}), Err(28765)),
        (bson::bson!({"$ceil": 1.2}), Ok(Bson::Double(2.0))),
        (bson::bson!({"$ceil": -1.2}), Ok(Bson::Double(-1.0))),
        (bson::bson!({"$floor": -1.2}), Ok(Bson::Double(-2.0))),
        (bson::bson!({"$floor": 7}), Ok(Bson::Int32(7))),
        (bson::bson!({"$sqrt": 25}), Ok(Bson::Double(5.0))),
        (bson::bson!({"$sqrt": -1}), Err(28714)),
        (bson::bson!({"$exp": 0}), Ok(Bson::Double(1.0))),
        (bson::bson!({"$ln": 1}), Ok(Bson::Double(0.0))),
        (bson::bson!({"$ln": 0}), Err(28766)),
        (bson::bson!({"$log10": 100}), Ok(Bson::Double(2.0))),
        (bson::bson!({"$log10": -1}), Err(28761)),
        (bson::bson!({"$log": [8, 2]}), Ok(Bson::Double(3.0))),
        (bson::bson!({"$log": [8, 1]}), Err(28759)),
        (bson::bson!({"$pow": [2, 10]}), Ok(Bson::Int32(1024))),
        (bson::bson!({"$pow": [2, 40]}), Ok(Bson::Int64(1099511627776))),
        (bson::bson!({"$pow": [2, -1]}), Ok(Bson::Double(0.5))),
        (bson::bson!({"$pow": [0, -1]}), Err(28764)),
        (bson::bson!({"$pow": [5, 0]}), Ok(Bson::Int32(1))),
    ]);
    let nan = eval(bson::bson!({"$sqrt": f64::NAN}));
    assert!(matches!(nan, Ok(Bson::Double(d)) if d.is_nan()));
}

#[test]
fn round_and_trunc_follow_half_even() {
    check(vec![
        (bson::bson!({"$round": [10.5, 0]}), Ok(Bson::Double(10.0))),
        (bson::bson!({"$round": [11.5, 0]}), Ok(Bson::Double(12.0))),
        (bson::bson!({"$round": [12.5, 0]}), Ok(Bson::Double(12.0))),
        (bson::bson!({"$round": [-2.5]}), Ok(Bson::Double(-2.0))),
        (bson::bson!({"$round": [19.25, 1]}), Ok(Bson::Double(19.2))),
        (bson::bson!({"$round": [28.73, -1]}), Ok(Bson::Double(30.0))),
        (bson::bson!({"$round": [1234, -2]}), Ok(Bson::Int32(1200))),
        (bson::bson!({"$round": [1250, -2]}), Ok(Bson::Int32(1200))),
        (bson::bson!({"$round": [5, 2]}), Ok(Bson::Int32(5))),
        (bson::bson!({"$round": ["x", 0]}), Err(51081)),
        (bson::bson!({"$round": [1.5, 101]}), Err(51083)),
        (bson::bson!({"$trunc": [19.25, 1]}), Ok(Bson::Double(19.2))),
        (bson::bson!({"$trunc": [-28.73, 0]}), Ok(Bson::Double(-28.0))),
        (bson::bson!({"$trunc": [28.73, -1]}), Ok(Bson::Double(20.0))),
        (bson::bson!({"$round": [dec("1.2345"), 2]}), Ok(dec("1.23"))),
    ]);
}

#[test]
fn comparison_uses_total_order_and_missing_is_below_null() {
    check(vec![
        (bson::bson!({"$eq": [1, 1.0]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$eq": [1, dec("1.00")]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$eq": ["$missing", null]}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$eq": ["$missing", "$alsoMissing"]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$lt": ["$missing", null]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$gt": ["a", 5]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$gte": [5, 5]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$lte": [6, 5]}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$ne": ["$a", 5]}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$cmp": [1, 2]}), Ok(Bson::Int32(-1))),
        (bson::bson!({"$cmp": ["b", "a"]}), Ok(Bson::Int32(1))),
        (bson::bson!({"$cmp": [[1, 2], [1, 2]]}), Ok(Bson::Int32(0))),
        (bson::bson!({"$gt": [{"a": 1}, [1]]}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$eq": [1]}), Err(16020)),
    ]);
}

#[test]
fn boolean_and_conditionals() {
    check(vec![
        (bson::bson!({"$and": [1, "x", true]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$and": [1, 0]}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$and": []}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$or": [null, "$missing", false]}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$or": [[], false]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$not": [0]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$not": [dec("0")]}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$cond": [{"$gt": ["$a", 3]}, "big", "small"]}), Ok(Bson::String("big".into()))),
        (bson::bson!({"$cond": {"if": false, "then": 1, "else": 2}}), Ok(Bson::Int32(2))),
        (bson::bson!({"$cond": {"if": true, "then": 1}}), Err(17082)),
        (bson::bson!({"$cond": [false, {"$divide": [1, 0]}, "safe"]}), Ok(Bson::String("safe".into()))),
        (bson::bson!({"$ifNull": ["$missing", "$n", "fallback"]}), Ok(Bson::String("fallback".into()))),
        (bson::bson!({"$ifNull": ["$a", "fallback"]}), Ok(Bson::Int32(5))),
        (bson::bson!({"$ifNull": ["$a"]}), Err(1257300)),
        (
            bson::bson!({"$switch": {"branches": [{"case": {"$lt": ["$a", 0]}, "then": "neg"}, {"case": {"$gt": ["$a", 0]}, "then": "pos"}], "default": "zero"}}),
            Ok(Bson::String("pos".into())),
        ),
        (bson::bson!({"$switch": {"branches": [{"case": false, "then": 1}]}}), Err(40066)),
        (bson::bson!({"$switch": {"branches": []}}), Err(40068)),
        (bson::bson!({"$switch": {"branches": [{"then": 1}]}}), Err(40064)),
    ]);
}

#[test]
fn literals_variables_and_let() {
    check(vec![
        (bson::bson!({"$literal": "$a"}), Ok(Bson::String("$a".into()))),
        (bson::bson!({"$literal": {"$add": [1, 2]}}), Ok(bson::bson!({"$add": [1, 2]}))),
        (bson::bson!("$sub.x"), Ok(Bson::Int32(1))),
        (bson::bson!("$$ROOT.a"), Ok(Bson::Int32(5))),
        (bson::bson!("$$CURRENT.sub"), Ok(bson::bson!({"x": 1}))),
        (
            bson::bson!({"$let": {"vars": {"x": 2, "y": "$a"}, "in": {"$multiply": ["$$x", "$$y"]}}}),
            Ok(Bson::Int32(10)),
        ),
        (
            bson::bson!({"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": 2}, "in": "$$x"}}}}),
            Ok(Bson::Int32(2)),
        ),
        (bson::bson!("$$undefinedVar"), Err(17276)),
        (bson::bson!({"$let": {"vars": {"Bad": 1}, "in": 1}}), Err(16870)),
        (bson::bson!({"$unknownOperator": 1}), Err(168)),
        (bson::bson!({"$add": [1, 2], "b": 1}), Err(15983)),
        (
            bson::bson!({"a": {"$add": [1, 2]}, "b": "$missing", "c": ["$missing"]}),
            Ok(bson::bson!({"a": 3, "c": [null]})),
        ),
    ]);
    let remove = Expr::parse(&bson::bson!("$$REMOVE")).map_err(|e| e.code());
    let value = remove.and_then(|e| evaluate_value(&e, &doc! {}, &Variables::new()).map_err(|e| e.code()));
    assert_eq!(value, Ok(None));
}

#[test]
fn field_paths_through_arrays_map_over_documents() {
    let document = doc! {"items": [{"p": 1}, {"p": 2}, 7, {"q": 1}, {"p": [3]}]};
    assert_eq!(eval_in(bson::bson!("$items.p"), &document), Ok(bson::bson!([1, 2, [3]])));
    assert_eq!(eval_in(bson::bson!("$items.0"), &document), Ok(bson::bson!([])));
    assert_eq!(eval_in(bson::bson!({"$sum": "$items.p"}), &document), Ok(Bson::Int32(3)));
}

#[test]
fn rand_is_a_fresh_double_in_the_unit_interval() {
    let parsed = Expr::parse(&Bson::Document(doc! {"$rand": {}})).unwrap();
    let draws: Vec<f64> = (0..100)
        .map(|_| match evaluate(&parsed, &Document::new(), &Variables::new()).unwrap() {
            Bson::Double(value) => value,
            other => panic!("$rand gave {other}"),
        })
        .collect();
    assert!(draws.iter().all(|value| (0.0..1.0).contains(value)));
    assert!(draws.windows(2).any(|pair| pair[0] != pair[1]));
    assert_eq!(eval(doc! {"$rand": {"seed": 1}}.into()), Err(10065));
    assert_eq!(eval(doc! {"$rand": []}.into()), Err(10065));
}

#[test]
fn let_values_are_evaluated_once_in_order_and_cluster_time_needs_one() {
    let now = bson::DateTime::from_millis(1_700_000_000_000);
    let vars = Variables::with_now(now)
        .with_let(&doc! {"a": {"$add": [1, 2]}, "b": {"$multiply": ["$$a", 10]}, "when": "$$NOW"})
        .unwrap();
    assert_eq!(vars.get("b"), Some(&Bson::Int32(30)));
    assert_eq!(vars.get("when"), Some(&Bson::DateTime(now)));
    // Field paths read no document: a let value is a constant of the statement.
    let fields = Variables::new().with_let(&doc! {"f": "$x"}).unwrap();
    assert_eq!(fields.get("f"), Some(&Bson::Null));
    for (bad, code) in [(doc! {"Upper": 1}, 16870), (doc! {"a-b": 1}, 16871), (doc! {"u": "$$nope"}, 17276)] {
        assert_eq!(Variables::new().with_let(&bad).map(|_| ()).map_err(|e| e.code()), Err(code), "{bad}");
    }
    let cluster_time = Expr::parse(&Bson::String("$$CLUSTER_TIME".into())).unwrap();
    assert_eq!(evaluate(&cluster_time, &Document::new(), &Variables::new()).map_err(|e| e.code()), Err(51144));
    let time = bson::Timestamp { time: 7, increment: 3 };
    let replicated = Variables::new().with_cluster_time(time);
    assert_eq!(evaluate(&cluster_time, &Document::new(), &replicated).unwrap(), Bson::Timestamp(time));
}
