//! Leaves: the bottom of the tree, where messages become versions of values.
//!
//! A leaf is a run of basement nodes, the unit a point read touches (and, on disk, the unit that
//! is compressed and read back alone). A basement covers `[its first key, the next basement's
//! first key)`; the first basement also covers everything below its first key that the leaf owns.
//!
//! Each entry keeps the versions of its value that some snapshot may still read: ascending
//! sequence numbers, `None` for a deletion; basements are stored flat (see `basement`). Messages
//! reaching a leaf are always newer than the versions it holds (a buffer is flushed whole), so
//! versions are only ever appended.
//!
//! Invariants (checked by `verify`): keys strictly ascending across basements; no empty basement
//! unless it is the leaf's only one; versions strictly ascending; no entry whose versions are all
//! deletions.

use std::borrow::Cow;

use crate::message::{Event, Seq, UpdateFn};
use crate::node::basement::{Basement, EntryRef, Version, encode_entry, entry_len};
use crate::node::buffer::{RangeDelete, Run};

/// The versions of `key` after `events` (in sequence order) reach its versions in the leaf
/// (`old`), without the versions no reader can see any more: those before the newest one at or
/// below `horizon`, which itself takes sequence number 0 (every reader sees it).
fn apply_events<'a>(
    key: &[u8],
    old: Option<EntryRef<'a>>,
    events: impl IntoIterator<Item = (Seq, Event)>,
    horizon: Seq,
    update: &UpdateFn,
) -> Vec<Version<'a>> {
    let mut versions: Vec<Version<'a>> = Vec::new();
    apply_events_into(key, old, events, horizon, update, &mut versions);
    versions
}

/// `apply_events` into `versions` (cleared first), so that a flush applying thousands of keys
/// reuses one vector instead of allocating one per key.
fn apply_events_into<'a>(
    key: &[u8],
    old: Option<EntryRef<'a>>,
    events: impl IntoIterator<Item = (Seq, Event)>,
    horizon: Seq,
    update: &UpdateFn,
    versions: &mut Vec<Version<'a>>,
) {
    versions.clear();
    if let Some(old) = old {
        versions.extend(old.versions().map(|(seq, v)| (seq, v.map(Cow::Borrowed))));
    }
    for (seq, event) in events {
        debug_assert!(
            versions.last().is_none_or(|(last, _)| *last < seq),
            "a message reached a leaf that is not newer than the versions it holds"
        );
        let value = match event {
            Event::Put(v) => Some(Cow::Owned(v)),
            Event::Delete => None,
            Event::Update(operand) => {
                let latest = versions.last().and_then(|(_, v)| v.as_deref());
                update(key, latest, &operand).map(Cow::Owned)
            }
        };
        versions.push((seq, value));
    }
    if let Some(base) = versions.iter().rposition(|(seq, _)| *seq <= horizon) {
        versions.drain(..base);
        // Every reader, now and later, sees the base version: its sequence number tells none of
        // them anything, and as 0 it compresses away, where eight bytes of a growing counter
        // per entry did not (a quarter of an index entry's bytes).
        if let Some((seq, _)) = versions.first_mut() {
            *seq = 0;
        }
    }
}

/// What one flush brings to a leaf.
pub struct Incoming {
    /// Point messages, one entry per key in ascending order (a buffer's merged run).
    pub points: Run,
    pub ranges: Vec<RangeDelete>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    basements: Vec<Basement>,
}

impl Default for Leaf {
    fn default() -> Self {
        Leaf { basements: vec![Basement::default()] }
    }
}

impl Leaf {
    pub fn from_basements(basements: Vec<Basement>) -> Leaf {
        if basements.is_empty() {
            return Leaf::default();
        }
        Leaf { basements }
    }

    /// The greatest key held.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.basements.iter().rev().find_map(Basement::last_key)
    }

    pub fn basements(&self) -> &[Basement] {
        &self.basements
    }

    pub fn size_bytes(&self) -> usize {
        self.basements.iter().map(Basement::size_bytes).sum()
    }

    pub fn memory_bytes(&self) -> usize {
        self.basements.iter().map(Basement::memory_bytes).sum::<usize>() + self.basements.capacity() * 48
    }

    /// The basement that owns `key`.
    pub fn basement_index(&self, key: &[u8]) -> usize {
        let later = self.basements.get(1..).unwrap_or(&[]);
        later.partition_point(|b| b.first_key().is_some_and(|first| first <= key))
    }

    /// Applies a flush's messages: range deletes and point messages, each key's in sequence
    /// order, then rebalances basements to `basement_size_bytes`.
    pub fn apply(&mut self, incoming: Incoming, horizon: Seq, update: &UpdateFn, basement_size_bytes: usize) {
        let Incoming { points, ranges } = incoming;
        let basements: Vec<Basement> =
            std::mem::take(&mut self.basements).into_iter().filter(|b| !b.is_empty()).collect();
        let uppers: Vec<Option<Vec<u8>>> = (0..basements.len())
            .map(|i| basements.get(i + 1).and_then(Basement::first_key).map(<[u8]>::to_vec))
            .collect();
        let incoming = Messages { points: &points, ranges: &ranges, horizon, update };
        let mut merged = Vec::with_capacity(basements.len() + 1);
        let mut next = 0;
        for (basement, upper) in basements.into_iter().zip(uppers) {
            let end = upper.map_or(points.len(), |upper| points.find(&upper).unwrap_or_else(|at| at));
            let mine = next..end.max(next);
            next = mine.end;
            if mine.is_empty() && !ranges.iter().any(|range| overlaps(range, &basement)) {
                merged.push(basement); // nothing for it: kept as it is, not copied
                continue;
            }
            merged.push(incoming.merge_into(&basement, mine));
        }
        if next < points.len() {
            // Only when the leaf had no entries at all.
            merged.push(incoming.merge_into(&Basement::default(), next..points.len()));
        }
        self.basements = merged;
        self.normalize(basement_size_bytes);
    }

    /// Applies one key's events without rebuilding its basement: the path of a write that goes
    /// straight to a leaf (an append, or a key whose buffers above are empty).
    pub fn apply_point(
        &mut self,
        key: Vec<u8>,
        events: impl IntoIterator<Item = (Seq, Event)>,
        horizon: Seq,
        update: &UpdateFn,
        basement_size_bytes: usize,
    ) {
        let index = self.basement_index(&key);
        let last = index + 1 == self.basements.len();
        let Some(basement) = self.basements.get_mut(index) else { return };
        match basement.find(&key) {
            Ok(at) => {
                let bytes = encode_entry(&key, &apply_events(&key, basement.entry(at), events, horizon, update));
                basement.splice(at, false, bytes);
            }
            // An append (the common case of increasing keys) is written in place; one that
            // would overfill the leaf's last basement starts the next, so that increasing keys
            // leave full basements behind rather than the halves of a split. The new basement
            // is allocated at its full size once: growing it by doubling would leave each full
            // basement holding twice its bytes, and the allocator fragmented.
            Err(at) if at == basement.len() => {
                let versions = apply_events(&key, None, events, horizon, update);
                let len = entry_len(&key, &versions);
                if last && !basement.is_empty() && basement.size_bytes() + len + 4 > basement_size_bytes {
                    let bytes = basement_size_bytes.max(len);
                    // Room for as many entries as this one's size suggests.
                    let mut next = Basement::with_capacity(bytes, bytes / (len + 4) + 1);
                    next.push_entry(&key, &versions);
                    if !next.is_empty() {
                        self.basements.push(next);
                    }
                    return;
                }
                basement.push_entry(&key, &versions);
            }
            Err(at) => {
                let bytes = encode_entry(&key, &apply_events(&key, None, events, horizon, update));
                if !bytes.is_empty() {
                    basement.splice(at, true, bytes);
                }
            }
        }
        if basement.size_bytes() > basement_size_bytes || (basement.is_empty() && self.basements.len() > 1) {
            self.normalize(basement_size_bytes);
        }
    }

    /// Drops empty basements, splits those over `basement_size_bytes`, and joins small
    /// neighbours, so that every basement is a sensible read unit.
    fn normalize(&mut self, basement_size_bytes: usize) {
        let mut out: Vec<Basement> = Vec::with_capacity(self.basements.len());
        for basement in std::mem::take(&mut self.basements) {
            if basement.is_empty() {
                continue;
            }
            if basement.size_bytes() > basement_size_bytes && basement.len() > 1 {
                out.extend(basement.chunk(basement_size_bytes / 2, basement_size_bytes));
                continue;
            }
            match out.last_mut() {
                Some(last)
                    if last.size_bytes() + basement.size_bytes() <= basement_size_bytes
                        && (last.size_bytes() < basement_size_bytes / 4
                            || basement.size_bytes() < basement_size_bytes / 4) =>
                {
                    last.append(basement);
                }
                _ => out.push(basement),
            }
        }
        if out.is_empty() {
            out.push(Basement::default());
        }
        self.basements = out;
        debug_assert!(self.well_formed(), "a normalized leaf with empty basements or keys out of order");
    }

    /// Whether the basements' keys ascend from one to the next and no basement is empty but a
    /// lone one (each basement's own order is its writers' to keep). Checked after reshaping.
    fn well_formed(&self) -> bool {
        let lone_or_full = self.basements.len() == 1 || self.basements.iter().all(|b| !b.is_empty());
        lone_or_full
            && self.basements.windows(2).all(|pair| match (pair[0].last_key(), pair[1].first_key()) {
                (Some(last), Some(first)) => last < first,
                _ => true,
            })
    }

    /// Splits the leaf into pieces of about `target_bytes` each, at basement boundaries. Returns
    /// the pieces after the first, each with its first key (the pivot that will separate it).
    /// A leaf of two or more basements over twice the target always yields at least one piece,
    /// and no piece of two or more basements is left over twice the target: the caller splits
    /// because the leaf is too big, and a split that left it too big would be asked for again
    /// forever (`fix_root` grew and shrank the root in a loop).
    pub fn split(&mut self, target_bytes: usize) -> Vec<(Vec<u8>, Leaf)> {
        let mut basements: Vec<Basement> =
            std::mem::take(&mut self.basements).into_iter().filter(|b| !b.is_empty()).collect();
        let sizes: Vec<usize> = basements.iter().map(Basement::size_bytes).collect();
        let mut pieces = Vec::new();
        for cut in split_cuts(&sizes, target_bytes).into_iter().rev() {
            let tail = basements.split_off(cut);
            if let Some(pivot) = tail.first().and_then(Basement::first_key) {
                pieces.push((pivot.to_vec(), Leaf { basements: tail }));
            }
        }
        pieces.reverse();
        if basements.is_empty() {
            basements.push(Basement::default());
        }
        self.basements = basements;
        debug_assert!(
            pieces.iter().all(|(pivot, piece)| piece.well_formed() && piece.basements[0].first_key() == Some(pivot))
                && self.last_key().zip(pieces.first()).is_none_or(|(last, (pivot, _))| last < pivot.as_slice())
                && pieces.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "a leaf split into pieces out of key order"
        );
        pieces
    }

    /// Appends the entries of the leaf to the right (whose keys are all greater).
    pub fn merge(&mut self, right: Leaf, basement_size_bytes: usize) {
        debug_assert!(
            self.last_key().zip(right.basements.iter().find_map(Basement::first_key)).is_none_or(|(l, r)| l < r),
            "a leaf merged with one whose keys are not all greater"
        );
        self.basements.extend(right.basements);
        self.normalize(basement_size_bytes);
    }
}

/// Where to cut a run of basements of these sizes into pieces of about `target_bytes`: the
/// indices (ascending, each in `1..len`) at which a new piece starts. A piece is closed once it
/// reaches the target, or before a basement that would take it past twice the target, so every
/// piece of two or more basements stays within twice the target; and a run of two or more
/// basements over twice the target is always cut at least once.
fn split_cuts(sizes: &[usize], target_bytes: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut piece_size = 0;
    for (index, &size) in sizes.iter().enumerate() {
        if index > 0 && (piece_size >= target_bytes || piece_size + size > 2 * target_bytes) {
            cuts.push(index);
            piece_size = 0;
        }
        piece_size += size;
    }
    cuts
}

/// A leaf flush's incoming messages: a run of point messages and the range deletes, applied to
/// one basement at a time.
/// Whether a range delete covers any key of a (non-empty) basement.
fn overlaps(range: &RangeDelete, basement: &Basement) -> bool {
    let (Some(first), Some(last)) = (basement.first_key(), basement.last_key()) else { return false };
    range.start.as_slice() <= last && range.end.as_deref().is_none_or(|end| end > first)
}

struct Messages<'a> {
    points: &'a Run,
    ranges: &'a [RangeDelete],
    horizon: Seq,
    update: &'a UpdateFn,
}

impl Messages<'_> {
    /// Merges a basement's entries with the point messages `range` (those that fall into it),
    /// applying the range deletes to the entries no point message touches. Untouched entries
    /// are copied as bytes.
    fn merge_into(&self, basement: &Basement, range: std::ops::Range<usize>) -> Basement {
        let incoming_bytes = self.points.span_bytes(range.clone());
        let mut out = Basement::with_capacity(basement.encoded().len() + incoming_bytes, basement.len() + range.len());
        // One events and one versions vector for the whole basement, reused key after key.
        let (mut events, mut versions) = (Vec::new(), Vec::new());
        let mut next = range.start;
        for entry in basement.entries() {
            while next < range.end && self.points.key(next) < entry.key() {
                self.push_new(&mut out, next, &mut events, &mut versions);
                next += 1;
            }
            if next < range.end && self.points.key(next) == entry.key() {
                self.events_into(next, &mut events);
                next += 1;
            } else {
                self.add_range_deletes(entry.key(), &mut events);
            }
            if events.is_empty() {
                out.push_raw(entry);
            } else {
                apply_events_into(entry.key(), Some(entry), events.drain(..), self.horizon, self.update, &mut versions);
                out.push_entry(entry.key(), &versions);
            }
        }
        for index in next..range.end {
            self.push_new(&mut out, index, &mut events, &mut versions);
        }
        out.shrink_slack();
        out
    }

    /// Writes the entry of a key the basement does not hold yet.
    fn push_new<'a>(
        &self,
        out: &mut Basement,
        index: usize,
        events: &mut Vec<(Seq, Event)>,
        versions: &mut Vec<Version<'a>>,
    ) {
        let key = self.points.key(index);
        self.events_into(index, events);
        apply_events_into(key, None, events.drain(..), self.horizon, self.update, versions);
        out.push_entry(key, versions);
    }

    /// Point message `index`'s events with the range deletes covering its key, in sequence
    /// order, appended to `events` (empty on entry).
    fn events_into(&self, index: usize, events: &mut Vec<(Seq, Event)>) {
        self.points.events_into(index, events);
        self.add_range_deletes(self.points.key(index), events);
    }

    /// Adds the range deletes covering `key` to its events, keeping sequence order.
    fn add_range_deletes(&self, key: &[u8], events: &mut Vec<(Seq, Event)>) {
        let before = events.len();
        events.extend(self.ranges.iter().filter(|r| r.contains(key)).map(|r| (r.seq, Event::Delete)));
        if events.len() > before {
            events.sort_by_key(|(seq, _)| *seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_cuts;

    /// A range delete rewrites only the basements holding keys it covers: the consensus log's
    /// appends once deleted "from here on" and so copied the whole last leaf each time.
    #[test]
    fn a_range_delete_leaves_the_basements_it_does_not_cover_as_they_are() {
        use crate::message::Event;
        use crate::node::buffer::{RangeDelete, Run};
        let update: crate::message::UpdateFn = std::sync::Arc::new(|_, _, _| None);
        let basement_size = 4 << 10;
        let mut leaf = super::Leaf::default();
        for id in 0u64..200 {
            leaf.apply_point(
                id.to_be_bytes().to_vec(),
                vec![(id + 1, Event::Put(vec![1; 100]))],
                0,
                &update,
                basement_size,
            );
        }
        let before: Vec<*const u8> = leaf.basements().iter().map(|b| b.encoded().as_ptr()).collect();
        assert!(before.len() > 4, "{} basements", before.len());
        let range = RangeDelete { start: 150u64.to_be_bytes().to_vec(), end: None, seq: 1000 };
        leaf.apply(super::Incoming { points: Run::default(), ranges: vec![range] }, 0, &update, basement_size);
        let keys: Vec<u64> = leaf
            .basements()
            .iter()
            .flat_map(|b| {
                b.entries()
                    .filter(|e| e.latest().is_some())
                    .map(|e| u64::from_be_bytes(e.key().try_into().unwrap()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(keys, (0..150).collect::<Vec<_>>());
        let kept = leaf.basements().iter().filter(|b| before.contains(&b.encoded().as_ptr())).count();
        assert!(kept >= before.len() - 2, "{kept} of {} basements kept", before.len());
    }

    #[test]
    fn greedy_cuts_at_the_target() {
        assert_eq!(split_cuts(&[100, 100, 100, 100], 200), vec![2]);
        assert_eq!(split_cuts(&[300, 300, 300], 200), vec![1, 2]);
    }

    #[test]
    fn two_basements_always_cut_even_when_the_first_is_small() {
        // The shape that looped forever: a small basement then one huge value, target above the
        // first basement's size.
        assert_eq!(split_cuts(&[400, 1100], 512), vec![1]);
        assert_eq!(split_cuts(&[10, 10, 2000], 512), vec![2]);
        assert_eq!(split_cuts(&[2000], 512), Vec::<usize>::new());
    }

    #[test]
    fn a_huge_basement_gets_a_piece_of_its_own() {
        assert_eq!(split_cuts(&[100, 1100, 100], 512), vec![1, 2]);
    }
}
