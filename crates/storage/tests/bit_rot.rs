//! Goal: a flipped bit or a zeroed sector anywhere in the data file or the log is found by the
//! checksums and never returned as data: opening fails, or every read gives the right value or
//! an error, never a wrong value; what the checkpoint holds never vanishes without an error;
//! damage in the log loses at most the commits from the damage on; and a salvage
//! (`Snapshot::salvage`) yields only right entries, naming the key range of everything else;
//! and a directory that refuses to open opens for salvage (what `strata repair` does).
//!
//! Method: one real data directory is built (two trees, keys written once each, with values
//! that name their key; checkpoints, then `Immediate` commits left in the log; then a crash).
//! Each seeded case copies it, damages the copy once (a bit flipped, or a 512-byte sector
//! zeroed, in the data file's header pages, elsewhere in the data file, or in a log segment),
//! opens it and reads every key by `get`, by a scan and by a salvage. Prints its seed;
//! `STRATA_SEED` replays one case.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use storage::{Durability, Engine, Options, Salvaged};

const TREES: [&str; 2] = ["left", "right"];
const CHECKPOINTED_KEYS: u64 = 3_000;
const LOGGED_KEYS: u64 = 600;

fn options() -> Options {
    Options { cache_size_bytes: 256 << 10, ..Options::tiny() }
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value of key {i:06} ").repeat(1 + (i % 5) as usize).into_bytes()
}

/// Where each key went: its tree, and whether a checkpoint holds it (else only the log).
struct Written {
    tree_of: BTreeMap<u64, usize>,
}

fn build(dir: &Path) -> Written {
    let engine = Engine::open(dir, options()).expect("open");
    let trees = TREES.map(|name| engine.create_tree(name).expect("tree"));
    let mut tree_of = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for i in 0..CHECKPOINTED_KEYS + LOGGED_KEYS {
        if i == CHECKPOINTED_KEYS {
            engine.checkpoint().expect("checkpoint");
        }
        let tree = rng.gen_range(0..2);
        let mut txn = engine.begin();
        txn.put(trees[tree], key(i), value(i));
        txn.commit(if i >= CHECKPOINTED_KEYS { Durability::Immediate } else { Durability::None }).expect("commit");
        tree_of.insert(i, tree);
        if i % 1000 == 999 && i < CHECKPOINTED_KEYS {
            engine.checkpoint().expect("checkpoint");
        }
    }
    // A crash: what the log holds past the checkpoint stays there.
    engine.halt();
    Written { tree_of }
}

/// A fresh scratch directory named for the test and the process, with the directory `build`
/// makes in it (`pristine`).
fn scratch_with_a_build(name: &str) -> (PathBuf, PathBuf, Written) {
    let scratch = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let pristine = scratch.join("pristine");
    let written = build(&pristine);
    (scratch, pristine, written)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("log")).expect("mkdir");
    for sub in ["", "log"] {
        for entry in std::fs::read_dir(from.join(sub)).expect("read_dir") {
            let entry = entry.expect("entry");
            if entry.file_type().expect("type").is_file() {
                std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).expect("copy");
            }
        }
    }
}

/// Damages one place in the copy; returns what it did and whether it hit the log.
fn damage(dir: &Path, rng: &mut rand::rngs::StdRng) -> (String, bool) {
    let data = dir.join("data.strata");
    let mut segments: Vec<PathBuf> =
        std::fs::read_dir(dir.join("log")).expect("log").map(|e| e.expect("entry").path()).collect();
    segments.retain(|p| std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false));
    segments.sort();
    let (file, in_log) = match rng.gen_range(0..10) {
        0..=2 if !segments.is_empty() => (segments[rng.gen_range(0..segments.len())].clone(), true),
        _ => (data, false),
    };
    let mut bytes = std::fs::read(&file).expect("read");
    let header_pages = !in_log && rng.gen_range(0..5) == 0;
    let limit = if header_pages { bytes.len().min(8192) } else { bytes.len() };
    let offset = rng.gen_range(0..limit);
    let what = if rng.gen_bool(0.6) {
        let bit = rng.gen_range(0..8);
        bytes[offset] ^= 1 << bit;
        format!("bit {bit} of byte {offset} flipped in {}", file.display())
    } else {
        let start = offset / 512 * 512;
        let end = (start + 512).min(bytes.len());
        bytes[start..end].fill(0);
        format!("sector at {start} zeroed in {}", file.display())
    };
    std::fs::write(&file, bytes).expect("write");
    (what, in_log)
}

/// How each case ended, tallied for the printout.
#[derive(Default, Debug)]
struct Tally {
    refused_to_open: u64,
    opened_for_salvage: u64,
    read_errors: u64,
    log_commits_lost: u64,
    salvage_ranges_lost: u64,
    no_visible_effect: u64,
}

fn one_case(pristine: &Path, written: &Written, seed: u64, scratch: &Path, tally: &mut Tally) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = scratch.join(format!("case-{seed}"));
    copy_dir(pristine, &dir);
    let (what, in_log) = damage(&dir, &mut rng);
    let what = format!("seed {seed} (STRATA_SEED={seed} replays it): {what}");
    let engine = match Engine::open(&dir, options()) {
        Ok(engine) => engine,
        Err(error) => {
            if std::env::var("STRATA_VERBOSE").is_ok() {
                println!("{what}: refused to open: {error}");
            }
            tally.refused_to_open += 1;
            // What `strata repair` does: open for salvage, which stops replay at the damage.
            match Engine::open(&dir, Options { salvage: true, ..options() }) {
                Ok(engine) => {
                    tally.opened_for_salvage += 1;
                    // Replay stops at the damage, in the log or in a node it applies to.
                    let what = format!("{what} (opened for salvage)");
                    check_reads(&engine, written, true, &what);
                }
                Err(error) => {
                    if std::env::var("STRATA_VERBOSE").is_ok() {
                        println!("{what}: refused to open for salvage too: {error}");
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    let (read_errors, lost_log_keys, lost_ranges) = check_reads(&engine, written, in_log, &what);
    match (read_errors, lost_log_keys, lost_ranges) {
        (0, 0, 0) => tally.no_visible_effect += 1,
        (0, 0, _) => tally.salvage_ranges_lost += 1,
        (0, _, _) => tally.log_commits_lost += 1,
        _ => tally.read_errors += 1,
    }
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads every key by `get`, by a scan and by a salvage; returns the reads that failed, the log
/// commits lost and the ranges the salvage reported lost.
fn check_reads(engine: &Engine, written: &Written, log_may_stop: bool, what: &str) -> (u64, usize, usize) {
    let mut read_errors = 0u64;
    let trees: Vec<_> = TREES.iter().map(|name| engine.tree(name)).collect();
    let snapshot = engine.snapshot();
    let mut lost_log_keys = Vec::new();
    let mut present_log_keys = Vec::new();
    let mut lost_ranges = 0;
    for (&i, &tree) in &written.tree_of {
        let Some(id) = trees[tree] else {
            panic!("{what}: tree {} vanished without an error", TREES[tree]);
        };
        match snapshot.get(id, &key(i)) {
            Ok(Some(found)) => {
                assert_eq!(found, value(i), "{what}: key {i} read a wrong value");
                if i >= CHECKPOINTED_KEYS {
                    present_log_keys.push(i);
                }
            }
            Ok(None) if i >= CHECKPOINTED_KEYS && log_may_stop => lost_log_keys.push(i),
            Ok(None) => panic!("{what}: key {i} vanished without an error"),
            Err(_) => read_errors += 1,
        }
    }
    // The log stops at the damage: no commit after a lost one is there (reads that failed are
    // neither).
    if let (Some(first_lost), Some(last_present)) = (lost_log_keys.first(), present_log_keys.last()) {
        assert!(
            last_present < first_lost,
            "{what}: key {last_present} is there but key {first_lost}, before it, is lost"
        );
    }
    for (tree, id) in trees.iter().enumerate() {
        let Some(id) = *id else { continue };
        for item in snapshot.iter(id) {
            let Ok((k, v)) = item else { break };
            let i = key_number(&k).unwrap_or_else(|| panic!("{what}: a scan read a key nobody wrote"));
            assert_eq!((v, written.tree_of.get(&i)), (value(i), Some(&tree)), "{what}: a scan read a wrong entry");
        }
        lost_ranges += check_salvage(&snapshot, id, tree, written, &lost_log_keys, what);
    }
    let _ = engine.verify();
    (read_errors, lost_log_keys.len(), lost_ranges)
}

/// A salvage yields right entries only, and every key of the tree is yielded or inside a range
/// it reports lost (or among the log's lost commits).
fn check_salvage(
    snapshot: &storage::Snapshot,
    id: storage::TreeId,
    tree: usize,
    written: &Written,
    lost_log_keys: &[u64],
    what: &str,
) -> usize {
    let mut yielded = Vec::new();
    let mut lost_ranges = Vec::new();
    for item in snapshot.salvage(id) {
        match item.unwrap_or_else(|e| panic!("{what}: salvage failed: {e}")) {
            Salvaged::Entry(k, v) => {
                let i = key_number(&k).unwrap_or_else(|| panic!("{what}: salvage yielded a key nobody wrote"));
                assert_eq!(
                    (v, written.tree_of.get(&i)),
                    (value(i), Some(&tree)),
                    "{what}: salvage yielded a wrong entry"
                );
                yielded.push(i);
            }
            Salvaged::Lost { from, to, .. } => lost_ranges.push((from, to)),
        }
    }
    let in_lost_range = |k: &[u8]| {
        lost_ranges
            .iter()
            .any(|(from, to)| from.as_deref().is_none_or(|f| k >= f) && to.as_deref().is_none_or(|t| k < t))
    };
    for (&i, &t) in &written.tree_of {
        if t == tree && !yielded.contains(&i) && !lost_log_keys.contains(&i) {
            assert!(in_lost_range(&key(i)), "{what}: salvage skipped key {i} without reporting its range lost");
        }
    }
    lost_ranges.len()
}

fn key_number(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key).ok()?.strip_prefix("key-")?.parse().ok()
}

#[test]
fn a_flipped_bit_or_zeroed_sector_is_never_returned_as_data() {
    let (scratch, pristine, written) = scratch_with_a_build("strata-bit-rot");
    let replay: Option<u64> = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok());
    let first: u64 = replay.unwrap_or_else(rand::random);
    // Fewer in the debug build, where each case costs several times as much.
    let cases = match (replay, cfg!(debug_assertions)) {
        (Some(_), _) => 1,
        (None, true) => 60,
        (None, false) => 300,
    };
    println!("seeds {first}.. ({cases} cases; STRATA_SEED=<seed> replays one)");
    let mut tally = Tally::default();
    for case in 0..cases {
        one_case(&pristine, &written, first.wrapping_add(case), &scratch, &mut tally);
    }
    println!("{tally:?}");
    // One damaged spot never leaves a directory that even a salvage refuses: the header and the
    // checkpoint catalog are each written twice.
    assert_eq!(
        tally.opened_for_salvage, tally.refused_to_open,
        "a damaged directory refused to open for salvage (STRATA_VERBOSE=1 names the seed)"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The newest valid header slot's (catalog offset, catalog length, catalog copy offset), read
/// as `file/header.rs` lays a slot out: magic(8) checksum(4) body, where the body holds format(4),
/// generation, checkpoint_seq, log_segment, next_node_id, next_tree_id, catalog_offset (u64 each),
/// catalog_len (u32) and catalog_copy_offset (u64).
fn newest_catalog(dir: &Path) -> (u64, u32, u64) {
    let bytes = std::fs::read(dir.join("data.strata")).expect("data file");
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let slots = [0usize, 4096].into_iter().filter(|slot| &bytes[*slot..*slot + 8] == b"STRATA\0\x01");
    let slot = slots.max_by_key(|slot| u64_at(slot + 16)).expect("a written header slot");
    let body = slot + 12;
    let len = u32::from_le_bytes(bytes[body + 52..body + 56].try_into().expect("4 bytes"));
    (u64_at(body + 44), len, u64_at(body + 56))
}

fn zero(dir: &Path, offset: u64, len: u64) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(dir.join("data.strata")).expect("open");
    file.seek(SeekFrom::Start(offset)).expect("seek");
    file.write_all(&vec![0; len as usize]).expect("zero");
}

/// A checkpoint writes its catalog (every tree's root and every node's block) twice: with the
/// catalog block zeroed the directory opens from the copy and every key reads back; with both
/// zeroed it refuses, naming both.
#[test]
fn a_damaged_checkpoint_catalog_is_read_from_its_copy() {
    let (scratch, pristine, written) = scratch_with_a_build("strata-catalog-copy");
    let (catalog, len, copy) = newest_catalog(&pristine);
    assert!(copy != 0 && copy != catalog, "the header names a copy of the catalog");

    let one = scratch.join("catalog-zeroed");
    copy_dir(&pristine, &one);
    zero(&one, catalog, u64::from(len));
    let engine = Engine::open(&one, options()).expect("opens from the catalog's copy");
    assert!(engine.stats().recovery.catalog_damage.is_some(), "the damage is reported");
    let (read_errors, lost_log_keys, lost_ranges) = check_reads(&engine, &written, false, "catalog zeroed");
    assert_eq!((read_errors, lost_log_keys, lost_ranges), (0, 0, 0));
    engine.checkpoint().expect("a checkpoint writes both again");
    drop(engine);
    let (again, _, again_copy) = newest_catalog(&one);
    assert!(again != catalog && again_copy != copy, "the next checkpoint wrote a new catalog and copy");

    let both = scratch.join("both-zeroed");
    copy_dir(&pristine, &both);
    zero(&both, catalog, u64::from(len));
    zero(&both, copy, u64::from(len));
    let refused = Engine::open(&both, options()).err().expect("refused with both damaged");
    assert!(refused.to_string().contains("catalog and its copy"), "{refused}");
    let _ = std::fs::remove_dir_all(&scratch);
}

/// A checkpoint writes its header into both slots (the second once the first is durable): with
/// either slot zeroed the directory opens from the other, at the same checkpoint, and every key
/// reads back. (Before, the other slot named the previous checkpoint, whose blocks and log the
/// rewrites below had reused and removed.)
#[test]
fn a_damaged_header_slot_leaves_the_other_naming_the_same_checkpoint() {
    let (scratch, pristine, written) = scratch_with_a_build("strata-header-copy");
    let rewritten = scratch.join("rewritten");
    // A copy: `build` leaves its engine open, as a crash would.
    copy_dir(&pristine, &rewritten);
    {
        // Checkpoints that rewrite every node: each reuses the blocks the one before freed.
        let engine = Engine::open(&rewritten, options()).expect("reopen");
        let trees = TREES.map(|name| engine.tree(name).expect("tree"));
        for round in 0..4 {
            let mut txn = engine.begin();
            for (&i, &tree) in &written.tree_of {
                txn.put(trees[tree], key(i), value(i));
            }
            txn.commit(Durability::Immediate).expect("rewrite");
            // The last round is not checkpointed: its evictions reuse the blocks the last
            // checkpoint freed, and the process dies.
            if round < 3 {
                engine.checkpoint().expect("checkpoint");
            }
        }
        engine.halt();
    }
    for slot in [0u64, 1] {
        let dir = scratch.join(format!("slot-{slot}-zeroed"));
        copy_dir(&rewritten, &dir);
        zero(&dir, slot * 4096, 4096);
        let what = format!("header slot {slot} zeroed");
        let engine = Engine::open(&dir, options()).unwrap_or_else(|e| panic!("{what}: refused to open: {e}"));
        let (read_errors, lost_log_keys, lost_ranges) = check_reads(&engine, &written, false, &what);
        assert_eq!((read_errors, lost_log_keys, lost_ranges), (0, 0, 0), "{what}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
