//! Blocks: writing a node to a new block (copy-on-write: never over a block the last durable
//! checkpoint may name), and the blocks a newer write or a freed node replaced: *superseded*
//! ones, which a checkpoint names, go back to the allocator only once the next checkpoint is
//! durable; the others (written by an eviction since the last capture) as soon as no reader
//! can hold them (`grace`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::NodeStore;
use crate::error::{Error, Result};
use crate::file::BlockAddr;
use crate::node::codec::{self, Layout, encode_node};
use crate::node::{Node, NodeId};
use crate::stats::TRACKED_LEVELS;
use crate::thin::View;

/// A node block written: where, and its layout.
pub(crate) struct Written {
    pub addr: BlockAddr,
    pub layout: Option<Arc<Layout>>,
}

impl NodeStore {
    /// Encodes and writes a node to a new block, compressed as `compression` says.
    pub fn write_node(&self, id: NodeId, node: &Node, compression: crate::compression::Compression) -> Result<Written> {
        let disk = self.disk.as_ref().ok_or_else(|| Error::Invariant("write-back without a disk".into()))?;
        // The encoded copy is at most about the node's own size (sections that do not compress
        // are stored raw).
        let _payload_charge = self.charge_transient(node.memory_bytes());
        let payload = encode_node(id, node, compression);
        self.counters.bytes_before_compression.fetch_add(node.size_bytes() as u64, Ordering::Relaxed);
        self.counters.bytes_written.fetch_add(payload.len() as u64, Ordering::Relaxed);
        let level = (node.height() as usize).min(TRACKED_LEVELS - 1);
        if let Some(counter) = self.counters.bytes_written_by_height.get(level) {
            counter.fetch_add(payload.len() as u64, Ordering::Relaxed);
        }
        let layout = codec::decode_layout(id, &payload)?.map(Arc::new);
        let addr = disk.file.write_block(id.0, &payload);
        self.note_write(addr.as_ref().err());
        Ok(Written { addr: addr?, layout })
    }

    /// Keeps the write-failure state (see `eviction`'s header): set by a failed node write,
    /// cleared by the next one that succeeds.
    fn note_write(&self, failure: Option<&Error>) {
        if failure.is_none() && !self.write_failing.load(Ordering::Acquire) {
            return;
        }
        if failure.is_some() {
            self.counters.write_failures.fetch_add(1, Ordering::Relaxed);
        }
        let mut state = self.write_failure.lock();
        *state = failure.cloned();
        self.write_failing.store(state.is_some(), Ordering::Release);
    }

    /// Ends a write failure that no dirty node is left to retry.
    pub(super) fn clear_write_failure(&self) {
        let mut state = self.write_failure.lock();
        *state = None;
        self.write_failing.store(false, Ordering::Release);
    }

    /// The last node write's failure, if no write has succeeded since (a full disk).
    pub fn write_failure(&self) -> Option<Error> {
        if !self.write_failing.load(Ordering::Acquire) {
            return None;
        }
        self.write_failure.lock().clone()
    }

    /// A block its slot no longer names: one a checkpoint names waits for the next checkpoint
    /// (`superseded`); any other goes back to the allocator once no reader can hold it.
    pub(super) fn retire(&self, addr: BlockAddr, checkpointed: bool) {
        match &self.disk {
            Some(_) if checkpointed => self.superseded.lock().push(addr),
            Some(disk) => self.grace.retire(&disk.file, addr),
            None => {}
        }
    }

    /// Keeps readers' blocks from reuse while the returned pin lives (a tree read holds one
    /// from the root to the last section it reads).
    pub fn pin(&self) -> super::grace::Pin<'_> {
        self.grace.pin()
    }

    /// Frees every retired block now (waiting out the readers that may hold one).
    pub fn drain_retired(&self) {
        if let Some(disk) = &self.disk {
            self.grace.drain(&disk.file);
        }
    }

    /// Bytes waiting to be freed: for the next checkpoint, or for readers.
    pub fn retired_bytes(&self) -> u64 {
        let superseded: u64 = self.superseded.lock().iter().map(|addr| u64::from(addr.len)).sum();
        let replaced: u64 = self.replaced.lock().iter().map(|addr| u64::from(addr.len)).sum();
        superseded + replaced + self.grace.retired_bytes()
    }

    /// How a slot's node is compressed when written: its tree's choice, or the engine's.
    pub(super) fn compression_of(
        &self,
        chosen: Option<crate::compression::Compression>,
    ) -> crate::compression::Compression {
        chosen.or(self.disk.as_ref().map(|disk| disk.compression)).unwrap_or_default()
    }

    /// A block no reader was ever handed: free at once.
    pub(super) fn free_unreferenced(&self, addr: BlockAddr) {
        if let Some(disk) = &self.disk {
            disk.file.free(addr);
        }
    }
}

/// What one relocation pass moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    pub blocks: u64,
    pub bytes: u64,
}

impl NodeStore {
    /// Copies clean nodes' blocks, highest in the file first, into holes below them, and
    /// points their slots at the copies; the originals are retired (a checkpoint that names
    /// them keeps them until the next one is durable). A node that changes meanwhile keeps its
    /// slot and the copy is freed. Dirty nodes are left to the next checkpoint, whose writes
    /// fill holes from the start of the file too.
    /// Stops once `budget` bytes have moved.
    ///
    /// The caller holds the checkpoint lock: a capture running meanwhile could name a block
    /// that relocation then retires into the list that very checkpoint frees. Each block is
    /// copied under a pin taken before its slot is checked again, so the original can be
    /// neither freed nor reused (and come back to the slot as another version) while it is
    /// copied.
    pub fn relocate_down(&self, budget: u64) -> Result<Moved> {
        let Some(disk) = &self.disk else { return Ok(Moved::default()) };
        let mut clean: Vec<(NodeId, BlockAddr)> = Vec::new();
        for shard in &self.shards {
            clean.extend(
                shard
                    .lock()
                    .iter()
                    .filter(|(_, slot)| !slot.dirty && !slot.taken)
                    .filter_map(|(id, s)| Some((*id, s.addr?))),
            );
        }
        clean.sort_unstable_by_key(|(_, addr)| std::cmp::Reverse(addr.offset));
        let mut moved = Moved::default();
        for (id, addr) in clean {
            if disk.file.free_bytes() < u64::from(addr.len) || moved.bytes >= budget {
                break;
            }
            let _pin = self.grace.pin();
            if !self.still_clean_at(id, addr) {
                continue;
            }
            let Some(copy) = disk.file.copy_block_lower(addr, id.0)? else { continue };
            let mut shard = self.shard(id).lock();
            match shard.get_mut(&id) {
                Some(slot) if slot.addr == Some(addr) && !slot.dirty && !slot.taken => {
                    slot.addr = Some(copy);
                    self.retire(addr, slot.checkpointed);
                    slot.checkpointed = false;
                    if let Some(View::Thin(thin)) = &slot.node {
                        slot.node = Some(View::Thin(Arc::new(thin.moved_to(copy))));
                    }
                    moved.blocks += 1;
                    moved.bytes += u64::from(addr.len);
                }
                _ => self.free_unreferenced(copy),
            }
        }
        Ok(moved)
    }

    /// Whether the node is clean, not out with a writer, and still at `addr`.
    fn still_clean_at(&self, id: NodeId, addr: BlockAddr) -> bool {
        let shard = self.shard(id).lock();
        shard.get(&id).is_some_and(|slot| slot.addr == Some(addr) && !slot.dirty && !slot.taken)
    }
}
