//! The node store and cache: every node of every tree, by id, in memory or on disk.
//!
//! Nodes are shared as `Arc<CachedNode>`: a reader clones the `Arc` and reads without holding any
//! store lock; a writer `take`s a node (copying it if a checkpoint or an eviction still holds
//! it), changes it and `put`s it back. The tree's own lock orders the two, so a writer never changes a
//! node a reader of the same tree is between looking up and reading.
//!
//! Cache: nodes in memory are charged their accounted size against one budget, and so is a
//! version a writer replaced while a checkpoint or an eviction still holds it, until they drop it
//! (`CachedNode`): during a checkpoint, writers copy the nodes it has not written yet, and those
//! copies are real memory. Past it, the least recently used nodes are evicted in steps (see
//! `thin`): a whole node becomes *thin* (its layout only; a dirty one is first written to a new
//! block, copy-on-write: never over a block a checkpoint may still name), a thin node loses the
//! sections readers loaded into it, and only a thin node with none left is dropped. Readers
//! (`view`) read a node's head and then single sections; writers (`get`, `take`) read the whole
//! node, checked and decoded. Over budget, a writer wakes the evictor
//! thread and goes on, so that compressing and writing nodes out overlaps with its work; far
//! over budget it waits for the running eviction and evicts itself, which is the engine's
//! backpressure. Only one thread evicts at a time.
//!
//! Blocks and checkpoints: a slot remembers the block holding the node's last written version. A
//! block replaced by a newer one, or whose node is freed, is *superseded*: the last durable
//! checkpoint may still name it, so it is only returned to the allocator once the next
//! checkpoint is durable (`take_superseded` at its capture, freed at its completion). A block
//! the running checkpoint itself replaces (it writes the node's dirty version) is one the last
//! durable checkpoint names and this one does not: it is freed when this one is durable
//! (`take_replaced`), not a checkpoint later, so the next checkpoint's writes can reuse it.
//!
//! Files: this one holds the slots and the cache's writes (`take`, `put`, `replace`); `read`
//! its reads (`get`, `view`, `part`); `eviction` keeps the budget (the evictor thread, backpressure, eviction
//! steps); `blocks` writes nodes to new blocks and frees superseded ones; `capture` is a
//! checkpoint's view of the cache and how its writes land back (`mark_written`).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::file::{BlockAddr, DataFile};
use crate::node::codec::Layout;
use crate::node::{Internal, Node, NodeId};
use crate::stats::{CacheMix, TRACKED_LEVELS};
use crate::thin::View;

mod blocks;
mod capture;
mod eviction;
mod grace;
mod read;

pub(crate) use blocks::Moved;
pub(crate) use capture::Capture;
use eviction::Evictor;

const SHARDS: usize = 16;

/// A node as the cache hands it out. While its slot holds it, its memory is charged through the
/// slot. When a writer replaces it while someone still holds this version (a checkpoint that has
/// not written it yet, an eviction encoding it), the version is *detached*: its bytes stay charged
/// to the budget until its last holder drops it.
pub(crate) struct CachedNode {
    node: Node,
    detached_bytes: AtomicUsize,
    charge: Arc<AtomicUsize>,
}

impl CachedNode {
    fn new(node: Node, charge: &Arc<AtomicUsize>) -> Arc<CachedNode> {
        Arc::new(CachedNode { node, detached_bytes: AtomicUsize::new(0), charge: Arc::clone(charge) })
    }

    /// The node, out of a version nobody else holds (so nothing is detached).
    fn into_node(mut self) -> Node {
        let empty =
            Node::Internal(Internal { height: 0, pivots: Vec::new(), children: Vec::new(), buffers: Vec::new() });
        std::mem::replace(&mut self.node, empty)
    }
}

impl Deref for CachedNode {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.node
    }
}

impl Drop for CachedNode {
    fn drop(&mut self) {
        let detached = *self.detached_bytes.get_mut();
        if detached > 0 {
            self.charge.fetch_sub(detached, Ordering::Relaxed);
        }
    }
}

struct Slot {
    /// What of the node is in memory (a reader's view of it is a clone of this).
    node: Option<View>,
    /// Accounted bytes while in memory.
    size: usize,
    dirty: bool,
    /// Bumped on every `put`: a write-back or checkpoint of an older version does not clean it.
    version: u64,
    addr: Option<BlockAddr>,
    /// How the tree that last wrote this node has its blocks compressed (`None`: the engine's
    /// setting).
    compression: Option<Compression>,
    /// Whether a checkpoint (the durable one, or one being written) names the block at `addr`:
    /// such a block, once replaced, waits for the next checkpoint; any other is freed as soon
    /// as no reader can hold it (`retire`).
    checkpointed: bool,
    /// The layout of the block at `addr`, while the node is in memory and clean (`None` for a
    /// block of the first format). Dropped with the node: kept for every node on disk, the
    /// layouts alone grew with the data, outside the budget.
    layout: Option<Arc<Layout>>,
    /// Out with a writer between `take` and `put`.
    taken: bool,
    last_used: u64,
}

/// What `census` counts.
#[derive(Default)]
pub(crate) struct Census {
    pub nodes: u64,
    pub block_bytes: u64,
    pub buffered_bytes_by_height: [u64; TRACKED_LEVELS],
    /// All but `held_bytes`, which the caller derives from the budget's count.
    pub mix: CacheMix,
}

/// What the disk side of the cache needs.
pub(crate) struct Disk {
    pub file: Arc<DataFile>,
    pub compression: Compression,
}

#[derive(Default)]
pub(crate) struct CacheCounters {
    /// Whole nodes read.
    pub loads: AtomicU64,
    /// Heads read alone (a reader reaching a node not in memory), sections read alone.
    pub head_loads: AtomicU64,
    pub section_loads: AtomicU64,
    /// Sections whose reads were started ahead, together with the rest of one read's path
    /// (`start_reading_part`); each is also a section load once read.
    pub sections_started_early: AtomicU64,
    /// Node bytes read from the data file: whole blocks, heads, sections.
    pub bytes_read: AtomicU64,
    /// Nodes dropped from memory entirely; nodes made thin or thinner (sections dropped).
    pub evictions: AtomicU64,
    pub partial_evictions: AtomicU64,
    pub write_backs: AtomicU64,
    /// Node writes that failed (see `eviction`'s header).
    pub write_failures: AtomicU64,
    pub throttle_waits: AtomicU64,
    /// Nodes a writer copied because a checkpoint or an eviction still held them.
    pub copies: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Node bytes written (after compression) by the height of the node.
    pub bytes_written_by_height: [AtomicU64; TRACKED_LEVELS],
    pub bytes_before_compression: AtomicU64,
}

/// Bytes charged to the budget for the length of one operation (`NodeStore::charge_transient`).
pub(crate) struct TransientCharge<'a> {
    used_bytes: &'a AtomicUsize,
    bytes: usize,
}

impl Drop for TransientCharge<'_> {
    fn drop(&mut self) {
        self.used_bytes.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

pub(crate) struct NodeStore {
    shards: [Mutex<HashMap<NodeId, Slot>>; SHARDS],
    next_id: AtomicU64,
    disk: Option<Disk>,
    budget_bytes: usize,
    /// `Options::partial_eviction`.
    partial: bool,
    /// Charged bytes: nodes in their slots and detached versions (see `CachedNode`).
    used_bytes: Arc<AtomicUsize>,
    clock: AtomicU64,
    superseded: Mutex<Vec<BlockAddr>>,
    /// Blocks the running checkpoint's writes replaced (see the header).
    replaced: Mutex<Vec<BlockAddr>>,
    grace: grace::Grace,
    evicting: Mutex<()>,
    evictor: Evictor,
    /// The last node write failed (a full disk): commits are refused until a write succeeds
    /// (see `eviction`'s header).
    write_failure: Mutex<Option<Error>>,
    /// Whether `write_failure` holds one: every commit asks, without taking the lock.
    write_failing: AtomicBool,
    pub counters: CacheCounters,
}

impl NodeStore {
    pub fn new(disk: Option<Disk>, budget_bytes: usize, partial: bool) -> NodeStore {
        NodeStore {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            next_id: AtomicU64::new(1),
            disk,
            budget_bytes,
            partial,
            used_bytes: Arc::new(AtomicUsize::new(0)),
            clock: AtomicU64::new(0),
            superseded: Mutex::new(Vec::new()),
            replaced: Mutex::new(Vec::new()),
            grace: grace::Grace::default(),
            evicting: Mutex::new(()),
            evictor: Evictor::default(),
            write_failure: Mutex::new(None),
            write_failing: AtomicBool::new(false),
            counters: CacheCounters::default(),
        }
    }

    fn shard(&self, id: NodeId) -> &Mutex<HashMap<NodeId, Slot>> {
        &self.shards[(id.0 as usize) % SHARDS]
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.load(Ordering::Acquire)
    }

    pub fn set_next_id(&self, next: u64) {
        self.next_id.store(next, Ordering::Release);
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// Registers the nodes of a checkpoint as on disk, not yet read (recovery).
    pub fn load_blocks(&self, blocks: &[(u64, BlockAddr)]) {
        for &(id, addr) in blocks {
            let slot = Slot {
                node: None,
                size: 0,
                dirty: false,
                version: 0,
                addr: Some(addr),
                compression: None,
                checkpointed: true,
                layout: None,
                taken: false,
                last_used: 0,
            };
            self.shard(NodeId(id)).lock().insert(NodeId(id), slot);
        }
    }

    #[cfg(test)]
    pub fn allocate(&self, node: Node) -> Result<NodeId> {
        self.allocate_for(node, None)
    }

    /// A new node of a tree whose blocks are compressed with `compression` (`None`: the
    /// engine's setting).
    pub fn allocate_for(&self, node: Node, compression: Option<Compression>) -> Result<NodeId> {
        let id = NodeId(self.next_id.fetch_add(1, Ordering::AcqRel));
        let size = node.memory_bytes();
        let node = Some(View::Whole(CachedNode::new(node, &self.used_bytes)));
        let slot = Slot {
            node,
            size,
            dirty: true,
            version: 1,
            addr: None,
            compression,
            checkpointed: false,
            layout: None,
            taken: false,
            last_used: self.tick(),
        };
        self.shard(id).lock().insert(id, slot);
        self.used_bytes.fetch_add(size, Ordering::Relaxed);
        self.maybe_evict();
        Ok(id)
    }

    /// Puts what was read into a slot, in place of what is there; the caller checked the slot.
    fn install(&self, slot: &mut Slot, resident: Option<View>) {
        if resident.is_none() {
            slot.layout = None;
        }
        let size = resident.as_ref().map_or(0, View::memory_bytes);
        self.used_bytes.fetch_sub(slot.size, Ordering::Relaxed);
        self.used_bytes.fetch_add(size, Ordering::Relaxed);
        slot.node = resident;
        slot.size = size;
    }

    /// Removes the node for changing; the caller `put`s it back (or `free`s it). The node stays
    /// charged while the writer has it: a flush cascade holds a node per level, megabytes each,
    /// and uncharged they were memory the budget did not see. If a checkpoint or an eviction
    /// still holds this version, the writer gets a copy, charged too, and the held version stays
    /// charged until they drop it.
    pub fn take(&self, id: NodeId) -> Result<Node> {
        let shared = self.get(id)?;
        let size = {
            let mut shard = self.shard(id).lock();
            let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
            slot.node = None;
            slot.taken = true;
            slot.size
        };
        match Arc::try_unwrap(shared) {
            Ok(alone) => Ok(alone.into_node()),
            Err(still_shared) => {
                self.keep_charged(&still_shared, size);
                self.counters.copies.fetch_add(1, Ordering::Relaxed);
                Ok(still_shared.node.clone())
            }
        }
    }

    #[cfg(test)]
    pub fn put(&self, id: NodeId, node: Node) -> Result<()> {
        self.put_for(id, node, None)
    }

    /// `put`, by a tree whose blocks are compressed with `compression` (`None`: as before).
    pub fn put_for(&self, id: NodeId, node: Node, compression: Option<Compression>) -> Result<()> {
        let size = node.memory_bytes();
        {
            let mut shard = self.shard(id).lock();
            let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
            self.install_version(slot, node, size, compression);
            slot.taken = false;
        }
        self.used_bytes.fetch_add(size, Ordering::Relaxed);
        self.maybe_evict();
        Ok(())
    }

    /// A version leaving its slot while others still hold it stays charged (`size` bytes) until
    /// its last holder drops it.
    fn keep_charged(&self, old: &CachedNode, size: usize) {
        old.detached_bytes.store(size, Ordering::Relaxed);
        self.used_bytes.fetch_add(size, Ordering::Relaxed);
    }

    /// Makes `node` (`size` bytes) the slot's new, dirty version. The caller charges `size` to
    /// the budget once the shard's lock is dropped.
    fn install_version(&self, slot: &mut Slot, node: Node, size: usize, compression: Option<Compression>) {
        if compression.is_some() {
            slot.compression = compression;
        }
        self.used_bytes.fetch_sub(slot.size, Ordering::Relaxed);
        slot.node = Some(View::Whole(CachedNode::new(node, &self.used_bytes)));
        slot.size = size;
        slot.dirty = true;
        slot.layout = None;
        slot.version += 1;
        slot.last_used = self.tick();
    }

    /// The node if it is in memory whole; never reads the disk (the background flusher's look
    /// for nodes over the node size).
    pub fn resident(&self, id: NodeId) -> Option<Arc<CachedNode>> {
        let shard = self.shard(id).lock();
        match shard.get(&id).map(|slot| &slot.node) {
            Some(Some(View::Whole(node))) => Some(Arc::clone(node)),
            _ => None,
        }
    }

    /// The node with its version (see `Slot::version`), for a change made outside the tree's
    /// lock and installed by `replace` only if nobody changed the node meanwhile.
    /// `None` if the node changed between reading it and looking up its version (a writer has
    /// it, a newer version is in, or the evictor thinned it).
    pub fn get_versioned(&self, id: NodeId) -> Result<Option<(Arc<CachedNode>, u64)>> {
        let node = self.get(id)?;
        let shard = self.shard(id).lock();
        let slot = shard.get(&id).ok_or_else(|| missing(id))?;
        Ok(match &slot.node {
            Some(View::Whole(current)) if Arc::ptr_eq(current, &node) => Some((node, slot.version)),
            _ => None,
        })
    }

    /// Puts a new version of a node in place of version `version`, without reading the node;
    /// returns false, changing nothing, if the node is out with a writer or is at another
    /// version. A version still held by a checkpoint or an eviction stays charged until they
    /// drop it, as in `take`. It does not evict: once it returns true the caller must finish
    /// its change (drop the applied messages) without failing; its next `put` evicts.
    pub fn replace(&self, id: NodeId, version: u64, node: Node, compression: Option<Compression>) -> Result<bool> {
        let size = node.memory_bytes();
        {
            let mut shard = self.shard(id).lock();
            let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
            if slot.taken || slot.version != version {
                return Ok(false);
            }
            if let Some(View::Whole(old)) = &slot.node
                && Arc::strong_count(old) > 1
            {
                self.keep_charged(old, slot.size);
            }
            self.install_version(slot, node, size, compression);
        }
        self.used_bytes.fetch_add(size, Ordering::Relaxed);
        Ok(true)
    }

    pub fn free(&self, id: NodeId) {
        if let Some(slot) = self.shard(id).lock().remove(&id) {
            self.used_bytes.fetch_sub(slot.size, Ordering::Relaxed);
            if let Some(addr) = slot.addr {
                self.retire(addr, slot.checkpointed);
            }
        }
    }

    /// How many nodes there are (in memory or on disk), the bytes of their blocks, the bytes
    /// buffered in the internal nodes in memory by height, and what the cache holds by kind.
    /// Reads nothing from disk.
    pub fn census(&self) -> Census {
        let mut census = Census::default();
        for shard in &self.shards {
            for slot in shard.lock().values() {
                census.nodes += 1;
                census.block_bytes += slot.addr.map_or(0, |addr| crate::file::allocator::round_up(u64::from(addr.len)));
                if let Some(kind) = mix_kind(&mut census.mix, slot) {
                    *kind += slot.size as u64;
                }
                if let Some(View::Whole(cached)) = &slot.node {
                    let Node::Internal(internal) = &cached.node else { continue };
                    let height = (internal.height as usize).min(TRACKED_LEVELS - 1);
                    if let Some(total) = census.buffered_bytes_by_height.get_mut(height) {
                        *total += internal.buffered_bytes() as u64;
                    }
                }
            }
        }
        census
    }

    /// The space of the block a node's slot names, in whole pages; a node never written yet
    /// counts the one page it will take at least.
    pub fn block_space(&self, id: NodeId) -> u64 {
        let shard = self.shard(id).lock();
        let len = shard.get(&id).and_then(|slot| slot.addr).map_or(1, |addr| u64::from(addr.len));
        crate::file::allocator::round_up(len)
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }

    /// Charges `bytes` to the budget until the returned guard drops: the megabyte-sized
    /// buffers of a node being encoded and written, or read and decoded, which every writer,
    /// the evictor and the checkpointer can each hold at once. It only counts: the threads that
    /// next check the budget evict or throttle for it.
    pub(crate) fn charge_transient(&self, bytes: usize) -> TransientCharge<'_> {
        self.used_bytes.fetch_add(bytes, Ordering::Relaxed);
        TransientCharge { used_bytes: &self.used_bytes, bytes }
    }
}

fn missing(id: NodeId) -> Error {
    Error::Corruption(format!("node {} is not in the store", id.0))
}

/// The kind of `slot`'s bytes in `mix`, if it has any in memory.
fn mix_kind<'a>(mix: &'a mut CacheMix, slot: &Slot) -> Option<&'a mut u64> {
    Some(match &slot.node {
        _ if slot.taken => &mut mix.with_writers_bytes,
        None => return None,
        Some(View::Whole(_)) if slot.dirty => &mut mix.dirty_bytes,
        Some(View::Whole(_)) => &mut mix.clean_bytes,
        Some(View::Thin(_)) => match eviction::head_of(slot) {
            None => &mut mix.section_bytes,
            Some(head) if head.internal => &mut mix.internal_head_bytes,
            Some(_) => &mut mix.leaf_head_bytes,
        },
    })
}

#[cfg(test)]
mod tests;
