//! Small facts about values shared by every operator family: the "missing" value, type names,
//! truthiness, numeric argument checks, and the one constructor of expression errors.
//!
//! Aggregation distinguishes a missing value from `null` (`$type` says "missing", `$project`
//! drops a missing field), so an evaluated value is an [`Value`] = `Option<Bson>`, `None` being
//! missing. Operators that treat both alike call [`is_nullish`].

use bson::Bson;

use crate::error::QueryError;

/// An evaluated expression: `None` is a missing value.
pub type Value = Option<Bson>;

/// Result of evaluating an expression.
pub type EvalResult = Result<Value, QueryError>;

pub use crate::error::fail;

/// MongoDB's `$type` name of a value.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        None => "missing",
        Some(v) => bson_type_name(v),
    }
}

pub fn bson_type_name(value: &Bson) -> &'static str {
    vocabulary::type_name(i32::from(value.element_type() as u8 as i8)).unwrap_or("unknown")
}

/// Missing, null and undefined: the values most operators answer with `null`.
pub fn is_nullish(value: &Value) -> bool {
    matches!(value, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// MongoDB's coercion to bool: false, zero, null, undefined and missing are false.
pub fn is_truthy(value: &Bson) -> bool {
    match value {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Decimal128(_) => crate::number::Num::from_bson(value).is_some_and(|n| !n.is_zero()),
        _ => true,
    }
}

pub fn value_truthy(value: &Value) -> bool {
    value.as_ref().is_some_and(is_truthy)
}

pub fn is_numeric(value: &Bson) -> bool {
    matches!(value, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))
}

/// A value for messages, in the shell's spelling where it matters (strings quoted).
pub fn display(value: &Value) -> String {
    match value {
        None => "missing".to_string(),
        Some(Bson::String(s)) => format!("\"{s}\""),
        Some(v) => v.to_string(),
    }
}

/// Roughly the memory a value holds, for the blocking stages' memory limits: the value itself
/// plus its strings, fields and elements. An estimate (allocator slack is not counted), cheap
/// enough to take once per document.
pub fn approximate_bytes(value: &Bson) -> usize {
    let heap = match value {
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => s.len(),
        Bson::Document(d) => approximate_document_bytes(d),
        Bson::Array(items) => items.iter().map(approximate_bytes).sum(),
        Bson::Binary(b) => b.bytes.len(),
        Bson::RegularExpression(r) => r.pattern.len() + r.options.len(),
        Bson::JavaScriptCodeWithScope(c) => c.code.len() + approximate_document_bytes(&c.scope),
        _ => 0,
    };
    std::mem::size_of::<Bson>() + heap
}

/// [`approximate_bytes`] of a document: each field's name, value and index entry.
pub fn approximate_document_bytes(document: &bson::Document) -> usize {
    const FIELD_OVERHEAD: usize = 3 * std::mem::size_of::<usize>();
    document.iter().map(|(name, value)| name.len() + FIELD_OVERHEAD + approximate_bytes(value)).sum()
}

/// An argument that must be a whole number fitting int32 (array indexes, sizes).
/// `what` names the operator and argument for the messages; codes are the operator's.
pub fn to_i32_arg(value: &Bson, not_numeric: (i32, &str), not_integral: (i32, &str)) -> Result<i32, QueryError> {
    let Some(num) = crate::number::Num::from_bson(value) else {
        return Err(fail(not_numeric.0, format!("{}, but is of type: {}", not_numeric.1, bson_type_name(value))));
    };
    num.to_exact_i64()
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| fail(not_integral.0, format!("{}, but is {value}", not_integral.1)))
}
