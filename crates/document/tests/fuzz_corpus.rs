//! Goal: every committed input of the `document` fuzz corpus still runs through
//! its body in `document::fuzzing` without a panic, on stable. Method, and what makes it
//! fail: `fuzz/replay.rs`, which every crate with a fuzz target includes.
//!
//! `cargo test --release -p document --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! generated seeds (`seed-*`) into the corpora.
//! The seeds: BSON documents of every type (alone and side by side), nested, with repeated names,
//! and index keys as the store writes them.

use bson::{
    Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, RawDocumentBuf, Timestamp, doc,
    oid::ObjectId, raw::cstr, spec::BinarySubtype,
};
use document::keycodec::{Direction, encode_key};

#[path = "../../../fuzz/bson_seeds.rs"]
#[allow(dead_code, reason = "each crate's seeds use some of the shared helpers")]
mod bson_seeds;
#[path = "../../../fuzz/replay.rs"]
mod replay;

use bson_seeds::{bytes, regex};
use replay::Seeds;

#[test]
fn document() {
    replay::replay("document", document::fuzzing::document);
}

/// Each target listed for this crate in `fuzz/replay.rs` is replayed above, and every target of
/// `fuzz/Cargo.toml` is listed there.
#[test]
fn every_fuzz_target_is_replayed() {
    replay::check_targets(env!("CARGO_PKG_NAME"), &["document"]);
}

/// Writes the generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files are kept).
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    replay::write_seeds("document", documents());
}

/// One value of every BSON type, and the awkward numbers.
fn values() -> Vec<(&'static str, Bson)> {
    let decimal = |bytes: [u8; 16]| Bson::Decimal128(Decimal128::from_bytes(bytes));
    vec![
        ("double", Bson::Double(1.5)),
        ("double-fraction", Bson::Double(0.1)),
        ("double-negative-zero", Bson::Double(-0.0)),
        ("double-nan", Bson::Double(f64::NAN)),
        ("double-infinity", Bson::Double(f64::INFINITY)),
        ("double-subnormal", Bson::Double(5e-324)),
        ("double-2p53", Bson::Double(9_007_199_254_740_992.0)),
        ("string", Bson::String("héllo\u{0}world".into())),
        ("document", Bson::Document(doc! { "x": 1, "y": { "z": [1, "two"] } })),
        ("array", Bson::Array(vec![Bson::Int32(1), Bson::Array(vec![]), Bson::Document(doc! { "a": 1 })])),
        ("binary", Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: vec![0, 1, 2] })),
        ("uuid", Bson::Binary(Binary { subtype: BinarySubtype::Uuid, bytes: vec![9; 16] })),
        ("undefined", Bson::Undefined),
        ("object-id", Bson::ObjectId(ObjectId::from_bytes([1; 12]))),
        ("boolean", Bson::Boolean(true)),
        ("date", Bson::DateTime(DateTime::from_millis(-1))),
        ("null", Bson::Null),
        ("regex", Bson::RegularExpression(regex("^a.b$", "imsx"))),
        ("db-pointer", bson::Bson::DbPointer(db_pointer())),
        ("code", Bson::JavaScriptCode("function () { return 1 }".into())),
        ("symbol", Bson::Symbol("sym".into())),
        (
            "code-with-scope",
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code: "x".into(), scope: doc! { "x": 1 } }),
        ),
        ("int32", Bson::Int32(i32::MIN)),
        ("timestamp", Bson::Timestamp(Timestamp { time: u32::MAX, increment: 1 })),
        ("int64", Bson::Int64(i64::MAX)),
        ("int64-2p53-plus-1", Bson::Int64(9_007_199_254_740_993)),
        ("decimal-one", decimal([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x30])),
        ("decimal-one-point-zero-zero", decimal([100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3c, 0x30])),
        ("decimal-negative-zero", decimal([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0xb0])),
        ("decimal-nan", decimal([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x7c])),
        ("decimal-infinity", decimal([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x78])),
        (
            "decimal-largest",
            decimal([0xff, 0xff, 0xff, 0xff, 0x63, 0x8e, 0x8d, 0x37, 0xc0, 0x87, 0xad, 0xbe, 0x09, 0xed, 0xff, 0x5f]),
        ),
        ("min-key", Bson::MinKey),
        ("max-key", Bson::MaxKey),
    ]
}

/// A DBPointer, which bson builds only from bytes: `{p: DBPointer("db.coll", ObjectId(...))}`.
fn db_pointer() -> bson::DbPointer {
    let mut element = vec![0x0c, b'p', 0];
    element.extend(8_i32.to_le_bytes());
    element.extend(b"db.coll\0");
    element.extend([3; 12]);
    let mut raw = (i32::try_from(element.len()).expect("short") + 5).to_le_bytes().to_vec();
    raw.extend(element);
    raw.push(0);
    match Document::from_reader(raw.as_slice()).expect("decodes").remove("p") {
        Some(Bson::DbPointer(pointer)) => pointer,
        other => panic!("not a DBPointer: {other:?}"),
    }
}

/// BSON documents of every type (alone and side by side), nested, with repeated names, and
/// index keys as the store writes them.
fn documents() -> Seeds {
    let mut seeds = Seeds::new();
    let all = values();
    for (name, value) in &all {
        seeds.push((format!("value-{name}"), bytes(&doc! { "_id": 1, "a": value.clone(), "b": [value.clone(), 1] })));
    }
    let mut every = Document::new();
    for (name, value) in &all {
        every.insert(*name, value.clone());
    }
    seeds.push(("every-type".into(), bytes(&every)));
    let mut deep = doc! { "leaf": 1 };
    for level in 0..99 {
        deep = if level % 2 == 0 {
            doc! { "a": deep }
        } else {
            doc! { "a": [deep] }
        };
    }
    seeds.push(("depth-100".into(), bytes(&deep)));
    seeds.push(("depth-101".into(), bytes(&doc! { "a": deep })));
    seeds.push((
        "arrays-of-documents".into(),
        bytes(&doc! { "a": [{ "b": 1 }, { "b": [2, { "c": 3 }] }, 4], "x": { "y": [[1], [2]] } }),
    ));
    seeds.push(("empty".into(), bytes(&Document::new())));
    let mut repeated = RawDocumentBuf::new();
    repeated.append(cstr!("a"), 1);
    repeated.append(cstr!("b"), "x");
    repeated.append(cstr!("a"), 2);
    seeds.push(("repeated-name".into(), repeated.into_bytes()));
    for (index, pair) in all.windows(2).enumerate().step_by(3) {
        let (directions, shape) = ([Direction::Ascending, Direction::Descending], 1 | 8);
        let key = encode_key(&[(&pair[0].1, directions[0]), (&pair[1].1, directions[1])]);
        let mut input = vec![shape, u8::try_from(key.types.len()).expect("short types")];
        input.extend(&key.types);
        input.extend(&key.order);
        seeds.push((format!("key-{index:02}-{}-{}", pair[0].0, pair[1].0), input));
    }
    seeds
}
