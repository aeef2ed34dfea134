//! Exact numeric values: every BSON number (int32, int64, double, decimal128) as one form.
//!
//! MongoDB compares numbers by value whatever their type, so `1`, `1.0`, `NumberLong(1)` and
//! `NumberDecimal("1.00")` are equal, and `NumberLong(2^53 + 1)` is greater than the double
//! `2^53`. [`Numeric`] is the one form in which all of them compare exactly: a sign, a decimal
//! exponent and the decimal digits of the value. Every double has a finite decimal expansion
//! (`2^-k = 5^k / 10^k`), so no value is rounded on the way in.
//!
//! Invariants of [`Numeric::Finite`]: the value is `±0.d1 d2 … dn × 10^exponent`, `digits` holds
//! `d1..dn` as numbers 0–9, `d1 != 0` and `dn != 0` (no leading or trailing zeros), so each value
//! has exactly one form. Zero is `Numeric::Zero` (there is no negative zero: `-0 == 0`).
//! NaN (double or decimal, any payload) sorts below every other number, as in MongoDB.

use std::cmp::Ordering;

use bson::{Bson, Decimal128};

/// A number in the exact form in which all BSON numeric types compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Numeric {
    NaN,
    NegativeInfinity,
    /// `±0.digits × 10^exponent`; see the module invariants.
    Finite {
        negative: bool,
        exponent: i32,
        digits: Vec<u8>,
    },
    Zero,
    PositiveInfinity,
}

/// Largest decimal128 coefficient; larger encoded coefficients are non-canonical and mean zero.
const DECIMAL_MAX_COEFFICIENT: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;
const DECIMAL_EXPONENT_BIAS: i32 = 6176;

impl Numeric {
    /// The exact form of a numeric BSON value, `None` for other types.
    pub fn from_bson(value: &Bson) -> Option<Numeric> {
        match value {
            Bson::Int32(i) => Some(Numeric::from_i64(i64::from(*i))),
            Bson::Int64(i) => Some(Numeric::from_i64(*i)),
            Bson::Double(d) => Some(Numeric::from_f64(*d)),
            Bson::Decimal128(d) => Some(Numeric::from_decimal128(d)),
            _ => None,
        }
    }

    pub fn from_i64(value: i64) -> Numeric {
        if value == 0 {
            return Numeric::Zero;
        }
        Numeric::from_decimal_string(value < 0, &value.unsigned_abs().to_string(), 0)
    }

    pub fn from_f64(value: f64) -> Numeric {
        if value.is_nan() {
            return Numeric::NaN;
        }
        if value.is_infinite() {
            return if value > 0.0 { Numeric::PositiveInfinity } else { Numeric::NegativeInfinity };
        }
        if value == 0.0 {
            return Numeric::Zero;
        }
        // A double m × 2^-k (m odd) has exactly k digits after the decimal point, and Rust's
        // fixed-precision formatting is exact, so this prints the value without rounding.
        let fraction_digits = fraction_binary_digits(value);
        let text = format!("{:.*}", fraction_digits, value.abs());
        let (integer_part, fraction_part) = text.split_once('.').unwrap_or((text.as_str(), ""));
        let all_digits = format!("{integer_part}{fraction_part}");
        let exponent = -(fraction_part.len() as i32);
        Numeric::from_decimal_string(value < 0.0, &all_digits, exponent)
    }

    pub fn from_decimal128(value: &Decimal128) -> Numeric {
        match decode_decimal128(value) {
            DecimalParts::NaN => Numeric::NaN,
            DecimalParts::Infinity { negative: true } => Numeric::NegativeInfinity,
            DecimalParts::Infinity { negative: false } => Numeric::PositiveInfinity,
            DecimalParts::Finite { negative, coefficient, exponent } => {
                if coefficient == 0 {
                    return Numeric::Zero;
                }
                Numeric::from_decimal_string(negative, &coefficient.to_string(), exponent)
            }
        }
    }

    /// `±digits × 10^exponent` where `digits` is ASCII decimal digits with no sign.
    fn from_decimal_string(negative: bool, ascii_digits: &str, exponent: i32) -> Numeric {
        let trimmed_leading = ascii_digits.trim_start_matches('0');
        let trimmed = trimmed_leading.trim_end_matches('0');
        if trimmed.is_empty() {
            return Numeric::Zero;
        }
        let trailing_zeros = (trimmed_leading.len() - trimmed.len()) as i32;
        let digits: Vec<u8> = trimmed.bytes().map(|b| b - b'0').collect();
        // value = trimmed × 10^(exponent + trailing_zeros) = 0.trimmed × 10^(that + len)
        let exponent = exponent + trailing_zeros + digits.len() as i32;
        Numeric::Finite { negative, exponent, digits }
    }

    /// Whether the value is an integer (used by `$mod`, `$bit`, array indexes).
    pub fn is_integer(&self) -> bool {
        match self {
            Numeric::Zero => true,
            Numeric::Finite { exponent, digits, .. } => *exponent >= digits.len() as i32,
            _ => false,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Numeric::NaN => 0,
            Numeric::NegativeInfinity => 1,
            Numeric::Finite { negative: true, .. } => 2,
            Numeric::Zero => 3,
            Numeric::Finite { negative: false, .. } => 4,
            Numeric::PositiveInfinity => 5,
        }
    }
}

impl Ord for Numeric {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (
                Numeric::Finite { negative: a_negative, exponent: a_exponent, digits: a_digits },
                Numeric::Finite { negative: b_negative, exponent: b_exponent, digits: b_digits },
            ) if a_negative == b_negative => {
                // Normalized digits: the exponent decides first, then the digits, a prefix
                // being smaller (its missing digits are zeros).
                let magnitude = a_exponent.cmp(b_exponent).then_with(|| a_digits.cmp(b_digits));
                if *a_negative { magnitude.reverse() } else { magnitude }
            }
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Numeric {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// How many binary digits a finite double has after the point: `k` in `m × 2^-k`, m odd.
fn fraction_binary_digits(value: f64) -> usize {
    let bits = value.to_bits();
    let biased_exponent = ((bits >> 52) & 0x7ff) as i32;
    let mantissa_field = bits & ((1u64 << 52) - 1);
    let (mantissa, exponent) = if biased_exponent == 0 {
        (mantissa_field, -1074)
    } else {
        (mantissa_field | (1u64 << 52), biased_exponent - 1075)
    };
    if mantissa == 0 {
        return 0;
    }
    let exponent = exponent + mantissa.trailing_zeros() as i32;
    if exponent >= 0 { 0 } else { (-exponent) as usize }
}

/// The fields of a decimal128 (IEEE 754-2008 BID encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimalParts {
    NaN,
    Infinity {
        negative: bool,
    },
    /// `±coefficient × 10^exponent`.
    Finite {
        negative: bool,
        coefficient: u128,
        exponent: i32,
    },
}

/// Splits a decimal128 into sign, coefficient and exponent.
pub fn decode_decimal128(value: &Decimal128) -> DecimalParts {
    let bits = u128::from_le_bytes(value.bytes());
    let negative = bits >> 127 == 1;
    let combination = (bits >> 122) & 0x1f;
    if combination == 0x1f {
        return DecimalParts::NaN;
    }
    if combination == 0x1e {
        return DecimalParts::Infinity { negative };
    }
    let (biased_exponent, coefficient) = if (bits >> 125) & 0x3 == 0x3 {
        // The "11" form: implicit 100 prefix, so the coefficient is above 2^113 > the maximum:
        // non-canonical, which the standard defines as zero.
        (((bits >> 111) & 0x3fff) as i32, 0)
    } else {
        (((bits >> 113) & 0x3fff) as i32, bits & ((1u128 << 113) - 1))
    };
    let coefficient = if coefficient > DECIMAL_MAX_COEFFICIENT { 0 } else { coefficient };
    DecimalParts::Finite { negative, coefficient, exponent: biased_exponent - DECIMAL_EXPONENT_BIAS }
}

/// Builds a decimal128 from sign, coefficient and exponent; `None` when out of range.
pub fn encode_decimal128(negative: bool, coefficient: u128, exponent: i32) -> Option<Decimal128> {
    if coefficient > DECIMAL_MAX_COEFFICIENT {
        return None;
    }
    let biased = exponent + DECIMAL_EXPONENT_BIAS;
    if !(0..=0x2fff).contains(&biased) {
        return None;
    }
    let bits = (u128::from(negative) << 127) | ((biased as u128) << 113) | coefficient;
    Some(Decimal128::from_bytes(bits.to_le_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the exact form of a double is its exact binary value, not its shortest print.
    #[test]
    fn double_is_exact() {
        let tenth = Numeric::from_f64(0.1);
        let Numeric::Finite { exponent, digits, .. } = &tenth else { panic!("{tenth:?}") };
        assert_eq!(*exponent, 0);
        assert_eq!(digits.len(), 55);
        assert_eq!(Numeric::from_f64(1.5), Numeric::Finite { negative: false, exponent: 1, digits: vec![1, 5] });
        assert_eq!(Numeric::from_f64(-0.0), Numeric::Zero);
        assert_eq!(Numeric::from_f64(100.0), Numeric::from_i64(100));
        assert!(Numeric::from_f64(f64::MIN_POSITIVE / 4.0) > Numeric::Zero);
    }

    #[test]
    fn decimal_round_trip_and_order() {
        let one: Decimal128 = "1.00".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Numeric::from_decimal128(&one), Numeric::from_i64(1));
        let tenth: Decimal128 = "0.1".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(Numeric::from_decimal128(&tenth) < Numeric::from_f64(0.1));
        let nan: Decimal128 = "NaN".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Numeric::from_decimal128(&nan), Numeric::NaN);
        let built = encode_decimal128(true, 125, -2).unwrap_or_else(|| panic!("range"));
        assert_eq!(built.to_string(), "-1.25");
    }
}
