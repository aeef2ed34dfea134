//! Goal: whatever the disk does — power lost at any point, the Nth I/O call failing with EIO or
//! ENOSPC, a short write — the engine never loses a commit it acknowledged, never shows part of
//! a commit, and never serves wrong data after recovery.
//!
//! Method: a fixed workload (two trees, puts, deletes, blind updates, range deletes, explicit
//! checkpoints and compactions, a 64 KiB cache so nodes are evicted and read back) runs on a simulated disk with
//! every commit `Immediate`. One clean run counts its I/O calls; then, for each call index (or a
//! sample of them) and each fault kind, the workload runs again with that fault injected, the
//! disk is crashed (seeded), and the engine reopened: its contents must equal the model after
//! exactly the acknowledged commits, or after one more (the commit in flight when the fault hit).
//! `verify()` runs after every recovery. Failures print the call index, fault and crash seed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use storage::io::{Fault, SimFs};
use storage::{Durability, Engine, Options, TreeId};

type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 2];

#[derive(Clone, Debug)]
enum Step {
    Commit(Vec<(usize, Write)>),
    Checkpoint,
    Compact,
}

#[derive(Clone, Debug)]
enum Write {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Add(Vec<u8>, i64),
    DeleteRange(Vec<u8>, Vec<u8>),
}

fn options() -> Options {
    Options { cache_size_bytes: 64 << 10, ..Options::tiny() }
}

fn workload(seed: u64, commits: usize) -> Vec<Step> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let key = |rng: &mut rand::rngs::StdRng| format!("key-{:04}", rng.gen_range(0..300)).into_bytes();
    let mut steps = Vec::new();
    for i in 0..commits {
        if i % 40 == 39 {
            steps.push(Step::Checkpoint);
        }
        if i % 50 == 49 {
            steps.push(Step::Compact);
        }
        let writes = (0..rng.gen_range(1..4))
            .map(|_| {
                let tree = rng.gen_range(0..2);
                let write = match rng.gen_range(0..10) {
                    0..=5 => Write::Put(key(&mut rng), vec![rng.r#gen(); rng.gen_range(1..40)]),
                    6 => Write::Delete(key(&mut rng)),
                    7..=8 => Write::Add(format!("counter-{}", rng.gen_range(0..5)).into_bytes(), rng.gen_range(-3..4)),
                    _ => {
                        let start = key(&mut rng);
                        let mut end = start.clone();
                        end.extend_from_slice(b"~");
                        Write::DeleteRange(start, end)
                    }
                };
                (tree, write)
            })
            .collect();
        steps.push(Step::Commit(writes));
    }
    steps
}

fn apply_model(model: &mut Model, writes: &[(usize, Write)]) {
    for (tree, write) in writes {
        let map = &mut model[*tree];
        match write {
            Write::Put(k, v) => {
                map.insert(k.clone(), v.clone());
            }
            Write::Delete(k) => {
                map.remove(k);
            }
            Write::Add(k, d) => {
                let old = map.get(k).and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok()).map_or(0, i64::from_le_bytes);
                map.insert(k.clone(), old.wrapping_add(*d).to_le_bytes().to_vec());
            }
            Write::DeleteRange(s, e) => map.retain(|k, _| !(k >= s && k < e)),
        }
    }
}

/// Runs the workload until the engine fails; returns the model after each commit attempted
/// (index 0: before any) and how many commits were acknowledged.
fn run(disk: &SimFs, steps: &[Step]) -> (Vec<Model>, usize) {
    let mut states = vec![Model::default()];
    let Ok(engine) = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()) else {
        return (states, 0);
    };
    let trees: Vec<TreeId> = match ["left", "right"].iter().map(|n| engine.create_tree(n)).collect() {
        Ok(trees) => trees,
        Err(_) => {
            engine.halt();
            return (states, 0);
        }
    };
    let mut acked = 0;
    for step in steps {
        match step {
            Step::Checkpoint => {
                let _ = engine.checkpoint();
            }
            Step::Compact => {
                let _ = engine.compact();
            }
            Step::Commit(writes) => {
                let mut txn = engine.begin();
                for (tree, write) in writes {
                    let id = trees[*tree];
                    match write {
                        Write::Put(k, v) => txn.put(id, k.clone(), v.clone()),
                        Write::Delete(k) => txn.delete(id, k.clone()),
                        Write::Add(k, d) => txn.update(id, k.clone(), d.to_le_bytes().to_vec()),
                        Write::DeleteRange(s, e) => txn.delete_range(id, s.clone(), Some(e.clone())),
                    };
                }
                let mut next = states.last().cloned().unwrap_or_default();
                apply_model(&mut next, writes);
                states.push(next);
                if txn.commit(Durability::Immediate).is_err() {
                    break;
                }
                acked += 1;
            }
        }
    }
    // A crash: the engine's shutdown must not run (it would write a checkpoint); `halt` stops its
    // threads and writes nothing.
    engine.halt();
    (states, acked)
}

fn contents(engine: &Engine) -> Option<Model> {
    let snapshot = engine.snapshot();
    let mut model = Model::default();
    for (index, name) in ["left", "right"].iter().enumerate() {
        let Some(id) = engine.tree(name) else { continue };
        for item in snapshot.iter(id) {
            let (k, v) = item.expect("scan after recovery");
            model[index].insert(k, v);
        }
    }
    Some(model)
}

/// Crashes the disk, recovers, and checks the recovered state against the attempted states.
fn check_recovery(disk: &SimFs, crash_seed: u64, states: &[Model], acked: usize, what: &str) {
    let image = disk.crash(crash_seed);
    let engine = Engine::open_with(Arc::new(image), Path::new("/db"), options())
        .unwrap_or_else(|e| panic!("{what}, crash seed {crash_seed}: recovery failed: {e}"));
    engine.verify().unwrap_or_else(|e| panic!("{what}, crash seed {crash_seed}: verify: {e}"));
    let got = contents(&engine).unwrap_or_default();
    let allowed = &states[acked.min(states.len() - 1)..(acked + 2).min(states.len())];
    assert!(
        allowed.contains(&got),
        "{what}, crash seed {crash_seed}: recovered state is not the state after {acked} acknowledged commits (or one more)"
    );
    engine.halt();
}

#[test]
fn power_loss_at_any_point_keeps_every_acknowledged_commit() {
    let steps = workload(1, 120);
    let clean = SimFs::new();
    let (_, acked) = run(&clean, &steps);
    assert_eq!(acked, 120, "the workload runs clean without faults");
    let calls = clean.calls();
    // At least 10,000 crash points in the release build CI runs; fewer in the debug build,
    // where each recovery costs ten times as much.
    let seeds = if cfg!(debug_assertions) { 4 } else { 18 };
    println!(
        "workload makes {calls} I/O calls; sweeping a power loss before each, {seeds} crash seeds each: {} crash points",
        calls * seeds
    );
    for call in 0..calls {
        let disk = SimFs::new();
        disk.fail_from(call, Fault::Eio);
        let (states, acked) = run(&disk, &steps);
        for seed in 0..seeds {
            check_recovery(&disk, call * seeds + seed, &states, acked, &format!("power loss at call {call}"));
        }
    }
}

#[test]
fn a_failed_io_call_of_any_kind_never_costs_an_acknowledged_commit() {
    let steps = workload(2, 80);
    let clean = SimFs::new();
    run(&clean, &steps);
    let calls = clean.calls();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for call in 0..calls {
        for fault in [Fault::Eio, Fault::Enospc, Fault::ShortWrite] {
            let disk = SimFs::new();
            disk.fail_at(call, fault);
            let (states, acked) = run(&disk, &steps);
            let seed = rng.r#gen();
            check_recovery(&disk, seed, &states, acked, &format!("{fault:?} at call {call}"));
        }
    }
}

#[test]
fn clean_close_leaves_nothing_to_replay_and_reopens_identically() {
    let steps = workload(4, 150);
    let disk = SimFs::new();
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()).expect("open");
    let trees = [engine.create_tree("left").expect("tree"), engine.create_tree("right").expect("tree")];
    let mut model = Model::default();
    for step in &steps {
        if let Step::Commit(writes) = step {
            let mut txn = engine.begin();
            for (tree, write) in writes {
                match write {
                    Write::Put(k, v) => txn.put(trees[*tree], k.clone(), v.clone()),
                    Write::Delete(k) => txn.delete(trees[*tree], k.clone()),
                    Write::Add(k, d) => txn.update(trees[*tree], k.clone(), d.to_le_bytes().to_vec()),
                    Write::DeleteRange(s, e) => txn.delete_range(trees[*tree], s.clone(), Some(e.clone())),
                };
            }
            txn.commit(Durability::None).expect("commit");
            apply_model(&mut model, writes);
        }
    }
    engine.close().expect("close");
    let log_bytes: usize = disk_log_bytes(&disk);
    assert_eq!(log_bytes, 0, "a clean close leaves an empty log");
    let engine = Engine::open_with(Arc::new(disk.crash(0)), Path::new("/db"), options()).expect("reopen");
    engine.verify().expect("verify");
    assert_eq!(contents(&engine), Some(model));
}

/// Key `i` of the tests that load keys in order.
fn numbered_key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn disk_log_bytes(disk: &SimFs) -> usize {
    use storage::io::{FileSystem, OpenMode};
    let dir = Path::new("/db/log");
    disk.list(dir)
        .expect("list")
        .iter()
        .map(|name| disk.open(&dir.join(name), OpenMode::Existing).and_then(|f| f.len()).expect("len") as usize)
        .sum()
}

/// The background flusher meets a disk whose reads fail while writes go on (so commits alone
/// would still succeed): from its first failed flush no commit is acknowledged, and after a
/// crash every commit that was acknowledged is there.
#[test]
fn a_failed_background_flush_stops_commits_and_keeps_the_acknowledged_ones() {
    let options = Options { flush_mode: storage::FlushMode::Background, ..options() };
    let disk = SimFs::new();
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options.clone()).expect("open");
    let tree = engine.create_tree("left").expect("tree");
    let mut model = Model::default();
    for batch in 0..60 {
        let mut txn = engine.begin();
        for i in batch * 50..(batch + 1) * 50 {
            txn.put(tree, numbered_key(i), vec![1; 40]);
            model[0].insert(numbered_key(i), vec![1; 40]);
        }
        txn.commit(Durability::Immediate).expect("load");
    }
    // Everything written and clean: the 64 KiB cache drops most leaves, which flushes must read.
    engine.checkpoint().expect("checkpoint");
    disk.fail_reads(Fault::Eio);

    let seed = rand::random::<u64>();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut failure_seen = false;
    let mut acked = 0;
    let mut states = vec![model.clone()];
    let refused = loop {
        assert!(acked < 5_000, "seed {seed}: no flush failed in {acked} commits on a disk that cannot read");
        // Keys among those loaded: below the appended ones, so they wait in the root's buffer.
        let (k, v) = (numbered_key(rng.gen_range(0..3_000)), vec![rng.r#gen(); 40]);
        let mut txn = engine.begin();
        txn.put(tree, k.clone(), v.clone());
        model[0].insert(k, v);
        states.push(model.clone());
        match txn.commit(Durability::Immediate) {
            Ok(_) => {
                assert!(!failure_seen, "seed {seed}: commit {acked} was acknowledged after a flush failed");
                acked += 1;
            }
            Err(error) => break error,
        }
        failure_seen = engine.stats().flush_failures > 0;
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    println!("{acked} commits acknowledged, then: {refused}");
    // Usually the flusher failed first and every commit now gives its error; sometimes this
    // commit's own read failed first (a message going straight to a leaf whose buffers above
    // are empty). Either way the engine has stopped.
    let mut txn = engine.begin();
    txn.put(tree, numbered_key(0), vec![2; 40]);
    let again = txn.commit(Durability::Immediate).expect_err("a commit acknowledged after the engine stopped");
    assert!(matches!(again, storage::Error::Stopped { .. }), "seed {seed}: the engine did not stop: {again}");
    engine.halt();
    check_recovery(&disk, seed, &states, acked, &format!("seed {seed}, after a failed flush"));
}

/// A checkpoint failing at any one of its I/O calls is counted and leaves every commit in place:
/// either the next checkpoint succeeds, or (a failed log or data-file write or sync) the engine
/// has stopped and the file reopens with every acknowledged commit.
#[test]
fn a_failed_checkpoint_is_counted_and_costs_no_commit() {
    let load = |engine: &Engine, tree: TreeId, model: &mut Model, range: std::ops::Range<u32>| {
        let mut txn = engine.begin();
        for i in range {
            let (k, v) = (numbered_key(i), i.to_le_bytes().to_vec());
            txn.put(tree, k.clone(), v.clone());
            model[0].insert(k, v);
        }
        txn.commit(Durability::Immediate).map(|_| ())
    };
    let open = |disk: &SimFs| Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()).expect("open");
    // A clean run counts the checkpoint's calls.
    let clean = SimFs::new();
    let engine = open(&clean);
    let tree = engine.create_tree("left").expect("tree");
    load(&engine, tree, &mut Model::default(), 0..500).expect("load");
    let first = clean.calls();
    engine.checkpoint().expect("clean checkpoint");
    let calls = clean.calls() - first;
    drop(engine);
    let mut retried = 0;
    for call in 0..calls {
        let disk = SimFs::new();
        let engine = open(&disk);
        let tree = engine.create_tree("left").expect("tree");
        let mut model = Model::default();
        load(&engine, tree, &mut model, 0..500).expect("load");
        disk.fail_at(disk.calls() + call, Fault::Eio);
        if engine.checkpoint().is_ok() {
            continue; // the call was one whose failure the checkpoint does not see (none so far)
        }
        assert_eq!(engine.stats().checkpoint_failures, 1, "call {call}");
        if engine.checkpoint().is_ok() {
            retried += 1;
            assert_eq!(engine.stats().checkpoints, 1, "call {call}");
            load(&engine, tree, &mut model, 500..600).expect("commit after the retried checkpoint");
        } else {
            let mut ignored = Model::default();
            assert!(
                load(&engine, tree, &mut ignored, 500..600).is_err(),
                "call {call}: a stopped engine took a commit"
            );
        }
        engine.halt();
        let engine = open(&disk.crash(call));
        engine.verify().unwrap_or_else(|e| panic!("call {call}: verify: {e}"));
        assert_eq!(contents(&engine), Some(model), "call {call}: contents after reopening");
        engine.halt();
    }
    println!("{calls} calls in a checkpoint; after {retried} failures the next checkpoint succeeded");
    assert!(retried > 0, "no failed checkpoint was retried successfully");
}

/// Waits for the checkpoint the maintenance thread starts after a recovery that replayed
/// records (succeeded or failed); false if none came.
fn wait_for_checkpoint_attempt(engine: &Engine) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let stats = engine.stats();
        if stats.checkpoints + stats.checkpoint_failures > 0 {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    false
}

/// After a crash, recovery replays the log and the maintenance thread checkpoints what it
/// replayed. Power lost at any I/O call of that recovery and checkpoint costs no acknowledged
/// commit, and the start after it replays no more than the one before.
#[test]
fn power_loss_during_the_checkpoint_after_recovery_keeps_everything() {
    let steps = workload(5, 100);
    let disk = SimFs::new();
    let (states, acked) = run(&disk, &steps);
    assert_eq!(acked, 100);
    let expected = &states[acked];
    // Every commit was synced, so any crash image holds them all; seed 11 is one of them.
    let open = |image: &SimFs| Engine::open_with(Arc::new(image.clone()), Path::new("/db"), options());
    let clean = disk.crash(11);
    let engine = open(&clean).expect("clean recovery");
    let replayed = engine.stats().recovery.replayed_records;
    assert!(replayed > 0, "the workload left nothing to replay");
    assert!(wait_for_checkpoint_attempt(&engine), "no checkpoint after a recovery that replayed {replayed} records");
    assert_eq!(engine.stats().checkpoints, 1, "the checkpoint after recovery failed on a clean disk");
    assert_eq!(contents(&engine).as_ref(), Some(expected));
    let calls = clean.calls();
    engine.halt();
    // Once checkpointed, the next start replays nothing.
    let engine = open(&clean.crash(12)).expect("recovery after the checkpoint");
    assert_eq!(engine.stats().recovery.replayed_records, 0, "the checkpoint after recovery did not cover the replay");
    engine.halt();

    println!("recovery and its checkpoint make {calls} I/O calls; power loss before each, 2 crash seeds each");
    for call in 0..calls {
        let image = disk.crash(11);
        image.fail_from(call, Fault::Eio);
        if let Ok(engine) = open(&image) {
            wait_for_checkpoint_attempt(&engine);
            engine.halt();
        }
        for seed in 0..2 {
            let what = format!("power loss at call {call} of recovery, crash seed {seed}");
            let engine = open(&image.crash(seed)).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
            engine.verify().unwrap_or_else(|e| panic!("{what}: verify: {e}"));
            assert_eq!(contents(&engine).as_ref(), Some(expected), "{what}: contents");
            let again = engine.stats().recovery.replayed_records;
            assert!(again <= replayed, "{what}: replayed {again} records, more than the first recovery's {replayed}");
            engine.halt();
        }
    }
}

/// A crash loop: each cycle opens the engine on what the last crash left, commits a few
/// records, and loses power. Restart work (records replayed) and the log on disk stay bounded
/// by one cycle's work however many cycles have run, and no acknowledged commit is lost.
#[test]
fn a_crash_loop_replays_only_recent_work_and_keeps_the_log_small() {
    const CYCLES: u64 = 60;
    const COMMITS: u32 = 25;
    let mut disk = SimFs::new();
    let mut model = Model::default();
    let mut worst_log = 0u64;
    for cycle in 0..CYCLES {
        let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: recovery failed: {e}"));
        engine.verify().unwrap_or_else(|e| panic!("cycle {cycle}: verify: {e}"));
        assert_eq!(contents(&engine).as_ref(), Some(&model), "cycle {cycle}: an acknowledged commit is missing");
        let stats = engine.stats();
        // The previous cycle's commits, its tree creation and nothing older.
        assert!(
            stats.recovery.replayed_records <= u64::from(COMMITS) + 2,
            "cycle {cycle}: replayed {} records after a cycle of {COMMITS} commits",
            stats.recovery.replayed_records
        );
        if stats.recovery.replayed_records > 0 {
            assert!(wait_for_checkpoint_attempt(&engine), "cycle {cycle}: no checkpoint after recovery");
        }
        worst_log = worst_log.max(engine.stats().log_disk_bytes);
        let tree = engine.tree("left").unwrap_or_else(|| engine.create_tree("left").expect("tree"));
        for i in 0..COMMITS {
            let key = numbered_key(cycle as u32 * COMMITS + i);
            let mut txn = engine.begin();
            txn.put(tree, key.clone(), vec![7; 30]);
            txn.commit(Durability::Immediate).expect("commit");
            model[0].insert(key, vec![7; 30]);
        }
        engine.halt();
        disk = disk.crash(cycle);
    }
    // Each cycle writes well under a kilobyte of log per commit; the log holds about one cycle.
    println!("{CYCLES} crash cycles: at most {worst_log} bytes of log on disk after a recovery's checkpoint");
    assert!(worst_log <= u64::from(COMMITS) * 1024, "the log grew to {worst_log} bytes");
}

/// A small database that is written over and over never carries much more log than data: a
/// checkpoint starts once the log since the last one passes the data file's size (above the
/// floor), long before the interval or the absolute log trigger. The maintenance thread that
/// starts it runs beside the test: when the log passes twice the data file (the trigger, plus
/// what a checkpoint's own run lets through), the test waits for it to come back down, and
/// fails only if it does not within seconds (so a busy machine cannot fail it by timing alone).
#[test]
fn the_log_is_checkpointed_away_once_it_outgrows_the_data() {
    let options = Options {
        checkpoint_interval: std::time::Duration::from_secs(3600),
        checkpoint_log_floor_bytes: 16 << 10,
        log_sync_interval: std::time::Duration::from_millis(2),
        ..options()
    };
    let disk = SimFs::new();
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options).expect("open");
    let tree = engine.create_tree("left").expect("tree");
    let bound = |stats: &storage::Stats| 2 * stats.data_file_bytes.max(16 << 10);
    let mut waits = 0;
    for round in 0..10_000u32 {
        let mut txn = engine.begin();
        // Forty keys rewritten again and again: the data stays a few KiB, the log grows.
        txn.put(tree, numbered_key(round % 40), vec![round as u8; 400]);
        txn.commit(Durability::Immediate).expect("commit");
        let stats = engine.stats();
        if stats.log_disk_bytes > bound(&stats) {
            waits += 1;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while engine.stats().log_disk_bytes > bound(&engine.stats()) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "round {round}: the log on disk stays at {} bytes, data file {}",
                    engine.stats().log_disk_bytes,
                    engine.stats().data_file_bytes
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
    let stats = engine.stats();
    println!(
        "{} bytes of log appended, {} checkpoints, data file {} bytes; the test waited for a checkpoint {waits} times",
        stats.log_bytes, stats.checkpoints, stats.data_file_bytes
    );
    assert!(stats.checkpoints >= 3, "{} checkpoints after {} bytes of log", stats.checkpoints, stats.log_bytes);
    engine.close().expect("close");
}

/// 600 acknowledged commits of one key each on a simulated disk, their log spread over several
/// segments, left as a crash leaves them: the disk, the crash image and its segments' names.
fn log_over_several_segments(seed: u64) -> (SimFs, SimFs, Vec<String>) {
    use storage::io::FileSystem;
    let disk = SimFs::new();
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()).expect("open");
    let tree = engine.create_tree("left").expect("tree");
    for i in 0..600 {
        let mut txn = engine.begin();
        txn.put(tree, numbered_key(i), vec![3; 60]);
        txn.commit(Durability::Immediate).expect("commit");
    }
    engine.halt();
    let image = disk.crash(seed);
    let segments = image.list(Path::new("/db/log")).expect("list");
    assert!(segments.len() >= 4, "the workload should span several segments: {segments:?}");
    (disk, image, segments)
}

/// A segment lost from the middle of the log (deleted by hand, a restore that missed a file) is
/// found at recovery — the records after it do not follow the ones before — and reported as
/// corruption, instead of replaying around the hole and silently dropping acknowledged commits.
#[test]
fn a_segment_missing_from_the_middle_of_the_log_is_corruption() {
    use storage::io::FileSystem;
    let (disk, image, segments) = log_over_several_segments(5);
    // The whole log, as left, recovers.
    let engine = Engine::open_with(Arc::new(disk.crash(5)), Path::new("/db"), options()).expect("recovery");
    let tree = engine.tree("left").expect("tree");
    assert_eq!(engine.snapshot().iter(tree).count(), 600);
    engine.halt();
    // Without a middle segment it does not.
    let log = Path::new("/db/log");
    image.remove(&log.join(&segments[1])).expect("remove");
    image.sync_dir(log).expect("sync");
    let error = Engine::open_with(Arc::new(image), Path::new("/db"), options()).err().expect("recovery over a hole");
    assert!(matches!(error, storage::Error::Corruption(ref message) if message.contains("missing records")), "{error}");
}

/// Damage inside a segment that is not the last (bytes overwritten on disk) ends that segment's
/// readable records early while later segments still hold valid ones: recovery reports
/// corruption rather than cut the log there and lose the later, acknowledged commits.
#[test]
fn a_damaged_segment_before_valid_ones_is_corruption() {
    use storage::io::{FileSystem, OpenMode};
    let (_, image, segments) = log_over_several_segments(6);
    let file = image.open(&Path::new("/db/log").join(&segments[1]), OpenMode::Existing).expect("open segment");
    let middle = file.len().expect("len") / 2;
    file.write_all_at(&[0xA5; 64], middle).expect("damage");
    file.sync().expect("sync");
    let error = Engine::open_with(Arc::new(image), Path::new("/db"), options()).err().expect("recovery over damage");
    assert!(matches!(error, storage::Error::Corruption(ref message) if message.contains("ends early")), "{error}");
}
