//! The oplog: `local.oplog.rs`, the ordered record of every change, as a replica set keeps it.
//!
//! A store keeps an oplog once the server runs as a replica set ([`crate::Store::enable_oplog`]).
//! From then on every change (a document inserted, updated or deleted, a collection or an
//! index created or dropped, a rename) appends its entries ([`entry::Entry`]) **in the same
//! engine transaction** as the change itself, so after any crash a change and its entry are
//! both there or neither is. `ts` values increase in commit order: the oplog's ordering lock is
//! held from stamping an entry to its commit (microseconds: the engine's commit lock is taken
//! inside it anyway, and a durable commit's sync waits after both are released).
//!
//! The entries live in an ordinary collection tree, keyed by `ts` ([`entry::key`]), so `find`
//! reads `local.oplog.rs` in timestamp order; writes from users are refused. The oplog is capped
//! by size: once its entries pass the cap, the oldest are deleted (in their own transaction;
//! the entries trimmed are never part of a change).
//!
//! Readers that wait for new entries (change streams, tailable cursors) register a callback
//! ([`Oplog::on_append`]) that every commit with entries calls once; the store knows no runtime.

pub(crate) mod apply;
pub(crate) mod diff;
pub(crate) mod entry;
pub(crate) mod initial_sync;
pub(crate) mod tail;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bson::Timestamp;
use parking_lot::{Mutex, RwLock};
use storage::{Durability, Engine, PendingWrites, Seq, Snapshot, Transaction, Writes};

use crate::catalog::Descriptor;
use crate::error::Result;

pub(crate) use entry::Entry;

/// Where the oplog lives.
pub(crate) const DB: &str = "local";
pub(crate) const COLLECTION: &str = "oplog.rs";

/// Entries deleted per trimming transaction.
const TRIM_BATCH: usize = 1000;

type Listener = Box<dyn Fn() + Send + Sync>;

/// The store's oplog.
pub struct Oplog {
    collection: Arc<Descriptor>,
    /// Held from stamping entries to committing them, so `ts` order is commit order.
    order: Mutex<Timestamp>,
    /// The newest committed entry's `ts` (as its u64 form).
    last: AtomicU64,
    /// Bytes and entries held now (the collection's counters, kept here too for trimming).
    bytes: AtomicI64,
    count: AtomicI64,
    cap_bytes: AtomicU64,
    /// Only one trim at a time.
    trimming: Mutex<()>,
    /// The newest `ts` trimming deleted (u64 form; 0: none since the oplog was opened or
    /// cleared). Trims and `first` read from just after it: the deleted entries stay in the
    /// tree as tombstones until the engine flushes them out, and a scan from the start would
    /// step over all of them each time, which made every write of a full oplog slower than
    /// the last.
    trimmed_through: AtomicU64,
    /// The term stamped into new entries (`t`): the consensus term this member leads in.
    term: AtomicI64,
    /// Trimming keeps every entry after this `ts` (u64 form): a primary's entries not yet in
    /// the consensus log ([`Oplog::keep_after`]).
    keep_after: AtomicU64,
    listeners: RwLock<Vec<Listener>>,
    counts_tree: storage::TreeId,
    /// Pre-images of changed documents (`changeStreamPreAndPostImages`), trimmed with the
    /// entries they belong to.
    images_tree: storage::TreeId,
}

/// The tree of pre-images.
pub(crate) const IMAGES_TREE: &str = "__preimages";

impl Oplog {
    /// Opens the oplog over its collection (which exists), reading its newest entry and counters.
    pub fn open(
        engine: &Engine,
        collection: Arc<Descriptor>,
        (counts_tree, images_tree): (storage::TreeId, storage::TreeId),
        counters: (i64, i64),
        cap_bytes: u64,
    ) -> Result<Oplog> {
        let snapshot = engine.snapshot();
        let last = match snapshot.iter(collection.tree).next_back().transpose()? {
            Some((key, _)) => entry::key_timestamp(&key).unwrap_or(Timestamp { time: 0, increment: 0 }),
            None => Timestamp { time: 0, increment: 0 },
        };
        Ok(Oplog {
            collection,
            order: Mutex::new(last),
            last: AtomicU64::new(as_u64(last)),
            count: AtomicI64::new(counters.0),
            bytes: AtomicI64::new(counters.1),
            cap_bytes: AtomicU64::new(cap_bytes),
            trimming: Mutex::new(()),
            trimmed_through: AtomicU64::new(0),
            term: AtomicI64::new(entry::TERM),
            keep_after: AtomicU64::new(u64::MAX),
            listeners: RwLock::new(Vec::new()),
            counts_tree,
            images_tree,
        })
    }

    pub fn collection(&self) -> &Arc<Descriptor> {
        &self.collection
    }

    /// The newest entry's timestamp (zero when the oplog is empty).
    pub fn last(&self) -> Timestamp {
        from_u64(self.last.load(Ordering::Acquire))
    }

    pub fn cap_bytes(&self) -> u64 {
        self.cap_bytes.load(Ordering::Relaxed)
    }

    pub fn set_cap_bytes(&self, cap: u64) {
        self.cap_bytes.store(cap, Ordering::Relaxed);
    }

    /// Bytes and entries the oplog holds.
    pub fn size(&self) -> (i64, i64) {
        (self.count.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed))
    }

    /// The term new entries carry (`t`); a member that becomes primary sets its own.
    pub fn set_term(&self, term: i64) {
        self.term.store(term, Ordering::Release);
    }

    pub fn term(&self) -> i64 {
        self.term.load(Ordering::Acquire)
    }

    /// From now on trimming keeps every entry after `ts` (a replica set's primary: the entries
    /// it has not proposed yet), whatever the cap.
    pub fn keep_after(&self, ts: Timestamp) {
        self.keep_after.store(as_u64(ts), Ordering::Release);
    }

    /// Calls `listener` after each commit that appended entries.
    pub fn on_append(&self, listener: Listener) {
        self.listeners.write().push(listener);
    }

    /// Commits `txn` with `entries` appended to the oplog, stamped in commit order. Returns the
    /// commit's sequence number and the last entry's timestamp. The caller trims
    /// ([`Oplog::trim_if_full`]).
    pub fn commit(
        &self,
        txn: Transaction<'_>,
        entries: Vec<Entry>,
        durability: Durability,
    ) -> storage::Result<(Seq, Timestamp)> {
        self.commit_with(txn, entries, |txn| txn.commit(durability))
    }

    /// [`Oplog::commit`] for a multi-document transaction's pending writes.
    pub fn commit_pending(
        &self,
        engine: &Engine,
        pending: PendingWrites,
        entries: Vec<Entry>,
        durability: Durability,
    ) -> storage::Result<(Seq, Timestamp)> {
        self.commit_with(pending, entries, |pending| engine.commit_pending(pending, durability))
    }

    fn commit_with<W: Writes>(
        &self,
        mut writes: W,
        entries: Vec<Entry>,
        commit: impl FnOnce(W) -> storage::Result<Seq>,
    ) -> storage::Result<(Seq, Timestamp)> {
        if let Some(replicated) = apply::take_replicated() {
            // Applying another member's entry: it replaces the entries this commit built.
            return self.commit_replicated(writes, replicated, commit);
        }
        let clock = self.order.lock();
        let mut ts = *clock;
        let term = self.term();
        let mut stamped = Vec::with_capacity(entries.len());
        for mut entry in entries {
            ts = next(ts);
            for (index, image) in entry.take_images() {
                writes.put(self.images_tree, entry::image_key(ts, index).to_vec(), image);
            }
            stamped.push((ts, entry.stamp(ts, term)));
        }
        self.commit_stamped(writes, clock, stamped, commit)
    }

    /// Puts entries already stamped (in `ts` order, after the clock), commits, and moves the
    /// clock, the counters and the listeners on; the clock is held until the commit is done.
    fn commit_stamped<W: Writes>(
        &self,
        mut writes: W,
        mut clock: parking_lot::MutexGuard<'_, Timestamp>,
        stamped: Vec<(Timestamp, Vec<u8>)>,
        commit: impl FnOnce(W) -> storage::Result<Seq>,
    ) -> storage::Result<(Seq, Timestamp)> {
        let count = stamped.len() as i64;
        let last = stamped.last().map_or(*clock, |(ts, _)| *ts);
        let mut bytes = 0i64;
        for (ts, entry) in stamped {
            bytes += entry.len() as i64;
            writes.put(self.collection.tree, entry::key(ts).to_vec(), entry);
        }
        writes.update(self.counts_tree, self.collection.count_key.clone(), count.to_le_bytes().to_vec());
        writes.update(self.counts_tree, self.collection.size_key.clone(), bytes.to_le_bytes().to_vec());
        let seq = commit(writes)?;
        *clock = last;
        self.last.store(as_u64(last), Ordering::Release);
        drop(clock);
        self.count.fetch_add(count, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        for listener in self.listeners.read().iter() {
            listener();
        }
        Ok((seq, last))
    }

    /// Commits `txn` with an entry another member wrote (its bytes, `ts` and all).
    pub(crate) fn commit_raw(&self, txn: Transaction<'_>, entry: Vec<u8>, durability: Durability) -> Result<()> {
        self.commit_replicated(txn, Some(entry), |txn| txn.commit(durability))?;
        Ok(())
    }

    /// Commits a batch of another member's operations, applied into `pending`, with their
    /// entries (their bytes, `ts` and all, in `ts` order).
    pub(crate) fn commit_pending_raw(
        &self,
        engine: &Engine,
        pending: PendingWrites,
        entries: Vec<Vec<u8>>,
        durability: Durability,
    ) -> storage::Result<()> {
        self.commit_replicated(pending, entries, |pending| engine.commit_pending(pending, durability))?;
        Ok(())
    }

    /// Commits `writes` with `replicated` (entries another member wrote, in `ts` order; none
    /// for a commit that logs nothing). Each `ts` must be after the one before, the first after
    /// this oplog's last (the applier checks first).
    fn commit_replicated<W: Writes>(
        &self,
        writes: W,
        replicated: impl IntoIterator<Item = Vec<u8>>,
        commit: impl FnOnce(W) -> storage::Result<Seq>,
    ) -> storage::Result<(Seq, Timestamp)> {
        let mut stamped = Vec::new();
        for bytes in replicated {
            let ts = bson::RawDocument::from_bytes(&bytes)
                .ok()
                .and_then(|entry| entry.get_timestamp("ts").ok())
                .ok_or_else(|| storage::Error::InvalidArgument("a replicated oplog entry without a ts".into()))?;
            stamped.push((ts, bytes));
        }
        if stamped.is_empty() {
            let seq = commit(writes)?;
            return Ok((seq, self.last()));
        }
        let clock = self.order.lock();
        let mut after = *clock;
        for (ts, _) in &stamped {
            if *ts <= after {
                // Another commit logged meanwhile (a member applying must write nothing else),
                // or the batch is out of order.
                return Err(storage::Error::InvalidArgument(format!(
                    "replicated oplog entry {ts:?} is not after {after:?}"
                )));
            }
            after = *ts;
        }
        self.commit_stamped(writes, clock, stamped, commit)
    }

    /// Deletes the oldest entries until the oplog is within its cap (always keeping the newest);
    /// one trim at a time (a writer that finds one under way goes on).
    pub fn trim_if_full(&self, engine: &Engine) -> Result<()> {
        if self.bytes.load(Ordering::Relaxed) as u64 <= self.cap_bytes() {
            return Ok(());
        }
        let Some(_trimming) = self.trimming.try_lock() else { return Ok(()) };
        while self.bytes.load(Ordering::Relaxed) as u64 > self.cap_bytes() && self.count.load(Ordering::Relaxed) > 1 {
            let snapshot = engine.snapshot();
            let mut txn = engine.begin();
            let (mut count, mut bytes) = (0i64, 0i64);
            let excess = self.bytes.load(Ordering::Relaxed) - self.cap_bytes() as i64;
            let remaining = self.count.load(Ordering::Relaxed);
            let mut last = None;
            let keep_after = self.keep_after.load(Ordering::Acquire);
            for item in self.oldest_onward(&snapshot).take(TRIM_BATCH) {
                let (key, value) = item?;
                if bytes >= excess || count + 1 >= remaining {
                    break;
                }
                if entry::key_timestamp(&key).is_some_and(|ts| as_u64(ts) > keep_after) {
                    break;
                }
                bytes += value.len() as i64;
                count += 1;
                last = entry::key_timestamp(&key);
                txn.delete(self.collection.tree, key);
            }
            let Some(last) = last else { break };
            txn.delete_range(self.images_tree, Vec::new(), Some(entry::image_key(last, u32::MAX).to_vec()));
            txn.update(self.counts_tree, self.collection.count_key.clone(), (-count).to_le_bytes().to_vec());
            txn.update(self.counts_tree, self.collection.size_key.clone(), (-bytes).to_le_bytes().to_vec());
            txn.commit(Durability::Periodic)?;
            self.trimmed_through.store(as_u64(last), Ordering::Release);
            self.count.fetch_sub(count, Ordering::Relaxed);
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The entries from the oldest one held, skipping what trimming already deleted.
    fn oldest_onward(&self, snapshot: &Snapshot) -> storage::RangeIter {
        match self.trimmed_through.load(Ordering::Acquire) {
            0 => snapshot.iter(self.collection.tree),
            trimmed => {
                let after = entry::key(from_u64(trimmed));
                snapshot.range(self.collection.tree, (Bound::Excluded(&after[..]), Bound::Unbounded))
            }
        }
    }

    /// Deletes every entry (a member that left the set's history starts its oplog again, see
    /// [`crate::Store::reset_for_resync`]); the next entry may have any `ts`.
    pub(crate) fn clear(&self, engine: &Engine) -> Result<()> {
        let _trimming = self.trimming.lock();
        let mut clock = self.order.lock();
        let (count, bytes) = (self.count.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed));
        let mut txn = engine.begin();
        txn.delete_range(self.collection.tree, Vec::new(), None);
        txn.delete_range(self.images_tree, Vec::new(), None);
        txn.update(self.counts_tree, self.collection.count_key.clone(), (-count).to_le_bytes().to_vec());
        txn.update(self.counts_tree, self.collection.size_key.clone(), (-bytes).to_le_bytes().to_vec());
        txn.commit(Durability::Immediate)?;
        *clock = Timestamp { time: 0, increment: 0 };
        self.last.store(0, Ordering::Release);
        self.trimmed_through.store(0, Ordering::Release);
        self.count.fetch_sub(count, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Entries after `after` (exclusive), oldest first, at `snapshot`, at most `limit`.
    pub fn read_after(&self, snapshot: &Snapshot, after: Timestamp, limit: usize) -> Result<Vec<(Timestamp, Vec<u8>)>> {
        self.read(snapshot, std::ops::Bound::Excluded(after), (limit, usize::MAX))
    }

    /// [`Oplog::read_after`], stopping once the entries pass `max_bytes` (always one at least).
    pub fn read_after_bounded(
        &self,
        snapshot: &Snapshot,
        after: Timestamp,
        (limit, max_bytes): (usize, usize),
    ) -> Result<Vec<(Timestamp, Vec<u8>)>> {
        self.read(snapshot, std::ops::Bound::Excluded(after), (limit, max_bytes))
    }

    /// Entries from `from` (inclusive), oldest first, at `snapshot`, at most `limit`.
    pub fn read_from(&self, snapshot: &Snapshot, from: Timestamp, limit: usize) -> Result<Vec<(Timestamp, Vec<u8>)>> {
        self.read(snapshot, std::ops::Bound::Included(from), (limit, usize::MAX))
    }

    fn read(
        &self,
        snapshot: &Snapshot,
        lower: std::ops::Bound<Timestamp>,
        (limit, max_bytes): (usize, usize),
    ) -> Result<Vec<(Timestamp, Vec<u8>)>> {
        use std::ops::Bound;
        let start = match lower {
            Bound::Included(ts) | Bound::Excluded(ts) => entry::key(ts),
            Bound::Unbounded => [0; 8],
        };
        let lower = match lower {
            Bound::Excluded(_) => Bound::Excluded(start.as_slice()),
            _ => Bound::Included(start.as_slice()),
        };
        let mut entries = Vec::new();
        let mut bytes = 0;
        for item in snapshot.range::<(Bound<&[u8]>, Bound<&[u8]>)>(self.collection.tree, (lower, Bound::Unbounded)) {
            let (key, value) = item?;
            bytes += value.len();
            if !entries.is_empty() && bytes > max_bytes {
                break;
            }
            if let Some(ts) = entry::key_timestamp(&key) {
                entries.push((ts, value));
            }
            if entries.len() >= limit {
                break;
            }
        }
        Ok(entries)
    }

    /// The pre-image kept for operation `index` of the entry at `ts`, if any.
    pub fn pre_image(&self, snapshot: &Snapshot, ts: Timestamp, index: u32) -> Result<Option<Vec<u8>>> {
        Ok(snapshot.get(self.images_tree, &entry::image_key(ts, index))?)
    }

    /// A snapshot and the cluster time it is at: every entry up to that `ts` and none after
    /// (taken under the ordering lock, between commits that log).
    pub fn snapshot_at_last(&self, engine: &Engine) -> (Snapshot, Timestamp) {
        let _order = self.order.lock();
        (engine.snapshot(), self.last())
    }

    /// The oldest entry's timestamp still held.
    pub fn first(&self, snapshot: &Snapshot) -> Result<Option<Timestamp>> {
        Ok(self.oldest_onward(snapshot).next().transpose()?.and_then(|(key, _)| entry::key_timestamp(&key)))
    }
}

/// The timestamp after `previous`: this second's next increment, or the first of a later second.
fn next(previous: Timestamp) -> Timestamp {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as u32;
    if now > previous.time {
        Timestamp { time: now, increment: 1 }
    } else if previous.increment == u32::MAX {
        Timestamp { time: previous.time + 1, increment: 1 }
    } else {
        Timestamp { time: previous.time, increment: previous.increment + 1 }
    }
}

pub(crate) fn as_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

pub(crate) fn from_u64(value: u64) -> Timestamp {
    Timestamp { time: (value >> 32) as u32, increment: value as u32 }
}
