//! [`StoreOptions`]: how a store runs (the engine's options, the TTL monitor's interval, memory
//! limits of blocking stages, document compression).

use std::time::Duration;

/// How a store runs.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The engine's options (its `update` function is always the counter update: the store's
    /// counters need it).
    pub engine: storage::Options,
    /// How often the TTL monitor deletes expired documents.
    pub ttl_interval: Duration,
    /// A blocking sort's memory (find's, aggregation's `$sort`) before it fails with 292 or
    /// (with allowDiskUse) spills.
    pub sort_memory_limit_bytes: usize,
    /// The memory of aggregation's `$group` (also `$sortByCount`'s) and `$bucketAuto` before
    /// they fail with 292 or (with allowDiskUse) spill.
    pub group_memory_limit_bytes: usize,
    /// How collections' documents are compressed unless a collection's `storageEngine` option
    /// says otherwise (`None`: as the engine's `compression`, like every other tree). zstd at
    /// level 1 by default: documents are mostly written once (appended in `_id` order) and
    /// compress far better with it, while index trees, rewritten again and again as random
    /// keys arrive beyond memory, keep the engine's faster LZ4 (docs/BENCHMARKS.md, "Space").
    pub document_compression: Option<storage::Compression>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            engine: storage::Options::default(),
            ttl_interval: Duration::from_secs(60),
            sort_memory_limit_bytes: 100 * 1024 * 1024,
            group_memory_limit_bytes: 100 * 1024 * 1024,
            document_compression: Some(storage::Compression::Zstd(1)),
        }
    }
}
