//! createIndexes, dropIndexes, listIndexes; building an index on a populated collection.
//!
//! A new index is first registered in the catalog as not ready: from that commit on, every
//! write to the collection maintains it (writers always maintain every index). The build then
//! walks the collection tree in `_id` order in batches of [`BUILD_BATCH`] documents, each batch
//! under the collection's write lock and read from a fresh snapshot, writing the batch's
//! entries in one transaction. So writes wait at most for one batch, never for the whole build,
//! and reads never wait. Entries are idempotent puts, so a document a writer already indexed is
//! harmless to index again, and a document deleted before its batch is simply not there. A
//! unique index checks each key against the tree (one read per key) and fails the build with
//! the duplicate key error, removing the index. Then the index is marked ready and the planner
//! may use it. A build a crash interrupted runs again at open.

use bson::Document;
use storage::Durability;

use crate::catalog::{self, Catalog, IndexMeta};
use crate::catalog::{Descriptor, id_index_spec};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::index::spec::IndexSelector;
use crate::index::spec::ParsedSpec;

/// Documents indexed per write-locked batch of a build.
pub(crate) const BUILD_BATCH: usize = 1000;

/// What createIndexes reports.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndexesOutcome {
    pub created_collection_automatically: bool,
    pub num_indexes_before: usize,
    pub num_indexes_after: usize,
    /// "all indexes already exist" when nothing was created.
    pub note: Option<String>,
}

/// createIndexes: registers the new indexes, then builds each.
pub(crate) fn create_indexes(cx: &Context, db: &str, name: &str, specs: &[Document]) -> Result<CreateIndexesOutcome> {
    let parsed = specs.iter().map(ParsedSpec::parse).collect::<Result<Vec<_>>>()?;
    let existed = cx.catalog.collection(db, name).is_some();
    let collection = crate::catalog::ddl::collection_or_create(cx, db, name)?;
    let before = 1 + collection.indexes.len();
    let mut new_specs: Vec<ParsedSpec> = Vec::new();
    for (mut spec, given) in parsed.into_iter().zip(specs) {
        // An index without a `collation` takes the collection's default, as in MongoDB.
        if !given.contains_key("collation") && spec.text.is_none() {
            spec.collation = collection.collation.as_ref().map(|collation| collation.spec().clone());
        }
        if spec.is_id_index() {
            if spec.name != "_id_" {
                return Err(Error::IndexOptionsConflict(format!(
                    "Index already exists with a different name: _id_ (requested {})",
                    spec.name
                )));
            }
            continue;
        }
        if spec.name == "_id_" {
            return Err(Error::IndexKeySpecsConflict("The index name '_id_' is reserved for the _id index".into()));
        }
        let existing: Vec<ParsedSpec> =
            collection.indexes.iter().map(|i| ParsedSpec::from_normalized(&i.meta.spec)).collect::<Result<_>>()?;
        let mut duplicate = false;
        for other in existing.iter().chain(&new_specs) {
            duplicate |= spec.compare_with(other)?;
        }
        if !duplicate {
            new_specs.push(spec);
        }
    }
    if new_specs.is_empty() {
        return Ok(CreateIndexesOutcome {
            created_collection_automatically: !existed,
            num_indexes_before: before,
            num_indexes_after: before,
            note: Some("all indexes already exist".into()),
        });
    }
    let names = register_indexes(cx, db, name, &new_specs)?;
    for index in &names {
        build(cx, db, name, index)?;
    }
    Ok(CreateIndexesOutcome {
        created_collection_automatically: !existed,
        num_indexes_before: before,
        num_indexes_after: before + names.len(),
        note: None,
    })
}

/// Adds the indexes to the catalog, not ready; returns their names.
fn register_indexes(cx: &Context, db: &str, name: &str, specs: &[ParsedSpec]) -> Result<Vec<String>> {
    let trees = {
        let _ddl = cx.catalog.ddl();
        specs
            .iter()
            .map(|_| crate::catalog::ddl::new_tree(cx, catalog::INDEX_TREE_PREFIX))
            .collect::<Result<Vec<_>>>()?
    };
    let locked =
        cx.catalog.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns does not exist: {db}.{name}")))?;
    let mut meta = locked.collection.meta.clone();
    for (spec, tree) in specs.iter().zip(trees) {
        if meta.indexes.iter().any(|i| i.name() == spec.name) {
            return Err(Error::IndexOptionsConflict(format!("index {} was created concurrently", spec.name)));
        }
        meta.indexes.push(IndexMeta { spec: spec.normalized(), tree, multikey: false, ready: false });
    }
    crate::catalog::ddl::replace_meta(cx, &locked.collection, meta)?;
    Ok(specs.iter().map(|s| s.name.clone()).collect())
}

/// dropIndexes: returns the number of indexes before the drop.
pub(crate) fn drop_indexes(cx: &Context, db: &str, name: &str, selector: &IndexSelector) -> Result<usize> {
    let _ddl = cx.catalog.ddl();
    let locked =
        cx.catalog.lock(db, name).ok_or_else(|| Error::NamespaceNotFound(format!("ns not found {db}.{name}")))?;
    let collection = &locked.collection;
    let was = 1 + collection.indexes.len();
    let doomed = select(collection, selector)?;
    let mut meta = collection.meta.clone();
    meta.indexes.retain(|i| !doomed.contains(&i.name().to_string()));
    let trees: Vec<String> = collection
        .meta
        .indexes
        .iter()
        .filter(|i| doomed.contains(&i.name().to_string()))
        .map(|i| i.tree.clone())
        .collect();
    let mut entries = Vec::new();
    for index in &doomed {
        entries.extend(cx.command_entries(db, bson::doc! {"dropIndexes": name, "index": index}, meta.uuid)?);
    }
    remove_indexes(cx, collection, meta, &trees, entries)?;
    Ok(was)
}

fn remove_indexes(
    cx: &Context,
    collection: &Descriptor,
    meta: catalog::CollectionMeta,
    trees: &[String],
    entries: Vec<crate::oplog::Entry>,
) -> Result<()> {
    let mut txn = cx.engine.begin();
    cx.catalog.put_meta(&mut txn, &meta)?;
    for tree in trees {
        txn.delete(cx.catalog.counts_tree(), catalog::size_key(tree));
    }
    cx.commit_logged(txn, &meta.db, entries, Durability::Immediate)?;
    cx.catalog.install(&cx.engine, collection, meta)?;
    for tree in trees {
        cx.engine.drop_tree(tree)?;
    }
    Ok(())
}

/// listIndexes' documents, the `_id` index first.
pub(crate) fn list_indexes(cx: &Context, db: &str, name: &str) -> Result<Vec<Document>> {
    let collection = cx.catalog.existing(db, name)?;
    let mut specs = vec![id_index_spec(&collection.meta.options)];
    specs.extend(collection.indexes.iter().map(|i| i.meta.spec.clone()));
    Ok(specs)
}

fn select(collection: &Descriptor, selector: &IndexSelector) -> Result<Vec<String>> {
    let refuse_id = || Error::InvalidOptions("cannot drop _id index".into());
    let find = |name: &str| -> Result<String> {
        if name == "_id_" {
            return Err(refuse_id());
        }
        collection
            .index(name)
            .map(|i| i.name.clone())
            .ok_or_else(|| Error::IndexNotFound(format!("index not found with name [{name}]")))
    };
    match selector {
        IndexSelector::All => Ok(collection.indexes.iter().map(|i| i.name.clone()).collect()),
        IndexSelector::Name(name) => Ok(vec![find(name)?]),
        IndexSelector::Names(names) => names.iter().map(|n| find(n)).collect(),
        IndexSelector::KeyPattern(pattern) => {
            if crate::index::spec::same_key_pattern(pattern, &bson::doc! {"_id": 1}) {
                return Err(refuse_id());
            }
            let found: Vec<String> = collection
                .indexes
                .iter()
                .filter(|i| crate::index::spec::same_key_pattern(&i.key_pattern, pattern))
                .map(|i| i.name.clone())
                .collect();
            if found.is_empty() {
                return Err(Error::IndexNotFound(format!("can't find index with key: {pattern}")));
            }
            Ok(found)
        }
    }
}

/// Builds a registered index (see the module header); on failure removes it.
pub(crate) fn build(cx: &Context, db: &str, name: &str, index_name: &str) -> Result<()> {
    match build_entries(cx, db, name, index_name) {
        Ok(()) => {
            let locked = cx
                .catalog
                .lock(db, name)
                .ok_or_else(|| Error::NamespaceNotFound(format!("{db}.{name} dropped during an index build")))?;
            let meta = Catalog::with_index(&locked.collection.meta, index_name, |i| i.ready = true);
            let mut command = bson::doc! {"createIndexes": name};
            if let Some(index) = meta.indexes.iter().find(|i| i.name() == index_name) {
                command.extend(index.spec.clone());
            }
            let entries = cx.command_entries(db, command, meta.uuid)?;
            crate::catalog::ddl::replace_meta_logged(cx, &locked.collection, meta, entries)?;
            Ok(())
        }
        Err(error) => {
            if let Some(locked) = cx.catalog.lock(db, name) {
                let mut meta = locked.collection.meta.clone();
                let trees: Vec<String> =
                    meta.indexes.iter().filter(|i| i.name() == index_name).map(|i| i.tree.clone()).collect();
                meta.indexes.retain(|i| i.name() != index_name);
                remove_indexes(cx, &locked.collection, meta, &trees, Vec::new())?;
            }
            Err(error)
        }
    }
}

fn build_entries(cx: &Context, db: &str, name: &str, index_name: &str) -> Result<()> {
    let mut after: Option<Vec<u8>> = None;
    loop {
        let mut locked = cx
            .catalog
            .lock(db, name)
            .ok_or_else(|| Error::NamespaceNotFound(format!("{db}.{name} dropped during an index build")))?;
        let collection = std::sync::Arc::clone(&locked.collection);
        let index = collection
            .index(index_name)
            .ok_or_else(|| Error::IndexNotFound(format!("index {index_name} dropped during its build")))?;
        let snapshot = cx.engine.snapshot();
        let lower = after.as_deref().map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let mut write = crate::write::DocumentWrite::new(cx, &collection);
        let mut batch_keys: std::collections::HashMap<Vec<u8>, Vec<u8>> = std::collections::HashMap::new();
        let mut count = 0;
        let mut documents = Vec::new();
        for entry in snapshot
            .range::<(std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>)>(
                collection.tree,
                (lower, std::ops::Bound::Unbounded),
            )
            .take(BUILD_BATCH)
        {
            let (id, bytes) = entry?;
            let raw = crate::read::scan::raw(bytes)?;
            let (keys, multikey) = index.keys(&raw)?;
            if index.is_unique() {
                check_unique(&snapshot, index, &collection, &id, &keys, &mut batch_keys)?;
            }
            write.add_entries(index, &id, &raw, &keys, multikey);
            count += 1;
            after = Some(id);
            documents.push(raw);
        }
        let raws: Vec<&bson::RawDocument> = documents.iter().map(|d| d.as_ref()).collect();
        locked.collection = write.commit(Durability::None, &raws)?;
        if count < BUILD_BATCH {
            return Ok(());
        }
    }
}

/// A unique build's check: each key is absent from the tree, or already this document's.
fn check_unique(
    snapshot: &storage::Snapshot,
    index: &crate::index::Index,
    collection: &Descriptor,
    id: &[u8],
    keys: &[document::keycodec::EncodedKey],
    batch_keys: &mut std::collections::HashMap<Vec<u8>, Vec<u8>>,
) -> Result<()> {
    for key in keys {
        let owner = match batch_keys.get(&key.order) {
            Some(owner) => Some(owner.clone()),
            None => match snapshot.get(index.tree, &key.order)? {
                Some(value) => Some(index.decode_entry(key.order.clone(), value)?.id),
                None => None,
            },
        };
        if owner.as_ref().is_some_and(|owner| owner != id) {
            return Err(Error::DuplicateKey {
                namespace: collection.namespace(),
                index: index.name.clone(),
                key_pattern: index.key_pattern.clone(),
                key_value: index.key_document(key),
            });
        }
        batch_keys.insert(key.order.clone(), id.to_vec());
    }
    Ok(())
}
