//! MongoDB's hash of a value, the key of a `hashed` index (and of `$toHashedIndexKey`).
//!
//! The hash must be MongoDB's own, bit for bit: data moved between Strata and mongod (a dump
//! restored, a hashed shard key computed by a driver or `convertShardKeyToHashed`) agrees on it.
//! It is the first 8 bytes (little-endian) of the MD5 of: the seed (an `i32`, 0), then the value
//! fed recursively as
//!
//! ```text
//! canonical type : i32 le
//! [field name, NUL-terminated]       only for the elements of an embedded document or array
//! numbers        : i64 le            every numeric type squashed: truncated toward zero,
//!                                    NaN as 0, saturated at the ends of i64
//! documents,     : each element, then the terminating EOO element (type 0, no name, no value)
//! arrays
//! other types    : the element's value bytes as BSON lays them out
//! ```
//!
//! So `3`, `3L` and `3.7` hash alike (an equality on a hashed index re-checks the document),
//! as do a string and a symbol. Dates and timestamps share a canonical type here (45): MongoDB's
//! hasher predates the timestamp's own rank, and its values are frozen. The test vectors are
//! MongoDB's `hasher_test.cpp`.

use bson::Bson;
use md5::{Digest, Md5};

use crate::number::Numeric;

/// MongoDB's `BSONElementHasher::hash64` of a value with the default seed.
pub fn hash_value(value: &Bson) -> i64 {
    let mut hasher = Md5::new();
    hasher.update(0i32.to_le_bytes());
    feed(&mut hasher, None, value);
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// One element: its canonical type, its name (inside a document or array), its value.
fn feed(hasher: &mut Md5, name: Option<&str>, value: &Bson) {
    hasher.update(canonical_type(value).to_le_bytes());
    if let Some(name) = name {
        hasher.update(name.as_bytes());
        hasher.update([0]);
    }
    match value {
        Bson::Document(document) => feed_elements(hasher, document.iter().map(|(name, v)| (name.clone(), v))),
        Bson::Array(array) => feed_elements(hasher, array.iter().enumerate().map(|(i, v)| (i.to_string(), v))),
        Bson::JavaScriptCodeWithScope(code) => {
            hasher.update(code.code.as_bytes());
            hasher.update([0]);
            feed_elements(hasher, code.scope.iter().map(|(name, v)| (name.clone(), v)));
        }
        other => feed_scalar(hasher, other),
    }
}

/// The elements of an embedded document or array, then the EOO element that ends it (type 0,
/// no name, no value).
fn feed_elements<'v>(hasher: &mut Md5, elements: impl Iterator<Item = (String, &'v Bson)>) {
    for (name, value) in elements {
        feed(hasher, Some(&name), value);
    }
    hasher.update(0i32.to_le_bytes());
}

fn feed_scalar(hasher: &mut Md5, value: &Bson) {
    match value {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            hasher.update(squashed(value).to_le_bytes());
        }
        Bson::String(text) | Bson::Symbol(text) | Bson::JavaScriptCode(text) => feed_string(hasher, text),
        Bson::Binary(binary) => {
            hasher.update(length(binary.bytes.len()).to_le_bytes());
            hasher.update([u8::from(binary.subtype)]);
            hasher.update(&binary.bytes);
        }
        Bson::ObjectId(id) => hasher.update(id.bytes()),
        Bson::Boolean(flag) => hasher.update([u8::from(*flag)]),
        Bson::DateTime(date) => hasher.update(date.timestamp_millis().to_le_bytes()),
        Bson::Timestamp(ts) => hasher.update(((u64::from(ts.time) << 32) | u64::from(ts.increment)).to_le_bytes()),
        Bson::RegularExpression(regex) => {
            hasher.update(regex.pattern.as_str().as_bytes());
            hasher.update([0]);
            hasher.update(regex.options.as_str().as_bytes());
            hasher.update([0]);
        }
        Bson::DbPointer(pointer) => feed_db_pointer(hasher, pointer),
        // MinKey, MaxKey, null and undefined have no value bytes.
        _ => {}
    }
}

fn feed_string(hasher: &mut Md5, text: &str) {
    hasher.update(length(text.len() + 1).to_le_bytes());
    hasher.update(text.as_bytes());
    hasher.update([0]);
}

/// A DBPointer's value is its namespace (as a BSON string) and its ObjectId; the `bson` crate
/// keeps both private, so they are read back from its raw encoding.
fn feed_db_pointer(hasher: &mut Md5, pointer: &bson::DbPointer) {
    let wrapped = bson::doc! { "": Bson::DbPointer(pointer.clone()) };
    let Ok(bytes) = wrapped.to_vec() else { return };
    // int32 size, type byte, empty name (one NUL), then the value up to the final NUL.
    if let Some(value) = bytes.get(6..bytes.len().saturating_sub(1)) {
        hasher.update(value);
    }
}

fn length(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// MongoDB's canonical type ranks, as the hasher uses them.
fn canonical_type(value: &Bson) -> i32 {
    match value {
        Bson::MinKey => -1,
        Bson::Undefined => 0,
        Bson::Null => 5,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) | Bson::Timestamp(_) => 45,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// A number as the `i64` MongoDB hashes: truncated toward zero, NaN as 0, saturated.
fn squashed(value: &Bson) -> i64 {
    match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        // `as` truncates toward zero, maps NaN to 0 and saturates: exactly MongoDB's rule.
        Bson::Double(d) => *d as i64,
        Bson::Decimal128(d) => decimal_squashed(&Numeric::from_decimal128(d)),
        _ => 0,
    }
}

/// A decimal's integer part, saturated (NaN as 0), as for doubles.
fn decimal_squashed(number: &Numeric) -> i64 {
    match number {
        Numeric::NaN | Numeric::Zero => 0,
        Numeric::PositiveInfinity => i64::MAX,
        Numeric::NegativeInfinity => i64::MIN,
        Numeric::Finite { negative, exponent, digits } => {
            if *exponent <= 0 {
                return 0;
            }
            if *exponent > 19 {
                return if *negative { i64::MIN } else { i64::MAX };
            }
            let whole =
                (0..*exponent as usize).fold(0i128, |acc, i| acc * 10 + i128::from(*digits.get(i).unwrap_or(&0)));
            let signed = if *negative { -whole } else { whole };
            signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{Binary, Regex, Timestamp, doc, oid::ObjectId, spec::BinarySubtype};

    use super::*;

    fn regex(pattern: &str, options: &str) -> Regex {
        let cstring = |text: &str| bson::raw::CString::try_from(text).unwrap_or_else(|e| panic!("{e}"));
        Regex { pattern: cstring(pattern), options: cstring(options) }
    }

    fn oid(hex: &str) -> Bson {
        Bson::ObjectId(ObjectId::parse_str(hex).unwrap_or_else(|e| panic!("{e}")))
    }

    /// MongoDB's own test vectors (`src/mongo/db/hasher_test.cpp`): the hash is frozen there.
    #[test]
    fn matches_mongodb_test_vectors() {
        let cases: Vec<(Bson, i64)> = vec![
            (Bson::Int32(42), -944302157085130861),
            (Bson::Double(42.123), -944302157085130861),
            (Bson::Int64(42), -944302157085130861),
            (Bson::Int32(0), 4854801880128277513),
            (Bson::Double(f64::NAN), 4854801880128277513),
            (Bson::Int32(1), 5902408780260971510),
            (Bson::Double(1.987), 5902408780260971510),
            (Bson::Int32(-1), 1140205862565771219),
            (Bson::Double(-1.789), 1140205862565771219),
            (Bson::Int32(i32::MIN), 6165898260261354870),
            (Bson::Int32(i32::MAX), 1143184177162245883),
            (Bson::Double(f64::MAX), 921523596458303250),
            (Bson::Int64(i64::MAX), 921523596458303250),
            (Bson::Double(-f64::MAX), 4532067210535695462),
            (Bson::Int64(i64::MIN), 4532067210535695462),
            (Bson::MinKey, 7961148599568647290),
            (Bson::MaxKey, 5504842513779440750),
            (Bson::Undefined, 40158834000849533),
            (Bson::Null, 2338878944348059895),
            (Bson::String("abc".into()), 8478485326885698097),
            (Bson::Symbol("abc".into()), 8478485326885698097),
            (Bson::String(String::new()), 2049396243249673340),
            (Bson::Document(doc! {"a": "abc", "b": 123i64}), 4771603801758380216),
            (Bson::Document(doc! {}), 7980500913326740417),
            (Bson::Array(vec!["bar".into(), "baz".into(), "qux".into()]), -2938911267422831539),
            (Bson::Array(vec![]), 8849948234993459283),
            (
                Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: vec![0, 1, 2, 3, 4, 6] }),
                7252465090394235301,
            ),
            (
                Bson::Binary(Binary { subtype: BinarySubtype::UserDefined(0x80), bytes: vec![0, 1, 2, 3, 4, 6] }),
                5736670452907618262,
            ),
            (Bson::Binary(Binary { subtype: BinarySubtype::Uuid, bytes: (0..16).collect() }), 6084661258071355978),
            (oid("010203040506070809101112"), -5588663249627035708),
            (oid("000000000000000000000000"), -4293118519463489418),
            (Bson::Boolean(true), 6405873908747105701),
            (Bson::Boolean(false), 6289544573401934092),
            (Bson::DateTime(bson::DateTime::from_millis(0x5566778811223344)), 4476222765095560467),
            (Bson::Timestamp(Timestamp { time: 0x55667788, increment: 0x11223344 }), 4476222765095560467),
            (Bson::DateTime(bson::DateTime::from_millis(0)), -1178696894582842035),
            (Bson::Timestamp(Timestamp { time: 0, increment: 0 }), -1178696894582842035),
            (Bson::RegularExpression(regex("mongodb", "")), -7275792090268217043),
            (Bson::RegularExpression(regex(".*", "i")), 7095855029187981886),
            (Bson::JavaScriptCode("func f() { return 1; }".into()), 6861638109178014270),
            (
                Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                    code: "func f() { return 1; }".into(),
                    scope: doc! {"c": true},
                }),
                501342939894575968,
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(hash_value(&value), expected, "hash of {value:?}");
        }
    }

    /// Numbers squash alike at any depth (MongoDB's RecursiveSquashingIntsAndDoubles).
    #[test]
    fn nested_numbers_squash() {
        let a = Bson::Document(doc! {"a": 3, "b": [3.1, {"c": 3}]});
        let b = Bson::Document(doc! {"a": 3.1, "b": [3, {"c": 3.0}]});
        assert_eq!(hash_value(&a), hash_value(&b));
        assert_ne!(
            hash_value(&Bson::Document(doc! {"0": 0, "1": 1})),
            hash_value(&Bson::Array(vec![0.into(), 1.into()]))
        );
        let decimal: bson::Decimal128 = "42.9".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(hash_value(&Bson::Decimal128(decimal)), -944302157085130861);
    }
}
