//! Goal: with the background flusher on, concurrent committers and readers see only whole
//! commits, snapshots stay repeatable while writers commit, and a long scan neither blocks nor
//! is disturbed by inserts.
//!
//! Method: writers move amounts between account keys in two trees, each move one transaction
//! touching both trees (so the grand total is constant); readers take snapshots and check the
//! total, twice per snapshot, by scanning forward and backward. Small nodes keep flushes busy.
//! At the end, `verify()` and a final total.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use rand::{Rng, SeedableRng};
use storage::{Durability, Engine, FlushMode, Options, Snapshot, TreeId};

const ACCOUNTS: u32 = 500;
const START_BALANCE: i64 = 1000;

fn key(account: u32) -> Vec<u8> {
    format!("account-{account:06}").into_bytes()
}

fn total(snapshot: &Snapshot, trees: [TreeId; 2], reverse: bool) -> i64 {
    let mut sum = 0;
    for tree in trees {
        let iter = snapshot.iter(tree);
        let items: Vec<_> = if reverse { iter.rev().collect() } else { iter.collect() };
        for item in items {
            let (_, value) = item.expect("scan");
            sum += i64::from_le_bytes(value.try_into().expect("8-byte balance"));
        }
    }
    sum
}

#[test]
fn readers_see_whole_commits_while_writers_and_the_flusher_run() {
    let options = Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 6,
        flush_mode: FlushMode::Background,
        ..Options::default()
    };
    let engine = Arc::new(Engine::open_in_memory(options).expect("open"));
    let trees = transfers_under_readers(&engine);
    let stats = engine.stats();
    assert!(stats.flushes > 0, "the flusher ran: {stats:?}");
    assert_eq!(total(&engine.snapshot(), trees, false), expected_total());
}

/// The same on a durable engine whose cache holds a few nodes, so that the evictor thread
/// writes nodes out and writers read them back all the time, with checkpoints between; then a
/// clean close and a reopen find the same total.
#[test]
fn readers_see_whole_commits_while_the_evictor_and_checkpoints_run() {
    let dir = std::env::temp_dir().join(format!("strata-evictor-{}-{}", std::process::id(), rand::random::<u32>()));
    let options = Options {
        node_size_bytes: 4096,
        basement_size_bytes: 512,
        fanout: 6,
        flush_mode: FlushMode::Background,
        cache_size_bytes: 48 << 10,
        ..Options::default()
    };
    let engine = Arc::new(Engine::open(&dir, options.clone()).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    let checkpointer = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                engine.checkpoint().expect("checkpoint");
                thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let trees = transfers_under_readers(&engine);
    stop.store(true, Ordering::Relaxed);
    checkpointer.join().expect("checkpointer");
    let stats = engine.stats();
    assert!(stats.evictions > 100 && stats.cache_loads > 100 && stats.checkpoints > 0, "{stats:?}");
    assert_eq!(stats.node_bytes_written_by_height.iter().sum::<u64>(), stats.node_bytes_written, "{stats:?}");
    assert!(stats.node_bytes_written_by_height[0] > 0 && stats.node_bytes_written_by_height[1] > 0, "{stats:?}");
    let engine = Arc::into_inner(engine).expect("no other owner");
    engine.close().expect("close");
    let engine = Engine::open(&dir, options).expect("reopen");
    engine.verify().expect("verify after reopen");
    assert_eq!(total(&engine.snapshot(), trees, false), expected_total());
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
}

fn expected_total() -> i64 {
    2 * i64::from(ACCOUNTS) * START_BALANCE
}

/// Two writers move amounts between the two trees' accounts while two readers check the total
/// in snapshots, forward and backward; then `flush_all` and `verify`.
fn transfers_under_readers(engine: &Arc<Engine>) -> [TreeId; 2] {
    let trees = [engine.create_tree("left").expect("tree"), engine.create_tree("right").expect("tree")];
    let mut txn = engine.begin();
    for account in 0..ACCOUNTS {
        for tree in trees {
            txn.put(tree, key(account), START_BALANCE.to_le_bytes().to_vec());
        }
    }
    txn.commit(Durability::None).expect("seed");
    let expected = expected_total();
    let stop = Arc::new(AtomicBool::new(false));

    let writers: Vec<_> = (0..2u64)
        .map(|seed| {
            let engine = Arc::clone(engine);
            thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                for _ in 0..4000 {
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = rng.gen_range(0..ACCOUNTS);
                    let amount: i64 = rng.gen_range(1..50);
                    let mut txn = engine.begin();
                    txn.update(trees[0], key(from), (-amount).to_le_bytes().to_vec());
                    txn.update(trees[1], key(to), amount.to_le_bytes().to_vec());
                    txn.commit(Durability::None).expect("transfer");
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|reader| {
            let engine = Arc::clone(engine);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut checks = 0;
                while !stop.load(Ordering::Relaxed) || checks < 5 {
                    let snapshot = engine.snapshot();
                    assert_eq!(total(&snapshot, trees, reader == 1), expected, "a snapshot saw part of a commit");
                    assert_eq!(total(&snapshot, trees, reader == 0), expected, "a snapshot changed under its reader");
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        let checks = reader.join().expect("reader");
        assert!(checks >= 5);
    }
    engine.flush_all().expect("flush");
    engine.verify().expect("verify");
    trees
}

/// A commit larger than one hold of a tree's lock (a tree takes a commit's messages a hundred
/// or so at a time, letting readers in between) is still seen whole or not at all: each commit
/// inserts 1,000 keys into one tree, and readers count keys in snapshots.
#[test]
fn readers_see_whole_commits_larger_than_one_hold_of_the_tree_lock() {
    const PER_COMMIT: u32 = 1000;
    let options = Options { node_size_bytes: 16 << 10, basement_size_bytes: 2048, fanout: 8, ..Options::default() };
    let engine = Arc::new(Engine::open_in_memory(options).expect("open"));
    let tree = engine.create_tree("bulk").expect("tree");
    let stop = Arc::new(AtomicBool::new(false));
    // Looks at a snapshot holding some commits: the writer goes on until each reader made a few,
    // so that the readers surely looked while commits ran (a busy machine may not run them).
    let looks = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (engine, stop, looks) = (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&looks));
            thread::spawn(move || {
                let mut mine = 0;
                while !stop.load(Ordering::Relaxed) {
                    let count = engine.snapshot().iter(tree).count() as u32;
                    assert_eq!(count % PER_COMMIT, 0, "a snapshot saw {count} keys: part of a commit");
                    if count > 0 && mine < 3 {
                        mine += 1;
                        looks.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut commits = 0;
    while commits < 40 || looks.load(Ordering::Relaxed) < 6 {
        let mut txn = engine.begin();
        for _ in 0..PER_COMMIT {
            // Random keys: most are buffered in the root, not appended.
            txn.put(tree, rng.r#gen::<u64>().to_be_bytes().to_vec(), vec![1; 20]);
        }
        txn.commit(Durability::None).expect("commit");
        commits += 1;
        assert!(commits < 100_000, "the readers never looked while commits ran");
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().expect("reader");
    }
    assert_eq!(engine.snapshot().iter(tree).count(), commits * PER_COMMIT as usize);
    engine.verify().expect("verify");
}

#[test]
fn a_snapshot_taken_before_inserts_does_not_see_them_and_its_scan_survives_them() {
    let options = Options { node_size_bytes: 4096, basement_size_bytes: 512, fanout: 6, ..Options::default() };
    let engine = Engine::open_in_memory(options).expect("open");
    let tree = engine.create_tree("t").expect("tree");
    let mut txn = engine.begin();
    for i in 0..2000u32 {
        txn.put(tree, (i * 2).to_be_bytes().to_vec(), b"old".to_vec());
    }
    txn.commit(Durability::None).expect("seed");
    let snapshot = engine.snapshot();
    let mut scan = snapshot.iter(tree);
    let mut seen = Vec::new();
    for round in 0..2000u32 {
        if let Some(item) = scan.next() {
            seen.push(item.expect("scan").0);
        }
        let mut txn = engine.begin();
        txn.put(tree, (round * 2 + 1).to_be_bytes().to_vec(), b"new".to_vec());
        txn.delete(tree, (round * 2).to_be_bytes().to_vec());
        txn.commit(Durability::None).expect("insert");
    }
    seen.extend(scan.map(|item| item.expect("scan").0));
    let expected: Vec<Vec<u8>> = (0..2000u32).map(|i| (i * 2).to_be_bytes().to_vec()).collect();
    assert_eq!(seen, expected);
    engine.verify().expect("verify");
    let now: Vec<_> = engine.snapshot().iter(tree).map(|i| i.expect("scan").0).collect();
    let odd: Vec<Vec<u8>> = (0..2000u32).map(|i| (i * 2 + 1).to_be_bytes().to_vec()).collect();
    assert_eq!(now, odd);
}

#[test]
fn dropping_a_tree_frees_its_nodes_and_fails_its_readers_cleanly() {
    let engine = Engine::open_in_memory(Options::tiny()).expect("open");
    let tree = engine.create_tree("t").expect("tree");
    let mut txn = engine.begin();
    for i in 0..3000u32 {
        txn.put(tree, i.to_be_bytes().to_vec(), vec![1; 10]);
    }
    txn.commit(Durability::None).expect("fill");
    let snapshot = engine.snapshot();
    engine.drop_tree("t").expect("drop");
    engine.verify().expect("verify: no orphan nodes");
    assert!(matches!(snapshot.get(tree, b"x"), Err(storage::Error::TreeNotFound(_))));
    assert!(engine.list_trees().is_empty());
    assert_eq!(engine.stats().node_count, 0);
}
