//! Fuzz target `command`: frames and command documents through every handler of an
//! in-memory server.
//!
//! The body is `server::fuzzing::command` (its module header says what the input is and what must
//! hold), so `crates/server/tests/fuzz_corpus.rs` replays `fuzz/corpus/command/` through the same
//! code on stable. Run with `cargo +nightly fuzz run command` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| server::fuzzing::command(data));
