//! Fuzz the SCRAM conversation of a server with access control on: the input is split into a
//! client-first and a client-final message (at the first 0xFF byte), sent as `saslStart` and
//! `saslContinue` for the server's one user. No input may crash the server or authenticate the
//! connection: the fuzzer does not know the password, so a success is a forged proof.
#![no_main]

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use libfuzzer_sys::fuzz_target;
use server::{InProcess, ServerConfig};
use std::sync::OnceLock;

fn payload(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: bytes.to_vec() })
}

fn server() -> &'static InProcess {
    static SERVER: OnceLock<InProcess> = OnceLock::new();
    SERVER.get_or_init(|| {
        let server = InProcess::open_in_memory_with(ServerConfig { auth: true, ..ServerConfig::default() }).unwrap();
        server.run_document("admin", doc! { "createUser": "ann", "pwd": "not guessable", "roles": ["root"] });
        server
    })
}

fuzz_target!(|data: &[u8]| {
    let server = server();
    let (first, last) = match data.iter().position(|b| *b == 0xFF) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-1"] {
        let started = server.run_document("admin", doc! {
            "saslStart": 1, "mechanism": mechanism, "payload": payload(first), "options": { "skipEmptyExchange": true },
        });
        let started = Document::try_from(started).unwrap();
        let id = started.get_i32("conversationId").unwrap_or(1);
        server.run_document("admin", doc! { "saslContinue": 1, "conversationId": id, "payload": payload(last) });
        let status = Document::try_from(server.run_document("admin", doc! { "connectionStatus": 1 })).unwrap();
        let users = status.get_document("authInfo").unwrap().get_array("authenticatedUsers").unwrap();
        assert!(users.is_empty(), "authenticated without the password: {status}");
    }
});
