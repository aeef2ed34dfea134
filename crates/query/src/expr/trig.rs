//! Trigonometry: `$sin $cos $tan $asin $acos $atan $atan2 $sinh $cosh $tanh $asinh $acosh
//! $atanh $degreesToRadians $radiansToDegrees`.
//!
//! A double (or an integer) gives a double, a decimal a decimal (computed in double
//! precision); null or missing gives null; NaN passes through. An argument outside the
//! function's domain is error 50989, naming the domain, as MongoDB words it.

use std::f64::consts::PI;
use vocabulary::location;

use bson::Bson;

use super::arith::one_number;
use super::value::{EvalResult, Value, fail, is_nullish, type_name};
use super::{Arity, Func, OpDef};
use crate::number::{Dec, Num, NumType};

/// An open or closed interval a function is defined on.
struct Domain {
    low: f64,
    high: f64,
    closed: bool,
}

const EVERYWHERE: Domain = Domain { low: f64::NEG_INFINITY, high: f64::INFINITY, closed: true };
const FINITE: Domain = Domain { low: f64::NEG_INFINITY, high: f64::INFINITY, closed: false };
const UNIT: Domain = Domain { low: -1.0, high: 1.0, closed: true };
const AT_LEAST_ONE: Domain = Domain { low: 1.0, high: f64::INFINITY, closed: true };

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, func): (&'static str, Func) = match name {
        "$sin" => ("$sin", |a| unary(a, "$sin", &FINITE, f64::sin)),
        "$cos" => ("$cos", |a| unary(a, "$cos", &FINITE, f64::cos)),
        "$tan" => ("$tan", |a| unary(a, "$tan", &FINITE, f64::tan)),
        "$asin" => ("$asin", |a| unary(a, "$asin", &UNIT, f64::asin)),
        "$acos" => ("$acos", |a| unary(a, "$acos", &UNIT, f64::acos)),
        "$atan" => ("$atan", |a| unary(a, "$atan", &EVERYWHERE, f64::atan)),
        "$sinh" => ("$sinh", |a| unary(a, "$sinh", &EVERYWHERE, f64::sinh)),
        "$cosh" => ("$cosh", |a| unary(a, "$cosh", &EVERYWHERE, f64::cosh)),
        "$tanh" => ("$tanh", |a| unary(a, "$tanh", &EVERYWHERE, f64::tanh)),
        "$asinh" => ("$asinh", |a| unary(a, "$asinh", &EVERYWHERE, f64::asinh)),
        "$acosh" => ("$acosh", |a| unary(a, "$acosh", &AT_LEAST_ONE, f64::acosh)),
        "$atanh" => ("$atanh", |a| unary(a, "$atanh", &UNIT, f64::atanh)),
        "$degreesToRadians" => {
            ("$degreesToRadians", |a| unary(a, "$degreesToRadians", &EVERYWHERE, |d| d * PI / 180.0))
        }
        "$radiansToDegrees" => {
            ("$radiansToDegrees", |a| unary(a, "$radiansToDegrees", &EVERYWHERE, |r| r * 180.0 / PI))
        }
        "$atan2" => return Some(OpDef::Strict { name: "$atan2", arity: Arity::Exact(2), func: atan2 }),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity: Arity::Exact(1), func })
}

fn unary(args: &[Value], op: &str, domain: &Domain, f: fn(f64) -> f64) -> EvalResult {
    let Some(n) = one_number(args, op)? else { return Ok(Some(Bson::Null)) };
    let x = n.to_f64();
    let inside = if domain.closed { x >= domain.low && x <= domain.high } else { x > domain.low && x < domain.high };
    if !inside && !x.is_nan() {
        let (open, close) = if domain.closed { ('[', ']') } else { ('(', ')') };
        let bound =
            |b: f64| if b.is_infinite() { format!("{}inf", if b < 0.0 { "-" } else { "" }) } else { b.to_string() };
        return Err(fail(
            location::TRIGONOMETRY_OUT_OF_DOMAIN,
            format!(
                "cannot apply {op} to {}, value must in {open}{},{}{close}",
                n.to_bson(),
                bound(domain.low),
                bound(domain.high)
            ),
        ));
    }
    Ok(Some(result(f(x), n.num_type() == NumType::Decimal)))
}

fn result(value: f64, decimal: bool) -> Bson {
    if decimal { Num::Decimal(Dec::from_f64(value)).to_bson() } else { Bson::Double(value) }
}

fn atan2(args: &[Value]) -> EvalResult {
    if args.iter().any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let mut numbers = Vec::with_capacity(2);
    for arg in args {
        match arg.as_ref().and_then(Num::from_bson) {
            Some(n) => numbers.push(n),
            None => {
                return Err(fail(
                    location::ATAN2_NOT_NUMBERS,
                    format!("$atan2 only supports numeric types, not {}", type_name(arg)),
                ));
            }
        }
    }
    let decimal = numbers.iter().any(|n| n.num_type() == NumType::Decimal);
    Ok(Some(result(numbers[0].to_f64().atan2(numbers[1].to_f64()), decimal)))
}
