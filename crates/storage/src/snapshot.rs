//! Snapshots and range iterators.
//!
//! A snapshot is a registered sequence number: it reads every tree as of that commit, whatever
//! commits after it. A range iterator holds its snapshot and fetches one window (about a
//! basement) at a time, each under a short read lock, from both ends if asked: it stays correct
//! while writers commit, because the snapshot keeps every version it can read.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::engine::Shared;
use crate::error::Result;
use crate::message::Seq;
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

/// A consistent, read-only view of all trees.
#[derive(Clone)]
pub struct Snapshot {
    registration: Arc<Registration>,
}

impl Snapshot {
    pub(crate) fn new(shared: Arc<Shared>) -> Snapshot {
        let seq = shared.register_snapshot();
        Snapshot { registration: Arc::new(Registration { shared, seq }) }
    }

    /// The newest commit this snapshot sees.
    pub fn seq(&self) -> Seq {
        self.registration.seq
    }

    pub fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let shared = &self.registration.shared;
        shared.tree(tree)?.get(&shared.ctx(), key, self.seq())
    }

    /// Iterates the keys within `range` in order (and in reverse, from the back).
    pub fn range<R: RangeBounds<[u8]>>(&self, tree: TreeId, range: R) -> RangeIter {
        RangeIter {
            snapshot: self.clone(),
            tree,
            lower: owned(range.start_bound()),
            upper: owned(range.end_bound()),
            front: VecDeque::new(),
            back: VecDeque::new(),
            middle_done: false,
            failed: false,
        }
    }

    pub fn iter(&self, tree: TreeId) -> RangeIter {
        self.range::<std::ops::RangeFull>(tree, ..)
    }
}

fn owned(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn borrowed(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether no key lies within `[lower, upper]`.
fn is_empty_range(lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u))
        | (Bound::Excluded(l), Bound::Excluded(u)) => l >= u,
        _ => false,
    }
}

/// An iterator over one tree's key/value pairs within bounds, at a snapshot. The part of the
/// range not yet fetched is `[lower, upper]`; fetched entries wait in `front` and `back`.
pub struct RangeIter {
    snapshot: Snapshot,
    tree: TreeId,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: VecDeque<(Vec<u8>, Vec<u8>)>,
    back: VecDeque<(Vec<u8>, Vec<u8>)>,
    middle_done: bool,
    failed: bool,
}

impl RangeIter {
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
        if is_empty_range(&self.lower, &self.upper) {
            self.middle_done = true;
        }
        Ok(())
    }

    fn step(&mut self, direction: Direction) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.failed {
            return None;
        }
        loop {
            let ready = match direction {
                Direction::Forward => self.front.pop_front(),
                Direction::Backward => self.back.pop_back(),
            };
            if let Some(entry) = ready {
                return Some(Ok(entry));
            }
            if self.middle_done || is_empty_range(&self.lower, &self.upper) {
                return match direction {
                    Direction::Forward => self.back.pop_front().map(Ok),
                    Direction::Backward => self.front.pop_back().map(Ok),
                };
            }
            if let Err(error) = self.fetch(direction) {
                self.failed = true;
                return Some(Err(error));
            }
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
