//! The catalog's entries: one per collection in the engine's `__catalog` tree, and the names
//! they may have.
//!
//! Layout of `__catalog` (one entry per collection, plus one counter):
//!
//! ```text
//! key "db.collection"  (db names hold no '.', so the first '.' splits it)
//! value BSON { db, name, tree: "c.<n>", uuid: UUID, options: {...}, indexes: [
//!              { spec: {v: 2, key, name, unique?, sparse?, partialFilterExpression?,
//!                       expireAfterSeconds?, clustered?}, tree: "i.<n>", multikey, ready } ] }
//! key "\0next_tree"    value u64 little-endian: the next <n> for a tree name
//! key "\0view\0db.name" value BSON { db, name, viewOn, pipeline }: a view (`super::view`)
//! a capped collection's entry also names its natural-order tree: natural: "n.<n>"
//! (`crate::capped`)
//! ```
//!
//! The `_id` index is implicit: the collection's own tree, keyed by the encoded `_id`.
//! `__counts` holds each collection's document count and size and each index's size, as blind
//! i64 counters under `<tree>/count` and `<tree>/size`.
//!
//! Names follow MongoDB: database names are non-empty, under 64 bytes, without `/\. "$` or NUL;
//! collection names are non-empty, without `$` or NUL, not starting with `.` or `system.`
//! (except the server's own `admin.system.users` and `admin.system.roles`); a
//! namespace `db.collection` is at most 255 bytes.

use bson::{Binary, Bson, Document, Uuid, doc};

use crate::error::{Error, Result};

/// The key format this build writes (`catalog::key_format` upgrades older ones).
pub(crate) const KEY_FORMAT: i32 = 2;

pub(crate) const CATALOG_TREE: &str = "__catalog";
/// The catalog's copy: every entry written to `__catalog` is written here in the same
/// transaction, so that `strata repair` can still name the collections when `__catalog`'s
/// blocks are damaged.
pub(crate) const CATALOG_COPY_TREE: &str = "__catalog_copy";
pub(crate) const COUNTS_TREE: &str = "__counts";
pub(crate) const NEXT_TREE_KEY: &[u8] = b"\0next_tree";
pub(crate) const COLLECTION_TREE_PREFIX: &str = "c.";
pub(crate) const INDEX_TREE_PREFIX: &str = "i.";
pub(crate) const TEMP_TREE_PREFIX: &str = "t.";
pub(crate) const NATURAL_TREE_PREFIX: &str = "n.";
const MAX_NAMESPACE_BYTES: usize = 255;
const MAX_DATABASE_NAME_BYTES: usize = 63;

/// A collection's catalog entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionMeta {
    pub db: String,
    pub name: String,
    /// The engine tree of its documents.
    pub tree: String,
    /// The options it was created with (`capped`, `validator`, ... kept for listCollections).
    pub options: Document,
    /// Secondary indexes, in creation order (the `_id` index is implicit).
    pub indexes: Vec<IndexMeta>,
    /// A capped collection's insertion-order tree (`crate::capped`).
    pub natural: Option<String>,
    /// How its trees encode keys (`super::key_format`; entries without one are format 1).
    pub key_format: i32,
    /// MongoDB's collection UUID (`listCollections`' `info.uuid`, the oplog's `ui`): made at
    /// create, kept by a rename. Entries written before collections had one get one at the
    /// catalog's open (`Catalog::open`); only a salvaging open leaves it `None`.
    pub uuid: Option<Uuid>,
}

/// One secondary index in the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexMeta {
    /// The normalized spec, as listIndexes returns it.
    pub spec: Document,
    pub tree: String,
    /// Whether some document gave more than one key or went through an array.
    pub multikey: bool,
    /// Whether the build finished (the planner uses only ready indexes).
    pub ready: bool,
}

impl IndexMeta {
    pub fn name(&self) -> &str {
        self.spec.get_str("name").unwrap_or("")
    }
}

pub(crate) fn namespace_key(db: &str, collection: &str) -> Vec<u8> {
    format!("{db}.{collection}").into_bytes()
}

pub(crate) fn validate_db_name(db: &str) -> Result<()> {
    if db.is_empty() {
        return Err(Error::InvalidNamespace("database name cannot be empty".into()));
    }
    if db.len() > MAX_DATABASE_NAME_BYTES {
        return Err(Error::InvalidNamespace(format!("db name is too long: {db}")));
    }
    if let Some(bad) = db.chars().find(|c| matches!(c, '/' | '\\' | '.' | ' ' | '"' | '$' | '\0')) {
        return Err(Error::InvalidNamespace(format!("Invalid database name: '{db}' (contains '{bad}')")));
    }
    Ok(())
}

pub(crate) fn validate_collection_name(db: &str, collection: &str) -> Result<()> {
    validate_db_name(db)?;
    let invalid = |why: &str| Error::InvalidNamespace(format!("Invalid collection name: '{collection}': {why}"));
    if collection.is_empty() {
        return Err(invalid("collection names cannot be empty"));
    }
    if collection.contains('$') || collection.contains('\0') {
        return Err(invalid("collection names cannot contain '$' or the null character"));
    }
    if collection.starts_with('.') {
        return Err(invalid("collection names cannot start with '.'"));
    }
    if db.len() + 1 + collection.len() > MAX_NAMESPACE_BYTES {
        return Err(Error::InvalidNamespace(format!("Fully qualified namespace is too long: {db}.{collection}")));
    }
    Ok(())
}

/// User writes may not create `system.*` collections (they are the server's), except a
/// database's `system.profile` (made capped by a user who wants another size, as in MongoDB).
pub(crate) fn validate_user_collection(db: &str, collection: &str) -> Result<()> {
    validate_collection_name(db, collection)?;
    if collection.starts_with("system.") && collection != PROFILE_COLLECTION {
        return Err(Error::InvalidNamespace(format!("Invalid system namespace: {db}.{collection}")));
    }
    Ok(())
}

/// The collections the server itself creates, which user writes may not (users and roles live
/// in `admin`; the oplog and the replica set's configuration in `local`).
pub(crate) const SERVER_COLLECTIONS: &[(&str, &str)] =
    &[("admin", "system.users"), ("admin", "system.roles"), ("local", "oplog.rs"), ("local", "system.replset")];

/// Every database's profiler collection (the server's `profiler`).
pub(crate) const PROFILE_COLLECTION: &str = "system.profile";

pub(crate) fn validate_server_collection(db: &str, collection: &str) -> Result<()> {
    validate_collection_name(db, collection)?;
    if !SERVER_COLLECTIONS.contains(&(db, collection)) && collection != PROFILE_COLLECTION {
        return Err(Error::InvalidNamespace(format!("Invalid system namespace: {db}.{collection}")));
    }
    Ok(())
}

impl CollectionMeta {
    pub fn to_document(&self) -> Document {
        let indexes: Vec<Bson> = self
            .indexes
            .iter()
            .map(|index| {
                Bson::Document(doc! {
                    "spec": index.spec.clone(),
                    "tree": index.tree.clone(),
                    "multikey": index.multikey,
                    "ready": index.ready,
                })
            })
            .collect();
        let mut document = doc! {
            "db": self.db.clone(),
            "name": self.name.clone(),
            "tree": self.tree.clone(),
            "options": self.options.clone(),
            "indexes": indexes,
        };
        if let Some(natural) = &self.natural {
            document.insert("natural", natural.clone());
        }
        document.insert("keyFormat", self.key_format);
        if let Some(uuid) = self.uuid {
            document.insert("uuid", Binary::from_uuid(uuid));
        }
        document
    }

    pub fn from_document(document: &Document) -> Result<CollectionMeta> {
        let text = |key: &str| {
            document
                .get_str(key)
                .map(str::to_string)
                .map_err(|_| Error::corrupt(format!("catalog entry without '{key}'")))
        };
        let mut indexes = Vec::new();
        let list = document.get_array("indexes").map_err(|_| Error::corrupt("catalog entry without 'indexes'"))?;
        for item in list {
            let Bson::Document(index) = item else {
                return Err(Error::corrupt("catalog index entry is not a document"));
            };
            indexes.push(IndexMeta {
                spec: index.get_document("spec").map_err(|_| Error::corrupt("index without spec"))?.clone(),
                tree: index.get_str("tree").map_err(|_| Error::corrupt("index without tree"))?.to_string(),
                multikey: index.get_bool("multikey").unwrap_or(false),
                ready: index.get_bool("ready").unwrap_or(false),
            });
        }
        Ok(CollectionMeta {
            db: text("db")?,
            name: text("name")?,
            tree: text("tree")?,
            options: document.get_document("options").cloned().unwrap_or_default(),
            indexes,
            natural: document.get_str("natural").ok().map(str::to_string),
            key_format: document.get_i32("keyFormat").unwrap_or(1),
            uuid: match document.get("uuid") {
                None => None,
                Some(Bson::Binary(binary)) => {
                    Some(binary.to_uuid().map_err(|e| Error::corrupt(format!("catalog entry's uuid: {e}")))?)
                }
                Some(_) => return Err(Error::corrupt("catalog entry's uuid is not a UUID")),
            },
        })
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        bson::RawDocumentBuf::try_from(&self.to_document())
            .map(bson::RawDocumentBuf::into_bytes)
            .map_err(|e| Error::corrupt(format!("cannot encode catalog entry: {e}")))
    }

    pub fn decode(bytes: &[u8]) -> Result<CollectionMeta> {
        let document = Document::from_reader(bytes).map_err(|e| Error::corrupt(format!("catalog entry: {e}")))?;
        CollectionMeta::from_document(&document)
    }

    /// Whether the entry's index `name` is multikey, read from the entry's bytes without
    /// decoding the rest; `None` when the entry lists no such index. A covered find asks this
    /// of its snapshot for every query, and decoding the whole entry each time was 4% of an
    /// iibench query's CPU.
    pub fn index_multikey(bytes: &[u8], name: &str) -> Result<Option<bool>> {
        let corrupt = |what: String| Error::corrupt(format!("catalog entry: {what}"));
        let entry = bson::RawDocument::from_bytes(bytes).map_err(|e| corrupt(e.to_string()))?;
        let indexes = entry.get_array("indexes").map_err(|_| corrupt("no 'indexes'".into()))?;
        for item in indexes {
            let index = item.ok().and_then(|item| item.as_document()).ok_or_else(|| corrupt("a bad index".into()))?;
            let spec = index.get_document("spec").map_err(|_| corrupt("an index without spec".into()))?;
            if spec.get_str("name").is_ok_and(|found| found == name) {
                return Ok(Some(index.get_bool("multikey").unwrap_or(false)));
            }
        }
        Ok(None)
    }

    /// Every tree this collection owns.
    pub fn trees(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.tree.as_str())
            .chain(self.indexes.iter().map(|index| index.tree.as_str()))
            .chain(self.natural.as_deref())
    }
}

pub(crate) fn count_key(tree: &str) -> Vec<u8> {
    format!("{tree}/count").into_bytes()
}

pub(crate) fn size_key(tree: &str) -> Vec<u8> {
    format!("{tree}/size").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names: MongoDB's rules accept ordinary names and refuse each forbidden form.
    #[test]
    fn names_are_validated_like_mongodb() {
        assert!(validate_collection_name("test", "users").is_ok());
        assert!(validate_collection_name("test", "a.b").is_ok());
        for db in ["", "a.b", "a b", "a$", "a/b", "a\\b", "a\"b"] {
            assert!(validate_db_name(db).is_err(), "{db:?}");
        }
        for collection in ["", "a$b", ".a", "a\0b"] {
            assert!(validate_collection_name("test", collection).is_err(), "{collection:?}");
        }
        assert!(validate_user_collection("test", "system.users").is_err());
        assert!(validate_collection_name("test", &"x".repeat(300)).is_err());
    }

    /// Catalog entries round-trip through their BSON form.
    #[test]
    fn meta_round_trips() {
        let meta = CollectionMeta {
            db: "d".into(),
            name: "c".into(),
            tree: "c.1".into(),
            options: doc! {"capped": false},
            indexes: vec![IndexMeta {
                spec: doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
                tree: "i.2".into(),
                multikey: true,
                ready: true,
            }],
            natural: None,
            key_format: 2,
            uuid: Some(Uuid::new()),
        };
        let bytes = meta.encode().unwrap();
        assert_eq!(CollectionMeta::decode(&bytes).unwrap(), meta);
        let capped = CollectionMeta { natural: Some("n.3".into()), ..meta.clone() };
        assert_eq!(CollectionMeta::decode(&capped.encode().unwrap()).unwrap(), capped);
        assert_eq!(capped.trees().collect::<Vec<_>>(), vec!["c.1", "i.2", "n.3"]);
        let mut older = meta.to_document();
        older.remove("keyFormat");
        assert_eq!(CollectionMeta::from_document(&older).unwrap().key_format, 1, "entries written before key formats");
        older.remove("uuid");
        assert_eq!(CollectionMeta::from_document(&older).unwrap().uuid, None, "entries written before UUIDs");
        older.insert("uuid", "not a uuid");
        assert!(CollectionMeta::from_document(&older).is_err());
    }

    /// Goal: an index's multikey flag read from the entry's bytes agrees with the decoded
    /// entry for every index, is `None` for an index the entry does not list, and bytes that
    /// are not an entry are corruption, never an answer.
    #[test]
    fn multikey_is_read_without_decoding() {
        let index = |name: &str, multikey: bool| IndexMeta {
            spec: doc! {"v": 2, "key": {name: 1}, "name": name},
            tree: format!("i.{name}"),
            multikey,
            ready: true,
        };
        let meta = CollectionMeta {
            db: "d".into(),
            name: "c".into(),
            tree: "c.1".into(),
            options: doc! {},
            indexes: vec![index("a_1", false), index("b_1", true), index("c_1", false)],
            natural: None,
            key_format: 2,
            uuid: None,
        };
        let bytes = meta.encode().unwrap();
        for listed in &CollectionMeta::decode(&bytes).unwrap().indexes {
            assert_eq!(CollectionMeta::index_multikey(&bytes, listed.name()).unwrap(), Some(listed.multikey));
        }
        assert_eq!(CollectionMeta::index_multikey(&bytes, "z_1").unwrap(), None);
        let mut older = meta.to_document();
        let Some(Bson::Array(indexes)) = older.get_mut("indexes") else { panic!("no indexes") };
        let Some(Bson::Document(first)) = indexes.first_mut() else { panic!("no first index") };
        first.remove("multikey");
        let older = bson::RawDocumentBuf::try_from(&older).unwrap().into_bytes();
        assert_eq!(CollectionMeta::index_multikey(&older, "a_1").unwrap(), Some(false), "no flag: not multikey");
        assert!(CollectionMeta::index_multikey(b"not bson", "a_1").is_err());
        let no_indexes = bson::RawDocumentBuf::try_from(&doc! {"db": "d"}).unwrap().into_bytes();
        assert!(CollectionMeta::index_multikey(&no_indexes, "a_1").is_err());
    }
}
