//! Engine counters, read without locks; they feed `serverStatus` and the benchmark reports.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Levels tracked separately in per-level counters; deeper levels share the last slot.
pub const TRACKED_LEVELS: usize = 8;

#[derive(Default)]
pub(crate) struct Counters {
    pub commits: AtomicU64,
    pub messages: AtomicU64,
    pub direct_leaf_writes: AtomicU64,
    pub flushes: AtomicU64,
    pub detached_flushes: AtomicU64,
    pub detached_flushes_abandoned: AtomicU64,
    pub flush_failures: AtomicU64,
    pub cascades: AtomicU64,
    pub leaf_splits: AtomicU64,
    pub internal_splits: AtomicU64,
    pub merges: AtomicU64,
    pub flushed_bytes_by_height: [AtomicU64; TRACKED_LEVELS],
    pub checkpoints: AtomicU64,
    pub checkpoint_failures: AtomicU64,
    pub checkpoint_bytes: AtomicU64,
    pub checkpoint_micros: AtomicU64,
    /// Wall-clock time of the last checkpoint that succeeded (0: none since the engine opened).
    pub last_checkpoint_unix_millis: AtomicU64,
    pub tree_lock_wait_micros: AtomicU64,
    pub bytes_returned: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn flushed(&self, height: u32, bytes: usize) {
        let slot = (height as usize).min(TRACKED_LEVELS - 1);
        if let Some(counter) = self.flushed_bytes_by_height.get(slot) {
            counter.fetch_add(bytes as u64, Relaxed);
        }
    }

    pub fn snapshot(&self) -> Stats {
        Stats {
            commits: self.commits.load(Relaxed),
            messages: self.messages.load(Relaxed),
            direct_leaf_writes: self.direct_leaf_writes.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            detached_flushes: self.detached_flushes.load(Relaxed),
            detached_flushes_abandoned: self.detached_flushes_abandoned.load(Relaxed),
            flush_failures: self.flush_failures.load(Relaxed),
            cascades: self.cascades.load(Relaxed),
            leaf_splits: self.leaf_splits.load(Relaxed),
            internal_splits: self.internal_splits.load(Relaxed),
            merges: self.merges.load(Relaxed),
            flushed_bytes_by_height: self.flushed_bytes_by_height.each_ref().map(|c| c.load(Relaxed)),
            node_count: 0,
            buffered_bytes_by_height: [0; TRACKED_LEVELS],
            checkpoints: self.checkpoints.load(Relaxed),
            checkpoint_failures: self.checkpoint_failures.load(Relaxed),
            checkpoint_bytes: self.checkpoint_bytes.load(Relaxed),
            checkpoint_micros: self.checkpoint_micros.load(Relaxed),
            last_checkpoint_unix_millis: Some(self.last_checkpoint_unix_millis.load(Relaxed)).filter(|ms| *ms > 0),
            tree_lock_wait_micros: self.tree_lock_wait_micros.load(Relaxed),
            ..Stats::default()
        }
    }
}

/// A point-in-time copy of the engine's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub commits: u64,
    /// Messages written (one per put, delete, update or range delete).
    pub messages: u64,
    /// Messages applied straight to a leaf because every buffer above was empty.
    pub direct_leaf_writes: u64,
    /// Buffers moved one level down.
    pub flushes: u64,
    /// Flushes into a leaf done outside the tree's lock (counted in `flushes` too), and those
    /// dropped because the tree changed under them.
    pub detached_flushes: u64,
    pub detached_flushes_abandoned: u64,
    /// Flushes that failed (an I/O error or a damaged node). The first one stops the log: no
    /// commit is acknowledged after it until the engine is reopened and recovers.
    pub flush_failures: u64,
    /// Flushes that overfilled the child and so flushed it in turn.
    pub cascades: u64,
    pub leaf_splits: u64,
    pub internal_splits: u64,
    pub merges: u64,
    /// Bytes of messages flushed out of nodes of each height (index = height of the parent).
    pub flushed_bytes_by_height: [u64; TRACKED_LEVELS],
    /// Nodes of every tree, in memory or on disk.
    pub node_count: u64,
    /// Bytes of messages waiting in the buffers of the nodes in memory, by height of the node
    /// holding them (nodes on disk are not read to count theirs).
    pub buffered_bytes_by_height: [u64; TRACKED_LEVELS],
    pub checkpoints: u64,
    /// Checkpoints that failed (the previous one stays the file's; the log keeps every commit).
    pub checkpoint_failures: u64,
    /// Bytes of node and catalog blocks the checkpoints wrote.
    pub checkpoint_bytes: u64,
    /// Time spent in checkpoints, in total.
    pub checkpoint_micros: u64,
    /// When the last checkpoint succeeded (milliseconds since the Unix epoch); `None` if none
    /// has since the engine opened.
    pub last_checkpoint_unix_millis: Option<u64>,
    /// Time commits waited for a tree's lock (held by a background flush step or a reader).
    pub tree_lock_wait_micros: u64,
    /// Accounted bytes of nodes in memory, and the budget they are held to.
    pub cache_used_bytes: u64,
    pub cache_budget_bytes: u64,
    /// What those bytes hold, by what eviction can do with them.
    pub cache_mix: CacheMix,
    /// Nodes dropped from memory, whole nodes read back, dirty nodes written to make room.
    pub evictions: u64,
    pub cache_loads: u64,
    /// Eviction steps short of dropping a node: a node made thin (its layout kept, its basements
    /// or buffers dropped) or a thin node's sections dropped.
    pub partial_evictions: u64,
    /// Reads of a node's head alone and of single sections (a basement or a buffer), by readers.
    pub head_loads: u64,
    pub section_loads: u64,
    /// Of those sections, the ones whose reads were started together, ahead, because a read's
    /// path missed two or more of them.
    pub sections_started_early: u64,
    /// Node bytes read from the data file (whole blocks, heads and sections).
    pub node_bytes_read: u64,
    pub write_backs: u64,
    /// Writers that waited for eviction because the cache was far over budget.
    pub throttle_waits: u64,
    /// Nodes a writer copied because a checkpoint or an eviction was still writing them (their
    /// bytes stay charged to the cache until the copy's original is dropped).
    pub write_copies: u64,
    /// Node bytes before and after compression, over every node block written.
    pub node_bytes_uncompressed: u64,
    pub node_bytes_written: u64,
    /// `node_bytes_written` by the height of the node written (0: leaves).
    pub node_bytes_written_by_height: [u64; TRACKED_LEVELS],
    pub log_syncs: u64,
    /// Failed log writes and node writes (a full disk; each retry that failed counts).
    pub log_write_failures: u64,
    pub node_write_failures: u64,
    /// Why commits are refused now, if they are: a log or node write failing (a full disk)
    /// until one succeeds. `None` while writes go through.
    pub writes_refused: Option<String>,
    /// Log bytes appended since the engine opened.
    pub log_bytes: u64,
    /// Log bytes on disk (every segment a crash now would leave; checkpoints remove the old).
    pub log_disk_bytes: u64,
    /// Size of the data file on disk.
    pub data_file_bytes: u64,
    /// Space of the blocks the nodes live in now (compressed, whole pages); with the last
    /// checkpoint's catalog, what a compacted file would hold.
    pub block_bytes: u64,
    /// Free space inside the data file, reused by the next blocks written.
    pub free_bytes: u64,
    /// Blocks replaced but not yet free: kept for the next checkpoint (the durable one names
    /// them) or for readers that may be reading them.
    pub retired_bytes: u64,
    /// Checkpoints' trims of the file's free tail, and `compact` runs: bytes given back to the
    /// operating system since the engine opened.
    pub bytes_returned: u64,
    /// What recovery did when the engine opened (zeros for an in-memory engine).
    pub recovery: crate::recovery::RecoveryReport,
}

/// The cache's accounted bytes by kind of node in memory (`NodeStore::census`). Eviction writes
/// dirty nodes, thins whole ones, drops sections, and drops heads last; beyond memory a reader
/// misses whatever this leaves no room for. While iibench wrote 4M documents under a 64 MiB
/// cgroup with a 16 MiB cache, dirty nodes held 10-14 MiB of it (the roots and the nodes the
/// flusher was filling), leaving 2-4 MiB for the heads and sections readers need (issue 17).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheMix {
    /// Whole nodes with changes not yet written.
    pub dirty_bytes: u64,
    /// Whole nodes the same as their blocks.
    pub clean_bytes: u64,
    /// Thin nodes holding sections (basements or buffers) that readers read, heads included.
    pub section_bytes: u64,
    /// Thin nodes without sections: the heads that route readers, of internal nodes and leaves.
    pub internal_head_bytes: u64,
    pub leaf_head_bytes: u64,
    /// Nodes out with a writer (taken to be changed and put back).
    pub with_writers_bytes: u64,
    /// The rest of `cache_used_bytes`: versions no longer in their slot that a checkpoint, an
    /// eviction's write or a reader still holds, and the buffers of nodes being encoded or
    /// decoded (`NodeStore::charge_transient`).
    pub held_bytes: u64,
}

impl CacheMix {
    /// The bytes of the nodes in their slots (all but `held_bytes`).
    pub fn in_slots(&self) -> u64 {
        self.dirty_bytes
            + self.clean_bytes
            + self.section_bytes
            + self.internal_head_bytes
            + self.leaf_head_bytes
            + self.with_writers_bytes
    }
}

/// Fills in the cache, disk and log figures.
pub(crate) fn add_cache_and_disk(stats: &mut Stats, shared: &crate::engine::Shared) {
    let c = &shared.store.counters;
    stats.cache_used_bytes = shared.store.used_bytes() as u64;
    // The census ran a moment before: under concurrent writers the two may disagree a little.
    stats.cache_mix.held_bytes = stats.cache_used_bytes.saturating_sub(stats.cache_mix.in_slots());
    stats.cache_budget_bytes = shared.options.cache_size_bytes as u64;
    stats.evictions = c.evictions.load(Relaxed);
    stats.cache_loads = c.loads.load(Relaxed);
    stats.partial_evictions = c.partial_evictions.load(Relaxed);
    stats.head_loads = c.head_loads.load(Relaxed);
    stats.section_loads = c.section_loads.load(Relaxed);
    stats.sections_started_early = c.sections_started_early.load(Relaxed);
    stats.node_bytes_read = c.bytes_read.load(Relaxed);
    stats.write_backs = c.write_backs.load(Relaxed);
    stats.node_write_failures = c.write_failures.load(Relaxed);
    stats.throttle_waits = c.throttle_waits.load(Relaxed);
    stats.write_copies = c.copies.load(Relaxed);
    stats.node_bytes_uncompressed = c.bytes_before_compression.load(Relaxed);
    stats.node_bytes_written = c.bytes_written.load(Relaxed);
    stats.node_bytes_written_by_height = c.bytes_written_by_height.each_ref().map(|c| c.load(Relaxed));
    if let Some(durable) = shared.durable.get() {
        stats.log_syncs = durable.log.syncs();
        stats.log_write_failures = durable.log.write_failures();
        stats.writes_refused = durable.log.stalled().or_else(|| shared.store.write_failure()).map(|e| e.to_string());
        stats.log_bytes = durable.log.appended();
        stats.log_disk_bytes = durable.log.disk_bytes();
        stats.recovery = durable.recovery.clone();
        stats.data_file_bytes = durable.data.len().unwrap_or_else(|_| durable.data.allocated_end());
        stats.free_bytes = durable.data.free_bytes();
        stats.retired_bytes = shared.store.retired_bytes();
        stats.bytes_returned = shared.counters.bytes_returned.load(Relaxed);
    }
}
