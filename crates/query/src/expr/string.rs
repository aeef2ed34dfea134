//! String operators: `$concat $substrCP $substrBytes $substr $toUpper $toLower $split $trim
//! $ltrim $rtrim $strLenCP $strLenBytes $indexOfCP $indexOfBytes $strcasecmp $replaceAll
//! $replaceOne $binarySize`; the regex operators are in [`super::regex_util`].
//!
//! Code-point operators count Unicode scalar values; byte operators count UTF-8 bytes and
//! refuse to split a character. `$toUpper`/`$toLower`/`$strcasecmp` fold ASCII letters only,
//! as MongoDB does. Operators that coerce to string use [`coerce_to_string`]
//! (null and missing become "").

use bson::Bson;
use vocabulary::location;

use super::parse::{NamedArgCodes, named_args};
use super::value::{EvalResult, Value, bson_type_name, display, fail, is_nullish, type_name};
use super::{Arity, Call, Expr, Func, OpDef};
use crate::error::QueryError;

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$concat" => ("$concat", Arity::Any, concat),
        "$substrCP" => ("$substrCP", Arity::Exact(3), substr_cp),
        "$substrBytes" => ("$substrBytes", Arity::Exact(3), substr_bytes),
        "$substr" => ("$substr", Arity::Exact(3), substr_bytes),
        "$toUpper" => ("$toUpper", Arity::Exact(1), |a| case(a, true)),
        "$toLower" => ("$toLower", Arity::Exact(1), |a| case(a, false)),
        "$split" => ("$split", Arity::Exact(2), split),
        "$strLenCP" => ("$strLenCP", Arity::Exact(1), str_len_cp),
        "$strLenBytes" => ("$strLenBytes", Arity::Exact(1), str_len_bytes),
        "$indexOfCP" => ("$indexOfCP", Arity::Range(2, 4), |a| index_of(a, "$indexOfCP", true)),
        "$indexOfBytes" => ("$indexOfBytes", Arity::Range(2, 4), |a| index_of(a, "$indexOfBytes", false)),
        "$strcasecmp" => ("$strcasecmp", Arity::Exact(2), strcasecmp),
        "$binarySize" => ("$binarySize", Arity::Exact(1), binary_size),
        "$trim" | "$ltrim" | "$rtrim" | "$replaceAll" | "$replaceOne" => return custom(name),
        _ => return super::regex_util::lookup(name),
    };
    Some(OpDef::Strict { name, arity, func })
}

/// `{$binarySize: <string or binData>}`: its size in bytes (a string's UTF-8 bytes).
fn binary_size(args: &[Value]) -> EvalResult {
    match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(Some(Bson::Null)),
        Some(Bson::String(text)) => Ok(Some(Bson::Int32(text.len() as i32))),
        Some(Bson::Binary(binary)) => Ok(Some(Bson::Int32(binary.bytes.len() as i32))),
        other => Err(fail(
            location::BINARY_SIZE_NOT_STRING_OR_BINARY,
            format!("$binarySize requires a string or BinData argument, found: {}", type_name(other)),
        )),
    }
}

fn custom(name: &str) -> Option<OpDef> {
    Some(match name {
        "$trim" => OpDef::Custom("$trim", parse_trim),
        "$ltrim" => OpDef::Custom("$ltrim", parse_trim),
        "$rtrim" => OpDef::Custom("$rtrim", parse_trim),
        "$replaceAll" => OpDef::Custom("$replaceAll", parse_replace),
        _ => OpDef::Custom("$replaceOne", parse_replace),
    })
}

fn string(s: impl Into<String>) -> EvalResult {
    Ok(Some(Bson::String(s.into())))
}

/// MongoDB's coercion to string for `$substr*`, `$toUpper`, `$strcasecmp`, `$concat` keys.
pub fn coerce_to_string(value: &Value, op: &str) -> Result<String, QueryError> {
    match value {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(String::new()),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) => Ok(s.clone()),
        Some(Bson::Int32(i)) => Ok(i.to_string()),
        Some(Bson::Int64(i)) => Ok(i.to_string()),
        Some(Bson::Double(d)) => Ok(super::convert::format_double(*d)),
        Some(Bson::Decimal128(d)) => Ok(d.to_string()),
        Some(Bson::DateTime(d)) => Ok(super::date_format::iso_string(*d)),
        Some(Bson::Timestamp(t)) => Ok(format!("Timestamp({}, {})", t.time, t.increment)),
        Some(other) => Err(fail(
            location::STRING_CONVERSION_UNSUPPORTED,
            format!("{op}: can't convert from BSON type {} to String", bson_type_name(other)),
        )),
    }
}

fn concat(args: &[Value]) -> EvalResult {
    let mut out = String::new();
    for arg in args {
        match arg {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::String(s)) => out.push_str(s),
            Some(other) => {
                return Err(fail(
                    location::CONCAT_NOT_STRING,
                    format!("$concat only supports strings, not {}", bson_type_name(other)),
                ));
            }
        }
    }
    string(out)
}

/// An integral numeric argument (`$substr*` positions); `codes` = (not numeric, not integral).
fn integer_arg(value: &Value, op: &str, what: &str, codes: (i32, i32)) -> Result<i64, QueryError> {
    let Some(n) = value.as_ref().and_then(crate::number::Num::from_bson) else {
        return Err(fail(codes.0, format!("{op}: {what} must be a numeric type (is BSON type {})", type_name(value))));
    };
    n.to_exact_i64().filter(|i| i32::try_from(*i).is_ok()).ok_or_else(|| {
        fail(codes.1, format!("{op}: {what} cannot be represented as a 32-bit integral value: {}", display(value)))
    })
}

fn substr_cp(args: &[Value]) -> EvalResult {
    let text = coerce_to_string(&args[0], "$substrCP")?;
    let start = integer_arg(
        &args[1],
        "$substrCP",
        "starting index",
        (location::SUBSTR_CP_START_NOT_NUMBER, location::SUBSTR_CP_START_NOT_INTEGER),
    )?;
    let length = integer_arg(
        &args[2],
        "$substrCP",
        "length",
        (location::SUBSTR_CP_LENGTH_NOT_NUMBER, location::SUBSTR_CP_LENGTH_NOT_INTEGER),
    )?;
    if start < 0 {
        return Err(fail(
            location::SUBSTR_CP_START_NEGATIVE,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    if length < 0 {
        return Err(fail(location::SUBSTR_CP_LENGTH_NEGATIVE, "$substrCP: length must be a nonnegative integer."));
    }
    let taken: String = text.chars().skip(start as usize).take(length as usize).collect();
    string(taken)
}

fn substr_bytes(args: &[Value]) -> EvalResult {
    let text = coerce_to_string(&args[0], "$substrBytes")?;
    let start = bytes_position(&args[1], "starting index", location::SUBSTR_BYTES_START_INVALID)?;
    let length = bytes_position(&args[2], "length", location::SUBSTR_BYTES_LENGTH_INVALID)?;
    // Negative values are huge unsigned numbers in MongoDB: a negative start yields "",
    // a negative length means "to the end".
    let Ok(start) = usize::try_from(start) else { return string("") };
    if start >= text.len() {
        return string("");
    }
    let end = usize::try_from(length).map_or(text.len(), |l| start.saturating_add(l).min(text.len()));
    if !text.is_char_boundary(start) {
        return Err(fail(
            location::SUBSTR_BYTES_START_IN_CONTINUATION_BYTE,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    if !text.is_char_boundary(end) {
        return Err(fail(
            location::SUBSTR_BYTES_END_IN_CHARACTER,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    string(text.get(start..end).unwrap_or_default())
}

fn bytes_position(value: &Value, what: &str, code: i32) -> Result<i64, QueryError> {
    match value.as_ref().and_then(crate::number::Num::from_bson) {
        Some(n) => Ok(n.to_f64().trunc().clamp(i64::MIN as f64, i64::MAX as f64) as i64),
        None => {
            Err(fail(code, format!("$substrBytes: {what} must be a numeric type (is BSON type {})", type_name(value))))
        }
    }
}

fn case(args: &[Value], upper: bool) -> EvalResult {
    let op = if upper { "$toUpper" } else { "$toLower" };
    let text = coerce_to_string(&args[0], op)?;
    string(if upper { text.to_ascii_uppercase() } else { text.to_ascii_lowercase() })
}

fn split(args: &[Value]) -> EvalResult {
    if is_nullish(&args[0]) || is_nullish(&args[1]) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::String(text)) = &args[0] else {
        return Err(fail(
            location::SPLIT_INPUT_NOT_STRING,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, found: {}",
                type_name(&args[0])
            ),
        ));
    };
    let Some(Bson::String(separator)) = &args[1] else {
        return Err(fail(
            location::SPLIT_SEPARATOR_NOT_STRING,
            format!(
                "$split requires an expression that evaluates to a string as a second argument, found: {}",
                type_name(&args[1])
            ),
        ));
    };
    if separator.is_empty() {
        return Err(fail(location::SPLIT_SEPARATOR_EMPTY, "$split requires a non-empty separator"));
    }
    let parts = text.split(separator.as_str()).map(|p| Bson::String(p.to_string())).collect();
    Ok(Some(Bson::Array(parts)))
}

fn str_len_cp(args: &[Value]) -> EvalResult {
    match &args[0] {
        Some(Bson::String(s)) => Ok(Some(crate::number::long_or_int(s.chars().count() as i64))),
        other => Err(fail(
            location::STR_LEN_CP_NOT_STRING,
            format!("$strLenCP requires a string argument, found: {}", type_name(other)),
        )),
    }
}

fn str_len_bytes(args: &[Value]) -> EvalResult {
    match &args[0] {
        Some(Bson::String(s)) => Ok(Some(crate::number::long_or_int(s.len() as i64))),
        other => Err(fail(
            location::STR_LEN_BYTES_NOT_STRING,
            format!("$strLenBytes requires a string argument, found: {}", type_name(other)),
        )),
    }
}

/// `$indexOfCP`/`$indexOfBytes`: `[string, substring, start?, end?]`.
fn index_of(args: &[Value], op: &str, code_points: bool) -> EvalResult {
    let (code_string, code_sub) = if code_points {
        (location::INDEX_OF_CP_STRING_NOT_STRING, location::INDEX_OF_CP_SUBSTRING_NOT_STRING)
    } else {
        (location::INDEX_OF_BYTES_STRING_NOT_STRING, location::INDEX_OF_BYTES_SUBSTRING_NOT_STRING)
    };
    let text = match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => s,
        other => {
            return Err(fail(
                code_string,
                format!("{op} requires a string as the first argument, found: {}", type_name(other)),
            ));
        }
    };
    let Some(Bson::String(needle)) = &args[1] else {
        return Err(fail(
            code_sub,
            format!("{op} requires a string as the second argument, found: {}", type_name(&args[1])),
        ));
    };
    if code_points { index_of_code_point(text, needle, args, op) } else { index_of_byte(text, needle, args, op) }
}

/// The match must start inside `[start, end)` code points (it may run past `end`).
fn index_of_code_point(text: &str, needle: &str, args: &[Value], op: &str) -> EvalResult {
    let length = text.chars().count();
    let start = index_bound(args.get(2), op, 0)?;
    let end = index_bound(args.get(3), op, length)?.min(length);
    if needle.is_empty() && start <= end {
        return Ok(Some(crate::number::long_or_int(start as i64)));
    }
    for (position, (byte, _)) in text.char_indices().enumerate().take(end).skip(start) {
        if text.get(byte..).is_some_and(|rest| rest.starts_with(needle)) {
            return Ok(Some(crate::number::long_or_int(position as i64)));
        }
    }
    Ok(Some(Bson::Int32(-1)))
}

/// The match must lie wholly inside `[start, end)` bytes.
fn index_of_byte(text: &str, needle: &str, args: &[Value], op: &str) -> EvalResult {
    let bytes = text.as_bytes();
    let start = index_bound(args.get(2), op, 0)?;
    let end = index_bound(args.get(3), op, bytes.len())?.min(bytes.len());
    if start > end {
        return Ok(Some(Bson::Int32(-1)));
    }
    let window = bytes.get(start..end).unwrap_or_default();
    let needle = needle.as_bytes();
    let found = if needle.is_empty() { Some(0) } else { window.windows(needle.len()).position(|w| w == needle) };
    Ok(Some(match found {
        Some(offset) => crate::number::long_or_int((start + offset) as i64),
        None => Bson::Int32(-1),
    }))
}

fn index_bound(value: Option<&Value>, op: &str, default: usize) -> Result<usize, QueryError> {
    let Some(value) = value else { return Ok(default) };
    let n = value.as_ref().and_then(crate::number::Num::from_bson).and_then(|n| n.to_exact_i64());
    match n {
        None => Err(fail(
            location::INDEX_OF_ARRAY_START_NOT_INTEGER,
            format!(
                "{op} requires an integral starting index, found a value of type: {}, with value: {}",
                type_name(value),
                display(value)
            ),
        )),
        Some(i) if i < 0 => Err(fail(
            location::INDEX_OF_ARRAY_START_NEGATIVE,
            format!("{op} requires a nonnegative start index, found: {i}"),
        )),
        Some(i) => Ok(usize::try_from(i).unwrap_or(usize::MAX)),
    }
}

fn strcasecmp(args: &[Value]) -> EvalResult {
    let a = coerce_to_string(&args[0], "$strcasecmp")?.to_ascii_lowercase();
    let b = coerce_to_string(&args[1], "$strcasecmp")?.to_ascii_lowercase();
    Ok(Some(Bson::Int32(match a.cmp(&b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })))
}

const TRIM_CODES: NamedArgCodes = NamedArgCodes {
    not_object: location::TRIM_ARGUMENT_NOT_OBJECT,
    unknown: location::TRIM_UNKNOWN_ARGUMENT,
    missing: location::TRIM_MISSING_ARGUMENT,
};

fn parse_trim(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let args = named_args(name, arg, &["input", "chars"], &["input"], TRIM_CODES)?;
    let func: Func = match name {
        "$ltrim" => |a| trim(a, "$ltrim", true, false),
        "$rtrim" => |a| trim(a, "$rtrim", false, true),
        _ => |a| trim(a, "$trim", true, true),
    };
    Ok(Expr::Call(Call { name, func, args }))
}

/// The default trim set: MongoDB's whitespace, including the Unicode spaces.
fn is_default_trim(c: char) -> bool {
    matches!(
        c,
        '\0' | ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

fn trim(args: &[Value], op: &str, left: bool, right: bool) -> EvalResult {
    let text = match &args[0] {
        None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => s.as_str(),
        other => {
            return Err(fail(
                location::TRIM_INPUT_NOT_STRING,
                format!(
                    "{op} requires its input to be a string, got {} (of type {}) instead.",
                    display(other),
                    type_name(other)
                ),
            ));
        }
    };
    let chars: Option<Vec<char>> = match &args[1] {
        None => None,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(s)) => Some(s.chars().collect()),
        other => {
            return Err(fail(
                location::TRIM_CHARS_NOT_STRING,
                format!(
                    "{op} requires 'chars' to be a string, got {} (of type {}) instead.",
                    display(other),
                    type_name(other)
                ),
            ));
        }
    };
    let strip = |c: char| match &chars {
        Some(set) => set.contains(&c),
        None => is_default_trim(c),
    };
    let mut out = text;
    if left {
        out = out.trim_start_matches(strip);
    }
    if right {
        out = out.trim_end_matches(strip);
    }
    string(out)
}

const REPLACE_CODES: NamedArgCodes = NamedArgCodes {
    not_object: location::REPLACE_ARGUMENT_NOT_OBJECT,
    unknown: location::REPLACE_UNKNOWN_ARGUMENT,
    missing: location::REPLACE_MISSING_ARGUMENT,
};

fn parse_replace(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let args =
        named_args(name, arg, &["input", "find", "replacement"], &["input", "find", "replacement"], REPLACE_CODES)?;
    let func: Func =
        if name == "$replaceAll" { |a| replace(a, "$replaceAll", true) } else { |a| replace(a, "$replaceOne", false) };
    Ok(Expr::Call(Call { name, func, args }))
}

fn replace(args: &[Value], op: &str, all: bool) -> EvalResult {
    let names = [
        ("input", location::REPLACE_INPUT_NOT_STRING),
        ("find", location::REPLACE_FIND_NOT_STRING),
        ("replacement", location::REPLACE_REPLACEMENT_NOT_STRING),
    ];
    let mut strings = Vec::with_capacity(3);
    let mut saw_null = false;
    for (value, (what, code)) in args.iter().zip(names) {
        match value {
            None | Some(Bson::Null) | Some(Bson::Undefined) => saw_null = true,
            Some(Bson::String(s)) => strings.push(s.as_str()),
            other => {
                return Err(fail(code, format!("{op} requires that '{what}' be a string, found: {}", display(other))));
            }
        }
    }
    if saw_null {
        return Ok(Some(Bson::Null));
    }
    let (input, find, replacement) = (strings[0], strings[1], strings[2]);
    string(if all { input.replace(find, replacement) } else { input.replacen(find, replacement, 1) })
}
