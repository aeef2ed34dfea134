//! Blocks: writing a node to a new block (copy-on-write: never over a block the last durable
//! checkpoint may name), and the blocks a newer write or a freed node *superseded*, which go
//! back to the allocator only once the next checkpoint is durable.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::NodeStore;
use crate::error::{Error, Result};
use crate::file::BlockAddr;
use crate::node::codec::{self, Layout, encode_node};
use crate::node::{Node, NodeId};
use crate::stats::TRACKED_LEVELS;

/// A node block written: where, and its layout.
pub(crate) struct Written {
    pub addr: BlockAddr,
    pub layout: Option<Arc<Layout>>,
}

impl NodeStore {
    /// Encodes and writes a node to a new block.
    pub fn write_node(&self, id: NodeId, node: &Node) -> Result<Written> {
        let disk = self.disk.as_ref().ok_or_else(|| Error::Invariant("write-back without a disk".into()))?;
        // The encoded copy is at most about the node's own size (sections that do not compress
        // are stored raw).
        let _payload_charge = self.charge_transient(node.memory_bytes());
        let payload = encode_node(id, node, disk.compression);
        self.counters.bytes_before_compression.fetch_add(node.size_bytes() as u64, Ordering::Relaxed);
        self.counters.bytes_written.fetch_add(payload.len() as u64, Ordering::Relaxed);
        let level = (node.height() as usize).min(TRACKED_LEVELS - 1);
        if let Some(counter) = self.counters.bytes_written_by_height.get(level) {
            counter.fetch_add(payload.len() as u64, Ordering::Relaxed);
        }
        let layout = codec::decode_layout(id, &payload)?.map(Arc::new);
        Ok(Written { addr: disk.file.write_block(id.0, &payload)?, layout })
    }

    pub(super) fn free_unreferenced(&self, addr: BlockAddr) {
        if let Some(disk) = &self.disk {
            disk.file.free(addr);
        }
    }
}
