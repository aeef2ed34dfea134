//! File I/O: the one door through which the engine reaches the disk.
//!
//! Every read, write, sync, create, rename and remove the engine does goes through a
//! [`FileSystem`] and the [`File`]s it opens. Two implementations:
//!
//! - [`RealFs`] (`real`): `std::fs` with positional I/O; what the engine uses in production.
//! - [`SimFs`] (`sim`): an in-memory, deterministic file system for tests. It keeps what is
//!   durable apart from what is merely written, so a test can cut the power at any point
//!   ([`SimFs::crash`]) and fail any single I/O call ([`SimFs::fail_at`]).
//!
//! Contract both implementations keep, and the engine may rely on (nothing more):
//!
//! - A byte written with [`File::write_all_at`] is durable only once [`File::sync`] on that
//!   file has returned `Ok`. Until then, after a power loss it may be there, missing, cut at
//!   any point, or replaced with garbage; unsynced writes survive in any subset, not only in
//!   the order they were made.
//! - A file's size follows its data: `sync` makes both durable (`fdatasync` does this).
//! - A name created, renamed or removed in a directory is durable only once
//!   [`FileSystem::sync_dir`] on that directory has returned `Ok`. A new directory is itself a
//!   name in its parent: sync the parent to keep it. Syncing a file does not make its name
//!   durable.
//! - [`FileSystem::rename`] replaces the target atomically: after a power loss the target name
//!   holds the old file or the new one, never neither.
//! - A failed `sync` is not retried: the writes it covered may be lost even though later reads
//!   still see them (Linux marks the pages clean). Treat it as a crash.
//!
//! Threads: implementations are `Send + Sync`; calls on one file may come from many threads.
//! Positional I/O means there is no shared cursor: concurrent writes to disjoint ranges do not
//! interfere.

// File bytes are input and every I/O call can fail: this code may not panic on either.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic))]

pub mod real;
pub mod sim;

use std::io;
use std::path::Path;
use std::sync::Arc;

pub use real::RealFs;
pub use sim::{Fault, SimFs};

/// How [`FileSystem::open`] treats a path that does or does not exist yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the file; fail with `AlreadyExists` if it is there.
    CreateNew,
    /// Open the file, creating it empty if it is not there.
    Create,
    /// Open the file; fail with `NotFound` if it is not there.
    Existing,
}

/// A directory tree of files. Paths are passed through as given; names are UTF-8.
pub trait FileSystem: Send + Sync + 'static {
    /// Opens a file for reading and writing.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>>;
    /// Removes a file's name. Durable after `sync_dir` of its directory.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Moves `from` to `to`, atomically replacing `to` if it exists. Durable after `sync_dir`
    /// of both directories.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// The names (not paths) of the entries of `dir`, files and directories, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates `dir` and any missing ancestors; `Ok` if it exists already.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes the creates, renames and removes of names in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Whether `path` names a file or directory.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Takes the exclusive lock on `path` (a lock file, created if missing) for as long as the
    /// returned guard lives, writing `owner` into it; or reports who holds it. The lock belongs
    /// to the open file, not the process: a second `try_lock` in the same process is refused
    /// too, and the operating system releases it when the process dies (`kill -9` leaves no
    /// stale lock). Errors are the ones that keep the lock from being taken at all.
    fn try_lock(&self, path: &Path, owner: &str) -> io::Result<Lock>;
}

/// The outcome of [`FileSystem::try_lock`].
pub enum Lock {
    /// The lock is ours until the guard is dropped.
    Taken(LockGuard),
    /// Someone holds it; what they wrote as `owner` (empty if they had not written it yet).
    HeldBy(String),
}

/// A held lock, released when dropped.
pub struct LockGuard {
    _held: Box<dyn Send + Sync>,
}

impl LockGuard {
    pub(crate) fn new(held: Box<dyn Send + Sync>) -> LockGuard {
        LockGuard { _held: held }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("LockGuard")
    }
}

/// An open file. All I/O is positional; there is no cursor.
#[allow(clippy::len_without_is_empty, reason = "a file's size is read, not tested for zero")]
pub trait File: Send + Sync {
    /// Reads into `buf` from `offset`. Returns fewer bytes than `buf.len()` only at the end of
    /// the file (0 at or past it).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Fills `buf` from `offset`, or fails with `UnexpectedEof` if the file ends first.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let read = match self.read_at(buf, offset) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(read) => read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            let rest = std::mem::take(&mut buf);
            let asked = rest.len();
            buf = rest
                .get_mut(read..)
                .ok_or_else(|| io::Error::other(format!("read_at returned {read} bytes for {asked}")))?;
            offset += read as u64;
        }
        Ok(())
    }

    /// Writes all of `buf` at `offset`, extending the file (with zeros in any gap) if needed.
    /// Not durable until [`File::sync`].
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes this file's data and size durable.
    fn sync(&self) -> io::Result<()>;
    /// The file's current size in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros) the file. Not durable until [`File::sync`].
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Advises that `len` bytes at `offset` will not be read again soon, so that the page cache
    /// keeps other pages instead (a block read by a writer, which rewrites the node elsewhere).
    /// Advice only: nothing the file holds changes, and a file system may ignore it.
    fn advise_done_with(&self, _offset: u64, _len: u64) {}

    /// Advises that `len` bytes at `offset` will be read soon: the file system may start reading
    /// them now, without waiting, so that reads a reader is about to make one after the other
    /// go to the disk together. Advice only: nothing the file holds changes.
    fn advise_will_need(&self, _offset: u64, _len: u64) {}

    /// Starts writing `len` bytes at `offset` back to the disk now, without waiting for it or
    /// promising durability (only `sync` does): pages written early are clean, cheap for the
    /// page cache to give up, where dirty ones piling up make every reader's allocation wait.
    fn start_writeback(&self, _offset: u64, _len: u64) {}
}

/// A buffer of `len` bytes that a read or a decompression is about to overwrite whole. Not
/// calloc (`vec![0; len]`, or an allocation the optimizer sees zero-filled): jemalloc zeroes a
/// large recycled extent by dropping its pages (`madvise`), which the overwrite then faults back
/// in one by one, with TLB shootdowns on the other cores. Beyond memory that was a tenth of a
/// query's CPU, and iibench's query thread ran at p50 1.4-1.6 ms with it, 0.9-1.0 ms without. A
/// memset of memory already mapped costs far less. The fill byte goes through `black_box` so
/// that the compiler cannot see it is zero and turn the memset back into calloc, as it did.
pub fn buffer_to_overwrite(len: usize) -> Vec<u8> {
    let mut buffer = Vec::with_capacity(len);
    buffer.resize(len, std::hint::black_box(0));
    buffer
}

/// Creates `dir` and any missing ancestors, and makes every name it created durable: each
/// created directory's entry is synced in its parent (a name never synced may be gone after a
/// power loss, with everything under it, however well the files were synced).
pub fn create_dir_all_durably(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut next = Some(dir);
    while let Some(path) = next.filter(|p| !p.as_os_str().is_empty()) {
        if fs.exists(path)? {
            break;
        }
        missing.push(path);
        next = path.parent();
    }
    fs.create_dir_all(dir)?;
    for created in missing.iter().rev() {
        if let Some(parent) = created.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
    }
    Ok(())
}
