//! Fuzz target `sasl`: client SCRAM messages against a server with access control on.
//!
//! The body is `server::fuzzing::sasl` (its module header says what the input is and what must
//! hold), so `crates/server/tests/fuzz_corpus.rs` replays `fuzz/corpus/sasl/` through the same
//! code on stable. Run with `cargo +nightly fuzz run sasl` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| server::fuzzing::sasl(data));
