//! A buffer's runs: messages frozen in key order, and the entry layout they share with `head`
//! and with a buffer's on-disk section.
//!
//! Invariants: a run's keys are strictly ascending, each entry holds at least one message, and
//! an entry's messages are in strictly ascending sequence order. A run is built only from
//! messages already checked (by `check_entries` when bytes come from disk), so its readers trust
//! the bytes and read bad ones as empty rather than panic.

use std::ops::Bound;

use crate::message::{Event, Seq, prune};
use crate::node::flat::{self, read_u32};

/// Messages frozen in key order: entries back to back, each
/// `key_len:u32 key count:u32 (seq:u64 op:u8 [len:u32 operand])*` (op 0 put, 1 delete,
/// 2 update), with the offset of each entry. Built only here, from messages already checked, so
/// reads trust the bytes (and read bad ones as empty rather than panic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Run {
    pub(super) data: Vec<u8>,
    pub(super) offsets: Vec<u32>,
}

const OP_PUT: u8 = 0;
pub(super) const OP_DELETE: u8 = 1;
const OP_UPDATE: u8 = 2;

impl Run {
    /// The bytes `push` writes for a key's events.
    fn entry_len(key: &[u8], events: &[(Seq, Event)]) -> usize {
        if events.is_empty() {
            return 0;
        }
        let event_len = |event: &Event| match event {
            Event::Put(v) | Event::Update(v) => 8 + 1 + 4 + v.len(),
            Event::Delete => 8 + 1,
        };
        4 + key.len() + 4 + events.iter().map(|(_, event)| event_len(event)).sum::<usize>()
    }

    pub(super) fn push(&mut self, key: &[u8], events: &[(Seq, Event)]) {
        if events.is_empty() {
            return;
        }
        let start = self.data.len();
        self.offsets.push(start as u32);
        write_entry(&mut self.data, key, events);
        debug_assert_eq!(self.data.len() - start, Run::entry_len(key, events));
    }

    pub(super) fn push_raw(&mut self, raw: &[u8]) {
        self.offsets.push(self.data.len() as u32);
        self.data.extend_from_slice(raw);
    }

    pub(super) fn shrink(&mut self) {
        self.data.shrink_to_fit();
        self.offsets.shrink_to_fit();
    }

    pub(in crate::node) fn len(&self) -> usize {
        self.offsets.len()
    }

    pub(super) fn size_bytes(&self) -> usize {
        self.data.len() + 4 * self.offsets.len()
    }

    /// The memory the run holds, spare capacity included.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.data.capacity() + 4 * self.offsets.capacity()
    }

    /// Runs (oldest first) merged into one, pruned against `horizon`.
    pub(crate) fn merge_all(runs: &[Run], horizon: Seq) -> Run {
        match runs {
            [] => Run::default(),
            [run] => run.clone(),
            _ => merge_all(runs.iter(), horizon),
        }
    }

    /// Where entry `index` starts (the end of the data past the last entry).
    fn offset(&self, index: usize) -> usize {
        self.offsets.get(index).map_or(self.data.len(), |&o| o as usize)
    }

    pub(in crate::node) fn raw(&self, index: usize) -> &[u8] {
        self.data.get(self.offset(index)..self.offset(index + 1)).unwrap_or(&[])
    }

    pub(in crate::node) fn key(&self, index: usize) -> &[u8] {
        entry_key(self.raw(index))
    }

    pub(in crate::node) fn find(&self, key: &[u8]) -> Result<usize, usize> {
        flat::search(self.len(), |i| self.key(i), key)
    }

    /// The encoded bytes of entries `range`.
    pub(in crate::node) fn span_bytes(&self, range: std::ops::Range<usize>) -> usize {
        self.offset(range.end).saturating_sub(self.offset(range.start))
    }

    /// A copy of entries `first..end`.
    fn copy_entries(&self, first: usize, end: usize) -> Run {
        let from = self.offset(first);
        Run {
            data: self.data.get(from..self.offset(end)).unwrap_or(&[]).to_vec(),
            offsets: self.offsets.get(first..end).unwrap_or(&[]).iter().map(|o| o - from as u32).collect(),
        }
    }

    /// The first entry within the lower bound.
    pub(super) fn lower_bound(&self, lo: Bound<&[u8]>) -> usize {
        match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) => self.find(k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => self.find(k).map_or_else(|i| i, |i| i + 1),
        }
    }

    /// Decodes entry `index`'s events onto `out`.
    pub(in crate::node) fn events_into(&self, index: usize, out: &mut Vec<(Seq, Event)>) {
        let raw = self.raw(index);
        let key_len = read_u32(raw, 0).unwrap_or(0) as usize;
        let Some(rest) = raw.get(4 + key_len..) else { return };
        let count = read_u32(rest, 0).unwrap_or(0) as usize;
        let mut at = 4;
        out.reserve(count);
        for _ in 0..count {
            let Some((event, len)) = parse_event(rest.get(at..).unwrap_or(&[])) else { return };
            out.push(event);
            at += len;
        }
    }

    /// Merges this run with a newer one: a key in both gets the older messages then the newer,
    /// pruned against `horizon`; the other entries are copied as bytes.
    pub(super) fn merge(&self, newer: &Run, horizon: Seq) -> Run {
        let mut out = Run {
            data: Vec::with_capacity(self.data.len() + newer.data.len()),
            offsets: Vec::with_capacity(self.len() + newer.len()),
        };
        let (mut i, mut j) = (0, 0);
        while i < self.len() || j < newer.len() {
            let order = match (i < self.len(), j < newer.len()) {
                (true, true) => self.key(i).cmp(newer.key(j)),
                (true, false) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    out.push_raw(self.raw(i));
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push_raw(newer.raw(j));
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let mut events = Vec::new();
                    self.events_into(i, &mut events);
                    newer.events_into(j, &mut events);
                    prune(&mut events, horizon);
                    out.push(self.key(i), &events);
                    i += 1;
                    j += 1;
                }
            }
        }
        out.shrink();
        debug_assert!(
            out.len() <= self.len() + newer.len() && out.data.len() <= self.data.len() + newer.data.len(),
            "a merge of runs grew their messages"
        );
        out
    }

    /// A copy of the entries with keys in `[lo, hi)`.
    pub(super) fn slice(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Run {
        let first = lo.map_or(0, |lo| self.lower_bound(Bound::Included(lo)));
        let end = hi.map_or(self.len(), |hi| self.lower_bound(Bound::Included(hi)));
        if first >= end {
            return Run::default();
        }
        self.copy_entries(first, end)
    }

    /// Splits off the entries with keys `>= pivot` (copied into the returned run).
    pub(super) fn split_off(&mut self, pivot: &[u8]) -> Run {
        let at = self.find(pivot).unwrap_or_else(|i| i);
        let upper = self.copy_entries(at, self.len());
        self.data.truncate(self.offset(at));
        self.offsets.truncate(at);
        self.shrink();
        upper
    }
}

/// Appends the entry of a key's events (a run's layout).
pub(super) fn write_entry(out: &mut Vec<u8>, key: &[u8], events: &[(Seq, Event)]) {
    flat::write_entry_head(out, key, events.len());
    for (seq, event) in events {
        out.extend_from_slice(&seq.to_le_bytes());
        match event {
            Event::Put(v) | Event::Update(v) => {
                out.push(if matches!(event, Event::Put(_)) { OP_PUT } else { OP_UPDATE });
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(v);
            }
            Event::Delete => out.push(OP_DELETE),
        }
    }
}

/// The key of one entry in a run's layout.
pub(super) fn entry_key(raw: &[u8]) -> &[u8] {
    let len = read_u32(raw, 0).unwrap_or(0) as usize;
    raw.get(4..4 + len).unwrap_or(&[])
}

/// Checks the entry at the start of untrusted `bytes` (lengths, ops, at least one event, strictly
/// ascending sequence numbers); returns its encoded length.
fn check_entry(bytes: &[u8]) -> Result<usize, String> {
    let key_len = read_u32(bytes, 0).ok_or("truncated buffer entry")? as usize;
    let count_at = 4usize.checked_add(key_len).ok_or("bad key length")?;
    let count = read_u32(bytes, count_at).ok_or("truncated buffer entry")? as usize;
    if count == 0 {
        return Err("a buffered key without messages".into());
    }
    let mut at = count_at + 4;
    let mut previous: Option<Seq> = None;
    for _ in 0..count {
        let ((seq, _), len) = parse_event(bytes.get(at..).unwrap_or(&[])).ok_or("bad buffered message")?;
        if previous.is_some_and(|p| p >= seq) {
            return Err("buffered messages out of sequence order".into());
        }
        previous = Some(seq);
        at += len;
    }
    Ok(at)
}

/// Checks `count` entries of untrusted `bytes` from byte `at` on (each by `check_entry`, keys
/// strictly ascending, the first above `previous_key`), recording where each starts; returns the
/// byte after the last.
pub(super) fn check_entries<'a>(
    bytes: &'a [u8],
    mut at: usize,
    count: usize,
    mut previous_key: Option<&'a [u8]>,
    offsets: &mut Vec<u32>,
) -> Result<usize, String> {
    for _ in 0..count {
        let len = check_entry(bytes.get(at..).unwrap_or(&[]))?;
        let raw = bytes.get(at..at + len).ok_or("truncated buffer entry")?;
        let key = entry_key(raw);
        if previous_key.is_some_and(|previous| previous >= key) {
            return Err("buffer keys out of order".into());
        }
        previous_key = Some(key);
        offsets.push(u32::try_from(at).map_err(|_| "buffer too large")?);
        at += len;
    }
    Ok(at)
}

/// Cuts encoded point messages (as `encoded_points` gives them; trusted) into consecutive
/// pieces of whole entries of at least `target` bytes each but the last: each piece's entry
/// count, the byte where it ends, and its first key.
pub fn cut_points(points: &[u8], target: usize) -> Vec<(usize, usize, &[u8])> {
    let mut pieces = Vec::new();
    let (mut start, mut at, mut count) = (0, 0, 0);
    while at < points.len() {
        let Ok(len) = check_entry(points.get(at..).unwrap_or_default()) else {
            debug_assert!(false, "encoded points that do not read back");
            break;
        };
        at += len;
        count += 1;
        if at - start >= target || at >= points.len() {
            pieces.push((count, at, entry_key(points.get(start..).unwrap_or_default())));
            (start, count) = (at, 0);
        }
    }
    pieces
}

/// One event at the start of `bytes`, and its encoded length.
pub(super) fn parse_event(bytes: &[u8]) -> Option<((Seq, Event), usize)> {
    let seq = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let op = *bytes.get(8)?;
    if op == OP_DELETE {
        return Some(((seq, Event::Delete), 9));
    }
    let len = read_u32(bytes, 9)? as usize;
    let value = bytes.get(13..13 + len)?.to_vec();
    let event = match op {
        OP_PUT => Event::Put(value),
        OP_UPDATE => Event::Update(value),
        _ => return None,
    };
    Some(((seq, event), 13 + len))
}

/// Merges runs (oldest first) into one. Newest (smallest) first, so each merge copies what is
/// merged so far plus one run about as large: about twice the bytes in all, where oldest first
/// copies the largest run once per run.
pub(super) fn merge_all<'a>(runs: impl DoubleEndedIterator<Item = &'a Run>, horizon: Seq) -> Run {
    runs.rev().fold(Run::default(), |newer, older| older.merge(&newer, horizon))
}
