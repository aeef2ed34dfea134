//! MongoDB's total order over BSON values (the "Comparison/Sort Order" of the manual).
//!
//! Types compare by canonical rank first: MinKey < Undefined < Null < numbers <
//! Symbol, String < Object < Array < BinData < ObjectId < Boolean < Date < Timestamp <
//! Regex < DBPointer < JavaScript < JavaScript with scope < MaxKey. Within a rank:
//!
//! - numbers by exact value across int32, int64, double, decimal128; NaN is the smallest
//!   number, NaN == NaN, -0 == 0 ([`crate::number`]);
//! - strings and symbols by their UTF-8 bytes (the simple collation);
//! - documents element by element: canonical type rank, then field name bytes, then value; a
//!   prefix is smaller;
//! - arrays element by element, a prefix smaller (MongoDB compares them as documents whose keys
//!   are "0", "1", …, which is the same thing);
//! - BinData by length, then subtype, then bytes; ObjectIds by bytes; false < true; dates as
//!   signed milliseconds; timestamps as unsigned (time, increment); regexes by pattern then
//!   options; DBPointers by namespace length, namespace, then id; code by its text, then scope.
//!
//! The order is total and consistent with equality: `compare_values(a, b) == Equal` exactly
//! when MongoDB treats `a` and `b` as equal in a comparison or an index.

use std::cmp::Ordering;

use bson::{Bson, Document};

use crate::number::Numeric;

/// The rank of strings (and symbols) in MongoDB's cross-type order.
pub const STRING_RANK: u8 = 16;

/// MongoDB's canonical type rank (its `canonicalizeBSONType` plus one, so MinKey fits a `u8`).
/// Values of different ranks compare by rank alone; all numbers share one rank, as do strings
/// and symbols, and null and missing fields.
pub fn canonical_type_rank(value: &Bson) -> u8 {
    match value {
        Bson::MinKey => 0,
        Bson::Undefined => 1,
        Bson::Null => 6,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 11,
        Bson::String(_) | Bson::Symbol(_) => STRING_RANK,
        Bson::Document(_) => 21,
        Bson::Array(_) => 26,
        Bson::Binary(_) => 31,
        Bson::ObjectId(_) => 36,
        Bson::Boolean(_) => 41,
        Bson::DateTime(_) => 46,
        Bson::Timestamp(_) => 48,
        Bson::RegularExpression(_) => 51,
        Bson::DbPointer(_) => 56,
        Bson::JavaScriptCode(_) => 61,
        Bson::JavaScriptCodeWithScope(_) => 66,
        Bson::MaxKey => 128,
    }
}

/// Compares two values in MongoDB's order (see the module header).
pub fn compare_values(a: &Bson, b: &Bson) -> Ordering {
    let by_rank = canonical_type_rank(a).cmp(&canonical_type_rank(b));
    if by_rank != Ordering::Equal {
        return by_rank;
    }
    match (a, b) {
        (Bson::String(x) | Bson::Symbol(x), Bson::String(y) | Bson::Symbol(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::Document(x), Bson::Document(y)) => compare_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => compare_arrays(x, y),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => (x.time, x.increment).cmp(&(y.time, y.increment)),
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .as_str()
            .as_bytes()
            .cmp(y.pattern.as_str().as_bytes())
            .then_with(|| x.options.as_str().as_bytes().cmp(y.options.as_str().as_bytes())),
        (Bson::DbPointer(x), Bson::DbPointer(y)) => compare_db_pointers(x, y),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => {
            x.code.as_bytes().cmp(y.code.as_bytes()).then_with(|| compare_documents(&x.scope, &y.scope))
        }
        _ if canonical_type_rank(a) == 11 => compare_numbers(a, b),
        // Same rank, no payload: MinKey, MaxKey, Null, Undefined.
        _ => Ordering::Equal,
    }
}

/// Whether MongoDB considers the two values equal (`compare_values(a, b) == Equal`).
pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    compare_values(a, b) == Ordering::Equal
}

/// Compares documents element by element: type rank, field name, then value.
pub fn compare_documents(a: &Document, b: &Document) -> Ordering {
    let mut left = a.iter();
    let mut right = b.iter();
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((left_key, left_value)), Some((right_key, right_value))) => {
                let order = canonical_type_rank(left_value)
                    .cmp(&canonical_type_rank(right_value))
                    .then_with(|| left_key.as_bytes().cmp(right_key.as_bytes()))
                    .then_with(|| compare_values(left_value, right_value));
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let order = compare_values(x, y);
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// Numbers by exact value. The common cases avoid building the decimal form.
fn compare_numbers(a: &Bson, b: &Bson) -> Ordering {
    match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => x.cmp(y),
        (Bson::Int32(x), Bson::Int64(y)) => i64::from(*x).cmp(y),
        (Bson::Int64(x), Bson::Int32(y)) => x.cmp(&i64::from(*y)),
        (Bson::Int64(x), Bson::Int64(y)) => x.cmp(y),
        (Bson::Double(x), Bson::Double(y)) => compare_doubles(*x, *y),
        (Bson::Int32(x), Bson::Double(y)) => compare_long_to_double(i64::from(*x), *y),
        (Bson::Int64(x), Bson::Double(y)) => compare_long_to_double(*x, *y),
        (Bson::Double(x), Bson::Int32(y)) => compare_long_to_double(i64::from(*y), *x).reverse(),
        (Bson::Double(x), Bson::Int64(y)) => compare_long_to_double(*y, *x).reverse(),
        _ => match (Numeric::from_bson(a), Numeric::from_bson(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            // Unreachable: both have the numeric rank. Equal keeps the order total.
            _ => Ordering::Equal,
        },
    }
}

/// Doubles with NaN smallest and equal to itself, and -0 == 0.
pub fn compare_doubles(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// Exact comparison of an int64 with a double, without rounding the integer to a double.
fn compare_long_to_double(x: i64, y: f64) -> Ordering {
    if y.is_nan() {
        return Ordering::Greater;
    }
    // 2^63 is exactly representable; every i64 is below it and at or above -2^63.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if y >= TWO_POW_63 {
        return Ordering::Less;
    }
    if y < -TWO_POW_63 {
        return Ordering::Greater;
    }
    let whole = y.trunc();
    // In range, so the cast is exact.
    let whole_integer = whole as i64;
    match x.cmp(&whole_integer) {
        Ordering::Equal => 0.0_f64.partial_cmp(&(y - whole)).unwrap_or(Ordering::Equal),
        other => other,
    }
}

/// DBPointer fields are private in the bson crate; its encoding holds them in order
/// (length-prefixed namespace, then the 12-byte id), and so compares as MongoDB does.
fn compare_db_pointers(x: &bson::DbPointer, y: &bson::DbPointer) -> Ordering {
    db_pointer_bytes(x).cmp(&db_pointer_bytes(y))
}

/// `int32 length ++ namespace ++ NUL ++ id`, compared length first (big-endian for memcmp).
fn db_pointer_bytes(pointer: &bson::DbPointer) -> Vec<u8> {
    let mut document = Document::new();
    document.insert("", Bson::DbPointer(pointer.clone()));
    let encoded = document.to_vec().unwrap_or_default();
    // Layout: doc length (4) ++ type (1) ++ "" NUL (1) ++ value ++ doc NUL (1).
    let value = encoded.get(6..encoded.len().saturating_sub(1)).unwrap_or_default();
    let mut key = Vec::with_capacity(value.len());
    if let Some(length) = value.get(0..4) {
        key.extend(length.iter().rev());
        key.extend_from_slice(value.get(4..).unwrap_or_default());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{Decimal128, doc};

    fn decimal(text: &str) -> Bson {
        Bson::Decimal128(text.parse::<Decimal128>().unwrap_or_else(|e| panic!("{text}: {e}")))
    }

    // Goal: the manual's cross-type order, one representative per rank, strictly increasing.
    #[test]
    fn cross_type_order() {
        let ladder = vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-5),
            Bson::String("a".into()),
            Bson::Document(doc! {"a": 1}),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1] }),
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-5)),
            Bson::Timestamp(bson::Timestamp { time: 1, increment: 0 }),
            Bson::RegularExpression(bson::Regex {
                pattern: "a".try_into().unwrap_or_else(|e| panic!("{e}")),
                options: "".try_into().unwrap_or_else(|e| panic!("{e}")),
            }),
            Bson::JavaScriptCode("x".into()),
            Bson::MaxKey,
        ];
        for pair in ladder.windows(2) {
            assert_eq!(compare_values(&pair[0], &pair[1]), Ordering::Less, "{pair:?}");
            assert_eq!(compare_values(&pair[1], &pair[0]), Ordering::Greater, "{pair:?}");
        }
    }

    // Goal: numbers compare by exact value whatever their type.
    #[test]
    fn numbers_across_types() {
        let equal = [
            (Bson::Int32(1), Bson::Double(1.0)),
            (Bson::Int64(1), decimal("1.000")),
            (Bson::Double(-0.0), Bson::Int32(0)),
            (Bson::Double(f64::NAN), decimal("NaN")),
            (Bson::Double(f64::INFINITY), decimal("Infinity")),
            (Bson::String("x".into()), Bson::Symbol("x".into())),
        ];
        for (a, b) in &equal {
            assert_eq!(compare_values(a, b), Ordering::Equal, "{a:?} {b:?}");
        }
        let less = [
            (Bson::Double(f64::NAN), Bson::Double(f64::NEG_INFINITY)),
            (Bson::Double(9007199254740992.0), Bson::Int64(9007199254740993)),
            (Bson::Int64(i64::MAX), Bson::Double(9223372036854775808.0)),
            (Bson::Double(-9223372036854775808.0), Bson::Int64(i64::MIN + 1)),
            (decimal("0.1"), Bson::Double(0.1)),
            (Bson::Double(0.3), decimal("0.3")),
            (Bson::Int32(2), Bson::Double(2.5)),
            (Bson::Double(-2.5), Bson::Int32(-2)),
            (decimal("-Infinity"), Bson::Int64(i64::MIN)),
            (decimal("1E+6000"), Bson::Double(f64::INFINITY)),
        ];
        for (a, b) in &less {
            assert_eq!(compare_values(a, b), Ordering::Less, "{a:?} {b:?}");
            assert_eq!(compare_values(b, a), Ordering::Greater, "{a:?} {b:?}");
        }
    }

    // Goal: documents compare by type, then field name, then value; arrays element-wise.
    #[test]
    fn documents_and_arrays() {
        let order = |a: Bson, b: Bson| compare_values(&a, &b);
        assert_eq!(order(Bson::Document(doc! {"a": 1}), Bson::Document(doc! {"a": 1, "b": 0})), Ordering::Less);
        assert_eq!(order(Bson::Document(doc! {"b": 1}), Bson::Document(doc! {"a": "x"})), Ordering::Less);
        assert_eq!(order(Bson::Document(doc! {"a": 2}), Bson::Document(doc! {"b": 1})), Ordering::Less);
        assert_eq!(order(Bson::Document(doc! {"a": 1}), Bson::Document(doc! {"a": 1.0})), Ordering::Equal);
        assert_eq!(order(Bson::Array(vec![]), Bson::Array(vec![Bson::MinKey])), Ordering::Less);
        assert_eq!(
            order(Bson::Array(vec![Bson::Int32(1), Bson::Int32(3)]), Bson::Array(vec![Bson::Int32(2)])),
            Ordering::Less
        );
        let short = bson::Binary { subtype: bson::spec::BinarySubtype::UserDefined(0x80), bytes: vec![9] };
        let long = bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0, 0] };
        assert_eq!(order(Bson::Binary(short), Bson::Binary(long)), Ordering::Less);
        assert_eq!(
            order(Bson::DateTime(bson::DateTime::from_millis(-1)), Bson::DateTime(bson::DateTime::from_millis(0))),
            Ordering::Less
        );
    }
}
