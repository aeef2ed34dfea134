//! Collections at run time: a [`Descriptor`] is an immutable descriptor — its catalog entry,
//! its trees, its parsed indexes, its write lock — and what listCollections and listDatabases
//! say about collections and databases. The descriptors live in the [`crate::catalog::Catalog`],
//! which also holds the locking rules.

use std::sync::Arc;

use bson::{Document, doc};
use parking_lot::Mutex;
use storage::{Engine, TreeId};

use crate::catalog::entry::{CollectionMeta, count_key, size_key};
use crate::error::{Error, Result};
use crate::index::Index;

/// A collection's descriptor.
#[derive(Debug)]
pub struct Descriptor {
    pub meta: CollectionMeta,
    pub tree: TreeId,
    /// Every index, ready or building (writers maintain both).
    pub indexes: Vec<Index>,
    pub write_lock: Arc<Mutex<()>>,
    pub count_key: Vec<u8>,
    pub size_key: Vec<u8>,
    /// The default collation of its reads and writes (the `collation` option; `None`: binary).
    pub collation: Option<query::collation::Collation>,
    /// Its `validator`, `validationLevel` and `validationAction`.
    pub validator: Option<crate::validation::Validator>,
    /// A capped collection's limits and insertion order ([`crate::capped`]).
    pub capped: Option<crate::capped::Capped>,
    pub natural: Option<crate::capped::Natural>,
    /// A time-series collection's time and meta fields and expiry ([`crate::timeseries`]).
    pub timeseries: Option<crate::timeseries::TimeSeries>,
}

impl Descriptor {
    /// `document_compression`: how its documents are compressed if its options do not say.
    pub fn open(
        engine: &Engine,
        meta: CollectionMeta,
        write_lock: Arc<Mutex<()>>,
        document_compression: Option<storage::Compression>,
    ) -> Result<Descriptor> {
        let tree = tree_id(engine, &meta.tree)?;
        // Validated when the collection and its indexes were created; the engine does not keep
        // a tree's compression across restarts, so it is set again at every open.
        let chosen = crate::compression::requested(&meta.options).unwrap_or(None).or(document_compression);
        engine.set_tree_compression(tree, chosen)?;
        let mut indexes = Vec::with_capacity(meta.indexes.len());
        for index in &meta.indexes {
            let index_tree = tree_id(engine, &index.tree)?;
            engine.set_tree_compression(index_tree, crate::compression::requested(&index.spec).unwrap_or(None))?;
            indexes.push(Index::open(index, index_tree)?);
        }
        // Validated (and filled in) at create.
        let collation = query::collation::Collation::parse_optional(meta.options.get("collation")).unwrap_or(None);
        // Validated at create and collMod.
        let validator = crate::validation::Validator::from_options(&meta.options).unwrap_or(None);
        let capped = crate::capped::Capped::from_options(&meta.options).unwrap_or(None);
        let timeseries = crate::timeseries::TimeSeries::from_options(&meta.options).unwrap_or(None);
        let natural = match &meta.natural {
            Some(name) => Some(crate::capped::Natural::open(engine, tree_id(engine, name)?)?),
            None => None,
        };
        Ok(Descriptor {
            capped,
            natural,
            timeseries,
            collation,
            validator,
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

    /// Whether changes keep pre-images for change streams (`changeStreamPreAndPostImages`).
    pub fn keeps_images(&self) -> bool {
        self.meta
            .options
            .get_document("changeStreamPreAndPostImages")
            .is_ok_and(|option| option.get_bool("enabled").unwrap_or(false))
    }

    /// The collation a statement uses: its own if it gives one (`{locale: "simple"}` is the
    /// binary order), else the collection's default.
    pub fn collation_for(
        &self,
        requested: Option<&query::collation::Collation>,
    ) -> Option<query::collation::Collation> {
        match requested {
            Some(collation) if collation.is_simple() => None,
            Some(collation) => Some(collation.clone()),
            None => self.collation.clone(),
        }
    }

    /// Indexes the planner may use: built, and not hidden.
    pub fn ready_indexes(&self) -> impl Iterator<Item = &Index> {
        self.indexes.iter().filter(|index| index.meta.ready && !index.hidden)
    }
}

/// What listCollections says about one collection.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionInfo {
    pub name: String,
    /// A view's are `{viewOn, pipeline}`.
    pub options: Document,
    /// A view, not a collection.
    pub view: bool,
    /// A collection's UUID (a view has none).
    pub uuid: Option<bson::Uuid>,
}

/// What listDatabases says about one database.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseInfo {
    pub name: String,
    /// Bytes of its documents and index entries, as the engine counts them.
    pub size_on_disk: u64,
    pub empty: bool,
}

/// The id of a tree the catalog names.
pub(crate) fn tree_id(engine: &Engine, name: &str) -> Result<TreeId> {
    engine.tree(name).ok_or_else(|| Error::corrupt(format!("the catalog names tree {name}, which does not exist")))
}

/// The implicit `_id` index as listIndexes shows it: a collection created with
/// `clusteredIndex` (which every Strata collection is: its documents live in `_id` order)
/// shows that index's name and `clustered: true`.
pub(crate) fn id_index_spec(options: &Document) -> Document {
    match options.get_document("clusteredIndex") {
        Ok(clustered) => {
            let name = clustered.get_str("name").unwrap_or("_id_");
            doc! { "v": 2, "key": { "_id": 1 }, "name": name, "unique": true, "clustered": true }
        }
        Err(_) => doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
    }
}

/// `create`'s `clusteredIndex` as MongoDB keeps it (`{v: 2, key: {_id: 1}, name, unique:
/// true}`): only a clustering on `_id`, unique, is possible (and it is what every collection is).
pub(crate) fn clustered_index_option(value: &bson::Bson) -> Result<Document> {
    let bson::Bson::Document(spec) = value else {
        return Err(Error::TypeMismatch("'clusteredIndex' must be an object".into()));
    };
    if spec.get_document("key").ok() != Some(&doc! {"_id": 1}) {
        return Err(Error::InvalidOptions("The clusteredIndex option is only supported for key: {_id: 1}".into()));
    }
    if spec.get_bool("unique").ok() != Some(true) {
        return Err(Error::InvalidOptions("The clusteredIndex option requires unique: true".into()));
    }
    if let Some(other) = spec.keys().find(|key| !matches!(key.as_str(), "key" | "unique" | "name" | "v")) {
        return Err(Error::InvalidOptions(format!("'{other}' is not a valid clusteredIndex option")));
    }
    let name = match spec.get("name") {
        None => "_id_".to_string(),
        Some(bson::Bson::String(name)) if !name.is_empty() => name.clone(),
        Some(_) => return Err(Error::bad_value("clusteredIndex's name must be a non-empty string")),
    };
    Ok(doc! { "v": 2, "key": { "_id": 1 }, "name": name, "unique": true })
}
