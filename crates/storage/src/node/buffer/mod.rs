//! A message buffer: the pending writes an internal node holds for one child.
//!
//! Messages arrive one key at a time (a commit at the root, a flush from above). The newest wait
//! in `head`: appended to one allocation as they come, with their offsets kept in key order. Once
//! it holds a few hundred it is frozen into a *run*: its messages encoded back to back in key
//! order (the entry bytes of the buffer's on-disk section) with their offsets beside them. Runs merge as a binary counter (a run at least as large as the one
//! after it absorbs it), so there are about log2(messages / head size) runs and each message is
//! copied that many times. Why: as map entries, a 30-byte index key cost about 160 bytes of heap
//! (the map slot, the key's and the events' allocations); in a run it costs about 55. A node's
//! budget then holds three times the messages, and each flush carries three times as many to the
//! child, which is the Bε-tree's write amortization.
//!
//! A key's messages may be spread over the runs and `head`: a later run holds newer messages than
//! an earlier one, and `head` the newest. Readers gather them in that order.
//!
//! A flush into a leaf may run outside the tree's lock (`tree::detached`): it *seals* the
//! buffer's runs and range deletes as they are, applies copies of them to a copy of the leaf,
//! and under the lock again drops exactly the sealed ones. Until then readers see them here as
//! ever; compaction never merges a sealed run with a newer one, so the sealed messages stay
//! apart from the messages that arrive meanwhile. Anything that reshapes the buffer (a split, a
//! merge with a sibling, a flush that takes it, decoding) unseals it, and the detached flush,
//! finding the seal gone, drops its work.
//!
//! Invariants (checked by `verify`):
//! - every point message's key, and every range delete, lies within the child's key range;
//! - a key's messages, gathered in run order then `head`, are in strictly ascending sequence order;
//! - each run's keys are strictly ascending;
//! - `size_bytes` equals `recompute_size()`.
//!
//! `head.rs` holds `Head`, `run.rs` holds `Run` and the entry layout both share.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::message::{Event, Seq};
use crate::node::flat::below;

mod head;
mod run;

use head::Head;
pub use run::{Run, cut_points};
use run::{check_entries, entry_key, merge_all};

/// Bytes charged per range delete beyond its bounds (the `Vec`s and the seq); and what sets how
/// many messages `head` takes before it freezes: `head_bytes / MESSAGE_OVERHEAD_BYTES` (512 at
/// the default 64 KiB basement).
const MESSAGE_OVERHEAD_BYTES: usize = 128;

/// `head` also freezes once its messages' bytes reach this many `head_bytes`, or
/// `HEAD_DATA_MAX_BYTES`, so that a head of large values stays small (and its u32 offsets, with
/// one value of at most 64 MiB on top, in range).
const HEAD_DATA_BASEMENTS: usize = 16;
const HEAD_DATA_MAX_BYTES: usize = 64 << 20;

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

/// The messages buffered for one child.
#[derive(Clone, Debug, Default)]
pub struct Buffer {
    /// The newest messages.
    head: Head,
    /// Older messages, oldest run first.
    runs: Vec<Run>,
    ranges: Vec<RangeDelete>,
    size_bytes: usize,
    /// The oldest runs and range deletes, being applied to the child by a detached flush.
    sealed: Sealed,
}

/// How many of a buffer's runs and range deletes (the oldest) are sealed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sealed {
    pub runs: usize,
    pub ranges: usize,
}

/// Two buffers are equal when they hold the same messages, however they are laid out.
impl PartialEq for Buffer {
    fn eq(&self, other: &Buffer) -> bool {
        self.ranges == other.ranges && self.points().eq(other.points())
    }
}

impl Eq for Buffer {}

impl Buffer {
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.runs.is_empty() && self.ranges.is_empty()
    }

    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Adds a point message, newer than every message of its key already here.
    #[cfg(test)]
    pub fn push(&mut self, key: Vec<u8>, seq: Seq, event: Event, horizon: Seq) {
        self.push_all(&key, [(seq, event)], horizon, 64 << 10);
    }

    /// Adds a key's events, in ascending order and all newer than those held. `head` is frozen
    /// into a run (the key's history there pruned against `horizon`) once it holds
    /// `head_bytes / MESSAGE_OVERHEAD_BYTES` messages or `HEAD_DATA_BASEMENTS * head_bytes`
    /// bytes (`head_bytes` is the basement size).
    pub fn push_all(
        &mut self,
        key: &[u8],
        incoming: impl IntoIterator<Item = (Seq, Event)>,
        horizon: Seq,
        head_bytes: usize,
    ) {
        let before = self.head.size_bytes();
        for message in incoming {
            self.head.push(key, &message);
        }
        self.size_bytes += self.head.size_bytes() - before;
        let full = self.head.len() >= (head_bytes / MESSAGE_OVERHEAD_BYTES).max(1)
            || self.head.data.len() >= (HEAD_DATA_BASEMENTS * head_bytes).min(HEAD_DATA_MAX_BYTES);
        if full {
            self.freeze(horizon);
        }
        debug_assert_eq!(self.size_bytes, self.recompute_size(), "a buffer's size drifted from its messages");
    }

    /// Turns `head` into the newest run, then merges runs as a binary counter.
    fn freeze(&mut self, horizon: Seq) {
        self.freeze_head(horizon);
        self.compact(horizon);
    }

    /// Moves `head`, if it holds anything, into a run after the others, each key's messages
    /// there pruned against `horizon` (0 prunes nothing). The head keeps its allocations for
    /// the messages that come next.
    fn freeze_head(&mut self, horizon: Seq) {
        if !self.head.is_empty() {
            self.runs.push(self.head.to_run(horizon));
            self.head.clear();
        }
    }

    /// Merges the newest runs while one is at least half the size of the run after it, so that
    /// run sizes fall geometrically (a few dozen runs at most). Sealed runs are left as they are.
    fn compact(&mut self, horizon: Seq) {
        while let [.., older, newer] = self.runs.as_slice() {
            if older.len() > 2 * newer.len() || self.runs.len() - 2 < self.sealed.runs {
                break;
            }
            let merged = older.merge(newer, horizon);
            self.runs.truncate(self.runs.len() - 2);
            self.runs.push(merged);
        }
        self.size_bytes = self.recompute_size();
        debug_assert!(self.runs_sorted(), "a run's keys out of order after compaction");
        debug_assert!(self.sealed.runs <= self.runs.len(), "compaction merged into the sealed runs");
    }

    pub fn push_range(&mut self, range: RangeDelete) {
        self.size_bytes += range.size_bytes();
        self.ranges.push(range);
    }

    /// Appends this key's events (point messages and covering range deletes) to `out`.
    pub fn collect_events(&self, key: &[u8], out: &mut Vec<(Seq, Event)>) {
        for run in &self.runs {
            if let Ok(index) = run.find(key) {
                run.events_into(index, out);
            }
        }
        self.head.events_of(key, out);
        for range in self.ranges.iter().filter(|r| r.contains(key)) {
            out.push((range.seq, Event::Delete));
        }
    }

    /// The point messages with keys in the given bounds, in key order, each key's in
    /// sequence order.
    pub fn points_in(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> impl Iterator<Item = (Vec<u8>, Vec<(Seq, Event)>)> {
        let mut gathered: BTreeMap<Vec<u8>, Vec<(Seq, Event)>> = BTreeMap::new();
        if bounds_empty(lo, hi) {
            return gathered.into_iter();
        }
        for run in &self.runs {
            for index in run.lower_bound(lo)..run.len() {
                let key = run.key(index);
                if !below(key, hi) {
                    break;
                }
                run.events_into(index, gathered.entry(key.to_vec()).or_default());
            }
        }
        for index in self.head.lower_bound(lo)..self.head.len() {
            let key = self.head.key(index);
            if !below(key, hi) {
                break;
            }
            self.head.events_into(index, gathered.entry(key.to_vec()).or_default());
        }
        gathered.into_iter()
    }

    pub fn points(&self) -> impl Iterator<Item = (Vec<u8>, Vec<(Seq, Event)>)> {
        self.points_in(Bound::Unbounded, Bound::Unbounded)
    }

    pub fn ranges(&self) -> &[RangeDelete] {
        &self.ranges
    }

    /// The smallest and the greatest key of the point messages, if any (each run and the head
    /// are sorted, so only their ends are read).
    pub fn key_span(&self) -> Option<(&[u8], &[u8])> {
        let runs = self.runs.iter().filter(|run| run.len() > 0).map(|run| (run.key(0), run.key(run.len() - 1)));
        let head = (!self.head.is_empty()).then(|| (self.head.key(0), self.head.key(self.head.len() - 1)));
        runs.chain(head).reduce(|(lo, hi), (first, last)| (lo.min(first), hi.max(last)))
    }

    /// Empties the buffer into one run (its runs and `head` merged, pruned against `horizon`)
    /// and its range deletes: what a flush applies to a leaf, decoding one key at a time, so
    /// that a flush holds the buffer's bytes once rather than a map of decoded messages (about
    /// three times as large).
    pub fn take_merged(&mut self, horizon: Seq) -> (Run, Vec<RangeDelete>) {
        let (mut runs, ranges) = self.take_runs();
        let merged = match runs.len() {
            0 | 1 => runs.pop().unwrap_or_default(),
            _ => merge_all(runs.iter(), horizon),
        };
        (merged, ranges)
    }

    /// Empties the buffer into its runs, oldest first (`head` frozen as the newest, nothing
    /// pruned), and its range deletes: a flush into an internal child moves these on without
    /// decoding a message.
    pub fn take_runs(&mut self) -> (Vec<Run>, Vec<RangeDelete>) {
        self.freeze_head(0);
        let taken = (std::mem::take(&mut self.runs), std::mem::take(&mut self.ranges));
        self.size_bytes = 0;
        self.sealed = Sealed::default();
        debug_assert!(self.is_empty() && self.recompute_size() == 0, "a taken buffer kept messages");
        taken
    }

    /// Seals every message here (`head` frozen into a run first) for a detached flush, and
    /// returns copies of them, runs oldest first, and the seal to hand back to `drop_sealed`.
    pub fn seal(&mut self) -> (Vec<Run>, Vec<RangeDelete>, Sealed) {
        self.freeze_head(0);
        // A key's several messages in `head` became one entry: fewer bytes.
        self.size_bytes = self.recompute_size();
        self.sealed = Sealed { runs: self.runs.len(), ranges: self.ranges.len() };
        debug_assert!(self.head.is_empty(), "a seal left messages in head, outside the sealed runs");
        (self.runs.clone(), self.ranges.clone(), self.sealed)
    }

    /// What is sealed now (nothing, once something reshaped the buffer).
    pub fn sealed(&self) -> Sealed {
        self.sealed
    }

    /// Drops the sealed runs and range deletes: their messages are in the child now.
    pub fn drop_sealed(&mut self) {
        // A seal over runs that are not there would drop messages that never reached the child.
        assert!(self.seal_fits(), "a seal covering runs or range deletes the buffer does not hold");
        let Sealed { runs, ranges } = self.sealed;
        self.runs.drain(..runs.min(self.runs.len()));
        self.ranges.drain(..ranges.min(self.ranges.len()));
        self.sealed = Sealed::default();
        self.size_bytes = self.recompute_size();
    }

    /// Keeps the messages but forgets the seal (a detached flush gave up).
    pub fn unseal(&mut self) {
        self.sealed = Sealed::default();
    }

    /// Adds the part within `[lo, hi)` of runs (oldest first) whose messages are all newer than
    /// every message here.
    pub fn push_runs(&mut self, runs: &[Run], lo: Option<&[u8]>, hi: Option<&[u8]>, horizon: Seq) {
        let pieces: Vec<Run> = runs.iter().map(|run| run.slice(lo, hi)).filter(|piece| piece.len() > 0).collect();
        if pieces.is_empty() {
            return;
        }
        debug_assert!(
            pieces.iter().all(|piece| (0..piece.len()).all(|i| {
                let key = piece.key(i);
                lo.is_none_or(|lo| key >= lo) && hi.is_none_or(|hi| key < hi)
            })),
            "runs pushed into a child hold keys outside its range"
        );
        // `head` is older than what arrives: it becomes a run before them.
        self.freeze_head(horizon);
        self.runs.extend(pieces);
        self.compact(horizon);
    }

    /// Moves every message into `other` (used when two siblings merge: their ranges are
    /// disjoint, so no key gains messages from both, and run order does not matter).
    pub fn append_to(mut self, other: &mut Buffer) {
        other.sealed = Sealed::default();
        self.freeze_head(0);
        other.freeze_head(0);
        other.runs.extend(self.runs);
        other.ranges.extend(self.ranges);
        other.size_bytes = other.recompute_size();
    }

    /// Splits off the messages for keys `>= pivot` into a new buffer (used when a child splits).
    pub fn split_off(&mut self, pivot: &[u8]) -> Buffer {
        self.sealed = Sealed::default();
        self.freeze_head(0);
        let entries_before: usize = self.runs.iter().map(Run::len).sum();
        let mut right = Buffer::default();
        for run in &mut self.runs {
            let upper = run.split_off(pivot);
            if upper.len() > 0 {
                right.runs.push(upper);
            }
        }
        self.runs.retain(|run| run.len() > 0);
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
        debug_assert!(
            self.points().all(|(key, _)| key.as_slice() < pivot)
                && right.points().all(|(key, _)| key.as_slice() >= pivot),
            "a split buffer's messages on the wrong side of the pivot"
        );
        debug_assert_eq!(
            self.runs.iter().chain(&right.runs).map(Run::len).sum::<usize>(),
            entries_before,
            "a buffer split lost or duplicated messages"
        );
        right
    }

    pub fn recompute_size(&self) -> usize {
        let head = self.head.size_bytes();
        let runs: usize = self.runs.iter().map(Run::size_bytes).sum();
        head + runs + self.ranges.iter().map(RangeDelete::size_bytes).sum::<usize>()
    }

    /// A key that has messages here, or the start of a range delete (`None` if empty).
    pub fn any_key(&self) -> Option<Vec<u8>> {
        let from_runs = self.runs.iter().find(|run| run.len() > 0).map(|run| run.key(0));
        let key = (!self.head.is_empty()).then(|| self.head.key(0)).or(from_runs);
        key.or_else(|| self.ranges.first().map(|range| range.start.as_slice())).map(<[u8]>::to_vec)
    }

    /// Whether the seal covers runs and range deletes that exist (for `verify`).
    pub fn seal_fits(&self) -> bool {
        self.sealed.runs <= self.runs.len() && self.sealed.ranges <= self.ranges.len()
    }

    /// Whether each run's keys are strictly ascending and `head`'s in order (for `verify`).
    pub fn runs_sorted(&self) -> bool {
        let head = (1..self.head.len()).all(|i| self.head.key(i - 1) <= self.head.key(i));
        head && self.runs.iter().all(|run| (1..run.len()).all(|i| run.key(i - 1) < run.key(i)))
    }

    /// The point messages as the buffer's on-disk section holds them: their count, then their
    /// entries back to back (the bytes of one run; several runs and `head` are merged first).
    pub fn encoded_points(&self) -> (usize, std::borrow::Cow<'_, [u8]>) {
        if self.head.is_empty() {
            match self.runs.as_slice() {
                [] => return (0, std::borrow::Cow::Borrowed(&[])),
                [run] => return (run.len(), std::borrow::Cow::Borrowed(&run.data)),
                _ => {}
            }
        }
        // Horizon 0 prunes nothing: encoding keeps every message.
        let head = self.head.to_run(0);
        let merged = merge_all(self.runs.iter().chain([&head]), 0);
        (merged.len(), std::borrow::Cow::Owned(merged.data))
    }

    /// Reads `count` point messages in the layout of `encoded_points` from the start of
    /// untrusted bytes, checking every length, op, and the order of keys and of each key's
    /// sequence numbers. Returns a buffer of them (no ranges) and the bytes after them. The
    /// buffer's run keeps `bytes` (a section just decompressed) as its data: no new allocation
    /// grown entry by entry and no second copy of the messages, which cost a reader's path.
    pub fn decode_points(count: usize, mut bytes: Vec<u8>) -> Result<(Buffer, Vec<u8>), String> {
        let mut offsets = Vec::with_capacity(count);
        let at = check_entries(&bytes, 0, count, None, &mut offsets)?;
        let rest = bytes.split_off(at);
        Ok((Buffer::of_run(Run { data: bytes, offsets }), rest))
    }

    /// Reads point messages cut into consecutive pieces (`pieces::PiecedBuffer`): `bytes` holds
    /// them back to back, and each `(count, end, first_key)` says how many entries the next
    /// piece holds, the byte where it ends, and the key its first entry must have. Checked as
    /// `decode_points` checks, and the keys ascend across pieces: one run, as if never cut.
    pub fn decode_pieces(bytes: Vec<u8>, pieces: &[(usize, usize, &[u8])]) -> Result<Buffer, String> {
        let mut offsets = Vec::with_capacity(pieces.iter().map(|(count, ..)| *count).sum());
        let mut at = 0;
        for &(count, end, first_key) in pieces {
            if count == 0 || entry_key(bytes.get(at..).unwrap_or_default()) != first_key {
                return Err("a buffer piece does not start at its key".into());
            }
            let previous = offsets.last().map(|&last| entry_key(bytes.get(last as usize..).unwrap_or_default()));
            at = check_entries(&bytes, at, count, previous, &mut offsets)?;
            if at != end {
                return Err("a buffer piece's entries do not end where the piece does".into());
            }
        }
        if at != bytes.len() {
            return Err("bytes after a buffer's pieces".into());
        }
        Ok(Buffer::of_run(Run { data: bytes, offsets }))
    }

    fn of_run(run: Run) -> Buffer {
        let runs = if run.len() == 0 { Vec::new() } else { vec![run] };
        let mut buffer = Buffer { runs, ..Buffer::default() };
        buffer.size_bytes = buffer.recompute_size();
        buffer
    }

    /// Adds decoded range deletes (node decoding).
    pub fn with_ranges(mut self, ranges: Vec<RangeDelete>) -> Buffer {
        self.ranges = ranges;
        self.size_bytes = self.recompute_size();
        self
    }
}

/// Whether no key lies within the bounds (`BTreeMap::range` panics on such bounds).
fn bounds_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h)) | (Bound::Excluded(l), Bound::Included(h)) => {
            l >= h
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    //! Goal: however messages are spread over `head` and the runs, a buffer answers as a plain
    //! map of each key's messages would. Method: random pushes (horizon 0, so nothing is
    //! pruned) against a `BTreeMap` model, with a head of two keys so runs freeze and merge.
    use super::*;
    use proptest::prelude::*;

    type Model = BTreeMap<Vec<u8>, Vec<(Seq, Event)>>;

    fn build(ops: &[(u8, bool)]) -> (Buffer, Model) {
        let (mut buffer, mut model) = (Buffer::default(), Model::new());
        for (seq, (k, delete)) in ops.iter().enumerate() {
            let key = vec![*k];
            let event = if *delete { Event::Delete } else { Event::Put(vec![*k; usize::from(*k % 5)]) };
            buffer.push_all(&key, vec![(seq as Seq + 1, event.clone())], 0, 2 * MESSAGE_OVERHEAD_BYTES);
            model.entry(key).or_default().push((seq as Seq + 1, event));
        }
        (buffer, model)
    }

    proptest! {
        #[test]
        fn buffer_matches_a_map(ops in proptest::collection::vec((0u8..40, any::<bool>()), 0..300), pivot in 0u8..40, lo in 0u8..40) {
            let (mut buffer, model) = build(&ops);
            prop_assert!(buffer.runs_sorted());
            prop_assert_eq!(buffer.size_bytes(), buffer.recompute_size());
            prop_assert_eq!(buffer.points().collect::<Model>(), model.clone());
            for key in 0u8..40 {
                let mut got = Vec::new();
                buffer.collect_events(&[key], &mut got);
                prop_assert_eq!(Some(&got).filter(|g| !g.is_empty()), model.get(&vec![key]));
            }
            let window: Model = buffer.points_in(Bound::Excluded(&[lo][..]), Bound::Included(&[pivot][..])).collect();
            let expected: Model = model.iter().filter(|(k, _)| k[0] > lo && k[0] <= pivot).map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(window, expected);
            let (runs, _) = buffer.clone().take_runs();
            let mut moved = build(&[(200, false)]).0;
            moved.push_runs(&runs, Some(&[lo][..]), Some(&[pivot][..]), 0);
            let mut expected: Model = model.iter().filter(|(k, _)| k[0] >= lo && k[0] < pivot).map(|(k, v)| (k.clone(), v.clone())).collect();
            expected.insert(vec![200], vec![(1, Event::Put(vec![200; 0]))]);
            prop_assert!(moved.runs_sorted());
            prop_assert_eq!(moved.size_bytes(), moved.recompute_size());
            prop_assert_eq!(moved.points().collect::<Model>(), expected);
            let right = buffer.split_off(&[pivot]);
            let (left_model, right_model): (Model, Model) = model.into_iter().partition(|(k, _)| k[0] < pivot);
            prop_assert_eq!(buffer.points().collect::<Model>(), left_model);
            prop_assert_eq!(right.points().collect::<Model>(), right_model.clone());
            let mut joined = Buffer::default();
            right.append_to(&mut joined);
            prop_assert_eq!(joined.size_bytes(), joined.recompute_size());
            let (merged, _) = joined.take_merged(0);
            let merged_model: Model = (0..merged.len())
                .map(|i| {
                    let mut events = Vec::new();
                    merged.events_into(i, &mut events);
                    (merged.key(i).to_vec(), events)
                })
                .collect();
            prop_assert_eq!(merged_model, right_model);
            prop_assert!(joined.is_empty());
        }
    }

    #[test]
    fn a_keys_messages_in_head_freeze_into_one_pruned_entry() {
        let mut buffer = Buffer::default();
        let put = |seq: Seq| (seq, Event::Put(vec![seq as u8]));
        for seq in 1..=3 {
            buffer.push_all(b"k", [put(seq)], 2, 4 * MESSAGE_OVERHEAD_BYTES);
        }
        assert_eq!(buffer.points().collect::<Vec<_>>(), vec![(b"k".to_vec(), vec![put(1), put(2), put(3)])]);
        // The fourth message fills the head: it freezes, and horizon 2 drops message 1.
        buffer.push_all(b"j", [(4, Event::Delete)], 2, 4 * MESSAGE_OVERHEAD_BYTES);
        let expected = vec![(b"j".to_vec(), vec![(4, Event::Delete)]), (b"k".to_vec(), vec![put(2), put(3)])];
        assert_eq!(buffer.points().collect::<Vec<_>>(), expected);
        assert!(buffer.runs_sorted());
        assert_eq!(buffer.size_bytes(), buffer.recompute_size());
    }

    #[test]
    fn sealing_keeps_the_size_accounting() {
        let mut buffer = Buffer::default();
        buffer.push(b"k".to_vec(), 1, Event::Put(vec![1]), 0);
        buffer.push(b"k".to_vec(), 2, Event::Put(vec![2]), 0);
        let _sealed = buffer.seal();
        assert_eq!(buffer.size_bytes(), buffer.recompute_size());
    }

    #[test]
    fn merging_runs_prunes_what_no_reader_needs() {
        let mut buffer = Buffer::default();
        for seq in 1..=20 {
            buffer.push_all(b"k", vec![(seq, Event::Put(vec![seq as u8]))], 100, MESSAGE_OVERHEAD_BYTES);
        }
        let events: Vec<_> = buffer.points().flat_map(|(_, e)| e).collect();
        assert_eq!(events, vec![(20, Event::Put(vec![20]))]);
    }
}
