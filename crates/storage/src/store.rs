//! The node store: every node of every tree, by id.
//!
//! Nodes are shared as `Arc<Node>`: a reader clones the `Arc` and reads without holding any
//! store lock; a writer `take`s a node (copying it if a reader still holds it), changes it and
//! `put`s it back. The tree's own lock orders the two (see `tree`), so a writer never changes a
//! node a reader of the same tree is between looking up and reading. This is the seam where the
//! durable engine puts its cache: `get` of an evicted node reads it back from disk.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::node::{Node, NodeId};

const SHARDS: usize = 16;

pub(crate) struct NodeStore {
    shards: [Mutex<HashMap<NodeId, Arc<Node>>>; SHARDS],
    next_id: AtomicU64,
}

impl NodeStore {
    pub fn new() -> NodeStore {
        NodeStore { shards: std::array::from_fn(|_| Mutex::new(HashMap::new())), next_id: AtomicU64::new(1) }
    }

    fn shard(&self, id: NodeId) -> &Mutex<HashMap<NodeId, Arc<Node>>> {
        &self.shards[(id.0 as usize) % SHARDS]
    }

    pub fn allocate(&self, node: Node) -> NodeId {
        let id = NodeId(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.shard(id).lock().insert(id, Arc::new(node));
        id
    }

    pub fn get(&self, id: NodeId) -> Result<Arc<Node>> {
        self.shard(id).lock().get(&id).cloned().ok_or_else(|| missing(id))
    }

    /// Removes the node for changing; the caller `put`s it back.
    pub fn take(&self, id: NodeId) -> Result<Node> {
        let shared = self.shard(id).lock().remove(&id).ok_or_else(|| missing(id))?;
        Ok(Arc::try_unwrap(shared).unwrap_or_else(|still_shared| (*still_shared).clone()))
    }

    pub fn put(&self, id: NodeId, node: Node) {
        self.shard(id).lock().insert(id, Arc::new(node));
    }

    pub fn free(&self, id: NodeId) {
        self.shard(id).lock().remove(&id);
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }
}

fn missing(id: NodeId) -> Error {
    Error::Corruption(format!("node {} is not in the store", id.0))
}

