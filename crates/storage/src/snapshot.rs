//! Snapshots and range iterators.
//!
//! A snapshot is a registered sequence number: it reads every tree as of that commit, whatever
//! commits after it. A range iterator holds its snapshot and fetches one window (about a
//! basement) at a time, each under a short read lock, from both ends if asked: it stays correct
//! while writers commit, because the snapshot keeps every version it can read.
//!
//! A snapshot may also carry a transaction's pending writes (`with_pending`), frozen in an
//! `Arc`: its reads then see them applied over the committed state (`overlay.rs`). Without
//! them, a read costs one `Option` check more than the tree's own.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::engine::Shared;
use crate::error::Result;
use crate::message::Seq;
use crate::overlay::Overlay;
use crate::pending::PendingWrites;
use crate::tree::{Direction, TreeId};

struct Registration {
    shared: Arc<Shared>,
    seq: Seq,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.release_snapshot(self.seq);
    }
}

/// A consistent, read-only view of all trees, with a transaction's pending writes on top if it
/// was made by `with_pending`.
#[derive(Clone)]
pub struct Snapshot {
    registration: Arc<Registration>,
    pending: Option<Arc<PendingWrites>>,
}

impl Snapshot {
    pub(crate) fn new(shared: Arc<Shared>) -> Snapshot {
        let seq = shared.register_snapshot();
        Snapshot { registration: Arc::new(Registration { shared, seq }), pending: None }
    }

    /// The same snapshot (same sequence number, sharing its registration) read through
    /// `pending`, in place of any pending writes this one has: `get`, `range` and `iter` see the
    /// committed state as of `seq` with the pending writes applied over it. The writes are
    /// frozen: write to a clone (`Arc::make_mut`) and take a new overlaid snapshot to see more.
    /// The pending writes must come from this engine (`Engine::pending`), whose update function
    /// resolves them.
    pub fn with_pending(&self, pending: Arc<PendingWrites>) -> Snapshot {
        Snapshot { registration: Arc::clone(&self.registration), pending: Some(pending) }
    }

    /// The pending writes this snapshot reads through, if any.
    pub fn pending(&self) -> Option<&Arc<PendingWrites>> {
        self.pending.as_ref()
    }

    /// The newest commit this snapshot sees.
    pub fn seq(&self) -> Seq {
        self.registration.seq
    }

    pub fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let shared = &self.registration.shared;
        let found = shared.tree(tree)?;
        let committed = || found.get(&shared.ctx(), key, self.seq());
        match &self.pending {
            None => committed(),
            Some(pending) => crate::overlay::get(pending, tree, key, committed),
        }
    }

    /// Iterates the keys within `range` in order (and in reverse, from the back).
    pub fn range<R: RangeBounds<[u8]>>(&self, tree: TreeId, range: R) -> RangeIter {
        let (lower, upper) = (owned(range.start_bound()), owned(range.end_bound()));
        let overlay = self.pending.as_ref().map(|pending| Overlay::new(Arc::clone(pending), tree, &lower, &upper));
        let committed = Committed {
            snapshot: self.clone(),
            tree,
            lower,
            upper,
            front: VecDeque::new(),
            back: VecDeque::new(),
            middle_done: false,
            failed: false,
        };
        RangeIter { committed, overlay }
    }

    pub fn iter(&self, tree: TreeId) -> RangeIter {
        self.range::<std::ops::RangeFull>(tree, ..)
    }

    /// Every committed entry of `tree` that can be read, in order, and the key ranges of what
    /// cannot (see `salvage`); pending writes are not read.
    pub fn salvage(&self, tree: TreeId) -> crate::salvage::Salvage {
        crate::salvage::Salvage::new(self.clone(), tree)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.registration.shared
    }
}

fn owned(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub(crate) fn borrowed(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether no key lies within `[lower, upper]`.
pub(crate) fn is_empty_range(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u))
        | (Bound::Excluded(l), Bound::Excluded(u)) => l >= u,
        _ => false,
    }
}

/// A key and its value.
pub(crate) type Entry = (Vec<u8>, Vec<u8>);

/// An iterator over one tree's key/value pairs within bounds, at a snapshot: its committed
/// entries, merged with its pending writes if the snapshot has them.
pub struct RangeIter {
    committed: Committed,
    overlay: Option<Overlay>,
}

/// The committed entries of a range. The part of the range not yet fetched is
/// `[lower, upper]`; fetched entries wait in `front` and `back`.
pub(crate) struct Committed {
    snapshot: Snapshot,
    tree: TreeId,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: VecDeque<Entry>,
    back: VecDeque<Entry>,
    middle_done: bool,
    failed: bool,
}

impl Committed {
    fn fetch(&mut self, direction: Direction) -> Result<()> {
        let shared = &self.snapshot.registration.shared;
        let tree = shared.tree(self.tree)?;
        let batch = tree.read_window(
            &shared.ctx(),
            self.snapshot.seq(),
            borrowed(&self.lower),
            borrowed(&self.upper),
            direction,
        )?;
        match direction {
            Direction::Forward => {
                self.front.extend(batch.entries);
                match batch.window_hi {
                    Some(hi) => self.lower = Bound::Included(hi),
                    None => self.middle_done = true,
                }
            }
            Direction::Backward => {
                for entry in batch.entries.into_iter().rev() {
                    self.back.push_front(entry);
                }
                match batch.window_lo {
                    Some(lo) => self.upper = Bound::Excluded(lo),
                    None => self.middle_done = true,
                }
            }
        }
        if self.unfetched_is_empty() {
            self.middle_done = true;
        }
        Ok(())
    }

    fn unfetched_is_empty(&self) -> bool {
        self.middle_done || is_empty_range(borrowed(&self.lower), borrowed(&self.upper))
    }

    /// Fetches windows until an entry waits at `direction`'s end or nothing is left to fetch;
    /// after it, `peek` and `pop` see the next entry in that direction, if any. An error ends
    /// the iteration (`failed`) once it is returned.
    pub(crate) fn fill(&mut self, direction: Direction) -> Option<Result<()>> {
        if self.failed {
            return None;
        }
        loop {
            let waiting = match direction {
                Direction::Forward => &self.front,
                Direction::Backward => &self.back,
            };
            if !waiting.is_empty() || self.unfetched_is_empty() {
                return Some(Ok(()));
            }
            if let Err(error) = self.fetch(direction) {
                self.failed = true;
                return Some(Err(error));
            }
        }
    }

    /// The next entry in `direction`, once `fill`ed: from its own end, or, with nothing left to
    /// fetch, from the other end's queue (the two ends have met).
    pub(crate) fn peek(&self, direction: Direction) -> Option<&Entry> {
        match direction {
            Direction::Forward => self.front.front().or_else(|| self.back.front()),
            Direction::Backward => self.back.back().or_else(|| self.front.back()),
        }
    }

    pub(crate) fn pop(&mut self, direction: Direction) -> Option<Entry> {
        match direction {
            Direction::Forward => self.front.pop_front().or_else(|| self.back.pop_front()),
            Direction::Backward => self.back.pop_back().or_else(|| self.front.pop_back()),
        }
    }

    fn step(&mut self, direction: Direction) -> Option<Result<Entry>> {
        match self.fill(direction)? {
            Ok(()) => self.pop(direction).map(Ok),
            Err(error) => Some(Err(error)),
        }
    }
}

impl RangeIter {
    fn step(&mut self, direction: Direction) -> Option<Result<Entry>> {
        match &mut self.overlay {
            None => self.committed.step(direction),
            Some(overlay) => overlay.step(&mut self.committed, direction),
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(Direction::Forward)
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(Direction::Backward)
    }
}
