//! Goal: an I/O failure reaches the caller with the operating system's error inside it (its
//! `io::ErrorKind` and raw errno), so that callers tell a full disk from a failing one without
//! reading messages; and damaged bytes are `Corruption`, never an I/O error.
//!
//! Method: an engine on a simulated disk (`SimFs`) with tiny nodes and a small cache, so that
//! reads go to the disk. A full disk (`set_capacity`) must refuse a commit as `NoSpace` with
//! `ENOSPC`; an injected `EIO` on a read or a write must come back as `Io` with errno 5, and one
//! on a sync must stop the engine with errno 5 still reachable; a data file garbled after a
//! clean close must open, or read, as `Corruption`.

use std::error::Error as _;
use std::io;
use std::path::Path;
use std::sync::Arc;

use storage::io::{Fault, FileSystem, OpenMode, SimFs};
use storage::{DATA_FILE, Durability, Engine, Error, Options, TreeId};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn options() -> Options {
    Options { cache_size_bytes: 16 << 10, ..Options::tiny() }
}

/// An engine on `disk` with one tree of 2,000 keys, checkpointed.
fn filled(disk: &SimFs) -> (Engine, TreeId) {
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()).expect("open");
    let tree = engine.create_tree("t").expect("tree");
    for chunk in 0..20u32 {
        let mut txn = engine.begin();
        for i in 0..100 {
            txn.put(tree, format!("key-{:06}", chunk * 100 + i).into_bytes(), vec![7; 60]);
        }
        txn.commit(Durability::None).expect("commit");
    }
    engine.checkpoint().expect("checkpoint");
    (engine, tree)
}

/// The errno of the `io::Error` behind `error`, read both through the accessor and through
/// `std::error::Error::source`.
fn errno(error: &Error) -> Option<i32> {
    let through_source =
        error.source().and_then(|source| source.downcast_ref::<io::Error>()).map(io::Error::raw_os_error);
    let through_accessor = error.io_error().map(io::Error::raw_os_error);
    if !matches!(error, Error::Stopped { .. }) {
        assert_eq!(through_source, through_accessor, "source() and io_error() disagree on {error:?}");
    }
    through_accessor.flatten()
}

#[test]
fn a_full_disk_is_no_space_with_its_errno() {
    let disk = SimFs::new();
    let (engine, tree) = filled(&disk);
    disk.set_capacity(Some(0));
    let refused = (0..1_000)
        .find_map(|i| {
            let mut txn = engine.begin();
            txn.put(tree, format!("more-{i:06}").into_bytes(), vec![1; 200]);
            txn.commit(Durability::Immediate).err()
        })
        .expect("a commit refused on a full disk");
    assert!(refused.is_no_space(), "{refused:?}");
    assert_eq!(refused.io_kind(), Some(io::ErrorKind::StorageFull), "{refused:?}");
    assert_eq!(errno(&refused), Some(ENOSPC), "{refused:?}");
    assert!(!refused.is_corruption());
    engine.halt();
}

#[test]
fn an_injected_read_error_keeps_its_errno() {
    let disk = SimFs::new();
    let (engine, _) = filled(&disk);
    engine.close().expect("close");
    let engine = Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()).expect("reopen");
    let tree = engine.tree("t").expect("tree");
    disk.fail_reads(Fault::Eio);
    let failed = engine.snapshot().get(tree, b"key-001234").expect_err("a read from a failing disk");
    assert!(matches!(failed, Error::Io { .. }), "{failed:?}");
    assert_eq!(errno(&failed), Some(EIO), "{failed:?}");
    assert_eq!(failed.io_kind(), Some(io::Error::from_raw_os_error(EIO).kind()));
    assert!(!failed.is_no_space() && !failed.is_corruption());
    disk.clear_faults();
    engine.halt();
}

#[test]
fn a_failed_write_keeps_its_errno_and_a_failed_sync_stops_the_engine_with_it() {
    let disk = SimFs::new();
    let (engine, tree) = filled(&disk);
    disk.fail_from(disk.calls(), Fault::Eio);
    let mut txn = engine.begin();
    txn.put(tree, b"after".to_vec(), vec![2; 20]);
    let failed = txn.commit(Durability::Immediate).expect_err("a commit on a dead disk");
    assert!(matches!(failed, Error::Io { .. }), "{failed:?}");
    assert_eq!(errno(&failed), Some(EIO), "{failed:?}");
    disk.clear_faults();
    engine.halt();

    // The one call that fails is the commit's sync, a call or two after its write; which one
    // it is depends on the commit, so each is tried on a fresh engine.
    let stopped = (0..4).find_map(|offset| {
        let disk = SimFs::new();
        let (engine, tree) = filled(&disk);
        disk.fail_at(disk.calls() + offset, Fault::Eio);
        let mut txn = engine.begin();
        txn.put(tree, b"after".to_vec(), vec![2; 20]);
        let _ = txn.commit(Durability::Immediate);
        let mut txn = engine.begin();
        txn.put(tree, b"later".to_vec(), vec![3; 20]);
        let outcome = txn.commit(Durability::Immediate);
        engine.halt();
        outcome.err().filter(|error| matches!(error, Error::Stopped { .. }))
    });
    let stopped = stopped.expect("a failed sync stopped the engine");
    assert_eq!(errno(&stopped), Some(EIO), "{stopped:?}");
    assert_eq!(stopped.io_kind(), Some(io::Error::from_raw_os_error(EIO).kind()));
    assert!(!stopped.is_no_space() && !stopped.is_corruption());
    let cause = stopped.source().expect("a stopped engine's cause");
    assert!(cause.downcast_ref::<Error>().is_some_and(|cause| matches!(cause, Error::Io { .. })), "{cause:?}");
}

#[test]
fn a_garbled_data_file_is_corruption_not_an_io_error() {
    let disk = SimFs::new();
    let (engine, _) = filled(&disk);
    engine.close().expect("close");
    let file = disk.open(&Path::new("/db").join(DATA_FILE), OpenMode::Existing).expect("data file");
    let len = file.len().expect("len");
    assert!(len > 128 << 10, "a data file of {len} bytes");
    let garbage: Vec<u8> = (0..len - (64 << 10)).map(|i| (i * 31 % 251) as u8).collect();
    file.write_all_at(&garbage, 64 << 10).expect("garble");
    file.sync().expect("sync");
    let error = match Engine::open_with(Arc::new(disk.clone()), Path::new("/db"), options()) {
        Err(error) => error,
        Ok(engine) => {
            let tree = engine.tree("t").expect("tree");
            let snapshot = engine.snapshot();
            let error = (0..2_000)
                .find_map(|i| snapshot.get(tree, format!("key-{i:06}").as_bytes()).err())
                .expect("a read of garbled blocks failed");
            drop(snapshot);
            engine.halt();
            error
        }
    };
    assert!(error.is_corruption(), "{error:?}");
    assert_eq!(error.io_kind(), None, "{error:?}");
}
