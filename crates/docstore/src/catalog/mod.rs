//! The catalog: which databases and collections exist, their options, their indexes, and the
//! engine trees that hold them. Durable in the engine's `__catalog` tree (entries: [`entry`]),
//! cached in memory as one [`Collection`] descriptor per collection; [`Catalog`] owns both,
//! and the `__counts` tree of their counters.
//!
//! Invariants: every tree named in the catalog exists; a tree named `c.<n>` or `i.<n>` that no
//! entry names is garbage from an interrupted create or drop and is dropped at open. Trees are
//! created before the entry naming them is committed and dropped after the entry is removed, so
//! a crash between the two leaves only such garbage. A change to a collection (an index added,
//! an index turned multikey) commits its entry, then swaps a new descriptor into the map
//! ([`Catalog::install`]); readers keep whichever `Arc` they took.
//!
//! Locking: each collection has one write lock (`Collection::write_lock`, shared by all its
//! descriptors) held by every write to it (insert, update, delete, index build batch, drop,
//! rename), so a write reads the newest descriptor after taking the lock ([`Catalog::lock`])
//! and sees every index. Readers take no lock. Catalog changes of any collection also hold the
//! catalog's `ddl` lock, taken before any collection's write lock (one order, no deadlock).
//!
//! The engine is the store's; the methods that read or change trees take it as an argument.

pub mod entry;
pub mod key_format;
pub mod view;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bson::{Bson, Document, Uuid};
use parking_lot::{Mutex, MutexGuard, RwLock};
use storage::{Durability, Engine, Salvaged, Snapshot, Transaction, TreeId};

pub use entry::{
    COLLECTION_TREE_PREFIX, CollectionMeta, INDEX_TREE_PREFIX, IndexMeta, SERVER_COLLECTIONS, TEMP_TREE_PREFIX,
    count_key, namespace_key, size_key, validate_db_name, validate_server_collection, validate_user_collection,
};

use crate::collection::{Collection, CollectionInfo, DatabaseInfo};
use crate::error::{Error, Result};
use crate::oplog::{self, Entry, Oplog};
pub use view::ViewMeta;

type CollectionMap = BTreeMap<(String, String), Arc<Collection>>;

/// The durable catalog and its cache of collection descriptors.
pub struct Catalog {
    /// `__catalog`: the entries.
    tree: TreeId,
    /// `__catalog_copy`: the same entries, written with them (read only by a salvage).
    copy_tree: TreeId,
    /// `__counts`: documents and bytes per collection, logical bytes per index.
    counts_tree: TreeId,
    /// `__sessions`: retryable writes' statement records ([`crate::retry`]).
    sessions_tree: TreeId,
    collections: RwLock<CollectionMap>,
    /// Called after every insert into a capped collection (tailable cursors waiting for data).
    capped_listeners: RwLock<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// The views' definitions ([`view`]), by (db, name); a name is a collection or a view.
    views: RwLock<BTreeMap<(String, String), ViewMeta>>,
    /// Held by every catalog change (create, drop, rename, tree allocation).
    ddl: Mutex<()>,
    /// The oplog, once the store keeps one: every change commits its entries with it, and the
    /// document writes and catalog changes that make them all commit through the catalog.
    oplog: RwLock<Option<Arc<Oplog>>>,
    /// Documents held by open multi-document transactions (the document-level locks).
    holds: Arc<crate::transaction::Holds>,
    /// How a collection's documents are compressed when its options do not say (`None`: the
    /// engine's setting, as for indexes).
    document_compression: Option<storage::Compression>,
    /// How often each index served a query (`$indexStats`).
    pub index_usage: crate::index::usage::Usage,
}

/// A write lock held on one collection, with the descriptor current under it.
pub struct Locked {
    pub _guard: parking_lot::ArcMutexGuard<parking_lot::RawMutex, ()>,
    pub collection: Arc<Collection>,
}

impl Catalog {
    /// Creates or finds `__catalog` and `__counts`, loads every entry, drops garbage trees
    /// (named like ours but in no entry: an interrupted create or drop).
    pub fn open(engine: &Engine, document_compression: Option<storage::Compression>) -> Result<Catalog> {
        let catalog = Catalog {
            index_usage: crate::index::usage::Usage::default(),
            tree: ensure_tree(engine, entry::CATALOG_TREE)?,
            copy_tree: ensure_copy_tree(engine)?,
            counts_tree: ensure_tree(engine, entry::COUNTS_TREE)?,
            sessions_tree: ensure_tree(engine, crate::retry::SESSIONS_TREE)?,
            collections: RwLock::new(BTreeMap::new()),
            views: RwLock::new(BTreeMap::new()),
            capped_listeners: RwLock::new(Vec::new()),
            ddl: Mutex::new(()),
            oplog: RwLock::new(None),
            holds: Arc::default(),
            document_compression,
        };
        let (mut metas, views) = catalog.load(engine)?;
        drop_garbage_trees(engine, &metas)?;
        catalog.give_uuids(engine, &mut metas)?;
        catalog.views.write().extend(views.into_iter().map(|view| ((view.db.clone(), view.name.clone()), view)));
        for meta in metas {
            let key = (meta.db.clone(), meta.name.clone());
            let collection = Collection::open(engine, meta, Arc::new(Mutex::new(())), catalog.document_compression)?;
            catalog.collections.write().insert(key, Arc::new(collection));
        }
        Ok(catalog)
    }

    /// Entries written before collections had UUIDs get one now, written back in one
    /// transaction so that it stays theirs (a salvaging open writes nothing: they stay `None`).
    fn give_uuids(&self, engine: &Engine, metas: &mut [CollectionMeta]) -> Result<()> {
        if engine.options().salvage || metas.iter().all(|meta| meta.uuid.is_some()) {
            return Ok(());
        }
        let mut txn = engine.begin();
        for meta in metas.iter_mut().filter(|meta| meta.uuid.is_none()) {
            meta.uuid = Some(Uuid::new());
            self.put_meta(&mut txn, meta)?;
        }
        txn.commit(Durability::Immediate)?;
        Ok(())
    }

    fn load(&self, engine: &Engine) -> Result<(Vec<CollectionMeta>, Vec<ViewMeta>)> {
        let snapshot = engine.snapshot();
        let entries = if engine.options().salvage {
            salvage_entries(snapshot.salvage(self.tree), snapshot.salvage(self.copy_tree))?
        } else {
            snapshot.iter(self.tree).collect::<storage::Result<Vec<_>>>()?
        };
        let (mut metas, mut views) = (Vec::new(), Vec::new());
        for (key, value) in entries {
            if key.starts_with(view::VIEW_KEY_PREFIX) {
                views.push(ViewMeta::decode(&value)?);
            } else if key.first() != Some(&0) {
                metas.push(CollectionMeta::decode(&value)?);
            }
        }
        Ok((metas, views))
    }

    /// The `__catalog` tree, to read an entry (writes go through [`Catalog::put_meta`], which
    /// keeps the copy).
    pub fn tree(&self) -> TreeId {
        self.tree
    }

    /// Adds a collection's entry to `txn`, in the catalog and its copy (a write that commits a
    /// catalog change with its own messages).
    pub fn put_meta(&self, txn: &mut Transaction<'_>, meta: &CollectionMeta) -> Result<()> {
        self.put_entry(txn, namespace_key(&meta.db, &meta.name), meta.encode()?);
        Ok(())
    }

    fn put_entry(&self, txn: &mut Transaction<'_>, key: Vec<u8>, value: Vec<u8>) {
        txn.put(self.copy_tree, key.clone(), value.clone());
        txn.put(self.tree, key, value);
    }

    fn delete_entry(&self, txn: &mut Transaction<'_>, key: Vec<u8>) {
        txn.delete(self.copy_tree, key.clone());
        txn.delete(self.tree, key);
    }

    /// The `__counts` tree.
    pub fn counts_tree(&self) -> TreeId {
        self.counts_tree
    }

    /// The documents open transactions hold.
    pub fn holds(&self) -> &Arc<crate::transaction::Holds> {
        &self.holds
    }

    /// Refuses a catalog change of a collection whose documents an open transaction holds.
    pub fn check_not_held(&self, collection: &Collection) -> Result<()> {
        if self.holds.holds_any_in(collection.tree) {
            return Err(Error::ConflictingOperation(format!(
                "an open transaction holds documents of {}; retry after it ends",
                collection.namespace()
            )));
        }
        Ok(())
    }

    /// Sets options of a collection (`collMod`), logging the change as `{collMod: name, ...}`
    /// (also when nothing changes, as mongod logs a bare `collMod`).
    pub fn set_options(&self, engine: &Engine, db: &str, name: &str, options: Document) -> Result<()> {
        let _ddl = self.ddl.lock();
        let locked =
            self.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))?;
        let mut meta = locked.collection.meta.clone();
        let mut command = bson::doc! {"collMod": name};
        for (key, value) in options {
            meta.options.insert(key.clone(), value.clone());
            command.insert(key, value);
        }
        crate::validation::Validator::from_options(&meta.options)?;
        let entries = self.command_entries(db, command, meta.uuid)?;
        self.replace_meta_logged(engine, &locked.collection, meta, entries)?;
        Ok(())
    }

    /// `collMod`'s `index`: changes one index's `expireAfterSeconds` and/or `hidden`, found by
    /// name or key pattern; returns `{expireAfterSeconds_old/_new, hidden_old/_new}` as
    /// MongoDB replies.
    pub fn modify_index(
        &self,
        engine: &Engine,
        db: &str,
        name: &str,
        selector: &crate::index::build::IndexSelector,
        changes: &Document,
    ) -> Result<Document> {
        use crate::index::build::IndexSelector;
        let _ddl = self.ddl.lock();
        let locked =
            self.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))?;
        let index = match selector {
            IndexSelector::Name(wanted) => locked.collection.index(wanted),
            IndexSelector::KeyPattern(pattern) => locked
                .collection
                .indexes
                .iter()
                .find(|index| crate::index::spec::same_key_pattern(&index.key_pattern, pattern)),
            _ => None,
        }
        .ok_or_else(|| Error::IndexNotFound("cannot find index for collMod".into()))?;
        let mut spec = index.meta.spec.clone();
        let mut reply = Document::new();
        for (option, value) in changes {
            let old = spec.get(option).cloned();
            match (option.as_str(), value) {
                ("expireAfterSeconds", _) if old.is_none() => {
                    return Err(Error::InvalidOptions("no expireAfterSeconds field to update".into()));
                }
                ("expireAfterSeconds" | "hidden", _) => {}
                (other, _) => {
                    return Err(Error::InvalidOptions(format!("collMod index option '{other}' is not supported")));
                }
            }
            reply.insert(format!("{option}_old"), old.unwrap_or(Bson::Boolean(false)));
            reply.insert(format!("{option}_new"), value.clone());
            spec.insert(option.clone(), value.clone());
        }
        // Normalizing drops `hidden: false` and checks the new values.
        let normalized = crate::index::spec::ParsedSpec::parse(&spec)?.normalized();
        let meta = Catalog::with_index(&locked.collection.meta, &index.name, |index| index.spec = normalized.clone());
        let command = bson::doc! {"collMod": name, "index": {"name": index.name.clone()}};
        let entries = self.command_entries(db, command, meta.uuid)?;
        self.replace_meta_logged(engine, &locked.collection, meta, entries)?;
        Ok(reply)
    }

    /// The `__sessions` tree.
    pub fn sessions_tree(&self) -> TreeId {
        self.sessions_tree
    }

    /// The oplog, if the store keeps one.
    pub fn oplog(&self) -> Option<Arc<Oplog>> {
        self.oplog.read().clone()
    }

    /// Starts keeping an oplog of at most `cap_bytes` (creating `local.oplog.rs` if needed);
    /// from now on every change appends its entries. Calling it again changes the cap.
    pub fn enable_oplog(&self, engine: &Engine, cap_bytes: u64) -> Result<Arc<Oplog>> {
        if let Some(oplog) = self.oplog() {
            oplog.set_cap_bytes(cap_bytes);
            return Ok(oplog);
        }
        self.ensure_system_collection(engine, oplog::DB, oplog::COLLECTION, Document::new())?;
        let collection = self.existing(oplog::DB, oplog::COLLECTION)?;
        let counters = self.counters(engine, &collection)?;
        let images = ensure_tree(engine, crate::oplog::IMAGES_TREE)?;
        let opened = Arc::new(Oplog::open(engine, collection, (self.counts_tree, images), counters, cap_bytes)?);
        *self.oplog.write() = Some(Arc::clone(&opened));
        Ok(opened)
    }

    /// Whether changes to `db` are logged (never those of `local`, as in MongoDB).
    pub fn logs(&self, db: &str) -> bool {
        db != oplog::DB && self.oplog.read().is_some()
    }

    /// Commits `txn` with `entries` in the oplog (when the store keeps one and `db` is logged),
    /// then trims the oplog if it is full; returns the commit's sequence number. A storage error
    /// (a `KeyExists` the caller describes) comes back as it is.
    pub fn commit_logged(
        &self,
        engine: &Engine,
        txn: storage::Transaction<'_>,
        db: &str,
        entries: Vec<Entry>,
        durability: Durability,
    ) -> std::result::Result<storage::Seq, storage::Error> {
        let Some(oplog) = self.oplog().filter(|_| db != oplog::DB && !entries.is_empty()) else {
            return txn.commit(durability);
        };
        let (seq, _) = oplog.commit(txn, entries, durability)?;
        if let Err(error) = oplog.trim_if_full(engine) {
            // Nothing changed (the next commit tries again); the engine counts I/O failures.
            tracing::warn!(%error, "trimming the oplog failed");
        }
        Ok(seq)
    }

    /// A command entry for `db`, when changes to it are logged, with the UUID (`ui`) of the
    /// collection it changes, if it changes one.
    pub fn command_entries(&self, db: &str, command: Document, collection: Option<Uuid>) -> Result<Vec<Entry>> {
        if !self.logs(db) {
            return Ok(Vec::new());
        }
        Ok(vec![Entry::command(db, &command)?.with_collection_uuid(collection)])
    }

    /// How documents are compressed where a collection's options do not say (`None`: the
    /// engine's setting).
    pub fn document_compression(&self) -> Option<storage::Compression> {
        self.document_compression
    }

    /// The lock every catalog change holds.
    pub fn ddl(&self) -> MutexGuard<'_, ()> {
        self.ddl.lock()
    }

    /// Every collection's descriptor, as they are now.
    pub fn collections(&self) -> Vec<Arc<Collection>> {
        self.collections.read().values().cloned().collect()
    }

    /// Indexes whose build a crash interrupted: (db, collection, index).
    pub fn unfinished_index_builds(&self) -> Vec<(String, String, String)> {
        self.collections()
            .iter()
            .flat_map(|c| {
                c.indexes
                    .iter()
                    .filter(|i| !i.meta.ready)
                    .map(|i| (c.meta.db.clone(), c.meta.name.clone(), i.name.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Creates a tree with a fresh name `<prefix><n>`; the counter is durable before the tree
    /// exists, so a name is never reused.
    pub fn new_tree(&self, engine: &Engine, prefix: &str) -> Result<String> {
        let snapshot = engine.snapshot();
        let next = match snapshot.get(self.tree, entry::NEXT_TREE_KEY)? {
            Some(bytes) => u64::from_le_bytes(
                bytes.as_slice().try_into().map_err(|_| Error::corrupt("tree counter is not 8 bytes"))?,
            ),
            None => 1,
        };
        let mut txn = engine.begin();
        self.put_entry(&mut txn, entry::NEXT_TREE_KEY.to_vec(), (next + 1).to_le_bytes().to_vec());
        txn.commit(Durability::Immediate)?;
        let name = format!("{prefix}{next}");
        engine.create_tree(&name)?;
        Ok(name)
    }

    pub fn collection(&self, db: &str, name: &str) -> Option<Arc<Collection>> {
        self.collections.read().get(&(db.to_string(), name.to_string())).cloned()
    }

    pub fn existing(&self, db: &str, name: &str) -> Result<Arc<Collection>> {
        self.refuse_view(db, name)?;
        self.collection(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))
    }

    /// Registers a callback run after each insert into a capped collection.
    pub fn on_capped_insert(&self, listener: Box<dyn Fn() + Send + Sync>) {
        self.capped_listeners.write().push(listener);
    }

    pub fn capped_inserted(&self) {
        for listener in self.capped_listeners.read().iter() {
            listener();
        }
    }

    /// Whether `db.name` is a view. Every write asks: without views, the answer costs no key to
    /// build.
    pub fn is_view(&self, db: &str, name: &str) -> bool {
        let views = self.views.read();
        !views.is_empty() && views.contains_key(&(db.to_string(), name.to_string()))
    }

    /// CommandNotSupportedOnView for a write, an index or a rename aimed at a view.
    pub fn refuse_view(&self, db: &str, name: &str) -> Result<()> {
        match self.is_view(db, name) {
            true => Err(Error::CommandNotSupportedOnView(format!("Namespace {db}.{name} is a view, not a collection"))),
            false => Ok(()),
        }
    }

    /// What a read of `name` reads: the source collection under its chain of views (itself
    /// when it is not a view) and the pipeline that turns it into `name`, innermost view's
    /// stages first. `None` when `name` is not a view.
    pub fn resolve_view(&self, db: &str, name: &str) -> Result<Option<(String, Vec<Document>)>> {
        let views = self.views.read();
        if views.is_empty() {
            return Ok(None);
        }
        let Some(mut view) = views.get(&(db.to_string(), name.to_string())) else { return Ok(None) };
        let mut chain = vec![view];
        while let Some(inner) = views.get(&(db.to_string(), view.view_on.clone())) {
            if chain.len() >= view::MAX_VIEW_DEPTH {
                return Err(view::too_deep());
            }
            chain.push(inner);
            view = inner;
        }
        let pipeline = chain.iter().rev().flat_map(|view| view.pipeline.iter().cloned()).collect();
        Ok(Some((view.view_on.clone(), pipeline)))
    }

    /// `create` with `viewOn`: a view over a collection or view of the same database (which
    /// need not exist yet, as in MongoDB), no deeper than 20 and not reading itself.
    pub fn create_view(&self, engine: &Engine, db: &str, name: &str, options: &Document) -> Result<()> {
        validate_user_collection(db, name)?;
        let view = ViewMeta::from_options(db, name, options)?;
        let _ddl = self.ddl.lock();
        if self.collection(db, name).is_some() || self.is_view(db, name) {
            return Err(Error::NamespaceExists(format!("Namespace {db}.{name} already exists")));
        }
        self.check_view_chain(&view)?;
        let mut create = bson::doc! {"create": name};
        create.extend(view.options());
        let entries = self.command_entries(db, create, None)?;
        let mut txn = engine.begin();
        self.put_entry(&mut txn, ViewMeta::key(db, name), view.encode()?);
        self.commit_logged(engine, txn, db, entries, Durability::Immediate)?;
        self.views.write().insert((db.into(), name.into()), view);
        Ok(())
    }

    /// A new view may not read itself through its sources, nor sit on more than 20 views.
    fn check_view_chain(&self, view: &ViewMeta) -> Result<()> {
        let views = self.views.read();
        let mut depth = 1;
        let mut on = &view.view_on;
        loop {
            if *on == view.name {
                let namespace = format!("{}.{}", view.db, view.name);
                return Err(Error::GraphContainsCycle(format!("View cycle detected: {namespace} reads itself")));
            }
            let Some(inner) = views.get(&(view.db.clone(), on.clone())) else { return Ok(()) };
            depth += 1;
            if depth > view::MAX_VIEW_DEPTH {
                return Err(view::too_deep());
            }
            on = &inner.view_on;
        }
    }

    /// Drops a view; `Ok(false)` when there is none of that name.
    fn drop_view(&self, engine: &Engine, db: &str, name: &str) -> Result<bool> {
        if !self.is_view(db, name) {
            return Ok(false);
        }
        let mut txn = engine.begin();
        self.delete_entry(&mut txn, ViewMeta::key(db, name));
        let entries = self.command_entries(db, bson::doc! {"drop": name}, None)?;
        self.commit_logged(engine, txn, db, entries, Durability::Immediate)?;
        self.views.write().remove(&(db.to_string(), name.to_string()));
        Ok(true)
    }

    /// Takes the collection's write lock; `None` if it does not exist (or was dropped while
    /// we waited).
    pub fn lock(&self, db: &str, name: &str) -> Option<Locked> {
        loop {
            let collection = self.collection(db, name)?;
            let guard = collection.write_lock.lock_arc();
            let current = self.collection(db, name)?;
            if Arc::ptr_eq(&current.write_lock, &collection.write_lock) {
                return Some(Locked { _guard: guard, collection: current });
            }
        }
    }

    /// Takes the write lock of the collection, creating it if needed.
    pub fn lock_or_create(&self, engine: &Engine, db: &str, name: &str) -> Result<Locked> {
        self.refuse_view(db, name)?;
        loop {
            self.collection_or_create(engine, db, name)?;
            if let Some(locked) = self.lock(db, name) {
                return Ok(locked);
            }
        }
    }

    /// The maintained counters of a collection: (documents, bytes of documents).
    pub fn counters(&self, engine: &Engine, collection: &Collection) -> Result<(i64, i64)> {
        let snapshot = engine.snapshot();
        Ok((self.read_counter(&snapshot, &collection.count_key)?, self.read_counter(&snapshot, &collection.size_key)?))
    }

    /// One counter of `__counts` (an index's logical bytes: `size_key` of its tree).
    pub fn counter(&self, engine: &Engine, key: &[u8]) -> Result<i64> {
        self.read_counter(&engine.snapshot(), key)
    }

    fn read_counter(&self, snapshot: &Snapshot, key: &[u8]) -> Result<i64> {
        match snapshot.get(self.counts_tree, key)? {
            Some(bytes) => Ok(i64::from_le_bytes(
                bytes.as_slice().try_into().map_err(|_| Error::corrupt("counter is not 8 bytes"))?,
            )),
            None => Ok(0),
        }
    }

    pub fn collection_size(&self, engine: &Engine, collection: &Collection) -> Result<u64> {
        Ok(self.counters(engine, collection)?.1.max(0) as u64)
    }

    /// Creates a collection; `NamespaceExists` if it exists.
    pub fn create_collection(
        &self,
        engine: &Engine,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<Arc<Collection>> {
        self.create_collection_as(engine, db, name, options, Uuid::new())
    }

    /// Creates a collection with the UUID it is given (`strata repair` makes each collection
    /// again with the UUID it had).
    pub fn create_collection_as(
        &self,
        engine: &Engine,
        db: &str,
        name: &str,
        options: Document,
        uuid: Uuid,
    ) -> Result<Arc<Collection>> {
        validate_user_collection(db, name)?;
        crate::compression::requested(&options)?;
        crate::validation::Validator::from_options(&options)?;
        let mut options = options;
        if crate::timeseries::TimeSeries::from_options(&options)?.is_some() {
            options = crate::timeseries::TimeSeries::normalized(&options);
        }
        if let Some(clustered) = options.get("clusteredIndex") {
            let clustered = crate::collection::clustered_index_option(clustered)?;
            options.insert("clusteredIndex", clustered);
        }
        if let Some(collation) = options.get("collation") {
            // Kept as MongoDB reports it, every field filled in; simple is no collation.
            match query::collation::Collation::parse_optional(Some(collation))? {
                Some(collation) => options.insert("collation", collation.spec().clone()),
                None => options.remove("collation"),
            };
        }
        let _ddl = self.ddl.lock();
        if self.collection(db, name).is_some() || self.is_view(db, name) {
            return Err(Error::NamespaceExists(format!("Collection {db}.{name} already exists.")));
        }
        self.create_collection_locked(engine, db, name, options, uuid)
    }

    /// The collection, created with default options if absent (implicit creation by a write).
    pub fn collection_or_create(&self, engine: &Engine, db: &str, name: &str) -> Result<Arc<Collection>> {
        if let Some(collection) = self.collection(db, name) {
            return Ok(collection);
        }
        validate_user_collection(db, name)?;
        self.refuse_view(db, name)?;
        let _ddl = self.ddl.lock();
        match self.collection(db, name) {
            Some(collection) => Ok(collection),
            None => self.create_collection_locked(engine, db, name, Document::new(), Uuid::new()),
        }
    }

    /// Creates `db.name` if absent, where it is one of [`SERVER_COLLECTIONS`] (the server's
    /// own `system.*` collections, which user writes may not create).
    pub fn ensure_system_collection(&self, engine: &Engine, db: &str, name: &str, options: Document) -> Result<()> {
        validate_server_collection(db, name)?;
        let _ddl = self.ddl.lock();
        if self.collection(db, name).is_none() {
            self.create_collection_locked(engine, db, name, options, Uuid::new())?;
        }
        Ok(())
    }

    fn create_collection_locked(
        &self,
        engine: &Engine,
        db: &str,
        name: &str,
        options: Document,
        uuid: Uuid,
    ) -> Result<Arc<Collection>> {
        let tree = self.new_tree(engine, COLLECTION_TREE_PREFIX)?;
        let mut create = bson::doc! {"create": name};
        create.extend(options.clone());
        let entries = self.command_entries(db, create, Some(uuid))?;
        let natural = match crate::capped::Capped::from_options(&options)? {
            Some(_) => Some(self.new_tree(engine, entry::NATURAL_TREE_PREFIX)?),
            None => None,
        };
        let meta = CollectionMeta {
            db: db.into(),
            name: name.into(),
            tree,
            options,
            indexes: Vec::new(),
            natural,
            key_format: key_format::KEY_FORMAT,
            uuid: Some(uuid),
        };
        let mut txn = engine.begin();
        self.put_meta(&mut txn, &meta)?;
        self.commit_logged(engine, txn, db, entries, Durability::Immediate)?;
        let collection = Arc::new(Collection::open(engine, meta, Arc::new(Mutex::new(())), self.document_compression)?);
        self.collections.write().insert((db.into(), name.into()), Arc::clone(&collection));
        Ok(collection)
    }

    /// Drops a collection and its trees; `Ok(false)` when it did not exist.
    pub fn drop_collection(&self, engine: &Engine, db: &str, name: &str) -> Result<bool> {
        let _ddl = self.ddl.lock();
        let Some(collection) = self.collection(db, name) else {
            return self.drop_view(engine, db, name);
        };
        let lock = Arc::clone(&collection.write_lock);
        let _write = lock.lock();
        self.check_not_held(&collection)?;
        let mut txn = engine.begin();
        self.delete_entry(&mut txn, namespace_key(db, name));
        txn.delete(self.counts_tree, collection.count_key.clone());
        txn.delete(self.counts_tree, collection.size_key.clone());
        let entries = self.command_entries(db, bson::doc! {"drop": name}, collection.meta.uuid)?;
        self.commit_logged(engine, txn, db, entries, Durability::Immediate)?;
        self.collections.write().remove(&(db.to_string(), name.to_string()));
        for tree in collection.meta.trees() {
            engine.drop_tree(tree)?;
        }
        Ok(true)
    }

    /// Drops every collection of a database.
    pub fn drop_database(&self, engine: &Engine, db: &str) -> Result<()> {
        validate_db_name(db)?;
        let collections = self.list_collections(db);
        for info in &collections {
            self.drop_collection(engine, db, &info.name)?;
        }
        let entries = self.command_entries(db, bson::doc! {"dropDatabase": 1}, None)?;
        if !collections.is_empty() && !entries.is_empty() {
            self.commit_logged(engine, engine.begin(), db, entries, Durability::Immediate)?;
        }
        Ok(())
    }

    /// Renames a collection, within or across databases; its trees stay as they are.
    pub fn rename_collection(
        &self,
        engine: &Engine,
        from: (&str, &str),
        to: (&str, &str),
        drop_target: bool,
    ) -> Result<()> {
        validate_user_collection(to.0, to.1)?;
        self.refuse_view(from.0, from.1)?;
        if self.is_view(to.0, to.1) {
            return Err(Error::NamespaceExists("target namespace exists (a view)".into()));
        }
        if from == to {
            return Err(Error::IllegalOperation("Can't rename a collection to itself".into()));
        }
        // As in mongod's entry, `dropTarget` is the UUID of the collection it dropped, if any.
        let mut dropped = Bson::Boolean(false);
        if let Some(target) = self.collection(to.0, to.1) {
            if !drop_target {
                return Err(Error::NamespaceExists("target namespace exists".into()));
            }
            self.drop_collection(engine, to.0, to.1)?;
            if let Some(uuid) = target.meta.uuid {
                dropped = Bson::Binary(bson::Binary::from_uuid(uuid));
            }
        }
        let _ddl = self.ddl.lock();
        let collection = self
            .collection(from.0, from.1)
            .ok_or_else(|| Error::NamespaceNotFound("source namespace does not exist".into()))?;
        if self.collection(to.0, to.1).is_some() {
            return Err(Error::NamespaceExists("target namespace exists".into()));
        }
        let lock = Arc::clone(&collection.write_lock);
        let _write = lock.lock();
        self.check_not_held(&collection)?;
        let mut meta = collection.meta.clone();
        meta.db = to.0.into();
        meta.name = to.1.into();
        if from.0 != to.0 {
            // As in MongoDB, a collection moved to another database is a new collection there.
            meta.uuid = Some(Uuid::new());
        }
        let mut txn = engine.begin();
        self.delete_entry(&mut txn, namespace_key(from.0, from.1));
        self.put_meta(&mut txn, &meta)?;
        let rename = bson::doc! {
            "renameCollection": format!("{}.{}", from.0, from.1),
            "to": format!("{}.{}", to.0, to.1),
            "stayTemp": false,
            "dropTarget": dropped,
        };
        let entries = self.command_entries(from.0, rename, collection.meta.uuid)?;
        self.commit_logged(engine, txn, from.0, entries, Durability::Immediate)?;
        let renamed =
            Arc::new(Collection::open(engine, meta, Arc::clone(&collection.write_lock), self.document_compression)?);
        let mut map = self.collections.write();
        map.remove(&(from.0.to_string(), from.1.to_string()));
        map.insert((to.0.to_string(), to.1.to_string()), renamed);
        Ok(())
    }

    /// The database's collections, then its views.
    pub fn list_collections(&self, db: &str) -> Vec<CollectionInfo> {
        let collections = self.collections.read();
        let mut infos: Vec<CollectionInfo> = collections
            .iter()
            .filter(|((collection_db, _), _)| collection_db == db)
            .map(|((_, name), collection)| CollectionInfo {
                name: name.clone(),
                options: collection.meta.options.clone(),
                view: false,
                uuid: collection.meta.uuid,
            })
            .collect();
        let views = self.views.read();
        let of_db = views.iter().filter(|((view_db, _), _)| view_db == db);
        infos.extend(of_db.map(|((_, name), view)| CollectionInfo {
            name: name.clone(),
            options: view.options(),
            view: true,
            uuid: None,
        }));
        infos
    }

    /// The databases that hold a collection, in name order (from the catalog alone).
    pub fn database_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.collections.read().keys().map(|(db, _)| db.clone()).collect();
        names.dedup();
        names
    }

    pub fn list_databases(&self, engine: &Engine) -> Result<Vec<DatabaseInfo>> {
        let names = self.database_names();
        let mut databases = Vec::with_capacity(names.len());
        for name in names {
            let mut size = 0u64;
            for info in self.list_collections(&name) {
                if let Some(collection) = self.collection(&name, &info.name) {
                    size += self.collection_size(engine, &collection)?;
                }
            }
            databases.push(DatabaseInfo { name, size_on_disk: size, empty: size == 0 });
        }
        Ok(databases)
    }

    /// Replaces a collection's catalog entry (under its write lock) and installs the new
    /// descriptor; the caller may add the catalog write to a transaction of its own instead.
    pub fn replace_meta(&self, engine: &Engine, old: &Collection, meta: CollectionMeta) -> Result<Arc<Collection>> {
        self.replace_meta_logged(engine, old, meta, Vec::new())
    }

    /// [`Catalog::replace_meta`] with oplog entries committed with the change.
    pub fn replace_meta_logged(
        &self,
        engine: &Engine,
        old: &Collection,
        meta: CollectionMeta,
        entries: Vec<Entry>,
    ) -> Result<Arc<Collection>> {
        let mut txn = engine.begin();
        self.put_meta(&mut txn, &meta)?;
        self.commit_logged(engine, txn, &meta.db, entries, Durability::Immediate)?;
        self.install(engine, old, meta)
    }

    /// Installs a descriptor for `meta` whose catalog entry is already committed.
    pub fn install(&self, engine: &Engine, old: &Collection, meta: CollectionMeta) -> Result<Arc<Collection>> {
        let key = (meta.db.clone(), meta.name.clone());
        let collection =
            Arc::new(Collection::open(engine, meta, Arc::clone(&old.write_lock), self.document_compression)?);
        self.collections.write().insert(key, Arc::clone(&collection));
        Ok(collection)
    }

    /// The index metadata list with one index changed.
    pub fn with_index(meta: &CollectionMeta, name: &str, change: impl Fn(&mut IndexMeta)) -> CollectionMeta {
        let mut meta = meta.clone();
        for index in &mut meta.indexes {
            if index.name() == name {
                change(index);
            }
        }
        meta
    }

    /// listCollections' `info`-less options document, for tests and the server.
    pub fn collection_options(&self, db: &str, name: &str) -> Option<Document> {
        self.collection(db, name).map(|collection| collection.meta.options.clone())
    }
}

/// The catalog's copy. An empty copy beside a catalog with entries (a directory from before
/// the copy existed, or a crash right after the copy's tree was created) is filled from
/// `__catalog` in one transaction; a copy with any entry is whole, since every change writes
/// both. A salvage writes nothing: it reads the copy as it finds it.
fn ensure_copy_tree(engine: &Engine) -> Result<TreeId> {
    let copy = ensure_tree(engine, entry::CATALOG_COPY_TREE)?;
    let Some(catalog) = engine.tree(entry::CATALOG_TREE) else { return Ok(copy) };
    let snapshot = engine.snapshot();
    if engine.options().salvage || snapshot.iter(copy).next().is_some() {
        return Ok(copy);
    }
    let mut txn = engine.begin();
    for item in snapshot.iter(catalog) {
        let (key, value) = item?;
        txn.put(copy, key, value);
    }
    txn.commit(Durability::Immediate)?;
    Ok(copy)
}

/// A salvage's catalog: every entry readable in `__catalog`, and from its copy those that a
/// damaged part of `__catalog` hides. Refused when a damaged part of the catalog is not covered
/// by an undamaged copy: a collection missing from the salvage would be lost without a word.
fn salvage_entries(
    catalog: impl Iterator<Item = storage::Result<Salvaged>>,
    copy: impl Iterator<Item = storage::Result<Salvaged>>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let (entries, damage) = readable(catalog);
    let Some(damage) = damage else { return Ok(entries.into_iter().collect()) };
    let (copied, copy_damage) = readable(copy);
    if copied.is_empty() || copy_damage.is_some() {
        let copy = copy_damage.map_or("it has no copy".to_owned(), |error| format!("its copy is damaged too: {error}"));
        return Err(Error::corrupt(format!("the catalog is damaged ({damage}) and {copy}")));
    }
    let mut merged = copied;
    merged.extend(entries);
    Ok(merged.into_iter().collect())
}

/// The entries of a salvaged tree, and the first damage met, if any.
fn readable(items: impl Iterator<Item = storage::Result<Salvaged>>) -> (BTreeMap<Vec<u8>, Vec<u8>>, Option<String>) {
    let (mut entries, mut damage) = (BTreeMap::new(), None);
    for item in items {
        match item {
            Ok(Salvaged::Entry(key, value)) => {
                entries.insert(key, value);
            }
            Ok(Salvaged::Lost { error, .. }) => damage = damage.or(Some(error.to_string())),
            Err(error) => damage = damage.or(Some(error.to_string())),
        }
    }
    (entries, damage)
}

fn ensure_tree(engine: &Engine, name: &str) -> Result<TreeId> {
    match engine.tree(name) {
        Some(id) => Ok(id),
        None => Ok(engine.create_tree(name)?),
    }
}

fn drop_garbage_trees(engine: &Engine, metas: &[CollectionMeta]) -> Result<()> {
    let named: HashSet<&str> = metas.iter().flat_map(CollectionMeta::trees).collect();
    for tree in engine.list_trees() {
        let ours = [COLLECTION_TREE_PREFIX, INDEX_TREE_PREFIX, TEMP_TREE_PREFIX, entry::NATURAL_TREE_PREFIX]
            .iter()
            .any(|prefix| tree.starts_with(prefix));
        if ours && !named.contains(tree.as_str()) {
            engine.drop_tree(&tree)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreOptions};

    /// Goal: an entry written before collections had UUIDs gets one at the catalog's next
    /// open, and keeps that one at every open after.
    #[test]
    fn entries_without_a_uuid_get_one_that_stays() {
        let engine = Engine::open_in_memory(storage::Options::default()).unwrap();
        let catalog = Catalog::open(&engine, None).unwrap();
        let created = catalog.create_collection(&engine, "db", "old", Document::new()).unwrap();
        let mut older = created.meta.clone();
        older.uuid = None;
        let mut txn = engine.begin();
        catalog.put_meta(&mut txn, &older).unwrap();
        txn.commit(Durability::Immediate).unwrap();
        drop(catalog);
        let given = Catalog::open(&engine, None).unwrap().collection("db", "old").unwrap().meta.uuid;
        assert!(given.is_some());
        assert_ne!(given, created.meta.uuid, "a new UUID, not a remembered one");
        let again = Catalog::open(&engine, None).unwrap().collection("db", "old").unwrap().meta.uuid;
        assert_eq!(again, given);
    }

    fn entry(key: &str) -> storage::Result<Salvaged> {
        Ok(Salvaged::Entry(key.as_bytes().to_vec(), format!("value of {key}").into_bytes()))
    }

    fn lost() -> storage::Result<Salvaged> {
        Ok(Salvaged::Lost { from: None, to: None, error: storage::Error::Corruption("a flipped bit".into()) })
    }

    fn keys(entries: Result<Vec<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
        entries.expect("salvaged").into_iter().map(|(key, _)| String::from_utf8(key).expect("utf-8")).collect()
    }

    #[test]
    fn a_salvage_reads_what_the_damaged_catalog_hides_from_its_copy() {
        let whole = || vec![entry("a"), entry("b"), entry("c")].into_iter();
        assert_eq!(keys(salvage_entries(whole(), std::iter::empty())), ["a", "b", "c"], "no damage: the catalog alone");
        let damaged = || vec![entry("a"), lost(), entry("c")].into_iter();
        assert_eq!(keys(salvage_entries(damaged(), whole())), ["a", "b", "c"], "b comes from the copy");
        assert!(salvage_entries(damaged(), std::iter::empty()).is_err(), "no copy: refused, not silently short");
        assert!(salvage_entries(damaged(), damaged()).is_err(), "both damaged: refused");
    }

    /// Every change to the catalog reaches its copy in the same transaction, and a directory
    /// without a copy (made before it existed) gets one when it is opened.
    #[test]
    fn the_copy_follows_every_catalog_change() {
        let store = Store::open_in_memory(StoreOptions::default()).expect("store");
        store.create_collection("db", "a", bson::doc! {}).expect("create");
        store.create_indexes("db", "a", &[bson::doc! {"key": {"x": 1}, "name": "x_1"}]).expect("index");
        store.create_collection("db", "b", bson::doc! {"capped": true, "size": 4096}).expect("capped");
        store.create_collection("db", "v", bson::doc! {"viewOn": "a", "pipeline": []}).expect("view");
        store.rename_collection(("db", "b"), ("db", "c"), false).expect("rename");
        store.drop_collection("db", "a").expect("drop");
        let same = |store: &Store| {
            let (engine, catalog) = (&store.inner.engine, &store.inner.catalog);
            let read = |tree| engine.snapshot().iter(tree).collect::<storage::Result<Vec<_>>>().expect("read");
            let entries = read(catalog.tree);
            assert!(entries.len() >= 3, "the tree counter, c and the view");
            assert_eq!(entries, read(catalog.copy_tree));
        };
        same(&store);
        store.inner.engine.drop_tree(entry::CATALOG_COPY_TREE).expect("drop the copy");
        assert!(ensure_copy_tree(&store.inner.engine).is_ok());
        let copy = store.inner.engine.tree(entry::CATALOG_COPY_TREE).expect("made again");
        let copied = store.inner.engine.snapshot().iter(copy).count();
        let catalog = store.inner.engine.snapshot().iter(store.inner.catalog.tree).count();
        assert_eq!(copied, catalog, "a missing copy is made from the catalog");
    }
}
