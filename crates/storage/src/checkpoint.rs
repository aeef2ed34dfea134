//! Checkpoints: making the whole engine durable in the data file, copy-on-write, so the redo log
//! before it can go.
//!
//! 1. Capture, under the commit lock and every tree's shape lock (microseconds per thousand
//!    nodes): the visible sequence number, the trees and their roots, the dirty nodes (as `Arc`s:
//!    a writer that changes one afterwards changes a copy) and the blocks of the clean ones, the
//!    blocks superseded since the last checkpoint; the log moves to a new segment.
//! 2. Write, with no engine lock held: each captured dirty node to a new block, then the catalog
//!    (trees and block table), then sync the data file.
//! 3. Commit: write the header slot of the new generation and sync it. Until this sync the
//!    previous checkpoint is the one recovery uses, and none of its blocks has been reused.
//! 4. Release: free the blocks superseded before the capture, the blocks this checkpoint's
//!    writes replaced (the previous checkpoint's versions of its dirty nodes) and the previous
//!    catalog (once no reader can hold them); delete the log segments before the capture's; cut
//!    the file after its last block in use.
//!
//! A failure anywhere before 3 leaves the previous checkpoint intact and the superseded blocks
//! still reserved. A failed data file sync stops the engine (see `wal`): it is never retried.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::engine::{Durable, Shared, elapsed_micros};
use crate::error::{Error, Result};
use crate::file::BlockAddr;
use crate::file::catalog::{Catalog, CatalogTree};
use crate::file::header::Header;
use crate::stats::Counters;
use crate::store::Capture;
use crate::tree::Tree;

/// What the engine remembers between checkpoints.
pub(crate) struct CheckpointState {
    pub generation: u64,
    /// The last checkpoint's catalog block and its copy, freed once the next one is durable.
    pub catalog_blocks: Vec<BlockAddr>,
    pub last_finished: Instant,
    pub log_position_at_last: u64,
    /// A checkpoint is wanted now, whatever the policy says (after a recovery that replayed
    /// records); cleared when the next checkpoint starts (a failed one is retried by the
    /// interval and log-size triggers).
    pub requested: bool,
}

impl CheckpointState {
    pub fn new(generation: u64, catalog_blocks: Vec<BlockAddr>) -> CheckpointState {
        CheckpointState {
            generation,
            catalog_blocks,
            last_finished: Instant::now(),
            log_position_at_last: 0,
            requested: false,
        }
    }
}

/// Policy: a checkpoint is due when requested, after the interval, after
/// `checkpoint_log_bytes` of log, or once the log since the last one is as large as the data
/// file (and at least `checkpoint_log_floor_bytes`): a checkpoint writes at most the data
/// file's worth of nodes, so past that point replaying the log would cost more than writing
/// them, and a small database never carries gigabytes of log.
pub(crate) fn due(shared: &Shared, durable: &Durable) -> bool {
    let state = durable.checkpoint.lock();
    let options = &shared.options;
    let log_since = durable.log.appended().saturating_sub(state.log_position_at_last);
    let log_outgrew_data = log_since >= options.checkpoint_log_floor_bytes && log_since >= durable.data.allocated_end();
    state.requested
        || state.last_finished.elapsed() >= options.checkpoint_interval
        || log_since >= options.checkpoint_log_bytes
        || log_outgrew_data
}

struct Captured {
    seq: u64,
    segment: u64,
    log_position: u64,
    next_node_id: u64,
    next_tree_id: u64,
    trees: Vec<CatalogTree>,
    nodes: Capture,
    release: Vec<BlockAddr>,
}

/// Runs one checkpoint (one at a time), and then, while the data file is more than a fifth
/// free space, bounded compaction steps (`compact::step`, at most `AUTO_STEPS`); a no-op for an in-memory
/// engine. A failed checkpoint is counted: the one before it stays the file's, and the log
/// keeps growing until one succeeds.
pub(crate) fn checkpoint(shared: &Shared) -> Result<()> {
    checkpoint_once(shared)?;
    for _ in 0..crate::compact::AUTO_STEPS {
        if !crate::compact::wanted(shared) {
            break;
        }
        crate::compact::step(shared)?;
    }
    Ok(())
}

/// One checkpoint, without compaction.
pub(crate) fn checkpoint_once(shared: &Shared) -> Result<()> {
    let result = checkpoint_now(shared);
    if result.is_err() {
        Counters::add(&shared.counters.checkpoint_failures, 1);
    }
    result
}

fn checkpoint_now(shared: &Shared) -> Result<()> {
    let Some(durable) = shared.durable.get() else { return Ok(()) };
    let mut state = durable.checkpoint.lock();
    checkpoint_holding(shared, durable, &mut state)
}

/// Runs one checkpoint with the checkpoint lock already held (a backup keeps holding it while
/// it copies what this checkpoint made durable).
pub(crate) fn checkpoint_holding(shared: &Shared, durable: &Durable, state: &mut CheckpointState) -> Result<()> {
    // One attempt answers a request: if it fails, the interval and log-size triggers retry.
    state.requested = false;
    let started = Instant::now();
    let captured = capture(shared, durable)?;
    let release = captured.release.clone();
    match write_and_commit(shared, durable, state, captured) {
        Ok((bytes, catalog_blocks)) => {
            shared.store.free_blocks(release);
            shared.store.free_blocks(shared.store.take_replaced());
            for previous in std::mem::replace(&mut state.catalog_blocks, catalog_blocks) {
                durable.data.free(previous);
            }
            // What was freed at the end of the file goes back to the operating system.
            shared.store.drain_retired();
            if let Ok(returned) = durable.data.trim_tail() {
                Counters::add(&shared.counters.bytes_returned, returned);
            }
            let c = &shared.counters;
            Counters::add(&c.checkpoints, 1);
            Counters::add(&c.checkpoint_bytes, bytes);
            Counters::add(&c.checkpoint_micros, elapsed_micros(started));
            c.last_checkpoint_unix_millis.store(unix_millis(), Ordering::Relaxed);
            state.last_finished = Instant::now();
            Ok(())
        }
        Err(error) => {
            shared.store.restore_superseded(release);
            shared.store.restore_superseded(shared.store.take_replaced());
            if matches!(error, Error::Stopped { .. }) {
                // The data file may have lost pages the cache now believes are on disk.
                durable.log.stop("checkpoint failed", &error);
            }
            Err(error)
        }
    }
}

/// Whether the block table names each node once and every tree's root (a checkpoint that did
/// not could not be opened).
fn names_every_root_once(catalog: &Catalog) -> bool {
    let ids: std::collections::HashSet<u64> = catalog.blocks.iter().map(|(id, _)| *id).collect();
    ids.len() == catalog.blocks.len() && catalog.trees.iter().all(|tree| ids.contains(&tree.root))
}

fn unix_millis() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

fn capture(shared: &Shared, durable: &Durable) -> Result<Captured> {
    let _commit = shared.commit_lock.lock();
    let catalog = shared.catalog.read();
    let mut trees: Vec<Arc<Tree>> = catalog.by_id.values().cloned().collect();
    trees.sort_by_key(|t| t.id);
    let guards: Vec<_> = trees.iter().map(|t| t.lock_shape()).collect();
    let roots = trees
        .iter()
        .zip(&guards)
        .filter_map(|(tree, guard)| {
            guard.map(|root| CatalogTree { id: tree.id.0, name: tree.name.clone(), root: root.0 })
        })
        .collect();
    let nodes = shared.store.capture()?;
    let release = shared.store.take_superseded();
    let segment = durable.log.rotate_now()?;
    Ok(Captured {
        seq: shared.visible.load(Ordering::Acquire),
        segment,
        log_position: durable.log.appended(),
        next_node_id: shared.store.next_id(),
        next_tree_id: catalog.next_id,
        trees: roots,
        nodes,
        release,
    })
}

/// Steps 2 and 3 (and the log half of 4); returns the bytes written and the new catalog's two
/// blocks (the catalog and its copy: one damaged block must not make the file unopenable).
fn write_and_commit(
    shared: &Shared,
    durable: &Durable,
    state: &mut CheckpointState,
    captured: Captured,
) -> Result<(u64, Vec<BlockAddr>)> {
    // The catalog's two blocks take the lowest holes first: the nodes written after them are
    // clean blocks that compaction can move down, the catalog's are not, and a catalog left at
    // the end of the file would keep the file that long until the next checkpoint.
    let block_count = captured.nodes.clean.len() + captured.nodes.dirty.len();
    let catalog_len = Catalog::encoded_len(&captured.trees, block_count);
    let reserved = [durable.data.reserve_block(catalog_len)?, durable.data.reserve_block(catalog_len)?];
    let written = write_nodes_and_catalog(shared, durable, captured.trees, captured.nodes, reserved);
    let bytes = written.inspect_err(|_| reserved.into_iter().for_each(|addr| durable.data.free(addr)))?;
    let [catalog_addr, copy_addr] = reserved;
    durable.data.sync()?;
    let header = Header {
        generation: state.generation + 1,
        checkpoint_seq: captured.seq,
        log_segment: captured.segment,
        next_node_id: captured.next_node_id,
        next_tree_id: captured.next_tree_id,
        catalog_offset: catalog_addr.offset,
        catalog_len: catalog_addr.len,
        catalog_copy_offset: copy_addr.offset,
        shape: Some(shared.options.shape()),
    };
    debug_assert!(captured.seq <= shared.visible.load(Ordering::Acquire), "a checkpoint of commits not yet visible");
    durable.data.write_header(&header)?;
    state.generation += 1;
    state.log_position_at_last = captured.log_position;
    durable.data.write_header_copy(&header)?;
    // The checkpoint is durable; a segment that cannot be removed now is removed by the next.
    let _ = durable.log.remove_segments_before(captured.segment);
    Ok((bytes, vec![catalog_addr, copy_addr]))
}

/// Writes the dirty nodes, then the catalog naming every node's block into both reserved
/// blocks, and syncs nothing; returns the bytes written.
fn write_nodes_and_catalog(
    shared: &Shared,
    durable: &Durable,
    trees: Vec<CatalogTree>,
    nodes: Capture,
    reserved: [BlockAddr; 2],
) -> Result<u64> {
    let mut blocks = nodes.clean;
    let mut bytes = 0u64;
    for (id, node, version, compression) in nodes.dirty {
        let written = shared.store.write_node(id, &node, compression)?;
        bytes += u64::from(written.addr.len);
        blocks.push((id, shared.store.mark_written(id, version, written)));
    }
    let catalog = Catalog { trees, blocks: blocks.into_iter().map(|(id, addr)| (id.0, addr)).collect() };
    debug_assert!(names_every_root_once(&catalog), "a checkpoint's block table misses a root or names a node twice");
    let encoded = catalog.encode();
    for addr in reserved {
        durable.data.write_reserved(addr, 0, &encoded)?;
        bytes += u64::from(addr.len);
    }
    Ok(bytes)
}
