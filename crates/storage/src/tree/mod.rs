//! One Bε-tree: a root node id behind the tree's lock, and the operations on its nodes.
//!
//! Locking: the tree's `RwLock` guards its shape. Readers hold it shared while they walk from
//! the root (a point read, or one basement-sized batch of a scan) and release it between
//! batches; writers hold it exclusively while they put messages into the root and while they
//! flush. No lock is held across batches, so a long scan never stalls inserts.
//!
//! Policy and action are apart: `flush::needs_flush` decides, `flush::flush_node` acts.

mod detached;
mod flush;
mod read;
mod verify;
mod write;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use std::time::{Duration, Instant};

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::message::{Seq, UpdateFn};
use crate::node::leaf::Leaf;
use crate::node::{Node, NodeId};
use crate::options::Options;
use crate::stats::Counters;
use crate::store::NodeStore;

pub(crate) use read::{Damage, Direction};
pub(crate) use write::{FlushNeed, TreeMessage};

/// A tree's stable number within the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeId(pub u64);

/// What the tree operations need from the engine.
pub(crate) struct Ctx<'a> {
    pub store: &'a NodeStore,
    pub options: &'a Options,
    pub counters: &'a Counters,
    /// The oldest snapshot any reader may hold: versions and messages older than the newest one
    /// at or below it are invisible to everyone and may be dropped.
    pub horizon: Seq,
    /// How the nodes this context writes are compressed: the tree's choice (`for_tree`), or
    /// `None` for the engine's.
    pub compression: Option<Compression>,
}

impl<'a> Ctx<'a> {
    fn update(&self) -> &UpdateFn {
        &self.options.update
    }

    /// This context for writing `tree`'s nodes (with its compression).
    pub fn for_tree(&self, tree: &Tree) -> Ctx<'a> {
        Ctx { compression: tree.compression(), ..*self }
    }

    fn put(&self, id: NodeId, node: Node) -> Result<()> {
        self.store.put_for(id, node, self.compression)
    }

    fn allocate(&self, node: Node) -> Result<NodeId> {
        self.store.allocate_for(node, self.compression)
    }

    fn replace(&self, id: NodeId, version: u64, node: Node) -> Result<bool> {
        self.store.replace(id, version, node, self.compression)
    }
}

/// A tree's root and shape lock: readers share it, a commit's chunk or a flush step holds it
/// alone. It is std's lock, not parking_lot's: a thread that finds it taken spins briefly and
/// then sleeps until it is released, where parking_lot's yields the core up to seven times
/// first. On a machine whose cores are busy (a writer, the flusher and the evictor all
/// running) each yield hands the core to another thread for a whole scheduler slice, so a
/// reader waiting for a short write-lock hold waited about a millisecond.
pub(crate) struct ShapeLock<T> {
    lock: std::sync::RwLock<T>,
    /// Readers that found the lock taken and sleep until they get it (`write_after_readers`).
    waiting_readers: AtomicUsize,
}

/// How long a writer taking the lock again between two chunks of a commit lets the readers that
/// were waiting get in first: about what a woken thread waits for a core on a busy machine, and
/// a bound on what a commit can lose to readers.
const READERS_FIRST: Duration = Duration::from_millis(1);

impl<T> ShapeLock<T> {
    fn new(value: T) -> ShapeLock<T> {
        ShapeLock { lock: std::sync::RwLock::new(value), waiting_readers: AtomicUsize::new(0) }
    }

    /// Poisoning is ignored, as it was with parking_lot's lock, which has none.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        match self.lock.try_read() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.waiting_readers.fetch_add(1, Ordering::SeqCst);
                let guard = self.lock.read().unwrap_or_else(PoisonError::into_inner);
                self.waiting_readers.fetch_sub(1, Ordering::SeqCst);
                guard
            }
        }
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.lock.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock to write again right after a hold of the same writer, once the readers
    /// that were waiting have had it (for at most `wait`). std's lock never hands a released
    /// write lock to the readers it wakes, and the writer's next `write` comes before they run:
    /// without this, a commit's chunks would keep readers out for the whole commit.
    pub fn write_after_readers(&self, wait: Duration) -> RwLockWriteGuard<'_, T> {
        let started = Instant::now();
        while self.waiting_readers.load(Ordering::SeqCst) > 0 && started.elapsed() < wait {
            std::thread::yield_now();
        }
        self.write()
    }
}

pub(crate) struct Tree {
    pub id: TreeId,
    pub name: String,
    /// `None` once the tree is dropped: readers that found it before see `TreeNotFound`.
    root: ShapeLock<Option<NodeId>>,
    /// The greatest key a writer sent down past the root or appended to the rightmost leaf (see
    /// `write::inject_point`, `write::append_to_leaf`): a later key
    /// at or below it is not an append, and is buffered in the root even when its child's buffer
    /// is empty. Only ever makes a message stop higher, which is always correct; kept in memory,
    /// starting empty. Taken under the root's write lock.
    append_floor: parking_lot::Mutex<Vec<u8>>,
    /// Held for the whole of a background flush (`detached`): one at a time per tree.
    flushing: parking_lot::Mutex<()>,
    /// How this tree's nodes are compressed on disk (`None`: the engine's setting). Not kept by
    /// the engine across restarts: its owner (the document store's catalog) sets it at open.
    compression: parking_lot::Mutex<Option<Compression>>,
}

impl Tree {
    pub fn create(id: TreeId, name: String, store: &NodeStore, compression: Option<Compression>) -> Result<Tree> {
        let root = store.allocate_for(Node::Leaf(Leaf::default()), compression)?;
        let tree = Tree::with_root(id, name, root);
        tree.set_compression(compression);
        Ok(tree)
    }

    /// A tree whose nodes already exist (recovery).
    pub fn with_root(id: TreeId, name: String, root: NodeId) -> Tree {
        Tree {
            id,
            name,
            root: ShapeLock::new(Some(root)),
            append_floor: parking_lot::Mutex::new(Vec::new()),
            flushing: parking_lot::Mutex::new(()),
            compression: parking_lot::Mutex::new(None),
        }
    }

    pub fn compression(&self) -> Option<Compression> {
        *self.compression.lock()
    }

    /// Nodes written from now on are compressed this way; blocks written before keep theirs
    /// (each section records its method) until their node is rewritten.
    pub fn set_compression(&self, compression: Option<Compression>) {
        *self.compression.lock() = compression;
    }

    /// The space of the blocks this tree's nodes were last written to (whole pages; a node not
    /// written yet counts one page), so as of the last checkpoint or eviction of each node.
    /// Reads the heads of internal nodes not in memory (to find their children), never a leaf.
    pub fn block_space(&self, store: &NodeStore) -> Result<u64> {
        let root = self.root.read();
        let Some(id) = *root else { return Err(self.not_found()) };
        // (node, whether it may be internal): a height-1 node's children are leaves.
        let mut pending = vec![(id, true)];
        let mut total = 0;
        while let Some((id, may_be_internal)) = pending.pop() {
            total += store.block_space(id);
            if may_be_internal {
                let view = store.view(id)?;
                let grandchildren = view.height() > 1;
                pending.extend(view.children().iter().map(|child| (*child, grandchildren)));
            }
        }
        Ok(total)
    }

    /// Holds the tree's shape still (no writer, no flush) while the guard lives.
    pub fn lock_shape(&self) -> RwLockReadGuard<'_, Option<NodeId>> {
        self.root.read()
    }

    fn not_found(&self) -> Error {
        Error::TreeNotFound(self.name.clone())
    }

    /// Frees every node; later operations on this tree fail with `TreeNotFound`. Visits nodes,
    /// never keys.
    pub fn drop_nodes(&self, store: &NodeStore) -> Result<()> {
        let mut root = self.root.write();
        let Some(id) = root.take() else { return Ok(()) };
        let mut pending = vec![id];
        while let Some(id) = pending.pop() {
            // The head is enough: a dropped tree's buffers and basements are never read.
            pending.extend(store.view(id)?.children().iter().copied());
            store.free(id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Goal: a commit's chunks let waiting readers in between them.
    use std::sync::Arc;

    use super::*;

    /// A reader that waits while a writer holds the lock gets it before that writer's next hold,
    /// and sees what the first hold wrote. (The wait is long here so that a busy test machine
    /// cannot fail it; the engine waits `READERS_FIRST`.)
    #[test]
    fn a_writer_taking_the_lock_again_lets_waiting_readers_in_first() {
        let lock = Arc::new(ShapeLock::new(0u32));
        let mut guard = lock.write();
        let reader = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || *lock.read())
        };
        while lock.waiting_readers.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        *guard = 1;
        drop(guard);
        let mut again = lock.write_after_readers(Duration::from_secs(30));
        *again = 2;
        drop(again);
        assert_eq!(reader.join().ok(), Some(1), "the waiting reader got in between the two holds");
        assert_eq!(lock.waiting_readers.load(Ordering::SeqCst), 0);
    }
}
