//! Sort specifications, sort keys, skip and limit, with MongoDB's array semantics.
//!
//! A document's sort key for a field is the smallest value the path holds when ascending and
//! the largest when descending, over the values an index on that path would hold
//! ([`document::path::index_values`]): arrays are expanded, `[]` counts as `undefined` (so it
//! sorts before `null`), a missing field as `null`. Keys compare with `compare_values`; ties
//! keep the input order (the sort is stable).
//!
//! Known difference: MongoDB rejects sorting on two fields that are both arrays ("parallel
//! arrays"); Strata sorts each field by its own minimum/maximum instead.

use std::cmp::Ordering;

use bson::{Bson, Document, RawDocument};
use document::compare_values;
use document::keycodec::Direction;
use document::path::{FieldPath, decode_fields, index_values};

use crate::error::{QueryError, Result};

/// A parsed `sort` document such as `{age: -1, name: 1}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortSpec {
    fields: Vec<(FieldPath, Direction)>,
}

impl SortSpec {
    pub fn parse(spec: &Document) -> Result<SortSpec> {
        let mut fields = Vec::with_capacity(spec.len());
        for (name, value) in spec {
            let direction = match value {
                Bson::Int32(1) | Bson::Int64(1) => Direction::Ascending,
                Bson::Int32(-1) | Bson::Int64(-1) => Direction::Descending,
                Bson::Double(d) if *d == 1.0 => Direction::Ascending,
                Bson::Double(d) if *d == -1.0 => Direction::Descending,
                Bson::Document(meta) if meta.contains_key("$meta") => {
                    return Err(QueryError::bad_value("$meta sort is not supported"));
                }
                _ => {
                    return Err(crate::error::fail(
                        15975,
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ));
                }
            };
            let path = FieldPath::parse(name).map_err(|e| QueryError::bad_value(e.to_string()))?;
            if fields.iter().any(|(existing, _)| existing == &path) {
                return Err(QueryError::bad_value(format!("$sort key '{name}' appears more than once")));
            }
            fields.push((path, direction));
        }
        Ok(SortSpec { fields })
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn fields(&self) -> &[(FieldPath, Direction)] {
        &self.fields
    }

    /// The sort key of a document: one value per field.
    pub fn key(&self, document: &Document) -> Vec<Bson> {
        self.fields.iter().map(|(path, direction)| field_key(document, path, *direction)).collect()
    }

    /// The sort key of stored bytes, decoding only the sorted fields.
    pub fn key_raw(&self, raw: &RawDocument) -> Result<Vec<Bson>> {
        let document = decode_fields(raw, self.fields.iter().map(|(path, _)| path.head()))?;
        Ok(self.key(&document))
    }

    /// Compares two keys made by [`SortSpec::key`].
    pub fn compare_keys(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), (_, direction)) in a.iter().zip(b).zip(&self.fields) {
            let order = direction.apply(compare_values(x, y));
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }

    /// Sorts documents in place (stable), computing each key once.
    pub fn sort(&self, documents: &mut Vec<Document>) {
        if self.fields.is_empty() {
            return;
        }
        let mut keyed: Vec<(Vec<Bson>, Document)> =
            documents.drain(..).map(|document| (self.key(&document), document)).collect();
        keyed.sort_by(|(a, _), (b, _)| self.compare_keys(a, b));
        documents.extend(keyed.into_iter().map(|(_, document)| document));
    }
}

fn field_key(document: &Document, path: &FieldPath, direction: Direction) -> Bson {
    let values = index_values(document, path.parts());
    let chosen = match direction {
        Direction::Ascending => values.iter().min_by(|a, b| compare_values(a, b)),
        Direction::Descending => values.iter().max_by(|a, b| compare_values(a, b)),
    };
    chosen.cloned().unwrap_or(Bson::Null)
}

/// `skip` and `limit` of a find: how many results to drop, then how many to keep at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkipLimit {
    pub skip: u64,
    /// `None`: no limit. A negative find limit means "one batch"; its magnitude is kept here.
    pub limit: Option<u64>,
}

impl SkipLimit {
    pub fn parse(skip: Option<&Bson>, limit: Option<&Bson>) -> Result<SkipLimit> {
        let skip = match skip.map(integer).transpose()? {
            None => 0,
            Some(value) if value < 0 => {
                return Err(QueryError::bad_value(format!("Skip value must be non-negative, but received: {value}")));
            }
            Some(value) => value as u64,
        };
        let limit = match limit.map(integer).transpose()? {
            None | Some(0) => None,
            Some(value) => Some(value.unsigned_abs()),
        };
        Ok(SkipLimit { skip, limit })
    }

    /// Applies skip then limit to results in order.
    pub fn apply<T>(&self, items: impl IntoIterator<Item = T>) -> impl Iterator<Item = T> {
        let limit = self.limit.map_or(usize::MAX, |limit| usize::try_from(limit).unwrap_or(usize::MAX));
        items.into_iter().skip(usize::try_from(self.skip).unwrap_or(usize::MAX)).take(limit)
    }
}

fn integer(value: &Bson) -> Result<i64> {
    match value {
        Bson::Int32(i) => Ok(i64::from(*i)),
        Bson::Int64(i) => Ok(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => Ok(*d as i64),
        other => Err(QueryError::TypeMismatch(format!("skip and limit must be integers, not {other}"))),
    }
}
