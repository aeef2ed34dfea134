//! The engine: named trees in one node store, commits in one order, snapshots, and (when opened
//! on a directory) the redo log, checkpoints and recovery.
//!
//! Commit order: a commit takes the commit lock, checks its insert-if-absent conditions against
//! the latest state, appends its record to the redo log, puts its messages into each tree, and
//! only then publishes its last sequence number as visible. A snapshot is a visible sequence
//! number, so it sees every commit whole or not at all, across trees. Durability waits happen
//! after the commit lock is released, so many commits share one log sync.
//!
//! Snapshots are registered while alive; the oldest one is the *horizon* below which versions
//! superseded by a newer one can be dropped. A snapshot registers under the same lock the
//! horizon is computed under, and takes the visible sequence number then, which is never below a
//! horizon computed earlier.
//!
//! Threads: any number of readers and committers; a background flusher (in
//! `FlushMode::Background`) that takes trees whose root buffers are full; and, for a durable
//! engine, a maintenance thread that syncs the log for `Periodic` commits and runs checkpoints,
//! and (in `Background` mode) an evictor that writes nodes out when the cache is over budget.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::checkpoint::CheckpointState;
use crate::error::{Error, Result};
use crate::file::DataFile;
use crate::io::{FileSystem, RealFs};
use crate::message::Seq;
use crate::options::{Durability, FlushMode, Options};
use crate::pending::PendingWrites;
use crate::snapshot::Snapshot;
use crate::stats::{Counters, Stats};
use crate::store::NodeStore;
use crate::transaction::Transaction;
use crate::tree::{Ctx, Tree, TreeId, TreeMessage};
use crate::wal::Log;
use crate::wal::record::{LogWrite, frame_create_tree, frame_drop_tree};

#[derive(Default)]
pub(crate) struct Catalog {
    pub by_name: BTreeMap<String, Arc<Tree>>,
    pub by_id: HashMap<TreeId, Arc<Tree>>,
    pub next_id: u64,
}

/// The disk side of a durable engine.
pub(crate) struct Durable {
    pub data: Arc<DataFile>,
    pub log: Log,
    pub checkpoint: Mutex<CheckpointState>,
    /// What recovery did when the engine opened.
    pub recovery: crate::recovery::RecoveryReport,
    /// The directory's lock, released when the engine's last thread and snapshot are gone.
    pub _lock: crate::io::LockGuard,
    /// The file system the engine's files live on (a backup writes its copy through it).
    pub fs: Arc<dyn FileSystem>,
}

pub(crate) struct Shared {
    pub options: Options,
    pub store: NodeStore,
    pub counters: Counters,
    pub catalog: RwLock<Catalog>,
    /// Held by a commit from its checks to its publication: commits are applied one at a time.
    pub commit_lock: Mutex<()>,
    /// The next sequence number to hand out; changed only under `commit_lock`.
    pub next_seq: AtomicU64,
    /// The newest sequence number whose commit is fully applied.
    pub visible: AtomicU64,
    /// Live snapshots: sequence number → how many.
    snapshots: Mutex<BTreeMap<Seq, usize>>,
    flush_queue: Mutex<Option<Sender<TreeId>>>,
    flush_pending: Mutex<HashSet<TreeId>>,
    /// Set once recovery is done, for an engine opened on a directory.
    pub durable: OnceLock<Durable>,
    stop_maintenance: Mutex<bool>,
    maintenance_wake: Condvar,
}

impl Shared {
    pub fn new(options: Options, store: NodeStore) -> Shared {
        Shared {
            options,
            store,
            counters: Counters::default(),
            catalog: RwLock::new(Catalog::default()),
            commit_lock: Mutex::new(()),
            next_seq: AtomicU64::new(1),
            visible: AtomicU64::new(0),
            snapshots: Mutex::new(BTreeMap::new()),
            flush_queue: Mutex::new(None),
            flush_pending: Mutex::new(HashSet::new()),
            durable: OnceLock::new(),
            stop_maintenance: Mutex::new(false),
            maintenance_wake: Condvar::new(),
        }
    }

    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            store: &self.store,
            options: &self.options,
            counters: &self.counters,
            horizon: self.horizon(),
            compression: None,
        }
    }

    pub fn horizon(&self) -> Seq {
        let snapshots = self.snapshots.lock();
        snapshots.keys().next().copied().unwrap_or_else(|| self.visible.load(Ordering::Acquire))
    }

    pub fn register_snapshot(&self) -> Seq {
        let mut snapshots = self.snapshots.lock();
        let seq = self.visible.load(Ordering::Acquire);
        *snapshots.entry(seq).or_default() += 1;
        seq
    }

    pub fn release_snapshot(&self, seq: Seq) {
        let mut snapshots = self.snapshots.lock();
        if let Some(count) = snapshots.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                snapshots.remove(&seq);
            }
        }
    }

    pub fn tree(&self, id: TreeId) -> Result<Arc<Tree>> {
        self.catalog.read().by_id.get(&id).cloned().ok_or_else(|| Error::TreeNotFound(format!("#{}", id.0)))
    }

    pub fn log(&self) -> Option<&Log> {
        self.durable.get().map(|d| &d.log)
    }

    /// Asks the flusher to look at a tree; a tree already queued is not queued twice.
    pub fn request_flush(&self, id: TreeId) {
        if !self.flush_pending.lock().insert(id) {
            return;
        }
        if let Some(queue) = self.flush_queue.lock().as_ref() {
            let _ = queue.send(id);
        }
    }

    fn run_flusher(&self, queue: Receiver<TreeId>) {
        while let Ok(id) = queue.recv() {
            self.flush_pending.lock().remove(&id);
            if let Ok(tree) = self.tree(id)
                && let Err(error) = tree.flush_if_needed(&self.ctx())
            {
                self.flush_failed(&error);
            }
        }
    }

    /// A flush failed: an I/O error, or a node that does not read back. The tree may be left
    /// half-changed in memory (the log still holds every acknowledged commit), so the engine
    /// stops taking commits, whichever thread flushed: the next commit reports this error, and
    /// reopening recovers from the last checkpoint and the log.
    pub fn flush_failed(&self, error: &Error) {
        if let Some(log) = self.log() {
            log.stop("flush failed", error);
        }
        // Counted once the log is stopped: whoever sees the count sees commits refused.
        Counters::add(&self.counters.flush_failures, 1);
    }

    fn run_maintenance(&self) {
        let Some(durable) = self.durable.get() else { return };
        // The first round runs at once: a checkpoint after recovery is due before any wait.
        loop {
            // A failed sync stops the log; commits report it, so the loop has nothing to add. A
            // failed write (a full disk) is retried here, as is a failed node write.
            let _ = durable.log.sync_periodic();
            self.store.retry_write_back();
            if crate::checkpoint::due(self, durable) {
                let _ = crate::checkpoint::checkpoint(self);
                // The checkpoint dropped the node versions it held; writers' copies and the
                // evictor's buffers are gone too, so this is when freed memory is plentiful.
                crate::allocator::release_free_memory();
            }
            let mut stop = self.stop_maintenance.lock();
            if !*stop {
                self.maintenance_wake.wait_for(&mut stop, self.options.log_sync_interval);
            }
            if *stop {
                break;
            }
        }
    }

    /// Adds a tree with a given id (creation and replay). Caller holds the commit lock.
    pub fn insert_tree(&self, id: TreeId, name: &str) -> Result<()> {
        let mut catalog = self.catalog.write();
        if catalog.by_name.contains_key(name) {
            return Err(Error::TreeExists(name.to_string()));
        }
        let tree = Arc::new(Tree::create(id, name.to_string(), &self.store, None)?);
        catalog.next_id = catalog.next_id.max(id.0);
        catalog.by_name.insert(name.to_string(), Arc::clone(&tree));
        catalog.by_id.insert(id, tree);
        Ok(())
    }

    /// Removes a tree and frees its nodes (drops and replay). Caller holds the commit lock.
    pub fn remove_tree(&self, id: TreeId) -> Result<()> {
        let tree = {
            let mut catalog = self.catalog.write();
            let tree = catalog.by_id.remove(&id).ok_or_else(|| Error::TreeNotFound(format!("#{}", id.0)))?;
            catalog.by_name.remove(&tree.name);
            tree
        };
        tree.drop_nodes(&self.store)
    }

    /// Puts a commit's writes into their trees, write `i` with sequence number `first + i`.
    /// Caller holds the commit lock. Returns each tree's need for a flush.
    pub fn apply_writes(
        &self,
        first: Seq,
        writes: Vec<(TreeId, LogWrite)>,
    ) -> Result<Vec<(Arc<Tree>, crate::tree::FlushNeed)>> {
        let mut by_tree: Vec<(TreeId, Vec<TreeMessage>)> = Vec::new();
        for (offset, (id, write)) in writes.into_iter().enumerate() {
            let message = TreeMessage::from_write(first + offset as u64, write);
            match by_tree.iter_mut().find(|(t, _)| *t == id) {
                Some((_, messages)) => messages.push(message),
                None => by_tree.push((id, vec![message])),
            }
        }
        let ctx = self.ctx();
        let mut needs = Vec::with_capacity(by_tree.len());
        for (id, messages) in by_tree {
            let tree = self.tree(id)?;
            let need = tree.write(&ctx, messages)?;
            needs.push((tree, need));
        }
        Ok(needs)
    }

    pub fn publish(&self, last: Seq) {
        self.next_seq.store(last + 1, Ordering::Release);
        self.visible.store(last, Ordering::Release);
    }
}

/// A Bε-tree storage engine holding any number of named trees.
pub struct Engine {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
    maintenance: Option<JoinHandle<()>>,
    evictor: Option<JoinHandle<()>>,
}

impl Engine {
    /// An engine whose nodes live in memory only.
    pub fn open_in_memory(options: Options) -> Result<Engine> {
        options.validate()?;
        let store = NodeStore::new(None, options.cache_size_bytes, options.partial_eviction);
        Engine::start(Arc::new(Shared::new(options, store)))
    }

    /// Opens (or creates) a durable engine in `dir`, recovering whatever a crash left there.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Engine> {
        Engine::open_with(Arc::new(RealFs), dir.as_ref(), options)
    }

    /// `open` through any file system (tests pass a simulated one).
    pub fn open_with(fs: Arc<dyn FileSystem>, dir: &Path, options: Options) -> Result<Engine> {
        options.validate()?;
        let shared = crate::recovery::recover(fs, dir, options)?;
        Engine::start(Arc::new(shared))
    }

    fn start(shared: Arc<Shared>) -> Result<Engine> {
        let spawn = |name: &str, work: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(work)
                .map_err(|e| Error::InvalidArgument(format!("cannot start {name}: {e}")))
        };
        let flusher = match shared.options.flush_mode {
            FlushMode::Inline => None,
            FlushMode::Background => {
                let (sender, receiver) = channel();
                *shared.flush_queue.lock() = Some(sender);
                let worker = Arc::clone(&shared);
                Some(spawn("strata-flusher", Box::new(move || worker.run_flusher(receiver)))?)
            }
        };
        let (maintenance, evictor) = match shared.durable.get() {
            None => (None, None),
            Some(_) => {
                let worker = Arc::clone(&shared);
                let maintenance = spawn("strata-maintenance", Box::new(move || worker.run_maintenance()))?;
                let evictor = match shared.options.flush_mode {
                    FlushMode::Inline => None,
                    FlushMode::Background => {
                        shared.store.start_evictor();
                        let worker = Arc::clone(&shared);
                        Some(spawn("strata-evictor", Box::new(move || worker.store.run_evictor()))?)
                    }
                };
                (Some(maintenance), evictor)
            }
        };
        Ok(Engine { shared, flusher, maintenance, evictor })
    }

    pub fn options(&self) -> &Options {
        &self.shared.options
    }

    /// Creates a tree; durable when it returns.
    pub fn create_tree(&self, name: &str) -> Result<TreeId> {
        let (id, position) = {
            let _commit = self.shared.commit_lock.lock();
            if self.shared.catalog.read().by_name.contains_key(name) {
                return Err(Error::TreeExists(name.to_string()));
            }
            let id = TreeId(self.shared.catalog.read().next_id + 1);
            let seq = self.shared.next_seq.load(Ordering::Acquire);
            let position = match self.shared.log() {
                Some(log) => Some(log.append(|buffer| frame_create_tree(buffer, seq, id.0, name))?),
                None => None,
            };
            self.shared.insert_tree(id, name)?;
            self.shared.publish(seq);
            (id, position)
        };
        self.sync_catalog_change(position)?;
        Ok(id)
    }

    fn sync_catalog_change(&self, position: Option<u64>) -> Result<()> {
        match (self.shared.log(), position) {
            (Some(log), Some(position)) => log.sync_to(position),
            _ => Ok(()),
        }
    }

    pub fn tree(&self, name: &str) -> Option<TreeId> {
        self.shared.catalog.read().by_name.get(name).map(|tree| tree.id)
    }

    /// How `tree`'s nodes are compressed from now on (`None`: as the engine's options say).
    /// Blocks already written keep theirs until rewritten. Not kept across restarts: the
    /// caller sets it again after each open (the document store keeps it in its catalog).
    pub fn set_tree_compression(&self, tree: TreeId, compression: Option<crate::Compression>) -> Result<()> {
        self.shared.tree(tree)?.set_compression(compression);
        Ok(())
    }

    /// The space of the blocks `tree`'s nodes were last written to: what the tree takes in the
    /// data file, compressed (reads the heads of internal nodes not in memory).
    pub fn tree_block_space(&self, tree: TreeId) -> Result<u64> {
        self.shared.tree(tree)?.block_space(&self.shared.store)
    }

    pub fn list_trees(&self) -> Vec<String> {
        self.shared.catalog.read().by_name.keys().cloned().collect()
    }

    /// Drops a tree and frees its nodes without visiting its keys; durable when it returns. Open snapshots and scans of
    /// it see `TreeNotFound` from then on.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        let position = {
            let _commit = self.shared.commit_lock.lock();
            let id = self.tree(name).ok_or_else(|| Error::TreeNotFound(name.to_string()))?;
            let seq = self.shared.next_seq.load(Ordering::Acquire);
            let position = match self.shared.log() {
                Some(log) => Some(log.append(|buffer| frame_drop_tree(buffer, seq, id.0))?),
                None => None,
            };
            self.shared.publish(seq);
            self.shared.remove_tree(id)?;
            position
        };
        self.sync_catalog_change(position)
    }

    pub fn begin(&self) -> Transaction<'_> {
        Transaction::new(&self.shared)
    }

    /// A consistent view of every tree as of the newest visible commit.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(Arc::clone(&self.shared))
    }

    /// An empty record of a long transaction's writes, readable before they commit
    /// (`Snapshot::with_pending`) and committed by `commit_pending`.
    pub fn pending(&self) -> PendingWrites {
        PendingWrites::new(Arc::clone(&self.shared.options.update))
    }

    /// Commits the pending writes in the order made, atomically, as `Transaction::commit`
    /// does: the same size checks, and an insert-if-absent that meets a key (in the latest
    /// committed state, or put by an earlier write) fails the whole commit with `KeyExists`.
    /// The writes are consumed either way; snapshots overlaid with them keep reading them.
    pub fn commit_pending(&self, pending: PendingWrites, durability: Durability) -> Result<Seq> {
        Transaction::with_writes(&self.shared, pending.into_writes()).commit(durability)
    }

    /// Runs every pending flush now, on this thread (tests and benchmarks).
    pub fn flush_all(&self) -> Result<()> {
        let trees: Vec<Arc<Tree>> = self.shared.catalog.read().by_id.values().cloned().collect();
        for tree in trees {
            tree.flush_if_needed(&self.shared.ctx())?;
        }
        Ok(())
    }

    /// Makes everything committed so far durable in the data file, so that recovery replays
    /// nothing before this point. Does nothing for an in-memory engine.
    pub fn checkpoint(&self) -> Result<()> {
        crate::checkpoint::checkpoint(&self.shared)
    }

    /// Hot backup: a consistent copy of the engine as of a checkpoint taken now, written to
    /// `destination` (created; refused if it already holds a data file) while commits go on.
    /// The copy opens as an ordinary data directory and holds every commit acknowledged before
    /// the call. Later checkpoints wait for the copy; nothing else does.
    pub fn backup(&self, destination: &Path) -> Result<crate::BackupReport> {
        crate::backup::backup(&self.shared, destination)
    }

    /// Gives the data file's free space back to the operating system while commits go on:
    /// moves blocks from its end into holes nearer its start, checkpoints, and cuts the file
    /// after its last block (see `compact`). Fails for an in-memory engine.
    pub fn compact(&self) -> Result<crate::CompactReport> {
        crate::compact::compact(&self.shared)
    }

    /// Syncs the log: every commit so far is durable when this returns.
    pub fn sync(&self) -> Result<()> {
        match self.shared.log() {
            Some(log) => log.sync_all(),
            None => Ok(()),
        }
    }

    /// Stops the engine's threads and drops it without a checkpoint or any other write of its
    /// own: what a crash leaves on disk, without the crash. Crash tests use it; leaking the
    /// engine instead left its maintenance thread syncing a dead disk every `log_sync_interval`,
    /// one thread per simulated crash (14,000 in one test run).
    pub fn halt(mut self) {
        self.stop_threads();
    }

    /// Clean shutdown: stops the background threads and checkpoints, so that the next open
    /// replays nothing, then compacts the file until at most a tenth of it is free (within a
    /// time budget: `compact::at_close`; a full disk only ends that early).
    ///
    /// On a full disk the final checkpoint may not fit: then the log is synced instead, and
    /// `NoSpace` says so (every commit is durable in the log; the next open replays it).
    pub fn close(mut self) -> Result<()> {
        self.stop_threads();
        let checkpointed = crate::checkpoint::checkpoint(&self.shared)
            .and_then(|()| crate::compact::at_close(&self.shared).or_else(ignore_no_space));
        match checkpointed {
            Err(Error::NoSpace { source, .. }) => {
                self.sync()?;
                let context =
                    "the final checkpoint did not fit; every commit is in the log, which the next start replays";
                Err(Error::NoSpace { context: context.into(), source })
            }
            other => other,
        }
    }

    /// Checks every invariant of every tree and of the node store.
    pub fn verify(&self) -> Result<()> {
        // One consistent view, as a checkpoint's capture takes it: no commit, no tree created,
        // and no flush (the background flusher splits and merges nodes) between walking the
        // trees and counting the stored nodes.
        let _commit = self.shared.commit_lock.lock();
        let catalog = self.shared.catalog.read();
        let mut trees: Vec<&Arc<Tree>> = catalog.by_id.values().collect();
        trees.sort_by_key(|tree| tree.id);
        let guards: Vec<_> = trees.iter().map(|tree| tree.lock_shape()).collect();
        let ctx = self.shared.ctx();
        let mut seen = HashSet::new();
        for (tree, guard) in trees.iter().zip(&guards) {
            tree.verify(&ctx, **guard, &mut seen)?;
        }
        let stored = self.shared.store.len();
        if stored != seen.len() {
            return Err(Error::Invariant(format!("{stored} nodes stored, {} reachable", seen.len())));
        }
        Ok(())
    }

    /// The engine's counters and sizes. Never reads the disk: buffered bytes are those of the
    /// nodes in memory (`serverStatus` calls this on a live server, whatever the data's size).
    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.counters.snapshot();
        let census = self.shared.store.census();
        stats.node_count = census.nodes;
        stats.block_bytes = census.block_bytes;
        stats.buffered_bytes_by_height = census.buffered_bytes_by_height;
        stats.cache_mix = census.mix;
        crate::stats::add_cache_and_disk(&mut stats, &self.shared);
        stats
    }

    fn stop_threads(&mut self) {
        *self.shared.stop_maintenance.lock() = true;
        self.shared.maintenance_wake.notify_all();
        if let Some(handle) = self.maintenance.take() {
            let _ = handle.join();
        }
        self.shared.flush_queue.lock().take();
        if let Some(handle) = self.flusher.take() {
            let _ = handle.join();
        }
        self.shared.store.stop_evictor();
        if let Some(handle) = self.evictor.take() {
            let _ = handle.join();
        }
    }
}

/// A compaction that ran out of room leaves the last checkpoint as it was: nothing to report.
fn ignore_no_space(error: Error) -> Result<()> {
    match error {
        Error::NoSpace { .. } => Ok(()),
        other => Err(other),
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let running = self.maintenance.is_some() || self.flusher.is_some();
        self.stop_threads();
        if running {
            // Best effort; `close` reports the error.
            let _ = crate::checkpoint::checkpoint(&self.shared);
        }
    }
}

/// Seconds since an instant, for statistics.
pub(crate) fn elapsed_micros(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)
}
