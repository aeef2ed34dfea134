//! `verify`: walks a whole tree and checks every invariant the other modules promise.
//!
//! - node ids: each reachable once (no sharing), heights decreasing by one to leaves at 0;
//! - internal nodes: `children == pivots + 1 == buffers`, at most `fanout` children (a root at
//!   least two), pivots strictly ascending and strictly inside the node's range, buffers within
//!   the node size (the root's too, when flushing is inline), each message under the right pivot;
//! - sequence order: every buffered message for a key is newer than all the key's history below
//!   it, and a range delete is newer than the history of every key it covers below;
//! - leaves: keys strictly ascending within the node's range, basements within bounds, versions
//!   ascending and not all deletions, sizes exactly accounted.

use std::collections::{BTreeMap, HashSet};

use crate::error::{Error, Result};
use crate::message::Seq;
use crate::node::basement::Basement;
use crate::node::buffer::Buffer;
use crate::node::leaf::Leaf;
use crate::node::{Internal, Node, NodeId};
use crate::options::FlushMode;
use crate::tree::{Ctx, Tree};

/// The newest sequence number of each key's history within a subtree.
type Newest = BTreeMap<Vec<u8>, Seq>;

struct Place<'a> {
    lo: Option<&'a [u8]>,
    hi: Option<&'a [u8]>,
    height: Option<u32>,
    is_root: bool,
    /// A background flush is between its steps: a node it pushed a buffer into may be over the
    /// node size until its next step.
    flushing: bool,
}

impl Tree {
    /// Checks the tree; adds its node ids to `seen`, failing if one is already there.
    /// Checks the tree whose root is `root`; the caller holds the tree's shape lock
    /// (`lock_shape`), which is where `root` comes from.
    pub fn verify(&self, ctx: &Ctx<'_>, root: Option<NodeId>, seen: &mut HashSet<NodeId>) -> Result<()> {
        let Some(root) = root else { return Ok(()) };
        let flushing = self.flushing.try_lock().is_none();
        let place = Place { lo: None, hi: None, height: None, is_root: true, flushing };
        verify_node(ctx, root, &place, seen).map(|_| ())
    }
}

fn fail(what: String) -> Error {
    Error::Invariant(what)
}

fn verify_node(ctx: &Ctx<'_>, id: NodeId, place: &Place<'_>, seen: &mut HashSet<NodeId>) -> Result<Newest> {
    if !seen.insert(id) {
        return Err(fail(format!("node {} reachable twice", id.0)));
    }
    let node = ctx.store.get(id)?;
    if let Some(height) = place.height
        && node.height() != height
    {
        return Err(fail(format!("node {} has height {}, expected {height}", id.0, node.height())));
    }
    match &**node {
        Node::Leaf(leaf) => verify_leaf(ctx, id, leaf, place),
        Node::Internal(internal) => verify_internal(ctx, id, internal, place, seen),
    }
}

fn verify_internal(
    ctx: &Ctx<'_>,
    id: NodeId,
    node: &Internal,
    place: &Place<'_>,
    seen: &mut HashSet<NodeId>,
) -> Result<Newest> {
    let n = node.children.len();
    let here = |what: &str| fail(format!("internal node {}: {what}", id.0));
    if node.height == 0 || node.pivots.len() + 1 != n || node.buffers.len() != n {
        return Err(here("children, pivots and buffers do not line up"));
    }
    if n > ctx.options.fanout || (place.is_root && n < 2) {
        return Err(here(&format!("{n} children")));
    }
    let unbounded = (place.is_root && ctx.options.flush_mode == FlushMode::Background) || place.flushing;
    if node.buffered_bytes() > ctx.options.node_size_bytes && !unbounded {
        return Err(here(&format!("buffers hold {} bytes", node.buffered_bytes())));
    }
    for (index, pivot) in node.pivots.iter().enumerate() {
        let above_previous = match index.checked_sub(1).and_then(|i| node.pivots.get(i)) {
            Some(previous) => previous < pivot,
            None => place.lo.is_none_or(|lo| lo < pivot.as_slice()),
        };
        if !above_previous || place.hi.is_some_and(|hi| pivot.as_slice() >= hi) {
            return Err(here(&format!("pivot {index} out of order")));
        }
    }
    let mut newest = Newest::new();
    for (index, (&child, buffer)) in node.children.iter().zip(&node.buffers).enumerate() {
        let (lo, hi) = node.child_range(index, place.lo, place.hi);
        let child_place = Place { lo, hi, height: Some(node.height - 1), is_root: false, flushing: place.flushing };
        let below = verify_node(ctx, child, &child_place, seen)?;
        verify_buffer(buffer, lo, hi, &below).map_err(|e| here(&format!("buffer {index}: {e}")))?;
        newest.extend(below);
        for (key, events) in buffer.points() {
            if let Some((seq, _)) = events.last() {
                newest.insert(key, *seq);
            }
        }
    }
    Ok(newest)
}

fn verify_buffer(buffer: &Buffer, lo: Option<&[u8]>, hi: Option<&[u8]>, below: &Newest) -> Result<(), String> {
    if buffer.size_bytes() != buffer.recompute_size() {
        return Err("size accounting is off".into());
    }
    if !buffer.seal_fits() {
        return Err("a buffer's seal covers runs or range deletes it does not have".into());
    }
    if !buffer.runs_sorted() {
        return Err("a run's keys are out of order".into());
    }
    let inside = |key: &[u8]| lo.is_none_or(|lo| key >= lo) && hi.is_none_or(|hi| key < hi);
    for (key, events) in buffer.points() {
        if !inside(&key) || events.is_empty() {
            return Err("message outside its child's range, or an empty message list".into());
        }
        if events.windows(2).any(|w| matches!(w, [a, b] if a.0 >= b.0)) {
            return Err("messages of a key out of sequence order".into());
        }
        let oldest = events.first().map_or(0, |(seq, _)| *seq);
        if below.get(&key).is_some_and(|&newest_below| newest_below >= oldest) {
            return Err("a buffered message is older than the history below it".into());
        }
    }
    for range in buffer.ranges() {
        let end_inside = match (range.end.as_deref(), hi) {
            (Some(end), Some(hi)) => end <= hi,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => true,
        };
        let empty = range.end.as_deref().is_some_and(|end| end <= range.start.as_slice());
        if !inside(&range.start) || !end_inside || empty {
            return Err("range delete outside its child's range".into());
        }
        let covered = below.range::<[u8], _>((
            std::ops::Bound::Included(range.start.as_slice()),
            range.end.as_deref().map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
        ));
        if covered.into_iter().any(|(_, &seq)| seq >= range.seq) {
            return Err("a range delete is older than the history below it".into());
        }
    }
    Ok(())
}

fn verify_leaf(ctx: &Ctx<'_>, id: NodeId, leaf: &Leaf, place: &Place<'_>) -> Result<Newest> {
    let here = |what: String| fail(format!("leaf {}: {what}", id.0));
    if leaf.size_bytes() > ctx.options.node_size_bytes && leaf.basements().len() > 1 {
        return Err(here(format!("{} bytes", leaf.size_bytes())));
    }
    let basements = leaf.basements();
    let mut newest = Newest::new();
    let mut previous: Option<&[u8]> = None;
    for (index, basement) in basements.iter().enumerate() {
        if basement.is_empty() && basements.len() > 1 {
            return Err(here(format!("basement {index} is empty")));
        }
        // The flat bytes must read back as they would from disk: lengths, tags, key and
        // version order, no deletion-only entry.
        if Basement::decode(basement.len(), basement.encoded()).as_ref() != Ok(basement) {
            return Err(here(format!("basement {index} does not decode to itself")));
        }
        if basement.size_bytes() > ctx.options.basement_size_bytes && basement.len() > 1 {
            return Err(here(format!("basement {index} holds {} bytes", basement.size_bytes())));
        }
        for entry in basement.entries() {
            let key = entry.key();
            let ordered = previous.is_none_or(|p| p < key);
            let inside = place.lo.is_none_or(|lo| key >= lo) && place.hi.is_none_or(|hi| key < hi);
            if !ordered || !inside {
                return Err(here(format!("key out of order or outside the leaf's range in basement {index}")));
            }
            if let Some((seq, _)) = entry.versions().last() {
                newest.insert(key.to_vec(), seq);
            }
            previous = Some(key);
        }
    }
    Ok(newest)
}
