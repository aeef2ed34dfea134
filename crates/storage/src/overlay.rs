//! Reading through pending writes: a snapshot's committed state with a transaction's pending
//! writes applied over it.
//!
//! A point read takes the key's pending effect, if any: a put or delete answers without reading
//! the tree; a chain of updates is applied over the committed value. A range merges two sorted
//! streams, the committed entries (`Committed`, fetched a window at a time) and the pending
//! effects within the range, from either end: each step takes the nearer key of the two, both
//! when they are equal (the effect then applies over the committed value), and skips keys whose
//! effect leaves them absent.
//!
//! Invariant: what is left of both streams is the keys strictly between the last key taken
//! from the front and the last taken from the back, so that steps from both ends never return a
//! key twice, nor a committed value whose pending effect was already spent (a key is always
//! taken from both streams at once).

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::pending::{Effect, PendingWrites};
use crate::snapshot::{Committed, Entry, borrowed};
use crate::tree::{Direction, TreeId};

/// A point read through pending writes; `committed` reads the tree, only if the effect needs it.
pub(crate) fn get(
    pending: &PendingWrites,
    tree: TreeId,
    key: &[u8],
    committed: impl FnOnce() -> Result<Option<Vec<u8>>>,
) -> Result<Option<Vec<u8>>> {
    match pending.effect(tree, key) {
        None => committed(),
        Some(effect @ Effect::Updates(_)) => Ok(pending.resolve(key, effect, committed()?)),
        Some(effect) => Ok(pending.resolve(key, effect, None)),
    }
}

/// The pending side of a range iterator: the effects within `[lower, upper]` not yet taken.
pub(crate) struct Overlay {
    pending: Arc<PendingWrites>,
    tree: TreeId,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
}

impl Overlay {
    pub(crate) fn new(
        pending: Arc<PendingWrites>,
        tree: TreeId,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
    ) -> Overlay {
        Overlay { pending, tree, lower: lower.clone(), upper: upper.clone() }
    }

    /// The next entry in `direction` of the merged streams.
    pub(crate) fn step(&mut self, committed: &mut Committed, direction: Direction) -> Option<Result<Entry>> {
        let Overlay { pending, tree, lower, upper } = self;
        loop {
            if let Err(error) = committed.fill(direction)? {
                return Some(Err(error));
            }
            let Some((key, effect)) = nearest_effect(pending, *tree, lower, upper, direction) else {
                return committed.pop(direction).map(Ok);
            };
            let value = match committed.peek(direction).map(|(next, _)| along(direction, next, key)) {
                Some(Ordering::Less) => return committed.pop(direction).map(Ok),
                Some(Ordering::Equal) => committed.pop(direction).map(|(_, value)| value),
                Some(Ordering::Greater) | None => None,
            };
            // The key is now taken from both streams: neither end reaches it again.
            let taken = Bound::Excluded(key.clone());
            match direction {
                Direction::Forward => *lower = taken,
                Direction::Backward => *upper = taken,
            }
            if let Some(value) = pending.resolve(key, effect, value) {
                return Some(Ok((key.clone(), value)));
            }
        }
    }
}

/// The nearest key in `direction` with a pending effect within `[lower, upper]`.
fn nearest_effect<'a>(
    pending: &'a PendingWrites,
    tree: TreeId,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
    direction: Direction,
) -> Option<(&'a Vec<u8>, &'a Effect)> {
    let mut effects = pending.effects_in(tree, borrowed(lower), borrowed(upper));
    match direction {
        Direction::Forward => effects.next(),
        Direction::Backward => effects.next_back(),
    }
}

/// How `a` compares with `b` along `direction`: `Less` if a step reaches it first.
fn along(direction: Direction, a: &[u8], b: &[u8]) -> Ordering {
    match direction {
        Direction::Forward => a.cmp(b),
        Direction::Backward => b.cmp(a),
    }
}
