//! Goal: every committed input of the fuzz corpora (`command`, `sasl`) still runs through
//! their bodies in `server::fuzzing` without a panic, on stable. Method, and what makes it
//! fail: `fuzz/replay.rs`, which every crate with a fuzz target includes.
//!
//! `cargo test --release -p server --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! generated seeds (`seed-*`) into the corpora. The `command` seeds are built from
//! the commands and frames of the `frame` seeds (`crates/wire/tests/fuzz_corpus/seeds.rs`);
//! `sasl`'s corpus predates the generated seeds and is not generated.

#[path = "../../../fuzz/bson_seeds.rs"]
#[allow(dead_code, reason = "each crate's seeds use some of the shared helpers")]
mod bson_seeds;
#[path = "../../wire/tests/fuzz_corpus/seeds.rs"]
mod frame_seeds;
#[path = "../../../fuzz/replay.rs"]
mod replay;

use bson_seeds::{bytes, named};
use frame_seeds::{command_documents, frames};
use replay::Seeds;

#[test]
fn command() {
    replay::replay("command", server::fuzzing::command);
}

#[test]
fn sasl() {
    replay::replay("sasl", server::fuzzing::sasl);
}

/// Each target listed for this crate in `fuzz/replay.rs` is replayed above, and every target of
/// `fuzz/Cargo.toml` is listed there.
#[test]
fn every_fuzz_target_is_replayed() {
    replay::check_targets(env!("CARGO_PKG_NAME"), &["command", "sasl"]);
}

/// Writes the generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files are kept).
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    replay::write_seeds("command", commands());
}

/// Commands a driver sends, each after a 1 (run as a command), and the first frames, each after
/// a 0 (decoded from the wire first).
fn commands() -> Seeds {
    let mut seeds: Seeds = command_documents()
        .iter()
        .enumerate()
        .map(|(index, command)| {
            let mut input = vec![1];
            input.extend(bytes(command));
            (named("doc", index, command), input)
        })
        .collect();
    for (name, frame) in frames().into_iter().take(6) {
        let mut input = vec![0];
        input.extend(frame);
        seeds.push((format!("wire-{name}"), input));
    }
    seeds
}
