//! Hot backup (`Engine::backup`): a copy taken while a writer commits as fast as it can opens as
//! an ordinary data directory, passes `verify`, and holds every commit acknowledged before the
//! backup began and none past the checkpoint it reports; the source goes on and reopens intact;
//! a destination that already holds a data file, and an in-memory engine, are refused.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use storage::{Durability, Engine, Options};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-backup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn key(i: u64) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

#[test]
fn a_backup_during_writes_holds_every_commit_acknowledged_before_it() {
    let (source, copy) = (temp_dir("source"), temp_dir("copy"));
    let engine = Arc::new(Engine::open(&source, Options::tiny()).unwrap());
    let tree = engine.create_tree("t").unwrap();
    // Enough to have flushed nodes and an older checkpoint whose blocks get superseded.
    for batch in 0..40u64 {
        let mut txn = engine.begin();
        for i in batch * 100..(batch + 1) * 100 {
            txn.put(tree, key(i), vec![7; 64]);
        }
        txn.commit(Durability::None).unwrap();
    }
    engine.checkpoint().unwrap();
    let acknowledged = Arc::new(AtomicU64::new(4000));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (engine, acknowledged, stop) = (Arc::clone(&engine), Arc::clone(&acknowledged), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut next = 4000u64;
            while !stop.load(Ordering::Relaxed) {
                let mut txn = engine.begin();
                for i in next..next + 50 {
                    txn.put(tree, key(i), vec![9; 64]);
                }
                txn.commit(Durability::Immediate).unwrap();
                next += 50;
                acknowledged.store(next, Ordering::Release);
            }
            next
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let before = acknowledged.load(Ordering::Acquire);
    let report = engine.backup(&copy).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(report.bytes > 0 && written > before, "{report:?}, {written} > {before}");
    assert!(engine.backup(&copy).is_err(), "a destination holding a data file is refused");

    let restored = Engine::open(&copy, Options::tiny()).unwrap();
    restored.verify().unwrap();
    let tree_copy = restored.tree("t").unwrap();
    let snapshot = restored.snapshot();
    for i in 0..before {
        assert!(
            snapshot.get(tree_copy, &key(i)).unwrap().is_some(),
            "key {i} acknowledged before the backup is missing"
        );
    }
    // The copy is one checkpoint: a prefix of the writer's commits, nothing torn.
    let present: Vec<bool> = (before..written).map(|i| snapshot.get(tree_copy, &key(i)).unwrap().is_some()).collect();
    assert!(present.windows(2).all(|pair| pair[0] || !pair[1]), "the copy is not a prefix of the commits");
    drop(snapshot);
    restored.close().unwrap();

    // The source went on and reopens with everything.
    let engine = Arc::try_unwrap(engine).ok().unwrap();
    engine.close().unwrap();
    let reopened = Engine::open(&source, Options::tiny()).unwrap();
    reopened.verify().unwrap();
    let tree = reopened.tree("t").unwrap();
    assert!(reopened.snapshot().get(tree, &key(written - 1)).unwrap().is_some());
    drop(reopened);
    std::fs::remove_dir_all(&source).unwrap();
    std::fs::remove_dir_all(&copy).unwrap();
}

#[test]
fn an_in_memory_engine_has_nothing_to_back_up() {
    let engine = Engine::open_in_memory(Options::tiny()).unwrap();
    assert!(engine.backup(&temp_dir("memory")).is_err());
}

/// Goal: a backup that has returned survives a power loss, wherever its directory is: its own
/// name in a parent directory created for it is synced too (a name never synced may not be
/// there after a power loss, however well its files were). Method: the simulated disk, a backup
/// into a new nested directory, then a power loss with every seed-chosen outcome of unsynced
/// changes; the copy must open and hold the data.
#[test]
fn a_backup_survives_a_power_loss_right_after_it_returns() {
    use std::path::Path;
    use storage::io::SimFs;
    for seed in 0..64 {
        let disk = SimFs::new();
        let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), Options::tiny()).unwrap();
        let tree = engine.create_tree("t").unwrap();
        let mut txn = engine.begin();
        for i in 0..500u64 {
            txn.put(tree, key(i), vec![5; 32]);
        }
        txn.commit(Durability::Immediate).unwrap();
        engine.backup(Path::new("/backups/monday/db")).unwrap();
        let image = disk.crash(seed);
        engine.halt();
        let copy = Engine::open_with(Arc::new(image), Path::new("/backups/monday/db"), Options::tiny())
            .unwrap_or_else(|e| panic!("crash seed {seed}: the backup does not open: {e}"));
        copy.verify().unwrap();
        let tree = copy.tree("t").unwrap_or_else(|| panic!("crash seed {seed}: the backup lost its tree"));
        assert_eq!(copy.snapshot().iter(tree).count(), 500, "crash seed {seed}");
        copy.halt();
    }
}
