//! Goal: every committed input of the `frame` fuzz corpus still runs through
//! its body in `wire::fuzzing` without a panic, on stable. Method, and what makes it
//! fail: `fuzz/replay.rs`, which every crate with a fuzz target includes.
//!
//! `cargo test --release -p wire --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! generated seeds (`seed-*`) into the corpora.

#[path = "../../../fuzz/bson_seeds.rs"]
#[allow(dead_code, reason = "each crate's seeds use some of the shared helpers")]
mod bson_seeds;
#[path = "../../../fuzz/replay.rs"]
mod replay;
#[path = "fuzz_corpus/seeds.rs"]
mod seeds;

#[test]
fn frame() {
    replay::replay("frame", wire::fuzzing::frame);
}

/// Each target listed for this crate in `fuzz/replay.rs` is replayed above, and every target of
/// `fuzz/Cargo.toml` is listed there.
#[test]
fn every_fuzz_target_is_replayed() {
    replay::check_targets(env!("CARGO_PKG_NAME"), &["frame"]);
}

/// Writes the generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files are kept).
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    replay::write_seeds("frame", seeds::frames());
}
