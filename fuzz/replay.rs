//! The corpus replay every crate with a fuzz target includes in its `tests/fuzz_corpus.rs`
//! (`#[path = "../../../fuzz/replay.rs"] mod replay;`): every input of the committed corpora
//! still runs through its target without a panic, on stable and in CI, which does not run the
//! fuzzers (they need nightly). Each target's body is a `fuzzing` function of the crate it
//! exercises, the same one the cargo-fuzz binary calls; that crate's test replays every file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through it.
//!
//! Guarantees: a missing or empty corpus fails (a replay of nothing must not pass); `TARGETS`
//! names the crate that replays each target, every crate checks that it replays exactly its own,
//! and that `TARGETS` holds exactly the targets of `fuzz/Cargo.toml`. A failure names the file:
//! reproduce it with `cargo +nightly fuzz run <target> <file>`.
//!
//! `cargo test --release -p <crate> --test fuzz_corpus -- --ignored write_seeds` rewrites the
//! crate's generated seeds (`seed-*`) into its targets' corpora. Uses only `std`, so that every
//! crate can include it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// Every fuzz target and the crate whose `tests/fuzz_corpus.rs` replays it.
const TARGETS: &[(&str, &str)] = &[
    ("frame", "wire"),
    ("command", "server"),
    ("sasl", "server"),
    ("document", "document"),
    ("filter", "query"),
    ("update", "query"),
    ("node", "storage"),
];

/// A target's generated seeds: file names (written as `seed-<name>`) and bytes.
pub type Seeds = Vec<(String, Vec<u8>)>;

pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted (none if it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).filter(|path| path.is_file()).collect();
    files.sort();
    files
}

/// Runs every corpus and regression input of `target` through `body`; fails naming each input
/// that panicked, or if the corpus is missing or empty.
pub fn replay(target: &str, body: fn(&[u8])) {
    let corpus = files(&fuzz_dir().join("corpus").join(target));
    assert!(!corpus.is_empty(), "fuzz/corpus/{target}/ is missing or empty: the replay would prove nothing");
    let regressions = files(&fuzz_dir().join("regressions").join(target));
    let mut failures = Vec::new();
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).expect("a corpus file reads");
        if catch_unwind(AssertUnwindSafe(|| body(&data))).is_err() {
            failures.push(path.display().to_string());
        }
    }
    assert!(failures.is_empty(), "{target}: {} of {} inputs panicked: {failures:#?}", failures.len(), corpus.len());
}

/// Checks that this crate (`env!("CARGO_PKG_NAME")`) replays exactly the targets `TARGETS`
/// gives it, and that `TARGETS` names every target of `fuzz/Cargo.toml` and no other.
pub fn check_targets(krate: &str, replayed: &[&str]) {
    let mut own: Vec<&str> = TARGETS.iter().filter(|(_, by)| *by == krate).map(|(target, _)| *target).collect();
    let mut replayed = replayed.to_vec();
    own.sort_unstable();
    replayed.sort_unstable();
    assert_eq!(replayed, own, "the targets {krate} replays and those fuzz/replay.rs's TARGETS gives it");
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml reads");
    let mut declared: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| bin.lines().find_map(|line| line.trim().strip_prefix("name = ")))
        .map(|name| name.trim_matches('"'))
        .collect();
    let mut listed: Vec<&str> = TARGETS.iter().map(|(target, _)| *target).collect();
    declared.sort_unstable();
    listed.sort_unstable();
    assert_eq!(declared, listed, "fuzz/Cargo.toml's targets and fuzz/replay.rs's TARGETS");
}

/// Writes a target's generated seeds into `fuzz/corpus/<target>/seed-<name>` (existing files
/// are kept).
pub fn write_seeds(target: &str, seeds: Seeds) {
    let dir = fuzz_dir().join("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("the corpus directory is created");
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("a seed is written");
    }
}
