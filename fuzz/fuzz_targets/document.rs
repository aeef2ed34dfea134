//! Fuzz target `document`: bytes as an inserted document (stored-document rules, index keys,
//! value order) or as an index key read from disk.
//!
//! The body is `document::fuzzing::document` (its module header says what the input is and what must
//! hold), so `crates/document/tests/fuzz_corpus.rs` replays `fuzz/corpus/document/` through the same
//! code on stable. Run with `cargo +nightly fuzz run document` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| document::fuzzing::document(data));
