//! Round trips: each message kind encodes and decodes back to itself through the public API
//! the server uses (`decode_frame`, `Request::parse`, `encode_reply`).

mod common;

use bson::{Document, doc};
use common::{insert_msg, raw};
use wire::{
    Compressor, Frame, Limits, Message, MsgFlags, OpCode, OpMsg, OpQuery, OpReply, QueryFlags, ReplyFlags, ReplyStream,
    Request, decode_frame, encode_reply,
};

fn parse(message: Vec<u8>) -> Request {
    let limits = Limits::default();
    let frame = Frame::from_message(message, &limits).expect("frame");
    Request::parse(&frame, &limits).expect("request")
}

/// Goal: an OP_MSG with a body and a document sequence survives encode/decode unchanged.
#[test]
fn op_msg_with_sequence_round_trips() {
    let original = insert_msg(3, 0);
    let request = parse(original.encode(7, 0).expect("encode"));
    assert_eq!(request.header.request_id, 7);
    assert_eq!(request.header.op_code, OpCode::Msg);
    assert_eq!(request.compressor, None);
    assert_eq!(request.message, Message::Msg(original));
    assert!(request.expects_reply());
}

/// Goal: a checksummed OP_MSG verifies and round trips; the flag is kept.
#[test]
fn op_msg_with_checksum_round_trips() {
    let original = insert_msg(2, MsgFlags::CHECKSUM_PRESENT);
    let request = parse(original.encode(1, 0).expect("encode"));
    let Message::Msg(parsed) = request.message else { panic!("not OP_MSG") };
    assert!(parsed.flags.checksum_present());
    assert_eq!(parsed, original);
}

/// Goal: moreToCome and exhaustAllowed are accepted; moreToCome means no reply.
#[test]
fn op_msg_more_to_come_expects_no_reply() {
    let original = insert_msg(1, MsgFlags::MORE_TO_COME | MsgFlags::EXHAUST_ALLOWED);
    let request = parse(original.encode(1, 0).expect("encode"));
    assert!(!request.expects_reply());
    let Message::Msg(parsed) = request.message else { panic!("not OP_MSG") };
    assert!(parsed.flags.exhaust_allowed());
}

/// Goal: document sequences merge into the command as arrays, in order.
#[test]
fn command_document_merges_sequences() {
    let command = insert_msg(2, 0).command_document().expect("merge");
    let expected = doc! {
        "insert": "users", "$db": "test",
        "documents": [ { "_id": 0, "name": "user0" }, { "_id": 1, "name": "user1" } ],
    };
    assert_eq!(command, expected);
}

/// Goal: a sequence named like a body field is refused when merging.
#[test]
fn command_document_refuses_duplicate_field() {
    let mut message = insert_msg(1, 0);
    message.body = raw(doc! { "insert": "users", "documents": [] });
    assert!(matches!(message.command_document(), Err(wire::WireError::DuplicateField(name)) if name == "documents"));
}

/// Goal: legacy OP_QUERY with and without a field selector parses back to itself.
#[test]
fn op_query_round_trips() {
    for selector in [None, Some(raw(doc! { "a": 1 }))] {
        let original = OpQuery {
            flags: QueryFlags(QueryFlags::SLAVE_OK),
            full_collection_name: "admin.$cmd".to_owned(),
            number_to_skip: 0,
            number_to_return: -1,
            query: raw(doc! { "isMaster": 1, "client": { "driver": { "name": "test" } } }),
            return_fields_selector: selector,
        };
        let request = parse(original.encode(42).expect("encode"));
        assert_eq!(request.header.op_code, OpCode::Query);
        let Message::Query(parsed) = request.message else { panic!("not OP_QUERY") };
        assert!(parsed.is_command());
        assert_eq!(parsed.database(), "admin");
        assert_eq!(parsed, original);
    }
}

/// Goal: a `$query`-wrapped command is unwrapped by `OpQuery::command`.
#[test]
fn op_query_command_unwraps_dollar_query() {
    let query = OpQuery {
        flags: QueryFlags::default(),
        full_collection_name: "admin.$cmd".to_owned(),
        number_to_skip: 0,
        number_to_return: -1,
        query: raw(doc! { "$query": { "ismaster": 1 }, "$readPreference": { "mode": "primary" } }),
        return_fields_selector: None,
    };
    let command = Document::try_from(query.command().expect("command")).expect("decode");
    assert_eq!(command, doc! { "ismaster": 1 });
}

/// Goal: OP_REPLY encodes and parses back with its counts.
#[test]
fn op_reply_round_trips() {
    let original = OpReply {
        flags: ReplyFlags(ReplyFlags::AWAIT_CAPABLE),
        cursor_id: 99,
        starting_from: 3,
        documents: vec![raw(doc! { "ok": 1.0 }), raw(doc! { "x": "y" })],
    };
    let limits = Limits::default();
    let frame = Frame::from_message(original.encode(5, 42).expect("encode"), &limits).expect("frame");
    assert_eq!(frame.header.op_code, OpCode::Reply);
    assert_eq!(frame.header.response_to, 42);
    assert_eq!(OpReply::parse(&frame, &limits).expect("parse"), original);
}

/// Goal: every compressor wraps and unwraps an OP_MSG; the request remembers the compressor.
#[test]
fn op_compressed_round_trips_with_every_compressor() {
    let original = insert_msg(50, MsgFlags::CHECKSUM_PRESENT);
    let plain = original.encode(11, 0).expect("encode");
    for compressor in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        let wrapped = wire::compression::compress(&plain, compressor).expect("compress");
        let request = parse(wrapped);
        assert_eq!(request.compressor, Some(compressor));
        assert_eq!(request.header.request_id, 11);
        assert_eq!(request.header.op_code, OpCode::Msg);
        assert_eq!(request.message, Message::Msg(original.clone()));
    }
}

/// Goal: an OP_QUERY handshake is answered with OP_REPLY carrying responseTo.
#[test]
fn reply_to_op_query_is_op_reply() {
    let query = OpQuery {
        flags: QueryFlags::default(),
        full_collection_name: "admin.$cmd".to_owned(),
        number_to_skip: 0,
        number_to_return: -1,
        query: raw(doc! { "isMaster": 1 }),
        return_fields_selector: None,
    };
    let request = parse(query.encode(77).expect("encode"));
    let body = raw(wire::ok_reply(doc! { "ismaster": true }));
    let bytes = encode_reply(&request, 1, "isMaster", body.clone(), ReplyStream::Last).expect("reply");
    let limits = Limits::default();
    let frame = Frame::from_message(bytes, &limits).expect("frame");
    assert_eq!(frame.header.op_code, OpCode::Reply);
    assert_eq!(frame.header.response_to, 77);
    assert_eq!(OpReply::parse(&frame, &limits).expect("parse").documents, vec![body]);
}

/// Goal: an OP_MSG reply keeps the request's checksum flag and compressor, except for
/// compression-exempt commands.
#[test]
fn reply_to_compressed_op_msg_is_compressed_unless_exempt() {
    let plain = insert_msg(1, MsgFlags::CHECKSUM_PRESENT).encode(9, 0).expect("encode");
    let request = parse(wire::compression::compress(&plain, Compressor::Zstd).expect("compress"));
    let body = raw(wire::ok_reply(doc! { "n": 1 }));
    let limits = Limits::default();

    let compressed = encode_reply(&request, 2, "insert", body.clone(), ReplyStream::Last).expect("reply");
    let frame = Frame::from_message(compressed, &limits).expect("frame");
    assert_eq!(frame.header.op_code, OpCode::Compressed);
    let reply = Request::parse(&frame, &limits).expect("reply parses");
    assert_eq!(reply.header.response_to, 9);
    let Message::Msg(reply) = reply.message else { panic!("not OP_MSG") };
    assert!(reply.flags.checksum_present());
    assert_eq!(reply.body, body);

    let exempt = encode_reply(&request, 3, "hello", body, ReplyStream::Last).expect("reply");
    let frame = Frame::from_message(exempt, &limits).expect("frame");
    assert_eq!(frame.header.op_code, OpCode::Msg);
}

/// Goal: the frame decoder returns None for every strict prefix of a message, then the whole
/// message, and leaves a following message in the buffer.
#[test]
fn decode_frame_is_incremental() {
    let limits = Limits::default();
    let first = insert_msg(2, 0).encode(1, 0).expect("encode");
    let second = OpMsg::new(raw(doc! { "ping": 1, "$db": "admin" })).encode(2, 0).expect("encode");
    for end in 0..first.len() {
        assert_eq!(decode_frame(&first[..end], &limits).expect("prefix is fine"), None, "prefix {end}");
    }
    let mut stream = first.clone();
    stream.extend_from_slice(&second);
    let (frame, consumed) = decode_frame(&stream, &limits).expect("ok").expect("whole");
    assert_eq!(consumed, first.len());
    assert_eq!(frame.as_bytes(), &first[..]);
    let (frame, consumed) = decode_frame(&stream[consumed..], &limits).expect("ok").expect("whole");
    assert_eq!(consumed, second.len());
    assert_eq!(frame.header.request_id, 2);
}

/// Goal: a document exactly at the 16 MiB limit is accepted in a sequence.
#[test]
fn document_at_size_limit_is_accepted() {
    let limits = Limits::default();
    let padding = "x".repeat(limits.max_document_size_bytes);
    let mut document = doc! { "_id": 1, "pad": padding.as_str() };
    let overshoot = document.to_vec().expect("encode").len() - limits.max_document_size_bytes;
    document.insert("pad", &padding[overshoot..]);
    let mut message = insert_msg(0, 0);
    message.sequences[0].documents.push(raw(document));
    assert_eq!(message.sequences[0].documents[0].as_bytes().len(), limits.max_document_size_bytes);
    let request = parse(message.encode(1, 0).expect("encode"));
    assert_eq!(request.message, Message::Msg(message));
}

/// Goal: moreToCome is set on a streamed reply only when the request allowed exhaust.
#[test]
fn streamed_reply_needs_exhaust_allowed() {
    let limits = Limits::default();
    let body = raw(wire::ok_reply(doc! { "cursor": { "id": 0i64 } }));
    for (request_flags, expect_more) in [(MsgFlags::EXHAUST_ALLOWED, true), (0, false)] {
        let request = parse(insert_msg(1, request_flags).encode(4, 0).expect("encode"));
        let bytes = encode_reply(&request, 5, "getMore", body.clone(), ReplyStream::MoreToCome).expect("reply");
        let frame = Frame::from_message(bytes, &limits).expect("frame");
        let parsed = OpMsg::parse(&frame, &limits).expect("parse");
        assert_eq!(parsed.flags.more_to_come(), expect_more);
    }
}
