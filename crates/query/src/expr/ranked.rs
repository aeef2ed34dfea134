//! The n-element accumulators of `$group` and `$bucket`: `$firstN $lastN $maxN $minN $top
//! $bottom $topN $bottomN`.
//!
//! A document's argument arrives evaluated as one document, which `pipeline::group` builds from
//! the operator's fields: `{n, v}` (`v` the `input`) for the first four, `{n, v, k, d}` for the
//! others (`v` the `output`, `k` the document's values of the `sortBy` fields, `d` their
//! directions). `n` is read from the first document of a group. `$maxN`/`$minN` leave out null
//! and missing values, the others keep them (missing as null). Results are in sort order
//! (`$maxN` largest first); equal sort keys keep their arrival order.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::accumulator::AccumulatorKind;
use super::value::{Value, approximate_bytes};
use crate::collation::{Collation, compare_values};
use crate::error::QueryError;

/// A group's kept elements, each with its sort key, in sort order.
#[derive(Debug, Clone, Default)]
pub struct Ranked {
    limit: Option<usize>,
    items: Vec<(Vec<Bson>, Bson)>,
}

impl Ranked {
    /// Feeds one document's argument; returns the bytes now held.
    pub fn process(
        &mut self,
        kind: AccumulatorKind,
        value: &Value,
        collation: Option<&Collation>,
    ) -> Result<usize, QueryError> {
        let Some(Bson::Document(argument)) = value else { return Ok(self.bytes()) };
        let limit = match self.limit {
            Some(limit) => limit,
            None => *self.limit.insert(read_n(kind, argument)?),
        };
        let element = argument.get("v").cloned().unwrap_or(Bson::Null);
        match kind {
            AccumulatorKind::FirstN if self.items.len() < limit => self.items.push((Vec::new(), element)),
            AccumulatorKind::LastN => {
                self.items.push((Vec::new(), element));
                if self.items.len() > limit {
                    self.items.remove(0);
                }
            }
            AccumulatorKind::MaxN | AccumulatorKind::MinN if !matches!(element, Bson::Null | Bson::Undefined) => {
                let direction = if kind == AccumulatorKind::MaxN { -1 } else { 1 };
                self.keep(limit, vec![element.clone()], &[direction], element, collation, false);
            }
            AccumulatorKind::Top | AccumulatorKind::TopN | AccumulatorKind::Bottom | AccumulatorKind::BottomN => {
                let key = match argument.get("k") {
                    Some(Bson::Array(key)) => key.clone(),
                    _ => Vec::new(),
                };
                let directions: Vec<i32> = match argument.get("d") {
                    Some(Bson::Array(d)) => d.iter().map(|d| if d.as_i32() == Some(-1) { -1 } else { 1 }).collect(),
                    _ => Vec::new(),
                };
                let from_end = matches!(kind, AccumulatorKind::Bottom | AccumulatorKind::BottomN);
                self.keep(limit, key, &directions, element, collation, from_end);
            }
            _ => {}
        }
        Ok(self.bytes())
    }

    /// Inserts after the elements that sort before or with it, then keeps the first `limit`
    /// (or, `from_end`, the last).
    fn keep(
        &mut self,
        limit: usize,
        key: Vec<Bson>,
        directions: &[i32],
        element: Bson,
        collation: Option<&Collation>,
        from_end: bool,
    ) {
        let at = self.items.partition_point(|(held, _)| order(held, &key, directions, collation) != Ordering::Greater);
        self.items.insert(at, (key, element));
        if self.items.len() > limit {
            if from_end {
                self.items.remove(0);
            } else {
                self.items.truncate(limit);
            }
        }
    }

    fn bytes(&self) -> usize {
        self.items
            .iter()
            .map(|(key, element)| approximate_bytes(element) + key.iter().map(approximate_bytes).sum::<usize>())
            .sum()
    }

    pub fn finish(self, kind: AccumulatorKind) -> Bson {
        let mut elements = self.items.into_iter().map(|(_, element)| element);
        match kind {
            AccumulatorKind::Top | AccumulatorKind::Bottom => elements.next().unwrap_or(Bson::Null),
            _ => Bson::Array(elements.collect()),
        }
    }
}

/// How `a` sorts against `b` under the sort's directions.
fn order(a: &[Bson], b: &[Bson], directions: &[i32], collation: Option<&Collation>) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ordering = compare_values(x, y, collation);
        let ordering = if directions.get(i) == Some(&-1) { ordering.reverse() } else { ordering };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// The group's `n` (1 for `$top` and `$bottom`): a positive integer.
fn read_n(kind: AccumulatorKind, argument: &Document) -> Result<usize, QueryError> {
    if matches!(kind, AccumulatorKind::Top | AccumulatorKind::Bottom) {
        return Ok(1);
    }
    super::array::positive_n(argument.get("n"))
}
