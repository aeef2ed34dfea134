//! Index keys: BSON values as bytes whose `memcmp` order is MongoDB's order.
//!
//! A key is one or more components, each a value with a [`Direction`]. It encodes to two byte
//! strings:
//!
//! - `order`: the components' bodies, concatenated. `memcmp` over `order` equals the
//!   lexicographic [`compare_values`](crate::compare_values) order over the components, and two
//!   keys whose values compare equal (`1`, `1.0`, `NumberDecimal("1.00")`) have identical
//!   `order` bytes. Each body is self-delimiting, so components concatenate and a caller can
//!   append a tie-breaker (the `_id`) after them.
//! - `types`: what `order` forgets, so that [`decode_key`] returns the original values: one tag
//!   per number (int32, int64, double, -0.0, or decimal128 followed by its 16 bytes) and per
//!   string (string or symbol), in the order the decoder meets them. Keep it after any
//!   tie-breaker (or in the tree's value): it must not decide the order.
//!
//! Component body layout (ascending; a descending component is the same bytes inverted,
//! `b -> 0xFF - b`, still self-delimiting):
//!
//! ```text
//! component   = rank:u8 body            rank = canonical_type_rank(value)
//! body(null, undefined, minKey, maxKey) = (empty)
//! body(number)   = class:u8 [exponent:u16be digit-pairs]   class 1 NaN, 2 -inf, 3 negative,
//!                                                          4 zero, 5 positive, 6 +inf
//!                  value = ±0.d1d2…dn × 10^exponent, exponent stored + 0x8000; digits in pairs
//!                  p = 10·d(2i-1) + d(2i) (last pair padded with 0) as 2p+1, the last as 2p;
//!                  for negatives the exponent and pairs are inverted (larger magnitude smaller)
//! body(string, symbol, code) = bytes with 00 -> 00 FF, then 00 01
//! body(document) = { (rank+1):u8 name-bytes 00 body(value) }* 00
//! body(array)    = { (rank+1):u8 body(value) }* 00
//! body(binData)  = length:u32be subtype:u8 bytes
//! body(objectId) = 12 bytes          body(bool) = 00 | 01
//! body(date)     = millis:i64be with the sign bit flipped
//! body(timestamp)= (time << 32 | increment):u64be
//! body(regex)    = pattern 00 options 00     (cstrings: no NUL inside)
//! body(dbPointer)= namespace-length:u32be namespace id:12
//! body(codeWithScope) = body(string code) body(document scope)
//! ```
//!
//! Numbers: the digits are the exact decimal expansion ([`Numeric`]), so int64 beyond 2^53,
//! every double and every decimal128 keep their exact place. The cost is size: a double with a
//! binary fraction has as many decimal digits as fraction bits (0.1 takes 28 digit-pair bytes,
//! a subnormal up to ~380). Integers, integral doubles and short decimals are 4–13 bytes.

use std::cmp::Ordering;

use bson::{Binary, Bson, Decimal128, Document, Regex, Timestamp, oid::ObjectId, spec::BinarySubtype};

use crate::error::{Error, Result};
use crate::number::Numeric;
use crate::order::{STRING_RANK, canonical_type_rank};
use crate::scan::Scalar;

/// The sort direction of one key component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Ascending,
    Descending,
}

impl Direction {
    /// Applies the direction to an ascending order.
    pub fn apply(self, ordering: Ordering) -> Ordering {
        match self {
            Direction::Ascending => ordering,
            Direction::Descending => ordering.reverse(),
        }
    }
}

/// An encoded key: see the module header for what each part holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EncodedKey {
    pub order: Vec<u8>,
    pub types: Vec<u8>,
}

const CLASS_NAN: u8 = 1;
const CLASS_NEGATIVE_INFINITY: u8 = 2;
const CLASS_NEGATIVE: u8 = 3;
const CLASS_ZERO: u8 = 4;
const CLASS_POSITIVE: u8 = 5;
const CLASS_POSITIVE_INFINITY: u8 = 6;

const TAG_INT32: u8 = 1;
const TAG_INT64: u8 = 2;
const TAG_DOUBLE: u8 = 3;
const TAG_DOUBLE_NEGATIVE_ZERO: u8 = 4;
const TAG_DECIMAL128: u8 = 5;
const TAG_STRING: u8 = 1;
const TAG_SYMBOL: u8 = 2;

const EXPONENT_BIAS: i32 = 0x8000;
/// Deepest nesting decoded; deeper bytes are corrupt (BSON documents nest at most ~100 levels).
const MAX_DECODE_DEPTH: usize = 200;

/// Builds a key component by component.
#[derive(Debug, Default)]
pub struct KeyEncoder {
    key: EncodedKey,
}

impl KeyEncoder {
    pub fn new() -> KeyEncoder {
        // Room for a short string component and the 12-byte `_id` an index entry appends, so a
        // typical key is built and extended without growing (it grew 8 -> 16 -> 32 -> ...); and
        // in `types`, for the 4-byte length an index entry's value puts before them.
        KeyEncoder { key: EncodedKey { order: Vec::with_capacity(48), types: Vec::with_capacity(8) } }
    }

    /// Appends one component.
    pub fn push(&mut self, value: &Bson, direction: Direction) {
        self.push_component(canonical_type_rank(value), direction, |key| encode_body(value, key));
    }

    /// `push` for a value read from a document's bytes: a string is encoded from the borrowed
    /// bytes, with no owned copy made first.
    pub fn push_scalar(&mut self, value: Scalar<'_>, direction: Direction) {
        let value = match value {
            Scalar::String(text) => {
                return self.push_component(STRING_RANK, direction, |key| encode_tagged_string(text, TAG_STRING, key));
            }
            Scalar::Double(d) => Bson::Double(d),
            Scalar::ObjectId(bytes) => Bson::ObjectId(ObjectId::from_bytes(bytes)),
            Scalar::Boolean(b) => Bson::Boolean(b),
            Scalar::DateTime(millis) => Bson::DateTime(bson::DateTime::from_millis(millis)),
            Scalar::Null => Bson::Null,
            Scalar::Int32(i) => Bson::Int32(i),
            Scalar::Int64(i) => Bson::Int64(i),
        };
        self.push(&value, direction);
    }

    fn push_component(&mut self, rank: u8, direction: Direction, body: impl FnOnce(&mut EncodedKey)) {
        let start = self.key.order.len();
        self.key.order.push(rank);
        body(&mut self.key);
        if direction == Direction::Descending {
            for byte in &mut self.key.order[start..] {
                *byte = !*byte;
            }
        }
    }

    pub fn finish(self) -> EncodedKey {
        self.key
    }
}

/// Encodes a whole key.
pub fn encode_key(components: &[(&Bson, Direction)]) -> EncodedKey {
    let mut encoder = KeyEncoder::new();
    for (value, direction) in components {
        encoder.push(value, *direction);
    }
    encoder.finish()
}

/// The `order` bytes of one ascending value (for bounds and tests).
pub fn encode_value(value: &Bson) -> Vec<u8> {
    encode_key(&[(value, Direction::Ascending)]).order
}

fn encode_body(value: &Bson, key: &mut EncodedKey) {
    match value {
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined => {}
        Bson::Int32(i) => encode_integer(i64::from(*i), TAG_INT32, key),
        Bson::Int64(i) => encode_integer(*i, TAG_INT64, key),
        Bson::Double(d) => encode_double(*d, key),
        Bson::Decimal128(d) => {
            encode_numeric(&Numeric::from_decimal128(d), &mut key.order);
            key.types.push(TAG_DECIMAL128);
            key.types.extend_from_slice(&d.bytes());
        }
        Bson::String(s) => encode_tagged_string(s, TAG_STRING, key),
        Bson::Symbol(s) => encode_tagged_string(s, TAG_SYMBOL, key),
        Bson::JavaScriptCode(s) => encode_string(s.as_bytes(), &mut key.order),
        Bson::Document(document) => encode_document(document, key),
        Bson::Array(array) => {
            for element in array {
                key.order.push(canonical_type_rank(element) + 1);
                encode_body(element, key);
            }
            key.order.push(0);
        }
        Bson::Binary(binary) => {
            key.order.extend_from_slice(&(binary.bytes.len() as u32).to_be_bytes());
            key.order.push(u8::from(binary.subtype));
            key.order.extend_from_slice(&binary.bytes);
        }
        Bson::ObjectId(id) => key.order.extend_from_slice(&id.bytes()),
        Bson::Boolean(b) => key.order.push(u8::from(*b)),
        Bson::DateTime(date) => {
            let flipped = (date.timestamp_millis() as u64) ^ (1 << 63);
            key.order.extend_from_slice(&flipped.to_be_bytes());
        }
        Bson::Timestamp(t) => {
            let packed = (u64::from(t.time) << 32) | u64::from(t.increment);
            key.order.extend_from_slice(&packed.to_be_bytes());
        }
        Bson::RegularExpression(regex) => {
            key.order.extend_from_slice(regex.pattern.as_str().as_bytes());
            key.order.push(0);
            key.order.extend_from_slice(regex.options.as_str().as_bytes());
            key.order.push(0);
        }
        Bson::DbPointer(pointer) => encode_db_pointer(pointer, &mut key.order),
        Bson::JavaScriptCodeWithScope(code) => {
            encode_string(code.code.as_bytes(), &mut key.order);
            encode_document(&code.scope, key);
        }
    }
}

fn encode_document(document: &Document, key: &mut EncodedKey) {
    for (name, element) in document {
        key.order.push(canonical_type_rank(element) + 1);
        key.order.extend_from_slice(name.as_bytes());
        key.order.push(0);
        encode_body(element, key);
    }
    key.order.push(0);
}

fn encode_tagged_string(text: &str, tag: u8, key: &mut EncodedKey) {
    encode_string(text.as_bytes(), &mut key.order);
    key.types.push(tag);
}

/// NUL is escaped as 00 FF and the end is 00 01, so a prefix sorts first.
fn encode_string(bytes: &[u8], out: &mut Vec<u8>) {
    for &byte in bytes {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 1]);
}

fn encode_db_pointer(pointer: &bson::DbPointer, out: &mut Vec<u8>) {
    // The bson crate hides DbPointer's fields; its BSON encoding holds them in key order.
    let mut document = Document::new();
    document.insert("", Bson::DbPointer(pointer.clone()));
    let encoded = document.to_vec().unwrap_or_default();
    let value = encoded.get(6..encoded.len().saturating_sub(1)).unwrap_or_default();
    let (length, rest) = value.split_at(value.len().min(4));
    let length = u32::from_le_bytes(length.try_into().unwrap_or([0; 4]));
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(rest);
}

fn encode_integer(value: i64, tag: u8, key: &mut EncodedKey) {
    encode_magnitude(value < 0, value.unsigned_abs(), &mut key.order);
    key.types.push(tag);
}

fn encode_double(value: f64, key: &mut EncodedKey) {
    let tag = if value == 0.0 && value.is_sign_negative() { TAG_DOUBLE_NEGATIVE_ZERO } else { TAG_DOUBLE };
    // Integral doubles below 2^63 take the integer path: same bytes, no formatting.
    if value.fract() == 0.0 && value.abs() < 9_223_372_036_854_775_808.0 {
        encode_magnitude(value < 0.0, value.abs() as u64, &mut key.order);
    } else {
        encode_numeric(&Numeric::from_f64(value), &mut key.order);
    }
    key.types.push(tag);
}

/// An integer's body without building a [`Numeric`]: same bytes as `encode_numeric`.
fn encode_magnitude(negative: bool, magnitude: u64, out: &mut Vec<u8>) {
    if magnitude == 0 {
        out.push(CLASS_ZERO);
        return;
    }
    let mut buffer = [0u8; 20];
    let mut length = 0;
    let mut rest = magnitude;
    while rest > 0 {
        buffer[length] = (rest % 10) as u8;
        rest /= 10;
        length += 1;
    }
    buffer[..length].reverse();
    let exponent = length as i32;
    let significant = buffer[..length].iter().rposition(|&d| d != 0).map_or(0, |last| last + 1);
    encode_finite(negative, exponent, &buffer[..significant], out);
}

fn encode_numeric(value: &Numeric, out: &mut Vec<u8>) {
    match value {
        Numeric::NaN => out.push(CLASS_NAN),
        Numeric::NegativeInfinity => out.push(CLASS_NEGATIVE_INFINITY),
        Numeric::Zero => out.push(CLASS_ZERO),
        Numeric::PositiveInfinity => out.push(CLASS_POSITIVE_INFINITY),
        Numeric::Finite { negative, exponent, digits } => {
            encode_finite(*negative, *exponent, digits, out);
        }
    }
}

fn encode_finite(negative: bool, exponent: i32, digits: &[u8], out: &mut Vec<u8>) {
    out.push(if negative { CLASS_NEGATIVE } else { CLASS_POSITIVE });
    let start = out.len();
    // Decimal128 exponents stay within ±6200, doubles within ±330: always in range.
    let biased = (exponent + EXPONENT_BIAS).clamp(0, 0xFFFF) as u16;
    out.extend_from_slice(&biased.to_be_bytes());
    let pair_count = digits.len().div_ceil(2);
    for (index, pair) in digits.chunks(2).enumerate() {
        let high = pair.first().copied().unwrap_or(0);
        let low = pair.get(1).copied().unwrap_or(0);
        let centimal = high * 10 + low;
        let last = index + 1 == pair_count;
        out.push(if last { centimal * 2 } else { centimal * 2 + 1 });
    }
    if negative {
        for byte in &mut out[start..] {
            *byte = !*byte;
        }
    }
}

/// Decodes a whole key: `order` must hold exactly `directions.len()` components.
pub fn decode_key(order: &[u8], types: &[u8], directions: &[Direction]) -> Result<Vec<Bson>> {
    let (values, consumed) = decode_key_prefix(order, types, directions)?;
    if consumed != order.len() {
        return Err(corrupt("trailing bytes after the last component"));
    }
    Ok(values)
}

/// Decodes `directions.len()` components from the front of `order`; returns them and the
/// number of `order` bytes they took (what follows is the caller's, e.g. an encoded `_id`).
pub fn decode_key_prefix(order: &[u8], types: &[u8], directions: &[Direction]) -> Result<(Vec<Bson>, usize)> {
    let mut types_reader = Reader { bytes: types, position: 0, inverted: false };
    let mut position = 0;
    let mut values = Vec::with_capacity(directions.len());
    for direction in directions {
        let mut reader = Reader { bytes: order, position, inverted: *direction == Direction::Descending };
        let rank = reader.byte()?;
        values.push(decode_body(rank, &mut reader, &mut types_reader, 0)?);
        position = reader.position;
    }
    Ok((values, position))
}

/// Reads bytes, undoing a descending component's inversion.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    inverted: bool,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8> {
        let byte = *self.bytes.get(self.position).ok_or_else(|| corrupt("key ends early"))?;
        self.position += 1;
        Ok(if self.inverted { !byte } else { byte })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        for slot in &mut out {
            *slot = self.byte()?;
        }
        Ok(out)
    }

    fn bytes(&mut self, count: usize) -> Result<Vec<u8>> {
        (0..count).map(|_| self.byte()).collect()
    }

    /// Bytes up to a 00 terminator (cstrings: field names, regex parts).
    fn cstring(&mut self) -> Result<String> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                0 => break,
                byte => out.push(byte),
            }
        }
        String::from_utf8(out).map_err(|_| corrupt("name is not UTF-8"))
    }

    /// An escaped string (00 FF is NUL, 00 01 ends).
    fn escaped_string(&mut self) -> Result<String> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                0 => match self.byte()? {
                    0xFF => out.push(0),
                    1 => break,
                    _ => return Err(corrupt("bad string escape")),
                },
                byte => out.push(byte),
            }
        }
        String::from_utf8(out).map_err(|_| corrupt("string is not UTF-8"))
    }
}

fn corrupt(what: &str) -> Error {
    Error::CorruptKey(what.to_string())
}

fn decode_body(rank: u8, reader: &mut Reader<'_>, types: &mut Reader<'_>, depth: usize) -> Result<Bson> {
    if depth > MAX_DECODE_DEPTH {
        return Err(corrupt("nested too deeply"));
    }
    Ok(match rank {
        0 => Bson::MinKey,
        1 => Bson::Undefined,
        6 => Bson::Null,
        11 => decode_number(reader, types)?,
        16 => {
            let text = reader.escaped_string()?;
            match types.byte()? {
                TAG_STRING => Bson::String(text),
                TAG_SYMBOL => Bson::Symbol(text),
                _ => return Err(corrupt("bad string tag")),
            }
        }
        21 => Bson::Document(decode_document(reader, types, depth)?),
        26 => {
            let mut array = Vec::new();
            loop {
                match reader.byte()? {
                    0 => break,
                    element_rank => {
                        array.push(decode_body(element_rank - 1, reader, types, depth + 1)?);
                    }
                }
            }
            Bson::Array(array)
        }
        31 => {
            let length = u32::from_be_bytes(reader.array()?) as usize;
            let subtype = BinarySubtype::from(reader.byte()?);
            if length > reader.bytes.len() {
                return Err(corrupt("binary length past the end"));
            }
            Bson::Binary(Binary { subtype, bytes: reader.bytes(length)? })
        }
        36 => Bson::ObjectId(ObjectId::from_bytes(reader.array()?)),
        41 => Bson::Boolean(reader.byte()? != 0),
        46 => {
            let millis = (u64::from_be_bytes(reader.array()?) ^ (1 << 63)) as i64;
            Bson::DateTime(bson::DateTime::from_millis(millis))
        }
        48 => {
            let packed = u64::from_be_bytes(reader.array()?);
            Bson::Timestamp(Timestamp { time: (packed >> 32) as u32, increment: packed as u32 })
        }
        51 => decode_regex(reader)?,
        56 => decode_db_pointer(reader)?,
        61 => Bson::JavaScriptCode(reader.escaped_string()?),
        66 => {
            let code = reader.escaped_string()?;
            let scope = decode_document(reader, types, depth)?;
            Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope { code, scope })
        }
        128 => Bson::MaxKey,
        _ => return Err(corrupt("unknown type rank")),
    })
}

fn decode_document(reader: &mut Reader<'_>, types: &mut Reader<'_>, depth: usize) -> Result<Document> {
    let mut document = Document::new();
    loop {
        match reader.byte()? {
            0 => return Ok(document),
            element_rank => {
                let name = reader.cstring()?;
                let value = decode_body(element_rank - 1, reader, types, depth + 1)?;
                document.insert(name, value);
            }
        }
    }
}

fn decode_regex(reader: &mut Reader<'_>) -> Result<Bson> {
    let pattern = reader.cstring()?;
    let options = reader.cstring()?;
    let regex = Regex {
        pattern: pattern.try_into().map_err(|_| corrupt("regex pattern"))?,
        options: options.try_into().map_err(|_| corrupt("regex options"))?,
    };
    Ok(Bson::RegularExpression(regex))
}

fn decode_db_pointer(reader: &mut Reader<'_>) -> Result<Bson> {
    let length = u32::from_be_bytes(reader.array()?);
    if length as usize > reader.bytes.len() || length == 0 {
        return Err(corrupt("dbPointer length"));
    }
    // Rebuild the BSON element and let the bson crate parse it (its fields are private).
    let mut element = Vec::new();
    element.extend_from_slice(&length.to_le_bytes());
    element.extend(reader.bytes(length as usize + 12)?);
    let mut raw = Vec::with_capacity(element.len() + 7);
    raw.extend_from_slice(&((element.len() + 7) as i32).to_le_bytes());
    raw.push(0x0C);
    raw.push(0);
    raw.extend(element);
    raw.push(0);
    let document = Document::from_reader(raw.as_slice()).map_err(|_| corrupt("dbPointer"))?;
    document.get("").cloned().ok_or_else(|| corrupt("dbPointer"))
}

fn decode_number(reader: &mut Reader<'_>, types: &mut Reader<'_>) -> Result<Bson> {
    let class = reader.byte()?;
    let numeric = match class {
        CLASS_NAN => Numeric::NaN,
        CLASS_NEGATIVE_INFINITY => Numeric::NegativeInfinity,
        CLASS_ZERO => Numeric::Zero,
        CLASS_POSITIVE_INFINITY => Numeric::PositiveInfinity,
        CLASS_NEGATIVE | CLASS_POSITIVE => decode_finite(class == CLASS_NEGATIVE, reader)?,
        _ => return Err(corrupt("bad number class")),
    };
    let tag = types.byte()?;
    match tag {
        TAG_INT32 => numeric_to_i64(&numeric)
            .and_then(|i| i32::try_from(i).ok())
            .map(Bson::Int32)
            .ok_or_else(|| corrupt("int32 out of range")),
        TAG_INT64 => numeric_to_i64(&numeric).map(Bson::Int64).ok_or_else(|| corrupt("int64 out of range")),
        TAG_DOUBLE => Ok(Bson::Double(numeric_to_f64(&numeric))),
        TAG_DOUBLE_NEGATIVE_ZERO => Ok(Bson::Double(-0.0)),
        TAG_DECIMAL128 => Ok(Bson::Decimal128(Decimal128::from_bytes(types.array()?))),
        _ => Err(corrupt("bad number tag")),
    }
}

fn decode_finite(negative: bool, reader: &mut Reader<'_>) -> Result<Numeric> {
    let flip = |byte: u8| if negative { !byte } else { byte };
    let exponent_bytes = reader.array::<2>()?;
    let biased = u16::from_be_bytes([flip(exponent_bytes[0]), flip(exponent_bytes[1])]);
    let exponent = i32::from(biased) - EXPONENT_BIAS;
    let mut digits = Vec::new();
    loop {
        let byte = flip(reader.byte()?);
        let centimal = byte / 2;
        if centimal > 99 {
            return Err(corrupt("bad digit pair"));
        }
        digits.push(centimal / 10);
        digits.push(centimal % 10);
        if byte % 2 == 0 {
            break;
        }
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.first().is_none_or(|&d| d == 0) {
        return Err(corrupt("number digits not normalized"));
    }
    Ok(Numeric::Finite { negative, exponent, digits })
}

fn numeric_to_i64(value: &Numeric) -> Option<i64> {
    match value {
        Numeric::Zero => Some(0),
        Numeric::Finite { negative, exponent, digits } => {
            let zeros = usize::try_from(*exponent).ok()?.checked_sub(digits.len())?;
            let mut magnitude: i128 = 0;
            for &digit in digits.iter().chain(std::iter::repeat_n(&0, zeros)) {
                magnitude = magnitude.checked_mul(10)?.checked_add(i128::from(digit))?;
            }
            i64::try_from(if *negative { -magnitude } else { magnitude }).ok()
        }
        _ => None,
    }
}

/// The double with this exact value (it came from a double, so parsing is exact).
fn numeric_to_f64(value: &Numeric) -> f64 {
    match value {
        Numeric::NaN => f64::NAN,
        Numeric::NegativeInfinity => f64::NEG_INFINITY,
        Numeric::PositiveInfinity => f64::INFINITY,
        Numeric::Zero => 0.0,
        Numeric::Finite { negative, exponent, digits } => {
            let text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
            let sign = if *negative { "-" } else { "" };
            format!("{sign}0.{text}e{exponent}").parse().unwrap_or(f64::NAN)
        }
    }
}
