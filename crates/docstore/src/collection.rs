//! [`Collection`]: the handle of one collection, `store.collection(namespace)`, with the
//! document operations, its indexes, its catalog changes and its figures. A handle is a name,
//! not a lock or a snapshot: each call reads the catalog's current descriptor, and a handle of a
//! collection that does not exist behaves as MongoDB does (reads find nothing, writes create it,
//! except `delete` and non-upsert `update`, which do nothing; `drop` returns `Ok(false)`).
//!
//! Durability: a write takes [`WriteOptions`] (or just a [`Durability`]): `Immediate` for
//! `j: true` syncs the log before the call returns, once the collection's lock is released, so
//! concurrent `j: true` writers share syncs. Catalog changes are always `Immediate`.

use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf, Uuid};
use storage::{CompactReport, Durability};

use crate::catalog::{ddl, id_index_spec};
use crate::context::Context;
use crate::error::Result;
use crate::index::build::CreateIndexesOutcome;
use crate::index::spec::IndexSelector;
use crate::read::explain::Verbosity;
use crate::read::find::{Cursor, FindRequest};
use crate::validate::ValidateReport;
use crate::write::delete::DeleteRequest;
use crate::write::insert::InsertOutcome;
use crate::write::update::{FindAndModifyOutcome, FindAndModifyRequest, UpdateOutcome, UpdateRequest};
use crate::write::{WriteOptions, Writer};
use crate::{AggregateOptions, Namespace, index, salvage, stats, timeseries, validate};

/// One collection of a [`crate::Store`], by name.
pub struct Collection<'s> {
    cx: &'s Arc<Context>,
    ns: Namespace,
}

impl<'s> Collection<'s> {
    pub(crate) fn new(cx: &'s Arc<Context>, ns: Namespace) -> Collection<'s> {
        Collection { cx, ns }
    }

    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    fn names(&self) -> (&str, &str) {
        (&self.ns.db, &self.ns.collection)
    }

    // Writes.

    /// Inserts documents (creating the collection if needed); errors by position. With
    /// `Durability::Immediate`, every document inserted (even when others failed) is durable
    /// before this returns, or `durability_error` says why not. `options` is a durability, or
    /// [`WriteOptions`] with a retryable write's statements to record.
    pub fn insert<'a>(
        &self,
        documents: Vec<RawDocumentBuf>,
        ordered: bool,
        options: impl Into<WriteOptions<'a>>,
    ) -> InsertOutcome {
        let mut options = options.into();
        let durability = options.durability;
        let (mut writer, durable_now) = options.writer();
        let (db, name) = self.names();
        let mut outcome = self.cx.insert(db, name, documents, ordered, &mut writer);
        if durable_now {
            outcome.durability_error = self.cx.make_durable(durability).err();
        }
        outcome
    }

    pub fn update<'a>(&self, request: &UpdateRequest, options: impl Into<WriteOptions<'a>>) -> Result<UpdateOutcome> {
        self.statement(options.into(), |cx, db, name, writer| cx.update(db, name, request, writer))
    }

    /// Returns how many documents were deleted.
    pub fn delete<'a>(&self, request: &DeleteRequest, options: impl Into<WriteOptions<'a>>) -> Result<u64> {
        self.statement(options.into(), |cx, db, name, writer| cx.delete(db, name, request, writer))
    }

    pub fn find_and_modify<'a>(
        &self,
        request: &FindAndModifyRequest,
        options: impl Into<WriteOptions<'a>>,
    ) -> Result<FindAndModifyOutcome> {
        self.statement(options.into(), |cx, db, name, writer| cx.find_and_modify(db, name, request, writer))
    }

    /// Runs one write statement with its writer, then makes its writes as durable as asked (not
    /// a transaction's: its commit does), whether it succeeded or not: an earlier part of it
    /// may stand.
    fn statement<T>(
        &self,
        mut options: WriteOptions<'_>,
        run: impl FnOnce(&Arc<Context>, &str, &str, &mut Writer<'_>) -> Result<T>,
    ) -> Result<T> {
        let durability = options.durability;
        let (mut writer, durable_now) = options.writer();
        let (db, name) = self.names();
        let outcome = run(self.cx, db, name, &mut writer);
        match durable_now {
            true => self.cx.made_durable(durability, outcome),
            false => outcome,
        }
    }

    // Reads.

    /// The matching documents; the cursor holds its snapshot (keep it across getMore).
    pub fn find(&self, request: &FindRequest) -> Result<Cursor> {
        let (db, name) = self.names();
        Ok(self.cx.find_with_counters(db, name, request, Arc::default())?.0)
    }

    /// Counts matches (honouring skip, limit and hint; sort and projection are ignored).
    pub fn count(&self, request: &FindRequest) -> Result<u64> {
        let (db, name) = self.names();
        self.cx.count(db, name, request)
    }

    /// The maintained document counter: no scan (on a view, which has none, a count of its
    /// results).
    pub fn estimated_document_count(&self) -> Result<u64> {
        let (db, name) = self.names();
        if self.cx.catalog.is_view(db, name) {
            return self.count(&FindRequest::default());
        }
        stats::estimated_document_count(self.cx, db, name)
    }

    /// Distinct values at `key` among the documents the request matches (its `filter`,
    /// `read_at` and `collation` count; arrays contribute their elements), in MongoDB's value
    /// order.
    pub fn distinct(&self, key: &str, request: &FindRequest) -> Result<Vec<Bson>> {
        let (db, name) = self.names();
        self.cx.distinct(db, name, key, request)
    }

    /// Runs a pipeline over the collection (or view).
    pub fn aggregate(&self, pipeline: &[Document], options: &AggregateOptions) -> Result<Cursor> {
        let (db, name) = self.names();
        self.cx.aggregate(db, Some(name), pipeline, options)
    }

    /// explain of a find, in MongoDB's shape (without `ok`, `command`, `serverInfo`).
    pub fn explain(&self, request: &FindRequest, verbosity: Verbosity) -> Result<Document> {
        let (db, name) = self.names();
        self.cx.explain(db, name, request, verbosity)
    }

    /// A tailable cursor over a capped collection's documents matching `filter`, in insertion
    /// order (see [`crate::capped`]).
    pub fn tail(&self, filter: &Document) -> Result<crate::Tail> {
        let (db, name) = self.names();
        self.cx.tail_capped(db, name, filter)
    }

    // Indexes.

    pub fn create_indexes(&self, specs: &[Document]) -> Result<CreateIndexesOutcome> {
        let (db, name) = self.names();
        index::build::create_indexes(self.cx, db, name, specs)
    }

    /// Returns the number of indexes before the drop (`nIndexesWas`).
    pub fn drop_indexes(&self, selector: &IndexSelector) -> Result<usize> {
        let (db, name) = self.names();
        index::build::drop_indexes(self.cx, db, name, selector)
    }

    /// listIndexes' documents, the `_id` index first.
    pub fn list_indexes(&self) -> Result<Vec<Document>> {
        let (db, name) = self.names();
        index::build::list_indexes(self.cx, db, name)
    }

    // The catalog.

    /// Creates the collection, or a view when the options have `viewOn` (and `pipeline`).
    pub fn create(&self, options: Document) -> Result<()> {
        self.create_with_uuid(options, None)
    }

    /// [`Collection::create`], keeping a UUID the collection had (`strata repair`; a view has
    /// none).
    pub fn create_with_uuid(&self, options: Document, uuid: Option<Uuid>) -> Result<()> {
        let (db, name) = self.names();
        if options.contains_key("viewOn") {
            return ddl::create_view(self.cx, db, name, &options);
        }
        // (bson's default UUID is a new random one.)
        let collection = ddl::create_collection_as(self.cx, db, name, options, uuid.unwrap_or_default())?;
        // A time-series collection with a metaField gets MongoDB's default index.
        if let Some(index) = collection.timeseries.as_ref().and_then(timeseries::TimeSeries::default_index) {
            self.create_indexes(&[index])?;
        }
        Ok(())
    }

    /// Creates one of the server's own collections (`admin.system.users`, `admin.system.roles`,
    /// a database's `system.profile`) with `options` if it does not exist; user writes may not
    /// create `system.*` collections, but once one exists the ordinary reads and writes reach it.
    pub fn ensure_system(&self, options: Document) -> Result<()> {
        let (db, name) = self.names();
        ddl::ensure_system_collection(self.cx, db, name, options)
    }

    /// `collMod`: sets collection options (each key to its value).
    pub fn set_options(&self, options: Document) -> Result<()> {
        let (db, name) = self.names();
        ddl::set_options(self.cx, db, name, options)
    }

    /// `collMod`'s `index` option: `expireAfterSeconds` and/or `hidden` of one index.
    pub fn modify_index(&self, selector: &IndexSelector, changes: &Document) -> Result<Document> {
        let (db, name) = self.names();
        ddl::modify_index(self.cx, db, name, selector, changes)
    }

    /// Drops the collection (or view); `Ok(false)` when it did not exist.
    pub fn drop(&self) -> Result<bool> {
        let (db, name) = self.names();
        ddl::drop_collection(self.cx, db, name)
    }

    /// Renames the collection to `to` (within or across databases); `drop_target` replaces an
    /// existing target.
    pub fn rename(&self, to: impl Into<Namespace>, drop_target: bool) -> Result<()> {
        let to = to.into();
        ddl::rename_collection(self.cx, self.names(), (&to.db, &to.collection), drop_target)
    }

    /// `convertToCapped`: the collection's documents (in `_id` order) copied into a new capped
    /// collection of `size` bytes (see [`crate::capped`]), which then replaces it; as in
    /// MongoDB, its secondary indexes are not kept, and the oldest documents go if they do not
    /// fit. On error the original stays as it was.
    pub fn convert_to_capped(&self, size: i64) -> Result<()> {
        let (db, name) = self.names();
        let cx = self.cx;
        let options = bson::doc! {"capped": true, "size": size};
        crate::capped::Capped::from_options(&options)?;
        cx.catalog.existing(db, name)?;
        let temp = format!("tmp.convertToCapped.{}", cx.temp_number());
        ddl::create_collection(cx, db, &temp, options)?;
        let copied = (|| -> Result<()> {
            let request = crate::read::find::FindRequest::default();
            let mut documents = cx.find_with_counters(db, name, &request, Default::default())?.0;
            loop {
                let batch = documents.next_batch(1000, 16 << 20)?;
                if batch.is_empty() {
                    break;
                }
                let mut writer = crate::write::Writer::plain(storage::Durability::Periodic);
                if let Some((_, error)) = cx.insert(db, &temp, batch, true, &mut writer).errors.into_iter().next() {
                    return Err(error);
                }
            }
            ddl::rename_collection(cx, (db, &temp), (db, name), true)
        })();
        if copied.is_err() {
            let _ = ddl::drop_collection(cx, db, &temp);
        }
        copied?;
        cx.make_durable(Durability::Immediate)
    }

    /// Gives the data file's free space back to the operating system while writes go on
    /// (`storage::Engine::compact`). Named by a collection, as MongoDB's `compact` is; one
    /// file holds every collection, so the whole file is compacted.
    pub fn compact(&self) -> Result<CompactReport> {
        let (db, name) = self.names();
        self.cx.catalog.existing(db, name)?;
        Ok(self.cx.engine.compact()?)
    }

    // Figures.

    /// collStats' figures (without `ok`), scaled by `scale`.
    pub fn stats(&self, scale: u64) -> Result<Document> {
        let (db, name) = self.names();
        stats::coll_stats(self.cx, db, name, scale)
    }

    /// `$indexStats`' documents (without `host`): each index's name, key, spec, accesses
    /// (`index::usage`) and, while it builds, `building: true`.
    pub fn index_stats(&self) -> Result<Vec<Document>> {
        let (db, name) = self.names();
        let collection = self.cx.catalog.existing(db, name)?;
        let usage = &self.cx.index_usage;
        let id_spec = id_index_spec(&collection.meta.options);
        let mut stats = vec![index::usage::stat_document(&id_spec, usage.accesses(&collection.meta.tree), true)];
        for index in &collection.indexes {
            let accesses = usage.accesses(&index.meta.tree);
            stats.push(index::usage::stat_document(&index.meta.spec, accesses, index.meta.ready));
        }
        Ok(stats)
    }

    /// Cross-checks the collection's documents, index entries and counters.
    pub fn validate(&self) -> Result<ValidateReport> {
        let (db, name) = self.names();
        validate::validate(self.cx, db, name)
    }

    /// Every document that can be read, handed to `each` in `_id` order, past damage
    /// (`strata repair`); returns what could not be read, named by the `_id`s around it.
    pub fn salvage_documents(&self, each: &mut dyn FnMut(RawDocumentBuf) -> Result<()>) -> Result<Vec<String>> {
        let (db, name) = self.names();
        let collection = self.cx.catalog.existing(db, name)?;
        let snapshot = self.cx.engine.snapshot();
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
}
