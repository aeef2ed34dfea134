//! Arithmetic operators: `$add $subtract $multiply $divide $mod $abs $ceil $floor $round $trunc
//! $sqrt $pow $exp $ln $log $log10`, and `$rand` (the one operator that is not a pure function
//! of its arguments).
//!
//! All return `null` when an operand is null or missing (checked in argument order, so an
//! earlier non-numeric operand still errors). Types follow [`super::number`]: integer results
//! stay integers until they overflow, `$divide` and the transcendental functions return doubles
//! (decimals for decimal input). `$add`/`$subtract` also do date arithmetic in milliseconds.

use bigdecimal::{BigDecimal, RoundingMode};
use bson::{Bson, DateTime};
use vocabulary::location;

use super::value::{EvalResult, Value, bson_type_name, display, fail, type_name};
use super::{Arity, Func, OpDef};
use super::{Call, Expr};
use crate::error::QueryError;
use crate::number::{ArithOp, Dec, Num, NumType, arith, dec_divide};

pub fn lookup(name: &str) -> Option<OpDef> {
    let (name, arity, func): (&'static str, Arity, Func) = match name {
        "$add" => ("$add", Arity::Any, add),
        "$subtract" => ("$subtract", Arity::Exact(2), subtract),
        "$multiply" => ("$multiply", Arity::Any, multiply),
        "$divide" => ("$divide", Arity::Exact(2), divide),
        "$mod" => ("$mod", Arity::Exact(2), modulo),
        "$abs" => ("$abs", Arity::Exact(1), abs),
        "$ceil" => ("$ceil", Arity::Exact(1), ceil),
        "$floor" => ("$floor", Arity::Exact(1), floor),
        "$round" => ("$round", Arity::Range(1, 2), round),
        "$trunc" => ("$trunc", Arity::Range(1, 2), trunc),
        "$sqrt" => ("$sqrt", Arity::Exact(1), sqrt),
        "$pow" => ("$pow", Arity::Exact(2), pow),
        "$exp" => ("$exp", Arity::Exact(1), exp),
        "$ln" => ("$ln", Arity::Exact(1), ln),
        "$log" => ("$log", Arity::Exact(2), log),
        "$log10" => ("$log10", Arity::Exact(1), log10),
        "$rand" => return Some(OpDef::Custom("$rand", parse_rand)),
        "$meta" => return Some(OpDef::Custom("$meta", parse_meta)),
        _ => return None,
    };
    Some(OpDef::Strict { name, arity, func })
}

/// `{$rand: {}}`: a double in [0, 1), drawn anew for each evaluation.
fn parse_rand(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    match arg {
        Bson::Document(spec) if spec.is_empty() => Ok(Expr::Call(Call { name, func: rand, args: Vec::new() })),
        _ => Err(fail(location::ARGUMENT_NOT_OBJECT, "$rand does not currently accept arguments")),
    }
}

/// `{$meta: "textScore"}`: the document's hidden score field (`crate::meta`).
fn parse_meta(_: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    Ok(Expr::FieldPath(vec![crate::meta::field(arg)?.to_owned()]))
}

fn rand(_: &[Value]) -> EvalResult {
    Ok(Some(Bson::Double(rand::random::<f64>())))
}

fn null() -> EvalResult {
    Ok(Some(Bson::Null))
}

fn num(n: Num) -> EvalResult {
    Ok(Some(n.to_bson()))
}

fn is_null(v: &Value) -> bool {
    super::value::is_nullish(v)
}

fn add(args: &[Value]) -> EvalResult {
    let mut total = Num::Int(0);
    let mut date: Option<i64> = None;
    for arg in args {
        match arg {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return null(),
            Some(Bson::DateTime(d)) => {
                if date.is_some() {
                    return Err(fail(location::ADD_MORE_THAN_ONE_DATE, "only one date allowed in an $add expression"));
                }
                date = Some(d.timestamp_millis());
            }
            Some(v) => match Num::from_bson(v) {
                Some(n) => total = arith(ArithOp::Add, &total, &n),
                None => {
                    return Err(fail(
                        location::ADD_NOT_NUMBER_OR_DATE,
                        format!("$add only supports numeric or date types, not {}", bson_type_name(v)),
                    ));
                }
            },
        }
    }
    match date {
        Some(millis) => date_plus(millis, &total),
        None => num(total),
    }
}

/// A date moved by a number of milliseconds (doubles rounded half away from zero).
fn date_plus(millis: i64, offset: &Num) -> EvalResult {
    let delta = match offset {
        Num::Int(i) => Some(i64::from(*i)),
        Num::Long(i) => Some(*i),
        other => {
            let f = other.to_f64().round();
            crate::number::f64_to_exact_i64(f)
        }
    };
    let result = delta.and_then(|d| millis.checked_add(d));
    match result {
        Some(ms) => Ok(Some(Bson::DateTime(DateTime::from_millis(ms)))),
        None => Err(fail(location::ADD_DATE_OVERFLOW, "date overflow in $add")),
    }
}

fn subtract(args: &[Value]) -> EvalResult {
    let (lhs, rhs) = (&args[0], &args[1]);
    if is_null(lhs) || is_null(rhs) {
        return null();
    }
    let (Some(a), Some(b)) = (lhs, rhs) else { return null() };
    match (a, b) {
        (Bson::DateTime(x), Bson::DateTime(y)) => {
            Ok(Some(Bson::Int64(x.timestamp_millis().wrapping_sub(y.timestamp_millis()))))
        }
        (Bson::DateTime(x), other) if Num::from_bson(other).is_some() => {
            let n = Num::from_bson(other).unwrap_or(Num::Int(0));
            let negated = arith(ArithOp::Subtract, &Num::Int(0), &n);
            date_plus(x.timestamp_millis(), &negated)
        }
        _ => match (Num::from_bson(a), Num::from_bson(b)) {
            (Some(x), Some(y)) => num(arith(ArithOp::Subtract, &x, &y)),
            _ => Err(fail(
                location::SUBTRACT_TYPES_UNSUPPORTED,
                format!("can't $subtract {} from {}", bson_type_name(b), bson_type_name(a)),
            )),
        },
    }
}

fn multiply(args: &[Value]) -> EvalResult {
    let mut product = Num::Int(1);
    for arg in args {
        if is_null(arg) {
            return null();
        }
        let Some(n) = arg.as_ref().and_then(Num::from_bson) else {
            return Err(fail(
                location::MULTIPLY_NOT_NUMBER,
                format!("$multiply only supports numeric types, not {}", type_name(arg)),
            ));
        };
        product = arith(ArithOp::Multiply, &product, &n);
    }
    num(product)
}

/// Both operands as numbers, `Ok(None)` when either is null or missing.
fn two_numbers(args: &[Value], code: i32, op: &str) -> Result<Option<(Num, Num)>, crate::error::QueryError> {
    let (lhs, rhs) = (&args[0], &args[1]);
    if is_null(lhs) || is_null(rhs) {
        return Ok(None);
    }
    match (lhs.as_ref().and_then(Num::from_bson), rhs.as_ref().and_then(Num::from_bson)) {
        (Some(a), Some(b)) => Ok(Some((a, b))),
        _ => {
            Err(fail(code, format!("{op} only supports numeric types, not {} and {}", type_name(lhs), type_name(rhs))))
        }
    }
}

fn divide(args: &[Value]) -> EvalResult {
    let Some((a, b)) = two_numbers(args, location::DIVIDE_NOT_NUMBERS, "$divide")? else { return null() };
    if b.is_zero() {
        return Err(fail(crate::error::ErrorCode::BadValue, "can't $divide by zero"));
    }
    if a.num_type() == NumType::Decimal || b.num_type() == NumType::Decimal {
        return num(Num::Decimal(dec_divide(&a.to_dec(), &b.to_dec())));
    }
    num(Num::Double(a.to_f64() / b.to_f64()))
}

fn modulo(args: &[Value]) -> EvalResult {
    let Some((a, b)) = two_numbers(args, location::MOD_NOT_NUMBERS, "$mod")? else { return null() };
    if b.is_zero() {
        return Err(fail(location::MOD_BY_ZERO, "can't $mod by zero"));
    }
    let wider = a.num_type().max(b.num_type());
    let result = match wider {
        NumType::Int | NumType::Long => {
            let (x, y) = (a.to_exact_i64().unwrap_or(0), b.to_exact_i64().unwrap_or(1));
            let r = x.checked_rem(y).unwrap_or(0);
            if wider == NumType::Int { Num::Int(r as i32) } else { Num::Long(r) }
        }
        NumType::Double => Num::Double(a.to_f64() % b.to_f64()),
        NumType::Decimal => match (a.to_dec(), b.to_dec()) {
            (Dec::Finite(x), Dec::Finite(y)) => Num::Decimal(Dec::Finite(x % y)),
            (x, y) => Num::Decimal(Dec::from_f64(x.to_f64() % y.to_f64())),
        },
    };
    num(result)
}

/// The single numeric operand of a unary function, `Ok(None)` for null or missing.
pub(super) fn one_number(args: &[Value], op: &str) -> Result<Option<Num>, crate::error::QueryError> {
    let arg = &args[0];
    if is_null(arg) {
        return Ok(None);
    }
    match arg.as_ref().and_then(Num::from_bson) {
        Some(n) => Ok(Some(n)),
        None => Err(fail(
            location::UNARY_ARITHMETIC_NOT_NUMBER,
            format!("{op} only supports numeric types, not {}", type_name(arg)),
        )),
    }
}

fn abs(args: &[Value]) -> EvalResult {
    let Some(n) = one_number(args, "$abs")? else { return null() };
    let result = match n {
        Num::Int(i) => match i.checked_abs() {
            Some(a) => Num::Int(a),
            None => Num::Long(i64::from(i).abs()),
        },
        Num::Long(i) => match i.checked_abs() {
            Some(a) => Num::Long(a),
            None => return Err(fail(location::ABS_OF_LONG_MIN, "can't take $abs of long long min")),
        },
        Num::Double(d) => Num::Double(d.abs()),
        Num::Decimal(Dec::Finite(d)) => Num::Decimal(Dec::Finite(d.abs())),
        Num::Decimal(Dec::Infinity { .. }) => Num::Decimal(Dec::Infinity { negative: false }),
        Num::Decimal(Dec::NaN) => Num::Decimal(Dec::NaN),
    };
    num(result)
}

fn ceil(args: &[Value]) -> EvalResult {
    integral(args, "$ceil", f64::ceil, RoundingMode::Ceiling)
}

fn floor(args: &[Value]) -> EvalResult {
    integral(args, "$floor", f64::floor, RoundingMode::Floor)
}

fn integral(args: &[Value], op: &str, f: fn(f64) -> f64, mode: RoundingMode) -> EvalResult {
    let Some(n) = one_number(args, op)? else { return null() };
    num(match n {
        Num::Double(d) => Num::Double(f(d)),
        Num::Decimal(Dec::Finite(d)) => Num::Decimal(Dec::Finite(d.with_scale_round(0, mode))),
        other => other,
    })
}

/// `$round`/`$trunc`'s optional place: an integer in [-20, 100].
fn place_arg(args: &[Value], op: &str) -> Result<Option<i64>, crate::error::QueryError> {
    let Some(place) = args.get(1) else { return Ok(Some(0)) };
    if is_null(place) {
        return Ok(None);
    }
    let n = place.as_ref().and_then(Num::from_bson).and_then(|n| n.to_exact_i64());
    match n {
        Some(p) if (-20..=100).contains(&p) => Ok(Some(p)),
        _ => Err(fail(
            location::ROUND_PLACE_OUT_OF_RANGE,
            format!("Cannot apply {op} with precision value {} value must be in [-20, 100]", display(place)),
        )),
    }
}

fn round(args: &[Value]) -> EvalResult {
    round_with(args, "$round", RoundingMode::HalfEven)
}

fn trunc(args: &[Value]) -> EvalResult {
    round_with(args, "$trunc", RoundingMode::Down)
}

fn round_with(args: &[Value], op: &str, mode: RoundingMode) -> EvalResult {
    if is_null(&args[0]) {
        return null();
    }
    let Some(n) = args[0].as_ref().and_then(Num::from_bson) else {
        return Err(fail(
            location::ROUND_NOT_NUMBER,
            format!("{op} only supports numeric types, not {}", type_name(&args[0])),
        ));
    };
    let Some(place) = place_arg(args, op)? else { return null() };
    let round_dec = |d: BigDecimal| d.with_scale_round(place, mode).with_scale(place.max(0));
    let result = match n {
        Num::Int(i) if place >= 0 => Num::Int(i),
        Num::Long(i) if place >= 0 => Num::Long(i),
        Num::Int(i) => {
            let r = round_dec(BigDecimal::from(i));
            i32::try_from(dec_to_i64(&r)).map(Num::Int).unwrap_or_else(|_| Num::Long(dec_to_i64(&r)))
        }
        Num::Long(i) => Num::Long(dec_to_i64(&round_dec(BigDecimal::from(i)))),
        Num::Double(d) if !d.is_finite() => Num::Double(d),
        Num::Double(d) => match Dec::from_f64(d) {
            Dec::Finite(x) => Num::Double(Dec::Finite(round_dec(x)).to_f64()),
            _ => Num::Double(d),
        },
        Num::Decimal(Dec::Finite(x)) => Num::Decimal(Dec::Finite(x.with_scale_round(place, mode))),
        special => special,
    };
    num(result)
}

fn dec_to_i64(d: &BigDecimal) -> i64 {
    bigdecimal::ToPrimitive::to_i64(d).unwrap_or(0)
}

/// Unary transcendental functions: double in, double out; decimal in, decimal out.
fn unary_float(args: &[Value], op: &str, check: fn(f64) -> Option<(i32, String)>, f: fn(f64) -> f64) -> EvalResult {
    let Some(n) = one_number(args, op)? else { return null() };
    let x = n.to_f64();
    if let Some((code, message)) = check(x) {
        return Err(fail(code, format!("{message}{}", n.to_bson())));
    }
    let y = f(x);
    num(match n.num_type() {
        NumType::Decimal => Num::Decimal(Dec::from_f64(y)),
        _ => Num::Double(y),
    })
}

fn sqrt(args: &[Value]) -> EvalResult {
    if let Some(Num::Decimal(Dec::Finite(d))) = one_number(args, "$sqrt")? {
        return match d.sqrt() {
            Some(r) => num(Num::Decimal(Dec::Finite(r.with_prec(34)))),
            None => Err(fail(location::SQRT_OF_NEGATIVE, "$sqrt's argument must be greater than or equal to 0")),
        };
    }
    unary_float(
        args,
        "$sqrt",
        |x| {
            (x < 0.0)
                .then(|| (location::SQRT_OF_NEGATIVE, "$sqrt's argument must be greater than or equal to 0: ".into()))
        },
        f64::sqrt,
    )
}

fn exp(args: &[Value]) -> EvalResult {
    unary_float(args, "$exp", |_| None, f64::exp)
}

fn ln(args: &[Value]) -> EvalResult {
    unary_float(
        args,
        "$ln",
        |x| (x <= 0.0).then(|| (location::LN_NOT_POSITIVE, "$ln's argument must be a positive number, but is ".into())),
        f64::ln,
    )
}

fn log10(args: &[Value]) -> EvalResult {
    unary_float(
        args,
        "$log10",
        |x| {
            (x <= 0.0)
                .then(|| (location::LOG10_NOT_POSITIVE, "$log10's argument must be a positive number, but is ".into()))
        },
        f64::log10,
    )
}

fn log(args: &[Value]) -> EvalResult {
    let (value, base) = (&args[0], &args[1]);
    if is_null(value) || is_null(base) {
        return null();
    }
    let Some(x) = value.as_ref().and_then(Num::from_bson) else {
        return Err(fail(
            location::LOG_ARGUMENT_NOT_NUMBER,
            format!("$log's argument must be numeric, not {}", type_name(value)),
        ));
    };
    let Some(b) = base.as_ref().and_then(Num::from_bson) else {
        return Err(fail(
            location::LOG_BASE_NOT_NUMBER,
            format!("$log's base must be numeric, not {}", type_name(base)),
        ));
    };
    let (xf, bf) = (x.to_f64(), b.to_f64());
    if xf <= 0.0 {
        return Err(fail(
            location::LOG_ARGUMENT_NOT_POSITIVE,
            format!("$log's argument must be a positive number, but is {}", x.to_bson()),
        ));
    }
    if bf <= 0.0 || bf == 1.0 {
        return Err(fail(
            location::LOG_BASE_INVALID,
            format!("$log's base must be a positive number not equal to 1, but is {}", b.to_bson()),
        ));
    }
    let y = xf.ln() / bf.ln();
    if x.num_type() == NumType::Decimal || b.num_type() == NumType::Decimal {
        return num(Num::Decimal(Dec::from_f64(y)));
    }
    num(Num::Double(y))
}

fn pow(args: &[Value]) -> EvalResult {
    let (base, exponent) = (&args[0], &args[1]);
    if is_null(base) || is_null(exponent) {
        return null();
    }
    let Some(b) = base.as_ref().and_then(Num::from_bson) else {
        return Err(fail(
            location::POW_BASE_NOT_NUMBER,
            format!("$pow's base must be numeric, not {}", type_name(base)),
        ));
    };
    let Some(e) = exponent.as_ref().and_then(Num::from_bson) else {
        return Err(fail(
            location::POW_EXPONENT_NOT_NUMBER,
            format!("$pow's exponent must be numeric, not {}", type_name(exponent)),
        ));
    };
    if b.is_zero() && e.is_negative() {
        return Err(fail(location::POW_ZERO_TO_NEGATIVE, "$pow cannot take a base of 0 and a negative exponent"));
    }
    let wider = b.num_type().max(e.num_type());
    match wider {
        NumType::Decimal => num(Num::Decimal(decimal_pow(&b, &e))),
        NumType::Double => num(Num::Double(b.to_f64().powf(e.to_f64()))),
        _ => num(integer_pow(&b, &e, wider)),
    }
}

fn decimal_pow(b: &Num, e: &Num) -> Dec {
    let small_exponent = e.to_exact_i64().filter(|n| (0..=1000).contains(n));
    match (b.to_dec(), small_exponent) {
        (Dec::Finite(base), Some(n)) => Dec::Finite(base.powi(n)),
        _ => Dec::from_f64(b.to_f64().powf(e.to_f64())),
    }
}

/// Integer powers stay integers while they fit (int, then long), as in MongoDB.
fn integer_pow(b: &Num, e: &Num, wider: NumType) -> Num {
    let (base, exponent) = (b.to_exact_i64().unwrap_or(0), e.to_exact_i64().unwrap_or(0));
    if exponent < 0 {
        return match base {
            1 => fit(1, wider),
            -1 => fit(if exponent % 2 == 0 { 1 } else { -1 }, wider),
            _ => Num::Double((base as f64).powf(exponent as f64)),
        };
    }
    let exact = u32::try_from(exponent).ok().and_then(|x| base.checked_pow(x));
    match exact {
        Some(r) => fit(r, wider),
        None => Num::Double((base as f64).powf(exponent as f64)),
    }
}

fn fit(value: i64, wider: NumType) -> Num {
    match (wider, i32::try_from(value)) {
        (NumType::Int, Ok(i)) => Num::Int(i),
        _ => Num::Long(value),
    }
}
