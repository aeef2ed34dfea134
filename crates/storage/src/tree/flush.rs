//! Flushing: moving a buffer's messages one level down, and keeping the tree's shape.
//!
//! When an internal node's buffers hold more than the node size, the buffer of its heaviest
//! child is moved down as one unit: into the child's own buffers (routed by the child's pivots)
//! or, for a leaf, applied to its basements. A child left over the node size is flushed in turn
//! (a cascade). The node repeats with its new heaviest child until it fits. Moving the heaviest
//! buffer makes each flush carry at least 1/fanout of the node's messages, which is where the
//! Bε-tree's write amortization comes from.
//!
//! After a child changes, `rebalance_child` keeps the shape: a leaf over the node size or an
//! internal node over the fanout splits (its pieces inserted beside it in the parent, the
//! parent's buffer for it split at the new pivots); one under a quarter of that merges with a
//! sibling (their buffers in the parent are concatenated: their key ranges are disjoint).
//! `fix_root` grows the tree when the root splits and shrinks it when the root has one child.

use crate::error::{Error, Result};
use crate::node::buffer::Buffer;
use crate::node::leaf::Incoming;
use crate::node::{Internal, Node, NodeId};
use crate::stats::Counters;
use crate::tree::Ctx;

/// Policy: whether a node's buffers are full.
pub(super) fn needs_flush(ctx: &Ctx<'_>, node: &Node) -> bool {
    match node {
        Node::Internal(internal) => internal.buffered_bytes() > ctx.options.node_size_bytes,
        Node::Leaf(_) => false,
    }
}

/// Flushes the node's heaviest buffers until its buffers fit in the node size.
pub(super) fn flush_node(ctx: &Ctx<'_>, id: NodeId) -> Result<()> {
    let mut node = ctx.store.take(id)?;
    let result = match &mut node {
        Node::Internal(internal) => flush_until_fits(ctx, internal),
        Node::Leaf(_) => Ok(()),
    };
    ctx.put(id, node)?;
    result
}

fn flush_until_fits(ctx: &Ctx<'_>, internal: &mut Internal) -> Result<()> {
    while internal.buffered_bytes() > ctx.options.node_size_bytes {
        let index = internal.heaviest_child();
        flush_child(ctx, internal, index)?;
    }
    Ok(())
}

/// Moves the whole buffer of child `index` into the child, then rebalances the child.
pub(super) fn flush_child(ctx: &Ctx<'_>, parent: &mut Internal, index: usize) -> Result<()> {
    flush_child_then(ctx, parent, index, Cascade::Now)
}

/// Whether a child left over the node size by a flush is flushed in turn at once, or left for
/// the background flusher to find (`tree::detached`), which flushes into leaves without the
/// tree's lock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Cascade {
    Now,
    Later,
}

pub(super) fn flush_child_then(
    ctx: &Ctx<'_>,
    parent: &mut Internal,
    index: usize,
    cascade_mode: Cascade,
) -> Result<()> {
    let (Some(buffer), Some(&child_id)) = (parent.buffers.get_mut(index), parent.children.get(index)) else {
        return Err(Error::Invariant(format!("flush of missing child {index}")));
    };
    ctx.counters.flushed(parent.height, buffer.size_bytes());
    Counters::add(&ctx.counters.flushes, 1);
    let mut child = ctx.store.take(child_id)?;
    let cascade = match &mut child {
        Node::Internal(internal) => {
            // Runs move on as bytes, cut at the child's pivots; no message is decoded.
            let (runs, ranges) = buffer.take_runs();
            internal.push_runs(&runs, ctx.horizon);
            for range in &ranges {
                internal.push_range(range);
            }
            internal.buffered_bytes() > ctx.options.node_size_bytes
        }
        Node::Leaf(leaf) => {
            let (points, ranges) = buffer.take_merged(ctx.horizon);
            let basement = ctx.options.basement_size_bytes;
            leaf.apply(Incoming { points, ranges }, ctx.horizon, &ctx.options.update, basement);
            false
        }
    };
    ctx.put(child_id, child)?;
    debug_assert!(parent.buffers.get(index).is_some_and(Buffer::is_empty), "a flushed buffer kept messages");
    if cascade && cascade_mode == Cascade::Now {
        Counters::add(&ctx.counters.cascades, 1);
        flush_node(ctx, child_id)?;
    }
    rebalance_child(ctx, parent, index)?;
    Ok(())
}

enum Shape {
    Fine,
    TooBig,
    TooSmall,
}

fn shape(ctx: &Ctx<'_>, node: &Node) -> Shape {
    let node_size = ctx.options.node_size_bytes;
    let fanout = ctx.options.fanout;
    match node {
        // A leaf splits at basement boundaries: one basement (a single huge value) stays whole.
        Node::Leaf(leaf) if leaf.size_bytes() > node_size && leaf.basements().len() > 1 => Shape::TooBig,
        Node::Leaf(leaf) if leaf.size_bytes() < node_size / 4 => Shape::TooSmall,
        Node::Internal(internal) if internal.children.len() > fanout => Shape::TooBig,
        Node::Internal(internal) if internal.children.len() < (fanout / 4).max(2) => Shape::TooSmall,
        _ => Shape::Fine,
    }
}

/// Splits or merges child `index` if its size calls for it. Returns whether the parent's
/// children changed (so that its own parent should look at it in turn).
pub(super) fn rebalance_child(ctx: &Ctx<'_>, parent: &mut Internal, index: usize) -> Result<bool> {
    let Some(&child_id) = parent.children.get(index) else { return Ok(false) };
    let shape = shape(ctx, &*ctx.store.get(child_id)?);
    match shape {
        Shape::TooBig => split_child(ctx, parent, index),
        Shape::TooSmall if parent.children.len() > 1 => merge_child(ctx, parent, index),
        _ => Ok(false),
    }
}

/// Splits child `index` into pieces and inserts them after it.
fn split_child(ctx: &Ctx<'_>, parent: &mut Internal, index: usize) -> Result<bool> {
    let Some(&child_id) = parent.children.get(index) else { return Ok(false) };
    let mut child = ctx.store.take(child_id)?;
    let pieces: Vec<(Vec<u8>, Node)> = match &mut child {
        Node::Leaf(leaf) => {
            Counters::add(&ctx.counters.leaf_splits, 1);
            let pieces = leaf.split(ctx.options.node_size_bytes / 2);
            pieces.into_iter().map(|(pivot, leaf)| (pivot, Node::Leaf(leaf))).collect()
        }
        Node::Internal(internal) => {
            Counters::add(&ctx.counters.internal_splits, 1);
            split_internal(internal, ctx.options.fanout)
                .into_iter()
                .map(|(pivot, internal)| (pivot, Node::Internal(internal)))
                .collect()
        }
    };
    ctx.put(child_id, child)?;
    insert_pieces(ctx, parent, index, pieces)
}

/// Puts the pieces split off child `index` (each with the pivot before it) after it, with the
/// child's buffer split at their pivots. Returns whether there were any.
pub(super) fn insert_pieces(
    ctx: &Ctx<'_>,
    parent: &mut Internal,
    index: usize,
    pieces: Vec<(Vec<u8>, Node)>,
) -> Result<bool> {
    let Some(buffer) = parent.buffers.get_mut(index) else { return Ok(false) };
    let mut parts: Vec<Buffer> = pieces.iter().rev().map(|(pivot, _)| buffer.split_off(pivot)).collect();
    parts.reverse();
    let changed = !pieces.is_empty();
    for (offset, ((pivot, node), part)) in pieces.into_iter().zip(parts).enumerate() {
        let id = ctx.allocate(node)?;
        parent.pivots.insert(index + offset, pivot);
        parent.children.insert(index + 1 + offset, id);
        parent.buffers.insert(index + 1 + offset, part);
    }
    assert!(parent.is_well_formed(), "a split left its parent with children, buffers and pivots out of step");
    debug_assert!(parent.pivots.windows(2).all(|pair| pair[0] < pair[1]), "a split left pivots out of order");
    Ok(changed)
}

/// Splits an internal node with too many children into pieces of at most `fanout` children.
/// Returns the pieces after the first, each with the pivot that separates it from the previous.
fn split_internal(internal: &mut Internal, fanout: usize) -> Vec<(Vec<u8>, Internal)> {
    let count = internal.children.len();
    let pieces = count.div_ceil(fanout).max(2);
    let per_piece = count.div_ceil(pieces);
    let mut out = Vec::new();
    // Peel pieces off the right end, so that indices on the left stay valid.
    while internal.children.len() > per_piece {
        let at = internal.children.len() - per_piece;
        let children = internal.children.split_off(at);
        let buffers = internal.buffers.split_off(at);
        let pivots = internal.pivots.split_off(at);
        let Some(separator) = internal.pivots.pop() else { break };
        out.push((separator, Internal { height: internal.height, pivots, children, buffers }));
    }
    out.reverse();
    debug_assert!(
        std::iter::once(&*internal)
            .chain(out.iter().map(|(_, piece)| piece))
            .all(|piece| { piece.is_well_formed() && piece.children.len() <= fanout }),
        "an internal split into malformed or overfull pieces"
    );
    out
}

/// Merges child `index` with a neighbour; re-splits the result if it came out too big.
fn merge_child(ctx: &Ctx<'_>, parent: &mut Internal, index: usize) -> Result<bool> {
    let left_index = if index + 1 < parent.children.len() { index } else { index.saturating_sub(1) };
    let right_index = left_index + 1;
    let (Some(&left_id), Some(&right_id)) = (parent.children.get(left_index), parent.children.get(right_index)) else {
        return Ok(false);
    };
    let right = ctx.store.take(right_id)?;
    let mut left = ctx.store.take(left_id)?;
    let separator = parent.pivots.remove(left_index);
    let merged = match (&mut left, right) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            l.merge(r, ctx.options.basement_size_bytes);
            Ok(())
        }
        (Node::Internal(l), Node::Internal(r)) => {
            l.pivots.push(separator);
            l.pivots.extend(r.pivots);
            l.children.extend(r.children);
            l.buffers.extend(r.buffers);
            Ok(())
        }
        _ => Err(Error::Invariant("siblings of different heights".into())),
    };
    if let Node::Internal(l) = &left {
        assert!(l.is_well_formed(), "a merge of internal nodes out of step");
    }
    ctx.put(left_id, left)?;
    merged?;
    ctx.store.free(right_id);
    parent.children.remove(right_index);
    let right_buffer = parent.buffers.remove(right_index);
    if let Some(left_buffer) = parent.buffers.get_mut(left_index) {
        right_buffer.append_to(left_buffer);
    }
    Counters::add(&ctx.counters.merges, 1);
    // Two internal nodes' buffers together may overfill the merged node.
    if needs_flush(ctx, &*ctx.store.get(left_id)?) {
        flush_node(ctx, left_id)?;
    }
    if matches!(shape(ctx, &*ctx.store.get(left_id)?), Shape::TooBig) {
        split_child(ctx, parent, left_index)?;
    }
    Ok(true)
}

/// Rebalances each node on `path` (root first) bottom-up after the node below it changed,
/// stopping where a parent's children stay the same; then fixes the root.
pub(super) fn fix_path(ctx: &Ctx<'_>, root: &mut NodeId, path: Vec<(NodeId, usize)>) -> Result<()> {
    for (parent_id, index) in path.into_iter().rev() {
        let mut node = ctx.store.take(parent_id)?;
        let changed = match &mut node {
            Node::Internal(parent) => rebalance_child(ctx, parent, index),
            Node::Leaf(_) => Ok(false),
        };
        ctx.put(parent_id, node)?;
        if !changed? {
            break;
        }
    }
    fix_root(ctx, root)
}

/// Grows the tree while the root is too big; shrinks it while the root has a single child.
pub(super) fn fix_root(ctx: &Ctx<'_>, root: &mut NodeId) -> Result<()> {
    loop {
        let node = ctx.store.get(*root)?;
        let too_big = matches!(shape(ctx, &node), Shape::TooBig);
        let lone_child = match &**node {
            Node::Internal(internal) if internal.children.len() == 1 => {
                internal.children.first().copied().zip(internal.buffers.first().map(Buffer::is_empty))
            }
            _ => None,
        };
        let height = node.height();
        let overfull = needs_flush(ctx, &node);
        drop(node);
        if too_big && overfull {
            // A root flushed in the background may hold more than the node size; its pieces
            // will not be the root, so they must fit before it splits.
            flush_node(ctx, *root)?;
            continue;
        }
        if too_big {
            let mut new_root = Internal {
                height: height + 1,
                pivots: Vec::new(),
                children: vec![*root],
                buffers: vec![Buffer::default()],
            };
            split_child(ctx, &mut new_root, 0)?;
            *root = ctx.allocate(Node::Internal(new_root))?;
            continue;
        }
        match lone_child {
            Some((child, true)) => {
                ctx.store.free(*root);
                *root = child;
            }
            Some((_, false)) => {
                let mut node = ctx.store.take(*root)?;
                let result = match &mut node {
                    Node::Internal(internal) => flush_child(ctx, internal, 0),
                    Node::Leaf(_) => Ok(()),
                };
                ctx.put(*root, node)?;
                result?;
            }
            None => return Ok(()),
        }
    }
}
