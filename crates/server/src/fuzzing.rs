//! Fuzz entry points for the command path: not part of the crate's API. [`command`] and
//! [`sasl`] are the bodies of the `command` and `sasl` cargo-fuzz targets (`fuzz/`), and
//! `tests/fuzz_corpus.rs` replays the committed corpora through them on stable. Each keeps one
//! in-memory server for the whole run (the fuzzer's process, or the test), so earlier inputs
//! leave collections, indexes, users and cursors for later ones to hit.
//!
//! - `command`: the first byte picks the envelope: even, the rest is a whole wire message
//!   (framed, parsed, dispatched as a connection would); odd, the rest is a BSON command
//!   document for database `fuzz` (so the fuzzer spends its time on command arguments rather
//!   than on framing). No input may panic a handler or the parsing in front of it.
//! - `sasl`: the SCRAM conversation of a server with access control on. The input is split at
//!   its first 0xFF byte into a client-first and a client-final message, sent as `saslStart`
//!   and `saslContinue` for the server's one user, with both mechanisms. No input may crash
//!   the server or authenticate the connection: the fuzzer does not know the password, so a
//!   success is a forged proof.

#![allow(clippy::panic, reason = "a fuzz entry point reports a broken promise by panicking")]

use std::sync::OnceLock;

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use wire::{Limits, Request, decode_frame};

use crate::{InProcess, ServerConfig};

/// The `command` fuzz target.
pub fn command(data: &[u8]) {
    static SERVER: OnceLock<InProcess> = OnceLock::new();
    let server = SERVER.get_or_init(|| {
        InProcess::open_in_memory().unwrap_or_else(|error| panic!("an in-memory server opens: {error}"))
    });
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 1 {
        if let Ok(body) = Document::from_reader(rest) {
            let _ = server.run_document("fuzz", body);
        }
        return;
    }
    let limits = Limits::default();
    if let Ok(Some((frame, _))) = decode_frame(rest, &limits)
        && let Ok(request) = Request::parse(&frame, &limits)
    {
        let _ = server.run_request(&request);
    }
}

/// The `sasl` fuzz target.
pub fn sasl(data: &[u8]) {
    static SERVER: OnceLock<InProcess> = OnceLock::new();
    let server = SERVER.get_or_init(|| {
        let config = ServerConfig { auth: true, ..ServerConfig::default() };
        let server =
            InProcess::open_in_memory_with(config).unwrap_or_else(|error| panic!("an in-memory server opens: {error}"));
        server.run_document("admin", doc! { "createUser": "ann", "pwd": "not guessable", "roles": ["root"] });
        server
    });
    let (first, last) = match data.iter().position(|b| *b == 0xFF) {
        Some(at) => (data.get(..at).unwrap_or_default(), data.get(at + 1..).unwrap_or_default()),
        None => (data, &[][..]),
    };
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-1"] {
        let started = server.run_document("admin", doc! {
            "saslStart": 1, "mechanism": mechanism, "payload": payload(first), "options": { "skipEmptyExchange": true },
        });
        let started = Document::try_from(started).unwrap_or_else(|error| panic!("a reply decodes: {error}"));
        let id = started.get_i32("conversationId").unwrap_or(1);
        server.run_document("admin", doc! { "saslContinue": 1, "conversationId": id, "payload": payload(last) });
        let status = server.run_document("admin", doc! { "connectionStatus": 1 });
        let status = Document::try_from(status).unwrap_or_else(|error| panic!("a reply decodes: {error}"));
        let users = status.get_document("authInfo").and_then(|info| info.get_array("authenticatedUsers"));
        let users = users.unwrap_or_else(|error| panic!("connectionStatus names authenticated users: {error}"));
        assert!(users.is_empty(), "authenticated without the password: {status}");
    }
}

fn payload(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: bytes.to_vec() })
}
