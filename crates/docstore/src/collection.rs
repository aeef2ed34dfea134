//! Collections at run time, and the catalog operations on them (create, drop, rename, list).
//!
//! A [`Collection`] is an immutable descriptor: its catalog entry, its trees, its parsed
//! indexes. A change (an index added, an index turned multikey) builds a new descriptor and
//! swaps it into the store's map; readers keep whichever `Arc` they took.
//!
//! Locking: each collection has one write lock (`write_lock`, shared by all its descriptors)
//! held by every write to it (insert, update, delete, index build batch, drop, rename), so a
//! write reads the newest descriptor after taking the lock and sees every index. Readers take
//! no lock. Catalog changes of any collection also hold the store's `ddl` lock, taken before
//! any collection's write lock (one order, no deadlock).

use std::sync::Arc;

use bson::{Document, doc};
use parking_lot::Mutex;
use storage::{Durability, TreeId};

use crate::catalog::{self, CollectionMeta, IndexMeta, count_key, namespace_key, size_key};
use crate::error::{Error, Result};
use crate::index::Index;
use crate::store::Inner;

/// A collection's descriptor.
#[derive(Debug)]
pub struct Collection {
    pub meta: CollectionMeta,
    pub tree: TreeId,
    /// Every index, ready or building (writers maintain both).
    pub indexes: Vec<Index>,
    pub write_lock: Arc<Mutex<()>>,
    pub count_key: Vec<u8>,
    pub size_key: Vec<u8>,
}

impl Collection {
    pub fn open(inner: &Inner, meta: CollectionMeta, write_lock: Arc<Mutex<()>>) -> Result<Collection> {
        let tree = inner.tree_id(&meta.tree)?;
        let mut indexes = Vec::with_capacity(meta.indexes.len());
        for index in &meta.indexes {
            indexes.push(Index::open(index, inner.tree_id(&index.tree)?)?);
        }
        Ok(Collection {
            count_key: count_key(&meta.tree),
            size_key: size_key(&meta.tree),
            meta,
            tree,
            indexes,
            write_lock,
        })
    }

    pub fn namespace(&self) -> String {
        format!("{}.{}", self.meta.db, self.meta.name)
    }

    pub fn index(&self, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|index| index.name == name)
    }

    /// Indexes the planner may use.
    pub fn ready_indexes(&self) -> impl Iterator<Item = &Index> {
        self.indexes.iter().filter(|index| index.meta.ready)
    }
}

/// What listCollections says about one collection.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionInfo {
    pub name: String,
    pub options: Document,
}

/// What listDatabases says about one database.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseInfo {
    pub name: String,
    /// Bytes of its documents and index entries, as the engine counts them.
    pub size_on_disk: u64,
    pub empty: bool,
}

impl Inner {
    /// Creates a collection; `NamespaceExists` if it exists.
    pub fn create_collection(&self, db: &str, name: &str, options: Document) -> Result<Arc<Collection>> {
        catalog::validate_user_collection(db, name)?;
        let _ddl = self.ddl.lock();
        if self.collection(db, name).is_some() {
            return Err(Error::NamespaceExists(format!("Collection {db}.{name} already exists.")));
        }
        self.create_collection_locked(db, name, options)
    }

    /// The collection, created with default options if absent (implicit creation by a write).
    pub fn collection_or_create(&self, db: &str, name: &str) -> Result<Arc<Collection>> {
        if let Some(collection) = self.collection(db, name) {
            return Ok(collection);
        }
        catalog::validate_user_collection(db, name)?;
        let _ddl = self.ddl.lock();
        match self.collection(db, name) {
            Some(collection) => Ok(collection),
            None => self.create_collection_locked(db, name, Document::new()),
        }
    }

    /// Creates `db.name` if absent, where it is one of [`catalog::SERVER_COLLECTIONS`].
    pub fn ensure_system_collection(&self, db: &str, name: &str) -> Result<()> {
        catalog::validate_server_collection(db, name)?;
        let _ddl = self.ddl.lock();
        if self.collection(db, name).is_none() {
            self.create_collection_locked(db, name, Document::new())?;
        }
        Ok(())
    }

    fn create_collection_locked(&self, db: &str, name: &str, options: Document) -> Result<Arc<Collection>> {
        let tree = self.new_tree(catalog::COLLECTION_TREE_PREFIX)?;
        let meta = CollectionMeta { db: db.into(), name: name.into(), tree, options, indexes: Vec::new() };
        let mut txn = self.engine.begin();
        txn.put(self.catalog_tree, namespace_key(db, name), meta.encode()?);
        txn.commit(Durability::Immediate)?;
        let collection = Arc::new(Collection::open(self, meta, Arc::new(Mutex::new(())))?);
        self.collections.write().insert((db.into(), name.into()), Arc::clone(&collection));
        Ok(collection)
    }

    /// Drops a collection and its trees; `Ok(false)` when it did not exist.
    pub fn drop_collection(&self, db: &str, name: &str) -> Result<bool> {
        let _ddl = self.ddl.lock();
        let Some(collection) = self.collection(db, name) else {
            return Ok(false);
        };
        let lock = Arc::clone(&collection.write_lock);
        let _write = lock.lock();
        let mut txn = self.engine.begin();
        txn.delete(self.catalog_tree, namespace_key(db, name));
        txn.delete(self.counts_tree, collection.count_key.clone());
        txn.delete(self.counts_tree, collection.size_key.clone());
        txn.commit(Durability::Immediate)?;
        self.collections.write().remove(&(db.to_string(), name.to_string()));
        for tree in collection.meta.trees() {
            self.engine.drop_tree(tree)?;
        }
        Ok(true)
    }

    /// Drops every collection of a database.
    pub fn drop_database(&self, db: &str) -> Result<()> {
        catalog::validate_db_name(db)?;
        for info in self.list_collections(db) {
            self.drop_collection(db, &info.name)?;
        }
        Ok(())
    }

    /// Renames a collection, within or across databases; its trees stay as they are.
    pub fn rename_collection(&self, from: (&str, &str), to: (&str, &str), drop_target: bool) -> Result<()> {
        catalog::validate_user_collection(to.0, to.1)?;
        if from == to {
            return Err(Error::IllegalOperation("Can't rename a collection to itself".into()));
        }
        if self.collection(to.0, to.1).is_some() {
            if !drop_target {
                return Err(Error::NamespaceExists("target namespace exists".into()));
            }
            self.drop_collection(to.0, to.1)?;
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
        let mut meta = collection.meta.clone();
        meta.db = to.0.into();
        meta.name = to.1.into();
        let mut txn = self.engine.begin();
        txn.delete(self.catalog_tree, namespace_key(from.0, from.1));
        txn.put(self.catalog_tree, namespace_key(to.0, to.1), meta.encode()?);
        txn.commit(Durability::Immediate)?;
        let renamed = Arc::new(Collection::open(self, meta, Arc::clone(&collection.write_lock))?);
        let mut map = self.collections.write();
        map.remove(&(from.0.to_string(), from.1.to_string()));
        map.insert((to.0.to_string(), to.1.to_string()), renamed);
        Ok(())
    }

    pub fn list_collections(&self, db: &str) -> Vec<CollectionInfo> {
        self.collections
            .read()
            .iter()
            .filter(|((collection_db, _), _)| collection_db == db)
            .map(|((_, name), collection)| CollectionInfo {
                name: name.clone(),
                options: collection.meta.options.clone(),
            })
            .collect()
    }

    pub fn list_databases(&self) -> Result<Vec<DatabaseInfo>> {
        let mut names: Vec<String> = self.collections.read().keys().map(|(db, _)| db.clone()).collect();
        names.dedup();
        let mut databases = Vec::with_capacity(names.len());
        for name in names {
            let mut size = 0u64;
            for info in self.list_collections(&name) {
                if let Some(collection) = self.collection(&name, &info.name) {
                    size += self.collection_size(&collection)?;
                }
            }
            databases.push(DatabaseInfo { name, size_on_disk: size, empty: size == 0 });
        }
        Ok(databases)
    }

    /// Replaces a collection's catalog entry (under its write lock) and installs the new
    /// descriptor; the caller may add the catalog write to a transaction of its own instead.
    pub fn replace_meta(&self, old: &Collection, meta: CollectionMeta) -> Result<Arc<Collection>> {
        let mut txn = self.engine.begin();
        txn.put(self.catalog_tree, namespace_key(&meta.db, &meta.name), meta.encode()?);
        txn.commit(Durability::Immediate)?;
        self.install(old, meta)
    }

    /// Installs a descriptor for `meta` whose catalog entry is already committed.
    pub fn install(&self, old: &Collection, meta: CollectionMeta) -> Result<Arc<Collection>> {
        let key = (meta.db.clone(), meta.name.clone());
        let collection = Arc::new(Collection::open(self, meta, Arc::clone(&old.write_lock))?);
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

/// The implicit `_id` index as listIndexes shows it.
pub fn id_index_spec() -> Document {
    doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }
}
