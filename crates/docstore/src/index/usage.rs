//! How often each index served a query, for `$indexStats`: one counter per index, kept by the
//! catalog by the index's tree name (so it outlives descriptor rebuilds, and a dropped and
//! re-created index starts again from zero, as in MongoDB). A counter counts plans executed
//! with the index (a find, count, distinct, update or delete that scans it; each branch of an
//! `$or` its own), not keys read. Counters live in memory: they restart with the server, and
//! `since` is the first time the counter was needed after that.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One index's accesses.
#[derive(Debug)]
pub(crate) struct IndexUsage {
    ops: AtomicU64,
    since: bson::DateTime,
}

/// The counters of every index the store has.
#[derive(Debug, Default)]
pub(crate) struct Usage {
    by_tree: Mutex<HashMap<String, Arc<IndexUsage>>>,
}

impl Usage {
    fn counter(&self, tree: &str) -> Arc<IndexUsage> {
        let mut by_tree = self.by_tree.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(usage) = by_tree.get(tree) {
            return Arc::clone(usage);
        }
        let usage = Arc::new(IndexUsage { ops: AtomicU64::new(0), since: bson::DateTime::now() });
        by_tree.insert(tree.to_owned(), Arc::clone(&usage));
        usage
    }

    /// Counts one plan executed with the index whose tree is `tree`.
    pub(crate) fn note(&self, tree: &str) {
        self.counter(tree).ops.fetch_add(1, Ordering::Relaxed);
    }

    /// `{ops, since}`, as `$indexStats` reports an index's `accesses`.
    pub(crate) fn accesses(&self, tree: &str) -> bson::Document {
        let usage = self.counter(tree);
        bson::doc! {"ops": usage.ops.load(Ordering::Relaxed) as i64, "since": usage.since}
    }
}

/// One index's `$indexStats` document (without `host`).
pub(crate) fn stat_document(spec: &bson::Document, accesses: bson::Document, ready: bool) -> bson::Document {
    let mut stat = bson::doc! {
        "name": spec.get_str("name").unwrap_or_default(),
        "key": spec.get_document("key").cloned().unwrap_or_default(),
        "accesses": accesses,
        "spec": spec.clone(),
    };
    if !ready {
        stat.insert("building", true);
    }
    stat
}
