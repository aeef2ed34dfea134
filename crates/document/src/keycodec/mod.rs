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
//! body(number)   = class:u8 [exponent:u16be fraction-groups]    see `number`: the binary
//!                  value, every number type alike; class 1 NaN, 2 -inf, 3 negative, 4 zero,
//!                  5 positive, 6 +inf; negatives inverted (larger magnitude smaller)
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
//! Numbers: the exact binary value (`number`), so int64 beyond 2^53, every double and every
//! decimal128 keep their exact place: integers take 5 to 13 bytes with the rank, doubles at most
//! 12, decimals at most 21.
//!
//! Key format 2 (2026-11-27). Format 1 wrote numbers as their decimal expansions (a double with
//! a binary fraction took up to 32 bytes); `docstore` rebuilds a format-1 collection's trees
//! when it opens one.

mod number;

use std::cmp::Ordering;

use bson::{Binary, Bson, Decimal128, Document, Regex, Timestamp, oid::ObjectId, spec::BinarySubtype};

use crate::error::{Error, Result};
use crate::order::{STRING_RANK, canonical_type_rank};
use crate::scan::Scalar;
use number::{CLASS_NAN, CLASS_NEGATIVE, CLASS_NEGATIVE_INFINITY, CLASS_POSITIVE, CLASS_POSITIVE_INFINITY, CLASS_ZERO};

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
        Bson::Int32(i) => {
            number::encode_integer(i64::from(*i), &mut key.order);
            key.types.push(TAG_INT32);
        }
        Bson::Int64(i) => {
            number::encode_integer(*i, &mut key.order);
            key.types.push(TAG_INT64);
        }
        Bson::Double(d) => {
            number::encode_double(*d, &mut key.order);
            let negative_zero = *d == 0.0 && d.is_sign_negative();
            key.types.push(if negative_zero { TAG_DOUBLE_NEGATIVE_ZERO } else { TAG_DOUBLE });
        }
        Bson::Decimal128(d) => {
            number::encode_decimal(d, &mut key.order);
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
    let finite = match class {
        CLASS_NEGATIVE | CLASS_POSITIVE => Some(number::decode_finite(class == CLASS_NEGATIVE, reader)?),
        CLASS_NAN | CLASS_NEGATIVE_INFINITY | CLASS_ZERO | CLASS_POSITIVE_INFINITY => None,
        _ => return Err(corrupt("bad number class")),
    };
    let negative = class == CLASS_NEGATIVE;
    let integer = || match (class, &finite) {
        (CLASS_ZERO, _) => Some(0),
        (_, Some(binary)) => number::to_i64(negative, binary),
        _ => None,
    };
    match types.byte()? {
        TAG_INT32 => {
            integer().and_then(|i| i32::try_from(i).ok()).map(Bson::Int32).ok_or_else(|| corrupt("not an int32"))
        }
        TAG_INT64 => integer().map(Bson::Int64).ok_or_else(|| corrupt("not an int64")),
        TAG_DOUBLE => Ok(Bson::Double(match (class, &finite) {
            (_, Some(binary)) => number::to_f64(negative, binary)?,
            (CLASS_NAN, _) => f64::NAN,
            (CLASS_NEGATIVE_INFINITY, _) => f64::NEG_INFINITY,
            (CLASS_POSITIVE_INFINITY, _) => f64::INFINITY,
            _ => 0.0,
        })),
        TAG_DOUBLE_NEGATIVE_ZERO if class == CLASS_ZERO => Ok(Bson::Double(-0.0)),
        TAG_DECIMAL128 => Ok(Bson::Decimal128(Decimal128::from_bytes(types.array()?))),
        _ => Err(corrupt("bad number tag")),
    }
}
