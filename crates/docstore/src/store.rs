//! The store's shared state: the engine, the catalog cache, the locks; opening and recovery of
//! the catalog.
//!
//! Open: create or find `__catalog` and `__counts`, load every catalog entry, drop garbage trees
//! (named like ours but in no entry: an interrupted create or drop), finish interrupted index
//! builds. Threads: the engine's own, plus the TTL monitor ([`crate::index::ttl`]), which holds
//! only a `Weak` reference so that `close` can take the store back.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use storage::{Durability, Engine, TreeId};

use crate::StoreOptions;
use crate::catalog::{self, CollectionMeta};
use crate::collection::Collection;
use crate::error::{Error, Result};

pub type CollectionMap = BTreeMap<(String, String), Arc<Collection>>;

pub struct Inner {
    pub engine: Engine,
    pub options: StoreOptions,
    pub catalog_tree: TreeId,
    pub counts_tree: TreeId,
    pub collections: RwLock<CollectionMap>,
    /// Held by every catalog change (create, drop, rename, tree allocation).
    pub ddl: Mutex<()>,
    /// Names temporary trees (sort spills) uniquely within this process.
    pub temp_counter: AtomicU64,
}

/// A write lock held on one collection, with the descriptor current under it.
pub struct Locked {
    pub _guard: parking_lot::ArcMutexGuard<parking_lot::RawMutex, ()>,
    pub collection: Arc<Collection>,
}

impl Inner {
    /// Makes the document writes committed so far as durable as `durability` asks, once their
    /// collection locks are released (see `write::under_lock`): for `Immediate`, a log sync
    /// that concurrent writers share.
    pub fn make_durable(&self, durability: Durability) -> Result<()> {
        match durability {
            Durability::Immediate => Ok(self.engine.sync()?),
            Durability::Periodic | Durability::None => Ok(()),
        }
    }

    /// `outcome`, once the writes before it are as durable as asked (whether it succeeded or
    /// not: an earlier statement's writes may stand).
    pub fn made_durable<T>(&self, durability: Durability, outcome: Result<T>) -> Result<T> {
        self.make_durable(durability)?;
        outcome
    }

    pub fn open(engine: Engine, options: StoreOptions) -> Result<Inner> {
        let catalog_tree = ensure_tree(&engine, catalog::CATALOG_TREE)?;
        let counts_tree = ensure_tree(&engine, catalog::COUNTS_TREE)?;
        let inner = Inner {
            engine,
            options,
            catalog_tree,
            counts_tree,
            collections: RwLock::new(BTreeMap::new()),
            ddl: Mutex::new(()),
            temp_counter: AtomicU64::new(0),
        };
        let metas = inner.load_catalog()?;
        inner.drop_garbage_trees(&metas)?;
        for meta in metas {
            let key = (meta.db.clone(), meta.name.clone());
            let collection = Collection::open(&inner, meta, Arc::new(Mutex::new(())))?;
            inner.collections.write().insert(key, Arc::new(collection));
        }
        inner.finish_index_builds()?;
        Ok(inner)
    }

    fn load_catalog(&self) -> Result<Vec<CollectionMeta>> {
        let snapshot = self.engine.snapshot();
        let mut metas = Vec::new();
        for entry in snapshot.iter(self.catalog_tree) {
            let (key, value) = entry?;
            if key.first() == Some(&0) {
                continue;
            }
            metas.push(CollectionMeta::decode(&value)?);
        }
        Ok(metas)
    }

    fn drop_garbage_trees(&self, metas: &[CollectionMeta]) -> Result<()> {
        let named: HashSet<&str> = metas.iter().flat_map(CollectionMeta::trees).collect();
        for tree in self.engine.list_trees() {
            let ours = [catalog::COLLECTION_TREE_PREFIX, catalog::INDEX_TREE_PREFIX, catalog::TEMP_TREE_PREFIX]
                .iter()
                .any(|prefix| tree.starts_with(prefix));
            if ours && !named.contains(tree.as_str()) {
                self.engine.drop_tree(&tree)?;
            }
        }
        Ok(())
    }

    /// Index builds a crash interrupted start again (entries are idempotent puts).
    fn finish_index_builds(&self) -> Result<()> {
        let pending: Vec<(String, String, String)> = self
            .collections
            .read()
            .values()
            .flat_map(|c| {
                c.indexes
                    .iter()
                    .filter(|i| !i.meta.ready)
                    .map(|i| (c.meta.db.clone(), c.meta.name.clone(), i.name.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (db, name, index) in pending {
            crate::index::build::build(self, &db, &name, &index)?;
        }
        Ok(())
    }

    pub fn tree_id(&self, name: &str) -> Result<TreeId> {
        self.engine
            .tree(name)
            .ok_or_else(|| Error::corrupt(format!("the catalog names tree {name}, which does not exist")))
    }

    /// Creates a tree with a fresh name `<prefix><n>`; the counter is durable before the tree
    /// exists, so a name is never reused.
    pub fn new_tree(&self, prefix: &str) -> Result<String> {
        let snapshot = self.engine.snapshot();
        let next = match snapshot.get(self.catalog_tree, catalog::NEXT_TREE_KEY)? {
            Some(bytes) => u64::from_le_bytes(
                bytes.as_slice().try_into().map_err(|_| Error::corrupt("tree counter is not 8 bytes"))?,
            ),
            None => 1,
        };
        let mut txn = self.engine.begin();
        txn.put(self.catalog_tree, catalog::NEXT_TREE_KEY.to_vec(), (next + 1).to_le_bytes().to_vec());
        txn.commit(Durability::Immediate)?;
        let name = format!("{prefix}{next}");
        self.engine.create_tree(&name)?;
        Ok(name)
    }

    /// A temporary tree name, unique in this process (dropped when done, or at the next open).
    pub fn temp_tree_name(&self) -> String {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        format!("{}{}.{n}", catalog::TEMP_TREE_PREFIX, std::process::id())
    }

    pub fn collection(&self, db: &str, name: &str) -> Option<Arc<Collection>> {
        self.collections.read().get(&(db.to_string(), name.to_string())).cloned()
    }

    pub fn existing(&self, db: &str, name: &str) -> Result<Arc<Collection>> {
        self.collection(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))
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
    pub fn lock_or_create(&self, db: &str, name: &str) -> Result<Locked> {
        loop {
            self.collection_or_create(db, name)?;
            if let Some(locked) = self.lock(db, name) {
                return Ok(locked);
            }
        }
    }

    /// The maintained counters of a collection: (documents, bytes of documents).
    pub fn counters(&self, collection: &Collection) -> Result<(i64, i64)> {
        let snapshot = self.engine.snapshot();
        let read = |key: &[u8]| -> Result<i64> {
            match snapshot.get(self.counts_tree, key)? {
                Some(bytes) => Ok(i64::from_le_bytes(
                    bytes.as_slice().try_into().map_err(|_| Error::corrupt("counter is not 8 bytes"))?,
                )),
                None => Ok(0),
            }
        };
        Ok((read(&collection.count_key)?, read(&collection.size_key)?))
    }

    pub fn collection_size(&self, collection: &Collection) -> Result<u64> {
        Ok(self.counters(collection)?.1.max(0) as u64)
    }
}

fn ensure_tree(engine: &Engine, name: &str) -> Result<TreeId> {
    match engine.tree(name) {
        Some(id) => Ok(id),
        None => Ok(engine.create_tree(name)?),
    }
}
