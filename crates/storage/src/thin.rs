//! Thin nodes: how the cache keeps a clean node it is evicting piece by piece, and how readers
//! see any node.
//!
//! Eviction takes a clean node in two steps. First its basements or buffers go and only its
//! *layout* stays (the head that routes keys — pivots and children, or basements' first keys —
//! and where each section lies in the node's block): a few hundred bytes instead of a node's
//! megabytes. A reader that reaches a thin node reads, checks and decodes the one section it
//! needs (partial fetch), and the section stays with the thin node until evicted in turn. A
//! buffer cut into pieces (node kind 5, `node::pieces`) stays compressed, its checksum and
//! directory checked once: each reader decodes the pieces its window overlaps. Only a
//! thin node chosen again, with no section left, is dropped from memory whole. So the routing
//! part of the tree, small and on every path, stays in memory while its bulk comes and goes.
//!
//! Writers never see a thin node: `NodeStore::take` and `get` read the whole node. A thin node is
//! always clean: its block holds exactly its version, and readers reach it under their tree's
//! read lock, so no writer can replace the node and free the block while they read it.

use std::ops::{Bound, Deref};
use std::sync::Arc;

use crate::error::Result;
use crate::file::BlockAddr;
use crate::node::basement::Basement;
use crate::node::buffer::Buffer;
use crate::node::codec::{Head, Layout};
use crate::node::pieces::PiecedBuffer;
use crate::node::{Node, NodeId, child_index, child_index_below};
use crate::store::{CachedNode, NodeStore};

/// A section read alone into a thin node.
#[derive(Clone)]
pub(crate) enum Part {
    Basement(Arc<Basement>),
    Buffer(Arc<Buffer>),
    /// A buffer in pieces, kept compressed; readers decode the pieces of their window.
    Pieces(Arc<PiecedBuffer>),
}

impl Part {
    fn memory_bytes(&self) -> usize {
        match self {
            Part::Basement(basement) => basement.memory_bytes(),
            Part::Buffer(buffer) => buffer.size_bytes(),
            Part::Pieces(pieces) => pieces.memory_bytes(),
        }
    }
}

/// A clean node reduced to its layout and the sections readers asked for since.
pub(crate) struct Thin {
    pub id: NodeId,
    pub block: BlockAddr,
    pub layout: Arc<Layout>,
    parts: Vec<Option<Part>>,
}

impl Thin {
    pub fn new(id: NodeId, block: BlockAddr, layout: Arc<Layout>) -> Thin {
        let parts = vec![None; layout.sections.len()];
        Thin { id, block, layout, parts }
    }

    pub fn memory_bytes(&self) -> usize {
        let parts: usize = self.parts.iter().flatten().map(Part::memory_bytes).sum();
        self.layout.memory_bytes() + parts + self.parts.len() * std::mem::size_of::<Option<Part>>()
    }

    pub fn part(&self, index: usize) -> Option<&Part> {
        self.parts.get(index).and_then(Option::as_ref)
    }

    pub fn has_parts(&self) -> bool {
        self.parts.iter().any(Option::is_some)
    }

    /// This thin node with one more section in memory.
    pub fn with_part(&self, index: usize, part: Part) -> Thin {
        let mut parts = self.parts.clone();
        if let Some(slot) = parts.get_mut(index) {
            *slot = Some(part);
        }
        Thin { id: self.id, block: self.block, layout: Arc::clone(&self.layout), parts }
    }

    /// The same node with the same sections, its block copied to `block` (compaction).
    pub fn moved_to(&self, block: BlockAddr) -> Thin {
        Thin { id: self.id, block, layout: Arc::clone(&self.layout), parts: self.parts.clone() }
    }

    /// This thin node with no section in memory.
    pub fn without_parts(&self) -> Thin {
        Thin::new(self.id, self.block, Arc::clone(&self.layout))
    }
}

/// A part as a reader holds it: borrowed from a whole node, shared with a thin one, or its own
/// (the pieces of a buffer decoded for one window).
pub(crate) enum Held<'a, T> {
    Borrowed(&'a T),
    Shared(Arc<T>),
    Owned(T),
}

impl<T> Deref for Held<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Held::Borrowed(value) => value,
            Held::Shared(value) => value,
            Held::Owned(value) => value,
        }
    }
}

/// What of a node is in memory, as the cache holds it and a reader sees it: whole, or thin
/// with its sections read as they are needed.
#[derive(Clone)]
pub(crate) enum View {
    Whole(Arc<CachedNode>),
    Thin(Arc<Thin>),
}

impl View {
    /// The memory this much of the node holds, as charged to the cache.
    pub fn memory_bytes(&self) -> usize {
        match self {
            View::Whole(node) => node.memory_bytes(),
            View::Thin(thin) => thin.memory_bytes(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        match self {
            View::Whole(node) => matches!(&***node, Node::Leaf(_)),
            View::Thin(thin) => matches!(thin.layout.head, Head::Leaf { .. }),
        }
    }

    /// The thin node, when section `index` (a child's buffer, or a basement) is one a reader
    /// would have to read from its block.
    pub fn unread_section(&self, index: usize) -> Option<&Arc<Thin>> {
        match self {
            View::Thin(thin) if index < thin.layout.sections.len() && thin.part(index).is_none() => Some(thin),
            _ => None,
        }
    }

    /// The node's height (0 for a leaf).
    pub fn height(&self) -> u32 {
        match self {
            View::Whole(node) => node.height(),
            View::Thin(thin) => match &thin.layout.head {
                Head::Internal { height, .. } => *height,
                Head::Leaf { .. } => 0,
            },
        }
    }

    /// An internal node's pivots and children (none for a leaf).
    fn routing(&self) -> (&[Vec<u8>], &[NodeId]) {
        match self {
            View::Whole(node) => match &***node {
                Node::Internal(internal) => (&internal.pivots, &internal.children),
                Node::Leaf(_) => (&[], &[]),
            },
            View::Thin(thin) => match &thin.layout.head {
                Head::Internal { pivots, children, .. } => (pivots, children),
                Head::Leaf { .. } => (&[], &[]),
            },
        }
    }

    pub fn pivots(&self) -> &[Vec<u8>] {
        self.routing().0
    }

    pub fn children(&self) -> &[NodeId] {
        self.routing().1
    }

    pub fn child_index(&self, key: &[u8]) -> usize {
        child_index(self.pivots(), key)
    }

    pub fn child_index_below(&self, key: &[u8]) -> usize {
        child_index_below(self.pivots(), key)
    }

    /// The buffer of an internal node's child `index`, with every message for keys within
    /// `[lo, hi]` (and perhaps others: a pieced buffer read thin gives the pieces that overlap).
    pub fn buffer(
        &self,
        store: &NodeStore,
        index: usize,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Result<Option<Held<'_, Buffer>>> {
        match self {
            View::Whole(node) => match &***node {
                Node::Internal(internal) => Ok(internal.buffers.get(index).map(Held::Borrowed)),
                Node::Leaf(_) => Ok(None),
            },
            View::Thin(thin) => match store.part(thin, index)? {
                Some(Part::Buffer(buffer)) => Ok(Some(Held::Shared(buffer))),
                Some(Part::Pieces(pieces)) => Ok(Some(Held::Owned(pieces.messages_within(lo, hi)?))),
                _ => Ok(None),
            },
        }
    }

    /// A leaf's basement count (0 for an internal node).
    pub fn basement_count(&self) -> usize {
        match self {
            View::Whole(node) => match &***node {
                Node::Leaf(leaf) => leaf.basements().len(),
                Node::Internal(_) => 0,
            },
            View::Thin(thin) => match &thin.layout.head {
                Head::Leaf { .. } => thin.layout.sections.len(),
                Head::Internal { .. } => 0,
            },
        }
    }

    /// The first key of a leaf's basement `basement`, for basements after the first (those a
    /// leaf routes by: the first also owns the keys below its first); `None` for the first.
    fn first_key(&self, basement: usize) -> Option<&[u8]> {
        if basement == 0 {
            return None;
        }
        match self {
            View::Whole(node) => match &***node {
                Node::Leaf(leaf) => leaf.basements().get(basement).and_then(Basement::first_key),
                Node::Internal(_) => None,
            },
            View::Thin(thin) => match &thin.layout.head {
                Head::Leaf { first_keys } => basement.checked_sub(1).and_then(|i| first_keys.get(i)).map(Vec::as_slice),
                Head::Internal { .. } => None,
            },
        }
    }

    /// The basement that owns `key`.
    pub fn basement_index(&self, key: &[u8]) -> usize {
        self.basements_where(|first| first <= key)
    }

    /// The basement holding the greatest keys below `key`.
    pub fn basement_index_below(&self, key: &[u8]) -> usize {
        self.basements_where(|first| first < key)
    }

    /// How many basements after the first have a first key satisfying `pred` (a prefix).
    fn basements_where(&self, pred: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (1, self.basement_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.first_key(mid).is_some_and(&pred) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo - 1
    }

    /// The first key of basement `index` when it is not the leaf's first.
    pub fn basement_lower(&self, index: usize) -> Option<&[u8]> {
        self.first_key(index)
    }

    /// The first key owned by the basement after `index`, if there is one.
    pub fn basement_upper(&self, index: usize) -> Option<&[u8]> {
        self.first_key(index + 1)
    }

    pub fn basement(&self, store: &NodeStore, index: usize) -> Result<Option<Held<'_, Basement>>> {
        match self {
            View::Whole(node) => match &***node {
                Node::Leaf(leaf) => Ok(leaf.basements().get(index).map(Held::Borrowed)),
                Node::Internal(_) => Ok(None),
            },
            View::Thin(thin) => match store.part(thin, index)? {
                Some(Part::Basement(basement)) => Ok(Some(Held::Shared(basement))),
                _ => Ok(None),
            },
        }
    }
}
