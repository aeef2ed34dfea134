//! [`Store`]: an open database store, and how it runs ([`StoreOptions`]). The store owns its
//! engine and shared state (the [`crate::context::Context`]) and answers what concerns the
//! whole store — databases, the oplog and change streams, transactions and sessions, figures,
//! checkpoints and backups. What concerns one collection is on its handle,
//! [`Store::collection`] ([`crate::Collection`]).

use std::path::Path;
use std::sync::Arc;

use bson::{Document, RawDocumentBuf};
use parking_lot::Mutex;
use storage::{BackupReport, Durability, Engine};

use crate::catalog::{DatabaseInfo, ddl};
use crate::collection::Collection;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::ttl::TtlMonitor;
pub use crate::options::StoreOptions;
use crate::read::find::Cursor;
use crate::transaction::{DocumentTransaction, ReadAt};
use crate::{AggregateOptions, CollectionInfo, Namespace, change_stream, oplog, read, retry};

/// An open database store.
pub struct Store {
    pub(crate) cx: Arc<Context>,
    ttl: Mutex<Option<TtlMonitor>>,
    /// The collections this open rebuilt from an older key format, for the server's log.
    upgraded: Vec<String>,
}

impl Store {
    /// The handle of one collection (which need not exist: writes create it, reads of a
    /// missing collection find nothing, as in MongoDB).
    pub fn collection(&self, namespace: impl Into<Namespace>) -> Collection<'_> {
        Collection::new(&self.cx, namespace.into())
    }

    /// Runs a database-level pipeline (`aggregate: 1`: `$documents`, `$currentOp`...), which
    /// reads no collection.
    pub fn aggregate_database(&self, db: &str, pipeline: &[Document], options: &AggregateOptions) -> Result<Cursor> {
        self.cx.aggregate(db, None, pipeline, options)
    }

    /// Opens (or creates) a durable store in `dir`, recovering what a crash left.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<Store> {
        let engine = Engine::open(dir, engine_options(&options))?;
        Store::start(engine, options)
    }

    /// [`Store::open`] on another file system (tests: `storage::io::SimFs`'s crashes and
    /// faults).
    pub fn open_with(fs: Arc<dyn storage::io::FileSystem>, dir: &Path, options: StoreOptions) -> Result<Store> {
        let engine = Engine::open_with(fs, dir, engine_options(&options))?;
        Store::start(engine, options)
    }

    /// The collections this open rebuilt because they were written in an older key format
    /// (`catalog::key_format`); empty on later opens.
    pub fn upgraded_collections(&self) -> &[String] {
        &self.upgraded
    }

    /// A store whose data lives in memory only.
    pub fn open_in_memory(options: StoreOptions) -> Result<Store> {
        let engine = Engine::open_in_memory(engine_options(&options))?;
        Store::start(engine, options)
    }

    fn start(engine: Engine, options: StoreOptions) -> Result<Store> {
        let interval = options.ttl_interval;
        let cx = Arc::new(Context::open(engine, options)?);
        let upgraded = Store::finish_open(&cx)?;
        let ttl = TtlMonitor::start(&cx, interval)?;
        Ok(Store { cx, ttl: Mutex::new(Some(ttl)), upgraded })
    }

    /// What an open does after the catalog is read: rebuild the collections written in an
    /// older key format ([`crate::catalog::key_format`]; not in a salvaging open, which must not
    /// rewrite what it reads), then finish the index builds a crash (or that rebuild) left
    /// unbuilt. Returns the collections rebuilt.
    fn finish_open(cx: &Arc<Context>) -> Result<Vec<String>> {
        let upgraded = match cx.engine.options().salvage {
            true => Vec::new(),
            false => crate::catalog::key_format::upgrade_key_formats(cx)?,
        };
        for (db, name, index) in cx.catalog.unfinished_index_builds() {
            crate::index::build::build(cx, &db, &name, &index)?;
        }
        Ok(upgraded)
    }

    /// Clean shutdown: stops the TTL monitor and closes the engine (a checkpoint). Fails with
    /// `Busy` while another thread is inside a call on this store.
    pub fn close(self) -> Result<()> {
        if let Some(mut ttl) = self.ttl.lock().take() {
            ttl.stop();
        }
        match Arc::try_unwrap(self.cx) {
            Ok(cx) => Ok(cx.engine.close()?),
            Err(_) => Err(Error::Busy("the store is still in use".into())),
        }
    }

    // Replication.

    /// Keeps an oplog (`local.oplog.rs`) of at most `cap_bytes` from now on: every change
    /// commits its entries with it (see [`oplog`]). Calling it again changes the cap.
    pub fn enable_oplog(&self, cap_bytes: u64) -> Result<Arc<oplog::Oplog>> {
        if let Some(oplog) = self.cx.oplog() {
            oplog.set_cap_bytes(cap_bytes);
            return Ok(oplog);
        }
        ddl::ensure_system_collection(&self.cx, oplog::DB, oplog::COLLECTION, Document::new())?;
        let collection = self.cx.catalog.existing(oplog::DB, oplog::COLLECTION)?;
        let counters = self.cx.catalog.counters(&self.cx.engine, &collection)?;
        let images = crate::catalog::ensure_tree(&self.cx.engine, oplog::IMAGES_TREE)?;
        let trees = (self.cx.catalog.counts_tree(), images);
        let opened = Arc::new(oplog::Oplog::open(&self.cx.engine, collection, trees, counters, cap_bytes)?);
        self.cx.keep_oplog(Arc::clone(&opened));
        Ok(opened)
    }

    /// The oplog, if this store keeps one.
    pub fn oplog(&self) -> Option<Arc<oplog::Oplog>> {
        self.cx.oplog()
    }

    /// Whether this store makes changes of its own accord (the TTL monitor's deletes): true
    /// for a standalone and a primary; false on a secondary, which applies the primary's
    /// ([`Store::apply_replicated`]).
    pub fn set_originates(&self, originates: bool) {
        self.cx.originates.store(originates, std::sync::atomic::Ordering::Release);
    }

    /// Whether another member's index builds are applied here (and copied by an initial sync):
    /// false on a replica set's `buildIndexes: false` member, which keeps only `_id` indexes
    /// (the entries are still written to its oplog).
    pub fn set_builds_indexes(&self, builds: bool) {
        self.cx.builds_indexes.store(builds, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn builds_indexes(&self) -> bool {
        self.cx.builds_indexes.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The member's consensus log (see [`crate::RaftLog`]).
    pub fn raft_log(&self) -> Result<crate::RaftLog> {
        crate::raft_log::RaftLog::open(&self.cx)
    }

    /// Opens a change stream over `scope`; `stages` is the whole pipeline, `$changeStream`
    /// first (see [`change_stream`]).
    pub fn watch(&self, scope: change_stream::Scope, stages: &[Document]) -> Result<change_stream::ChangeStream> {
        self.cx.watch(scope, stages)
    }

    /// A tailable cursor over the oplog's entries matching `filter` (see [`oplog::tail`]).
    pub fn tail_oplog(&self, filter: &Document) -> Result<oplog::tail::Tail> {
        self.cx.tail_oplog(filter)
    }

    /// Bounds what change streams return to the oplog entries up to `limit()` (see
    /// [`crate::ChangeStreamLimit`]); `None` lifts the bound. A stream waits at the
    /// bound and goes on from there when it moves.
    pub fn set_change_stream_limit(&self, limit: Option<crate::ChangeStreamLimit>) {
        self.cx.set_change_stream_limit(limit);
    }

    /// Registers a callback run after every insert into a capped collection.
    pub fn on_capped_insert(&self, listener: Box<dyn Fn() + Send + Sync>) {
        self.cx.on_capped_insert(listener);
    }

    /// Appends a no-op entry to the oplog (if kept), e.g. "initiating set".
    pub fn append_noop(&self, msg: &str, durability: Durability) -> Result<()> {
        let Some(oplog) = self.oplog() else { return Ok(()) };
        oplog.commit(self.cx.engine.begin(), vec![oplog::Entry::noop(msg)?], durability)?;
        Ok(())
    }

    /// Oplog entries after `after`, oldest first, at most `limit`, read at one snapshot.
    pub fn oplog_after(&self, after: bson::Timestamp, limit: usize) -> Result<Vec<(bson::Timestamp, RawDocumentBuf)>> {
        self.oplog_after_bounded(after, (limit, usize::MAX))
    }

    /// [`Store::oplog_after`], stopping once the entries pass `max_bytes` (one at least).
    pub fn oplog_after_bounded(
        &self,
        after: bson::Timestamp,
        (limit, max_bytes): (usize, usize),
    ) -> Result<Vec<(bson::Timestamp, RawDocumentBuf)>> {
        let Some(oplog) = self.oplog() else { return Ok(Vec::new()) };
        let snapshot = self.cx.engine.snapshot();
        oplog
            .read_after_bounded(&snapshot, after, (limit, max_bytes))?
            .into_iter()
            .map(|(ts, bytes)| Ok((ts, read::scan::raw(bytes)?)))
            .collect()
    }

    /// The oplog entry at `ts`: `Ok(None)` if the oplog holds none there, and also (`Err` is
    /// for failures) when `ts` is older than the oldest entry kept — see [`Store::oplog_first`].
    pub fn oplog_entry(&self, ts: bson::Timestamp) -> Result<Option<RawDocumentBuf>> {
        let Some(oplog) = self.oplog() else { return Ok(None) };
        let snapshot = self.cx.engine.snapshot();
        match oplog.read_from(&snapshot, ts, 1)?.into_iter().next() {
            Some((found, bytes)) if found == ts => Ok(Some(read::scan::raw(bytes)?)),
            _ => Ok(None),
        }
    }

    /// Forgets every database but `local`, and every oplog entry: a replica-set member whose
    /// data left the set's history (it was primary and wrote what the set never committed)
    /// starts again from nothing and applies the set's history.
    pub fn reset_for_resync(&self) -> Result<()> {
        for db in self.database_names() {
            if db != oplog::DB {
                self.drop_database(&db)?;
            }
        }
        if let Some(oplog) = self.oplog() {
            oplog.clear(&self.cx.engine)?;
        }
        Ok(())
    }

    /// The oldest oplog entry's `ts` still kept (the cap trims older ones).
    pub fn oplog_first(&self) -> Result<Option<bson::Timestamp>> {
        let Some(oplog) = self.oplog() else { return Ok(None) };
        oplog.first(&self.cx.engine.snapshot())
    }

    /// Makes everything committed so far durable in the data files.
    pub fn checkpoint(&self) -> Result<()> {
        Ok(self.cx.engine.checkpoint()?)
    }

    /// Hot backup: a consistent copy of the whole store, as of now, in `destination` (a new
    /// data directory), while writes go on (see `storage::Engine::backup`).
    pub fn backup(&self, destination: &Path) -> Result<BackupReport> {
        Ok(self.cx.engine.backup(destination)?)
    }

    pub fn list_collections(&self, db: &str) -> Vec<CollectionInfo> {
        self.cx.catalog.list_collections(db)
    }

    /// The names of the databases that hold a collection; unlike `list_databases`, reads no
    /// counters (so it answers on a damaged store).
    pub fn database_names(&self) -> Vec<String> {
        self.cx.catalog.database_names()
    }

    pub fn list_databases(&self) -> Result<Vec<DatabaseInfo>> {
        self.cx.catalog.list_databases(&self.cx.engine)
    }

    pub fn drop_database(&self, db: &str) -> Result<()> {
        ddl::drop_database(&self.cx, db)
    }

    // Multi-document transactions (see [`transaction`]).

    /// Whether any multi-document transaction is open.
    pub fn transactions_open(&self) -> bool {
        self.cx.holds.any_open()
    }

    /// Begins a transaction at the latest committed state.
    pub fn begin_transaction(&self) -> DocumentTransaction {
        DocumentTransaction::begin(&self.cx.holds, self.cx.engine.snapshot(), self.cx.engine.pending())
    }

    /// Begins a transaction reading `at` (a snapshot read's view, for `atClusterTime`: a
    /// snapshot taken earlier and still held).
    pub fn begin_transaction_at(&self, at: &ReadAt) -> DocumentTransaction {
        DocumentTransaction::begin(&self.cx.holds, at.0.clone(), self.cx.engine.pending())
    }

    /// Commits a transaction atomically (one engine transaction, one `applyOps` oplog entry
    /// naming `session`: lsid and txnNumber); durable as `durability` asks. A unique key taken
    /// by a commit since the transaction began is a WriteConflict.
    pub fn commit_transaction(
        &self,
        txn: DocumentTransaction,
        durability: Durability,
        session: Option<(&Document, i64)>,
    ) -> Result<()> {
        // The log is synced after the commit (by `make_durable`), so that concurrent commits
        // share syncs.
        let under_lock = match durability {
            Durability::Immediate => Durability::None,
            other => other,
        };
        let oplog = self.cx.oplog();
        txn.commit((&self.cx.engine, self.cx.sessions_tree), oplog.as_deref(), session, under_lock)?;
        if let Some(oplog) = oplog
            && let Err(error) = oplog.trim_if_full(&self.cx.engine)
        {
            tracing::warn!(%error, "trimming the oplog failed");
        }
        self.cx.make_durable(durability)
    }

    /// A view of the latest committed state and its cluster time (the oplog's newest `ts`), for
    /// readConcern `snapshot`; `None` without an oplog.
    pub fn snapshot_now(&self) -> Option<(ReadAt, bson::Timestamp)> {
        let oplog = self.oplog()?;
        let (snapshot, ts) = oplog.snapshot_at_last(&self.cx.engine);
        Some((ReadAt(snapshot), ts))
    }

    // Retryable writes (see [`retry`]).

    /// The result a session's statement recorded, if it was executed.
    pub fn executed(&self, lsid: &[u8; 16], txn_number: i64, stmt_id: i32) -> Result<Option<Document>> {
        let snapshot = self.cx.engine.snapshot();
        retry::executed(&snapshot, self.cx.sessions_tree, lsid, txn_number, stmt_id)
    }

    /// Whether the session's multi-document transaction `txn_number` committed here (or was
    /// replicated here committed): a retried `commitTransaction` that finds no transaction in
    /// progress is answered from this.
    pub fn transaction_committed(&self, lsid: &[u8; 16], txn_number: i64) -> Result<bool> {
        retry::transaction_committed(&self.cx.engine.snapshot(), self.cx.sessions_tree, lsid, txn_number)
    }

    /// The highest `txnNumber` a session has records of.
    pub fn last_txn_number(&self, lsid: &[u8; 16]) -> Result<Option<i64>> {
        let snapshot = self.cx.engine.snapshot();
        retry::last_txn_number(&snapshot, self.cx.sessions_tree, lsid)
    }

    /// Forgets a session's records (it ended or expired).
    pub fn forget_session(&self, lsid: &[u8; 16]) -> Result<()> {
        let mut txn = self.cx.engine.begin();
        retry::forget(&mut txn, self.cx.sessions_tree, lsid);
        txn.commit(Durability::Periodic)?;
        Ok(())
    }

    pub fn db_stats(&self, db: &str, scale: u64) -> Result<Document> {
        crate::stats::db_stats(&self.cx, db, scale)
    }

    pub fn engine_stats(&self) -> storage::Stats {
        self.cx.engine.stats()
    }

    /// Runs one TTL pass now (tests; the monitor runs it every `ttl_interval`).
    pub fn expire_now(&self) -> Result<u64> {
        crate::index::ttl::expire_once(&self.cx)
    }

    /// The engine's own invariant check (tests).
    pub fn verify_engine(&self) -> Result<()> {
        Ok(self.cx.engine.verify()?)
    }
}

fn engine_options(options: &StoreOptions) -> storage::Options {
    let mut engine = options.engine.clone();
    engine.update = storage::counter_update();
    engine
}

#[cfg(test)]
mod tests {
    /// The server shares one store across tasks and parks cursors between getMore calls.
    #[test]
    fn store_and_cursor_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<super::Store>();
        send::<super::Cursor>();
    }
}
