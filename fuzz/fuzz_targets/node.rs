//! Fuzz target `node`: bytes as the engine reads them back: nodes, blocks, sections,
//! header slots, catalogs, log segments.
//!
//! The body is `storage::fuzzing::node` (its module header says what the input is and what must
//! hold), so `crates/storage/tests/fuzz_corpus.rs` replays `fuzz/corpus/node/` through the same
//! code on stable. Run with `cargo +nightly fuzz run node` from the repository root, or every
//! target with `scripts/fuzz`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| storage::fuzzing::node(data));
