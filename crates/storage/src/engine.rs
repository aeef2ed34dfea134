//! The engine: named trees in one node store, commits in one order, snapshots.
//!
//! Commit order: a commit takes the commit lock, checks its insert-if-absent conditions against
//! the latest state, takes a run of sequence numbers, puts its messages into each tree, and only
//! then publishes its last sequence number as visible. A snapshot is a visible sequence number,
//! so it sees every commit whole or not at all, across trees.
//!
//! Snapshots are registered while alive; the oldest one is the *horizon* below which versions
//! superseded by a newer one can be dropped. A snapshot registers under the same lock the
//! horizon is computed under, and takes the visible sequence number then, which is never below a
//! horizon computed earlier.
//!
//! Threads: any number of readers and committers; one background flusher thread (in
//! `FlushMode::Background`) that takes trees whose root buffers are full.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::message::Seq;
use crate::options::{FlushMode, Options};
use crate::snapshot::Snapshot;
use crate::stats::{Counters, Stats, TRACKED_LEVELS};
use crate::store::NodeStore;
use crate::transaction::Transaction;
use crate::tree::{Ctx, Tree, TreeId};

#[derive(Default)]
struct Catalog {
    by_name: BTreeMap<String, Arc<Tree>>,
    by_id: HashMap<TreeId, Arc<Tree>>,
    next_id: u64,
}

pub(crate) struct Shared {
    pub options: Options,
    pub store: NodeStore,
    pub counters: Counters,
    catalog: RwLock<Catalog>,
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
    pub shutting_down: AtomicBool,
}

impl Shared {
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx { store: &self.store, options: &self.options, counters: &self.counters, horizon: self.horizon() }
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
            if let Ok(tree) = self.tree(id) {
                // An error here is the engine's own inconsistency; verify() reports it, and the
                // next commit's flush meets it again, so the flusher just moves on.
                let _ = tree.flush_if_needed(&self.ctx());
            }
        }
    }
}

/// A Bε-tree storage engine holding any number of named trees.
pub struct Engine {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
}

impl Engine {
    /// An engine whose nodes live in memory (the durable engine opens a directory instead).
    pub fn open_in_memory(options: Options) -> Result<Engine> {
        options.validate()?;
        let shared = Arc::new(Shared {
            options,
            store: NodeStore::new(),
            counters: Counters::default(),
            catalog: RwLock::new(Catalog::default()),
            commit_lock: Mutex::new(()),
            next_seq: AtomicU64::new(1),
            visible: AtomicU64::new(0),
            snapshots: Mutex::new(BTreeMap::new()),
            flush_queue: Mutex::new(None),
            flush_pending: Mutex::new(HashSet::new()),
            shutting_down: AtomicBool::new(false),
        });
        let flusher = match shared.options.flush_mode {
            FlushMode::Inline => None,
            FlushMode::Background => {
                let (sender, receiver) = channel();
                *shared.flush_queue.lock() = Some(sender);
                let worker = Arc::clone(&shared);
                let handle = std::thread::Builder::new()
                    .name("strata-flusher".into())
                    .spawn(move || worker.run_flusher(receiver))
                    .map_err(|e| Error::InvalidArgument(format!("cannot start the flusher: {e}")))?;
                Some(handle)
            }
        };
        Ok(Engine { shared, flusher })
    }

    pub fn options(&self) -> &Options {
        &self.shared.options
    }

    pub fn create_tree(&self, name: &str) -> Result<TreeId> {
        let mut catalog = self.shared.catalog.write();
        if catalog.by_name.contains_key(name) {
            return Err(Error::TreeExists(name.to_string()));
        }
        catalog.next_id += 1;
        let id = TreeId(catalog.next_id);
        let tree = Arc::new(Tree::create(id, name.to_string(), &self.shared.store));
        catalog.by_name.insert(name.to_string(), Arc::clone(&tree));
        catalog.by_id.insert(id, tree);
        Ok(id)
    }

    pub fn tree(&self, name: &str) -> Option<TreeId> {
        self.shared.catalog.read().by_name.get(name).map(|tree| tree.id)
    }

    pub fn list_trees(&self) -> Vec<String> {
        self.shared.catalog.read().by_name.keys().cloned().collect()
    }

    /// Drops a tree and frees its nodes without visiting its keys. Open snapshots and scans of
    /// it see `TreeNotFound` from then on.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        let tree = {
            let mut catalog = self.shared.catalog.write();
            let tree = catalog.by_name.remove(name).ok_or_else(|| Error::TreeNotFound(name.to_string()))?;
            catalog.by_id.remove(&tree.id);
            tree
        };
        tree.drop_nodes(&self.shared.store)
    }

    pub fn begin(&self) -> Transaction<'_> {
        Transaction::new(&self.shared)
    }

    /// A consistent view of every tree as of the newest visible commit.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(Arc::clone(&self.shared))
    }

    /// Runs every pending flush now, on this thread (tests and benchmarks).
    pub fn flush_all(&self) -> Result<()> {
        let trees: Vec<Arc<Tree>> = self.shared.catalog.read().by_id.values().cloned().collect();
        for tree in trees {
            tree.flush_if_needed(&self.shared.ctx())?;
        }
        Ok(())
    }

    /// Checks every invariant of every tree and of the node store.
    pub fn verify(&self) -> Result<()> {
        let catalog = self.shared.catalog.read();
        let ctx = self.shared.ctx();
        let mut seen = HashSet::new();
        for tree in catalog.by_id.values() {
            tree.verify(&ctx, &mut seen)?;
        }
        let stored = self.shared.store.len();
        if stored != seen.len() {
            return Err(Error::Invariant(format!("{stored} nodes stored, {} reachable", seen.len())));
        }
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.counters.snapshot();
        let mut buffered = [0u64; TRACKED_LEVELS];
        let mut nodes = 0;
        let trees: Vec<Arc<Tree>> = self.shared.catalog.read().by_id.values().cloned().collect();
        for tree in trees {
            // A tree dropped meanwhile simply stops counting.
            let _ = tree.gather_sizes(&self.shared.store, &mut buffered, &mut nodes);
        }
        stats.buffered_bytes_by_height = buffered;
        stats.node_count = nodes;
        stats
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.shutting_down.store(true, Ordering::Release);
        self.shared.flush_queue.lock().take();
        if let Some(handle) = self.flusher.take() {
            let _ = handle.join();
        }
    }
}

impl Counters {
    pub(crate) fn commit(&self) {
        Counters::add(&self.commits, 1);
    }
}
