//! Fuzz target `update`: a BSON update (operators, replacement or pipeline) parsed and applied.
//!
//! The body is `query::fuzzing::update` (its module header says what the input is and what must
//! hold), so `crates/query/tests/fuzz_corpus.rs` replays `fuzz/corpus/update/` through the same
//! code on stable. Run with `cargo +nightly fuzz run update` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| query::fuzzing::update(data));
