//! Catalog changes: create, drop and rename collections, `collMod`, views, and the trees they
//! allocate. Each holds the catalog's `ddl` lock (then, where it changes a collection, that
//! collection's write lock), commits its entry with its oplog entry in one engine transaction,
//! and only then swaps the descriptor map; see the [`super`] module for the invariants.

use std::sync::Arc;

use bson::{Bson, Document, Uuid};
use parking_lot::Mutex;
use storage::Durability;

use super::entry::{self, CollectionMeta, namespace_key, validate_db_name, validate_server_collection};
use super::{COLLECTION_TREE_PREFIX, Catalog, Descriptor, Locked, ViewMeta, validate_user_collection, view};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::oplog::Entry;

/// Sets options of a collection (`collMod`), logging the change as `{collMod: name, ...}`
/// (also when nothing changes, as mongod logs a bare `collMod`).
pub(crate) fn set_options(cx: &Context, db: &str, name: &str, options: Document) -> Result<()> {
    let _ddl = cx.catalog.ddl.lock();
    let locked =
        cx.catalog.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))?;
    let mut meta = locked.collection.meta.clone();
    let mut command = bson::doc! {"collMod": name};
    for (key, value) in options {
        meta.options.insert(key.clone(), value.clone());
        command.insert(key, value);
    }
    crate::validation::Validator::from_options(&meta.options)?;
    let entries = cx.command_entries(db, command, meta.uuid)?;
    replace_meta_logged(cx, &locked.collection, meta, entries)?;
    Ok(())
}

/// `collMod`'s `index`: changes one index's `expireAfterSeconds` and/or `hidden`, found by
/// name or key pattern; returns `{expireAfterSeconds_old/_new, hidden_old/_new}` as
/// MongoDB replies.
pub(crate) fn modify_index(
    cx: &Context,
    db: &str,
    name: &str,
    selector: &crate::index::spec::IndexSelector,
    changes: &Document,
) -> Result<Document> {
    use crate::index::spec::IndexSelector;
    let _ddl = cx.catalog.ddl.lock();
    let locked =
        cx.catalog.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))?;
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
    let entries = cx.command_entries(db, command, meta.uuid)?;
    replace_meta_logged(cx, &locked.collection, meta, entries)?;
    Ok(reply)
}

/// Creates a tree with a fresh name `<prefix><n>`; the counter is durable before the tree
/// exists, so a name is never reused.
pub(crate) fn new_tree(cx: &Context, prefix: &str) -> Result<String> {
    let snapshot = cx.engine.snapshot();
    let next = match snapshot.get(cx.catalog.tree, entry::NEXT_TREE_KEY)? {
        Some(bytes) => {
            u64::from_le_bytes(bytes.as_slice().try_into().map_err(|_| Error::corrupt("tree counter is not 8 bytes"))?)
        }
        None => 1,
    };
    let mut txn = cx.engine.begin();
    cx.catalog.put_entry(&mut txn, entry::NEXT_TREE_KEY.to_vec(), (next + 1).to_le_bytes().to_vec());
    txn.commit(Durability::Immediate)?;
    let name = format!("{prefix}{next}");
    cx.engine.create_tree(&name)?;
    Ok(name)
}

/// `create` with `viewOn`: a view over a collection or view of the same database (which
/// need not exist yet, as in MongoDB), no deeper than 20 and not reading itself.
pub(crate) fn create_view(cx: &Context, db: &str, name: &str, options: &Document) -> Result<()> {
    validate_user_collection(db, name)?;
    let view = ViewMeta::from_options(db, name, options)?;
    let _ddl = cx.catalog.ddl.lock();
    if cx.catalog.collection(db, name).is_some() || cx.catalog.is_view(db, name) {
        return Err(Error::NamespaceExists(format!("Namespace {db}.{name} already exists")));
    }
    check_view_chain(cx, &view)?;
    let mut create = bson::doc! {"create": name};
    create.extend(view.options());
    let entries = cx.command_entries(db, create, None)?;
    let mut txn = cx.engine.begin();
    cx.catalog.put_entry(&mut txn, ViewMeta::key(db, name), view.encode()?);
    cx.commit_logged(txn, db, entries, Durability::Immediate)?;
    cx.catalog.views.write().insert((db.into(), name.into()), view);
    Ok(())
}

/// A new view may not read itself through its sources, nor sit on more than 20 views.
fn check_view_chain(cx: &Context, view: &ViewMeta) -> Result<()> {
    let views = cx.catalog.views.read();
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
fn drop_view(cx: &Context, db: &str, name: &str) -> Result<bool> {
    if !cx.catalog.is_view(db, name) {
        return Ok(false);
    }
    let mut txn = cx.engine.begin();
    cx.catalog.delete_entry(&mut txn, ViewMeta::key(db, name));
    let entries = cx.command_entries(db, bson::doc! {"drop": name}, None)?;
    cx.commit_logged(txn, db, entries, Durability::Immediate)?;
    cx.catalog.views.write().remove(&(db.to_string(), name.to_string()));
    Ok(true)
}

/// Takes the write lock of the collection, creating it if needed.
pub(crate) fn lock_or_create(cx: &Context, db: &str, name: &str) -> Result<Locked> {
    cx.catalog.refuse_view(db, name)?;
    loop {
        collection_or_create(cx, db, name)?;
        if let Some(locked) = cx.catalog.lock(db, name) {
            return Ok(locked);
        }
    }
}

/// Creates a collection; `NamespaceExists` if it exists.
pub(crate) fn create_collection(cx: &Context, db: &str, name: &str, options: Document) -> Result<Arc<Descriptor>> {
    create_collection_as(cx, db, name, options, Uuid::new())
}

/// Creates a collection with the UUID it is given (`strata repair` makes each collection
/// again with the UUID it had).
pub(crate) fn create_collection_as(
    cx: &Context,
    db: &str,
    name: &str,
    options: Document,
    uuid: Uuid,
) -> Result<Arc<Descriptor>> {
    validate_user_collection(db, name)?;
    crate::compression::requested(&options)?;
    crate::validation::Validator::from_options(&options)?;
    let mut options = options;
    if crate::timeseries::TimeSeries::from_options(&options)?.is_some() {
        options = crate::timeseries::TimeSeries::normalized(&options);
    }
    if let Some(clustered) = options.get("clusteredIndex") {
        let clustered = crate::catalog::clustered_index_option(clustered)?;
        options.insert("clusteredIndex", clustered);
    }
    if let Some(collation) = options.get("collation") {
        // Kept as MongoDB reports it, every field filled in; simple is no collation.
        match query::collation::Collation::parse_optional(Some(collation))? {
            Some(collation) => options.insert("collation", collation.spec().clone()),
            None => options.remove("collation"),
        };
    }
    let _ddl = cx.catalog.ddl.lock();
    if cx.catalog.collection(db, name).is_some() || cx.catalog.is_view(db, name) {
        return Err(Error::NamespaceExists(format!("Collection {db}.{name} already exists.")));
    }
    create_collection_locked(cx, db, name, options, uuid)
}

/// The collection, created with default options if absent (implicit creation by a write).
pub(crate) fn collection_or_create(cx: &Context, db: &str, name: &str) -> Result<Arc<Descriptor>> {
    if let Some(collection) = cx.catalog.collection(db, name) {
        return Ok(collection);
    }
    validate_user_collection(db, name)?;
    cx.catalog.refuse_view(db, name)?;
    let _ddl = cx.catalog.ddl.lock();
    match cx.catalog.collection(db, name) {
        Some(collection) => Ok(collection),
        None => create_collection_locked(cx, db, name, Document::new(), Uuid::new()),
    }
}

/// A collection another member's primary created (and checked): a user collection, or one of
/// the server's own `system.*` collections (users, roles), with the UUID it has there; one that
/// exists already is left as it is (applying is idempotent).
pub(crate) fn create_replicated(cx: &Context, db: &str, name: &str, options: Document, uuid: Uuid) -> Result<()> {
    if validate_server_collection(db, name).is_ok() {
        let _ddl = cx.catalog.ddl.lock();
        if cx.catalog.collection(db, name).is_none() {
            create_collection_locked(cx, db, name, options, uuid)?;
        }
        return Ok(());
    }
    match create_collection_as(cx, db, name, options, uuid) {
        Err(Error::NamespaceExists(_)) => Ok(()),
        other => other.map(drop),
    }
}

/// [`lock_or_create`] for a write another member's primary made (its `system.*` collections
/// too).
pub(crate) fn lock_or_create_replicated(cx: &Context, db: &str, name: &str) -> Result<Locked> {
    if validate_server_collection(db, name).is_ok() {
        ensure_system_collection(cx, db, name, Document::new())?;
        return cx.catalog.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("{db}.{name} was dropped")));
    }
    lock_or_create(cx, db, name)
}

/// Creates `db.name` if absent, where it is one of [`SERVER_COLLECTIONS`] (the server's
/// own `system.*` collections, which user writes may not create).
pub(crate) fn ensure_system_collection(cx: &Context, db: &str, name: &str, options: Document) -> Result<()> {
    validate_server_collection(db, name)?;
    let _ddl = cx.catalog.ddl.lock();
    if cx.catalog.collection(db, name).is_none() {
        create_collection_locked(cx, db, name, options, Uuid::new())?;
    }
    Ok(())
}

fn create_collection_locked(
    cx: &Context,
    db: &str,
    name: &str,
    options: Document,
    uuid: Uuid,
) -> Result<Arc<Descriptor>> {
    let tree = new_tree(cx, COLLECTION_TREE_PREFIX)?;
    let mut create = bson::doc! {"create": name};
    create.extend(options.clone());
    let entries = cx.command_entries(db, create, Some(uuid))?;
    let natural = match crate::capped::Capped::from_options(&options)? {
        Some(_) => Some(new_tree(cx, entry::NATURAL_TREE_PREFIX)?),
        None => None,
    };
    let meta = CollectionMeta {
        db: db.into(),
        name: name.into(),
        tree,
        options,
        indexes: Vec::new(),
        natural,
        key_format: entry::KEY_FORMAT,
        uuid: Some(uuid),
    };
    let mut txn = cx.engine.begin();
    cx.catalog.put_meta(&mut txn, &meta)?;
    cx.commit_logged(txn, db, entries, Durability::Immediate)?;
    let collection =
        Arc::new(Descriptor::open(&cx.engine, meta, Arc::new(Mutex::new(())), cx.catalog.document_compression)?);
    cx.catalog.collections.write().insert((db.into(), name.into()), Arc::clone(&collection));
    Ok(collection)
}

/// Drops a collection and its trees; `Ok(false)` when it did not exist.
pub(crate) fn drop_collection(cx: &Context, db: &str, name: &str) -> Result<bool> {
    let _ddl = cx.catalog.ddl.lock();
    let Some(collection) = cx.catalog.collection(db, name) else {
        return drop_view(cx, db, name);
    };
    let lock = Arc::clone(&collection.write_lock);
    let _write = lock.lock();
    cx.check_not_held(&collection)?;
    let mut txn = cx.engine.begin();
    cx.catalog.delete_entry(&mut txn, namespace_key(db, name));
    txn.delete(cx.catalog.counts_tree, collection.count_key.clone());
    txn.delete(cx.catalog.counts_tree, collection.size_key.clone());
    let entries = cx.command_entries(db, bson::doc! {"drop": name}, collection.meta.uuid)?;
    cx.commit_logged(txn, db, entries, Durability::Immediate)?;
    cx.catalog.collections.write().remove(&(db.to_string(), name.to_string()));
    for tree in collection.meta.trees() {
        cx.engine.drop_tree(tree)?;
    }
    Ok(true)
}

/// Drops every collection of a database.
pub(crate) fn drop_database(cx: &Context, db: &str) -> Result<()> {
    validate_db_name(db)?;
    let collections = cx.catalog.list_collections(db);
    for info in &collections {
        drop_collection(cx, db, &info.name)?;
    }
    let entries = cx.command_entries(db, bson::doc! {"dropDatabase": 1}, None)?;
    if !collections.is_empty() && !entries.is_empty() {
        cx.commit_logged(cx.engine.begin(), db, entries, Durability::Immediate)?;
    }
    Ok(())
}

/// Renames a collection, within or across databases; its trees stay as they are.
pub(crate) fn rename_collection(cx: &Context, from: (&str, &str), to: (&str, &str), drop_target: bool) -> Result<()> {
    validate_user_collection(to.0, to.1)?;
    cx.catalog.refuse_view(from.0, from.1)?;
    if cx.catalog.is_view(to.0, to.1) {
        return Err(Error::NamespaceExists("target namespace exists (a view)".into()));
    }
    if from == to {
        return Err(Error::IllegalOperation("Can't rename a collection to itself".into()));
    }
    // As in mongod's entry, `dropTarget` is the UUID of the collection it dropped, if any.
    let mut dropped = Bson::Boolean(false);
    if let Some(target) = cx.catalog.collection(to.0, to.1) {
        if !drop_target {
            return Err(Error::NamespaceExists("target namespace exists".into()));
        }
        drop_collection(cx, to.0, to.1)?;
        if let Some(uuid) = target.meta.uuid {
            dropped = Bson::Binary(bson::Binary::from_uuid(uuid));
        }
    }
    let _ddl = cx.catalog.ddl.lock();
    let collection = cx
        .catalog
        .collection(from.0, from.1)
        .ok_or_else(|| Error::NamespaceNotFound("source namespace does not exist".into()))?;
    if cx.catalog.collection(to.0, to.1).is_some() {
        return Err(Error::NamespaceExists("target namespace exists".into()));
    }
    let lock = Arc::clone(&collection.write_lock);
    let _write = lock.lock();
    cx.check_not_held(&collection)?;
    let mut meta = collection.meta.clone();
    meta.db = to.0.into();
    meta.name = to.1.into();
    if from.0 != to.0 {
        // As in MongoDB, a collection moved to another database is a new collection there.
        meta.uuid = Some(Uuid::new());
    }
    let mut txn = cx.engine.begin();
    cx.catalog.delete_entry(&mut txn, namespace_key(from.0, from.1));
    cx.catalog.put_meta(&mut txn, &meta)?;
    let rename = bson::doc! {
        "renameCollection": format!("{}.{}", from.0, from.1),
        "to": format!("{}.{}", to.0, to.1),
        "stayTemp": false,
        "dropTarget": dropped,
    };
    let entries = cx.command_entries(from.0, rename, collection.meta.uuid)?;
    cx.commit_logged(txn, from.0, entries, Durability::Immediate)?;
    let renamed = Arc::new(Descriptor::open(
        &cx.engine,
        meta,
        Arc::clone(&collection.write_lock),
        cx.catalog.document_compression,
    )?);
    let mut map = cx.catalog.collections.write();
    map.remove(&(from.0.to_string(), from.1.to_string()));
    map.insert((to.0.to_string(), to.1.to_string()), renamed);
    Ok(())
}

/// Replaces a collection's catalog entry (under its write lock) and installs the new
/// descriptor; the caller may add the catalog write to a transaction of its own instead.
pub(crate) fn replace_meta(cx: &Context, old: &Descriptor, meta: CollectionMeta) -> Result<Arc<Descriptor>> {
    replace_meta_logged(cx, old, meta, Vec::new())
}

/// [`Catalog::replace_meta`] with oplog entries committed with the change.
pub(crate) fn replace_meta_logged(
    cx: &Context,
    old: &Descriptor,
    meta: CollectionMeta,
    entries: Vec<Entry>,
) -> Result<Arc<Descriptor>> {
    let mut txn = cx.engine.begin();
    cx.catalog.put_meta(&mut txn, &meta)?;
    cx.commit_logged(txn, &meta.db, entries, Durability::Immediate)?;
    cx.catalog.install(&cx.engine, old, meta)
}
