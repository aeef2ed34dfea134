//! `$bucket` and `$bucketAuto`: grouping by ranges of a value.
//!
//! `$bucket` keeps one set of accumulators per boundary range (and the default bucket) while
//! its input streams past. `$bucketAuto` must see every value before it can place the first
//! boundary, so it keeps, per document, only the group-by value and the accumulator arguments
//! (evaluated on arrival) as sorted records ([`SortedDocuments`]: counted against
//! `MemoryLimits::group_bytes`, spilled with `allowDiskUse`, 292 without), then fills its
//! buckets in one pass over them in value order.

use std::cmp::Ordering;
use vocabulary::location;

use bson::{Bson, Document};
use document::keycodec::encode_value;

use super::group::{AccumulatorSpec, fresh_accumulators, output_document, parse_accumulator};
use super::spill::{SortedDocuments, arrival_suffix};
use super::{Context, DocumentStream, Fold};
use crate::collation::Collation;
use crate::error::QueryError;
use crate::expr::accumulator::{Accumulator, AccumulatorKind};
use crate::expr::{Expr, Scope, Value, Variables, bson_type_name, compare_values_missing, fail};

/// Output accumulators of `$bucket`/`$bucketAuto`; default `{count: {$sum: 1}}`.
fn parse_output(output: Option<&Bson>, code: i32) -> Result<Vec<AccumulatorSpec>, QueryError> {
    match output {
        None => Ok(vec![AccumulatorSpec {
            name: "count".into(),
            kind: AccumulatorKind::Sum,
            expr: Expr::Literal(Bson::Int32(1)),
        }]),
        Some(Bson::Document(d)) => d.iter().map(|(name, value)| parse_accumulator(name, value)).collect(),
        Some(other) => {
            Err(fail(code, format!("The 'output' field must be an object, but found type: {}", bson_type_name(other))))
        }
    }
}

fn parse_group_by(value: Option<&Bson>, code: i32, stage: &str) -> Result<Expr, QueryError> {
    match value {
        Some(v @ Bson::String(s)) if s.starts_with('$') => Expr::parse(v),
        Some(v @ Bson::Document(d)) if d.keys().next().is_some_and(|k| k.starts_with('$')) => Expr::parse(v),
        _ => Err(fail(
            code,
            format!("The $groupBy field of {stage} must be defined as a $-prefixed path or an expression object"),
        )),
    }
}

#[derive(Debug, Clone)]
pub struct BucketSpec {
    group_by: Expr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Vec<AccumulatorSpec>,
}

impl BucketSpec {
    pub fn parse(spec: &Bson) -> Result<BucketSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                location::BUCKET_ARGUMENT_NOT_OBJECT,
                format!("Argument to $bucket stage must be an object, but found type: {}", bson_type_name(spec)),
            ));
        };
        for key in spec.keys() {
            if !matches!(key.as_str(), "groupBy" | "boundaries" | "default" | "output") {
                return Err(fail(
                    location::BUCKET_UNRECOGNIZED_OPTION,
                    format!("Unrecognized option to $bucket: {key}."),
                ));
            }
        }
        if !spec.contains_key("groupBy") || !spec.contains_key("boundaries") {
            return Err(fail(
                location::BUCKET_WITHOUT_GROUP_BY_OR_BOUNDARIES,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        }
        let group_by = parse_group_by(spec.get("groupBy"), location::BUCKET_GROUP_BY_INVALID, "$bucket")?;
        let boundaries = match spec.get("boundaries") {
            Some(Bson::Array(b)) if b.len() >= 2 => b.clone(),
            _ => {
                return Err(fail(
                    location::BUCKET_BOUNDARIES_TOO_FEW,
                    "The $bucket 'boundaries' field must be an array of at least two values",
                ));
            }
        };
        check_boundaries(&boundaries)?;
        let default = spec.get("default").cloned();
        if let (Some(d), Some(low), Some(high)) = (&default, boundaries.first(), boundaries.last())
            && document::compare_values(d, low) != Ordering::Less
            && document::compare_values(d, high) == Ordering::Less
            && document::canonical_type_rank(d) == document::canonical_type_rank(low)
        {
            return Err(fail(
                location::BUCKET_DEFAULT_WITHIN_BOUNDARIES,
                "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.",
            ));
        }
        let output = parse_output(spec.get("output"), location::BUCKET_OUTPUT_INVALID)?;
        Ok(BucketSpec { group_by, boundaries, default, output })
    }

    /// The stage's state while its input streams past: one set of accumulators per bucket.
    pub(super) fn fold(&self, vars: Variables) -> BucketFold {
        // Under a collation, strings fall into buckets by their surrogates (`crate::collation`).
        let bounds = match vars.collation() {
            Some(collation) => self.boundaries.iter().map(|b| collation.surrogate(b).into_owned()).collect(),
            None => self.boundaries.clone(),
        };
        BucketFold { spec: self.clone(), bounds, vars, buckets: vec![None; self.boundaries.len()] }
    }

    /// Index of the bucket (`boundaries.len() - 1` is the default bucket); `bounds` are the
    /// boundaries as compared (surrogates under a collation), `value` likewise.
    fn bucket_of(&self, bounds: &[Bson], value: &Value) -> Result<usize, QueryError> {
        for (i, pair) in bounds.windows(2).enumerate() {
            let (low, high) = (Some(pair[0].clone()), Some(pair[1].clone()));
            if compare_values_missing(value, &low) != Ordering::Less
                && compare_values_missing(value, &high) == Ordering::Less
            {
                return Ok(i);
            }
        }
        match self.default {
            Some(_) => Ok(self.boundaries.len() - 1),
            None => Err(fail(
                location::SWITCH_NO_MATCHING_BRANCH,
                "$switch could not find a matching branch for an input, and no default was specified.",
            )),
        }
    }
}

fn check_boundaries(boundaries: &[Bson]) -> Result<(), QueryError> {
    for pair in boundaries.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if document::canonical_type_rank(a) != document::canonical_type_rank(b) {
            return Err(fail(
                location::BUCKET_BOUNDARIES_MIXED_TYPES,
                format!(
                    "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types {} and {}.",
                    bson_type_name(a),
                    bson_type_name(b)
                ),
            ));
        }
        if document::compare_values(a, b) != Ordering::Less {
            return Err(fail(
                location::BUCKET_BOUNDARIES_NOT_ASCENDING,
                format!(
                    "The 'boundaries' option to $bucket must be sorted in ascending order, but elements {a} and {b} are not in ascending order"
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct BucketAutoSpec {
    group_by: Expr,
    buckets: usize,
    output: Vec<AccumulatorSpec>,
}

impl BucketAutoSpec {
    pub fn parse(spec: &Bson) -> Result<BucketAutoSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                location::BUCKET_AUTO_ARGUMENT_NOT_OBJECT,
                format!("The argument to $bucketAuto must be an object, but found type: {}", bson_type_name(spec)),
            ));
        };
        for key in spec.keys() {
            match key.as_str() {
                "groupBy" | "buckets" | "output" => {}
                "granularity" => {
                    return Err(fail(
                        location::BUCKET_AUTO_GRANULARITY_UNSUPPORTED,
                        "$bucketAuto 'granularity' is not supported",
                    ));
                }
                other => {
                    return Err(fail(
                        location::BUCKET_AUTO_UNRECOGNIZED_OPTION,
                        format!("Unrecognized option to $bucketAuto: {other}."),
                    ));
                }
            }
        }
        if !spec.contains_key("groupBy") || !spec.contains_key("buckets") {
            return Err(fail(
                location::BUCKET_AUTO_WITHOUT_GROUP_BY_OR_BUCKETS,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        }
        let group_by = parse_group_by(spec.get("groupBy"), location::BUCKET_AUTO_GROUP_BY_INVALID, "$bucketAuto")?;
        let buckets = spec
            .get("buckets")
            .and_then(crate::number::Num::from_bson)
            .and_then(|n| n.to_exact_i64())
            .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
            .ok_or_else(|| {
                fail(
                    location::BUCKET_AUTO_BUCKETS_NOT_POSITIVE_INT32,
                    "The $bucketAuto 'buckets' field must be a positive 32-bit integer",
                )
            })?;
        let output = parse_output(spec.get("output"), location::BUCKET_AUTO_OUTPUT_INVALID)?;
        Ok(BucketAutoSpec { group_by, buckets: buckets as usize, output })
    }

    /// The stage's state while its input streams past: the sorted group-by values.
    pub(super) fn fold(&self, context: &Context<'_>) -> BucketAutoFold {
        BucketAutoFold {
            spec: self.clone(),
            vars: context.vars.clone(),
            records: SortedDocuments::new("$bucketAuto", context.limits.group_bytes, context.spill.clone()),
            count: 0,
        }
    }
}

/// `$bucket`'s state: accumulators per bucket, the last one being the default bucket.
pub struct BucketFold {
    spec: BucketSpec,
    /// The boundaries as values are compared with them.
    bounds: Vec<Bson>,
    vars: Variables,
    buckets: Vec<Option<Vec<Accumulator>>>,
}

impl Fold for BucketFold {
    fn add(&mut self, document: Document) -> Result<(), QueryError> {
        let mut scope = Scope::new(&document, &self.vars);
        let value = scope.eval(&self.spec.group_by)?;
        let compared = match (&value, self.vars.collation()) {
            (Some(v), Some(collation)) => Some(collation.surrogate(v).into_owned()),
            _ => value.clone(),
        };
        let index = self.spec.bucket_of(&self.bounds, &compared)?;
        let slot = self
            .buckets
            .get_mut(index)
            .ok_or_else(|| fail(location::SWITCH_NO_MATCHING_BRANCH, "bucket index out of range"))?;
        let accumulators = slot.get_or_insert_with(|| fresh_accumulators(&self.spec.output));
        for (spec, accumulator) in self.spec.output.iter().zip(accumulators.iter_mut()) {
            accumulator.process(&scope.eval(&spec.expr)?, scope.vars().collation())?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError> {
        let BucketFold { spec, buckets, .. } = *self;
        let mut out = Vec::new();
        for (index, slot) in buckets.into_iter().enumerate() {
            let Some(accumulators) = slot else { continue };
            let id = if index + 1 == spec.boundaries.len() {
                spec.default.clone().unwrap_or(Bson::Null)
            } else {
                spec.boundaries.get(index).cloned().unwrap_or(Bson::Null)
            };
            out.push(output_document(id, &spec.output, accumulators));
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }
}

/// `$bucketAuto`'s state: `{v: value, "0": argument, ...}` per document, keyed by the value's
/// order bytes then arrival (so equal values keep their input order, as a stable sort would).
pub struct BucketAutoFold {
    spec: BucketAutoSpec,
    vars: Variables,
    records: SortedDocuments,
    count: u64,
}

impl Fold for BucketAutoFold {
    fn add(&mut self, document: Document) -> Result<(), QueryError> {
        let mut scope = Scope::new(&document, &self.vars);
        let value = scope.eval(&self.spec.group_by)?.unwrap_or(Bson::Null);
        let mut key = encode_value(&value);
        arrival_suffix(&mut key, self.count);
        let mut record = Document::new();
        record.insert("v", value);
        for (i, spec) in self.spec.output.iter().enumerate() {
            if let Some(argument) = scope.eval(&spec.expr)? {
                record.insert(i.to_string(), argument);
            }
        }
        self.count += 1;
        self.records.push(key, record)
    }

    /// MongoDB's algorithm: fill each bucket with about count/buckets documents, never
    /// splitting equal values, the last bucket takes the rest; a bucket's max is the next
    /// bucket's min (the last value for the last bucket).
    fn finish(self: Box<Self>) -> Result<DocumentStream<'static>, QueryError> {
        let BucketAutoFold { spec, records, count, vars, .. } = *self;
        let approximate = ((count as f64 / spec.buckets as f64).round() as u64).max(1);
        let mut out = Vec::new();
        let mut open: Option<OpenBucket> = None;
        for record in records.into_sorted()? {
            let mut record = record?;
            let value = record.remove("v").unwrap_or(Bson::Null);
            if let Some(bucket) = open.take() {
                let closes = bucket.size >= approximate
                    && out.len() + 1 < spec.buckets
                    && document::compare_values(&value, &bucket.last) != Ordering::Equal;
                if closes {
                    out.push(bucket.finish(value.clone(), &spec.output));
                } else {
                    open = Some(bucket);
                }
            }
            let bucket = open.get_or_insert_with(|| OpenBucket::new(value.clone(), &spec.output));
            bucket.add(value, &record, vars.collation())?;
        }
        if let Some(bucket) = open {
            let max = bucket.last.clone();
            out.push(bucket.finish(max, &spec.output));
        }
        Ok(Box::new(out.into_iter().map(Ok)))
    }
}

/// The `$bucketAuto` bucket being filled.
struct OpenBucket {
    min: Bson,
    last: Bson,
    size: u64,
    accumulators: Vec<Accumulator>,
}

impl OpenBucket {
    fn new(min: Bson, output: &[AccumulatorSpec]) -> OpenBucket {
        OpenBucket { last: min.clone(), min, size: 0, accumulators: fresh_accumulators(output) }
    }

    fn add(&mut self, value: Bson, record: &Document, collation: Option<&Collation>) -> Result<(), QueryError> {
        for (i, accumulator) in self.accumulators.iter_mut().enumerate() {
            accumulator.process(&record.get(i.to_string()).cloned(), collation)?;
        }
        self.last = value;
        self.size += 1;
        Ok(())
    }

    fn finish(self, max: Bson, output: &[AccumulatorSpec]) -> Document {
        let mut id = Document::new();
        id.insert("min", self.min);
        id.insert("max", max);
        output_document(Bson::Document(id), output, self.accumulators)
    }
}
