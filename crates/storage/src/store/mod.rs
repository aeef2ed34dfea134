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
//! Files: this one holds the slots and the cache's reads and writes (`get`, `view`, `take`,
//! `put`, `replace`); `eviction` keeps the budget (the evictor thread, backpressure, eviction
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
use crate::node::codec::{self, Layout, decode_node};
use crate::node::{Internal, Node, NodeId};
use crate::stats::{CacheMix, TRACKED_LEVELS};
use crate::thin::{Part, Thin, View};

mod blocks;
mod capture;
mod eviction;
mod grace;

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
    fn readable<'a>(&self, shard: &'a mut HashMap<NodeId, Slot>, id: NodeId) -> Result<&'a mut Slot> {
        let slot = shard.get_mut(&id).ok_or_else(|| missing(id))?;
        if slot.taken {
            return Err(Error::Invariant(format!("node {} read while a writer has it", id.0)));
        }
        slot.last_used = self.tick();
        Ok(slot)
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

    /// Reads a whole node from `addr` into its slot; `None` if the slot moved meanwhile.
    fn load(&self, id: NodeId, addr: BlockAddr) -> Result<Option<Arc<CachedNode>>> {
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
    fn load_head(&self, id: NodeId, addr: BlockAddr) -> Result<Option<View>> {
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

fn moving(id: NodeId) -> Error {
    Error::Invariant(format!("node {} kept moving while it was read", id.0))
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
mod tests {
    //! Goal: no block a reader may have been handed is freed while the node still lives there.
    use super::*;
    use crate::io::sim::SimFs;
    use crate::node::leaf::Leaf;

    fn store_on_sim_disk() -> NodeStore {
        store_on_sim_disk_with_budget(1 << 20)
    }

    fn store_on_sim_disk_with_budget(budget: usize) -> NodeStore {
        let fs = SimFs::new();
        let file = DataFile::open(&fs, std::path::Path::new("data")).expect("open data file");
        NodeStore::new(Some(Disk { file: Arc::new(file), compression: Compression::None }), budget, true)
    }

    /// A checkpoint captured a dirty node; an eviction wrote the same version and dropped it from
    /// memory (so readers now read the eviction's block); then the checkpoint's own write is
    /// marked. The eviction's block must stay the node's and be the one the checkpoint names.
    #[test]
    fn a_checkpoint_keeps_the_block_an_eviction_wrote_meanwhile() {
        let store = store_on_sim_disk();
        let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
        let capture = store.capture().expect("capture");
        let (captured_id, node, version, _) = capture.dirty.into_iter().next().expect("one dirty node");
        assert_eq!(captured_id, id);
        store.evict(id, true).expect("evict");
        let evicted = store.shard(id).lock().get(&id).and_then(|slot| slot.addr).expect("evicted to a block");
        let written = store.write_node(id, &node, Compression::None).expect("checkpoint write");
        let written_at = written.addr;
        assert_ne!(written_at, evicted);
        assert_eq!(store.mark_written(id, version, written), evicted, "the catalog names the block readers use");
        assert_eq!(store.shard(id).lock().get(&id).and_then(|slot| slot.addr), Some(evicted));
        // The checkpoint's copy went back to the allocator; the evicted block did not.
        let again = store.write_node(id, &node, Compression::None).expect("a new write");
        assert_eq!(again.addr.offset, written_at.offset, "the checkpoint's unnamed copy is reused first");
        assert!(store.get(id).is_ok(), "the node reads back from the block readers were handed");
    }

    /// A node changed while a checkpoint wrote it stays dirty, but its slot names the block
    /// the checkpoint wrote from then on, and the block it named before is retired: regression,
    /// a node that changed during every checkpoint kept its first block (at the end of a file
    /// being compacted) forever.
    #[test]
    fn a_node_changed_during_a_checkpoint_names_the_checkpoints_block() {
        let store = store_on_sim_disk();
        let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
        store.evict(id, true).expect("written and thin");
        let first = store.shard(id).lock().get(&id).and_then(|slot| slot.addr).expect("a block");
        let node = store.take(id).expect("take");
        store.put(id, node).expect("dirty again");
        let capture = store.capture().expect("capture");
        let (_, node, version, _) = capture.dirty.into_iter().next().expect("one dirty node");
        let changed = store.take(id).expect("take");
        store.put(id, changed).expect("changed after the capture");
        let written = store.write_node(id, &node, Compression::None).expect("checkpoint write");
        let at = written.addr;
        assert_eq!(store.mark_written(id, version, written), at);
        let shard = store.shard(id).lock();
        let slot = shard.get(&id).expect("slot");
        assert_eq!((slot.addr, slot.dirty, slot.checkpointed), (Some(at), true, true));
        drop(shard);
        assert_ne!(at, first);
        store.drain_retired();
        assert_eq!(store.retired_bytes(), 0, "the first block was no checkpoint's: freed once no reader can hold it");
    }

    /// Eviction goes a step at a time, and a node dropped from memory keeps nothing of itself in
    /// its slot: regression, layouts were kept for every node on disk, outside the budget, and
    /// a 256 MiB process running iibench was OOM-killed at 6M inserts.
    #[test]
    fn eviction_thins_then_drops_and_keeps_no_layout() {
        let store = store_on_sim_disk();
        let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
        let state = |store: &NodeStore| {
            let shard = store.shard(id).lock();
            let slot = shard.get(&id).expect("slot");
            let resident = match &slot.node {
                None => "none",
                Some(View::Whole(_)) => "whole",
                Some(View::Thin(thin)) if thin.has_parts() => "thin with parts",
                Some(View::Thin(_)) => "thin",
            };
            (resident, slot.layout.is_some(), slot.size)
        };
        store.evict(id, true).expect("evict a dirty node: written, then thin");
        let (resident, has_layout, size) = state(&store);
        assert_eq!((resident, has_layout), ("thin", true));
        assert_eq!(store.used_bytes(), size, "the thin node alone is charged");
        let View::Thin(thin) = store.view(id).expect("view") else { panic!("a reader sees the thin node") };
        assert!(store.part(&thin, 0).expect("read a section").is_some());
        assert_eq!(state(&store).0, "thin with parts");
        store.evict(id, true).expect("evict the section");
        assert_eq!(state(&store).0, "thin");
        store.evict(id, true).expect("evict the thin node");
        assert_eq!(state(&store), ("none", false, 0));
        assert_eq!(store.used_bytes(), 0);
        assert!(matches!(store.view(id).expect("view again"), View::Thin(_)), "its head is read back alone");
        assert!(matches!(&**store.get(id).expect("a writer's whole read"), Node::Leaf(_)));
    }

    /// Heads go last: writers fill the cache with leaves many times over, and the head of an
    /// internal node (the least recently used node of all) is still in memory, as are leaves'
    /// heads while they fit in their share; whole leaves are written out and thinned. Regression
    /// (issue 17): in plain LRU order an index's heads were pushed out by the leaves the flusher
    /// reads whole, and each query read them again.
    #[test]
    fn eviction_keeps_heads_and_internal_heads_longest() {
        use crate::node::basement::Basement;
        use crate::node::buffer::Buffer;
        let budget = 256 << 10;
        let store = store_on_sim_disk_with_budget(budget);
        let internal = Internal {
            height: 1,
            pivots: vec![b"m".to_vec()],
            children: vec![NodeId(1_000), NodeId(1_001)],
            buffers: vec![Buffer::default(), Buffer::default()],
        };
        let internal = store.allocate(Node::Internal(internal)).expect("allocate");
        store.evict(internal, true).expect("written and thin");
        let leaf = |i: usize| {
            let value = vec![i as u8; 8 << 10];
            let key = format!("{i:08}").into_bytes();
            Leaf::from_basements(vec![Basement::from_entries([(
                &key[..],
                vec![(1, Some(std::borrow::Cow::Owned(value)))],
            )])])
        };
        let leaves: Vec<NodeId> =
            (0..200).map(|i| store.allocate(Node::Leaf(leaf(i))).expect("allocate a leaf")).collect();
        let resident = |id: NodeId| store.shard(id).lock().get(&id).and_then(|slot| slot.node.clone());
        assert!(matches!(resident(internal), Some(View::Thin(_))), "the internal node's head is still in memory");
        assert!(matches!(resident(leaves[0]), Some(View::Thin(_))), "the oldest leaf's head is still in memory");
        assert!(store.counters.write_backs.load(Ordering::Relaxed) > 100, "whole leaves were written out");
        assert!(store.used_bytes() <= budget / 100 * 115, "the cache kept to its budget: {}", store.used_bytes());
    }

    /// A head longer than the first page a reader reads is completed with a second read of the
    /// rest (long keys in a leaf of many basements), and its sections still read alone.
    #[test]
    fn a_head_longer_than_a_page_reads_back() {
        use crate::node::basement::Basement;
        let store = store_on_sim_disk();
        let key = |i: usize| format!("{i:0>200}").into_bytes();
        let basements: Vec<Basement> = (0..64)
            .map(|i| Basement::from_entries([(&key(i)[..], vec![(1, Some(std::borrow::Cow::Borrowed(&b"v"[..])))])]))
            .collect();
        let leaf = Leaf::from_basements(basements.clone());
        let id = store.allocate(Node::Leaf(leaf)).expect("allocate");
        store.evict(id, true).expect("written and thin");
        store.evict(id, true).expect("dropped");
        let View::Thin(thin) = store.view(id).expect("view") else { panic!("the head is read alone") };
        assert_eq!(thin.layout.sections.len(), 64);
        for (index, basement) in basements.iter().enumerate() {
            match store.part(&thin, index).expect("a section") {
                Some(Part::Basement(read)) => assert_eq!(&*read, basement),
                _ => panic!("basement {index} reads back"),
            }
        }
    }

    /// A writer changes a node a checkpoint still holds: both versions are in memory, and both
    /// are charged until the checkpoint lets its version go.
    #[test]
    fn a_version_held_by_a_checkpoint_stays_charged_until_dropped() {
        let store = store_on_sim_disk();
        let id = store.allocate(Node::Leaf(Leaf::default())).expect("allocate");
        let held = store.get(id).expect("get");
        let charged = store.used_bytes();
        assert!(charged > 0);
        let mut copy = store.take(id).expect("take");
        assert_eq!(store.used_bytes(), 2 * charged, "the held version and the writer's copy are both charged");
        if let Node::Leaf(leaf) = &mut copy {
            let update: crate::message::UpdateFn = Arc::new(|_, _, _| None);
            leaf.apply_point(b"k".to_vec(), vec![(1, crate::message::Event::Put(vec![7; 4000]))], 0, &update, 64 << 10);
        }
        store.put(id, copy).expect("put");
        let both = store.used_bytes();
        assert!(both > charged + 4000, "both versions charged: {both}");
        drop(held);
        let alone = store.used_bytes();
        assert_eq!(alone, both - charged, "dropping the held version releases exactly its charge");
        assert_eq!(store.counters.copies.load(Ordering::Relaxed), 1);
        // Without another holder a take moves the node out: no copy, and it stays charged.
        let node = store.take(id).expect("take alone");
        assert_eq!(store.used_bytes(), alone, "a node out with a writer is charged");
        store.put(id, node).expect("put");
        assert_eq!(store.used_bytes(), alone);
        assert_eq!(store.counters.copies.load(Ordering::Relaxed), 1);
    }
}
