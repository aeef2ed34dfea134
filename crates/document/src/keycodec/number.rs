//! Numbers in keys: one body for int32, int64, double and decimal128, in value order, equal
//! values (`1`, `1.0`, `NumberLong(1)`, `NumberDecimal("1.00")`) with equal bytes.
//!
//! ```text
//! body(number) = class:u8 [magnitude]     class 1 NaN, 2 -inf, 3 negative, 4 zero,
//!                                               5 positive, 6 +inf
//! magnitude    = exponent:u16be group{1..17}      inverted for a negative number
//! ```
//!
//! A finite nonzero magnitude is `1.f × 2^(exponent - 1)`, the exponent stored + 0x8000. The
//! fraction bits `f` follow in groups of seven, each group a byte `bits << 1 | more`, the last
//! group padded with zeros and its `more` bit clear. An encoding ends where `more` is clear, so
//! no encoding is a prefix of another: inverting a negative number's bytes reverses its order,
//! and a larger fraction sorts after a shorter equal prefix.
//!
//! Every int64 and double fits in 63 fraction bits (ten groups: a double is 12 bytes with its
//! rank, where its decimal expansion took up to 32). A decimal128 is exact in binary when it is
//! a binary fraction, at most 113 significant bits, so it takes the same bytes as the equal
//! double or integer. The others (`0.1`, `1E+300`) have endless or very long expansions: their
//! first 119 fraction bits go in seventeen groups whose `more` bits are all set. Such a value
//! lies strictly inside the step above its truncation `t` (`2^(exponent - 120)` wide, under
//! `2^-119` of the value); every exact value is a multiple of that step, so it sorts after the
//! exact `t` (whose last group has `more` clear) and before the next exact value (larger bits
//! in some group). Two different decimal128 values are at least `10^-34` of their size apart
//! (34 digits), more than a step, so no two share one: the truncation orders them, and equal
//! ones (`0.1`, `0.10`) have the same. Seventeen groups with `more` set are never an exact
//! value's, whose last group has it clear.

use bson::Decimal128;
use num_bigint::BigUint;

use super::{EXPONENT_BIAS, Reader, corrupt};
use crate::error::Result;
use crate::number::{DecimalParts, decode_decimal128};

pub(super) const CLASS_NAN: u8 = 1;
pub(super) const CLASS_NEGATIVE_INFINITY: u8 = 2;
pub(super) const CLASS_NEGATIVE: u8 = 3;
pub(super) const CLASS_ZERO: u8 = 4;
pub(super) const CLASS_POSITIVE: u8 = 5;
pub(super) const CLASS_POSITIVE_INFINITY: u8 = 6;

/// Groups of seven fraction bits a key holds at most: 119 bits.
const MAX_GROUPS: usize = 17;
const MAX_FRACTION_BITS: u32 = 7 * MAX_GROUPS as u32;

/// A finite nonzero magnitude: `1.fraction × 2^(exponent - 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Binary {
    pub exponent: i32,
    /// The bits after the leading one, left-aligned (the first is bit 127).
    pub fraction: u128,
    /// Whether `fraction` is the whole value (false: truncated to 119 bits).
    pub exact: bool,
}

impl Binary {
    /// `significand × 2^scale`, `significand > 0`.
    fn of_scaled(significand: u64, scale: i32) -> Binary {
        let length = 64 - significand.leading_zeros();
        let fraction = (u128::from(significand) << (128 - length)) << 1;
        Binary { exponent: length as i32 + scale, fraction, exact: true }
    }

    /// `coefficient × 10^exponent`, `coefficient > 0`: exact, or its first 119 fraction bits.
    fn of_decimal(coefficient: u128, exponent: i32) -> Binary {
        const WIDTH: u64 = MAX_FRACTION_BITS as u64 + 1;
        let coefficient = BigUint::from(coefficient);
        let power = BigUint::from(10u32).pow(exponent.unsigned_abs());
        // `significand` has exactly WIDTH bits; the value is `significand × 2^(binary - WIDTH)`.
        let (significand, binary, exact) = if exponent >= 0 {
            let value = coefficient * power;
            let length = value.bits();
            if length <= WIDTH {
                (value << (WIDTH - length), length, true)
            } else {
                let dropped = length - WIDTH;
                let exact = value.trailing_zeros().is_some_and(|zeros| zeros >= dropped);
                (value >> dropped, length, exact)
            }
        } else {
            // value = coefficient / power, in (2^(span-1), 2^(span+1)).
            let span = coefficient.bits() as i64 - power.bits() as i64;
            let shift = (WIDTH as i64 - span) as u64; // coefficient < 2^113, so span < 113
            let numerator = coefficient << shift;
            let (mut significand, remainder) = (&numerator / &power, &numerator % &power);
            let mut exact = remainder.bits() == 0;
            let mut shift = shift as i64;
            if significand.bits() > WIDTH {
                exact &= !significand.bit(0);
                significand >>= 1u32;
                shift -= 1;
            }
            (significand, (WIDTH as i64 - shift) as u64, exact)
        };
        let digits = significand.to_u64_digits();
        let low = u128::from(digits.first().copied().unwrap_or(0));
        let high = u128::from(digits.get(1).copied().unwrap_or(0));
        let without_leading_one = ((high << 64) | low) & ((1u128 << MAX_FRACTION_BITS) - 1);
        let fraction = without_leading_one << (128 - MAX_FRACTION_BITS);
        Binary { exponent: binary as i32, fraction, exact }
    }

    /// The number of fraction bits up to the last one.
    fn significant_bits(&self) -> u32 {
        if self.fraction == 0 { 0 } else { 128 - self.fraction.trailing_zeros() }
    }

    /// The significant fraction bits as an integer.
    fn fraction_integer(&self) -> u128 {
        match self.significant_bits() {
            0 => 0,
            bits => self.fraction >> (128 - bits),
        }
    }

    fn group(&self, index: usize) -> u8 {
        ((self.fraction >> (121 - 7 * index)) & 0x7F) as u8
    }
}

pub(super) fn encode_integer(value: i64, out: &mut Vec<u8>) {
    match value.unsigned_abs() {
        0 => out.push(CLASS_ZERO),
        magnitude => encode_finite(value < 0, &Binary::of_scaled(magnitude, 0), out),
    }
}

pub(super) fn encode_double(value: f64, out: &mut Vec<u8>) {
    if value.is_nan() {
        return out.push(CLASS_NAN);
    }
    if value.is_infinite() {
        return out.push(if value < 0.0 { CLASS_NEGATIVE_INFINITY } else { CLASS_POSITIVE_INFINITY });
    }
    if value == 0.0 {
        return out.push(CLASS_ZERO);
    }
    let bits = value.to_bits();
    let biased_exponent = ((bits >> 52) & 0x7FF) as i32;
    let mantissa = bits & ((1 << 52) - 1);
    let binary = if biased_exponent == 0 {
        Binary::of_scaled(mantissa, -1074) // subnormal
    } else {
        Binary::of_scaled(mantissa | (1 << 52), biased_exponent - 1075)
    };
    encode_finite(value < 0.0, &binary, out);
}

pub(super) fn encode_decimal(value: &Decimal128, out: &mut Vec<u8>) {
    match decode_decimal128(value) {
        DecimalParts::NaN => out.push(CLASS_NAN),
        DecimalParts::Infinity { negative: true } => out.push(CLASS_NEGATIVE_INFINITY),
        DecimalParts::Infinity { negative: false } => out.push(CLASS_POSITIVE_INFINITY),
        DecimalParts::Finite { coefficient: 0, .. } => out.push(CLASS_ZERO),
        DecimalParts::Finite { negative, coefficient, exponent } => {
            encode_finite(negative, &Binary::of_decimal(coefficient, exponent), out);
        }
    }
}

fn encode_finite(negative: bool, binary: &Binary, out: &mut Vec<u8>) {
    out.push(if negative { CLASS_NEGATIVE } else { CLASS_POSITIVE });
    let start = out.len();
    // Decimal128 magnitudes stay within 2^±20520: always in range.
    out.extend_from_slice(&biased(binary.exponent).to_be_bytes());
    let groups = if binary.exact { binary.significant_bits().div_ceil(7).max(1) as usize } else { MAX_GROUPS };
    for index in 0..groups {
        let more = !binary.exact || index + 1 < groups;
        out.push(binary.group(index) << 1 | u8::from(more));
    }
    if negative {
        for byte in &mut out[start..] {
            *byte = !*byte;
        }
    }
}

fn biased(exponent: i32) -> u16 {
    (exponent + EXPONENT_BIAS).clamp(0, 0xFFFF) as u16
}

/// Reads a finite magnitude (after its class), checking that it is in its one canonical form.
pub(super) fn decode_finite(negative: bool, reader: &mut Reader<'_>) -> Result<Binary> {
    let mut next = || reader.byte().map(|byte| if negative { !byte } else { byte });
    let exponent = i32::from(u16::from_be_bytes([next()?, next()?])) - EXPONENT_BIAS;
    let mut binary = Binary { exponent, fraction: 0, exact: false };
    for index in 0..MAX_GROUPS {
        let byte = next()?;
        binary.fraction |= u128::from(byte >> 1) << (121 - 7 * index);
        if byte & 1 == 0 {
            binary.exact = true;
            if binary.significant_bits().div_ceil(7).max(1) as usize != index + 1 {
                return Err(corrupt("number fraction not normalized"));
            }
            return Ok(binary);
        }
    }
    Ok(binary) // seventeen groups, each with `more` set: an inexact decimal
}

/// The double a key's magnitude names (it came from a double, so it is exact in 52 bits).
pub(super) fn to_f64(negative: bool, binary: &Binary) -> Result<f64> {
    let bits = binary.significant_bits();
    let scale = binary.exponent - 1 - bits as i32;
    // A double is below 2^1024 and a multiple of 2^-1074, with at most 52 fraction bits.
    if !binary.exact || bits > 52 || binary.exponent > 1024 || scale < -1074 {
        return Err(corrupt("not a double"));
    }
    let significand = (1u64 << bits) | binary.fraction_integer() as u64;
    let magnitude = significand as f64 * power_of_two(scale);
    Ok(if negative { -magnitude } else { magnitude })
}

/// The integer a key's magnitude names; `None` when it is not one or out of the int64 range.
pub(super) fn to_i64(negative: bool, binary: &Binary) -> Option<i64> {
    let bits = binary.significant_bits();
    let scale = u32::try_from(binary.exponent - 1 - bits as i32).ok()?;
    if !binary.exact || bits > 63 || bits + scale > 63 {
        return None;
    }
    let significand = (1u128 << bits) | binary.fraction_integer();
    let magnitude = i128::try_from(significand << scale).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// `2^exponent` as a double, `-1074 <= exponent <= 1023` (subnormals included).
fn power_of_two(exponent: i32) -> f64 {
    if exponent >= -1022 {
        f64::from_bits(((exponent + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (exponent + 1074))
    }
}
