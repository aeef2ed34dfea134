//! Sort specifications, sort keys, skip and limit, with MongoDB's array semantics: the one
//! [`SortSpec`] of find's `sort`, `$push`'s `$sort` and the `$sort`, `$sortByCount` and
//! `$bucketAuto` stages.
//!
//! A document's sort key for a field is the smallest value the path holds when ascending and
//! the largest when descending: arrays are expanded, `[]` counts as `undefined` (so it sorts
//! before `null`), a path that reaches nothing as `null`. Keys compare with `compare_values`;
//! ties keep the input order (the sort is stable). [`SortSpec::key_bytes`] encodes a key so
//! that `memcmp` is that order (`document::keycodec`), for sorts that hold or spill records.
//!
//! Two parsers, one type: [`SortSpec::parse`] reads find's and `$push`'s sort documents,
//! [`SortSpec::parse_stage`] the `$sort` stage's, with MongoDB's codes and messages for each
//! (the stage refuses an empty spec, `$meta` names the field, paths are checked for empty
//! components only). They also differ in which values along a path a key chooses from
//! ([`PathValues`]), a difference kept as it was found: an array of documents some of
//! which lack the rest of the path gives `null` to the stage and nothing to find.
//!
//! Known difference: MongoDB rejects sorting on two fields that are both arrays ("parallel
//! arrays"); Strata sorts each field by its own minimum/maximum instead.

use std::cmp::Ordering;
use vocabulary::location;

use bson::{Bson, Document, RawDocument};
use document::compare_values;
use document::keycodec::{Direction, KeyEncoder};
use document::path::{Candidate, FieldPath, decode_fields, index_values, match_candidates};

use crate::error::{QueryError, Result, fail};

/// A parsed sort specification such as `{age: -1, name: 1}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortSpec {
    fields: Vec<(FieldPath, Direction)>,
    values: PathValues,
    /// Strings order under this collation (their keys hold its surrogates); `None`: binary.
    collation: Option<crate::collation::Collation>,
}

/// Which values along a path a sort key chooses its minimum or maximum from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathValues {
    /// The values an index on the path would hold ([`document::path::index_values`]): an
    /// array's documents lacking the rest of the path add nothing (find, `$push`).
    IndexKeys,
    /// The values a filter on the path compares against ([`document::path::match_candidates`]):
    /// an array's documents lacking the rest of the path add `null` (the stages).
    FilterCandidates,
}

impl SortSpec {
    /// Parses find's `sort` or `$push`'s `$sort` document; an empty one sorts nothing.
    pub fn parse(spec: &Document) -> Result<SortSpec> {
        let mut fields = Vec::with_capacity(spec.len());
        for (name, value) in spec {
            // `{$meta: "textScore"}`: the hidden score field, highest first (`crate::meta`).
            let (name, direction) = match value {
                Bson::Document(meta) if meta.contains_key("$meta") => {
                    (crate::meta::field(meta.get("$meta").unwrap_or(&Bson::Null))?, Direction::Descending)
                }
                other => (name.as_str(), direction(other)?),
            };
            let path = FieldPath::parse(name).map_err(|e| QueryError::bad_value(e.to_string()))?;
            if fields.iter().any(|(existing, _)| existing == &path) {
                return Err(QueryError::bad_value(format!("$sort key '{name}' appears more than once")));
            }
            fields.push((path, direction));
        }
        Ok(SortSpec { fields, values: PathValues::IndexKeys, collation: None })
    }

    /// Parses the `$sort` stage's operand.
    pub fn parse_stage(spec: &Bson) -> Result<SortSpec> {
        let Bson::Document(spec) = spec else {
            return Err(fail(location::SORT_SPECIFICATION_NOT_OBJECT, "the $sort key specification must be an object"));
        };
        if spec.is_empty() {
            return Err(fail(location::SORT_WITHOUT_KEYS, "$sort stage must have at least one sort key"));
        }
        let mut fields = Vec::with_capacity(spec.len());
        for (name, value) in spec {
            let (name, direction) = match value {
                Bson::Document(meta) if meta.contains_key("$meta") => {
                    (crate::meta::field(meta.get("$meta").unwrap_or(&Bson::Null))?, Direction::Descending)
                }
                Bson::Document(_) => {
                    return Err(fail(
                        location::SORT_META_UNSUPPORTED,
                        format!("$meta sort by '{name}' is not supported"),
                    ));
                }
                other => (name.as_str(), direction(other)?),
            };
            let path = FieldPath::parse(name)
                .map_err(|_| fail(location::FIELD_PATH_EMPTY, "FieldPath cannot be constructed with empty string"))?;
            fields.push((path, direction));
        }
        Ok(SortSpec { fields, values: PathValues::FilterCandidates, collation: None })
    }

    /// A stage's sort on one field (`$sortByCount`'s count).
    pub fn single(path: &str, direction: Direction) -> Result<SortSpec> {
        let fields = vec![(FieldPath::parse(path)?, direction)];
        Ok(SortSpec { fields, values: PathValues::FilterCandidates, collation: None })
    }

    /// The same sort ordering strings under `collation` (`None`: by their bytes).
    pub fn with_collation(mut self, collation: Option<crate::collation::Collation>) -> SortSpec {
        self.collation = collation;
        self
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn fields(&self) -> &[(FieldPath, Direction)] {
        &self.fields
    }

    /// The sort key of a document: one value per field (under a collation, its strings are the
    /// collation's surrogates: the key orders, it is not shown).
    pub fn key(&self, document: &Document) -> Vec<Bson> {
        self.fields.iter().map(|(path, direction)| self.field_key(document, path, *direction)).collect()
    }

    /// The sort key of stored bytes, decoding only the sorted fields.
    pub fn key_raw(&self, raw: &RawDocument) -> Result<Vec<Bson>> {
        let document = decode_fields(raw, self.fields.iter().map(|(path, _)| path.head()))?;
        Ok(self.key(&document))
    }

    /// The key's order bytes: `memcmp` over them is [`SortSpec::compare_keys`]' order.
    pub fn key_bytes(&self, document: &Document) -> Vec<u8> {
        self.encode(&self.key(document))
    }

    /// [`SortSpec::key_bytes`] of stored bytes, decoding only the sorted fields.
    pub fn key_bytes_raw(&self, raw: &RawDocument) -> Result<Vec<u8>> {
        Ok(self.encode(&self.key_raw(raw)?))
    }

    /// The order bytes of given key values (one per field, in order): bounds to compare
    /// [`SortSpec::key_bytes`] with.
    pub fn encode_values(&self, key: &[Bson]) -> Vec<u8> {
        self.encode(key)
    }

    fn encode(&self, key: &[Bson]) -> Vec<u8> {
        let mut encoder = KeyEncoder::new();
        for (value, (_, direction)) in key.iter().zip(&self.fields) {
            encoder.push(value, *direction);
        }
        encoder.finish().order
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

    /// The smallest (ascending) or largest (descending) value along the path; the first of
    /// equals.
    fn field_key(&self, document: &Document, path: &FieldPath, direction: Direction) -> Bson {
        let values = match self.values {
            PathValues::IndexKeys => index_values(document, path.parts()),
            PathValues::FilterCandidates => candidate_values(document, path),
        };
        let mut best: Option<Bson> = None;
        let values = values.into_iter().map(|value| match &self.collation {
            Some(collation) => collation.surrogate(&value).into_owned(),
            None => value,
        });
        for value in values {
            let better = best.as_ref().is_none_or(|current| direction.apply(compare_values(&value, current)).is_lt());
            if better {
                best = Some(value);
            }
        }
        best.unwrap_or(Bson::Null)
    }
}

/// `1` or `-1` (int32, int64 or double): anything else is 15975.
fn direction(value: &Bson) -> Result<Direction> {
    match value {
        Bson::Int32(1) | Bson::Int64(1) => Ok(Direction::Ascending),
        Bson::Int32(-1) | Bson::Int64(-1) => Ok(Direction::Descending),
        Bson::Double(d) if *d == 1.0 => Ok(Direction::Ascending),
        Bson::Double(d) if *d == -1.0 => Ok(Direction::Descending),
        _ => Err(fail(
            location::SORT_ORDER_NOT_ONE_OR_MINUS_ONE,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
        )),
    }
}

/// [`PathValues::FilterCandidates`]: a missing path is `null`, an array at the end of the path
/// gives its elements (`[]` gives `undefined`), never itself.
fn candidate_values(document: &Document, path: &FieldPath) -> Vec<Bson> {
    let mut values = Vec::new();
    for candidate in match_candidates(document, path.parts()) {
        match candidate {
            Candidate::Missing => values.push(Bson::Null),
            Candidate::ArrayElement(value) => values.push(value.clone()),
            Candidate::Value(Bson::Array(items)) if items.is_empty() => values.push(Bson::Undefined),
            Candidate::Value(Bson::Array(_)) => {}
            Candidate::Value(value) => values.push(value.clone()),
        }
    }
    values
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
