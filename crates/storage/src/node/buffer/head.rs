//! A buffer's `head`: its newest messages, as they arrived, before they freeze into a run.
//!
//! Each message is one entry in a run's layout (`run.rs`), appended to one allocation; `sorted`
//! holds the entries' offsets in key order, a key's messages in arrival order.
//!
//! Invariants: `sorted` names every entry once, in key order; a key's messages there are in
//! strictly ascending sequence order (checked, debug-only, on each `push`).

use std::ops::Bound;

use super::run::{OP_DELETE, Run, parse_event, write_entry};
use crate::message::{Event, Seq, prune};
use crate::node::flat::{self, read_u32};

/// The newest messages, as they arrived: entries in a run's layout (one message each) appended
/// to one allocation, with their offsets kept sorted by key (a key's messages in arrival order).
/// Why not a map: as `BTreeMap` entries each message was two allocations (its key and value)
/// and a share of a map node, freed by the hundred whenever the head froze, and the committing
/// thread's allocator paid for it on every indexed insert; here the caller's key and value are
/// freed as soon as they are copied in, and a freeze copies entries out in key order.
#[derive(Clone, Debug, Default)]
pub(super) struct Head {
    pub(super) data: Vec<u8>,
    sorted: Vec<u32>,
}

impl Head {
    pub(super) fn len(&self) -> usize {
        self.sorted.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// What the head is charged: its messages' bytes and their offsets.
    pub(super) fn size_bytes(&self) -> usize {
        self.data.len() + 4 * self.sorted.len()
    }

    pub(super) fn clear(&mut self) {
        self.data.clear();
        self.sorted.clear();
    }

    /// Adds a message after every message already here for its key.
    pub(super) fn push(&mut self, key: &[u8], message: &(Seq, Event)) {
        let at = flat::partition_point(self.len(), |i| self.key(i), |k| k <= key);
        debug_assert!(
            at == 0 || self.key(at - 1) != key || {
                let mut previous = Vec::with_capacity(1);
                self.events_into(at - 1, &mut previous);
                previous.first().is_some_and(|(seq, _)| *seq < message.0)
            },
            "a buffered message not newer than its key's last one"
        );
        let start = self.data.len() as u32;
        write_entry(&mut self.data, key, std::slice::from_ref(message));
        self.sorted.insert(at, start);
    }

    /// The data from message `index` (in key order) on: its entry first.
    fn from(&self, index: usize) -> &[u8] {
        let start = self.sorted.get(index).map_or(self.data.len(), |&at| at as usize);
        self.data.get(start..).unwrap_or(&[])
    }

    /// Where an entry's one event starts: after the key's length, the key and the count.
    fn event_at(entry: &[u8]) -> usize {
        4 + read_u32(entry, 0).unwrap_or(0) as usize + 4
    }

    /// Message `index`'s entry bytes.
    fn raw(&self, index: usize) -> &[u8] {
        let entry = self.from(index);
        let event_at = Head::event_at(entry);
        let len = match entry.get(event_at + 8) {
            Some(&OP_DELETE) => event_at + 9,
            _ => event_at + 13 + read_u32(entry, event_at + 9).unwrap_or(0) as usize,
        };
        entry.get(..len).unwrap_or(&[])
    }

    /// Message `index`'s key (read without sizing its event: the binary searches' hot path).
    pub(super) fn key(&self, index: usize) -> &[u8] {
        let entry = self.from(index);
        entry.get(4..4 + read_u32(entry, 0).unwrap_or(0) as usize).unwrap_or(&[])
    }

    /// The first message within the lower bound.
    pub(super) fn lower_bound(&self, lo: Bound<&[u8]>) -> usize {
        match lo {
            Bound::Unbounded => 0,
            Bound::Included(bound) => flat::partition_point(self.len(), |i| self.key(i), |k| k < bound),
            Bound::Excluded(bound) => flat::partition_point(self.len(), |i| self.key(i), |k| k <= bound),
        }
    }

    /// Decodes message `index` onto `out`.
    pub(super) fn events_into(&self, index: usize, out: &mut Vec<(Seq, Event)>) {
        let entry = self.from(index);
        if let Some((event, _)) = parse_event(entry.get(Head::event_at(entry)..).unwrap_or(&[])) {
            out.push(event);
        }
    }

    /// Appends `key`'s messages here, oldest first.
    pub(super) fn events_of(&self, key: &[u8], out: &mut Vec<(Seq, Event)>) {
        for index in self.lower_bound(Bound::Included(key))..self.len() {
            if self.key(index) != key {
                break;
            }
            self.events_into(index, out);
        }
    }

    /// The messages as a run: a key's messages in one entry, pruned against `horizon`.
    pub(super) fn to_run(&self, horizon: Seq) -> Run {
        let mut run = Run { data: Vec::with_capacity(self.data.len()), offsets: Vec::with_capacity(self.len()) };
        let mut first = 0;
        while first < self.len() {
            let key = self.key(first);
            let end = (first + 1..self.len()).find(|&i| self.key(i) != key).unwrap_or(self.len());
            if end == first + 1 {
                run.push_raw(self.raw(first));
            } else {
                let mut events = Vec::with_capacity(end - first);
                (first..end).for_each(|i| self.events_into(i, &mut events));
                prune(&mut events, horizon);
                run.push(key, &events);
            }
            first = end;
        }
        run.shrink();
        run
    }
}
