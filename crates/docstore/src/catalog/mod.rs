//! The catalog: which databases and collections exist, their options, their indexes, and the
//! engine trees that hold them. Durable in the engine's `__catalog` tree (entries: [`entry`]),
//! cached in memory as one [`Descriptor`] per collection ([`descriptor`]); [`Catalog`] owns
//! both, and the `__counts` tree of their counters. Catalog changes (create, drop, rename,
//! collMod, views) are in [`ddl`]; they run over the store's context, which logs them.
//!
//! Invariants: every tree named in the catalog exists; a tree named `c.<n>` or `i.<n>` that no
//! entry names is garbage from an interrupted create or drop and is dropped at open. Trees are
//! created before the entry naming them is committed and dropped after the entry is removed, so
//! a crash between the two leaves only such garbage. A change to a collection (an index added,
//! an index turned multikey) commits its entry, then swaps a new descriptor into the map
//! ([`Catalog::install`]); readers keep whichever `Arc` they took.
//!
//! Locking: each collection has one write lock (`Descriptor::write_lock`, shared by all its
//! descriptors) held by every write to it (insert, update, delete, index build batch, drop,
//! rename), so a write reads the newest descriptor after taking the lock ([`Catalog::lock`])
//! and sees every index. Readers take no lock. Catalog changes of any collection also hold the
//! catalog's `ddl` lock, taken before any collection's write lock (one order, no deadlock).

pub(crate) mod ddl;
pub(crate) mod descriptor;
pub(crate) mod entry;
pub(crate) mod key_format;
pub(crate) mod view;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bson::{Document, Uuid};
use parking_lot::{Mutex, MutexGuard, RwLock};
use storage::{Durability, Engine, Salvaged, Snapshot, Transaction, TreeId};

pub(crate) use descriptor::{CollectionInfo, DatabaseInfo, Descriptor, clustered_index_option, id_index_spec, tree_id};
pub(crate) use entry::{
    COLLECTION_TREE_PREFIX, CollectionMeta, INDEX_TREE_PREFIX, IndexMeta, TEMP_TREE_PREFIX, count_key, namespace_key,
    size_key, validate_db_name, validate_user_collection,
};
pub(crate) use view::ViewMeta;

use crate::error::{Error, Result};

type CollectionMap = BTreeMap<(String, String), Arc<Descriptor>>;

/// The durable catalog and its cache of collection descriptors.
pub(crate) struct Catalog {
    /// `__catalog`: the entries.
    tree: TreeId,
    /// `__catalog_copy`: the same entries, written with them (read only by a salvage).
    copy_tree: TreeId,
    /// `__counts`: documents and bytes per collection, logical bytes per index.
    counts_tree: TreeId,
    collections: RwLock<CollectionMap>,
    /// The views' definitions ([`view`]), by (db, name); a name is a collection or a view.
    views: RwLock<BTreeMap<(String, String), ViewMeta>>,
    /// Held by every catalog change (create, drop, rename, tree allocation).
    ddl: Mutex<()>,
    /// How a collection's documents are compressed when its options do not say (`None`: the
    /// engine's setting, as for indexes).
    document_compression: Option<storage::Compression>,
}

/// A write lock held on one collection, with the descriptor current under it.
pub(crate) struct Locked {
    pub _guard: parking_lot::ArcMutexGuard<parking_lot::RawMutex, ()>,
    pub collection: Arc<Descriptor>,
}

impl Catalog {
    /// Creates or finds `__catalog` and `__counts`, loads every entry, drops garbage trees
    /// (named like ours but in no entry: an interrupted create or drop).
    pub(crate) fn open(engine: &Engine, document_compression: Option<storage::Compression>) -> Result<Catalog> {
        let catalog = Catalog {
            tree: ensure_tree(engine, entry::CATALOG_TREE)?,
            copy_tree: ensure_copy_tree(engine)?,
            counts_tree: ensure_tree(engine, entry::COUNTS_TREE)?,
            collections: RwLock::new(BTreeMap::new()),
            views: RwLock::new(BTreeMap::new()),
            ddl: Mutex::new(()),
            document_compression,
        };
        let (mut metas, views) = catalog.load(engine)?;
        drop_garbage_trees(engine, &metas)?;
        catalog.give_uuids(engine, &mut metas)?;
        catalog.views.write().extend(views.into_iter().map(|view| ((view.db.clone(), view.name.clone()), view)));
        for meta in metas {
            let key = (meta.db.clone(), meta.name.clone());
            let collection = Descriptor::open(engine, meta, Arc::new(Mutex::new(())), catalog.document_compression)?;
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
    pub(crate) fn tree(&self) -> TreeId {
        self.tree
    }

    /// Adds a collection's entry to `txn`, in the catalog and its copy (a write that commits a
    /// catalog change with its own messages).
    pub(crate) fn put_meta(&self, txn: &mut Transaction<'_>, meta: &CollectionMeta) -> Result<()> {
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
    pub(crate) fn counts_tree(&self) -> TreeId {
        self.counts_tree
    }

    /// How documents are compressed where a collection's options do not say (`None`: the
    /// engine's setting).
    pub(crate) fn document_compression(&self) -> Option<storage::Compression> {
        self.document_compression
    }

    /// The lock every catalog change holds.
    pub(crate) fn ddl(&self) -> MutexGuard<'_, ()> {
        self.ddl.lock()
    }

    /// Every collection's descriptor, as they are now.
    pub(crate) fn collections(&self) -> Vec<Arc<Descriptor>> {
        self.collections.read().values().cloned().collect()
    }

    /// Indexes whose build a crash interrupted: (db, collection, index).
    pub(crate) fn unfinished_index_builds(&self) -> Vec<(String, String, String)> {
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

    pub(crate) fn collection(&self, db: &str, name: &str) -> Option<Arc<Descriptor>> {
        self.collections.read().get(&(db.to_string(), name.to_string())).cloned()
    }

    pub(crate) fn existing(&self, db: &str, name: &str) -> Result<Arc<Descriptor>> {
        self.refuse_view(db, name)?;
        self.collection(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))
    }

    /// Whether `db.name` is a view. Every write asks: without views, the answer costs no key to
    /// build.
    pub(crate) fn is_view(&self, db: &str, name: &str) -> bool {
        let views = self.views.read();
        !views.is_empty() && views.contains_key(&(db.to_string(), name.to_string()))
    }

    /// CommandNotSupportedOnView for a write, an index or a rename aimed at a view.
    pub(crate) fn refuse_view(&self, db: &str, name: &str) -> Result<()> {
        match self.is_view(db, name) {
            true => Err(Error::CommandNotSupportedOnView(format!("Namespace {db}.{name} is a view, not a collection"))),
            false => Ok(()),
        }
    }

    /// What a read of `name` reads: the source collection under its chain of views (itself
    /// when it is not a view) and the pipeline that turns it into `name`, innermost view's
    /// stages first. `None` when `name` is not a view.
    pub(crate) fn resolve_view(&self, db: &str, name: &str) -> Result<Option<(String, Vec<Document>)>> {
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

    /// Takes the collection's write lock; `None` if it does not exist (or was dropped while
    /// we waited).
    pub(crate) fn lock(&self, db: &str, name: &str) -> Option<Locked> {
        loop {
            let collection = self.collection(db, name)?;
            let guard = collection.write_lock.lock_arc();
            let current = self.collection(db, name)?;
            if Arc::ptr_eq(&current.write_lock, &collection.write_lock) {
                return Some(Locked { _guard: guard, collection: current });
            }
        }
    }

    /// The maintained counters of a collection: (documents, bytes of documents).
    pub(crate) fn counters(&self, engine: &Engine, collection: &Descriptor) -> Result<(i64, i64)> {
        let snapshot = engine.snapshot();
        Ok((self.read_counter(&snapshot, &collection.count_key)?, self.read_counter(&snapshot, &collection.size_key)?))
    }

    /// One counter of `__counts` (an index's logical bytes: `size_key` of its tree).
    pub(crate) fn counter(&self, engine: &Engine, key: &[u8]) -> Result<i64> {
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

    pub(crate) fn collection_size(&self, engine: &Engine, collection: &Descriptor) -> Result<u64> {
        Ok(self.counters(engine, collection)?.1.max(0) as u64)
    }

    /// The database's collections, then its views.
    pub(crate) fn list_collections(&self, db: &str) -> Vec<CollectionInfo> {
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
    pub(crate) fn database_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.collections.read().keys().map(|(db, _)| db.clone()).collect();
        names.dedup();
        names
    }

    pub(crate) fn list_databases(&self, engine: &Engine) -> Result<Vec<DatabaseInfo>> {
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

    /// Installs a descriptor for `meta` whose catalog entry is already committed.
    pub(crate) fn install(&self, engine: &Engine, old: &Descriptor, meta: CollectionMeta) -> Result<Arc<Descriptor>> {
        let key = (meta.db.clone(), meta.name.clone());
        let collection =
            Arc::new(Descriptor::open(engine, meta, Arc::clone(&old.write_lock), self.document_compression)?);
        self.collections.write().insert(key, Arc::clone(&collection));
        Ok(collection)
    }

    /// The index metadata list with one index changed.
    pub(crate) fn with_index(meta: &CollectionMeta, name: &str, change: impl Fn(&mut IndexMeta)) -> CollectionMeta {
        let mut meta = meta.clone();
        for index in &mut meta.indexes {
            if index.name() == name {
                change(index);
            }
        }
        meta
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

pub(crate) fn ensure_tree(engine: &Engine, name: &str) -> Result<TreeId> {
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
        let store = Store::open_in_memory(StoreOptions::default()).unwrap();
        store.collection(("db", "old")).create(Document::new()).unwrap();
        let (engine, catalog) = (&store.cx.engine, &store.cx.catalog);
        let created = catalog.collection("db", "old").unwrap();
        let mut older = created.meta.clone();
        older.uuid = None;
        let mut txn = engine.begin();
        catalog.put_meta(&mut txn, &older).unwrap();
        txn.commit(Durability::Immediate).unwrap();
        let given = Catalog::open(engine, None).unwrap().collection("db", "old").unwrap().meta.uuid;
        assert!(given.is_some());
        assert_ne!(given, created.meta.uuid, "a new UUID, not a remembered one");
        let again = Catalog::open(engine, None).unwrap().collection("db", "old").unwrap().meta.uuid;
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
        store.collection(("db", "a")).create(bson::doc! {}).expect("create");
        store.collection(("db", "a")).create_indexes(&[bson::doc! {"key": {"x": 1}, "name": "x_1"}]).expect("index");
        store.collection(("db", "b")).create(bson::doc! {"capped": true, "size": 4096}).expect("capped");
        store.collection(("db", "v")).create(bson::doc! {"viewOn": "a", "pipeline": []}).expect("view");
        store.collection(("db", "b")).rename(("db", "c"), false).expect("rename");
        store.collection(("db", "a")).drop().expect("drop");
        let same = |store: &Store| {
            let (engine, catalog) = (&store.cx.engine, &store.cx.catalog);
            let read = |tree| engine.snapshot().iter(tree).collect::<storage::Result<Vec<_>>>().expect("read");
            let entries = read(catalog.tree);
            assert!(entries.len() >= 3, "the tree counter, c and the view");
            assert_eq!(entries, read(catalog.copy_tree));
        };
        same(&store);
        store.cx.engine.drop_tree(entry::CATALOG_COPY_TREE).expect("drop the copy");
        assert!(ensure_copy_tree(&store.cx.engine).is_ok());
        let copy = store.cx.engine.tree(entry::CATALOG_COPY_TREE).expect("made again");
        let copied = store.cx.engine.snapshot().iter(copy).count();
        let catalog = store.cx.engine.snapshot().iter(store.cx.catalog.tree).count();
        assert_eq!(copied, catalog, "a missing copy is made from the catalog");
    }
}
