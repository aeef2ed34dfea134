//! [`SimFs`]: an in-memory, deterministic [`FileSystem`] for crash and fault-injection tests.
//!
//! What it models:
//! - Data. Each file has a live image (what reads see) and a durable image (what survives a
//!   power loss), plus the list of writes and `set_len`s made since its last sync.
//!   [`File::sync`] makes that file's live image durable, and nothing else.
//! - Names. Creates, removes, renames and new directories change a live namespace and are
//!   journaled; [`FileSystem::sync_dir`] makes the journaled changes to that directory's
//!   entries durable (with any earlier change they depend on, such as the create of a file
//!   renamed into it). Syncing a file does not make its name durable; a new directory is a
//!   name in its parent.
//! - Power loss. [`SimFs::crash`] returns a new file system holding what a power loss could
//!   leave, chosen by a seed: the durable namespace plus each unsynced name change kept or lost
//!   independently (a rename is one change, so it is atomic; a change whose premise was lost,
//!   such as renaming a file whose create was lost, is lost too); then, for each surviving file,
//!   the durable image plus each unsynced write dropped, applied, torn (a prefix, cut at a
//!   512-byte sector boundary or anywhere) or garbled (applied, with a random range replaced by
//!   random bytes), in any subset. One crash in eight keeps every unsynced change, one in eight
//!   loses them all, the rest mix. Files in a directory whose own name was lost are gone.
//! - Faults. Every `FileSystem` and `File` method call is numbered from 0 across the whole
//!   `SimFs` (`read_exact_at` counts each `read_at` it makes). [`SimFs::fail_at`] fails one
//!   call, [`SimFs::fail_from`] every call from one on (a dead disk). A failed call changes
//!   nothing, except: a short write lands its first half in the live image and returns
//!   `ENOSPC`; a failed `sync` forgets that file's unsynced writes for good (they stay visible to
//!   reads but can never become durable), as Linux does after a writeback error.
//! - A full disk. [`SimFs::set_capacity`] bounds the bytes of the files in the live namespace:
//!   a write past it lands what fits and fails with `ENOSPC`, a `set_len` past it fails whole
//!   (as tmpfs does); removing or shortening files makes room again.
//!
//! What it does not model:
//! - Reordering beyond the above: unsynced writes that survive land in the order they were
//!   made, so of two overlapping writes the later one wins if both survive (true of a page
//!   cache); a torn write keeps a prefix, not an arbitrary set of sectors.
//! - A file size that grows without its data (ext4 `data=writeback`): size follows data, and
//!   the closest case is a garbled write.
//! - Corruption of synced data (bit rot, misdirected writes), read errors other than the
//!   injected ones, and latency. Permissions, links, directory removal and directory renames
//!   (renaming a directory returns `Unsupported`). Files above 4 GiB (`EFBIG`).
//! - Real file systems are often kinder (ext4 commits names with `fsync` of the file); tests
//!   against `SimFs` assume the least POSIX promises.
//!
//! Errors are raw OS errors, like the real ones: `ENOENT`, `EEXIST`, `ENOTDIR`, `EISDIR`,
//! injected `EIO` (5) and `ENOSPC` (28). Match them with `raw_os_error()`: std gives `EIO` the
//! kind `Uncategorized`, not `Other` (`ENOSPC` is `StorageFull`). `sync_dir` of a file is
//! `ENOTDIR` (stricter than Linux).
//!
//! Threads: one `Mutex` around the whole state; every call takes it once. Handles share the
//! state of the `SimFs` that opened them; a crash makes a new state with call count 0 and no
//! faults, so old handles cannot touch it.

mod image;
mod namespace;
mod rng;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use self::image::{Image, Outcomes};
use self::namespace::{Change, Entry, Inode, Journal, Namespace, parent};
use self::rng::Rng;
use super::{File, FileSystem, Lock, LockGuard, OpenMode};

const ENOENT: i32 = 2;
const EIO: i32 = 5;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const ENOSPC: i32 = 28;

/// An injected I/O failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with `EIO`.
    Eio,
    /// The call fails with `ENOSPC`.
    Enospc,
    /// A write lands half its bytes and fails with `ENOSPC`; any other call fails with `EIO`.
    ShortWrite,
}

impl Fault {
    fn error(self) -> io::Error {
        match self {
            Fault::Eio | Fault::ShortWrite => io::Error::from_raw_os_error(EIO),
            Fault::Enospc => io::Error::from_raw_os_error(ENOSPC),
        }
    }
}

/// A handle on one simulated file system; clones share it.
#[derive(Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct Faults {
    at: BTreeMap<u64, Fault>,
    from: Option<(u64, Fault)>,
    /// Every `read_at` fails with this (writes and syncs go on).
    reads: Option<Fault>,
}

#[derive(Debug)]
struct State {
    /// Every file ever created in this state, named or not (open handles may outlive names).
    images: BTreeMap<Inode, Image>,
    next_inode: Inode,
    live: Namespace,
    durable: Namespace,
    /// Changes in `live` not yet in `durable`.
    journal: Journal,
    calls: u64,
    faults: Faults,
    /// Paths locked with `try_lock`, and the owner each holder wrote.
    locks: BTreeMap<PathBuf, String>,
    /// The most bytes the live files may hold (`set_capacity`).
    capacity: Option<u64>,
}

/// An open simulated file.
struct SimFile {
    state: Arc<Mutex<State>>,
    inode: Inode,
}

fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// `path` as an absolute path without `.` or `..`; relative paths start at `/`.
fn normalize(path: &Path) -> io::Result<PathBuf> {
    if path.to_str().is_none() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "SimFs paths are UTF-8"));
    }
    let mut normal = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => normal.push(name),
            Component::ParentDir => {
                normal.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(normal)
}

impl State {
    fn new(namespace: Namespace, images: BTreeMap<Inode, Image>, next_inode: Inode) -> State {
        namespace.verify();
        State {
            images,
            next_inode,
            live: namespace.clone(),
            durable: namespace,
            journal: Journal::default(),
            calls: 0,
            faults: Faults::default(),
            locks: BTreeMap::new(),
            capacity: None,
        }
    }

    /// How many more bytes the live files may grow by (`u64::MAX` without a capacity).
    fn room(&self) -> u64 {
        let Some(capacity) = self.capacity else { return u64::MAX };
        let used: u64 = self.live.inodes().iter().filter_map(|inode| self.images.get(inode)).map(Image::len).sum();
        capacity.saturating_sub(used)
    }

    /// Counts one I/O call and returns the fault injected into it, if any.
    fn call(&mut self) -> Option<Fault> {
        let call = self.calls;
        self.calls += 1;
        let from = self.faults.from.filter(|(first, _)| call >= *first);
        self.faults.at.get(&call).copied().or(from.map(|(_, fault)| fault))
    }

    /// Counts one I/O call that has no partial form: any fault fails it whole.
    fn call_ok(&mut self) -> io::Result<()> {
        self.call().map_or(Ok(()), |fault| Err(fault.error()))
    }

    fn change(&mut self, change: Change) {
        let applied = self.live.apply(&change);
        assert!(applied, "live change with a false premise: {change:?}");
        self.journal.push(change);
    }

    fn require_dir(&self, dir: &Path) -> io::Result<()> {
        match self.live.entry(dir) {
            Entry::Dir => Ok(()),
            Entry::File(_) => Err(os_error(ENOTDIR)),
            Entry::Missing => Err(os_error(ENOENT)),
        }
    }

    fn create(&mut self, path: &Path) -> io::Result<Inode> {
        self.require_dir(parent(path))?;
        let inode = self.next_inode;
        self.next_inode += 1;
        self.images.insert(inode, Image::default());
        self.change(Change::Create { path: path.to_path_buf(), inode });
        Ok(inode)
    }

    fn image(&mut self, inode: Inode) -> io::Result<&mut Image> {
        // Images are never dropped while a state lives, so this is a bug in SimFs itself.
        self.images.get_mut(&inode).ok_or_else(|| io::Error::other("SimFs lost an open file"))
    }
}

impl SimFs {
    /// An empty file system holding only `/`.
    pub fn new() -> SimFs {
        SimFs::from_state(State::new(Namespace::new(), BTreeMap::new(), 0))
    }

    fn from_state(state: State) -> SimFs {
        SimFs { state: Arc::new(Mutex::new(state)) }
    }

    /// The file system as a power loss at this moment could leave it, chosen by `seed` (the
    /// same seed always gives the same result). `self` and its open files are unchanged and
    /// independent of the result, which starts with no faults and a call count of 0.
    pub fn crash(&self, seed: u64) -> SimFs {
        let state = self.state.lock();
        let mut rng = Rng::new(seed);
        let names = Outcomes::pick(&mut rng);
        let mut namespace = state.durable.clone();
        for change in state.journal.changes() {
            if names.keep(&mut rng) {
                namespace.apply(change);
            }
        }
        namespace.prune();
        let data = Outcomes::pick(&mut rng);
        let mut images = BTreeMap::new();
        for inode in namespace.inodes() {
            if let Some(image) = state.images.get(&inode) {
                images.insert(inode, Image::durable(image.crashed(data, &mut rng)));
            }
        }
        SimFs::from_state(State::new(namespace, images, state.next_inode))
    }

    /// Makes I/O call number `call` (counting from 0, see [`SimFs::calls`]) fail with `fault`.
    pub fn fail_at(&self, call: u64, fault: Fault) {
        self.state.lock().faults.at.insert(call, fault);
    }

    /// Makes every I/O call from number `call` on fail with `fault`.
    pub fn fail_from(&self, call: u64, fault: Fault) {
        self.state.lock().faults.from = Some((call, fault));
    }

    /// Makes every file read from now on fail with `fault`, while writes and syncs go on: a disk
    /// that lost the blocks already written, seen only by what reads them back.
    pub fn fail_reads(&self, fault: Fault) {
        self.state.lock().faults.reads = Some(fault);
    }

    /// Bounds the bytes the live files may hold (`None`: no bound); see the module header.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.state.lock().capacity = capacity;
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.state.lock().faults = Faults::default();
    }

    /// How many I/O calls have been made so far (the number the next one will get).
    pub fn calls(&self) -> u64 {
        self.state.lock().calls
    }

    /// Checks the live namespace: every entry in an existing directory, every file with bytes.
    pub fn verify(&self) {
        let state = self.state.lock();
        state.live.verify();
        for inode in state.live.inodes() {
            assert!(state.images.contains_key(&inode), "name points at missing inode {inode}");
        }
    }
}

impl Default for SimFs {
    fn default() -> SimFs {
        SimFs::new()
    }
}

impl fmt::Debug for SimFs {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        formatter
            .debug_struct("SimFs")
            .field("files", &state.images.len())
            .field("unsynced_name_changes", &state.journal.changes().len())
            .field("calls", &state.calls)
            .finish()
    }
}

impl FileSystem for SimFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let path = normalize(path)?;
        let inode = match (state.live.entry(&path), mode) {
            (Entry::Dir, _) => return Err(os_error(EISDIR)),
            (Entry::File(_), OpenMode::CreateNew) => return Err(os_error(EEXIST)),
            (Entry::File(inode), OpenMode::Create | OpenMode::Existing) => inode,
            (Entry::Missing, OpenMode::Existing) => return Err(os_error(ENOENT)),
            (Entry::Missing, OpenMode::Create | OpenMode::CreateNew) => state.create(&path)?,
        };
        Ok(Arc::new(SimFile { state: Arc::clone(&self.state), inode }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let path = normalize(path)?;
        match state.live.entry(&path) {
            Entry::File(inode) => state.change(Change::Remove { path, inode }),
            Entry::Dir => return Err(os_error(EISDIR)),
            Entry::Missing => return Err(os_error(ENOENT)),
        }
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let (from, to) = (normalize(from)?, normalize(to)?);
        let inode = match state.live.entry(&from) {
            Entry::File(inode) => inode,
            Entry::Dir => {
                let message = "SimFs does not rename directories";
                return Err(io::Error::new(io::ErrorKind::Unsupported, message));
            }
            Entry::Missing => return Err(os_error(ENOENT)),
        };
        if state.live.entry(&to) == Entry::Dir {
            return Err(os_error(EISDIR));
        }
        state.require_dir(parent(&to))?;
        if from != to {
            state.change(Change::Rename { from, to, inode });
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let dir = normalize(dir)?;
        state.require_dir(&dir)?;
        Ok(state.live.list(&dir))
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let dir = normalize(dir)?;
        let mut prefix = PathBuf::from("/");
        for component in dir.components().skip(1) {
            prefix.push(component);
            match state.live.entry(&prefix) {
                Entry::Dir => {}
                Entry::File(_) if prefix == dir => return Err(os_error(EEXIST)),
                Entry::File(_) => return Err(os_error(ENOTDIR)),
                Entry::Missing => state.change(Change::MakeDir { path: prefix.clone() }),
            }
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let dir = normalize(dir)?;
        state.require_dir(&dir)?;
        for change in state.journal.take_for_dir(&dir) {
            let applied = state.durable.apply(&change);
            debug_assert!(applied, "synced change with a false premise: {change:?}");
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let mut state = self.state.lock();
        state.call_ok()?;
        Ok(state.live.entry(&normalize(path)?) != Entry::Missing)
    }

    /// Locks live in the state, not in files: a crash makes a state with none held (the
    /// process that held them is gone). The lock file is created like any file.
    fn try_lock(&self, path: &Path, owner: &str) -> io::Result<Lock> {
        let path = normalize(path)?;
        self.open(&path, OpenMode::Create)?;
        let mut state = self.state.lock();
        state.call_ok()?;
        if let Some(holder) = state.locks.get(&path) {
            return Ok(Lock::HeldBy(holder.clone()));
        }
        state.locks.insert(path.clone(), owner.to_string());
        Ok(Lock::Taken(LockGuard::new(Box::new(SimLock { state: Arc::clone(&self.state), path }))))
    }
}

/// A lock held in a [`SimFs`]; dropping it releases it.
struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl File for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut state = self.state.lock();
        state.call_ok()?;
        if let Some(fault) = state.faults.reads {
            return Err(fault.error());
        }
        Ok(state.image(self.inode)?.read(buf, offset))
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        match state.call() {
            None => {
                let room = state.room();
                let image = state.image(self.inode)?;
                let fits = image.len().saturating_add(room).saturating_sub(offset).min(buf.len() as u64) as usize;
                if fits > 0 {
                    image.write(buf.get(..fits).unwrap_or_default(), offset)?;
                }
                if fits < buf.len() { Err(os_error(ENOSPC)) } else { Ok(()) }
            }
            Some(Fault::ShortWrite) => {
                let half = buf.get(..buf.len() / 2).unwrap_or_default();
                state.image(self.inode)?.write(half, offset)?;
                Err(os_error(ENOSPC))
            }
            Some(fault) => Err(fault.error()),
        }
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.state.lock();
        let fault = state.call();
        let image = state.image(self.inode)?;
        match fault {
            None => {
                image.sync();
                Ok(())
            }
            Some(fault) => {
                image.lose_pending();
                Err(fault.error())
            }
        }
    }

    fn len(&self) -> io::Result<u64> {
        let mut state = self.state.lock();
        state.call_ok()?;
        Ok(state.image(self.inode)?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        state.call_ok()?;
        let room = state.room();
        let image = state.image(self.inode)?;
        if len > image.len().saturating_add(room) {
            return Err(os_error(ENOSPC));
        }
        image.set_len(len)
    }
}
