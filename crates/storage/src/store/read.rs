//! Reads through the node cache: a whole node for writers, flushes and `verify` (`get`); what a
//! reader needs of a node (`view`): whatever of it is in memory, or its head alone; and a thin
//! node's sections one at a time (`part`, `start_reading_part`).
//!
//! Invariants: a read holds a grace pin (`grace`) while it reads a block, so the block is not
//! freed under it; what it read is installed only if the slot still names that block and no
//! writer has the node (otherwise it reads again from the block the slot names now, up to eight
//! times); a node a writer has taken is never read.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{CachedNode, NodeStore, Slot, missing};
use crate::error::{Error, Result};
use crate::file::BlockAddr;
use crate::node::NodeId;
use crate::node::codec::{self, decode_node};
use crate::thin::{Part, Thin, View};

impl NodeStore {
    /// The whole node, read from disk if it is not in memory whole (writers, flushes, verify).
    pub fn get(&self, id: NodeId) -> Result<Arc<CachedNode>> {
        // A checkpoint may move a clean node to the block it wrote while we read the old one (same
        // version, same content); reading again from the new block is simplest and rare.
        let _pin = self.grace.pin();
        for _ in 0..8 {
            let addr = {
                let mut shard = self.shard(id).lock();
                let slot = self.readable(&mut shard, id)?;
                match (&slot.node, slot.addr) {
                    (Some(View::Whole(node)), _) => return Ok(Arc::clone(node)),
                    (_, Some(addr)) => addr,
                    (_, None) => return Err(missing(id)),
                }
            };
            if let Some(node) = self.load(id, addr)? {
                return Ok(node);
            }
        }
        Err(moving(id))
    }

    /// The node as a reader needs it: whatever of it is in memory, or its head alone read from
    /// disk (its sections are then read one by one as the reader asks: `part`).
    pub fn view(&self, id: NodeId) -> Result<View> {
        if !self.partial {
            return Ok(View::Whole(self.get(id)?));
        }
        let _pin = self.grace.pin();
        for _ in 0..8 {
            let addr = {
                let mut shard = self.shard(id).lock();
                let slot = self.readable(&mut shard, id)?;
                match (&slot.node, slot.addr) {
                    (Some(view), _) => return Ok(view.clone()),
                    (None, Some(addr)) => addr,
                    (None, None) => return Err(missing(id)),
                }
            };
            if let Some(view) = self.load_head(id, addr)? {
                return Ok(view);
            }
        }
        Err(moving(id))
    }

    /// The slot of a node a reader may look at, marked as just used.
    pub(super) fn readable<'a>(&self, shard: &'a mut HashMap<NodeId, Slot>, id: NodeId) -> Result<&'a mut Slot> {
        let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
        if slot.taken {
            return Err(Error::Invariant(format!("node {} read while a writer has it", id.0)));
        }
        slot.last_used = self.tick();
        Ok(slot)
    }

    /// Reads a whole node from `addr` into its slot; `None` if the slot moved meanwhile.
    pub(super) fn load(&self, id: NodeId, addr: BlockAddr) -> Result<Option<Arc<CachedNode>>> {
        let disk = self.disk.as_ref().ok_or_else(|| missing(id))?;
        let _block_charge = self.charge_transient(addr.len as usize);
        let block = disk.file.read_block(addr, id.0)?;
        // A node read whole is nearly always read for a writer (a flush, an insert), who will
        // write it to another block: its pages are better spent on the heads and sections
        // readers fetch (beyond memory, iibench's queries ran 4-7% more per second, and the
        // writer no slower).
        disk.file.advise_done_with(addr);
        self.counters.bytes_read.fetch_add(u64::from(addr.len), Ordering::Relaxed);
        let (node, layout) = decode_node(id, &block)?;
        let node = CachedNode::new(node, &self.used_bytes);
        let mut shard = self.shard(id).lock();
        let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
        match &slot.node {
            Some(View::Whole(loaded)) => Ok(Some(Arc::clone(loaded))),
            _ if slot.addr == Some(addr) && !slot.taken => {
                slot.layout = layout.map(Arc::new);
                self.install(slot, Some(View::Whole(Arc::clone(&node))));
                self.counters.loads.fetch_add(1, Ordering::Relaxed);
                drop(shard);
                self.maybe_evict();
                Ok(Some(node))
            }
            _ => Ok(None),
        }
    }

    /// Reads a node's head from `addr` into its slot as a thin node; `None` if the slot moved
    /// meanwhile. A block of the first format has no head: it is read whole.
    pub(super) fn load_head(&self, id: NodeId, addr: BlockAddr) -> Result<Option<View>> {
        let disk = self.disk.as_ref().ok_or_else(|| missing(id))?;
        // Most heads fit in the first page; a node with long pivots needs a second read.
        let mut head = disk.file.read_payload_prefix(addr, id.0, 4096)?;
        let Some(head_len) = head.get(..codec::HEAD_PREFIX_BYTES).and_then(codec::head_len) else {
            return Ok(self.load(id, addr)?.map(View::Whole));
        };
        if head_len > head.len() {
            let rest = disk.file.read_payload_range(addr, id.0, head.len(), head_len - head.len())?;
            head.extend_from_slice(&rest);
        }
        self.counters.bytes_read.fetch_add(head.len() as u64, Ordering::Relaxed);
        let Some(layout) = codec::decode_layout(id, head.get(..head_len).unwrap_or_default())? else {
            return Ok(self.load(id, addr)?.map(View::Whole));
        };
        let layout = Arc::new(layout);
        let thin = Arc::new(Thin::new(id, addr, Arc::clone(&layout)));
        let mut shard = self.shard(id).lock();
        let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
        match &slot.node {
            Some(view) => Ok(Some(view.clone())),
            None if slot.addr == Some(addr) && !slot.taken => {
                slot.layout = Some(layout);
                self.install(slot, Some(View::Thin(Arc::clone(&thin))));
                self.counters.head_loads.fetch_add(1, Ordering::Relaxed);
                drop(shard);
                self.maybe_evict();
                Ok(Some(View::Thin(thin)))
            }
            None => Ok(None),
        }
    }

    /// Section `index` of a thin node, read alone from its block if it is not in memory, and
    /// kept with the node if the node is still the one in its slot.
    pub fn part(&self, thin: &Arc<Thin>, index: usize) -> Result<Option<Part>> {
        if let Some(part) = thin.part(index) {
            return Ok(Some(part.clone()));
        }
        let Some(section) = thin.layout.sections.get(index) else { return Ok(None) };
        // The thin node's block address was copied before this pin: what keeps the block is
        // the caller's pin (every tree read holds one from the root on), not this one.
        let _pin = self.grace.pin();
        let disk = self.disk.as_ref().ok_or_else(|| missing(thin.id))?;
        let bytes =
            disk.file.read_payload_range(thin.block, thin.id.0, section.offset as usize, section.len as usize)?;
        self.counters.section_loads.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes_read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let part = match codec::decode_section_alone(thin.id, &thin.layout, index, bytes)? {
            codec::Section::Basement(basement) => Part::Basement(Arc::new(basement)),
            codec::Section::Buffer(buffer) => Part::Buffer(Arc::new(buffer)),
            codec::Section::Pieces(pieces) => Part::Pieces(Arc::new(pieces)),
        };
        let mut shard = self.shard(thin.id).lock();
        let thicker = match shard.get(&thin.id) {
            Some(Slot { node: Some(View::Thin(current)), taken: false, .. })
                if current.block == thin.block && current.part(index).is_none() =>
            {
                Some(current.with_part(index, part.clone()))
            }
            _ => None,
        };
        if let (Some(thicker), Some(slot)) = (thicker, shard.get_mut(&thin.id)) {
            self.install(slot, Some(View::Thin(Arc::new(thicker))));
        }
        drop(shard);
        self.maybe_evict();
        Ok(Some(part))
    }

    /// Starts reading section `index` of a thin node from its block, without waiting: a `part`
    /// of it soon after finds its bytes read or on their way.
    pub fn start_reading_part(&self, thin: &Thin, index: usize) {
        if let (Some(disk), Some(section)) = (&self.disk, thin.layout.sections.get(index)) {
            disk.file.start_reading_payload_range(thin.block, section.offset as usize, section.len as usize);
            self.counters.sections_started_early.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn moving(id: NodeId) -> Error {
    Error::Invariant(format!("node {} kept moving while it was read", id.0))
}
