//! Requests built by a real driver. Goal: Strata parses exactly what pymongo sends.
//! Method: `fixtures/pymongo/generate.py` (run by hand) saved pymongo 4's own OP_MSG bytes,
//! plain and compressed with snappy, zlib and zstd; each must frame, parse and merge into the
//! command pymongo was given; `generate_op_query.py` saved pymongo 3's OP_QUERY handshake.
//! (By hand, once: pymongo 4 decoded Strata's OP_MSG replies, plain and compressed with each
//! compressor, and pymongo 3 decoded its OP_REPLY.)

use bson::{DateTime, Document, doc, oid::ObjectId};
use wire::{Compressor, Limits, Message, OpCode, Request, decode_frame};

fn request(name: &str) -> Request {
    let path = format!("{}/tests/fixtures/pymongo/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let limits = Limits::default();
    let (frame, consumed) = decode_frame(&bytes, &limits).expect("frames").expect("whole");
    assert_eq!(consumed, bytes.len());
    Request::parse(&frame, &limits).expect("parses")
}

fn command(request: &Request) -> Document {
    let Message::Msg(message) = &request.message else { panic!("pymongo sends OP_MSG") };
    message.command_document().expect("merges")
}

fn inserted() -> Vec<Document> {
    vec![
        doc! {
            "_id": ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").expect("oid"),
            "name": "ada", "tags": ["x", "y"],
            "born": DateTime::builder().year(1815).month(12).day(10).build().expect("date"),
            "score": 1.5,
        },
        doc! { "_id": 2, "name": "grace", "nested": { "a": { "b": [1, 2, { "c": null }] } } },
    ]
}

#[test]
fn pymongo_hello() {
    let request = request("hello.bin");
    assert_eq!(request.header.op_code, OpCode::Msg);
    let command = command(&request);
    assert_eq!(command.get_i32("hello").ok(), Some(1));
    assert_eq!(command.get_str("$db").ok(), Some("test"));
    let offered: Vec<&str> =
        command.get_array("compression").expect("compression").iter().filter_map(|value| value.as_str()).collect();
    assert_eq!(
        wire::negotiate(offered, &wire::SUPPORTED_COMPRESSORS),
        [Compressor::Zstd, Compressor::Snappy, Compressor::Zlib]
    );
}

#[test]
fn pymongo_insert_uses_a_document_sequence() {
    let request = request("insert.bin");
    let Message::Msg(message) = &request.message else { panic!("OP_MSG") };
    let sequence = message.sequence("documents").expect("kind-1 section");
    assert_eq!(sequence.documents.len(), 2);
    let command = command(&request);
    assert_eq!(command.get_str("insert").ok(), Some("users"));
    let documents: Vec<Document> = command
        .get_array("documents")
        .expect("documents")
        .iter()
        .filter_map(|value| value.as_document().cloned())
        .collect();
    assert_eq!(documents, inserted());
}

#[test]
fn pymongo_compressed_inserts() {
    let plain = command(&request("insert.bin"));
    for (name, compressor) in [
        ("insert_snappy.bin", Compressor::Snappy),
        ("insert_zlib.bin", Compressor::Zlib),
        ("insert_zstd.bin", Compressor::Zstd),
    ] {
        let request = request(name);
        assert_eq!(request.compressor, Some(compressor), "{name}");
        let command = command(&request);
        assert_eq!(command.get_str("insert").ok(), Some("users"), "{name}");
        assert_eq!(command.get_array("documents").ok(), plain.get_array("documents").ok(), "{name}");
    }
}

#[test]
fn pymongo3_op_query_handshake() {
    let request = request("op_query_is_master.bin");
    assert_eq!(request.header.op_code, OpCode::Query);
    let Message::Query(query) = &request.message else { panic!("OP_QUERY") };
    assert!(query.is_command());
    assert_eq!(query.database(), "admin");
    assert_eq!(query.number_to_return, -1);
    let command = Document::try_from(query.command().expect("command")).expect("decodes");
    assert_eq!(command.get_i32("isMaster").ok(), Some(1));
    let reply = wire::encode_reply(
        &request,
        1,
        "isMaster",
        bson::RawDocumentBuf::try_from(&wire::ok_reply(doc! { "ismaster": true })).expect("encodes"),
        wire::ReplyStream::Last,
    )
    .expect("reply");
    assert_eq!(i32::from_le_bytes(reply[12..16].try_into().expect("4 bytes")), OpCode::Reply.as_i32());
    assert_eq!(i32::from_le_bytes(reply[8..12].try_into().expect("4 bytes")), request.header.request_id);
}
