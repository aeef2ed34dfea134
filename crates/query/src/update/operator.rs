//! Update operators: parsing each operator's argument, and computing a field's new value from
//! its current one.
//!
//! Every operator except `$rename` is a pure function `current value -> Change`, which
//! [`super`] then writes at the field's concrete paths; all argument errors are found at parse
//! time, type errors against the document at apply time, with MongoDB's codes and messages.

use std::cmp::Ordering;

use bson::{Bson, Document};
use document::compare_values;
use document::number::encode_decimal128;

use super::path::UpdatePath;
use crate::error::{QueryError, Result};
use crate::filter::{Filter, FilterRegex, Predicate, parse_field_value, type_name};
use crate::number::{ArithOp, Num, arith_decimal128};
use crate::sort::SortSpec;

/// One operator applied to one field.
#[derive(Debug, Clone)]
pub enum Operation {
    Set(Bson),
    Unset,
    Inc(Bson),
    Mul(Bson),
    Min(Bson),
    Max(Bson),
    Rename(UpdatePath),
    SetOnInsert(Bson),
    CurrentDate(DateKind),
    Push(Push),
    AddToSet(Vec<Bson>),
    Pop(End),
    Pull(PullCondition),
    PullAll(Vec<Bson>),
    Bit(Vec<(BitOp, Bson)>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateKind {
    Date,
    Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    First,
    Last,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

/// `$push` with its modifiers.
#[derive(Debug, Clone)]
pub struct Push {
    pub each: Vec<Bson>,
    pub position: Option<i64>,
    pub slice: Option<i64>,
    pub sort: Option<PushSort>,
}

#[derive(Debug, Clone)]
pub enum PushSort {
    /// Elements by value: ascending when true.
    Value(bool),
    /// Document elements by fields.
    Fields(SortSpec),
}

/// What `$pull` removes.
#[derive(Debug, Clone)]
pub enum PullCondition {
    Equals(Bson),
    Regex(FilterRegex),
    /// `{$gt: 5}`-style: elements satisfying the predicate.
    Predicate(Predicate),
    /// `{a: 1, b: {$gt: 2}}`-style: document elements matching the filter.
    Filter(Filter),
}

/// The effect on one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Set(Bson),
    Unset,
    Keep,
}

/// What computing a change needs to know about the document and the write.
pub struct Context<'a> {
    pub id: Option<&'a Bson>,
    pub inserting: bool,
    pub now: bson::DateTime,
}

impl Context<'_> {
    fn id_text(&self) -> String {
        match self.id {
            Some(id) => format!("{{_id: {id}}}"),
            None => "{}".to_string(),
        }
    }
}

/// Parses one `field: argument` of operator `name` (`$set`, ...).
pub fn parse(name: &str, field: &str, argument: &Bson) -> Result<Operation> {
    let shown = || format!("{{{field}: {argument}}}");
    Ok(match name {
        "$set" => Operation::Set(argument.clone()),
        "$unset" => Operation::Unset,
        "$setOnInsert" => Operation::SetOnInsert(argument.clone()),
        "$inc" | "$mul" => {
            if Num::from_bson(argument).is_none() {
                let verb = if name == "$inc" { "increment" } else { "multiply" };
                return Err(QueryError::TypeMismatch(format!("Cannot {verb} with non-numeric argument: {}", shown())));
            }
            if name == "$inc" { Operation::Inc(argument.clone()) } else { Operation::Mul(argument.clone()) }
        }
        "$min" => Operation::Min(argument.clone()),
        "$max" => Operation::Max(argument.clone()),
        "$rename" => parse_rename(field, argument)?,
        "$currentDate" => Operation::CurrentDate(parse_current_date(argument)?),
        "$push" => Operation::Push(parse_push(argument)?),
        "$addToSet" => Operation::AddToSet(parse_add_to_set(argument)?),
        "$pop" => Operation::Pop(match arith_sign(argument) {
            Some(1) => End::Last,
            Some(-1) => End::First,
            _ => return Err(QueryError::failed_to_parse(format!("$pop expects 1 or -1, found: {argument}"))),
        }),
        "$pull" => Operation::Pull(parse_pull(argument)?),
        "$pullAll" => match argument {
            Bson::Array(values) => Operation::PullAll(values.clone()),
            other => {
                return Err(QueryError::bad_value(format!(
                    "$pullAll requires an array argument but was given a {}",
                    type_name(other)
                )));
            }
        },
        "$bit" => Operation::Bit(parse_bit(field, argument)?),
        _ => {
            return Err(QueryError::failed_to_parse(format!(
                "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update specified as an array"
            )));
        }
    })
}

/// Zero of the same numeric type as `value` (`$mul` on a missing field).
fn zero_like(value: &Bson) -> Bson {
    match value {
        Bson::Int32(_) => Bson::Int32(0),
        Bson::Int64(_) => Bson::Int64(0),
        Bson::Decimal128(_) => encode_decimal128(false, 0, 0).map_or(Bson::Int32(0), Bson::Decimal128),
        _ => Bson::Double(0.0),
    }
}

fn arith_sign(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        _ => None,
    }
}

fn parse_rename(field: &str, argument: &Bson) -> Result<Operation> {
    let Bson::String(target) = argument else {
        return Err(QueryError::bad_value(format!("The 'to' field for $rename must be a string: {field}: {argument}")));
    };
    // A field name is a C string in BSON: the renamed document could not be stored (mongod's
    // rename_node refuses it here too, as BadValue).
    if target.contains('\0') {
        return Err(QueryError::bad_value("The 'to' field for $rename cannot contain an embedded null byte"));
    }
    let source = UpdatePath::parse(field)?;
    let destination = UpdatePath::parse(target)?;
    if source.is_dynamic() {
        return Err(QueryError::bad_value(format!("The source field for $rename may not be dynamic: {field}")));
    }
    if destination.is_dynamic() {
        return Err(QueryError::bad_value(format!("The destination field for $rename may not be dynamic: {target}")));
    }
    if source == destination {
        return Err(QueryError::bad_value(format!(
            "The source and target field for $rename must differ: {field}: \"{target}\""
        )));
    }
    if super::path::conflicts(&source, &destination) {
        return Err(QueryError::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {field}: \"{target}\""
        )));
    }
    Ok(Operation::Rename(destination))
}

fn parse_current_date(argument: &Bson) -> Result<DateKind> {
    match argument {
        Bson::Boolean(_) => Ok(DateKind::Date),
        Bson::Document(spec) if spec.len() == 1 => match spec.get("$type") {
            Some(Bson::String(kind)) if kind == "date" => Ok(DateKind::Date),
            Some(Bson::String(kind)) if kind == "timestamp" => Ok(DateKind::Timestamp),
            _ => Err(QueryError::bad_value(
                "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
            )),
        },
        other => Err(QueryError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
            type_name(other)
        ))),
    }
}

fn has_each(argument: &Bson) -> Option<&Document> {
    match argument {
        Bson::Document(spec) if spec.contains_key("$each") => Some(spec),
        _ => None,
    }
}

fn each_values(spec: &Document, operator: &str) -> Result<Vec<Bson>> {
    match spec.get("$each") {
        Some(Bson::Array(values)) => Ok(values.clone()),
        Some(other) => Err(QueryError::bad_value(format!(
            "The argument to $each in {operator} must be an array but it was of type: {}",
            type_name(other)
        ))),
        None => Ok(Vec::new()),
    }
}

fn parse_push(argument: &Bson) -> Result<Push> {
    let Some(spec) = has_each(argument) else {
        return Ok(Push { each: vec![argument.clone()], position: None, slice: None, sort: None });
    };
    let mut push = Push { each: each_values(spec, "$push")?, position: None, slice: None, sort: None };
    for (key, value) in spec {
        match key.as_str() {
            "$each" => {}
            "$position" => {
                push.position = Some(integer(value).ok_or_else(|| {
                    QueryError::bad_value(format!(
                        "The value for $position must be an integer value, not of type: {}",
                        type_name(value)
                    ))
                })?);
            }
            "$slice" => {
                push.slice = Some(integer(value).ok_or_else(|| {
                    QueryError::bad_value(format!(
                        "The value for $slice must be an integer value but was given type: {}",
                        type_name(value)
                    ))
                })?);
            }
            "$sort" => push.sort = Some(parse_push_sort(value)?),
            other => return Err(QueryError::bad_value(format!("Unrecognized clause in $push: {other}"))),
        }
    }
    Ok(push)
}

fn integer(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

fn parse_push_sort(value: &Bson) -> Result<PushSort> {
    match value {
        Bson::Document(pattern) if pattern.is_empty() => {
            Err(QueryError::bad_value("The $sort pattern is empty when it should be a set of fields."))
        }
        Bson::Document(pattern) => Ok(PushSort::Fields(
            SortSpec::parse(pattern)
                .map_err(|_| QueryError::bad_value("The $sort element value must be either 1 or -1"))?,
        )),
        other => match integer(other) {
            Some(1) => Ok(PushSort::Value(true)),
            Some(-1) => Ok(PushSort::Value(false)),
            _ => Err(QueryError::bad_value(
                "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields",
            )),
        },
    }
}

fn parse_add_to_set(argument: &Bson) -> Result<Vec<Bson>> {
    match has_each(argument) {
        None => Ok(vec![argument.clone()]),
        Some(spec) => {
            if let Some(extra) = spec.keys().find(|key| *key != "$each") {
                return Err(QueryError::bad_value(format!(
                    "Found unexpected fields after $each in $addToSet: {extra}"
                )));
            }
            each_values(spec, "$addToSet")
        }
    }
}

fn parse_pull(argument: &Bson) -> Result<PullCondition> {
    Ok(match argument {
        Bson::Document(condition) if condition.keys().next().is_some_and(|k| k.starts_with('$')) => {
            PullCondition::Predicate(parse_field_value(argument)?)
        }
        Bson::Document(condition) => PullCondition::Filter(Filter::parse(condition)?),
        Bson::RegularExpression(regex) => {
            PullCondition::Regex(FilterRegex::new(regex.pattern.as_str(), regex.options.as_str())?)
        }
        value => PullCondition::Equals(value.clone()),
    })
}

fn parse_bit(field: &str, argument: &Bson) -> Result<Vec<(BitOp, Bson)>> {
    let Bson::Document(operations) = argument else {
        return Err(QueryError::bad_value(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded document: {{$bit: {{field: {{and/or/xor: #}}}}",
            type_name(argument)
        )));
    };
    if operations.is_empty() {
        return Err(QueryError::bad_value(format!(
            "You must pass in at least one bitwise operation. The format is: {{$bit: {{field: {{and/or/xor: #}}}}. Field: {field}"
        )));
    }
    operations
        .iter()
        .map(|(name, operand)| {
            let op = match name.as_str() {
                "and" => BitOp::And,
                "or" => BitOp::Or,
                "xor" => BitOp::Xor,
                other => {
                    return Err(QueryError::bad_value(format!(
                        "The $bit modifier only supports 'and', 'or', and 'xor', not '{other}' which is an unknown operator: {{{other}: {operand}}}"
                    )));
                }
            };
            if !matches!(operand, Bson::Int32(_) | Bson::Int64(_)) {
                return Err(QueryError::bad_value(format!(
                    "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported here: {{{name}: {operand}}}",
                    type_name(operand)
                )));
            }
            Ok((op, operand.clone()))
        })
        .collect()
}

/// The new value of a field under `operation`, given its current value.
pub fn compute(operation: &Operation, field: &str, current: Option<&Bson>, context: &Context<'_>) -> Result<Change> {
    Ok(match operation {
        Operation::Set(value) => Change::Set(value.clone()),
        Operation::Unset => Change::Unset,
        Operation::SetOnInsert(value) if context.inserting => Change::Set(value.clone()),
        Operation::SetOnInsert(_) => Change::Keep,
        Operation::Inc(value) | Operation::Mul(value) => {
            let (op, name) = if matches!(operation, Operation::Inc(_)) {
                (ArithOp::Add, "$inc")
            } else {
                (ArithOp::Multiply, "$mul")
            };
            match current {
                None if op == ArithOp::Add => Change::Set(value.clone()),
                None => Change::Set(zero_like(value)),
                Some(existing) => match arith_decimal128(op, existing, value) {
                    Some(result) => Change::Set(result),
                    None => {
                        return Err(QueryError::TypeMismatch(format!(
                            "Cannot apply {name} to a value of non-numeric type. {} has the field '{field}' of non-numeric type {}",
                            context.id_text(),
                            type_name(existing)
                        )));
                    }
                },
            }
        }
        Operation::Min(value) | Operation::Max(value) => {
            let wanted = if matches!(operation, Operation::Min(_)) { Ordering::Less } else { Ordering::Greater };
            match current {
                Some(existing) if compare_values(value, existing) != wanted => Change::Keep,
                _ => Change::Set(value.clone()),
            }
        }
        Operation::CurrentDate(DateKind::Date) => Change::Set(Bson::DateTime(context.now)),
        Operation::CurrentDate(DateKind::Timestamp) => {
            let seconds = (context.now.timestamp_millis() / 1000).clamp(0, i64::from(u32::MAX)) as u32;
            Change::Set(Bson::Timestamp(bson::Timestamp { time: seconds, increment: 1 }))
        }
        Operation::Push(push) => Change::Set(Bson::Array(apply_push(push, array_of(current, field, context)?)?)),
        Operation::AddToSet(values) => {
            let mut items = array_of(current, field, context)?;
            for value in values {
                if !items.iter().any(|item| compare_values(item, value) == Ordering::Equal) {
                    items.push(value.clone());
                }
            }
            Change::Set(Bson::Array(items))
        }
        Operation::Pop(end) => pop(*end, current, field)?,
        Operation::Pull(condition) => pull(current, field, &|item| pull_matches(condition, item))?,
        Operation::PullAll(values) => {
            pull(current, field, &|item| Ok(values.iter().any(|value| compare_values(item, value) == Ordering::Equal)))?
        }
        Operation::Bit(operations) => bit(operations, current, field, context)?,
        Operation::Rename(_) => Change::Keep,
    })
}

fn array_of(current: Option<&Bson>, field: &str, context: &Context<'_>) -> Result<Vec<Bson>> {
    match current {
        None => Ok(Vec::new()),
        Some(Bson::Array(items)) => Ok(items.clone()),
        Some(other) => Err(QueryError::bad_value(format!(
            "The field '{field}' must be an array but is of type {} in document {}",
            type_name(other),
            context.id_text()
        ))),
    }
}

fn apply_push(push: &Push, mut items: Vec<Bson>) -> Result<Vec<Bson>> {
    let length = items.len() as i64;
    let at = match push.position {
        None => length,
        Some(position) if position >= 0 => position.min(length),
        Some(position) => (length + position).max(0),
    } as usize;
    items.splice(at..at, push.each.iter().cloned());
    match &push.sort {
        None => {}
        Some(PushSort::Value(ascending)) => {
            items.sort_by(|a, b| if *ascending { compare_values(a, b) } else { compare_values(b, a) });
        }
        Some(PushSort::Fields(spec)) => {
            let empty = Document::new();
            let mut keyed: Vec<(Vec<Bson>, Bson)> = items
                .into_iter()
                .map(|item| {
                    let key = match &item {
                        Bson::Document(document) => spec.key(document),
                        _ => spec.key(&empty),
                    };
                    (key, item)
                })
                .collect();
            keyed.sort_by(|(a, _), (b, _)| spec.compare_keys(a, b));
            items = keyed.into_iter().map(|(_, item)| item).collect();
        }
    }
    match push.slice {
        Some(slice) if slice >= 0 => items.truncate(slice as usize),
        Some(slice) => {
            let keep = slice.unsigned_abs() as usize;
            if items.len() > keep {
                items.drain(..items.len() - keep);
            }
        }
        None => {}
    }
    Ok(items)
}

fn pop(end: End, current: Option<&Bson>, field: &str) -> Result<Change> {
    match current {
        None => Ok(Change::Keep),
        Some(Bson::Array(items)) if items.is_empty() => Ok(Change::Keep),
        Some(Bson::Array(items)) => {
            let mut items = items.clone();
            match end {
                End::First => {
                    items.remove(0);
                }
                End::Last => {
                    items.pop();
                }
            }
            Ok(Change::Set(Bson::Array(items)))
        }
        Some(other) => Err(QueryError::TypeMismatch(format!(
            "Path '{field}' contains an element of non-array type '{}'",
            type_name(other)
        ))),
    }
}

fn pull(current: Option<&Bson>, field: &str, remove: &dyn Fn(&Bson) -> Result<bool>) -> Result<Change> {
    match current {
        None => Ok(Change::Keep),
        Some(Bson::Array(items)) => {
            let mut kept = Vec::with_capacity(items.len());
            for item in items {
                if !remove(item)? {
                    kept.push(item.clone());
                }
            }
            Ok(if kept.len() == items.len() { Change::Keep } else { Change::Set(Bson::Array(kept)) })
        }
        Some(_) => Err(QueryError::bad_value(format!("Cannot apply $pull to a non-array value (field '{field}')"))),
    }
}

fn pull_matches(condition: &PullCondition, item: &Bson) -> Result<bool> {
    Ok(match condition {
        PullCondition::Equals(value) => compare_values(item, value) == Ordering::Equal,
        PullCondition::Regex(regex) => matches!(item, Bson::String(text) if regex.is_match(text)),
        PullCondition::Predicate(predicate) => predicate.holds_on_single(item)?,
        PullCondition::Filter(filter) => match item {
            Bson::Document(document) => filter.matches(document)?,
            _ => false,
        },
    })
}

fn bit(operations: &[(BitOp, Bson)], current: Option<&Bson>, field: &str, context: &Context<'_>) -> Result<Change> {
    let mut value = match current {
        None => Bson::Int32(0),
        Some(existing @ (Bson::Int32(_) | Bson::Int64(_))) => existing.clone(),
        Some(other) => {
            return Err(QueryError::bad_value(format!(
                "Cannot apply $bit to a value of non-integral type.{} has the field {field} of non-integer type {}",
                context.id_text(),
                type_name(other)
            )));
        }
    };
    for (op, operand) in operations {
        let combine = |x: i64, y: i64| match op {
            BitOp::And => x & y,
            BitOp::Or => x | y,
            BitOp::Xor => x ^ y,
        };
        value = match (&value, operand) {
            (Bson::Int32(x), Bson::Int32(y)) => Bson::Int32(combine(i64::from(*x), i64::from(*y)) as i32),
            (x, y) => Bson::Int64(combine(as_long(x), as_long(y))),
        };
    }
    Ok(Change::Set(value))
}

fn as_long(value: &Bson) -> i64 {
    match value {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        _ => 0,
    }
}
