//! Checkpoint capture: what a checkpoint takes from the cache at its consistent point (dirty
//! nodes with their versions, the blocks of clean ones), and how its writes land back in the
//! slots (`mark_written`), including the race with an eviction that wrote the same version.

use std::sync::Arc;

use super::blocks::Written;
use super::{CachedNode, NodeStore};
use crate::error::{Error, Result};
use crate::file::BlockAddr;
use crate::node::NodeId;
use crate::thin::View;

/// What a checkpoint captures from the cache at its consistent point.
pub(crate) struct Capture {
    /// Each dirty node with its version and how it is to be compressed.
    pub dirty: Vec<(NodeId, Arc<CachedNode>, u64, crate::compression::Compression)>,
    pub clean: Vec<(NodeId, BlockAddr)>,
}

impl NodeStore {
    /// The checkpoint's view: dirty nodes to write (with their versions) and the blocks of the
    /// clean ones. Called with every tree locked, so no node is out with a writer.
    pub fn capture(&self) -> Result<Capture> {
        let mut capture = Capture { dirty: Vec::new(), clean: Vec::new() };
        for shard in &self.shards {
            for (id, slot) in shard.lock().iter_mut() {
                debug_assert!(!slot.taken, "node {} out with a writer at a checkpoint's capture", id.0);
                match (&slot.node, slot.dirty, slot.addr) {
                    (Some(View::Whole(node)), true, _) => {
                        let compression = self.compression_of(slot.compression);
                        capture.dirty.push((*id, Arc::clone(node), slot.version, compression));
                    }
                    (_, false, Some(addr)) => {
                        slot.checkpointed = true;
                        capture.clean.push((*id, addr));
                    }
                    _ => return Err(Error::Invariant(format!("node {} is neither in memory nor on disk", id.0))),
                }
            }
        }
        // Written in a fixed order, so that where blocks land (first fit) is the same from one
        // run to the next, not the order of a hash map's buckets.
        capture.dirty.sort_unstable_by_key(|(id, _, _, _)| *id);
        Ok(capture)
    }

    /// The checkpoint wrote version `version` of a node; returns the block its catalog names for
    /// the node.
    ///
    /// If an eviction wrote the same version meanwhile and dropped the node from memory, readers
    /// may be reading the eviction's block right now (a reader copies a slot's address and reads
    /// without the shard lock), so that block stays and the checkpoint names it; the
    /// checkpoint's own copy, which no reader was ever told about, is freed at once. The
    /// eviction's write finished before this call, so the checkpoint's data-file sync covers it.
    pub fn mark_written(&self, id: NodeId, version: u64, written: Written) -> BlockAddr {
        let mut shard = self.shard(id).lock();
        match shard.get_mut(&id) {
            Some(slot) if slot.version == version && slot.dirty => {
                if let Some(old) = slot.addr.replace(written.addr) {
                    self.replace_at_checkpoint(old, slot.checkpointed);
                }
                slot.checkpointed = true;
                slot.layout = written.layout;
                slot.dirty = false;
                written.addr
            }
            Some(slot) if slot.version == version => match slot.addr {
                Some(evicted) => {
                    self.free_unreferenced(written.addr);
                    slot.checkpointed = true;
                    evicted
                }
                None => {
                    slot.addr = Some(written.addr);
                    slot.checkpointed = true;
                    if slot.node.is_some() {
                        slot.layout = written.layout;
                    }
                    written.addr
                }
            },
            // Changed since the capture and still dirty: the checkpoint names this block, so the
            // one the slot named (an older version, or one an eviction wrote since) is not
            // needed once it is durable. The slot names this one from now on: a node that
            // writers keep changing would otherwise pin its first block, wherever it lies, for
            // as long as it changes during every checkpoint.
            Some(slot) if slot.dirty => {
                if let Some(old) = slot.addr.replace(written.addr) {
                    self.replace_at_checkpoint(old, slot.checkpointed);
                }
                slot.checkpointed = true;
                slot.layout = None;
                written.addr
            }
            // Freed since the capture, or written since by an eviction (clean: readers may be
            // reading that newer block): the checkpoint names this block, the next one will not.
            _ => {
                self.superseded.lock().push(written.addr);
                written.addr
            }
        }
    }

    /// A block a checkpoint's write took the slot from. The slot was dirty at the capture, so
    /// the running checkpoint does not name the block; if a checkpoint does, it is the last
    /// durable one, and the block is free once the running one is durable (`take_replaced`).
    fn replace_at_checkpoint(&self, old: BlockAddr, checkpointed: bool) {
        match checkpointed && self.disk.is_some() {
            true => self.replaced.lock().push(old),
            false => self.retire(old, false),
        }
    }

    /// The blocks the running checkpoint's writes replaced: free them once it is durable, or
    /// give them to `restore_superseded` if it failed (the last durable checkpoint still names
    /// them; the next one will not).
    pub fn take_replaced(&self) -> Vec<BlockAddr> {
        std::mem::take(&mut *self.replaced.lock())
    }

    pub fn take_superseded(&self) -> Vec<BlockAddr> {
        std::mem::take(&mut *self.superseded.lock())
    }

    /// Gives back blocks a failed checkpoint was going to free.
    pub fn restore_superseded(&self, blocks: Vec<BlockAddr>) {
        self.superseded.lock().extend(blocks);
    }

    /// Frees the blocks a durable checkpoint no longer names, once no reader can hold them.
    pub fn free_blocks(&self, blocks: Vec<BlockAddr>) {
        for addr in blocks {
            self.retire(addr, false);
        }
    }
}
