//! The malformed-message corpus: each case is a message broken in one way that a hostile or
//! buggy client could send. Goal: every case yields its specific `WireError` from the decoder
//! layer that should catch it; none panics, none allocates beyond the limits.
//! Method: build a valid message with the public encoders, then break one field.

mod common;

use bson::doc;
use common::{fix_length, insert_msg, nested, raw, set_length};
use wire::{Compressor, Frame, Limits, MsgFlags, OpCode, OpMsg, OpQuery, QueryFlags, Request, WireError, decode_frame};

/// Run a whole message through the server's path: frame, then request.
fn decode(message: &[u8]) -> Result<Request, WireError> {
    let limits = Limits::default();
    match decode_frame(message, &limits)? {
        Some((frame, consumed)) => {
            assert_eq!(consumed, message.len(), "test message must be exactly one frame");
            Request::parse(&frame, &limits)
        }
        None => panic!("test message is incomplete"),
    }
}

fn ping() -> Vec<u8> {
    OpMsg::new(raw(doc! { "ping": 1, "$db": "admin" })).encode(1, 0).expect("encode")
}

// ---- framing ----

#[test]
fn declared_length_below_header_is_rejected_at_four_bytes() {
    for length in [-1i32, 0, 4, 15] {
        let bytes = length.to_le_bytes();
        let error = decode_frame(&bytes, &Limits::default()).expect_err("short length");
        assert_eq!(error, WireError::MessageTooShort { length: i64::from(length) });
    }
}

#[test]
fn declared_length_above_limit_is_rejected_before_buffering() {
    let bytes = 48_000_001i32.to_le_bytes();
    let error = decode_frame(&bytes, &Limits::default()).expect_err("huge length");
    assert!(matches!(error, WireError::MessageTooLarge { length: 48_000_001, max: 48_000_000 }));
    let error = decode_frame(&i32::MAX.to_le_bytes(), &Limits::default()).expect_err("max length");
    assert!(matches!(error, WireError::MessageTooLarge { .. }));
}

#[test]
fn truncated_frame_is_incomplete_not_an_error() {
    let message = ping();
    let partial = &message[..message.len() - 1];
    assert_eq!(decode_frame(partial, &Limits::default()), Ok(None));
}

#[test]
fn length_lying_short_breaks_the_body() {
    let mut message = ping();
    let short = message.len() as i32 - 3;
    set_length(&mut message, short);
    let error = decode(&message[..short as usize]).expect_err("body cut");
    assert!(matches!(error, WireError::InvalidBson { .. } | WireError::Truncated { .. }), "{error:?}");
}

#[test]
fn unknown_opcode_is_rejected_with_the_header() {
    let mut message = ping();
    message[12..16].copy_from_slice(&9999i32.to_le_bytes());
    assert_eq!(decode_frame(&message[..16], &Limits::default()), Err(WireError::UnknownOpCode(9999)));
}

#[test]
fn legacy_opcodes_are_unsupported() {
    for op_code in [OpCode::Insert, OpCode::Update, OpCode::Delete, OpCode::GetMore, OpCode::KillCursors, OpCode::Reply]
    {
        let mut message = ping();
        message[12..16].copy_from_slice(&op_code.as_i32().to_le_bytes());
        assert_eq!(decode(&message), Err(WireError::UnsupportedOpCode(op_code)));
    }
}

// ---- OP_MSG ----

#[test]
fn unknown_required_flag_bit_is_rejected() {
    for bit in [2, 3, 7, 15] {
        let message = insert_msg(1, 1 << bit).encode(1, 0).expect("encode");
        assert_eq!(decode(&message), Err(WireError::UnknownRequiredFlags { bits: 1 << bit }));
    }
}

#[test]
fn unknown_optional_flag_bit_is_ignored() {
    let message = insert_msg(1, 1 << 20).encode(1, 0).expect("encode");
    assert!(decode(&message).is_ok());
}

#[test]
fn bad_checksum_is_rejected() {
    let mut message = insert_msg(1, MsgFlags::CHECKSUM_PRESENT).encode(1, 0).expect("encode");
    let last = message.len() - 1;
    message[last] ^= 0xFF;
    assert!(matches!(decode(&message), Err(WireError::ChecksumMismatch { .. })));
}

#[test]
fn corrupted_byte_under_checksum_is_rejected() {
    let mut message = insert_msg(1, MsgFlags::CHECKSUM_PRESENT).encode(1, 0).expect("encode");
    message[30] ^= 0x01;
    assert!(matches!(decode(&message), Err(WireError::ChecksumMismatch { .. })));
}

#[test]
fn checksum_flag_without_room_for_checksum_is_rejected() {
    // header | flagBits=checksumPresent | 2 bytes: too short for a checksum
    let mut message = vec![0u8; 16];
    message[12..16].copy_from_slice(&2013i32.to_le_bytes());
    message.extend_from_slice(&MsgFlags::CHECKSUM_PRESENT.to_le_bytes());
    message.extend_from_slice(&[0, 0]);
    fix_length(&mut message);
    assert_eq!(decode(&message), Err(WireError::Truncated { what: "OP_MSG checksum" }));
}

#[test]
fn missing_body_is_rejected() {
    let mut message = insert_msg(1, 0);
    message.sequences[0].identifier = "documents".to_owned();
    let bytes = message.encode(1, 0).expect("encode");
    // Drop the kind-0 section: flagBits at 16..20, kind 0 at 20, body follows.
    let body_length = message.body.as_bytes().len();
    let mut broken = bytes[..20].to_vec();
    broken.extend_from_slice(&bytes[21 + body_length..]);
    fix_length(&mut broken);
    assert_eq!(decode(&broken), Err(WireError::MissingBody));
}

#[test]
fn flags_only_message_has_no_body() {
    let mut message = vec![0u8; 16];
    message[12..16].copy_from_slice(&2013i32.to_le_bytes());
    message.extend_from_slice(&0u32.to_le_bytes());
    fix_length(&mut message);
    assert_eq!(decode(&message), Err(WireError::MissingBody));
}

#[test]
fn two_bodies_are_rejected() {
    let message = ping();
    let mut broken = message.clone();
    broken.extend_from_slice(&message[20..]);
    fix_length(&mut broken);
    assert_eq!(decode(&broken), Err(WireError::DuplicateBody));
}

#[test]
fn unknown_section_kind_is_rejected() {
    let mut message = ping();
    message.push(2);
    fix_length(&mut message);
    assert_eq!(decode(&message), Err(WireError::UnknownSectionKind(2)));
}

#[test]
fn duplicate_sequence_identifier_is_rejected() {
    let mut message = insert_msg(1, 0);
    message.sequences.push(message.sequences[0].clone());
    let bytes = message.encode(1, 0).expect("encode");
    assert_eq!(decode(&bytes), Err(WireError::DuplicateField("documents".to_owned())));
}

#[test]
fn sequence_size_lying_long_is_truncated() {
    let message = insert_msg(1, 0);
    let mut bytes = message.encode(1, 0).expect("encode");
    let size_at = 21 + message.body.as_bytes().len() + 1;
    let size = i32::from_le_bytes(bytes[size_at..size_at + 4].try_into().unwrap());
    bytes[size_at..size_at + 4].copy_from_slice(&(size + 100).to_le_bytes());
    assert!(matches!(decode(&bytes), Err(WireError::Truncated { .. })));
}

#[test]
fn sequence_size_negative_or_tiny_is_invalid() {
    let message = insert_msg(1, 0);
    let size_at = 21 + message.body.as_bytes().len() + 1;
    for lie in [-5i32, 0, 3] {
        let mut bytes = message.encode(1, 0).expect("encode");
        bytes[size_at..size_at + 4].copy_from_slice(&lie.to_le_bytes());
        assert!(matches!(decode(&bytes), Err(WireError::InvalidLength { .. })), "size {lie}");
    }
}

#[test]
fn sequence_size_lying_short_splits_a_document() {
    let message = insert_msg(2, 0);
    let mut bytes = message.encode(1, 0).expect("encode");
    let size_at = 21 + message.body.as_bytes().len() + 1;
    let size = i32::from_le_bytes(bytes[size_at..size_at + 4].try_into().unwrap());
    bytes[size_at..size_at + 4].copy_from_slice(&(size - 3).to_le_bytes());
    assert!(decode(&bytes).is_err());
}

#[test]
fn sequence_identifier_without_nul_is_rejected() {
    // kind 1 | size 8 | "abcd" with no NUL
    let mut bytes = ping();
    bytes.push(1);
    bytes.extend_from_slice(&8i32.to_le_bytes());
    bytes.extend_from_slice(b"abcd");
    fix_length(&mut bytes);
    assert!(matches!(decode(&bytes), Err(WireError::InvalidCString { .. })));
}

// ---- BSON ----

#[test]
fn body_with_lying_document_length_is_rejected() {
    for delta in [-1i32, 1, 1000, -1000] {
        let mut message = ping();
        let length = i32::from_le_bytes(message[21..25].try_into().unwrap());
        message[21..25].copy_from_slice(&(length + delta).to_le_bytes());
        assert!(decode(&message).is_err(), "delta {delta}");
    }
}

#[test]
fn body_without_trailing_nul_is_rejected() {
    let mut message = ping();
    let last = message.len() - 1;
    message[last] = 7;
    assert!(matches!(decode(&message), Err(WireError::InvalidBson { .. })));
}

#[test]
fn bad_element_type_is_rejected() {
    let mut message = ping();
    message[25] = 0x42; // type byte of the first element
    assert!(matches!(decode(&message), Err(WireError::InvalidBson { .. })));
}

#[test]
fn invalid_utf8_string_is_rejected() {
    let mut message = OpMsg::new(raw(doc! { "find": "ab", "$db": "x" })).encode(1, 0).expect("encode");
    let at = message.windows(2).position(|w| w == b"ab").expect("value");
    message[at] = 0xFF;
    assert!(matches!(decode(&message), Err(WireError::InvalidBson { .. })));
}

#[test]
fn string_length_lying_is_rejected() {
    let mut message = OpMsg::new(raw(doc! { "find": "abc" })).encode(1, 0).expect("encode");
    // body at 21: int32 len | 0x02 "find\0" | int32 strlen | "abc\0" | 0
    let strlen_at = 21 + 4 + 1 + 5;
    message[strlen_at..strlen_at + 4].copy_from_slice(&1000i32.to_le_bytes());
    assert!(matches!(decode(&message), Err(WireError::InvalidBson { .. })));
}

#[test]
fn nested_document_length_lying_is_rejected() {
    let mut message = OpMsg::new(raw(doc! { "q": { "a": 1 } })).encode(1, 0).expect("encode");
    let inner_at = 21 + 4 + 1 + 2;
    message[inner_at..inner_at + 4].copy_from_slice(&500i32.to_le_bytes());
    assert!(matches!(decode(&message), Err(WireError::InvalidBson { .. })));
}

#[test]
fn oversized_sequence_document_is_too_large() {
    let limits = Limits::default();
    let mut message = insert_msg(0, 0);
    let padding = "x".repeat(limits.max_document_size_bytes);
    message.sequences[0].documents.push(raw(doc! { "pad": padding }));
    let bytes = message.encode(1, 0).expect("encode");
    let error = decode(&bytes).expect_err("too large");
    assert!(matches!(error, WireError::DocumentTooLarge { max, .. } if max == limits.max_document_size_bytes));
    assert_eq!(error.code(), wire::ErrorCode::BSONObjectTooLarge);
}

#[test]
fn oversized_body_is_too_large() {
    let limits = Limits::default();
    let padding = "x".repeat(limits.max_command_size_bytes);
    let bytes = OpMsg::new(raw(doc! { "insert": "c", "pad": padding })).encode(1, 0).expect("encode");
    assert!(matches!(decode(&bytes), Err(WireError::DocumentTooLarge { .. })));
}

#[test]
fn document_declaring_huge_length_is_too_large_not_truncated() {
    let mut message = ping();
    message[21..25].copy_from_slice(&i32::MAX.to_le_bytes());
    assert!(matches!(decode(&message), Err(WireError::DocumentTooLarge { .. })));
}

#[test]
fn deeply_nested_document_is_rejected() {
    let limits = Limits::default();
    let too_deep = nested(limits.max_nesting_depth + 1);
    let bytes = OpMsg::new(raw(too_deep)).encode(1, 0).expect("encode");
    let error = decode(&bytes).expect_err("too deep");
    assert_eq!(error, WireError::NestingTooDeep { max: limits.max_nesting_depth });
    let at_limit = nested(limits.max_nesting_depth);
    let bytes = OpMsg::new(raw(at_limit)).encode(1, 0).expect("encode");
    assert!(decode(&bytes).is_ok());
}

#[test]
fn deeply_nested_arrays_are_rejected() {
    // Hand-built: 10,000 nested arrays `{"a": [[[...]]]}`, which the bson crate could not
    // build recursively without a deep stack either.
    let depth = 10_000;
    let mut document: Vec<u8> = vec![5, 0, 0, 0, 0];
    for _ in 0..depth {
        // wrap as { "0": <document> } with type 0x04 (array)
        let mut wrapped = Vec::with_capacity(document.len() + 8);
        let length = (4 + 1 + 2 + document.len() + 1) as i32;
        wrapped.extend_from_slice(&length.to_le_bytes());
        wrapped.extend_from_slice(&[0x04, b'0', 0]);
        wrapped.extend_from_slice(&document);
        wrapped.push(0);
        document = wrapped;
    }
    let mut message = vec![0u8; 16];
    message[12..16].copy_from_slice(&2013i32.to_le_bytes());
    message.extend_from_slice(&0u32.to_le_bytes());
    message.push(0);
    message.extend_from_slice(&document);
    fix_length(&mut message);
    assert!(matches!(decode(&message), Err(WireError::NestingTooDeep { .. })));
}

// ---- OP_QUERY ----

fn hello_query() -> OpQuery {
    OpQuery {
        flags: QueryFlags::default(),
        full_collection_name: "admin.$cmd".to_owned(),
        number_to_skip: 0,
        number_to_return: -1,
        query: raw(doc! { "isMaster": 1 }),
        return_fields_selector: None,
    }
}

#[test]
fn op_query_reserved_flags_are_rejected() {
    for bits in [1, 1 << 8, 1 << 31] {
        let mut query = hello_query();
        query.flags = QueryFlags(bits);
        let bytes = query.encode(1).expect("encode");
        assert_eq!(decode(&bytes), Err(WireError::ReservedQueryFlags { bits }));
    }
}

#[test]
fn op_query_without_collection_nul_is_rejected() {
    // header | flags | "admin.$cmd" with no NUL, running to the end
    let mut message = vec![0u8; 16];
    message[12..16].copy_from_slice(&2004i32.to_le_bytes());
    message.extend_from_slice(&0i32.to_le_bytes());
    message.extend_from_slice(b"admin.$cmd");
    fix_length(&mut message);
    assert!(matches!(decode(&message), Err(WireError::InvalidCString { .. })));
}

#[test]
fn op_query_truncated_before_query_is_rejected() {
    let bytes = hello_query().encode(1).expect("encode");
    let cut = 16 + 4 + 11 + 4 + 2; // inside numberToReturn
    let mut message = bytes[..cut].to_vec();
    fix_length(&mut message);
    assert!(matches!(decode(&message), Err(WireError::Truncated { .. })));
}

#[test]
fn op_query_trailing_garbage_is_rejected() {
    let mut bytes = hello_query().encode(1).expect("encode");
    bytes.extend_from_slice(&[1, 2, 3]);
    fix_length(&mut bytes);
    assert!(decode(&bytes).is_err());
}

// ---- OP_COMPRESSED ----

fn compressed(compressor: Compressor) -> Vec<u8> {
    wire::compression::compress(&insert_msg(20, 0).encode(1, 0).expect("encode"), compressor).expect("compress")
}

/// uncompressedSize sits at bytes 20..24 of an OP_COMPRESSED message.
fn set_uncompressed_size(message: &mut [u8], size: i32) {
    message[20..24].copy_from_slice(&size.to_le_bytes());
}

#[test]
fn compression_size_lying_large_is_rejected_before_decompressing() {
    for compressor in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        let mut message = compressed(compressor);
        set_uncompressed_size(&mut message, i32::MAX);
        assert!(matches!(decode(&message), Err(WireError::MessageTooLarge { .. })), "{compressor:?}");
        set_uncompressed_size(&mut message, -1);
        assert!(matches!(decode(&message), Err(WireError::InvalidLength { .. })), "{compressor:?}");
    }
}

#[test]
fn compression_size_lying_within_limit_is_a_mismatch() {
    for compressor in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        for lie in [0, 10, 40_000_000] {
            let mut message = compressed(compressor);
            set_uncompressed_size(&mut message, lie);
            let error = decode(&message).expect_err("lying size");
            assert!(matches!(error, WireError::DecompressedSizeMismatch { .. }), "{compressor:?} {lie}: {error:?}");
        }
    }
}

#[test]
fn corrupt_compressed_payload_is_rejected() {
    for compressor in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        let mut message = compressed(compressor);
        let middle = 25 + (message.len() - 25) / 2;
        for byte in &mut message[middle..] {
            *byte ^= 0x5A;
        }
        assert!(decode(&message).is_err(), "{compressor:?}");
    }
}

#[test]
fn unknown_compressor_is_rejected() {
    let mut message = compressed(Compressor::Snappy);
    message[24] = 9;
    assert_eq!(decode(&message), Err(WireError::UnknownCompressor(9)));
}

#[test]
fn nested_compression_is_rejected() {
    let once = compressed(Compressor::Noop);
    let twice = wire::compression::compress(&once, Compressor::Noop).expect("compress");
    assert_eq!(decode(&twice), Err(WireError::NestedCompression));
}

#[test]
fn compressed_unknown_original_opcode_is_rejected() {
    let mut message = compressed(Compressor::Noop);
    message[16..20].copy_from_slice(&7777i32.to_le_bytes());
    assert_eq!(decode(&message), Err(WireError::UnknownOpCode(7777)));
}

#[test]
fn truncated_compression_header_is_rejected() {
    let message = compressed(Compressor::Noop);
    let mut cut = message[..22].to_vec();
    fix_length(&mut cut);
    assert!(matches!(decode(&cut), Err(WireError::Truncated { .. })));
}

#[test]
fn zip_bomb_stops_at_declared_size() {
    // 40 MB of zeros compress to a few KB; declare a small size and the decoder must stop at
    // size + 1 bytes instead of inflating everything.
    let mut inner = vec![0u8; 16];
    inner[12..16].copy_from_slice(&2013i32.to_le_bytes());
    inner.extend(std::iter::repeat_n(0u8, 40_000_000));
    fix_length(&mut inner);
    for compressor in [Compressor::Zlib, Compressor::Zstd, Compressor::Snappy] {
        let mut message = wire::compression::compress(&inner, compressor).expect("compress");
        set_uncompressed_size(&mut message, 1000);
        let error = decode(&message).expect_err("bomb");
        assert!(
            matches!(error, WireError::DecompressedSizeMismatch { declared: 1000, .. }),
            "{compressor:?} {error:?}"
        );
    }
}

#[test]
fn frame_from_message_rejects_wrong_length() {
    let mut message = ping();
    message.push(0);
    assert!(matches!(Frame::from_message(message, &Limits::default()), Err(WireError::TrailingBytes { .. })));
}

#[test]
fn zstd_frame_demanding_a_huge_window_is_rejected() {
    // A frame header asking for a 2 GiB window (window descriptor exponent 21 + 10 = 31) and no
    // content size: the decoder must refuse rather than allocate it.
    // magic | frame header descriptor 0x00 (no content size, not single segment) | window 0xA8
    let mut payload = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0xA8];
    payload.extend_from_slice(&[0x01, 0x00, 0x00]); // last raw block of size 0
    let mut message = vec![0u8; 16];
    message[12..16].copy_from_slice(&2012i32.to_le_bytes());
    message.extend_from_slice(&2013i32.to_le_bytes());
    message.extend_from_slice(&100i32.to_le_bytes());
    message.push(Compressor::Zstd.id());
    message.extend_from_slice(&payload);
    fix_length(&mut message);
    let error = decode(&message).expect_err("huge window");
    assert!(matches!(&error, WireError::Decompression { reason, .. } if reason.contains("memory")), "{error:?}");
}
