//! Engine options: the tree's shape and the engine's policies, all easy to sweep.

use crate::message::{counter_update, UpdateFn};

/// Where flushes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// A background thread flushes full roots; a commit flushes itself only when a root's
    /// buffers pass twice the node size (backpressure), so commits rarely pay for a cascade.
    Background,
    /// The committing thread flushes as soon as a root is full: deterministic, for tests.
    Inline,
}

/// How much of a commit must reach the disk before `commit` returns (the redo log arrives with
/// the durable engine; in memory every level is the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Returns after the commit's log record is synced.
    Immediate,
    /// The log is synced at least every 100 ms.
    Periodic,
    /// The log is synced when it happens to be.
    None,
}

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            node_size_bytes: 4 << 20,
            basement_size_bytes: 64 << 10,
            fanout: 16,
            flush_mode: FlushMode::Background,
            update: counter_update(),
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
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Tiny nodes, so that flushes, splits and merges happen all the time (tests).
    pub fn tiny() -> Options {
        Options {
            node_size_bytes: 512,
            basement_size_bytes: 128,
            fanout: 4,
            flush_mode: FlushMode::Inline,
            ..Options::default()
        }
    }

    pub(crate) fn validate(&self) -> crate::Result<()> {
        if self.fanout < 3 {
            return Err(crate::Error::InvalidArgument("fanout must be at least 3".into()));
        }
        if self.basement_size_bytes == 0 || self.node_size_bytes < 2 * self.basement_size_bytes {
            return Err(crate::Error::InvalidArgument(
                "node size must be at least twice the basement size".into(),
            ));
        }
        Ok(())
    }
}
