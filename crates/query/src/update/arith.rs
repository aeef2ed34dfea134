//! Arithmetic for `$inc`, `$mul` and `$bit`, with MongoDB's numeric type promotion.
//!
//! int32 op int32 stays int32 unless it overflows, then int64; int64 overflow becomes a double
//! (as MongoDB's `SafeNum`); anything with a double is a double; anything with a decimal128 is a
//! decimal128, computed exactly on the coefficients and rounded to 34 digits (half to even).

use bson::{Bson, Decimal128};
use document::number::{DecimalParts, decode_decimal128, encode_decimal128};

/// The arithmetic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Multiply,
}

pub fn is_number(value: &Bson) -> bool {
    matches!(value, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))
}

/// `a op b` for two numbers; `None` if either is not a number.
pub fn apply(op: Arith, a: &Bson, b: &Bson) -> Option<Bson> {
    Some(match (a, b) {
        (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => {
            Bson::Decimal128(decimal(op, &to_decimal(a)?, &to_decimal(b)?)?)
        }
        (Bson::Double(_), _) | (_, Bson::Double(_)) => {
            let (x, y) = (to_f64(a)?, to_f64(b)?);
            Bson::Double(match op {
                Arith::Add => x + y,
                Arith::Multiply => x * y,
            })
        }
        (Bson::Int32(x), Bson::Int32(y)) => {
            let exact = match op {
                Arith::Add => x.checked_add(*y),
                Arith::Multiply => x.checked_mul(*y),
            };
            match exact {
                Some(value) => Bson::Int32(value),
                None => long(op, i64::from(*x), i64::from(*y)),
            }
        }
        _ => long(op, to_i64(a)?, to_i64(b)?),
    })
}

fn long(op: Arith, x: i64, y: i64) -> Bson {
    let exact = match op {
        Arith::Add => x.checked_add(y),
        Arith::Multiply => x.checked_mul(y),
    };
    match exact {
        Some(value) => Bson::Int64(value),
        None => Bson::Double(match op {
            Arith::Add => x as f64 + y as f64,
            Arith::Multiply => x as f64 * y as f64,
        }),
    }
}

/// Zero of the same numeric type as `value` (`$mul` on a missing field).
pub fn zero_like(value: &Bson) -> Bson {
    match value {
        Bson::Int32(_) => Bson::Int32(0),
        Bson::Int64(_) => Bson::Int64(0),
        Bson::Decimal128(_) => encode_decimal128(false, 0, 0).map_or(Bson::Int32(0), Bson::Decimal128),
        _ => Bson::Double(0.0),
    }
}

fn to_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

fn to_f64(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// A decimal as (negative, coefficient, exponent), or a special value.
#[derive(Debug, Clone, Copy)]
enum Dec {
    Finite { negative: bool, coefficient: u128, exponent: i32 },
    NaN,
    Infinity { negative: bool },
}

fn to_decimal(value: &Bson) -> Option<Dec> {
    match value {
        Bson::Decimal128(d) => Some(match decode_decimal128(d) {
            DecimalParts::NaN => Dec::NaN,
            DecimalParts::Infinity { negative } => Dec::Infinity { negative },
            DecimalParts::Finite { negative, coefficient, exponent } => Dec::Finite { negative, coefficient, exponent },
        }),
        Bson::Int32(_) | Bson::Int64(_) => {
            let i = to_i64(value)?;
            Some(Dec::Finite { negative: i < 0, coefficient: u128::from(i.unsigned_abs()), exponent: 0 })
        }
        // MongoDB converts a double to decimal with 15 significant digits.
        Bson::Double(d) if d.is_nan() => Some(Dec::NaN),
        Bson::Double(d) if d.is_infinite() => Some(Dec::Infinity { negative: *d < 0.0 }),
        Bson::Double(d) => {
            format!("{d:.14e}").parse::<Decimal128>().ok().and_then(|x| to_decimal(&Bson::Decimal128(x)))
        }
        _ => None,
    }
}

const MAX_DIGITS: u32 = 34;

fn decimal(op: Arith, a: &Dec, b: &Dec) -> Option<Decimal128> {
    let special = |text: &str| text.parse::<Decimal128>().ok();
    match (a, b) {
        (Dec::NaN, _) | (_, Dec::NaN) => special("NaN"),
        (Dec::Infinity { negative: x }, Dec::Infinity { negative: y }) => match op {
            Arith::Add if x != y => special("NaN"),
            Arith::Add => special(if *x { "-Infinity" } else { "Infinity" }),
            Arith::Multiply => special(if x != y { "-Infinity" } else { "Infinity" }),
        },
        (Dec::Infinity { negative }, Dec::Finite { negative: other, coefficient, .. })
        | (Dec::Finite { negative: other, coefficient, .. }, Dec::Infinity { negative }) => match op {
            Arith::Add => special(if *negative { "-Infinity" } else { "Infinity" }),
            Arith::Multiply if *coefficient == 0 => special("NaN"),
            Arith::Multiply => special(if negative != other { "-Infinity" } else { "Infinity" }),
        },
        (
            Dec::Finite { negative: xn, coefficient: xc, exponent: xe },
            Dec::Finite { negative: yn, coefficient: yc, exponent: ye },
        ) => match op {
            Arith::Multiply => {
                round(xn != yn, xc.checked_mul(*yc).map(Wide::from).unwrap_or_else(|| Wide::mul(*xc, *yc)), xe + ye)
            }
            Arith::Add => add(*xn, *xc, *xe, *yn, *yc, *ye),
        },
    }
}

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
