//! Salvage: reading every entry of a tree that can still be read, and the key ranges of what
//! cannot (`Snapshot::salvage`). `validate` reports damage through it, and `strata repair`
//! copies what it yields into a new data directory.
//!
//! It walks the tree a window at a time as a forward scan does (`Tree::salvage_window`); a
//! window or node that fails its checksum (or does not read) is reported as the key range it
//! covers, and the walk goes on after it. Nothing is guessed: entries under a damaged buffer
//! are lost with it, since its messages might have changed them.

use std::collections::VecDeque;
use std::ops::Bound;

use crate::error::{Error, Result};
use crate::snapshot::{Snapshot, borrowed};
use crate::tree::{Damage, TreeId};

/// What a salvage yields: an entry, or a range that could not be read.
#[derive(Debug)]
pub enum Salvaged {
    Entry(Vec<u8>, Vec<u8>),
    /// Keys in `[from, to)` (`None`: the tree's end on that side) may be lost, because of `error`.
    Lost {
        from: Option<Vec<u8>>,
        to: Option<Vec<u8>>,
        error: Error,
    },
}

/// The iterator `Snapshot::salvage` returns. An `Err` (the tree is gone) ends it.
pub struct Salvage {
    snapshot: Snapshot,
    tree: TreeId,
    lower: Bound<Vec<u8>>,
    ready: VecDeque<Salvaged>,
    done: bool,
}

impl Salvage {
    pub(crate) fn new(snapshot: Snapshot, tree: TreeId) -> Salvage {
        Salvage { snapshot, tree, lower: Bound::Unbounded, ready: VecDeque::new(), done: false }
    }

    /// Reads the next window; windows lost one after another to the same damage (a damaged
    /// buffer loses each window under it) are reported as one range.
    fn fetch(&mut self) -> Result<()> {
        let shared = self.snapshot.shared();
        let tree = shared.tree(self.tree)?;
        // The range being lost: where it began, and why.
        let mut lost: Option<(Option<Vec<u8>>, Error)> = None;
        loop {
            let next = match tree.salvage_window(&shared.ctx(), self.snapshot.seq(), borrowed(&self.lower))? {
                Ok(batch) => {
                    end_lost(&mut self.ready, &mut lost, batch.window_lo.clone());
                    self.ready.extend(batch.entries.into_iter().map(|(k, v)| Salvaged::Entry(k, v)));
                    batch.window_hi
                }
                Err(Damage { lo, hi, error }) => {
                    if lost.as_ref().is_some_and(|(_, lost_to)| *lost_to != error) {
                        end_lost(&mut self.ready, &mut lost, lo.clone());
                    }
                    lost.get_or_insert((lo, error));
                    hi
                }
            };
            match next {
                // A window always ends past where it began; anything else would loop forever.
                Some(hi) if self.is_past_lower(&hi) => self.lower = Bound::Included(hi),
                _ => self.done = true,
            }
            if self.done || lost.is_none() {
                break;
            }
        }
        end_lost(&mut self.ready, &mut lost, None);
        Ok(())
    }

    fn is_past_lower(&self, key: &[u8]) -> bool {
        match &self.lower {
            Bound::Unbounded => true,
            Bound::Included(lower) | Bound::Excluded(lower) => key > lower.as_slice(),
        }
    }
}

impl Iterator for Salvage {
    type Item = Result<Salvaged>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            if let Err(error) = self.fetch() {
                self.done = true;
                return Some(Err(error));
            }
        }
    }
}

/// Reports the range being lost, if any, as ending at `to`.
fn end_lost(ready: &mut VecDeque<Salvaged>, lost: &mut Option<(Option<Vec<u8>>, Error)>, to: Option<Vec<u8>>) {
    if let Some((from, error)) = lost.take() {
        ready.push_back(Salvaged::Lost { from, to, error });
    }
}
