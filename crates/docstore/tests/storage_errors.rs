//! Goal: the storage failures a client must tell apart reach it as different MongoDB errors: a
//! full disk is OutOfDiskSpace (14031), damaged bytes DataCorruptionDetected, and any other I/O
//! failure (`EIO`) neither of those, with its errno still inside the docstore error.
//!
//! Method: storage errors made from the operating system's errnos are converted as the store
//! converts them; then a store on a simulated disk (`SimFs`) whose capacity runs out must refuse
//! an insert with OutOfDiskSpace, and a store reopened on a disk whose reads fail with `EIO` must
//! fail a find with another code, the errno inside.

use std::io;
use std::path::Path;
use std::sync::Arc;

use bson::rawdoc;
use docstore::*;
use storage::Durability;
use storage::io::{Fault, SimFs};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn from_errno(errno: i32) -> Error {
    Error::from(storage::Error::io("write", io::Error::from_raw_os_error(errno)))
}

/// The errno inside a docstore error that wraps a storage I/O failure.
fn errno(error: &Error) -> Option<i32> {
    match error {
        Error::Storage(storage) => storage.io_error().and_then(io::Error::raw_os_error),
        _ => None,
    }
}

#[test]
fn enospc_eio_and_corruption_have_different_codes() {
    let full = from_errno(ENOSPC);
    let failing = from_errno(EIO);
    let corrupt = Error::from(storage::Error::Corruption("a block fails its checksum".into()));
    assert_eq!((full.code(), full.code_name()), (14031, "OutOfDiskSpace"), "{full:?}");
    assert_eq!(corrupt.code_name(), "DataCorruptionDetected", "{corrupt:?}");
    assert!(failing.code() != full.code() && failing.code() != corrupt.code(), "{failing:?}");
    assert_eq!(errno(&failing), Some(EIO), "{failing:?}");
    // An engine stopped by an EIO (a failed sync) is not a full disk either, and keeps the errno.
    let stopped = storage::Error::Stopped { context: "log sync failed".into(), cause: Arc::new(from_storage(EIO)) };
    let stopped = Error::from(stopped);
    assert!(stopped.code() != full.code() && stopped.code() != corrupt.code(), "{stopped:?}");
    assert_eq!(errno(&stopped), Some(EIO), "{stopped:?}");
}

fn from_storage(errno: i32) -> storage::Error {
    storage::Error::io("sync", io::Error::from_raw_os_error(errno))
}

fn store_on(disk: &SimFs) -> Store {
    let options = StoreOptions { ttl_interval: std::time::Duration::from_secs(3600), ..StoreOptions::default() };
    Store::open_with(Arc::new(disk.clone()), Path::new("/db"), options).expect("open")
}

#[test]
fn a_full_disk_reaches_the_client_as_out_of_disk_space() {
    let disk = SimFs::new();
    let store = store_on(&disk);
    let outcome = store.collection(("db", "c")).insert(vec![rawdoc! {"_id": 1, "a": "x"}], true, Durability::Immediate);
    assert_eq!((outcome.inserted, outcome.errors.len()), (1, 0));
    disk.set_capacity(Some(0));
    let refused = (2..2_000)
        .find_map(|i| {
            let documents = vec![rawdoc! {"_id": i, "a": "y".repeat(200)}];
            let outcome = store.collection(("db", "c")).insert(documents, true, Durability::Immediate);
            outcome.errors.into_iter().map(|(_, error)| error).next().or(outcome.durability_error)
        })
        .expect("an insert refused on a full disk");
    assert_eq!(refused.code_name(), "OutOfDiskSpace", "{refused:?}");
    drop(store);
}

#[test]
fn a_failing_disk_is_not_a_full_disk() {
    let disk = SimFs::new();
    let store = store_on(&disk);
    let documents: Vec<_> = (0..500).map(|i| rawdoc! {"_id": i, "a": "z".repeat(100)}).collect();
    let outcome = store.collection(("db", "c")).insert(documents, true, Durability::Immediate);
    assert_eq!((outcome.inserted, outcome.errors.len()), (500, 0));
    store.close().expect("close");
    let store = store_on(&disk);
    disk.fail_reads(Fault::Eio);
    let failed = match store.collection(("db", "c")).find(&FindRequest::default()) {
        Err(error) => Some(error),
        Ok(mut cursor) => cursor.find_map(Result::err),
    };
    disk.clear_faults();
    let failed = failed.expect("a find on a failing disk failed");
    assert!(failed.code_name() != "OutOfDiskSpace" && failed.code_name() != "DataCorruptionDetected", "{failed:?}");
    assert_eq!(errno(&failed), Some(EIO), "{failed:?}");
    drop(store);
}
