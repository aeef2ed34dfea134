//! Numbers and MongoDB's numeric type promotion, for aggregation expressions and the update
//! operators alike.
//!
//! A numeric BSON value becomes a [`Num`]; binary operations ([`arith`]) widen both operands
//! to the wider type (int32 < int64 < double < decimal128), compute, and integer results that
//! overflow move up one type (int32 → int64 → double), as `mongod` does. Doubles become
//! decimals through 15 significant digits, as `Decimal128(double)` does in MongoDB (so `0.1`
//! becomes `0.100000000000000`).
//!
//! Decimals are computed two ways, kept as they were found. Aggregation ([`arith`], [`Dec`]):
//! on `BigDecimal`, unrounded between operations (a `$sum` rounds once, at the end), rounded
//! half-even to decimal128's 34 significant digits on the way out. The update operators
//! ([`arith_decimal128`], `decimal128.rs`): decimal128 arithmetic on 128-bit coefficients, each
//! result rounded, its exponent and the sign of a zero kept. Their results differ: in the
//! exponent (`1 × 1.00` is `1` for aggregation, `1.00` for updates, as MongoDB), the sign of a
//! zero (`-1 × 0`: `0`, and `-0` as MongoDB), and at the edges in value (a sum of operands
//! whose exponents are far apart, results past decimal128's exponent range, infinity times a
//! number beyond a double's range); neither matches MongoDB in all of them.
//!
//! Invariant: a `Dec::Finite` is always representable after [`Dec::to_decimal128`] rounding;
//! values beyond decimal128's exponent range become infinities or zero, never a panic.

mod decimal128;

use std::num::NonZeroU64;
use std::str::FromStr;

use bigdecimal::{BigDecimal, RoundingMode, ToPrimitive, Zero};
use bson::{Bson, Decimal128};

/// A decimal128 value: finite values are exact `BigDecimal`s.
#[derive(Debug, Clone, PartialEq)]
pub enum Dec {
    Finite(BigDecimal),
    NaN,
    Infinity { negative: bool },
}

/// A BSON number, tagged with its type.
#[derive(Debug, Clone, PartialEq)]
pub enum Num {
    Int(i32),
    Long(i64),
    Double(f64),
    Decimal(Dec),
}

/// The four numeric types in promotion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NumType {
    Int,
    Long,
    Double,
    Decimal,
}

const DECIMAL_DIGITS: u64 = 34;
const DECIMAL_MAX_EXPONENT: i64 = 6111;
const DECIMAL_MIN_EXPONENT: i64 = -6176;

impl Dec {
    pub fn from_decimal128(value: &Decimal128) -> Dec {
        let text = value.to_string();
        match text.as_str() {
            "NaN" | "-NaN" => Dec::NaN,
            "Infinity" => Dec::Infinity { negative: false },
            "-Infinity" => Dec::Infinity { negative: true },
            _ => BigDecimal::from_str(&text).map(Dec::Finite).unwrap_or(Dec::NaN),
        }
    }

    /// Doubles go through 15 significant digits, as MongoDB's `Decimal128(double)`.
    pub fn from_f64(value: f64) -> Dec {
        if value.is_nan() {
            return Dec::NaN;
        }
        if value.is_infinite() {
            return Dec::Infinity { negative: value < 0.0 };
        }
        let text = format!("{value:.14e}");
        BigDecimal::from_str(&text).map(Dec::Finite).unwrap_or(Dec::NaN)
    }

    pub fn from_i64(value: i64) -> Dec {
        Dec::Finite(BigDecimal::from(value))
    }

    pub fn to_f64(&self) -> f64 {
        match self {
            Dec::NaN => f64::NAN,
            Dec::Infinity { negative: true } => f64::NEG_INFINITY,
            Dec::Infinity { negative: false } => f64::INFINITY,
            Dec::Finite(d) => d.to_string().parse::<f64>().unwrap_or(f64::NAN),
        }
    }

    /// Rounds to 34 digits and clamps the exponent into decimal128's range.
    pub fn to_decimal128(&self) -> Decimal128 {
        let text = match self {
            Dec::NaN => "NaN".to_string(),
            Dec::Infinity { negative: true } => "-Infinity".to_string(),
            Dec::Infinity { negative: false } => "Infinity".to_string(),
            Dec::Finite(d) => finite_decimal_text(d),
        };
        Decimal128::from_str(&text).unwrap_or_else(|_| nan_decimal())
    }

    pub fn is_zero(&self) -> bool {
        matches!(self, Dec::Finite(d) if d.is_zero())
    }
}

fn nan_decimal() -> Decimal128 {
    // 0x7C00... is decimal128 NaN.
    let mut bytes = [0u8; 16];
    bytes[15] = 0x7C;
    Decimal128::from_bytes(bytes)
}

fn finite_decimal_text(value: &BigDecimal) -> String {
    let digits = NonZeroU64::new(DECIMAL_DIGITS).unwrap_or(NonZeroU64::MIN);
    let rounded = if value.digits() > DECIMAL_DIGITS {
        value.with_precision_round(digits, RoundingMode::HalfEven)
    } else {
        value.clone()
    };
    let (mut coefficient, scale) = rounded.as_bigint_and_exponent();
    let mut exponent = -scale;
    if exponent < DECIMAL_MIN_EXPONENT {
        let scaled =
            BigDecimal::new(coefficient, scale).with_scale_round(-DECIMAL_MIN_EXPONENT, RoundingMode::HalfEven);
        let (c, _) = scaled.as_bigint_and_exponent();
        coefficient = c;
        exponent = DECIMAL_MIN_EXPONENT;
    }
    if exponent > DECIMAL_MAX_EXPONENT {
        // Pad the coefficient with zeros (clamping) while it fits 34 digits.
        let extra = exponent - DECIMAL_MAX_EXPONENT;
        let width = coefficient.to_string().trim_start_matches('-').len() as i64;
        if coefficient.is_zero() {
            exponent = DECIMAL_MAX_EXPONENT;
        } else if width + extra <= DECIMAL_DIGITS as i64 {
            coefficient *= num_bigint_pow10(extra);
            exponent = DECIMAL_MAX_EXPONENT;
        } else {
            let negative = coefficient < 0.into();
            return if negative { "-Infinity".into() } else { "Infinity".into() };
        }
    }
    format!("{coefficient}E{exponent}")
}

fn num_bigint_pow10(power: i64) -> bigdecimal::num_bigint::BigInt {
    let mut value = bigdecimal::num_bigint::BigInt::from(1);
    for _ in 0..power {
        value *= 10;
    }
    value
}

impl Num {
    pub fn from_bson(value: &Bson) -> Option<Num> {
        match value {
            Bson::Int32(i) => Some(Num::Int(*i)),
            Bson::Int64(i) => Some(Num::Long(*i)),
            Bson::Double(d) => Some(Num::Double(*d)),
            Bson::Decimal128(d) => Some(Num::Decimal(Dec::from_decimal128(d))),
            _ => None,
        }
    }

    pub fn to_bson(&self) -> Bson {
        match self {
            Num::Int(i) => Bson::Int32(*i),
            Num::Long(i) => Bson::Int64(*i),
            Num::Double(d) => Bson::Double(*d),
            Num::Decimal(d) => Bson::Decimal128(d.to_decimal128()),
        }
    }

    pub fn num_type(&self) -> NumType {
        match self {
            Num::Int(_) => NumType::Int,
            Num::Long(_) => NumType::Long,
            Num::Double(_) => NumType::Double,
            Num::Decimal(_) => NumType::Decimal,
        }
    }

    pub fn to_f64(&self) -> f64 {
        match self {
            Num::Int(i) => f64::from(*i),
            Num::Long(i) => *i as f64,
            Num::Double(d) => *d,
            Num::Decimal(d) => d.to_f64(),
        }
    }

    pub fn to_dec(&self) -> Dec {
        match self {
            Num::Int(i) => Dec::from_i64(i64::from(*i)),
            Num::Long(i) => Dec::from_i64(*i),
            Num::Double(d) => Dec::from_f64(*d),
            Num::Decimal(d) => d.clone(),
        }
    }

    /// The value as an int64 when it is integral and in range (used for indexes and counts).
    pub fn to_exact_i64(&self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i64::from(*i)),
            Num::Long(i) => Some(*i),
            Num::Double(d) => f64_to_exact_i64(*d),
            Num::Decimal(Dec::Finite(d)) if d.is_integer() => d.to_i64(),
            Num::Decimal(_) => None,
        }
    }

    pub fn is_zero(&self) -> bool {
        match self {
            Num::Int(i) => *i == 0,
            Num::Long(i) => *i == 0,
            Num::Double(d) => *d == 0.0,
            Num::Decimal(d) => d.is_zero(),
        }
    }

    pub fn is_negative(&self) -> bool {
        match self {
            Num::Int(i) => *i < 0,
            Num::Long(i) => *i < 0,
            Num::Double(d) => *d < 0.0,
            Num::Decimal(Dec::Finite(d)) => d.sign() == bigdecimal::num_bigint::Sign::Minus,
            Num::Decimal(Dec::Infinity { negative }) => *negative,
            Num::Decimal(Dec::NaN) => false,
        }
    }

    pub fn is_nan(&self) -> bool {
        match self {
            Num::Double(d) => d.is_nan(),
            Num::Decimal(Dec::NaN) => true,
            _ => false,
        }
    }
}

/// `Some(i)` when `d` is integral and inside int64's range.
pub fn f64_to_exact_i64(d: f64) -> Option<i64> {
    // 2^63 is exactly representable; anything at or above it does not fit.
    if d.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        Some(d as i64)
    } else {
        None
    }
}

/// Binary arithmetic operation with MongoDB's promotion rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Subtract,
    Multiply,
}

/// `a op b`: both widen to the wider type; integer overflow moves up a type.
pub fn arith(op: ArithOp, a: &Num, b: &Num) -> Num {
    let wider = a.num_type().max(b.num_type());
    match wider {
        NumType::Int | NumType::Long => {
            let (x, y) = (a.to_exact_i64().unwrap_or(0), b.to_exact_i64().unwrap_or(0));
            let exact = match op {
                ArithOp::Add => x.checked_add(y),
                ArithOp::Subtract => x.checked_sub(y),
                ArithOp::Multiply => x.checked_mul(y),
            };
            match exact {
                Some(r) if wider == NumType::Int => match i32::try_from(r) {
                    Ok(small) => Num::Int(small),
                    Err(_) => Num::Long(r),
                },
                Some(r) => Num::Long(r),
                None => Num::Double(float_op(op, x as f64, y as f64)),
            }
        }
        NumType::Double => Num::Double(float_op(op, a.to_f64(), b.to_f64())),
        NumType::Decimal => Num::Decimal(dec_arith(op, &a.to_dec(), &b.to_dec())),
    }
}

/// `a op b` on two BSON numbers as the update operators compute them (`$inc`, `$mul`): the
/// promotion of [`arith`], but a decimal result is decimal128 arithmetic ([`decimal128`]).
/// `None` if either is not a number, or a decimal result is beyond decimal128's range.
pub fn arith_decimal128(op: ArithOp, a: &Bson, b: &Bson) -> Option<Bson> {
    if matches!(a, Bson::Decimal128(_)) || matches!(b, Bson::Decimal128(_)) {
        return decimal128::arith(op, a, b).map(Bson::Decimal128);
    }
    Some(arith(op, &Num::from_bson(a)?, &Num::from_bson(b)?).to_bson())
}

fn float_op(op: ArithOp, x: f64, y: f64) -> f64 {
    match op {
        ArithOp::Add => x + y,
        ArithOp::Subtract => x - y,
        ArithOp::Multiply => x * y,
    }
}

fn dec_arith(op: ArithOp, a: &Dec, b: &Dec) -> Dec {
    match (a, b) {
        (Dec::Finite(x), Dec::Finite(y)) => Dec::Finite(match op {
            ArithOp::Add => x + y,
            ArithOp::Subtract => x - y,
            ArithOp::Multiply => x * y,
        }),
        // Specials follow IEEE 754, which f64 implements the same way.
        _ => Dec::from_f64(float_op(op, a.to_f64(), b.to_f64())),
    }
}

/// Decimal division; the caller has rejected a zero divisor.
pub fn dec_divide(a: &Dec, b: &Dec) -> Dec {
    match (a, b) {
        (Dec::Finite(x), Dec::Finite(y)) if !y.is_zero() => {
            let quotient = x / y;
            // Drop trailing zeros the long division introduced, keeping the ideal exponent.
            Dec::Finite(quotient.with_prec(DECIMAL_DIGITS).normalized())
        }
        _ => Dec::from_f64(a.to_f64() / b.to_f64()),
    }
}

/// Builds the numeric BSON of the given type from an int64, for results like `$size`.
pub fn long_or_int(value: i64) -> Bson {
    match i32::try_from(value) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(value),
    }
}

#[cfg(test)]
mod tests {
    //! Goal: promotion and decimal rounding match MongoDB. Method: table of operand pairs.
    use super::*;

    fn dec(text: &str) -> Num {
        Num::Decimal(Dec::from_decimal128(&Decimal128::from_str(text).unwrap_or_else(|_| nan_decimal())))
    }

    #[test]
    fn promotion_and_overflow() {
        assert_eq!(arith(ArithOp::Add, &Num::Int(1), &Num::Int(2)), Num::Int(3));
        assert_eq!(arith(ArithOp::Add, &Num::Int(i32::MAX), &Num::Int(1)), Num::Long(2147483648));
        assert_eq!(arith(ArithOp::Add, &Num::Long(i64::MAX), &Num::Int(1)), Num::Double(9.223_372_036_854_776e18));
        assert_eq!(arith(ArithOp::Multiply, &Num::Int(2), &Num::Double(1.5)), Num::Double(3.0));
    }

    #[test]
    fn decimal_keeps_exponent_and_rounds() {
        let sum = arith(ArithOp::Add, &dec("1.0"), &dec("2.00")).to_bson();
        assert_eq!(sum, Bson::Decimal128(Decimal128::from_str("3.00").unwrap_or_else(|_| nan_decimal())));
        let third = dec_divide(&Dec::from_i64(1), &Dec::from_i64(3));
        assert_eq!(third.to_decimal128().to_string(), "0.3333333333333333333333333333333333");
        assert_eq!(Dec::from_f64(0.1).to_decimal128().to_string(), "0.100000000000000");
        assert_eq!(dec_divide(&Dec::from_i64(10), &Dec::from_i64(2)).to_decimal128().to_string(), "5");
    }
}
