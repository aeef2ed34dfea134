//! Grouping stages: `$group`, `$sortByCount`, `$bucket`, `$bucketAuto`, `$count`.
//!
//! Groups are keyed by the `_id` expression's value under MongoDB equality (`1`, `1.0` and
//! `NumberLong(1)` are one group; a missing `_id` is null). Keys are hashed by a coarse form
//! (numbers by their double value) and confirmed with `compare_values`, so distinct values
//! that collide in the hash still form distinct groups. Groups come out in first-seen order.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use bson::{Bson, Document};

use super::sort::{Direction, SortSpec};
use crate::error::QueryError;
use crate::expr::accumulator::{Accumulator, AccumulatorKind};
use crate::expr::{Expr, Scope, Value, Variables, bson_type_name, compare_values_missing, fail};

/// One output field of `$group`: `name: {$acc: expr}`.
#[derive(Debug, Clone)]
pub struct AccumulatorSpec {
    pub name: String,
    pub kind: AccumulatorKind,
    pub expr: Expr,
}

#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub id: Expr,
    pub accumulators: Vec<AccumulatorSpec>,
}

impl GroupSpec {
    pub fn parse(spec: &Bson) -> Result<GroupSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(15947, "a group's fields must be specified in an object"));
        };
        let mut id = None;
        let mut accumulators = Vec::new();
        for (name, value) in spec {
            if name == "_id" {
                id = Some(Expr::parse(value)?);
                continue;
            }
            accumulators.push(parse_accumulator(name, value)?);
        }
        let id = id.ok_or_else(|| fail(15955, "a group specification must include an _id"))?;
        Ok(GroupSpec { id, accumulators })
    }

    pub fn run(&self, documents: Vec<Document>, vars: &Variables) -> Result<Vec<Document>, QueryError> {
        let mut groups = Groups::default();
        for document in &documents {
            let mut scope = Scope::new(document, vars);
            let key = scope.eval(&self.id)?.unwrap_or(Bson::Null);
            let slot = groups.slot(key, || self.accumulators.iter().map(|a| Accumulator::new(a.kind)).collect());
            for (spec, accumulator) in self.accumulators.iter().zip(slot.iter_mut()) {
                accumulator.process(&scope.eval(&spec.expr)?)?;
            }
        }
        Ok(groups
            .into_entries()
            .map(|(key, accumulators)| {
                let mut out = Document::new();
                out.insert("_id", key);
                for (spec, accumulator) in self.accumulators.iter().zip(accumulators) {
                    out.insert(spec.name.clone(), accumulator.finish());
                }
                out
            })
            .collect())
    }
}

fn parse_accumulator(name: &str, value: &Bson) -> Result<AccumulatorSpec, QueryError> {
    if name.starts_with('$') {
        return Err(fail(40236, format!("The field name '{name}' cannot be an operator name")));
    }
    if name.contains('.') {
        return Err(fail(40235, format!("The field name '{name}' cannot contain '.'")));
    }
    let Bson::Document(acc) = value else {
        return Err(fail(40234, format!("The field '{name}' must be an accumulator object")));
    };
    if acc.len() != 1 {
        return Err(fail(40238, format!("The field '{name}' must specify one accumulator")));
    }
    let Some((operator, argument)) = acc.iter().next() else {
        return Err(fail(40238, format!("The field '{name}' must specify one accumulator")));
    };
    if operator == "$count" {
        if !matches!(argument, Bson::Document(d) if d.is_empty()) {
            return Err(fail(9, "$count takes no arguments, i.e. $count:{}"));
        }
        return Ok(AccumulatorSpec { name: name.to_string(), kind: AccumulatorKind::Sum, expr: Expr::Literal(Bson::Int32(1)) });
    }
    let kind = AccumulatorKind::from_name(operator).ok_or_else(|| fail(15952, format!("unknown group operator '{operator}'")))?;
    if let Bson::Array(_) = argument {
        return Err(fail(40237, format!("The {operator} accumulator is a unary operator")));
    }
    Ok(AccumulatorSpec { name: name.to_string(), kind, expr: Expr::parse(argument)? })
}

/// Groups keyed by value under MongoDB equality, in first-seen order.
#[derive(Default)]
struct Groups {
    entries: Vec<(Bson, Vec<Accumulator>)>,
    by_hash: HashMap<u64, Vec<usize>>,
}

impl Groups {
    fn slot(&mut self, key: Bson, fresh: impl FnOnce() -> Vec<Accumulator>) -> &mut Vec<Accumulator> {
        let mut hasher = DefaultHasher::new();
        coarse_hash(&key, &mut hasher);
        let bucket = self.by_hash.entry(hasher.finish()).or_default();
        let found = bucket.iter().copied().find(|&i| {
            self.entries.get(i).is_some_and(|(k, _)| document::compare_values(k, &key) == Ordering::Equal)
        });
        let index = match found {
            Some(i) => i,
            None => {
                self.entries.push((key, fresh()));
                bucket.push(self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        let last = self.entries.len() - 1;
        let (_, accumulators) = &mut self.entries[index.min(last)];
        accumulators
    }

    fn into_entries(self) -> impl Iterator<Item = (Bson, Vec<Accumulator>)> {
        self.entries.into_iter()
    }
}

/// A hash equal for values MongoDB calls equal: numbers by double value, documents and arrays
/// by their members, strings by bytes.
fn coarse_hash(value: &Bson, hasher: &mut impl Hasher) {
    if let Some(n) = crate::expr::number::Num::from_bson(value) {
        let d = n.to_f64();
        let bits = if d == 0.0 { 0 } else if d.is_nan() { 1 } else { d.to_bits() };
        (0u8, bits).hash(hasher);
        return;
    }
    document::canonical_type_rank(value).hash(hasher);
    match value {
        Bson::String(s) | Bson::Symbol(s) => s.hash(hasher),
        Bson::Document(d) => {
            for (k, v) in d {
                k.hash(hasher);
                coarse_hash(v, hasher);
            }
        }
        Bson::Array(items) => items.iter().for_each(|item| coarse_hash(item, hasher)),
        Bson::Boolean(b) => b.hash(hasher),
        Bson::DateTime(d) => d.timestamp_millis().hash(hasher),
        Bson::ObjectId(o) => o.bytes().hash(hasher),
        _ => {}
    }
}

/// `$count: "name"`: the output field name.
pub fn parse_count(spec: &Bson) -> Result<String, QueryError> {
    let Bson::String(name) = spec else {
        return Err(fail(40156, "the count field must be a non-empty string"));
    };
    if name.is_empty() {
        return Err(fail(40157, "the count field must be a non-empty string"));
    }
    if name.starts_with('$') {
        return Err(fail(40158, "the count field cannot be a $-prefixed path"));
    }
    if name.contains('.') {
        return Err(fail(40160, "the count field cannot contain '.'"));
    }
    Ok(name.clone())
}

/// `$sortByCount: <expr>` = `$group {_id: expr, count: {$sum: 1}}` + `$sort {count: -1}`.
pub fn parse_sort_by_count(spec: &Bson) -> Result<(GroupSpec, SortSpec), QueryError> {
    let valid = match spec {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.len() == 1 && d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !valid {
        return Err(fail(40148, "the sortBy field must be defined as a $-prefixed path or an expression inside an object"));
    }
    let count = AccumulatorSpec { name: "count".into(), kind: AccumulatorKind::Sum, expr: Expr::Literal(Bson::Int32(1)) };
    let group = GroupSpec { id: Expr::parse(spec)?, accumulators: vec![count] };
    Ok((group, SortSpec::single("count", Direction::Descending)))
}

/// Output accumulators of `$bucket`/`$bucketAuto`; default `{count: {$sum: 1}}`.
fn parse_output(output: Option<&Bson>, code: i32) -> Result<Vec<AccumulatorSpec>, QueryError> {
    match output {
        None => Ok(vec![AccumulatorSpec { name: "count".into(), kind: AccumulatorKind::Sum, expr: Expr::Literal(Bson::Int32(1)) }]),
        Some(Bson::Document(d)) => d.iter().map(|(name, value)| parse_accumulator(name, value)).collect(),
        Some(other) => Err(fail(code, format!("The 'output' field must be an object, but found type: {}", bson_type_name(other)))),
    }
}

fn parse_group_by(value: Option<&Bson>, code: i32, stage: &str) -> Result<Expr, QueryError> {
    match value {
        Some(v @ Bson::String(s)) if s.starts_with('$') => Expr::parse(v),
        Some(v @ Bson::Document(d)) if d.keys().next().is_some_and(|k| k.starts_with('$')) => Expr::parse(v),
        _ => Err(fail(code, format!("The $groupBy field of {stage} must be defined as a $-prefixed path or an expression object"))),
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
            return Err(fail(40201, format!("Argument to $bucket stage must be an object, but found type: {}", bson_type_name(spec))));
        };
        for key in spec.keys() {
            if !matches!(key.as_str(), "groupBy" | "boundaries" | "default" | "output") {
                return Err(fail(40197, format!("Unrecognized option to $bucket: {key}.")));
            }
        }
        if !spec.contains_key("groupBy") || !spec.contains_key("boundaries") {
            return Err(fail(40198, "$bucket requires 'groupBy' and 'boundaries' to be specified."));
        }
        let group_by = parse_group_by(spec.get("groupBy"), 40202, "$bucket")?;
        let boundaries = match spec.get("boundaries") {
            Some(Bson::Array(b)) if b.len() >= 2 => b.clone(),
            _ => return Err(fail(40192, "The $bucket 'boundaries' field must be an array of at least two values")),
        };
        check_boundaries(&boundaries)?;
        let default = spec.get("default").cloned();
        if let (Some(d), Some(low), Some(high)) = (&default, boundaries.first(), boundaries.last())
            && document::compare_values(d, low) != Ordering::Less
            && document::compare_values(d, high) == Ordering::Less
            && document::canonical_type_rank(d) == document::canonical_type_rank(low)
        {
            return Err(fail(40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary."));
        }
        let output = parse_output(spec.get("output"), 40196)?;
        Ok(BucketSpec { group_by, boundaries, default, output })
    }

    pub fn run(&self, documents: Vec<Document>, vars: &Variables) -> Result<Vec<Document>, QueryError> {
        let mut buckets: Vec<Option<Vec<Accumulator>>> = vec![None; self.boundaries.len()];
        let fresh = || self.output.iter().map(|a| Accumulator::new(a.kind)).collect::<Vec<_>>();
        for document in &documents {
            let mut scope = Scope::new(document, vars);
            let value = scope.eval(&self.group_by)?;
            let index = self.bucket_of(&value)?;
            let slot = buckets.get_mut(index).ok_or_else(|| fail(40066, "bucket index out of range"))?;
            let accumulators = slot.get_or_insert_with(fresh);
            for (spec, accumulator) in self.output.iter().zip(accumulators.iter_mut()) {
                accumulator.process(&scope.eval(&spec.expr)?)?;
            }
        }
        let mut out = Vec::new();
        for (index, slot) in buckets.into_iter().enumerate() {
            let Some(accumulators) = slot else { continue };
            let id = if index + 1 == self.boundaries.len() {
                self.default.clone().unwrap_or(Bson::Null)
            } else {
                self.boundaries.get(index).cloned().unwrap_or(Bson::Null)
            };
            let mut doc = Document::new();
            doc.insert("_id", id);
            for (spec, accumulator) in self.output.iter().zip(accumulators) {
                doc.insert(spec.name.clone(), accumulator.finish());
            }
            out.push(doc);
        }
        Ok(out)
    }

    /// Index of the bucket (`boundaries.len() - 1` is the default bucket).
    fn bucket_of(&self, value: &Value) -> Result<usize, QueryError> {
        for (i, pair) in self.boundaries.windows(2).enumerate() {
            let (low, high) = (Some(pair[0].clone()), Some(pair[1].clone()));
            if compare_values_missing(value, &low) != Ordering::Less && compare_values_missing(value, &high) == Ordering::Less {
                return Ok(i);
            }
        }
        match self.default {
            Some(_) => Ok(self.boundaries.len() - 1),
            None => Err(fail(40066, "$switch could not find a matching branch for an input, and no default was specified.")),
        }
    }
}

fn check_boundaries(boundaries: &[Bson]) -> Result<(), QueryError> {
    for pair in boundaries.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if document::canonical_type_rank(a) != document::canonical_type_rank(b) {
            return Err(fail(40193, format!("All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types {} and {}.", bson_type_name(a), bson_type_name(b))));
        }
        if document::compare_values(a, b) != Ordering::Less {
            return Err(fail(40194, format!("The 'boundaries' option to $bucket must be sorted in ascending order, but elements {a} and {b} are not in ascending order")));
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
            return Err(fail(40240, format!("The argument to $bucketAuto must be an object, but found type: {}", bson_type_name(spec))));
        };
        for key in spec.keys() {
            match key.as_str() {
                "groupBy" | "buckets" | "output" => {}
                "granularity" => return Err(fail(40257, "$bucketAuto 'granularity' is not supported")),
                other => return Err(fail(40245, format!("Unrecognized option to $bucketAuto: {other}."))),
            }
        }
        if !spec.contains_key("groupBy") || !spec.contains_key("buckets") {
            return Err(fail(40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified"));
        }
        let group_by = parse_group_by(spec.get("groupBy"), 40239, "$bucketAuto")?;
        let buckets = spec
            .get("buckets")
            .and_then(crate::expr::number::Num::from_bson)
            .and_then(|n| n.to_exact_i64())
            .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
            .ok_or_else(|| fail(40243, "The $bucketAuto 'buckets' field must be a positive 32-bit integer"))?;
        let output = parse_output(spec.get("output"), 40244)?;
        Ok(BucketAutoSpec { group_by, buckets: buckets as usize, output })
    }

    /// MongoDB's algorithm: sort by value, fill each bucket with about n/buckets documents,
    /// never splitting equal values, the last bucket takes the rest; a bucket's max is the
    /// next bucket's min.
    pub fn run(&self, documents: Vec<Document>, vars: &Variables) -> Result<Vec<Document>, QueryError> {
        let mut keyed = Vec::with_capacity(documents.len());
        for document in documents {
            let value = Scope::new(&document, vars).eval(&self.group_by)?.unwrap_or(Bson::Null);
            keyed.push((value, document));
        }
        keyed.sort_by(|(a, _), (b, _)| document::compare_values(a, b));
        let approximate = ((keyed.len() as f64 / self.buckets as f64).round() as usize).max(1);
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        let mut start = 0;
        while start < keyed.len() {
            let last_bucket = ranges.len() + 1 == self.buckets;
            let mut end = if last_bucket { keyed.len() } else { (start + approximate).min(keyed.len()) };
            while end < keyed.len() && end > 0 && document::compare_values(&keyed[end].0, &keyed[end - 1].0) == Ordering::Equal {
                end += 1;
            }
            ranges.push((start, end));
            start = end;
        }
        let mut out = Vec::with_capacity(ranges.len());
        for &(start, end) in &ranges {
            let min = keyed[start].0.clone();
            let max = keyed.get(end).map_or_else(|| keyed[end - 1].0.clone(), |(v, _)| v.clone());
            let mut accumulators: Vec<Accumulator> = self.output.iter().map(|a| Accumulator::new(a.kind)).collect();
            for (_, document) in &keyed[start..end] {
                let mut scope = Scope::new(document, vars);
                for (spec, accumulator) in self.output.iter().zip(accumulators.iter_mut()) {
                    accumulator.process(&scope.eval(&spec.expr)?)?;
                }
            }
            let mut id = Document::new();
            id.insert("min", min);
            id.insert("max", max);
            let mut doc = Document::new();
            doc.insert("_id", id);
            for (spec, accumulator) in self.output.iter().zip(accumulators) {
                doc.insert(spec.name.clone(), accumulator.finish());
            }
            out.push(doc);
        }
        Ok(out)
    }
}
