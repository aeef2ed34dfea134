//! Tree nodes. A node is addressed by its [`NodeId`] through the node store, never by a Rust
//! reference, so that it can be written out, evicted and read back without the tree noticing.
//!
//! An internal node of height `h >= 1` has `n` children (height `h - 1`), `n - 1` strictly
//! ascending pivots and one message buffer per child. Child `i` owns the keys in
//! `[pivots[i - 1], pivots[i])` (unbounded at the ends, within the node's own range).

pub mod basement;
pub mod buffer;
pub mod codec;
mod flat;
pub mod leaf;
pub mod pieces;

use crate::message::{Event, Seq};
use buffer::{Buffer, RangeDelete};
use leaf::Leaf;

/// The name of a node in the node store; never reused while the engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u64);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Internal(Internal),
    Leaf(Leaf),
}

impl Node {
    /// The size that decides flushes and splits.
    pub fn size_bytes(&self) -> usize {
        match self {
            Node::Internal(internal) => internal.size_bytes(),
            Node::Leaf(leaf) => leaf.size_bytes(),
        }
    }

    /// The memory the node holds, as charged to the cache (a leaf's allocations with their
    /// spare capacity; an internal node's estimate).
    pub fn memory_bytes(&self) -> usize {
        match self {
            Node::Internal(internal) => internal.size_bytes(),
            Node::Leaf(leaf) => leaf.memory_bytes(),
        }
    }

    pub fn height(&self) -> u32 {
        match self {
            Node::Internal(internal) => internal.height,
            Node::Leaf(_) => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Internal {
    pub height: u32,
    pub pivots: Vec<Vec<u8>>,
    pub children: Vec<NodeId>,
    pub buffers: Vec<Buffer>,
}

/// The child that owns `key`, by an internal node's pivots.
pub fn child_index(pivots: &[Vec<u8>], key: &[u8]) -> usize {
    pivots.partition_point(|pivot| pivot.as_slice() <= key)
}

/// The child holding the greatest keys below `key`, by an internal node's pivots.
pub fn child_index_below(pivots: &[Vec<u8>], key: &[u8]) -> usize {
    pivots.partition_point(|pivot| pivot.as_slice() < key)
}

/// The key range `[lo, hi)` of child `index` by an internal node's pivots, given the node's own.
pub fn child_range<'a>(
    pivots: &'a [Vec<u8>],
    index: usize,
    lo: Option<&'a [u8]>,
    hi: Option<&'a [u8]>,
) -> (Option<&'a [u8]>, Option<&'a [u8]>) {
    let child_lo = if index == 0 { lo } else { pivots.get(index - 1).map(Vec::as_slice) };
    let child_hi = pivots.get(index).map(Vec::as_slice).or(hi);
    (child_lo, child_hi)
}

/// Bytes charged per pivot beyond its key, for the child id and the buffer header.
const PIVOT_OVERHEAD_BYTES: usize = 48;

impl Internal {
    /// Whether the node has a buffer per child and a pivot between each two (a node that has
    /// not would route a message to no buffer, or to the wrong child).
    pub fn is_well_formed(&self) -> bool {
        !self.children.is_empty()
            && self.buffers.len() == self.children.len()
            && self.pivots.len() + 1 == self.children.len()
    }

    /// The child that owns `key`.
    pub fn child_index(&self, key: &[u8]) -> usize {
        child_index(&self.pivots, key)
    }

    /// The child holding the greatest keys below `key`.
    pub fn child_index_below(&self, key: &[u8]) -> usize {
        child_index_below(&self.pivots, key)
    }

    /// The key range `[lo, hi)` of child `index`, given this node's own range.
    pub fn child_range<'a>(
        &'a self,
        index: usize,
        lo: Option<&'a [u8]>,
        hi: Option<&'a [u8]>,
    ) -> (Option<&'a [u8]>, Option<&'a [u8]>) {
        child_range(&self.pivots, index, lo, hi)
    }

    pub fn buffered_bytes(&self) -> usize {
        self.buffers.iter().map(Buffer::size_bytes).sum()
    }

    pub fn size_bytes(&self) -> usize {
        let pivots: usize = self.pivots.iter().map(|p| p.len() + PIVOT_OVERHEAD_BYTES).sum();
        pivots + self.buffered_bytes()
    }

    /// The child whose buffer holds the most bytes.
    pub fn heaviest_child(&self) -> usize {
        let mut best = 0;
        let mut best_size = 0;
        for (index, buffer) in self.buffers.iter().enumerate() {
            if buffer.size_bytes() > best_size {
                best = index;
                best_size = buffer.size_bytes();
            }
        }
        best
    }

    /// Routes a point message to its child's buffer.
    /// `head_bytes`: see `Buffer::push_all`.
    pub fn push_point(
        &mut self,
        key: &[u8],
        events: impl IntoIterator<Item = (Seq, Event)>,
        horizon: Seq,
        head_bytes: usize,
    ) {
        assert!(self.is_well_formed(), "a message routed through a malformed internal node");
        let index = self.child_index(key);
        if let Some(buffer) = self.buffers.get_mut(index) {
            buffer.push_all(key, events, horizon, head_bytes);
        }
    }

    /// Routes runs of messages (from a flush above) to the buffers of the children they cover.
    pub fn push_runs(&mut self, runs: &[buffer::Run], horizon: Seq) {
        assert!(self.is_well_formed(), "messages routed through a malformed internal node");
        for (index, buffer) in self.buffers.iter_mut().enumerate() {
            let (lo, hi) = child_range(&self.pivots, index, None, None);
            buffer.push_runs(runs, lo, hi, horizon);
        }
    }

    /// Routes a range delete to the buffers of every child it overlaps, clipped to each.
    pub fn push_range(&mut self, range: &RangeDelete) {
        assert!(self.is_well_formed(), "a range delete routed through a malformed internal node");
        let first = self.child_index(&range.start);
        let last = match &range.end {
            Some(end) => self.child_index_below(end),
            None => self.children.len().saturating_sub(1),
        };
        for index in first..=last {
            let (lo, hi) = self.child_range(index, None, None);
            if let (Some(piece), Some(buffer)) = (range.clip(lo, hi), self.buffers.get_mut(index)) {
                buffer.push_range(piece);
            }
        }
    }
}
