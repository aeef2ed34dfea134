//! A message buffer: the pending writes an internal node holds for one child.
//!
//! Invariants (checked by `verify`):
//! - every point message's key, and every range delete, lies within the child's key range;
//! - a key's messages are in strictly ascending sequence order;
//! - `size_bytes` equals the sum of the messages' accounted sizes.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::message::{prune, Event, Seq};

/// Bytes charged per message beyond its key and value, for the seq, the tag and the map entry.
/// (A `BTreeMap` slot at its usual fill, the events `Vec`, the event and their allocations.)
const MESSAGE_OVERHEAD_BYTES: usize = 128;

/// A delete of every key in `[start, end)`; `end: None` means unbounded above.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeDelete {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
    pub seq: Seq,
}

impl RangeDelete {
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }

    /// The part of this range inside `[lo, hi)`, if any.
    pub fn clip(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Option<RangeDelete> {
        let start = match lo {
            Some(lo) if lo > self.start.as_slice() => lo.to_vec(),
            _ => self.start.clone(),
        };
        let end = match (self.end.as_deref(), hi) {
            (Some(end), Some(hi)) => Some(end.min(hi).to_vec()),
            (Some(end), None) => Some(end.to_vec()),
            (None, Some(hi)) => Some(hi.to_vec()),
            (None, None) => None,
        };
        let clipped = RangeDelete { start, end, seq: self.seq };
        let empty = clipped.end.as_deref().is_some_and(|end| end <= clipped.start.as_slice());
        (!empty).then_some(clipped)
    }

    pub fn size_bytes(&self) -> usize {
        self.start.len() + self.end.as_ref().map_or(0, Vec::len) + MESSAGE_OVERHEAD_BYTES
    }
}

/// The messages buffered for one child, by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    points: BTreeMap<Vec<u8>, Vec<(Seq, Event)>>,
    ranges: Vec<RangeDelete>,
    size_bytes: usize,
}

pub fn point_size_bytes(key: &[u8], event: &Event) -> usize {
    key.len() + event.size_bytes() + MESSAGE_OVERHEAD_BYTES
}

impl Buffer {
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Adds a point message, newer than every message of its key already here, and drops the
    /// messages for that key that no reader at or after `horizon` can see.
    #[cfg(test)]
    pub fn push(&mut self, key: Vec<u8>, seq: Seq, event: Event, horizon: Seq) {
        self.push_all(key, vec![(seq, event)], horizon);
    }

    /// Adds a key's events, in ascending order and all newer than those held, then prunes that
    /// key's history against `horizon`.
    pub fn push_all(&mut self, key: Vec<u8>, incoming: Vec<(Seq, Event)>, horizon: Seq) {
        let key_len = key.len();
        let charge = |events: &[(Seq, Event)]| -> usize {
            events.iter().map(|(_, e)| key_len + e.size_bytes() + MESSAGE_OVERHEAD_BYTES).sum()
        };
        let events = self.points.entry(key).or_default();
        debug_assert!(
            match (events.last(), incoming.first()) {
                (Some((last, _)), Some((first, _))) => last < first,
                _ => true,
            },
            "messages out of order"
        );
        let before = charge(events);
        // Exact: most keys have one message, and default growth would allocate four.
        events.reserve_exact(incoming.len());
        events.extend(incoming);
        if events.len() > 1 {
            prune(events, horizon);
        }
        self.size_bytes = self.size_bytes - before + charge(events);
    }

    pub fn push_range(&mut self, range: RangeDelete) {
        self.size_bytes += range.size_bytes();
        self.ranges.push(range);
    }

    /// Appends this key's events (point messages and covering range deletes) to `out`.
    pub fn collect_events(&self, key: &[u8], out: &mut Vec<(Seq, Event)>) {
        if let Some(events) = self.points.get(key) {
            out.extend(events.iter().cloned());
        }
        for range in self.ranges.iter().filter(|r| r.contains(key)) {
            out.push((range.seq, Event::Delete));
        }
    }

    /// The point messages with keys in the given bounds, in key order.
    pub fn points_in(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> impl Iterator<Item = (&Vec<u8>, &Vec<(Seq, Event)>)> {
        self.points.range::<[u8], _>((lo, hi))
    }

    pub fn points(&self) -> impl Iterator<Item = (&Vec<u8>, &Vec<(Seq, Event)>)> {
        self.points.iter()
    }

    pub fn ranges(&self) -> &[RangeDelete] {
        &self.ranges
    }

    /// Empties the buffer, returning its point messages and range deletes.
    pub fn take(&mut self) -> (BTreeMap<Vec<u8>, Vec<(Seq, Event)>>, Vec<RangeDelete>) {
        self.size_bytes = 0;
        (std::mem::take(&mut self.points), std::mem::take(&mut self.ranges))
    }

    /// Moves every message into `other` (used when two siblings merge: their ranges are
    /// disjoint, so no key gains messages from both).
    pub fn append_to(mut self, other: &mut Buffer) {
        let (points, ranges) = self.take();
        for (key, events) in points {
            other.size_bytes += events.iter().map(|(_, e)| point_size_bytes(&key, e)).sum::<usize>();
            other.points.entry(key).or_default().extend(events);
        }
        for range in ranges {
            other.push_range(range);
        }
    }

    /// Splits off the messages for keys `>= pivot` into a new buffer (used when a child splits).
    pub fn split_off(&mut self, pivot: &[u8]) -> Buffer {
        let right_points = self.points.split_off(pivot);
        let mut right = Buffer { points: right_points, ranges: Vec::new(), size_bytes: 0 };
        let ranges = std::mem::take(&mut self.ranges);
        for range in ranges {
            if let Some(left) = range.clip(None, Some(pivot)) {
                self.ranges.push(left);
            }
            if let Some(r) = range.clip(Some(pivot), None) {
                right.ranges.push(r);
            }
        }
        self.size_bytes = self.recompute_size();
        right.size_bytes = right.recompute_size();
        right
    }

    pub fn recompute_size(&self) -> usize {
        let points: usize = self
            .points
            .iter()
            .flat_map(|(k, events)| events.iter().map(move |(_, e)| point_size_bytes(k, e)))
            .sum();
        points + self.ranges.iter().map(RangeDelete::size_bytes).sum::<usize>()
    }

    /// Rebuilds a buffer from decoded parts (node decoding).
    pub fn from_parts(points: BTreeMap<Vec<u8>, Vec<(Seq, Event)>>, ranges: Vec<RangeDelete>) -> Buffer {
        let mut buffer = Buffer { points, ranges, size_bytes: 0 };
        buffer.size_bytes = buffer.recompute_size();
        buffer
    }
}
