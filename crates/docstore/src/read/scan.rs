//! Access methods: a collection scan, index scans over key ranges (with the fetch of each
//! entry's document), and a union of index scans deduplicated by `_id`.
//!
//! Everything reads one snapshot, held by the iterator, so a cursor sees the collection as of
//! its creation whatever commits meanwhile. Counters for explain are shared atomics; the
//! operation running the scan (`crate::operation`) counts too, and may stop it at any entry.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bson::RawDocumentBuf;
use storage::{RangeIter, Snapshot, TreeId};

use crate::catalog::Descriptor;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::operation;
use crate::read::bounds::KeyRange;
use crate::read::covered::Covered;
use crate::read::planner::{Access, IndexScan};

/// executionStats counters.
#[derive(Debug, Default)]
pub(crate) struct ExecutionCounters {
    pub keys_examined: AtomicU64,
    pub docs_examined: AtomicU64,
    pub returned: AtomicU64,
}

impl ExecutionCounters {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// One index scan, resolved against the collection descriptor.
struct ResolvedScan {
    tree: TreeId,
    index: Option<Index>,
    ranges: Vec<KeyRange>,
    backward: bool,
}

/// A capped collection's `(seq, _id)` pairs in insertion order.
type NaturalIds = Box<dyn Iterator<Item = Result<(u64, Vec<u8>)>> + Send>;

/// An index entry as read: which of the plan's scans it came from, its key and its value.
type RawEntry = (usize, Vec<u8>, Vec<u8>);

/// Yields the documents of an access path, in its order.
pub(crate) struct Scan {
    snapshot: Snapshot,
    collection_tree: TreeId,
    scans: Vec<ResolvedScan>,
    /// (scan, range) being read and its iterator.
    position: (usize, usize),
    current: Option<RangeIter>,
    collection_scan: bool,
    seen: Option<HashSet<Vec<u8>>>,
    /// Set for a covered find: entries become documents without a fetch.
    covered: Option<Covered>,
    counters: Arc<ExecutionCounters>,
    failed: bool,
    /// A capped collection's scan: its documents' ids in insertion order.
    natural: Option<NaturalIds>,
}

impl Scan {
    pub(crate) fn new(
        snapshot: Snapshot,
        collection: &Descriptor,
        access: &Access,
        covered: Option<Covered>,
        counters: Arc<ExecutionCounters>,
    ) -> Result<Scan> {
        let resolve = |scan: &IndexScan| -> Result<ResolvedScan> {
            let index = match &scan.index {
                Some(name) => Some(collection.index(name).cloned().ok_or_else(|| Error::IndexNotFound(name.clone()))?),
                None => None,
            };
            Ok(ResolvedScan {
                tree: index.as_ref().map_or(collection.tree, |i| i.tree),
                index,
                ranges: scan.ranges.clone(),
                backward: scan.backward,
            })
        };
        let (scans, collection_scan, dedup) = match access {
            Access::CollectionScan { backward } => {
                let whole = KeyRange { lower: std::ops::Bound::Unbounded, upper: std::ops::Bound::Unbounded };
                (
                    vec![ResolvedScan { tree: collection.tree, index: None, ranges: vec![whole], backward: *backward }],
                    true,
                    false,
                )
            }
            Access::IndexScan(scan) => (vec![resolve(scan)?], false, scan.multikey),
            Access::Or(scans) => (scans.iter().map(resolve).collect::<Result<Vec<_>>>()?, false, true),
        };
        let natural = match (access, &collection.natural) {
            (Access::CollectionScan { backward }, Some(natural)) => {
                Some(Box::new(natural.ids(&snapshot, None, *backward)) as NaturalIds)
            }
            _ => None,
        };
        Ok(Scan {
            natural,
            snapshot,
            collection_tree: collection.tree,
            scans,
            position: (0, 0),
            current: None,
            collection_scan,
            seen: dedup.then(HashSet::new),
            covered,
            counters,
            failed: false,
        })
    }

    /// The next raw entry of the current range, moving to the next range when one ends.
    fn next_entry(&mut self) -> Option<Result<RawEntry>> {
        loop {
            let (scan_at, range_at) = self.position;
            let scan = self.scans.get(scan_at)?;
            if self.current.is_none() {
                let Some(range) = scan.ranges.get(range_at) else {
                    self.position = (scan_at + 1, 0);
                    continue;
                };
                self.current = Some(
                    self.snapshot.range::<(std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>)>(scan.tree, range.bounds()),
                );
            }
            let backward = scan.backward;
            let item = self.current.as_mut().and_then(|iter| if backward { iter.next_back() } else { iter.next() });
            match item {
                Some(Ok((key, value))) => return Some(Ok((scan_at, key, value))),
                Some(Err(error)) => return Some(Err(error.into())),
                None => {
                    self.current = None;
                    self.position = (scan_at, range_at + 1);
                }
            }
        }
    }

    fn document(&mut self, scan_at: usize, key: Vec<u8>, value: Vec<u8>) -> Result<Option<RawDocumentBuf>> {
        let Some(scan) = self.scans.get(scan_at) else {
            return Ok(None);
        };
        let Some(index) = &scan.index else {
            if !self.collection_scan {
                ExecutionCounters::add(&self.counters.keys_examined);
                operation::key_examined();
            }
            ExecutionCounters::add(&self.counters.docs_examined);
            operation::doc_examined();
            return raw(value).map(Some);
        };
        ExecutionCounters::add(&self.counters.keys_examined);
        operation::key_examined();
        let entry = index.decode_entry(key, value)?;
        if let Some(seen) = &mut self.seen
            && !seen.insert(entry.id.clone())
        {
            return Ok(None);
        }
        if let Some(document) = self.covered.as_ref().map(|c| c.document(&entry)).transpose()?.flatten() {
            return Ok(Some(document));
        }
        ExecutionCounters::add(&self.counters.docs_examined);
        operation::doc_examined();
        if index.clustering {
            return raw(entry.payload).map(Some);
        }
        match self.snapshot.get(self.collection_tree, &entry.id)? {
            Some(bytes) => raw(bytes).map(Some),
            None => Err(Error::corrupt(format!("index {} names a document that does not exist", index.name))),
        }
    }
}

impl Scan {
    /// The next document of a capped collection in insertion order.
    fn next_natural(&mut self) -> Option<Result<RawDocumentBuf>> {
        loop {
            let next = match operation::check() {
                Ok(()) => self.natural.as_mut()?.next()?,
                Err(error) => Err(error),
            };
            let (_, id) = match next {
                Ok(entry) => entry,
                Err(error) => {
                    self.failed = true;
                    return Some(Err(error));
                }
            };
            ExecutionCounters::add(&self.counters.docs_examined);
            operation::doc_examined();
            match self.snapshot.get(self.collection_tree, &id) {
                Ok(Some(bytes)) => return Some(raw(bytes)),
                Ok(None) => continue,
                Err(error) => {
                    self.failed = true;
                    return Some(Err(error.into()));
                }
            }
        }
    }
}

pub(crate) fn raw(bytes: Vec<u8>) -> Result<RawDocumentBuf> {
    RawDocumentBuf::from_bytes(bytes).map_err(|e| Error::corrupt(format!("stored document: {e}")))
}

impl Iterator for Scan {
    type Item = Result<RawDocumentBuf>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.natural.is_some() {
            return self.next_natural();
        }
        loop {
            if let Err(error) = operation::check() {
                self.failed = true;
                return Some(Err(error));
            }
            let result = match self.next_entry()? {
                Ok((scan_at, key, value)) => self.document(scan_at, key, value),
                Err(error) => Err(error),
            };
            match result {
                Ok(Some(document)) => return Some(Ok(document)),
                Ok(None) => continue,
                Err(error) => {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
        }
    }
}
