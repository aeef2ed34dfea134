//! Fuzz target `frame`: arbitrary bytes through the server's whole decode path.
//!
//! Goal: no input panics `decode_frame`, `Request::parse` or `OpMsg::command_document`, and
//! every OP_MSG or OP_QUERY that parses re-encodes to bytes that parse back to the same value.
//! Run with `cargo +nightly fuzz run frame` from the repository root; to start from real driver
//! messages, copy `crates/wire/tests/fixtures/pymongo/*.bin` into `fuzz/corpus/frame/` first.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{decode_frame, Frame, Limits, Message, Request};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let mut rest = data;
    while let Ok(Some((frame, consumed))) = decode_frame(rest, &limits) {
        if let Ok(request) = Request::parse(&frame, &limits) {
            check_round_trip(&request, &limits);
        }
        rest = rest.get(consumed..).unwrap_or_default();
    }
});

fn check_round_trip(request: &Request, limits: &Limits) {
    let id = request.header.request_id;
    let bytes = match &request.message {
        Message::Msg(message) => {
            let _ = message.command_document();
            message.encode(id, request.header.response_to)
        }
        Message::Query(query) => query.encode(id),
    };
    let bytes = bytes.expect("a parsed message re-encodes");
    let frame = Frame::from_message(bytes, limits).expect("a re-encoded message frames");
    let again = Request::parse(&frame, limits).expect("a re-encoded message parses");
    assert_eq!(again.message, request.message, "round trip changed the message");
}
