//! Putting a commit's messages into a tree.
//!
//! A message enters at the root's buffer for its child. An append (a key that goes to the
//! rightmost child at every level, whose buffers are all empty) goes straight down to the
//! rightmost leaf instead: there is no older message for its key above, so applying it lower
//! keeps sequence order, and increasing keys (the ObjectId `_id` case) do not pay for buffering
//! and flushing they do not need. Every other key is buffered, which is what makes random
//! inserts cheap once the tree is larger than memory.

use crate::error::Result;
use crate::message::{Event, Seq};
use crate::node::buffer::{Buffer, RangeDelete, Run};
use crate::node::leaf::Incoming;
use crate::node::{Node, NodeId};
use crate::options::FlushMode;
use crate::stats::Counters;
use crate::tree::flush::{fix_path, fix_root, flush_child, flush_node, needs_flush};
use crate::tree::{Ctx, Tree};
use crate::wal::record::LogWrite;

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
    pub fn write(&self, ctx: &Ctx<'_>, messages: Vec<TreeMessage>) -> Result<FlushNeed> {
        let mut guard = self.root.write();
        let mut root = guard.ok_or_else(|| self.not_found())?;
        let result = write_all(ctx, &mut root, messages);
        *guard = Some(root);
        result?;
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

    /// Flushes the root until its buffers fit in the node size, one child's buffer at a time.
    /// Before each step, the child about to receive the buffer is read into the cache without
    /// the tree's lock, so that writers to this tree do not wait on the disk; the lock is held
    /// for the in-memory work, and let go between steps.
    pub fn flush_if_needed(&self, ctx: &Ctx<'_>) -> Result<()> {
        loop {
            let Some(child) = self.flush_target(ctx)? else { return Ok(()) };
            // Only a hint: the tree may change before the lock is taken, and a node a writer
            // has out cannot be read now. The flush itself reads what it really needs.
            let _ = ctx.store.get(child);
            let mut guard = self.root.write();
            let Some(mut root) = *guard else { return Ok(()) };
            let result = flush_root_once(ctx, &mut root);
            *guard = Some(root);
            result?;
        }
    }

    /// The child whose buffer a flush of the root would move next, if the root is full.
    fn flush_target(&self, ctx: &Ctx<'_>) -> Result<Option<NodeId>> {
        let guard = self.root.read();
        let Some(root) = *guard else { return Ok(None) };
        let node = ctx.store.get(root)?;
        drop(guard);
        Ok(match &**node {
            Node::Internal(internal) if needs_flush(ctx, &node) => internal.children.get(internal.heaviest_child()).copied(),
            _ => None,
        })
    }
}

/// Moves the root's heaviest buffer down one level if the root is full, then fixes the root.
fn flush_root_once(ctx: &Ctx<'_>, root: &mut NodeId) -> Result<()> {
    if !needs_flush(ctx, &*ctx.store.get(*root)?) {
        return Ok(());
    }
    let mut node = ctx.store.take(*root)?;
    let result = match &mut node {
        Node::Internal(internal) => {
            let heaviest = internal.heaviest_child();
            flush_child(ctx, internal, heaviest)
        }
        Node::Leaf(_) => Ok(()),
    };
    ctx.store.put(*root, node)?;
    result?;
    fix_root(ctx, root)
}

fn write_all(ctx: &Ctx<'_>, root: &mut NodeId, messages: Vec<TreeMessage>) -> Result<()> {
    for message in messages {
        Counters::add(&ctx.counters.messages, 1);
        match message {
            TreeMessage::Point { key, seq, event } => inject_point(ctx, root, key, seq, event)?,
            TreeMessage::Range(range) => inject_range(ctx, root, range)?,
        }
    }
    if ctx.options.flush_mode == FlushMode::Inline {
        flush_root(ctx, root)?;
    }
    Ok(())
}

fn flush_root(ctx: &Ctx<'_>, root: &mut NodeId) -> Result<()> {
    if needs_flush(ctx, &*ctx.store.get(*root)?) {
        flush_node(ctx, *root)?;
        fix_root(ctx, root)?;
    }
    Ok(())
}

fn inject_point(ctx: &Ctx<'_>, root: &mut NodeId, key: Vec<u8>, seq: Seq, event: Event) -> Result<()> {
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
                Some(&(parent, _)) if leaf.last_key().is_some_and(|last| key.as_slice() <= last) => Step::Buffer(parent),
                _ => Step::Leaf,
            },
            Node::Internal(internal) => {
                let index = internal.child_index(&key);
                let rightmost = index + 1 == internal.children.len();
                let open = rightmost && internal.buffers.get(index).is_some_and(Buffer::is_empty);
                match internal.children.get(index) {
                    Some(child) if open => Step::Descend(index, *child),
                    _ => Step::Buffer(id),
                }
            }
        };
        drop(node);
        match step {
            Step::Descend(index, child) => {
                path.push((id, index));
                id = child;
            }
            Step::Leaf => {
                Counters::add(&ctx.counters.direct_leaf_writes, 1);
                let mut node = ctx.store.take(id)?;
                if let Node::Leaf(leaf) = &mut node {
                    let b = ctx.options.basement_size_bytes;
                    leaf.apply_point(key, vec![(seq, event)], ctx.horizon, ctx.update(), b);
                }
                ctx.store.put(id, node)?;
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
            internal.push_point(key, vec![(seq, event)], ctx.horizon, ctx.options.basement_size_bytes);
            needs_flush_internal(ctx, internal.buffered_bytes())
        }
        Node::Leaf(_) => false,
    };
    ctx.store.put(target, node)?;
    // The root is the flusher's business; a deeper node filled by messages that descended past
    // empty buffers is flushed here, or nobody would notice it.
    if over && !path.is_empty() {
        flush_node(ctx, target)?;
        return fix_path(ctx, root, path);
    }
    Ok(())
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
    ctx.store.put(*root, node)?;
    fix_root(ctx, root)
}
