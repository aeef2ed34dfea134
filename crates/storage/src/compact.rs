//! Compaction: giving the data file's free space back to the operating system while commits
//! go on.
//!
//! Copy-on-write leaves holes wherever a node's older block was freed; new blocks fill them
//! from the start of the file, but a file that once grew keeps its length. Compaction moves
//! blocks from the end of the file into holes nearer its start and then cuts the file after
//! its last block:
//!
//! 1. A checkpoint, so that every block the previous one named and the current one does not
//!    is free.
//! 2. Relocation: each clean node's block, highest first, is copied (checked) into the lowest
//!    hole before it, and its slot names the copy (`NodeStore::relocate_down`). Dirty nodes are
//!    written by the next checkpoint, into holes from the start too.
//! 3. A checkpoint, which names the copies; once it is durable the originals are free.
//! 4. The file is cut at the end of its last block (`DataFile::trim_tail`).
//!
//! A checkpoint that leaves the file more than a fifth free runs bounded passes of 2-4 (see
//! `step`; at most `AUTO_STEPS`, fewer once the file is no longer a fifth free), so churn does
//! not grow the file for long; a clean shutdown runs them until the file is at most a tenth
//! free, within a time budget (`at_close`). `compact` repeats 2-4 while a pass moves
//! or frees something (a copy may land where the one before could not, once the catalog and
//! the freed originals have moved; dirty nodes move by being checkpointed into holes, and
//! their old blocks are free one checkpoint later), at most a few times. A crash at
//! any point leaves a durable checkpoint whose blocks are all intact: the originals are not
//! freed before a checkpoint naming the copies is durable, and a cut never reaches a block in
//! use.

use std::time::Instant;

use crate::engine::{Shared, elapsed_micros};
use crate::error::{Error, Result};
use crate::store::Moved;

/// Compaction steps a checkpoint runs at most (each moves at most an eighth of the file): one
/// step after a burst of churn left the file just past the fifth-free mark it is meant to end
/// under (the moved blocks' originals are free only after the step's checkpoint).
pub(crate) const AUTO_STEPS: usize = 2;

/// How long a clean shutdown may spend compacting (`at_close`).
const CLOSE_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// Passes of relocation at most: each moves every block that has a hole below it.
const MAX_PASSES: usize = 4;

/// A checkpoint compacts a file only when at least this much of it is free (and more than a
/// fifth of it): a small file's slack is not worth a second checkpoint. A fixed size, not a
/// number of nodes: nodes are written compressed, often to a fraction of the node size, and a
/// floor of two 4 MiB nodes left a small database's file at up to twice its data.
const AUTO_MIN_FREE_BYTES: u64 = 256 << 10;

/// What a compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// The data file's length before and after.
    pub file_bytes_before: u64,
    pub file_bytes_after: u64,
    /// Blocks copied nearer the start of the file, and their bytes.
    pub blocks_moved: u64,
    pub bytes_moved: u64,
    pub micros: u64,
}

pub(crate) fn compact(shared: &Shared) -> Result<CompactReport> {
    let Some(durable) = shared.durable.get() else {
        return Err(Error::InvalidArgument("an in-memory engine has no file to compact".into()));
    };
    let started = Instant::now();
    let mut report = CompactReport { file_bytes_before: durable.data.len()?, ..CompactReport::default() };
    crate::checkpoint::checkpoint_once(shared)?;
    for pass in 0..MAX_PASSES {
        let before = durable.data.len()?;
        let moved = relocate_and_checkpoint(shared, u64::MAX)?;
        report.blocks_moved += moved.blocks;
        report.bytes_moved += moved.bytes;
        // A pass that moved nothing may still have freed blocks the one before it superseded
        // (dirty nodes, which writers keep dirtying, move by being checkpointed into holes):
        // stop once a pass after the first neither moves nor shrinks anything.
        if pass > 0 && moved.blocks == 0 && durable.data.len()? >= before {
            break;
        }
    }
    report.file_bytes_after = durable.data.len()?;
    report.micros = elapsed_micros(started);
    Ok(report)
}

/// Whether the file is more than a fifth free space (and that is at least
/// `AUTO_MIN_FREE_BYTES`): a checkpoint then runs a compaction `step`. So a file settles at no
/// more than about 5/4 of what it holds.
pub(crate) fn wanted(shared: &Shared) -> bool {
    free_beyond(shared, 5)
}

/// Whether more than `1/fraction` of the file (and at least `AUTO_MIN_FREE_BYTES`) is free.
fn free_beyond(shared: &Shared, fraction: u64) -> bool {
    let Some(durable) = shared.durable.get() else { return false };
    let free = durable.data.free_bytes();
    let len = durable.data.len().unwrap_or(0);
    free * fraction > len && free >= AUTO_MIN_FREE_BYTES
}

/// A clean shutdown's compaction, after its checkpoint: nothing else runs, and the file it
/// leaves is the one a user measures, so it goes further than a checkpoint's `AUTO_STEPS`:
/// steps while the file is more than a tenth free, for at most `CLOSE_BUDGET` (moving costs
/// about the free space: a big file with much free space is left to later checkpoints and
/// `compact` rather than hold the shutdown). A load leaves its last checkpoint's replaced
/// blocks free at the end, often a fifth of the file.
pub(crate) fn at_close(shared: &Shared) -> Result<()> {
    let Some(durable) = shared.durable.get() else { return Ok(()) };
    let started = Instant::now();
    while free_beyond(shared, 10) && started.elapsed() < CLOSE_BUDGET {
        let before = durable.data.len()?;
        step(shared)?;
        if durable.data.len()? >= before {
            break;
        }
    }
    Ok(())
}

/// One bounded pass after a checkpoint: moves at most an eighth of the file's length of
/// blocks down and checkpoints again, so the file shrinks by what moved. Repeated at each
/// checkpoint while the file stays more than a fifth free, it converges without ever copying
/// the whole file at once.
pub(crate) fn step(shared: &Shared) -> Result<()> {
    let Some(durable) = shared.durable.get() else { return Ok(()) };
    // At least two nodes' worth, so that a step can always move a whole block of the largest size.
    let budget = (durable.data.len()? / 8).max(2 * shared.options.node_size_bytes as u64);
    relocate_and_checkpoint(shared, budget).map(|_| ())
}

/// Relocation (at most `budget` bytes), then a checkpoint naming the copies: it frees the
/// originals and cuts the file's free tail (`checkpoint_holding`).
fn relocate_and_checkpoint(shared: &Shared, budget: u64) -> Result<Moved> {
    let Some(durable) = shared.durable.get() else { return Ok(Moved::default()) };
    // No capture may run while blocks move (see `NodeStore::relocate_down`).
    let moved = {
        let _no_checkpoint = durable.checkpoint.lock();
        shared.store.relocate_down(budget)?
    };
    crate::checkpoint::checkpoint_once(shared)?;
    Ok(moved)
}
