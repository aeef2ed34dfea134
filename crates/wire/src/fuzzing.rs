//! Fuzz entry point for the wire decoder: not part of the crate's API. [`frame`] is the body of
//! the `frame` cargo-fuzz target (`fuzz/`), and `tests/fuzz_corpus.rs` replays the
//! committed corpus through it on stable.
//!
//! Input: bytes as received on a connection. No input may panic `decode_frame`,
//! `Request::parse` or `OpMsg::command_document`, and every OP_MSG or OP_QUERY that parses
//! re-encodes to bytes that parse back to the same value.

#![allow(clippy::panic, reason = "a fuzz entry point reports a broken promise by panicking")]

use crate::{Frame, Limits, Message, Request, decode_frame};

/// The `frame` fuzz target.
pub fn frame(data: &[u8]) {
    let limits = Limits::default();
    let mut rest = data;
    while let Ok(Some((frame, consumed))) = decode_frame(rest, &limits) {
        if let Ok(request) = Request::parse(&frame, &limits) {
            check_round_trip(&request, &limits);
        }
        rest = rest.get(consumed..).unwrap_or_default();
    }
}

fn check_round_trip(request: &Request, limits: &Limits) {
    let id = request.header.request_id;
    let bytes = match &request.message {
        Message::Msg(message) => {
            let _ = message.command_document();
            message.encode(id, request.header.response_to)
        }
        Message::Query(query) => query.encode(id),
    };
    let bytes = bytes.unwrap_or_else(|error| panic!("a parsed message re-encodes: {error}"));
    let frame =
        Frame::from_message(bytes, limits).unwrap_or_else(|error| panic!("a re-encoded message frames: {error}"));
    let again = Request::parse(&frame, limits).unwrap_or_else(|error| panic!("a re-encoded message parses: {error}"));
    assert_eq!(again.message, request.message, "round trip changed the message");
}
