//! Spill trees: temporary engine trees for what a blocking read cannot hold in memory: find's
//! sort past `sort_memory_limit_bytes`, and with `allowDiskUse` the runs of aggregation's
//! `$sort`, `$group` and `$bucketAuto` (through `query`'s `SpillRun`, implemented here).
//!
//! A spill tree is named `t.<pid>.<n>` and never enters the catalog, so the next open drops any
//! that a crash left. Records are written in non-durable commits of at most
//! `MAX_BATCH_RECORDS` records or `MAX_BATCH_BYTES` bytes (a transaction holds its writes in
//! memory until it commits), read back in key order through one snapshot, and the tree is
//! dropped when the [`SpillTree`], or the [`SortedSpill`] it became, is dropped. It holds only
//! a `Weak` reference to the store, so a cursor reading it does not keep a closed store open.

use std::sync::{Arc, Weak};

use query::error::QueryError;
use query::pipeline::{SpillRun, SpilledRecords};
use storage::{Durability, RangeIter, TreeId};

use crate::context::Context;
use crate::error::{Error, Result};

const MAX_BATCH_RECORDS: usize = 1000;
const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// A spill tree being written.
pub(crate) struct SpillTree {
    inner: Weak<Context>,
    tree: TreeId,
    guard: DropTree,
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    pending_bytes: usize,
}

impl SpillTree {
    pub(crate) fn create(inner: &Arc<Context>) -> Result<SpillTree> {
        let name = inner.temp_tree_name();
        let tree = inner.engine.create_tree(&name)?;
        let guard = DropTree { inner: Arc::downgrade(inner), name };
        Ok(SpillTree { inner: Arc::downgrade(inner), tree, guard, pending: Vec::new(), pending_bytes: 0 })
    }

    /// Adds a record (keys are unique: callers end them with an arrival number).
    pub(crate) fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.pending_bytes += key.len() + value.len();
        self.pending.push((key, value));
        if self.pending.len() >= MAX_BATCH_RECORDS || self.pending_bytes >= MAX_BATCH_BYTES {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let inner = upgrade(&self.inner)?;
        let mut transaction = inner.engine.begin();
        for (key, value) in self.pending.drain(..) {
            transaction.put(self.tree, key, value);
        }
        self.pending_bytes = 0;
        transaction.commit(Durability::None)?;
        Ok(())
    }

    /// Every record put, in key order.
    pub(crate) fn into_sorted(mut self) -> Result<SortedSpill> {
        self.commit()?;
        let iter = upgrade(&self.inner)?.engine.snapshot().iter(self.tree);
        Ok(SortedSpill { iter, _guard: self.guard })
    }
}

fn upgrade(inner: &Weak<Context>) -> Result<Arc<Context>> {
    inner.upgrade().ok_or_else(|| Error::IllegalOperation("the store was closed".into()))
}

/// A spill tree's records in key order; dropping it drops the tree.
pub(crate) struct SortedSpill {
    // Declared before the guard: the iterator (and its snapshot) goes first.
    iter: RangeIter,
    _guard: DropTree,
}

impl Iterator for SortedSpill {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.iter.next().map(|item| item.map_err(Error::from))
    }
}

/// Drops a spill tree when the records it holds are no longer needed.
struct DropTree {
    inner: Weak<Context>,
    name: String,
}

impl Drop for DropTree {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            // A failure leaves garbage that the next open drops.
            let _ = inner.engine.drop_tree(&self.name);
        }
    }
}

/// Aggregation's spill runs (`allowDiskUse`) are spill trees.
impl SpillRun for SpillTree {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), QueryError> {
        SpillTree::put(self, key, value).map_err(to_query)
    }

    fn into_sorted(self: Box<Self>) -> Result<SpilledRecords, QueryError> {
        let sorted = SpillTree::into_sorted(*self).map_err(to_query)?;
        Ok(Box::new(sorted.map(|item| item.map_err(to_query))))
    }
}

/// A docstore error as the pipeline carries it (code and name kept).
pub(crate) fn to_query(error: Error) -> QueryError {
    let message = error.to_string();
    match error {
        Error::Query(error) => error,
        Error::DuplicateKey { key_pattern, key_value, .. } => {
            QueryError::DuplicateKey { message, key_pattern, key_value }
        }
        error => QueryError::Coded { code: error.code(), code_name: error.code_name(), message },
    }
}
