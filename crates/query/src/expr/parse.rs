//! Parsing BSON into [`Expr`]: strings starting with `$` are paths or variables, an object
//! whose single key starts with `$` is an operator, other objects and arrays are built from
//! their parsed members, everything else is a literal.
//!
//! Operators are found by asking each family's `lookup`; the first that knows the name wins.

use bson::Bson;
use vocabulary::location;

use super::value::fail;
use super::{Arity, Call, Expr, OpDef};
use super::{
    accumulator, arith, array, bitwise, compare, control, convert, date, date_parts, object, quantile, set, string,
    trig,
};
use crate::error::QueryError;

pub fn parse(value: &Bson) -> Result<Expr, QueryError> {
    match value {
        Bson::String(s) if s.starts_with("$$") => parse_variable(&s[2..]),
        Bson::String(s) if s.starts_with('$') => Ok(Expr::FieldPath(parse_field_path(&s[1..])?)),
        Bson::Document(d) => {
            let Some(first) = d.keys().next() else {
                return Ok(Expr::Object(Vec::new()));
            };
            if first.starts_with('$') {
                if d.len() != 1 {
                    return Err(fail(
                        location::EXPRESSION_NOT_ONE_FIELD,
                        format!(
                            "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {d}",
                            d.len()
                        ),
                    ));
                }
                let (name, arg) =
                    d.iter().next().ok_or_else(|| fail(location::EXPRESSION_NOT_ONE_FIELD, "empty expression"))?;
                return parse_operator(name, arg);
            }
            let mut fields = Vec::with_capacity(d.len());
            for (name, field) in d {
                check_field_name(name)?;
                fields.push((name.clone(), parse(field)?));
            }
            Ok(Expr::Object(fields))
        }
        Bson::Array(items) => Ok(Expr::Array(items.iter().map(parse).collect::<Result<_, _>>()?)),
        other => Ok(Expr::Literal(other.clone())),
    }
}

/// A computed field's name: not empty, no leading `$`, no `.`.
pub fn check_field_name(name: &str) -> Result<(), QueryError> {
    if name.starts_with('$') {
        return Err(fail(
            location::FIELD_PATH_STARTS_WITH_DOLLAR,
            format!(
                "FieldPath field names may not start with '$'. Consider using $getField or $setField. (field: {name})"
            ),
        ));
    }
    if name.is_empty() {
        return Err(fail(location::FIELD_PATH_EMPTY_FIELD_NAME, "FieldPath field names may not be empty strings."));
    }
    if name.contains('.') {
        return Err(fail(
            location::FIELD_PATH_FIELD_NAME_HAS_DOT,
            format!("FieldPath field names may not contain '.'. (field: {name})"),
        ));
    }
    Ok(())
}

/// `a.b.c` (after the `$`) into its components.
pub fn parse_field_path(path: &str) -> Result<Vec<String>, QueryError> {
    if path.is_empty() {
        return Err(fail(location::FIELD_PATH_ONLY_DOLLAR, "'$' by itself is not a valid FieldPath"));
    }
    let mut parts = Vec::new();
    for part in path.split('.') {
        if part.is_empty() {
            return Err(fail(location::FIELD_PATH_EMPTY_STRING, "FieldPath field names may not be empty strings."));
        }
        if part.starts_with('$') {
            return Err(fail(
                location::FIELD_PATH_STARTS_WITH_DOLLAR,
                format!("FieldPath field names may not start with '$'. (field: {part})"),
            ));
        }
        parts.push(part.to_string());
    }
    Ok(parts)
}

fn parse_variable(text: &str) -> Result<Expr, QueryError> {
    let (name, rest) = match text.split_once('.') {
        Some((name, rest)) => (name, Some(rest)),
        None => (text, None),
    };
    check_variable_name(name, true)?;
    let path = match rest {
        Some(rest) => parse_field_path(rest)?,
        None => Vec::new(),
    };
    Ok(Expr::Variable { name: name.to_string(), path })
}

/// User variables start with a lowercase letter or a non-ASCII character; builtins (uppercase)
/// may be read but only `CURRENT` may be rebound.
pub fn check_variable_name(name: &str, reading: bool) -> Result<(), QueryError> {
    let Some(first) = name.chars().next() else {
        return Err(fail(location::VARIABLE_NAME_EMPTY, "empty variable names are not allowed"));
    };
    let builtin = matches!(name, "ROOT" | "CURRENT" | "REMOVE" | "NOW" | "CLUSTER_TIME" | "DESCEND" | "PRUNE" | "KEEP");
    if reading && builtin || !reading && name == "CURRENT" {
        return Ok(());
    }
    if first.is_ascii() && !first.is_ascii_lowercase() {
        return Err(fail(
            location::VARIABLE_NAME_INVALID_FIRST_CHARACTER,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(bad) = name.chars().find(|c| c.is_ascii() && !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(fail(
            location::VARIABLE_NAME_INVALID_CHARACTER,
            format!("'{name}' contains an invalid character for a variable name: '{bad}'"),
        ));
    }
    Ok(())
}

fn lookup(name: &str) -> Option<OpDef> {
    arith::lookup(name)
        .or_else(|| compare::lookup(name))
        .or_else(|| control::lookup(name))
        .or_else(|| string::lookup(name))
        .or_else(|| array::lookup(name))
        .or_else(|| object::lookup(name))
        .or_else(|| convert::lookup(name))
        .or_else(|| date::lookup(name))
        .or_else(|| accumulator::lookup(name))
        .or_else(|| set::lookup(name))
        .or_else(|| trig::lookup(name))
        .or_else(|| bitwise::lookup(name))
        .or_else(|| date_parts::lookup(name))
        .or_else(|| quantile::lookup(name))
}

fn parse_operator(name: &str, arg: &Bson) -> Result<Expr, QueryError> {
    if name == "$literal" {
        return Ok(Expr::Literal(arg.clone()));
    }
    match lookup(name) {
        Some(OpDef::Strict { name, arity, func }) => {
            let args = positional_args(arg)?;
            check_arity(name, arity, args.len())?;
            Ok(Expr::Call(Call { name, func, args }))
        }
        Some(OpDef::Custom(name, parser)) => parser(name, arg),
        None if matches!(name, "$function" | "$accumulator") => Err(fail(
            crate::error::ErrorCode::InvalidPipelineOperator,
            format!("{name} is not supported: Strata runs no server-side JavaScript (write it as an expression)"),
        )),
        None => {
            Err(fail(crate::error::ErrorCode::InvalidPipelineOperator, format!("Unrecognized expression '{name}'")))
        }
    }
}

/// An operator's operand as positional arguments: an array's elements, or the one value.
pub fn positional_args(arg: &Bson) -> Result<Vec<Expr>, QueryError> {
    match arg {
        Bson::Array(items) => items.iter().map(parse).collect(),
        other => Ok(vec![parse(other)?]),
    }
}

pub fn check_arity(name: &str, arity: Arity, count: usize) -> Result<(), QueryError> {
    match arity {
        Arity::Exact(n) if n != count => Err(fail(
            location::EXPRESSION_ARGUMENT_COUNT_EXACT,
            format!("Expression {name} takes exactly {n} arguments. {count} were passed in."),
        )),
        Arity::Range(min, max) if count < min || count > max => Err(fail(
            location::EXPRESSION_ARGUMENT_COUNT_RANGE,
            format!("Expression {name} takes at least {min} arguments, and at most {max}. {count} were passed in."),
        )),
        _ => Ok(()),
    }
}

/// Named arguments of an operator given as an object (`{input: ..., chars: ...}`), in the order
/// of `names`; a name not given is [`Expr::Absent`]. Unknown names and missing required names
/// are errors with the caller's codes.
pub fn named_args(
    op: &str,
    arg: &Bson,
    names: &[&str],
    required: &[&str],
    codes: NamedArgCodes,
) -> Result<Vec<Expr>, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(fail(
            codes.not_object,
            format!("{op} expects an object of named arguments but found: {}", super::bson_type_name(arg)),
        ));
    };
    let mut out = vec![Expr::Absent; names.len()];
    for (key, value) in spec {
        let Some(index) = names.iter().position(|n| n == key) else {
            return Err(fail(codes.unknown, format!("{op} found an unknown argument: {key}")));
        };
        out[index] = parse(value)?;
    }
    for name in required {
        if !spec.contains_key(*name) {
            return Err(fail(codes.missing, format!("{op} requires '{name}' to be specified")));
        }
    }
    Ok(out)
}

/// Error codes a named-argument operator uses for its malformed forms.
#[derive(Debug, Clone, Copy)]
pub struct NamedArgCodes {
    pub not_object: i32,
    pub unknown: i32,
    pub missing: i32,
}
