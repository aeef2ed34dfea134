//! Multi-document transactions: snapshot isolation over the engine's snapshots, writes that the
//! transaction's own reads see before they commit, atomic commit with one `applyOps` entry.
//!
//! A [`DocumentTransaction`] is a snapshot registered when it begins (its *base*) plus its
//! writes as the engine's `PendingWrites`. Its reads (`FindRequest::read_at`, `ReadAt`) see the
//! base with the pending writes on top; its writes go through the ordinary write path
//! (`DocumentWrite`) into the pending writes instead of an engine transaction. Commit stamps
//! one `applyOps` oplog entry with all its operations and commits the pending writes as one
//! engine transaction: all or nothing, durable as the write concern asks.
//!
//! Write conflicts are found when a document is written, as MongoDB finds them:
//! - a document another open transaction has written is held by it in the store's table
//!   ([`Holds`]): writing it fails at once with WriteConflict;
//! - a document whose latest committed version differs from the base's was changed by a
//!   commit after the transaction began: WriteConflict too (comparing values is enough to
//!   prevent lost updates: an equal value is exactly what the transaction read).
//!
//! Both checks run under the collection's write lock, as every non-transactional write does;
//! a non-transactional write that meets a held document releases the collection's lock, waits
//! for the holder to end ([`Holds::wait_released`]) and goes on with the document's new version.
//! A unique key taken by a commit after the base is found at commit (`KeyExists`): that too is
//! a WriteConflict.
//!
//! Known differences: collections and indexes a transaction creates are created at once, not
//! at commit; catalog changes (drop, rename, index builds) of a collection whose documents an
//! open transaction holds fail with ConflictingOperationInProgress instead of waiting; `count`
//! and `$lookup` inside a transaction read the latest committed state.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bson::Document;
use parking_lot::{Condvar, Mutex};
use storage::{PendingWrites, Snapshot, TreeId};

use crate::error::{Error, Result};

/// A document: its collection's tree and its encoded `_id`.
pub(crate) type DocumentKey = (TreeId, Vec<u8>);

/// The documents open transactions hold, by the transaction that holds each.
#[derive(Default)]
pub(crate) struct Holds {
    table: Mutex<HashMap<DocumentKey, u64>>,
    released: Condvar,
    /// Open transactions: while zero, writers skip the table.
    open: AtomicUsize,
    next_id: AtomicU64,
}

impl Holds {
    /// Whether any transaction is open.
    pub(crate) fn any_open(&self) -> bool {
        self.open.load(Ordering::Acquire) > 0
    }

    /// The transaction holding `key`, if any.
    pub(crate) fn holder(&self, key: &DocumentKey) -> Option<u64> {
        if !self.any_open() {
            return None;
        }
        self.table.lock().get(key).copied()
    }

    /// Whether an open transaction holds a document of `tree`.
    pub(crate) fn holds_any_in(&self, tree: TreeId) -> bool {
        self.any_open() && self.table.lock().keys().any(|(held, _)| *held == tree)
    }

    /// Waits until no transaction holds `key` (or `limit` passes); true if it waited.
    pub(crate) fn wait_released(&self, key: &DocumentKey, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut table = self.table.lock();
        let mut waited = false;
        while table.contains_key(key) {
            waited = true;
            if self.released.wait_until(&mut table, deadline).timed_out() {
                break;
            }
        }
        waited
    }

    fn take(&self, id: u64, key: DocumentKey) -> Result<bool> {
        let mut table = self.table.lock();
        match table.get(&key) {
            Some(holder) if *holder == id => Ok(false),
            Some(_) => Err(write_conflict()),
            None => {
                table.insert(key, id);
                Ok(true)
            }
        }
    }

    fn release(&self, keys: &[DocumentKey]) {
        let mut table = self.table.lock();
        for key in keys {
            table.remove(key);
        }
        drop(table);
        self.released.notify_all();
    }
}

pub(crate) fn write_conflict() -> Error {
    Error::WriteConflict(
        "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction."
            .into(),
    )
}

/// A transaction's view to read at: its base snapshot with its writes on top.
#[derive(Clone)]
pub struct ReadAt(pub(crate) Snapshot);

impl std::fmt::Debug for ReadAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadAt(seq {})", self.0.seq())
    }
}

/// An open multi-document transaction (see the module header). Dropped without `commit` or
/// `abort`, it aborts.
pub struct DocumentTransaction {
    id: u64,
    holds: Arc<Holds>,
    pub(crate) base: Snapshot,
    pub(crate) pending: Arc<PendingWrites>,
    /// Oplog operations, for the one `applyOps` entry at commit.
    pub(crate) operations: Vec<Document>,
    /// Pre-images of those operations, by index (collections with `changeStreamPreAndPostImages`).
    pub(crate) images: Vec<(u32, Vec<u8>)>,
    held: Vec<DocumentKey>,
    /// Counter deltas (documents, bytes, per collection and index), summed per key and written
    /// once at commit: a counter updated by every statement would otherwise carry one version
    /// per statement into the engine. (Nothing reads them inside a transaction: `count` and
    /// the statistics commands are not allowed in one.)
    counters: HashMap<(TreeId, Vec<u8>), i64>,
    /// Applying another member's operations (`Store::begin_replicated_batch`): the primary
    /// checked them and nothing else writes here, so documents are not held and unique keys are
    /// not checked again.
    pub(crate) replicating: bool,
    pub started: Instant,
    ended: bool,
}

impl DocumentTransaction {
    pub(crate) fn begin(holds: &Arc<Holds>, base: Snapshot, pending: PendingWrites) -> DocumentTransaction {
        holds.open.fetch_add(1, Ordering::AcqRel);
        DocumentTransaction {
            id: holds.next_id.fetch_add(1, Ordering::Relaxed),
            holds: Arc::clone(holds),
            base,
            pending: Arc::new(pending),
            operations: Vec::new(),
            images: Vec::new(),
            held: Vec::new(),
            counters: HashMap::new(),
            replicating: false,
            started: Instant::now(),
            ended: false,
        }
    }

    /// Adds `delta` to the counter `key` of `tree`, at commit.
    pub(crate) fn add_to_counter(&mut self, tree: TreeId, key: Vec<u8>, delta: i64) {
        *self.counters.entry((tree, key)).or_default() += delta;
    }

    /// Writes the summed counter deltas into the pending writes, before a commit.
    fn write_counters(&mut self) {
        let counters = std::mem::take(&mut self.counters);
        for ((tree, key), delta) in counters.into_iter().filter(|(_, delta)| *delta != 0) {
            self.writes().update(tree, key, delta.to_le_bytes().to_vec());
        }
    }

    /// The view this transaction's reads see now.
    pub fn read_at(&self) -> ReadAt {
        ReadAt(self.base.with_pending(Arc::clone(&self.pending)))
    }

    /// Whether it has written anything.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Holds `key` for this transaction, or fails with WriteConflict if another holds it or a
    /// commit changed it after the base.
    ///
    /// The newest committed state is read only once the hold is taken: a transaction that held
    /// the document releases it after its commit is visible, so a snapshot taken before the
    /// take could predate that commit and let its update be lost.
    pub(crate) fn hold(&mut self, key: DocumentKey, engine: &storage::Engine) -> Result<()> {
        if self.replicating || !self.holds.take(self.id, key.clone())? {
            return Ok(());
        }
        let latest = engine.snapshot();
        if latest.get(key.0, &key.1)? != self.base.get(key.0, &key.1)? {
            self.holds.release(std::slice::from_ref(&key));
            return Err(write_conflict());
        }
        self.held.push(key);
        Ok(())
    }

    /// The pending writes, to add to (copied only while a reader still holds them).
    pub(crate) fn writes(&mut self) -> &mut PendingWrites {
        Arc::make_mut(&mut self.pending)
    }

    /// Ends the transaction: its holds are released (after a commit, or for an abort).
    pub(crate) fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.holds.release(&self.held);
            self.held.clear();
            self.holds.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The largest `applyOps` entry a transaction may commit (MongoDB 4.0's limit: a document and
/// the 16 KiB it allows a command around one). The entry is one oplog entry, replicated as one
/// consensus entry in one message between members (at most 48 MB): a larger one would commit
/// here and never reach the others. (MongoDB 4.2+ splits a larger transaction over several
/// entries; Strata does not yet.)
const MAX_TRANSACTION_ENTRY_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

impl DocumentTransaction {
    /// Commits the transaction's writes as one engine transaction, with one `applyOps` entry
    /// (naming `session`) when `oplog` is kept; a unique key taken by a commit since the
    /// transaction began is a WriteConflict. The caller trims the oplog and syncs the log.
    pub(crate) fn commit(
        mut self,
        (engine, sessions_tree): (&storage::Engine, storage::TreeId),
        oplog: Option<&crate::oplog::Oplog>,
        session: Option<(&Document, i64)>,
        durability: storage::Durability,
    ) -> Result<()> {
        self.write_counters();
        if self.is_empty() {
            self.end();
            return Ok(());
        }
        if let Some((key, value)) = session.and_then(|(lsid, number)| crate::retry::commit_record(lsid, number)) {
            self.writes().put(sessions_tree, key.to_vec(), value);
        }
        let pending = std::mem::replace(&mut self.pending, Arc::new(engine.pending()));
        let pending = Arc::try_unwrap(pending).unwrap_or_else(|shared| (*shared).clone());
        let operations = std::mem::take(&mut self.operations);
        let committed = match oplog.filter(|_| !operations.is_empty()) {
            Some(oplog) => {
                let images = std::mem::take(&mut self.images);
                let mut entry =
                    crate::oplog::Entry::command("admin", &bson::doc! {"applyOps": operations})?.with_images(images);
                if let Some((lsid, txn_number)) = session {
                    entry = entry.with_session(lsid, txn_number, None)?;
                }
                if entry.len() > MAX_TRANSACTION_ENTRY_BYTES {
                    self.end();
                    return Err(Error::TransactionTooLarge(format!(
                        "Total size of all transaction operations must be less than {MAX_TRANSACTION_ENTRY_BYTES}. \
                         Actual size is {}",
                        entry.len()
                    )));
                }
                oplog.commit_pending(engine, pending, vec![entry], durability).map(|_| ())
            }
            None => engine.commit_pending(pending, durability).map(|_| ()),
        };
        self.end();
        match committed {
            Ok(()) => Ok(()),
            Err(storage::Error::KeyExists { .. }) => Err(write_conflict()),
            Err(other) => Err(other.into()),
        }
    }
}

impl DocumentTransaction {
    /// Commits a batch of another member's operations applied into this transaction (see
    /// `oplog::apply`), writing their entries as that member wrote them, in one engine
    /// transaction. The caller trims the oplog.
    pub(crate) fn commit_replicated(
        mut self,
        engine: &storage::Engine,
        oplog: &crate::oplog::Oplog,
        entries: Vec<Vec<u8>>,
        durability: storage::Durability,
    ) -> Result<()> {
        self.write_counters();
        let pending = std::mem::replace(&mut self.pending, Arc::new(engine.pending()));
        let pending = Arc::try_unwrap(pending).unwrap_or_else(|shared| (*shared).clone());
        let committed = oplog.commit_pending_raw(engine, pending, entries, durability);
        self.end();
        match committed {
            Ok(()) => Ok(()),
            Err(storage::Error::KeyExists { .. }) => Err(write_conflict()),
            Err(other) => Err(other.into()),
        }
    }
}

impl Drop for DocumentTransaction {
    fn drop(&mut self) {
        self.end();
    }
}
