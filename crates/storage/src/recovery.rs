//! Opening a durable engine: the newest valid checkpoint, then the redo log after it.
//!
//! 1. The data file's newest valid header names a checkpoint and the trees' shape (node size,
//!    basement size, fanout), which replaces the options'; its catalog gives the trees, their
//!    roots and the block of every node; nodes are read lazily, on first use, and each block is
//!    checked (checksum and node id) as it is read. No valid header: a new engine.
//! 2. Every log record with a sequence number after the checkpoint's is applied again, in order;
//!    the log's torn tail, if any, is cut (see `wal::replay`).
//! 3. A new log segment starts for new commits.
//! 4. If anything was replayed, the maintenance thread checkpoints as soon as the engine starts
//!    (`CheckpointState::requested`), so that no later start replays it again and the
//!    segments replayed are removed. Clients do not wait for it; a crash during it leaves the
//!    previous checkpoint and the whole log, as any failed checkpoint does.
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
use crate::file::header::Header;
use crate::file::{BlockAddr, DataFile};
use crate::io::{FileSystem, Lock, LockGuard};
use crate::node::NodeId;
use crate::options::Options;
use crate::store::{Disk, NodeStore};
use crate::tree::{Tree, TreeId};
use crate::wal::Log;
use crate::wal::record::Record;
use crate::wal::replay::{replay, segments};

pub const DATA_FILE: &str = "data.strata";
pub const LOG_DIR: &str = "log";
/// Held (`FileSystem::try_lock`) by the engine that has the directory open; holds its PID.
pub const LOCK_FILE: &str = "strata.lock";

/// What the last recovery did, for `Stats` and the server's startup line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log records applied again (those the checkpoint already had are not counted).
    pub replayed_records: u64,
    /// Bytes of log read after the checkpoint, records skipped or not.
    pub replayed_bytes: u64,
    /// From opening the directory to the engine ready for commits.
    pub micros: u64,
    /// In a salvage (`Options::salvage`), the damage replay stopped at: the log after it is
    /// lost.
    pub log_damage: Option<String>,
    /// The damage found in the checkpoint's catalog block, which was read from its copy.
    pub catalog_damage: Option<String>,
}

pub(crate) fn recover(fs: Arc<dyn FileSystem>, dir: &Path, options: Options) -> Result<Shared> {
    let started = std::time::Instant::now();
    // The directories themselves durable: any this creates, named in their parents.
    crate::io::create_dir_all_durably(fs.as_ref(), dir)?;
    let lock = lock_directory(fs.as_ref(), dir)?;
    let log_dir = dir.join(LOG_DIR);
    crate::io::create_dir_all_durably(fs.as_ref(), &log_dir)?;
    let data = Arc::new(DataFile::open(fs.as_ref(), &dir.join(DATA_FILE))?);
    fs.sync_dir(dir)?;
    let header = data.read_header()?;
    // The trees keep the shape they were built with, whatever the options say now.
    let mut options = options;
    if let Some(shape) = header.as_ref().and_then(|h| h.shape) {
        options.adopt_shape(shape)?;
    }
    let store = NodeStore::new(
        Some(Disk { file: Arc::clone(&data), compression: options.compression }),
        options.cache_size_bytes,
        options.partial_eviction,
    );
    let shared = Shared::new(options, store);
    let mut catalog_damage = None;
    let (checkpoint, from_segment) = match header {
        Some(header) => {
            let (catalog, catalog_blocks, damage) = read_catalog(&data, &header)?;
            catalog_damage = damage;
            load_checkpoint(&shared, &data, &catalog, &catalog_blocks)?;
            shared.store.set_next_id(header.next_node_id);
            shared.catalog.write().next_id = header.next_tree_id;
            shared.publish(header.checkpoint_seq);
            (CheckpointState::new(header.generation, catalog_blocks), header.log_segment)
        }
        None => (CheckpointState::new(0, Vec::new()), 0),
    };
    let mut replayed_records = 0;
    let salvage = shared.options.salvage;
    let end = replay(fs.as_ref(), &log_dir, from_segment, salvage, |record| {
        replayed_records += u64::from(apply_record(&shared, record)?);
        Ok(())
    })?;
    debug_assert_eq!(
        shared.next_seq.load(std::sync::atomic::Ordering::Acquire),
        shared.visible.load(std::sync::atomic::Ordering::Acquire) + 1,
        "after replay, the next commit follows the last one replayed"
    );
    let older = older_segments(fs.as_ref(), &log_dir, &end.segment_sizes)?;
    let last_segment = older.last().map_or(end.last_segment, |(number, _)| *number);
    let log = Log::create(Arc::clone(&fs), &log_dir, last_segment + 1, shared.options.log_segment_bytes, &older)?;
    // Replayed work is in memory only: until a checkpoint has it, every later start would
    // replay it again (and a crash loop would replay all of its history each time).
    let mut checkpoint = checkpoint;
    checkpoint.requested = replayed_records > 0;
    let report = RecoveryReport {
        replayed_records,
        replayed_bytes: end.bytes,
        micros: crate::engine::elapsed_micros(started),
        log_damage: end.stopped_at_damage,
        catalog_damage,
    };
    let durable = Durable { data, log, checkpoint: Mutex::new(checkpoint), recovery: report, _lock: lock, fs };
    if shared.durable.set(durable).is_err() {
        return Err(Error::Invariant("engine recovered twice".into()));
    }
    Ok(shared)
}

/// Takes the directory's lock before anything in it is read, or says who holds it.
fn lock_directory(fs: &dyn FileSystem, dir: &Path) -> Result<LockGuard> {
    let pid = std::process::id();
    let path = dir.join(LOCK_FILE);
    let locked = fs.try_lock(&path, &pid.to_string()).map_err(|error| {
        Error::io(format!("cannot lock the data directory {} ({})", dir.display(), path.display()), error)
    })?;
    match locked {
        Lock::Taken(guard) => Ok(guard),
        Lock::HeldBy(owner) => {
            let holder = match owner.parse::<u32>() {
                Ok(owner) if owner == pid => format!("PID {owner}: this process has it open already"),
                Ok(owner) => format!("PID {owner}"),
                Err(_) => format!("PID unknown; {} is locked", path.display()),
            };
            Err(Error::DirectoryLocked { dir: dir.display().to_string(), holder })
        }
    }
}

/// The checkpoint's catalog, from its block or, if that block is damaged, from its copy (with
/// the damage); and both blocks (in use until the next checkpoint frees them).
fn read_catalog(data: &DataFile, header: &Header) -> Result<(Catalog, Vec<BlockAddr>, Option<String>)> {
    let primary = BlockAddr { offset: header.catalog_offset, len: header.catalog_len };
    let copy = (header.catalog_copy_offset != 0)
        .then_some(BlockAddr { offset: header.catalog_copy_offset, len: header.catalog_len });
    let blocks: Vec<BlockAddr> = std::iter::once(primary).chain(copy).collect();
    let read = |addr: BlockAddr| data.read_block(addr, 0).and_then(|bytes| Catalog::decode(&bytes));
    match (read(primary), copy) {
        (Ok(catalog), _) => Ok((catalog, blocks, None)),
        (Err(damage), Some(copy)) => {
            let catalog = read(copy).map_err(|also| {
                Error::Corruption(format!("the checkpoint's catalog and its copy are damaged: {damage}; {also}"))
            })?;
            Ok((catalog, blocks, Some(damage.to_string())))
        }
        (Err(damage), None) => Err(damage),
    }
}

fn load_checkpoint(shared: &Shared, data: &DataFile, catalog: &Catalog, catalog_blocks: &[BlockAddr]) -> Result<()> {
    shared.store.load_blocks(&catalog.blocks);
    let mut used: Vec<(u64, u64)> = catalog.blocks.iter().map(|(_, a)| (a.offset, u64::from(a.len))).collect();
    used.extend(catalog_blocks.iter().map(|addr| (addr.offset, u64::from(addr.len))));
    data.set_allocator(Allocator::from_used(used));
    let mut registry = shared.catalog.write();
    for tree in &catalog.trees {
        let handle = Arc::new(Tree::with_root(TreeId(tree.id), tree.name.clone(), NodeId(tree.root)));
        registry.by_name.insert(tree.name.clone(), Arc::clone(&handle));
        registry.by_id.insert(TreeId(tree.id), handle);
    }
    Ok(())
}

/// Every segment in the log directory with its size: those replay read as it left them, the
/// others (before the checkpoint's segment, left by a removal that failed) as they are.
fn older_segments(fs: &dyn FileSystem, log_dir: &Path, replayed: &[(u64, u64)]) -> Result<Vec<(u64, u64)>> {
    let mut sizes = Vec::new();
    for number in segments(fs, log_dir)? {
        let size = match replayed.iter().find(|(n, _)| *n == number) {
            Some((_, size)) => *size,
            None => fs.open(&crate::wal::segment_path(log_dir, number), crate::io::OpenMode::Existing)?.len()?,
        };
        sizes.push((number, size));
    }
    Ok(sizes)
}

/// Applies one log record again, unless the checkpoint already has it; says whether it did.
///
/// Sequence numbers are handed out one after another and every one is logged (a commit, a tree
/// created or dropped), so the record after the state so far must start right after it: a gap
/// means records are missing from the middle of the log (a lost or deleted segment), and
/// recovery stops there rather than skip acknowledged commits.
fn apply_record(shared: &Shared, record: Record) -> Result<bool> {
    let visible = shared.visible.load(std::sync::atomic::Ordering::Acquire);
    if record.last_seq() <= visible {
        return Ok(false);
    }
    if record.first_seq() != visible + 1 {
        return Err(Error::Corruption(format!(
            "the log is missing records: after sequence number {visible} the next record starts at {}",
            record.first_seq()
        )));
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
    debug_assert_eq!(
        shared.visible.load(std::sync::atomic::Ordering::Acquire),
        last,
        "a replayed record's commits not visible after it"
    );
    Ok(true)
}

/// Replay runs before the flusher starts, so it flushes full roots itself.
fn flush_inline(shared: &Shared) -> Result<()> {
    let trees: Vec<Arc<Tree>> = shared.catalog.read().by_id.values().cloned().collect();
    for tree in trees {
        tree.flush_if_needed(&shared.ctx())?;
    }
    Ok(())
}
