//! Engine options: the tree's shape and the engine's policies, all easy to sweep.

use std::time::Duration;

use crate::compression::Compression;
use crate::file::header::Shape;
use crate::message::{UpdateFn, counter_update};

/// The largest node size `validate` accepts (256 MiB; the default is 4 MiB at most).
const MAX_NODE_SIZE_BYTES: usize = 256 << 20;

/// Where flushes and evictions run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// A background thread flushes full roots; a commit flushes itself only when a root's
    /// buffers pass twice the node size (backpressure), so commits rarely pay for a cascade.
    /// A durable engine also runs an evictor thread that writes nodes out past the cache budget.
    Background,
    /// The committing thread flushes as soon as a root is full and evicts as soon as the cache
    /// is over budget: deterministic, for tests.
    Inline,
}

/// How much of a commit must reach the disk before `commit` returns (in memory every level is
/// the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Returns after the commit's log record is synced.
    Immediate,
    /// The log is synced at least every 100 ms.
    Periodic,
    /// Returns at once; the record reaches the disk with the next sync anyone asks for, or when
    /// the log buffer fills. A process crash may lose it.
    None,
}

/// The tree shape fields (`node_size_bytes`, `basement_size_bytes`, `fanout`) apply to a new
/// data file; an existing one keeps the shape it was created with.
#[derive(Clone)]
pub struct Options {
    /// An internal node flushes when its buffers hold more than this; a leaf splits past it.
    pub node_size_bytes: usize,
    /// The read unit within a leaf.
    pub basement_size_bytes: usize,
    /// The most children an internal node has before it splits.
    pub fanout: usize,
    pub flush_mode: FlushMode,
    /// Resolves blind updates; the default treats values as little-endian i64 counters.
    pub update: UpdateFn,
    /// The memory budget for nodes in memory (durable engines evict past it).
    pub cache_size_bytes: usize,
    /// How basements and buffers are compressed on disk.
    pub compression: Compression,
    /// A checkpoint starts at least this often...
    pub checkpoint_interval: Duration,
    /// ...and whenever this much log has been written since the last one. 2 GiB, as MongoDB
    /// configures WiredTiger (`log_size=2GB`): a checkpoint rewrites every node dirtied since the
    /// last, and with large documents a smaller trigger checkpoints several times a second,
    /// rewriting the whole of every randomly written index each time (bio_bench: 256 MiB cost
    /// 14–26% of the insert rate). Recovery replays at most this much log.
    pub checkpoint_log_bytes: u64,
    /// ...and whenever the log since the last one is at least this large and at least as large
    /// as the data file (a checkpoint then costs less than replaying that log would).
    pub checkpoint_log_floor_bytes: u64,
    /// A new log segment starts past this size.
    pub log_segment_bytes: u64,
    /// The log is synced at least this often while `Periodic` commits wait.
    pub log_sync_interval: Duration,
    /// Evict nodes a step at a time and let readers read heads and single sections (see the
    /// storage engine's `thin` module). Off, nodes are evicted and read whole, as writers read
    /// them: only for benchmarks that measure what partial eviction is worth.
    pub partial_eviction: bool,
    /// Open a damaged directory to read what can be read (`strata repair`): replay stops at the
    /// first damage in the log instead of refusing to open (`RecoveryReport::log_damage` says
    /// where; the rest is lost). Never for serving: commits after the damage are dropped.
    pub salvage: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            node_size_bytes: 4 << 20,
            // The unit a point read beyond memory reads and decompresses. At 64 KiB a read cost
            // 34 KB of node bytes and ran at a quarter of redb's rate; 16 KiB reads 9 KB at 0.6x
            // redb's, with the same insert rate and file size (engine iibench, 1M rows, 64 MiB
            // cap; docs/bench/history/06-sessions-13-22.md, "Point reads and scans beyond memory,
            // beside redb"; the current figures are in docs/BENCHMARKS.md).
            basement_size_bytes: 16 << 10,
            fanout: 16,
            flush_mode: FlushMode::Background,
            update: counter_update(),
            cache_size_bytes: 512 << 20,
            compression: Compression::Lz4,
            checkpoint_interval: Duration::from_secs(60),
            checkpoint_log_bytes: 2 << 30,
            checkpoint_log_floor_bytes: 64 << 20,
            log_segment_bytes: 64 << 20,
            log_sync_interval: Duration::from_millis(100),
            partial_eviction: true,
            salvage: false,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("node_size_bytes", &self.node_size_bytes)
            .field("basement_size_bytes", &self.basement_size_bytes)
            .field("fanout", &self.fanout)
            .field("flush_mode", &self.flush_mode)
            .field("cache_size_bytes", &self.cache_size_bytes)
            .field("compression", &self.compression)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .field("checkpoint_log_bytes", &self.checkpoint_log_bytes)
            .field("checkpoint_log_floor_bytes", &self.checkpoint_log_floor_bytes)
            .field("log_segment_bytes", &self.log_segment_bytes)
            .field("partial_eviction", &self.partial_eviction)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Tiny nodes, so that flushes, splits and merges happen all the time (tests).
    pub fn tiny() -> Options {
        Options {
            node_size_bytes: 1024,
            basement_size_bytes: 256,
            fanout: 4,
            flush_mode: FlushMode::Inline,
            cache_size_bytes: 64 << 10,
            log_segment_bytes: 16 << 10,
            ..Options::default()
        }
    }

    /// Options for a cache of `bytes`, with a node size that suits it: a thirty-second of the
    /// cache, as a power of two between 256 KiB and 4 MiB. (At a 32 MiB cache, 4 MiB nodes cost
    /// 72 s of CPU for 3M iibench inserts against 41–49 s for 1 MiB, 512 KiB and 256 KiB.) The
    /// shape is chosen when a data file is created; reopening keeps the file's.
    pub fn for_cache_size(bytes: usize) -> Options {
        let defaults = Options::default();
        let wanted = (bytes / 32).max(1);
        // The largest power of two at or below a thirty-second of the cache.
        let power = 1usize << (usize::BITS - 1 - wanted.leading_zeros());
        Options {
            cache_size_bytes: bytes,
            node_size_bytes: power.clamp(256 << 10, defaults.node_size_bytes),
            ..defaults
        }
    }

    pub(crate) fn shape(&self) -> Shape {
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Shape {
            node_size_bytes: clamp(self.node_size_bytes),
            basement_size_bytes: clamp(self.basement_size_bytes),
            fanout: clamp(self.fanout),
        }
    }

    /// Takes the shape a data file's trees were built with (checked like the options' own).
    pub(crate) fn adopt_shape(&mut self, shape: Shape) -> crate::Result<()> {
        self.node_size_bytes = shape.node_size_bytes as usize;
        self.basement_size_bytes = shape.basement_size_bytes as usize;
        self.fanout = shape.fanout as usize;
        self.validate().map_err(|e| crate::Error::Corruption(format!("the data file's tree shape: {e}")))
    }

    pub(crate) fn validate(&self) -> crate::Result<()> {
        if self.fanout < 3 {
            return Err(crate::Error::InvalidArgument("fanout must be at least 3".into()));
        }
        if self.basement_size_bytes == 0 || self.node_size_bytes < 2 * self.basement_size_bytes {
            return Err(crate::Error::InvalidArgument("node size must be at least twice the basement size".into()));
        }
        // A buffer's runs address their bytes with u32 offsets, and a buffer grows to a few
        // node sizes before it must flush.
        if self.node_size_bytes > MAX_NODE_SIZE_BYTES {
            return Err(crate::Error::InvalidArgument(format!(
                "node size must be at most {MAX_NODE_SIZE_BYTES} bytes"
            )));
        }
        Ok(())
    }
}
