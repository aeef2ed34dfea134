//! Bitwise operators: `$bitAnd $bitOr $bitXor $bitNot`, and the timestamp parts `$tsSecond
//! $tsIncrement` (a timestamp is the other value these operators read as raw bits).
//!
//! Operands are ints or longs (MongoDB refuses doubles, even integral ones); the result is a
//! long if any operand is, else an int; null or missing gives null. With no operands, `$bitAnd`
//! is -1 and `$bitOr`/`$bitXor` 0, the identities.

use bson::Bson;
use vocabulary::location;

use super::value::{EvalResult, Value, fail, is_nullish, type_name};
use super::{Arity, Func, OpDef};
use crate::error::ErrorCode;

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$bitAnd" => ("$bitAnd", Arity::Any, |a| fold(a, "$bitAnd", -1, |x, y| x & y)),
        "$bitOr" => ("$bitOr", Arity::Any, |a| fold(a, "$bitOr", 0, |x, y| x | y)),
        "$bitXor" => ("$bitXor", Arity::Any, |a| fold(a, "$bitXor", 0, |x, y| x ^ y)),
        "$bitNot" => ("$bitNot", Arity::Exact(1), |a| fold(a, "$bitNot", 0, |_, y| !y)),
        "$tsSecond" => {
            ("$tsSecond", Arity::Exact(1), |a| timestamp_part(a, "$tsSecond", location::TS_SECOND_NOT_TIMESTAMP, true))
        }
        "$tsIncrement" => ("$tsIncrement", Arity::Exact(1), |a| {
            timestamp_part(a, "$tsIncrement", location::TS_INCREMENT_NOT_TIMESTAMP, false)
        }),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

fn fold(args: &[Value], op: &str, identity: i64, f: fn(i64, i64) -> i64) -> EvalResult {
    let (mut result, mut long) = (identity, false);
    for arg in args {
        let operand = match arg {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::Int32(i)) => i64::from(*i),
            Some(Bson::Int64(i)) => {
                long = true;
                *i
            }
            other => {
                let message = format!("{op} only supports int and long operands, not {}", type_name(other));
                return Err(fail(ErrorCode::TypeMismatch, message));
            }
        };
        result = f(result, operand);
    }
    Ok(Some(if long { Bson::Int64(result) } else { Bson::Int32(result as i32) }))
}

fn timestamp_part(args: &[Value], op: &str, code: i32, seconds: bool) -> EvalResult {
    match &args[0] {
        value if is_nullish(value) => Ok(Some(Bson::Null)),
        Some(Bson::Timestamp(ts)) => Ok(Some(Bson::Int64(i64::from(if seconds { ts.time } else { ts.increment })))),
        other => Err(fail(code, format!("Argument to {op} must be a timestamp, but is {}", type_name(other)))),
    }
}
