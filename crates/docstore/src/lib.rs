//! Strata's embedded database: databases, collections, indexes, a planner and an executor over
//! the `storage` engine. The server calls this API; so can any Rust program that wants Strata
//! in-process.
//!
//! # Using it
//!
//! ```no_run
//! use docstore::{Store, StoreOptions, FindRequest};
//! use docstore::Durability;
//! # fn main() -> docstore::Result<()> {
//! let store = Store::open(std::path::Path::new("data"), StoreOptions::default())?;
//! let doc = bson::rawdoc! { "name": "ada" };
//! let outcome = store.insert("test", "people", vec![doc], true, Durability::Periodic);
//! assert!(outcome.errors.is_empty());
//! let cursor = store.find("test", "people", &FindRequest { filter: bson::doc! {"name": "ada"}, ..Default::default() })?;
//! for document in cursor { let _raw: bson::RawDocumentBuf = document?; }
//! store.close()?;
//! # Ok(()) }
//! ```
//!
//! [`Store`] is `Send + Sync`; share it in an `Arc`. Every method takes `&self`.
//!
//! | area | methods |
//! |---|---|
//! | open/close | [`Store::open`], [`Store::open_in_memory`], [`Store::close`], [`Store::checkpoint`] |
//! | catalog | `create_collection`, `drop_collection`, `list_collections`, `list_databases`, `drop_database`, `rename_collection` |
//! | writes | `insert` → [`InsertOutcome`] (per-document errors by position), `update` → [`UpdateOutcome`], `delete` → count, `find_and_modify` → [`FindAndModifyOutcome`] |
//! | reads | `find` → [`Cursor`] (holds its snapshot: keep it across getMore; [`Cursor::next_batch`]), `count`, `estimated_document_count` (a counter, not a scan), `distinct`, `aggregate` → [`Cursor`], `explain` |
//! | indexes | `create_indexes` → [`CreateIndexesOutcome`], `drop_indexes` ([`IndexSelector`]), `list_indexes` (listIndexes' documents) |
//! | figures | `coll_stats`, `db_stats` (MongoDB-shaped documents without `ok`), `engine_stats`, `validate` |
//!
//! Errors are one [`Error`] enum; [`Error::code`] and [`Error::code_name`] are the MongoDB code
//! and codeName to reply with. A duplicate key is [`Error::DuplicateKey`] with `key_pattern` and
//! `key_value` (the `keyPattern`/`keyValue` of MongoDB's write error); its `Display` is
//! MongoDB's `E11000 duplicate key error collection: ...` message. Operations on a collection
//! that does not exist behave as in MongoDB: reads return nothing, writes create it (except
//! `delete`/non-upsert `update`, which do nothing), `drop_collection` returns `Ok(false)`.
//!
//! Durability: every write takes a [`Durability`] (`Immediate` for `j: true`,
//! `Periodic` for the default, `None` for `w: 0`). Catalog changes are always `Immediate`.
//!
//! # Inside
//!
//! - [`catalog`]: the [`catalog::Catalog`] — the durable catalog (`__catalog`, `__counts`)
//!   and its cache of collection descriptors, catalog operations (create, drop, rename, list),
//!   the collection locks and their rules; entries and name rules in `catalog/entry.rs`.
//!   [`collection`]: the descriptors. [`store`]: the shared state (engine, options, catalog)
//!   and open.
//! - [`index`]: entry layout (`index/mod.rs` header), specs and conflicts (`spec`), builds and
//!   drop/list (`build`), the TTL monitor (`ttl`), the keys of text, geospatial and wildcard
//!   indexes (`text`, `geo`, `wildcard`), access counters for `$indexStats` (`usage`).
//! - [`write`]: one engine transaction per document (or per group of whole documents) with its
//!   index entries and counters (`write/mod.rs`); `insert`, `update` (+ findAndModify), `delete`.
//! - [`read`]: `bounds` (filters to key ranges), `planner`, `scan` (access methods), `find`
//!   (cursor, sort with spilling, count, distinct), `explain`, `$text` (`text`) and
//!   `$near`/`$geoNear` (`geo`) queries.
//! - [`aggregate`] (pipelines streamed from a find cursor into a lazy cursor, and the
//!   `CollectionSource` for `$lookup`/`$unionWith`/`$out`/`$merge`), [`spill`] (temporary
//!   trees for sorts and aggregation stages past their memory limits), [`stats`]
//!   (collStats/dbStats from counters), [`validate`].
//! - [`operation`]: the operation a thread runs (entered by the caller): reads stop at their
//!   next entry once it is killed or past its time limit, and count what they examined.
//!
//! Invariants: a document and all its index entries change in one engine transaction; every
//! write to a collection holds its write lock and maintains every index, ready or building;
//! readers take no lock and read one snapshot; stored documents are the client's bytes (an
//! inserted document is never re-encoded; one without `_id` gets an ObjectId prepended).

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod aggregate;
pub mod capped;
pub mod catalog;
pub mod change_stream;
pub mod collection;
pub mod compression;
pub mod entry_filter;
pub mod error;
pub mod index;
pub mod operation;
pub mod oplog;
pub mod read;
pub mod retry;
mod salvage;
pub mod spill;
pub mod stats;
pub mod store;
pub mod timeseries;
pub mod transaction;
pub mod validate;
pub mod validation;
pub mod write;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bson::{Bson, Document, RawDocumentBuf};
use parking_lot::Mutex;
use storage::Engine;

pub use aggregate::AggregateOptions;
pub use collection::{CollectionInfo, DatabaseInfo};
pub use entry_filter::EntryFilter;
pub use error::{Error, Result};
pub use index::build::{CreateIndexesOutcome, IndexSelector};
/// A statement's `collation` (ICU's string order for a language), parsed by the caller.
pub use query::collation::Collation;
/// A statement's variables (`let`, `$$NOW`, `$$CLUSTER_TIME`), made by the caller once per command.
pub use query::expr::Variables;
pub use read::explain::Verbosity;
pub use read::find::{Cursor, FindRequest};
pub use read::planner::Hint;
pub use retry::{Retry, WriteOptions};
/// The process's resident memory, as the engine reads it for its own budget (the server's
/// admission of large messages uses the same figure).
pub use storage::allocator::resident_bytes;
/// What a server needs of the engine, through the docstore (its one door): the durability a
/// write asks for, and the engine's statistics.
pub use storage::{BackupReport, CompactReport, Durability, Stats as EngineStats};
pub use transaction::{DocumentTransaction, ReadAt};
pub use validate::ValidateReport;
pub use write::delete::DeleteRequest;
pub use write::insert::InsertOutcome;
pub use write::update::{FindAndModifyOutcome, FindAndModifyRequest, UpdateModification, UpdateOutcome, UpdateRequest};

use crate::index::ttl::TtlMonitor;
use crate::store::Inner;

/// How a store runs.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The engine's options (its `update` function is always the counter update: the store's
    /// counters need it).
    pub engine: storage::Options,
    /// How often the TTL monitor deletes expired documents.
    pub ttl_interval: Duration,
    /// A blocking sort's memory (find's, aggregation's `$sort`) before it fails with 292 or
    /// (with allowDiskUse) spills.
    pub sort_memory_limit_bytes: usize,
    /// The memory of aggregation's `$group` (also `$sortByCount`'s) and `$bucketAuto` before
    /// they fail with 292 or (with allowDiskUse) spill.
    pub group_memory_limit_bytes: usize,
    /// How collections' documents are compressed unless a collection's `storageEngine` option
    /// says otherwise (`None`: as the engine's `compression`, like every other tree). zstd at
    /// level 1 by default: documents are mostly written once (appended in `_id` order) and
    /// compress far better with it, while index trees, rewritten again and again as random
    /// keys arrive beyond memory, keep the engine's faster LZ4 (docs/BENCHMARKS.md, "Space").
    pub document_compression: Option<storage::Compression>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            engine: storage::Options::default(),
            ttl_interval: Duration::from_secs(60),
            sort_memory_limit_bytes: 100 * 1024 * 1024,
            group_memory_limit_bytes: 100 * 1024 * 1024,
            document_compression: Some(storage::Compression::Zstd(1)),
        }
    }
}

/// An open database store.
pub struct Store {
    inner: Arc<Inner>,
    ttl: Mutex<Option<TtlMonitor>>,
}

impl Store {
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
        &self.inner.upgraded
    }

    /// A store whose data lives in memory only.
    pub fn open_in_memory(options: StoreOptions) -> Result<Store> {
        let engine = Engine::open_in_memory(engine_options(&options))?;
        Store::start(engine, options)
    }

    fn start(engine: Engine, options: StoreOptions) -> Result<Store> {
        let interval = options.ttl_interval;
        let inner = Arc::new(Inner::open(engine, options)?);
        let ttl = TtlMonitor::start(&inner, interval)?;
        Ok(Store { inner, ttl: Mutex::new(Some(ttl)) })
    }

    /// Clean shutdown: stops the TTL monitor and closes the engine (a checkpoint). Fails with
    /// `Busy` while another thread is inside a call on this store.
    pub fn close(self) -> Result<()> {
        if let Some(mut ttl) = self.ttl.lock().take() {
            ttl.stop();
        }
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => Ok(inner.engine.close()?),
            Err(_) => Err(Error::Busy("the store is still in use".into())),
        }
    }

    // Replication.

    /// Keeps an oplog (`local.oplog.rs`) of at most `cap_bytes` from now on: every change
    /// commits its entries with it (see [`oplog`]). Calling it again changes the cap.
    pub fn enable_oplog(&self, cap_bytes: u64) -> Result<Arc<oplog::Oplog>> {
        self.inner.catalog.enable_oplog(&self.inner.engine, cap_bytes)
    }

    /// The oplog, if this store keeps one.
    pub fn oplog(&self) -> Option<Arc<oplog::Oplog>> {
        self.inner.catalog.oplog()
    }

    /// Opens a change stream over `scope`; `stages` is the whole pipeline, `$changeStream`
    /// first (see [`change_stream`]).
    pub fn watch(&self, scope: change_stream::Scope, stages: &[Document]) -> Result<change_stream::ChangeStream> {
        self.inner.watch(scope, stages)
    }

    /// A tailable cursor over the oplog's entries matching `filter` (see [`oplog::tail`]).
    pub fn tail_oplog(&self, filter: &Document) -> Result<oplog::tail::Tail> {
        self.inner.tail_oplog(filter)
    }

    /// A tailable cursor over a capped collection's documents matching `filter`, in insertion
    /// order (see [`capped`]).
    pub fn tail_capped(&self, db: &str, name: &str, filter: &Document) -> Result<oplog::tail::Tail> {
        self.inner.tail_capped(db, name, filter)
    }

    /// `convertToCapped`: replaces the collection by a capped one of `size` bytes holding its
    /// documents (see [`capped`]).
    pub fn convert_to_capped(&self, db: &str, name: &str, size: i64) -> Result<()> {
        self.inner.convert_to_capped(db, name, size)?;
        self.inner.make_durable(Durability::Immediate)
    }

    /// Registers a callback run after every insert into a capped collection.
    pub fn on_capped_insert(&self, listener: Box<dyn Fn() + Send + Sync>) {
        self.inner.catalog.on_capped_insert(listener);
    }

    /// Appends a no-op entry to the oplog (if kept), e.g. "initiating set".
    pub fn append_noop(&self, msg: &str, durability: Durability) -> Result<()> {
        let Some(oplog) = self.oplog() else { return Ok(()) };
        oplog.commit(self.inner.engine.begin(), vec![oplog::Entry::noop(msg)?], durability)?;
        Ok(())
    }

    /// Oplog entries after `after`, oldest first, at most `limit`, read at one snapshot.
    pub fn oplog_after(&self, after: bson::Timestamp, limit: usize) -> Result<Vec<(bson::Timestamp, RawDocumentBuf)>> {
        let Some(oplog) = self.oplog() else { return Ok(Vec::new()) };
        let snapshot = self.inner.engine.snapshot();
        oplog
            .read_after(&snapshot, after, limit)?
            .into_iter()
            .map(|(ts, bytes)| Ok((ts, read::scan::raw(bytes)?)))
            .collect()
    }

    /// Makes everything committed so far durable in the data files.
    pub fn checkpoint(&self) -> Result<()> {
        Ok(self.inner.engine.checkpoint()?)
    }

    /// Hot backup: a consistent copy of the whole store, as of now, in `destination` (a new
    /// data directory), while writes go on (see `storage::Engine::backup`).
    pub fn backup(&self, destination: &Path) -> Result<BackupReport> {
        Ok(self.inner.engine.backup(destination)?)
    }

    /// Gives the data file's free space back to the operating system while writes go on
    /// (`storage::Engine::compact`). Named by a collection, as MongoDB's `compact` is; one
    /// file holds every collection, so the whole file is compacted.
    pub fn compact(&self, db: &str, collection: &str) -> Result<CompactReport> {
        self.inner.catalog.existing(db, collection)?;
        Ok(self.inner.engine.compact()?)
    }

    // Catalog.

    /// Creates a collection, or a view when the options have `viewOn` (and `pipeline`).
    pub fn create_collection(&self, db: &str, name: &str, options: Document) -> Result<()> {
        self.create_collection_as(db, name, options, None)
    }

    /// `create_collection`, keeping a UUID the collection had (`strata repair`; a view has none).
    pub fn create_collection_as(
        &self,
        db: &str,
        name: &str,
        options: Document,
        uuid: Option<bson::Uuid>,
    ) -> Result<()> {
        if options.contains_key("viewOn") {
            return self.inner.catalog.create_view(&self.inner.engine, db, name, &options);
        }
        // (bson's default UUID is a new random one.)
        let uuid = uuid.unwrap_or_default();
        let collection = self.inner.catalog.create_collection_as(&self.inner.engine, db, name, options, uuid)?;
        // A time-series collection with a metaField gets MongoDB's default index.
        if let Some(index) = collection.timeseries.as_ref().and_then(timeseries::TimeSeries::default_index) {
            self.create_indexes(db, name, &[index])?;
        }
        Ok(())
    }

    /// Creates one of the server's own collections (`admin.system.users`, `admin.system.roles`,
    /// a database's `system.profile`) with `options` if it does not exist; user writes may not
    /// create `system.*` collections, but once one exists the ordinary reads and writes reach it.
    pub fn ensure_system_collection(&self, db: &str, name: &str, options: Document) -> Result<()> {
        self.inner.catalog.ensure_system_collection(&self.inner.engine, db, name, options)
    }

    /// `collMod`: sets collection options (each key to its value).
    pub fn set_collection_options(&self, db: &str, name: &str, options: Document) -> Result<()> {
        self.inner.catalog.set_options(&self.inner.engine, db, name, options)
    }

    /// `collMod`'s `index` option: `expireAfterSeconds` and/or `hidden` of one index.
    pub fn modify_index(&self, db: &str, name: &str, selector: &IndexSelector, changes: &Document) -> Result<Document> {
        self.inner.catalog.modify_index(&self.inner.engine, db, name, selector, changes)
    }

    /// `Ok(false)` when the collection did not exist.
    pub fn drop_collection(&self, db: &str, name: &str) -> Result<bool> {
        self.inner.catalog.drop_collection(&self.inner.engine, db, name)
    }

    pub fn list_collections(&self, db: &str) -> Vec<CollectionInfo> {
        self.inner.catalog.list_collections(db)
    }

    /// The names of the databases that hold a collection; unlike `list_databases`, reads no
    /// counters (so it answers on a damaged store).
    pub fn database_names(&self) -> Vec<String> {
        self.inner.catalog.database_names()
    }

    pub fn list_databases(&self) -> Result<Vec<DatabaseInfo>> {
        self.inner.catalog.list_databases(&self.inner.engine)
    }

    pub fn drop_database(&self, db: &str) -> Result<()> {
        self.inner.catalog.drop_database(&self.inner.engine, db)
    }

    /// Renames `from` (db, collection) to `to`; `drop_target` replaces an existing target.
    pub fn rename_collection(&self, from: (&str, &str), to: (&str, &str), drop_target: bool) -> Result<()> {
        self.inner.catalog.rename_collection(&self.inner.engine, from, to, drop_target)
    }

    // Writes.

    /// Inserts documents (creating the collection if needed); errors by position. With
    /// `Durability::Immediate`, every document inserted (even when others failed) is durable
    /// before this returns, or `durability_error` says why not. `options` is a durability, or
    /// [`WriteOptions`] with a retryable write's statements to record.
    pub fn insert<'a>(
        &self,
        db: &str,
        name: &str,
        documents: Vec<RawDocumentBuf>,
        ordered: bool,
        options: impl Into<WriteOptions<'a>>,
    ) -> InsertOutcome {
        let mut options = options.into();
        let durability = options.durability;
        let (mut writer, durable_now) = options.writer();
        let mut outcome = self.inner.insert(db, name, documents, ordered, &mut writer);
        if durable_now {
            outcome.durability_error = self.inner.make_durable(durability).err();
        }
        outcome
    }

    pub fn update<'a>(
        &self,
        db: &str,
        name: &str,
        request: &UpdateRequest,
        options: impl Into<WriteOptions<'a>>,
    ) -> Result<UpdateOutcome> {
        let mut options = options.into();
        let durability = options.durability;
        let (mut writer, durable_now) = options.writer();
        let outcome = self.inner.update(db, name, request, &mut writer);
        self.durable_if(durable_now, durability, outcome)
    }

    /// Returns how many documents were deleted.
    pub fn delete<'a>(
        &self,
        db: &str,
        name: &str,
        request: &DeleteRequest,
        options: impl Into<WriteOptions<'a>>,
    ) -> Result<u64> {
        let mut options = options.into();
        let durability = options.durability;
        let (mut writer, durable_now) = options.writer();
        let outcome = self.inner.delete(db, name, request, &mut writer);
        self.durable_if(durable_now, durability, outcome)
    }

    pub fn find_and_modify<'a>(
        &self,
        db: &str,
        name: &str,
        request: &FindAndModifyRequest,
        options: impl Into<WriteOptions<'a>>,
    ) -> Result<FindAndModifyOutcome> {
        let mut options = options.into();
        let durability = options.durability;
        let (mut writer, durable_now) = options.writer();
        let outcome = self.inner.find_and_modify(db, name, request, &mut writer);
        self.durable_if(durable_now, durability, outcome)
    }

    fn durable_if<T>(&self, durable_now: bool, durability: Durability, outcome: Result<T>) -> Result<T> {
        match durable_now {
            true => self.inner.made_durable(durability, outcome),
            false => outcome,
        }
    }

    // Multi-document transactions (see [`transaction`]).

    /// Whether any multi-document transaction is open.
    pub fn transactions_open(&self) -> bool {
        self.inner.catalog.holds().any_open()
    }

    /// Begins a transaction at the latest committed state.
    pub fn begin_transaction(&self) -> DocumentTransaction {
        self.inner.begin_transaction()
    }

    /// Begins a transaction reading `at` (a snapshot read's view, for `atClusterTime`).
    pub fn begin_transaction_at(&self, at: &ReadAt) -> DocumentTransaction {
        self.inner.begin_transaction_at(at)
    }

    /// A view of the latest committed state and its cluster time (the oplog's newest `ts`), for
    /// readConcern `snapshot`; `None` without an oplog.
    pub fn snapshot_now(&self) -> Option<(ReadAt, bson::Timestamp)> {
        let oplog = self.oplog()?;
        let (snapshot, ts) = oplog.snapshot_at_last(&self.inner.engine);
        Some((ReadAt(snapshot), ts))
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
        self.inner.commit_transaction(txn, durability, session)
    }

    // Retryable writes (see [`retry`]).

    /// The result a session's statement recorded, if it was executed.
    pub fn executed(&self, lsid: &[u8; 16], txn_number: i64, stmt_id: i32) -> Result<Option<Document>> {
        let snapshot = self.inner.engine.snapshot();
        retry::executed(&snapshot, self.inner.catalog.sessions_tree(), lsid, txn_number, stmt_id)
    }

    /// The highest `txnNumber` a session has records of.
    pub fn last_txn_number(&self, lsid: &[u8; 16]) -> Result<Option<i64>> {
        let snapshot = self.inner.engine.snapshot();
        retry::last_txn_number(&snapshot, self.inner.catalog.sessions_tree(), lsid)
    }

    /// Forgets a session's records (it ended or expired).
    pub fn forget_session(&self, lsid: &[u8; 16]) -> Result<()> {
        let mut txn = self.inner.engine.begin();
        retry::forget(&mut txn, self.inner.catalog.sessions_tree(), lsid);
        txn.commit(Durability::Periodic)?;
        Ok(())
    }

    // Reads.

    pub fn find(&self, db: &str, name: &str, request: &FindRequest) -> Result<Cursor> {
        Ok(self.inner.find_with_counters(db, name, request, Arc::default())?.0)
    }

    /// Counts matches (honouring skip, limit and hint; sort and projection are ignored).
    pub fn count(&self, db: &str, name: &str, request: &FindRequest) -> Result<u64> {
        self.inner.count(db, name, request)
    }

    /// The maintained document counter: no scan (on a view, which has none, a count of its
    /// results).
    pub fn estimated_document_count(&self, db: &str, name: &str) -> Result<u64> {
        if self.inner.catalog.is_view(db, name) {
            return self.count(db, name, &FindRequest::default());
        }
        stats::estimated_document_count(&self.inner.engine, &self.inner.catalog, db, name)
    }

    /// Distinct values at `key` among the documents the request matches (its `filter`,
    /// `read_at` and `collation` count; arrays contribute their elements), in MongoDB's value
    /// order.
    pub fn distinct(&self, db: &str, name: &str, key: &str, request: &FindRequest) -> Result<Vec<Bson>> {
        self.inner.distinct(db, name, key, request)
    }

    /// Runs a pipeline over `collection` (`None`: a database-level aggregate, no input).
    pub fn aggregate(
        &self,
        db: &str,
        collection: Option<&str>,
        pipeline: &[Document],
        options: &AggregateOptions,
    ) -> Result<Cursor> {
        self.inner.aggregate(db, collection, pipeline, options)
    }

    /// explain of a find, in MongoDB's shape (without `ok`, `command`, `serverInfo`).
    pub fn explain(&self, db: &str, name: &str, request: &FindRequest, verbosity: Verbosity) -> Result<Document> {
        self.inner.explain(db, name, request, verbosity)
    }

    // Indexes.

    pub fn create_indexes(&self, db: &str, name: &str, specs: &[Document]) -> Result<CreateIndexesOutcome> {
        index::build::create_indexes(&self.inner.engine, &self.inner.catalog, db, name, specs)
    }

    /// Returns the number of indexes before the drop (`nIndexesWas`).
    pub fn drop_indexes(&self, db: &str, name: &str, selector: &IndexSelector) -> Result<usize> {
        index::build::drop_indexes(&self.inner.engine, &self.inner.catalog, db, name, selector)
    }

    pub fn list_indexes(&self, db: &str, name: &str) -> Result<Vec<Document>> {
        index::build::list_indexes(&self.inner.catalog, db, name)
    }

    // Figures.

    /// `$indexStats`' documents (without `host`): each index's name, key, spec, accesses
    /// (`index::usage`) and, while it builds, `building: true`.
    pub fn index_stats(&self, db: &str, name: &str) -> Result<Vec<Document>> {
        let catalog = &self.inner.catalog;
        let collection = catalog.existing(db, name)?;
        let id_spec = collection::id_index_spec(&collection.meta.options);
        let mut stats =
            vec![index::usage::stat_document(&id_spec, catalog.index_usage.accesses(&collection.meta.tree), true)];
        for index in &collection.indexes {
            stats.push(index::usage::stat_document(
                &index.meta.spec,
                catalog.index_usage.accesses(&index.meta.tree),
                index.meta.ready,
            ));
        }
        Ok(stats)
    }

    pub fn coll_stats(&self, db: &str, name: &str, scale: u64) -> Result<Document> {
        stats::coll_stats(&self.inner.engine, &self.inner.catalog, db, name, scale)
    }

    pub fn db_stats(&self, db: &str, scale: u64) -> Result<Document> {
        stats::db_stats(&self.inner.engine, &self.inner.catalog, db, scale)
    }

    pub fn engine_stats(&self) -> storage::Stats {
        self.inner.engine.stats()
    }

    /// Cross-checks a collection's documents, index entries and counters.
    pub fn validate(&self, db: &str, name: &str) -> Result<ValidateReport> {
        validate::validate(&self.inner.engine, &self.inner.catalog, db, name)
    }

    /// Every document of a collection that can be read, handed to `each` in `_id` order, past
    /// damage (`strata repair`); returns what could not be read, named by the `_id`s around it.
    pub fn salvage_documents(
        &self,
        db: &str,
        name: &str,
        each: &mut dyn FnMut(RawDocumentBuf) -> Result<()>,
    ) -> Result<Vec<String>> {
        let collection = self.inner.catalog.existing(db, name)?;
        let snapshot = self.inner.engine.snapshot();
        let mut documents = salvage::Documents::new(&snapshot, collection.tree);
        let mut damage = Vec::new();
        while let Some(found) = documents.next_document() {
            match found {
                Ok((_, document)) => each(document)?,
                Err(what) => damage.push(what),
            }
        }
        Ok(damage)
    }

    /// Runs one TTL pass now (tests; the monitor runs it every `ttl_interval`).
    pub fn expire_now(&self) -> Result<u64> {
        index::ttl::expire_once(&self.inner)
    }

    /// The engine's own invariant check (tests).
    pub fn verify_engine(&self) -> Result<()> {
        Ok(self.inner.engine.verify()?)
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
