//! Spilling: where the blocking stages (`$group`, `$sort`, `$bucketAuto`) put what does not fit
//! in their memory limit when `allowDiskUse` is on, and [`SortedDocuments`], the records they
//! hold in memory up to that limit and in a spill run past it.
//!
//! `query` does no I/O: a [`SpillStore`] (the docstore's, over temporary engine trees, or
//! [`InMemorySpill`] in tests) makes [`SpillRun`]s, which take (key, value) records and give
//! them back in key order. Keys are unique: callers end them with an arrival number, so equal
//! sort keys keep their input order (the sorts are stable) and never overwrite each other.
//! A context without a spill store is `allowDiskUse: false`: past the limit, the stage fails
//! with `QueryExceededMemoryLimitNoDiskUseAllowed` (292).

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::Document;

use crate::error::QueryError;
use crate::expr::approximate_document_bytes;

/// Spilled records read back in key order.
pub type SpilledRecords = Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>), QueryError>> + Send>;

/// Makes spill runs (`allowDiskUse`).
pub trait SpillStore: Send + Sync {
    fn create_run(&self) -> Result<Box<dyn SpillRun>, QueryError>;
}

/// One temporary sorted run; whatever it stored is released when it (or the iterator it turns
/// into) is dropped.
pub trait SpillRun: Send {
    /// Adds a record; keys are unique.
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), QueryError>;

    /// Every record put, in key order.
    fn into_sorted(self: Box<Self>) -> Result<SpilledRecords, QueryError>;
}

/// Spill runs in memory: for tests, where the point is the spilling code path, not the memory.
#[derive(Debug, Default)]
pub struct InMemorySpill;

impl SpillStore for InMemorySpill {
    fn create_run(&self) -> Result<Box<dyn SpillRun>, QueryError> {
        Ok(Box::new(InMemoryRun::default()))
    }
}

#[derive(Default)]
struct InMemoryRun {
    records: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl SpillRun for InMemoryRun {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), QueryError> {
        self.records.insert(key, value);
        Ok(())
    }

    fn into_sorted(self: Box<Self>) -> Result<SpilledRecords, QueryError> {
        Ok(Box::new(self.records.into_iter().map(Ok)))
    }
}

/// The error of a stage past its memory limit without `allowDiskUse`, in MongoDB's words.
pub fn memory_exceeded(stage: &str, limit_bytes: usize) -> QueryError {
    QueryError::MemoryLimitExceeded(match stage {
        "$sort" => format!(
            "Sort exceeded memory limit of {limit_bytes} bytes, but did not opt in to external sorting. Aborting operation. Pass allowDiskUse:true to opt in."
        ),
        _ => format!(
            "Exceeded memory limit for {stage}, but didn't allow external sort. Pass allowDiskUse:true to opt in."
        ),
    })
}

/// Documents in key order: held in memory up to `limit_bytes`, then (with a spill store) all
/// moved to a spill run, or (without one) refused with [`memory_exceeded`].
pub struct SortedDocuments {
    /// The stage holding them, for the error.
    stage: &'static str,
    held: Vec<(Vec<u8>, Document)>,
    held_bytes: usize,
    limit_bytes: usize,
    store: Option<Arc<dyn SpillStore>>,
    run: Option<Box<dyn SpillRun>>,
}

/// What one held record costs besides its key and document (the vector slot, the allocations).
const RECORD_OVERHEAD_BYTES: usize = 64;

impl SortedDocuments {
    pub fn new(stage: &'static str, limit_bytes: usize, store: Option<Arc<dyn SpillStore>>) -> SortedDocuments {
        SortedDocuments { stage, held: Vec::new(), held_bytes: 0, limit_bytes, store, run: None }
    }

    /// Documents that go to a spill run from the first one (what a stage already decided not
    /// to hold).
    pub fn spilled(stage: &'static str, store: &Arc<dyn SpillStore>) -> SortedDocuments {
        SortedDocuments::new(stage, 0, Some(Arc::clone(store)))
    }

    /// Adds a document under `key` (unique: end it with an arrival number).
    pub fn push(&mut self, key: Vec<u8>, document: Document) -> Result<(), QueryError> {
        if let Some(run) = &mut self.run {
            return run.put(key, encode(&document)?);
        }
        self.held_bytes += key.len() + approximate_document_bytes(&document) + RECORD_OVERHEAD_BYTES;
        self.held.push((key, document));
        if self.held_bytes > self.limit_bytes {
            self.spill_held()?;
        }
        Ok(())
    }

    fn spill_held(&mut self) -> Result<(), QueryError> {
        let Some(store) = &self.store else {
            return Err(memory_exceeded(self.stage, self.limit_bytes));
        };
        let mut run = store.create_run()?;
        for (key, document) in std::mem::take(&mut self.held) {
            run.put(key, encode(&document)?)?;
        }
        self.held_bytes = 0;
        self.run = Some(run);
        Ok(())
    }

    /// Every document pushed, in key order.
    pub fn into_sorted(self) -> Result<Box<dyn Iterator<Item = Result<Document, QueryError>> + Send>, QueryError> {
        if let Some(run) = self.run {
            let records = run.into_sorted()?;
            return Ok(Box::new(records.map(|record| record.and_then(|(_, value)| decode(&value)))));
        }
        let mut held = self.held;
        held.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(Box::new(held.into_iter().map(|(_, document)| Ok(document))))
    }
}

fn encode(document: &Document) -> Result<Vec<u8>, QueryError> {
    let raw = bson::RawDocumentBuf::try_from(document)
        .map_err(|e| QueryError::bad_value(format!("spilling a document: {e}")))?;
    Ok(raw.into_bytes())
}

fn decode(bytes: &[u8]) -> Result<Document, QueryError> {
    let raw = bson::RawDocument::from_bytes(bytes)
        .map_err(|e| QueryError::bad_value(format!("reading a spilled document: {e}")))?;
    Document::try_from(raw).map_err(|e| QueryError::bad_value(format!("reading a spilled document: {e}")))
}

/// A key suffix that keeps records in arrival order among equal keys.
pub fn arrival_suffix(key: &mut Vec<u8>, arrival: u64) {
    key.extend_from_slice(&arrival.to_be_bytes());
}
