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
//! A failed sync stops the log for good: it is never retried and no later commit is
//! acknowledged (a sync error may have dropped dirty pages; retrying could report success for
//! data that is gone). The engine must be reopened, which recovers from what is durable.
//!
//! A failed *write* (a full disk) loses nothing: the bytes stay in the buffer, in front of
//! whatever is appended after them, and the log is *stalled*. Appends first retry the write and
//! are refused (their record not added) while it fails; each `sync_to` tries once and reports
//! the failure to everyone waiting; the maintenance thread's periodic sync retries too. The
//! first write that succeeds ends the stall, so writes resume by themselves once space is
//! freed. A retry rewrites from the same offset, over whatever prefix the failed write left.
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
    failed: Option<Error>,
    /// The last write failed (see the module header): the error, until a write succeeds.
    stalled: Option<Error>,
    /// Failed writes so far: a `sync_to` reports a stall only if one failed after it began.
    write_failures: u64,
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
            stalled: None,
            write_failures: 0,
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
    /// While the log is stalled (a write failed) the held bytes are written first; if that
    /// still fails, nothing is appended and the error is returned.
    pub fn append(&self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<u64> {
        let mut state = self.state.lock();
        if let Some(failed) = &state.failed {
            return Err(failed.clone());
        }
        if let Some(stalled) = &state.stalled {
            // A sync in flight is the retry; its outcome is not known yet.
            if state.syncing {
                return Err(stalled.clone());
            }
            self.write_buffer(&mut state)?;
        }
        if state.file_offset + state.buffer.len() as u64 >= self.segment_bytes {
            self.rotate(&mut state)?;
        }
        // Written behind before this record is added, so that a failed write refuses this
        // commit rather than holding it in a log that may never be written.
        if state.buffer.len() >= WRITE_BEHIND_BYTES && !state.syncing {
            self.write_buffer(&mut state)?;
        }
        let before = state.buffer.len();
        encode(&mut state.buffer);
        state.appended += (state.buffer.len() - before) as u64;
        Ok(state.appended)
    }

    /// Whether a write has failed and not yet succeeded again (a full disk).
    pub fn stalled(&self) -> Option<Error> {
        self.state.lock().stalled.clone()
    }

    /// Stops the log: no later commit is acknowledged (after a failure elsewhere in the engine).
    pub fn stop(&self, context: &'static str, cause: &Error) {
        let mut state = self.state.lock();
        if state.failed.is_none() {
            state.failed = Some(cause.clone().stopping(context));
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
            if state.stalled.is_some() {
                // Whatever is held, so that a stall ends without waiting for a commit.
                state.appended
            } else if state.periodic_wanted <= state.synced {
                return Ok(());
            } else {
                state.periodic_wanted
            }
        };
        self.sync_to(wanted)
    }

    /// Returns once everything up to `position` is durable. A write that fails while this
    /// waits (a full disk) is reported; the bytes stay held for the next attempt.
    pub fn sync_to(&self, position: u64) -> Result<()> {
        let mut state = self.state.lock();
        let failures_before = state.write_failures;
        loop {
            if let Some(failed) = &state.failed {
                return Err(failed.clone());
            }
            if state.synced >= position {
                return Ok(());
            }
            if state.write_failures > failures_before
                && let Some(stalled) = &state.stalled
            {
                return Err(stalled.clone());
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
            let written = file.write_all_at(&buffer, offset);
            let synced = written.is_ok().then(|| file.sync());
            self.sync_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            state = self.state.lock();
            state.syncing = false;
            match (written, synced) {
                (Err(error), _) => {
                    // Nothing of it counts: the bytes go back in front of what was appended
                    // since, to be written again from the same offset.
                    state.file_offset = offset;
                    let appended_since = std::mem::replace(&mut state.buffer, buffer);
                    state.buffer.extend_from_slice(&appended_since);
                    self.stall(&mut state, error.into());
                }
                (Ok(()), Some(Err(error))) => {
                    recycle_buffer(&mut state, buffer);
                    state.failed = Some(Error::from(error).stopping("log sync failed"));
                }
                (Ok(()), _) => {
                    recycle_buffer(&mut state, buffer);
                    state.stalled = None;
                    state.synced = state.synced.max(target);
                    debug_assert!(state.synced <= state.appended, "the log synced past what was appended");
                }
            }
            self.synced.notify_all();
        }
    }

    fn stall(&self, state: &mut State, error: Error) {
        state.stalled = Some(error);
        state.write_failures += 1;
    }

    /// Failed log writes so far (each one a retry refused by a full disk, or the first).
    pub fn write_failures(&self) -> u64 {
        self.state.lock().write_failures
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
            return Err(failed.clone());
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

    /// Writes the buffer at the current offset. On failure the bytes stay in the buffer and the
    /// log is stalled (see the module header); on success any stall ends.
    fn write_buffer(&self, state: &mut State) -> Result<()> {
        if let Err(error) = state.file.write_all_at(&state.buffer, state.file_offset) {
            let error = Error::from(error);
            self.stall(state, error.clone());
            self.synced.notify_all();
            return Err(error);
        }
        state.stalled = None;
        let buffer = take_buffer(state);
        state.file_offset += buffer.len() as u64;
        recycle_buffer(state, buffer);
        Ok(())
    }

    fn rotate(&self, state: &mut parking_lot::MutexGuard<'_, State>) -> Result<()> {
        while state.syncing {
            self.synced.wait(state);
        }
        let result = self.rotate_locked(state);
        self.synced.notify_all();
        result
    }

    /// Syncs the current segment and starts the next. A failed sync stops the log; a failed
    /// write or create leaves the current segment in use, to be rotated by a later append.
    fn rotate_locked(&self, state: &mut State) -> Result<()> {
        self.write_buffer(state)?;
        let stop = |state: &mut State, what: &'static str, error: std::io::Error| {
            let stopped = Error::from(error).stopping(what);
            state.failed = Some(stopped.clone());
            stopped
        };
        state.file.sync().map_err(|error| stop(state, "log rotation failed (sync)", error))?;
        state.synced = state.appended;
        let next = state.segment + 1;
        let file = self.fs.open(&segment_path(&self.dir, next), OpenMode::Create)?;
        file.set_len(0)?;
        self.fs.sync_dir(&self.dir).map_err(|error| stop(state, "log rotation failed (directory sync)", error))?;
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
