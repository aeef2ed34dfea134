//! Eviction: keeping the cache within its budget. Least recently used nodes are evicted a step
//! at a time (see `thin`): a whole node becomes thin (a dirty one is first written to a new
//! block), a thin node drops its sections, a thin node without any is dropped. The evictor
//! thread does this beside the writers; far over budget a writer waits and evicts itself
//! (backpressure). Only one thread evicts at a time (`NodeStore::evicting`).
//!
//! Backpressure waits only where the waiting thread holds no lock anyone else needs
//! (`NodeStore::throttle`: after a commit, between two flush steps). Adding to the cache anywhere
//! else (`maybe_evict`) wakes the evictor and goes on: a writer or flusher waiting there held its
//! tree's lock, or the commit lock, through someone else's eviction (milliseconds of
//! compressing and writing dirty nodes), and every reader and writer of the tree waited behind
//! it. That was most of the p99 of reads while a writer ran beyond memory (issue 17). No one
//! waits for eviction below `HARD_LIMIT_PERCENT` but at those two places.
//!
//! A failed write (a full disk) costs nothing: the node stays dirty in memory and its block goes
//! back to the allocator. The failure is kept (`NodeStore::write_failure`) and the engine refuses
//! commits while it stands, so memory does not grow with changes that cannot be written; the
//! pass goes on evicting clean nodes, so readers keep to the budget. The maintenance thread
//! retries one write per tick (`retry_write_back`); the first write that succeeds, there, in an
//! eviction or in a checkpoint, ends the refusal. Evicting never reports an error to the reader
//! or writer that triggered it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{NodeStore, Slot};
use crate::error::Result;
use crate::node::{NodeId, codec};
use crate::thin::{Thin, View};

/// Eviction brings the cache down to this share of the budget, so it does not run per insert.
const EVICT_TARGET_PERCENT: usize = 90;

/// Past this share of the budget, a writer waits for the running eviction (throttling). Close to
/// the budget, so that a process can be held to a memory cap near it: the evictor runs beside
/// the writers, and at 150% (the earlier value) the nodes alone could take half again the budget.
const THROTTLE_PERCENT: usize = 115;

/// Past this share of the budget, any thread adding to the cache waits for the running eviction,
/// wherever it is: the bound that holds when the threads that throttle (`throttle`) fall behind,
/// as readers alone can make them. Reached rarely: the writers' throttle comes first.
const HARD_LIMIT_PERCENT: usize = 150;

/// Leaves' heads are evicted with the rest, least recently used first, only while all heads in
/// memory take more than this share of the budget (see `evict_to_target`).
const HEADS_SHARE_PERCENT: usize = 25;

/// How often, at most, the evictor returns free glibc allocator pages to the system (in a program
/// that embeds the engine on glibc's malloc; Strata's binaries run on jemalloc, which purges on
/// its own: see `allocator`). On glibc, without it the
/// process's resident memory ran 80-100 MiB above its live heap (iibench, 128 MiB cache: live
/// heap 150-180 MiB, resident 215-245 MiB, OOM-killed under a 256 MiB cap); trimming every
/// 100-300 ms kept it within 20-40 MiB of the heap at no measurable cost in inserts/s.
const TRIM_INTERVAL: Duration = Duration::from_millis(200);

/// ...and only while the process's resident memory is over this share of the cache budget. A
/// trim is not free: `malloc_trim` holds each arena's lock while it hands pages back one free
/// chunk at a time, so a committing thread that shares the arena waits, and the pages handed back
/// come back as page faults. Trimming every 200 ms regardless cost bio_bench's indexed inserts
/// about 0.6 µs of system time per document (2.4M documents under a 256 MiB cap with a 128 MiB
/// cache: resident 150-170 MiB trimmed, about 195 MiB untrimmed, where iibench untrimmed reached
/// 245 MiB).
const TRIM_ABOVE_PERCENT: usize = 140;

/// The wake-up line between writers and the evictor thread.
#[derive(Default)]
pub(super) struct Evictor {
    state: Mutex<EvictorState>,
    wake: Condvar,
}

#[derive(Default)]
struct EvictorState {
    running: bool,
    wanted: bool,
}

impl Evictor {
    /// Asks the evictor thread to run; false if there is none.
    fn wake(&self) -> bool {
        let mut state = self.state.lock();
        if state.running && !state.wanted {
            state.wanted = true;
            self.wake.notify_one();
        }
        state.running
    }

    /// Waits until eviction is wanted (true) or the thread should stop (false).
    fn wait(&self) -> bool {
        let mut state = self.state.lock();
        while state.running && !state.wanted {
            self.wake.wait(&mut state);
        }
        state.wanted = false;
        state.running
    }

    fn set_running(&self, running: bool) {
        self.state.lock().running = running;
        self.wake.notify_all();
    }
}

impl NodeStore {
    /// Keeps the cache within budget without waiting: over budget, the evictor thread (if one
    /// runs) is woken and the caller goes on; without an evictor thread, the caller evicts
    /// whenever no one else is. Only past `HARD_LIMIT_PERCENT` does the caller wait for the
    /// running eviction (see the module header: callers may hold a tree's lock).
    pub(super) fn maybe_evict(&self) {
        if self.disk.is_none() || self.used_bytes() <= self.budget_bytes {
            return;
        }
        if self.used_bytes() > self.budget_bytes / 100 * HARD_LIMIT_PERCENT {
            self.wait_and_evict();
            return;
        }
        if self.evictor.wake() {
            return;
        }
        if let Some(_evicting) = self.evicting.try_lock() {
            self.evict_to_target();
        }
    }

    /// The writers' backpressure, for a thread that holds no lock others wait on: far over
    /// budget (`THROTTLE_PERCENT`), waits for the running eviction and then evicts itself.
    /// (Below that, the puts that charged the cache have woken the evictor already.)
    pub fn throttle(&self) {
        if self.disk.is_some() && self.used_bytes() > self.budget_bytes / 100 * THROTTLE_PERCENT {
            self.wait_and_evict();
        }
    }

    fn wait_and_evict(&self) {
        self.counters.throttle_waits.fetch_add(1, Ordering::Relaxed);
        let _evicting = self.evicting.lock();
        self.evict_to_target();
    }

    /// Evicts least recently used nodes until the cache is at `EVICT_TARGET_PERCENT` of its
    /// budget. The caller holds `evicting`. After a failed write, dirty nodes are passed over.
    ///
    /// Heads (thin nodes without sections: a few KiB that route a reader to the one section it
    /// needs) go last: a leaf's head only while heads take more than `HEADS_SHARE_PERCENT` of
    /// the budget, an internal node's head only once nothing else is left to evict. Beyond
    /// memory each head a reader finds missing is one more read it waits for; in LRU order with
    /// the rest, the heads of the index a query thread reads were pushed out by the leaves the
    /// flusher reads whole (iibench beyond memory, issue 17).
    fn evict_to_target(&self) {
        let target = self.budget_bytes / 100 * EVICT_TARGET_PERCENT;
        if self.used_bytes() <= target {
            return;
        }
        let mut candidates: Vec<(u64, NodeId, Option<Head>)> = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock();
            candidates.extend(
                shard
                    .iter()
                    .filter(|(_, s)| s.node.is_some() && !s.taken)
                    .map(|(id, s)| (s.last_used, *id, head_of(s))),
            );
        }
        candidates.sort_unstable_by_key(|(last_used, ..)| *last_used);
        let mut heads_bytes: usize = candidates.iter().filter_map(|(.., head)| head.map(|h| h.bytes)).sum();
        let heads_share = self.budget_bytes / 100 * HEADS_SHARE_PERCENT;
        let mut write_dirty = true;
        // Heads passed over, least recently used first: (internal, id).
        let mut passed_over: Vec<(bool, NodeId)> = Vec::new();
        for (_, id, head) in candidates {
            if self.used_bytes() <= target {
                return;
            }
            match head {
                Some(head) if head.internal || heads_bytes <= heads_share => {
                    passed_over.push((head.internal, id));
                    continue;
                }
                Some(head) => heads_bytes -= head.bytes,
                None => {}
            }
            // The failure is kept by the write itself (`note_write`).
            if self.evict(id, write_dirty).is_err() {
                write_dirty = false;
            }
        }
        // Still over: the heads passed over too, leaves' before internal nodes' (a stable sort
        // keeps each kind least recently used first).
        passed_over.sort_by_key(|(internal, _)| *internal);
        for (_, id) in passed_over {
            if self.used_bytes() <= target {
                return;
            }
            let _ = self.evict(id, false);
        }
    }

    /// After a failed node write, tries to write the least recently used dirty node (the
    /// maintenance thread's tick); with no dirty node left, the failure no longer stands.
    pub fn retry_write_back(&self) {
        if self.write_failure().is_none() {
            return;
        }
        let _evicting = self.evicting.lock();
        let oldest_dirty = self
            .shards
            .iter()
            .filter_map(|shard| {
                let shard = shard.lock();
                shard
                    .iter()
                    .filter(|(_, s)| s.dirty && !s.taken && matches!(s.node, Some(View::Whole(_))))
                    .map(|(id, s)| (s.last_used, *id))
                    .min()
            })
            .min();
        match oldest_dirty {
            Some((_, id)) => {
                let _ = self.evict(id, true);
            }
            None => self.clear_write_failure(),
        }
    }

    /// The evictor thread's loop: evict whenever woken over budget, until `stop_evictor`. A
    /// failed write stands as the store's write failure (see the module header).
    ///
    /// Evicting frees node-sized allocations that glibc's allocator would keep (its arenas give
    /// back only the top of a heap), so the evictor also hands its free pages back to the system,
    /// at most every `TRIM_INTERVAL` while the process holds more than `TRIM_ABOVE_PERCENT` of
    /// the budget.
    pub fn run_evictor(&self) {
        let mut last_trim = Instant::now();
        while self.evictor.wait() {
            let _evicting = self.evicting.lock();
            self.evict_to_target();
            // Reading the resident size is a read of /proc: only once a trim is due.
            let over = || {
                crate::allocator::resident_bytes()
                    .is_none_or(|bytes| bytes > self.budget_bytes / 100 * TRIM_ABOVE_PERCENT)
            };
            if last_trim.elapsed() >= TRIM_INTERVAL && over() {
                crate::allocator::release_free_memory();
                last_trim = Instant::now();
            }
        }
    }

    pub fn start_evictor(&self) {
        self.evictor.set_running(true);
    }

    pub fn stop_evictor(&self) {
        self.evictor.set_running(false);
    }

    /// Evicts one step of a node (see `thin`): a whole node becomes thin, written to a new block
    /// first if it is dirty; a thin node drops its sections; a thin node without any is dropped.
    /// A node whose block has no layout (the first format) is dropped whole. A dirty node is
    /// left alone unless `write_dirty`.
    pub(super) fn evict(&self, id: NodeId, write_dirty: bool) -> Result<()> {
        let (node, version, compression) = {
            let mut shard = self.shard(id).lock();
            let Some(slot) = shard.get_mut(&id) else { return Ok(()) };
            if slot.taken {
                return Ok(());
            }
            match &slot.node {
                None => return Ok(()),
                Some(View::Whole(_)) if slot.dirty && !write_dirty => return Ok(()),
                Some(View::Whole(node)) if slot.dirty => (Arc::clone(node), slot.version, slot.compression),
                Some(View::Whole(_)) => {
                    let thin = slot.addr.zip(slot.layout.clone()).map(|(addr, layout)| Thin::new(id, addr, layout));
                    self.evict_to(slot, thin);
                    return Ok(());
                }
                Some(View::Thin(thin)) => {
                    let thinner = thin.has_parts().then(|| thin.without_parts());
                    self.evict_to(slot, thinner);
                    return Ok(());
                }
            }
        };
        let written = self.write_node(id, &node, self.compression_of(compression))?;
        self.counters.write_backs.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(id).lock();
        match shard.get_mut(&id) {
            Some(slot) if slot.version == version && !slot.taken => {
                if let Some(old) = slot.addr.replace(written.addr) {
                    self.retire(old, slot.checkpointed);
                }
                slot.checkpointed = false;
                slot.layout = written.layout.clone();
                slot.dirty = false;
                let thin = written.layout.map(|layout| Thin::new(id, written.addr, layout));
                self.evict_to(slot, thin);
            }
            // Changed (or freed) while being written: the block holds a version nobody names.
            _ => self.free_unreferenced(written.addr),
        }
        Ok(())
    }

    /// Replaces a clean slot's node by a thinner one, or by nothing.
    fn evict_to(&self, slot: &mut Slot, thinner: Option<Thin>) {
        // A dirty node dropped from memory would lose its changes; one out with a writer would
        // come back over whatever replaced it.
        assert!(!slot.dirty && !slot.taken, "evicting a dirty or taken node");
        // A clean node is on disk; one that is not would be gone once its memory is dropped.
        assert!(slot.addr.is_some(), "evicting a node that has no block");
        let thinner = thinner.filter(|_| self.partial);
        let counter = if thinner.is_some() { &self.counters.partial_evictions } else { &self.counters.evictions };
        counter.fetch_add(1, Ordering::Relaxed);
        self.install(slot, thinner.map(|thin| View::Thin(Arc::new(thin))));
    }
}

/// A thin node without sections, as eviction sees it.
#[derive(Clone, Copy)]
pub(super) struct Head {
    pub(super) internal: bool,
    bytes: usize,
}

pub(super) fn head_of(slot: &Slot) -> Option<Head> {
    match &slot.node {
        Some(View::Thin(thin)) if !thin.has_parts() => {
            Some(Head { internal: matches!(thin.layout.head, codec::Head::Internal { .. }), bytes: slot.size })
        }
        _ => None,
    }
}
