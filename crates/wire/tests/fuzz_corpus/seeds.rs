//! The generated seeds of the `frame` corpus (`write_seeds` in `../fuzz_corpus.rs` writes
//! them), and the commands they carry: commands as drivers send them, OP_MSG with and without a
//! checksum, with a document sequence and with `moreToCome`, OP_QUERY, each compressor, and the
//! real driver messages of `tests/fixtures/`. The server's `command` seeds are built from these
//! too (`crates/server/tests/fuzz_corpus.rs` includes this file).

use std::path::Path;

use bson::{Binary, Bson, DateTime, Document, RawDocumentBuf, doc, spec::BinarySubtype};
use wire::{Compressor, MsgFlags, OpMsg, OpQuery, QueryFlags};

use super::bson_seeds::{decimal, named};
use super::replay::Seeds;

/// Commands a driver sends, in the order a session would, on collection `c` of database `fuzz`.
pub fn command_documents() -> Vec<Document> {
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

fn op_msg(command: &Document, flags: u32) -> OpMsg {
    let mut body = command.clone();
    body.insert("$db", "fuzz");
    OpMsg { flags: MsgFlags(flags), ..OpMsg::new(RawDocumentBuf::try_from(&body).expect("encodes")) }
}

/// Wire messages: OP_MSG with and without a checksum, with a document sequence and with
/// `moreToCome`, OP_QUERY, each compressor, two messages back to back, and the real driver
/// messages of `crates/wire/tests/fixtures/`.
pub fn frames() -> Seeds {
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
