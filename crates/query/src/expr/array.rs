//! Array operators: `$size $arrayElemAt $first $last $in $slice $concatArrays $range
//! $reverseArray $zip $isArray $indexOfArray $arrayToObject $sortArray $firstN $lastN $maxN
//! $minN`; `$filter $map $reduce` are control forms in [`super::control`], the set operators
//! in [`super::set`].
//!
//! Equality inside arrays (`$in`, `$indexOfArray`) is MongoDB's value equality
//! ([`super::compare::compare`] == Equal), so `1`, `1.0` and `NumberLong(1)` match.
//! Indexes must be whole numbers fitting int32; negative indexes count from the end.

use std::cmp::Ordering;
use vocabulary::location;

use bson::{Bson, Document};

use super::compare::compare;
use super::parse::{parse, positional_args};
use super::value::{EvalResult, Value, bson_type_name, display, fail, is_nullish, to_i32_arg, type_name};
use super::{Arity, Call, Expr, Func, OpDef};
use crate::error::QueryError;
use crate::number::{Num, long_or_int};

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$size" => ("$size", Arity::Exact(1), size),
        "$arrayElemAt" => ("$arrayElemAt", Arity::Exact(2), array_elem_at),
        "$in" => ("$in", Arity::Exact(2), in_array),
        "$slice" => ("$slice", Arity::Range(2, 3), slice),
        "$concatArrays" => ("$concatArrays", Arity::Any, concat_arrays),
        "$range" => ("$range", Arity::Range(2, 3), range),
        "$reverseArray" => ("$reverseArray", Arity::Exact(1), reverse_array),
        "$isArray" => ("$isArray", Arity::Exact(1), |a| Ok(Some(Bson::Boolean(matches!(a[0], Some(Bson::Array(_))))))),
        "$indexOfArray" => ("$indexOfArray", Arity::Range(2, 4), index_of_array),
        "$arrayToObject" => ("$arrayToObject", Arity::Exact(1), array_to_object),
        "$zip" => return Some(OpDef::Custom("$zip", parse_zip)),
        "$sortArray" => return Some(OpDef::Custom("$sortArray", parse_sort_array)),
        "$firstN" => return Some(OpDef::Custom("$firstN", parse_n_elements)),
        "$lastN" => return Some(OpDef::Custom("$lastN", parse_n_elements)),
        "$maxN" => return Some(OpDef::Custom("$maxN", parse_n_elements)),
        "$minN" => return Some(OpDef::Custom("$minN", parse_n_elements)),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

/// `$first`/`$last` as expressions (an array operand), used by [`super::accumulator`].
pub fn first_or_last(args: &[Value], op: &str, last: bool) -> EvalResult {
    match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Array(items)) => Ok(if last { items.last() } else { items.first() }.cloned()),
        other => Err(fail(
            location::ARRAY_OPERATOR_NOT_ARRAY,
            format!("{op}'s argument must be an array, but is {}", type_name(other)),
        )),
    }
}

fn size(args: &[Value]) -> EvalResult {
    match &args[0] {
        Some(Bson::Array(items)) => Ok(Some(long_or_int(items.len() as i64))),
        other => Err(fail(
            location::SIZE_NOT_ARRAY,
            format!("The argument to $size must be an array. Type of argument: {}", type_name(other)),
        )),
    }
}

/// Resolves a possibly negative index against a length.
fn resolve_index(index: i32, length: usize) -> Option<usize> {
    if index >= 0 {
        let i = index as usize;
        (i < length).then_some(i)
    } else {
        length.checked_sub(index.unsigned_abs() as usize)
    }
}

fn array_elem_at(args: &[Value]) -> EvalResult {
    if is_nullish(&args[0]) || is_nullish(&args[1]) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(fail(
            location::ARRAY_OPERATOR_NOT_ARRAY,
            format!("$arrayElemAt's first argument must be an array, but is {}", type_name(&args[0])),
        ));
    };
    let index_value = args[1].as_ref().unwrap_or(&Bson::Null);
    let index = to_i32_arg(
        index_value,
        (location::ARRAY_ELEM_AT_INDEX_NOT_NUMBER, "$arrayElemAt's second argument must be a numeric value"),
        (
            location::ARRAY_ELEM_AT_INDEX_NOT_INT32,
            "$arrayElemAt's second argument must be representable as a 32-bit integer",
        ),
    )?;
    Ok(resolve_index(index, items.len()).and_then(|i| items.get(i)).cloned())
}

fn in_array(args: &[Value]) -> EvalResult {
    let Some(Bson::Array(items)) = &args[1] else {
        return Err(fail(
            location::IN_NOT_ARRAY,
            format!("$in requires an array as a second argument, found: {}", type_name(&args[1])),
        ));
    };
    let found = items.iter().any(|item| compare(&args[0], &Some(item.clone())) == Ordering::Equal);
    Ok(Some(Bson::Boolean(found)))
}

fn slice(args: &[Value]) -> EvalResult {
    if args.iter().any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(fail(
            location::SLICE_FIRST_ARGUMENT_NOT_ARRAY,
            format!("First argument to $slice must be an array, but is of type: {}", type_name(&args[0])),
        ));
    };
    let second = args[1].as_ref().unwrap_or(&Bson::Null);
    let second = to_i32_arg(
        second,
        (location::SLICE_SECOND_NOT_NUMBER, "Second argument to $slice must be a numeric value"),
        (location::SLICE_SECOND_NOT_INT32, "Second argument to $slice can't be represented as a 32-bit integer"),
    )?;
    let length = items.len() as i64;
    let (start, count) = match args.get(2) {
        None if second >= 0 => (0, i64::from(second)),
        None => ((length + i64::from(second)).max(0), length),
        Some(third) => {
            let third = to_i32_arg(
                third.as_ref().unwrap_or(&Bson::Null),
                (location::SLICE_THIRD_NOT_NUMBER, "Third argument to $slice must be numeric"),
                (location::SLICE_THIRD_NOT_INT32, "Third argument to $slice can't be represented as a 32-bit integer"),
            )?;
            if third <= 0 {
                return Err(fail(
                    location::SLICE_THIRD_NOT_POSITIVE,
                    format!("Third argument to $slice must be positive: {third}"),
                ));
            }
            let start = if second >= 0 { i64::from(second) } else { (length + i64::from(second)).max(0) };
            (start, i64::from(third))
        }
    };
    let taken = items.iter().skip(start as usize).take(count.max(0) as usize).cloned().collect();
    Ok(Some(Bson::Array(taken)))
}

fn concat_arrays(args: &[Value]) -> EvalResult {
    let mut out = Vec::new();
    for arg in args {
        match arg {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(items)) => out.extend(items.iter().cloned()),
            other => {
                return Err(fail(
                    location::CONCAT_ARRAYS_NOT_ARRAY,
                    format!("$concatArrays only supports arrays, not {}", type_name(other)),
                ));
            }
        }
    }
    Ok(Some(Bson::Array(out)))
}

/// Upper bound on `$range`'s output, as MongoDB bounds its memory (64 MiB of values).
const RANGE_LIMIT: i64 = 64 * 1024 * 1024 / 16;

fn range_arg(value: &Value, what: &str, codes: (i32, i32)) -> Result<i64, QueryError> {
    let Some(n) = value.as_ref().and_then(Num::from_bson) else {
        return Err(fail(
            codes.0,
            format!("$range requires a numeric {what}, found value of type: {}", type_name(value)),
        ));
    };
    n.to_exact_i64().filter(|i| i32::try_from(*i).is_ok()).ok_or_else(|| {
        fail(
            codes.1,
            format!(
                "$range requires a {what} that can be represented as a 32-bit integer, found value: {}",
                display(value)
            ),
        )
    })
}

fn range(args: &[Value]) -> EvalResult {
    let start =
        range_arg(&args[0], "starting value", (location::RANGE_START_NOT_NUMBER, location::RANGE_START_NOT_INT32))?;
    let end = range_arg(&args[1], "ending value", (location::RANGE_END_NOT_NUMBER, location::RANGE_END_NOT_INT32))?;
    let step = match args.get(2) {
        Some(v) => range_arg(v, "step value", (location::RANGE_STEP_NOT_NUMBER, location::RANGE_STEP_NOT_INT32))?,
        None => 1,
    };
    if step == 0 {
        return Err(fail(location::RANGE_STEP_ZERO, "$range requires a non-zero step value"));
    }
    let count = if (step > 0 && start < end) || (step < 0 && start > end) {
        ((end - start).abs() + step.abs() - 1) / step.abs()
    } else {
        0
    };
    if count > RANGE_LIMIT {
        return Err(fail(
            location::RANGE_TOO_MUCH_MEMORY,
            format!("$range would use too much memory ({} bytes) and cannot spill to disk", count * 16),
        ));
    }
    let out = (0..count).map(|i| Bson::Int32((start + i * step) as i32)).collect();
    Ok(Some(Bson::Array(out)))
}

fn reverse_array(args: &[Value]) -> EvalResult {
    match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Array(items)) => Ok(Some(Bson::Array(items.iter().rev().cloned().collect()))),
        other => Err(fail(
            location::REVERSE_ARRAY_NOT_ARRAY,
            format!("The argument to $reverseArray must be an array, but was of type: {}", type_name(other)),
        )),
    }
}

fn index_bound(value: Option<&Value>, default: usize) -> Result<usize, QueryError> {
    let Some(value) = value else { return Ok(default) };
    let n = value.as_ref().and_then(Num::from_bson).and_then(|n| n.to_exact_i64());
    match n {
        None => Err(fail(
            location::INDEX_OF_ARRAY_START_NOT_INTEGER,
            format!(
                "$indexOfArray requires an integral starting index, found a value of type: {}, with value: {}",
                type_name(value),
                display(value)
            ),
        )),
        Some(i) if i < 0 => Err(fail(
            location::INDEX_OF_ARRAY_START_NEGATIVE,
            format!("$indexOfArray requires a nonnegative starting index, found: {i}"),
        )),
        Some(i) => Ok(usize::try_from(i).unwrap_or(usize::MAX)),
    }
}

fn index_of_array(args: &[Value]) -> EvalResult {
    let items = match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(items)) => items,
        other => {
            return Err(fail(
                location::INDEX_OF_ARRAY_NOT_ARRAY,
                format!("$indexOfArray requires an array as a first argument, found: {}", type_name(other)),
            ));
        }
    };
    let start = index_bound(args.get(2), 0)?;
    let end = index_bound(args.get(3), items.len())?.min(items.len());
    for (i, item) in items.iter().enumerate().take(end).skip(start) {
        if compare(&args[1], &Some(item.clone())) == Ordering::Equal {
            return Ok(Some(long_or_int(i as i64)));
        }
    }
    Ok(Some(Bson::Int32(-1)))
}

fn array_to_object(args: &[Value]) -> EvalResult {
    let items = match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(items)) => items,
        other => {
            return Err(fail(
                location::ARRAY_TO_OBJECT_NOT_ARRAY,
                format!("$arrayToObject requires an array input, found: {}", type_name(other)),
            ));
        }
    };
    let pairs_form = matches!(items.first(), Some(Bson::Array(_)));
    let mut out = Document::new();
    for item in items {
        let (key, value) = match (item, pairs_form) {
            (Bson::Array(pair), true) => pair_entry(pair)?,
            (Bson::Document(kv), false) => kv_entry(kv)?,
            (Bson::Array(_) | Bson::Document(_), _) => {
                return Err(fail(
                    location::ARRAY_TO_OBJECT_MIXED_FORMATS,
                    "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects.",
                ));
            }
            (other, _) => {
                return Err(fail(
                    location::ARRAY_TO_OBJECT_UNRECOGNIZED_FORMAT,
                    format!("Unrecognised input type format for $arrayToObject: {}", bson_type_name(other)),
                ));
            }
        };
        if key.contains('\0') {
            return Err(fail(
                location::ARRAY_TO_OBJECT_KEY_HAS_NULL_BYTE,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.insert(key, value);
    }
    Ok(Some(Bson::Document(out)))
}

fn pair_entry(pair: &[Bson]) -> Result<(String, Bson), QueryError> {
    match pair {
        [Bson::String(k), v] => Ok((k.clone(), v.clone())),
        [k, _] => Err(fail(
            location::ARRAY_TO_OBJECT_KEY_NOT_STRING,
            format!(
                "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: {}",
                bson_type_name(k)
            ),
        )),
        _ => Err(fail(
            location::ARRAY_TO_OBJECT_PAIR_NOT_SIZE_TWO,
            format!("$arrayToObject requires an array of size 2 arrays,found array of size: {}", pair.len()),
        )),
    }
}

fn kv_entry(kv: &Document) -> Result<(String, Bson), QueryError> {
    if kv.len() != 2 {
        return Err(fail(
            location::ARRAY_TO_OBJECT_WRONG_KEY_COUNT,
            format!(
                "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:{}",
                kv.len()
            ),
        ));
    }
    let (Some(k), Some(v)) = (kv.get("k"), kv.get("v")) else {
        return Err(fail(
            location::ARRAY_TO_OBJECT_MISSING_K_OR_V,
            format!("$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: {kv}"),
        ));
    };
    match k {
        Bson::String(k) => Ok((k.clone(), v.clone())),
        other => Err(fail(
            location::ARRAY_TO_OBJECT_K_NOT_STRING,
            format!(
                "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string. Found type: {}",
                bson_type_name(other)
            ),
        )),
    }
}

fn parse_zip(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(fail(
            location::ZIP_ARGUMENT_NOT_OBJECT,
            format!("$zip only supports an object as an argument, found {}", bson_type_name(arg)),
        ));
    };
    let (mut inputs, mut longest, mut defaults) = (None, false, None);
    for (key, value) in spec {
        match key.as_str() {
            "inputs" => {
                let Bson::Array(_) = value else {
                    return Err(fail(
                        location::ZIP_INPUTS_NOT_ARRAY,
                        format!("inputs must be an array of expressions, found {value}"),
                    ));
                };
                inputs = Some(positional_args(value)?);
            }
            "useLongestLength" => match value {
                Bson::Boolean(b) => longest = *b,
                _ => {
                    return Err(fail(
                        location::ZIP_USE_LONGEST_LENGTH_NOT_BOOL,
                        format!("useLongestLength must be a bool, found {value}"),
                    ));
                }
            },
            "defaults" => {
                let Bson::Array(_) = value else {
                    return Err(fail(
                        location::ZIP_DEFAULTS_NOT_ARRAY,
                        format!("defaults must be an array of expressions, found {value}"),
                    ));
                };
                defaults = Some(parse(value)?);
            }
            other => {
                return Err(fail(location::ZIP_UNKNOWN_ARGUMENT, format!("$zip found an unknown argument: {other}")));
            }
        }
    }
    let inputs = inputs.ok_or_else(|| fail(location::ZIP_WITHOUT_INPUTS, "$zip requires at least one input array"))?;
    if defaults.is_some() && !longest {
        return Err(fail(
            location::ZIP_DEFAULTS_WITHOUT_USE_LONGEST_LENGTH,
            "cannot specify defaults unless useLongestLength is true",
        ));
    }
    if let Some(Expr::Array(d)) = &defaults
        && d.len() != inputs.len()
    {
        return Err(fail(location::ZIP_DEFAULTS_LENGTH_MISMATCH, "defaults and inputs must have the same length"));
    }
    let mut args = vec![Expr::Literal(Bson::Boolean(longest)), defaults.unwrap_or(Expr::Absent)];
    args.extend(inputs);
    Ok(Expr::Call(Call { name, func: zip, args }))
}

/// Arguments: `[useLongestLength, defaults, input...]`.
fn zip(args: &[Value]) -> EvalResult {
    let longest = matches!(args[0], Some(Bson::Boolean(true)));
    let defaults = match &args[1] {
        Some(Bson::Array(d)) => d.clone(),
        _ => Vec::new(),
    };
    let mut arrays = Vec::new();
    for input in &args[2..] {
        match input {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(items)) => arrays.push(items),
            other => {
                return Err(fail(
                    location::ZIP_INPUT_NOT_ARRAY,
                    format!("$zip found a non-array expression in input: {}", display(other)),
                ));
            }
        }
    }
    let lengths = arrays.iter().map(|a| a.len());
    let rows = if longest { lengths.max() } else { lengths.min() }.unwrap_or(0);
    let out = (0..rows)
        .map(|row| {
            let tuple = arrays
                .iter()
                .enumerate()
                .map(|(col, a)| a.get(row).or_else(|| defaults.get(col)).cloned().unwrap_or(Bson::Null))
                .collect();
            Bson::Array(tuple)
        })
        .collect();
    Ok(Some(Bson::Array(out)))
}

/// The named fields of an object-form array operator, each parsed as an expression except the
/// `literal` ones; all must be there. Codes: (not an object, unknown field, first missing field).
fn object_fields(
    op: &'static str,
    arg: &Bson,
    names: &[&str],
    literal: &[&str],
    codes: (i32, i32, i32),
) -> Result<Vec<Expr>, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(fail(codes.0, format!("{op} requires an object as an argument, found: {}", bson_type_name(arg))));
    };
    let mut out = vec![None; names.len()];
    for (key, value) in spec {
        match names.iter().position(|name| name == key) {
            Some(i) if literal.contains(&key.as_str()) => out[i] = Some(Expr::Literal(value.clone())),
            Some(i) => out[i] = Some(parse(value)?),
            None => return Err(fail(codes.1, format!("{op} found an unknown argument: {key}"))),
        }
    }
    // Each missing field has its own code, in `names` order from `codes.2`.
    out.into_iter()
        .zip(names)
        .zip(codes.2..)
        .map(|((expr, name), code)| expr.ok_or_else(|| fail(code, format!("{op} requires '{name}' to be specified"))))
        .collect()
}

/// `{$sortArray: {input, sortBy}}`: `sortBy` is 1 or -1 (the elements by value) or a sort
/// document (documents by their fields, as `$sort` orders them); the sort is stable.
fn parse_sort_array(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let args = object_fields(
        name,
        arg,
        &["input", "sortBy"],
        &["sortBy"],
        (
            location::SORT_ARRAY_ARGUMENT_NOT_OBJECT,
            location::SORT_ARRAY_UNKNOWN_ARGUMENT,
            location::SORT_ARRAY_MISSING_ARGUMENT,
        ),
    )?;
    match &args[1] {
        Expr::Literal(Bson::Document(spec)) => {
            crate::sort::SortSpec::parse(spec)?;
        }
        Expr::Literal(direction) if sort_direction(direction).is_some() => {}
        _ => {
            return Err(fail(
                location::SORT_ARRAY_SORT_BY_INVALID,
                "$sortArray requires sortBy to be a sort pattern or 1 or -1",
            ));
        }
    }
    Ok(Expr::Call(Call { name, func: sort_array, args }))
}

fn sort_direction(value: &Bson) -> Option<Ordering> {
    match Num::from_bson(value).map(|n| n.to_f64()) {
        Some(1.0) => Some(Ordering::Less),
        Some(-1.0) => Some(Ordering::Greater),
        _ => None,
    }
}

fn sort_array(args: &[Value]) -> EvalResult {
    let mut items = match &args[0] {
        value if is_nullish(value) => return Ok(Some(Bson::Null)),
        Some(Bson::Array(items)) => items.clone(),
        other => {
            return Err(fail(
                location::SORT_ARRAY_INPUT_NOT_ARRAY,
                format!("The input argument to $sortArray must be an array, but was of type: {}", type_name(other)),
            ));
        }
    };
    match &args[1] {
        Some(Bson::Document(spec)) => {
            let spec = crate::sort::SortSpec::parse(spec)?;
            let empty = Document::new();
            let key = |item: &Bson| spec.key(if let Bson::Document(d) = item { d } else { &empty });
            let mut keyed: Vec<(Vec<Bson>, Bson)> = items.into_iter().map(|item| (key(&item), item)).collect();
            keyed.sort_by(|a, b| spec.compare_keys(&a.0, &b.0));
            items = keyed.into_iter().map(|(_, item)| item).collect();
        }
        Some(direction) => {
            let descending = sort_direction(direction) == Some(Ordering::Greater);
            items.sort_by(|a, b| {
                let order = document::compare_values(a, b);
                if descending { order.reverse() } else { order }
            });
        }
        None => {
            return Err(fail(
                location::SORT_ARRAY_SORT_BY_INVALID,
                "$sortArray requires sortBy to be a sort pattern or 1 or -1",
            ));
        }
    }
    Ok(Some(Bson::Array(items)))
}

/// `{$firstN | $lastN | $maxN | $minN: {n, input}}`: the first or last `n` elements, or the `n`
/// largest or smallest (null and missing elements left out), largest or smallest first.
fn parse_n_elements(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let args = object_fields(
        name,
        arg,
        &["n", "input"],
        &[],
        (location::N_ACCUMULATOR_NOT_OBJECT, location::N_ACCUMULATOR_UNKNOWN_FIELD, location::N_ACCUMULATOR_WITHOUT_N),
    )?;
    let func: Func = match name {
        "$firstN" => |a| n_elements(a, "$firstN"),
        "$lastN" => |a| n_elements(a, "$lastN"),
        "$maxN" => |a| n_elements(a, "$maxN"),
        _ => |a| n_elements(a, "$minN"),
    };
    Ok(Expr::Call(Call { name, func, args }))
}

fn n_elements(args: &[Value], op: &str) -> EvalResult {
    let n = positive_n(args[0].as_ref())?;
    let items = match &args[1] {
        Some(Bson::Array(items)) => items,
        other => {
            return Err(fail(
                location::N_ARRAY_OPERATOR_NOT_ARRAY,
                format!("Input to {op} must be an array, but found: {}", type_name(other)),
            ));
        }
    };
    let chosen: Vec<Bson> = match op {
        "$firstN" => items.iter().take(n).cloned().collect(),
        "$lastN" => items[items.len().saturating_sub(n)..].to_vec(),
        _ => {
            let mut present: Vec<&Bson> =
                items.iter().filter(|item| !matches!(item, Bson::Null | Bson::Undefined)).collect();
            let largest = op == "$maxN";
            present.sort_by(|a, b| {
                let order = document::compare_values(a, b);
                if largest { order.reverse() } else { order }
            });
            present.into_iter().take(n).cloned().collect()
        }
    };
    Ok(Some(Bson::Array(chosen)))
}

/// The `n` of the n-element operators and accumulators: a positive integral number.
pub(super) fn positive_n(value: Option<&Bson>) -> Result<usize, QueryError> {
    match value.and_then(Num::from_bson).and_then(|n| n.to_exact_i64()) {
        Some(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        Some(n) => Err(fail(location::N_NOT_POSITIVE, format!("'n' must be greater than 0, found {n}"))),
        None => Err(fail(
            location::N_NOT_INTEGRAL,
            format!("Value for 'n' must be of integral type, but found {}", display(&value.cloned())),
        )),
    }
}
