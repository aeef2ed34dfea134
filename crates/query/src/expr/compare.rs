//! Comparison operators `$eq $ne $gt $gte $lt $lte $cmp` and `$not`.
//!
//! Aggregation compares any two values in MongoDB's total order (no type bracketing, unlike
//! find filters): `document::compare_values`, with a missing value ranked like `undefined`,
//! above MinKey and below `null`. So `{$eq: ["$missing", null]}` is false and
//! `{$lt: ["$missing", 0]}` is true, as in MongoDB.

use std::cmp::Ordering;

use bson::Bson;

use super::value::{EvalResult, Value, value_truthy};
use super::{Arity, Func, OpDef};

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$eq" => ("$eq", Arity::Exact(2), |a| test(a, Ordering::is_eq)),
        "$ne" => ("$ne", Arity::Exact(2), |a| test(a, Ordering::is_ne)),
        "$gt" => ("$gt", Arity::Exact(2), |a| test(a, Ordering::is_gt)),
        "$gte" => ("$gte", Arity::Exact(2), |a| test(a, Ordering::is_ge)),
        "$lt" => ("$lt", Arity::Exact(2), |a| test(a, Ordering::is_lt)),
        "$lte" => ("$lte", Arity::Exact(2), |a| test(a, Ordering::is_le)),
        "$cmp" => ("$cmp", Arity::Exact(2), cmp),
        "$not" => ("$not", Arity::Exact(1), not),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

/// MongoDB's order over evaluated values, missing included.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => document::compare_values(x, y),
        (None, None) => Ordering::Equal,
        (None, Some(y)) => missing_versus(y),
        (Some(x), None) => missing_versus(x).reverse(),
    }
}

fn missing_versus(other: &Bson) -> Ordering {
    match other {
        Bson::MinKey => Ordering::Greater,
        Bson::Undefined => Ordering::Equal,
        _ => Ordering::Less,
    }
}

fn test(args: &[Value], accept: fn(Ordering) -> bool) -> EvalResult {
    Ok(Some(Bson::Boolean(accept(compare(&args[0], &args[1])))))
}

fn cmp(args: &[Value]) -> EvalResult {
    let n = match compare(&args[0], &args[1]) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    };
    Ok(Some(Bson::Int32(n)))
}

fn not(args: &[Value]) -> EvalResult {
    Ok(Some(Bson::Boolean(!value_truthy(&args[0]))))
}
