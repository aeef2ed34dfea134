//! Hot backup: a consistent copy of the engine, as of a checkpoint taken for it, written to
//! another directory while commits go on.
//!
//! Copy-on-write makes it cheap. The backup takes a checkpoint and, holding the checkpoint lock
//! (later checkpoints wait; commits, flushes and evictions go on), copies the data file up to
//! its length then: both header slots are as that checkpoint left them, and no block the newest
//! names can be overwritten before the next checkpoint is durable, which the lock holds off.
//! Blocks written after it, in free space, may be copied half-written or not at all: no header
//! of the copy names them. The copy needs no log: the checkpoint has every commit acknowledged
//! before the backup began (and those made during the copy are not in it). The copied file and
//! the directories are synced before the backup returns, so the copy opens as an ordinary data
//! directory.

use std::path::Path;
use std::time::Instant;

use crate::engine::{Shared, elapsed_micros};
use crate::error::{Error, Result};
use crate::io::OpenMode;
use crate::recovery::{DATA_FILE, LOG_DIR};

/// What a backup copied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// Bytes of the data file copied.
    pub bytes: u64,
    /// The newest commit in the copy: every commit up to it, none after.
    pub checkpoint_seq: u64,
    /// From start to the copy being durable.
    pub micros: u64,
}

pub(crate) fn backup(shared: &Shared, destination: &Path) -> Result<BackupReport> {
    let Some(durable) = shared.durable.get() else {
        return Err(Error::InvalidArgument("an in-memory engine has no files to back up".into()));
    };
    let started = Instant::now();
    let fs = durable.fs.as_ref();
    crate::io::create_dir_all_durably(fs, &destination.join(LOG_DIR))?;
    // A directory that already holds a data file is refused, not overwritten.
    let target = fs.open(&destination.join(DATA_FILE), OpenMode::CreateNew)?;
    let mut state = durable.checkpoint.lock();
    crate::checkpoint::checkpoint_holding(shared, durable, &mut state)?;
    let checkpoint_seq = durable.data.read_header()?.map_or(0, |header| header.checkpoint_seq);
    let bytes = durable.data.copy_to(target.as_ref())?;
    drop(state);
    fs.sync_dir(&destination.join(LOG_DIR))?;
    fs.sync_dir(destination)?;
    Ok(BackupReport { bytes, checkpoint_seq, micros: elapsed_micros(started) })
}
