//! Leaves: the bottom of the tree, where messages become versions of values.
//!
//! A leaf is a run of basement nodes, the unit a point read touches (and, on disk, the unit that
//! is compressed and read back alone). A basement covers `[its first key, the next basement's
//! first key)`; the first basement also covers everything below its first key that the leaf owns.
//!
//! Each entry keeps the versions of its value that some snapshot may still read: ascending
//! sequence numbers, `None` for a deletion. Messages reaching a leaf are always newer than the
//! versions it holds (a buffer is flushed whole), so versions are only ever appended.
//!
//! Invariants (checked by `verify`): keys strictly ascending across basements; no empty basement
//! unless it is the leaf's only one; versions strictly ascending; no entry whose versions are all
//! deletions; `size_bytes` exact.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::message::{Event, Seq, UpdateFn};
use crate::node::buffer::RangeDelete;

// Charges near the real heap cost of an entry (key and versions `Vec`s and their allocations)
// and of a version, so that the cache budget holds in resident memory.
const ENTRY_OVERHEAD_BYTES: usize = 64;
const VERSION_OVERHEAD_BYTES: usize = 40;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub versions: Vec<(Seq, Option<Vec<u8>>)>,
}

impl Entry {
    pub fn size_bytes(&self) -> usize {
        let versions: usize = self
            .versions
            .iter()
            .map(|(_, v)| v.as_ref().map_or(0, Vec::len) + VERSION_OVERHEAD_BYTES)
            .sum();
        self.key.len() + ENTRY_OVERHEAD_BYTES + versions
    }

    fn latest(&self) -> Option<&[u8]> {
        self.versions.last().and_then(|(_, v)| v.as_deref())
    }

    /// Appends the effect of each event, then drops versions no reader can see. Returns whether
    /// the entry still matters (false: every remaining version is a deletion).
    fn apply(&mut self, events: Vec<(Seq, Event)>, horizon: Seq, update: &UpdateFn) -> bool {
        // Exact reservations: most entries hold one version, and `Vec`'s default growth to four
        // would triple the memory of a small entry.
        self.versions.reserve_exact(events.len());
        for (seq, event) in events {
            let value = match event {
                Event::Put(v) => Some(v),
                Event::Delete => None,
                Event::Update(operand) => update(&self.key, self.latest(), &operand),
            };
            self.versions.push((seq, value));
        }
        if let Some(base) = self.versions.iter().rposition(|(seq, _)| *seq <= horizon) {
            self.versions.drain(..base);
        }
        if self.versions.capacity() > self.versions.len() {
            self.versions.shrink_to_fit();
        }
        self.versions.iter().any(|(_, v)| v.is_some())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Basement {
    pub entries: Vec<Entry>,
    pub size_bytes: usize,
}

impl Basement {
    pub fn from_entries(entries: Vec<Entry>) -> Basement {
        let size_bytes = entries.iter().map(Entry::size_bytes).sum();
        Basement { entries, size_bytes }
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.entries.first().map(|e| e.key.as_slice())
    }

    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.entries.binary_search_by(|e| e.key.as_slice().cmp(key))
    }
}

/// What one flush brings to a leaf.
pub struct Incoming {
    pub points: BTreeMap<Vec<u8>, Vec<(Seq, Event)>>,
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

    pub fn basements(&self) -> &[Basement] {
        &self.basements
    }

    pub fn size_bytes(&self) -> usize {
        self.basements.iter().map(|b| b.size_bytes).sum()
    }

    /// The basement that owns `key`.
    pub fn basement_index(&self, key: &[u8]) -> usize {
        let later = self.basements.get(1..).unwrap_or(&[]);
        later.partition_point(|b| b.first_key().is_some_and(|first| first <= key))
    }

    /// The first key owned by the next basement after `index`, if there is one.
    pub fn basement_upper(&self, index: usize) -> Option<&[u8]> {
        self.basements.get(index + 1).and_then(Basement::first_key)
    }

    /// The first key of basement `index` when it is not the leaf's first basement.
    pub fn basement_lower(&self, index: usize) -> Option<&[u8]> {
        if index == 0 { None } else { self.basements.get(index).and_then(Basement::first_key) }
    }

    /// Appends `key`'s versions to `out` as events.
    pub fn collect_events(&self, key: &[u8], out: &mut Vec<(Seq, Event)>) {
        let Some(basement) = self.basements.get(self.basement_index(key)) else { return };
        if let Ok(i) = basement.find(key) {
            if let Some(entry) = basement.entries.get(i) {
                out.extend(entry.versions.iter().map(|(seq, v)| (*seq, version_event(v))));
            }
        }
    }

    /// The entries with keys within the bounds, in key order, starting at the basement that
    /// owns the lower bound.
    pub fn entries_in<'a>(
        &'a self,
        lo: Bound<&'a [u8]>,
        hi: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        let first = match lo {
            Bound::Included(k) | Bound::Excluded(k) => self.basement_index(k),
            Bound::Unbounded => 0,
        };
        self.basements
            .get(first..)
            .unwrap_or(&[])
            .iter()
            .flat_map(move |basement| {
                let start = basement.entries.partition_point(|e| !above(&e.key, lo));
                basement.entries.get(start..).unwrap_or(&[]).iter()
            })
            .take_while(move |e| below(e.key.as_slice(), hi))
    }

    /// Applies a flush's messages: range deletes and point messages, each key's in sequence
    /// order, then rebalances basements to `basement_size_bytes`.
    pub fn apply(&mut self, incoming: Incoming, horizon: Seq, update: &UpdateFn, basement_size_bytes: usize) {
        let Incoming { mut points, ranges } = incoming;
        for (key, events) in points.iter_mut() {
            let before = events.len();
            events.extend(ranges.iter().filter(|r| r.contains(key)).map(|r| (r.seq, Event::Delete)));
            if events.len() > before {
                events.sort_by_key(|(seq, _)| *seq);
            }
        }
        let basements: Vec<Basement> =
            std::mem::take(&mut self.basements).into_iter().filter(|b| !b.entries.is_empty()).collect();
        let uppers: Vec<Option<Vec<u8>>> = (0..basements.len())
            .map(|i| basements.get(i + 1).and_then(Basement::first_key).map(<[u8]>::to_vec))
            .collect();
        let mut merged = Vec::with_capacity(basements.len() + 1);
        for (basement, upper) in basements.into_iter().zip(uppers) {
            let mine = split_below(&mut points, upper);
            merged.push(merge_basement(basement, mine, &ranges, horizon, update));
        }
        if !points.is_empty() {
            // Only when the leaf had no entries at all.
            merged.push(merge_basement(Basement::default(), points, &ranges, horizon, update));
        }
        self.basements = merged;
        self.normalize(basement_size_bytes);
    }

    /// Applies one key's events without rebuilding its basement: the path of a write that goes
    /// straight to a leaf (an append, or a key whose buffers above are empty).
    pub fn apply_point(
        &mut self,
        key: Vec<u8>,
        events: Vec<(Seq, Event)>,
        horizon: Seq,
        update: &UpdateFn,
        basement_size_bytes: usize,
    ) {
        let index = self.basement_index(&key);
        let Some(basement) = self.basements.get_mut(index) else { return };
        match basement.find(&key) {
            Ok(i) => {
                let Some(entry) = basement.entries.get_mut(i) else { return };
                let before = entry.size_bytes();
                if entry.apply(events, horizon, update) {
                    basement.size_bytes = basement.size_bytes - before + entry.size_bytes();
                } else {
                    basement.entries.remove(i);
                    basement.size_bytes -= before;
                }
            }
            Err(i) => {
                let mut entry = Entry { key, versions: Vec::new() };
                if entry.apply(events, horizon, update) {
                    basement.size_bytes += entry.size_bytes();
                    basement.entries.insert(i, entry);
                }
            }
        }
        if basement.size_bytes > basement_size_bytes || (basement.entries.is_empty() && self.basements.len() > 1) {
            self.normalize(basement_size_bytes);
        }
    }

    /// The basement holding the greatest keys below `key`.
    pub fn basement_index_below(&self, key: &[u8]) -> usize {
        let later = self.basements.get(1..).unwrap_or(&[]);
        later.partition_point(|b| b.first_key().is_some_and(|first| first < key))
    }

    /// Drops empty basements, splits those over `basement_size_bytes`, and joins small
    /// neighbours, so that every basement is a sensible read unit.
    fn normalize(&mut self, basement_size_bytes: usize) {
        let mut out: Vec<Basement> = Vec::with_capacity(self.basements.len());
        for basement in std::mem::take(&mut self.basements) {
            if basement.entries.is_empty() {
                continue;
            }
            if basement.size_bytes > basement_size_bytes && basement.entries.len() > 1 {
                out.extend(chunk_entries(basement.entries, basement_size_bytes / 2, basement_size_bytes));
                continue;
            }
            match out.last_mut() {
                Some(last)
                    if last.size_bytes + basement.size_bytes <= basement_size_bytes
                        && (last.size_bytes < basement_size_bytes / 4
                            || basement.size_bytes < basement_size_bytes / 4) =>
                {
                    last.size_bytes += basement.size_bytes;
                    last.entries.extend(basement.entries);
                }
                _ => out.push(basement),
            }
        }
        if out.is_empty() {
            out.push(Basement::default());
        }
        self.basements = out;
    }

    /// Splits the leaf into pieces of about `target_bytes` each, at basement boundaries. Returns
    /// the pieces after the first, each with its first key (the pivot that will separate it).
    /// A leaf of two or more basements over twice the target always yields at least one piece,
    /// and no piece of two or more basements is left over twice the target: the caller splits
    /// because the leaf is too big, and a split that left it too big would be asked for again
    /// forever (`fix_root` grew and shrank the root in a loop).
    pub fn split(&mut self, target_bytes: usize) -> Vec<(Vec<u8>, Leaf)> {
        let mut basements: Vec<Basement> =
            std::mem::take(&mut self.basements).into_iter().filter(|b| !b.entries.is_empty()).collect();
        let sizes: Vec<usize> = basements.iter().map(|b| b.size_bytes).collect();
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
        pieces
    }

    /// Appends the entries of the leaf to the right (whose keys are all greater).
    pub fn merge(&mut self, right: Leaf, basement_size_bytes: usize) {
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

/// Merges a basement's entries with the sorted point messages that fall into it, applying the
/// range deletes to the entries no point message touches.
fn merge_basement(
    basement: Basement,
    points: BTreeMap<Vec<u8>, Vec<(Seq, Event)>>,
    ranges: &[RangeDelete],
    horizon: Seq,
    update: &UpdateFn,
) -> Basement {
    let mut out = Vec::with_capacity(basement.entries.len() + points.len());
    let mut incoming = points.into_iter().peekable();
    for mut entry in basement.entries {
        while let Some((key, events)) = incoming.next_if(|(k, _)| *k < entry.key) {
            push_new_entry(&mut out, key, events, horizon, update);
        }
        let alive = match incoming.next_if(|(k, _)| *k == entry.key) {
            Some((_, events)) => entry.apply(events, horizon, update),
            None => {
                let mut deletes: Vec<(Seq, Event)> =
                    ranges.iter().filter(|r| r.contains(&entry.key)).map(|r| (r.seq, Event::Delete)).collect();
                deletes.sort_by_key(|(seq, _)| *seq);
                deletes.is_empty() || entry.apply(deletes, horizon, update)
            }
        };
        if alive {
            out.push(entry);
        }
    }
    for (key, events) in incoming {
        push_new_entry(&mut out, key, events, horizon, update);
    }
    Basement::from_entries(out)
}

fn push_new_entry(out: &mut Vec<Entry>, key: Vec<u8>, events: Vec<(Seq, Event)>, horizon: Seq, update: &UpdateFn) {
    let mut entry = Entry { key, versions: Vec::new() };
    if entry.apply(events, horizon, update) {
        out.push(entry);
    }
}

/// Cuts entries into basements of about `target_bytes`, none over `max_bytes` unless it holds
/// a single entry.
fn chunk_entries(entries: Vec<Entry>, target_bytes: usize, max_bytes: usize) -> Vec<Basement> {
    let mut chunks = vec![Basement::default()];
    for entry in entries {
        let size = entry.size_bytes();
        let full = chunks.last().is_some_and(|c| {
            !c.entries.is_empty() && (c.size_bytes >= target_bytes || c.size_bytes + size > max_bytes)
        });
        if full {
            chunks.push(Basement::default());
        }
        if let Some(chunk) = chunks.last_mut() {
            chunk.size_bytes += entry.size_bytes();
            chunk.entries.push(entry);
        }
    }
    chunks
}

fn split_below(
    rest: &mut BTreeMap<Vec<u8>, Vec<(Seq, Event)>>,
    bound: Option<Vec<u8>>,
) -> BTreeMap<Vec<u8>, Vec<(Seq, Event)>> {
    match bound {
        None => std::mem::take(rest),
        Some(bound) => {
            let above = rest.split_off(&bound);
            std::mem::replace(rest, above)
        }
    }
}

fn version_event(value: &Option<Vec<u8>>) -> Event {
    match value {
        Some(v) => Event::Put(v.clone()),
        None => Event::Delete,
    }
}

fn above(key: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Included(lo) => key >= lo,
        Bound::Excluded(lo) => key > lo,
        Bound::Unbounded => true,
    }
}

fn below(key: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Included(hi) => key <= hi,
        Bound::Excluded(hi) => key < hi,
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use super::split_cuts;

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
