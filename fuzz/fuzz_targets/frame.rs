//! Fuzz target `frame`: the wire decoder: arbitrary bytes as received on a connection.
//!
//! The body is `wire::fuzzing::frame` (its module header says what the input is and what must
//! hold), so `crates/wire/tests/fuzz_corpus.rs` replays `fuzz/corpus/frame/` through the same
//! code on stable. Run with `cargo +nightly fuzz run frame` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wire::fuzzing::frame(data));
