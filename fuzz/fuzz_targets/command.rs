//! Fuzz target `command`: arbitrary bytes as commands, through every handler of the server.
//!
//! Goal: no input panics a command handler or the parsing in front of it. The first byte picks
//! the envelope: even, the rest is a whole wire message (framed, parsed, dispatched as a
//! connection would); odd, the rest is a BSON command document for database `fuzz` (the
//! fuzzer then spends its time on command arguments rather than on framing). One in-memory
//! server lives for the whole run, so earlier inputs leave collections and indexes for later
//! ones to hit. Run with `cargo +nightly fuzz run command` from the repository root.

#![no_main]

use std::sync::OnceLock;

use bson::Document;
use libfuzzer_sys::fuzz_target;
use server::InProcess;
use wire::{decode_frame, Limits, Request};

fn server() -> &'static InProcess {
    static SERVER: OnceLock<InProcess> = OnceLock::new();
    SERVER.get_or_init(|| InProcess::open_in_memory().expect("an in-memory store opens"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 1 {
        if let Ok(body) = Document::from_reader(rest) {
            let _ = server().run_document("fuzz", body);
        }
        return;
    }
    let limits = Limits::default();
    if let Ok(Some((frame, _))) = decode_frame(rest, &limits) {
        if let Ok(request) = Request::parse(&frame, &limits) {
            let _ = server().run_request(&request);
        }
    }
});
