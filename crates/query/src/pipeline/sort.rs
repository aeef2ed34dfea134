//! The `$sort` stage: its documents as sorted records, keyed by the sort key's order bytes
//! ([`SortSpec::key_bytes`], whose `memcmp` order is `compare_values`' order) then an arrival
//! number, so the same records sort in memory or in a spill run, and equal keys keep their
//! input order. It counts against `MemoryLimits::sort_bytes`: past it, 292 without
//! `allowDiskUse`, a spill run with it. The sort specification and its keys are
//! [`crate::sort`]'s.

use bson::Document;

use super::spill::{SortedDocuments, arrival_suffix};
use super::{Context, DocumentStream, Fold};
use crate::error::QueryError;
use crate::sort::SortSpec;

/// The `$sort` stage's state while its input streams past.
pub(super) fn fold(spec: &SortSpec, context: &Context<'_>) -> SortFold {
    let records = SortedDocuments::new("$sort", context.limits.sort_bytes, context.spill.clone());
    SortFold { spec: spec.clone().with_collation(context.collation.clone()), records, arrivals: 0 }
}

/// `$sort`'s documents, keyed by sort key then arrival.
pub struct SortFold {
    spec: SortSpec,
    records: SortedDocuments,
    arrivals: u64,
}

impl Fold for SortFold {
    fn add(&mut self, document: Document) -> Result<(), QueryError> {
        let mut key = self.spec.key_bytes(&document);
        arrival_suffix(&mut key, self.arrivals);
        self.arrivals += 1;
        self.records.push(key, document)
    }

    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError> {
        self.records.into_sorted()
    }
}
