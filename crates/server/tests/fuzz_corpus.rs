//! Goal: every input of the committed fuzz corpora still runs through its target without a
//! panic, on stable and in CI, which does not run the fuzzers (they need nightly): the seeds, what
//! the fuzzers found worth keeping, and each input that once crashed a target (kept, named, in
//! `fuzz/regressions/<target>/` after its fix). Method: each target's body is a `fuzzing`
//! function of the crate it exercises, the same one the cargo-fuzz binary calls, so this test
//! calls it on every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`; a missing
//! or empty corpus fails (a replay of nothing must not pass), and so does a target in
//! `fuzz/Cargo.toml` this file does not replay. A failure names the file: reproduce it with
//! `cargo +nightly fuzz run <target> <file>`.
//!
//! `cargo test --release -p server --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! generated seeds (`seed-*`, see `fuzz_corpus/seeds.rs`) into the corpora.

#[path = "fuzz_corpus/seeds.rs"]
mod seeds;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// A fuzz target's body.
type Body = fn(&[u8]);

/// Every fuzz target and its body.
const TARGETS: &[(&str, Body)] = &[
    ("frame", wire::fuzzing::frame),
    ("command", server::fuzzing::command),
    ("sasl", server::fuzzing::sasl),
    ("document", document::fuzzing::document),
    ("filter", query::fuzzing::filter),
    ("update", query::fuzzing::update),
    ("node", storage::fuzzing::node),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted (none if it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).filter(|path| path.is_file()).collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let run = TARGETS.iter().find(|(name, _)| *name == target).map(|(_, run)| *run).expect("a known target");
    let corpus = files(&fuzz_dir().join("corpus").join(target));
    assert!(!corpus.is_empty(), "fuzz/corpus/{target}/ is missing or empty: the replay would prove nothing");
    let regressions = files(&fuzz_dir().join("regressions").join(target));
    let mut failures = Vec::new();
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).expect("a corpus file reads");
        if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
            failures.push(path.display().to_string());
        }
    }
    assert!(failures.is_empty(), "{target}: {} of {} inputs panicked: {failures:#?}", failures.len(), corpus.len());
}

#[test]
fn frame() {
    replay("frame");
}

#[test]
fn command() {
    replay("command");
}

#[test]
fn sasl() {
    replay("sasl");
}

#[test]
fn document() {
    replay("document");
}

#[test]
fn filter() {
    replay("filter");
}

#[test]
fn update() {
    replay("update");
}

#[test]
fn node() {
    replay("node");
}

/// A target added to `fuzz/Cargo.toml` is replayed here too.
#[test]
fn every_fuzz_target_is_replayed() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml reads");
    let declared: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| bin.lines().find_map(|line| line.trim().strip_prefix("name = ")))
        .map(|name| name.trim_matches('"'))
        .collect();
    let mut replayed: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    let mut declared_sorted = declared.clone();
    declared_sorted.sort_unstable();
    replayed.sort_unstable();
    assert_eq!(declared_sorted, replayed, "fuzz/Cargo.toml's targets and this test's");
}

/// Writes the generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files are kept).
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    for (target, seeds) in seeds::all() {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("the corpus directory is created");
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("a seed is written");
        }
    }
}
