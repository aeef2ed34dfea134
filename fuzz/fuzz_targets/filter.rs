//! Fuzz target `filter`: a BSON filter parsed and matched against documents (and parsed as
//! a projection and a sort).
//!
//! The body is `query::fuzzing::filter` (its module header says what the input is and what must
//! hold), so `crates/query/tests/fuzz_corpus.rs` replays `fuzz/corpus/filter/` through the same
//! code on stable. Run with `cargo +nightly fuzz run filter` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| query::fuzzing::filter(data));
