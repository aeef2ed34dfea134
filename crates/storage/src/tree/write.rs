//! Putting a commit's messages into a tree.
//!
//! A message enters at the root's buffer for its child. An append (a key that goes to the
//! rightmost child at every level, whose buffers are all empty) goes straight down to the
//! rightmost leaf instead: there is no older message for its key above, so applying it lower
//! keeps sequence order, and increasing keys (the ObjectId `_id` case) do not pay for buffering
//! and flushing they do not need. Only a key above the tree's append floor (the last key
//! appended) is tried as an append. Every other key is buffered, which is what makes random
//! inserts cheap once the tree is larger than memory.
//!
//! A commit's messages for one tree are applied in runs: consecutive messages bound for the
//! root's buffers share one take and put of the root, and consecutive appends share one take,
//! put and rebalance of the rightmost leaf (`buffer_in_root`, `append_to_leaf`).

use crate::error::Result;
use crate::message::{Event, Seq};
use crate::node::buffer::{Buffer, RangeDelete, Run};
use crate::node::leaf::{Incoming, Leaf};
use crate::node::{Internal, Node, NodeId};
use crate::options::FlushMode;
use crate::stats::Counters;
use crate::tree::flush::{fix_path, fix_root, flush_node, needs_flush};
use crate::tree::{Ctx, READERS_FIRST, Tree};
use crate::wal::record::LogWrite;

/// How many of a commit's messages a tree takes under one hold of its lock. A thousand index
/// entries took 1.5 ms under the lock (iibench beyond memory), and each query waited for it;
/// a hold now costs a reader at most about a tenth of that (between two holds the writer lets
/// the readers that were waiting in first: `ShapeLock::write_after_readers`).
const LOCKED_MESSAGES: usize = 128;

pub(crate) enum TreeMessage {
    Point { key: Vec<u8>, seq: Seq, event: Event },
    Range(RangeDelete),
}

impl TreeMessage {
    pub fn from_write(seq: Seq, write: LogWrite) -> TreeMessage {
        match write {
            LogWrite::Put(key, value) => TreeMessage::Point { key, seq, event: Event::Put(value) },
            LogWrite::Delete(key) => TreeMessage::Point { key, seq, event: Event::Delete },
            LogWrite::Update(key, operand) => TreeMessage::Point { key, seq, event: Event::Update(operand) },
            LogWrite::DeleteRange(start, end) => TreeMessage::Range(RangeDelete { start, end, seq }),
        }
    }
}

/// After a write, how urgently the root wants flushing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushNeed {
    None,
    /// Over the node size: the background flusher should take it.
    Wanted,
    /// Over twice the node size: the writer flushes it itself before its next commit.
    Urgent,
}

impl Tree {
    /// Applies a commit's messages to this tree, in order.
    ///
    /// The tree's lock is taken for `LOCKED_MESSAGES` messages at a time, not for the whole
    /// commit: readers of the tree get in between. None of them sees part of the commit: a
    /// reader's snapshot is at most the last published commit, and this one is published once
    /// every tree has all of it; checkpoints and other commits wait for the commit lock.
    pub fn write(&self, ctx: &Ctx<'_>, messages: Vec<TreeMessage>) -> Result<FlushNeed> {
        let ctx = &ctx.for_tree(self);
        let mut messages = messages.into_iter().peekable();
        let mut first = true;
        loop {
            let waiting = std::time::Instant::now();
            let mut guard = if first { self.root.write() } else { self.root.write_after_readers(READERS_FIRST) };
            first = false;
            Counters::add(&ctx.counters.tree_lock_wait_micros, waiting.elapsed().as_micros() as u64);
            let mut root = guard.ok_or_else(|| self.not_found())?;
            let chunk = messages.by_ref().take(LOCKED_MESSAGES);
            let result = write_all(ctx, &mut root, &mut self.append_floor.lock(), chunk);
            *guard = Some(root);
            result?;
            if messages.peek().is_none() {
                // Still under the lock: without it the flusher may have the root out.
                return flush_need(ctx, root);
            }
        }
    }
}

/// How urgently a root wants flushing. The caller holds the tree's lock.
fn flush_need(ctx: &Ctx<'_>, root: NodeId) -> Result<FlushNeed> {
    let node = ctx.store.get(root)?;
    let buffered = match &**node {
        Node::Internal(internal) => internal.buffered_bytes(),
        Node::Leaf(_) => 0,
    };
    Ok(if buffered > 2 * ctx.options.node_size_bytes {
        FlushNeed::Urgent
    } else if buffered > ctx.options.node_size_bytes {
        FlushNeed::Wanted
    } else {
        FlushNeed::None
    })
}

fn write_all(
    ctx: &Ctx<'_>,
    root: &mut NodeId,
    floor: &mut Vec<u8>,
    messages: impl Iterator<Item = TreeMessage>,
) -> Result<()> {
    let mut messages = messages.peekable();
    loop {
        buffer_in_root(ctx, *root, floor, &mut messages)?;
        let Some(message) = messages.next() else { break };
        Counters::add(&ctx.counters.messages, 1);
        match message {
            TreeMessage::Point { key, seq, event } => inject_point(ctx, root, floor, (key, seq, event), &mut messages)?,
            TreeMessage::Range(range) => inject_range(ctx, root, range)?,
        }
    }
    if ctx.options.flush_mode == FlushMode::Inline {
        flush_root(ctx, root)?;
    }
    Ok(())
}

/// Buffers the point messages at the head of `messages` in the root, with one take and put of
/// the root for all of them (instead of one per message: a commit of a thousand random index
/// entries), for as long as each is one that `inject_point` would buffer in the root too: not an
/// append down the open rightmost path, not a range delete.
fn buffer_in_root<I: Iterator<Item = TreeMessage>>(
    ctx: &Ctx<'_>,
    root: NodeId,
    floor: &[u8],
    messages: &mut std::iter::Peekable<I>,
) -> Result<()> {
    let buffers_in = |node: &Node, message: &TreeMessage| match (node, message) {
        (Node::Internal(internal), TreeMessage::Point { key, .. }) => !descends_from_root(internal, floor, key),
        _ => false,
    };
    match messages.peek() {
        Some(message) if buffers_in(&*ctx.store.get(root)?, message) => {}
        _ => return Ok(()),
    }
    let mut node = ctx.store.take(root)?;
    while let Some(TreeMessage::Point { key, seq, event }) = messages.next_if(|message| buffers_in(&node, message)) {
        Counters::add(&ctx.counters.messages, 1);
        if let Node::Internal(internal) = &mut node {
            internal.push_point(&key, [(seq, event)], ctx.horizon, ctx.options.basement_size_bytes);
        }
    }
    ctx.put(root, node)
}

/// Whether a point message for `key` passes this internal node by (to its rightmost child,
/// whose buffer is empty) rather than being buffered in it.
fn descends(internal: &Internal, key: &[u8]) -> bool {
    let index = internal.child_index(key);
    index + 1 == internal.children.len() && internal.buffers.get(index).is_some_and(Buffer::is_empty)
}

/// `descends` at the root, for a key above the tree's append floor only. Without the floor, a
/// random key (an index entry) landing in the rightmost child's range while that buffer was empty
/// went down on its own, with a take and put (or a read from disk) of the node below, and broke
/// the commit's run of messages buffered in the root.
fn descends_from_root(internal: &Internal, floor: &[u8], key: &[u8]) -> bool {
    key > floor && descends(internal, key)
}

fn flush_root(ctx: &Ctx<'_>, root: &mut NodeId) -> Result<()> {
    if needs_flush(ctx, &*ctx.store.get(*root)?) {
        flush_node(ctx, *root)?;
        fix_root(ctx, root)?;
    }
    Ok(())
}

fn inject_point<I: Iterator<Item = TreeMessage>>(
    ctx: &Ctx<'_>,
    root: &mut NodeId,
    floor: &mut Vec<u8>,
    (key, seq, event): (Vec<u8>, Seq, Event),
    rest: &mut std::iter::Peekable<I>,
) -> Result<()> {
    let mut path: Vec<(NodeId, usize)> = Vec::new();
    let mut id = *root;
    let target = loop {
        let node = ctx.store.get(id)?;
        let step = match &**node {
            // Only an append goes into the leaf itself (written in place at its end). Another
            // key that descended this far is buffered in the parent like any random write, so
            // the leaf is rebuilt once per flush instead of spliced (half a basement moved)
            // per message.
            Node::Leaf(leaf) => match path.last() {
                Some(&(parent, _)) if leaf.last_key().is_some_and(|last| key.as_slice() <= last) => {
                    Step::Buffer(parent)
                }
                _ => Step::Leaf,
            },
            Node::Internal(internal) => {
                let index = internal.child_index(&key);
                let down =
                    if id == *root { descends_from_root(internal, floor, &key) } else { descends(internal, &key) };
                match internal.children.get(index) {
                    Some(child) if down => Step::Descend(index, *child),
                    _ => Step::Buffer(id),
                }
            }
        };
        drop(node);
        match step {
            Step::Descend(index, child) => {
                if id == *root {
                    floor.clear();
                    floor.extend_from_slice(&key);
                }
                path.push((id, index));
                id = child;
            }
            Step::Leaf => {
                let mut node = ctx.store.take(id)?;
                if let Node::Leaf(leaf) = &mut node {
                    append_to_leaf(ctx, leaf, floor, (key, seq, event), rest);
                }
                ctx.put(id, node)?;
                return fix_path(ctx, root, path);
            }
            Step::Buffer(target) => {
                // Buffering in the leaf's parent: the path now ends above that parent.
                if target != id {
                    path.pop();
                }
                break target;
            }
        }
    };
    let mut node = ctx.store.take(target)?;
    let over = match &mut node {
        Node::Internal(internal) => {
            internal.push_point(&key, [(seq, event)], ctx.horizon, ctx.options.basement_size_bytes);
            needs_flush_internal(ctx, internal.buffered_bytes())
        }
        Node::Leaf(_) => false,
    };
    ctx.put(target, node)?;
    // The root is the flusher's business; a deeper node filled by messages that descended past
    // empty buffers is flushed here, or nobody would notice it.
    if over && !path.is_empty() {
        flush_node(ctx, target)?;
        return fix_path(ctx, root, path);
    }
    Ok(())
}

/// Applies an append to the leaf it reached, and with it the messages after it that are appends
/// too (each key above the last: routed down the same open path, as keys only grow), while the
/// leaf stays within the node size: one take, put and rebalance of the leaf for a commit's run of
/// increasing `_id`s instead of one per document. `floor`, the tree's append floor, ends as the
/// greatest key of the run and the leaf.
fn append_to_leaf<I: Iterator<Item = TreeMessage>>(
    ctx: &Ctx<'_>,
    leaf: &mut Leaf,
    floor: &mut Vec<u8>,
    first: (Vec<u8>, Seq, Event),
    rest: &mut std::iter::Peekable<I>,
) {
    let basement_size = ctx.options.basement_size_bytes;
    let mut next = Some(first);
    while let Some((key, seq, event)) = next.take() {
        Counters::add(&ctx.counters.direct_leaf_writes, 1);
        floor.clear();
        floor.extend_from_slice(leaf.last_key().filter(|last| *last > key.as_slice()).unwrap_or(&key));
        leaf.apply_point(key, [(seq, event)], ctx.horizon, ctx.update(), basement_size);
        if leaf.size_bytes() > ctx.options.node_size_bytes {
            break;
        }
        let is_append = |message: &TreeMessage| matches!(message, TreeMessage::Point { key, .. } if key > floor);
        if let Some(TreeMessage::Point { key, seq, event }) = rest.next_if(is_append) {
            Counters::add(&ctx.counters.messages, 1);
            next = Some((key, seq, event));
        }
    }
}

enum Step {
    Descend(usize, NodeId),
    Leaf,
    /// Into this internal node's buffer for the key.
    Buffer(NodeId),
}

fn needs_flush_internal(ctx: &Ctx<'_>, buffered_bytes: usize) -> bool {
    buffered_bytes > ctx.options.node_size_bytes
}

fn inject_range(ctx: &Ctx<'_>, root: &mut NodeId, range: RangeDelete) -> Result<()> {
    let mut node = ctx.store.take(*root)?;
    match &mut node {
        Node::Internal(internal) => internal.push_range(&range),
        Node::Leaf(leaf) => {
            let incoming = Incoming { points: Run::default(), ranges: vec![range] };
            leaf.apply(incoming, ctx.horizon, ctx.update(), ctx.options.basement_size_bytes);
        }
    }
    ctx.put(*root, node)?;
    fix_root(ctx, root)
}
