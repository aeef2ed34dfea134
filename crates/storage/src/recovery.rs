//! Opening a durable engine: the newest valid checkpoint, then the redo log after it.
//!
//! 1. The data file's newest valid header names a checkpoint and the trees' shape (node size,
//!    basement size, fanout), which replaces the options'; its catalog gives the trees, their
//!    roots and the block of every node; nodes are read lazily, on first use, and each block is
//!    checked (checksum and node id) as it is read. No valid header: a new engine.
//! 2. Every log record with a sequence number after the checkpoint's is applied again, in order;
//!    the log's torn tail, if any, is cut (see `wal::replay`).
//! 3. A new log segment starts for new commits.
//!
//! Corruption found on the way is an error naming what is damaged, never a guess.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::checkpoint::CheckpointState;
use crate::engine::{Durable, Shared};
use crate::error::{Error, Result};
use crate::file::allocator::Allocator;
use crate::file::catalog::Catalog;
use crate::file::{BlockAddr, DataFile};
use crate::io::FileSystem;
use crate::node::NodeId;
use crate::options::Options;
use crate::store::{Disk, NodeStore};
use crate::tree::{Tree, TreeId};
use crate::wal::record::Record;
use crate::wal::replay::{replay, segments};
use crate::wal::Log;

pub const DATA_FILE: &str = "data.strata";
pub const LOG_DIR: &str = "log";

pub(crate) fn recover(fs: Arc<dyn FileSystem>, dir: &Path, options: Options) -> Result<Shared> {
    let log_dir = dir.join(LOG_DIR);
    fs.create_dir_all(&log_dir)?;
    let data = Arc::new(DataFile::open(fs.as_ref(), &dir.join(DATA_FILE))?);
    // Make the directories themselves durable: the engine's own, and its entry in its parent
    // (the parent's ancestors are the user's, assumed to exist already).
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent)?;
    }
    fs.sync_dir(dir)?;
    let header = data.read_header()?;
    // The trees keep the shape they were built with, whatever the options say now.
    let mut options = options;
    if let Some(shape) = header.as_ref().and_then(|h| h.shape) {
        options.adopt_shape(shape)?;
    }
    let store = NodeStore::new(Some(Disk { file: Arc::clone(&data), compression: options.compression }), options.cache_size_bytes, options.partial_eviction);
    let shared = Shared::new(options, store);
    let (checkpoint, from_segment) = match header {
        Some(header) => {
            let catalog_addr = BlockAddr { offset: header.catalog_offset, len: header.catalog_len };
            let catalog = Catalog::decode(&data.read_block(catalog_addr, 0)?)?;
            load_checkpoint(&shared, &data, &catalog, catalog_addr)?;
            shared.store.set_next_id(header.next_node_id);
            shared.catalog.write().next_id = header.next_tree_id;
            shared.publish(header.checkpoint_seq);
            (CheckpointState::new(header.generation, Some(catalog_addr)), header.log_segment)
        }
        None => (CheckpointState::new(0, None), 0),
    };
    let end = replay(fs.as_ref(), &log_dir, from_segment, |record| apply_record(&shared, record))?;
    let last_segment = segments(fs.as_ref(), &log_dir)?.last().copied().unwrap_or(end.last_segment);
    let log = Log::create(Arc::clone(&fs), &log_dir, last_segment + 1, shared.options.log_segment_bytes)?;
    let durable = Durable { data, log, checkpoint: Mutex::new(checkpoint) };
    if shared.durable.set(durable).is_err() {
        return Err(Error::Invariant("engine recovered twice".into()));
    }
    Ok(shared)
}

fn load_checkpoint(shared: &Shared, data: &DataFile, catalog: &Catalog, catalog_addr: BlockAddr) -> Result<()> {
    shared.store.load_blocks(&catalog.blocks);
    let mut used: Vec<(u64, u64)> = catalog.blocks.iter().map(|(_, a)| (a.offset, u64::from(a.len))).collect();
    used.push((catalog_addr.offset, u64::from(catalog_addr.len)));
    data.set_allocator(Allocator::from_used(used));
    let mut registry = shared.catalog.write();
    for tree in &catalog.trees {
        let handle = Arc::new(Tree::with_root(TreeId(tree.id), tree.name.clone(), NodeId(tree.root)));
        registry.by_name.insert(tree.name.clone(), Arc::clone(&handle));
        registry.by_id.insert(TreeId(tree.id), handle);
    }
    Ok(())
}

/// Applies one log record again, unless the checkpoint already has it.
fn apply_record(shared: &Shared, record: Record) -> Result<()> {
    let visible = shared.visible.load(std::sync::atomic::Ordering::Acquire);
    if record.last_seq() <= visible {
        return Ok(());
    }
    let last = record.last_seq();
    match record {
        Record::Commit { first_seq, writes } => {
            let writes = writes.into_iter().map(|(tree, write)| (TreeId(tree), write)).collect();
            shared.apply_writes(first_seq, writes)?;
            flush_inline(shared)?;
        }
        Record::CreateTree { tree, name, .. } => shared.insert_tree(TreeId(tree), &name)?,
        Record::DropTree { tree, .. } => shared.remove_tree(TreeId(tree))?,
    }
    shared.publish(last);
    Ok(())
}

/// Replay runs before the flusher starts, so it flushes full roots itself.
fn flush_inline(shared: &Shared) -> Result<()> {
    let trees: Vec<Arc<Tree>> = shared.catalog.read().by_id.values().cloned().collect();
    for tree in trees {
        tree.flush_if_needed(&shared.ctx())?;
    }
    Ok(())
}
