//! `$sort`: sort specifications and MongoDB's ordering of documents by them.
//!
//! A document's key for an ascending field is the smallest value the path reaches (array
//! elements count one by one), for a descending field the largest; a missing path is `null`,
//! an empty array sorts below `null`. Keys are computed once per document, then compared field
//! by field with `document::compare_values`. The sort is stable.
//!
//! The `$sort` stage ([`SortFold`]) holds its documents as sorted records keyed by the key's
//! order bytes (`document::keycodec`, whose `memcmp` order is `compare_values`' order) then an
//! arrival number, so the same records sort in memory or in a spill run, and equal keys keep
//! their input order. A missing key is encoded as `undefined`, which it compares equal to and
//! which sorts, like it, between `MinKey` and `null`. It counts against
//! `MemoryLimits::sort_bytes`: past it, 292 without `allowDiskUse`, a spill run with it.

use std::cmp::Ordering;

use bson::{Bson, Document};
use document::keycodec::KeyEncoder;
use document::path::{Candidate, match_candidates};

use super::spill::{SortedDocuments, arrival_suffix};
use super::{Context, DocumentStream, Fold};
use crate::error::QueryError;
use crate::expr::{Value, fail};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ascending,
    Descending,
}

#[derive(Debug, Clone)]
pub struct SortSpec {
    keys: Vec<(Vec<String>, Direction)>,
}

impl SortSpec {
    pub fn parse(spec: &Bson) -> Result<SortSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(15973, "the $sort key specification must be an object"));
        };
        if spec.is_empty() {
            return Err(fail(15976, "$sort stage must have at least one sort key"));
        }
        let mut keys = Vec::with_capacity(spec.len());
        for (path, value) in spec {
            let direction = match value {
                Bson::Int32(1) | Bson::Int64(1) => Direction::Ascending,
                Bson::Int32(-1) | Bson::Int64(-1) => Direction::Descending,
                Bson::Double(d) if *d == 1.0 => Direction::Ascending,
                Bson::Double(d) if *d == -1.0 => Direction::Descending,
                Bson::Document(_) => {
                    return Err(fail(17312, format!("$meta sort by '{path}' is not supported")));
                }
                _ => return Err(fail(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")),
            };
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(fail(40352, "FieldPath cannot be constructed with empty string"));
            }
            keys.push((path.split('.').map(str::to_string).collect(), direction));
        }
        Ok(SortSpec { keys })
    }

    /// A sort on one field (used by `$sortByCount`, `$bucketAuto`).
    pub fn single(path: &str, direction: Direction) -> SortSpec {
        SortSpec { keys: vec![(path.split('.').map(str::to_string).collect(), direction)] }
    }

    /// The document's sort key: one value per sort field.
    pub fn key(&self, document: &Document) -> Vec<Value> {
        self.keys.iter().map(|(path, direction)| field_key(document, path, *direction)).collect()
    }

    pub fn compare_keys(&self, a: &[Value], b: &[Value]) -> Ordering {
        for ((_, direction), (x, y)) in self.keys.iter().zip(a.iter().zip(b)) {
            let order = crate::expr::compare_values_missing(x, y);
            let order = if *direction == Direction::Descending { order.reverse() } else { order };
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }

    /// The key's order bytes: `memcmp` over them is [`SortSpec::compare_keys`]'s order.
    pub fn key_bytes(&self, document: &Document) -> Vec<u8> {
        let mut encoder = KeyEncoder::new();
        for ((_, direction), value) in self.keys.iter().zip(self.key(document)) {
            let direction = match direction {
                Direction::Ascending => document::keycodec::Direction::Ascending,
                Direction::Descending => document::keycodec::Direction::Descending,
            };
            encoder.push(&value.unwrap_or(Bson::Undefined), direction);
        }
        encoder.finish().order
    }

    /// The `$sort` stage's state while its input streams past.
    pub(super) fn fold(&self, context: &Context<'_>) -> SortFold {
        let records = SortedDocuments::new("$sort", context.limits.sort_bytes, context.spill.clone());
        SortFold { spec: self.clone(), records, arrivals: 0 }
    }
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

/// `None` stands for "empty array", which sorts below null.
fn field_key(document: &Document, path: &[String], direction: Direction) -> Value {
    let mut best: Option<Value> = None;
    for candidate in match_candidates(document, path) {
        let value: Value = match candidate {
            Candidate::Missing => Some(Bson::Null),
            Candidate::ArrayElement(v) => Some(v.clone()),
            Candidate::Value(Bson::Array(items)) if items.is_empty() => None,
            Candidate::Value(Bson::Array(_)) => continue,
            Candidate::Value(v) => Some(v.clone()),
        };
        let better = match &best {
            None => true,
            Some(current) => {
                let order = crate::expr::compare_values_missing(&value, current);
                if direction == Direction::Ascending { order == Ordering::Less } else { order == Ordering::Greater }
            }
        };
        if better {
            best = Some(value);
        }
    }
    best.unwrap_or(Some(Bson::Null))
}
