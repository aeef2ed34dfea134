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

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::message::{Seq, UpdateFn};
use crate::node::leaf::Leaf;
use crate::node::{Node, NodeId};
use crate::options::Options;
use crate::stats::Counters;
use crate::store::NodeStore;

pub(crate) use read::Direction;
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
}

impl Ctx<'_> {
    fn update(&self) -> &UpdateFn {
        &self.options.update
    }
}

pub(crate) struct Tree {
    pub id: TreeId,
    pub name: String,
    /// `None` once the tree is dropped: readers that found it before see `TreeNotFound`.
    root: RwLock<Option<NodeId>>,
    /// The greatest key a writer sent down past the root or appended to the rightmost leaf (see
    /// `write::inject_point`, `write::append_to_leaf`): a later key
    /// at or below it is not an append, and is buffered in the root even when its child's buffer
    /// is empty. Only ever makes a message stop higher, which is always correct; kept in memory,
    /// starting empty. Taken under the root's write lock.
    append_floor: parking_lot::Mutex<Vec<u8>>,
    /// Held for the whole of a background flush (`detached`): one at a time per tree.
    flushing: parking_lot::Mutex<()>,
}

impl Tree {
    pub fn create(id: TreeId, name: String, store: &NodeStore) -> Result<Tree> {
        let root = store.allocate(Node::Leaf(Leaf::default()))?;
        Ok(Tree::with_root(id, name, root))
    }

    /// A tree whose nodes already exist (recovery).
    pub fn with_root(id: TreeId, name: String, root: NodeId) -> Tree {
        Tree {
            id,
            name,
            root: RwLock::new(Some(root)),
            append_floor: parking_lot::Mutex::new(Vec::new()),
            flushing: parking_lot::Mutex::new(()),
        }
    }

    /// Holds the tree's shape still (no writer, no flush) while the guard lives.
    pub fn lock_shape(&self) -> parking_lot::RwLockReadGuard<'_, Option<NodeId>> {
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
