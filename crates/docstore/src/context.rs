//! The store's one context: the engine it owns and the state every operation shares — the
//! [`Catalog`], the oplog (once kept), the sessions' retry records, the documents open
//! transactions hold, the capped collections' listeners and the indexes' usage counters.
//! Operations take a `&Context` (`cx`) and reach everything through it; nothing else owns
//! a piece of this state.
//!
//! The context sits below every operation: it depends on the catalog, the oplog, the
//! transactions' holds and the usage counters, never on the operations that use it (the
//! steps of an open that run operations, and `enable_oplog`, are [`crate::Store`]'s).
//!
//! Logging: when the store keeps an oplog, every change commits its entries in the same engine
//! transaction as the change ([`Context::commit_logged`]); changes to `local` are never logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bson::{Document, Uuid};
use parking_lot::RwLock;
use storage::{Durability, Engine, TreeId};

use crate::catalog::Descriptor;
use crate::catalog::{self, Catalog};
use crate::error::{Error, Result};
use crate::index::usage::Usage;
use crate::oplog::{self, Entry, Oplog};
use crate::options::StoreOptions;
use crate::transaction::Holds;

type Listener = Box<dyn Fn() + Send + Sync>;

pub(crate) struct Context {
    pub engine: Engine,
    pub options: StoreOptions,
    pub catalog: Catalog,
    /// `__sessions`: retryable writes' statement records ([`crate::retry`]).
    pub sessions_tree: TreeId,
    /// Documents held by open multi-document transactions (the document-level locks).
    pub holds: Arc<Holds>,
    /// How often each index served a query (`$indexStats`).
    pub index_usage: Usage,
    /// The oplog, once the store keeps one.
    oplog: RwLock<Option<Arc<Oplog>>>,
    /// Called after every insert into a capped collection (tailable cursors waiting for data).
    capped_listeners: RwLock<Vec<Listener>>,
    /// Numbers temporary trees (sort spills) and collections (`$out`) uniquely within this
    /// process.
    temp_counter: AtomicU64,
    /// Whether this store makes changes of its own accord (TTL deletes): not on a replica
    /// set's secondary, which only applies the primary's ([`crate::Store::set_originates`]).
    pub originates: AtomicBool,
    /// Whether applying another member's entries builds secondary indexes: not on a replica
    /// set's `buildIndexes: false` member ([`crate::Store::set_builds_indexes`]).
    pub builds_indexes: AtomicBool,
    /// How far change streams may read the oplog ([`crate::Store::set_change_stream_limit`]).
    change_stream_limit: RwLock<Option<ChangeStreamLimit>>,
}

/// The newest oplog `ts` a change stream may return (`None`: all of it): on a replica set's
/// primary, the majority commit point, so that no event is ever one a rollback undoes.
pub type ChangeStreamLimit = Arc<dyn Fn() -> Option<bson::Timestamp> + Send + Sync>;

impl Context {
    pub(crate) fn open(engine: Engine, options: StoreOptions) -> Result<Context> {
        let catalog = Catalog::open(&engine, options.document_compression)?;
        let sessions_tree = catalog::ensure_tree(&engine, crate::retry::SESSIONS_TREE)?;
        let cx = Context {
            engine,
            options,
            catalog,
            sessions_tree,
            holds: Arc::default(),
            index_usage: Usage::default(),
            oplog: RwLock::new(None),
            capped_listeners: RwLock::new(Vec::new()),
            temp_counter: AtomicU64::new(0),
            originates: AtomicBool::new(true),
            builds_indexes: AtomicBool::new(true),
            change_stream_limit: RwLock::new(None),
        };
        Ok(cx)
    }

    /// Makes the document writes committed so far as durable as `durability` asks, once their
    /// collection locks are released (see `write::under_lock`): for `Immediate`, a log sync
    /// that concurrent writers share.
    pub(crate) fn make_durable(&self, durability: Durability) -> Result<()> {
        match durability {
            Durability::Immediate => Ok(self.engine.sync()?),
            Durability::Periodic | Durability::None => Ok(()),
        }
    }

    /// `outcome`, once the writes before it are as durable as asked (whether it succeeded or
    /// not: an earlier statement's writes may stand).
    pub(crate) fn made_durable<T>(&self, durability: Durability, outcome: Result<T>) -> Result<T> {
        self.make_durable(durability)?;
        outcome
    }

    /// A number for a temporary name, unique in this process.
    pub(crate) fn temp_number(&self) -> u64 {
        self.temp_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// A temporary tree name, unique in this process (dropped when done, or at the next open).
    pub(crate) fn temp_tree_name(&self) -> String {
        format!("{}{}.{}", catalog::TEMP_TREE_PREFIX, std::process::id(), self.temp_number())
    }

    // The oplog.

    /// The oplog, if the store keeps one.
    pub(crate) fn oplog(&self) -> Option<Arc<Oplog>> {
        self.oplog.read().clone()
    }

    /// From now on, every change appends its entries to `oplog` ([`crate::Store::enable_oplog`]).
    pub(crate) fn keep_oplog(&self, oplog: Arc<Oplog>) {
        *self.oplog.write() = Some(oplog);
    }

    /// Whether changes to `db` are logged (never those of `local`, as in MongoDB).
    pub(crate) fn logs(&self, db: &str) -> bool {
        db != oplog::DB && self.oplog.read().is_some()
    }

    /// Commits `txn` with `entries` in the oplog (when the store keeps one and `db` is logged),
    /// then trims the oplog if it is full; returns the commit's sequence number. A storage error
    /// (a `KeyExists` the caller describes) comes back as it is.
    pub(crate) fn commit_logged(
        &self,
        txn: storage::Transaction<'_>,
        db: &str,
        entries: Vec<Entry>,
        durability: Durability,
    ) -> std::result::Result<storage::Seq, storage::Error> {
        let Some(oplog) = self.oplog().filter(|_| db != oplog::DB && !entries.is_empty()) else {
            return txn.commit(durability);
        };
        let (seq, _) = oplog.commit(txn, entries, durability)?;
        if let Err(error) = oplog.trim_if_full(&self.engine) {
            // Nothing changed (the next commit tries again); the engine counts I/O failures.
            tracing::warn!(%error, "trimming the oplog failed");
        }
        Ok(seq)
    }

    /// A command entry for `db`, when changes to it are logged, with the UUID (`ui`) of the
    /// collection it changes, if it changes one.
    pub(crate) fn command_entries(&self, db: &str, command: Document, collection: Option<Uuid>) -> Result<Vec<Entry>> {
        if !self.logs(db) {
            return Ok(Vec::new());
        }
        Ok(vec![Entry::command(db, &command)?.with_collection_uuid(collection)])
    }

    // Shared state of the collections.

    /// Refuses a catalog change of a collection whose documents an open transaction holds.
    pub(crate) fn check_not_held(&self, collection: &Descriptor) -> Result<()> {
        if self.holds.holds_any_in(collection.tree) {
            return Err(Error::ConflictingOperation(format!(
                "an open transaction holds documents of {}; retry after it ends",
                collection.namespace()
            )));
        }
        Ok(())
    }

    pub(crate) fn set_change_stream_limit(&self, limit: Option<ChangeStreamLimit>) {
        *self.change_stream_limit.write() = limit;
    }

    /// The newest `ts` change streams may read now, if bounded.
    pub(crate) fn change_stream_limit(&self) -> Option<bson::Timestamp> {
        self.change_stream_limit.read().as_ref().and_then(|limit| limit())
    }

    /// Registers a callback run after each insert into a capped collection.
    pub(crate) fn on_capped_insert(&self, listener: Listener) {
        self.capped_listeners.write().push(listener);
    }

    pub(crate) fn capped_inserted(&self) {
        for listener in self.capped_listeners.read().iter() {
            listener();
        }
    }
}
