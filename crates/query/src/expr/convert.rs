//! Type operators: `$type $isNumber $convert $toString $toInt $toLong $toDouble $toDecimal
//! $toBool $toDate $toObjectId $toHashedIndexKey`.
//!
//! One conversion table ([`convert_value`]) serves `$convert` and its shorthands. A failed
//! conversion is `ConversionFailure` (241) unless `$convert` has `onError`; null or missing
//! input gives `onNull` (default null). Doubles print as C's `%g` (six significant digits),
//! which is what MongoDB's string coercion does (`1234567.891` → `"1.23457e+06"`).

use std::str::FromStr;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Decimal128};

use super::control::{Control, control};
use super::eval::Scope;
use super::parse::{NamedArgCodes, named_args};
use super::value::{EvalResult, Value, bson_type_name, fail, is_nullish, is_truthy};
use super::{Arity, Expr, Func, OpDef};
use crate::error::QueryError;
use crate::number::{Dec, Num, f64_to_exact_i64};

/// The type a conversion produces: `$convert`'s `to`, or the one a `$toInt`-style shorthand names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvertTo {
    Double,
    String,
    ObjectId,
    Bool,
    Date,
    Int,
    Long,
    Decimal,
}

#[derive(Debug, Clone)]
pub struct ConvertSpec {
    input: Expr,
    to: Expr,
    on_error: Option<Expr>,
    on_null: Option<Expr>,
}

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$type" => ("$type", Arity::Exact(1), |a| Ok(Some(Bson::String(super::type_name(&a[0]).to_string())))),
        "$isNumber" => ("$isNumber", Arity::Exact(1), |a| {
            Ok(Some(Bson::Boolean(a[0].as_ref().is_some_and(super::value::is_numeric))))
        }),
        "$toString" => ("$toString", Arity::Exact(1), |a| shorthand(a, ConvertTo::String)),
        "$toInt" => ("$toInt", Arity::Exact(1), |a| shorthand(a, ConvertTo::Int)),
        "$toLong" => ("$toLong", Arity::Exact(1), |a| shorthand(a, ConvertTo::Long)),
        "$toDouble" => ("$toDouble", Arity::Exact(1), |a| shorthand(a, ConvertTo::Double)),
        "$toDecimal" => ("$toDecimal", Arity::Exact(1), |a| shorthand(a, ConvertTo::Decimal)),
        "$toBool" => ("$toBool", Arity::Exact(1), |a| shorthand(a, ConvertTo::Bool)),
        "$toDate" => ("$toDate", Arity::Exact(1), |a| shorthand(a, ConvertTo::Date)),
        "$toObjectId" => ("$toObjectId", Arity::Exact(1), |a| shorthand(a, ConvertTo::ObjectId)),
        // A hashed index's key of the value (missing hashes as null, as the index keys it).
        "$toHashedIndexKey" => ("$toHashedIndexKey", Arity::Exact(1), |a| {
            Ok(Some(Bson::Int64(document::hash::hash_value(a[0].as_ref().unwrap_or(&Bson::Null)))))
        }),
        "$convert" => return Some(OpDef::Custom("$convert", parse_convert)),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

fn shorthand(args: &[Value], to_type: ConvertTo) -> EvalResult {
    if is_nullish(&args[0]) {
        return Ok(Some(Bson::Null));
    }
    let input = args[0].as_ref().unwrap_or(&Bson::Null);
    convert_value(input, to_type).map(Some)
}

const CONVERT_CODES: NamedArgCodes = NamedArgCodes { not_object: 9, unknown: 9, missing: 9 };

fn parse_convert(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let mut args = named_args(name, arg, &["input", "to", "onError", "onNull"], &["input", "to"], CONVERT_CODES)?;
    let take = |e: Expr| match e {
        Expr::Absent => None,
        other => Some(other),
    };
    let on_null = take(args.pop().unwrap_or(Expr::Absent));
    let on_error = take(args.pop().unwrap_or(Expr::Absent));
    let to = args.pop().unwrap_or(Expr::Absent);
    let input = args.pop().unwrap_or(Expr::Absent);
    Ok(control(Control::Convert(ConvertSpec { input, to, on_error, on_null })))
}

pub fn eval_convert(spec: &ConvertSpec, scope: &mut Scope<'_>) -> EvalResult {
    let input = scope.eval(&spec.input)?;
    let to = scope.eval(&spec.to)?;
    if is_nullish(&to) {
        return Ok(Some(Bson::Null));
    }
    let to_type = parse_to_type(to.as_ref().unwrap_or(&Bson::Null))?;
    let Some(value) = input.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) else {
        return match &spec.on_null {
            Some(e) => scope.eval(e),
            None => Ok(Some(Bson::Null)),
        };
    };
    match convert_value(&value, to_type) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code() == vocabulary::ErrorCode::ConversionFailure.code() => match &spec.on_error {
            Some(handler) => scope.eval(handler),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// `to`: a type name, a type number, or `{type: ...}`.
fn parse_to_type(to: &Bson) -> Result<ConvertTo, QueryError> {
    let to_type = match to {
        Bson::String(s) => match s.as_str() {
            "double" => ConvertTo::Double,
            "string" => ConvertTo::String,
            "objectId" => ConvertTo::ObjectId,
            "bool" => ConvertTo::Bool,
            "date" => ConvertTo::Date,
            "int" => ConvertTo::Int,
            "long" => ConvertTo::Long,
            "decimal" => ConvertTo::Decimal,
            other => return Err(fail(crate::error::ErrorCode::BadValue, format!("Unknown type name: {other}"))),
        },
        Bson::Document(d) if d.contains_key("type") => return parse_to_type(d.get("type").unwrap_or(&Bson::Null)),
        other => match Num::from_bson(other).and_then(|n| n.to_exact_i64()) {
            Some(1) => ConvertTo::Double,
            Some(2) => ConvertTo::String,
            Some(7) => ConvertTo::ObjectId,
            Some(8) => ConvertTo::Bool,
            Some(9) => ConvertTo::Date,
            Some(16) => ConvertTo::Int,
            Some(18) => ConvertTo::Long,
            Some(19) => ConvertTo::Decimal,
            Some(n) => return Err(fail(crate::error::ErrorCode::BadValue, format!("Invalid type number: {n}"))),
            None => {
                return Err(fail(
                    9,
                    format!("$convert's 'to' argument must be a string or number, but is {}", bson_type_name(other)),
                ));
            }
        },
    };
    Ok(to_type)
}

fn to_type_name(to_type: ConvertTo) -> &'static str {
    match to_type {
        ConvertTo::Double => "double",
        ConvertTo::String => "string",
        ConvertTo::ObjectId => "objectId",
        ConvertTo::Bool => "bool",
        ConvertTo::Date => "date",
        ConvertTo::Int => "int",
        ConvertTo::Long => "long",
        ConvertTo::Decimal => "decimal",
    }
}

fn conversion_failure(message: String) -> QueryError {
    fail(crate::error::ErrorCode::ConversionFailure, format!("{message} in $convert with no onError value"))
}

fn unsupported(value: &Bson, to_type: ConvertTo) -> QueryError {
    conversion_failure(format!("Unsupported conversion from {} to {}", bson_type_name(value), to_type_name(to_type)))
}

/// Converts a non-null value; errors are `ConversionFailure`.
pub fn convert_value(value: &Bson, to_type: ConvertTo) -> Result<Bson, QueryError> {
    match to_type {
        ConvertTo::Bool => Ok(Bson::Boolean(!matches!(value, Bson::Undefined) && is_truthy_for_convert(value))),
        ConvertTo::String => to_string(value, to_type),
        ConvertTo::Double => to_double(value, to_type),
        ConvertTo::Decimal => to_decimal(value, to_type),
        ConvertTo::Int | ConvertTo::Long => to_integer(value, to_type),
        ConvertTo::Date => to_date(value, to_type),
        ConvertTo::ObjectId => match value {
            Bson::ObjectId(_) => Ok(value.clone()),
            Bson::String(s) if s.len() == 24 => ObjectId::parse_str(s)
                .map(Bson::ObjectId)
                .map_err(|_| conversion_failure(format!("Failed to parse objectId '{s}'"))),
            Bson::String(s) => Err(conversion_failure(format!(
                "Failed to parse objectId '{s}': Invalid string length for parsing to OID, expected 24 but found {}",
                s.len()
            ))),
            other => Err(unsupported(other, to_type)),
        },
    }
}

fn is_truthy_for_convert(value: &Bson) -> bool {
    match value {
        Bson::String(_) => true,
        other => is_truthy(other),
    }
}

fn to_string(value: &Bson, to_type: ConvertTo) -> Result<Bson, QueryError> {
    let text = match value {
        Bson::String(s) => s.clone(),
        Bson::Boolean(b) => b.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(d) => format_double(*d),
        Bson::Decimal128(d) => d.to_string(),
        Bson::ObjectId(o) => o.to_hex(),
        Bson::DateTime(d) => super::date_format::iso_string(*d),
        other => return Err(unsupported(other, to_type)),
    };
    Ok(Bson::String(text))
}

fn to_double(value: &Bson, to_type: ConvertTo) -> Result<Bson, QueryError> {
    let d = match value {
        Bson::Boolean(b) => f64::from(u8::from(*b)),
        Bson::DateTime(d) => d.timestamp_millis() as f64,
        Bson::String(s) => parse_number_string(s)?,
        Bson::Decimal128(_) => {
            let d = Num::from_bson(value).map_or(f64::NAN, |n| n.to_f64());
            let finite_decimal = matches!(Num::from_bson(value), Some(Num::Decimal(Dec::Finite(_))));
            if finite_decimal && d.is_infinite() {
                return Err(conversion_failure(format!("Conversion would overflow target type: {value}")));
            }
            d
        }
        other => match Num::from_bson(other) {
            Some(n) => n.to_f64(),
            None => return Err(unsupported(other, to_type)),
        },
    };
    Ok(Bson::Double(d))
}

/// A base-10 number in a string: digits, sign, point, exponent, or the names of infinities.
fn parse_number_string(s: &str) -> Result<f64, QueryError> {
    let valid = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'))
        || matches!(s.to_ascii_lowercase().as_str(), "nan" | "inf" | "-inf" | "infinity" | "-infinity");
    match s.parse::<f64>() {
        Ok(d) if valid => Ok(d),
        _ => Err(conversion_failure(format!("Failed to parse number '{s}'"))),
    }
}

fn to_decimal(value: &Bson, to_type: ConvertTo) -> Result<Bson, QueryError> {
    let dec = match value {
        Bson::Boolean(b) => Dec::from_i64(i64::from(*b)),
        Bson::DateTime(d) => Dec::from_i64(d.timestamp_millis()),
        Bson::String(s) => {
            let parsed =
                Decimal128::from_str(s).map_err(|_| conversion_failure(format!("Failed to parse number '{s}'")))?;
            return Ok(Bson::Decimal128(parsed));
        }
        other => match Num::from_bson(other) {
            Some(n) => n.to_dec(),
            None => return Err(unsupported(other, to_type)),
        },
    };
    Ok(Bson::Decimal128(dec.to_decimal128()))
}

fn to_integer(value: &Bson, to_type: ConvertTo) -> Result<Bson, QueryError> {
    let wide: i64 = match value {
        Bson::Boolean(b) => i64::from(*b),
        Bson::DateTime(d) if to_type == ConvertTo::Long => d.timestamp_millis(),
        Bson::String(s) => {
            let ok = !s.is_empty() && s.trim_start_matches(['-', '+']).chars().all(|c| c.is_ascii_digit());
            let parsed = if ok { s.parse::<i64>().ok() } else { None };
            parsed.ok_or_else(|| conversion_failure(format!("Failed to parse number '{s}'")))?
        }
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        Bson::Double(d) => truncate_to_i64(*d, value)?,
        Bson::Decimal128(_) => {
            let d = Num::from_bson(value).map(|n| n.to_dec()).unwrap_or(Dec::NaN);
            match d {
                Dec::Finite(x) => {
                    bigdecimal::ToPrimitive::to_i64(&x.with_scale_round(0, bigdecimal::RoundingMode::Down))
                        .ok_or_else(|| overflow(value))?
                }
                _ => {
                    return Err(conversion_failure(format!(
                        "Attempt to convert NaN or infinity value to integer type: {value}"
                    )));
                }
            }
        }
        other => return Err(unsupported(other, to_type)),
    };
    match to_type {
        ConvertTo::Int => i32::try_from(wide).map(Bson::Int32).map_err(|_| overflow(value)),
        _ => Ok(Bson::Int64(wide)),
    }
}

fn overflow(value: &Bson) -> QueryError {
    conversion_failure(format!("Conversion would overflow target type: {value}"))
}

fn truncate_to_i64(d: f64, value: &Bson) -> Result<i64, QueryError> {
    if !d.is_finite() {
        return Err(conversion_failure(format!("Attempt to convert NaN or infinity value to integer type: {value}")));
    }
    f64_to_exact_i64(d.trunc()).ok_or_else(|| overflow(value))
}

fn to_date(value: &Bson, to_type: ConvertTo) -> Result<Bson, QueryError> {
    let millis = match value {
        Bson::DateTime(_) => return Ok(value.clone()),
        Bson::Int64(i) => *i,
        Bson::Double(d) => truncate_to_i64(*d, value)?,
        Bson::Decimal128(_) => match to_integer(value, ConvertTo::Long)? {
            Bson::Int64(i) => i,
            _ => return Err(unsupported(value, to_type)),
        },
        Bson::ObjectId(o) => o.timestamp().timestamp_millis(),
        Bson::Timestamp(t) => i64::from(t.time) * 1000,
        Bson::String(s) => match super::date::parse_date_string(s, None) {
            Some(ms) => ms,
            None => return Err(conversion_failure(format!("Error parsing date string '{s}'"))),
        },
        other => return Err(unsupported(other, to_type)),
    };
    Ok(Bson::DateTime(DateTime::from_millis(millis)))
}

/// A double as C's `%g`: six significant digits, exponent form outside [1e-4, 1e6).
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let scientific = format!("{d:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        let decimals = usize::try_from(5 - exponent).unwrap_or(0);
        strip_zeros(&format!("{d:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), exponent.abs())
    }
}

fn strip_zeros(text: &str) -> String {
    if !text.contains('.') {
        return text.to_string();
    }
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
