//! The generated seeds of the fuzz corpora (`write_seeds` writes them): small, real inputs for
//! each target, from which the fuzzers mutate. Commands as drivers send them, filters with every
//! query operator, updates with every update operator and pipeline stage, BSON of every type,
//! index keys, and node blocks the engine really wrote. `sasl`'s corpus predates this file and
//! is not generated.

use std::path::Path;
use std::sync::Arc;

use bson::{
    Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, RawDocumentBuf, Regex, Timestamp, doc,
    oid::ObjectId, raw::cstr, spec::BinarySubtype,
};
use document::keycodec::{Direction, encode_key};
use wire::{Compressor, MsgFlags, OpMsg, OpQuery, QueryFlags};

type Seeds = Vec<(String, Vec<u8>)>;

/// Every generated target's seeds.
pub fn all() -> Vec<(&'static str, Seeds)> {
    vec![
        ("frame", frames()),
        ("command", commands()),
        ("document", documents()),
        ("filter", filters()),
        ("update", updates()),
        ("node", nodes()),
    ]
}

fn bytes(document: &Document) -> Vec<u8> {
    RawDocumentBuf::try_from(document).expect("a seed encodes").into_bytes()
}

/// A decimal128 of `coefficient` × 10^`exponent`.
fn decimal(coefficient: u64, exponent: i32) -> Decimal128 {
    let high = u64::try_from(exponent + 6176).expect("an exponent in range") << 49;
    Decimal128::from_bytes([coefficient.to_le_bytes(), high.to_le_bytes()].concat().try_into().expect("16 bytes"))
}

fn regex(pattern: &str, options: &str) -> Regex {
    let cstring = |text: &str| text.to_owned().try_into().expect("no NUL");
    Regex { pattern: cstring(pattern), options: cstring(options) }
}

fn named(prefix: &str, index: usize, document: &Document) -> String {
    let first = document.keys().next().map_or("empty", String::as_str).trim_start_matches('$');
    let first: String = first.chars().filter(char::is_ascii_alphanumeric).take(24).collect();
    format!("{prefix}-{index:02}-{first}")
}

/// Commands a driver sends, in the order a session would, on collection `c` of database `fuzz`.
fn command_documents() -> Vec<Document> {
    vec![
        doc! {
            "hello": 1,
            "client": { "driver": { "name": "pymongo", "version": "4.6" } },
            "compression": ["zstd", "snappy"],
        },
        doc! { "isMaster": 1 },
        doc! { "ping": 1 },
        doc! { "buildInfo": 1 },
        doc! { "create": "c", "validator": { "a": { "$type": "number" } }, "validationAction": "warn" },
        doc! { "create": "capped", "capped": true, "size": 4096, "max": 10 },
        doc! { "insert": "c", "documents": [
            { "_id": 1, "a": 1, "b": "x", "c": [1, 2, 3], "d": { "e": 5 } },
            { "_id": 2, "a": [{ "b": 1 }, { "b": 2 }], "s": "hello", "dt": DateTime::from_millis(1_600_000_000_000) },
            { "_id": 3, "a": 2.5, "n": Bson::Null, "dec": decimal(5, -1) },
        ], "ordered": false },
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "a": 1 }, "name": "a_1" },
            { "key": { "b": -1, "a": 1 }, "name": "b_-1_a_1", "unique": true, "sparse": true },
            { "key": { "d.e": 1 }, "name": "d.e_1", "partialFilterExpression": { "d.e": { "$gt": 1 } } },
            { "key": { "dt": 1 }, "name": "ttl", "expireAfterSeconds": 3600 },
        ] },
        doc! {
            "find": "c", "filter": { "a": { "$gte": 1 } }, "sort": { "b": -1 }, "projection": { "a": 1, "_id": 0 },
            "limit": 2, "batchSize": 1,
        },
        doc! { "find": "c", "filter": { "a.b": { "$in": [1, 2] } }, "hint": "a_1", "skip": 1 },
        doc! { "getMore": 1_i64, "collection": "c", "batchSize": 10 },
        doc! { "killCursors": "c", "cursors": [1_i64] },
        doc! { "count": "c", "query": { "a": { "$exists": true } } },
        doc! { "distinct": "c", "key": "a", "query": {} },
        doc! { "update": "c", "updates": [
            { "q": { "_id": 1 }, "u": { "$set": { "b": "y" }, "$inc": { "a": 1 } } },
            { "q": { "a": { "$gt": 100 } }, "u": { "$setOnInsert": { "new": true } }, "upsert": true },
            { "q": {}, "u": [{ "$set": { "z": { "$add": ["$a", 1] } } }], "multi": true },
            { "q": { "c": 2 }, "u": { "$set": { "c.$[x]": 0 } }, "arrayFilters": [{ "x": { "$gt": 1 } }] },
        ] },
        doc! {
            "findAndModify": "c", "query": { "_id": 2 }, "update": { "$push": { "list": 1 } },
            "new": true, "upsert": true,
        },
        doc! { "findAndModify": "c", "query": { "_id": 3 }, "remove": true },
        doc! { "aggregate": "c", "pipeline": [
            { "$match": { "a": { "$exists": true } } },
            { "$group": { "_id": "$b", "n": { "$sum": 1 }, "avg": { "$avg": "$a" } } },
            { "$sort": { "n": -1 } },
            { "$limit": 5 },
        ], "cursor": {} },
        doc! { "aggregate": "c", "pipeline": [
            { "$unwind": { "path": "$c", "includeArrayIndex": "i" } },
            { "$lookup": { "from": "c", "localField": "c", "foreignField": "a", "as": "joined" } },
            { "$project": { "c": 1, "count": { "$size": "$joined" } } },
            { "$facet": {
                "all": [{ "$count": "n" }],
                "buckets": [{ "$bucketAuto": { "groupBy": "$c", "buckets": 2 } }],
            } },
        ], "cursor": { "batchSize": 1 } },
        doc! {
            "aggregate": 1,
            "pipeline": [{ "$documents": [{ "x": 1 }, { "x": 2 }] }, { "$addFields": { "y": "$x" } }],
            "cursor": {},
        },
        doc! { "aggregate": "c", "pipeline": [{ "$match": {} }, { "$out": "copy" }], "cursor": {} },
        doc! { "explain": { "find": "c", "filter": { "a": 1 } }, "verbosity": "executionStats" },
        doc! {
            "delete": "c",
            "deletes": [{ "q": { "a": { "$lt": 0 } }, "limit": 0 }, { "q": { "_id": 2 }, "limit": 1 }],
        },
        doc! { "listIndexes": "c" },
        doc! { "listCollections": 1, "filter": { "name": "c" }, "nameOnly": true },
        doc! { "listDatabases": 1 },
        doc! { "collStats": "c" },
        doc! { "dbStats": 1 },
        doc! { "validate": "c", "full": true },
        doc! { "collMod": "c", "changeStreamPreAndPostImages": { "enabled": true } },
        doc! { "renameCollection": "fuzz.copy", "to": "fuzz.copy2", "dropTarget": true },
        doc! { "dropIndexes": "c", "index": "a_1" },
        doc! { "serverStatus": 1 },
        doc! { "getParameter": "*" },
        doc! { "connectionStatus": 1, "showPrivileges": true },
        doc! { "endSessions": [{ "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] } }] },
        doc! {
            "insert": "c",
            "documents": [{ "_id": 10 }],
            "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![2; 16] } },
            "txnNumber": 1_i64,
        },
        doc! { "drop": "capped" },
        doc! { "dropDatabase": 1 },
    ]
}

fn commands() -> Seeds {
    let mut seeds: Seeds = command_documents()
        .iter()
        .enumerate()
        .map(|(index, command)| {
            let mut input = vec![1];
            input.extend(bytes(command));
            (named("doc", index, command), input)
        })
        .collect();
    for (name, frame) in frames().into_iter().take(6) {
        let mut input = vec![0];
        input.extend(frame);
        seeds.push((format!("wire-{name}"), input));
    }
    seeds
}

fn op_msg(command: &Document, flags: u32) -> OpMsg {
    let mut body = command.clone();
    body.insert("$db", "fuzz");
    OpMsg { flags: MsgFlags(flags), ..OpMsg::new(RawDocumentBuf::try_from(&body).expect("encodes")) }
}

/// Wire messages: OP_MSG with and without a checksum, with a document sequence and with
/// `moreToCome`, OP_QUERY, each compressor, two messages back to back, and the real driver
/// messages of `crates/wire/tests/fixtures/`.
fn frames() -> Seeds {
    let mut seeds = Seeds::new();
    let hello = op_msg(&doc! { "hello": 1 }, 0).encode(1, 0).expect("encodes");
    seeds.push(("msg-hello".into(), hello.clone()));
    for (index, command) in command_documents().iter().enumerate().step_by(4) {
        seeds.push((named("msg", index, command), op_msg(command, 0).encode(2, 0).expect("encodes")));
    }
    let checksummed = op_msg(&doc! { "find": "c", "filter": { "a": 1 } }, MsgFlags::CHECKSUM_PRESENT);
    seeds.push(("msg-checksum".into(), checksummed.encode(3, 0).expect("encodes")));
    let mut insert = op_msg(&doc! { "insert": "c", "ordered": true }, MsgFlags::MORE_TO_COME);
    insert.sequences.push(wire::DocumentSequence {
        identifier: "documents".into(),
        documents: vec![
            RawDocumentBuf::try_from(&doc! { "_id": 1, "x": "y" }).expect("encodes"),
            RawDocumentBuf::try_from(&doc! { "_id": 2 }).expect("encodes"),
        ],
    });
    let insert = insert.encode(4, 0).expect("encodes");
    seeds.push(("msg-sequence-more-to-come".into(), insert.clone()));
    let query = OpQuery {
        flags: QueryFlags(QueryFlags::SLAVE_OK),
        full_collection_name: "admin.$cmd".into(),
        number_to_skip: 0,
        number_to_return: -1,
        query: RawDocumentBuf::try_from(
            &doc! { "$query": { "isMaster": 1 }, "$readPreference": { "mode": "secondaryPreferred" } },
        )
        .expect("encodes"),
        return_fields_selector: Some(RawDocumentBuf::try_from(&doc! { "ok": 1 }).expect("encodes")),
    };
    seeds.push(("query-is-master".into(), query.encode(5).expect("encodes")));
    for compressor in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        let compressed = wire::compression::compress(&insert, compressor).expect("compresses");
        seeds.push((format!("compressed-{compressor:?}").to_lowercase(), compressed));
    }
    seeds.push(("two-messages".into(), [hello, insert].concat()));
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wire/tests/fixtures");
    for entry in std::fs::read_dir(fixtures).expect("the wire fixtures are there").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|extension| extension == "bin") {
            let name = path.file_stem().expect("a name").to_string_lossy().into_owned();
            seeds.push((format!("pymongo-{name}"), std::fs::read(&path).expect("a fixture reads")));
        }
    }
    seeds
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

/// Filters with every query operator, then documents to match them against.
fn filters() -> Seeds {
    let filters = vec![
        doc! { "a": 1 },
        doc! { "a": { "$eq": 1 }, "b": "x" },
        doc! { "a": { "$gt": 1, "$lte": 10 } },
        doc! { "a": { "$gte": DateTime::from_millis(0) } },
        doc! { "a": { "$lt": "m" } },
        doc! { "a": { "$ne": Bson::Null } },
        doc! { "a": { "$in": [1, "two", Bson::Null, regex("^h", "")] } },
        doc! { "a": { "$nin": [[], {}] } },
        doc! { "a": { "$exists": false } },
        doc! { "a": { "$type": "string" }, "b": { "$type": [1, "long", "decimal", "number"] } },
        doc! { "s": { "$regex": "^H.*D$", "$options": "im" } },
        doc! { "s": regex("wor", "s") },
        doc! { "s": { "$not": regex("x", "") } },
        doc! { "a": { "$mod": [3, 1] } },
        doc! { "c": { "$size": 3 } },
        doc! { "c": { "$all": [1, 2] } },
        doc! { "a": { "$all": [{ "$elemMatch": { "b": { "$gte": 1 } } }] } },
        doc! { "a": { "$elemMatch": { "b": 1, "c": { "$exists": false } } } },
        doc! { "c": { "$elemMatch": { "$gt": 1, "$lt": 3 } } },
        doc! { "a": { "$not": { "$gt": 1 } } },
        doc! { "$and": [{ "a": 1 }, { "b": { "$ne": "y" } }] },
        doc! { "$or": [{ "a": 1 }, { "d.e": 5 }, { "a.0.b": 1 }] },
        doc! { "$nor": [{ "a": 2 }, { "n": { "$exists": true } }] },
        doc! { "$expr": { "$gt": ["$a", { "$add": [1, { "$size": { "$ifNull": ["$c", []] } }] }] } },
        doc! { "$expr": { "$and": [
            { "$eq": [{ "$toLower": "$s" }, "hello, world"] },
            { "$regexMatch": { "input": "$s", "regex": "o" } },
            { "$in": [2, { "$map": { "input": "$c", "in": { "$multiply": ["$$this", 2] } } }] },
            { "$lt": [{ "$dateToString": { "date": "$dt", "format": "%Y" } }, "3000"] },
        ] } },
        doc! { "$expr": { "$cond": [
            { "$isArray": "$a" },
            { "$gt": [{ "$reduce": { "input": "$a", "initialValue": 0, "in": { "$add": ["$$value", 1] } } }, 1] },
            false,
        ] } },
        doc! { "$expr": { "$switch": {
            "branches": [{ "case": { "$eq": [{ "$type": "$a" }, "int"] }, "then": true }],
            "default": { "$toBool": { "$mod": [{ "$toLong": "$big" }, 2] } },
        } } },
        doc! { "$jsonSchema": {
            "bsonType": "object",
            "required": ["_id"],
            "properties": {
                "a": { "bsonType": ["int", "array"], "minimum": 0, "items": { "type": "object" }, "maxItems": 5 },
                "s": { "type": "string", "pattern": "^H", "minLength": 1, "maxLength": 50 },
                "e": { "enum": [1, "x"] },
            },
            "additionalProperties": true,
        } },
        doc! { "$alwaysTrue": 1, "$comment": "every document" },
        doc! { "$alwaysFalse": 1 },
        doc! { "$where": "this.a > 1" },
        doc! { "ref": { "$ref": "c", "$id": 1, "$db": "fuzz" } },
        doc! { "d.f.g": { "$gte": 2 }, "a.b": { "$in": [[2, 3], 1] } },
        doc! { "big": { "$gt": 9_007_199_254_740_992.0 }, "dbl": { "$lte": decimal(15, -1) } },
        doc! { "nan": f64::NAN, "inf": { "$lt": 0 } },
        doc! { "min": { "$lt": Bson::MaxKey }, "max": { "$gt": Bson::MinKey } },
    ];
    let extra = doc! {
        "_id": 9, "a": [1, [2, 3]], "s": "HELLO\nWORLD", "ref": { "$ref": "c", "$id": 1, "$db": "fuzz" }, "e": "x",
    };
    let mut seeds = Seeds::new();
    for (index, filter) in filters.iter().enumerate() {
        let mut input = bytes(filter);
        if index % 3 == 0 {
            input.extend(bytes(&extra));
        }
        seeds.push((named("filter", index, filter), input));
    }
    seeds.push((
        "projection".into(),
        bytes(&doc! { "a": 1, "c": { "$slice": [1, 1] }, "d.e": 1, "x": { "$add": ["$a", 1] } }),
    ));
    seeds.push(("projection-elem-match".into(), bytes(&doc! { "a": { "$elemMatch": { "b": 1 } }, "_id": 0 })));
    seeds.push(("sort".into(), bytes(&doc! { "a": -1, "d.e": 1, "_id": 1 })));
    seeds
}

/// Updates with every update operator, replacements and pipelines, on their own (then applied
/// to fixed documents) or with a target and array filters.
fn updates() -> Seeds {
    let updates = vec![
        doc! { "$set": { "a": 2, "d.e": { "x": 1 }, "new.deep.path": [] } },
        doc! { "$unset": { "b": "", "d.e": 1 } },
        doc! { "$inc": { "a": 1, "big": 1, "dbl": -0.5 } },
        doc! { "$mul": { "a": 2, "small": 2_i64, "dec": decimal(3, 0) } },
        doc! { "$min": { "a": 0, "dt": DateTime::from_millis(0) }, "$max": { "b": "z" } },
        doc! { "$rename": { "b": "bb", "d.e": "e" } },
        doc! { "$currentDate": { "now": true, "ts": { "$type": "timestamp" }, "date": { "$type": "date" } } },
        doc! { "$setOnInsert": { "created": 1 }, "$set": { "a": 5 } },
        doc! { "$push": { "c": 4 } },
        doc! { "$push": { "c": { "$each": [5, 6, 0], "$position": 1, "$slice": -3, "$sort": 1 } } },
        doc! { "$push": { "list": { "$each": [{ "k": 2 }, { "k": 1 }], "$sort": { "k": -1 } } } },
        doc! { "$addToSet": { "c": 1, "tags": { "$each": ["a", "b", "a"] } } },
        doc! { "$pop": { "c": -1, "a": 1 } },
        doc! { "$pull": { "c": { "$gte": 2 }, "d.f": { "g": 1 } } },
        doc! { "$pullAll": { "c": [1, 3] } },
        doc! { "$bit": { "a": { "and": 5 }, "big": { "or": 1_i64 }, "small": { "xor": 3 } } },
        doc! { "$set": { "c.$": 9 } },
        doc! { "$set": { "c.$[]": 0, "d.f.$[].g": 7 } },
        doc! { "$inc": { "d.f.$[x].g": 10 } },
        doc! { "$set": { "a.5": 1, "c.10": 1 } },
        doc! { "a": 1, "b": { "c": [1, 2] } },
        doc! { "_id": 2, "changed": true },
        doc! {},
        doc! {
            "0": { "$set": { "total": { "$sum": ["$a", 1] }, "s": { "$concat": ["$b", "!"] } } },
            "1": { "$unset": "d" },
        },
        doc! { "0": { "$project": { "a": 1, "len": { "$size": { "$ifNull": ["$c", []] } } } } },
        doc! { "0": { "$replaceWith": { "$mergeObjects": ["$d", { "_id": "$_id" }] } } },
        doc! {
            "0": { "$replaceRoot": { "newRoot": { "_id": "$_id", "x": "$$NOW" } } },
            "1": { "$addFields": { "y": { "$literal": "$x" } } },
        },
    ];
    let target = doc! { "_id": 1, "a": 1, "b": "x", "c": [1, 2, 3], "d": { "e": 5, "f": [{ "g": 1 }, { "g": 2 }] } };
    let mut seeds = Seeds::new();
    for (index, update) in updates.iter().enumerate() {
        seeds.push((named("update", index, update), bytes(update)));
        if update.keys().any(|key| key.starts_with('$')) && index % 2 == 0 {
            let mut input = bytes(update);
            input.extend(bytes(&target));
            if index == 18 {
                input.extend(bytes(&doc! { "x.g": { "$gt": 1 } }));
            }
            seeds.push((format!("{}-on-target", named("update", index, update)), input));
        }
    }
    seeds
}

/// Nodes of every shape from `storage::fuzzing::seed_nodes`, and blocks a real engine wrote:
/// leaves and internal nodes of two trees of a small node size, after a checkpoint.
fn nodes() -> Seeds {
    let mut seeds = storage::fuzzing::seed_nodes();
    let fs = Arc::new(storage::io::SimFs::new());
    let dir = Path::new("/db");
    let options = storage::Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 4,
        flush_mode: storage::FlushMode::Inline,
        ..storage::Options::default()
    };
    let engine = storage::Engine::open_with(fs.clone(), dir, options).expect("the engine opens");
    let documents = engine.create_tree("documents").expect("a tree");
    let counters = engine.create_tree("counters").expect("a tree");
    for batch in 0..20u32 {
        let mut transaction = engine.begin();
        for i in 0..20u32 {
            let n = batch * 20 + i;
            transaction.put(
                documents,
                format!("key-{:06}", n.wrapping_mul(2_654_435_761) % 100_000),
                vec![b'v'; (n % 40) as usize],
            );
            transaction.update(counters, format!("c{}", n % 7), 1_i64.to_le_bytes().to_vec());
        }
        if batch % 5 == 4 {
            transaction.delete_range(documents, b"key-01".to_vec(), Some(b"key-02".to_vec()));
            transaction.delete(counters, b"c3".to_vec());
        }
        transaction.commit(storage::Durability::Periodic).expect("commits");
    }
    engine.checkpoint().expect("checkpoints");
    engine.close().expect("closes");
    let file = storage::io::FileSystem::open(fs.as_ref(), &dir.join("data.strata"), storage::io::OpenMode::Existing)
        .expect("the data file opens");
    let len = file.len().expect("a length");
    let mut data = vec![0; usize::try_from(len).expect("small")];
    file.read_exact_at(&mut data, 0).expect("reads");
    seeds.push(("engine-header-slot".into(), [&[7][..], &data[..4096]].concat()));
    let mut blocks = 0;
    for offset in (8192..data.len()).step_by(4096) {
        let block = &data[offset..];
        if !block.starts_with(b"SBLK") {
            continue;
        }
        let payload_len = u32::from_le_bytes(block[16..20].try_into().expect("four bytes")) as usize;
        let block = &block[..20 + payload_len];
        let node_id = &block[8..16];
        let mode: &[u8] = if u64::from_le_bytes(node_id.try_into().expect("eight bytes")) == 0 { &[8] } else { &[2] };
        let input = if mode == [8] { [mode, &block[20..]].concat() } else { [mode, block].concat() };
        seeds.push((format!("engine-block-{blocks:02}"), input));
        if mode == [2] && blocks < 6 {
            seeds.push((format!("engine-node-{blocks:02}"), [&[0][..], node_id, &block[20..]].concat()));
        }
        blocks += 1;
    }
    assert!(blocks >= 4, "the engine wrote {blocks} blocks");
    seeds
}
