//! The redo log: every commit's writes, appended in commit order to segment files, synced in
//! groups.
//!
//! Group commit: commits append their framed record to an in-memory buffer under the engine's
//! commit lock (so log order is commit order). A commit that must be durable then calls
//! `sync_to(its end)`: the first such caller becomes the leader, writes the whole buffer and
//! syncs once for everyone waiting; the others wait on a condition variable. A maintenance thread
//! syncs every `sync_interval` when a `Periodic` commit is waiting; `None` commits are only
//! written when the buffer fills or someone syncs.
//!
//! A failed write or sync stops the log for good: it is never retried and no later commit is
//! acknowledged (a sync error may have dropped dirty pages; retrying could report success for
//! data that is gone). The engine must be reopened, which recovers from what is durable.
//!
//! Segments: `log/<number:016>.log`. A new segment starts once the current one passes
//! `segment_bytes`; the old one is synced first, and the directory synced after the new file is
//! created, so a record is durable only once every record before it is.

pub mod record;
pub mod replay;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::io::{File, FileSystem, OpenMode};

/// Bytes of buffered records that are written out even if nobody asked for a sync.
const WRITE_BEHIND_BYTES: usize = 1 << 20;

pub fn segment_path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:016}.log"))
}

pub fn parse_segment_name(name: &str) -> Option<u64> {
    name.strip_suffix(".log").filter(|n| n.len() == 16).and_then(|n| n.parse().ok())
}

struct State {
    file: Arc<dyn File>,
    segment: u64,
    /// Where in the current segment the buffer will be written.
    file_offset: u64,
    buffer: Vec<u8>,
    /// The previous buffer, emptied after its write, kept for reuse: growing a fresh megabyte
    /// buffer for every write cost more in page faults than the write itself.
    spare: Vec<u8>,
    /// Log positions count every byte appended since the log was opened.
    appended: u64,
    synced: u64,
    /// The highest position a `Periodic` commit waits to see synced.
    periodic_wanted: u64,
    syncing: bool,
    failed: Option<String>,
    /// The sizes of the segments before the current one still on disk (what replay would read
    /// after a crash, if no checkpoint removes them first).
    older_segments: std::collections::BTreeMap<u64, u64>,
}

pub struct Log {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    segment_bytes: u64,
    state: Mutex<State>,
    synced: Condvar,
    sync_count: std::sync::atomic::AtomicU64,
}

impl Log {
    /// Starts a new segment numbered `segment` for appends; `older_segments` are the numbers and
    /// sizes of those already in `dir` (counted in [`Log::disk_bytes`] until removed).
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        segment: u64,
        segment_bytes: u64,
        older_segments: &[(u64, u64)],
    ) -> Result<Log> {
        debug_assert!(
            older_segments.iter().all(|(number, _)| *number < segment),
            "a new segment comes after every old one"
        );
        let file = fs.open(&segment_path(dir, segment), OpenMode::Create)?;
        file.set_len(0)?;
        fs.sync_dir(dir)?;
        let state = State {
            file,
            segment,
            file_offset: 0,
            buffer: Vec::new(),
            spare: Vec::new(),
            appended: 0,
            synced: 0,
            periodic_wanted: 0,
            syncing: false,
            failed: None,
            older_segments: older_segments.iter().copied().collect(),
        };
        Ok(Log {
            fs,
            dir: dir.to_path_buf(),
            segment_bytes,
            state: Mutex::new(state),
            synced: Condvar::new(),
            sync_count: Default::default(),
        })
    }

    /// Appends records written by `encode` into the buffer; returns the log position after them.
    pub fn append(&self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<u64> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(Error::Stopped(failed.clone()));
        }
        if state.file_offset + state.buffer.len() as u64 >= self.segment_bytes {
            self.rotate(&mut state)?;
        }
        let before = state.buffer.len();
        encode(&mut state.buffer);
        state.appended += (state.buffer.len() - before) as u64;
        let end = state.appended;
        if state.buffer.len() >= WRITE_BEHIND_BYTES && !state.syncing {
            self.write_buffer(&mut state)?;
        }
        Ok(end)
    }

    /// Stops the log: no later commit is acknowledged (after a failure elsewhere in the engine).
    pub fn stop(&self, reason: &str) {
        let mut state = self.state.lock();
        if state.failed.is_none() {
            state.failed = Some(reason.to_string());
        }
        self.synced.notify_all();
    }

    pub fn appended(&self) -> u64 {
        self.state.lock().appended
    }

    /// Bytes of log on disk, or about to be written to the current segment: what a crash now
    /// would leave to replay if no checkpoint had run since the oldest segment.
    pub fn disk_bytes(&self) -> u64 {
        let state = self.state.lock();
        state.older_segments.values().sum::<u64>() + state.file_offset + state.buffer.len() as u64
    }

    pub fn syncs(&self) -> u64 {
        self.sync_count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes that a `Periodic` commit wants `position` synced by the maintenance thread.
    pub fn want_periodic(&self, position: u64) {
        let mut state = self.state.lock();
        state.periodic_wanted = state.periodic_wanted.max(position);
    }

    /// Syncs what periodic commits wait for, if anything (the maintenance thread's tick).
    pub fn sync_periodic(&self) -> Result<()> {
        let wanted = {
            let state = self.state.lock();
            if state.periodic_wanted <= state.synced {
                return Ok(());
            }
            state.periodic_wanted
        };
        self.sync_to(wanted)
    }

    /// Returns once everything up to `position` is durable.
    pub fn sync_to(&self, position: u64) -> Result<()> {
        let mut state = self.state.lock();
        loop {
            if let Some(failed) = &state.failed {
                return Err(Error::Stopped(failed.clone()));
            }
            if state.synced >= position {
                return Ok(());
            }
            if state.syncing {
                self.synced.wait(&mut state);
                continue;
            }
            state.syncing = true;
            let buffer = take_buffer(&mut state);
            let (file, offset, target) = (Arc::clone(&state.file), state.file_offset, state.appended);
            state.file_offset += buffer.len() as u64;
            drop(state);
            let result = file.write_all_at(&buffer, offset).and_then(|()| file.sync());
            self.sync_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            state = self.state.lock();
            state.syncing = false;
            recycle_buffer(&mut state, buffer);
            match result {
                Ok(()) => {
                    state.synced = state.synced.max(target);
                    debug_assert!(state.synced <= state.appended, "the log synced past what was appended");
                }
                Err(error) => state.failed = Some(format!("log write or sync failed: {error}")),
            }
            self.synced.notify_all();
        }
    }

    /// Everything appended so far, synced (clean shutdown, checkpoints).
    pub fn sync_all(&self) -> Result<()> {
        let position = self.state.lock().appended;
        self.sync_to(position)
    }

    /// Starts a new segment now (a checkpoint does, so that replay after it starts clean).
    pub fn rotate_now(&self) -> Result<u64> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(Error::Stopped(failed.clone()));
        }
        self.rotate(&mut state)?;
        Ok(state.segment)
    }

    pub fn remove_segments_before(&self, segment: u64) -> Result<()> {
        let mut removed = false;
        for name in self.fs.list(&self.dir)? {
            if let Some(number) = parse_segment_name(&name).filter(|n| *n < segment) {
                self.fs.remove(&segment_path(&self.dir, number))?;
                removed = true;
            }
        }
        if removed {
            self.fs.sync_dir(&self.dir)?;
        }
        self.state.lock().older_segments.retain(|number, _| *number >= segment);
        Ok(())
    }

    fn write_buffer(&self, state: &mut State) -> Result<()> {
        let buffer = take_buffer(state);
        let result = state.file.write_all_at(&buffer, state.file_offset);
        state.file_offset += buffer.len() as u64;
        recycle_buffer(state, buffer);
        if let Err(error) = result {
            state.failed = Some(format!("log write failed: {error}"));
            return Err(Error::Stopped(format!("log write failed: {error}")));
        }
        Ok(())
    }

    fn rotate(&self, state: &mut parking_lot::MutexGuard<'_, State>) -> Result<()> {
        while state.syncing {
            self.synced.wait(state);
        }
        let result = self.rotate_locked(state);
        if let Err(error) = &result {
            state.failed = Some(format!("log rotation failed: {error}"));
        }
        self.synced.notify_all();
        result
    }

    fn rotate_locked(&self, state: &mut State) -> Result<()> {
        self.write_buffer(state)?;
        state.file.sync()?;
        state.synced = state.appended;
        let next = state.segment + 1;
        let file = self.fs.open(&segment_path(&self.dir, next), OpenMode::Create)?;
        file.set_len(0)?;
        self.fs.sync_dir(&self.dir)?;
        let finished = state.file_offset;
        state.older_segments.insert(state.segment, finished);
        state.file = file;
        state.segment = next;
        state.file_offset = 0;
        Ok(())
    }
}

/// The most buffer memory kept for reuse; a larger one (after a huge commit) is let go.
const SPARE_MAX_BYTES: usize = 8 << 20;

/// Takes the filled buffer for writing, leaving the spare (empty) in its place.
fn take_buffer(state: &mut State) -> Vec<u8> {
    let spare = std::mem::take(&mut state.spare);
    std::mem::replace(&mut state.buffer, spare)
}

/// Keeps a written buffer as the spare.
fn recycle_buffer(state: &mut State, mut buffer: Vec<u8>) {
    if buffer.capacity() <= SPARE_MAX_BYTES && buffer.capacity() > state.spare.capacity() {
        buffer.clear();
        state.spare = buffer;
    }
}
