//! Reading a tree at a snapshot: point reads, and scans one basement-sized window at a time.
//!
//! A key's value is the fold of its versions in the leaf and the messages for it in every buffer
//! on the root-to-leaf path, in sequence order, up to the snapshot. A scan reads one *window* per
//! call: the key range of one basement (intersected with the scan's bounds) together with the
//! buffered messages above that fall in it; the caller continues from the window's edge, under a
//! fresh lock, so a long scan never holds the tree.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::error::{Error, Result};
use crate::message::{Event, Seq, resolve};
use crate::node::buffer::RangeDelete;
use crate::node::{NodeId, child_range};
use crate::thin::View;
use crate::tree::{Ctx, Tree};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Forward,
    Backward,
}

/// A part of a tree that could not be read (a block that fails its checksum, a read error): its
/// key range (`None`: the tree's end on that side) and why.
pub(crate) struct Damage {
    pub lo: Option<Vec<u8>>,
    pub hi: Option<Vec<u8>>,
    pub error: Error,
}

/// One window of a scan: its live entries in ascending key order, and the window's edges
/// (`None`: the tree's end on that side).
pub(crate) struct Batch {
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub window_lo: Option<Vec<u8>>,
    pub window_hi: Option<Vec<u8>>,
}

impl Tree {
    pub fn get(&self, ctx: &Ctx<'_>, key: &[u8], snapshot: Seq) -> Result<Option<Vec<u8>>> {
        let guard = self.root.read();
        // Thin nodes' blocks are read a part at a time: heads on the way down, then the
        // path's buffers and the leaf's basement.
        let _pin = ctx.store.pin();
        let root = guard.ok_or_else(|| self.not_found())?;
        let path = descend(ctx, root, Seek::AtOrAfter(Bound::Included(key))).map_err(|damage| damage.error)?;
        start_unread_sections(ctx, &path);
        let mut events = Vec::new();
        for (node, index) in &path.internals {
            if let Some(buffer) = node.buffer(ctx.store, *index, Bound::Included(key), Bound::Included(key))? {
                buffer.collect_events(key, &mut events);
            }
        }
        if let Some((leaf, index)) = &path.leaf
            && let Some(basement) = leaf.basement(ctx.store, *index)?
        {
            basement.collect_events(key, &mut events);
        }
        Ok(resolve(key, &mut events, snapshot, &ctx.options.update))
    }

    /// Reads the window at the start (forward) or end (backward) of `[lower, upper]`.
    pub fn read_window(
        &self,
        ctx: &Ctx<'_>,
        snapshot: Seq,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> Result<Batch> {
        let guard = self.root.read();
        let _pin = ctx.store.pin();
        let root = guard.ok_or_else(|| self.not_found())?;
        let seek = match direction {
            Direction::Forward => Seek::AtOrAfter(lower),
            Direction::Backward => Seek::AtOrBefore(upper),
        };
        let path = descend(ctx, root, seek).map_err(|damage| damage.error)?;
        window(ctx, snapshot, path, lower, upper)
    }

    /// Reads the window at or after `lower` for a salvage (`Snapshot::salvage`): what cannot be
    /// read is returned as the key range it covers, so the caller can go on after it. A node that
    /// does not read loses its whole range; a buffer or basement that does not read loses the
    /// window (buffered messages might have changed the entries below, so none are guessed).
    pub fn salvage_window(
        &self,
        ctx: &Ctx<'_>,
        snapshot: Seq,
        lower: Bound<&[u8]>,
    ) -> Result<std::result::Result<Batch, Damage>> {
        let guard = self.root.read();
        let _pin = ctx.store.pin();
        let root = guard.ok_or_else(|| self.not_found())?;
        let path = match descend(ctx, root, Seek::AtOrAfter(lower)) {
            Ok(path) => path,
            Err(damage) => return Ok(Err(damage)),
        };
        let (lo, hi) = (path.window_lo.clone(), path.window_hi.clone());
        Ok(window(ctx, snapshot, path, lower, Bound::Unbounded).map_err(|error| Damage { lo, hi, error }))
    }
}

/// The live entries of the window `path` reached, within `[lower, upper]`.
fn window(ctx: &Ctx<'_>, snapshot: Seq, path: Path, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<Batch> {
    let (window_lo, window_hi) = (path.window_lo.clone(), path.window_hi.clone());
    let lo = tighter_lower(lower, window_lo.as_deref());
    let hi = tighter_upper(upper, window_hi.as_deref());
    // Buffered messages in the window are few (buffers are bounded); leaf entries are many,
    // and most have no message above them, so those are read straight from their versions.
    let mut buffered: BTreeMap<Vec<u8>, Vec<(Seq, Event)>> = BTreeMap::new();
    let mut ranges: Vec<RangeDelete> = Vec::new();
    start_unread_sections(ctx, &path);
    for (node, index) in &path.internals {
        let Some(buffer) = node.buffer(ctx.store, *index, lo, hi)? else { continue };
        for (key, events) in buffer.points_in(lo, hi) {
            buffered.entry(key).or_default().extend(events);
        }
        ranges.extend(buffer.ranges().iter().cloned());
    }
    let basement = match &path.leaf {
        Some((leaf, index)) => leaf.basement(ctx.store, *index)?,
        None => None,
    };
    let mut leaf_entries = basement.iter().flat_map(|basement| basement.entries_in(lo, hi)).peekable();
    let mut messages = buffered.into_iter().peekable();
    let mut entries = Vec::new();
    loop {
        let take_leaf = match (leaf_entries.peek(), messages.peek()) {
            (None, None) => break,
            (Some(entry), Some((key, _))) => entry.key() <= key.as_slice(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        let (key, mut events) = if take_leaf {
            let Some(entry) = leaf_entries.next() else { break };
            let same_key = messages.next_if(|(key, _)| key.as_slice() == entry.key());
            if same_key.is_none() && ranges.is_empty() {
                if let Some(value) = entry.visible_at(snapshot) {
                    entries.push((entry.key().to_vec(), value.to_vec()));
                }
                continue;
            }
            let mut events: Vec<(Seq, Event)> =
                entry.versions().map(|(seq, v)| (seq, v.map_or(Event::Delete, |v| Event::Put(v.to_vec())))).collect();
            events.extend(same_key.into_iter().flat_map(|(_, e)| e));
            (entry.key().to_vec(), events)
        } else {
            let Some(next) = messages.next() else { break };
            next
        };
        events.extend(ranges.iter().filter(|r| r.contains(&key)).map(|r| (r.seq, Event::Delete)));
        if let Some(value) = resolve(&key, &mut events, snapshot, &ctx.options.update) {
            entries.push((key, value));
        }
    }
    drop(leaf_entries);
    Ok(Batch { entries, window_lo, window_hi })
}

/// Starts reading, all at once, the sections a read's path needs (buffers on the way down, the
/// leaf's basement) that are not in memory, when there are two or more. Read one after the
/// other, each miss waited for the disk and then for a core in turn, and beyond memory those
/// waits were the tail of iibench's queries. A single miss gains nothing from being started
/// early, and left to the plain read it keeps the kernel's readahead going for a scan's later
/// windows (one basement each, laid out in order), which reads of advised pages do not.
fn start_unread_sections(ctx: &Ctx<'_>, path: &Path) {
    let sections = path.internals.iter().chain(&path.leaf);
    let unread: Vec<_> = sections.filter_map(|(node, index)| Some((node.unread_section(*index)?, *index))).collect();
    if unread.len() >= 2 {
        for (thin, index) in unread {
            ctx.store.start_reading_part(thin, index);
        }
    }
}

/// Which window a scan reads: the first at or after a lower bound, or the last at or before an
/// upper bound.
enum Seek<'a> {
    /// The window holding the least keys within this lower bound.
    AtOrAfter(Bound<&'a [u8]>),
    /// The window holding the greatest keys within this upper bound.
    AtOrBefore(Bound<&'a [u8]>),
}

struct Path {
    /// The internal nodes walked through and the child taken at each.
    internals: Vec<(View, usize)>,
    /// The leaf reached and the basement of the window.
    leaf: Option<(View, usize)>,
    window_lo: Option<Vec<u8>>,
    window_hi: Option<Vec<u8>>,
}

/// Walks from `root` to the window `seek` asks for; a node that does not read is returned as
/// the damaged range it covers.
fn descend(ctx: &Ctx<'_>, root: NodeId, seek: Seek<'_>) -> std::result::Result<Path, Damage> {
    let mut internals = Vec::new();
    let (mut lo, mut hi): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    let mut id = root;
    loop {
        let node = match ctx.store.view(id) {
            Ok(node) => node,
            Err(error) => return Err(Damage { lo, hi, error }),
        };
        if node.is_leaf() {
            let index = basement_for(&node, &seek);
            let window_lo = node.basement_lower(index).map(<[u8]>::to_vec).or(lo);
            let window_hi = node.basement_upper(index).map(<[u8]>::to_vec).or(hi);
            return Ok(Path { internals, leaf: Some((node, index)), window_lo, window_hi });
        }
        let index = match seek {
            Seek::AtOrAfter(bound) => bound_key(bound).map_or(0, |k| node.child_index(k)),
            Seek::AtOrBefore(bound) => match bound {
                Bound::Included(k) => node.child_index(k),
                Bound::Excluded(k) => node.child_index_below(k),
                Bound::Unbounded => node.children().len().saturating_sub(1),
            },
        };
        let (child_lo, child_hi) = child_range(node.pivots(), index, lo.as_deref(), hi.as_deref());
        let (child_lo, child_hi) = (child_lo.map(<[u8]>::to_vec), child_hi.map(<[u8]>::to_vec));
        let Some(&child) = node.children().get(index) else {
            return Ok(Path { internals, leaf: None, window_lo: lo, window_hi: hi });
        };
        lo = child_lo;
        hi = child_hi;
        internals.push((node, index));
        id = child;
    }
}

fn basement_for(leaf: &View, seek: &Seek<'_>) -> usize {
    match *seek {
        Seek::AtOrAfter(bound) => bound_key(bound).map_or(0, |k| leaf.basement_index(k)),
        Seek::AtOrBefore(bound) => match bound {
            Bound::Included(k) => leaf.basement_index(k),
            Bound::Excluded(k) => leaf.basement_index_below(k),
            Bound::Unbounded => leaf.basement_count().saturating_sub(1),
        },
    }
}

fn bound_key(bound: Bound<&[u8]>) -> Option<&[u8]> {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

fn tighter_lower<'a>(bound: Bound<&'a [u8]>, window_lo: Option<&'a [u8]>) -> Bound<&'a [u8]> {
    match (bound, window_lo) {
        (Bound::Unbounded, Some(w)) => Bound::Included(w),
        (Bound::Included(k) | Bound::Excluded(k), Some(w)) if w > k => Bound::Included(w),
        _ => bound,
    }
}

fn tighter_upper<'a>(bound: Bound<&'a [u8]>, window_hi: Option<&'a [u8]>) -> Bound<&'a [u8]> {
    match (bound, window_hi) {
        (Bound::Unbounded, Some(w)) => Bound::Excluded(w),
        (Bound::Included(k) | Bound::Excluded(k), Some(w)) if w <= k => Bound::Excluded(w),
        _ => bound,
    }
}
