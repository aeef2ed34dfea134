//! Index bounds: from a filter's predicates on one field to value intervals, and from
//! intervals on an index's fields to byte ranges of its tree.
//!
//! Intervals are over values in MongoDB's order, always a superset of what the predicate
//! matches (the executor applies the whole filter to every document it fetches, so a wider
//! bound costs reads, never answers). Type bracketing makes a comparison stay within its
//! operand's type: `$gt: 5` is `(5, +inf]` over numbers; a type's end is the smallest value of
//! the next type, exclusive. `null` equality is `[undefined, null]` (missing fields are indexed
//! as `null`). Predicates without useful bounds (`$ne`, `$exists`, regexes, arrays as operands,
//! `$type`, ...) give `None`: the field is unbounded.
//!
//! Byte ranges: a key component is self-delimiting, so the keys whose component equals `v`
//! after prefix `P` are exactly the keys starting with `P ++ enc(v)`; an inclusive upper bound
//! on `P ++ enc(v)` becomes "below the first key after that prefix" ([`prefix_end`]). A
//! descending field's bytes are inverted, so its intervals swap ends.

use std::cmp::Ordering;
use std::ops::Bound;

use bson::{Binary, Bson, Timestamp, oid::ObjectId, spec::BinarySubtype};
use document::keycodec::{Direction, KeyEncoder};
use document::{canonical_type_rank, compare_values};
use query::filter::{Comparison, InItem, Predicate};

/// An interval of values in ascending order; `(value, inclusive)` ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Interval {
    pub low: (Bson, bool),
    pub high: (Bson, bool),
}

impl Interval {
    pub(crate) fn point(value: Bson) -> Interval {
        Interval { low: (value.clone(), true), high: (value, true) }
    }

    pub(crate) fn full() -> Interval {
        Interval { low: (Bson::MinKey, true), high: (Bson::MaxKey, true) }
    }

    pub(crate) fn is_point(&self) -> bool {
        self.low.1 && self.high.1 && compare_values(&self.low.0, &self.high.0) == Ordering::Equal
    }

    fn is_empty(&self) -> bool {
        match compare_values(&self.low.0, &self.high.0) {
            Ordering::Greater => true,
            Ordering::Equal => !(self.low.1 && self.high.1),
            Ordering::Less => false,
        }
    }

    /// MongoDB's explain notation: `[1, 5)`.
    pub(crate) fn describe(&self, direction: Direction) -> String {
        let show = |value: &Bson| match value {
            Bson::MinKey => "MinKey".to_string(),
            Bson::MaxKey => "MaxKey".to_string(),
            Bson::String(s) => format!("\"{s}\""),
            other => other.to_string(),
        };
        let (low, high) = match direction {
            Direction::Ascending => (&self.low, &self.high),
            Direction::Descending => (&self.high, &self.low),
        };
        format!(
            "{}{}, {}{}",
            if low.1 { "[" } else { "(" },
            show(&low.0),
            show(&high.0),
            if high.1 { "]" } else { ")" }
        )
    }
}

/// A scan's intervals on each index field, as explain shows them (`indexBounds`). Kept as
/// intervals and described only when explain asks: a find plans a scan for every candidate
/// index and each branch of an `$or`, and formatting all their bounds cost 2.4% of an iibench
/// query's CPU.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexBounds(Vec<(String, Direction, Vec<Interval>)>);

impl IndexBounds {
    /// Adds the next index field's intervals, in the order the scan reads them.
    pub(crate) fn push(&mut self, path: &str, direction: Direction, intervals: Vec<Interval>) {
        self.0.push((path.to_string(), direction, intervals));
    }

    /// MongoDB's `indexBounds`: `{field: ["[1, 5)", ...], ...}`.
    pub(crate) fn describe(&self) -> bson::Document {
        self.0
            .iter()
            .map(|(path, direction, intervals)| {
                let described = intervals.iter().map(|i| Bson::String(i.describe(*direction))).collect();
                (path.clone(), Bson::Array(described))
            })
            .collect()
    }
}

/// The smallest value of each canonical type rank, ascending (ends of type brackets). Ranks
/// past timestamps share one bracket up to MaxKey: wider, never wrong.
fn type_minimums() -> Vec<Bson> {
    vec![
        Bson::MinKey,
        Bson::Undefined,
        Bson::Null,
        Bson::Double(f64::NAN),
        Bson::String(String::new()),
        Bson::Document(bson::Document::new()),
        Bson::Array(Vec::new()),
        Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: Vec::new() }),
        Bson::ObjectId(ObjectId::from_bytes([0; 12])),
        Bson::Boolean(false),
        Bson::DateTime(bson::DateTime::from_millis(i64::MIN)),
        Bson::Timestamp(Timestamp { time: 0, increment: 0 }),
        Bson::MaxKey,
    ]
}

/// `[min of value's type, ...`
fn type_low(value: &Bson) -> (Bson, bool) {
    let rank = canonical_type_rank(value);
    type_minimums()
        .into_iter()
        .rev()
        .find(|min| canonical_type_rank(min) <= rank)
        .map_or((Bson::MinKey, true), |min| (min, true))
}

/// `..., min of the next type)`
fn type_high(value: &Bson) -> (Bson, bool) {
    let rank = canonical_type_rank(value);
    type_minimums()
        .into_iter()
        .find(|min| canonical_type_rank(min) > rank)
        .map_or((Bson::MaxKey, true), |min| if min == Bson::MaxKey { (min, true) } else { (min, false) })
}

/// Whether a value can bound a comparison (others leave the field unbounded).
fn comparable(value: &Bson) -> bool {
    !matches!(value, Bson::Array(_) | Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey)
}

fn equality(value: &Bson) -> Option<Interval> {
    match value {
        Bson::Array(_) => None,
        Bson::Null => Some(Interval { low: (Bson::Undefined, true), high: (Bson::Null, true) }),
        other => Some(Interval::point(other.clone())),
    }
}

/// The intervals a predicate allows on its path, sorted and disjoint; `None`: unbounded.
/// `multikey`: a path with arrays, where two predicates may hold on different elements, so
/// they must not be intersected.
pub(crate) fn predicate_intervals(predicate: &Predicate, multikey: bool) -> Option<Vec<Interval>> {
    match predicate {
        Predicate::Eq(value) => equality(value).map(|i| vec![i]),
        Predicate::Compare(op, value) if comparable(value) => {
            let operand = (value.clone(), matches!(op, Comparison::GreaterOrEqual | Comparison::LessOrEqual));
            let interval = match op {
                Comparison::Greater | Comparison::GreaterOrEqual => Interval { low: operand, high: type_high(value) },
                Comparison::Less | Comparison::LessOrEqual => Interval { low: type_low(value), high: operand },
            };
            Some(vec![interval])
        }
        Predicate::In(items) => {
            let mut intervals = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    InItem::Value(value) => intervals.push(equality(value)?),
                    InItem::Regex(_) => return None,
                }
            }
            Some(union(intervals))
        }
        Predicate::And(predicates) => combine(predicates.iter().map(|p| predicate_intervals(p, multikey)), multikey),
        _ => None,
    }
}

/// A hashed field's intervals: the hash of each point (a `null` equality's two values, as
/// [`equality`] gives them, each hashed), or `None` (unbounded) when any interval is a range:
/// a hash keeps equality, not order.
pub(crate) fn hashed_intervals(intervals: Vec<Interval>) -> Option<Vec<Interval>> {
    let null_equality = Interval { low: (Bson::Undefined, true), high: (Bson::Null, true) };
    let mut points = Vec::with_capacity(intervals.len());
    for interval in intervals {
        if interval.is_point() {
            points.push(interval.low.0);
        } else if interval == null_equality {
            points.extend([Bson::Undefined, Bson::Null]);
        } else {
            return None;
        }
    }
    let hashes = points.iter().map(|value| Interval::point(Bson::Int64(document::hash::hash_value(value))));
    Some(union(hashes.collect()))
}

/// Combines the intervals of predicates that must all hold on one path.
pub(crate) fn combine(lists: impl Iterator<Item = Option<Vec<Interval>>>, multikey: bool) -> Option<Vec<Interval>> {
    let mut result: Option<Vec<Interval>> = None;
    for list in lists.flatten() {
        result = Some(match result {
            None => list,
            // On a multikey path the first bounded predicate alone is a superset.
            Some(existing) if multikey => existing,
            Some(existing) => intersect(&existing, &list),
        });
    }
    result
}

fn union(mut intervals: Vec<Interval>) -> Vec<Interval> {
    intervals.retain(|i| !i.is_empty());
    intervals.sort_by(|a, b| compare_low(&a.low, &b.low));
    let mut merged: Vec<Interval> = Vec::with_capacity(intervals.len());
    for interval in intervals {
        if let Some(last) = merged.last_mut() {
            let touches = match compare_values(&interval.low.0, &last.high.0) {
                Ordering::Less => true,
                Ordering::Equal => interval.low.1 || last.high.1,
                Ordering::Greater => false,
            };
            if touches {
                if compare_high(&interval.high, &last.high) == Ordering::Greater {
                    last.high = interval.high;
                }
                continue;
            }
        }
        merged.push(interval);
    }
    merged
}

fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let low = if compare_low(&x.low, &y.low) == Ordering::Greater { x.low.clone() } else { y.low.clone() };
            let high = if compare_high(&x.high, &y.high) == Ordering::Less { x.high.clone() } else { y.high.clone() };
            let interval = Interval { low, high };
            if !interval.is_empty() {
                out.push(interval);
            }
        }
    }
    union(out)
}

/// Orders lower ends: at equal values an inclusive end starts first.
fn compare_low(a: &(Bson, bool), b: &(Bson, bool)) -> Ordering {
    compare_values(&a.0, &b.0).then_with(|| b.1.cmp(&a.1))
}

/// Orders upper ends: at equal values an inclusive end reaches further.
fn compare_high(a: &(Bson, bool), b: &(Bson, bool)) -> Ordering {
    compare_values(&a.0, &b.0).then_with(|| a.1.cmp(&b.1))
}

/// A range of an index tree's keys.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyRange {
    pub lower: Bound<Vec<u8>>,
    pub upper: Bound<Vec<u8>>,
}

impl KeyRange {
    /// The range as the engine's `range` takes it.
    pub(crate) fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (self.lower.as_ref().map(Vec::as_slice), self.upper.as_ref().map(Vec::as_slice))
    }
}

/// The first byte string after every string that starts with `prefix` (`None`: there is none).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

fn encode_component(prefix: &[u8], value: &Bson, direction: Direction) -> Vec<u8> {
    let mut encoder = KeyEncoder::new();
    encoder.push(value, direction);
    [prefix, encoder.finish().order.as_slice()].concat()
}

/// The keys starting with `prefix` whose next component lies in `interval` (`None`: the rest
/// is unbounded: every key starting with `prefix`).
pub(crate) fn key_range(prefix: &[u8], interval: Option<&Interval>, direction: Direction) -> KeyRange {
    let Some(interval) = interval else {
        return KeyRange {
            lower: if prefix.is_empty() { Bound::Unbounded } else { Bound::Included(prefix.to_vec()) },
            upper: prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded),
        };
    };
    let (first, last) = match direction {
        Direction::Ascending => (&interval.low, &interval.high),
        Direction::Descending => (&interval.high, &interval.low),
    };
    let first_bytes = encode_component(prefix, &first.0, direction);
    let last_bytes = encode_component(prefix, &last.0, direction);
    let lower = if first.1 {
        Bound::Included(first_bytes)
    } else {
        match prefix_end(&first_bytes) {
            Some(end) => Bound::Included(end),
            None => Bound::Excluded(first_bytes),
        }
    };
    let upper = if last.1 {
        prefix_end(&last_bytes).map_or(Bound::Unbounded, Bound::Excluded)
    } else {
        Bound::Excluded(last_bytes)
    };
    KeyRange { lower, upper }
}

/// Appends a point value to a key prefix.
pub(crate) fn extend_prefix(prefix: &[u8], value: &Bson, direction: Direction) -> Vec<u8> {
    encode_component(prefix, value, direction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use query::filter::{Filter, MatchExpr};

    fn intervals(filter: bson::Document) -> Option<Vec<Interval>> {
        let filter = Filter::parse(&filter).unwrap();
        match filter.root() {
            MatchExpr::Path { predicate, .. } => predicate_intervals(predicate, false),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Bounds: comparisons stay within their type; $in unions and merges.
    #[test]
    fn predicates_to_intervals() {
        let gt = intervals(doc! {"a": {"$gt": 5}}).unwrap();
        assert_eq!(gt, vec![Interval { low: (Bson::Int32(5), false), high: (Bson::String(String::new()), false) }]);
        let range = intervals(doc! {"a": {"$gte": 1, "$lt": 3}}).unwrap();
        assert_eq!(range, vec![Interval { low: (Bson::Int32(1), true), high: (Bson::Int32(3), false) }]);
        let within = intervals(doc! {"a": {"$in": [3, 1, 2, 1]}}).unwrap();
        assert_eq!(within.len(), 3);
        assert!(within.iter().all(Interval::is_point));
        assert!(intervals(doc! {"a": {"$ne": 1}}).is_none());
        assert!(intervals(doc! {"a": [1, 2]}).is_none());
        assert_eq!(intervals(doc! {"a": {"$gt": 5, "$lt": 2}}).unwrap(), vec![]);
    }

    /// A hashed field: points become their hashes (3 and 3.0 one hash), ranges unbounded.
    #[test]
    fn hashed_fields_keep_points_only() {
        let hash = |value: Bson| Interval::point(Bson::Int64(document::hash::hash_value(&value)));
        let points = hashed_intervals(intervals(doc! {"a": {"$in": [3, 3.0]}}).unwrap()).unwrap();
        assert_eq!(points, vec![hash(Bson::Int32(3))]);
        let null = hashed_intervals(intervals(doc! {"a": null}).unwrap()).unwrap();
        assert_eq!(null.len(), 2);
        assert!(null.contains(&hash(Bson::Null)) && null.contains(&hash(Bson::Undefined)));
        let same = hashed_intervals(intervals(doc! {"a": {"$gte": 3, "$lte": 3}}).unwrap()).unwrap();
        assert_eq!(same, vec![hash(Bson::Int32(3))]);
        assert!(hashed_intervals(intervals(doc! {"a": {"$gt": 3}}).unwrap()).is_none());
    }

    /// Byte ranges: a point prefix covers exactly the keys with that component.
    #[test]
    fn ranges_cover_prefixes() {
        let range = key_range(&[], Some(&Interval::point(Bson::Int32(7))), Direction::Ascending);
        let key7 = encode_component(&[], &Bson::Int32(7), Direction::Ascending);
        let key7_more = [key7.clone(), vec![1, 2, 3]].concat();
        let key8 = encode_component(&[], &Bson::Int32(8), Direction::Ascending);
        let contains = |key: &Vec<u8>| {
            let above = match &range.lower {
                Bound::Included(l) => key >= l,
                Bound::Excluded(l) => key > l,
                Bound::Unbounded => true,
            };
            let below = match &range.upper {
                Bound::Included(u) => key <= u,
                Bound::Excluded(u) => key < u,
                Bound::Unbounded => true,
            };
            above && below
        };
        assert!(contains(&key7) && contains(&key7_more) && !contains(&key8));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }
}
