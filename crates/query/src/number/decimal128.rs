//! Decimal128 arithmetic as the update operators do it (`$inc`, `$mul`), after IEEE 754-2008
//! decimal as MongoDB's `Decimal128` class: each result is exact on the coefficients, then
//! rounded half to even to 34 digits; it keeps the ideal exponent (the smaller one for a sum,
//! the sum of both for a product) and the sign of a zero (`-1 × 0` is `-0`). Known departures
//! from IEEE: a sum whose larger operand cannot be scaled to the smaller one's exponent in 128
//! bits is the larger operand alone, a result past the exponent range is `None` (an error for
//! the update operators) rather than an infinity, and one below it keeps its last digits at
//! the smallest exponent rather than rounding them away.
//!
//! Operands are [`DecimalParts`], decimal128's own fields: an integer is itself with exponent
//! 0, a double goes through 15 significant digits (as `Decimal128(double)` does in MongoDB).
//!
//! Aggregation's arithmetic ([`super::arith`] on [`super::Dec`]) computes decimals on
//! unrounded `BigDecimal`s instead, and some of its results differ (`1 × 1.00` is `1` there,
//! `1.00` here); see [`super`].

use bson::{Bson, Decimal128};
use document::number::{DecimalParts, decode_decimal128, encode_decimal128};

use super::ArithOp;

/// `a op b` as decimal128 arithmetic; `None` if either is not a number, or when the result is
/// beyond decimal128's exponent range.
pub(super) fn arith(op: ArithOp, a: &Bson, b: &Bson) -> Option<Decimal128> {
    let (a, b) = (parts(a)?, parts(b)?);
    match op {
        ArithOp::Add => sum(a, b),
        ArithOp::Subtract => sum(a, negated(b)),
        ArithOp::Multiply => product(a, b),
    }
}

fn special(text: &str) -> Option<Decimal128> {
    text.parse::<Decimal128>().ok()
}

fn infinity(negative: bool) -> Option<Decimal128> {
    special(if negative { "-Infinity" } else { "Infinity" })
}

fn sum(a: DecimalParts, b: DecimalParts) -> Option<Decimal128> {
    match (a, b) {
        (DecimalParts::NaN, _) | (_, DecimalParts::NaN) => special("NaN"),
        (DecimalParts::Infinity { negative: x }, DecimalParts::Infinity { negative: y }) if x != y => special("NaN"),
        (DecimalParts::Infinity { negative }, _) | (_, DecimalParts::Infinity { negative }) => infinity(negative),
        (
            DecimalParts::Finite { negative: xn, coefficient: xc, exponent: xe },
            DecimalParts::Finite { negative: yn, coefficient: yc, exponent: ye },
        ) => add(xn, xc, xe, yn, yc, ye),
    }
}

fn product(a: DecimalParts, b: DecimalParts) -> Option<Decimal128> {
    match (a, b) {
        (DecimalParts::NaN, _) | (_, DecimalParts::NaN) => special("NaN"),
        (DecimalParts::Infinity { negative: x }, DecimalParts::Infinity { negative: y }) => infinity(x != y),
        (DecimalParts::Infinity { negative }, DecimalParts::Finite { negative: other, coefficient, .. })
        | (DecimalParts::Finite { negative: other, coefficient, .. }, DecimalParts::Infinity { negative }) => {
            if coefficient == 0 {
                special("NaN")
            } else {
                infinity(negative != other)
            }
        }
        (
            DecimalParts::Finite { negative: xn, coefficient: xc, exponent: xe },
            DecimalParts::Finite { negative: yn, coefficient: yc, exponent: ye },
        ) => round(xn != yn, xc.checked_mul(yc).map(Wide::from).unwrap_or_else(|| Wide::mul(xc, yc)), xe + ye),
    }
}

/// A number's decimal128 fields.
fn parts(value: &Bson) -> Option<DecimalParts> {
    let integer =
        |i: i64| DecimalParts::Finite { negative: i < 0, coefficient: u128::from(i.unsigned_abs()), exponent: 0 };
    match value {
        Bson::Decimal128(d) => Some(decode_decimal128(d)),
        Bson::Int32(i) => Some(integer(i64::from(*i))),
        Bson::Int64(i) => Some(integer(*i)),
        Bson::Double(d) if d.is_nan() => Some(DecimalParts::NaN),
        Bson::Double(d) if d.is_infinite() => Some(DecimalParts::Infinity { negative: *d < 0.0 }),
        Bson::Double(d) => format!("{d:.14e}").parse::<Decimal128>().ok().map(|x| decode_decimal128(&x)),
        _ => None,
    }
}

/// `-value` (subtraction is the sum with the negated subtrahend).
fn negated(value: DecimalParts) -> DecimalParts {
    match value {
        DecimalParts::NaN => DecimalParts::NaN,
        DecimalParts::Infinity { negative } => DecimalParts::Infinity { negative: !negative },
        DecimalParts::Finite { negative, coefficient, exponent } => {
            DecimalParts::Finite { negative: !negative, coefficient, exponent }
        }
    }
}

const MAX_DIGITS: u32 = 34;

fn add(xn: bool, xc: u128, xe: i32, yn: bool, yc: u128, ye: i32) -> Option<Decimal128> {
    // Align to the smaller exponent; a difference beyond 38 digits makes the smaller operand
    // smaller than half a unit of the result's 34th digit, so it only matters for ties (ignored).
    let (big, small) = if xe >= ye { ((xn, xc, xe), (yn, yc, ye)) } else { ((yn, yc, ye), (xn, xc, xe)) };
    let shift = (big.2 - small.2) as u32;
    let scaled = 10u128.checked_pow(shift).and_then(|p| big.1.checked_mul(p));
    let Some(scaled) = scaled else {
        return if big.1 == 0 {
            round(small.0, Wide::from(small.1), small.2)
        } else {
            round(big.0, Wide::from(big.1), big.2)
        };
    };
    let (negative, coefficient) = if big.0 == small.0 {
        (big.0, scaled.checked_add(small.1)?)
    } else if scaled >= small.1 {
        (big.0, scaled - small.1)
    } else {
        (small.0, small.1 - scaled)
    };
    round(negative && coefficient != 0, Wide::from(coefficient), small.2)
}

/// A 256-bit unsigned integer as (high, low), enough for a product of two coefficients.
#[derive(Debug, Clone, Copy)]
struct Wide {
    high: u128,
    low: u128,
}

impl Wide {
    fn from(value: u128) -> Wide {
        Wide { high: 0, low: value }
    }

    fn mul(a: u128, b: u128) -> Wide {
        let mask = u128::from(u64::MAX);
        let (a_high, a_low, b_high, b_low) = (a >> 64, a & mask, b >> 64, b & mask);
        let low_low = a_low * b_low;
        let middle = a_high * b_low + (low_low >> 64);
        let middle2 = a_low * b_high + (middle & mask);
        let low = (middle2 << 64) | (low_low & mask);
        let high = a_high * b_high + (middle >> 64) + (middle2 >> 64);
        Wide { high, low }
    }

    /// Divides by 10, returning the remainder.
    fn div10(&mut self) -> u8 {
        let high_remainder = self.high % 10;
        self.high /= 10;
        // (high_remainder * 2^128 + low) / 10, done in 64-bit halves.
        let mut remainder = high_remainder;
        let mut result = 0u128;
        for shift in [96u32, 64, 32, 0] {
            let part = (self.low >> shift) & u128::from(u32::MAX);
            let value = (remainder << 32) | part;
            result |= (value / 10) << shift;
            remainder = value % 10;
        }
        self.low = result;
        remainder as u8
    }

    fn fits(&self) -> Option<u128> {
        (self.high == 0).then_some(self.low)
    }
}

/// Rounds a coefficient to 34 digits (half to even) and builds the decimal.
fn round(negative: bool, mut coefficient: Wide, mut exponent: i32) -> Option<Decimal128> {
    let limit = 10u128.pow(MAX_DIGITS);
    let mut dropped_any = false;
    let mut last_dropped = 0u8;
    while coefficient.fits().is_none_or(|c| c >= limit) {
        if last_dropped != 0 {
            dropped_any = true;
        }
        last_dropped = coefficient.div10();
        exponent += 1;
    }
    let mut value = coefficient.fits()?;
    let round_up = last_dropped > 5 || (last_dropped == 5 && (dropped_any || value % 2 == 1));
    if round_up {
        value += 1;
        if value == limit {
            value /= 10;
            exponent += 1;
        }
    }
    while exponent < -6176 && value % 10 == 0 && value > 0 {
        value /= 10;
        exponent += 1;
    }
    encode_decimal128(negative, value, exponent.max(-6176))
}
