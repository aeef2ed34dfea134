//! Property tests: no input panics the decoders, and valid messages round trip.
//! Method: proptest feeds (1) random bytes to the whole decode path, (2) random payloads under
//! a valid header of every opcode, (3) valid messages with random byte edits, and (4) random
//! documents through OP_MSG. A failure prints the minimal input, and proptest saves its seed
//! under `proptest-regressions/` so the run replays; `PROPTEST_CASES` raises the case count.

mod common;

use bson::{Bson, Document};
use common::{fix_length, insert_msg, raw};
use proptest::prelude::*;
use wire::{Compressor, Frame, Limits, Message, MsgFlags, OpMsg, Request, decode_frame};

/// The server's path over a byte stream: cut every frame, parse every request.
fn drain(mut bytes: &[u8], limits: &Limits) {
    while let Ok(Some((frame, consumed))) = decode_frame(bytes, limits) {
        let _ = Request::parse(&frame, limits);
        bytes = &bytes[consumed..];
    }
}

fn small_limits() -> Limits {
    Limits {
        max_message_size_bytes: 1 << 20,
        max_document_size_bytes: 1 << 16,
        max_command_size_bytes: 1 << 17,
        max_nesting_depth: 20,
    }
}

/// Valid messages of every kind the decoder accepts.
fn seeds() -> Vec<Vec<u8>> {
    let plain = insert_msg(3, 0).encode(1, 0).expect("encode");
    let mut seeds = vec![
        plain.clone(),
        insert_msg(2, MsgFlags::CHECKSUM_PRESENT).encode(2, 0).expect("encode"),
        wire::OpQuery {
            flags: wire::QueryFlags::default(),
            full_collection_name: "admin.$cmd".to_owned(),
            number_to_skip: 0,
            number_to_return: -1,
            query: raw(bson::doc! { "isMaster": 1, "compression": ["zstd", "snappy"] }),
            return_fields_selector: Some(raw(bson::doc! { "a": 1 })),
        }
        .encode(3)
        .expect("encode"),
    ];
    for compressor in [Compressor::Noop, Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        seeds.push(wire::compression::compress(&plain, compressor).expect("compress"));
    }
    seeds
}

#[derive(Debug, Clone)]
enum Edit {
    Flip { at: usize, mask: u8 },
    Insert { at: usize, byte: u8 },
    Remove { at: usize },
    Truncate { at: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Edit::Flip { at, mask }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::Insert { at, byte }),
        any::<usize>().prop_map(|at| Edit::Remove { at }),
        any::<usize>().prop_map(|at| Edit::Truncate { at }),
    ]
}

fn apply(message: &mut Vec<u8>, edit: &Edit) {
    if message.is_empty() {
        return;
    }
    match *edit {
        Edit::Flip { at, mask } => {
            let at = at % message.len();
            message[at] ^= mask;
        }
        Edit::Insert { at, byte } => message.insert(at % (message.len() + 1), byte),
        Edit::Remove { at } => {
            message.remove(at % message.len());
        }
        Edit::Truncate { at } => message.truncate(at % message.len()),
    }
}

fn bson_value() -> impl Strategy<Value = Bson> {
    let leaf = prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        any::<bool>().prop_map(Bson::Boolean),
        "[a-zé\\x00-\\x7f]{0,12}".prop_map(Bson::String),
        Just(Bson::Null),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Bson::Array),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..6)
                .prop_map(|fields| Bson::Document(fields.into_iter().collect())),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    prop::collection::vec(("[a-z$]{1,8}", bson_value()), 0..8).prop_map(|fields| fields.into_iter().collect())
}

proptest! {
    /// Goal: arbitrary bytes never panic the frame decoder or the request parser.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        drain(&bytes, &Limits::default());
        drain(&bytes, &small_limits());
    }

    /// Goal: arbitrary payloads under a well-formed header of each opcode never panic.
    #[test]
    fn random_payloads_never_panic(
        op_code in prop::sample::select(vec![1i32, 2001, 2002, 2003, 2004, 2005, 2006, 2007, 2012, 2013]),
        payload in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut message = vec![0u8; 16];
        message[12..16].copy_from_slice(&op_code.to_le_bytes());
        message.extend_from_slice(&payload);
        fix_length(&mut message);
        drain(&message, &Limits::default());
    }

    /// Goal: valid messages with random edits (lengths fixed up or left lying) never panic.
    #[test]
    fn edited_messages_never_panic(
        seed in 0..7usize,
        edits in prop::collection::vec(edit(), 1..6),
        fix in any::<bool>(),
    ) {
        let mut message = seeds()[seed].clone();
        for edit in &edits {
            apply(&mut message, edit);
        }
        if fix && message.len() >= 4 {
            fix_length(&mut message);
        }
        drain(&message, &Limits::default());
        drain(&message, &small_limits());
    }

    /// Goal: any document the bson crate encodes survives OP_MSG body and sequence, and a
    /// checksum, byte for byte.
    #[test]
    fn documents_round_trip(body in document(), items in prop::collection::vec(document(), 0..4)) {
        let limits = Limits::default();
        let mut message = insert_msg(0, MsgFlags::CHECKSUM_PRESENT);
        message.body = raw(body);
        message.sequences[0].documents = items.into_iter().map(raw).collect();
        let bytes = message.encode(5, 0).expect("encode");
        let frame = Frame::from_message(bytes.clone(), &limits).expect("frame");
        let request = Request::parse(&frame, &limits).expect("parse");
        let Message::Msg(parsed) = request.message else { panic!("not OP_MSG") };
        prop_assert_eq!(&parsed, &message);
        prop_assert_eq!(parsed.encode(5, 0).expect("re-encode"), bytes);
    }
}

/// Goal: an OpMsg built by hand with no sequences re-encodes identically (encode is a
/// function of the value).
#[test]
fn encode_is_deterministic() {
    let message = OpMsg::new(raw(bson::doc! { "ping": 1 }));
    assert_eq!(message.encode(1, 2).expect("encode"), message.encode(1, 2).expect("encode"));
}
