//! Goal: one engine at a time has a data directory open. Two writers of one log and one data
//! file lose each other's commits, so a second open (in this process or another) is refused
//! before it reads or writes anything but the lock file, with an error that names the directory
//! and who holds it; a lock that cannot be taken at all is a clear error too.
//!
//! The lock belongs to the open lock file, so the kernel drops it when a process dies: the
//! `kill -9` restart is tested with the real server in `crates/cli/tests/dbpath.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use storage::io::{Fault, FileSystem, SimFs};
use storage::{Durability, Engine, Error, Options};

/// Held by the tests that take real locks and by the one that starts processes (`mount`): a
/// forked child holds copies of this process's descriptors until it execs, lock files
/// included, so a lock released meanwhile would still be held for a moment (a flock belongs to
/// the open file description, which the child shares) and a test reopening at once could be
/// refused. Strata's server starts no processes; the tests do.
static REAL_LOCKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn real_locks() -> std::sync::MutexGuard<'static, ()> {
    REAL_LOCKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-lock-{name}-{}-{}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn put_one(engine: &Engine, tree: &str, key: &[u8]) {
    let id = engine.tree(tree).unwrap_or_else(|| engine.create_tree(tree).expect("create tree"));
    let mut txn = engine.begin();
    txn.put(id, key.to_vec(), b"v".to_vec());
    txn.commit(Durability::Immediate).expect("commit");
}

#[test]
fn a_second_open_in_the_same_process_is_refused_until_the_first_is_gone() {
    let _real = real_locks();
    let dir = temp_dir("twice");
    let first = Engine::open(&dir, Options::tiny()).expect("first open");
    put_one(&first, "t", b"a");
    let refused = Engine::open(&dir, Options::tiny()).err().expect("a second open of a locked directory succeeded");
    match &refused {
        Error::DirectoryLocked { dir: named, holder } => {
            assert_eq!(named, &dir.display().to_string());
            assert!(holder.contains(&std::process::id().to_string()), "holder {holder:?} does not name this PID");
            assert!(holder.contains("this process"), "holder {holder:?}");
        }
        other => panic!("expected DirectoryLocked, got {other}"),
    }
    let message = refused.to_string();
    assert!(message.contains(&dir.display().to_string()) && message.contains("in use"), "{message}");
    // The refused open changed nothing: the first engine goes on, and its commits are kept.
    put_one(&first, "t", b"b");
    first.close().expect("close");
    let again = Engine::open(&dir, Options::tiny()).expect("open after the first closed");
    let id = again.tree("t").expect("tree");
    assert_eq!(again.snapshot().iter(id).count(), 2);
    drop(again);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn an_open_snapshot_keeps_the_directory_locked() {
    let _real = real_locks();
    let dir = temp_dir("snapshot");
    let engine = Engine::open(&dir, Options::tiny()).expect("open");
    put_one(&engine, "t", b"a");
    let snapshot = engine.snapshot();
    drop(engine);
    // The snapshot still reads the engine's trees: the engine is not gone yet.
    assert!(matches!(Engine::open(&dir, Options::tiny()), Err(Error::DirectoryLocked { .. })));
    drop(snapshot);
    Engine::open(&dir, Options::tiny()).expect("open after the last snapshot is gone");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn the_second_open_touches_nothing_but_the_lock() {
    let disk = SimFs::new();
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), Options::tiny()).expect("open");
    put_one(&engine, "t", b"a");
    let before = disk.calls();
    let refused = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), Options::tiny());
    assert!(matches!(refused, Err(Error::DirectoryLocked { .. })));
    // exists and create_dir_all of the directory, then the lock file's open and its lock.
    assert_eq!(disk.calls() - before, 4, "the refused open made other I/O calls");
    drop(engine);
    Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), Options::tiny()).expect("open after close");
}

#[test]
fn a_lock_that_cannot_be_taken_is_a_clear_error() {
    // On the simulated disk: the lock call itself fails.
    // Calls 0-3 create /db (two exists, the create, its parent synced); 4 and 5 open the lock
    // file and lock it.
    for call in [4, 5] {
        let disk = SimFs::new();
        disk.fail_at(call, Fault::Eio);
        let error = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), Options::tiny())
            .err()
            .expect("open with a failing lock call");
        let message = error.to_string();
        assert!(message.contains("cannot lock the data directory /db"), "call {call}: {message}");
        assert!(!disk.exists(Path::new("/db/data.strata")).expect("exists"), "call {call}: the data file was created");
    }
    // On the real disk: the lock file's name is taken by a directory.
    let dir = temp_dir("blocked");
    std::fs::create_dir_all(dir.join(storage::LOCK_FILE)).expect("mkdir");
    let message = Engine::open(&dir, Options::tiny()).err().expect("open with a directory as lock file").to_string();
    assert!(message.contains("cannot lock the data directory") && message.contains(storage::LOCK_FILE), "{message}");
    assert!(!dir.join("data.strata").exists(), "the data file was created");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// A read-only file system (a tmpfs mounted read-only), where the lock file cannot be created.
/// Mounting needs root: where it is not allowed, the test says so and checks the simulated disk
/// refusing the lock file's creation instead.
#[test]
fn a_read_only_file_system_is_a_clear_error() {
    let _real = real_locks();
    let dir = temp_dir("readonly");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(&dir)
        .status()
        .is_ok_and(|status| status.success());
    if mounted {
        let result = Engine::open(&dir, Options::tiny());
        let _ = std::process::Command::new("umount").arg(&dir).status();
        let message = result.err().expect("open on a read-only file system").to_string();
        assert!(
            message.contains("cannot lock the data directory") && message.contains("Read-only file system"),
            "{message}"
        );
    } else {
        println!("mount not permitted here: checking a refused lock-file creation on the simulated disk");
        let disk = SimFs::new();
        disk.fail_at(1, Fault::Eio);
        let message =
            Engine::open_with(Arc::new(disk), Path::new("/db"), Options::tiny()).err().expect("refused").to_string();
        assert!(message.contains("cannot lock the data directory /db"), "{message}");
    }
    // Best effort: a mount that would not come off must not fail the test that checked it.
    let _ = std::fs::remove_dir_all(&dir);
}
