//! Set operators: `$setUnion $setIntersection $setDifference $setEquals $setIsSubset
//! $anyElementTrue $allElementsTrue`, over arrays taken as sets of values.
//!
//! Elements are equal as values compare (`1 == 1.0`), duplicates are ignored, and a result set
//! keeps its elements in the order they first appear (MongoDB leaves the order unspecified).
//! `$setUnion`, `$setIntersection` and `$setDifference` return `null` when an operand is null or
//! missing; `$setEquals` and `$setIsSubset` want arrays. Under a collation, strings compare by it
//! (`super::eval`).

use bson::Bson;
use document::compare_values;
use vocabulary::location;

use super::value::{EvalResult, Value, fail, is_nullish, is_truthy, type_name};
use super::{Arity, Func, OpDef};

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$setUnion" => ("$setUnion", Arity::Any, union),
        "$setIntersection" => ("$setIntersection", Arity::Any, intersection),
        "$setDifference" => ("$setDifference", Arity::Exact(2), difference),
        "$setEquals" => ("$setEquals", Arity::Any, equals),
        "$setIsSubset" => ("$setIsSubset", Arity::Exact(2), is_subset),
        "$anyElementTrue" => ("$anyElementTrue", Arity::Exact(1), |a| {
            element_truth(a, "$anyElementTrue", location::ANY_ELEMENT_TRUE_NOT_ARRAY, true)
        }),
        "$allElementsTrue" => ("$allElementsTrue", Arity::Exact(1), |a| {
            element_truth(a, "$allElementsTrue", location::ALL_ELEMENTS_TRUE_NOT_ARRAY, false)
        }),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

fn contains(set: &[Bson], value: &Bson) -> bool {
    set.iter().any(|member| compare_values(member, value).is_eq())
}

/// The distinct elements of `items`, in first-appearance order. Equal values have equal
/// order-preserving key bytes (`1`, `1.0`), so a hash set of those tells them apart in one
/// pass.
fn distinct<'a>(items: impl IntoIterator<Item = &'a Bson>) -> Vec<Bson> {
    let mut seen = std::collections::HashSet::new();
    items.into_iter().filter(|item| seen.insert(document::keycodec::encode_value(item))).cloned().collect()
}

/// Each operand as an array; `Ok(None)` when one is null or missing (checked first, as MongoDB
/// does), `code` when one is something else.
fn nullable_arrays<'a>(
    args: &'a [Value],
    op: &str,
    code: i32,
) -> Result<Option<Vec<&'a Vec<Bson>>>, crate::error::QueryError> {
    if args.iter().any(is_nullish) {
        return Ok(None);
    }
    args.iter()
        .map(|arg| match arg {
            Some(Bson::Array(items)) => Ok(items),
            other => Err(fail(
                code,
                format!("All operands of {op} must be arrays. One argument is of type: {}", type_name(other)),
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn union(args: &[Value]) -> EvalResult {
    Ok(Some(match nullable_arrays(args, "$setUnion", location::SET_UNION_NOT_ARRAYS)? {
        Some(arrays) => Bson::Array(distinct(arrays.into_iter().flatten())),
        None => Bson::Null,
    }))
}

fn intersection(args: &[Value]) -> EvalResult {
    let Some(arrays) = nullable_arrays(args, "$setIntersection", location::SET_INTERSECTION_NOT_ARRAYS)? else {
        return Ok(Some(Bson::Null));
    };
    let Some((first, rest)) = arrays.split_first() else { return Ok(Some(Bson::Array(Vec::new()))) };
    let common = distinct(first.iter()).into_iter().filter(|item| rest.iter().all(|other| contains(other, item)));
    Ok(Some(Bson::Array(common.collect())))
}

fn difference(args: &[Value]) -> EvalResult {
    if args.iter().any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let (first, second) = two_arrays(
        args,
        "$setDifference",
        (location::SET_DIFFERENCE_FIRST_NOT_ARRAY, location::SET_DIFFERENCE_SECOND_NOT_ARRAY),
    )?;
    Ok(Some(Bson::Array(distinct(first.iter()).into_iter().filter(|item| !contains(second, item)).collect())))
}

fn equals(args: &[Value]) -> EvalResult {
    if args.len() < 2 {
        return Err(fail(
            location::SET_EQUALS_TOO_FEW_ARGUMENTS,
            format!("$setEquals needs at least two arguments had: {}", args.len()),
        ));
    }
    let mut sets = Vec::with_capacity(args.len());
    for arg in args {
        match arg {
            Some(Bson::Array(items)) => sets.push(distinct(items.iter())),
            other => {
                return Err(fail(
                    location::SET_EQUALS_NOT_ARRAYS,
                    format!("All operands of $setEquals must be arrays. One argument is of type: {}", type_name(other)),
                ));
            }
        }
    }
    let same = |a: &Vec<Bson>, b: &Vec<Bson>| a.len() == b.len() && a.iter().all(|item| contains(b, item));
    Ok(Some(Bson::Boolean(sets.windows(2).all(|pair| same(&pair[0], &pair[1])))))
}

fn is_subset(args: &[Value]) -> EvalResult {
    let (first, second) = two_arrays(
        args,
        "$setIsSubset",
        (location::SET_IS_SUBSET_FIRST_NOT_ARRAY, location::SET_IS_SUBSET_SECOND_NOT_ARRAY),
    )?;
    Ok(Some(Bson::Boolean(first.iter().all(|item| contains(second, item)))))
}

/// The two operands of `$setDifference`/`$setIsSubset`, each of which must be an array.
fn two_arrays<'a>(
    args: &'a [Value],
    op: &str,
    codes: (i32, i32),
) -> Result<(&'a [Bson], &'a [Bson]), crate::error::QueryError> {
    match (&args[0], &args[1]) {
        (Some(Bson::Array(first)), Some(Bson::Array(second))) => Ok((first, second)),
        (Some(Bson::Array(_)), other) => Err(fail(
            codes.1,
            format!("both operands of {op} must be arrays. Second argument is of type: {}", type_name(other)),
        )),
        (other, _) => Err(fail(
            codes.0,
            format!("both operands of {op} must be arrays. First argument is of type: {}", type_name(other)),
        )),
    }
}

/// `$anyElementTrue` (`any`) or `$allElementsTrue`: the truthiness of an array's elements.
fn element_truth(args: &[Value], op: &str, code: i32, any: bool) -> EvalResult {
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(fail(code, format!("{op}'s argument must be an array, but is {}", type_name(&args[0]))));
    };
    let truth = if any { items.iter().any(is_truthy) } else { items.iter().all(is_truthy) };
    Ok(Some(Bson::Boolean(truth)))
}
