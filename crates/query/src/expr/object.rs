//! Object operators: `$mergeObjects $objectToArray $getField $setField $unsetField $bsonSize`.
//!
//! `$mergeObjects` overwrites earlier fields with later ones, keeping the position of a field's
//! first appearance, and skips null or missing operands. `$getField` reads a field by its
//! literal name, so names with `.` or a leading `$` are reachable.

use bson::{Bson, Document};
use vocabulary::location;

use super::parse::parse;
use super::value::{EvalResult, Value, bson_type_name, display, fail, type_name};
use super::{Arity, Call, Expr, Func, OpDef};
use crate::error::QueryError;

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$mergeObjects" => ("$mergeObjects", Arity::Any, merge_objects),
        "$objectToArray" => ("$objectToArray", Arity::Exact(1), object_to_array),
        "$getField" => return Some(OpDef::Custom("$getField", parse_get_field)),
        "$setField" => return Some(OpDef::Custom("$setField", parse_set_field)),
        "$unsetField" => return Some(OpDef::Custom("$unsetField", parse_set_field)),
        "$bsonSize" => ("$bsonSize", Arity::Exact(1), bson_size),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

/// Merges `value` (an object, or null/missing) into `target`.
pub fn merge_into(target: &mut Document, value: &Value) -> Result<(), QueryError> {
    match value {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(()),
        Some(Bson::Document(d)) => {
            for (k, v) in d {
                target.insert(k.clone(), v.clone());
            }
            Ok(())
        }
        other => Err(fail(
            location::MERGE_OBJECTS_NOT_OBJECT,
            format!(
                "$mergeObjects requires object inputs, but input {} is of type {}",
                display(other),
                type_name(other)
            ),
        )),
    }
}

fn merge_objects(args: &[Value]) -> EvalResult {
    let mut out = Document::new();
    for arg in args {
        merge_into(&mut out, arg)?;
    }
    Ok(Some(Bson::Document(out)))
}

fn object_to_array(args: &[Value]) -> EvalResult {
    match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => {
            let pairs = d
                .iter()
                .map(|(k, v)| {
                    let mut pair = Document::new();
                    pair.insert("k", k.clone());
                    pair.insert("v", v.clone());
                    Bson::Document(pair)
                })
                .collect();
            Ok(Some(Bson::Array(pairs)))
        }
        other => Err(fail(
            location::OBJECT_TO_ARRAY_NOT_OBJECT,
            format!("$objectToArray requires a document input, found: {}", type_name(other)),
        )),
    }
}

fn current() -> Expr {
    Expr::Variable { name: "CURRENT".to_string(), path: Vec::new() }
}

/// `field` must be a constant string (a `$literal` may hide a leading `$`).
fn literal_field(value: &Bson, op: &str) -> Result<String, QueryError> {
    match parse(value)? {
        Expr::Literal(Bson::String(s)) => Ok(s),
        Expr::FieldPath(_) | Expr::Variable { .. } => Err(fail(
            location::GET_FIELD_FIELD_IS_PATH,
            format!("{op}: a field path reference is not allowed as 'field'. Did you mean {{$literal: {value}}}?"),
        )),
        _ => Err(fail(
            location::GET_FIELD_FIELD_NOT_CONSTANT,
            format!("{op} requires 'field' to evaluate to a constant, but got a non-constant argument"),
        )),
    }
}

fn parse_get_field(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let (field, input) = match arg {
        Bson::Document(spec) if !spec.keys().next().is_some_and(|k| k.starts_with('$')) => {
            let mut field = None;
            let mut input = current();
            for (key, value) in spec {
                match key.as_str() {
                    "field" => field = Some(literal_field(value, name)?),
                    "input" => input = parse(value)?,
                    other => {
                        return Err(fail(
                            location::GET_FIELD_UNKNOWN_ARGUMENT,
                            format!("$getField found an unknown argument: {other}"),
                        ));
                    }
                }
            }
            (
                field.ok_or_else(|| {
                    fail(location::GET_FIELD_WITHOUT_FIELD, "$getField requires 'field' to be specified")
                })?,
                input,
            )
        }
        other => (literal_field(other, name)?, current()),
    };
    let args = vec![Expr::Literal(Bson::String(field)), input];
    Ok(Expr::Call(Call { name, func: get_field, args }))
}

fn get_field(args: &[Value]) -> EvalResult {
    let Some(Bson::String(field)) = &args[0] else { return Ok(None) };
    match &args[1] {
        None => Ok(None),
        Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => Ok(d.get(field).cloned()),
        other => Err(fail(
            location::GET_FIELD_INPUT_NOT_OBJECT,
            format!("$getField requires 'input' to evaluate to type Object, but got {}", type_name(other)),
        )),
    }
}

fn parse_set_field(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(fail(
            location::SET_FIELD_ARGUMENT_NOT_OBJECT,
            format!("$setField only supports an object as its argument, found {}", bson_type_name(arg)),
        ));
    };
    // `$unsetField` is `$setField` with the value `$$REMOVE`.
    let unset = name == "$unsetField";
    let (mut field, mut input, mut value) = (None, None, unset.then_some(Expr::Absent));
    for (key, v) in spec {
        match key.as_str() {
            "field" => field = Some(literal_field(v, name)?),
            "input" => input = Some(parse(v)?),
            "value" if !unset => value = Some(parse(v)?),
            other => {
                return Err(fail(
                    location::SET_FIELD_UNKNOWN_ARGUMENT,
                    format!("{name} found an unknown argument: {other}"),
                ));
            }
        }
    }
    let (Some(field), Some(input), Some(value)) = (field, input, value) else {
        let required = if unset { "'field' and 'input'" } else { "'field', 'input' and 'value'" };
        return Err(fail(location::SET_FIELD_MISSING_ARGUMENT, format!("{name} requires {required} to be specified")));
    };
    let args = vec![Expr::Literal(Bson::String(field)), input, value];
    Ok(Expr::Call(Call { name, func: set_field, args }))
}

/// `{$bsonSize: <document>}`: its size in bytes as BSON; null or missing gives null.
fn bson_size(args: &[Value]) -> EvalResult {
    match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::Document(document)) => {
            let bytes =
                document.to_vec().map_err(|e| fail(location::BSON_SIZE_NOT_OBJECT, format!("$bsonSize: {e}")))?;
            Ok(Some(Bson::Int32(bytes.len() as i32)))
        }
        other => Err(fail(
            location::BSON_SIZE_NOT_OBJECT,
            format!("$bsonSize requires a document input, found: {}", type_name(other)),
        )),
    }
}

/// `value` = `$$REMOVE` (missing) removes the field.
fn set_field(args: &[Value]) -> EvalResult {
    let Some(Bson::String(field)) = &args[0] else { return Ok(None) };
    let mut doc = match &args[1] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::Document(d)) => d.clone(),
        other => {
            return Err(fail(
                location::SET_FIELD_INPUT_NOT_OBJECT,
                format!("$setField requires 'input' to evaluate to type Object, but got {}", type_name(other)),
            ));
        }
    };
    match &args[2] {
        Some(v) => {
            doc.insert(field.clone(), v.clone());
        }
        None => {
            doc.remove(field);
        }
    }
    Ok(Some(Bson::Document(doc)))
}
